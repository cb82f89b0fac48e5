"""The supervised GPLVM as a run model: construction, bad inputs, ``sample()`` into a store,
exact resume, determinism, predictions and the command line (``model.family = "gplvm"``)."""

from __future__ import annotations

import numpy as np
import pytest

from lattice_lgm._runview import RunView
from lattice_lgm.errors import (
    InvalidDataError,
    InvalidParameterError,
    NotPositiveDefiniteError,
    ShapeMismatchError,
)
from lattice_lgm.gplvm import model as gplvm_model
from lattice_lgm.gplvm.kernels import GPLVMHyper
from lattice_lgm.gplvm.model import SupervisedGPLVM
from lattice_lgm.gplvm.sweep import PseudoMarginalSweep
from lattice_lgm.runs import sample
from lattice_lgm.samplers import chain_rngs
from lattice_lgm.store import open_store
from lattice_lgm.store.base import ResumeMismatchError
from tests.runs.test_runs import _assert_same_store, _crash_after_checkpoint

RUN = dict(draws=4, tune=3, chains=2, random_seed=3, checkpoint_every=2, progressbar=False)


def _data(n=10, seed=0):
    """§6.1's sinusoids (eq. 9, F_i = 1), three features."""
    rng = np.random.default_rng(seed)
    x = np.linspace(0.0, 4.0 * np.pi, n)
    zeta = rng.uniform(0.0, 1.0, 3)
    f = np.stack([zeta[0] * np.cos(x), zeta[1] * np.cos(x), zeta[2] * np.sin(x)], axis=1)
    return x, f + 0.05 * rng.standard_normal(f.shape)


@pytest.fixture(scope="module")
def model():
    """The run-machinery tests' model: the default chain (correlated estimates, one block)
    with the paper's cheaper refit policy (a fit per accepted update, not per proposal); the
    default refit policy runs in the command-line test."""
    x, y = _data()
    return SupervisedGPLVM(x, y, latent_dim=2, n_importance=8, n_inducing=6, refit="always")


# -- construction and bad inputs -------------------------------------------------------------
def test_it_is_a_run_view_with_one_block_or_the_papers_two(model):
    assert isinstance(model, RunView)
    assert model.names == ["sigma_1", "theta_s", "theta_1", "theta_2", "noise_precision"]
    assert [b.tolist() for b in model.blocks] == [[0, 1, 2, 3, 4]]
    x, y = _data()
    paper = SupervisedGPLVM(x, y, latent_dim=2, blocks="paper")
    # §6.1: ξ1 = (σ_1, θ_1, θ_2), ξ2 = (θ_S, β)
    assert [b.tolist() for b in paper.blocks] == [[0, 2, 3], [1, 4]]
    assert paper.block_names == ["sigma_1+theta_1+theta_2", "theta_s+noise_precision"]
    assert model.dims == ("obs", "latent") and model.shape == (10, 2)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(latent_dim=4), InvalidParameterError, "k_z"),
    (dict(latent_dim=0), InvalidParameterError, "latent_dim"),
    (dict(refit="sometimes"), InvalidParameterError, "refit='sometimes'"),
    (dict(n_importance=0), InvalidParameterError, "n_importance"),
    (dict(n_inducing=11), InvalidParameterError, "n_inducing=11"),
    (dict(prior_sd=-1.0), InvalidParameterError, "prior_sd"),
    (dict(correlation=1.0), InvalidParameterError, "correlation=1.0"),
    (dict(blocks=[["sigma_1", "theta_s"], ["theta_1"]]), InvalidParameterError, "partition"),
    (dict(blocks="pairs"), InvalidParameterError, "blocks='pairs'"),
    (dict(start="mode"), InvalidParameterError, "start='mode'"),
    (dict(orbit=3), InvalidParameterError, "orbit=3 must be an even integer"),
    (dict(orbit=-2), InvalidParameterError, "orbit=-2"),
    (dict(orbit=True), InvalidParameterError, "orbit=True"),
    (dict(importance="hessian"), InvalidParameterError, "importance='hessian'"),
    (dict(y="abc"), InvalidDataError, "dtype"),
    (dict(y=np.full((10, 3), np.nan)), InvalidDataError, "finite"),
    (dict(x=np.zeros(9)), ShapeMismatchError, "9"),
])
def test_bad_inputs_are_refused_before_any_heavy_work(monkeypatch, kwargs, error, match):
    def no_fit(*a, **k):
        raise AssertionError("fit_vb ran before the inputs were checked")

    monkeypatch.setattr(gplvm_model, "fit_vb", no_fit)
    x, y = _data()
    args = {"x": x, "y": y, **kwargs}
    with pytest.raises(error, match=match):
        SupervisedGPLVM(args.pop("x"), args.pop("y"), **args)


