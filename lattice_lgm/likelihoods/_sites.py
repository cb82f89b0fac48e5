"""The per-site functions of every likelihood, scalar (Numba) and vectorised (NumPy).

Every likelihood factorises over observed cells, ``log L(η) = constant + Σ_i ℓ(η_i; y_i, a_i)``.
This module holds, per likelihood,

* ``<name>_logpdf(eta, y, aux)`` — a Numba ``@njit`` scalar function for ℓ without the constant
  (the one :attr:`Likelihood.site_logpdf` exposes, callable from other njit code);
* ``<name>_derivs(eta, y, aux)`` — ``(ℓ', ℓ'', ℓ''')`` at one site, njit;
* ``<name>_logpdf_np`` — the vectorised NumPy twin of ``<name>_logpdf`` (same formula, same
  branches), used by :meth:`Likelihood.loglik_reference`.

The kernels that sum and differentiate them, chosen by an integer ``kind``, are in
:mod:`._kernels`; that a kernel cached there never keeps a stale copy of a function edited
here is the package's cache stamp's job (``lattice_lgm._numba_cache``, decisions 82 and 103).

Notation: ``eta`` is the linear predictor η, ``y`` the datum, ``aux`` the per-site parameter
(Poisson: log exposure; Gaussian: noise precision; Bernoulli: unused; binomial: the number of
trials n; sigmoidal Poisson: the exposure e itself), ``s = 2y − 1`` the signed label of a
Bernoulli site.

Numerics (fastmath off everywhere):

* Poisson ``y·(η + a) − exp(η + a)``: ``exp`` overflows to ``inf`` above η + a ≈ 709.8, so ℓ, ℓ',
  ℓ'', ℓ''' become ``-inf`` there — never NaN.
* logit ``−softplus(−sη)`` with ``softplus(x) = max(x, 0) + log1p(exp(−|x|))``: finite for every
  finite η; the derivatives use the logistic function evaluated without overflow.
* probit ``log Φ(sη)`` with ``z = sη``: ``log1p(−½ erfc(z/√2))`` for z > 0,
  ``log(½ erfc(−z/√2))`` for −5 ≤ z ≤ 0 and, below (``erfc`` underflows near z ≈ −38), the
  erfcx-style form ``−z²/2 − ½ log 2π − log(|z| + K)`` with Laplace's continued fraction
  ``Φ(−x) = φ(x)/(x + 1/(x + 2/(x + …)))`` (40 levels: converged to 2e-16 at x = 5).  The same
  fraction gives ``z + φ(z)/Φ(z) = K`` without cancellation, which the derivatives need.
* binomial, ``y`` successes of ``n`` trials: ``y`` times the Bernoulli site of a success plus
  ``n − y`` times that of a failure (logit ``yη − n softplus(η)``, probit
  ``y log Φ(η) + (n − y) log Φ(−η)``), each term skipped when its count is 0, so that a site
  with ``n = 0`` is exactly 0 with derivatives 0 and one with ``n = 1`` gives the Bernoulli
  site's values bit for bit.
* sigmoidal Poisson, ``y ~ Poisson(e Φ(η))``: ``y log Φ(η) − e Φ(η)`` with the logit's
  ``log σ(η) = −softplus(−η)`` or the probit's ``log Φ`` above, each term skipped when its
  factor is 0 (a cell with ``e = 0``, ``y = 0`` is exactly 0).  ``σ(η)`` and ``Φ(η)`` saturate
  at 1 and ``φ(η)`` underflows to 0: finite for every finite η.

The NumPy twins call NumPy's ``exp``/``log1p`` and SciPy's ``erfc`` where Numba calls the C
library's, so the two agree to a few ulp per site, not bitwise (DESIGN §8: no SVML here).
"""

from __future__ import annotations

import math

import numba
import numpy as np
from scipy import special

