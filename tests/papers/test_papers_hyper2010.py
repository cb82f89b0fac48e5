"""The Murray & Adams (2010) reproduction: its data, its complete-data likelihood, per-axis ranges
on points (LatentGaussianModel), and its quick run."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from lattice_lgm.covariance import SquaredExponential
from lattice_lgm.errors import InvalidParameterError
from lattice_lgm.hyperpriors import LogUniform
from lattice_lgm.likelihoods import Gaussian, Poisson
from lattice_lgm.models import LatentGaussianModel
from lattice_lgm.priors import DensePrior
from tests._jitter import assert_jitter_is_the_ladders
from tests.papers._paper_scripts import load

ROOT = Path(__file__).resolve().parents[2]


H = load("hyper2010")


# -- data ------------------------------------------------------------------------------------------
def test_mining_112_bins_of_365_days_with_191_events():
    counts, centres = H.mining_counts()
    assert counts.shape == (112,) and counts.sum() == 191
    # day 0 is the first event (1851-03-15), in bin 0; the last, day 40549, in bin 40549 // 365
    assert 40549 // 365 == 111 and counts[0] >= 1 and counts[-1] >= 1
    np.testing.assert_allclose(centres[:2], [182.5, 547.5])


def test_redwoods_25_by_25_counts_sum_to_195():
    import pandas as pd

    counts, _, area = H.redwood_counts()
    assert counts.shape == (25, 25) and counts.sum() == 195
    assert area == pytest.approx(1 / 625)
    # the data README: at most 4 per cell and 492 of the 625 cells empty
    assert counts.max() == 4 and int((counts == 0).sum()) == 492
    # orientation (DESIGN §9): counts[i, j] is y-cell i, x-cell j; recount one point by hand
    pts = pd.read_csv(ROOT / "data" / "redwoodfull.csv")
    i, j = (pts["y"] * 25).astype(int), (pts["x"] * 25).astype(int)
    by_hand = np.zeros((25, 25))
    np.add.at(by_hand, (i.to_numpy(), j.to_numpy()), 1)
    np.testing.assert_array_equal(counts, by_hand)


def test_regression_shapes_and_lengthscale_law():
    x, y, ell = H.regression_data()
    assert x.shape == (200, 10) and y.shape == (200,) and ell.shape == (10,)
    assert np.all((x >= 0) & (x < 1))
    assert np.all((ell > 0) & (ell <= math.sqrt(10)))
    prob = H.build_problem("synthetic")
    assert prob.model.hyper_names == ("sd", *(f"range_{i}" for i in range(10)))


def test_ionosphere_problem_has_200_cases_and_34_lengthscales():
    prob = H.build_problem("ionosphere")
    assert prob.model.likelihood.n_obs == 200
    assert sum(n.startswith("range_") for n in prob.model.hyper_names) == 34


# -- per-axis ranges on points (the latent.py change) ----------------------------------------------
def test_per_axis_ranges_on_points_build_the_ard_kernel():
    x = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 2.0, 1.0]])
    prior = DensePrior(x, SquaredExponential(sd=1.0, range=2.0))
    hp = {f"range_{i}": LogUniform(0.1, 10.0) for i in range(3)}
    m = LatentGaussianModel(prior, Gaussian(np.zeros(3), noise_sd=1.0), hyperpriors=hp)
    assert m.hyper_names == ("range_0", "range_1", "range_2")
    th = dict(m.initial_theta(), range_0=2.0, range_1=4.0, range_2=1.0)
    k = m.prior_for(th, m.prior).cov
    # eq. 2 by hand with ℓ = range / 2 = (1, 2, 0.5): k(x0, x2) = exp(−½ (4/4 + 1/0.25)) = e^−2.5
    assert k[0, 1] == pytest.approx(math.exp(-0.5))
    assert k[0, 2] == pytest.approx(math.exp(-2.5))
    # an isotropic range is still allowed on the same prior, but not both at once
    LatentGaussianModel(prior, Gaussian(np.zeros(3), noise_sd=1.0),
                        hyperpriors={"range": LogUniform(0.1, 10.0)})
    with pytest.raises(InvalidParameterError, match="not both"):
        LatentGaussianModel(prior, Gaussian(np.zeros(3), noise_sd=1.0),
                            hyperpriors={"range": LogUniform(0.1, 10.0), **hp})
    # one-dimensional inputs keep the single isotropic name
    p1 = DensePrior(x[:, :1], SquaredExponential(sd=1.0, range=2.0))
    with pytest.raises(InvalidParameterError, match="unknown parameter 'range_0'"):
        LatentGaussianModel(p1, Gaussian(np.zeros(3), noise_sd=1.0),
                            hyperpriors={"range_0": LogUniform(0.1, 10.0)})


# -- the complete-data log-likelihood -------------------------------------------------------------
def test_jitter_policy_names_the_level_kept_for_every_theta():
    """The description (and so a --reuse match) records the jitter level the family keeps;
    at level 0 it is the string of before decision 60, since those draws did not change.

    Which level a data set's initial K needs is decided by round-off for a numerically singular
    K, so by the CPU's BLAS kernel (Ionosphere's factors at 0 on Haswell kernels and needs 1e-10
    on others): each problem must keep the ladder's level as this CPU finds it, and name it."""
    level0 = "DensePrior jitter='auto' (0, then 1e-10 … 1e-6 × mean diag)"
    for name in ("mining", "redwoods", "ionosphere", "synthetic"):
        prob = H.build_problem(name)
        assert_jitter_is_the_ladders(prob.model.prior)
        assert prob.info["jitter_policy"] == H.jitter_policy(prob.model.prior), name
    # the two strings, on priors whose level is the same on every CPU
    x = np.linspace(0.0, 1.0, 30)
    assert H.jitter_policy(DensePrior(x, SquaredExponential(range=0.01))) == level0  # K ≈ I
    flat = DensePrior(x, SquaredExponential(range=1e10))  # K = all ones: an exact zero pivot
    assert H.jitter_policy(flat) == (
        "DensePrior jitter='auto': 1e-10 × mean diag K_θ at every θ (the initial prior's level), "
        "then up to 1e-6 × mean diag")


