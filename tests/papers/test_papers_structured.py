"""The structured-backend comparison (benchmarks/papers/structured.py): its GMRF covariance
oracle, its agreement statistic, and its quick run."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from lattice_lgm import Lattice
from lattice_lgm.errors import InvalidParameterError
from lattice_lgm.priors import GMRFPrior
from tests.papers._paper_scripts import load

S = load("structured")


# -- the GMRF covariance oracle --------------------------------------------------------------------
def _gmrf(**kw):
    lat = Lattice((6, 7), spacing=0.1)
    return GMRFPrior.matern(lat, sd=1.3, range=0.3, alpha=2, pad=3, **kw)


def test_window_covariance_is_the_window_block_of_the_dense_inverse():
    g = _gmrf()
    q = g.precision_matrix().toarray()
    w = np.asarray(g.window_index()).ravel()
    want = np.linalg.inv(q)[np.ix_(w, w)]
    got = S.window_covariance(g)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    # and its diagonal is the GMRF's own exact marginal variance
    np.testing.assert_allclose(np.diag(got), np.asarray(g.marginal_variance()).ravel(),
                               rtol=1e-9)


def test_oracle_follows_the_gmrf_at_every_theta():
    g = _gmrf()
    o = S.GMRFCovarianceOracle(g)
    assert o.params == g.params and o.shape == g.shape
    o2 = o.with_params(sd=2.6, range=0.5)
    g2 = g.with_params(sd=2.6, range=0.5)
    np.testing.assert_allclose(o2.cov, S.window_covariance(g2), rtol=1e-12)
    assert o2.params["sd"] == pytest.approx(2.6)
    # sd scales the covariance by sd² (the SPDE's τ): a change of range alone does not
    np.testing.assert_allclose(o.with_params(sd=2.6).cov, 4.0 * o.cov, rtol=1e-9)
    assert not np.allclose(o2.cov / o2.cov[0, 0], o.cov / o.cov[0, 0])


def test_oracle_refuses_an_intrinsic_gmrf():
    g = GMRFPrior.icar(Lattice((4, 4)), sd=1.0)
    with pytest.raises(InvalidParameterError, match="intrinsic"):
        S.GMRFCovarianceOracle(g)


# -- the agreement statistic -----------------------------------------------------------------------
def _draws(rng, shift=0.0, chains=4, draws=2000, cells=30):
    th = {"sd": np.exp(0.1 * rng.standard_normal((chains, draws)) + shift),
          "range": np.exp(0.2 * rng.standard_normal((chains, draws))),
          "mean": 5.0 + 0.3 * rng.standard_normal((chains, draws))}
    eta = rng.standard_normal((chains, draws, cells))
    return {"theta": th, "eta": eta, "seconds": 2.0, "tune": 0, "draws": draws,
            "timing_complete": True}


def test_compare_agrees_on_independent_draws_of_one_distribution():
    # iid draws: the MCSEs are right, so each family rejects with probability <= 1 %
    # (Bonferroni); the fixed seed makes this one outcome of that <= 2 % false-failure rate
    rng = np.random.default_rng(20261122)
    a, b = _draws(rng), _draws(rng)
    r = S.compare(a, b)
    assert r["agree"] and r["verdict"] == "agree"
    assert r["z_bound_hyper"] == pytest.approx(S.bonferroni(12))
    assert r["cells"]["n"] == 30 and r["cells"]["over_bound"] == 0
    assert r["speed"]["ratio_seconds_per_sweep"] == pytest.approx(1.0)
    assert r["speed"]["a"]["seconds_per_sweep"] == pytest.approx(2.0 / 2000)


def test_compare_detects_a_shift_of_log_sd():
    # a shift of 0.05 in log sd is ~ 0.05 / (0.1 / √8000 · √2) ≈ 32 standard errors
    rng = np.random.default_rng(7)
    r = S.compare(_draws(rng, shift=0.05), _draws(rng))
    assert not r["agree"] and r["verdict"] == "differ"
    assert abs(r["hyper"]["log sd"]["mean"]["z"]) > 20


def test_compare_calls_a_difference_between_unmixed_chains_inconclusive():
    rng = np.random.default_rng(3)
    a, b = _draws(rng, shift=0.05), _draws(rng)
    a["theta"]["range"][0] += 3.0  # one chain stuck elsewhere: R-hat far above 1.05
    r = S.compare(a, b)
    assert r["verdict"].startswith("inconclusive")


def test_verdict_marks_tests_of_unmixed_chains():
    assert S.verdict(True, 1.01) == "agree"
    assert S.verdict(False, 1.01) == "differ"
    assert S.verdict(True, 1.3) == "agree (R-hat 1.30 > 1.05: weak)"
    assert S.verdict(False, 1.3) == "inconclusive (R-hat 1.30 > 1.05)"


def test_compare_detects_a_shifted_cell():
    rng = np.random.default_rng(11)
    a, b = _draws(rng), _draws(rng)
    a["eta"][..., 4] += 0.5  # 0.5 / (√2/√8000) ≈ 32 standard errors
    r = S.compare(a, b)
    assert r["cells"]["over_bound"] == 1 and not r["agree"]


# -- the quick run ---------------------------------------------------------------------------------
def test_quick_pairs_end_to_end_and_rerun(tmp_path):
    out = tmp_path / "q"
    argv = ["--quick", "--experiments", "mining", "gmrf", "--mining-draws", "30",
            "--out", str(out)]
    assert S.main(argv) == 0
    res = json.loads((out / "structured.json").read_text())
    assert res["mode"] == "quick" and set(res["experiments"]) == {"mining", "gmrf"}
    assert res["settings"]["mining_draws"] == 30 and res["settings"]["draws"] == S.QUICK.draws
    assert len(list((out / "work").glob("mining_*_d30_f1.zarr"))) == 2
    for k in ("mining", "gmrf"):
        e = res["experiments"][k]
        assert set(e["hyper"]) == {"log sd", "log range", "mean"}
        assert e["verdict"].split(" ")[0] in ("agree", "differ", "inconclusive")
        sp = e["speed"]
        assert math.isfinite(sp["ratio_min_hyper_per_s"]) and sp["ratio_min_hyper_per_s"] > 0
        assert sp["a"]["seconds"] > 0 and sp["b"]["seconds"] > 0
        il = sp["interleaved"]  # both backends timed in turn under the same load
        assert il["seconds_per_sweep_a"] > 0 and il["seconds_per_sweep_b"] > 0
        assert il["ratio_min_hyper_per_s"] == pytest.approx(
            sp["a"]["min_hyper"] / sp["b"]["min_hyper"]
            * il["seconds_per_sweep_b"] / il["seconds_per_sweep_a"])
    assert res["experiments"]["gmrf"]["b"]["prior"] == "GMRFCovarianceOracle"
    assert (out / "structured.png").stat().st_size > 10_000
    assert "## 1. Agreement" in (out / "structured.md").read_text()
    # a second start reads the finished stores: the same draws, so the same statistics
    assert S.main(argv) == 0
    again = json.loads((out / "structured.json").read_text())
    assert again["experiments"]["gmrf"]["hyper"] == res["experiments"]["gmrf"]["hyper"]


def test_bad_arguments_are_refused_before_any_run(tmp_path):
    with pytest.raises(InvalidParameterError, match="--chains=1"):
        S.main(["--chains", "1", "--out", str(tmp_path)])
    with pytest.raises(InvalidParameterError, match="--mining-draws=5 is too small"):
        S.main(["--mining-draws", "5", "--out", str(tmp_path)])
    for bad, match in (("1000", "not BURN_IN,SWEEPS"), ("1000,x", "not BURN_IN,SWEEPS"),
                       ("-1,3000", "not BURN_IN,SWEEPS"), ("10,5", "at least 10 sampling")):
        with pytest.raises(InvalidParameterError, match=match):
            S.main([f"--redwoods-length={bad}", "--out", str(tmp_path)])
    with pytest.raises(InvalidParameterError, match="--bei-length '200' is not BURN_IN"):
        S.main(["--bei-length", "200", "--out", str(tmp_path)])
    assert not (tmp_path / "work").exists()


def test_bei_length_sets_the_bei_runs(tmp_path):
    out = tmp_path / "q"
    assert S.main(["--quick", "--experiments", "bei", "--bei-length", "2,12",
                   "--out", str(out)]) == 0
    res = json.loads((out / "structured.json").read_text())
    assert (res["settings"]["bei_tune"], res["settings"]["bei_draws"]) == (2, 12)
    assert res["mode"] == "quick"
    assert len(list((out / "work").glob("bei_circulant_*_c2_t2_d12_*.zarr"))) == 1
    e = res["experiments"]["bei"]["50m"]
    assert e["seconds_per_sweep"] == pytest.approx(e["seconds"] / 12)
    low = min(p["ess_bulk"] for p in e["posterior"].values())
    md = (out / "structured.md").read_text()
    assert "2 chains × (2 burn-in + 12 sweeps)" in md
    assert f"| {low:.0f} (" in md
    r = e["posterior"]["range"]  # the drift column: first and last fifth of the 12 sweeps
    assert f"{r['median_first_fifth']:.3g} → {r['median_last_fifth']:.3g}" in md
    assert "bei only" in md and "mining" not in md  # no settings of runs it does not hold


def test_redwoods_length_sets_the_25_by_25_runs_only(tmp_path):
    out = tmp_path / "q"
    assert S.main(["--quick", "--experiments", "redwoods", "--redwoods-length", "3,12",
                   "--out", str(out)]) == 0
    res = json.loads((out / "structured.json").read_text())
    assert res["settings"]["redwoods"] == [3, 12] and res["settings"]["draws"] == S.QUICK.draws
    assert len(list((out / "work").glob("redwoods_*_10x10_c2_t3_d12_f1.zarr"))) == 2
    sp = res["experiments"]["redwoods"]["speed"]
    assert (sp["a"]["tune"], sp["a"]["draws"], sp["b"]["draws"]) == (3, 12, 12)
    assert sp["a"]["seconds_per_sweep"] == pytest.approx(sp["a"]["seconds"] / 12)
    assert "redwoods 10 × 10 3 + 12" in (out / "structured.md").read_text()


@pytest.mark.slow
def test_quick_all_experiments_end_to_end(tmp_path):
    assert S.main(["--quick", "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "structured.json").read_text())
    assert set(res["experiments"]) == set(S.EXPERIMENTS)
    assert "## 3. Sensitivity" in (tmp_path / "structured.md").read_text()
