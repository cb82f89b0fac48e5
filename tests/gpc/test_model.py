"""GP classification as a run model: construction, bad inputs, ``sample()`` into a store,
exact resume, determinism and the command line (``model.family = "gpc"``)."""

from __future__ import annotations

import numpy as np
import pytest

from lattice_lgm import threads
from lattice_lgm._runview import RunView, view_of
from lattice_lgm.covariance import Matern
from lattice_lgm.errors import InvalidDataError, InvalidParameterError
from lattice_lgm.gpc import GPClassification, HMCSweep, RMHMCSweep
from lattice_lgm.gpc import model as gpc_model
from lattice_lgm.gpc.model import DEFAULT_METHOD
from lattice_lgm.runs import sample
from lattice_lgm.samplers import Gibbs, chain_rngs
from lattice_lgm.store import open_store
from lattice_lgm.store.base import ResumeMismatchError
from tests.runs.test_runs import _assert_same_store, _crash_after_checkpoint

RUN = dict(draws=6, tune=4, chains=2, random_seed=3, checkpoint_every=2, n_latent=2,
           progressbar=False)


def _data(n=8, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, (n, 2))
    y = (x[:, 0] + 0.5 * rng.standard_normal(n) > 0).astype(int)
    return x, y


@pytest.fixture(scope="module")
def model():
    x, y = _data()
    return GPClassification(x, y, sd=1.5, lengthscale=1.0)


# -- construction and bad inputs -------------------------------------------------------------
def test_it_is_a_run_view_with_k_built_once(model):
    assert isinstance(model, RunView) and view_of(model) is model
    assert model.family == "gpc" and model.dims == ("obs",) and model.shape == (8,)
    np.testing.assert_allclose(model.chol @ model.chol.T, model.K, atol=1e-12)
    np.testing.assert_allclose(np.diag(model.K), 1.5**2 + 1e-6)
    assert model.lgm.likelihood.link == "probit"


def test_plus_minus_one_and_boolean_labels_are_taken_as_zero_one():
    x, y = _data()
    a = GPClassification(x, 2 * y - 1)
    b = GPClassification(x, y.astype(bool))
    np.testing.assert_array_equal(a.y, y)
    np.testing.assert_array_equal(b.y, y)


def test_standardise_and_a_kernel_of_ones_own():
    x, y = _data()
    m = GPClassification(10 * x + 5, y, standardise=True)
    np.testing.assert_allclose(m.x_used.mean(axis=0), 0, atol=1e-12)
    np.testing.assert_allclose(m.x_used.std(axis=0), 1)
    np.testing.assert_array_equal(m.x, 10 * x + 5)      # the data as given are kept
    k = GPClassification(x, y, kernel=Matern(1.5, sd=1.0, range=2.0))
    assert "Matern" in k.priors_text()["f"]


@pytest.fixture
def no_heavy_work(monkeypatch):
    """Fail if a bad input reaches the covariance build."""
    def refuse(*a, **k):
        raise AssertionError("K was built before the inputs were checked")

    monkeypatch.setattr(gpc_model, "DensePrior", refuse)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(y=[0, 1, 2, 0, 1, 0, 1, 1]), InvalidDataError, r"y\[2\]=.*2.* \{0, 1\}"),
    (dict(y=[0, 1, -1, 0, 1, 0, 1, 1]), InvalidDataError, r"y\[2\]=.*-1"),
    (dict(y=[0.5] * 8), InvalidDataError, r"y\[0\]=0.5"),
    (dict(y=[0, 1, 0]), InvalidDataError, "3 labels but x has 8 rows"),
    (dict(y=["a"] * 8), InvalidDataError, "numeric labels"),
    (dict(x_nan=True), InvalidDataError, r"x\[3\]=.*nan.*not finite"),
    (dict(sd=0.0), InvalidParameterError, "sd=0.0 must be finite and > 0"),
    (dict(sd=-1.0), InvalidParameterError, "sd=-1.0"),
    (dict(lengthscale=0.0), InvalidParameterError, "lengthscale=0.0 must be finite and > 0"),
    (dict(lengthscale=[1.0, 2.0, 3.0]), InvalidParameterError, "one per input dimension"),
    (dict(jitter=0.0), InvalidParameterError, "jitter=0.0 must be finite and > 0"),
    (dict(jitter=-1e-6), InvalidParameterError, "jitter=-1e-06"),
    (dict(sampler={"stepsize": 0.1}), InvalidParameterError, r"unknown keys \['stepsize'\]"),
    (dict(standardise="yes"), InvalidParameterError, "standardise"),
    (dict(kernel="se"), InvalidParameterError, "kernel='se' must be a lattice_lgm Covariance"),
])
def test_bad_inputs_are_refused_before_any_heavy_work(no_heavy_work, kwargs, error, match):
    x, y = _data()
    kw = dict(kwargs)
    if kw.pop("x_nan", False):
        x[3, 1] = np.nan
    yy = kw.pop("y", y)
    with pytest.raises(error, match=match):
        GPClassification(x, yy, **kw)


