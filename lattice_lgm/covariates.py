"""Covariates on the lattice: explicit regridding, checks, centring/scaling and a formula spec.

Covariates arrive on their own grids (an :class:`xarray.DataArray`, a GeoTIFF/NetCDF file or a
long-format table) and are put on the model :class:`~lattice_lgm.Lattice` by :func:`regrid` with
the method recorded in the output's attributes (DESIGN §9).  :func:`build_design` turns a
formula such as ``"~ elev + grad + elev:grad + C(soil)"`` into a centred and scaled
:class:`DesignMatrix` whose coefficients can be mapped back to the original scale.

Conventions
-----------
* Source grids are rectilinear and regular: 1-D coordinates named like the lattice dims, equally
  spaced, giving cell *centres*; source cell ``k`` on an axis covers ``centre_k ± spacing / 2``.
  Descending coordinates (rasters stored north to south) are flipped to ascending and the flip
  is recorded; the orientation is read from the coordinates, never guessed from the values.
* NaN in a source means "no data": such cells carry no weight.  Every target cell that needs a
  value (``inside``) must be fully covered by non-NaN source cells, or :func:`regrid` raises.
  The output is NaN outside ``inside`` and never NaN inside it.
* All tuples in the output attributes are in ``lattice.dims`` order and netCDF-safe (flat).

Notation: for one axis, ``W[i, k] = |target cell i ∩ source cell k|`` (a length), ``A`` the
source values with NaN set to 0 and ``M`` the indicator of non-NaN source cells.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from scipy import sparse

from .errors import (
    GeographicCoordinatesError,
    InvalidDataError,
    InvalidParameterError,
    ShapeMismatchError,
    UnsupportedOperationError,
)
from .lattice import Lattice, _is_geographic

__all__ = [
    "DesignMatrix",
    "Factor",
    "Term",
    "build_design",
    "from_table",
    "parse_formula",
    "read_raster",
    "regrid",
]

METHODS = ("area", "nearest", "majority")

# Relative tolerances.  Coordinates computed as origin + k * spacing carry rounding of order
# 1e-16 relative to their magnitude; these thresholds sit far above that and far below any real
# difference in a grid.
_SPACING_RTOL = 1e-6  # spread of coordinate steps allowed, relative to the step
_OVERLAP_RTOL = 1e-9  # overlaps shorter than this (relative to the cell sizes) are edge contacts
_COVER_RTOL = 1e-8  # a cell counts as fully covered when coverage >= 1 - this
_TIE_RTOL = 1e-9  # majority: category areas equal within this fraction of the cell are tied
_MAX_CATEGORIES = 1000  # more distinct values than this under "majority" is not categorical

_RASTER_SUFFIXES = {".tif", ".tiff", ".gtiff"}
_NETCDF_SUFFIXES = {".nc", ".nc4", ".cdf", ".netcdf", ".h5", ".hdf5"}


# ---------------------------------------------------------------------------------------------
# source grids
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Axis:
    """One regular source axis: ``n`` cells of width ``step`` from ``lo`` (ascending)."""

    lo: float
    step: float
    n: int

    @property
    def hi(self) -> float:
        return self.lo + self.n * self.step


def _source_crs(da: xr.DataArray) -> str | None:
    """The CRS a DataArray declares: ``attrs['crs']`` or a rioxarray-style ``spatial_ref``."""
    crs = da.attrs.get("crs")
    if crs is not None and str(crs).strip():
        return str(crs)
    if "spatial_ref" in da.coords:
        ref = da.coords["spatial_ref"].attrs
        for key in ("crs_wkt", "spatial_ref"):
            if ref.get(key):
                return str(ref[key])
    return None


def _same_crs(a: str, b: str) -> bool:
    try:  # pyproj compares WKT, EPSG codes and PROJ strings by meaning
        import pyproj

        return bool(pyproj.CRS.from_user_input(a).equals(pyproj.CRS.from_user_input(b),
                                                          ignore_axis_order=True))
    except ImportError:
        pass
    except Exception:  # unparseable by pyproj: fall back to comparing the text
        pass
    return a.strip().lower() == b.strip().lower()


def _check_crs(da: xr.DataArray, lattice: Lattice, arg: str) -> str | None:
    """Refuse a geographic source CRS or one that differs from the lattice's; return it."""
    crs = _source_crs(da)
    if crs is None:
        return lattice.crs
    if _is_geographic(crs):
        raise GeographicCoordinatesError(
            f"{arg} has a geographic CRS ({_short(crs)}); cell areas in degrees are not areas. "
            "Reproject the covariate to the lattice's projected CRS first (e.g. with "
            "rasterio.warp or gdalwarp)."
        )
    if lattice.crs is not None and not _same_crs(crs, lattice.crs):
        raise InvalidDataError(
            f"{arg} has CRS {_short(crs)} but the lattice has crs={lattice.crs!r}; "
            "reproject first (e.g. gdalwarp -t_srs) so both use the same coordinates."
        )
    return crs


def _short(text: str, n: int = 60) -> str:
    text = str(text)
    return repr(text if len(text) <= n else text[: n - 3] + "...")


