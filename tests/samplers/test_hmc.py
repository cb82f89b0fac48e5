"""Joint HMC over (θ, β, field) on circulant and spectral GMRF priors: gradients, the
integrator, exactness.

Statistical tests follow ``test_hyper``: independent chains start at exact draws of the target
(quadrature over (sd, range) and exact conditional fields, or the prior), take a few
transitions with fixed settings (no adaptation, which would not be invariant), and a KS test at
level ``ALPHA = 1e-4`` compares the final hyperparameters with the target; with the 18 KS
tests of the default tier in this file (3 quadrature and 6 prior-invariance cases, sd and range
each) the family-wise false-failure rate is ≤ 1.8e-3 per run.  Seeds are fixed and were not
tuned.  The "broken" tests patch a defect in (a missing Jacobian of the hyperprior's log scale,
a missing Jacobian of the partially non-centred field, a GMRF field coloured with a stale
spectrum) and assert the same test then fails; a wrong adjoint of the DCT (DCT-I for DCT-II)
fails the gradient test (checked by hand, docs/convergence.md §2).
"""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
from scipy import stats

from lattice_lgm import Lattice
from lattice_lgm.errors import InvalidParameterError
from lattice_lgm.hyperpriors import Hyperprior, LogNormal, Normal, PCPriorSD
from lattice_lgm.likelihoods import Poisson
from lattice_lgm.models.latent import LatentGaussianModel
from lattice_lgm.priors import GMRFPrior
from lattice_lgm.samplers import JointHMC, chain_rngs, state_from_fields, warm_start
from lattice_lgm.samplers._hmc_field import _SpectrumTable
from lattice_lgm.samplers.hmc import PREFIX, adaptation_windows

from .cases import Grid2D, conditional_draws, gaussian_model, prior_start
from .test_warmstart import poisson_model

#: family-wise false-failure rate of this module per run (module docstring); summed by conftest.py
FALSE_FAILURE_RATE = 1.8e-3

ALPHA = 1e-4
N_CHAINS = 100
_DATA = np.random.default_rng(20261126).normal(size=12)


def _fixed_extras(mv: JointHMC, n: int, pbar: float, u_star: np.ndarray) -> dict:
    """Adaptation state with a fixed partially non-centred map (``p̄``, ``θ*``), past warm-up."""
    ex = mv.init_extras(n)
    ex[PREFIX + "iter"][:] = 1
    ex[PREFIX + "mass_p"][:] = pbar
    ex[PREFIX + "mass_u"][:] = u_star
    ex[PREFIX + "inv_mass"][:] = 0.2
    ex[PREFIX + "centred"][:] = 1
    return ex


# -- gradients and the integrator ---------------------------------------------------------------
def _setup(table: bool, field: str = "pncp", integrator: str = "split",
           backend: str = "circulant"):
    model = poisson_model(backend)
    st, _ = warm_start(model, chain_rngs(0, 1), [{"sd": 1.2, "range": 4.0, "mean": 0.2}])
    mv = JointHMC(model, n_tune=50, field=field, integrator=integrator)
    if not table:
        mv._table = None
    ex = mv.init_extras(1)
    u0 = mv._u_of(st.theta_of(0))
    mv._set_field_mass(0, ex, st.theta_of(0), st.f[0], st.beta[0], st.priors[0].state_size, u0)
    ex[PREFIX + "centred"][:] = 1
    th0, pr0 = st.theta_of(0), st.priors[0]
    wk, m = mv._field_params(0, ex, th0, pr0)
    x0 = mv._pow(mv._ops.sigma(pr0), 1 - wk) * st.white[0]
    b0 = st.beta[0] / model.beta_sd
    # the effective fixed effects (the shear) of this state
    u0, b0 = mv._effective(u0, b0, st.f[0].reshape(-1)[model.state_index])
    return model, mv, st, u0, b0, x0, th0, pr0, wk, m


