"""Simplified manifold MALA (samplers.manifold): metric, proposal density, exactness, refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from lattice_lgm import Lattice
from lattice_lgm.covariance import Matern
from lattice_lgm.errors import InvalidParameterError
from lattice_lgm.likelihoods import Gaussian, Poisson
from lattice_lgm.models import LatentGaussianModel
from lattice_lgm.priors import CirculantPrior, GMRFPrior
from lattice_lgm.samplers import Gibbs, chain_rngs, init_state
from lattice_lgm.samplers.manifold import PREFIX, ManifoldMALA

from .cases import HAS_CHOLMOD

pytestmark = pytest.mark.skipif(not HAS_CHOLMOD, reason="needs scikit-sparse (CHOLMOD)")

#: family-wise probability that the statistical test fails on a correct sampler (Bonferroni
#: over its z-tests of means and sds)
FALSE_FAILURE_RATE = 1e-3


def _poisson_model(n: int = 10, covariates: bool = True) -> LatentGaussianModel:
    rng = np.random.default_rng(3)
    lat = Lattice((n, n), spacing=1.0)
    prior = GMRFPrior.matern(lat, sd=1.0, range=3.0, alpha=2, pad=2)
    y = rng.poisson(2.0, size=(n, n))
    x = rng.standard_normal((1, n, n)) if covariates else None
    return LatentGaussianModel(prior, Poisson(y, exposure=1.0), mean=0.5, covariates=x)


def _dense_log_target(model, theta, f, b):
    """log π(f, β | θ, y) (up to a constant) by dense algebra."""
    q = model.prior.precision_matrix().toarray()
    eta = model.base_obs(theta) + f[model.state_index] + b @ model.covariates_obs
    lik = model.likelihood
    ll = float(np.sum(lik.y_obs * (eta + lik.aux_obs) - np.exp(eta + lik.aux_obs)))
    return ll - 0.5 * f @ q @ f - 0.5 * float(np.sum(b * b / model.beta_sd ** 2))


def test_the_metric_factor_solves_as_a_dense_solve():
    model = _poisson_model()
    state = init_state(model, chain_rngs(1, 1))
    mv = ManifoldMALA(model)
    ex = mv._extras(state)
    met = mv._metric(state, 0, ex)
    g = met.q.toarray() + np.diag(met.w)
    assert np.all(met.w[model.state_index] > 0) and met.w.sum() == pytest.approx(
        ex[PREFIX + "w"][0].sum())
    b = np.random.default_rng(0).standard_normal((len(g), 3))
    np.testing.assert_allclose(met.factor.solve(b), np.linalg.solve(g, b), rtol=1e-9, atol=1e-12)
    s = met.factor.solve_lt_pt(np.eye(len(g)))  # G^{-1/2}: S Sᵀ = G⁻¹
    np.testing.assert_allclose(s @ s.T @ g, np.eye(len(g)), atol=1e-8)
    # the prior's own quadratic form: the sparse Q is the spectral engine's Q
    f = state.f[0].reshape(-1)
    np.testing.assert_allclose(f @ met.q @ f, float(model.prior.quad_form(state.f)[0]),
                               rtol=1e-9)
    # cached while θ and w are unchanged, refactored when w changes
    assert mv._metric(state, 0, ex) is met
    ex[PREFIX + "w_version"][0] += 1
    assert mv._metric(state, 0, ex) is not met


def test_gradient_matches_finite_differences():
    model = _poisson_model()
    state = init_state(model, chain_rngs(2, 1))
    mv = ManifoldMALA(model)
    met = mv._metric(state, 0, mv._extras(state))
    f, b = state.f[0].reshape(-1), state.beta[0]
    theta = state.theta_of(0)
    lp, _, gf, gb = mv._log_target(state, 0, met, f, b)
    rng = np.random.default_rng(1)
    for _ in range(3):
        v, vb, h = rng.standard_normal(f.size), rng.standard_normal(b.size), 1e-5
        fd = (_dense_log_target(model, theta, f + h * v, b + h * vb)
              - _dense_log_target(model, theta, f - h * v, b - h * vb)) / (2 * h)
        assert gf @ v + gb @ vb == pytest.approx(fd, rel=1e-6, abs=1e-6)
    assert lp - _dense_log_target(model, theta, f, b) == pytest.approx(
        float(state.loglik[0]) - (_dense_log_target(model, theta, f, b) + 0.5 * f @ met.q @ f
                                  + 0.5 * float(np.sum(b * b / model.beta_sd ** 2))), abs=1e-8)


def test_acceptance_is_the_mh_ratio_with_the_reverse_proposal():
    """The move's acceptance probability against dense Gaussian proposal densities."""
    model = _poisson_model(n=6)
    state = init_state(model, chain_rngs(3, 1))
    mv = ManifoldMALA(model)
    met = mv._metric(state, 0, mv._extras(state))
    theta = state.theta_of(0)
    g = met.q.toarray() + np.diag(met.w)
    gb = np.diag(met.g_beta)
    gfull = np.block([[g, np.zeros((len(g), len(gb)))], [np.zeros((len(gb), len(g))), gb]])
    cov = np.linalg.inv(gfull)
    x0 = np.concatenate([state.f[0].reshape(-1), state.beta[0]])
    n_f = len(g)

    def mu(x, eps):
        _, _, gf_, gb_ = mv._log_target(state, 0, met, x[:n_f], x[n_f:])
        return x + 0.5 * eps * eps * cov @ np.concatenate([gf_, gb_])

    checked = 0
    for seed, eps in ((0, 1.5), (1, 2.0), (2, 2.5), (3, 0.7)):
        _, p, (f1, b1, _), _ = mv._chain(state, 0, np.random.default_rng(seed), met, eps)
        x1 = np.concatenate([f1, b1])
        fwd = stats.multivariate_normal(mu(x0, eps), eps * eps * cov).logpdf(x1)
        rev = stats.multivariate_normal(mu(x1, eps), eps * eps * cov).logpdf(x0)
        log_a = (_dense_log_target(model, theta, f1, b1)
                 - _dense_log_target(model, theta, x0[:n_f], x0[n_f:]) + rev - fwd)
        assert p == pytest.approx(min(1.0, math.exp(log_a)), rel=1e-6, abs=1e-12)
        checked += p < 1
    assert checked >= 2  # the ratio itself, not only its clipping at 1, was compared


