"""Cells of a lattice against a window: edges, the cell a coordinate falls in, exact overlaps.

The one definition of cell edges (``origin + k * spacing``) used for exposure and for binning,
so the two always agree on which cell a point is in; the overlap of cells with intervals
(analytic) and with polygons (by clipping only the cells the boundary crosses); the covered
cells of a raster window as a polygon.
"""

from __future__ import annotations

import numpy as np
import shapely
from shapely.geometry.base import BaseGeometry

from ..lattice import Lattice

# Round-off allowance, in units of machine epsilon times the coordinate magnitude, for a point on
# the lattice's upper edge (o + n*h carries a few ulps of error) and for snapping extent/cell_size
# to an integer in `lattice_for_window`. 128 ulps ≈ 2.8e-14 relative: far below any real
# measurement precision, far above the error of one multiply-add.
_ULPS = 128.0
_EPS = float(np.finfo(np.float64).eps)
# Polygon pieces with more vertices than this are cut to their row band before cells are clipped
# against them (an overlay costs O(vertices)); below it the cut costs more than it saves.
_LOCAL_VERTICES = 256


def _edges(lo: float, h: float, n: int) -> np.ndarray:
    """Cell edges ``lo + k*h`` for ``k = 0..n``: the one definition used everywhere here."""
    return lo + np.arange(n + 1) * h


def _overlap_1d(edges: np.ndarray, a: float, b: float, h: float) -> np.ndarray:
    """Length of ``[edges[j], edges[j+1]] ∩ [a, b]`` for every cell ``j``; shape ``(n,)``.

    Cells wholly inside get exactly ``h`` (not ``edges[j+1] - edges[j]``, which differs by
    round-off), so whole cells have exactly the lattice's cell area, as in the polygon path.
    """
    part = np.clip(np.minimum(edges[1:], b) - np.maximum(edges[:-1], a), 0.0, None)
    return np.where((edges[:-1] >= a) & (edges[1:] <= b), h, part)


def _spatial(lattice: Lattice) -> Lattice:
    """The (y, x) part of a 2-D or 3-D lattice (the lattice itself in 2-D)."""
    if lattice.ndim == 2:
        return lattice
    return Lattice(shape=lattice.shape[1:], spacing=lattice.spacing[1:],
                   origin=lattice.origin[1:], dims=lattice.dims[1:], units=lattice.units,
                   crs=lattice.crs)


def _same_grid(a: Lattice, b: Lattice) -> bool:
    """Same shape and, to round-off, the same spacing and origin."""
    if a.shape != b.shape:
        return False
    scale = max(max(abs(v) for v in (*a.origin, *b.origin)), max(a.side_lengths))
    tol = _ULPS * _EPS * scale
    return (all(abs(p - q) <= tol for p, q in zip(a.origin, b.origin, strict=True))
            and all(abs(p - q) <= tol for p, q in zip(a.spacing, b.spacing, strict=True)))