__all__ = [
    "FRACTION_Z",
    "bernoulli_logit_derivs",
    "bernoulli_logit_logpdf",
    "bernoulli_logit_logpdf_np",
    "bernoulli_probit_derivs",
    "bernoulli_probit_logpdf",
    "bernoulli_probit_logpdf_np",
    "binomial_logit_derivs",
    "binomial_logit_logpdf",
    "binomial_logit_logpdf_np",
    "binomial_probit_derivs",
    "binomial_probit_logpdf",
    "binomial_probit_logpdf_np",
    "gaussian_derivs",
    "gaussian_logpdf",
    "gaussian_logpdf_np",
    "inv_mills",
    "log_normal_cdf",
    "log_normal_cdf_np",
    "poisson_derivs",
    "poisson_logpdf",
    "poisson_logpdf_np",
    "sigpois_logit_derivs",
    "sigpois_logit_logpdf",
    "sigpois_logit_logpdf_np",
    "sigpois_probit_derivs",
    "sigpois_probit_logpdf",
    "sigpois_probit_logpdf_np",
]

_SQRT2 = math.sqrt(2.0)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
#: below this z, log Φ(z) and φ(z)/Φ(z) come from Laplace's continued fraction
FRACTION_Z = -5.0
_N_FRACTION = 40


# -- Poisson: ℓ = y(η + log E) − E e^η -------------------------------------------------------


@numba.njit(cache=True)
def poisson_logpdf(eta: float, y: float, aux: float) -> float:
    """Poisson site log-density without ``−lgamma(y + 1)``; ``aux`` is the log exposure."""
    u = eta + aux
    return y * u - math.exp(u)


@numba.njit(cache=True)
def poisson_derivs(eta: float, y: float, aux: float) -> tuple[float, float, float]:
    """``(ℓ', ℓ'', ℓ''')`` of the Poisson site: ``(y − λ, −λ, −λ)`` with ``λ = exp(η + aux)``."""
    lam = math.exp(eta + aux)
    return y - lam, -lam, -lam


def poisson_logpdf_np(eta: np.ndarray, y: np.ndarray, aux: np.ndarray) -> np.ndarray:
    """NumPy twin of :func:`poisson_logpdf` (broadcasting)."""
    with np.errstate(over="ignore"):
        u = eta + aux
        return y * u - np.exp(u)


# -- Gaussian: ℓ = −½ τ (y − η)² ---------------------------------------------------------------


@numba.njit(cache=True)
def gaussian_logpdf(eta: float, y: float, aux: float) -> float:
    """Gaussian site log-density without ``½ log(τ/2π)``; ``aux`` is the noise precision τ."""
    d = y - eta
    return -0.5 * aux * (d * d)


@numba.njit(cache=True)
def gaussian_derivs(eta: float, y: float, aux: float) -> tuple[float, float, float]:
    """``(ℓ', ℓ'', ℓ''') = (τ(y − η), −τ, 0)`` of the Gaussian site."""
    return aux * (y - eta), -aux, 0.0


def gaussian_logpdf_np(eta: np.ndarray, y: np.ndarray, aux: np.ndarray) -> np.ndarray:
    """NumPy twin of :func:`gaussian_logpdf` (broadcasting)."""
    with np.errstate(over="ignore"):
        d = y - eta
        return -0.5 * aux * (d * d)


# -- Bernoulli, logit link: ℓ = yη − softplus(η) = −softplus(−sη) ----------------------------


@numba.njit(cache=True)
def _softplus(x: float) -> float:
    return max(x, 0.0) + math.log1p(math.exp(-abs(x)))


@numba.njit(cache=True)
def _logistic(x: float) -> float:
    if x >= 0.0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


@numba.njit(cache=True)
def bernoulli_logit_logpdf(eta: float, y: float, aux: float) -> float:
    """Logit Bernoulli site log-probability ``−softplus(−sη)``, ``s = 2y − 1`` (aux unused)."""
    s = 2.0 * y - 1.0
    return -_softplus(-s * eta)


@numba.njit(cache=True)
def bernoulli_logit_derivs(eta: float, y: float, aux: float) -> tuple[float, float, float]:
    """``(sσ(−sη), −σ(η)σ(−η), −σ(η)σ(−η)(σ(−η) − σ(η)))`` of the logit Bernoulli site."""
    s = 2.0 * y - 1.0
    p = _logistic(eta)
    q = _logistic(-eta)
    d2 = -p * q
    return s * _logistic(-s * eta), d2, d2 * (q - p)


