"""Site fits of the sigmoidal Poisson likelihood, whose log-likelihood is not concave.

A cell's count is ``y ~ Poisson(e Φ(η))`` (Adams, Murray & MacKay 2009's sigmoidal Gaussian
Cox process, thinned per cell), ``ℓ(η) = y log Φ(η) − e Φ(η)``.  The site posterior
``exp h(η)``, ``h = ℓ − (η − m)²/(2v)`` (Murray & Adams 2010, eq. 12), may have two modes:
``ℓ`` saturates at ``−e`` as ``η → ∞``, so a prior far to the right leaves a second mode
where the data's penalty is paid in full.  The fits of :mod:`._kernels` assume ``h'' ≤ −1/v``;
these do not.

Structure used (with ``Φ`` logistic or normal and ``y < e``; for ``y ≥ e`` or ``e = 0`` ℓ is
concave, since then ``ℓ'' ≤ e(ηφ − r(η + r)) ≤ 0`` for the probit and ``−pq(y + e(q − p)) ≤ 0``
for the logit):

* ``ℓ'' < 0`` for ``η ≤ 0``; on ``η > 0`` it rises to one peak ``η_p`` and falls to 0 (logit:
  in ``t = tanh(η/2)``, ``ℓ'' = (1 − t²)(et − y)/4``, a cubic concave where positive, peak
  ``t* = (y + √(y² + 3e²))/(3e)``; probit: checked numerically for ``y/e`` on a fine grid,
  ``η_p`` the root of ℓ''' by bisection).  So ``h'' > 0`` at most on one interval
  ``(η_a, η_b)`` (where ``ℓ'' > 1/v``), ``h'`` decreases, increases, decreases, and ``h`` has at
  most two local maxima: a left one in ``(−∞, η_a]``, a right one in ``[η_b, ∞)``, and a local
  minimum between them.
* Every stationary point lies in ``[m + v·min ℓ', m + v·max ℓ']``: ``ℓ' ≥ −e/4`` (logit),
  ``≥ −e/√(2π)`` (probit); ``ℓ' ≤ y`` (logit), ``≤ y(1 + max(0, −m))`` right of ``m`` (probit,
  ``r`` decreasing), so ``h'(lo) ≥ 0 ≥ h'(hi)``: a guaranteed bracket, with the pieces where
  ``h'`` is monotone inside it.

*Laplace*: each candidate maximum by safeguarded Newton in its monotone piece (the same rule as
:func:`._kernels.laplace_mode`), the higher ``h`` wins; ``Π = −ℓ''(η̂)``, which may be negative
(then thresholded to 0 by the caller).  *Moments*: Gauss–Legendre on panels split at the
global mode, the local minimum and the other mode when it lies within e³⁶ of the top, out to
where ``h`` has dropped by 36 — found in brackets from ``ℓ ≤ ℓ_sup = y log P* − e P*``,
``P* = min(1, y/e)`` — each panel cut into sub-panels no wider than 12 local standard
deviations.  Both return ``(μ, raw precision)`` for :func:`._kernels.pseudo_likelihood`.
"""

from __future__ import annotations

import math

import numba

from ._sites import (
    sigpois_logit_derivs,
    sigpois_logit_logpdf,
    sigpois_probit_derivs,
    sigpois_probit_logpdf,
)

__all__ = ["sigpois_fit", "sigpois_modes"]

_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
MODE_TOL = 1e-13
MAX_NEWTON = 200
MAX_BISECT = 200
TAIL_DROP = 36.0
#: a panel of the moment quadrature spans at most this many local standard deviations
PANEL_SDS = 12.0
MAX_SUB = 32


@numba.njit(cache=True)
def _derivs(probit, eta, y, e):
    if probit:
        return sigpois_probit_derivs(eta, y, e)
    return sigpois_logit_derivs(eta, y, e)


@numba.njit(cache=True)
def _h(probit, eta, y, e, m, v):
    d = eta - m
    if probit:
        return sigpois_probit_logpdf(eta, y, e) - 0.5 * d * d / v
    return sigpois_logit_logpdf(eta, y, e) - 0.5 * d * d / v


@numba.njit(cache=True)
def _hp(probit, eta, y, e, m, v):
    d1, _d2, _d3 = _derivs(probit, eta, y, e)
    return d1 - (eta - m) / v


@numba.njit(cache=True)
def _curvature_peak(probit, y, e):
    """``η_p = argmax ℓ''`` (on η > 0; requires ``0 ≤ y < e``)."""
    if not probit:
        t = (y + math.sqrt(y * y + 3.0 * e * e)) / (3.0 * e)
        return math.log1p(t) - math.log1p(-t)  # 2 atanh(t)
    # ℓ'''(0) = y r(0)(2r(0)² − 1) + eφ(0) > 0; ℓ''' < 0 once Φ(η) ≳ y/e and η > 1
    lo = 0.0
    hi = 1.0
    while _derivs(probit, hi, y, e)[2] >= 0.0:
        lo = hi
        hi *= 2.0
        if hi > 64.0:
            return lo  # φ(η) < 1e-200 here: the peak of ℓ'' is 0 to double precision
    for _ in range(MAX_BISECT):
        mid = 0.5 * (lo + hi)
        if _derivs(probit, mid, y, e)[2] >= 0.0:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * (1.0 + hi):
            break
    return 0.5 * (lo + hi)


