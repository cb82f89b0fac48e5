"""Numba kernels of every likelihood: log-likelihood, derivatives, site approximations.

The scalar site functions they call live in :mod:`._sites` (re-exported here).  Numba
invalidates a cached kernel only when its own file changes, not when a callee in another file
does; the package's cache stamp (``lattice_lgm._numba_cache``, decision 82) drops every cached
kernel whenever any source changes, so the two files may change apart (decision 103: the
site functions left this module when the binomial's made it too long).

One kernel serves all likelihoods through an integer ``kind`` (``POISSON``, ``GAUSSIAN``,
``LOGIT``, ``PROBIT``, ``BINOMIAL_LOGIT``, ``BINOMIAL_PROBIT``, ``SIGPOIS_LOGIT``,
``SIGPOIS_PROBIT``) dispatched to the scalar site functions.  A kernel that took the site
function as an argument would be recompiled in every process (Numba cannot cache functions
specialised on a dispatcher argument; measured), so the dispatch is by integer and
``cache=True`` holds.

Determinism: the outer ``prange`` runs over chains (or over independent sites), and each chain's
sum runs sequentially in index order with fastmath off, so a chain's log-likelihood is bitwise
the same whatever the thread count and whichever chains share the batch (DESIGN §5).

Site approximations (Murray & Adams 2010, eq. 12) fit a Gaussian to the site posterior
``p(η) ∝ L(η) N(η; m, v)``, i.e. to ``exp h(η)`` with ``h(η) = ℓ(η) − (η − m)²/(2v)``.  Every
likelihood here but the sigmoidal Poisson is log-concave, so ``h'' ≤ −1/v``:

* *Laplace*: the mode η̂ of ``h`` by safeguarded Newton (Newton steps, bisection when a step leaves
  the bracket or stops halving it — Numerical Recipes' ``rtsafe``) inside an analytic bracket, to
  ``|Δη| ≤ 1e-13 (1 + |η|)``; the fitted precision is ``−h''(η̂) = −ℓ''(η̂) + 1/v``.
* *moments* (Poisson, logit, binomial): mean and variance by Gauss–Legendre quadrature
  (40 nodes) on each side of the mode, over ``[η̂ − R₋, η̂ + R₊]`` where ``h`` has dropped by
  36 below ``h(η̂)`` (relative mass beyond < e⁻³⁶ by concavity).  Gauss–Hermite centred on the
  Laplace fit was tried first and measured wrong by up to 8 % in the variance for skewed site
  posteriors (prior variance 10⁴, Poisson y = 0 or logit); the two-sided rule stays within
  1e-7 on the same cases.
* *moments* (probit): the closed form of Rasmussen & Williams (2006, eq. 3.58).
* a binomial site with no trials carries no information, whatever the method: ``Π = 0``,
  ``c = m`` (its ℓ is 0, so the site posterior is the prior); so does a sigmoidal Poisson site
  with no exposure.
* sigmoidal Poisson (not log-concave; ``h`` may have two modes): both methods in
  :mod:`._sigmoid_fits`, from a bracket that holds every mode.

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

from ._sigmoid_fits import sigpois_fit
from ._sites import (
    bernoulli_logit_derivs,
    bernoulli_logit_logpdf,
    bernoulli_logit_logpdf_np,
    bernoulli_probit_derivs,
    bernoulli_probit_logpdf,
    bernoulli_probit_logpdf_np,
    binomial_logit_derivs,
    binomial_logit_logpdf,
    binomial_logit_logpdf_np,
    binomial_probit_derivs,
    binomial_probit_logpdf,
    binomial_probit_logpdf_np,
    gaussian_derivs,
    gaussian_logpdf,
    gaussian_logpdf_np,
    inv_mills,
    log_normal_cdf,
    log_normal_cdf_np,
    poisson_derivs,
    poisson_logpdf,
    poisson_logpdf_np,
    sigpois_logit_derivs,
    sigpois_logit_logpdf,
    sigpois_logit_logpdf_np,
    sigpois_probit_derivs,
    sigpois_probit_logpdf,
    sigpois_probit_logpdf_np,
)

__all__ = [
    "BINOMIAL_LOGIT",
    "BINOMIAL_PROBIT",
    "GAUSSIAN",
    "LAPLACE",
    "LOGIT",
    "MOMENTS",
    "POISSON",
    "PROBIT",
    "SIGPOIS_LOGIT",
    "SIGPOIS_PROBIT",
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
    "sigpois_logit_derivs",
    "sigpois_logit_logpdf",
    "sigpois_logit_logpdf_np",
    "sigpois_probit_derivs",
    "sigpois_probit_logpdf",
    "sigpois_probit_logpdf_np",
    "site_approx_kernel",
]


# -- kernels --------------------------------------------------------------------------------------

POISSON = 0
GAUSSIAN = 1
LOGIT = 2
PROBIT = 3
BINOMIAL_LOGIT = 4
BINOMIAL_PROBIT = 5
SIGPOIS_LOGIT = 6
SIGPOIS_PROBIT = 7

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
    if kind == PROBIT:
        return bernoulli_probit_logpdf(eta, y, aux)
    if kind == BINOMIAL_LOGIT:
        return binomial_logit_logpdf(eta, y, aux)
    if kind == BINOMIAL_PROBIT:
        return binomial_probit_logpdf(eta, y, aux)
    if kind == SIGPOIS_LOGIT:
        return sigpois_logit_logpdf(eta, y, aux)
    return sigpois_probit_logpdf(eta, y, aux)


@numba.njit(cache=True)
def site_derivs(kind: int, eta: float, y: float, aux: float) -> tuple[float, float, float]:
    """``(ℓ', ℓ'', ℓ''')`` at one site of likelihood ``kind``."""
    if kind == POISSON:
        return poisson_derivs(eta, y, aux)
    if kind == GAUSSIAN:
        return gaussian_derivs(eta, y, aux)
    if kind == LOGIT:
        return bernoulli_logit_derivs(eta, y, aux)
    if kind == PROBIT:
        return bernoulli_probit_derivs(eta, y, aux)
    if kind == BINOMIAL_LOGIT:
        return binomial_logit_derivs(eta, y, aux)
    if kind == BINOMIAL_PROBIT:
        return binomial_probit_derivs(eta, y, aux)
    if kind == SIGPOIS_LOGIT:
        return sigpois_logit_derivs(eta, y, aux)
    return sigpois_probit_derivs(eta, y, aux)


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
    if kind == BINOMIAL_LOGIT or kind == BINOMIAL_PROBIT:
        return _binomial_bracket(kind, y, aux, m, v)
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
def _binomial_bracket(kind, y, n, m, v):
    """``(lo, hi, start)`` for a binomial site, ``y`` successes of ``n`` trials.

    ``ℓ' = y ℓ₁' + (n − y) ℓ₀'`` with ``0 ≤ ℓ₁' ≤ b₁`` and ``−b₀ ≤ ℓ₀' ≤ 0`` on the mode's side
    of ``m`` (logit ``b = 1``; probit ``b₁ = 1 + max(0, −m)``, ``b₀ = 1 + max(0, m)``, as
    Bernoulli's bracket), so ``h'(m − v(n − y)b₀) ≥ 0 ≥ h'(m + v y b₁)``.  With ``0 < y < n``
    the site likelihood peaks at ``η* = g(y/n)`` and the mode lies between ``m`` and ``η*``;
    the start is the precision-weighted mean of ``m`` and ``η*`` (η* exact for logit, the
    logit's over 1.7 for probit, clipped to the bracket).
    """
    f = n - y
    if kind == BINOMIAL_LOGIT:
        lo = m - v * f
        hi = m + v * y
    else:
        lo = m - v * f * (1.0 + max(0.0, m))
        hi = m + v * y * (1.0 + max(0.0, -m))
    if not (y > 0.0 and f > 0.0):
        return lo, hi, m  # monotone (y = 0 or y = n) or no trials (lo = hi = m)
    star = math.log(y / f)
    info = y * f / n  # −ℓ''(η*) = n p(1 − p) (logit), p = y/n
    if kind == BINOMIAL_LOGIT:
        lo = max(lo, min(m, star))
        hi = min(hi, max(m, star))
    else:
        star /= 1.7
        info *= 2.6  # roughly the probit's n φ(η*)²/(p(1 − p)) near p = ½
    start = (m / v + info * star) / (1.0 / v + info)
    return lo, hi, min(max(start, lo), hi)


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
    if (kind == BINOMIAL_LOGIT or kind == BINOMIAL_PROBIT) and not aux > 0.0:
        return 0.0, m  # no trials: ℓ ≡ 0, the site posterior is the prior
    if kind == SIGPOIS_LOGIT or kind == SIGPOIS_PROBIT:
        if not aux > 0.0:
            return 0.0, m  # no exposure (so no count): ℓ ≡ 0
        mu, raw = sigpois_fit(kind == SIGPOIS_PROBIT, method == MOMENTS, y, aux, m, v,
                              nodes, weights)
        return pseudo_likelihood(mu, raw, m, v)

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
