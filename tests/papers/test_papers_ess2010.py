"""The Murray, Adams & MacKay (2010) reproduction: its ESS estimator, its data, its quick run."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.signal import lfilter

from lattice_lgm.errors import InvalidDataError, InvalidParameterError
from tests.papers._paper_scripts import load

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "papers" / "ess2010.py"


E = load("ess2010")


# -- the spectral-AR effective sample size -----------------------------------------------------
def test_spectrum0_ar_order1_by_hand_zero_lag1():
    # x = 0 1 0 −1 0 1 0 −1: mean 0, r0 = 4/8, r1 = 0 (every lag-1 product is 0) ⇒ φ = 0,
    # σ² = r0 · n/(n − 2) = 2/3, S(0) = 2/3; var(x) = 4/7 ⇒ ESS = 8 · (4/7) / (2/3) = 48/7.
    x = np.array([0.0, 1, 0, -1, 0, 1, 0, -1])
    spec, p = E.spectrum0_ar(x, order=1)
    assert p == 1
    assert spec == pytest.approx(2 / 3, rel=1e-12)
    assert len(x) * np.var(x, ddof=1) / spec == pytest.approx(48 / 7, rel=1e-12)


def test_spectrum0_ar_order1_by_hand_nonzero_lag1():
    # x = 1 1 −1 −1 1 1 −1 −1: r0 = 1, r1 = (1 −1 +1 −1 +1 −1 +1)/8 = 1/8 ⇒ φ = 1/8,
    # v1 = r0 (1 − φ²) = 63/64, σ² = v1 · 8/6 = 21/16, S(0) = (21/16) / (7/8)² = 12/7.
    x = np.array([1.0, 1, -1, -1, 1, 1, -1, -1])
    spec, _ = E.spectrum0_ar(x, order=1)
    assert spec == pytest.approx(12 / 7, rel=1e-12)
    # ESS = 8 · (8/7) / (12/7) = 16/3
    assert len(x) * np.var(x, ddof=1) / spec == pytest.approx(16 / 3, rel=1e-12)


def test_ess_ar1_matches_asymptotic_ratio():
    # AR(1) with φ = 0.9: ESS/n → (1 − φ)/(1 + φ) = 1/19.  Ten independent series of
    # n = 20000 (fixed seed).  A delta-method sd of ESS/n per series, with the sample variance
    # (rel. sd √(2(1+φ²)/((1−φ²)n)) = 0.031) and S(0) (rel. sd 2√((1−φ²)/n)/(1−φ) = 0.062)
    # treated as independent, is ≈ 0.069/19 = 0.0036 — conservative, as they are positively
    # correlated.  Tolerance 4 sd of the mean of 10: 4 · 0.0036/√10 = 0.0046 (false-failure
    # rate < 1e-4).
    phi, n, reps = 0.9, 20_000, 10
    rng = np.random.default_rng(20100101)
    vals = []
    for _ in range(reps):
        e = rng.standard_normal(n + 2000)
        x = lfilter([1.0], [1.0, -phi], e)[2000:]  # burn 2000 ≫ 1/(1−φ) from the zero start
        vals.append(E.ess_spectral_ar(x)[0] / n)
    assert abs(np.mean(vals) - (1 - phi) / (1 + phi)) < 4 * 0.0036 / math.sqrt(reps)


def test_ess_white_noise_is_about_n():
    # White noise: AIC picks order 0 most of the time, and then ESS = n exactly (σ² = r0 ·
    # n/(n − 1) = var(x)).  For a small order p the relative sd of S(0) is ≈ 2√(p/n) ≤ 0.02
    # (p ≤ 2, n = 20000); tolerance 0.1 is 5 sd (false-failure rate < 1e-6).
    n = 20_000
    x = np.random.default_rng(7).standard_normal(n)
    ess, _ = E.ess_spectral_ar(x)
    assert abs(ess / n - 1.0) < 0.1
    # ArviZ's bulk ESS of the same trace: rank-normalised, sd ≈ the same order, same tolerance
    assert abs(E.ess_bulk(x) / n - 1.0) < 0.1


def test_ess_of_a_constant_or_linear_trace_is_zero():
    # as coda: no variation about a straight line ⇒ S(0) = 0 ⇒ ESS 0 (an M–H chain stuck)
    assert E.ess_spectral_ar(np.full(100, -3.5)) == (0.0, 0)
    assert E.ess_spectral_ar(np.arange(50.0))[0] == 0.0


def test_ess_rejects_bad_traces():
    with pytest.raises(InvalidParameterError, match="x has shape"):
        E.ess_spectral_ar(np.ones((3, 4)))
    with pytest.raises(InvalidParameterError, match="n >= 3"):
        E.ess_spectral_ar(np.array([1.0, 2.0]))
    with pytest.raises(InvalidDataError, match=r"x\[2\] = nan"):
        E.ess_spectral_ar(np.array([1.0, 2.0, np.nan, 4.0]))
    with pytest.raises(InvalidParameterError, match="order_max=9"):
        E.spectrum0_ar(np.random.default_rng(0).standard_normal(10), order_max=9)
    with pytest.raises(InvalidParameterError, match="order=-1"):
        E.spectrum0_ar(np.random.default_rng(0).standard_normal(10), order=-1)


# -- the data ---------------------------------------------------------------------------------
def test_coal_binning_is_the_papers():
    counts, centres = E.coal_counts()
    assert counts.shape == (811,) and centres.shape == (811,)
    assert counts.sum() == 191
    assert np.all(counts == np.floor(counts)) and counts.min() == 0
    # the first event (day 0) and the last (day 40549 = 811·50 − 1) open and close the window
    assert counts[0] >= 1 and counts[-1] >= 1
    assert counts.max() == 4  # as data/README.md states for days // 50
    np.testing.assert_allclose(np.diff(centres), 50.0)
    assert centres[0] == 25.0


def test_regression_data_shapes_and_noise():
    for d in (1, 10):
        x, y, f = E.regression_data(d)
        assert x.shape == (200, d) and y.shape == (200,) and f.shape == (200,)
        assert x.min() >= 0.0 and x.max() < 1.0
        # noise sd 0.3: the sample sd of y − f has sd ≈ 0.3/√(2·200) = 0.015; 4 sd tolerance
        assert abs(np.std(y - f, ddof=1) - 0.3) < 4 * 0.015
    # a different D gives a different set (own stream per D)
    assert not np.allclose(E.regression_data(1)[1], E.regression_data(2)[1])


def test_ionosphere_shape_and_labels():
    x, y = E.ionosphere_data()
    assert x.shape == (351, 34) and y.shape == (351,)
    assert set(np.unique(y)) == {0.0, 1.0}
    assert y.sum() == 225  # g = 225, b = 126 (data/README.md)
    assert x.min() >= -1.0 and x.max() <= 1.0
    xs, ys = E.ionosphere_data(n_sub=100)
    assert xs.shape == (100, 34) and ys.shape == (100,)


def test_unknown_dataset_is_refused():
    with pytest.raises(InvalidParameterError, match="regression_d11x"):
        E.build_problems(["regression_d11x"])
    with pytest.raises(InvalidParameterError, match="'usps' is unknown"):
        E.build_problems(["usps"])


# -- the quick run ----------------------------------------------------------------------------
def test_quick_run_writes_json_and_markdown(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--out", str(tmp_path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    res = json.loads((tmp_path / "ess2010.json").read_text())
    md = (tmp_path / "ess2010.md").read_text()
    assert (tmp_path / "ess2010.png").stat().st_size > 10_000  # the Figure-6-style panels
    assert {"paper", "mode", "machine", "settings", "datasets", "seconds_total"} <= set(res)
    assert res["mode"] == "quick"
    assert set(res["datasets"]) == {"regression_d1", "regression_d10", "coal", "ionosphere"}
    for name, d in res["datasets"].items():
        assert name in md
        assert {"kind", "info", "pilot", "runs", "summary", "ratios"} <= set(d)
        assert d["info"]["jitter"] >= 0.0
        pil = d["pilot"]
        assert pil["chosen"] in pil["grid"] and len(pil["score"]) == len(pil["grid"])
        for method in ("ess", "neal_mh", "line_slice"):
            runs = d["runs"][method]
            assert len(runs) == 2
            for r in runs:
                assert r["ess_ar"] > 0 and r["ess_bulk"] > 0, (name, method)
                assert r["n_loglik"] >= r["n_iter"] == 300
                assert r["seconds"] > 0 and r["ess_ar_per_eval"] > 0
            assert d["summary"][method]["ess_ar"]["n"] == 2
        # one likelihood evaluation per M–H iteration, at least one per ESS iteration
        assert d["summary"]["neal_mh"]["evals_per_iter"]["mean"] == 1.0
        assert d["summary"]["ess"]["evals_per_iter"]["mean"] >= 1.0
        assert set(d["ratios"]) == {"per_iteration_ar", "per_iteration_bulk",
                                    "per_evaluation_ar", "per_second_ar",
                                    "ess_over_line_per_iteration_ar",
                                    "ess_over_line_per_evaluation_ar",
                                    "ess_over_line_per_second_ar"}
        # the line sampler steps out and shrinks: at least one evaluation per iteration
        assert d["summary"]["line_slice"]["evals_per_iter"]["mean"] >= 1.0
    assert res["datasets"]["coal"]["info"]["N"] == 811
    assert res["datasets"]["coal"]["info"]["events"] == 191
    # the stores are resumable runs under the work dir, and a re-run skips finished ones
    assert any((tmp_path / "work" / "coal").glob("ess_*r1.zarr"))
    assert any((tmp_path / "work" / "coal").glob("ess_*r1.result.json"))


def test_batched_runs_are_the_chains_run_alone(tmp_path):
    """``run_batch``: each repeat is one chain, bitwise the run of that chain alone (DESIGN §5);
    its metrics are per chain, its time is the batch's share, and a rerun reads the cache."""
    from lattice_lgm.runs import sample
    from lattice_lgm.samplers import Gibbs

    prob = E.build_problems(["regression_d2"], reg_n=30)[0]
    store = tmp_path / "batch.zarr"
    runs = E.run_batch(prob.model, "ess", None, n_iter=60, n_burn=10, repeats=3, seed=7,
                       store=store)
    assert [r["chain"] for r in runs] == [0, 1, 2]
    assert all(r["batched"] == 3 and r["n_iter"] == 60 and r["n_loglik"] >= 60 for r in runs)
    assert runs[0]["seconds"] == pytest.approx(runs[0]["batch_seconds"] / 3)
    # three different runs, not one run three times
    assert len({r["loglik_mean"] for r in runs}) == 3
    alone = sample(prob.model, draws=60, tune=10, chains=3, random_seed=7, chain_ids=[2],
                   step=Gibbs(None, E._sampler(prob.model, "ess", None), n_latent=1),
                   thin_fields=0, progressbar=False)
    ll_alone = np.asarray(alone["sample_stats"]["loglik"].sel(chain=2).values, dtype=float)
    assert runs[2]["loglik_mean"] == float(ll_alone.mean())
    assert runs[2]["ess_ar"] == E.ess_spectral_ar(ll_alone)[0]
    # cached: the second call samples nothing
    assert store.with_suffix(".result.json").exists()
    assert E.run_batch(prob.model, "ess", None, n_iter=60, n_burn=10, repeats=3, seed=7,
                       store=store) == runs