def _prepare_source(
    da: Any, lattice: Lattice, arg: str = "da"
) -> tuple[np.ndarray, list[_Axis], tuple[str, ...], str | None]:
    """Validate a source DataArray.

    Returns its values (lattice axis order, ascending), axes, the flipped dims and its CRS.
    """
    if not isinstance(da, xr.DataArray):
        raise InvalidParameterError(
            f"{arg} is a {type(da).__name__}; pass an xarray.DataArray with 1-D coordinates "
            f"{lattice.dims} (use read_raster() for GeoTIFF/NetCDF files and from_table() for "
            "long-format tables)."
        )
    if not isinstance(lattice, Lattice):
        raise InvalidParameterError(
            f"lattice is a {type(lattice).__name__}; pass a lattice_lgm.Lattice."
        )
    missing = [d for d in lattice.dims if d not in da.dims]
    if missing:
        raise ShapeMismatchError(
            f"{arg} has dims {da.dims} but lacks {missing} of the lattice dims {lattice.dims}; "
            "rename its dimensions (e.g. da.rename(lon='x')) so they match the lattice."
        )
    extra = [d for d in da.dims if d not in lattice.dims]
    big = [d for d in extra if da.sizes[d] != 1]
    if big:
        raise ShapeMismatchError(
            f"{arg} has extra dims {big} (sizes {[da.sizes[d] for d in big]}) besides the "
            f"lattice dims {lattice.dims}; select one slice first, e.g. da.isel({big[0]}=0)."
        )
    # Extra size-1 dims (e.g. a raster's band) are dropped: no value is lost.
    da = da.squeeze(extra, drop=True).transpose(*lattice.dims)
    crs = _check_crs(da, lattice, arg)

    if not (np.issubdtype(da.dtype, np.number) or np.issubdtype(da.dtype, np.bool_)):
        raise InvalidDataError(
            f"{arg} has dtype {da.dtype}; regridding needs numbers. Encode categories as "
            "integer codes (e.g. pandas.factorize) and name the levels with CF attrs "
            "'flag_values' and 'flag_meanings'."
        )
    values = np.asarray(da.values, dtype=np.float64)
    bad = np.isinf(values)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise InvalidDataError(
            f"{arg} has an infinite value {values[idx].item()!r} at index {idx} (dims "
            f"{lattice.dims}); use NaN for missing data or fix the source."
        )

    axes: list[_Axis] = []
    flipped: list[str] = []
    for ax, d in enumerate(lattice.dims):
        if d not in da.coords:
            raise ShapeMismatchError(
                f"{arg} has no coordinate for dim {d!r}; assign the cell-centre coordinates, "
                f"e.g. da.assign_coords({d}=centres)."
            )
        c = da.coords[d].values
        if c.ndim != 1 or not np.issubdtype(c.dtype, np.number):
            raise InvalidDataError(
                f"{arg}.coords[{d!r}] must be 1-D numbers (cell centres in coordinate units); "
                f"got dtype {c.dtype} with shape {c.shape}."
            )
        c = c.astype(np.float64)
        if not np.all(np.isfinite(c)):
            raise InvalidDataError(f"{arg}.coords[{d!r}] has non-finite values.")
        if c.size < 2:
            # One cell along this axis: its size cannot be read from the coordinates, only
            # from a stated spacing (read_raster records the transform's).
            given = da.coords[d].attrs.get("spacing")
            if c.size == 0 or given is None:
                raise InvalidDataError(
                    f"{arg}.coords[{d!r}] has {c.size} value(s), so the cell size along {d!r} "
                    f"is unknown; state it as {arg}[{d!r}].attrs['spacing'] = h (in coordinate "
                    "units) or pass at least 2 cells."
                )
            h = abs(float(given))
            if not np.isfinite(h) or h == 0.0:
                raise InvalidDataError(
                    f"{arg}[{d!r}].attrs['spacing']={given!r} must be a finite length > 0."
                )
            axes.append(_Axis(lo=float(c[0] - h / 2), step=h, n=1))
            continue
        steps = np.diff(c)
        step = (c[-1] - c[0]) / (c.size - 1)
        spread = float(steps.max() - steps.min())
        if step == 0.0 or np.any(np.sign(steps) != np.sign(step)) or (
            spread > _SPACING_RTOL * abs(step)
        ):
            raise InvalidDataError(
                f"{arg}.coords[{d!r}] is not regularly spaced: steps range from "
                f"{steps.min():.6g} to {steps.max():.6g} (spread {spread:.3g}); regrid needs "
                "a regular rectilinear grid. Resample the source onto a regular grid first."
            )
        if step < 0:  # descending (e.g. raster rows from north to south): flip, record it
            values = np.flip(values, axis=ax)
            c = c[::-1]
            step = -step
            flipped.append(d)
        axes.append(_Axis(lo=float(c[0] - step / 2), step=float(step), n=int(c.size)))
    return values, axes, tuple(flipped), crs


def _validate_mask(inside: Any, lattice: Lattice, name: str = "inside") -> np.ndarray:
    """Return ``inside`` as a boolean array of ``lattice.shape`` (all True for None)."""
    if inside is None:
        return np.ones(lattice.shape, dtype=bool)
    m = np.asarray(inside)
    if m.dtype != np.bool_:
        raise InvalidParameterError(
            f"{name} has dtype {m.dtype}; pass a boolean mask of cells that need a value "
            "(e.g. exposure > 0)."
        )
    if m.shape != lattice.shape:
        raise ShapeMismatchError(
            f"{name} has shape {m.shape}; expected the lattice shape {lattice.shape} "
            f"(dims {lattice.dims})."
        )
    return m


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


