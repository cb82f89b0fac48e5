"""Source grids: their axes, CRS checks and preparation for regridding."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from ..errors import (
    GeographicCoordinatesError,
    InvalidDataError,
    InvalidParameterError,
    ShapeMismatchError,
)
from ..lattice import Lattice, _is_geographic, same_crs

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
    if lattice.crs is not None and not same_crs(crs, lattice.crs):
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


