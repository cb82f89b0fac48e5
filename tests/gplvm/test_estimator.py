"""The importance-sampling estimate of ``p(Y | X, ξ)`` (Gadd et al., eq. 6).

* Unbiasedness of ``p̃`` (not ``log p̃``): on a GPLVM with ``N = 2``, ``k_z = 1`` the likelihood
  depends on ``Z`` only through ``d = z₁ − z₂ ~ N(0, v_d)``, so ``p(Y | X, ξ)`` is a 1-D integral
  computed by adaptive quadrature to ~1e-12 relative.  Over ``R = 1000`` independent estimates
  with ``Q = 5`` the mean of ``p̃/p`` is 1 within 4 Monte Carlo standard errors (the SE from the
  replicates' own spread; the ratio's variance is finite because ``q``'s covariance exceeds half
  the prior's).  Two-sided 4-SE z-test: false-failure probability 6.3e-5 (normal approximation;
  the ratio's spread, 0.33, makes the mean of 1000 close to normal).
* ``ISEstimate.log_var`` (delta method) against the spread of ``log p̃`` over ``R = 200``
  replicates at ``Q = 100``: their ratio is within 0.45 of 1.  The sample variance's relative SE
  is ``√(2/(R−1)) = 0.10`` for near-normal ``log p̃`` (its spread here is 0.05), so 0.45 is 4.5
  SE less the delta method's ``O(1/Q)`` bias: false failure ≤ 1e-5.
* Exactness: ``q`` equal to the exact posterior of a linear-Gaussian toy gives equal weights,
  ``log p̃ = log p(y)`` to round-off, ``ESS = Q`` and ``log_var = 0`` (deterministic).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import multivariate_normal as mvn
from threadpoolctl import threadpool_limits

from lattice_lgm.errors import InvalidParameterError, ShapeMismatchError
from lattice_lgm.gplvm.density import GaussianQ
from lattice_lgm.gplvm.estimator import importance_estimate, log_marginal_estimate
from lattice_lgm.gplvm.kernels import GPLVMHyper, k_z
from tests.gplvm._two_points import library_marginal

#: family-wise false-failure rate per run (union bound): 6.3e-5 (unbiasedness) + 1e-5 (log_var)
FALSE_FAILURE_RATE = 7.3e-5

H = GPLVMHyper(np.array([1.5]), 1.2, np.array([2.0]), 5.0)
X = np.array([[0.0], [0.8]])
Y = np.array([[0.9, -0.3, 0.5], [-0.7, 0.4, 0.6]])
EPS = 1e-3


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():
    """2×2 factorisations: BLAS threads only spin against each other (lattice_lgm.threads)."""
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def _exact_marginal() -> float:
    """``p(Y | X, ξ) = ∫ p(Y | d) N(d | 0, v_d) dd`` by adaptive quadrature."""
    return library_marginal(Y, X, H, EPS)


def _q() -> GaussianQ:
    kz = k_z(X, None, H.sigma, EPS)
    return GaussianQ(np.array([[0.3], [-0.2]]), (0.9 * kz + 0.05 * np.eye(2))[None])


@pytest.mark.statistical
def test_the_estimate_of_p_not_log_p_is_unbiased():
    p = _exact_marginal()
    rng, q = np.random.default_rng(20240601), _q()
    ratio = np.exp([log_marginal_estimate(Y, X, H, q, 5, rng, EPS).log_p_hat
                    for _ in range(1000)]) / p
    se = ratio.std(ddof=1) / np.sqrt(ratio.size)
    assert abs(ratio.mean() - 1.0) < 4 * se, (ratio.mean(), se)


@pytest.mark.statistical
def test_the_delta_method_variance_of_log_p_hat():
    rng, q = np.random.default_rng(11), _q()
    est = [log_marginal_estimate(Y, X, H, q, 100, rng, EPS) for _ in range(200)]
    empirical = np.var([e.log_p_hat for e in est], ddof=1)
    predicted = np.mean([e.log_var for e in est])
    assert abs(predicted / empirical - 1.0) < 0.45, (predicted, empirical)
    assert all(1.0 <= e.ess <= 100.0 for e in est)


def test_q_equal_to_the_posterior_gives_equal_weights():
    """Linear-Gaussian toy: z ~ N(0, τ²I), y | z ~ N(z, s²I); q = p(z | y) exactly."""
    tau2, s2, n = 1.7, 0.4, 4
    y = np.array([0.3, -1.2, 0.8, 2.0])
    post_var = tau2 * s2 / (tau2 + s2)
    q = GaussianQ((tau2 / (tau2 + s2) * y)[:, None], (post_var * np.eye(n))[None])

    def log_joint(z):
        z = z[:, :, 0]
        return (mvn(np.zeros(n), tau2 * np.eye(n)).logpdf(z)
                + mvn(np.zeros(n), s2 * np.eye(n)).logpdf(y - z))

    est = importance_estimate(log_joint, q, 64, np.random.default_rng(3))
    exact = mvn(np.zeros(n), (tau2 + s2) * np.eye(n)).logpdf(y)
    np.testing.assert_allclose(est.log_weights, exact, rtol=0, atol=1e-11)
    assert est.log_p_hat == pytest.approx(exact, abs=1e-11)
    assert est.ess == pytest.approx(64.0, rel=1e-12)
    assert est.log_var == pytest.approx(0.0, abs=1e-20)


def test_same_seed_same_estimate_and_mu_s_pairs_work():
    q = _q()
    a = log_marginal_estimate(Y, X, H, q, 7, np.random.default_rng(4), EPS)
    b = log_marginal_estimate(Y, X, H, (q.mu, q.S), 7, np.random.default_rng(4), EPS)
    np.testing.assert_array_equal(a.log_weights, b.log_weights)
    assert a.log_weights.shape == (7,) and np.isnan(
        log_marginal_estimate(Y, X, H, q, 1, np.random.default_rng(4), EPS).log_var)


class _NeverSample:
    mu = np.zeros((2, 1))

    def sample(self, rng, n):  # pragma: no cover - must not be reached
        raise AssertionError("sampled before the inputs were checked")

    def log_density(self, z):  # pragma: no cover
        raise AssertionError


@pytest.mark.parametrize("kwargs, err, msg", [
    (dict(n_importance=0), InvalidParameterError, "n_importance=0 must be an integer >= 1"),
    (dict(n_importance=2.5), InvalidParameterError, "n_importance=2.5"),
    (dict(x=np.zeros((3, 1))), ShapeMismatchError, r"x has shape \(3, 1\); expected \(2, 1\)"),
    (dict(y=np.array([[np.inf], [0.0]])), InvalidParameterError, "y has a non-finite value inf"),
    (dict(jitter=np.nan), InvalidParameterError, "jitter=nan"),
    (dict(q=object()), InvalidParameterError, "neither a \\(mu, S\\) pair"),
    (dict(hyper=GPLVMHyper(np.array([1.0]), 1.0, np.array([1.0, 1.0]), 1.0)),
     ShapeMismatchError, r"q.mu has shape \(2, 1\).*k_z = 2"),
])
def test_bad_inputs_raise_before_any_draw(kwargs, err, msg):
    args = dict(y=Y, x=X, hyper=H, q=_NeverSample(), n_importance=3,
                rng=np.random.default_rng(0), jitter=EPS)
    args.update(kwargs)
    with pytest.raises(err, match=msg):
        log_marginal_estimate(**args)