@pytest.mark.parametrize("backend", ["circulant", "gmrf"])
@pytest.mark.parametrize("field", ["white", "white-leapfrog", "pncp"])
@pytest.mark.parametrize("table", [False, True], ids=["exact-spectra", "spectrum-table"])
def test_gradient_matches_finite_differences(table, field, backend):
    """∇U in (log sd, log range, mean, β) and along a random field direction, against central
    differences of the exact U (relative 1e-6 with exact spectra; with the table, whose σ = √λ
    is linear between nodes STEP = 0.01 apart in log range, the chord's slope differs from the
    tangent's by ≤ STEP/2 · |σ''/σ'| ≤ STEP, σ growing at most as range² — the GMRF's low
    frequencies, q^-½ ∝ κ^-2; measured 0.2 % there), with the fixed effects' shear, for the
    whitened field and the partially non-centred one, on the torus (FFT) and on the GMRF's
    padded lattice (DCT-II).  With the split integrator the field's gradient leaves out the
    prior's ``x`` (integrated exactly): ∇U = that + x."""
    integrator = "leapfrog" if field == "white-leapfrog" else "split"
    field = field.split("-")[0]
    _model, mv, _st, u0, b0, x0, th0, pr0, wk, _ = _setup(table, field, integrator, backend)
    if field == "pncp":
        assert 0.0 < wk.min() < 0.5 and wk.max() == 1.0  # a genuinely partial non-centring
    else:
        assert np.all(wk == 1.0)
    gh, gx, _ = mv._gradient(u0, b0, x0, th0, pr0, wk)
    assert mv._split == (field == "white" and integrator == "split")
    if mv._split:
        gx = gx + x0
    tol = _SpectrumTable.STEP if table else 1e-6
    h = 1e-5
    nu = len(u0)
    for k in range(len(gh)):
        d = np.zeros(len(gh))
        d[k] = h
        up = mv._energy(u0 + d[:nu], b0 + d[nu:], x0, th0, pr0, wk)[0]
        dn = mv._energy(u0 - d[:nu], b0 - d[nu:], x0, th0, pr0, wk)[0]
        fd = (up - dn) / (2 * h)
        assert abs(gh[k] - fd) <= tol * max(1.0, abs(fd)), (k, gh[k], fd)
    dz = mv._ops.draw(pr0, np.random.default_rng(3))
    up = mv._energy(u0, b0, x0 + h * dz, th0, pr0, wk)[0]
    dn = mv._energy(u0, b0, x0 - h * dz, th0, pr0, wk)[0]
    fd = (up - dn) / (2 * h)
    an = float(np.sum(mv._ops.weights(pr0) * (np.conj(gx) * dz).real))
    assert abs(an - fd) <= tol * max(1.0, abs(fd))


def _variant(backend: str, variant: str) -> LatentGaussianModel:
    """:func:`poisson_model`, or the same data with a hyperparameter coefficient and a fixed sd."""
    model = poisson_model(backend)
    if variant != "hyper-coefficient":
        return model
    lik = model.likelihood
    x = np.random.default_rng(8).standard_normal(lik.shape)
    hp = {"range": LogNormal(np.log(4.0), 0.5, upper=8.0), "mean": Normal(0.0, 2.0),
          "beta_x": Normal(0.0, 1.0)}
    return LatentGaussianModel(model.prior, lik, hyperpriors=hp, mean=0.2,
                               hyper_covariates={"x": x}, hyper_init={"beta_x": 0.3})


