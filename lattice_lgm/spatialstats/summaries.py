"""Pair-correlation, K and L functions, homogeneous and inhomogeneous.

Kernel estimates with the translation edge correction (Stoyan & Stoyan 1994; Baddeley, Møller &
Waagepetersen 2000 for the inhomogeneous versions given ρ at the points).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
import xarray as xr

from .._validation import finite_array, positive_float, positive_int
from ..errors import (
    InvalidParameterError,
    ShapeMismatchError,
)
from ._geometry import RESOLUTION, STOYAN_COEFFICIENT, _lambda2, _pairs, _prepare, _r_grid

# ------------------------------------------------------------------------------------------------
# First-order intensity for the inhomogeneous summaries
# ------------------------------------------------------------------------------------------------
#: what ``intensity=`` accepts: ρ at the points, a function of ``(m, 2)`` points, or a grid
IntensityLike = np.ndarray | Callable[[np.ndarray], np.ndarray] | xr.DataArray
#: relative tolerance on the spacing of a grid's cell-centre coordinates (round-off of
#: ``origin + (j + ½) h`` and of coordinates read from files is far below this)
_GRID_RTOL = 1e-6
#: a point within this many ulps of the grid's largest coordinate from a cell edge is *on* it
_EDGE_ULPS = 1024


def _where(pts: np.ndarray, i: int) -> str:
    return f"point index {i} at (x, y) = ({pts[i, 0]:.6g}, {pts[i, 1]:.6g})"


def _centre_index(
    c: np.ndarray, centres: np.ndarray, name: str, dim: str
) -> tuple[np.ndarray, np.ndarray]:
    """Cell index of coordinates ``c`` on a grid given by its cell centres (one axis).

    The cells are rebuilt from the centres: spacing ``h = (c_last − c_0)/(m − 1)``, lower edge
    ``o = c_0 − h/2``, cell ``j`` = ``[o + j h, o + (j + 1) h)``, the last cell closed at the
    top — the rule of :func:`lattice_lgm.window.bin_points`.  Centres only give the edges up to
    round-off, so a coordinate within ``_EDGE_ULPS`` ulps of an edge is taken to lie *on* it
    (and goes to the cell above, or to the last cell on the top edge), as it would with the
    lattice's exact edges.  Descending centres (north-up rasters) are handled by mirroring.

    Returns ``(j, ok)``: indices into ``centres`` and whether each coordinate is on the grid.
    """
    m = centres.size
    if m < 2:
        raise InvalidParameterError(
            f"{name} has {m} cell along {dim!r}; the cell size is read from the spacing of the "
            f"cell-centre coordinates, so the grid needs >= 2 cells per axis — pass the values "
            "at the points (an (n,) array) or a callable instead."
        )
    finite_array(f"{name}[{dim!r}] (coordinates)", centres, "give finite cell-centre coordinates")
    step = np.diff(centres)
    descending = bool(step[0] < 0)
    cc = centres[::-1] if descending else centres
    h = (cc[-1] - cc[0]) / (m - 1)
    dev = np.abs(np.diff(cc) - h)
    if h <= 0 or np.any(dev > _GRID_RTOL * h):
        k = int(np.argmax(dev)) if h > 0 else 0
        raise InvalidParameterError(
            f"{name}'s {dim!r} coordinates are not evenly spaced, strictly monotonic cell "
            f"centres (step {k}: {float(np.diff(cc)[k])!r} against the mean spacing "
            f"{float(h)!r}); an intensity grid must be a regular lattice — regrid it first."
        )
    o = cc[0] - 0.5 * h
    t = (c - o) / h  # position in cells
    tol = _EDGE_ULPS * np.finfo(float).eps * max(abs(o), abs(o + m * h), h) / h
    j = np.floor(t)
    j = np.where(t - j > 1.0 - tol, j + 1.0, j)  # just below an edge: on it, so the cell above
    j = np.where((j == m) & (t <= m + tol), m - 1.0, j)  # the top edge is closed
    ok = (j >= 0) & (j < m)
    jj = np.where(ok, j, 0).astype(np.int64)
    if descending:
        jj = m - 1 - jj
    return jj, ok


def _grid_values(
    grid: xr.DataArray, pts: np.ndarray, name: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Grid values at points (the cell containing each point), and the cells' y and x indices.

    ``grid`` has dims ``("y", "x")`` in either order; returns three arrays of shape ``(n,)``.
    """
    if grid.ndim != 2 or set(grid.dims) != {"y", "x"}:
        raise ShapeMismatchError(
            f"{name} is a DataArray with dims {grid.dims}; an intensity grid needs exactly the "
            "dims ('y', 'x') with 1-D cell-centre coordinates — select or squeeze other dims "
            "(e.g. da.squeeze('band')) and rename spatial ones (da.rename(lat='y', lon='x'))."
        )
    grid = grid.transpose("y", "x")
    idx = {}
    for dim, col in (("y", 1), ("x", 0)):
        if dim not in grid.coords:
            raise InvalidParameterError(
                f"{name} has no {dim!r} coordinate; assign the cell-centre coordinates, e.g. "
                "da.assign_coords(lattice.coords())."
            )
        centres = np.asarray(grid[dim].values, dtype=float)
        j, ok = _centre_index(pts[:, col], centres, name, dim)
        if not ok.all():
            i = int(np.flatnonzero(~ok)[0])
            lo, hi = sorted((centres[0], centres[-1]))
            half = 0.5 * abs(centres[-1] - centres[0]) / (centres.size - 1)
            raise InvalidParameterError(
                f"{name}: {int((~ok).sum())} point(s) lie outside the grid's {dim!r} extent "
                f"[{lo - half:.6g}, {hi + half:.6g}] (first: {_where(pts, i)}); the intensity "
                "grid must cover the window — build it on the model's lattice."
            )
        idx[dim] = j
    return np.asarray(grid.values, dtype=float)[idx["y"], idx["x"]], idx["y"], idx["x"]


