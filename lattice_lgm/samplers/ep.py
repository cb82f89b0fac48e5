r"""Expectation propagation for binary GP classification with the probit likelihood.

Rasmussen & Williams (2006), *Gaussian Processes for Machine Learning*, §3.6 and
Algorithm 3.5, as issue 30 asks (Fraccaro, Paquet & Winther use EP's Gaussian ``q`` as the
start of the tempered path of annealed importance sampling, and its ``log Z_EP`` as the
estimate AIS is compared with).  The prior is ``f ~ N(0, K)``, the likelihood
``Π_i Φ(y_i f_i)`` with ``y_i ∈ {−1, +1}`` (the library's labels ``{0, 1}`` map to ``2y − 1``).
EP replaces each likelihood term by an unnormalised Gaussian site
``t̃_i(f_i) = Z̃_i N(f_i; ν̃_i/τ̃_i, 1/τ̃_i)`` in natural parameters ``(τ̃, ν̃)``; the
approximate posterior is ``q(f) = N(μ, Σ)``, ``Σ = (K⁻¹ + S̃)⁻¹``, ``μ = Σ ν̃``, ``S̃ =
diag(τ̃)``.

One sweep visits the sites in order (Algorithm 3.5, lines 4–13):

1. the cavity ``q_{−i}(f_i) = N(ν_{−i}/τ_{−i}, 1/τ_{−i})`` with ``τ_{−i} = 1/Σ_ii − τ̃_i``
   and ``ν_{−i} = μ_i/Σ_ii − ν̃_i`` (eq. 3.56);
2. the moments of the tilted ``q_{−i}(f_i) Φ(y_i f_i)`` in closed form (eq. 3.58):
   ``z = y μ_{−i}/√(1 + σ²_{−i})``, ``Ẑ = Φ(z)``, ``μ̂ = μ_{−i} + y σ²_{−i} ϕ(z) /
   (Φ(z) √(1 + σ²_{−i}))``, ``σ̂² = σ²_{−i} − σ⁴_{−i} ϕ(z)/((1 + σ²_{−i}) Φ(z)) ·
   (z + ϕ(z)/Φ(z))``;
3. the site that makes ``q``'s marginal match them (eq. 3.59): ``τ̃_i = 1/σ̂² − τ_{−i}``,
   ``ν̃_i = μ̂/σ̂² − ν_{−i}``;
4. ``Σ`` by the rank-one update of eq. 3.70 and ``μ = Σ ν̃``.

After each sweep ``Σ`` and ``μ`` are recomputed from the sites with the stable
``B = I + S̃^½ K S̃^½ = L Lᵀ`` (Algorithm 3.5, lines 14–16: ``V = L⁻¹ S̃^½ K``,
``Σ = K − Vᵀ V``), which stops the rank-one updates' round-off from accumulating.

**log Z_EP** (eqs. 3.65, 3.73–3.74) is ``log N(μ̃; 0, K + Σ̃) + Σ_i log Z̃_i`` with each
``Z̃_i`` chosen so the site reproduces ``Ẑ_i``.  Written out with ``|K + Σ̃| = |B| / |S̃|``
and ``μ̃ᵀ(K + Σ̃)⁻¹ μ̃ = Σ_i ν̃_i²/τ̃_i − ν̃ᵀ Σ ν̃``, the terms in ``1/τ̃_i`` cancel (a
site with ``τ̃_i → 0`` is harmless) and what is computed is::

    log Z_EP = Σ log Ẑ_i + ½ Σ log(1 + τ̃_i/τ_{−i}) − Σ log L_ii + ½ ν̃ᵀ Σ ν̃
               + ½ Σ (ν_{−i}² τ̃_i/τ_{−i} − 2 ν_{−i} ν̃_i − ν̃_i²) / (τ̃_i + τ_{−i})

with the cavities and ``Ẑ_i`` of the final ``q``.  With one data point the tilted moments
are the posterior's and ``log Z_EP`` is exact (tested), as it is for any ``n`` in the limit
of uninformative sites.

The probit likelihood is log-concave, so every ``τ̃_i ≥ 0`` and ``B`` is positive definite
(Rasmussen & Williams, §3.6.1); damping is not needed and is not offered.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import linalg, special

from .._validation import positive_float, positive_int
from ..errors import (
    ConvergenceError,
    InvalidDataError,
    InvalidParameterError,
    ShapeMismatchError,
)

__all__ = ["EPResult", "expectation_propagation"]

#: largest change of any site parameter between sweeps at which EP stops (default)
TOL = 1e-8
#: most sweeps before :class:`ConvergenceError` (default); R&W report convergence in ~10
MAX_SWEEPS = 200
_LOG_2PI = math.log(2.0 * math.pi)


@dataclass(frozen=True)
class EPResult:
    """EP's Gaussian approximation ``q(f) = N(mean, cov)`` and its marginal likelihood.

    Attributes
    ----------
    mean : ndarray, shape (n,)
    cov : ndarray, shape (n, n)
    tau_site, nu_site : ndarray, shape (n,)
        The sites' natural parameters ``τ̃``, ``ν̃`` (precision and precision × mean).
    log_z : float
        ``log Z_EP``, EP's approximation of ``log p(y | K)``.
    n_sweeps : int
        Sweeps run until the sites changed by less than ``tol``.
    """

    mean: np.ndarray
    cov: np.ndarray
    tau_site: np.ndarray
    nu_site: np.ndarray
    log_z: float
    n_sweeps: int

    def logpdf(self, f: np.ndarray) -> np.ndarray:
        """``log q(f)`` for ``f`` of shape (..., n): the density AIS starts from."""
        f = np.asarray(f, dtype=float)
        chol = np.linalg.cholesky(self.cov)
        r = linalg.solve_triangular(chol, (f - self.mean).reshape(-1, len(self.mean)).T,
                                    lower=True)
        out = (-0.5 * np.sum(r**2, axis=0) - np.sum(np.log(np.diag(chol)))
               - 0.5 * len(self.mean) * _LOG_2PI)
        return out.reshape(f.shape[:-1])

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` draws from ``q``, shape (n, n_points)."""
        chol = np.linalg.cholesky(self.cov)
        return self.mean + rng.standard_normal((n, len(self.mean))) @ chol.T


