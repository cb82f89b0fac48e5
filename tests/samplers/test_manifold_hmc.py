"""HMC with the constant manifold metric G_θ (samplers.manifold.ManifoldHMC)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from lattice_lgm.errors import InvalidParameterError
from lattice_lgm.samplers import Gibbs, chain_rngs, init_state
from lattice_lgm.samplers._latent import loglik_at
from lattice_lgm.samplers.manifold import ManifoldHMC, ManifoldMALA

from .cases import HAS_CHOLMOD
from .test_manifold import _gaussian_case, _poisson_model, assert_cell_moments

pytestmark = pytest.mark.skipif(not HAS_CHOLMOD, reason="needs scikit-sparse (CHOLMOD)")

#: family-wise probability that the statistical test fails on a correct sampler (Bonferroni
#: over its z-tests of means and sds)
FALSE_FAILURE_RATE = 1e-3


def test_one_leapfrog_step_is_the_mmala_proposal_and_ratio():
    """Langevin is one-step HMC (Neal 2011, §5.2): same proposal, same M–H ratio."""
    model = _poisson_model(n=6)
    state = init_state(model, chain_rngs(3, 1))
    mala, hmc = ManifoldMALA(model), ManifoldHMC(model)
    met_m = mala._metric(state, 0, mala._extras(state))
    met_h = hmc._metric(state, 0, hmc._extras(state))
    rng = np.random.default_rng(5)
    ratios = []
    for eps in (0.3, 0.9, 1.6):
        z, zb = rng.standard_normal(state.f[0].size), rng.standard_normal(model.n_beta)
        la_m, new_m = mala.propose(state, 0, met_m, eps, z, zb)
        la_h, new_h = hmc.integrate(state, 0, met_h, eps, 1, z, zb)
        np.testing.assert_allclose(new_h[0], new_m[0], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(new_h[1], new_m[1], rtol=1e-10, atol=1e-12)
        assert la_h == pytest.approx(la_m, rel=1e-8, abs=1e-9)
        ratios.append(la_h)
    assert min(ratios) < -1e-3  # a ratio below 1 was compared, not only the clipped one


def test_energy_error_is_second_order_in_the_step_size():
    """Over a fixed integration time the leapfrog's energy error scales as ε² (Neal 2011)."""
    model, _, _ = _gaussian_case()
    state = init_state(model, chain_rngs(4, 1))
    mv = ManifoldHMC(model)
    ex = mv._extras(state)
    ex["mhmc/w"][0] *= 0.5  # a metric unlike the posterior's precision: a non-trivial flow
    ex["mhmc/w_version"][0] += 1
    met = mv._metric(state, 0, ex)
    rng = np.random.default_rng(8)
    z, zb = rng.standard_normal(state.f[0].size), np.zeros(0)
    errs = [abs(mv.integrate(state, 0, met, 1.2 / k, k, z, zb)[0]) for k in (4, 8, 16)]
    assert errs[0] > 1e-4
    for a, b in itertools.pairwise(errs):
        assert 3.0 < a / b < 5.5, errs


def test_time_reversal_returns_to_the_start():
    """Leapfrog is reversible: from the end with negated momentum it retraces to the start."""
    model = _poisson_model(n=5)
    state = init_state(model, chain_rngs(6, 1))
    mv = ManifoldHMC(model)
    met = mv._metric(state, 0, mv._extras(state))
    f0, b0 = state.f[0].reshape(-1), state.beta[0]
    eps, k = 0.2, 7

    def run(f, b, v, vb):
        _, _, gf, gb = mv._log_target(state, 0, met, f, b)
        for _ in range(k):
            v = v + 0.5 * eps * met.factor.solve(gf)
            vb = vb + 0.5 * eps * gb / met.g_beta
            f, b = f + eps * v, b + eps * vb
            _, _, gf, gb = mv._log_target(state, 0, met, f, b)
            v = v + 0.5 * eps * met.factor.solve(gf)
            vb = vb + 0.5 * eps * gb / met.g_beta
        return f, b, v, vb

    rng = np.random.default_rng(2)
    v0 = met.factor.solve_lt_pt(rng.standard_normal(f0.size))
    vb0 = rng.standard_normal(b0.size) / np.sqrt(met.g_beta)
    f1, b1, v1, vb1 = run(f0, b0, v0, vb0)
    f2, b2, v2, vb2 = run(f1, b1, -v1, -vb1)
    np.testing.assert_allclose(-vb2, vb0, atol=1e-9)
    np.testing.assert_allclose(f2, f0, atol=1e-9)
    np.testing.assert_allclose(b2, b0, atol=1e-9)
    np.testing.assert_allclose(-v2, v0, atol=1e-9)
    # the move's own integrator from the same momentum noise ends at the same point
    rng = np.random.default_rng(2)
    z = rng.standard_normal(f0.size)
    zb = rng.standard_normal(b0.size)
    _, new = mv.integrate(state, 0, met, eps, k, z, zb)
    np.testing.assert_allclose(new[0], f1, atol=1e-9)
    np.testing.assert_allclose(new[1], b1, atol=1e-9)


