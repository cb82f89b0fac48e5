"""The Fisher–Laplace importance distribution (:mod:`lattice_lgm.gplvm.laplace`, decision 129).

All deterministic, with tolerances from finite-difference truncation, never last-bit values:

* the gradient of ``log p(Y, Z | X, ξ)`` against central differences of eqs. 1 and 2 as the
  density module computes them;
* the Fisher information against ``(k_y/2) tr(C⁻¹ ∂_iC C⁻¹ ∂_kC)`` with ``∂_iC`` from central
  differences of ``K_f`` — the rank-2 algebra of the module docstring checked against the
  definition; and, since the Fisher information is the expected outer product of the score,
  against the mean of ``s sᵀ`` over 2000 data sets drawn from the model at ``Z`` (a Monte
  Carlo check of the definition itself, tolerance 6 SE per entry over 2080 entries with
  Bonferroni: false failure < 2e-6);
* :class:`FullGaussianQ`'s density against scipy's, and its draws' whitening;
* the mode search raises the joint density and ends near a stationary point;
* unbiasedness of the estimate with ``q_L`` in the orbit mixture (the default's composition)
  on the two-point model of :mod:`tests.gplvm._two_points`, whose ``p(Y | X, ξ)`` is a
  quadrature: ``R = 1000`` estimates at ``Q = 6``, the mean of ``p̃/p`` within 4 SE of 1
  (false failure 6.3e-5).  At this ``ξ`` the Fisher term is a quarter of the prior's
  precision along ``z₁ − z₂`` (whitened eigenvalue 0.27 < 1), so the weights have finite
  variance and the SE means what it says (decision 129: not so in general).

Planted bugs that fail: the second Fisher term without ``C⁻¹_ab`` (tile of ones); the first
term with its ``U`` factors' indices swapped; ``from_normals`` with ``L⁻¹`` for ``L⁻ᵀ`` (the
whitening test; the two-point unbiasedness test cannot see it); ``log|L|`` scaled by 0.9 (the
unbiasedness test: mean ratio 1.115, 18 SE).  The slow end-to-end test of the default chain
against the two-point exact posterior (``test_exact_posterior``) passed with ``q_L`` in 268 s.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import multivariate_normal

from lattice_lgm.errors import InvalidParameterError, ShapeMismatchError
from lattice_lgm.gplvm.density import log_p_y_given_z, log_p_z_given_x
from lattice_lgm.gplvm.estimator import log_marginal_estimate
from lattice_lgm.gplvm.kernels import GPLVMHyper, k_f
from lattice_lgm.gplvm.laplace import (
    WIDEN_FLOOR,
    FullGaussianQ,
    joint_curvature,
    laplace_q,
    widened_precision,
)
from lattice_lgm.gplvm.orbit import OrbitMixture, orbit_transforms
from tests.gplvm import _two_points

FALSE_FAILURE_RATE = 2e-6 + 6.3e-5
JITTER = 1e-2  # a well-conditioned K_z: the Fisher part is P minus K_z⁻¹ computed apart


def _problem(n: int = 9, k_z: int = 2, k_y: int = 3, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = np.linspace(0.0, 3.0, n)[:, None]
    hyper = GPLVMHyper(np.array([0.8]), 1.3, np.array([0.9, 0.5])[:k_z], 12.0)
    z = rng.normal(size=(n, k_z))
    y = np.sin(x * np.arange(1, k_y + 1)) + 0.3 * rng.normal(size=(n, k_y))
    return x, y, hyper, z


def _joint(y, x, hyper, z):
    return float(log_p_y_given_z(y, z, hyper)[0] + log_p_z_given_x(z, x, hyper, JITTER)[0])


def test_value_and_gradient_against_central_differences():
    x, y, hyper, z = _problem()
    c = joint_curvature(y, x, hyper, z, JITTER)
    assert c.value == pytest.approx(_joint(y, x, hyper, z), rel=0, abs=1e-9)
    h = 1e-6
    fd = np.zeros_like(z)
    for idx in np.ndindex(*z.shape):
        e = np.zeros_like(z)
        e[idx] = h
        fd[idx] = (_joint(y, x, hyper, z + e) - _joint(y, x, hyper, z - e)) / (2 * h)
    assert np.allclose(c.grad, fd, rtol=1e-5, atol=1e-5 * np.abs(fd).max())


def _dk(z, hyper, h=1e-6):
    """∂K_f/∂z_(j,a) by central differences, in vec order: (N k_z, N, N)."""
    n, k = z.shape
    out = np.zeros((n * k, n, n))
    for j in range(k):
        for a in range(n):
            e = np.zeros_like(z)
            e[a, j] = h
            out[j * n + a] = (k_f(z + e, None, hyper.theta_s, hyper.theta)
                              - k_f(z - e, None, hyper.theta_s, hyper.theta)) / (2 * h)
    return out


def _fisher(y, x, hyper, z):
    """The Fisher part of the precision: P minus the prior's block-diagonal K_z⁻¹."""
    c = joint_curvature(y, x, hyper, z, JITTER)
    kz = np.exp(-0.5 * hyper.sigma[0] * (x - x.T) ** 2) + JITTER * np.eye(len(x))
    return c.precision - np.kron(np.eye(z.shape[1]), np.linalg.inv(kz))