def test_complete_data_loglik_matches_a_dense_computation():
    from lattice_lgm.samplers import chain_rngs, init_state

    x = np.array([[0.0, 0.1], [0.5, 0.2], [0.9, 0.8], [0.3, 0.7]])
    counts = np.array([0.0, 2.0, 1.0, 3.0])
    prior = DensePrior(x, SquaredExponential(sd=1.3, range=(0.8, 1.5)), jitter=1e-8)
    m = LatentGaussianModel(prior, Poisson(counts, exposure=0.5), mean=0.4)
    state = init_state(m, chain_rngs(3, 2))
    got = H.complete_data_loglik(state)
    for c in range(2):
        f = state.f[c]
        # independent: eq. 2 with ℓ = range/2 written out, jitter added, scipy densities
        ell = np.array([0.4, 0.75])
        d2 = (((x[:, None, :] - x[None, :, :]) / ell) ** 2).sum(-1)
        k = 1.3**2 * np.exp(-0.5 * d2) + 1e-8 * np.eye(4)
        lam = 0.5 * np.exp(0.4 + f)
        want = (stats.poisson.logpmf(counts, lam).sum()
                + stats.multivariate_normal(np.zeros(4), k).logpdf(f))
        assert got[c] == pytest.approx(want, rel=1e-9, abs=1e-9)