def _intensity_at(intensity: Any, pts: np.ndarray, name: str = "intensity") -> tuple[
        np.ndarray, str]:
    """``ρ(x_i)`` at every point, checked finite and > 0; and the kind of input given."""
    n = len(pts)
    cell = None
    if isinstance(intensity, xr.DataArray):
        kind = "DataArray"
        rho, *cell = _grid_values(intensity, pts, name)
    elif callable(intensity):
        kind = "callable"
        rho = np.asarray(intensity(pts.copy()), dtype=float)
        if rho.shape != (n,):
            raise ShapeMismatchError(
                f"{name}(xy) returned shape {rho.shape} for xy of shape {pts.shape}; the "
                f"callable must return one value per row, shape ({n},)."
            )
    else:
        kind = "array"
        try:
            rho = np.asarray(intensity, dtype=float)
        except (TypeError, ValueError):
            raise InvalidParameterError(
                f"{name}={intensity!r} is not understood; pass an (n,) array of ρ at the "
                "points, a callable f(xy) -> (m,), or an xarray.DataArray grid with dims "
                "('y', 'x')."
            ) from None
        if rho.shape != (n,):
            raise ShapeMismatchError(
                f"{name} has shape {rho.shape} but there are {n} points; pass ρ at each point "
                f"(shape ({n},)), a callable, or a DataArray grid"
                + (" — for a constant intensity use intensity=None (the homogeneous estimator)."
                   if rho.ndim == 0 else ".")
            )

    def where(i: int) -> str:
        on = "" if cell is None else f" (grid cell y={int(cell[0][i])}, x={int(cell[1][i])})"
        return _where(pts, i) + on

    bad = ~np.isfinite(rho)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InvalidParameterError(
            f"{name} is {float(rho[i])!r} at {where(i)} ({int(bad.sum())} non-finite "
            "value(s)); the intensity must be finite at every point — fix the model or the grid "
            "there (e.g. covariates missing in that cell)."
        )
    bad = rho <= 0
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InvalidParameterError(
            f"{name} is {float(rho[i])!r} at {where(i)} ({int(bad.sum())} value(s) <= 0); "
            "the intensity must be > 0 wherever a point occurs — use a log-linear fit "
            "exp(intercept + X β), not a linear one, or fix the grid there."
        )
    return rho, kind


