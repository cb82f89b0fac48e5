"""Covariate readers: GeoTIFF (rasterio), NetCDF and long-format tables."""

from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from ..errors import (
    InvalidDataError,
    InvalidParameterError,
    UnsupportedOperationError,
)
from ._source import _NETCDF_SUFFIXES, _RASTER_SUFFIXES


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