@numba.njit(cache=True)
def _curvature_crossing(probit, y, e, level, a, b):
    """A root of ``ℓ''(η) = level`` between ``a`` and ``b`` (signs differ), by bisection."""
    fa = _derivs(probit, a, y, e)[1] - level
    for _ in range(MAX_BISECT):
        mid = 0.5 * (a + b)
        fm = _derivs(probit, mid, y, e)[1] - level
        if (fm > 0.0) == (fa > 0.0):
            a = mid
            fa = fm
        else:
            b = mid
        if abs(b - a) <= 1e-12 * (1.0 + abs(mid)):
            break
    return 0.5 * (a + b)


@numba.njit(cache=True)
def _newton(probit, y, e, m, v, lo, hi, x):
    """Root of ``h'`` in ``[lo, hi]`` with ``h'(lo) ≥ 0 ≥ h'(hi)`` (rtsafe, as laplace_mode)."""
    dx_old = hi - lo
    dx = dx_old
    for _ in range(MAX_NEWTON):
        d1, d2, _d3 = _derivs(probit, x, y, e)
        g = d1 - (x - m) / v
        gp = d2 - 1.0 / v
        if g > 0.0:
            lo = x
        elif g < 0.0:
            hi = x
        else:
            return x
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
    return x


@numba.njit(cache=True)
def _bisect_rising(probit, y, e, m, v, a, b):
    """Root of ``h'`` in ``[a, b]`` with ``h'(a) ≤ 0 ≤ h'(b)`` (the local minimum of h)."""
    for _ in range(MAX_BISECT):
        mid = 0.5 * (a + b)
        if _hp(probit, mid, y, e, m, v) < 0.0:
            a = mid
        else:
            b = mid
        if b - a <= 1e-10 * (1.0 + abs(mid)):
            break
    return 0.5 * (a + b)


@numba.njit(cache=True)
def sigpois_modes(probit, y, e, m, v):
    """``(M, S, N, two)``: the global mode of ``h`` and, if any, the other one and the dip.

    With ``two`` False ``S = N = M``; else ``S`` is the other local mode and ``N`` the local
    minimum between them.  Requires ``e > 0``.
    """
    lo = m - v * e * (_INV_SQRT_2PI if probit else 0.25)
    hi = m + v * y * ((1.0 + max(0.0, -m)) if probit else 1.0)
    if y < e:
        eta_p = _curvature_peak(probit, y, e)
        convex = _derivs(probit, eta_p, y, e)[1] * v > 1.0
    else:
        eta_p = 0.0
        convex = False
    if not convex:
        # h'' < 0: one root.  Start at the precision-weighted mean of m and the likelihood's
        # own maximum g(y/e) where it is finite (logit exact, probit roughly: the logit's / 1.7)
        start = m
        if 0.0 < y < e:
            star = math.log(y / (e - y))
            info = y * (e - y) * (e - y) / (e * e)
            if probit:
                star /= 1.7
                info *= 2.6
            start = (m / v + info * star) / (1.0 / v + info)
        start = min(max(start, lo), hi)
        x = _newton(probit, y, e, m, v, lo, hi, start)
        return x, x, x, False
    level = 1.0 / v
    eta_a = _curvature_crossing(probit, y, e, level, 0.0, eta_p)
    far = eta_p + 1.0
    while _derivs(probit, far, y, e)[1] > level:  # ℓ'' → 0 as η → ∞
        far = eta_p + 2.0 * (far - eta_p)
    eta_b = _curvature_crossing(probit, y, e, level, eta_p, far)
    xl = xr = 0.0
    left = _hp(probit, eta_a, y, e, m, v) <= 0.0  # a maximum in [lo, η_a]
    right = _hp(probit, eta_b, y, e, m, v) >= 0.0  # a maximum in [η_b, hi]
    if left:
        a = min(lo, eta_a)
        xl = _newton(probit, y, e, m, v, a, eta_a, 0.5 * (a + eta_a))
    if right:
        b = max(hi, eta_b)
        xr = _newton(probit, y, e, m, v, eta_b, b, 0.5 * (eta_b + b))
    if left and right:
        mid = _bisect_rising(probit, y, e, m, v, eta_a, eta_b)
        if _h(probit, xl, y, e, m, v) >= _h(probit, xr, y, e, m, v):
            return xl, xr, mid, True
        return xr, xl, mid, True
    if left:
        return xl, xl, xl, False
    return xr, xr, xr, False