def _inhomogeneous(
    intensity: Any, pts: np.ndarray, area: float, normalise: bool
) -> tuple[np.ndarray | None, dict[str, Any]]:
    """``ρ̃(x_i)`` (renormalised if asked) and the attrs, or ``(None, homogeneous attrs)``.

    Renormalisation: ``ρ̃ = ρ / c`` with ``c = |W| / Σ_i 1/ρ(x_i)``, so that
    ``Σ_i 1/ρ̃(x_i) = |W|`` — the sample version of Campbell's ``E Σ_i 1/ρ(x_i) = |W|``
    (exact for the true ρ of any process).
    """
    if intensity is None:
        return None, {"intensity_kind": "homogeneous", "lambda2_estimator": "n(n-1)/area^2"}
    if not isinstance(normalise, bool | np.bool_):
        raise InvalidParameterError(f"normalise={normalise!r} must be True or False.")
    rho, kind = _intensity_at(intensity, pts)
    c = area / float(np.sum(1.0 / rho))
    attrs = {"intensity_kind": "inhomogeneous", "intensity_input": kind,
             "intensity_normalisation": c, "intensity_renormalised": int(bool(normalise)),
             "lambda2_estimator": ("rho(x_i) rho(x_j) / c^2, c = area / sum_i 1/rho(x_i)"
                                   if normalise else "rho(x_i) rho(x_j)")}
    return (rho / c if normalise else rho), attrs


