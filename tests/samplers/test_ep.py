"""Expectation propagation for probit GP classification (R&W Algorithm 3.5), against
quadrature: exact with one point, close on two, and a fixed point of its own updates."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special

from lattice_lgm.covariance import SquaredExponential
from lattice_lgm.errors import (
    ConvergenceError,
    InvalidDataError,
    InvalidParameterError,
    ShapeMismatchError,
)
from lattice_lgm.samplers.ep import (
    _posterior,
    _tilted,
    _update_site,
    expectation_propagation,
)


def _quadrature(K, y, m=801, width=8.0):
    """log p(y), posterior mean and covariance of f on a tensor grid (n ≤ 2)."""
    sd = np.sqrt(np.diag(K))
    axes = [np.linspace(-width * s, width * s, m) for s in sd]
    grids = np.meshgrid(*axes, indexing="ij")
    f = np.stack([g.ravel() for g in grids], axis=1)
    inv = np.linalg.inv(K)
    log_prior = (-0.5 * np.einsum("ij,jk,ik->i", f, inv, f)
                 - 0.5 * np.linalg.slogdet(2 * np.pi * K)[1])
    log_lik = special.log_ndtr((2 * np.asarray(y) - 1) * f).sum(axis=1)
    w = np.exp(log_prior + log_lik)
    cell = np.prod([a[1] - a[0] for a in axes])
    z = w.sum() * cell
    mean = (w[:, None] * f).sum(axis=0) * cell / z
    cov = np.einsum("i,ij,ik->jk", w, f - mean, f - mean) * cell / z
    return np.log(z), mean, cov


def test_one_point_is_exact():
    """One site: the tilted moments are the posterior's and Z_EP = Φ(y μ/√(1 + σ²))."""
    K = np.array([[2.5]])
    for y in (0, 1):
        ep = expectation_propagation(K, [y])
        log_z, mean, cov = _quadrature(K, [y], m=20001, width=10.0)
        assert ep.log_z == pytest.approx(log_z, abs=1e-7)
        assert ep.log_z == pytest.approx(float(special.log_ndtr(0.0)), abs=1e-12)
        assert ep.mean[0] == pytest.approx(mean[0], abs=1e-6)
        assert ep.cov[0, 0] == pytest.approx(cov[0, 0], abs=1e-6)


def test_two_points_close_to_quadrature():
    """Correlated pair with disagreeing labels: EP is an approximation, close here (its
    error on such problems is ~1e-3 in log Z; a wrong sign or a dropped term is ≥ 0.05)."""
    K = np.array([[3.0, 2.4], [2.4, 3.0]])
    y = [1, 0]
    ep = expectation_propagation(K, y)
    log_z, mean, cov = _quadrature(K, y)
    assert ep.log_z == pytest.approx(log_z, abs=0.01)
    np.testing.assert_allclose(ep.mean, mean, atol=0.03)
    np.testing.assert_allclose(ep.cov, cov, atol=0.05)


def test_the_fixed_point_matches_every_tilted_marginal():
    """At convergence q's marginal at each site has the tilted moments of its cavity
    (eq. 3.58 against eq. 3.59); and Σ = (K⁻¹ + S̃)⁻¹, μ = Σ ν̃."""
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 5, (30, 1))
    K = SquaredExponential(sd=2.0, lengthscale=1.0)(x) + 1e-8 * np.eye(30)
    y = (np.sin(2 * x[:, 0]) + 0.3 * rng.standard_normal(30) > 0).astype(float)
    ep = expectation_propagation(K, y, tol=1e-10)
    np.testing.assert_allclose(ep.cov, np.linalg.inv(np.linalg.inv(K) + np.diag(ep.tau_site)),
                               rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(ep.mean, ep.cov @ ep.nu_site, atol=1e-8)
    d = np.diag(ep.cov)
    tau_c, nu_c = 1 / d - ep.tau_site, ep.mean / d - ep.nu_site
    for i in range(30):
        _, m, v = _tilted(2 * y[i] - 1, nu_c[i] / tau_c[i], 1 / tau_c[i])
        assert m == pytest.approx(ep.mean[i], abs=1e-7)
        assert v == pytest.approx(d[i], rel=1e-6)
    assert np.all(ep.tau_site > 0) and 1 < ep.n_sweeps < 50


def test_the_rank_one_update_is_the_posterior_of_the_new_sites():
    """Eq. 3.70: after one site's update Σ and μ are (K⁻¹ + S̃)⁻¹ and Σ ν̃ of the new sites."""
    rng = np.random.default_rng(2)
    x = rng.uniform(0, 3, (6, 1))
    K = SquaredExponential(sd=1.5, lengthscale=0.8)(x) + 1e-6 * np.eye(6)
    tau, nu = rng.uniform(0.1, 2.0, 6), rng.normal(0, 1, 6)
    cov, mu, _ = _posterior(K, tau, nu)
    for i, s in ((2, 1.0), (4, -1.0)):
        cov, mu = _update_site(cov, tau, nu, i, s)
        want_cov, want_mu, _ = _posterior(K, tau, nu)
        np.testing.assert_allclose(cov, want_cov, atol=1e-10)
        np.testing.assert_allclose(mu, want_mu, atol=1e-10)


def test_q_is_a_gaussian_density():
    K = np.array([[1.0, 0.5], [0.5, 1.0]])
    ep = expectation_propagation(K, [1, 1])
    f = ep.sample(np.random.default_rng(1), 4)
    assert f.shape == (4, 2)
    from scipy import stats

    np.testing.assert_allclose(ep.logpdf(f), stats.multivariate_normal(ep.mean, ep.cov)
                               .logpdf(f), rtol=1e-10)


def test_bad_inputs_are_refused():
    K = np.eye(3)
    with pytest.raises(InvalidDataError, match=r"label 2\.0 at index 1"):
        expectation_propagation(K, [0, 2, 1])
    with pytest.raises(ShapeMismatchError, match="2 labels"):
        expectation_propagation(K, [0, 1])
    with pytest.raises(InvalidParameterError, match="square"):
        expectation_propagation(np.ones((3, 2)), [0, 1, 1])
    with pytest.raises(InvalidParameterError, match="symmetric"):
        expectation_propagation(np.triu(np.ones((3, 3))) + np.eye(3), [0, 1, 1])
    with pytest.raises(InvalidDataError, match="non-finite"):
        expectation_propagation(np.full((3, 3), np.nan), [0, 1, 1])
    with pytest.raises(InvalidParameterError, match="tol"):
        expectation_propagation(K, [0, 1, 1], tol=-1.0)
    with pytest.raises(ConvergenceError, match="max_sweeps=1"):
        expectation_propagation(K + 0.9, [0, 1, 1], max_sweeps=1)