def test_batched_flag_runs_one_store_per_method(tmp_path):
    assert E.main(["--batched", "--datasets", "regression_d1", "--iterations", "50",
                   "--burn-in", "10", "--repeats", "2", "--pilot-iterations", "60",
                   "--reg-n", "20", "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "ess2010.json").read_text())
    assert res["settings"]["batched"] is True and res["mode"] == "custom"
    d = res["datasets"]["regression_d1"]
    for method in E.METHODS:
        assert [r["chain"] for r in d["runs"][method]] == [0, 1]
        assert d["summary"][method]["ess_ar"]["n"] == 2
    stores = sorted(p.name for p in (tmp_path / "work" / "regression_d1").glob("*.zarr"))
    assert len(stores) == len(E.METHODS) and all(s.endswith("_x2.zarr") for s in stores)
    # --finished-only reports what finished and samples nothing else
    args = ["--batched", "--iterations", "50", "--burn-in", "10", "--repeats", "2",
            "--pilot-iterations", "60", "--reg-n", "20", "--out", str(tmp_path / "part"),
            "--work", str(tmp_path / "work"), "--finished-only"]
    assert E.main([*args, "--datasets", "regression_d1", "regression_d2",
                   "--methods", "ess", "line_slice"]) == 0
    part = json.loads((tmp_path / "part" / "ess2010.json").read_text())
    assert set(part["datasets"]) == {"regression_d1"}
    assert part["left_out"] == ["regression_d2/ess", "regression_d2/line_slice"]
    assert "left out" in (tmp_path / "part" / "ess2010.md").read_text()
    assert not (tmp_path / "work" / "regression_d2").exists()
    with pytest.raises(InvalidParameterError, match="no pilot"):
        E.main([*args, "--datasets", "regression_d2"])


def test_summarise_ratios_need_only_the_two_methods_they_compare():
    """ESS / M–H ratios come with ESS and M–H alone (line_slice is optional), and ESS / line
    ratios only when line_slice ran."""
    def run(v):
        return {"ess_ar": v, "ess_bulk": v, "evals_per_iter": 1.0, "ess_ar_per_eval": v,
                "ess_ar_per_second": v, "seconds": 1.0}

    _, r = E.summarise({"ess": [run(4.0), run(6.0)], "neal_mh": [run(2.0), run(3.0)]})
    assert r["per_iteration_ar"] == pytest.approx(2.0)
    assert not any(k.startswith("ess_over_line") for k in r)
    _, r = E.summarise({"ess": [run(4.0)], "line_slice": [run(8.0)]})
    assert r == {"ess_over_line_per_iteration_ar": 0.5, "ess_over_line_per_evaluation_ar": 0.5,
                 "ess_over_line_per_second_ar": 0.5}
