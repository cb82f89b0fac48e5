"""Numba kernels shared by the latent-field samplers, one set for every likelihood kind.

Every kernel runs a ``prange`` over chains and sums each chain's sites sequentially in index
order, so a chain's result is bitwise the same whatever the thread count and whichever chains run
beside it (DESIGN §5).  Random numbers are drawn outside, from each chain's own stream, and passed
in: kernels never draw.

Notation: for chain ``c`` and observed site ``i`` (state index ``sidx[i]``) the linear predictor
along an ellipse is ``eta = base[c, i] + cos(t)·(f[c, sidx[i]] + xa[c, i]) + sin(t)·(nu[c,
sidx[i]] + xb[c, i])`` — ``f`` the current state, ``nu`` the auxiliary draw, ``xa``/``xb`` their
in-block covariate terms ``X β`` (arrays of width 0 without covariates), ``base`` the parts that
do not rotate (mean offset, fixed offsets).  Fields are read at the sites directly from the
state, so no window copy is made.
"""

from __future__ import annotations

import math
from typing import Any

import numba

from ..likelihoods._kernels import site_value

__all__ = ["SiteKernels", "site_kernels"]

#: status codes returned by the ESS kernel per chain
ESS_DONE, ESS_NEED_UNIFORMS, ESS_NAN, ESS_EVALUATE = 0, 1, 2, 3

_CACHE: dict[Any, SiteKernels] = {}


@numba.njit(parallel=True, nogil=True, cache=True)
def _rotated_loglik(kind, f, nu, sidx, xa, xb, base, ct, st, y, aux, out):  # pragma: no cover
    has_x = xa.shape[1] > 0
    for c in numba.prange(f.shape[0]):
        s = 0.0
        for i in range(sidx.shape[0]):
            a = f[c, sidx[i]]
            b = nu[c, sidx[i]]
            if has_x:
                a += xa[c, i]
                b += xb[c, i]
            s += site_value(kind, base[c, i] + ct[c] * a + st[c] * b, y[i], aux[i])
        out[c] = s


@numba.njit(parallel=True, nogil=True, cache=True)
def _ess(kind, f, nu, sidx, xa, xb, base, y, aux, log_y, lo, hi, t, uniforms, n_evals,
         out_ll, status, max_evals):  # pragma: no cover - numba
    # Murray, Adams & MacKay (2010), Figure 2, steps 4–10, for every chain at once.
    has_x = xa.shape[1] > 0
    for c in numba.prange(f.shape[0]):
        if status[c] != ESS_EVALUATE and status[c] != ESS_NEED_UNIFORMS:
            continue
        k = 0
        if status[c] == ESS_NEED_UNIFORMS:  # resumed with a fresh block: step 9 first
            t[c] = lo[c] + uniforms[c, 0] * (hi[c] - lo[c])
            k = 1
        while True:
            ct = math.cos(t[c])
            st = math.sin(t[c])
            s = 0.0
            for i in range(sidx.shape[0]):  # step 4: f' = f cos t + nu sin t, at sites
                a = f[c, sidx[i]]
                b = nu[c, sidx[i]]
                if has_x:
                    a += xa[c, i]
                    b += xb[c, i]
                s += site_value(kind, base[c, i] + ct * a + st * b, y[i], aux[i])
            n_evals[c] += 1
            if s != s:
                status[c] = ESS_NAN
                out_ll[c] = s
                break
            if s > log_y[c]:  # steps 5-6: on the slice, accept
                status[c] = ESS_DONE
                out_ll[c] = s
                break
            # step 8: shrink the bracket towards t = 0 (the current state)
            if t[c] < 0.0:
                lo[c] = t[c]
            else:
                hi[c] = t[c]
            if k >= uniforms.shape[1] or n_evals[c] >= max_evals:
                # the caller draws more uniforms from this chain's stream, or raises
                status[c] = ESS_NEED_UNIFORMS
                break
            # step 9: t ~ Uniform[lo, hi]
            t[c] = lo[c] + uniforms[c, k] * (hi[c] - lo[c])
            k += 1


@numba.njit(parallel=True, nogil=True, cache=True)
def _rotate(x, nu, ct, st, out):  # pragma: no cover - numba
    # out = x cos t + nu sin t, per chain over the whole state (complex too); out may be x
    # itself (each element is read before it is written)
    for c in numba.prange(x.shape[0]):
        for j in range(x.shape[1]):
            out[c, j] = ct[c] * x[c, j] + st[c] * nu[c, j]


class SiteKernels:
    """The kernels bound to one likelihood's ``kind`` (see the module docstring).

    Module-level, compiled once and cached on disk (``cache=True``): the site function is
    chosen by the integer ``kind`` inside (:func:`~lattice_lgm.likelihoods._kernels.site_value`),
    as the likelihoods' own kernels do.  They were closures over the site function, compiled
    afresh in every process: ≈ 3–4 s of every run's start (issue 26).
    """

    def __init__(self, kind: int) -> None:
        self.kind = int(kind)

    def rotated_loglik(self, *args: Any) -> None:
        """Per chain: ``Σ_i ℓ(η_i)`` along the ellipse at angle ``t`` (into ``out``)."""
        _rotated_loglik(self.kind, *args)

    def ess(self, *args: Any) -> None:
        """Steps 4–10 of elliptical slice sampling for every chain (in place)."""
        _ess(self.kind, *args)

    @staticmethod
    def rotate(x: Any, nu: Any, ct: Any, st: Any, out: Any) -> None:
        """``out = x cos t + nu sin t`` per chain."""
        _rotate(x, nu, ct, st, out)


def site_kernels(likelihood: Any) -> SiteKernels:
    """The :class:`SiteKernels` of ``likelihood`` (one per likelihood kind)."""
    kind = int(likelihood._kind)
    kern = _CACHE.get(kind)
    if kern is None:
        kern = _CACHE[kind] = SiteKernels(kind)
    return kern