def pcf(
    points: np.ndarray,
    window: Any,
    r: np.ndarray | None = None,
    *,
    bandwidth: float | None = None,
    correction: Literal["translation", "none"] = "translation",
    resolution: int = RESOLUTION,
    intensity: IntensityLike | None = None,
    normalise: bool = True,
) -> xr.DataArray:
    """Kernel estimate of the pair-correlation function with translation edge correction.

    ``ĝ(r) = 1/(2π r λ̂²) Σ_{i≠j} k_h(r − d_ij) / γ_W(x_i − x_j)``, with ``λ̂² = n(n−1)/|W|²``
    (Stoyan & Stoyan 1994, §15.3; Illian et al. 2008, §4.3).  ``k_h(t) = 3/(4h)(1 − t²/h²)`` on
    ``|t| ≤ h`` is the Epanechnikov kernel of *half-width* ``h``; by default
    ``h = 0.15/√λ̂`` (Stoyan & Stoyan 1994, eq. 15.16; ``λ̂ = n/|W|``, also with
    ``intensity``).  spatstat's ``pcf.ppp`` uses the same kernel and rule but states its ``bw``
    as the kernel's standard deviation ``h/√5``; we implement the ``divisor = "r"`` form.
    Under CSR ``E[ĝ(r) | n] = 1`` exactly for ``r ≥ h`` (rectangles; polygons up to the
    set-covariance error); for ``r < h`` the estimate is biased low because the kernel's mass
    below distance 0 is lost.

    **Inhomogeneous pcf** (``intensity`` given; Baddeley, Møller & Waagepetersen 2000,
    Statistica Neerlandica 54, 329–350).  Each ordered pair is weighted by
    ``1/(ρ(x_i) ρ(x_j))`` in place of ``1/λ̂²``, with the same translation weights — the
    Horvitz–Thompson form

        ĝ(r) = Σ_{i≠j} k_h(r − d_ij) / (2π r ρ_i ρ_j γ_W(x_i − x_j)),

    which is unbiased for ``r ≥ h`` (rectangles exactly, polygons up to the set-covariance
    bound) when ρ is the true intensity, by Campbell's theorem for the second-order product
    density ``ρ(u) ρ(v) g(u − v)``.  For an LGCP with ``log λ = μ + Xβ + f`` (f stationary),
    ``ρ(s) = exp(μ + x(s)ᵀβ + sd²/2)`` and the inhomogeneous g is still ``exp(C(r))``
    (Møller, Syversveen & Waagepetersen 1998; Waagepetersen 2007, Biometrics 63, 252–258), so
    :func:`lgcp_pcf` is its model curve.

    ``normalise=True`` (default) first rescales ρ to ``ρ̃ = ρ/c`` with
    ``c = |W| / Σ_i 1/ρ(x_i)``, so that ``Σ_i 1/ρ̃(x_i) = |W|`` — the sample version of
    ``E Σ_i 1/ρ(x_i) = |W|``, which holds exactly for the true ρ of any point process
    (spatstat's ``renormalise=TRUE`` with ``normpower=2``; its default ``normpower=1`` applies
    ``c`` once, not ``c²``).  Why: an intensity estimated by a Poisson GLM has the right shape,
    but its overall level carries the sampling error of the realised pattern, and ĝ scales with
    the *square* of that level; after the rescaling the estimate depends on the shape of ρ
    only (ρ and aρ give the same ĝ) and the level comes from the data, as ``n(n−1)/|W|²`` does
    in the homogeneous case (a wrong unit, per km² against per m², is then harmless too).  The
    price is the homogeneous estimator's: for a clustered process the data-based level includes
    the realised field, so ĝ is low by about ``ḡ_W = ∫∫_{W²} g(u − v) du dv / |W|²`` (see
    :func:`min_contrast_lgcp`).  With ``normalise=False`` and the true ρ the estimate is
    unbiased but far more variable.  With a constant ρ (any value) and ``normalise=True`` the
    result is the homogeneous estimate times ``(n − 1)/n`` exactly (``n²`` in place of
    ``n(n − 1)`` in the denominator).

    ``intensity`` may be

    * an ndarray of shape ``(n,)``: ρ at each point;
    * a callable ``f(xy) -> (m,)`` taking an ``(m, 2)`` array of ``(x, y)`` points (called
      once, with all ``n`` points);
    * an ``xarray.DataArray`` with dims ``("y", "x")`` (either order) and 1-D, evenly spaced
      cell-centre coordinates (ascending or descending), i.e. a lattice: each point takes the
      value of the cell containing it, with the cells of
      :func:`lattice_lgm.window.bin_points` (closed lower edges, the last cell closed at the
      top; the edges are rebuilt from the centres, so any spacing and origin work).

    Values at the points must be finite and > 0 (cells without points are not read).

    Parameters
    ----------
    points : ndarray, shape (n, 2)
        ``(x, y)`` coordinates, all in the closed window.
    window : Window, shapely Polygon/MultiPolygon, (xmin, xmax, ymin, ymax), or ``.to_shapely()``
    r : ndarray, shape (k,), optional
        Strictly increasing distances > 0.  Default: 128 values ``r_max/128, …, r_max`` with
        ``r_max`` = ¼ of the shorter bounding-box side.
    bandwidth : float, optional
        Kernel half-width ``h`` in coordinate units (default Stoyan's rule above).
    correction : {"translation", "none"}
        Translation weights ``|W|/γ_W(x_i − x_j)`` (exact for rectangles; FFT set covariance
        with a stated bound for polygons) or none (biased low; for comparison only).
    resolution : int
        Raster cells along the longer side for polygon set covariances (default 1024).
    intensity : ndarray (n,), callable or xarray.DataArray (y, x), optional
        First-order intensity ρ in points per unit area, for the inhomogeneous pcf (above).
        ``None``: the homogeneous estimator.
    normalise : bool
        Rescale ρ so that ``Σ_i 1/ρ(x_i) = |W|`` (above).  Ignored without ``intensity``.

    Returns
    -------
    xarray.DataArray, shape (k,), dim ``r``, name ``"pcf"``
        attrs: ``bandwidth``, ``kernel``, ``correction``, ``n``, ``intensity`` (``λ̂ = n/|W|``,
        the mean intensity, in both cases), ``area``, ``intensity_kind`` (``"homogeneous"`` or
        ``"inhomogeneous"``), ``lambda2_estimator`` and, for polygons, the set-covariance
        error bound.  Inhomogeneous only: ``intensity_input`` (``"array"``, ``"callable"`` or
        ``"DataArray"``), ``intensity_normalisation`` (``c``, computed in either case; ≈ 1
        when ρ's level matches the data) and ``intensity_renormalised`` (1 if ρ was divided by
        ``c``, else 0).

    Raises
    ------
    ShapeMismatchError
        ``intensity`` of the wrong shape (or a callable returning one), a DataArray whose dims
        are not ``("y", "x")``.
    InvalidParameterError
        ``intensity`` non-finite or ≤ 0 at a point (the first such point named), a grid that
        is not a regular lattice or does not cover the points.
    """
    pts, win, n = _prepare(points, window, correction)
    rr = _r_grid(r, win, positive=True)
    lam = n / win.area
    h = (STOYAN_COEFFICIENT / math.sqrt(lam) if bandwidth is None
         else positive_float("bandwidth", bandwidth, "the kernel half-width, a length > 0"))
    resolution = positive_int("resolution", resolution, "e.g. 1024 cells")
    rho, inhom = _inhomogeneous(intensity, pts, win.area, normalise)
    d, w, ij, info = _pairs(pts, win, float(rr[-1] + h), correction, resolution)
    if rho is not None:
        w = w / (rho[ij[:, 0]] * rho[ij[:, 1]])
    order = np.argsort(d)
    d, w = d[order], w[order]
    lo = np.searchsorted(d, rr - h, side="left")
    hi = np.searchsorted(d, rr + h, side="right")
    s = np.empty(len(rr))
    for k, (a, b) in enumerate(zip(lo, hi, strict=True)):
        t = (rr[k] - d[a:b]) / h
        s[k] = np.sum(w[a:b] * (1.0 - t * t))
    s *= 0.75 / h
    # Σ over ordered pairs = 2 Σ_{i<j}; inhomogeneous: the 1/(ρ_i ρ_j) are in the weights
    lam2 = _lambda2(n, win.area) if rho is None else 1.0
    g = 2.0 * s / (2.0 * math.pi * rr * lam2)
    attrs = {"bandwidth": h, "kernel": "epanechnikov (half-width = bandwidth)",
             "bandwidth_rule": "stoyan 0.15/sqrt(intensity)" if bandwidth is None else "user",
             "correction": correction, "n": n, "intensity": lam, "area": win.area,
             **inhom, **info}
    return xr.DataArray(g, dims=("r",), coords={"r": rr}, name="pcf", attrs=attrs)


