"""Maps of lattice fields with the conventions spatial statisticians expect, and raster export.

- :func:`plot_map`: origin lower, extent from the cell edges, equal aspect, the window outline,
  optional points, units on the colour bar, a diverging colour map centred at 0 for signed
  quantities (``log RR``), NaN (outside the window) left blank.
- :func:`to_geotiff` / :func:`to_netcdf`: a 2-D map (GeoTIFF, north-up) or any DataArray/Dataset
  (NetCDF) with the lattice's CRS, so GIS tools place it correctly.

matplotlib and rasterio are imported when used (``pip install lattice-lgm[plot,geo]``).
"""

from __future__ import annotations

from os import PathLike
from typing import Any

import numpy as np
import xarray as xr

from .errors import BackendUnavailableError, InvalidParameterError, ShapeMismatchError
from .lattice import Lattice

__all__ = ["plot_map", "plot_second_order", "to_geotiff", "to_netcdf"]


def _map2d(da: xr.DataArray, lattice: Lattice) -> np.ndarray:
    if not isinstance(da, xr.DataArray):
        raise InvalidParameterError(f"da={type(da).__name__} must be an xarray.DataArray map.")
    if lattice.ndim != 2:
        raise ShapeMismatchError(f"maps need a 2-D lattice; this one has dims {lattice.dims}.")
    extra = [d for d in da.dims if d not in lattice.dims]
    if extra:
        raise ShapeMismatchError(
            f"da has dims {da.dims}; reduce {extra} first (e.g. summarize(...)['mean'] or "
            ".sel(threshold=2.0)) to get a map on {lattice.dims}.")
    arr = da.transpose(*lattice.dims).values
    if arr.shape != lattice.shape:
        raise ShapeMismatchError(f"da has shape {arr.shape}; the lattice is {lattice.shape}.")
    return np.asarray(arr, dtype=float)


def plot_map(da: xr.DataArray, model: Any, *, ax: Any = None, points: bool = False,
             outline: bool = True, diverging: bool | None = None, cmap: str | None = None,
             title: str | None = None, colorbar: bool = True, **imshow: Any) -> Any:
    """Draw a map on the model's lattice.

    Parameters
    ----------
    da : xarray.DataArray, dims lattice.dims
        E.g. the posterior mean intensity, an exceedance probability or ``log RR``.
    model : LGCP
        Supplies the lattice (extent, units), window outline and points.
    ax : matplotlib Axes, optional
    points : bool
        Overlay the observed points.
    outline : bool
        Draw the window's boundary rings (exterior and holes).
    diverging : bool, optional
        Centre a diverging colour map at 0 (default: when the values change sign).
    cmap : str, optional
        Colour map (default ``"viridis"``, or ``"RdBu_r"`` when diverging).
    title : str, optional
    colorbar : bool
        Add a colour bar labelled with ``da.attrs["long_name"]`` and ``["units"]``.
    **imshow
        Passed to ``Axes.imshow``.

    Returns
    -------
    matplotlib Axes
    """
    try:
        import matplotlib.pyplot as plt
        from matplotlib.colors import TwoSlopeNorm
    except ImportError as exc:  # pragma: no cover - matplotlib is in the dev/plot extras
        raise BackendUnavailableError("plot_map needs matplotlib: pip install "
                                      "'lattice-lgm[plot]'.") from exc
    lat = model.lattice
    arr = _map2d(da, lat)
    (y0, y1), (x0, x1) = lat.extent
    if ax is None:
        _, ax = plt.subplots()
    finite = arr[np.isfinite(arr)]
    if diverging is None:
        diverging = finite.size > 0 and finite.min() < 0 < finite.max()
    kw: dict[str, Any] = {"cmap": cmap or ("RdBu_r" if diverging else "viridis")}
    if diverging and finite.size:
        m = float(np.max(np.abs(finite))) or 1.0
        kw["norm"] = TwoSlopeNorm(vcenter=0.0, vmin=-m, vmax=m)
    kw.update(imshow)
    # rows are y ascending (lattice order): origin="lower" puts row 0 at the bottom
    im = ax.imshow(np.ma.masked_invalid(arr), origin="lower", extent=(x0, x1, y0, y1),
                   interpolation="nearest", **kw)
    ax.set_aspect("equal")
    if outline:
        for ring in model.window.outline():
            ax.plot(ring[:, 0], ring[:, 1], color="k", lw=0.8)
    if points:
        ax.plot(model.points[:, 0], model.points[:, 1], ".", color="k", ms=1.5, alpha=0.6)
    u = lat.units or "units"
    ax.set_xlabel(f"{lat.dims[1]} ({u})")
    ax.set_ylabel(f"{lat.dims[0]} ({u})")
    if title is not None:
        ax.set_title(title)
    if colorbar:
        label = da.attrs.get("long_name", da.name or "")
        if da.attrs.get("units"):
            label = f"{label} ({da.attrs['units']})"
        ax.figure.colorbar(im, ax=ax, label=label, shrink=0.8)
    return ax


