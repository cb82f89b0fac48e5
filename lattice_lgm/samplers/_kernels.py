"""Numba kernels shared by the latent-field samplers, built once per likelihood site function.

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
from collections.abc import Callable
from typing import Any

import numba

__all__ = ["SiteKernels", "site_kernels"]

#: status codes returned by the ESS kernel per chain
ESS_DONE, ESS_NEED_UNIFORMS, ESS_NAN, ESS_EVALUATE = 0, 1, 2, 3

_CACHE: dict[Any, SiteKernels] = {}


class SiteKernels:
    """The compiled kernels for one scalar ``site_fn(eta, y, aux) -> float`` (see module doc)."""

    def __init__(self, site_fn: Callable[[float, float, float], float]) -> None:
        site = site_fn

        @numba.njit(parallel=True, nogil=True)
        def rotated_loglik(f, nu, sidx, xa, xb, base, ct, st, y, aux, out):  # pragma: no cover
            has_x = xa.shape[1] > 0
            for c in numba.prange(f.shape[0]):
                s = 0.0
                for i in range(sidx.shape[0]):
                    a = f[c, sidx[i]]
                    b = nu[c, sidx[i]]
                    if has_x:
                        a += xa[c, i]
                        b += xb[c, i]
                    s += site(base[c, i] + ct[c] * a + st[c] * b, y[i], aux[i])
                out[c] = s

        @numba.njit(parallel=True, nogil=True)
        def ess(f, nu, sidx, xa, xb, base, y, aux, log_y, lo, hi, t, uniforms, n_evals,
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
                        s += site(base[c, i] + ct * a + st * b, y[i], aux[i])
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

        @numba.njit(parallel=True, nogil=True)
        def rotate(x, nu, ct, st, out):  # pragma: no cover - numba
            # out = x cos t + nu sin t, per chain over the whole state (complex too); out may
            # be x itself (each element is read before it is written)
            for c in numba.prange(x.shape[0]):
                for j in range(x.shape[1]):
                    out[c, j] = ct[c] * x[c, j] + st[c] * nu[c, j]

        self.rotated_loglik = rotated_loglik
        self.ess = ess
        self.rotate = rotate


def site_kernels(site_fn: Callable[[float, float, float], float]) -> SiteKernels:
    """The :class:`SiteKernels` for ``site_fn``, compiled lazily and cached per function."""
    kern = _CACHE.get(site_fn)
    if kern is None:
        kern = _CACHE[site_fn] = SiteKernels(site_fn)
    return kern
