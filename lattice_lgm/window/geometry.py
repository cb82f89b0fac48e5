"""The observation window: construction, geometry, membership and exposure.

A :class:`Window` is immutable and closed (its boundary belongs to it); its kinds are
rectangles, shapely polygons (holes allowed), raster masks of covered fractions and intervals.
The cell arithmetic it relies on is in :mod:`._cells`, the checks of its inputs in
:mod:`._inputs`.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import shapely
from shapely.geometry import MultiPolygon, Polygon
from shapely.geometry.base import BaseGeometry

from ..errors import InvalidParameterError, ShapeMismatchError, UnsupportedOperationError
from ..lattice import Lattice, same_crs
from ._cells import (
    _cell_index,
    _covered_box,
    _covered_cells,
    _edges,
    _overlap_1d,
    _polygon_exposure,
    _same_grid,
    _spatial,
)
from ._inputs import (
    _check_lattice,
    _check_xy,
    _covered_fraction,
    _crs_string,
    _crs_unless_impossible,
    _finite,
    _is_geo_frame,
    _union_of_rows,
    _valid_polygon,
)

WindowKind = Literal["rectangle", "polygon", "raster", "interval"]

_ACCEPTED = (
    "a Window; a shapely Polygon/MultiPolygon; a geopandas GeoDataFrame/GeoSeries of polygons; "
    "a 2-D numpy array of covered fractions (with lattice=); a 4-tuple (xmin, xmax, ymin, ymax); "
    "a 2-tuple (a, b) for an interval; or an object with a to_shapely() method"
)


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
                    f"{lo}={vals[lo]!r} must be < {hi}={vals[hi]!r}; a window needs xmin < xmax "
                    "and ymin < ymax, a positive area (swap the arguments if they are reversed: "
                    "the order is xmin, xmax, ymin, ymax)."
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
        geom = _valid_polygon(geom, "geom")
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
        return cls.from_geometry(_union_of_rows(gdf), crs=crs)

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
        frac = _covered_fraction(mask, lattice)
        return cls._new("raster", crs=lattice.crs, fraction=frac, lattice=lattice)

    @classmethod
    def coerce(cls, obj: Any, lattice: Lattice | None = None, *, name: str = "window") -> Window:
        """Turn anything that describes a window into a :class:`Window`.

        The one parser of window arguments: :func:`bin_points`, :func:`lattice_for_window`, the
        LGCP and the point-pattern statistics (:mod:`lattice_lgm.spatialstats`) all take what
        it takes.

        Parameters
        ----------
        obj : Window, shapely geometry, GeoDataFrame/GeoSeries, ndarray, tuple or window-like
            A Window is returned unchanged; a Polygon/MultiPolygon goes to
            :meth:`from_geometry`, and so does the ``to_shapely()`` of an object that has one
            (a window of another library); a GeoDataFrame/GeoSeries to
            :meth:`from_geodataframe`; a 2-D numpy array to :meth:`from_raster` (needs
            ``lattice``); a 4-tuple, list or 1-D array ``(xmin, xmax, ymin, ymax)`` to
            :meth:`rectangle`; a 2-tuple ``(a, b)`` to :meth:`interval`.
        lattice : Lattice, optional
            Needed for an array mask only.
        name : str
            The argument's name in error messages.

        Raises
        ------
        InvalidParameterError
            Any other type (the message lists the accepted ones), an array without a lattice,
            or bounds or a geometry that make no window (the message names ``name``).
        """
        if isinstance(obj, Window):
            return obj
        if _is_geo_frame(obj):
            return cls.from_geodataframe(obj)
        if not isinstance(obj, BaseGeometry) and hasattr(obj, "to_shapely"):
            obj = obj.to_shapely()  # a window object of another module (duck-typed)
        if isinstance(obj, BaseGeometry):
            return cls._new("polygon", geom=_valid_polygon(obj, name))
        if isinstance(obj, np.ndarray) and obj.ndim == 1:
            obj = obj.tolist()  # bounds (a raster mask is 2-D)
        if isinstance(obj, np.ndarray):
            if lattice is None:
                raise InvalidParameterError(
                    f"{name} is an array (a raster mask) but no lattice was given; pass "
                    "lattice= so the mask's cells have coordinates."
                )
            return cls.from_raster(obj, lattice)
        if isinstance(obj, tuple | list) and len(obj) in (2, 4) and all(
            isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool)
            for v in obj
        ):
            try:
                return cls.rectangle(*obj) if len(obj) == 4 else cls.interval(*obj)
            except InvalidParameterError as exc:
                raise InvalidParameterError(f"{name}={tuple(obj)!r}: {exc}") from None
        raise InvalidParameterError(
            f"{name}={obj!r:.80} of type {type(obj).__name__} is not a window; accepted: "
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
        assert self._lattice is not None and self._fraction is not None
        return _covered_box(self._fraction, self._lattice)

    @property
    def sides(self) -> tuple[float, ...]:
        """Side lengths of the bounding box, x first: ``(width, height)``; ``(b - a,)``."""
        return tuple(hi - lo for lo, hi in self.bounds)

    @property
    def is_box(self) -> bool:
        """Whether the window is its bounding box, up to a set of zero area.

        True for rectangles and intervals, and for a polygon without holes (or a raster whose
        covered cells are whole and fill their box) with the box's area to 1e-12 relative:
        the rectangle's exact formulas then hold (:mod:`lattice_lgm.spatialstats`).
        """
        if self._kind in ("rectangle", "interval"):
            return True
        (x0, x1), (y0, y1) = self.bounds
        box = (x1 - x0) * (y1 - y0)
        geom = self.to_shapely()
        # a region inside its bounding box with the box's area *is* the box (up to measure zero)
        return (isinstance(geom, Polygon) and len(geom.interiors) == 0
                and abs(box - self.area) <= 1e-12 * box)

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
        assert self._lattice is not None and self._fraction is not None
        return _covered_cells(self._fraction, self._lattice)  # type: ignore[return-value]

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