# ---------------------------------------------------------------------------------------------
# readers
# ---------------------------------------------------------------------------------------------
def read_raster(path: str | PathLike, *, band: int = 1, name: str | None = None) -> xr.DataArray:
    """Read a GeoTIFF (via rasterio) or NetCDF file (via xarray) as a DataArray for :func:`regrid`.

    Parameters
    ----------
    path : str or path-like
        ``.tif``/``.tiff`` are read with rasterio; ``.nc``/``.nc4``/``.cdf``/``.h5`` with
        :func:`xarray.open_dataarray` (loaded into memory, file closed).
    band : int
        GeoTIFF band, 1-based (ignored for NetCDF).
    name : str, optional
        Name of the returned DataArray (default: the band description or the file stem).  For a
        NetCDF file with several variables it also selects the variable.

    Returns
    -------
    xarray.DataArray, shape (ny, nx) for GeoTIFF
        GeoTIFF: dims ``("y", "x")``, coordinates the cell centres from the affine transform
        (``x = c + (j + 0.5) a``, ``y = f + (i + 0.5) e``, so ``y`` descends for north-up
        rasters; :func:`regrid` flips it), float64 with nodata → NaN, ``attrs`` with ``crs``
        (string, if set), ``transform`` (6 GDAL-order numbers ``a, b, c, d, e, f``) and
        ``nodata``.  NetCDF: the stored variable, unchanged.

    Raises
    ------
    InvalidParameterError
        Missing file, unknown suffix, band out of range, unknown NetCDF variable.
    UnsupportedOperationError
        A rotated or sheared GeoTIFF transform (warp it to north-up first).
    """
    p = Path(path)
    if not p.exists():
        raise InvalidParameterError(f"path={str(path)!r} does not exist; check the file name.")
    suffix = p.suffix.lower()
    if suffix in _NETCDF_SUFFIXES:
        return _read_netcdf(p, name)
    if suffix not in _RASTER_SUFFIXES:
        raise InvalidParameterError(
            f"path={str(path)!r} has suffix {suffix!r}; read_raster reads GeoTIFF "
            f"({sorted(_RASTER_SUFFIXES)}) and NetCDF ({sorted(_NETCDF_SUFFIXES)}). Use "
            "from_table() for CSV tables."
        )
    import rasterio

    with rasterio.open(p) as src:
        if isinstance(band, bool) or not isinstance(band, int | np.integer) or not (
            1 <= band <= src.count
        ):
            raise InvalidParameterError(
                f"band={band!r} is not a band of {p.name}, which has bands 1..{src.count}."
            )
        t = src.transform
        if t.b != 0.0 or t.d != 0.0:
            raise UnsupportedOperationError(
                f"{p.name} has a rotated or sheared transform (b={t.b}, d={t.d}); regridding "
                "needs a north-up grid. Warp it first, e.g. gdalwarp without -to "
                "SRC_METHOD=NO_GEOTRANSFORM, or rasterio.warp.reproject."
            )
        data = src.read(band, masked=True).astype(np.float64).filled(np.nan)
        desc = src.descriptions[band - 1] if src.descriptions else None
        attrs: dict[str, Any] = {"transform": tuple(float(v) for v in t.to_gdal())}
        if src.crs is not None:
            attrs["crs"] = src.crs.to_string()
        if src.nodata is not None:
            attrs["nodata"] = float(src.nodata)
        units = src.units[band - 1] if src.units else None
        if units:
            attrs["units"] = units
        ny, nx = src.height, src.width
    x = t.c + (np.arange(nx) + 0.5) * t.a
    y = t.f + (np.arange(ny) + 0.5) * t.e
    # the cell sizes, so a one-row or one-column raster can still be regridded
    coords = {"y": ("y", y, {"spacing": abs(float(t.e))}),
              "x": ("x", x, {"spacing": abs(float(t.a))})}
    return xr.DataArray(data, dims=("y", "x"), coords=coords, name=name or desc or p.stem,
                        attrs=attrs)


def _read_netcdf(p: Path, name: str | None) -> xr.DataArray:
    with xr.open_dataset(p) as ds:
        variables = list(ds.data_vars)
        if name is not None and name in ds.data_vars:
            da = ds[name].load()
        elif len(variables) == 1:
            da = ds[variables[0]].load()
        else:
            raise InvalidParameterError(
                f"{p.name} holds variables {variables}; pass name= one of them."
            )
    return da.rename(name) if name is not None else da