@pytest.mark.parametrize("backend", ["circulant", "gmrf"])
@pytest.mark.parametrize("variant", ["block-coefficients", "no-shear", "hyper-coefficient"])
def test_compiled_gradient_equals_the_general_path(variant, backend, monkeypatch):
    """The default configuration's compiled gradient (:meth:`JointHMC._gradient_chord`) and
    the general path give the same ∇U to round-off (1e-10 relative) with the fixed effects'
    shear and without it, with block coefficients (per-coefficient prior sds, an offset,
    unobserved cells) and with a hyperparameter coefficient and a fixed sd; both read the
    table.  Out of the support both say so (None)."""
    model = _variant(backend, variant)
    theta = {k: v for k, v in {"sd": 1.1, "range": 5.0, "mean": 0.1, "beta_x": 0.2}.items()
             if k in model.hyper_names}
    st, _ = warm_start(model, chain_rngs(0, 1), [theta])
    mv = JointHMC(model, n_tune=50, shear=variant != "no-shear")
    th0, pr0 = st.theta_of(0), st.priors[0]
    u0 = mv._u_of(th0)
    b0 = st.beta[0] / model.beta_sd if model.n_beta else np.zeros(0)
    u0, b0 = mv._effective(u0, b0, st.f[0].reshape(-1)[model.state_index])
    x0 = np.array(st.white[0])
    wk = np.ones(x0.shape)
    compiled = mv._gradient(u0, b0, x0, th0, pr0, wk)
    calls = []
    real = JointHMC._gradient_chord

    def spy(self, *a):
        calls.append(1)
        return real(self, *a)

    monkeypatch.setattr(JointHMC, "_gradient_chord", spy)
    assert mv._gradient(u0, b0, x0, th0, pr0, wk) is not None and calls  # the compiled path
    monkeypatch.setattr(JointHMC, "_gradient_chord", lambda self, *a: False)
    general = mv._gradient(u0, b0, x0, th0, pr0, wk)
    for a, b in zip(compiled[:2], general[:2], strict=True):
        assert a.shape == b.shape
        assert np.max(np.abs(a - b)) <= 1e-10 * max(1.0, np.max(np.abs(b)))
    # a trajectory that ran away: past the range's bound, a range of exp(-800) = 0, an sd of
    # exp(800) (unbounded above: it overflows), a non-finite coefficient — a divergence, not
    # an exception
    monkeypatch.setattr(JointHMC, "_gradient_chord", real)
    for name, value in (("range", mv._bounds[mv.names.index("range"), 1] + 1.0),
                        ("range", -800.0), ("sd", 800.0), ("mean", math.nan)):
        if name in mv.names:
            outside = u0.copy()
            outside[mv.names.index(name)] = value
            assert mv._gradient(outside, b0, x0, th0, pr0, wk) is None, (name, value)
    if len(b0):
        assert mv._gradient(u0, np.full_like(b0, np.inf), x0, th0, pr0, wk) is None


@pytest.mark.parametrize("variant", ["block-coefficients", "no-shear", "hyper-coefficient"])
def test_compiled_trajectory_equals_the_python_loop(variant, monkeypatch):
    """The default configuration's whole trajectory in one compiled call
    (:func:`_hmc_kernels._trajectory_chord`) takes the same steps as the Python loop over
    :meth:`JointHMC._gradient` to round-off — from a fresh table (the kernel stops for its
    nodes and resumes), next to the range's bound (a chord past it: that gradient on the
    general path) and on trajectories that run away, to the bound or to a range of 0 far
    below the table (the same divergence at the same step, no node kept out there)."""
    from lattice_lgm.samplers import _hmc_dynamics, _hmc_kernels

    model = _variant("circulant", variant)
    statuses: list[int] = []
    kernel = _hmc_dynamics._trajectory_chord

    def spy(*a):
        out = kernel(*a)
        statuses.append(int(out[0]))
        return out

    monkeypatch.setattr(_hmc_dynamics, "_trajectory_chord", spy)
    theta = {k: v for k, v in {"sd": 1.1, "range": 5.0, "mean": 0.1, "beta_x": 0.2}.items()
             if k in model.hyper_names}
    st, _ = warm_start(model, chain_rngs(0, 1), [theta])
    th0, pr0 = st.theta_of(0), st.priors[0]
    k_r = JointHMC(model).names.index("range")
    for start, push, eps, n_steps in (("inside", None, 0.05, 40),
                                      ("at the bound", 0.0, 0.005, 25),
                                      ("runaway", 5e4, 0.05, 40),
                                      ("runaway to range 0", -5e4, 0.05, 40)):
        runs = []
        for compiled in (True, False):
            mv = JointHMC(model, n_tune=50, shear=variant != "no-shear")   # a fresh table
            assert mv._compiled
            mv._compiled = compiled
            u0 = mv._u_of(th0)
            if start != "inside":
                u0[k_r] = math.log(7.99)       # the range's bound is 8: past its last chord
            b0 = st.beta[0] / model.beta_sd if model.n_beta else np.zeros(0)
            x0 = np.array(st.white[0])
            r = np.random.default_rng(5)
            rh = r.standard_normal(mv.n_h) * 3.0
            if push is not None:
                rh[k_r] = push
            rz = mv._ops.draw(pr0, r)
            ones = np.ones(x0.shape)
            mv._table.anchor(float(u0[k_r]))       # as a transition does
            # and, as JointHMC.step, with numpy's warnings of runaway values off
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                g0 = mv._gradient(u0, b0, x0, th0, pr0, ones)
                runs.append(mv._leapfrog(u0, b0, x0, rh, rz, g0, eps, n_steps,
                                         np.full(mv.n_h, 0.05), ones, ones, th0, pr0))
        for a, b in zip(*runs, strict=True):
            if isinstance(a, np.ndarray):
                np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, err_msg=start)
            else:
                assert a == b, start
        if start.startswith("runaway"):
            assert runs[0][-1] is False
            # far below the table: its nodes were made for the call and not kept
            assert mv._table.block is None or len(mv._table.block[1]) < 200
    assert {_hmc_kernels._NEED_NODES, _hmc_kernels._PAST_TABLE, _hmc_kernels._DIVERGED,
            _hmc_kernels._DONE} <= set(statuses)