def test_sweep_settings_are_checked(model):
    with pytest.raises(InvalidParameterError, match="not a GP classification sampler"):
        model.default_sweep("prior-white", 10)
    with pytest.raises(InvalidParameterError, match="step_size"):
        RMHMCSweep(model, step_size=0.0)
    with pytest.raises(InvalidParameterError, match="n_leapfrog"):
        HMCSweep(model, n_leapfrog=0)
    with pytest.raises(InvalidParameterError, match="target_accept"):
        HMCSweep(model, target_accept=1.0)
    with pytest.raises(InvalidParameterError, match="coords='z'"):
        HMCSweep(model, coords="z")
    with pytest.raises(InvalidParameterError, match="lacks"):
        RMHMCSweep(object())
    assert isinstance(model.default_sweep("ess", 3), Gibbs)
    assert model.default_sweep("auto", 3, tune=5).settings()["sweep"] == "gpc.HMCSweep"


# -- the sweeps keep the state's invariants ---------------------------------------------------
@pytest.mark.parametrize("method", ["rmhmc", "hmc", "ess"])
def test_a_sweep_keeps_white_and_loglik_consistent(model, method):
    rngs = chain_rngs(0, 2)
    state = model.init_state(rngs, [0, 1])
    assert model.last_start_report == "ep"
    sweep = model.default_sweep(method, 2, tune=3)
    for _ in range(4):
        state, info = sweep.step(state, rngs)
    np.testing.assert_allclose(state.white, model.lgm.prior.whiten(state.f), atol=1e-10)
    want = model.lgm.likelihood.loglik(state.f)
    np.testing.assert_allclose(state.loglik, want, rtol=1e-12)
    assert threads.current() is None      # the standalone sweep's one-thread budget is gone
    if method != "ess":
        assert {"accept_prob", "step_size", "energy_error"} <= set(info)
        ex = state.extras
        assert all(int(v) == 4 for k, v in ex.items() if k.endswith("iter") for v in v)


def test_initvals_and_cold_starts(model):
    rngs = chain_rngs(0, 2)
    f0 = np.linspace(-1, 1, 8)
    st = model.init_state(rngs, [0, 1], initvals={"f": f0})
    np.testing.assert_array_equal(st.f, [f0, f0])
    cold = model.init_state(chain_rngs(0, 2), [0, 1], warm=False)
    assert model.last_start_report == "prior" and np.all(np.isfinite(cold.loglik))
    with pytest.raises(InvalidParameterError, match="initvals"):
        model.init_state(rngs, [0, 1], initvals={"sd": 1.0})


# -- runs ----------------------------------------------------------------------------------------
def test_it_samples_into_a_store(model, tmp_path):
    tree = sample(model, store=tmp_path / "c.zarr", **dict(RUN, representation="rmhmc"))
    post = tree["posterior"]
    assert post["f"].dims == ("chain", "draw", "obs") and post["f"].shape == (2, 6, 8)
    summ = tree["summaries"]
    assert {"f_mean", "f_var", "prob_mean", "prob_var"} <= set(summ.data_vars)
    assert np.all((summ["prob_mean"].values > 0) & (summ["prob_mean"].values < 1))
    stats = tree["sample_stats"]
    assert {"acceptance_rate", "step_size", "energy_error", "diverging", "loglik"} <= set(
        stats.data_vars)
    np.testing.assert_array_equal(tree["observed_data"]["y"].values, model.y)
    np.testing.assert_array_equal(tree["constant_data"]["x"].values, model.x)
    assert tree.attrs["run_config"]["representation"] == "rmhmc"
    again = open_store(tmp_path / "c.zarr")
    np.testing.assert_array_equal(again["posterior"]["f"].values, post["f"].values)


@pytest.mark.parametrize("method", ["rmhmc", "hmc", "ess"])
def test_an_interrupted_run_resumes_byte_for_byte(model, tmp_path, monkeypatch, method):
    run = dict(RUN, representation=method)
    ref = tmp_path / "ref.zarr"
    sample(model, store=ref, **run)
    p = tmp_path / "cut.zarr"
    _crash_after_checkpoint(model, p, monkeypatch, n=3, run=run)
    sample(model, store=p, resume=True, **run)
    _assert_same_store(ref, p)


def test_the_same_seed_gives_the_same_draws_and_another_does_not(model):
    a = sample(model, **RUN)["posterior"]["f"].values
    b = sample(model, **RUN)["posterior"]["f"].values
    c = sample(model, **dict(RUN, random_seed=4))["posterior"]["f"].values
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_a_resume_with_another_kernel_is_refused(model, tmp_path):
    sample(model, store=tmp_path / "c.zarr", **dict(RUN, draws=2))
    other = GPClassification(model.x, model.y, sd=2.0, lengthscale=1.0)
    with pytest.raises(ResumeMismatchError, match="the data"):
        sample(other, store=tmp_path / "c.zarr", resume=True, **dict(RUN, draws=2))


