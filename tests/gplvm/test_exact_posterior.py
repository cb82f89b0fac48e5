"""The supervised GPLVM's default chain, end to end, against an exact posterior.

The model of :mod:`tests.gplvm._two_points` has ``p(Y | X, ξ)`` by quadrature, hence exact
posterior moments of ``η = log ξ``.  What runs is ``sample(SupervisedGPLVM(...))`` with every
default — the type-II MAP start overdispersed by its Laplace approximation, the correlated
pseudo-marginal chain, ``q`` fitted at each proposal, one block — so the test covers the
plumbing between the pieces that the unit tests check one at a time (the estimator's normals,
``q_at``, the hook, the checkpointed state), which the toy of ``test_pmmh`` does not.

Statistics: ``z = (mean − exact) / MCSE`` for ``E[η_i]`` and ``E[η_i²]`` (8 checks), MCSE from
ArviZ's multi-chain bulk ESS; a check fails at ``|z| > 5``: 5.7e-7 for a normal z, ≤ 1e-5
allowing ±20 % error in the ESS (as ``test_pmmh``).  Union bound over 8 checks: 8e-5.  The
deterministic tests (oracle, MAP stationarity, Laplace) cannot fail by chance.

Planted bugs (temporary patches, not committed; max |z| over the 8 checks): an estimate made at
the start's ``η`` instead of the proposal's — 45, fails; the estimator's ``log p(Z | X)``
without its log-determinant — 5.1, fails (only σ sees it, and the data barely inform σ); q's
draws from the transposed Cholesky factor — 2.7, passes: two points cannot see it
(``test_vb``'s draw test does).
"""

from __future__ import annotations

import numpy as np
import pytest

from lattice_lgm.errors import InvalidParameterError
from lattice_lgm.gplvm.kernels import GPLVMHyper
from lattice_lgm.gplvm.model import SupervisedGPLVM
from lattice_lgm.gplvm.vb import VBParams, elbo_and_grad, fit_vb
from lattice_lgm.runs import sample
from tests.gplvm._two_points import (
    JITTER,
    PRIOR_SD,
    X,
    Y,
    library_marginal,
    log_marginal,
    z_scores,
)

#: 8 two-sided 5-MCSE checks at ≤ 1e-5 each (module docstring), union bound
FALSE_FAILURE_RATE = 8e-5
Z_MAX = 5.0


@pytest.fixture(scope="module")
def model():
    return SupervisedGPLVM(X, Y, latent_dim=1, prior_sd=PRIOR_SD)


def test_the_oracle_is_the_library_s_likelihood_integrated():
    h = GPLVMHyper(np.array([1.3]), 0.7, np.array([2.0]), 3.0)
    exact = np.log(library_marginal(Y, X, h, JITTER))
    assert log_marginal(h.to_log()) == pytest.approx(exact, abs=1e-5)


def test_the_map_is_finite_where_ml_is_degenerate_and_stationary(model):
    """On two points ML sends θ → 0 (Y ignores Z) to L-BFGS-B's box; MAP-II stays inside the
    prior and is a stationary point of bound + log prior: ∂bound/∂η = η / prior_sd²."""
    ml, mp = model.ml_fit(), model.map_fit()
    assert ml.hyper.to_log()[2] == pytest.approx(-30.0)
    eta = mp.hyper.to_log()
    assert np.all(np.abs(eta) < 3 * PRIOR_SD)
    _, g = elbo_and_grad(model.y, model.x, mp.hyper,
                         VBParams(mp.mean_white, mp.log_lambda, mp.z_u), model.jitter)
    np.testing.assert_allclose(g.log_hyper, eta / PRIOR_SD**2, atol=2e-3)


def test_the_laplace_approximation_is_a_covariance_no_wider_than_the_prior(model):
    mode, cov = model.laplace()
    np.testing.assert_array_equal(mode, model.map_fit().hyper.to_log())
    np.testing.assert_allclose(cov, cov.T, rtol=0, atol=1e-12 * np.abs(cov).max())
    w = np.linalg.eigvalsh(cov)
    assert np.all(w > 0) and np.all(w <= PRIOR_SD**2 * (1 + 1e-12))
    # the data inform θ_S (exact posterior sd 0.54 against the prior's 0.7; Laplace 0.52)
    assert np.sqrt(cov[1, 1]) < 0.85 * PRIOR_SD
    again = SupervisedGPLVM(X, Y, latent_dim=1, prior_sd=PRIOR_SD).laplace()
    np.testing.assert_array_equal(again[1], cov)


@pytest.mark.parametrize(("kwargs", "match"), [
    (dict(prior_sd=1.0), "optimise_hyper=True"),
    (dict(prior_sd=-1.0, optimise_hyper=True), "prior_sd"),
])
def test_a_prior_for_the_fit_is_checked(kwargs, match):
    h = GPLVMHyper(np.array([1.0]), 1.0, np.array([1.0]), 1.0)
    with pytest.raises(InvalidParameterError, match=match):
        fit_vb(Y, X, h, **kwargs)


@pytest.mark.slow
@pytest.mark.statistical
def test_the_default_chain_matches_the_exact_posterior(model):
    tree = sample(model, chains=4, tune=300, draws=900, random_seed=20261128,
                  progressbar=False)
    post = tree["posterior"]
    eta = np.stack([np.log(post[k].values) for k in model.names], axis=-1)
    z = z_scores(eta)
    assert np.all(np.abs(z) < Z_MAX), z