# -- end to end ------------------------------------------------------------------------------------
def _check_outputs(out: Path, datasets: list[str]) -> dict:
    res = json.loads((out / "hyper2010.json").read_text())
    assert res["mode"] == "quick" and list(res["datasets"]) == datasets
    for name in datasets:
        d = res["datasets"][name]
        assert d["methods"] == ["prior-white", "surr-site"]
        for m in d["methods"]:
            assert len(d["runs"][m]["chains"]) == 2
            for c in d["runs"][m]["chains"]:
                for k in ("ess", "per_loglik", "per_cov", "per_second"):
                    assert math.isfinite(c[k]) and c[k] > 0, (name, m, k, c[k])
        for k in H.METRICS:
            assert d["summary"]["normaliser"][k] > 0
            assert d["summary"]["normalised"]["surr-site"][k]["mean"] == pytest.approx(1.0)
        for m in d["methods"]:  # every hyperparameter's R-hat, and the largest in the summary
            rh = d["runs"][m]["rhat"]
            assert len(rh) == d["info"]["n_hyper"] and all(v >= 0.9 for v in rh.values())
            assert d["summary"]["rhat"][m] == {"max": max(rh.values()), "stuck": []}
            he = d["runs"][m]["hyper_ess"]
            assert set(he) == set(rh) and all(v > 0 for v in he.values())
            assert d["summary"]["hyper_ess"][m]["min"] == min(he.values())
        assert d["summary"]["hyper_ess"]["surr-site"]["relative"] == pytest.approx(1.0)
    md = (out / "hyper2010.md").read_text()
    assert "## Convergence: the largest hyperparameter R-hat of each run" in md
    assert "## Hyperparameter mixing: the smallest bulk ESS over the hyperparameters" in md
    for k in H.METRICS:
        assert f"Effective samples {H.METRIC_LABEL[k]}" in md
    assert "surr-site (paper)" in md
    for name in datasets:  # the paper's surr-site normalisers stand beside ours
        pn = H.PAPER["surr_site_normalisers"]["per_loglik"][name]
        assert f"{pn:.1e}" in md
        # and their ratio is stated among the differences
        z = res["datasets"][name]["summary"]["normaliser"]["per_loglik"]
        assert f" {name} {z / pn:.2g}× and " in md.split("- Absolute levels:")[1]
    png = (out / "hyper2010.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    return res


def test_code_version_is_this_checkouts_commit():
    got = H.code_version()  # the tests run inside the checkout
    assert re.fullmatch(r"[0-9a-f]{12}(-dirty)?", got), got
    head = subprocess.run(["git", "-C", str(H.ROOT), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout
    assert head.startswith(got.split("-")[0])


def test_runs_of_hours_log_progress_unless_told_not_to(tmp_path, capsys):
    """Outside --quick a run reports its sweeps, rate and ETA on stderr (the final line at
    least); --no-progress and --quick keep stderr free of them."""
    common = ["--datasets", "mining", "--methods", "prior-white", "--chains", "2",
              "--burn-in", "2", "--iterations", "10"]
    assert H.main([*common, "--out", str(tmp_path / "a")]) == 0
    err = capsys.readouterr().err  # mining runs 4 × --iterations: 2 + 40 = 42 sweeps
    assert re.search(r"chains 0-1: 42/42 sweeps \(done\), [0-9.]+ sweeps/s, ETA", err), err
    assert H.main([*common, "--no-progress", "--out", str(tmp_path / "b")]) == 0
    assert H.main(["--quick", "--datasets", "mining", "--out", str(tmp_path / "c")]) == 0
    assert "sweeps/s" not in capsys.readouterr().err


def test_quick_mining_end_to_end_and_resume(tmp_path, monkeypatch):
    # one data set of --quick keeps the default tier fast (one likelihood to compile); the whole
    # --quick is the slow test below
    out = tmp_path / "q"
    # each run records the commit it was sampled at, read when its sampling starts: a checkout
    # that changes during a run (here: after the first run's sampling) does not relabel it
    commit = {"now": "aaaaaaaaaaaa"}
    monkeypatch.setattr(H, "code_version", lambda: commit["now"])
    sample_traced = H.sample_traced

    def then_commit(*args, **kwargs):
        got = sample_traced(*args, **kwargs)
        commit["now"] = "bbbbbbbbbbbb-dirty"
        return got

    monkeypatch.setattr(H, "sample_traced", then_commit)
    assert H.main(["--quick", "--datasets", "mining", "--out", str(out)]) == 0
    monkeypatch.undo()
    res = _check_outputs(out, ["mining"])
    # a second start skips the finished runs (their result.json) and reports the same numbers
    first = res["datasets"]["mining"]["runs"]["surr-site"]["chains"]
    runs = res["datasets"]["mining"]["runs"]
    assert (runs["prior-white"]["code"], runs["surr-site"]["code"]) == (
        "aaaaaaaaaaaa", "bbbbbbbbbbbb-dirty")
    md = (out / "hyper2010.md").read_text()
    assert ("aaaaaaaaaaaa: mining prior-white; bbbbbbbbbbbb-dirty: mining surr-site." in md)
    # runs of one data set from two commits: the report says per-second ratios span them
    assert "Per second across commits: the mining runs come from 2 commits" in md
    # a result written before R-hat was reported gets it from its store on the next start
    done = next((out / "work" / "mining").glob("surr-site_*.result.json"))
    old = json.loads(done.read_text())
    rhat, ess, q = old.pop("rhat"), old.pop("hyper_ess"), old.pop("hyper_q")
    done.write_text(json.dumps(old))
    assert H.main(["--quick", "--datasets", "mining", "--out", str(out)]) == 0
    again = json.loads((out / "hyper2010.json").read_text())
    assert again["datasets"]["mining"]["runs"]["surr-site"]["chains"] == first
    assert again["datasets"]["mining"]["runs"]["surr-site"]["rhat"] == rhat
    assert again["datasets"]["mining"]["runs"]["surr-site"]["hyper_ess"] == ess
    assert again["datasets"]["mining"]["runs"]["surr-site"]["hyper_q"] == q
    # the quantiles are those of the store's draws, chains pooled, in (5 %, 50 %, 95 %) order
    import xarray as xr

    store = done.with_name(done.name.replace(".result.json", ".zarr"))
    pos = xr.open_zarr(store, group="posterior")
    assert set(q) == {"sd", "range", "mean"}
    for k, v in q.items():
        np.testing.assert_array_equal(v, np.quantile(pos[k].values, [0.05, 0.5, 0.95]))
    md = (out / "hyper2010.md").read_text()
    assert "## Posterior of the hyperparameters by method" in md
    sd = q["sd"]
    row = next(r for r in md.splitlines() if r.startswith("| mining | sd | "))
    assert f"| {sd[1]:.3g} [{sd[0]:.3g}, {sd[2]:.3g}]" in row  # surr-site's cell


@pytest.mark.filterwarnings("ignore:Consolidated metadata:UserWarning")
def test_hyper_rhat_flags_chains_that_have_not_mixed(tmp_path):
    """Two chains around different values get a large R-hat; draws of one law get ≈ 1."""
    import xarray as xr

    rng = np.random.default_rng(5)
    same = rng.standard_normal((3, 400))
    apart = same + np.array([0.0, 0.0, 3.0])[:, None]
    stuck = np.repeat([[0.0], [0.0], [1.0]], 400, axis=1)  # constant within each chain
    ds = xr.Dataset({"sd": (("chain", "draw"), same), "range": (("chain", "draw"), apart),
                     "mean": (("chain", "draw"), np.zeros((3, 400))),  # fixed, not sampled
                     "beta": (("chain", "draw"), stuck)})
    ds.to_zarr(tmp_path / "s.zarr", group="posterior")  # consolidated, as the run stores
    rh = H.hyper_rhat(tmp_path / "s.zarr", ["sd", "range", "beta"])
    assert set(rh) == {"sd", "range", "beta"}  # only the names given
    # 1200 iid draws: split R-hat exceeds 1.02 with probability far below 1e-6
    assert rh["sd"] < 1.02 and rh["range"] > 1.5 and rh["beta"] is None
    assert H.rhat_summary(rh) == {"max": rh["range"], "stuck": ["beta"]}
    assert H.rhat_summary(None) == {"max": None, "stuck": []}
    # bulk ESS of the same draws. 3 × 400 iid draws: over 1000 simulated seeds their bulk ESS
    # had mean 1177 and sd 94, so the bounds are about 5 sd out (false failure < 1e-5 for a
    # normal spread). Chains apart give a few; a hyperparameter that never moved has none
    # (ArviZ would call constant draws independent).
    import arviz as az

    ess = H.hyper_ess(tmp_path / "s.zarr", ["sd", "range", "beta"])
    assert set(ess) == {"sd", "range", "beta"}
    assert 700 < ess["sd"] < 1650 and ess["range"] < 20 and ess["beta"] is None
    np.testing.assert_allclose(ess["sd"], az.ess(same, method="bulk"))


def test_hyper_ess_summary_takes_the_smallest_and_divides_by_evaluations():
    def run(ess, n_ll):
        return {"hyper_ess": ess, "chains": [{"n_loglik": n} for n in n_ll]}

    runs = {"surr-site": run({"sd": 200.0, "range": 100.0}, [500, 500]),
            "post-site": run({"sd": 90.0, "range": None}, [250, 250]),  # range never moved
            "fixed": {"chains": [{"n_loglik": 10}]}}                    # from before hyper_ess
    got = H.hyper_ess_summary(runs)
    assert set(got) == {"surr-site", "post-site"}
    assert got["surr-site"] == {"min": 100.0, "name": "range", "per_loglik": 0.1,
                                "relative": 1.0}
    assert got["post-site"]["name"] == "sd" and got["post-site"]["per_loglik"] == 0.18
    assert got["post-site"]["relative"] == pytest.approx(1.8)
    # without surr-site there is nothing to be relative to
    assert H.hyper_ess_summary({"fixed": runs["post-site"]})["fixed"]["relative"] is None


@pytest.mark.slow
def test_quick_all_four_end_to_end(tmp_path):
    assert H.main(["--quick", "--out", str(tmp_path)]) == 0
    _check_outputs(tmp_path, list(H.DATASETS))


def test_finished_only_reports_finished_runs_and_samples_nothing(tmp_path):
    out, argv = tmp_path / "q", ["--quick", "--datasets", "mining", "--methods", "prior-white",
                                 "surr-site"]
    assert H.main([*argv, "--out", str(out)]) == 0
    # surr-site's result is removed: --finished-only leaves it out instead of sampling it again
    done = next((out / "work" / "mining").glob("surr-site_*.result.json"))
    done.unlink()
    # the report would lose the recorded surr-site run: refused unless --replace says to drop it
    with pytest.raises(InvalidParameterError, match=r"mining: surr-site\).*--replace"):
        H.main([*argv, "--out", str(out), "--finished-only"])
    assert H.main([*argv, "--out", str(out), "--finished-only", "--replace"]) == 0
    res = json.loads((out / "hyper2010.json").read_text())
    assert list(res["datasets"]["mining"]["runs"]) == ["prior-white"]
    assert not done.exists()
    md = (out / "hyper2010.md").read_text()
    assert "**Partial.**" in md and "mining: fixed, surr-site, post-site" in md
    assert "raw: surr-site did not run" in md
    # a data set with no finished run is named, not passed over as if complete
    both = ["--quick", "--datasets", "mining", "synthetic", "--methods", "prior-white",
            "--out", str(out), "--finished-only"]
    assert H.main(both) == 0
    md = (out / "hyper2010.md").read_text()
    assert "synthetic: every run (none had finished)" in md and "**Partial.**" in md
    # nothing finished at all: refused before the results are replaced by an empty report
    before = (out / "hyper2010.json").read_bytes()
    with pytest.raises(InvalidParameterError, match=r"no run of.*has finished.*--work"):
        H.main(["--quick", "--datasets", "synthetic", "--out", str(out), "--finished-only"])
    assert (out / "hyper2010.json").read_bytes() == before


def test_partial_line_names_only_what_was_left_out():
    line = H.partial_line({"redwoods": [], "mining": ["fixed", "post-taylor"]}, ["synthetic"])
    assert "mining: fixed, post-taylor; synthetic: every run (none had finished)." in line
    assert "redwoods" not in line


def test_paper_protocol_report_accumulates_runs_of_sessions_whose_stores_are_gone(tmp_path):
    # the documented accumulation: each session samples a method into its own --work with a
    # scratch --out, then re-assembles the accumulating report with --reuse of its own JSON
    acc = tmp_path / "acc"
    base = ["--quick", "--datasets", "mining"]
    for session, method in enumerate(("prior-white", "surr-site")):
        work = tmp_path / f"work{session}"
        assert H.main([*base, "--methods", method, "--work", str(work),
                       "--out", str(work / "out")]) == 0
        reuse = ["--reuse", str(acc / "hyper2010.json")] if session else []
        assert H.main([*base, "--methods", "prior-white", "surr-site", "--work", str(work),
                       "--out", str(acc), "--finished-only", *reuse]) == 0
        shutil.rmtree(work)  # the machine is lost between sessions
    res = json.loads((acc / "hyper2010.json").read_text())
    runs = res["datasets"]["mining"]["runs"]
    assert list(runs) == ["prior-white", "surr-site"]
    assert runs["prior-white"]["reused_from"] == str(acc / "hyper2010.json")
    assert "reused_from" not in runs["surr-site"]


def test_a_report_that_would_lose_recorded_runs_is_refused_before_sampling(tmp_path):
    # the accumulation trap: sampling one more method straight into the accumulating --out
    # would replace its report by one holding only that method
    acc, base = tmp_path / "acc", ["--quick", "--datasets", "mining"]
    assert H.main([*base, "--methods", "prior-white", "--out", str(acc)]) == 0
    before = (acc / "hyper2010.json").read_bytes()
    with pytest.raises(InvalidParameterError,
                       match=r"--out .*acc: its hyper2010.json records runs that this report "
                             r"would not hold \(mining: prior-white\).*before sampling.*"
                             r"--reuse .*hyper2010.json.*another --out.*--replace"):
        H.main([*base, "--methods", "surr-site", "--out", str(acc)])
    assert (acc / "hyper2010.json").read_bytes() == before
    assert not list((acc / "work" / "mining").glob("surr-site_*"))  # nothing was sampled
    # another data set would drop mining just the same
    with pytest.raises(InvalidParameterError, match=r"\(mining: prior-white\)"):
        H.main(["--quick", "--datasets", "synthetic", "--methods", "prior-white",
                "--out", str(acc)])
    # the same methods again, or more of them, keep every recorded run
    assert H.dropped_runs(acc / "hyper2010.json", {"mining": ["prior-white", "fixed"]}) == {}
    assert H.dropped_runs(tmp_path / "absent.json", {}) == {}
    # --replace drops them on purpose
    assert H.main([*base, "--methods", "surr-site", "--out", str(acc), "--replace"]) == 0
    res = json.loads((acc / "hyper2010.json").read_text())
    assert list(res["datasets"]["mining"]["runs"]) == ["surr-site"]
    # a file of that name that is not a results file is not overwritten blindly
    (acc / "hyper2010.json").write_text("[1, 2]")
    with pytest.raises(InvalidParameterError, match=r"not a results file of this script.*"
                                                    r"--replace"):
        H.main([*base, "--methods", "surr-site", "--out", str(acc)])


def test_protocol_per_data_set_names_the_store_and_the_report(tmp_path):
    out = tmp_path / "q"
    argv = ["--quick", "--datasets", "mining", "--methods", "surr-site", "--out", str(out)]
    assert H.main([*argv, "--protocol", "mining=3,2,12"]) == 0
    res = json.loads((out / "hyper2010.json").read_text())
    d = res["datasets"]["mining"]
    assert d["protocol"] == {"n_chains": 3, "n_burn": 2, "n_iter": 12}
    run = d["runs"]["surr-site"]
    assert (run["n_chains"], run["n_burn"], run["n_iter"]) == (3, 2, 12)
    assert len(run["chains"]) == 3
    assert (out / "work" / "mining" / "surr-site_c3_it12_b2.result.json").exists()
    assert res["mode"] == "quick" and res["settings"]["protocol_overrides"] == {  # sizes
        "mining": d["protocol"]}
    md = (out / "hyper2010.md").read_text()
    assert "| mining | 3 | 2 | 12 | 10 | 1000 | 20000 |" in md


def test_not_at_paper_protocol_names_each_short_data_set():
    paper = {"n_chains": 10, "n_burn": 1000, "n_iter": 5000}
    protos = {"synthetic": paper, "mining": {**paper, "n_iter": 20_000},
              "redwoods": {**paper, "n_chains": 4}, "ionosphere": {**paper, "n_burn": 50}}
    assert H.not_at_paper_protocol(protos) == ["redwoods", "ionosphere"]
    assert H.not_at_paper_protocol({"mining": paper}) == ["mining"]  # mining runs 20,000


@pytest.mark.parametrize("spec, match", [
    ("mining=3,2", "not DATASET=CHAINS,BURN_IN,SWEEPS"),
    ("mining:3,2,12", "not DATASET=CHAINS,BURN_IN,SWEEPS"),
    ("mining=3,-2,12", "not DATASET=CHAINS,BURN_IN,SWEEPS"),
    ("coal=3,2,12", "data set 'coal' is unknown"),
    ("mining=1,2,12", "at least 2 chains"),
    ("mining=3,2,5", "10 sampling sweeps"),
    ("redwoods=3,2,12", "which this run does not include"),
])
def test_protocol_refuses_bad_values_before_any_run(tmp_path, spec, match):
    out = tmp_path / "q"
    with pytest.raises(InvalidParameterError, match=match):
        H.main(["--quick", "--datasets", "mining", "--out", str(out), "--protocol", spec])
    assert not (out / "work").exists()


def test_protocol_twice_for_one_data_set_is_refused(tmp_path):
    with pytest.raises(InvalidParameterError, match="names a data set twice"):
        H.main(["--quick", "--datasets", "mining", "--out", str(tmp_path / "q"),
                "--protocol", "mining=3,2,12", "--protocol", "mining=2,2,12"])


def test_checkpoint_interval_is_the_stores_own_and_changes_no_draw(tmp_path, monkeypatch):
    # new stores checkpoint every CHECKPOINT_SWEEPS; a store reopened later keeps the interval it
    # was made with (resume checks it), and the interval moves no draw
    argv = ["--quick", "--datasets", "mining", "--methods", "prior-white"]
    monkeypatch.setattr(H, "CHECKPOINT_SWEEPS", 7)
    assert H.main([*argv, "--out", str(tmp_path / "a")]) == 0
    store = next((tmp_path / "a" / "work" / "mining").glob("prior-white_*.zarr"))
    from lattice_lgm.store import RunStore

    assert RunStore(store).attrs["run_config"]["checkpoint_every"] == 7
    monkeypatch.setattr(H, "CHECKPOINT_SWEEPS", 1000)
    assert H.main([*argv, "--out", str(tmp_path / "b")]) == 0
    store_b = next((tmp_path / "b" / "work" / "mining").glob("prior-white_*.zarr"))
    assert RunStore(store_b).attrs["run_config"]["checkpoint_every"] != 7
    a, b = (np.load(s.with_suffix(".trace.npy"))[:, :, :2] for s in (store, store_b))
    np.testing.assert_array_equal(a, b)
    # reopening the 7-sweep store (its result dropped) under the new interval is no mismatch
    next(store.parent.glob("prior-white_*.result.json")).unlink()
    assert H.main([*argv, "--out", str(tmp_path / "a")]) == 0


def test_reuse_takes_matching_recorded_runs_and_samples_nothing(tmp_path, capsys):
    # a machine that lost its --work reassembles from the results file: a run recorded with the
    # same data set, method, protocol, seed and sweep settings is taken, not sampled again
    argv = ["--quick", "--datasets", "mining", "--methods", "prior-white"]
    assert H.main([*argv, "--out", str(tmp_path / "a")]) == 0
    first = tmp_path / "a" / "hyper2010.json"
    rec = json.loads(first.read_text())["datasets"]["mining"]["runs"]["prior-white"]
    rec_info = json.loads(first.read_text())["datasets"]["mining"]["info"]
    assert H.main([*argv, "--out", str(tmp_path / "b"), "--reuse", str(first)]) == 0
    assert not (tmp_path / "b" / "work" / "mining").exists()  # nothing sampled
    res = json.loads((tmp_path / "b" / "hyper2010.json").read_text())
    run = res["datasets"]["mining"]["runs"]["prior-white"]
    assert run.pop("reused_from") == str(first) and run == rec
    assert res["settings"]["reuse"] == [str(first)]
    assert "Reused (`--reuse`)" in (tmp_path / "b" / "hyper2010.md").read_text()
    # another protocol is another run: not taken, and the reason is printed
    capsys.readouterr()
    # nothing left to report: refused, and no report written
    with pytest.raises(InvalidParameterError, match="nothing to report"):
        H.main([*argv, "--out", str(tmp_path / "c"), "--reuse", str(first), "--finished-only",
                "--protocol", "mining=3,2,12"])
    out = capsys.readouterr().out
    assert "not reused" in out and "protocol" in out
    assert not (tmp_path / "c" / "hyper2010.json").exists()
    # so is a run of another data set description (here: other hyperpriors)
    old = json.loads(first.read_text())
    old["datasets"]["mining"]["info"]["hyperpriors"] = ["something else"]
    (tmp_path / "edited.json").write_text(json.dumps(old))
    with pytest.raises(InvalidParameterError, match="nothing to report"):
        H.main([*argv, "--out", str(tmp_path / "d"), "--reuse", str(tmp_path / "edited.json"),
                "--finished-only"])
    assert "description differs (hyperpriors)" in capsys.readouterr().out
    # --stale-ok takes it, marked stale with both descriptions, and the report says so
    assert H.main([*argv, "--out", str(tmp_path / "e"), "--reuse", str(tmp_path / "edited.json"),
                   "--finished-only", "--stale-ok", "mining"]) == 0
    res = json.loads((tmp_path / "e" / "hyper2010.json").read_text())
    run = res["datasets"]["mining"]["runs"]["prior-white"]
    assert run["stale"] == {"hyperpriors": {"then": ["something else"],
                                            "now": rec_info["hyperpriors"]}}
    assert res["settings"]["stale_ok"] == ["mining"]
    md = (tmp_path / "e" / "hyper2010.md").read_text()
    assert "**Stale (`--stale-ok`): mining prior-white.**" in md
    assert "`hyperpriors` then ['something else'], now " in md
    # but not a run that differs in anything else as well
    old["datasets"]["mining"]["runs"]["prior-white"]["seed"] += 1
    (tmp_path / "edited2.json").write_text(json.dumps(old))
    capsys.readouterr()
    with pytest.raises(InvalidParameterError, match="nothing to report"):
        H.main([*argv, "--out", str(tmp_path / "f"), "--reuse", str(tmp_path / "edited2.json"),
                "--finished-only", "--stale-ok", "mining"])
    assert "seed" in capsys.readouterr().out
    # --stale-ok is refused without --reuse, or for a data set not run, before any write
    with pytest.raises(InvalidParameterError, match="needs --reuse"):
        H.main([*argv, "--out", str(tmp_path / "g"), "--stale-ok", "mining"])
    with pytest.raises(InvalidParameterError, match="does not include"):
        H.main([*argv, "--out", str(tmp_path / "g"), "--reuse", str(first),
                "--stale-ok", "redwoods"])
    assert not (tmp_path / "g").exists()


@pytest.mark.parametrize("content, match", [
    (None, "no such file"),
    ("{not json", "is not JSON"),
    ('{"datasets": {}}', "not a results file of hyper2010.py"),
])
def test_reuse_refuses_a_missing_or_foreign_file_before_any_write(tmp_path, content, match):
    path = tmp_path / "prev.json"
    if content is not None:
        path.write_text(content)
    out = tmp_path / "q"
    with pytest.raises(InvalidParameterError, match=match):
        H.main(["--quick", "--datasets", "mining", "--out", str(out), "--reuse", str(path)])
    assert not out.exists()