def test_spectrum_table_block_is_contiguous_and_exact():
    """The table's nodes are one contiguous block (what the compiled trajectory reads): a
    request past it fills the gap and grows the block by at least its length (few copies),
    stops at the range's bound, and every node is the exact unit-sd spectrum at its grid
    point."""
    model = poisson_model("circulant")
    mv = JointHMC(model, n_tune=50)
    table, prior, ops = mv._table, model.prior, mv._ops
    step = _SpectrumTable.STEP
    j_top = math.floor(table.u_max / step)
    j0, nodes = table.cover(100, 101, prior, ops)
    assert j0 == 100 - table.MARGIN and len(nodes) == 2 + 2 * table.MARGIN
    first = len(nodes)
    j0, nodes = table.cover(150, 151, prior, ops)      # the gap filled, grown by ≥ its length
    assert j0 == 100 - table.MARGIN
    assert j0 + len(nodes) - 1 == min(151 + first, j_top)
    assert table.cover(120, 121, prior, ops)[1] is nodes      # inside: nothing made
    for j in (j0, 120, 140, 151, j0 + len(nodes) - 1):
        want = ops.sigma(prior.with_params(sd=1.0, range=math.exp(j * step)))
        np.testing.assert_array_equal(nodes[j - j0], want)
    a0, _, t = table.chord(1.2345, prior, ops)
    assert a0 is not None and 0.0 <= t < 1.0
    assert table.chord(table.u_max - 0.5 * step, prior, ops) is None   # its chord crosses


def test_a_hyperprior_without_a_closed_form_keeps_the_general_path(monkeypatch):
    """The compiled gradient needs every hyperprior's ``derivative_form``; a user's
    hyperprior without one is differentiated by differences on the general path."""

    class Custom(Normal):
        def derivative_form(self):
            return None

    model = poisson_model("circulant")
    model.hyperpriors["mean"] = Custom(0.0, 2.0)     # a fresh model of this test's own
    st, _ = warm_start(model, chain_rngs(0, 1), [{"sd": 1.1, "range": 5.0, "mean": 0.1}])
    mv = JointHMC(model, n_tune=50)
    monkeypatch.setattr(JointHMC, "_gradient_chord", lambda self, *a: pytest.fail("compiled"))
    th0, pr0 = st.theta_of(0), st.priors[0]
    x0 = np.array(st.white[0])
    res = mv._gradient(mv._u_of(th0), st.beta[0] / model.beta_sd, x0, th0, pr0,
                       np.ones(x0.shape))
    assert res is not None and np.all(np.isfinite(res[0]))


