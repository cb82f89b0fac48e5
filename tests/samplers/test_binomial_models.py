"""Binomial likelihoods in the samplers: elliptical slice sampling against exact quadrature,
and the hyperparameter moves and joint HMC run on them.

The statistical check: a dense prior with independent cells makes the posterior a product of
1-D site posteriors ``N(f; 0, s²) Binomial(y; n, p(μ + f))``, each known by quadrature (written
with ``scipy.stats.binom``, apart from the Numba site functions).  Chains started at exact
posterior draws (inverse CDF) stay exact draws under a correct sampler on a correct
likelihood (an exact test, whatever the mixing); after the updates each cell's draws are
KS-tested against its CDF, Bonferroni to ``ALPHA`` per test function.  Two such functions
(logit, probit): the module fails falsely with probability ≤ 2e-4 per run.  A third runs the
same check on the likelihood with the ``(n − y)`` factor dropped and must see it (p-values
measured below 1e-30; not counted in the rate).  Seeds are fixed and were not tuned.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, special, stats

from lattice_lgm.likelihoods import Binomial
from lattice_lgm.models import LatentGaussianModel
from lattice_lgm.priors import DensePrior
from lattice_lgm.samplers import (
    EllipticalSlice,
    Gibbs,
    HyperMove,
    JointHMC,
    chain_rngs,
    init_state,
    representations_for,
    state_from_fields,
)

from .cases import hyperpriors, make_prior

#: family-wise false-failure rate of this module per run (module docstring); summed by conftest.py
FALSE_FAILURE_RATE = 2e-4

ALPHA = 1e-4
# (successes, trials) per cell: interior, none of 4, all of 6, no trials, one of 2, 12 of 40
Y = np.array([3.0, 0.0, 6.0, 0.0, 1.0, 12.0])
TRIALS = np.array([10.0, 4.0, 6.0, 0.0, 2.0, 40.0])
SD = np.array([1.5, 1.0, 2.0, 1.2, 0.7, 1.5])
MEAN = 0.3
N_CHAINS, N_STEPS = 2000, 20


def _site_posteriors(link: str, y: np.ndarray, n: np.ndarray):
    """Per cell, a grid of f and the exact posterior CDF there (Simpson's rule, cumulative)."""
    out = []
    for yi, ni, si in zip(y, n, SD, strict=True):
        f = np.linspace(-12 * si, 12 * si, 24_001)
        eta = MEAN + f
        p = special.expit(eta) if link == "logit" else stats.norm.cdf(eta)
        with np.errstate(divide="ignore"):
            lp = stats.norm.logpdf(f, scale=si) + stats.binom.logpmf(yi, ni, p)
        w = np.exp(lp - lp.max())
        cdf = integrate.cumulative_simpson(w, x=f, initial=0.0)
        out.append((f, cdf / cdf[-1]))
    return out


def _exact_draws(posts, rng: np.random.Generator, n: int) -> np.ndarray:
    u = rng.random((n, len(posts)))
    return np.stack([np.interp(u[:, j], c, f) for j, (f, c) in enumerate(posts)], axis=1)


def _ess_draws(link: str, trials: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Start at exact draws of the true posterior; N_STEPS elliptical slice updates of the
    model with ``trials``; (start, end) fields ``(N_CHAINS, 6)``."""
    prior = DensePrior.from_matrix(np.diag(SD**2), jitter=0.0)
    model = LatentGaussianModel(prior, Binomial(Y, trials, link=link), mean=MEAN)
    rngs = chain_rngs(seed, N_CHAINS)
    f0 = _exact_draws(_site_posteriors(link, Y, TRIALS), np.random.default_rng(seed), N_CHAINS)
    state = state_from_fields(model, f0, [{}] * N_CHAINS, rngs)
    step = EllipticalSlice(model)
    for _ in range(N_STEPS):
        state, _ = step.step(state, rngs)
    eta = prior.to_window(state.f) + MEAN
    np.testing.assert_allclose(state.loglik, model.likelihood.loglik(eta), rtol=1e-10)
    return f0, prior.to_window(state.f).reshape(N_CHAINS, -1)


def _check(link: str, draws: np.ndarray) -> None:
    posts = _site_posteriors(link, Y, TRIALS)
    p = [stats.kstest(draws[:, j], lambda x, f=f, c=c: np.interp(x, f, c)).pvalue
         for j, (f, c) in enumerate(posts)]
    assert min(p) > ALPHA / len(posts), f"KS p-values per cell {p}"


@pytest.mark.statistical
@pytest.mark.parametrize("link", ["logit", "probit"])
def test_ess_keeps_the_exact_binomial_posterior(link):
    """Six cells (interior, y = 0, y = n, n = 0, small and large n): every cell's draws after
    20 updates are KS-consistent with its exact posterior, and the chains moved."""
    f0, draws = _ess_draws(link, TRIALS, seed=50 + (link == "probit"))
    assert np.mean(draws != f0) > 0.99
    _check(link, draws)


@pytest.mark.statistical
def test_the_check_sees_a_dropped_failure_factor():
    """The deliberate bug: ``n − y`` failures counted as one (``trials = min(n, y + 1)``, as
    if the ``(n − y)`` factor were dropped from ℓ): the check fails."""
    _, draws = _ess_draws("logit", np.minimum(TRIALS, Y + 1.0), seed=52)
    with pytest.raises(AssertionError, match="KS p-values"):
        _check("logit", draws)


# -- the hyperparameter moves and joint HMC run on a binomial likelihood -------------------------


def _binomial_model(backend: str, link: str) -> LatentGaussianModel:
    prior = make_prior(backend)
    rng = np.random.default_rng(53)
    n = rng.integers(0, 6, size=prior.shape).astype(float)
    n[:2] = (0.0, 5.0)
    y = rng.binomial(n.astype(int), 0.4).astype(float)
    return LatentGaussianModel(prior, Binomial(y, n, link=link), hyperpriors=hyperpriors())


@pytest.mark.parametrize("link", ["logit", "probit"])
@pytest.mark.parametrize(("backend", "rep"), [("dense", "surr-site"), ("dense", "post-taylor"),
                                              ("circulant", "surr-scalar")])
def test_hyper_moves_run_on_a_binomial_likelihood(backend, rep, link):
    """Murray & Adams's surrogate-data moves (site fits; the Taylor fit; the circulant's scalar
    surrogate) with zero-trial cells in the data: the sweeps run, θ stays finite and the
    cached log-likelihood is the likelihood's.  Binomial sites get moment fits by default."""
    model = _binomial_model(backend, link)
    rngs = chain_rngs(54, 3)
    state = init_state(model, rngs)
    assert rep in representations_for(model.prior)
    move = HyperMove(model, rep)
    assert move.site_method == "moments"
    sweep = Gibbs(move, EllipticalSlice(model), n_latent=1)
    for _ in range(2):
        state, info = sweep.step(state, rngs)
    assert np.all(info["n_cov"] > 0)
    for k in ("sd", "range"):
        assert np.all(np.isfinite(state.theta[k])) and np.all(state.theta[k] > 0)
    eta = model.prior.to_window(state.f)
    np.testing.assert_allclose(state.loglik, model.likelihood.loglik(eta), rtol=1e-10)


@pytest.mark.parametrize("link", ["logit", "probit"])
def test_joint_hmc_runs_on_a_binomial_likelihood(link):
    """Joint HMC's compiled gradient reaches the binomial sites through their kind."""
    model = _binomial_model("circulant", link)
    rngs = chain_rngs(55, 2)
    state = init_state(model, rngs)
    move = JointHMC(model, n_tune=0, step_size=0.05)
    for _ in range(3):
        state, info = move.step(state, rngs)
    assert np.all(info["accept_prob"] > 0.0)
    assert np.all(np.isfinite(state.loglik)) and np.all(np.isfinite(state.f))
