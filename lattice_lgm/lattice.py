"""Regular lattices in projected coordinates.

A :class:`Lattice` is a regular grid of cells: ``shape`` cells per axis, cell size ``spacing`` in
coordinate units, lower-left corner ``origin``.  Cell *centres* are the points at which fields are
evaluated: ``origin[i] + (j + 0.5) * spacing[i]`` for ``j = 0 … shape[i] - 1``.  Axis order is
array order: in 2-D ``(y, x)``, in 3-D ``(t, y, x)``, in 1-D ``(x,)``.  Every length in
lattice_lgm is in coordinate units, never in cells (DESIGN §9).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ._validation import positive_vector
from .errors import GeographicCoordinatesError, InvalidParameterError, ShapeMismatchError

__all__ = ["Lattice", "default_dims"]

_DEFAULT_DIMS = {1: ("x",), 2: ("y", "x"), 3: ("t", "y", "x")}

# CRS strings that are geographic (angles, not lengths). pyproj decides when it is installed.
_GEOGRAPHIC_CRS = {
    "epsg:4326", "epsg:4269", "epsg:4258", "epsg:4283", "epsg:4167", "ogc:crs84", "crs84",
    "wgs84", "wgs 84", "nad83", "etrs89", "lonlat", "longlat", "latlon", "latlong",
}
_ANGULAR_UNITS = {"degree", "degrees", "deg", "°", "radian", "radians", "rad"}


def default_dims(ndim: int) -> tuple[str, ...]:
    """The default dimension names for a lattice of ``ndim`` axes (``x``; ``y, x``; ``t, y, x``)."""
    try:
        return _DEFAULT_DIMS[ndim]
    except KeyError:
        raise InvalidParameterError(
            f"ndim={ndim} is not supported; lattices have 1, 2 or 3 axes."
        ) from None


def _is_geographic(crs: str) -> bool:
    try:  # pyproj knows every CRS; it is optional.
        import pyproj

        return bool(pyproj.CRS.from_user_input(crs).is_geographic)
    except ImportError:
        pass
    except Exception:  # unknown to pyproj: fall back to the name check below
        pass
    c = crs.strip().lower()
    return c in _GEOGRAPHIC_CRS or "+proj=longlat" in c or "+proj=latlong" in c


def same_crs(a: str | None, b: str | None) -> bool:
    """Whether two CRS descriptions mean the same CRS (None: unknown, matches anything).

    pyproj (optional) compares WKT, EPSG codes and PROJ strings by meaning, ignoring axis
    order; without it, or for a string it cannot parse, the text is compared.
    """
    if a is None or b is None:
        return True
    try:
        import pyproj

        return bool(pyproj.CRS.from_user_input(a).equals(pyproj.CRS.from_user_input(b),
                                                          ignore_axis_order=True))
    except ImportError:
        pass
    except Exception:  # unparseable by pyproj: fall back to comparing the text
        pass
    return a.strip().lower() == b.strip().lower()


@dataclass(frozen=True)
class Lattice:
    """A regular lattice of cells in projected coordinates.

    Parameters
    ----------
    shape : tuple of int
        Cells per axis, in array order (``(ny, nx)`` in 2-D, ``(nt, ny, nx)`` in 3-D).
    spacing : float or tuple of float, optional
        Cell size per axis in coordinate ``units`` (default 1.0 on every axis).
    origin : float or tuple of float, optional
        Coordinates of the lower corner of the first cell (default 0.0).
    dims : tuple of str, optional
        Dimension names (default ``("x",)``, ``("y", "x")`` or ``("t", "y", "x")``).
    units : str, optional
        Coordinate units (e.g. ``"m"``); angular units are refused.
    crs : str, optional
        Coordinate reference system (e.g. ``"EPSG:32617"``); geographic CRSs are refused.

    Raises
    ------
    InvalidParameterError
        Non-positive or non-finite spacing, non-positive shape.
    GeographicCoordinatesError
        A geographic CRS or angular units: project the data first.

    Examples
    --------
    >>> lat = Lattice(shape=(50, 100), spacing=10.0, units="m")
    >>> lat.size, lat.extent
    (5000, ((0.0, 500.0), (0.0, 1000.0)))
    """

    shape: tuple[int, ...]
    spacing: tuple[float, ...] = field(default=1.0)  # type: ignore[assignment]
    origin: tuple[float, ...] = field(default=0.0)  # type: ignore[assignment]
    dims: tuple[str, ...] | None = None
    units: str | None = None
    crs: str | None = None

    def __post_init__(self) -> None:
        shape = np.atleast_1d(np.asarray(self.shape))
        if shape.ndim != 1 or not 1 <= shape.size <= 3:
            raise InvalidParameterError(
                f"shape={self.shape!r} must list 1, 2 or 3 cell counts, e.g. (ny, nx)."
            )
        if not np.issubdtype(shape.dtype, np.integer) or np.any(shape < 1):
            raise InvalidParameterError(
                f"shape={self.shape!r} must be positive integers (cells per axis)."
            )
        ndim = shape.size
        object.__setattr__(self, "shape", tuple(int(s) for s in shape))
        object.__setattr__(
            self, "spacing",
            positive_vector("spacing", self.spacing, ndim, "cell sizes are lengths > 0"),
        )
        origin = np.atleast_1d(np.asarray(self.origin, dtype=float))
        if origin.ndim != 1 or origin.size not in (1, ndim):
            raise ShapeMismatchError(
                f"origin={self.origin!r} has {origin.size} entries but the lattice has {ndim} "
                "axes; pass one coordinate or one per axis."
            )
        origin = np.broadcast_to(origin, (ndim,))
        if not np.all(np.isfinite(origin)):
            raise InvalidParameterError(f"origin={self.origin!r} must be finite coordinates.")
        object.__setattr__(self, "origin", tuple(float(o) for o in origin))
        dims = default_dims(ndim) if self.dims is None else tuple(self.dims)
        if len(dims) != ndim or len(set(dims)) != ndim:
            raise ShapeMismatchError(
                f"dims={self.dims!r} must be {ndim} distinct names, one per axis of shape "
                f"{self.shape}."
            )
        object.__setattr__(self, "dims", dims)
        if self.units is not None and self.units.strip().lower() in _ANGULAR_UNITS:
            raise GeographicCoordinatesError(
                f"units={self.units!r} are angular; lengths in degrees are not distances. "
                "Project the coordinates first (e.g. to UTM) and give units like 'm'."
            )
        if self.crs is not None and _is_geographic(self.crs):
            raise GeographicCoordinatesError(
                f"crs={self.crs!r} is geographic (lon/lat). Project first, e.g. to a UTM zone, "
                "so that spacing and ranges are lengths."
            )

    # -- derived quantities -------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        """Number of axes."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of cells."""
        return int(np.prod(self.shape))

    @property
    def cell_volume(self) -> float:
        """Area (2-D), length (1-D) or volume (3-D) of one cell in ``units**ndim``."""
        return float(np.prod(self.spacing))

    @property
    def extent(self) -> tuple[tuple[float, float], ...]:
        """``((lo, hi), …)`` per axis: the lattice's bounding box in coordinate units."""
        return tuple(
            (o, o + n * h) for o, n, h in zip(self.origin, self.shape, self.spacing, strict=True)
        )

    @property
    def side_lengths(self) -> tuple[float, ...]:
        """Length of the lattice along each axis, ``shape * spacing``."""
        return tuple(n * h for n, h in zip(self.shape, self.spacing, strict=True))

    def coords(self) -> dict[str, np.ndarray]:
        """Cell-centre coordinates per dimension name, each of shape ``(shape[i],)``."""
        return {
            d: o + (np.arange(n) + 0.5) * h
            for d, o, n, h in zip(self.dims, self.origin, self.shape, self.spacing, strict=True)
        }

    def cell_centers(self) -> np.ndarray:
        """All cell centres as an array of shape ``(size, ndim)`` in C (row-major) order."""
        grids = np.meshgrid(*self.coords().values(), indexing="ij")
        return np.stack([g.ravel() for g in grids], axis=-1)

    def padded(self, pad: Sequence[int]) -> Lattice:
        """A larger lattice with ``pad[i]`` extra cells on *each* side of axis ``i``."""
        arr = np.atleast_1d(np.asarray(pad))
        if arr.ndim != 1 or arr.size not in (1, self.ndim):
            raise ShapeMismatchError(
                f"pad={pad!r} has {arr.size} entries but the lattice has {self.ndim} axes; "
                "pass one cell count or one per axis."
            )
        pad = tuple(int(p) for p in np.broadcast_to(arr, (self.ndim,)))
        return Lattice(
            shape=tuple(n + 2 * p for n, p in zip(self.shape, pad, strict=True)),
            spacing=self.spacing,
            origin=tuple(o - p * h for o, p, h in zip(self.origin, pad, self.spacing, strict=True)),
            dims=self.dims, units=self.units, crs=self.crs,
        )

    def __repr__(self) -> str:
        u = f" {self.units}" if self.units else ""
        return (f"Lattice(shape={self.shape}, spacing={self.spacing}{u}, origin={self.origin}, "
                f"dims={self.dims}" + (f", crs={self.crs!r}" if self.crs else "") + ")")


#: area of one target unit in square metres
_AREA_M2 = {"m2": 1.0, "ha": 1e4, "km2": 1e6}
#: lattice length units in metres
_LENGTH_M = {"m": 1.0, "metre": 1.0, "meter": 1.0, "metres": 1.0, "meters": 1.0, "km": 1e3,
             "kilometre": 1e3, "kilometer": 1e3}


def measure_unit(lattice: Lattice, time_units: str | None = None) -> str:
    """The unit of the exposure: ``u``, ``u²`` or ``u²·time`` (1-D, 2-D, space-time).

    ``u`` is the coordinate units; in space-time the exposure is area × time step and
    ``time_units`` names the time axis' unit.
    """
    u = lattice.units or "unit"
    if lattice.ndim == 3:
        return f"{u}²·{time_units or 'time unit'}"
    return u if lattice.ndim == 1 else f"{u}²"