@pytest.mark.parametrize("backend", ["circulant", "gmrf"])
@pytest.mark.parametrize("field", ["pncp", "white"], ids=["leapfrog", "split"])
def test_integrator_is_reversible_and_its_energy_error_is_second_order(field, backend):
    """Forward n steps, flip the momenta, n steps back: the start again (to 1e-9). The energy
    error of a fixed-length trajectory falls ~4x when ε halves (leapfrog and the split
    integrator are O(ε²))."""
    _model, mv, _st, u0, b0, x0, th0, pr0, wk, m = _setup(table=True, field=field,
                                                         backend=backend)
    assert mv._split == (field == "white")
    rng = np.random.default_rng(5)
    # a dense inverse mass with correlations (the diagonal one is its special case)
    a = rng.normal(size=(mv.n_h, mv.n_h))
    inv_m = 0.05 * (np.eye(mv.n_h) + 0.3 * (a @ a.T) / mv.n_h)
    rh = np.linalg.solve(np.linalg.cholesky(inv_m).T, rng.standard_normal(mv.n_h))
    rz = np.sqrt(m) * mv._ops.draw(pr0, rng)
    g0 = mv._gradient(u0, b0, x0, th0, pr0, wk)
    u, b, x, rh1, rz1, _, _, ok = mv._leapfrog(u0, b0, x0, rh, rz, g0, 0.02, 10, inv_m, m, wk,
                                               th0, pr0)
    assert ok
    g1 = mv._gradient(u, b, x, th0, pr0, wk)
    u2, b2, x2, *_ = mv._leapfrog(u, b, x, -rh1, -rz1, g1, 0.02, 10, inv_m, m, wk, th0, pr0)
    np.testing.assert_allclose(u2, u0, atol=1e-9)
    np.testing.assert_allclose(b2, b0, atol=1e-9)
    np.testing.assert_allclose(x2, x0, atol=1e-9)

    def kinetic(a, z):
        return 0.5 * float(a @ (inv_m @ a)) + 0.5 * float(
            np.sum(mv._ops.weights(pr0) * (z.real ** 2 + z.imag ** 2) / m))

    e0 = mv._energy(u0, b0, x0, th0, pr0, wk)[0] + kinetic(rh, rz)
    errs = []
    for eps, n in ((0.02, 10), (0.01, 20), (0.005, 40)):
        # the largest energy error along the trajectory (an endpoint's can sit near a zero of
        # its ε² coefficient and fall faster for a while)
        u, b, x, a, z, g, worst = u0, b0, x0, rh, rz, g0, 0.0
        for _ in range(n):
            u, b, x, a, z, _, _, ok = mv._leapfrog(u, b, x, a, z, g, eps, 1, inv_m, m, wk,
                                                   th0, pr0)
            g = mv._gradient(u, b, x, th0, pr0, wk)
            worst = max(worst, abs(mv._energy(u, b, x, th0, pr0, wk)[0] + kinetic(a, z) - e0))
        errs.append(worst)
    assert 2.5 < errs[0] / errs[1] < 6.5 and 2.5 < errs[1] / errs[2] < 6.5, errs


# -- exactness ----------------------------------------------------------------------------------
_GRID: dict = {}


def _posterior_run(seed: int, pbar: float = 0.6, n_iter: int = 3, backend: str = "circulant"):
    """Exact posterior starts on the 12-cell Gaussian model, ``n_iter`` transitions.

    ``pbar = 0``: the whitened field with the split integrator (the default); else partially
    non-centred with leapfrog.
    """
    model = gaussian_model(backend, _DATA, noise_sd=0.5)
    if backend not in _GRID:
        _GRID[backend] = Grid2D(model, 80)
    grid = _GRID[backend]
    rng = np.random.default_rng(seed)
    thetas = grid.sample(rng, N_CHAINS)
    f = np.concatenate([conditional_draws(model, dict(t, mean=0.0), rng, 1) for t in thetas])
    rngs = chain_rngs(seed, N_CHAINS)
    state = state_from_fields(model, f, thetas, rngs)
    mv = JointHMC(model, n_tune=0, step_size=0.15, trajectory=1.0,
                  field="white" if pbar == 0.0 else "pncp")
    u_star = np.array([math.log(1.0), math.log(3.0)])
    state = state._replace(extras=_fixed_extras(mv, N_CHAINS, pbar, u_star))
    acc = 0
    for _ in range(n_iter):
        state, info = mv.step(state, rngs)
        acc += info["accepted/0:hmc"].sum()
    p = [stats.kstest(state.theta[k], grid.cdf(k)).pvalue for k in ("sd", "range")]
    return p, acc / (n_iter * N_CHAINS)