def test_initvals_are_checked_and_used(model):
    rngs = chain_rngs(0, 2)
    good = {"sigma_1": 0.2, "theta_s": 1.0, "theta_1": 0.3, "theta_2": 0.3,
            "noise_precision": 100.0}
    st = model.init_state(rngs, [0, 1], initvals=good)
    np.testing.assert_allclose(st.theta["noise_precision"], [100.0, 100.0])
    assert model.last_start_report == "initvals"
    with pytest.raises(InvalidParameterError, match="initvals"):
        model.init_state(rngs, [0, 1], initvals={"sigma_1": 1.0})
    with pytest.raises(InvalidParameterError, match="non-positive"):
        model.init_state(rngs, [0, 1], initvals=dict(good, noise_precision=-1.0))


def test_the_default_start_is_overdispersed_around_the_map_with_a_proposal_to_match(model):
    """start="map": η ~ N(mode, START_SPREAD² Σ) of the Laplace approximation and Σ_r =
    2.38²/d Σ (one block); start="ml": the paper's ML point plus N(0, 0.1²) and 0.01 I."""
    mode, cov = model.laplace()
    st = model.init_state(chain_rngs(1, 3), [0, 1, 2])
    eta = np.log(np.stack([st.theta[k] for k in model.names], axis=1))
    white = np.linalg.solve(np.linalg.cholesky(cov), (eta - mode).T) / gplvm_model.START_SPREAD
    assert np.all(np.abs(white) < 6) and np.all(white.std(axis=1) > 0)
    np.testing.assert_allclose(st.extras["pm/eta"], eta)
    np.testing.assert_allclose(st.extras["pm/cov0"][0], 2.38**2 / len(mode) * cov)
    assert np.all(np.isfinite(st.extras["pm/log_p_hat"])) and np.all(np.isfinite(st.loglik))
    x, y = _data()
    paper = SupervisedGPLVM(x, y, latent_dim=2, n_importance=8, n_inducing=6, refit="always",
                            start="ml")
    st = paper.init_state(chain_rngs(1, 3), [0, 1, 2])
    d = np.log(np.stack([st.theta[k] for k in paper.names], axis=1)) - \
        paper.ml_fit().hyper.to_log()
    assert np.all(np.abs(d) < 6 * gplvm_model.START_NOISE) and np.all(d.std(0) > 0)
    np.testing.assert_allclose(st.extras["pm/cov0"][0], gplvm_model.INITIAL_COV * np.eye(5))
    assert paper.last_start_report == "ml"


def test_refit_policies_fit_q_when_they_say(model):
    """"proposal": one fit per proposal estimated (q a function of ξ' alone); "always": one
    per accepted block update, warm-up or not; "warmup": none after warm-up."""
    x, y = _data()
    rngs = chain_rngs(5, 1)
    for refit in ("proposal", "always", "warmup"):
        m = SupervisedGPLVM(x, y, latent_dim=2, n_importance=8, n_inducing=6, refit=refit,
                            start="ml")  # (the start is tested above; ML skips the Laplace fits)
        st = m.init_state(chain_rngs(4, 1), [0])
        sweep = PseudoMarginalSweep(m, tune=2)
        n_ref, accs, evals = [], [], []
        for _ in range(6):
            st, info = sweep.step(st, rngs)
            n_ref.append(int(info["n_refit"][0]))
            accs.append(sum(int(v[0]) for k, v in info.items() if k.startswith("accepted/")))
            evals.append(int(info["n_loglik"][0]))
        if refit == "proposal":  # every block's proposal was estimated here (none left the
            assert n_ref == [len(m.blocks)] * 6  # prior's support, which is all of R^d)
        elif refit == "always":
            assert n_ref == accs and sum(n_ref) > 0
        else:
            assert sum(n_ref[2:]) == 0
    # q at a proposal is a function of the proposal alone: the same η gives the same q
    eta = m.ml_fit().hyper.to_log() + 0.1
    a, b = m.q_at(eta), m.q_at(eta.copy())
    np.testing.assert_array_equal(a.mu, b.mu)
    np.testing.assert_array_equal(a.S, b.S)