def _gaussian_case(n: int = 5):
    rng = np.random.default_rng(11)
    lat = Lattice((n, n), spacing=1.0)
    prior = GMRFPrior.matern(lat, sd=1.0, range=2.0, alpha=2, pad=1)
    noise = 0.6
    y = rng.normal(0.0, 1.2, size=(n, n))
    model = LatentGaussianModel(prior, Gaussian(y, noise_sd=noise), mean=0.2)
    q = prior.precision_matrix().toarray()
    p = q.copy()
    idx = model.state_index
    p[idx, idx] += 1.0 / noise ** 2
    rhs = np.zeros(len(q))
    rhs[idx] = (model.likelihood.y_obs - 0.2) / noise ** 2
    cov = np.linalg.inv(p)
    return model, cov @ rhs, np.sqrt(np.diag(cov))


def _mcse(az, v: np.ndarray, method: str) -> float:
    """ArviZ's MCSE of the mean; of the sd by the delta method on ArviZ's ESS of the squared
    deviations (``az.mcse(method="sd")`` raises a TypeError with Numba present)."""
    if method == "mean":
        return float(np.asarray(az.mcse(v, method="mean")).reshape(-1)[0])
    d2 = (v - v.mean()) ** 2
    mcse_var = math.sqrt(d2.var() / float(az.ess(d2, method="mean")))
    return mcse_var / (2.0 * math.sqrt(d2.mean()))


@pytest.mark.slow
def test_posterior_moments_of_a_gaussian_model_match_the_exact_posterior():
    """4 chains × 1500 updates; means and sds of 6 state cells within MCSE (ArviZ)."""
    model, mean, sd = _gaussian_case()
    rngs = chain_rngs(7, 4)
    state = init_state(model, rngs)
    sweep = Gibbs(None, ManifoldMALA(model, n_tune=300), n_latent=1)
    draws = []
    for i in range(1800):
        state, _ = sweep.step(state, rngs)
        if i >= 300:
            draws.append(state.f.reshape(4, -1).copy())
    assert_cell_moments(np.stack(draws, axis=1), mean, sd)


def assert_cell_moments(x: np.ndarray, mean: np.ndarray, sd: np.ndarray) -> None:
    """Means and sds of 6 cells of ``x`` (chains, draws, cells) within their MCSE (ArviZ),
    Bonferroni over the 12 z-tests at ``FALSE_FAILURE_RATE``."""
    import arviz as az

    cells = np.linspace(0, x.shape[2] - 1, 6).astype(int)
    crit = stats.norm.ppf(1 - FALSE_FAILURE_RATE / (2 * 2 * len(cells)))
    for j in cells:
        v = x[:, :, j]
        z_mean = (v.mean() - mean[j]) / _mcse(az, v, "mean")
        z_sd = (v.std() - sd[j]) / _mcse(az, v, "sd")
        print(f"cell {j}: z mean {z_mean:+.2f}, z sd {z_sd:+.2f} (critical {crit:.2f})")
        assert abs(z_mean) < crit, (j, z_mean)
        assert abs(z_sd) < crit, (j, z_sd)


def test_bad_arguments_are_refused_by_name():
    model = _poisson_model(n=4, covariates=False)
    for bad in (0.0, -0.1, float("nan"), float("inf")):
        with pytest.raises(InvalidParameterError, match="step_size"):
            ManifoldMALA(model, step_size=bad)
    for bad in (0.0, 1.0, float("nan")):
        with pytest.raises(InvalidParameterError, match="target_accept"):
            ManifoldMALA(model, target_accept=bad)
    with pytest.raises(InvalidParameterError, match="n_tune"):
        ManifoldMALA(model, n_tune=-1)
    with pytest.raises(InvalidParameterError, match="n_steps"):
        ManifoldMALA(model).steps(init_state(model, chain_rngs(0, 1)), chain_rngs(0, 1), 0)
    lat = Lattice((8,), spacing=1.0)
    circ = CirculantPrior(lat, Matern(1.5, sd=1.0, range=2.0), max_range=4.0)
    lgm = LatentGaussianModel(circ, Gaussian(np.zeros(8), noise_sd=1.0))
    with pytest.raises(InvalidParameterError, match="sparse precision"):
        ManifoldMALA(lgm)