@pytest.mark.statistical
@pytest.mark.parametrize(("pbar", "backend"), [(0.0, "circulant"), (4.0, "circulant"),
                                               (0.0, "gmrf")],
                         ids=["whitened", "partially-centred", "whitened-gmrf"])
def test_hyperparameter_posterior_matches_quadrature(pbar, backend):
    """From exact posterior draws, HMC leaves p(sd, range | y) (quadrature) invariant, with
    the whitened field (p̄ = 0) and with a partially non-centred one (p̄ = 4: w down to 0.05),
    on the torus and on the GMRF's padded lattice."""
    p, acc = _posterior_run(seed=31, pbar=pbar, backend=backend)
    assert acc > 0.5  # the transitions move
    assert min(p) > ALPHA, p


@pytest.mark.slow
@pytest.mark.statistical
def test_missing_hyperprior_jacobian_is_detected(monkeypatch):
    """Dropping the log-scale Jacobian (+u) of the hyperpriors makes the quadrature test fail."""
    model = gaussian_model("circulant", _DATA, noise_sd=0.5)
    if "circulant" not in _GRID:
        _GRID["circulant"] = Grid2D(model, 80)

    def no_jacobian(self, u):
        return self.logpdf(np.exp(np.asarray(u, dtype=float)))

    monkeypatch.setattr(Hyperprior, "logpdf_unconstrained", no_jacobian)
    p, _ = _posterior_run(seed=32, pbar=0.0, n_iter=15)
    assert min(p) < ALPHA, p


@pytest.mark.slow
@pytest.mark.statistical
def test_missing_non_centring_jacobian_is_detected(monkeypatch):
    """Dropping Σ(1 − w) log σ (the Jacobian of x → ζ) makes the quadrature test fail."""
    monkeypatch.setattr(JointHMC, "_log_jacobian", staticmethod(lambda s, w, c: 0.0))
    p, _ = _posterior_run(seed=33, pbar=4.0, n_iter=15)
    assert min(p) < ALPHA, p


@pytest.mark.slow
@pytest.mark.statistical
def test_a_stale_gmrf_spectrum_is_detected(monkeypatch):
    """Colouring the GMRF's field with the spectrum of a fixed range (stale in θ, so the range
    no longer reaches the likelihood) makes the quadrature test fail (measured p = 8e-11 for
    the range after 15 transitions; 3 transitions, the default tier's, give only p = 2e-3)."""
    from lattice_lgm.samplers import _hmc_field

    orig = _hmc_field._DCTOps.colorize

    def stale(prior, zeta, ws):
        return orig(prior.with_params(range=3.0, sd=prior.params["sd"]), zeta, ws)

    monkeypatch.setattr(_hmc_field._DCTOps, "colorize", staticmethod(stale))
    p, _ = _posterior_run(seed=34, pbar=0.0, n_iter=15, backend="gmrf")
    assert min(p) < ALPHA, p


@pytest.mark.statistical
@pytest.mark.parametrize(("metric", "backend"), [("diag", "circulant"), ("dense", "circulant"),
                                                 ("diag", "gmrf"), ("diag-span", "circulant")])
