"""Numba code of every likelihood: site functions, log-likelihood, derivatives, approximations.

One module, because Numba's cache is invalidated only when the file holding a cached function
changes: kernels and the site functions they inline must share a file, or an edit to a site
function would leave stale compiled kernels behind.

Every likelihood factorises over observed cells, ``log L(η) = constant + Σ_i ℓ(η_i; y_i, a_i)``.
This module holds, per likelihood,

* ``<name>_logpdf(eta, y, aux)`` — a Numba ``@njit`` scalar function for ℓ without the constant
  (the one :attr:`Likelihood.site_logpdf` exposes, callable from other njit code);
* ``<name>_derivs(eta, y, aux)`` — ``(ℓ', ℓ'', ℓ''')`` at one site, njit;
* ``<name>_logpdf_np`` — the vectorised NumPy twin of ``<name>_logpdf`` (same formula, same
  branches), used by :meth:`Likelihood.loglik_reference`.

Notation: ``eta`` is the linear predictor η, ``y`` the datum, ``aux`` the per-site parameter
(Poisson: log exposure; Gaussian: noise precision; Bernoulli: unused), ``s = 2y − 1`` the signed
label of a Bernoulli site.

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

The NumPy twins call NumPy's ``exp``/``log1p`` and SciPy's ``erfc`` where Numba calls the C
library's, so the two agree to a few ulp per site, not bitwise (DESIGN §8: no SVML here).

One kernel serves all likelihoods through an integer ``kind`` (``POISSON``, ``GAUSSIAN``,
``LOGIT``, ``PROBIT``) dispatched to the scalar site functions.  A kernel that took the site
function as an argument would be recompiled in every process (Numba cannot cache functions
specialised on a dispatcher argument; measured), so the dispatch is by integer and
``cache=True`` holds.

Determinism: the outer ``prange`` runs over chains (or over independent sites), and each chain's
sum runs sequentially in index order with fastmath off, so a chain's log-likelihood is bitwise
the same whatever the thread count and whichever chains share the batch (DESIGN §5).

Site approximations (Murray & Adams 2010, eq. 12) fit a Gaussian to the site posterior
``p(η) ∝ L(η) N(η; m, v)``, i.e. to ``exp h(η)`` with ``h(η) = ℓ(η) − (η − m)²/(2v)``.  Every
likelihood here is log-concave, so ``h'' ≤ −1/v``:

* *Laplace*: the mode η̂ of ``h`` by safeguarded Newton (Newton steps, bisection when a step leaves
  the bracket or stops halving it — Numerical Recipes' ``rtsafe``) inside an analytic bracket, to
  ``|Δη| ≤ 1e-13 (1 + |η|)``; the fitted precision is ``−h''(η̂) = −ℓ''(η̂) + 1/v``.
* *moments* (Poisson, logit): mean and variance by Gauss–Legendre quadrature (40 nodes) on each
  side of the mode, over ``[η̂ − R₋, η̂ + R₊]`` where ``h`` has dropped by 36 below ``h(η̂)``
  (relative mass beyond < e⁻³⁶ by concavity).  Gauss–Hermite centred on the Laplace fit was
  tried first and measured wrong by up to 8 % in the variance for skewed site posteriors (prior
  variance 10⁴, Poisson y = 0 or logit); the two-sided rule stays within 1e-7 on the same cases.
* *moments* (probit): the closed form of Rasmussen & Williams (2006, eq. 3.58).

The fit ``N(μ, σ²)`` is returned as the Gaussian pseudo-likelihood ``N(c; η, 1/Π)`` that
reproduces it: ``Π = 1/σ² − 1/v`` and ``c = m + (μ − m)/(σ²Π)`` (algebraically
``(μ/σ² − m/v)/Π``).  ``Π`` is thresholded at 0 (the paper: "any negative S_ii must be
thresholded"); where ``Π ≤ 0``, or ``c`` overflows because ``Π`` underflowed, the site carries no
information: ``Π = 0`` and ``c = m``.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import prange
from scipy import special

__all__ = [
    "GAUSSIAN",
    "LAPLACE",
    "LOGIT",
    "MOMENTS",
    "POISSON",
    "PROBIT",
    "bernoulli_logit_derivs",
    "bernoulli_logit_logpdf",
    "bernoulli_logit_logpdf_np",
    "bernoulli_probit_derivs",
    "bernoulli_probit_logpdf",
    "bernoulli_probit_logpdf_np",
    "deriv_kernel",
    "gaussian_derivs",
    "gaussian_logpdf",
    "gaussian_logpdf_np",
    "inv_mills",
    "log_normal_cdf",
    "log_normal_cdf_np",
    "loglik_kernel",
    "obs_deriv_kernel",
    "poisson_derivs",
    "poisson_logpdf",
    "poisson_logpdf_np",
    "site_approx_kernel",
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


# -- kernels --------------------------------------------------------------------------------------

POISSON = 0
GAUSSIAN = 1
LOGIT = 2
PROBIT = 3

LAPLACE = 0
MOMENTS = 1

#: tolerance of the Newton mode search, relative to 1 + |η|
MODE_TOL = 1e-13
MAX_NEWTON = 200
#: the moment quadrature integrates where h ≥ h(η̂) − TAIL_DROP
TAIL_DROP = 36.0
N_QUAD = 40
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(N_QUAD)


@numba.njit(cache=True)
def site_value(kind: int, eta: float, y: float, aux: float) -> float:
    """ℓ(η) at one site of likelihood ``kind`` (without the constant)."""
    if kind == POISSON:
        return poisson_logpdf(eta, y, aux)
    if kind == GAUSSIAN:
        return gaussian_logpdf(eta, y, aux)
    if kind == LOGIT:
        return bernoulli_logit_logpdf(eta, y, aux)
    return bernoulli_probit_logpdf(eta, y, aux)


@numba.njit(cache=True)
def site_derivs(kind: int, eta: float, y: float, aux: float) -> tuple[float, float, float]:
    """``(ℓ', ℓ'', ℓ''')`` at one site of likelihood ``kind``."""
    if kind == POISSON:
        return poisson_derivs(eta, y, aux)
    if kind == GAUSSIAN:
        return gaussian_derivs(eta, y, aux)
    if kind == LOGIT:
        return bernoulli_logit_derivs(eta, y, aux)
    return bernoulli_probit_derivs(eta, y, aux)


@numba.njit(parallel=True, cache=True)
def loglik_kernel(kind, eta, idx, y, aux, constant):
    """``constant + Σ_i ℓ(eta[c, idx[i]])`` per chain; ``eta`` is ``(n_chains, n_cells)``."""
    n_chains = eta.shape[0]
    out = np.empty(n_chains)
    for c in prange(n_chains):
        acc = 0.0
        for i in range(idx.shape[0]):  # sequential, index order: bitwise reproducible
            acc += site_value(kind, eta[c, idx[i]], y[i], aux[i])
        out[c] = constant + acc
    return out


@numba.njit(cache=True, nogil=True)
def site_deriv(kind, order, eta, y, aux):
    """The ``order``-th derivative (1, 2 or 3) of one site's log-likelihood."""
    d1, d2, d3 = site_derivs(kind, eta, y, aux)
    if order == 1:
        return d1
    if order == 2:
        return d2
    return d3