def _exact_draws(model, mean, n: int, seed: int):
    """A state of ``n`` chains holding exact posterior draws of the Gaussian case's field."""
    q = model.prior.precision_matrix().toarray()
    prec = q.copy()
    idx = model.state_index
    prec[idx, idx] += model.likelihood.aux_obs  # the observations' noise precisions
    f = np.random.default_rng(seed).multivariate_normal(mean, np.linalg.inv(prec), size=n)
    state = init_state(model, chain_rngs(seed, n))
    f = f.reshape(state.f.shape)
    ll = loglik_at(model, f, state.beta, [state.theta_of(c) for c in range(n)])
    white = np.stack([state.priors[c].whiten(f[c:c + 1])[0] for c in range(n)])
    return state._replace(f=f, white=white, loglik=np.asarray(ll, dtype=float))


@pytest.mark.slow
def test_transitions_leave_the_exact_posterior_invariant():
    """Exact draws moved by 3 transitions are still exact: iid z-tests of every cell's mean
    and variance (Bonferroni over 2 × 49 tests at ``FALSE_FAILURE_RATE``).

    Planted bug (the end point's kinetic energy as ½|v|² instead of ½ vᵀGv): max |z| 8.6
    against a critical 4.41; the arbitrary-start test below: 6.1 against 3.93.
    """
    model, mean, sd = _gaussian_case()
    n = 2000
    state = _exact_draws(model, mean, n, seed=21)
    mv = ManifoldHMC(model, step_size=0.8, trajectory=3.0)  # 2-6 leapfrog steps
    rngs = chain_rngs(22, n)
    acc = []
    for _ in range(3):
        state, info = mv.step(state, rngs)
        acc.append(info["accepted"].mean())
    assert 0.3 < np.mean(acc) < 0.999  # the test moves the draws and rejects some
    x = state.f.reshape(n, -1)
    crit = stats.norm.ppf(1 - FALSE_FAILURE_RATE / (2 * 2 * x.shape[1]))
    z_mean = (x.mean(0) - mean) / (sd / np.sqrt(n))
    z_var = (x.var(0, ddof=1) / sd ** 2 - 1.0) / np.sqrt(2.0 / (n - 1))
    assert np.abs(z_mean).max() < crit, np.abs(z_mean).max()
    assert np.abs(z_var).max() < crit, np.abs(z_var).max()


@pytest.mark.slow
def test_chains_from_an_arbitrary_start_find_the_exact_posterior():
    """4 chains × (200 + 1000) trajectories from the usual start, ε fixed at 1 (the metric is
    exact here, so dual averaging meets the stability cliff at ε = 2: docs/manifold.md);
    means and sds of 6 cells within their MCSE (ArviZ; Bonferroni at ``FALSE_FAILURE_RATE``)."""
    model, mean, sd = _gaussian_case()
    rngs = chain_rngs(17, 4)
    state = init_state(model, rngs)
    sweep = Gibbs(None, ManifoldHMC(model, step_size=1.0), n_latent=1)
    draws = []
    for i in range(1200):
        state, _ = sweep.step(state, rngs)
        if i >= 200:
            draws.append(state.f.reshape(4, -1).copy())
    assert_cell_moments(np.stack(draws, axis=1), mean, sd)


def test_a_gibbs_sweep_runs_it_and_counts_gradients():
    model = _poisson_model(n=5)
    state = init_state(model, chain_rngs(9, 2))
    sweep = Gibbs(None, ManifoldHMC(model, n_tune=5, trajectory=1.0), n_latent=1)
    s1, info = sweep.step(state, chain_rngs(9, 2))
    assert s1.f.shape == state.f.shape and np.all(np.isfinite(s1.loglik))
    # a trajectory of ceil(T · U(0.5, 1.5) / ε) leapfrog steps: one gradient each, plus the start's
    n_steps = info["n_loglik"] - 1
    eps = info["step_size"]
    assert np.all(n_steps >= np.ceil(0.5 / eps)) and np.all(n_steps <= np.ceil(1.5 / eps))
    s2, _ = Gibbs(None, ManifoldHMC(model, n_tune=5, trajectory=1.0), n_latent=1).step(
        state, chain_rngs(9, 2))
    np.testing.assert_array_equal(s1.f, s2.f)  # same seed, same draws
    assert "mhmc/log_eps" in s1.extras and "mmala/log_eps" not in s1.extras


def test_bad_arguments_are_refused_by_name():
    model = _poisson_model(n=4, covariates=False)
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(InvalidParameterError, match="trajectory"):
            ManifoldHMC(model, trajectory=bad)
    for bad in (0, -3):
        with pytest.raises(InvalidParameterError, match="max_steps"):
            ManifoldHMC(model, max_steps=bad)
    with pytest.raises(InvalidParameterError, match="step_size"):
        ManifoldHMC(model, step_size=-0.1)
