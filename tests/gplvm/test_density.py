"""The GPLVM's densities (Gadd et al., eqs. 1–2) and the Gaussian ``q`` against dense scipy.

Deterministic checks (no Monte Carlo tolerance): every batched value equals the sum over
columns of :func:`scipy.stats.multivariate_normal.logpdf` with the covariance built entry by
entry, to 1e-9 relative.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import multivariate_normal as mvn

from lattice_lgm.errors import InvalidParameterError, NotPositiveDefiniteError, ShapeMismatchError
from lattice_lgm.gplvm.density import GaussianQ, log_p_y_given_z, log_p_z_given_x, log_q
from lattice_lgm.gplvm.kernels import GPLVMHyper

N, KX, KZ, KY = 5, 2, 2, 3
HYPER = GPLVMHyper(np.array([0.7, 2.0]), 1.3, np.array([0.5, 3.0]), 4.0)


def _data(seed=0, n_draws=4):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((N, KY)), rng.uniform(0, 2, (N, KX)),
            rng.standard_normal((n_draws, N, KZ)))


def _kf_dense(z, h):
    k = np.empty((len(z), len(z)))
    for a in range(len(z)):
        for b in range(len(z)):
            k[a, b] = h.theta_s * np.exp(-0.5 * np.sum(h.theta * (z[a] - z[b]) ** 2))
    return k


def _kz_dense(x, h, eps):
    k = np.array([[np.exp(-0.5 * np.sum(h.sigma * (a - b) ** 2)) for b in x] for a in x])
    return k + eps * np.eye(len(x))


def test_eq1_matches_scipy_per_draw_and_feature():
    y, _, z = _data()
    got = log_p_y_given_z(y, z, HYPER)
    want = [sum(mvn(np.zeros(N), _kf_dense(zz, HYPER) + np.eye(N) / HYPER.beta).logpdf(y[:, i])
                for i in range(KY)) for zz in z]
    np.testing.assert_allclose(got, want, rtol=1e-9)
    assert got.shape == (4,)
    # a single (N, k_z) draw is a batch of one
    np.testing.assert_allclose(log_p_y_given_z(y, z[1], HYPER), [want[1]], rtol=1e-12)


def test_eq2_matches_scipy():
    _, x, z = _data(1)
    got = log_p_z_given_x(z, x, HYPER, jitter=1e-3)
    cov = _kz_dense(x, HYPER, 1e-3)
    want = [sum(mvn(np.zeros(N), cov).logpdf(zz[:, j]) for j in range(KZ)) for zz in z]
    np.testing.assert_allclose(got, want, rtol=1e-9)


def test_gaussian_q_log_density_and_draws():
    rng = np.random.default_rng(2)
    mu = rng.standard_normal((N, KZ))
    a = rng.standard_normal((KZ, N, N))
    S = a @ a.transpose(0, 2, 1) + 0.5 * np.eye(N)
    _, _, z = _data(3)
    want = [sum(mvn(mu[:, j], S[j]).logpdf(zz[:, j]) for j in range(KZ)) for zz in z]
    np.testing.assert_allclose(log_q(z, mu, S), want, rtol=1e-9)
    q = GaussianQ(mu, S)
    d1, d2 = q.sample(np.random.default_rng(5), 7), q.sample(np.random.default_rng(5), 7)
    assert d1.shape == (7, N, KZ)
    np.testing.assert_array_equal(d1, d2)                     # same seed, same draws
    # the draws are μ + L ε with the documented stream layout (n, k_z, N)
    eps = np.random.default_rng(5).standard_normal((7, KZ, N))
    L = np.linalg.cholesky(S)
    np.testing.assert_allclose(d1[3, :, 1], mu[:, 1] + L[1] @ eps[3, 1], rtol=1e-12)


def test_bad_inputs_are_named():
    y, x, z = _data()
    with pytest.raises(ShapeMismatchError, match=r"z has shape \(4, 5, 3\)"):
        log_p_y_given_z(y, np.zeros((4, N, 3)), HYPER)
    with pytest.raises(ShapeMismatchError, match="y has shape"):
        log_p_y_given_z(y[:, 0], z, HYPER)
    y2 = y.copy()
    y2[2, 1] = np.nan
    with pytest.raises(InvalidParameterError, match=r"non-finite value nan at index \(2, 1\)"):
        log_p_y_given_z(y2, z, HYPER)
    with pytest.raises(ShapeMismatchError, match="x has shape"):
        log_p_z_given_x(z, x[:, :1], HYPER)
    with pytest.raises(InvalidParameterError, match="jitter=-1"):
        log_p_z_given_x(z, x, HYPER, jitter=-1)
    with pytest.raises(InvalidParameterError, match="not a GPLVMHyper"):
        log_p_y_given_z(y, z, (1.0, 2.0))
    with pytest.raises(NotPositiveDefiniteError, match="jitter"):
        log_p_z_given_x(z, np.zeros((N, KX)), HYPER, jitter=0.0)   # repeated inputs
    with pytest.raises(ShapeMismatchError, match=r"\(k_z, N, N\)"):
        GaussianQ(np.zeros((N, KZ)), np.eye(N)[None])
    with pytest.raises(NotPositiveDefiniteError, match="positive definite"):
        GaussianQ(np.zeros((N, 1)), -np.eye(N)[None])