@numba.njit(parallel=True, cache=True)
def deriv_kernel(kind, order, eta, idx, y, aux):
    """The ``order``-th derivative (1, 2 or 3) per cell, 0 at cells not in ``idx``."""
    n_chains = eta.shape[0]
    out = np.zeros_like(eta)
    for c in prange(n_chains):
        for i in range(idx.shape[0]):
            j = idx[i]
            out[c, j] = site_deriv(kind, order, eta[c, j], y[i], aux[i])
    return out


@numba.njit(cache=True, nogil=True)
def obs_deriv_kernel(kind, order, eta_obs, y, aux):
    """The ``order``-th derivative at the observed sites of one chain, ``(n_obs,)``.

    Without the GIL: chains that run in threads (HMC) evaluate their gradients at once.
    """
    out = np.empty_like(eta_obs)
    for i in range(eta_obs.shape[0]):
        out[i] = site_deriv(kind, order, eta_obs[i], y[i], aux[i])
    return out


# -- site approximations ------------------------------------------------------------------------


@numba.njit(cache=True)
def _mode_bracket(kind, y, aux, m, v):
    """``(lo, hi, start)`` with ``h'(lo) ≥ 0 ≥ h'(hi)`` for the site posterior's mode."""
    if kind == POISSON:
        # mode = m' − W(E v e^{m'}), m' = m + v y, and 0 ≤ W(x) ≤ log(1 + x)
        mp = m + v * y
        logx = aux + math.log(v) + mp
        width = max(logx, 0.0) + math.log1p(math.exp(-abs(logx)))
        if logx < 1.0:
            w0 = width
        else:
            w0 = logx - math.log(logx) + math.log(logx) / logx
        return mp - width, mp, mp - min(w0, width)
    s = 2.0 * y - 1.0
    if kind == LOGIT:
        # |ℓ'| < 1: the mode is within v of m, on the label's side
        reach = v
    else:
        # φ(z)/Φ(z) ≤ max(0, −z) + 1 and is decreasing in z
        reach = v * (1.0 + max(0.0, -s * m))
    if s > 0.0:
        return m, m + reach, m
    return m - reach, m, m