def bernoulli_logit_logpdf_np(eta: np.ndarray, y: np.ndarray, aux: np.ndarray) -> np.ndarray:
    """NumPy twin of :func:`bernoulli_logit_logpdf` (broadcasting)."""
    x = -(2.0 * y - 1.0) * eta
    return -(np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x))))


# -- Bernoulli, probit link: ℓ = log Φ(sη) ----------------------------------------------------


@numba.njit(cache=True)
def _mills_tail(x: float) -> float:
    """``K(x) = 1/(x + 2/(x + 3/(x + …)))``, so that ``Φ(−x) = φ(x)/(x + K)`` (x ≥ 5).

    Laplace's continued fraction, evaluated backwards from depth ``_N_FRACTION``; at x = 5 it
    has converged to 2e-16 relative (more terms change nothing), faster for larger x.
    """
    t = x
    for k in range(_N_FRACTION, 1, -1):
        t = x + k / t
    return 1.0 / t


@numba.njit(cache=True)
def log_normal_cdf(z: float) -> float:
    """``log Φ(z)``, accurate to ~1e-15 relative for every finite z (see the module notes)."""
    if z > 0.0:
        return math.log1p(-0.5 * math.erfc(z / _SQRT2))
    if z >= FRACTION_Z:
        return math.log(0.5 * math.erfc(-z / _SQRT2))
    x = -z
    return -0.5 * x * x - _HALF_LOG_2PI - math.log(x + _mills_tail(x))


@numba.njit(cache=True)
def inv_mills(z: float) -> tuple[float, float]:
    """``(r, z + r)`` with ``r = φ(z)/Φ(z)``; below z = −5, ``z + r = K(−z)`` (no cancellation)."""
    if z >= FRACTION_Z:
        r = _INV_SQRT_2PI * math.exp(-0.5 * z * z) / (0.5 * math.erfc(-z / _SQRT2))
        return r, z + r
    k = _mills_tail(-z)
    return k - z, k


@numba.njit(cache=True)
def bernoulli_probit_logpdf(eta: float, y: float, aux: float) -> float:
    """Probit Bernoulli site log-probability ``log Φ(sη)``, ``s = 2y − 1`` (aux unused)."""
    return log_normal_cdf((2.0 * y - 1.0) * eta)


@numba.njit(cache=True)
def bernoulli_probit_derivs(eta: float, y: float, aux: float) -> tuple[float, float, float]:
    """``(s r, −r(z + r), s r((z + r)(z + 2r) − 1))`` with ``z = sη``, ``r = φ(z)/Φ(z)``."""
    s = 2.0 * y - 1.0
    z = s * eta
    r, zr = inv_mills(z)
    return s * r, -r * zr, s * r * (zr * (zr + r) - 1.0)


def log_normal_cdf_np(z: np.ndarray) -> np.ndarray:
    """NumPy twin of :func:`log_normal_cdf` (same branches; SciPy's ``erfc``)."""
    z = np.asarray(z, dtype=np.float64)
    out = np.empty_like(z)
    pos = z > 0.0
    mid = (z <= 0.0) & (z >= FRACTION_Z)
    low = ~(pos | mid)
    out[pos] = np.log1p(-0.5 * special.erfc(z[pos] / _SQRT2))
    out[mid] = np.log(0.5 * special.erfc(-z[mid] / _SQRT2))
    x = -z[low]
    t = x.copy()
    for k in range(_N_FRACTION, 1, -1):
        t = x + k / t
    out[low] = -0.5 * x * x - _HALF_LOG_2PI - np.log(x + 1.0 / t)
    return out


def bernoulli_probit_logpdf_np(eta: np.ndarray, y: np.ndarray, aux: np.ndarray) -> np.ndarray:
    """NumPy twin of :func:`bernoulli_probit_logpdf` (broadcasting)."""
    return log_normal_cdf_np((2.0 * np.asarray(y) - 1.0) * np.asarray(eta))