def test_a_proposal_whose_factorisation_fails_is_rejected_and_counted(monkeypatch):
    x, y = _data()
    m = SupervisedGPLVM(x, y, latent_dim=2, n_importance=8, n_inducing=6)
    st = m.init_state(chain_rngs(4, 1), [0])
    eta0 = st.extras["pm/eta"].copy()

    def singular(eta):
        raise NotPositiveDefiniteError("K_u is not numerically positive definite")

    monkeypatch.setattr(m, "q_at", singular)
    st2, info = PseudoMarginalSweep(m, tune=2).step(st, chain_rngs(5, 1))
    assert info["n_numeric_reject"].tolist() == [1]
    assert sum(int(v[0]) for k, v in info.items() if k.startswith("accepted/")) == 0
    np.testing.assert_array_equal(st2.extras["pm/eta"], eta0)
    assert st2.extras["pm/log_p_hat"][0] == st.extras["pm/log_p_hat"][0]


# -- runs ----------------------------------------------------------------------------------------
def test_it_samples_into_a_store(model, tmp_path):
    tree = sample(model, store=tmp_path / "g.zarr", **RUN)
    post = tree["posterior"]
    assert post["f"].dims == ("chain", "draw", "obs", "latent")
    assert post["f"].shape == (2, 4, 10, 2)
    assert set(model.names) <= set(post.data_vars)
    assert np.all(post["noise_precision"].values > 0)
    stats = tree["sample_stats"]
    assert {"log_p_hat", "is_log_var", "vb_bound", "n_refit", "loglik"} <= set(stats.data_vars)
    assert np.all(np.isfinite(stats["log_p_hat"].values))
    np.testing.assert_array_equal(tree["observed_data"]["y"].values, model.y_raw)
    np.testing.assert_array_equal(tree["constant_data"]["x"].values, model.x_raw)
    assert tree.attrs["run_config"]["representation"] == "pmmh"


@pytest.mark.parametrize("paper", [False, True], ids=["default", "paper-algorithm-2"])
def test_an_interrupted_run_resumes_byte_for_byte(model, tmp_path, monkeypatch, paper):
    """The default chain carries the estimator's normals u (Q, k_z, N + 1: the orbit mixture's
    component choices in the last column) in its checkpoint; the paper's (fresh estimates, two
    blocks, ML start) carries none — both resume to the same store."""
    if paper:
        x, y = _data()
        model = SupervisedGPLVM(x, y, latent_dim=2, n_importance=8, n_inducing=6,
                                refit="always", correlation=0.0, blocks="paper", start="ml",
                                orbit=0)
    extras = model.init_state(chain_rngs(2, 1), [0]).extras
    assert ("pm/u" in extras) is not paper
    if not paper:
        assert extras["pm/u"].shape == (1, 8, 2, 11)
    ref = tmp_path / "ref.zarr"
    sample(model, store=ref, **RUN)
    p = tmp_path / "cut.zarr"
    _crash_after_checkpoint(model, p, monkeypatch, n=3, run=RUN)
    sample(model, store=p, resume=True, **RUN)
    _assert_same_store(ref, p)


def test_the_same_seed_gives_the_same_draws_and_another_does_not(model):
    a = sample(model, **RUN)["posterior"]["theta_s"].values
    b = sample(model, **RUN)["posterior"]["theta_s"].values
    c = sample(model, **dict(RUN, random_seed=4))["posterior"]["theta_s"].values
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_a_resume_with_other_data_is_refused(model, tmp_path):
    sample(model, store=tmp_path / "g.zarr", **dict(RUN, draws=2))
    x, y = _data(seed=1)
    other = SupervisedGPLVM(x, y, latent_dim=2, n_importance=8, n_inducing=6, refit="always")
    with pytest.raises(ResumeMismatchError, match="the data"):
        sample(other, store=tmp_path / "g.zarr", resume=True, **dict(RUN, draws=2))


def test_a_resume_with_another_estimator_is_refused(model, tmp_path):
    """The default sweep's settings are in the store's run_config: a resume whose importance
    distribution, orbit, ρ or Q differ is refused before any draw, naming the setting."""
    sample(model, store=tmp_path / "g.zarr", **dict(RUN, draws=2))
    x, y = _data()
    for change in (dict(importance="vb"), dict(importance="widened"), dict(orbit=16),
                   dict(correlation=0.9),
                   dict(n_importance=9)):
        kw = dict(latent_dim=2, n_importance=8, n_inducing=6, refit="always") | change
        with pytest.raises(ResumeMismatchError, match="run setting sweep"):
            sample(SupervisedGPLVM(x, y, **kw), store=tmp_path / "g.zarr", resume=True,
                   **dict(RUN, draws=2))