def kfunction(
    points: np.ndarray,
    window: Any,
    r: np.ndarray | None = None,
    *,
    correction: Literal["translation", "none"] = "translation",
    resolution: int = RESOLUTION,
    intensity: IntensityLike | None = None,
    normalise: bool = True,
) -> xr.DataArray:
    """Ripley's K with translation edge correction.

    ``K̂(r) = 1/λ̂² Σ_{i≠j} 1(d_ij ≤ r) / γ_W(x_i − x_j)``, ``λ̂² = n(n−1)/|W|²`` (Ohser &
    Stoyan 1981; Illian et al. 2008, §4.3).  Under CSR ``E[K̂(r) | n] = π r²`` exactly
    (rectangles; polygons up to the set-covariance error bound of :func:`pcf`).

    With ``intensity``, the inhomogeneous K of Baddeley, Møller & Waagepetersen (2000) with
    translation weights, ``K̂(r) = Σ_{i≠j} 1(d_ij ≤ r) / (ρ_i ρ_j γ_W(x_i − x_j))``:
    unbiased for the true ρ, ``π r²`` in expectation for an inhomogeneous Poisson process and
    :func:`lgcp_k` for an LGCP with covariates.  ``intensity`` and ``normalise`` are as in
    :func:`pcf` (the same accepted forms, the same renormalisation and its reasons); with a
    constant ρ and ``normalise=True`` the result is the homogeneous K̂ times ``(n − 1)/n``.

    Parameters
    ----------
    points : ndarray, shape (n, 2)
    window : Window, shapely Polygon/MultiPolygon, (xmin, xmax, ymin, ymax), or ``.to_shapely()``
    r : ndarray, shape (k,), optional
        Strictly increasing distances ≥ 0 (default as in :func:`pcf`).
    correction : {"translation", "none"}
    resolution : int
        Raster resolution for polygon windows (see :func:`pcf`).
    intensity : ndarray (n,), callable or xarray.DataArray (y, x), optional
        First-order intensity ρ (see :func:`pcf`).  ``None``: the homogeneous estimator.
    normalise : bool
        Rescale ρ so that ``Σ_i 1/ρ(x_i) = |W|`` (see :func:`pcf`).

    Returns
    -------
    xarray.DataArray, shape (k,), dim ``r``, name ``"K"``
        attrs as in :func:`pcf` (without the kernel entries).

    Raises
    ------
    ShapeMismatchError, InvalidParameterError
        A bad ``intensity``, as in :func:`pcf`.
    """
    pts, win, n = _prepare(points, window, correction)
    rr = _r_grid(r, win, positive=False)
    resolution = positive_int("resolution", resolution, "e.g. 1024 cells")
    rho, inhom = _inhomogeneous(intensity, pts, win.area, normalise)
    d, w, ij, info = _pairs(pts, win, float(rr[-1]), correction, resolution)
    if rho is not None:
        w = w / (rho[ij[:, 0]] * rho[ij[:, 1]])
    order = np.argsort(d)
    cw = np.concatenate([[0.0], np.cumsum(w[order])])
    lam2 = _lambda2(n, win.area) if rho is None else 1.0
    k = 2.0 * cw[np.searchsorted(d[order], rr, side="right")] / lam2
    attrs = {"correction": correction, "n": n, "intensity": n / win.area, "area": win.area,
             **inhom, **info}
    return xr.DataArray(k, dims=("r",), coords={"r": rr}, name="K", attrs=attrs)


def lfunction(
    points: np.ndarray,
    window: Any,
    r: np.ndarray | None = None,
    *,
    centred: bool = False,
    correction: Literal["translation", "none"] = "translation",
    resolution: int = RESOLUTION,
    intensity: IntensityLike | None = None,
    normalise: bool = True,
) -> xr.DataArray:
    """Besag's ``L(r) = √(K̂(r)/π)`` (``L(r) = r`` under CSR), or ``L(r) − r`` if ``centred``.

    Parameters
    ----------
    points, window, r, correction, resolution
        As in :func:`kfunction`.
    centred : bool
        Return ``L(r) − r`` (name ``"L_minus_r"``) instead of ``L(r)`` (name ``"L"``).
    intensity, normalise
        As in :func:`kfunction`: the inhomogeneous L from the inhomogeneous K.

    Returns
    -------
    xarray.DataArray, shape (k,), dim ``r``
    """
    k = kfunction(points, window, r, correction=correction, resolution=resolution,
                  intensity=intensity, normalise=normalise)
    lv = np.sqrt(k / math.pi)
    if centred:
        lv = lv - k["r"]
    lv.name = "L_minus_r" if centred else "L"
    lv.attrs = dict(k.attrs)
    return lv