def test_prior_invariance_with_a_flat_likelihood(metric, backend, monkeypatch):
    """With noise sd 1e4 the posterior is the prior: θ stays distributed as its hyperprior
    (with a dense mass: a fixed correlated one, so the momentum draw, the kinetic energy and
    the drift all use its off-diagonal terms; ``diag-span``: with the log range's span limit
    made active, 0.05, so that most trajectories end on it — the rule must stay exact)."""
    from lattice_lgm.samplers import _hmc_dynamics

    span = metric == "diag-span"
    if span:
        monkeypatch.setattr(_hmc_dynamics, "SPAN_MIN", 0.05)
        monkeypatch.setattr(_hmc_dynamics, "SPAN_SD", 0.0)
        metric = "diag"
    model, state, rngs = prior_start(backend, _DATA, N_CHAINS, seed=41, stream_seed=42)
    hp = model.hyperpriors
    mv = JointHMC(model, n_tune=0, step_size=0.2, trajectory=1.0, inv_mass=0.3, metric=metric)
    if metric == "dense":
        ex = mv.init_extras(N_CHAINS)
        a = np.random.default_rng(43).normal(size=(mv.n_h, mv.n_h))
        ex[PREFIX + "inv_mass"][:] = 0.3 * (np.eye(mv.n_h) + 0.5 * (a @ a.T) / mv.n_h)
        state = state._replace(extras=ex)
    divergent = 0
    for _ in range(3):
        state, info = mv.step(state, rngs)
        divergent += int(info["divergent"].sum())
    if span:
        assert divergent > N_CHAINS          # the rule was in force
    p_sd = stats.kstest(state.theta["sd"], hp["sd"].cdf).pvalue
    p_r = stats.kstest(state.theta["range"], hp["range"].cdf).pvalue
    assert min(p_sd, p_r) > ALPHA, (p_sd, p_r)


@pytest.mark.statistical
@pytest.mark.parametrize("span", [False, True], ids=["compiled", "compiled-span-active"])
def test_prior_invariance_of_the_compiled_trajectory_on_a_2d_torus(span, monkeypatch):
    """The other exactness tests run on 1-D tori (the Python loop); on a 2-D torus the whole
    trajectory runs compiled (:func:`_hmc_kernels._trajectory_chord`, checked): with a flat
    likelihood θ stays distributed as its hyperprior — also with the log range's span rule
    made active (0.05) so that most trajectories end on it (an asymmetric rule patched into
    the kernel fails this case)."""
    from lattice_lgm import Lattice
    from lattice_lgm.covariance import Matern
    from lattice_lgm.likelihoods import Gaussian
    from lattice_lgm.priors import CirculantPrior
    from lattice_lgm.samplers import _hmc_dynamics, state_from_fields

    if span:
        monkeypatch.setattr(_hmc_dynamics, "SPAN_MIN", 0.05)
        monkeypatch.setattr(_hmc_dynamics, "SPAN_SD", 0.0)
    calls = []
    kernel = _hmc_dynamics._trajectory_chord

    def spy(*a):
        calls.append(1)
        return kernel(*a)

    monkeypatch.setattr(_hmc_dynamics, "_trajectory_chord", spy)
    prior = CirculantPrior(Lattice((4, 3)), Matern(1.5, range=3.0), max_range=8.0)
    hp = {"sd": LogNormal(0.0, 0.5), "range": LogNormal(np.log(3.0), 0.3, upper=8.0)}
    model = LatentGaussianModel(prior, Gaussian(np.zeros((4, 3)), noise_sd=1e4),
                                hyperpriors=hp)
    rng = np.random.default_rng(51)
    thetas = [{"sd": float(a), "range": float(r)}
              for a, r in zip(hp["sd"].sample(rng, N_CHAINS), hp["range"].sample(rng, N_CHAINS),
                              strict=True)]
    f = np.concatenate([model.prior_for(t, prior).sample_state(rng, 1) for t in thetas])
    rngs = chain_rngs(52, N_CHAINS)
    state = state_from_fields(model, f, thetas, rngs)
    mv = JointHMC(model, n_tune=0, step_size=0.2, trajectory=1.0, inv_mass=0.3)
    divergent = 0
    for _ in range(3):
        state, info = mv.step(state, rngs)
        divergent += int(info["divergent"].sum())
    assert calls                                   # the compiled trajectory ran
    if span:
        assert divergent > N_CHAINS
    p_sd = stats.kstest(state.theta["sd"], hp["sd"].cdf).pvalue
    p_r = stats.kstest(state.theta["range"], hp["range"].cdf).pvalue
    assert min(p_sd, p_r) > ALPHA, (p_sd, p_r)


