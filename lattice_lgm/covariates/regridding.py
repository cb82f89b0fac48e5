"""Explicit regridding of a covariate onto the lattice (area, nearest, majority)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import xarray as xr
from scipy import sparse

from ..errors import (
    InvalidDataError,
    InvalidParameterError,
)
from ..lattice import Lattice
from ._source import (
    _COVER_RTOL,
    _MAX_CATEGORIES,
    _OVERLAP_RTOL,
    _TIE_RTOL,
    METHODS,
    _Axis,
    _prepare_source,
    _validate_mask,
)


# ---------------------------------------------------------------------------------------------
# regridding
# ---------------------------------------------------------------------------------------------
def _overlap_matrix(t_lo: float, t_step: float, t_n: int, src: _Axis) -> sparse.csr_array:
    """1-D overlap lengths ``W[i, k] = |[t_i, t_i+1) ∩ [s_k, s_k+1)|`` as a sparse (t_n, n).

    Each target cell meets at most ``ceil(t_step / src.step) + 1`` source cells, so the matrix
    is banded; only the candidate range per row is evaluated.
    """
    t_a = t_lo + t_step * np.arange(t_n)
    t_b = t_lo + t_step * np.arange(1, t_n + 1)
    k0 = np.clip(np.floor((t_a - src.lo) / src.step).astype(np.int64), 0, src.n - 1)
    k1 = np.clip(np.ceil((t_b - src.lo) / src.step).astype(np.int64) - 1, 0, src.n - 1)
    counts = np.maximum(k1 - k0 + 1, 0)
    rows = np.repeat(np.arange(t_n), counts)
    starts = np.cumsum(counts) - counts
    cols = k0[rows] + (np.arange(rows.size) - starts[rows])
    s_a = src.lo + src.step * cols
    ov = np.minimum(t_b[rows], s_a + src.step) - np.maximum(t_a[rows], s_a)
    # Cells that only touch at an edge give 0 up to rounding: drop them.
    keep = ov > _OVERLAP_RTOL * min(t_step, src.step)
    return sparse.csr_array((ov[keep], (rows[keep], cols[keep])), shape=(t_n, src.n))


def _apply_axes(mats: Sequence[sparse.csr_array], a: np.ndarray) -> np.ndarray:
    """Contract ``a`` with one matrix per axis: ``a ×_0 W_0 ×_1 W_1 …``.

    In 2-D this is ``W_y a W_xᵀ``.
    """
    out = a
    for ax, w in enumerate(mats):
        moved = np.moveaxis(out, ax, 0)
        flat = moved.reshape(moved.shape[0], -1)
        res = np.asarray(w @ flat).reshape((w.shape[0], *moved.shape[1:]))
        out = np.moveaxis(res, 0, ax)
    return out


def _nearest_index(centres: np.ndarray, src: _Axis) -> np.ndarray:
    """Index of the source cell containing each centre, -1 if none.

    A centre exactly on a shared edge (within rounding) goes to the *upper* cell, as the
    half-open cells ``[s_k, s_k+1)`` imply.
    """
    u = (centres - src.lo) / src.step
    r = np.rint(u)
    k = np.where(np.abs(u - r) <= _OVERLAP_RTOL, r, np.floor(u)).astype(np.int64)
    return np.where((k >= 0) & (k < src.n), k, -1)


def regrid(
    da: xr.DataArray,
    lattice: Lattice,
    *,
    method: str = "area",
    inside: np.ndarray | None = None,
    allow_partial: bool = False,
) -> xr.DataArray:
    """Put a gridded covariate on the lattice with an explicit, recorded method.

    Parameters
    ----------
    da : xarray.DataArray
        The covariate on its own regular rectilinear grid: dims named like ``lattice.dims`` (any
        order; extra dims must have size 1), 1-D coordinates giving equally spaced cell
        *centres*.  Source cell ``k`` covers ``centre_k ± spacing / 2``; an axis with a single
        cell needs its size as the coordinate attr ``spacing``.  Descending coordinates are
        flipped (recorded in ``attrs['flipped_dims']``).  NaN marks missing data.
    lattice : Lattice
        The model lattice; cell ``(i, j)`` covers ``[origin + i*h, origin + (i+1)*h)`` per axis.
    method : {"area", "nearest", "majority"}
        ``"area"``: area-weighted mean of the non-NaN source cells overlapping each target cell
        (conservative remapping, Jones 1999, Mon. Weather Rev. 127:2204, eq. 2 with constant
        reconstruction).  On a rectilinear grid the overlap area factorises over axes, so in 2-D
        ``value = (W_y A W_xᵀ) / (W_y M W_xᵀ)`` with ``W`` the sparse 1-D overlap-length
        matrices; exact for coarser → finer and finer → coarser.  ``"nearest"``: the value of
        the source cell containing the target cell centre; a centre exactly on a shared edge
        takes the *upper* cell (larger coordinate).  ``"majority"``: for categorical codes, the
        category covering the largest area of the target cell; tied areas (within 1e-9 of the
        cell) go to the *smallest* category value.
    inside : ndarray of bool, shape lattice.shape, optional
        Cells that need a value (e.g. positive exposure); default every cell.  They must be
        fully covered by non-NaN source cells.  Cells outside are NaN in the output.
    allow_partial : bool
        ``method="area"`` only: average over the covered part of partially covered cells
        instead of refusing them (cells with zero coverage are still refused).  The number of
        such cells is recorded in ``attrs['partial_cells']``.

    Returns
    -------
    xarray.DataArray, shape lattice.shape
        float64 on dims ``lattice.dims`` with the cell-centre coordinates ``lattice.coords()``;
        NaN exactly outside ``inside``.  ``attrs`` keep the source's attrs and add
        ``regrid_method``, ``source_spacing`` (one per dim), ``source_extent`` (flat
        ``(lo, hi)`` per dim), ``source_shape``, ``flipped_dims`` (comma-separated names, ``""``
        if none), ``crs`` (if known) and, for ``allow_partial``, ``partial_cells``.

    Raises
    ------
    InvalidParameterError
        ``da`` is not a DataArray, unknown ``method``, ``allow_partial`` with another method,
        a non-boolean ``inside``.
    ShapeMismatchError
        Missing lattice dims, extra dims of size > 1, a missing coordinate, wrong mask shape.
    InvalidDataError
        Irregular or non-numeric coordinates, infinite values, a CRS different from the
        lattice's, cells in ``inside`` not covered by non-NaN source data, or more than 1000
        distinct values under ``"majority"``.
    GeographicCoordinatesError
        The source has a geographic CRS.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> src = xr.DataArray(np.arange(16.0).reshape(4, 4), dims=("y", "x"),
    ...                    coords={"y": np.arange(4) + 0.5, "x": np.arange(4) + 0.5})
    >>> regrid(src, Lattice((2, 2), spacing=2.0)).values
    array([[ 2.5,  4.5],
           [10.5, 12.5]])
    """
    if method not in METHODS:
        raise InvalidParameterError(
            f"method={method!r} is not one of {METHODS}; use 'area' for continuous covariates "
            "and 'majority' (or 'nearest') for categorical ones."
        )
    if allow_partial and method != "area":
        raise InvalidParameterError(
            f"allow_partial=True needs method='area' (got method={method!r}): only an average "
            "can be taken over the covered part of a cell. Mask the cells with inside= instead."
        )
    values, axes, flipped, crs = _prepare_source(da, lattice)
    mask = _validate_mask(inside, lattice)

    mats = [
        _overlap_matrix(o, h, n, ax)
        for o, h, n, ax in zip(lattice.origin, lattice.spacing, lattice.shape, axes, strict=True)
    ]
    valid = ~np.isnan(values)
    covered = _apply_axes(mats, valid.astype(np.float64))  # W_y M W_xᵀ: non-NaN area per cell
    coverage = covered / lattice.cell_volume
    full = coverage >= 1.0 - _COVER_RTOL
    need = mask & ~(full | (allow_partial & (coverage > _COVER_RTOL)))
    if need.any():
        _raise_coverage(need, coverage, lattice, axes, allow_partial)
    partial = int(np.count_nonzero(mask & ~full))

    if method == "area":
        num = _apply_axes(mats, np.where(valid, values, 0.0))  # W_y A W_xᵀ
        with np.errstate(invalid="ignore", divide="ignore"):
            out = num / covered
    elif method == "nearest":
        idx = [_nearest_index(c, ax) for c, ax in zip(lattice.coords().values(), axes,
                                                      strict=True)]
        grids = np.meshgrid(*idx, indexing="ij")
        ok = np.logical_and.reduce([g >= 0 for g in grids])
        out = np.full(lattice.shape, np.nan)
        out[ok] = values[tuple(g[ok] for g in grids)]
    else:
        out = _majority(values, valid, mats, lattice)
    out = np.where(mask, out, np.nan)

    attrs = dict(da.attrs)
    attrs.update(
        regrid_method=method,
        source_spacing=tuple(ax.step for ax in axes),
        source_extent=tuple(v for ax in axes for v in (ax.lo, ax.hi)),
        source_shape=tuple(ax.n for ax in axes),
        flipped_dims=",".join(flipped),
    )
    if crs is not None:
        attrs["crs"] = crs
    if allow_partial:
        attrs["partial_cells"] = partial
    return xr.DataArray(out, dims=lattice.dims, coords=lattice.coords(), name=da.name,
                        attrs=attrs)


def _majority(
    values: np.ndarray, valid: np.ndarray, mats: Sequence[sparse.csr_array], lattice: Lattice
) -> np.ndarray:
    """Category with the largest overlap area per target cell; ties → smallest category."""
    cats = np.unique(values[valid])
    if cats.size > _MAX_CATEGORIES:
        raise InvalidDataError(
            f"method='majority' found {cats.size} distinct values (more than "
            f"{_MAX_CATEGORIES}); it is for categorical codes. Use method='area' for a "
            "continuous covariate."
        )
    best = np.full(lattice.shape, np.nan)
    best_area = np.zeros(lattice.shape)
    tol = _TIE_RTOL * lattice.cell_volume
    for c in cats:  # ascending: a later category must beat the current one by more than tol
        area = _apply_axes(mats, (values == c).astype(np.float64))
        win = area > best_area + tol
        best[win] = c
        best_area[win] = area[win]
    return best


def _raise_coverage(
    need: np.ndarray, coverage: np.ndarray, lattice: Lattice, axes: Sequence[_Axis],
    allow_partial: bool,
) -> None:
    idx = tuple(int(i) for i in np.argwhere(need)[0])
    centre = ", ".join(f"{d}={c[i]:.6g}" for d, c, i in zip(lattice.dims,
                                                            lattice.coords().values(), idx,
                                                            strict=True))
    extent = ", ".join(f"{d} in [{ax.lo:.6g}, {ax.hi:.6g}]" for d, ax in zip(lattice.dims, axes,
                                                                            strict=True))
    what = "have no non-NaN source coverage" if allow_partial else (
        "are not fully covered by non-NaN source cells")
    raise InvalidDataError(
        f"{int(need.sum())} lattice cells that need a value {what}; the first is index {idx} "
        f"(centre {centre}), covered {coverage[idx]:.3g} of its area. The source spans "
        f"{extent}. Extend the raster over the lattice, mask those cells out with inside=, "
        "or (method='area' only) pass allow_partial=True to average over the covered part."
    )


