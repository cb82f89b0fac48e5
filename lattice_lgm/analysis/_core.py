"""The posterior of an LGCP as xarray.

Its Dataset, intensity, relative risk, exceedance, counts, the resolution check and summaries
of any draws.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from ..errors import InvalidParameterError
from ..lattice import _AREA_M2, _LENGTH_M, measure_unit
from ..models.lgcp_start import resolution_cells
from ..settings import DEFAULT_THRESHOLDS
from ..window import Window

#: default relative-risk thresholds of :func:`exceedance`
#: the posterior range should span at least this many cells (else the grid is too coarse)
MIN_CELLS_PER_RANGE = 5.0
def _unit(model: Any) -> str:
    return measure_unit(model.lattice, getattr(model, "time_units", None))


def posterior_dataset(model: Any, states: Sequence[Any]) -> xr.Dataset:
    """Stack sampler states (one per kept sweep) into an ArviZ-layout posterior Dataset.

    Parameters
    ----------
    model : LGCP
    states : sequence of LatentState
        Successive states of the same chains (e.g. after each Gibbs sweep).

    Returns
    -------
    xarray.Dataset
        ``f`` (chain, draw, *dims) on the lattice (window cells of the prior's state),
        ``sd``, ``range``, ``intercept`` (chain, draw), ``beta`` (chain, draw, covariate) on the
        covariates' original scale if any,
        and ``loglik`` (chain, draw).
    """
    if not states:
        raise InvalidParameterError("states is empty; pass the states of at least one sweep.")
    lat = model.lattice
    idx = model.prior.window_index()
    chains = list(states[0].chains)
    n, d = len(chains), len(states)
    f = np.empty((n, d, *lat.shape))
    for k, s in enumerate(states):
        if list(s.chains) != chains:
            raise InvalidParameterError(
                f"state {k} holds chains {list(s.chains)}, state 0 holds {chains}; stack states "
                "of the same chains.")
        f[:, k] = s.f.reshape(n, -1)[:, idx].reshape(n, *lat.shape)
    cd = {"chain": chains, "draw": np.arange(d)}
    data = {"f": (("chain", "draw", *lat.dims), f)}
    theta = {k: np.stack([s.theta[k] for s in states], axis=1) for k in states[0].theta}
    coef = np.stack([model.coefficient_draws(s) for s in states], axis=1)
    data.update(_reported(model, theta, coef))
    data["loglik"] = (("chain", "draw"), np.stack([s.loglik for s in states], axis=1))
    if model.covariate_names:
        cd["covariate"] = list(model.covariate_names)
    coords = {**cd, **{k: v for k, v in lat.coords().items()}}
    return xr.Dataset(data, coords=coords,
                      attrs={"units": lat.units or "", "backend": model.backend})


def _reported(model: Any, theta: dict[str, np.ndarray], coef: np.ndarray,
              ) -> dict[str, tuple[tuple[str, ...], np.ndarray]]:
    """:meth:`LGCP.reported_draws` with the posterior's dims."""
    return {k: (("chain", "draw", "covariate") if k == "beta" else ("chain", "draw"), v)
            for k, v in model.reported_draws(theta, coef).items()}


def _require(posterior: xr.Dataset, *names: str) -> None:
    missing = [n for n in names if n not in posterior]
    if missing:
        raise InvalidParameterError(
            f"posterior lacks {missing}; it has {sorted(posterior.data_vars)}. Pass the "
            "'posterior' group of a run (see posterior_dataset).")


def log_intensity(model: Any, posterior: xr.Dataset) -> xr.DataArray:
    """``log λ = intercept + Xβ + f + offset`` per draw; NaN outside the window.

    Returns
    -------
    xarray.DataArray, dims (chain, draw, *lattice.dims)
    """
    _require(posterior, "f", "intercept")
    f = posterior["f"]
    beta = None
    if model.covariate_names:
        _require(posterior, "beta")
        beta = posterior["beta"].sel(covariate=list(model.covariate_names)).values
    eta = xr.DataArray(model.log_intensity_values(f.values, posterior["intercept"].values, beta),
                       dims=f.dims, coords=f.coords)
    return eta.rename("log_intensity").assign_attrs(
        long_name="log intensity", units=f"log(points per {_unit(model)})")


def _per_factor(lattice: Any, per: str | None, unit: str) -> tuple[float, str]:
    units = lattice.units
    if per is None:
        return 1.0, f"points per {unit}"
    if lattice.ndim != 2:
        raise InvalidParameterError(
            f"per={per!r} converts areas; this lattice is {lattice.ndim}-D (intensity per "
            f"{unit}): leave per=None.")
    if per not in _AREA_M2:
        raise InvalidParameterError(f"per={per!r} is not one of {sorted(_AREA_M2)} (or None).")
    key = (units or "").strip().lower()
    if key not in _LENGTH_M:
        raise InvalidParameterError(
            f"per={per!r} needs lattice units in metres or kilometres, but they are {units!r}; "
            "set Lattice(units='m') or leave per=None (per unit²).")
    # points per unit² × (unit² per target area)
    return _AREA_M2[per] / _LENGTH_M[key] ** 2, f"points per {per.replace('2', '²')}"


def intensity(model: Any, posterior: xr.Dataset, *, per: str | None = None) -> xr.DataArray:
    """Intensity ``λ = exp(log λ)`` per draw in stated units.

    Parameters
    ----------
    model : LGCP
    posterior : xarray.Dataset
    per : {None, "m2", "ha", "km2"}
        Report per this area (needs lattice units ``"m"`` or ``"km"``); None: per unit².

    Returns
    -------
    xarray.DataArray, dims (chain, draw, *lattice.dims)
    """
    factor, label = _per_factor(model.lattice, per, _unit(model))
    lam = np.exp(log_intensity(model, posterior)) * factor
    return lam.rename("intensity").assign_attrs(long_name="intensity", units=label)


def relative_risk(posterior: xr.Dataset) -> xr.DataArray:
    """``RR = exp(f − sd²/2)`` per draw (prior mean 1 everywhere).

    Returns
    -------
    xarray.DataArray, dims (chain, draw, *lattice.dims)
    """
    _require(posterior, "f", "sd")
    rr = np.exp(posterior["f"] - 0.5 * posterior["sd"] ** 2)
    return rr.rename("relative_risk").assign_attrs(
        long_name="relative risk", units="1",
        baseline="exp(f - sd^2/2): the field's effect relative to its prior mean "
                 "(intercept and covariates excluded)")


def exceedance(rr: xr.DataArray, thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
               ) -> xr.DataArray:
    """``P(RR > c | data)`` per cell for each threshold ``c``.

    Parameters
    ----------
    rr : xarray.DataArray, dims (chain, draw, ...)
    thresholds : sequence of float > 0

    Returns
    -------
    xarray.DataArray, dims (threshold, ...)
    """
    c = np.asarray(thresholds, dtype=float)
    if c.ndim != 1 or c.size == 0 or not np.all(np.isfinite(c)) or np.any(c <= 0):
        raise InvalidParameterError(
            f"thresholds={thresholds!r} must be a non-empty list of finite numbers > 0 "
            "(relative-risk levels, e.g. (1.5, 2, 3)).")
    th = xr.DataArray(c, dims="threshold", coords={"threshold": c})
    p = (rr > th).mean(("chain", "draw")).where(rr.notnull().all(("chain", "draw")))
    return p.transpose("threshold", ...).rename("exceedance").assign_attrs(
        long_name="P(RR > threshold | data)", units="1")


def expected_counts(model: Any, posterior: xr.Dataset, region: Any = None) -> xr.DataArray:
    """Posterior expected number of points in a region, ``Σ_c λ_c |c ∩ B|``, per draw.

    Parameters
    ----------
    model : LGCP
    posterior : xarray.Dataset
    region : Window, shapely geometry or (xmin, xmax, ymin, ymax), optional
        Default: the window (compare with ``model.n_points``).  Parts of ``B`` outside the
        window contribute nothing (the intensity is not defined there) and a warning says so.

    Returns
    -------
    xarray.DataArray, dims (chain, draw)
    """
    lam = intensity(model, posterior)
    if region is None:
        area = model.exposure
    else:
        win = Window.coerce(region, model.lattice)
        # |c ∩ B ∩ W|: only the part of the region inside the window has an intensity
        both = win.to_shapely().intersection(model.window.to_shapely())
        area = (np.zeros(model.lattice.shape) if both.is_empty or both.area == 0
                else Window.from_geometry(both).exposure(model.lattice))
        outside = win.area - float(area.sum())
        if outside > 1e-9 * win.area:
            warnings.warn(
                f"region: {outside:.4g} of its {win.area:.4g} area units lies outside the "
                "window and contributes nothing to the expected count.", stacklevel=2)
    a = xr.DataArray(np.where(model.inside, area, 0.0), dims=model.lattice.dims)
    tot = (lam.fillna(0.0) * a).sum(model.lattice.dims)
    return tot.rename("expected_count").assign_attrs(long_name="expected number of points",
                                                     units="points")


def resolution_check(model: Any, posterior: xr.Dataset) -> dict[str, float]:
    """Cells per posterior range; warns below :data:`MIN_CELLS_PER_RANGE`.

    Returns
    -------
    dict
        ``h`` (the largest spatial cell side), ``range_median``, ``cells_per_range`` and
        ``h_over_range``; in space-time also ``h_t``, ``range_t_median``,
        ``steps_per_range_t`` and ``h_t_over_range_t`` for the time axis.
    """
    _require(posterior, "range")
    return _resolution(posterior, resolution_cells(model.lattice))


def _resolution(posterior: xr.Dataset, cells: Mapping[str, float]) -> dict[str, float]:
    """:func:`resolution_check` against recorded cell sizes (``range`` and ``range_t``)."""
    out: dict[str, float] = {}
    for name, hname, what, remedy in (("range", "h", "cells", "a smaller cell_size"),
                                      ("range_t", "h_t", "time steps", "a finer time step")):
        if name not in cells or name not in posterior:
            continue
        h = float(cells[name])
        r = float(posterior[name].median())
        n_per = "cells_per_range" if name == "range" else "steps_per_range_t"
        out.update({hname: h, f"{name}_median": r, n_per: r / h, f"{hname}_over_{name}": h / r})
        if r / h < MIN_CELLS_PER_RANGE:
            warnings.warn(
                f"the posterior median {name} {r:.4g} spans only {r / h:.2g} {what} of size "
                f"{h:g} (< {MIN_CELLS_PER_RANGE:g}): the field varies within cells and the grid "
                f"is too coarse; refit with {remedy}.",
                stacklevel=3)
    return out


def summarize(da: xr.DataArray, *, quantiles: Sequence[float] = (0.025, 0.5, 0.975),
              ) -> xr.Dataset:
    """Posterior mean, sd and quantiles over (chain, draw) of a per-draw map or scalar.

    Returns
    -------
    xarray.Dataset with ``mean``, ``sd`` and ``quantiles`` (quantile, ...)
    """
    dims = ("chain", "draw")
    return xr.Dataset({
        "mean": da.mean(dims), "sd": da.std(dims, ddof=1),
        "quantiles": da.quantile(list(quantiles), dim=dims),
    }, attrs=dict(da.attrs))