# -- determinism, adaptation and errors ---------------------------------------------------------
@pytest.mark.parametrize("backend", ["circulant", "gmrf"])
def test_same_draws_for_any_chain_subset_thread_count_and_adaptation_in_the_state(backend):
    model = poisson_model(backend)
    thetas = [{"sd": 1.0 + 0.1 * c, "range": 4.0, "mean": 0.1 * c} for c in range(3)]
    full, _ = warm_start(model, chain_rngs(7, 3), thetas, block=5, max_blocks=2)
    start = full
    rngs = chain_rngs(7, 3)
    mv = JointHMC(model, n_tune=20, threads=3)      # chains in three threads
    for _ in range(4):
        full, _ = mv.step(full, rngs)
    seq, rngs = start, chain_rngs(7, 3)
    mv1 = JointHMC(model, n_tune=20, threads=1)     # one after the other
    for _ in range(4):
        seq, _ = mv1.step(seq, rngs)
    np.testing.assert_array_equal(full.f, seq.f)
    np.testing.assert_array_equal(full.white, seq.white)
    # a used sampler (its table holds nodes, a lock and per-thread anchors) survives pickling
    # (Dask ships it) and draws the same
    again, rngs = start, chain_rngs(7, 3)
    mv2 = pickle.loads(pickle.dumps(mv))
    for _ in range(4):
        again, _ = mv2.step(again, rngs)
    np.testing.assert_array_equal(full.f, again.f)
    one, _ = warm_start(model, chain_rngs(7, [1]), thetas[1:2], chains=[1], block=5,
                        max_blocks=2)
    r1 = chain_rngs(7, [1])
    for _ in range(4):
        one, _ = mv.step(one, r1)
    np.testing.assert_array_equal(full.f[1], one.f[0])
    np.testing.assert_array_equal(full.theta["range"][1], one.theta["range"][0])
    for k, v in full.extras.items():
        np.testing.assert_array_equal(v[1], one.extras[k][0], err_msg=k)
    assert full.extras[PREFIX + "iter"].tolist() == [4, 4, 4]


def test_adaptation_windows_follow_stans_schedule():
    assert adaptation_windows(10) == []
    assert adaptation_windows(1000) == [(75, 100), (100, 150), (150, 250), (250, 450),
                                        (450, 950)]
    w = adaptation_windows(100)
    assert w[0][0] == 15 and w[-1][1] == 90


def test_bad_settings_raise_before_sampling():
    model = poisson_model("circulant")
    with pytest.raises(InvalidParameterError, match="step_size"):
        JointHMC(model, step_size=0.0)
    with pytest.raises(InvalidParameterError, match="trajectory"):
        JointHMC(model, trajectory=-1.0)
    with pytest.raises(InvalidParameterError, match="target_accept"):
        JointHMC(model, target_accept=1.0)
    with pytest.raises(InvalidParameterError, match="too short"):
        JointHMC(model, n_tune=5)
    with pytest.raises(InvalidParameterError, match=r"CirculantPrior.*DensePrior"):
        JointHMC(poisson_model("dense"))
    lat = Lattice((6, 5), spacing=1.0)
    for prior in (GMRFPrior.matern(lat, sd=1.0, range=3.0, boundary="periodic"),
                  GMRFPrior.car(lat, rho=0.5)):
        hp = ({"sd": PCPriorSD(2.0, 0.1)} if prior.model == "matern"
              else {"tau": LogNormal(0.0, 1.0)})
        bad_model = LatentGaussianModel(prior, Poisson(np.ones((6, 5))), hyperpriors=hp)
        with pytest.raises(InvalidParameterError, match="boundary='neumann'"):
            JointHMC(bad_model)
    with pytest.raises(InvalidParameterError, match="threads"):
        JointHMC(model, threads=0)
    with pytest.raises(InvalidParameterError, match="integrator"):
        JointHMC(model, integrator="verlet")
    with pytest.raises(InvalidParameterError, match="metric"):
        JointHMC(model, metric="full")
    with pytest.raises(InvalidParameterError, match="threads"):
        warm_start(model, chain_rngs(0, 1), [{"sd": 1.2, "range": 4.0, "mean": 0.2}],
                   threads=0)
    st, _ = warm_start(model, chain_rngs(0, 1), [{"sd": 1.2, "range": 4.0, "mean": 0.2}])
    bad = st._replace(loglik=np.array([np.nan]))
    with pytest.raises(InvalidParameterError, match="non-finite"):
        JointHMC(model, n_tune=0).step(bad, chain_rngs(0, 1))