def plot_second_order(check: dict[str, Any], *, ax: Any = None, title: str | None = None,
                      ) -> Any:
    """Plot the result of :func:`lattice_lgm.analysis.second_order_check`.

    The data's curve, the global envelope of predictive patterns (shaded) and the analytic
    LGCP pcf ``exp(C_θ(r))`` per posterior draw.

    Returns
    -------
    matplotlib Axes
    """
    import matplotlib.pyplot as plt

    env, obs, theory = check["envelope"], check["observed"], check.get("theory")
    r = obs["r"].values
    if ax is None:
        _, ax = plt.subplots()
    ax.fill_between(r, env.lower.values, env.upper.values, color="0.85",
                    label=f"{100 * (1 - env.alpha):g}% global envelope ({env.nsim} sims)")
    ax.plot(r, env.central.values, color="0.4", lw=1, ls="--", label="central")
    if theory is not None:
        for k, row in enumerate(theory.values):
            ax.plot(r, row, color="C1", lw=0.5, alpha=0.4,
                    label="exp(C_θ(r)), posterior draws" if k == 0 else None)
    ax.plot(r, obs.values, color="k", lw=1.5, label="data")
    u = check.get("units") or ""
    ax.set_xlabel(f"r ({u})" if u else "r")
    ax.set_ylabel("g(r)" if obs.name == "pcf" else "L(r) − r")
    ax.set_title(title or f"p = {env.p_value:.3g}")
    ax.legend(frameon=False, fontsize="small")
    return ax


def _crs_wkt(crs: str | None) -> str | None:
    if crs is None:
        return None
    try:
        import pyproj

        return pyproj.CRS.from_user_input(crs).to_wkt()
    except ImportError:  # pragma: no cover - pyproj comes with geopandas/rasterio
        return crs


def to_geotiff(da: xr.DataArray, path: str | PathLike, model: Any) -> None:
    """Write a 2-D map as a single-band float32 GeoTIFF (north-up, NaN as nodata, with CRS).

    Parameters
    ----------
    da : xarray.DataArray, dims lattice.dims
    path : str or path
    model : LGCP (or anything with a ``lattice``)
    """
    try:
        import rasterio
        from rasterio.transform import from_origin
    except ImportError as exc:  # pragma: no cover
        raise BackendUnavailableError("to_geotiff needs rasterio: pip install "
                                      "'lattice-lgm[geo]'.") from exc
    lat = model.lattice
    arr = _map2d(da, lat)
    (_, y1), (x0, _) = lat.extent
    hy, hx = lat.spacing
    # GeoTIFF rows run north to south: flip the lattice's ascending y
    data = arr[::-1].astype(np.float32)
    with rasterio.open(path, "w", driver="GTiff", height=lat.shape[0], width=lat.shape[1],
                       count=1, dtype="float32", crs=lat.crs, nodata=np.nan,
                       transform=from_origin(x0, y1, hx, hy)) as dst:
        dst.write(data, 1)
        tags = {k: str(v) for k, v in da.attrs.items()}
        if lat.units:
            tags["coordinate_units"] = lat.units
        dst.update_tags(**tags)


def to_netcdf(obj: xr.DataArray | xr.Dataset, path: str | PathLike, model: Any) -> None:
    """Write maps (any dims) to NetCDF with the lattice's CRS and coordinate units in attrs.

    Parameters
    ----------
    obj : xarray.DataArray or Dataset
    path : str or path
    model : LGCP (or anything with a ``lattice``)
    """
    lat = model.lattice
    ds = obj.to_dataset(name=obj.name or "value") if isinstance(obj, xr.DataArray) else obj
    ds = ds.copy()
    if lat.crs:
        ds.attrs["crs"] = lat.crs
        wkt = _crs_wkt(lat.crs)
        if wkt:
            ds.attrs["crs_wkt"] = wkt
    for d in lat.dims:
        if d in ds.coords and lat.units:
            ds[d].attrs["units"] = lat.units
    ds.to_netcdf(path, engine="h5netcdf")