def test_fisher_information_is_its_definition():
    x, y, hyper, z = _problem()
    n, k_y = y.shape
    cov = k_f(z, None, hyper.theta_s, hyper.theta) + np.eye(n) / hyper.beta
    ci = np.linalg.inv(cov)
    dk = _dk(z, hyper)
    want = 0.5 * k_y * np.einsum("ab,ibc,cd,kda->ik", ci, dk, ci, dk)
    got = _fisher(y, x, hyper, z)
    assert np.allclose(got, want, rtol=1e-6, atol=1e-6 * np.abs(want).max())


def test_fisher_information_is_the_expected_outer_product_of_the_score():
    """F = E[s sᵀ] over Y ~ p(Y | Z, ξ): the mean of 2000 outer products, 6 SE per entry."""
    x, y, hyper, z = _problem(n=8)
    n, k_y = y.shape
    cov = k_f(z, None, hyper.theta_s, hyper.theta) + np.eye(n) / hyper.beta
    chol = np.linalg.cholesky(cov)
    rng = np.random.default_rng(7)
    kz = np.exp(-0.5 * hyper.sigma[0] * (x - x.T) ** 2) + JITTER * np.eye(n)
    prior_grad = -(np.linalg.inv(kz) @ z).T.reshape(-1)
    scores = []
    for _ in range(2000):
        yy = (chol @ rng.standard_normal((n, k_y)))
        g = joint_curvature(yy, x, hyper, z, JITTER).grad.T.reshape(-1) - prior_grad
        scores.append(g)
    s = np.array(scores)
    outer = np.einsum("ri,rk->rik", s, s)
    mean, se = outer.mean(0), outer.std(0, ddof=1) / np.sqrt(len(s))
    got = _fisher(y, x, hyper, z)
    iu = np.triu_indices(got.shape[0])
    zscore = (mean - got)[iu] / se[iu]
    assert np.abs(zscore).max() < 6.0, np.abs(zscore).max()


def test_full_gaussian_density_and_draws():
    rng = np.random.default_rng(3)
    n, k = 4, 2
    a = rng.normal(size=(n * k, n * k))
    prec = a @ a.T + np.eye(n * k)
    mu = rng.normal(size=(n, k))
    q = FullGaussianQ(mu, prec)
    eps = rng.standard_normal((5, k, n))
    z = q.from_normals(eps)
    assert z.shape == (5, n, k)
    vec = z.transpose(0, 2, 1).reshape(5, -1)
    want = multivariate_normal(mu.T.reshape(-1), np.linalg.inv(prec)).logpdf(vec)
    assert np.allclose(q.log_density(z), want, rtol=0, atol=1e-9)
    # the draws are vec μ + L⁻ᵀ ε: L ᵀ(vec z − vec μ) gives the normals back
    w, c = q.whitener()
    assert np.allclose((vec - mu.T.reshape(-1)) @ w.T, eps.reshape(5, -1), atol=1e-10)
    assert np.allclose(q.log_density(z), c - 0.5 * (eps ** 2).sum(axis=(1, 2)), atol=1e-9)
    assert q.sample(rng, 3).shape == (3, n, k)


def test_the_mode_search_climbs_to_a_stationary_point():
    x, y, hyper, z = _problem(n=12)
    start = joint_curvature(y, x, hyper, z, JITTER)
    q0 = laplace_q(y, x, hyper, z, JITTER, mode_steps=0)
    assert np.array_equal(q0.mu, z)
    q = laplace_q(y, x, hyper, z, JITTER, mode_steps=30)
    end = joint_curvature(y, x, hyper, q.mu, JITTER)
    assert end.value > start.value + 1.0
    # Newton decrement gᵀP⁻¹g: from the start's to near zero
    dec = [float(c.grad.T.reshape(-1) @ np.linalg.solve(c.precision, c.grad.T.reshape(-1)))
           for c in (start, end)]
    assert dec[1] < 1e-3 * dec[0], dec


def test_observed_information_against_central_differences_of_the_gradient():
    """``observed`` is −∇² of the joint density: differences of the (checked) gradient."""
    x, y, hyper, z = _problem()
    c = joint_curvature(y, x, hyper, z, JITTER, observed=True)
    h = 1e-6
    fd = np.zeros_like(c.observed)
    n, k = z.shape
    for j in range(k):
        for a in range(n):
            e = np.zeros_like(z)
            e[a, j] = h
            gp = joint_curvature(y, x, hyper, z + e, JITTER).grad.T.reshape(-1)
            gm = joint_curvature(y, x, hyper, z - e, JITTER).grad.T.reshape(-1)
            fd[:, j * n + a] = -(gp - gm) / (2 * h)
    assert np.allclose(c.observed, fd, rtol=1e-5, atol=1e-5 * np.abs(fd).max())
    # away from the mode the observed information differs from the Fisher's
    assert np.abs(c.observed - c.precision).max() > 0.1 * np.abs(c.precision).max()
    assert joint_curvature(y, x, hyper, z, JITTER).observed is None


