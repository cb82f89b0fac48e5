"""Reading point patterns: CSV files, tables and dicts, GeoDataFrames/GeoSeries of Points.

Coordinates come out in ``(x, y)`` (``(x, y, t)``) order as float arrays, every value checked
(a missing column, a non-numeric value or a geometry that is not a Point is named, with its
row).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import shapely

from ..errors import InvalidDataError, InvalidParameterError
from ._inputs import _check_xy, _crs_string, _is_geo_frame


def read_points(path_or_obj: Any, columns: Sequence[str] | None = None) -> np.ndarray:
    """Point coordinates as a float array, from a CSV file, a table or a GeoDataFrame.

    Parameters
    ----------
    path_or_obj : str, os.PathLike, pandas.DataFrame, dict, GeoDataFrame, GeoSeries or ndarray
        A CSV path (one header row), a table with coordinate columns, a GeoDataFrame/GeoSeries
        of Points (projected CRS), or an array (returned as float64, ``(n,)`` becomes
        ``(n, 1)``).
    columns : sequence of str, optional
        Column names in output order.  Default: those of ``("x", "y", "t")`` present (``"x"``
        is required).  For a GeoDataFrame/GeoSeries the first two outputs are the point
        geometries' x and y, whatever they are named, and any further names are data columns.

    Returns
    -------
    points : ndarray of float64, shape ``(n, len(columns))``

    Raises
    ------
    InvalidDataError
        A missing column (naming what exists), a non-numeric or non-finite value (naming the
        row), or a geometry that is missing, empty or not a Point.
    GeographicCoordinatesError
        A GeoDataFrame/GeoSeries in a geographic CRS: project first.
    InvalidParameterError
        An object of another type.
    """
    pts = _read_points(path_or_obj, columns)[0]
    return _check_xy(pts, pts.shape[1], "points")


def _read_points(obj: Any, columns: Sequence[str] | None) -> tuple[np.ndarray, str | None]:
    """``read_points`` plus the CRS of a GeoDataFrame input (``None`` otherwise)."""
    if isinstance(obj, np.ndarray):
        arr = np.asarray(obj, dtype=np.float64)
        return (arr[:, None] if arr.ndim == 1 else arr), None
    if _is_geo_frame(obj):
        return _read_geo(obj, columns)
    import pandas as pd  # a dependency of xarray

    if isinstance(obj, str | os.PathLike):
        if not os.path.isfile(obj):
            raise InvalidDataError(f"points={os.fspath(obj)!r} is not a file; pass a CSV path "
                                   "with x, y columns, or an array.")
        frame = pd.read_csv(obj)
    elif isinstance(obj, pd.DataFrame):
        frame = obj
    elif isinstance(obj, Mapping):
        frame = pd.DataFrame({k: np.asarray(v) for k, v in obj.items()})
    else:
        raise InvalidParameterError(
            f"points of type {type(obj).__name__} are not understood; pass an (n, 2) array in "
            "(x, y) order, a CSV path, a pandas DataFrame or dict with coordinate columns, or "
            "a GeoDataFrame/GeoSeries of Points."
        )
    cols = _default_columns(frame.columns) if columns is None else list(columns)
    missing = [c for c in cols if c not in frame.columns]
    if missing:
        raise InvalidDataError(
            f"points have no column(s) {missing}; found {list(frame.columns)}. Rename them or "
            f"pass columns= naming the coordinate columns in (x, y, t) order."
        )
    return _numeric_columns(frame, cols), None


def _default_columns(available: Any) -> list[str]:
    cols = [c for c in ("x", "y", "t") if c in available]
    if "x" not in cols:
        raise InvalidDataError(
            f"points have no column 'x'; found {list(available)}. Pass columns= naming the "
            "coordinate columns in (x, y, t) order."
        )
    return cols


def _numeric_columns(frame: Any, cols: Sequence[str]) -> np.ndarray:
    out = np.empty((len(frame), len(cols)))
    for k, c in enumerate(cols):
        try:
            out[:, k] = np.asarray(frame[c], dtype=np.float64)
        except (TypeError, ValueError):
            vals = frame[c].tolist()
            for i, v in enumerate(vals):
                try:
                    float(v)
                except (TypeError, ValueError):
                    raise InvalidDataError(
                        f"points column {c!r} has non-numeric value {v!r} at row {i}; "
                        "coordinates must be numbers."
                    ) from None
            raise
    return out


def _read_geo(obj: Any, columns: Sequence[str] | None) -> tuple[np.ndarray, str | None]:
    crs = _crs_string(obj.crs, "points.crs")
    geoms = np.asarray(obj.geometry.values if hasattr(obj, "geometry") else obj.values,
                       dtype=object)
    for i, g in enumerate(geoms):
        if g is None or not isinstance(g, shapely.Point) or g.is_empty:
            raise InvalidDataError(
                f"points row {i} has geometry {g!r:.60}; every geometry must be a non-empty "
                "Point (use .centroid or .explode() first)."
            )
    xy = shapely.get_coordinates(geoms) if geoms.size else np.empty((0, 2))
    extra = [] if columns is None else list(columns)[2:]
    if columns is None and hasattr(obj, "columns") and "t" in obj.columns:
        extra = ["t"]
    if not extra:
        return xy, crs
    if not hasattr(obj, "columns") or any(c not in obj.columns for c in extra):
        have = list(obj.columns) if hasattr(obj, "columns") else []
        raise InvalidDataError(
            f"points have no column(s) {[c for c in extra if c not in have]}; found {have}."
        )
    return np.column_stack([xy, _numeric_columns(obj, extra)]), crs