def test_predictions_come_back_in_the_data_units():
    x, y = _data()
    a = SupervisedGPLVM(x, y, latent_dim=2, n_importance=8, n_inducing=6)
    b = SupervisedGPLVM(x, 3.0 * y + 5.0, latent_dim=2, n_importance=8, n_inducing=6,
                        standardise=True)
    st = a.init_state(chain_rngs(2, 1), [0])
    h = [a.hyper_of(st.extras["pm/eta"][0])]
    grid = np.linspace(-2.0, 2.0, 401)
    pa = a.predictive(h, st.f, [[1.0]], grid, np.random.default_rng(0))
    assert pa.density.shape == (1, 401, 3)
    mass = pa.density.sum(axis=1) * (grid[1] - grid[0])
    np.testing.assert_allclose(mass, 1.0, atol=1e-3)
    # the standardised model predicts in y's units: mass 1 on a grid in those units
    pb = b.predictive([b.hyper_of(b.init_state(chain_rngs(2, 1), [0]).extras["pm/eta"][0])],
                      b.init_state(chain_rngs(2, 1), [0]).f, [[1.0]], 3.0 * grid + 5.0,
                      np.random.default_rng(0))
    mass_b = pb.density.sum(axis=1) * 3.0 * (grid[1] - grid[0])
    np.testing.assert_allclose(mass_b, 1.0, atol=1e-3)
    assert isinstance(h[0], GPLVMHyper)


# -- the configuration file and the command line -----------------------------------------------
def _write(tmp_path, options):
    x, y = _data()
    rows = "\n".join(f"{a:.6f},{b[0]:.6f},{b[1]:.6f},{b[2]:.6f}" for a, b in
                     zip(x, y, strict=True))
    (tmp_path / "d.csv").write_text("t,y1,y2,y3\n" + rows)
    (tmp_path / "c.toml").write_text(
        '[data]\npoints = "d.csv"\n\n'
        f'[model]\nfamily = "gplvm"\noptions = {options}\n\n'
        '[sampling]\nseed = 3\nchains = 2\ntune = 2\ndraws = 2\ncheckpoint_every = 2\n')


def test_it_runs_from_a_config_through_the_command_line(tmp_path, capsys, monkeypatch):
    from lattice_lgm import cli

    _write(tmp_path, '{ inputs = ["t"], n_importance = 8, n_inducing = 6, orbit = 16, '
           'importance = "vb" }')
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "c.toml", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("supervised GPLVM: N = 10, k_x = 1, k_y = 3")
    assert "vb q, refit proposal, orbit K = 16" in out
    # the carried log p̂ is a row of the table and of the convergence rule (decision 128)
    assert "\nlog_p_hat " in out
    tree = open_store(tmp_path / "c.zarr")
    assert tree["posterior"]["f"].shape == (2, 2, 10, 2)
    assert cli.main(["resume", str(tmp_path / "c.zarr"), "--no-progress"]) == 0
    assert cli.main(["summary", str(tmp_path / "c.zarr")]) == 0
    assert "\nlog_p_hat " in capsys.readouterr().out


@pytest.mark.parametrize("options, message", [
    ('{ inputs = ["t"], latent = 2 }', "model.options has unknown keys ['latent']"),
    ('{ n_importance = 8 }', "model.options.inputs is required"),
    ('{ inputs = ["u"] }', "['u']"),
])
def test_config_errors_name_the_option(tmp_path, capsys, monkeypatch, options, message):
    from lattice_lgm import cli

    _write(tmp_path, options)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "c.toml", "--no-progress"]) != 0
    assert message in capsys.readouterr().err


@pytest.mark.slow
def test_dask_worker_processes_draw_what_the_in_process_run_draws(model, tmp_path):
    """Chains as Dask tasks (the per-chain work is Python-bound): two worker processes, one
    chain each, write the same draws as the in-process run."""
    pytest.importorskip("dask.distributed")
    ref = sample(model, store=tmp_path / "ref.zarr", **RUN)
    there = sample(model, store=tmp_path / "dask.zarr", dask_workers=2, **RUN)
    for g in ("posterior", "sample_stats"):
        for v in ref[g].data_vars:
            np.testing.assert_array_equal(ref[g][v].values, there[g][v].values,
                                          err_msg=f"{g}/{v}")