def _whitened_eigs(chol, m):
    w = np.linalg.solve(chol, np.linalg.solve(chol, m).T)
    return np.linalg.eigvalsh(0.5 * (w + w.T))


def test_widened_precision_is_below_both_curvatures():
    rng = np.random.default_rng(3)
    d = 12
    a = rng.normal(size=(d, d))
    prec = a @ a.T + d * np.eye(d)
    chol = np.linalg.cholesky(prec)
    basis = np.linalg.qr(rng.normal(size=(d, d)))[0]
    lam = np.array([5.0, 2.0, 1.5, 1.0, 0.8, 0.5, 0.3, 0.1, 0.05, 0.02, 0.011, 0.5])
    obs = chol @ (basis * lam) @ basis.T @ chol.T
    out = widened_precision(chol, obs)
    # in P's metric its eigenvalues are min(λ, 1); below P and below H (Loewner order)
    assert np.allclose(np.sort(_whitened_eigs(chol, out)), np.sort(np.minimum(lam, 1.0)))
    assert np.linalg.eigvalsh(prec - out).min() > -1e-9 * np.abs(prec).max()
    assert np.linalg.eigvalsh(obs - out).min() > -1e-9 * np.abs(prec).max()
    # H ≥ P: P itself; H ≤ P: H itself; an indefinite H: the floor
    assert np.allclose(widened_precision(chol, 2.0 * prec), prec)
    assert np.allclose(widened_precision(chol, 0.5 * prec), 0.5 * prec)
    neg = widened_precision(chol, obs - 0.5 * prec)
    assert _whitened_eigs(chol, neg).min() == pytest.approx(WIDEN_FLOOR, rel=1e-8)
    with pytest.raises(InvalidParameterError, match="floor"):
        widened_precision(chol, obs, floor=0.0)


def test_laplace_q_widened_and_fisher_share_the_mode():
    x, y, hyper, z = _problem(n=12)
    q_f = laplace_q(y, x, hyper, z, JITTER)
    q_w = laplace_q(y, x, hyper, z, JITTER, curvature="widened")
    assert np.array_equal(q_f.mu, q_w.mu)
    c = joint_curvature(y, x, hyper, q_f.mu, JITTER, observed=True)
    want = widened_precision(np.linalg.cholesky(c.precision), c.observed)
    got = q_w.chol_precision @ q_w.chol_precision.T
    assert np.allclose(got, want, rtol=1e-8, atol=1e-8 * np.abs(want).max())
    # wider than the Fisher form: a larger log-determinant of the covariance
    assert np.log(np.diag(q_w.chol_precision)).sum() < np.log(np.diag(q_f.chol_precision)).sum()


@pytest.mark.statistical
def test_the_estimate_with_q_l_in_the_orbit_mixture_is_unbiased():
    x, y = _two_points.X, _two_points.Y
    hyper = GPLVMHyper(np.array([0.3]), 1.0, np.array([1.0]), 20.0)
    jitter = _two_points.JITTER
    q_l = laplace_q(y, x, hyper, np.array([[0.5], [-0.5]]), jitter)
    assert abs(q_l.mu[0, 0]) > 1e-3  # the search moved off the symmetric start's image
    q = OrbitMixture(q_l, orbit_transforms(1, 2), 6)
    p = _two_points.library_marginal(y, x, hyper, jitter)
    rng = np.random.default_rng(20261128)
    ratio = np.exp([log_marginal_estimate(y, x, hyper, q, 6, rng, jitter).log_p_hat
                    for _ in range(1000)]) / p
    se = ratio.std(ddof=1) / np.sqrt(ratio.size)
    assert abs(ratio.mean() - 1.0) < 4 * se, (ratio.mean(), se)


def test_bad_inputs():
    x, y, hyper, z = _problem()
    with pytest.raises(InvalidParameterError, match="mode_steps"):
        laplace_q(y, x, hyper, z, JITTER, mode_steps=-1)
    with pytest.raises(InvalidParameterError, match="curvature='observed'"):
        laplace_q(y, x, hyper, z, JITTER, curvature="observed")
    with pytest.raises(ShapeMismatchError, match="precision"):
        FullGaussianQ(z, np.eye(3))
    with pytest.raises(ShapeMismatchError, match="eps"):
        FullGaussianQ(z, np.eye(z.size)).from_normals(np.zeros((2, 5, 5)))
    with pytest.raises(ShapeMismatchError, match="z has shape"):
        joint_curvature(y, x, hyper, z[:, :1], JITTER)
    with pytest.raises(ShapeMismatchError, match="x has shape"):
        laplace_q(y, x[:-1], hyper, z, JITTER)
    with pytest.raises(InvalidParameterError, match="y"):
        joint_curvature(np.where(np.eye(*y.shape) > 0, np.nan, y), x, hyper, z, JITTER)