def from_table(
    df_or_path: pd.DataFrame | str | PathLike, value: str, x: str = "x", y: str = "y"
) -> xr.DataArray:
    """Pivot a long-format table of grid nodes (one row per node) to a DataArray.

    Parameters
    ----------
    df_or_path : pandas.DataFrame or path to a CSV file
        One row per node with the node's coordinates and the value.
    value : str
        Column holding the covariate.
    x, y : str
        Columns holding the node coordinates (cell centres).

    Returns
    -------
    xarray.DataArray, shape (ny, nx)
        dims ``("y", "x")`` (whatever the column names), ascending coordinates, ``name=value``;
        a missing value (NaN in the table) stays NaN.

    Raises
    ------
    InvalidParameterError
        A missing column or file.
    InvalidDataError
        Non-finite coordinates, duplicated nodes, or nodes that do not form a full rectangle
        (the message names how many are missing and the first one).

    Examples
    --------
    >>> da = from_table("data/bei_covariates.csv", "elev")  # doctest: +SKIP
    >>> da.shape  # doctest: +SKIP
    (101, 201)
    """
    if isinstance(df_or_path, pd.DataFrame):
        df = df_or_path
    else:
        p = Path(df_or_path)
        if not p.exists():
            raise InvalidParameterError(
                f"df_or_path={str(df_or_path)!r} does not exist; pass a DataFrame or a CSV path."
            )
        df = pd.read_csv(p)
    missing = [c for c in (x, y, value) if c not in df.columns]
    if missing:
        raise InvalidParameterError(
            f"columns {missing} are not in the table, which has {list(df.columns)}; pass "
            "x=, y= and value= naming its columns."
        )
    try:
        xs = df[x].to_numpy(dtype=np.float64)
        ys = df[y].to_numpy(dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidDataError(
            f"columns {x!r} and {y!r} must hold numeric node coordinates (got dtypes "
            f"{df[x].dtype}, {df[y].dtype})."
        ) from None
    for col, v in ((x, xs), (y, ys)):
        bad = ~np.isfinite(v)
        if bad.any():
            raise InvalidDataError(
                f"column {col!r} has a non-finite coordinate at row {int(np.argmax(bad))}; "
                "every node needs finite coordinates."
            )
    dup = pd.DataFrame({"x": xs, "y": ys}).duplicated()
    if dup.any():
        r = int(np.argmax(dup.to_numpy()))
        raise InvalidDataError(
            f"{int(dup.sum())} rows repeat a node already in the table; the first is row {r} at "
            f"({x}={xs[r]:g}, {y}={ys[r]:g}). Keep one row per node."
        )
    ux, iy_x = np.unique(xs, return_inverse=True)
    uy, iy_y = np.unique(ys, return_inverse=True)
    if ux.size * uy.size != len(df):
        have = np.zeros((uy.size, ux.size), dtype=bool)
        have[iy_y, iy_x] = True
        i, j = np.argwhere(~have)[0]
        raise InvalidDataError(
            f"the {len(df)} nodes are not a full rectangle of {uy.size} {y}-values × "
            f"{ux.size} {x}-values: {have.size - len(df)} nodes are missing, the first at "
            f"({x}={ux[j]:g}, {y}={uy[i]:g}). Add those rows (NaN for no data)."
        )
    col = df[value].to_numpy()
    out = np.empty((uy.size, ux.size), dtype=np.result_type(col.dtype, np.float64)
                   if np.issubdtype(col.dtype, np.number) else col.dtype)
    out[iy_y, iy_x] = col
    return xr.DataArray(out, dims=("y", "x"), coords={"y": uy, "x": ux}, name=value)


# ---------------------------------------------------------------------------------------------
# formula
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Factor:
    """One covariate in a term: a name, categorical if written ``C(name)``.

    Attributes
    ----------
    name : str
        Key into the ``covariates`` mapping.
    categorical : bool
        Dummy (treatment) coded with the first sorted level as reference.
    """

    name: str
    categorical: bool = False

    @property
    def label(self) -> str:
        """The factor as written in a formula: ``name`` or ``C(name)``."""
        return f"C({self.name})" if self.categorical else self.name


@dataclass(frozen=True)
class Term:
    """A model term: the product of one or more factors (``a``, ``a:b``, ``C(s):a``).

    Attributes
    ----------
    factors : tuple of Factor
        In the order written.
    """

    factors: tuple[Factor, ...]

    @property
    def name(self) -> str:
        """The term as written, factors joined by ``:``."""
        return ":".join(f.label for f in self.factors)


_TOKEN = re.compile(r"\s*(?:(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<num>\d+(?:\.\d*)?)"
                    r"|(?P<op>[~+:()\-])|(?P<other>\S))")
_FORMULA_HELP = ("supported: '~ a + b', interactions 'a:b', categorical 'C(name)', and "
                 "'~ 1', '~ 0' or '~ -1' for no covariates (the intercept belongs to the model)")


def _formula_error(formula: str, pos: int, msg: str) -> InvalidParameterError:
    return InvalidParameterError(
        f"formula={formula!r}, position {pos}: {msg}:\n    {formula}\n    {' ' * pos}^\n"
        f"{_FORMULA_HELP}."
    )


def _tokenize(formula: str) -> list[tuple[str, str, int]]:
    tokens = []
    pos = 0
    while pos < len(formula):
        if formula[pos:].strip() == "":
            break
        m = _TOKEN.match(formula, pos)
        assert m is not None  # the pattern matches any non-space character
        kind = m.lastgroup
        assert kind is not None
        tokens.append((kind, m.group(kind), m.start(kind)))
        pos = m.end()
    return tokens


def parse_formula(formula: str) -> list[Term]:
    """Parse a one-sided model formula into ordered terms (Wilkinson & Rogers 1973 notation).

    Parameters
    ----------
    formula : str
        ``"~ elev + grad + elev:grad + C(soil)"``.  Supported: covariate names, ``a:b``
        products (interactions, any number of factors), ``C(name)`` categorical, and ``~ 1``,
        ``~ 0`` or ``~ -1`` meaning no covariates (the intercept is part of the model, so a
        ``1`` term among others is accepted and adds nothing).  ``*``, ``/``, ``**``, function
        calls other than ``C``, numbers and intercept removal among other terms are refused.

    Returns
    -------
    list of Term
        In the order written; empty for ``~ 1``/``~ 0``/``~ -1``.

    Raises
    ------
    InvalidParameterError
        Anything else; the message shows the formula with a caret under the offending token.

    Examples
    --------
    >>> [t.name for t in parse_formula("~ elev + grad + elev:C(soil)")]
    ['elev', 'grad', 'elev:C(soil)']
    """
    if not isinstance(formula, str):
        raise InvalidParameterError(
            f"formula={formula!r} must be a string such as '~ elev + grad'."
        )
    toks = _tokenize(formula)
    if not toks:
        raise _formula_error(formula, 0, "the formula is empty")
    if toks[0][1] != "~":
        tilde = [t for t in toks if t[1] == "~"]
        if tilde:
            raise _formula_error(formula, toks[0][2], "a left-hand side is not supported "
                                 "(the counts are given to the model)")
        raise _formula_error(formula, toks[0][2], "the formula must start with '~'")
    rhs = toks[1:]
    if not rhs:
        raise _formula_error(formula, len(formula), "the right-hand side is empty; write '~ 1' "
                             "for no covariates")
    if [t[1] for t in rhs] in (["1"], ["0"], ["-", "1"]):
        return []

    terms: list[Term] = []
    seen: dict[frozenset[Factor], str] = {}
    i = 0

    def expect_factor(i: int) -> tuple[Factor | None, int]:
        if i >= len(rhs):
            raise _formula_error(formula, len(formula), "expected a covariate name")
        kind, text, pos = rhs[i]
        if kind == "name":
            if text == "C" and i + 1 < len(rhs) and rhs[i + 1][1] == "(":
                if i + 2 >= len(rhs) or rhs[i + 2][0] != "name":
                    at = rhs[i + 2][2] if i + 2 < len(rhs) else len(formula)
                    raise _formula_error(formula, at, "C(...) takes one covariate name")
                if i + 3 >= len(rhs) or rhs[i + 3][1] != ")":
                    at = rhs[i + 3][2] if i + 3 < len(rhs) else len(formula)
                    raise _formula_error(formula, at, "expected ')' closing C(")
                return Factor(rhs[i + 2][1], categorical=True), i + 4
            if i + 1 < len(rhs) and rhs[i + 1][1] == "(":
                raise _formula_error(formula, pos, f"function {text}(...) is not supported "
                                     "(transform the covariate before regridding)")
            return Factor(text), i + 1
        if kind == "num" and text == "1":
            return None, i + 1
        if kind == "num":
            raise _formula_error(formula, pos, f"the number {text!r} is not a term (only "
                                 "'~ 1', '~ 0' and '~ -1' are accepted)")
        if text == "-":
            raise _formula_error(formula, pos, "removing terms or the intercept with '-' is "
                                 "only accepted alone, as '~ -1' (no covariates)")
        raise _formula_error(formula, pos, f"unsupported token {text!r}")

    while True:
        start = rhs[i][2] if i < len(rhs) else len(formula)
        factor, i = expect_factor(i)
        factors: list[Factor] = []
        if factor is not None:
            factors.append(factor)
        while i < len(rhs) and rhs[i][1] == ":":
            if factor is None:
                raise _formula_error(formula, rhs[i][2], "'1' cannot be part of an interaction")
            colon = rhs[i][2]
            nxt, i = expect_factor(i + 1)
            if nxt is None:
                raise _formula_error(formula, colon + 1, "'1' cannot be part of an interaction")
            if nxt in factors:
                raise _formula_error(formula, colon, f"{nxt.label} appears twice in one term")
            factors.append(nxt)
        if factors:
            key = frozenset(factors)
            term = Term(tuple(factors))
            if key in seen:
                raise _formula_error(formula, start, f"term {term.name!r} repeats "
                                     f"{seen[key]!r}")
            seen[key] = term.name
            terms.append(term)
        if i >= len(rhs):
            break
        _, text, pos = rhs[i]
        if text == "-":
            raise _formula_error(formula, pos, "removing terms or the intercept with '-' is "
                                 "not supported (the intercept belongs to the model)")
        if text != "+":
            raise _formula_error(formula, pos, f"unsupported token {text!r} (expected '+' or "
                                 "':')" + ("; write a + b + a:b for a*b" if text == "*" else ""))
        i += 1
        if i >= len(rhs):
            raise _formula_error(formula, len(formula), "expected a term after '+'")
    return terms


# ---------------------------------------------------------------------------------------------
# design matrix
# ---------------------------------------------------------------------------------------------
def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.array(a, dtype=np.float64 if a.dtype != np.bool_ else np.bool_)
    a.flags.writeable = False
    return a


@dataclass(frozen=True, eq=False)
class DesignMatrix:
    """Centred and scaled covariate columns on a lattice, from :func:`build_design`.

    Attributes
    ----------
    X : ndarray, shape (*lattice.shape, p), float64, read-only
        Standardised columns ``(x - center) / scale``; NaN exactly outside ``inside``.
    names : tuple of str, length p
        Column names: ``elev``, ``elev:grad``, ``C(soil)[T.b]``, ``elev:C(soil)[T.b]``.
    center, scale : ndarray, shape (p,)
        What was subtracted and divided by (0 and 1 for pure dummy columns or when centring /
        scaling was switched off).
    methods : dict of str to str
        Regrid method per factor label (``"elev"``, ``"C(soil)"``).
    formula : str
        The formula as given.
    lattice : Lattice
        The lattice the columns live on.
    inside : ndarray of bool, shape lattice.shape
        Cells with values (the mask used for regridding and for the centring weights).
    levels : dict of str to tuple of str
        Levels per categorical factor label, reference (first, smallest) level first.
    column_factors : tuple of tuple of str, length p
        The factor labels each column is built from (``("elev", "C(soil)")``).
    """

    X: np.ndarray
    names: tuple[str, ...]
    center: np.ndarray
    scale: np.ndarray
    methods: dict[str, str]
    formula: str
    lattice: Lattice
    inside: np.ndarray
    levels: dict[str, tuple[str, ...]] = field(default_factory=dict)
    column_factors: tuple[tuple[str, ...], ...] = ()

    @property
    def p(self) -> int:
        """Number of columns."""
        return len(self.names)

    @property
    def columns(self) -> np.ndarray:
        """``X`` with the column axis first, shape ``(p, *lattice.shape)``.

        This is the layout :class:`~lattice_lgm.models.latent.LatentGaussianModel` takes as
        ``covariates``.
        """
        return np.moveaxis(self.X, -1, 0)

    def to_original(
        self, coef: np.ndarray, intercept: float | np.ndarray = 0.0
    ) -> tuple[np.ndarray, np.ndarray | float]:
        """Map coefficients on the standardised columns back to the original covariates.

        With ``z_j = (x_j - c_j) / s_j``, ``a + Σ β_j z_j = (a - Σ β_j c_j / s_j) + Σ (β_j / s_j)
        x_j``, so ``β_orig = β / s`` and ``intercept_orig = intercept - Σ β c / s``.

        Parameters
        ----------
        coef : array_like, shape (..., p)
            Coefficients, optionally with leading sample axes (e.g. ``(n_draws, p)``).
        intercept : float or array_like, shape (...)
            Intercept(s) on the standardised scale, broadcast against ``coef[..., 0]``.

        Returns
        -------
        coef_orig : ndarray, shape (..., p)
        intercept_orig : float or ndarray, shape (...)

        Raises
        ------
        ShapeMismatchError
            ``coef``'s last axis is not ``p`` or ``intercept`` does not broadcast.
        """
        b = np.asarray(coef, dtype=np.float64)
        if b.ndim == 0 or b.shape[-1] != self.p:
            raise ShapeMismatchError(
                f"coef has shape {b.shape}; expected (..., {self.p}) for the columns "
                f"{list(self.names)}."
            )
        a = np.asarray(intercept, dtype=np.float64)
        try:
            np.broadcast_shapes(a.shape, b.shape[:-1])
        except ValueError:
            raise ShapeMismatchError(
                f"intercept has shape {a.shape}, which does not broadcast with coef's leading "
                f"shape {b.shape[:-1]}; pass one intercept per draw."
            ) from None
        b_orig = b / self.scale
        a_orig = a - np.sum(b_orig * self.center, axis=-1)
        return b_orig, (float(a_orig) if np.ndim(a_orig) == 0 else a_orig)

    def as_dataset(self) -> xr.Dataset:
        """The standardised columns as an :class:`xarray.Dataset` on the lattice.

        Returns
        -------
        xarray.Dataset
            One variable per column (named as in ``names``), dims ``lattice.dims``; each carries
            ``center``, ``scale`` and ``regrid_method`` attrs; the dataset carries ``formula``.
        """
        coords = self.lattice.coords()
        data = {}
        for k, name in enumerate(self.names):
            data[name] = xr.DataArray(
                self.X[..., k], dims=self.lattice.dims, coords=coords,
                attrs={"center": float(self.center[k]), "scale": float(self.scale[k]),
                       "regrid_method": self._column_method(k)},
            )
        return xr.Dataset(data, coords=coords, attrs={"formula": self.formula})

    def describe(self) -> str:
        """A plain-text table: column, regrid method(s), centre, scale, range inside the mask."""
        lines = [f"DesignMatrix {self.formula!r}: {self.p} columns on {self.lattice!r}, "
                 f"{int(self.inside.sum())} of {self.lattice.size} cells inside"]
        width = max([len(n) for n in self.names] + [6])
        lines.append(f"  {'column':<{width}}  {'method':<14}{'center':>12}{'scale':>12}"
                     f"{'min(z)':>10}{'max(z)':>10}")
        for k, name in enumerate(self.names):
            z = self.X[..., k][self.inside]
            meth = self._column_method(k)
            lo, hi = (float(z.min()), float(z.max())) if z.size else (math.nan, math.nan)
            lines.append(f"  {name:<{width}}  {meth:<14}{self.center[k]:>12.5g}"
                         f"{self.scale[k]:>12.5g}{lo:>10.3g}{hi:>10.3g}")
        if self.levels:
            for lab, lev in self.levels.items():
                lines.append(f"  {lab} levels: {', '.join(lev)} (reference {lev[0]})")
        return "\n".join(lines)

    def _column_method(self, k: int) -> str:
        return ",".join(sorted({self.methods[f] for f in self.column_factors[k]}))

    def __repr__(self) -> str:
        return (f"DesignMatrix(formula={self.formula!r}, names={self.names}, "
                f"shape={self.X.shape})")


def _load(source: Any, name: str) -> xr.DataArray:
    """A covariate from the mapping: a DataArray, or a GeoTIFF/NetCDF/CSV path."""
    if isinstance(source, xr.DataArray):
        return source
    if isinstance(source, str | PathLike):
        suffix = Path(source).suffix.lower()
        if suffix == ".csv":
            return from_table(source, name)
        if suffix in _RASTER_SUFFIXES | _NETCDF_SUFFIXES:
            return read_raster(source, name=name)
        raise InvalidParameterError(
            f"covariates[{name!r}]={str(source)!r} has suffix {suffix!r}; pass a DataArray, a "
            "GeoTIFF, a NetCDF file or a long-format CSV."
        )
    raise InvalidParameterError(
        f"covariates[{name!r}] is a {type(source).__name__}; pass an xarray.DataArray or a "
        "path to a GeoTIFF, NetCDF or CSV file."
    )


def _level_labels(levels: np.ndarray, attrs: Mapping[str, Any]) -> list[str]:
    """Names of category codes: CF ``flag_values``/``flag_meanings`` if given, else the code."""
    names: dict[float, str] = {}
    fv, fm = attrs.get("flag_values"), attrs.get("flag_meanings")
    if fv is not None and fm is not None:
        meanings = fm.split() if isinstance(fm, str) else list(fm)
        names = {float(v): str(m) for v, m in zip(np.atleast_1d(fv), meanings, strict=False)}
    out = []
    for v in levels:
        v = float(v)
        out.append(names.get(v, str(int(v)) if v.is_integer() else repr(v)))
    return out


def build_design(
    formula: str,
    covariates: Mapping[str, xr.DataArray | str | PathLike],
    lattice: Lattice,
    *,
    inside: np.ndarray | None = None,
    methods: Mapping[str, str] | None = None,
    center: bool = True,
    scale: bool = True,
    weights: np.ndarray | None = None,
) -> DesignMatrix:
    """Regrid the covariates a formula names and build centred, scaled design columns.

    Parameters
    ----------
    formula : str
        See :func:`parse_formula`, e.g. ``"~ elev + grad + elev:grad + C(soil)"``.
    covariates : mapping of str to DataArray or path
        Sources by name; paths are read with :func:`read_raster` (GeoTIFF, NetCDF; ``name`` is
        the key) or :func:`from_table` (``.csv``; the column named like the key).  Names not in
        the formula are ignored.
    lattice : Lattice
        The model lattice.
    inside : ndarray of bool, shape lattice.shape, optional
        Cells that need values (positive exposure).  Default: ``weights > 0`` if ``weights`` is
        given, else every cell.  ``X`` is NaN outside.
    methods : mapping of str to str, optional
        Regrid method per covariate name (see :func:`regrid`).  Default ``"area"`` for plain
        names and ``"majority"`` for ``C(name)``; categorical factors refuse ``"area"``.
    center, scale : bool
        Subtract the mean / divide by the standard deviation of each non-dummy column.
    weights : ndarray, shape lattice.shape, optional
        Non-negative cell weights (the exposure) for the mean and SD; default equal weights.

    Returns
    -------
    DesignMatrix
        ``X`` of shape ``(*lattice.shape, p)``.

    Notes
    -----
    * Categorical factors are dummy (treatment) coded: levels are the sorted distinct values
      found inside the mask, the first is the reference and gets no column (Chambers & Hastie
      1992, *Statistical Models in S*, §2.3.2).  A term's columns are the products of its
      factors' columns in the order written; reduced (treatment) coding is used for every
      categorical factor of every term, whether or not its marginal terms are present.
    * Interactions are products of the *unscaled* regridded covariates (and dummies); the
      product column is then centred and scaled like any other column, so ``elev:grad`` means
      ``(elev·grad - mean) / sd``, not the product of standardised columns.
    * Centre and scale are the weighted mean and weighted population SD (divide by ``Σ w``)
      over ``inside``: ``m = Σ w x / Σ w``, ``s² = Σ w (x - m)² / Σ w``.  Pure dummy columns
      (categorical factors only) are neither centred nor scaled (centre 0, scale 1) so that
      their coefficients stay contrasts with the reference level; columns involving a
      continuous factor are treated as continuous.
    * A column that is constant inside the mask is refused: it is confounded with the
      intercept.

    Raises
    ------
    InvalidParameterError
        A covariate missing from ``covariates``, a ``methods`` key not in the formula, an
        unknown method, ``"area"`` for a categorical factor, bad ``weights``; and every error of
        :func:`parse_formula`.
    InvalidDataError
        A constant column, a categorical factor with a single level inside the mask, zero total
        weight; and every error of :func:`regrid`.
    ShapeMismatchError
        ``inside`` or ``weights`` not of ``lattice.shape``.
    """
    terms = parse_formula(formula)
    if not isinstance(lattice, Lattice):
        raise InvalidParameterError(
            f"lattice is a {type(lattice).__name__}; pass a lattice_lgm.Lattice."
        )
    if not isinstance(covariates, Mapping):
        raise InvalidParameterError(
            f"covariates is a {type(covariates).__name__}; pass a mapping name -> DataArray "
            "or path."
        )
    w = None
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != lattice.shape:
            raise ShapeMismatchError(
                f"weights has shape {w.shape}; expected the lattice shape {lattice.shape}."
            )
        bad = ~np.isfinite(w) | (w < 0)
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            raise InvalidParameterError(
                f"weights has the value {w[idx].item()!r} at index {idx}; weights (exposures) "
                "must be finite and >= 0."
            )
    mask = _validate_mask(inside if inside is not None or w is None else w > 0, lattice)
    wts = np.where(mask, 1.0 if w is None else w, 0.0)
    if not wts.sum() > 0:
        raise InvalidDataError(
            "no cell inside the mask has positive weight; pass inside= / weights= that select "
            "at least one cell."
        )

    factors = list(dict.fromkeys(f for t in terms for f in t.factors))
    used = {f.name for f in factors}
    methods = dict(methods or {})
    unknown = sorted(set(methods) - used)
    if unknown:
        raise InvalidParameterError(
            f"methods names {unknown}, which the formula {formula!r} does not use (it uses "
            f"{sorted(used)}); check the spelling."
        )
    missing = [n for n in dict.fromkeys(f.name for f in factors) if n not in covariates]
    if missing:
        raise InvalidParameterError(
            f"covariates lacks {missing} named in the formula {formula!r}; it has "
            f"{sorted(covariates)}."
        )

    # Regrid each factor once: continuous → one column, categorical → dummy columns.
    cols_of: dict[Factor, list[tuple[str, np.ndarray]]] = {}
    used_methods: dict[str, str] = {}
    levels: dict[str, tuple[str, ...]] = {}
    for f in factors:
        meth = methods.get(f.name, "majority" if f.categorical else "area")
        if meth not in METHODS:
            raise InvalidParameterError(
                f"regrid method for {f.name!r}: methods[{f.name!r}]={meth!r} is not one of "
                f"{METHODS}."
            )
        if f.categorical and meth == "area":
            raise InvalidParameterError(
                f"methods[{f.name!r}]='area' would average category codes of {f.label}; use "
                "'majority' (default) or 'nearest'."
            )
        da = _load(covariates[f.name], f.name)
        try:
            vals = regrid(da, lattice, method=meth, inside=mask).values
        except InvalidDataError as e:  # say which covariate failed
            raise type(e)(f"covariates[{f.name!r}]: {e}") from None
        used_methods[f.label] = meth
        if not f.categorical:
            cols_of[f] = [(f.label, vals)]
            continue
        lev = np.unique(vals[mask])
        if lev.size < 2:
            raise InvalidDataError(
                f"{f.label} has {lev.size} level(s) inside the mask ({lev.tolist()}); a single "
                "level is confounded with the intercept. Drop the term."
            )
        labels = _level_labels(lev, da.attrs)
        levels[f.label] = tuple(labels)
        cols_of[f] = [(f"{f.label}[T.{lab}]", np.where(mask, vals == v, np.nan))
                      for v, lab in zip(lev[1:], labels[1:], strict=True)]

    names: list[str] = []
    raw: list[np.ndarray] = []
    dummy: list[bool] = []
    col_factors: list[tuple[str, ...]] = []
    for t in terms:
        combos: list[tuple[list[str], np.ndarray]] = [([], np.ones(lattice.shape))]
        for f in t.factors:
            combos = [([*n, cn], v * cv) for n, v in combos for cn, cv in cols_of[f]]
        for n, v in combos:
            names.append(":".join(n))
            raw.append(np.where(mask, v, np.nan))
            dummy.append(all(f.categorical for f in t.factors))
            col_factors.append(tuple(f.label for f in t.factors))

    p = len(names)
    ctr = np.zeros(p)
    scl = np.ones(p)
    X = np.full((*lattice.shape, p), np.nan)
    wsum = wts.sum()
    for k, v in enumerate(raw):
        vin = v[mask]
        # Constant inside the window (relative to the column's size): confounded with the
        # intercept.  The tolerance absorbs the last-bit differences area averaging leaves.
        active = vin[wts[mask] > 0]
        if np.ptp(active) <= 1e-10 * max(np.abs(active).max(), np.finfo(float).tiny):
            raise InvalidDataError(
                f"column {names[k]!r} is constant ({active[0]:.6g}) over the cells inside the "
                "mask, so it is confounded with the intercept; drop it from the formula."
            )
        if not dummy[k]:
            m = float(np.sum(wts * np.where(mask, v, 0.0)) / wsum)
            sd = float(np.sqrt(np.sum(wts * np.where(mask, (v - m) ** 2, 0.0)) / wsum))
            ctr[k] = m if center else 0.0
            scl[k] = sd if scale else 1.0
        X[..., k] = np.where(mask, (v - ctr[k]) / scl[k], np.nan)

    return DesignMatrix(
        X=_readonly(X), names=tuple(names), center=_readonly(ctr), scale=_readonly(scl),
        methods=used_methods, formula=formula, lattice=lattice, inside=_readonly(mask),
        levels=levels, column_factors=tuple(col_factors),
    )