def expectation_propagation(K: np.ndarray, y: np.ndarray, *, tol: float = TOL,
                            max_sweeps: int = MAX_SWEEPS) -> EPResult:
    """EP for GP classification with the probit likelihood (R&W Algorithm 3.5).

    Parameters
    ----------
    K : array_like, shape (n, n)
        The prior covariance of ``f`` at the inputs (symmetric positive definite; add any
        jitter before).
    y : array_like, shape (n,)
        Labels in {0, 1}.
    tol : float
        Stop when no ``τ̃_i`` or ``ν̃_i`` changed by more than ``tol`` in a sweep.
    max_sweeps : int
        At most this many sweeps.

    Returns
    -------
    EPResult

    Raises
    ------
    InvalidDataError
        Labels outside {0, 1} or non-finite ``K``.
    InvalidParameterError, ShapeMismatchError
        ``K`` not square and symmetric, ``y`` of another length, bad ``tol`` / ``max_sweeps``.
    ConvergenceError
        The sites still moved by more than ``tol`` after ``max_sweeps`` sweeps.
    """
    K, s = _check(K, y)
    tol = positive_float("tol", tol, "pass e.g. 1e-8")
    max_sweeps = positive_int("max_sweeps", max_sweeps, "pass e.g. 200")
    n = len(s)
    tau_t, nu_t = np.zeros(n), np.zeros(n)
    cov, mu = K.copy(), np.zeros(n)
    for sweep in range(1, max_sweeps + 1):
        old_tau, old_nu = tau_t.copy(), nu_t.copy()
        for i in range(n):
            cov, mu = _update_site(cov, tau_t, nu_t, i, s[i])
        # lines 14–16: Σ and μ afresh from the sites through B = I + S̃^½ K S̃^½
        cov, mu, chol = _posterior(K, tau_t, nu_t)
        change = max(np.max(np.abs(tau_t - old_tau)), np.max(np.abs(nu_t - old_nu)))
        if change < tol:
            return EPResult(mu, cov, tau_t, nu_t, _log_z(s, cov, mu, chol, tau_t, nu_t),
                            sweep)
    raise ConvergenceError(
        f"EP's sites still changed by {change:.3g} (> tol={tol:g}) after max_sweeps="
        f"{max_sweeps}; raise max_sweeps or tol, or check K (a near-singular or badly "
        "scaled covariance slows EP).")