# -- Binomial: y successes of n trials (aux = n), logit or probit link -------------------------
#
# ℓ = y ℓ₁(η) + (n − y) ℓ₀(η) with ℓ₁, ℓ₀ the Bernoulli sites of a success and of a failure
# (logit −softplus(−η), −softplus(η); probit log Φ(η), log Φ(−η)), without log C(n, y) (the
# likelihood's constant).  A term whose count is 0 is skipped, not multiplied by 0.


@numba.njit(cache=True)
def binomial_logit_logpdf(eta: float, y: float, aux: float) -> float:
    """Logit binomial site ``yη − n softplus(η) = −y softplus(−η) − (n − y) softplus(η)``."""
    out = 0.0
    if y > 0.0:
        out -= y * _softplus(-eta)
    f = aux - y
    if f > 0.0:
        out -= f * _softplus(eta)
    return out


@numba.njit(cache=True)
def binomial_logit_derivs(eta: float, y: float, aux: float) -> tuple[float, float, float]:
    """``(yσ(−η) − (n − y)σ(η), −nσ(η)σ(−η), ℓ''·(σ(−η) − σ(η)))`` of the logit binomial site."""
    p = _logistic(eta)
    q = _logistic(-eta)
    d2 = -aux * p * q
    return y * q - (aux - y) * p, d2, d2 * (q - p)


def binomial_logit_logpdf_np(eta: np.ndarray, y: np.ndarray, aux: np.ndarray) -> np.ndarray:
    """NumPy twin of :func:`binomial_logit_logpdf` (broadcasting)."""
    eta = np.asarray(eta, dtype=np.float64)
    f = aux - y
    soft = np.log1p(np.exp(-np.abs(eta)))
    with np.errstate(invalid="ignore"):
        succ = np.where(y > 0.0, y * (np.maximum(-eta, 0.0) + soft), 0.0)
        fail = np.where(f > 0.0, f * (np.maximum(eta, 0.0) + soft), 0.0)
    return -succ - fail


@numba.njit(cache=True)
def binomial_probit_logpdf(eta: float, y: float, aux: float) -> float:
    """Probit binomial site ``y log Φ(η) + (n − y) log Φ(−η)``."""
    out = 0.0
    if y > 0.0:
        out += y * log_normal_cdf(eta)
    f = aux - y
    if f > 0.0:
        out += f * log_normal_cdf(-eta)
    return out


@numba.njit(cache=True)
def binomial_probit_derivs(eta: float, y: float, aux: float) -> tuple[float, float, float]:
    """``(ℓ', ℓ'', ℓ''')``: y times the probit Bernoulli's at label 1, (n − y) times at label 0."""
    d1 = 0.0
    d2 = 0.0
    d3 = 0.0
    if y > 0.0:
        r, zr = inv_mills(eta)
        d1 += y * r
        d2 -= y * (r * zr)
        d3 += y * (r * (zr * (zr + r) - 1.0))
    f = aux - y
    if f > 0.0:
        r, zr = inv_mills(-eta)
        d1 -= f * r
        d2 -= f * (r * zr)
        d3 -= f * (r * (zr * (zr + r) - 1.0))
    return d1, d2, d3


def binomial_probit_logpdf_np(eta: np.ndarray, y: np.ndarray, aux: np.ndarray) -> np.ndarray:
    """NumPy twin of :func:`binomial_probit_logpdf` (broadcasting)."""
    eta = np.asarray(eta, dtype=np.float64)
    f = aux - y
    with np.errstate(invalid="ignore"):
        succ = np.where(y > 0.0, y * log_normal_cdf_np(eta), 0.0)
        fail = np.where(f > 0.0, f * log_normal_cdf_np(-eta), 0.0)
    return succ + fail


# -- Sigmoidal Poisson: y ~ Poisson(e Φ(η)) (aux = e), logit or probit Φ ----------------------
#
# ℓ = y log Φ(η) − e Φ(η), without y log e − log y! (the likelihood's constant).  A term whose
# factor is 0 is skipped, not multiplied by 0, so a cell with e = 0 (and y = 0) is exactly 0
# with derivatives 0.  ℓ is not concave: for the logit ℓ'' = −pq(y + e(q − p)) (p = σ(η),
# q = σ(−η)) is positive where tanh(η/2) > y/e; the site fits in ._sigmoid_fits allow for it.


