"""Binning a point pattern onto a lattice inside a window: counts, exposure and bookkeeping.

Inside means in the closed window; cells are half-open with the last cell on each axis closed
at the top; points outside the window are refused or dropped on request, points that round-off
puts in a cell of zero exposure are moved to the nearest cell with positive exposure, and
duplicates are kept and counted, each with a warning naming how many and which.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..errors import InvalidDataError, InvalidParameterError
from ..lattice import Lattice, same_crs
from ._cells import _cell_index, _edges
from ._inputs import _check_lattice, _check_xy, _first_indices
from .geometry import Window
from .points import _read_points


@dataclass(frozen=True)
class BinnedPoints:
    """Counts of a point pattern per lattice cell, with the exposure and everything set aside.

    Attributes
    ----------
    counts : ndarray of int64, shape ``lattice.shape``
        Points per cell (read-only).
    n_points : int
        Points binned; always ``counts.sum()``.
    n_dropped : int
        Points outside the window dropped on request (``outside="drop"``).
    dropped_index : ndarray of int64, shape ``(n_dropped,)``
        Their indices in the input.
    n_duplicates : int
        Binned points whose coordinates repeat an earlier binned point (kept and counted).
    n_moved : int
        Points inside the window whose own cell has zero exposure (round-off at the boundary,
        or a window edge lying on a cell edge) and that were assigned to the nearest cell with
        positive exposure.
    moved_index : ndarray of int64, shape ``(n_moved,)``
        Their indices in the input.
    exposure : ndarray of float64, shape ``lattice.shape``
        ``|cell ∩ window|`` (cell area/volume everywhere when no window was given; read-only).
    window : Window or None
        The window the points were binned in (``None``: the lattice's own extent).
    lattice : Lattice
        The lattice.
    """

    counts: np.ndarray
    n_points: int
    n_dropped: int
    dropped_index: np.ndarray
    n_duplicates: int
    n_moved: int
    moved_index: np.ndarray
    exposure: np.ndarray
    window: Window | None
    lattice: Lattice

    def __post_init__(self) -> None:
        assert self.counts.shape == self.lattice.shape == self.exposure.shape
        assert int(self.counts.sum()) == self.n_points, "binning lost or invented points"
        assert self.dropped_index.shape == (self.n_dropped,)
        assert self.moved_index.shape == (self.n_moved,)
        for a in (self.counts, self.dropped_index, self.moved_index, self.exposure):
            a.flags.writeable = False

    @property
    def total(self) -> int:
        """Total count, ``counts.sum() == n_points``."""
        return int(self.counts.sum())


def bin_points(
    points: Any,
    lattice: Lattice,
    window: Any = None,
    *,
    outside: Literal["raise", "drop"] = "raise",
) -> BinnedPoints:
    """Count points per lattice cell inside an observation window.

    Parameters
    ----------
    points : array_like, DataFrame, dict, GeoDataFrame, GeoSeries or path
        ``(n, 2)`` array in (x, y) order (``(n,)`` in 1-D, ``(n, 3)`` as (x, y, t) in 3-D), or a
        table/dict/CSV path with columns named after ``lattice.dims``, or a GeoDataFrame /
        GeoSeries of Points (plus a time column named ``lattice.dims[0]`` in 3-D).
    lattice : Lattice
        Must cover the window.
    window : Window or anything :meth:`Window.coerce` accepts, optional
        The observation window (a raster array needs this lattice).  ``None``: the closed box
        of the lattice's extent.  In 3-D the observation region is the 2-D window times the
        lattice's closed time extent.
    outside : {"raise", "drop"}
        Points outside the window: raise :class:`InvalidDataError` naming how many and the first
        indices, or drop them with a ``UserWarning`` (their indices in ``dropped_index``).

    Returns
    -------
    BinnedPoints
        Counts, exposure and bookkeeping; ``total == n_points == n - n_dropped``.

    Notes
    -----
    - Inside means ``window.contains`` (closed: boundary points are inside).
    - Cells are half-open ``[lo, hi)``; the last cell on each axis is closed at the top.  The
      index is ``floor((c - o)/h)``, corrected by one where rounding put it on the wrong side of
      an edge ``o + k*h``.  A point beyond the lattice's upper edge by at most round-off
      (128 ulps) goes to the last cell; farther out it is an error, never clipped.
    - A point inside the window whose cell has zero exposure (a window edge lying exactly on a
      cell edge, or round-off at the boundary) is assigned to the nearest cell (Euclidean
      distance from the point to the cell, ties to the lowest flat index) with positive
      exposure in its time slice, counted in ``n_moved`` and reported by a ``UserWarning``.
    - Duplicated coordinates are kept, counted in ``n_duplicates`` and reported by a warning.

    Raises
    ------
    InvalidDataError
        Non-finite coordinates (naming the first index), points outside the window with
        ``outside="raise"``, points inside the window but outside the lattice, missing columns,
        or points in another CRS than the window/lattice.
    InvalidParameterError
        A bad ``outside`` value, a non-Lattice ``lattice``, mismatching window/lattice CRSs.
    ShapeMismatchError
        Points with the wrong number of coordinates, or a window of the wrong dimension.
    """
    lattice = _check_lattice(lattice)
    if outside not in ("raise", "drop"):
        raise InvalidParameterError(
            f"outside={outside!r} is not understood; use 'raise' (default) or 'drop'."
        )
    win = None if window is None else Window.coerce(window, lattice)
    if win is not None:
        win._check_compatible(lattice)
    ndim = lattice.ndim
    # Point columns are in (x, y, t) order: the reverse of the lattice axes.
    columns = list(reversed(lattice.dims))
    if isinstance(points, np.ndarray) or (isinstance(points, Sequence)
                                          and not isinstance(points, str)):
        pts_crs = None
        pts = _check_xy(points, ndim, "points")
    else:
        raw, pts_crs = _read_points(points, columns)
        pts = _check_xy(raw, ndim, "points")
    for other, what in ((lattice.crs, "lattice"), (win.crs if win else None, "window")):
        if not same_crs(pts_crs, other):
            raise InvalidDataError(
                f"points crs={pts_crs!r} differs from {what} crs={other!r}; reproject the "
                "points (gdf.to_crs(...)) first."
            )
    n = pts.shape[0]

    # 1. Inside the observation region (closed).
    if ndim == 1:
        region = win if win is not None else Window.interval(*lattice.extent[0])
        inside = region.contains(pts)
    else:
        if win is not None:
            inside = win.contains(pts[:, :2])
        else:
            (ylo, yhi), (xlo, xhi) = lattice.extent[-2:]
            inside = Window.rectangle(xlo, xhi, ylo, yhi).contains(pts[:, :2])
        if ndim == 3:
            tlo, thi = lattice.extent[0]
            inside &= (pts[:, 2] >= tlo) & (pts[:, 2] <= thi)
    out_idx = np.flatnonzero(~inside)
    if out_idx.size and outside == "raise":
        raise InvalidDataError(
            f"{out_idx.size} of {n} points lie outside the window (first indices "
            f"{_first_indices(out_idx)}); fix them, or pass outside='drop' to drop them with a "
            "warning."
        )
    if out_idx.size:
        warnings.warn(
            f"bin_points dropped {out_idx.size} of {n} points outside the window (first indices "
            f"{_first_indices(out_idx)}; all in BinnedPoints.dropped_index).",
            UserWarning, stacklevel=2,
        )
    keep = np.flatnonzero(inside)
    kept = pts[keep]

    # 2. Cell indices per lattice axis k; the coordinate column is ndim - 1 - k.
    idx, on_lattice = [], np.ones(keep.size, dtype=bool)
    for k in range(ndim):
        j, ok = _cell_index(kept[:, ndim - 1 - k], lattice.origin[k], lattice.spacing[k],
                            lattice.shape[k])
        idx.append(j)
        on_lattice &= ok
    if not on_lattice.all():
        bad = keep[~on_lattice]
        raise InvalidDataError(
            f"{bad.size} points inside the window lie outside the lattice extent "
            f"{lattice.extent} (first indices {_first_indices(bad)}); the lattice must cover "
            "the window — build it with lattice_for_window(window, cell_size=...)."
        )

    # 3. Exposure, and points that landed in a zero-exposure cell.
    exposure = (win.exposure(lattice) if win is not None
                else np.full(lattice.shape, lattice.cell_volume))
    zero = exposure[tuple(idx)] <= 0.0
    moved = keep[zero]
    if moved.size:
        _move_to_positive(idx, np.flatnonzero(zero), kept, exposure, lattice)
        warnings.warn(
            f"bin_points moved {moved.size} point(s) inside the window whose cell has zero "
            f"exposure (a window edge on a cell edge, or round-off) to the nearest cell with "
            f"positive exposure (first indices {_first_indices(moved)}; all in "
            "BinnedPoints.moved_index).",
            UserWarning, stacklevel=2,
        )

    # 4. Counts and duplicates.
    flat = np.ravel_multi_index(tuple(idx), lattice.shape) if keep.size else keep
    counts = np.bincount(flat, minlength=lattice.size).astype(np.int64).reshape(lattice.shape)
    n_dup = int(keep.size - np.unique(kept, axis=0).shape[0]) if keep.size else 0
    if n_dup:
        warnings.warn(
            f"bin_points found {n_dup} point(s) with the same coordinates as an earlier one; "
            "they are kept and counted (BinnedPoints.n_duplicates).",
            UserWarning, stacklevel=2,
        )
    return BinnedPoints(
        counts=counts, n_points=int(keep.size), n_dropped=int(out_idx.size),
        dropped_index=out_idx.astype(np.int64), n_duplicates=n_dup, n_moved=int(moved.size),
        moved_index=moved.astype(np.int64), exposure=exposure, window=win, lattice=lattice,
    )


def _move_to_positive(idx: list[np.ndarray], which: np.ndarray, kept: np.ndarray,
                      exposure: np.ndarray, lattice: Lattice) -> None:
    """Reassign points ``which`` (rows of ``kept``) to the nearest cell of positive exposure.

    Works in the spatial plane (the time index of a 3-D point is kept: exposure is the same in
    every time slice).  Distance is from the point to the cell's closed box.  Edits ``idx``.
    """
    ndim = lattice.ndim
    sp_axes = list(range(ndim))[-2:] if ndim > 1 else [0]
    plane = exposure[0] if ndim == 3 else exposure
    pos = np.flatnonzero(plane.ravel() > 0.0)
    if pos.size == 0:
        raise InvalidDataError(
            f"the window does not overlap {lattice!r} with positive area, so points on its "
            "edge have no cell to go to; the lattice must cover the window."
        )
    cells = np.unravel_index(pos, plane.shape)
    lo, hi = [], []
    for a, c in zip(sp_axes, cells, strict=True):
        e = _edges(lattice.origin[a], lattice.spacing[a], lattice.shape[a])
        lo.append(e[c])
        hi.append(e[c + 1])
    for p in which:
        d2 = np.zeros(pos.size)
        for k, a in enumerate(sp_axes):
            c = kept[p, ndim - 1 - a]
            gap = np.maximum(np.maximum(lo[k] - c, c - hi[k]), 0.0)
            d2 += gap * gap
        best = int(np.argmin(d2))  # first minimum: lowest flat index among ties
        for k, a in enumerate(sp_axes):
            idx[a][p] = cells[k][best]
