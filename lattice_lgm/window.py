"""Observation windows, exposure and point binning for log-Gaussian Cox processes.

An LGCP observed in a window ``W`` and discretised on a lattice has, per cell ``c``, a Poisson
count with mean ``|c ∩ W| · exp(f_c)`` (Møller, Syversveen & Waagepetersen 1998, *Scand. J.
Statist.* 25, 451-482, where the likelihood is approximated on a grid; Diggle, Moraga,
Rowlingson & Taylor 2013, *Statist. Sci.* 28, 542-563).  This module supplies the two
data ingredients of that likelihood:

- the **exposure** ``|c ∩ W|`` of every cell (area in 2-D, length in 1-D, area × time spacing in
  space-time), computed exactly — analytically for rectangles and intervals, by polygon clipping
  for shapely windows, as covered fraction × cell area for raster masks;
- the observed **counts**, by binning a point pattern with explicit rules for every edge case
  (points on the window edge, on cell edges, on the lattice's upper edge, outside the window,
  duplicates, points that round-off puts in a cell of zero exposure).

Conventions (DESIGN §9)
-----------------------
- Point coordinates are given in the usual ``(x, y)`` order, i.e. the *reverse* of the lattice's
  axis order: ``(x,)`` in 1-D, ``(x, y)`` in 2-D, ``(x, y, t)`` in 3-D.  Arrays on a lattice are
  in the lattice's axis order (``(y, x)`` or ``(t, y, x)``).  In 2-D and 3-D the last lattice axis
  is taken as x and the one before it as y, whatever their names.
- Windows are **closed**: points on the boundary are inside.
- Cells are half-open ``[lo, hi)`` on every axis, except that the last cell on each axis is closed
  at the top, so a point on the lattice's upper edge lands in the last cell.  Cell edges are
  ``origin + k * spacing`` (the same numbers are used for exposure and for binning, so the two
  always agree on which cell a point is in).

Notation: ``h`` is a cell spacing, ``o`` the lattice origin, ``n`` the cells on an axis.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import shapely
from shapely.geometry import MultiPolygon, Polygon
from shapely.geometry.base import BaseGeometry
from shapely.validation import explain_validity

from ._validation import positive_vector
from .errors import (
    GeographicCoordinatesError,
    InvalidDataError,
    InvalidParameterError,
    ShapeMismatchError,
    UnsupportedOperationError,
)
from .lattice import Lattice, _is_geographic, same_crs

__all__ = ["BinnedPoints", "Window", "bin_points", "lattice_for_window", "read_points"]

WindowKind = Literal["rectangle", "polygon", "raster", "interval"]

# Round-off allowance, in units of machine epsilon times the coordinate magnitude, for a point on
# the lattice's upper edge (o + n*h carries a few ulps of error) and for snapping extent/cell_size
# to an integer in `lattice_for_window`. 128 ulps ≈ 2.8e-14 relative: far below any real
# measurement precision, far above the error of one multiply-add.
_ULPS = 128.0
_EPS = float(np.finfo(np.float64).eps)
# Polygon pieces with more vertices than this are cut to their row band before cells are clipped
# against them (an overlay costs O(vertices)); below it the cut costs more than it saves.
_LOCAL_VERTICES = 256

_ACCEPTED = (
    "a Window; a shapely Polygon/MultiPolygon; a geopandas GeoDataFrame/GeoSeries of polygons; "
    "a 2-D numpy array of covered fractions (with lattice=); a 4-tuple (xmin, xmax, ymin, ymax); "
    "or a 2-tuple (a, b) for an interval"
)


# -- small helpers ----------------------------------------------------------------------------


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


# -- the window --------------------------------------------------------------------------------


class Window:
    """An immutable observation window in projected coordinates.

    Build one with a constructor: :meth:`rectangle`, :meth:`from_geometry`,
    :meth:`from_geodataframe`, :meth:`from_raster`, :meth:`interval` or :meth:`coerce`.

    A window is **closed**: its boundary belongs to it.  For a raster window, whose resolution is
    one lattice cell, a point is inside when the cell it falls in (half-open cells, the last cell
    on each axis closed at the top) has covered fraction > 0.

    Attributes
    ----------
    kind : {"rectangle", "polygon", "raster", "interval"}
        How the window is represented.
    area : float
        Area in ``units**2`` (the length of an interval).
    bounds : tuple
        ``((xmin, xmax), (ymin, ymax))`` (``((a, b),)`` for an interval), x first.
    crs : str or None
        Projected coordinate reference system, if known.
    ndim : int
        1 for an interval, 2 otherwise.
    lattice : Lattice or None
        The grid of a raster window (``None`` for other kinds).

    Examples
    --------
    >>> w = Window.rectangle(0.0, 1000.0, 0.0, 500.0)
    >>> lat = lattice_for_window(w, cell_size=5.0)
    >>> float(w.exposure(lat).sum())
    500000.0
    """

    __slots__ = ("_crs", "_fraction", "_geom", "_interval", "_kind", "_lattice", "_rect")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            "Window has no public __init__; use Window.rectangle, Window.from_geometry, "
            "Window.from_geodataframe, Window.from_raster, Window.interval or Window.coerce."
        )

    @classmethod
    def _new(cls, kind: str, *, crs: str | None = None, geom: BaseGeometry | None = None,
             rect: tuple[float, float, float, float] | None = None,
             interval: tuple[float, float] | None = None, fraction: np.ndarray | None = None,
             lattice: Lattice | None = None) -> Window:
        self = object.__new__(cls)
        for name, value in (("_kind", kind), ("_crs", crs), ("_geom", geom), ("_rect", rect),
                            ("_interval", interval), ("_fraction", fraction),
                            ("_lattice", lattice)):
            object.__setattr__(self, name, value)
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Window is immutable; cannot set {name!r}. Build a new window.")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Window is immutable; cannot delete {name!r}.")

    def __reduce__(self) -> tuple:
        # __setattr__ is blocked, so pickling (e.g. shipping to Dask workers) rebuilds via _new.
        return (_rebuild_window, (self._kind, {
            "crs": self._crs, "geom": self._geom, "rect": self._rect,
            "interval": self._interval, "fraction": self._fraction, "lattice": self._lattice,
        }))

    # -- constructors -----------------------------------------------------------------------
    @classmethod
    def rectangle(cls, xmin: float, xmax: float, ymin: float, ymax: float, *,
                  crs: Any = None) -> Window:
        """The closed rectangle ``[xmin, xmax] × [ymin, ymax]``.

        Parameters
        ----------
        xmin, xmax, ymin, ymax : float
            Finite coordinates with ``xmin < xmax`` and ``ymin < ymax``.
        crs : str or pyproj.CRS, optional
            Projected CRS; geographic CRSs are refused.

        Raises
        ------
        InvalidParameterError
            Non-finite coordinates or an empty (zero-width) side.
        GeographicCoordinatesError
            A geographic ``crs``.
        """
        vals = {n: _finite(n, v) for n, v in
                (("xmin", xmin), ("xmax", xmax), ("ymin", ymin), ("ymax", ymax))}
        for lo, hi in (("xmin", "xmax"), ("ymin", "ymax")):
            if not vals[lo] < vals[hi]:
                raise InvalidParameterError(
                    f"{lo}={vals[lo]!r} must be < {hi}={vals[hi]!r}; a window needs positive "
                    "area (swap the arguments if they are reversed: order is xmin, xmax, ymin, "
                    "ymax)."
                )
        rect = (vals["xmin"], vals["xmax"], vals["ymin"], vals["ymax"])
        return cls._new("rectangle", crs=_crs_string(crs, "crs"), rect=rect)

    @classmethod
    def interval(cls, a: float, b: float, *, crs: Any = None) -> Window:
        """The closed interval ``[a, b]``, a window for 1-D lattices.

        Parameters
        ----------
        a, b : float
            Finite coordinates with ``a < b``.
        crs : str, optional
            Kept for symmetry; geographic CRSs are refused.

        Raises
        ------
        InvalidParameterError
            Non-finite ends or ``a >= b``.
        """
        a_, b_ = _finite("a", a), _finite("b", b)
        if not a_ < b_:
            raise InvalidParameterError(
                f"a={a_!r} must be < b={b_!r}; an interval window needs positive length."
            )
        return cls._new("interval", crs=_crs_string(crs, "crs"), interval=(a_, b_))

    @classmethod
    def from_geometry(cls, geom: Polygon | MultiPolygon, *, crs: Any = None) -> Window:
        """A window from a shapely Polygon or MultiPolygon (holes allowed).

        Parameters
        ----------
        geom : shapely.Polygon or shapely.MultiPolygon
            Valid, non-empty, with positive area, in projected coordinates.
        crs : str or pyproj.CRS, optional
            Projected CRS of ``geom``; geographic CRSs are refused.

        Raises
        ------
        InvalidParameterError
            Another geometry type, an empty or invalid geometry (the message carries shapely's
            ``explain_validity`` reason and suggests ``shapely.make_valid``) or zero area.
        """
        if not isinstance(geom, Polygon | MultiPolygon):
            raise InvalidParameterError(
                f"geom is a {type(geom).__name__}; a window must be a shapely Polygon or "
                "MultiPolygon (buffer points/lines, or extract the polygons of a collection)."
            )
        if geom.is_empty:
            raise InvalidParameterError(
                "geom is empty; a window must cover a region of positive area."
            )
        if not geom.is_valid:
            raise InvalidParameterError(
                f"geom is not a valid polygon: {explain_validity(geom)}. Repair it, e.g. with "
                "shapely.make_valid(geom) or geom.buffer(0), and check the result."
            )
        if not geom.area > 0.0:
            raise InvalidParameterError(
                f"geom has area {geom.area!r}; a window must cover a region of positive area."
            )
        shapely.prepare(geom)  # speeds up contains/intersects; geometries stay immutable
        return cls._new("polygon", crs=_crs_string(crs, "crs"), geom=geom)

    @classmethod
    def from_geodataframe(cls, gdf: Any) -> Window:
        """A window as the union of all polygons of a GeoDataFrame or GeoSeries.

        Parameters
        ----------
        gdf : geopandas.GeoDataFrame or geopandas.GeoSeries
            Polygon/MultiPolygon geometries in a projected CRS (kept as ``crs``, a string).

        Raises
        ------
        GeographicCoordinatesError
            The CRS is geographic: project first (``gdf.to_crs(gdf.estimate_utm_crs())``).
        InvalidParameterError
            Not a GeoDataFrame/GeoSeries, no rows, a missing, non-polygon or invalid geometry
            (naming its row), or an empty union.
        """
        if not _is_geo_frame(gdf):
            raise InvalidParameterError(
                f"gdf is a {type(gdf).__name__}; expected a geopandas GeoDataFrame or GeoSeries "
                "(install the 'geo' extra for geopandas)."
            )
        crs = _crs_string(_crs_unless_impossible(gdf), "gdf.crs")
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
        return cls.from_geometry(union, crs=crs)

    @classmethod
    def from_raster(cls, mask: Any, lattice: Lattice) -> Window:
        """A window given as the covered fraction of each cell of a 2-D lattice.

        Parameters
        ----------
        mask : array_like of bool or float, shape ``lattice.shape``
            ``True``/1 for cells wholly inside, ``False``/0 outside, values in [0, 1] for the
            fraction of the cell inside the window.
        lattice : Lattice
            The 2-D lattice the mask lives on (its CRS becomes the window's).

        Raises
        ------
        ShapeMismatchError
            ``mask.shape != lattice.shape`` or a lattice that is not 2-D.
        InvalidParameterError
            A value outside [0, 1] or NaN (naming the first bad index), a non-numeric mask, or
            no cell with positive fraction.
        """
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
        return cls._new("raster", crs=lattice.crs, fraction=frac, lattice=lattice)

    @classmethod
    def coerce(cls, obj: Any, lattice: Lattice | None = None) -> Window:
        """Turn anything that describes a window into a :class:`Window`.

        Parameters
        ----------
        obj : Window, shapely geometry, GeoDataFrame/GeoSeries, ndarray or tuple
            A Window is returned unchanged; a Polygon/MultiPolygon goes to
            :meth:`from_geometry`; a GeoDataFrame/GeoSeries to :meth:`from_geodataframe`; a 2-D
            numpy array to :meth:`from_raster` (needs ``lattice``); a 4-tuple
            ``(xmin, xmax, ymin, ymax)`` to :meth:`rectangle`; a 2-tuple ``(a, b)`` to
            :meth:`interval`.
        lattice : Lattice, optional
            Needed for an array mask only.

        Raises
        ------
        InvalidParameterError
            Any other type (the message lists the accepted ones), or an array without a lattice.
        """
        if isinstance(obj, Window):
            return obj
        if isinstance(obj, BaseGeometry):
            return cls.from_geometry(obj)
        if _is_geo_frame(obj):
            return cls.from_geodataframe(obj)
        if isinstance(obj, np.ndarray):
            if lattice is None:
                raise InvalidParameterError(
                    "window is an array (a raster mask) but no lattice was given; pass "
                    "lattice= so the mask's cells have coordinates."
                )
            return cls.from_raster(obj, lattice)
        if isinstance(obj, tuple | list) and all(
            isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool)
            for v in obj
        ):
            if len(obj) == 4:
                return cls.rectangle(*obj)
            if len(obj) == 2:
                return cls.interval(*obj)
        raise InvalidParameterError(
            f"window={obj!r:.80} of type {type(obj).__name__} is not understood; accepted: "
            f"{_ACCEPTED}."
        )

    # -- properties ---------------------------------------------------------------------------
    @property
    def kind(self) -> WindowKind:
        """``"rectangle"``, ``"polygon"``, ``"raster"`` or ``"interval"``."""
        return self._kind  # type: ignore[return-value]

    @property
    def ndim(self) -> int:
        """1 for an interval window, 2 for every other kind."""
        return 1 if self._kind == "interval" else 2

    @property
    def crs(self) -> str | None:
        """The projected CRS as a string, or ``None`` when unknown."""
        return self._crs

    @property
    def lattice(self) -> Lattice | None:
        """The lattice of a raster window (``None`` for other kinds)."""
        return self._lattice

    @property
    def area(self) -> float:
        """Area in ``units**2`` (length in ``units`` for an interval)."""
        if self._kind == "rectangle":
            x0, x1, y0, y1 = self._rect  # type: ignore[misc]
            return (x1 - x0) * (y1 - y0)
        if self._kind == "interval":
            a, b = self._interval  # type: ignore[misc]
            return b - a
        if self._kind == "polygon":
            return float(self._geom.area)  # type: ignore[union-attr]
        return float(self._fraction.sum()) * self._lattice.cell_volume  # type: ignore[union-attr]

    @property
    def bounds(self) -> tuple[tuple[float, float], ...]:
        """Bounding box ``((xmin, xmax), (ymin, ymax))``; ``((a, b),)`` for an interval.

        For a raster window: the box of the cells with positive fraction.
        """
        if self._kind == "rectangle":
            x0, x1, y0, y1 = self._rect  # type: ignore[misc]
            return ((x0, x1), (y0, y1))
        if self._kind == "interval":
            return (self._interval,)  # type: ignore[return-value]
        if self._kind == "polygon":
            x0, y0, x1, y1 = (float(v) for v in self._geom.bounds)  # type: ignore[union-attr]
            return ((x0, x1), (y0, y1))
        lat = self._lattice
        assert lat is not None and self._fraction is not None
        rows, cols = np.nonzero(self._fraction > 0.0)
        ye = _edges(lat.origin[0], lat.spacing[0], lat.shape[0])
        xe = _edges(lat.origin[1], lat.spacing[1], lat.shape[1])
        return ((float(xe[cols.min()]), float(xe[cols.max() + 1])),
                (float(ye[rows.min()]), float(ye[rows.max() + 1])))

    # -- queries ------------------------------------------------------------------------------
    def contains(self, xy: Any) -> np.ndarray:
        """Which points lie in the closed window.

        Parameters
        ----------
        xy : array_like, shape ``(n, 2)`` in (x, y) order (``(n,)`` or ``(n, 1)`` for an interval)
            Finite coordinates.

        Returns
        -------
        inside : ndarray of bool, shape ``(n,)``
            ``True`` for points in the window *or on its boundary*.  Raster windows: ``True``
            when the point's cell (half-open cells, last cell closed at the top) has covered
            fraction > 0; points outside the raster's lattice are outside.

        Raises
        ------
        ShapeMismatchError
            Wrong shape.
        InvalidDataError
            A non-finite coordinate (naming the point index).
        """
        pts = _check_xy(xy, self.ndim)
        if self._kind == "interval":
            a, b = self._interval  # type: ignore[misc]
            return (pts[:, 0] >= a) & (pts[:, 0] <= b)
        x, y = pts[:, 0], pts[:, 1]
        if self._kind == "rectangle":
            x0, x1, y0, y1 = self._rect  # type: ignore[misc]
            return (x >= x0) & (x <= x1) & (y >= y0) & (y <= y1)
        if self._kind == "polygon":
            # intersects (not contains) so that boundary points count: the window is closed.
            return np.asarray(shapely.intersects_xy(self._geom, x, y), dtype=bool)
        lat = self._lattice
        assert lat is not None and self._fraction is not None
        out = np.zeros(pts.shape[0], dtype=bool)
        iy, oky = _cell_index(y, lat.origin[0], lat.spacing[0], lat.shape[0])
        ix, okx = _cell_index(x, lat.origin[1], lat.spacing[1], lat.shape[1])
        ok = oky & okx
        out[ok] = self._fraction[iy[ok], ix[ok]] > 0.0
        return out

    def exposure(self, lattice: Lattice) -> np.ndarray:
        """Exposure ``|cell ∩ window|`` of every cell of ``lattice``, exactly.

        Parameters
        ----------
        lattice : Lattice
            1-D for an interval window; 2-D ``(y, x)`` or 3-D ``(t, y, x)`` otherwise.

        Returns
        -------
        exposure : ndarray of float64, shape ``lattice.shape``
            In 1-D the overlap length; in 2-D the overlap area in ``units**2``; in 3-D the 2-D
            overlap area times the time spacing ``lattice.spacing[0]``, the same for every time
            slice (the window is spatial and observed over the lattice's whole time extent).

        Notes
        -----
        Rectangles and intervals: outer product of per-axis overlap lengths (exact up to one
        rounding per cell).  Polygons: cells not touching the window's boundary are wholly inside
        (full cell area) or outside (0), told apart by their centre; only cells the boundary
        crosses are clipped with shapely (row strip first, then cell), so the cost grows with the
        boundary's length in cells, not with the lattice size.  Rasters: fraction × cell area;
        the lattice must be the raster's own (to round-off), else refused.

        Raises
        ------
        ShapeMismatchError
            Window and lattice dimensions do not match, or a raster window on another lattice.
        InvalidParameterError
            Window and lattice CRSs differ.
        """
        lattice = _check_lattice(lattice)
        self._check_compatible(lattice)
        if self._kind == "interval":
            a, b = self._interval  # type: ignore[misc]
            o, h, n = lattice.origin[0], lattice.spacing[0], lattice.shape[0]
            return _overlap_1d(_edges(o, h, n), a, b, h)
        plane = self._exposure_2d(_spatial(lattice))
        if lattice.ndim == 2:
            return plane
        return np.ascontiguousarray(
            np.broadcast_to(plane * lattice.spacing[0], lattice.shape), dtype=np.float64
        )

    def fraction(self, lattice: Lattice) -> np.ndarray:
        """Covered fraction of every cell, ``exposure(lattice) / lattice.cell_volume``.

        Returns
        -------
        fraction : ndarray of float64, shape ``lattice.shape``, values in [0, 1]
        """
        return self.exposure(lattice) / _check_lattice(lattice).cell_volume

    def outline(self) -> list[np.ndarray]:
        """Boundary rings for plotting, each an array ``(k, 2)`` of (x, y) vertices.

        Exterior rings and hole rings of every polygon part, each closed (first vertex repeated
        last).  An interval gives one ``(2, 2)`` array ``[[a, 0], [b, 0]]``.  A raster window
        gives the outline of its cells with positive fraction.
        """
        if self._kind == "interval":
            a, b = self._interval  # type: ignore[misc]
            return [np.array([[a, 0.0], [b, 0.0]])]
        geom = self.to_shapely()
        parts = geom.geoms if isinstance(geom, MultiPolygon) else [geom]
        rings: list[np.ndarray] = []
        for p in parts:
            rings.append(np.asarray(p.exterior.coords, dtype=np.float64)[:, :2])
            rings.extend(np.asarray(r.coords, dtype=np.float64)[:, :2] for r in p.interiors)
        return rings

    def to_shapely(self) -> Polygon | MultiPolygon:
        """The window as a shapely geometry.

        A raster window becomes the union of its cells with positive fraction (partial cells
        count whole: a shapely geometry cannot carry fractions).

        Raises
        ------
        UnsupportedOperationError
            For an interval window (1-D, no polygon).
        """
        if self._kind == "rectangle":
            x0, x1, y0, y1 = self._rect  # type: ignore[misc]
            return shapely.box(x0, y0, x1, y1)
        if self._kind == "polygon":
            return self._geom  # type: ignore[return-value]
        if self._kind == "interval":
            raise UnsupportedOperationError(
                "an interval window is 1-D and has no shapely polygon; use window.bounds."
            )
        lat = self._lattice
        assert lat is not None and self._fraction is not None
        ye = _edges(lat.origin[0], lat.spacing[0], lat.shape[0])
        xe = _edges(lat.origin[1], lat.spacing[1], lat.shape[1])
        boxes = []
        # Merge each row's runs of covered cells first: far fewer boxes to union.
        for i, row in enumerate(self._fraction > 0.0):
            d = np.diff(np.concatenate([[0], row.astype(np.int8), [0]]))
            starts, stops = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
            boxes.extend(shapely.box(xe[s], ye[i], xe[e], ye[i + 1])
                         for s, e in zip(starts, stops, strict=True))
        return shapely.union_all(boxes)

    def __repr__(self) -> str:
        crs = f", crs={self._crs!r}" if self._crs else ""
        if self._kind == "interval":
            a, b = self._interval  # type: ignore[misc]
            return f"Window(interval [{a:g}, {b:g}], length={b - a:g}{crs})"
        (x0, x1), (y0, y1) = self.bounds
        extra = ""
        if self._kind == "polygon":
            g = self._geom
            parts = list(g.geoms) if isinstance(g, MultiPolygon) else [g]
            holes = sum(len(p.interiors) for p in parts)  # type: ignore[union-attr]
            extra = f", parts={len(parts)}, holes={holes}"
        elif self._kind == "raster":
            extra = f", cells={self._lattice.shape}"  # type: ignore[union-attr]
        return (f"Window({self._kind} [{x0:g}, {x1:g}] × [{y0:g}, {y1:g}], "
                f"area={self.area:g}{extra}{crs})")

    # -- internals ----------------------------------------------------------------------------
    def _check_compatible(self, lattice: Lattice) -> None:
        if self._kind == "interval" and lattice.ndim != 1:
            raise ShapeMismatchError(
                f"an interval window needs a 1-D lattice, got {lattice.ndim}-D {lattice.shape}; "
                "use a 2-D window (rectangle, polygon, raster) for 2-D and 3-D lattices."
            )
        if self._kind != "interval" and lattice.ndim == 1:
            raise ShapeMismatchError(
                f"a {self._kind} window is 2-D but the lattice is 1-D {lattice.shape}; use "
                "Window.interval(a, b) for a 1-D lattice."
            )
        if not same_crs(self._crs, lattice.crs):
            raise InvalidParameterError(
                f"window crs={self._crs!r} differs from lattice crs={lattice.crs!r}; reproject "
                "the window (or build the lattice with lattice_for_window)."
            )

    def _exposure_2d(self, lat: Lattice) -> np.ndarray:
        (hy, hx), (oy, ox), (ny, nx) = lat.spacing, lat.origin, lat.shape
        ye, xe = _edges(oy, hy, ny), _edges(ox, hx, nx)
        if self._kind == "rectangle":
            x0, x1, y0, y1 = self._rect  # type: ignore[misc]
            return np.outer(_overlap_1d(ye, y0, y1, hy), _overlap_1d(xe, x0, x1, hx))
        if self._kind == "raster":
            assert self._lattice is not None and self._fraction is not None
            if not _same_grid(lat, self._lattice):
                raise ShapeMismatchError(
                    f"this raster window lives on {self._lattice!r}, not on {lat!r}; compute "
                    "exposure on window.lattice (or regrid the mask to the new lattice first)."
                )
            return self._fraction * lat.cell_volume
        return _polygon_exposure(self._geom, ye, xe, hy * hx)  # type: ignore[arg-type]


def _rebuild_window(kind: str, attrs: dict) -> Window:
    return Window._new(kind, **attrs)


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


# -- lattices from windows ---------------------------------------------------------------------


def lattice_for_window(
    window: Any,
    *,
    cell_size: float | Sequence[float] | None = None,
    shape: int | Sequence[int] | None = None,
    units: str | None = None,
    crs: Any = None,
    dims: Sequence[str] | None = None,
) -> Lattice:
    """A lattice whose origin is the lower-left corner of the window's bounding box.

    Parameters
    ----------
    window : Window or anything :meth:`Window.coerce` accepts (not a raster array)
        The observation window.
    cell_size : float or sequence of float, optional
        Cell size in coordinate units: one value for square cells, or one per axis **in the
        lattice's axis order** ``(h_y, h_x)`` — the same order as ``Lattice.spacing``.  The
        shape is ``ceil(extent / cell_size)`` per axis, so the lattice may reach past the box
        (those cells get partial or zero exposure).  A ratio within round-off of an integer
        (e.g. ``2.1 / 0.3 = 7.000000000000001``) is taken as that integer.
    shape : int or sequence of int, optional
        Cells per axis, ``(ny, nx)`` (one int: the same on every axis); the spacing is then
        ``extent / shape``.  Give exactly one of ``cell_size`` and ``shape``.
    units : str, optional
        Coordinate units (e.g. ``"m"``).
    crs : str or pyproj.CRS, optional
        Defaults to ``window.crs``; must agree with it when both are given.
    dims : sequence of str, optional
        Dimension names (default ``("y", "x")``, or ``("x",)`` for an interval).

    Returns
    -------
    Lattice
        2-D (1-D for an interval window) covering the window.  For space-time data build the
        3-D lattice from this one's spacing and origin plus a time axis.

    Raises
    ------
    InvalidParameterError
        Neither or both of ``cell_size``/``shape``; a non-positive or non-finite size (naming
        it); a non-integer or non-positive shape; CRSs that disagree.
    ShapeMismatchError
        Per-axis values whose count is not the window's number of axes.
    """
    window = Window.coerce(window)
    if (cell_size is None) == (shape is None):
        raise InvalidParameterError(
            f"pass exactly one of cell_size={cell_size!r} and shape={shape!r}: the cell size "
            "in coordinate units, or the number of cells per axis."
        )
    ndim = window.ndim
    # bounds are x-first; lattice axes are (y, x).
    lo = tuple(b[0] for b in reversed(window.bounds))
    extent = tuple(b[1] - b[0] for b in reversed(window.bounds))
    if cell_size is not None:
        h = positive_vector("cell_size", cell_size, ndim,
                            "cell sizes are lengths in coordinate units > 0")
        n_cells = []
        for e, hk in zip(extent, h, strict=True):
            r = e / hk
            k = round(r)
            n_cells.append(k if k >= 1 and abs(r - k) <= _ULPS * _EPS * r else math.ceil(r))
        n = tuple(n_cells)
    else:
        arr = np.atleast_1d(np.asarray(shape, dtype=object))
        if arr.ndim != 1 or arr.size not in (1, ndim):
            raise ShapeMismatchError(
                f"shape={shape!r} has {arr.size} entries; the window has {ndim} axes — pass one "
                "count or one per axis in (y, x) order."
            )
        for v in arr:
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
                raise InvalidParameterError(
                    f"shape={shape!r} has entry {v!r}; cell counts must be integers >= 1."
                )
        n = tuple(int(v) for v in np.broadcast_to(arr, (ndim,)))
        h = tuple(e / k for e, k in zip(extent, n, strict=True))
    crs_s = _crs_string(crs, "crs")
    if crs_s is not None and not same_crs(crs_s, window.crs):
        raise InvalidParameterError(
            f"crs={crs_s!r} differs from window.crs={window.crs!r}; reproject the window or "
            "leave crs=None to take the window's."
        )
    return Lattice(shape=n, spacing=h, origin=lo, dims=dims if dims is None else tuple(dims),
                   units=units, crs=crs_s if crs_s is not None else window.crs)


# -- reading points ----------------------------------------------------------------------------


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


# -- binning -----------------------------------------------------------------------------------


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