@numba.njit(cache=True)
def sigpois_logit_logpdf(eta: float, y: float, aux: float) -> float:
    """Sigmoidal Poisson site, logistic Φ: ``y log σ(η) − e σ(η) = −y softplus(−η) − e σ(η)``."""
    out = 0.0
    if y > 0.0:
        out -= y * _softplus(-eta)
    if aux > 0.0:
        out -= aux * _logistic(eta)
    return out


@numba.njit(cache=True)
def sigpois_logit_derivs(eta: float, y: float, aux: float) -> tuple[float, float, float]:
    """``(q(y − ep), −pq(y + e(q − p)), −pq(y(q − p) + e((q − p)² − 2pq)))``, p = σ(η) = 1 − q.

    ``q − p = tanh(−η/2)`` (no cancellation near 0); ``pq`` underflows to 0, never NaN.
    """
    p = _logistic(eta)
    q = _logistic(-eta)
    pq = p * q
    t = math.tanh(-0.5 * eta)
    d1 = q * y - aux * pq
    d2 = -pq * (y + aux * t)
    d3 = -pq * (y * t + aux * (t * t - 2.0 * pq))
    return d1, d2, d3


def sigpois_logit_logpdf_np(eta: np.ndarray, y: np.ndarray, aux: np.ndarray) -> np.ndarray:
    """NumPy twin of :func:`sigpois_logit_logpdf` (broadcasting)."""
    eta = np.asarray(eta, dtype=np.float64)
    soft = np.maximum(-eta, 0.0) + np.log1p(np.exp(-np.abs(eta)))
    with np.errstate(invalid="ignore"):
        succ = np.where(y > 0.0, y * soft, 0.0)
        rate = np.where(aux > 0.0, aux * special.expit(eta), 0.0)
    return -succ - rate


@numba.njit(cache=True)
def _normal_pdf(z: float) -> float:
    return _INV_SQRT_2PI * math.exp(-0.5 * z * z)


@numba.njit(cache=True)
def sigpois_probit_logpdf(eta: float, y: float, aux: float) -> float:
    """Sigmoidal Poisson site, normal Φ: ``y log Φ(η) − e Φ(η)``."""
    out = 0.0
    if y > 0.0:
        out += y * log_normal_cdf(eta)
    if aux > 0.0:
        out -= aux * (0.5 * math.erfc(-eta / _SQRT2))
    return out


@numba.njit(cache=True)
def sigpois_probit_derivs(eta: float, y: float, aux: float) -> tuple[float, float, float]:
    """``(y r − eφ, −y r(η + r) + eηφ, y r((η + r)(η + 2r) − 1) − e(η² − 1)φ)``, r = φ/Φ.

    The ``y`` terms are the probit Bernoulli's of a success (inverse Mills ratio through
    :func:`inv_mills`); the ``e`` terms vanish where φ(η) underflows (|η| ≳ 38.6), so that
    ``η²`` overflowing never meets ``φ = 0``.
    """
    d1 = 0.0
    d2 = 0.0
    d3 = 0.0
    if y > 0.0:
        r, zr = inv_mills(eta)
        d1 += y * r
        d2 -= y * (r * zr)
        d3 += y * (r * (zr * (zr + r) - 1.0))
    if aux > 0.0:
        phi = _normal_pdf(eta)
        if phi > 0.0:
            d1 -= aux * phi
            d2 += aux * (eta * phi)
            d3 -= aux * ((eta * eta - 1.0) * phi)
    return d1, d2, d3


def sigpois_probit_logpdf_np(eta: np.ndarray, y: np.ndarray, aux: np.ndarray) -> np.ndarray:
    """NumPy twin of :func:`sigpois_probit_logpdf` (broadcasting)."""
    eta = np.asarray(eta, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        succ = np.where(y > 0.0, y * log_normal_cdf_np(eta), 0.0)
        rate = np.where(aux > 0.0, aux * (0.5 * special.erfc(-eta / _SQRT2)), 0.0)
    return succ - rate