def _check(K: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    K = np.asarray(K, dtype=float)
    if K.ndim != 2 or K.shape[0] != K.shape[1] or K.shape[0] == 0:
        raise InvalidParameterError(f"K (shape {K.shape}) must be a square (n, n) matrix.")
    if not np.all(np.isfinite(K)):
        raise InvalidDataError("K has non-finite entries; pass a finite covariance matrix.")
    if not np.allclose(K, K.T, rtol=1e-10, atol=1e-12 * float(np.max(np.abs(K)))):
        raise InvalidParameterError("K is not symmetric; pass a covariance matrix.")
    labels = np.asarray(y, dtype=float).reshape(-1)
    if labels.shape != (K.shape[0],):
        raise ShapeMismatchError(
            f"y has {labels.size} labels but K is {K.shape[0]} × {K.shape[0]}.")
    bad = ~np.isin(labels, (0.0, 1.0))
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        raise InvalidDataError(
            f"y has label {float(labels[i])!r} at index {i}, outside {{0, 1}}; pass 0/1 labels "
            "(for ±1 labels pass (y + 1) / 2).")
    return K, 2.0 * labels - 1.0


def _update_site(cov: np.ndarray, tau_t: np.ndarray, nu_t: np.ndarray, i: int,
                 s: float) -> tuple[np.ndarray, np.ndarray]:
    """Steps 1–4 at site ``i``: ``τ̃_i``, ``ν̃_i`` in place; the new ``Σ`` and ``μ``."""
    mu_i = cov[i] @ nu_t
    # step 1 (eq. 3.56): the cavity of site i
    tau_c = 1.0 / cov[i, i] - tau_t[i]
    nu_c = mu_i / cov[i, i] - nu_t[i]
    # step 2 (eq. 3.58): the tilted distribution's mean and variance
    _, mu_hat, var_hat = _tilted(s, nu_c / tau_c, 1.0 / tau_c)
    # step 3 (eq. 3.59): the site that matches them
    new_tau = max(1.0 / var_hat - tau_c, 0.0)  # ≥ 0 in exact arithmetic (log-concave)
    d_tau, tau_t[i] = new_tau - tau_t[i], new_tau
    nu_t[i] = mu_hat / var_hat - nu_c
    # step 4 (eq. 3.70): Σ ← Σ − (1/Δτ̃ + Σ_ii)⁻¹ s_i s_iᵀ, then μ = Σ ν̃
    col = cov[:, i].copy()
    cov = cov - (d_tau / (1.0 + d_tau * col[i])) * np.outer(col, col)
    return cov, cov @ nu_t


def _tilted(s: float, m: float, v: float) -> tuple[float, float, float]:
    """``log Ẑ``, mean and variance of ``N(f; m, v) Φ(s f)`` normalised (R&W eq. 3.58)."""
    root = math.sqrt(1.0 + v)
    z = s * m / root
    log_zhat = float(special.log_ndtr(z))
    ratio = math.exp(-0.5 * z * z - 0.5 * _LOG_2PI - log_zhat)  # ϕ(z)/Φ(z), stably
    mean = m + s * v * ratio / root
    var = v - v * v * ratio * (z + ratio) / (1.0 + v)
    return log_zhat, mean, var


def _posterior(K: np.ndarray, tau_t: np.ndarray,
               nu_t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``Σ = K − Vᵀ V`` with ``V = L⁻¹ S̃^½ K``, ``L Lᵀ = B``; ``μ = Σ ν̃``; and ``L``."""
    r = np.sqrt(tau_t)
    B = np.eye(len(r)) + r[:, None] * K * r[None, :]
    chol = np.linalg.cholesky(B)
    V = linalg.solve_triangular(chol, r[:, None] * K, lower=True)
    cov = K - V.T @ V
    return cov, cov @ nu_t, chol


def _log_z(s: np.ndarray, cov: np.ndarray, mu: np.ndarray, chol: np.ndarray,
           tau_t: np.ndarray, nu_t: np.ndarray) -> float:
    """``log Z_EP`` (module docstring; R&W eqs. 3.65, 3.73–3.74)."""
    d = np.diag(cov)
    tau_c = 1.0 / d - tau_t
    nu_c = mu / d - nu_t
    log_zhat = sum(_tilted(s[i], nu_c[i] / tau_c[i], 1.0 / tau_c[i])[0]
                   for i in range(len(s)))
    quad = (nu_c**2 * tau_t / tau_c - 2.0 * nu_c * nu_t - nu_t**2) / (tau_t + tau_c)
    return float(log_zhat + 0.5 * np.sum(np.log1p(tau_t / tau_c))
                 - np.sum(np.log(np.diag(chol))) + 0.5 * nu_t @ cov @ nu_t
                 + 0.5 * np.sum(quad))
