"""The ψ statistics of the SE-ARD kernel (Titsias & Lawrence 2010; Gadd et al. §3).

Checked against Monte Carlo with q's own Gaussians (full covariances S_j: the statistics must
depend on them only through their diagonals), against the kernel itself when q is a point
mass, and their vector–Jacobian product against central finite differences.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from lattice_lgm import threads
from lattice_lgm.gplvm.kernels import k_f
from lattice_lgm.gplvm.psi import psi_statistics, psi_statistics_vjp

#: family-wise false-failure rate of this module per run, summed by conftest.py: one
#: statistical test of 12 ψ1 and 6 distinct ψ2 entries, each a two-sided z-test at level
#: 1e-4 / 18 (Bonferroni), with the Monte Carlo standard error estimated from 2·10⁵ draws
FALSE_FAILURE_RATE = 1e-4

N, M, KZ = 4, 3, 2
THETA_S, THETA = 1.3, np.array([0.7, 2.0])



@pytest.fixture(autouse=True)
def _one_thread():
    # N ≤ 30 dense algebra: BLAS threads only spin against each other (threads.py)
    with threads.using(threads.thread_budget(1, threads=1)):
        yield

def _q(seed: int = 3):
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=(N, KZ))
    s_full = []
    for _ in range(KZ):
        a = rng.normal(size=(N, N)) * 0.4
        s_full.append(a @ a.T + 0.1 * np.eye(N))
    z_u = rng.normal(size=(M, KZ))
    return mu, np.stack(s_full), z_u


@pytest.mark.statistical
def test_psi_statistics_agree_with_monte_carlo_under_full_covariance_q():
    mu, s_full, z_u = _q()
    s_diag = np.stack([np.diag(s) for s in s_full], axis=1)
    psi0, psi1, psi2 = psi_statistics(mu, s_diag, z_u, THETA_S, THETA)
    assert psi0 == pytest.approx(N * THETA_S)
    rng = np.random.default_rng(11)
    n_mc = 200_000
    # Z draws from q(Z) = Π_j N(μ_j, S_j) with the full (correlated) S_j
    eps = rng.standard_normal((n_mc, KZ, N))
    z = np.einsum("jab,sjb->saj", np.linalg.cholesky(s_full), eps) + mu
    sq = ((z[:, :, None, :] - z_u[None, None, :, :]) ** 2 * THETA).sum(-1)
    kfu = THETA_S * np.exp(-0.5 * sq)                                     # (S, N, M)
    terms1 = kfu
    terms2 = np.einsum("snm,snk->smk", kfu, kfu)                          # Σ_n k k
    iu = np.triu_indices(M)
    est = np.concatenate([terms1.mean(0).ravel(), terms2.mean(0)[iu]])
    se = np.concatenate([terms1.std(0).ravel(), terms2.std(0)[iu]]) / np.sqrt(n_mc)
    exact = np.concatenate([psi1.ravel(), psi2[iu]])
    crit = stats.norm.isf(FALSE_FAILURE_RATE / est.size / 2)
    z_scores = (est - exact) / se
    assert np.all(np.abs(z_scores) < crit), (z_scores, crit)


def test_a_point_mass_q_gives_the_kernel():
    mu, _, z_u = _q()
    psi0, psi1, psi2 = psi_statistics(mu, np.zeros_like(mu), z_u, THETA_S, THETA)
    kfu = k_f(mu, z_u, THETA_S, THETA)
    np.testing.assert_allclose(psi1, kfu, rtol=1e-12)
    np.testing.assert_allclose(psi2, kfu.T @ kfu, rtol=1e-12)
    assert psi0 == N * THETA_S


def test_far_inducing_inputs_underflow_to_zero_not_nan():
    mu, s_full, z_u = _q()
    s_diag = np.stack([np.diag(s) for s in s_full], axis=1)
    z_u = z_u + 1e4
    _, psi1, psi2 = psi_statistics(mu, s_diag, z_u, THETA_S, THETA * 1e3)
    assert np.all(np.isfinite(psi1)) and np.all(np.isfinite(psi2))
    assert np.all(psi1 == 0.0)


def test_the_vjp_matches_central_finite_differences():
    mu, s_full, z_u = _q()
    s_diag = np.stack([np.diag(s) for s in s_full], axis=1)
    rng = np.random.default_rng(5)
    g0, g1, g2 = 0.7, rng.normal(size=(N, M)), rng.normal(size=(M, M))

    def scalar(mu, s_diag, z_u, theta_s, theta):
        p0, p1, p2 = psi_statistics(mu, s_diag, z_u, theta_s, theta)
        return g0 * p0 + float((g1 * p1).sum()) + float((g2 * p2).sum())

    args = [mu, s_diag, z_u, np.array(THETA_S), THETA.copy()]
    _, vjp = psi_statistics_vjp(*args)
    grad = vjp(g0, g1, g2)
    for k, analytic in enumerate(grad):
        base = np.asarray(args[k], dtype=float)
        num = np.zeros(base.shape)
        for i in np.ndindex(base.shape):
            step = np.zeros(base.shape)
            step[i] = 1e-6
            hi = [*args[:k], base + step, *args[k + 1:]]
            lo = [*args[:k], base - step, *args[k + 1:]]
            num[i] = (scalar(*hi) - scalar(*lo)) / 2e-6
        np.testing.assert_allclose(analytic, num, rtol=1e-6, atol=1e-7,
                                   err_msg=f"gradient {grad._fields[k]}")