@numba.njit(cache=True)
def _reach(probit, y, e, m, v, origin, side, h_ref, hi, scale):
    """``t ∈ [0, hi]`` where ``h(origin + side·t)`` has fallen to ``h_ref − TAIL_DROP``.

    ``h`` is decreasing there and ``hi`` a point past the drop: safeguarded Newton to 1e-3
    relative, returning the bracket's upper end so that the range covers the drop.
    """
    lo = 0.0
    t = min(math.sqrt(2.0 * TAIL_DROP) * scale, hi)
    dx_old = hi - lo
    for _ in range(MAX_NEWTON):
        eta = origin + side * t
        g = _h(probit, eta, y, e, m, v) - h_ref + TAIL_DROP
        if g > 0.0:
            lo = t
        else:
            hi = t
        if hi - lo <= 1e-3 * hi:
            break
        gp = side * _hp(probit, eta, y, e, m, v)
        step = g / gp
        newton = t - step
        if not (math.isfinite(newton) and lo < newton < hi) or abs(step) > 0.5 * dx_old:
            newton = 0.5 * (lo + hi)
        dx_old = abs(newton - t)
        t = newton
    return hi


@numba.njit(cache=True)
def _outer(m, v, origin, side, k):
    """A ``t ≥ 0`` with ``(origin + side·t − m)² ≥ 2vk``: there ``h ≤ ℓ_sup − k``."""
    return max(0.0, -side * (origin - m) + math.sqrt(2.0 * v * k))


@numba.njit(cache=True)
def _panel(probit, y, e, m, v, h_ref, centre, a, b, scale, nodes, weights):
    """``(∫ w, ∫ w (η − centre), ∫ w (η − centre)²)`` over ``[a, b]``, ``w = exp(h − h_ref)``."""
    n_sub = int(min(max(math.ceil((b - a) / (PANEL_SDS * scale)), 1.0), float(MAX_SUB)))
    width = (b - a) / n_sub
    half = 0.5 * width
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    for j in range(n_sub):
        mid = a + (j + 0.5) * width
        for k in range(nodes.shape[0]):
            x = mid + half * nodes[k]
            f = weights[k] * half * math.exp(_h(probit, x, y, e, m, v) - h_ref)
            d = x - centre
            s0 += f
            s1 += f * d
            s2 += f * d * d
    return s0, s1, s2


@numba.njit(cache=True)
def _local_scale(probit, x, y, e, v):
    d2 = _derivs(probit, x, y, e)[1]
    return 1.0 / math.sqrt(max(1.0 / v - d2, 1e-300))


@numba.njit(cache=True)
def sigpois_fit(probit, moments, y, e, m, v, nodes, weights):
    """``(μ, raw precision)`` of one site's fit (module docstring); requires ``e > 0``."""
    top, other, low, two = sigpois_modes(probit, y, e, m, v)
    d2 = _derivs(probit, top, y, e)[1]
    if not moments:
        return top, -d2
    h_top = _h(probit, top, y, e, m, v)
    p_star = min(1.0, y / e)
    l_sup = -e * p_star
    if y > 0.0:
        l_sup += y * math.log(p_star)
    k = max(l_sup - h_top, 0.0) + TAIL_DROP  # h ≤ ℓ_sup − (η − m)²/(2v)
    scale = _local_scale(probit, top, y, e, v)
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    toward = 0.0  # the side of the other mode (0: none)
    if two:
        toward = 1.0 if other > top else -1.0
    for side in (-1.0, 1.0):
        if side != toward:
            hi = _outer(m, v, top, side, k)
            r = _reach(probit, y, e, m, v, top, side, h_top, hi, scale)
            a, b = (top - r, top) if side < 0.0 else (top, top + r)
            p0, p1, p2 = _panel(probit, y, e, m, v, h_top, top, a, b, scale, nodes, weights)
        else:
            t_low = abs(low - top)
            h_other = _h(probit, other, y, e, m, v)
            if h_other <= h_top - TAIL_DROP:
                # the other mode is negligible: the drop comes before the local minimum
                r = _reach(probit, y, e, m, v, top, side, h_top, t_low, scale)
                a, b = (top - r, top) if side < 0.0 else (top, top + r)
                p0, p1, p2 = _panel(probit, y, e, m, v, h_top, top, a, b, scale, nodes,
                                    weights)
            else:
                s_other = _local_scale(probit, other, y, e, v)
                hi = _outer(m, v, other, side, k)
                r = _reach(probit, y, e, m, v, other, side, h_top, hi, s_other)
                edge = other + side * r
                p0, p1, p2 = _panel(probit, y, e, m, v, h_top, top, min(top, low),
                                    max(top, low), scale, nodes, weights)
                q0, q1, q2 = _panel(probit, y, e, m, v, h_top, top, min(low, other),
                                    max(low, other), s_other, nodes, weights)
                u0, u1, u2 = _panel(probit, y, e, m, v, h_top, top, min(other, edge),
                                    max(other, edge), s_other, nodes, weights)
                p0 += q0 + u0
                p1 += q1 + u1
                p2 += q2 + u2
        s0 += p0
        s1 += p1
        s2 += p2
    shift = s1 / s0
    var = s2 / s0 - shift * shift
    return top + shift, (v - var) / (v * var)