@numba.njit(cache=True)
def laplace_mode(kind, y, aux, m, v):
    """Mode of ``h(η) = ℓ(η) − (η − m)²/(2v)`` by safeguarded Newton; returns ``(η̂, ℓ''(η̂))``."""
    lo, hi, x = _mode_bracket(kind, y, aux, m, v)
    dx_old = hi - lo
    dx = dx_old
    for _ in range(MAX_NEWTON):
        d1, d2, _d3 = site_derivs(kind, x, y, aux)
        g = d1 - (x - m) / v
        gp = d2 - 1.0 / v
        if g > 0.0:
            lo = x
        elif g < 0.0:
            hi = x
        else:
            return x, d2
        step = g / gp
        newton = x - step
        if not (lo < newton < hi) or not (abs(2.0 * step) <= abs(dx_old)):
            dx_old = dx
            dx = 0.5 * (hi - lo)
            x = lo + dx
        else:
            dx_old = dx
            dx = step
            x = newton
        if abs(dx) <= MODE_TOL * (1.0 + abs(x)) or hi - lo <= MODE_TOL * (1.0 + abs(x)):
            break
    d1, d2, _d3 = site_derivs(kind, x, y, aux)
    return x, d2


@numba.njit(cache=True)
def _h(kind, eta, y, aux, m, v):
    d = eta - m
    return site_value(kind, eta, y, aux) - 0.5 * d * d / v


@numba.njit(cache=True)
def _tail_reach(kind, y, aux, m, v, mode, h_mode, scale, side):
    """Distance R ≥ 0 from the mode, on ``side`` (±1), where h has dropped by ``TAIL_DROP``.

    ``g(t) = h(mode + side·t) − h_mode + TAIL_DROP`` is concave and decreasing on t ≥ 0, with
    ``g(0) > 0 ≥ g(√(2 v TAIL_DROP))`` (strong concavity); safeguarded Newton to 1e-3 relative,
    returning the upper end of the bracket (so the quadrature range always covers the drop).
    """
    lo = 0.0
    hi = math.sqrt(2.0 * v * TAIL_DROP)
    t = min(math.sqrt(2.0 * TAIL_DROP) * scale, hi)
    dx_old = hi - lo
    for _ in range(MAX_NEWTON):
        eta = mode + side * t
        g = _h(kind, eta, y, aux, m, v) - h_mode + TAIL_DROP
        if g > 0.0:
            lo = t
        else:
            hi = t
        if hi - lo <= 1e-3 * hi:
            break
        d1, _d2, _d3 = site_derivs(kind, eta, y, aux)
        gp = side * (d1 - (eta - m) / v)
        step = g / gp
        newton = t - step
        if not (math.isfinite(newton) and lo < newton < hi) or abs(step) > 0.5 * dx_old:
            newton = 0.5 * (lo + hi)
        dx_old = abs(newton - t)
        t = newton
    return hi