# -- the configuration file and the command line -----------------------------------------------
def _write(tmp_path, options, n=12, sampling="representation = \"auto\"\n"):
    x, y = _data(n)
    rows = "\n".join(f"{a:.6f},{b:.6f},{int(c)},note" for (a, b), c in zip(x, y, strict=True))
    (tmp_path / "pts.csv").write_text("u,v,cls,comment\n" + rows)
    (tmp_path / "c.toml").write_text(
        '[data]\npoints = "pts.csv"\n\n'
        f'[model]\nfamily = "gpc"\noptions = {options}\n\n'
        '[sampling]\nseed = 3\nchains = 2\ntune = 4\ndraws = 4\ncheckpoint_every = 2\n'
        + sampling)
    return x, y


def test_it_runs_from_a_config_through_the_command_line(tmp_path, capsys, monkeypatch):
    from lattice_lgm import cli

    _, y = _write(tmp_path, '{ label = "cls", features = ["u", "v"], sd = 1.5, '
                            'standardise = true, sampler = { n_leapfrog = 3 } }')
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "c.toml", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("GP classification: 12 inputs in 2 dimensions") and \
        "2 chains × 4 draws" in out
    tree = open_store(tmp_path / "c.zarr")
    assert list(tree["constant_data"]["feature"].values) == ["u", "v"]
    np.testing.assert_array_equal(tree["observed_data"]["y"].values, y)
    # "auto" resolves to the model's measured default and is recorded as resolved
    assert tree.attrs["run_config"]["representation"] == DEFAULT_METHOD
    assert cli.main(["resume", str(tmp_path / "c.zarr"), "--no-progress"]) == 0
    assert cli.main(["summary", str(tmp_path / "c.zarr")]) == 0


@pytest.mark.parametrize("options, sampling, message", [
    ('{ label = "cls", features = ["u", "v"], lenghtscale = 1.0 }', "",
     "model.options has unknown keys ['lenghtscale']"),
    ('{ label = "class" }', "", "no label column 'class'"),
    ('{ label = "cls" }', "", "feature columns ['comment'] of"),
    ('{ label = "cls", features = ["u", "w"] }', "", "['w'] not among the input columns"),
    ('{ label = "cls", features = ["u"], jitter = 0.0 }', "", "jitter=0.0"),
    ('{ label = "cls", features = ["u"] }', 'representation = "prior-white"\n',
     "not a GP classification sampler"),
])
def test_config_errors_name_the_option(tmp_path, capsys, monkeypatch, options, sampling,
                                       message):
    from lattice_lgm import cli

    _write(tmp_path, options, sampling=sampling)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "c.toml", "--no-progress"]) != 0
    assert message in capsys.readouterr().err


def test_hmc_in_eps_coordinates_says_what_to_do_when_ep_fails(model, monkeypatch):
    from lattice_lgm.errors import ConvergenceError

    m = GPClassification(model.x, model.y)

    def fail(*a, **k):
        raise ConvergenceError("EP's sites still changed")

    monkeypatch.setattr(gpc_model, "expectation_propagation", fail)
    with pytest.raises(ConvergenceError, match="coords': 'white'"):
        m.default_sweep("hmc", 1, tune=5)


def test_predictive_probabilities_at_new_inputs():
    """Φ(μ*/√(1 + σ*²)) per draw, averaged: at a training input it is Φ(f_i) (σ* ≈ 0), far
    away Φ(0) = 1/2, and elsewhere it matches Monte Carlo over the Gaussian conditional
    built from the joint covariance by a general solve (200 000 draws, 5 SE: a false-failure
    rate of 2e-6 for the two checks; without the √(1 + σ*²) it fails)."""
    from scipy import special

    x = np.array([[0.0], [0.7], [1.5]])
    m = GPClassification(x, [1, 0, 1], sd=1.5, lengthscale=0.8, jitter=1e-8)
    f = np.array([[0.9, -0.4, 1.2], [0.3, -1.1, 0.8]])
    np.testing.assert_allclose(m.predict_proba(f, [[0.7]]),
                               special.ndtr(f[:, 1]).mean(), atol=1e-5)
    assert m.predict_proba(f, [[50.0]]) == pytest.approx([0.5], abs=1e-12)
    xs = np.array([[0.3], [2.2]])
    got = m.predict_proba(f[:1], xs)
    joint = m.kernel(np.vstack([x, xs])) + 1e-8 * np.eye(5)
    k_ff, k_fs, k_ss = joint[:3, :3], joint[:3, 3:], joint[3:, 3:]
    mean = k_fs.T @ np.linalg.solve(k_ff, f[0])
    cov = k_ss - k_fs.T @ np.linalg.solve(k_ff, k_fs)
    draws = np.random.default_rng(0).multivariate_normal(mean, cov, 200_000)
    phi = special.ndtr(draws)
    se = phi.std(axis=0) / np.sqrt(len(phi))
    assert np.all(np.abs(phi.mean(axis=0) - got) < 5 * se + 1e-7), (phi.mean(axis=0), got, se)
    with pytest.raises(InvalidParameterError, match="f has shape"):
        m.predict_proba(np.zeros(4), xs)
    with pytest.raises(InvalidDataError, match="x_new"):
        m.predict_proba(f, [[np.nan]])
    with pytest.raises(InvalidDataError, match="x_new"):
        m.predict_proba(f, np.zeros((2, 2)))
