"""A lattice for a window: its origin at the lower-left corner of the window's bounding box."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._validation import positive_vector
from ..errors import InvalidParameterError, ShapeMismatchError
from ..lattice import Lattice, same_crs
from ._cells import _EPS, _ULPS
from ._inputs import _crs_string
from .geometry import Window


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