def _cell_index(c: np.ndarray, o: float, h: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Cell index of coordinates ``c`` on one axis, and whether each is on the lattice.

    Cells are ``[e_j, e_{j+1})`` with edges ``e_j = o + j*h`` (the last closed at the top).
    ``floor((c - o)/h)`` can be off by one through rounding (e.g. ``0.3/0.1 < 3``), so the index
    is corrected against the edges themselves; a point on the upper edge (within round-off of
    ``_ULPS`` ulps) goes to the last cell; anything further out is flagged, never clipped.
    """
    edges = _edges(o, h, n)
    j = np.clip(np.floor((c - o) / h), -1, n).astype(np.int64)  # -1: below; n: at/above top
    # Rounding can leave j one off (e.g. 0.3/0.1 = 2.9999999999999996): fix it against the edges.
    j = np.where((j >= 0) & (c < edges[np.clip(j, 0, n)]), j - 1, j)
    j = np.where((j <= n - 1) & (c >= edges[np.clip(j + 1, 0, n)]), j + 1, j)
    # Now e_j <= c < e_{j+1} for 0 <= j < n; j == n means c >= e_n, j == -1 means c < e_0.
    top = edges[n]
    tol = _ULPS * _EPS * max(abs(o), abs(top), h)
    j = np.where((j == n) & (c <= top + tol), n - 1, j)  # the upper edge, closed
    ok = (j >= 0) & (j < n)
    return np.where(ok, j, 0), ok



def _polygon_exposure(geom: BaseGeometry, ye: np.ndarray, xe: np.ndarray,
                      cell_area: float) -> np.ndarray:
    """``|cell ∩ geom|`` for the cells between edges ``ye`` × ``xe``; shape ``(ny, nx)``.

    A cell whose interior the boundary of ``geom`` does not cross lies wholly inside or wholly
    outside (its interior is connected), so its centre decides.  The cells the boundary crosses
    are found by halving the rows recursively, each half-band keeping the boundary pieces that
    pass through its interior (``clip_by_rect``, exact for linework; pieces lying *on* a band
    edge lie on cell edges and cross no cell's interior, so dropping them is right).  In one row,
    each connected piece crosses only cells within its x-range, which are then clipped exactly
    with a GEOS overlay against the polygon.  The polygon itself is cut down along the way only
    while it has many vertices (``_LOCAL_VERTICES``), so each overlay sees local vertices:
    cost O(V log ny + boundary cells), not O(ny · nx) boxes.
    """
    ny, nx = ye.size - 1, xe.size - 1
    out = np.zeros((ny, nx))
    gx0, gy0, gx1, gy1 = geom.bounds
    # Cells that can overlap the bounding box with positive area: xe[j+1] > gx0 and xe[j] < gx1.
    j0 = max(int(np.searchsorted(xe, gx0, side="right")) - 1, 0)
    j1 = min(int(np.searchsorted(xe, gx1, side="left")), nx)
    i0 = max(int(np.searchsorted(ye, gy0, side="right")) - 1, 0)
    i1 = min(int(np.searchsorted(ye, gy1, side="left")), ny)
    if j0 >= j1 or i0 >= i1:
        return out
    sxe, sye = xe[j0:j1 + 1], ye[i0:i1 + 1]
    cx, cy = np.meshgrid(0.5 * (sxe[:-1] + sxe[1:]), 0.5 * (sye[:-1] + sye[1:]))
    sub = np.where(shapely.intersects_xy(geom, cx, cy), cell_area, 0.0)
    xlo, xhi = float(sxe[0]), float(sxe[-1])

    def band(r0: int, r1: int) -> BaseGeometry:
        return shapely.box(xlo, sye[r0], xhi, sye[r1])

    def visit(r0: int, r1: int, area: BaseGeometry, line: BaseGeometry) -> None:
        if line.is_empty:
            return  # no boundary through these rows: the centre values stand
        if r1 - r0 > 1:
            mid = (r0 + r1) // 2
            cut = shapely.get_num_coordinates(area) > _LOCAL_VERTICES
            for a, b in ((r0, mid), (mid, r1)):
                piece = shapely.clip_by_rect(line, xlo, sye[a], xhi, sye[b])
                visit(a, b, shapely.intersection(area, band(a, b)) if cut else area, piece)
            return
        parts = shapely.get_parts(line)
        pb = shapely.bounds(parts)  # (k, 4): xmin, ymin, xmax, ymax of each connected piece
        # closed cell j touches [bx0, bx1] iff sxe[j] <= bx1 and sxe[j+1] >= bx0
        first = np.searchsorted(sxe[1:], pb[:, 0], side="left")
        last = np.searchsorted(sxe[:-1], pb[:, 2], side="right")
        hit = np.zeros(sxe.size - 1, dtype=bool)
        for f, g in zip(first, last, strict=True):
            hit[f:g] = True
        cols = np.flatnonzero(hit)
        boxes = shapely.box(sxe[cols], sye[r0], sxe[cols + 1], sye[r0 + 1])
        sub[r0, cols] = shapely.area(shapely.intersection(boxes, area))

    top = sye.size - 1
    visit(0, top, geom, shapely.clip_by_rect(geom.boundary, xlo, sye[0], xhi, sye[top]))
    # Round-off only (overlay of a cell wholly inside may gain an ulp): cap at the cell area.
    assert (sub - cell_area).max(initial=0.0) <= 1e-9 * cell_area, "overlay exceeds its cell"
    out[i0:i1, j0:j1] = np.minimum(sub, cell_area)
    return out



def _covered_box(fraction: np.ndarray, lat: Lattice) -> tuple[tuple[float, float], ...]:
    """``((xmin, xmax), (ymin, ymax))`` of the cells with positive ``fraction`` on ``lat``."""
    rows, cols = np.nonzero(fraction > 0.0)
    ye = _edges(lat.origin[0], lat.spacing[0], lat.shape[0])
    xe = _edges(lat.origin[1], lat.spacing[1], lat.shape[1])
    return ((float(xe[cols.min()]), float(xe[cols.max() + 1])),
            (float(ye[rows.min()]), float(ye[rows.max() + 1])))


def _covered_cells(fraction: np.ndarray, lat: Lattice) -> BaseGeometry:
    """The union of the cells with positive ``fraction`` on ``lat``, as a shapely geometry."""
    ye = _edges(lat.origin[0], lat.spacing[0], lat.shape[0])
    xe = _edges(lat.origin[1], lat.spacing[1], lat.shape[1])
    boxes = []
    # Merge each row's runs of covered cells first: far fewer boxes to union.
    for i, row in enumerate(fraction > 0.0):
        d = np.diff(np.concatenate([[0], row.astype(np.int8), [0]]))
        starts, stops = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
        boxes.extend(shapely.box(xe[s], ye[i], xe[e], ye[i + 1])
                     for s, e in zip(starts, stops, strict=True))
    return shapely.union_all(boxes)