@numba.njit(cache=True)
def _quadrature_moments(kind, y, aux, m, v, mode, curv, nodes, weights):
    """Mean and variance of ``exp h`` by Gauss–Legendre on each side of the mode."""
    h_mode = _h(kind, mode, y, aux, m, v)
    scale = 1.0 / math.sqrt(curv)
    m0 = 0.0
    m1 = 0.0
    m2 = 0.0
    for side in (-1.0, 1.0):
        reach = _tail_reach(kind, y, aux, m, v, mode, h_mode, scale, side)
        half = 0.5 * reach
        for k in range(nodes.shape[0]):
            t = half * (1.0 + nodes[k])
            f = weights[k] * half * math.exp(_h(kind, mode + side * t, y, aux, m, v) - h_mode)
            m0 += f
            m1 += f * side * t
            m2 += f * t * t
    shift = m1 / m0
    return mode + shift, m2 / m0 - shift * shift


@numba.njit(cache=True)
def pseudo_likelihood(mu, precision_raw, m, v):
    """``(Π, c)`` from a fit with mean ``mu`` and precision ``precision_raw + 1/v`` (thresholded).

    ``c = m + (μ − m)(Π + 1/v)/Π``; a site with ``Π ≤ 0`` (or whose ``c`` overflows) gets
    ``(0, m)``: no information.
    """
    if not precision_raw > 0.0:
        return 0.0, m
    c = m + (mu - m) * (precision_raw + 1.0 / v) / precision_raw
    if not math.isfinite(c):
        return 0.0, m
    return precision_raw, c


@numba.njit(cache=True)
def _probit_moments(y, m, v):
    """``(Π, c)`` from the exact moments of ``Φ(sη) N(η; m, v)`` (R&W 2006 eq. 3.58)."""
    s = 2.0 * y - 1.0
    root = math.sqrt(1.0 + v)
    z = s * m / root
    r, zr = inv_mills(z)
    # σ² = v(1 − q),  μ − m = s v r/√(1+v),  q = v r (z + r)/(1 + v) ∈ [0, 1)
    q = v * r * zr / (1.0 + v)
    if not q > 0.0:
        return 0.0, m
    c = m + s * root / zr  # = m + (μ − m)/q
    if not math.isfinite(c):
        return 0.0, m
    return q / (v * (1.0 - q)), c


@numba.njit(cache=True)
def site_approx(kind, method, y, aux, m, v, nodes, weights):
    """``(Π, c)`` of one site (see the module docstring)."""
    if kind == PROBIT and method == MOMENTS:
        return _probit_moments(y, m, v)
    mode, d2 = laplace_mode(kind, y, aux, m, v)
    if method == LAPLACE:
        return pseudo_likelihood(mode, -d2, m, v)
    mu, var = _quadrature_moments(kind, y, aux, m, v, mode, 1.0 / v - d2, nodes, weights)
    return pseudo_likelihood(mu, (v - var) / (v * var), m, v)


@numba.njit(parallel=True, cache=True)
def site_approx_kernel(kind, method, y, aux, m, v, nodes, weights):
    """``(Π, c)`` for every entry of ``m, v`` (``(n_rows, n_obs)``), sites independent."""
    n_rows, n_obs = m.shape
    precision = np.empty((n_rows, n_obs))
    center = np.empty((n_rows, n_obs))
    for k in prange(n_rows * n_obs):
        r = k // n_obs
        i = k - r * n_obs
        p, c = site_approx(kind, method, y[i], aux[i], m[r, i], v[r, i], nodes, weights)
        precision[r, i] = p
        center[r, i] = c
    return precision, center


def gauss_legendre() -> tuple[np.ndarray, np.ndarray]:
    """The ``N_QUAD``-point Gauss–Legendre rule on [−1, 1] used by the moment fits."""
    return _GL_NODES, _GL_WEIGHTS
