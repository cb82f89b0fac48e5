"""Simulated point patterns in a window: homogeneous Poisson (CSR) and LGCPs.

For tests and predictive checks.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._validation import finite_array, positive_float
from .covariance import Covariance
from .errors import (
    ShapeMismatchError,
)
from .lattice import Lattice
from .priors import CirculantPrior
from .priors.base import as_rng
from .spatialstats._geometry import _as_window


# ------------------------------------------------------------------------------------------------
# Simulation
# ------------------------------------------------------------------------------------------------
def simulate_poisson(window: Any, intensity: float, rng: np.random.Generator | int) -> np.ndarray:
    """A homogeneous Poisson process (CSR) in the window.

    ``N ~ Poisson(λ |box|)`` uniform points in the bounding box, then those in the window: the
    restriction of a Poisson process to a subset is Poisson with the restricted intensity, so
    this is exact.

    Parameters
    ----------
    window : Window, shapely Polygon/MultiPolygon, (xmin, xmax, ymin, ymax), or ``.to_shapely()``
    intensity : float
        Points per unit area.
    rng : numpy.random.Generator or int

    Returns
    -------
    ndarray, shape (n, 2)
        ``(x, y)`` coordinates.
    """
    win = _as_window(window)
    lam = positive_float("intensity", intensity, "points per unit area, > 0")
    gen = as_rng(rng)
    (xmin, xmax), (ymin, ymax) = win.bounds
    n = gen.poisson(lam * (xmax - xmin) * (ymax - ymin))
    pts = np.column_stack([gen.uniform(xmin, xmax, n), gen.uniform(ymin, ymax, n)])
    return pts[win.contains(pts)]


def simulate_lgcp(
    window: Any,
    *,
    kernel: Covariance,
    mean: float | np.ndarray,
    cell_size: float,
    rng: np.random.Generator | int,
) -> tuple[np.ndarray, np.ndarray, Lattice]:
    """Simulate an LGCP with intensity ``exp(mean + f)`` piecewise constant on lattice cells.

    ``f`` is one exact draw of N(0, K) on a lattice covering the window's bounding box
    (:class:`~lattice_lgm.priors.CirculantPrior`); counts ``~ Poisson(exp(mean + f) × cell
    area)`` per cell, points uniform in their cell, then only points in the window are kept.
    Given ``f`` this is a Poisson process with intensity constant on each cell, and restricting
    a Poisson process to the window (discarding the points outside) is exactly the Poisson
    process with the restricted intensity — so the result is exactly the LGCP whose intensity
    is the cell-wise constant ``exp(mean + f)`` on the window.  (It approximates the
    continuous-field LGCP with an error set by ``cell_size`` / range.)

    Parameters
    ----------
    window : Window, shapely Polygon/MultiPolygon, (xmin, xmax, ymin, ymax), or ``.to_shapely()``
    kernel : Covariance
        Covariance of the field (ranges per lattice axis ``(y, x)`` allowed).
    mean : float or ndarray, shape lattice.shape
        Log-intensity mean ``μ`` (``E λ = exp(μ + sd²/2)``).
    cell_size : float
        Cell side in coordinate units; the lattice has ``ceil(side / cell_size)`` cells per axis
        from the bounding box's lower-left corner.
    rng : numpy.random.Generator or int

    Returns
    -------
    points : ndarray, shape (n, 2)
        ``(x, y)`` coordinates in the window.
    field : ndarray, shape lattice.shape
        The draw of ``f`` (cell ``(i, j)`` = y-index ``i``, x-index ``j``).
    lattice : Lattice
        The lattice (dims ``("y", "x")``).
    """
    win = _as_window(window)
    h = positive_float("cell_size", cell_size, "a length > 0 in coordinate units")
    gen = as_rng(rng)
    (xmin, xmax), (ymin, ymax) = win.bounds
    nx = max(1, math.ceil((xmax - xmin) / h - 1e-9))
    ny = max(1, math.ceil((ymax - ymin) / h - 1e-9))
    lat = Lattice(shape=(ny, nx), spacing=h, origin=(ymin, xmin))
    mu = np.asarray(mean, dtype=float)
    if mu.ndim and mu.shape != lat.shape:
        raise ShapeMismatchError(
            f"mean has shape {mu.shape}; pass a scalar or an array of the lattice shape "
            f"{lat.shape} (ceil(side / cell_size) cells per axis, (y, x) order)."
        )
    finite_array("mean", np.atleast_1d(mu), "pass finite log-intensities")
    f = CirculantPrior(lat, kernel).sample(gen, 1)[0]
    counts = gen.poisson(np.exp(mu + f) * h * h)
    iy, ix = np.nonzero(counts)
    reps = counts[iy, ix]
    iy, ix = np.repeat(iy, reps), np.repeat(ix, reps)
    u = gen.random((len(iy), 2))
    pts = np.column_stack([xmin + (ix + u[:, 0]) * h, ymin + (iy + u[:, 1]) * h])
    return pts[win.contains(pts)], f, lat
