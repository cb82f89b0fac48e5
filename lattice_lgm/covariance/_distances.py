"""Scaled distances of point sets, compiled with Numba and summed bitwise as numpy sums them.

``u[i, j] = sqrt(Σ_d ((x1[i, d] − x2[j, d]) / ls[d])²)``, the distances in lengthscales that
every stationary kernel is a function of (:meth:`Covariance.__call__
<lattice_lgm.covariance.Covariance.__call__>`), without the ``(n1, n2, ndim)`` temporary of
the vectorised expression; and, for a hyperparameter family of one prior, the eight running
sums of numpy's pairwise summation ("lanes"), kept so that a move of one lengthscale
recomputes one of them (:func:`self_distances`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np

#: numpy sums a contiguous axis of up to this many terms with one block of its pairwise
#: summation (eight running sums); _scaled_distances repeats that order exactly
_PAIRWISE_BLOCK = 128


@numba.njit(parallel=True, nogil=True, cache=True)
def _scaled_distances(x1, x2, ls, symmetric, out):  # pragma: no cover - numba
    """``out[i, j] = sqrt(Σ_d ((x1[i, d] − x2[j, d]) / ls[d])²)``, as :meth:`Covariance.from_lags`.

    The terms are summed in numpy's order for a contiguous axis of at most 128 terms (its
    ``pairwise_sum``: sequential below 8 terms, else eight running sums over blocks of eight,
    combined as ``((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))``, then the remainder), so
    the result is bitwise that of the vectorised expression (tested), which the data sets and
    runs made before this kernel depend on.  ``symmetric`` (``x2 is x1``) fills the upper
    triangle and mirrors it: ``(a − b)²`` and ``(b − a)²`` are the same double.
    """
    n1, nd = x1.shape
    n2 = x2.shape[0]
    for i in numba.prange(n1):
        r = np.empty(8)
        for j in range(i if symmetric else 0, n2):
            if nd < 8:
                res = 0.0
                for d in range(nd):
                    t = (x1[i, d] - x2[j, d]) / ls[d]
                    res += t * t
            else:
                for k in range(8):
                    t = (x1[i, k] - x2[j, k]) / ls[k]
                    r[k] = t * t
                top = nd - nd % 8
                for d0 in range(8, top, 8):
                    for k in range(8):
                        t = (x1[i, d0 + k] - x2[j, d0 + k]) / ls[d0 + k]
                        r[k] += t * t
                res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
                for d in range(top, nd):
                    t = (x1[i, d] - x2[j, d]) / ls[d]
                    res += t * t
            out[i, j] = math.sqrt(res)
    if symmetric:
        for i in numba.prange(n1):
            for j in range(i):
                out[i, j] = out[j, i]


#: the running sums of numpy's pairwise summation (see _scaled_distances)
_LANES = 8
#: the largest set of running sums (8 · n² doubles) a prior keeps for its with_params children:
#: 16 MiB, n ≤ 512 points (twice the prior's own K and L); above that every proposal computes
#: its distances afresh
_LANE_CACHE_BYTES = 16 * 2**20


class _Distances(NamedTuple):
    """Scaled distances of a point set to itself and the running sums they were summed from.

    ``lanes`` are the eight ``(n, n)`` running sums of :func:`_scaled_distances` (upper
    triangles; empty below 8 axes or above the memory budget).  They are never written after
    construction, so a prior and the children it builds with one lengthscale moved share seven.
    """

    ls: np.ndarray
    u: np.ndarray
    lanes: tuple[np.ndarray, ...]


@numba.njit(parallel=True, nogil=True, cache=True)
def _lane_sum(x, ls, k, out):  # pragma: no cover - numba
    """Running sum ``k`` of :func:`_scaled_distances` of ``x`` to itself (``nd ≥ 8``).

    ``out[i, j] = Σ_m ((x[i, 8m + k] − x[j, 8m + k]) / ls[8m + k])²`` for ``j ≥ i`` (the upper
    triangle), summed in the same order.
    """
    n, nd = x.shape
    top = nd - nd % 8
    for i in numba.prange(n):
        for j in range(i, n):
            t = (x[i, k] - x[j, k]) / ls[k]
            r = t * t
            for d0 in range(8, top, 8):
                t = (x[i, d0 + k] - x[j, d0 + k]) / ls[d0 + k]
                r += t * t
            out[i, j] = r


@numba.njit(parallel=True, nogil=True, cache=True)
def _distances_from_lanes(x, ls, lanes, out):  # pragma: no cover - numba
    """``out`` from the eight running sums, combined and completed as _scaled_distances does."""
    n, nd = x.shape
    top = nd - nd % 8
    r0, r1, r2, r3, r4, r5, r6, r7 = lanes
    for i in numba.prange(n):
        for j in range(i, n):
            res = ((r0[i, j] + r1[i, j]) + (r2[i, j] + r3[i, j])) + (
                (r4[i, j] + r5[i, j]) + (r6[i, j] + r7[i, j]))
            for d in range(top, nd):
                t = (x[i, d] - x[j, d]) / ls[d]
                res += t * t
            out[i, j] = math.sqrt(res)
    for i in numba.prange(n):
        for j in range(i):
            out[i, j] = out[j, i]


def self_distances(x: np.ndarray, ls: np.ndarray,
                   previous: _Distances | None = None) -> _Distances:
    """Scaled distances of the points ``x`` ``(n, nd)`` to themselves at lengthscales ``ls``.

    Reuses ``previous`` (from the same ``x``) where it can: as it is when ``ls`` is unchanged,
    else its running sums that ``ls`` leaves unchanged (below 8 axes, or with ``8 · n²``
    doubles above ``_LANE_CACHE_BYTES``, no running sums are kept).  Bitwise
    :func:`_scaled_distances` of ``x`` to itself (tested).
    """
    n, nd = x.shape
    if previous is not None and np.array_equal(previous.ls, ls):
        return previous
    u = np.empty((n, n))
    if nd < 8 or _LANES * n * n * 8 > _LANE_CACHE_BYTES:
        _scaled_distances(x, x, ls, True, u)
        return _Distances(ls, u, ())
    top = nd - nd % 8
    stale = set(range(_LANES))
    if previous is not None and previous.lanes:
        stale = {int(d) % _LANES for d in np.flatnonzero(previous.ls[:top] != ls[:top])}
    # one pass per stale sum: all eight together took no less time (0.62 against 0.64 ms
    # at 200 × 200 × 34, 11 against 12 ms at 500 × 500 × 64)
    lanes = list(previous.lanes) if len(stale) < _LANES else [None] * _LANES  # type: ignore[union-attr]
    for k in sorted(stale):
        lanes[k] = np.empty((n, n))
        _lane_sum(x, ls, k, lanes[k])
    _distances_from_lanes(x, ls, tuple(lanes), u)
    return _Distances(ls, u, tuple(lanes))


def _as_points(x: np.ndarray) -> np.ndarray:
    """``(n, ndim)`` points; a flat ``(n,)`` array is ``n`` points on a line (as in DensePrior)."""
    x = np.asarray(x, dtype=float)
    return x[:, None] if x.ndim == 1 else np.atleast_2d(x)
