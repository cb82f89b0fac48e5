r"""The ψ statistics of the SE-ARD kernel under a Gaussian q(Z), and their vector–Jacobian products.

The collapsed variational bound of the (supervised) Bayesian GPLVM (Titsias & Lawrence 2010,
§3.2; Gadd et al. §3, the statistics after their eq. 5) sees ``q(Z)`` only through

    ψ0 = Σ_n ⟨k_f(z_n, z_n)⟩_q,
    ψ1[n, m] = ⟨k_f(z_n, u_m)⟩_q,                                   shape (N, M),
    ψ2[m, m'] = Σ_n ⟨k_f(u_m, z_n) k_f(z_n, u_m')⟩_q,                shape (M, M),

with ``u_m`` the rows of the inducing inputs ``Z_u``.  For
``k_f(z, z') = θ_S exp(−½ Σ_j θ_j (z_j − z'_j)²)`` and ``z_nj ~ N(μ_nj, s_nj)`` (only the
marginal variances ``s_nj`` = diag(S_j)_n of the full covariances ``S_j`` enter, since every
statistic is an expectation of a function of one row ``z_n``) they are Gaussian integrals
(Titsias & Lawrence 2010, eqs. 21–22, written with ARD weights ``θ_j`` = 1/ℓ_j²):

    ψ0 = N θ_S,
    ψ1[n, m] = θ_S Π_j (1 + θ_j s_nj)^(−½) exp(−½ θ_j (μ_nj − u_mj)² / (1 + θ_j s_nj)),
    ψ2[m, m'] = Σ_n θ_S² Π_j (1 + 2 θ_j s_nj)^(−½)
                 exp(−¼ θ_j (u_mj − u_m'j)² − θ_j (μ_nj − ū_j)² / (1 + 2 θ_j s_nj)),

``ū = (u_m + u_m')/2``; the last from ``(z−a)² + (z−b)² = 2 (z − ū)² + (a − b)²/2`` and
``⟨exp(−c (z − ū)²)⟩ = (1 + 2cs)^(−½) exp(−c (μ − ū)²/(1 + 2cs))``.  The products are summed as
logs inside one ``exp`` (no product of small factors underflows before the sum).

:func:`psi_statistics_vjp` also returns the map from the bound's gradients with respect to
(ψ0, ψ1, ψ2) to its gradients with respect to (μ, s, Z_u, θ_S, θ): the chain rule the bound's
gradient (:mod:`.vb`) needs, without forming the (N, M, k_z) and (N, M, M, k_z) Jacobians' sums
more than once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

__all__ = ["PsiGrad", "psi_statistics", "psi_statistics_vjp"]


class PsiGrad(NamedTuple):
    """Gradients of a scalar through (ψ0, ψ1, ψ2) with respect to their inputs.

    Attributes
    ----------
    mu : ndarray, shape (N, k_z)
    s_diag : ndarray, shape (N, k_z)
    z_u : ndarray, shape (M, k_z)
    theta_s : float
    theta : ndarray, shape (k_z,)
    """

    mu: np.ndarray
    s_diag: np.ndarray
    z_u: np.ndarray
    theta_s: float
    theta: np.ndarray


def _psi1_terms(mu, s_diag, z_u, theta):
    """Pieces of ψ1: ``d`` (N, M, k_z) = μ_n − u_m, ``a`` (N, 1, k_z) = 1 + θ s, log ψ1/θ_S."""
    d = mu[:, None, :] - z_u[None, :, :]
    a = 1.0 + theta * s_diag[:, None, :]
    log_e = -0.5 * (np.log(a) + theta * d * d / a).sum(-1)
    return d, a, log_e


def _psi2_terms(mu, s_diag, z_u, theta):
    """Pieces of ψ2: Δ (M, M, k_z), ``e`` (N, M, M, k_z) = μ_n − ū, ``b`` (N,1,1,k_z), log term."""
    delta = z_u[:, None, :] - z_u[None, :, :]
    zbar = 0.5 * (z_u[:, None, :] + z_u[None, :, :])
    e = mu[:, None, None, :] - zbar[None]
    b = 1.0 + 2.0 * theta * s_diag[:, None, None, :]
    log_e = (-0.5 * np.log(b) - 0.25 * theta * delta[None] ** 2 - theta * e * e / b).sum(-1)
    return delta, e, b, log_e


def _checked(mu, s_diag, z_u, theta):
    mu = np.asarray(mu, dtype=float)
    s_diag = np.asarray(s_diag, dtype=float)
    z_u = np.asarray(z_u, dtype=float)
    theta = np.asarray(theta, dtype=float).ravel()
    if mu.ndim != 2 or s_diag.shape != mu.shape or z_u.ndim != 2 or (
            z_u.shape[1] != mu.shape[1] or theta.shape != (mu.shape[1],)):
        # a programming error of the caller (vb.py validates user input before this point)
        raise ValueError(f"psi statistics: shapes mu {mu.shape}, s_diag {s_diag.shape}, "
                         f"z_u {z_u.shape}, theta {theta.shape} do not agree.")
    return mu, s_diag, z_u, theta


def psi_statistics(mu: np.ndarray, s_diag: np.ndarray, z_u: np.ndarray, theta_s: float,
                   theta: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """ψ0, ψ1, ψ2 of the SE-ARD kernel under ``q(Z) = Π_j N(μ_j, S_j)`` (closed forms above).

    Parameters
    ----------
    mu : ndarray, shape (N, k_z)
        Means of q.
    s_diag : ndarray, shape (N, k_z)
        Marginal variances of q (column j is diag(S_j)), > 0 (0 gives the kernel at μ).
    z_u : ndarray, shape (M, k_z)
        Inducing inputs.
    theta_s : float
        Signal variance θ_S.
    theta : ndarray, shape (k_z,)
        ARD weights θ_j (inverse squared lengthscales).

    Returns
    -------
    psi0 : float
    psi1 : ndarray, shape (N, M)
    psi2 : ndarray, shape (M, M)
        Symmetric.
    """
    mu, s_diag, z_u, theta = _checked(mu, s_diag, z_u, theta)
    psi0 = mu.shape[0] * float(theta_s)
    psi1 = theta_s * np.exp(_psi1_terms(mu, s_diag, z_u, theta)[2])
    psi2 = theta_s**2 * np.exp(_psi2_terms(mu, s_diag, z_u, theta)[3]).sum(0)
    return psi0, psi1, 0.5 * (psi2 + psi2.T)


def psi_statistics_vjp(
    mu: np.ndarray, s_diag: np.ndarray, z_u: np.ndarray, theta_s: float, theta: np.ndarray
) -> tuple[tuple[float, np.ndarray, np.ndarray],
           Callable[[float, np.ndarray, np.ndarray], PsiGrad]]:
    """The ψ statistics and their vector–Jacobian product.

    Parameters
    ----------
    mu, s_diag, z_u, theta_s, theta
        As in :func:`psi_statistics`.

    Returns
    -------
    (psi0, psi1, psi2)
        As :func:`psi_statistics`.
    vjp : callable
        ``vjp(g0, g1, g2) -> PsiGrad``: given ``g0 = ∂F/∂ψ0`` (float), ``g1 = ∂F/∂ψ1`` (N, M) and
        ``g2 = ∂F/∂ψ2`` (M, M; only its symmetric part matters since ψ2 is symmetric), the
        gradients of ``F`` with respect to μ, s, Z_u, θ_S and θ.

    Notes
    -----
    With ``a = 1 + θ_j s_nj``, ``d = μ_nj − u_mj`` and ``l1 = log ψ1[n, m] − log θ_S``:
    ``∂l1/∂μ_nj = −θ_j d/a``, ``∂l1/∂u_mj = θ_j d/a``, ``∂l1/∂s_nj = ½ θ_j (θ_j d²/a − 1)/a``,
    ``∂l1/∂θ_j = −½ (s_nj/a + d²/a²)``.  With ``b = 1 + 2 θ_j s_nj``, ``e = μ_nj − ū_j``,
    ``Δ = u_mj − u_m'j`` and ``l2`` the log of the n-th summand of ψ2 over θ_S²:
    ``∂l2/∂μ_nj = −2θ_j e/b``, ``∂l2/∂s_nj = θ_j (2 θ_j e²/b − 1)/b``,
    ``∂l2/∂θ_j = −s_nj/b − Δ²/4 − e²/b²``, ``∂l2/∂u_mj = θ_j (e/b − Δ/2)`` (per entry (m, m');
    the entry (m', m) contributes as much again for a symmetric ``g2``).
    """
    mu, s_diag, z_u, theta = _checked(mu, s_diag, z_u, theta)
    theta_s = float(theta_s)
    n = mu.shape[0]
    d, a, log1 = _psi1_terms(mu, s_diag, z_u, theta)
    psi1 = theta_s * np.exp(log1)
    delta, e, b, log2 = _psi2_terms(mu, s_diag, z_u, theta)
    psi2_n = theta_s**2 * np.exp(log2)                       # (N, M, M): summands of ψ2
    psi2 = psi2_n.sum(0)
    psi0 = n * theta_s

    def vjp(g0: float, g1: np.ndarray, g2: np.ndarray) -> PsiGrad:
        g2s = 0.5 * (np.asarray(g2, float) + np.asarray(g2, float).T)
        w1 = (np.asarray(g1, float) * psi1)[:, :, None]       # (N, M, 1)
        t1 = theta * d / a                                     # (N, M, k_z)
        g_mu = -(w1 * t1).sum(1)
        g_zu = (w1 * t1).sum(0)
        g_s = (w1 * (0.5 * theta * (theta * d * d / a - 1.0) / a)).sum(1)
        g_th = (w1 * (-0.5 * (s_diag[:, None, :] / a + d * d / a**2))).sum((0, 1))
        w2 = (g2s[None] * psi2_n)[..., None]                  # (N, M, M, 1)
        g_mu = g_mu - (w2 * (2.0 * theta * e / b)).sum((1, 2))
        g_s = g_s + (w2 * (theta * (2.0 * theta * e * e / b - 1.0) / b)).sum((1, 2))
        g_th = g_th + (w2 * (-s_diag[:, None, None, :] / b - 0.25 * delta[None] ** 2
                             - e * e / b**2)).sum((0, 1, 2))
        # u_m appears in row m and column m of ψ2; g2s symmetric, so twice the row term
        g_zu = g_zu + 2.0 * (w2 * (theta * (e / b - 0.5 * delta[None]))).sum((0, 2))
        g_ts = float(g0) * n + float((np.asarray(g1, float) * psi1).sum()) / theta_s \
            + 2.0 * float((g2s * psi2).sum()) / theta_s
        return PsiGrad(g_mu, g_s, g_zu, g_ts, g_th)

    return (psi0, psi1, 0.5 * (psi2 + psi2.T)), vjp
