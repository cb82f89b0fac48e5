"""Checks of what users pass as windows and points.

Coordinates, lattices and CRSs, shapely polygons, GeoDataFrames (geopandas, optional) and
raster masks.  Every check names the argument and the first offending value, and says what to
pass instead; nothing is dropped or repaired silently.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import shapely
from shapely.geometry import MultiPolygon, Polygon
from shapely.geometry.base import BaseGeometry
from shapely.validation import explain_validity

from ..errors import (
    GeographicCoordinatesError,
    InvalidDataError,
    InvalidParameterError,
    ShapeMismatchError,
)
from ..lattice import Lattice, _is_geographic

# -- coordinates and lattices ---------------------------------------------------------------


def _finite(name: str, value: Any) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InvalidParameterError(f"{name}={value!r} is not a number; pass a finite "
                                    "coordinate.") from None
    if not math.isfinite(v):
        raise InvalidParameterError(
            f"{name}={value!r} must be a finite coordinate of the window's bounds.")
    return v


def _first_indices(idx: np.ndarray, k: int = 5) -> str:
    head = ", ".join(str(int(i)) for i in idx[:k])
    return f"[{head}{', …' if idx.size > k else ''}]"


def _check_lattice(lattice: Any, name: str = "lattice") -> Lattice:
    if not isinstance(lattice, Lattice):
        raise InvalidParameterError(
            f"{name}={lattice!r} is not a lattice_lgm.Lattice; build one with Lattice(...) or "
            "lattice_for_window(window, cell_size=...)."
        )
    return lattice


def _check_xy(xy: Any, ndim: int, name: str = "xy") -> np.ndarray:
    """``xy`` as a float array ``(n, ndim)`` (``(n,)`` accepted in 1-D), finite."""
    try:
        arr = np.asarray(xy, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidDataError(
            f"{name} must be numeric coordinates, shape (n, {ndim}); converting them to "
            f"numbers failed ({exc}). Pass an array of floats, a table with numeric x and y "
            "columns, or a path to one.") from None
    if arr.size == 0:
        return arr.reshape(0, ndim)
    if ndim == 1 and arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[1] != ndim:
        order = "(x, y, t)" if ndim == 3 else "(x, y)"
        want = "(n,) or (n, 1)" if ndim == 1 else f"(n, {ndim}) in {order} order"
        raise ShapeMismatchError(f"{name} has shape {arr.shape}; expected {want}.")
    bad = ~np.isfinite(arr)
    if bad.any():
        i, j = (int(v) for v in np.argwhere(bad)[0])
        raise InvalidDataError(
            f"{name} has a non-finite coordinate {arr[i, j].item()!r} at point index {i} "
            f"(column {j}); remove or fix that point (nothing is dropped silently)."
        )
    return arr


# -- CRSs and GeoDataFrames ------------------------------------------------------------------


def _geopandas() -> Any | None:
    try:
        import geopandas
    except ImportError:  # optional dependency (extra "geo")
        return None
    return geopandas


def _is_geo_frame(obj: Any) -> bool:
    gpd = _geopandas()
    return gpd is not None and isinstance(obj, gpd.GeoDataFrame | gpd.GeoSeries)


def _crs_string(crs: Any, name: str) -> str | None:
    """A CRS (pyproj object or string) as a string, refusing geographic ones."""
    if crs is None:
        return None
    if hasattr(crs, "is_geographic"):  # pyproj.CRS
        geographic = bool(crs.is_geographic)
        text = crs.to_string()
    else:
        text = str(crs)
        geographic = _is_geographic(text)
    if geographic:
        raise GeographicCoordinatesError(
            f"{name}={text!r} is geographic (lon/lat): areas and distances in degrees are "
            "meaningless. Project first, e.g. gdf.to_crs(gdf.estimate_utm_crs())."
        )
    return text


def _crs_unless_impossible(gdf: Any) -> Any:
    """``gdf.crs``, or None when it is geographic but the coordinates cannot be degrees.

    GeoJSON (RFC 7946) has no CRS member: readers give every GeoJSON file EPSG:4326, so a
    window drawn in metres arrives labelled lon/lat and was refused as geographic (issue 27).
    Coordinates beyond ±180 (x) or ±90 (y) are not degrees: the label is dropped with a
    warning, and the window is planar with no CRS (give ``crs``/``units`` to say which).
    """
    crs = gdf.crs
    if crs is None or not getattr(crs, "is_geographic", False) or len(gdf) == 0:
        return crs
    x0, y0, x1, y1 = (float(v) for v in gdf.total_bounds)
    if max(abs(x0), abs(x1)) <= 180.0 and max(abs(y0), abs(y1)) <= 90.0:
        return crs  # may be degrees: refused by the caller as geographic
    warnings.warn(
        f"the window's file says {crs.to_string()} (lon/lat; GeoJSON's default), but its "
        f"coordinates (x {x0:g}…{x1:g}, y {y0:g}…{y1:g}) cannot be degrees: read as planar "
        "coordinates without a CRS. Give the real CRS (store it in the file, e.g. as a "
        "GeoPackage) or units to say what they are.", UserWarning, stacklevel=4)
    return None


# -- polygons and raster masks -------------------------------------------------------------------


def _valid_polygon(geom: Any, name: str) -> Polygon | MultiPolygon:
    """``geom`` if it is a valid, non-empty Polygon/MultiPolygon of positive area, prepared."""
    if not isinstance(geom, Polygon | MultiPolygon):
        raise InvalidParameterError(
            f"{name} is a {type(geom).__name__}; a window must be a shapely Polygon or "
            "MultiPolygon (buffer points/lines, or extract the polygons of a collection)."
        )
    if geom.is_empty:
        raise InvalidParameterError(
            f"{name} is empty; a window must cover a region of positive area."
        )
    if not geom.is_valid:
        raise InvalidParameterError(
            f"{name} is not a valid polygon: {explain_validity(geom)}. Repair it, e.g. with "
            f"shapely.make_valid({name}) or {name}.buffer(0), and check the result."
        )
    if not geom.area > 0.0:
        raise InvalidParameterError(
            f"{name} has area {geom.area!r}; a window must cover a region of positive area."
        )
    shapely.prepare(geom)  # speeds up contains/intersects; geometries stay immutable
    return geom


def _union_of_rows(gdf: Any) -> BaseGeometry:
    """The union of a GeoDataFrame's/GeoSeries' polygons, each row checked (named if bad)."""
    geoms = np.asarray(gdf.geometry.values, dtype=object)
    if geoms.size == 0:
        raise InvalidParameterError("gdf has no rows; a window needs at least one polygon.")
    for i, g in enumerate(geoms):
        if g is None or not isinstance(g, Polygon | MultiPolygon):
            raise InvalidParameterError(
                f"gdf row {i} (index {gdf.index[i]!r}) has geometry {type(g).__name__}; "
                "every geometry must be a Polygon or MultiPolygon."
            )
        if not g.is_valid:
            raise InvalidParameterError(
                f"gdf row {i} (index {gdf.index[i]!r}) is not a valid polygon: "
                f"{explain_validity(g)}. Repair it with shapely.make_valid first."
            )
    union = shapely.union_all(geoms)
    if isinstance(union, shapely.GeometryCollection) and not union.is_empty:
        polys = [p for p in union.geoms if isinstance(p, Polygon | MultiPolygon)]
        union = shapely.union_all(polys) if polys else Polygon()
    return union


def _covered_fraction(mask: Any, lattice: Lattice) -> np.ndarray:
    """A raster mask as read-only covered fractions in [0, 1] on a 2-D lattice, checked."""
    lattice = _check_lattice(lattice)
    if lattice.ndim != 2:
        raise ShapeMismatchError(
            f"lattice has {lattice.ndim} axes; a raster window lives on a 2-D (y, x) lattice "
            "(use Window.interval for 1-D; a 2-D window applies to every time slice in 3-D)."
        )
    arr = np.asarray(mask)
    if arr.shape != lattice.shape:
        raise ShapeMismatchError(
            f"mask has shape {arr.shape} but lattice.shape is {lattice.shape}; the mask must "
            "give one fraction per cell in (y, x) order."
        )
    if arr.dtype != bool and not np.issubdtype(arr.dtype, np.number):
        raise InvalidParameterError(
            f"mask has dtype {arr.dtype}; pass booleans or fractions in [0, 1]."
        )
    frac = np.array(arr, dtype=np.float64)
    bad = ~((frac >= 0.0) & (frac <= 1.0))  # NaN fails both comparisons
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise InvalidParameterError(
            f"mask has value {frac[idx].item()!r} at index {idx}; covered fractions must lie "
            "in [0, 1] (use booleans for an in/out mask)."
        )
    if not (frac > 0.0).any():
        raise InvalidParameterError(
            "mask has no cell with positive fraction; the window would have zero area."
        )
    frac.flags.writeable = False
    return frac
