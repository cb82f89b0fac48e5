"""Post-hoc analysis of LGCP draws with xarray: intensity, relative risk, exceedance, totals.

The draws are an ArviZ-layout ``posterior`` :class:`xarray.Dataset` with dims ``(chain, draw)``
first: ``f`` on the lattice (``chain, draw, *lattice.dims``), the hyperparameters ``sd``,
``range`` and ``intercept``, and ``beta`` (``chain, draw, covariate``) when the model has
covariates — the intercept and coefficients on the covariates' original scale, whatever the
sampler's parametrisation (standardised columns, intercept as hyperparameter or in the
block).  :func:`posterior_dataset` builds it from sampler states; a run's store holds the
same layout.

Conventions (DESIGN §9):

- **intensity** ``λ(s) = exp(intercept + X(s)β + f(s) + offset)`` in points per unit area of the
  lattice's coordinate units (per m² for metres); ``per="ha"``/``"km2"``/``"m2"`` converts when
  the units are known.  Cells outside the window are NaN (λ is not defined there).
- **relative risk** ``RR(s) = exp(f(s) − sd²/2)``: the field's multiplicative effect, with prior
  mean 1 at every cell (``E exp(f) = exp(sd²/2)``); the baseline is named in the attrs.
- **exceedance** ``P(RR(s) > c | data)`` for thresholds ``c`` (default 1.5, 2, 3).
- **expected counts** ``Λ(B) = Σ_c λ_c |c ∩ B|`` for any region ``B`` (default the window),
  per draw, compared with the observed number of points.
- A **resolution check** warns when the posterior range is under :data:`MIN_CELLS_PER_RANGE`
  cells: the field varies within cells and the lattice is too coarse.
- **Model criticism**: prior and posterior predictive point patterns
  (:func:`predictive_patterns`), the pair-correlation function or ``L(r) − r`` of the data
  against a global envelope of predictive patterns with the LGCP's analytic ``exp(C_θ(r))`` per
  posterior draw (:func:`second_order_check`), and smoothed residual maps
  (:func:`residual_map`).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import xarray as xr

from .errors import InvalidParameterError, UnsupportedOperationError
from .settings import DEFAULT_THRESHOLDS

__all__ = [
    "DEFAULT_THRESHOLDS",
    "MIN_CELLS_PER_RANGE",
    "exceedance",
    "expected_counts",
    "intensity",
    "log_intensity",
    "measure_unit",
    "posterior_dataset",
    "predictive_patterns",
    "prior_dataset",
    "relative_risk",
    "residual_map",
    "resolution_check",
    "second_order_check",
    "summarize",
    "summary",
]

#: default relative-risk thresholds of :func:`exceedance`
#: the posterior range should span at least this many cells (else the grid is too coarse)
MIN_CELLS_PER_RANGE = 5.0
#: area of one target unit in square metres
_AREA_M2 = {"m2": 1.0, "ha": 1e4, "km2": 1e6}
#: lattice length units in metres
_LENGTH_M = {"m": 1.0, "metre": 1.0, "meter": 1.0, "metres": 1.0, "meters": 1.0, "km": 1e3,
             "kilometre": 1e3, "kilometer": 1e3}


def measure_unit(lattice: Any, time_units: str | None = None) -> str:
    """The unit of the exposure: ``u``, ``u²`` or ``u²·time`` (1-D, 2-D, space-time).

    ``u`` is the coordinate units; in space-time the exposure is area × time step and
    ``time_units`` names the time axis' unit.
    """
    u = lattice.units or "unit"
    if lattice.ndim == 3:
        return f"{u}²·{time_units or 'time unit'}"
    return u if lattice.ndim == 1 else f"{u}²"


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
    from .window import Window

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
    lat = model.lattice
    spatial = lat.spacing[1:] if lat.ndim == 3 else lat.spacing
    checks = [("range", "h", float(max(spatial)), "cells", "a smaller cell_size")]
    if lat.ndim == 3 and "range_t" in posterior:
        checks.append(("range_t", "h_t", float(lat.spacing[0]), "time steps",
                       "a finer time step"))
    out: dict[str, float] = {}
    for name, hname, h, what, remedy in checks:
        r = float(posterior[name].median())
        n_per = "cells_per_range" if name == "range" else "steps_per_range_t"
        out.update({hname: h, f"{name}_median": r, n_per: r / h, f"{hname}_over_{name}": h / r})
        if r / h < MIN_CELLS_PER_RANGE:
            warnings.warn(
                f"the posterior median {name} {r:.4g} spans only {r / h:.2g} {what} of size "
                f"{h:g} (< {MIN_CELLS_PER_RANGE:g}): the field varies within cells and the grid "
                f"is too coarse; refit with {remedy}.",
                stacklevel=2)
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


# -- model criticism ------------------------------------------------------------------------------
def prior_dataset(model: Any, n: int, rng: np.random.Generator) -> xr.Dataset:
    """``n`` draws from the prior (hyperparameters, field, coefficients) in posterior layout.

    Parameters
    ----------
    model : LGCP
    n : int
        Number of draws (one chain).
    rng : numpy.random.Generator

    Returns
    -------
    xarray.Dataset with the variables of :func:`posterior_dataset` (chain = 0).
    """
    lat = model.lattice
    hp = model.prior_spec
    draws = {k: np.array([float(hp[k].sample(rng)) for _ in range(n)])
             for k in model.model.hyper_names}
    f = np.empty((n, *lat.shape))
    for i in range(n):
        theta = {k: draws[k][i] for k in ("sd", "range")}
        prior = model.model.prior_for(theta, model.prior)
        f[i] = prior.sample(rng, 1)[0]  # exact draws on the window (every backend)
    data = {"f": (("chain", "draw", *lat.dims), f[None])}
    as_coef = getattr(model, "hyper_coefficients", {})
    coords: dict[str, Any] = {"chain": [0], "draw": np.arange(n), **lat.coords()}
    coef = np.zeros((n, 0))
    if model.coef_names:
        sds = np.asarray(model.model.beta_sd)
        block = iter((sds * rng.standard_normal((n, len(sds)))).T)
        coef = np.stack([draws[as_coef[c]] if c in as_coef else next(block)
                         for c in model.coef_names], axis=1)
    data.update(_reported(model, {k: v[None] for k, v in draws.items()}, coef[None]))
    if model.covariate_names:
        coords["covariate"] = list(model.covariate_names)
    return xr.Dataset(data, coords=coords, attrs={"units": lat.units or "", "source": "prior"})


def predictive_patterns(model: Any, posterior: xr.Dataset, n: int, rng: np.random.Generator,
                        ) -> list[np.ndarray]:
    """Point patterns simulated from the model at ``n`` draws (posterior or prior predictive).

    For each of ``n`` draws picked uniformly (without replacement when possible) from
    ``posterior``: counts ``~ Poisson(λ_c |c ∩ W|)`` per cell, then points uniform in
    ``c ∩ W`` (uniform in the cell, rejecting points outside the window, for cells the
    boundary crosses).  Pass :func:`prior_dataset` for prior predictive patterns.

    Returns
    -------
    list of ndarray, each (k, 2) in (x, y) order
    """
    lam = intensity(model, posterior).stack(sample=("chain", "draw"))
    total = lam.sizes["sample"]
    pick = rng.choice(total, size=n, replace=n > total)
    lat = model.lattice
    h = np.asarray(lat.spacing)
    lo = np.asarray(lat.origin)
    full = model.exposure >= lat.cell_volume * (1 - 1e-12)
    out = []
    for s in pick:
        lam_s = np.nan_to_num(lam.isel(sample=int(s)).transpose(*lat.dims).values)
        counts = rng.poisson(lam_s * model.exposure)
        pts = []
        for cell in zip(*np.nonzero(counts), strict=True):
            k = int(counts[cell])
            corner = lo + np.asarray(cell) * h
            got = np.empty((0, lat.ndim))
            while len(got) < k:  # rejection inside the window (only boundary cells loop)
                u = corner + rng.random((max(2 * (k - len(got)), 4), lat.ndim)) * h
                xy = u[:, ::-1]  # lattice (y, x) order -> (x, y)
                inside = model.window.contains(xy[:, :2] if lat.ndim == 3 else xy)
                keep = u if full[cell] else u[inside]
                got = np.concatenate([got, keep])
            pts.append(got[:k, ::-1])
        out.append(np.concatenate(pts) if pts else np.empty((0, lat.ndim)))
    return out


def second_order_check(model: Any, posterior: xr.Dataset, *, nsim: int = 99,
                       rng: np.random.Generator, stat: str = "pcf", r: np.ndarray | None = None,
                       alpha: float = 0.05, n_theory: int = 50) -> dict[str, Any]:
    """The data's pcf (or ``L(r) − r``) against posterior predictive patterns.

    Parameters
    ----------
    model : LGCP
    posterior : xarray.Dataset
    nsim : int
        Predictive patterns for the envelope (``nsim + 1 ≥ 1/alpha``).
    rng : numpy.random.Generator
    stat : {"pcf", "L"}
        Pair-correlation function, or the centred ``L(r) − r`` (translation corrected).
    r : ndarray, optional
        Distances (default: the estimator's grid for the window).
    alpha : float
        Level of the global MAD envelope (Myllymäki et al. 2017).
    n_theory : int
        Posterior draws whose analytic LGCP pcf ``exp(C_θ(r))`` is returned (stat ``"pcf"``).

    Returns
    -------
    dict
        ``observed`` (DataArray over r), ``envelope`` (:class:`~lattice_lgm.spatialstats.
        Envelope`), ``theory`` (DataArray (draw, r) or None).  With covariates the empirical
        pcf here is the homogeneous one, so covariate-driven clustering appears in it too; the
        envelope (simulated from the fitted model, covariates included) accounts for that.
    """
    from .covariance import Matern
    from .spatialstats import global_envelope, lfunction, lgcp_pcf, pcf

    if stat not in ("pcf", "L"):
        raise InvalidParameterError(f"stat={stat!r} must be 'pcf' or 'L'.")
    if model.lattice.ndim != 2:
        raise UnsupportedOperationError(
            f"second_order_check compares planar pcf / L functions; this LGCP is "
            f"{model.lattice.ndim}-D. For space-time data check each time slice's pattern "
            "(model.points[:, :2] within a slice) as a 2-D LGCP.")
    geom = model.window.to_shapely()

    def curve(pts: np.ndarray, rr: np.ndarray | None) -> xr.DataArray:
        if stat == "pcf":
            return pcf(pts, geom, r=rr)
        return lfunction(pts, geom, r=rr, centred=True)

    observed = curve(model.points, r)
    rr = observed["r"].values
    sims = [curve(p, rr).values for p in predictive_patterns(model, posterior, nsim, rng)
            if len(p) >= 2]
    env = global_envelope(observed.values, np.array(sims), alpha=alpha, r=rr)
    theory = None
    if stat == "pcf":
        flat = posterior[["sd", "range"]].stack(sample=("chain", "draw"))
        pick = rng.choice(flat.sizes["sample"], size=min(n_theory, flat.sizes["sample"]),
                          replace=False)
        rows = [lgcp_pcf(rr, Matern(model.nu, sd=float(flat["sd"][i]),
                                    range=float(flat["range"][i]))) for i in pick]
        theory = xr.DataArray(np.array(rows), dims=("draw", "r"), coords={"r": rr},
                              name="lgcp_pcf")
    return {"observed": observed, "envelope": env, "theory": theory}


def residual_map(model: Any, posterior: xr.Dataset, *, bandwidth: float) -> xr.DataArray:
    """Kernel-smoothed raw residuals ``(y − E[λ]·|c ∩ W|)``, per unit area, edge corrected.

    The residual measure of Baddeley, Turner, Møller & Hazelton (2005, *JRSS B* 67, 617–666)
    on the lattice: observed counts minus posterior mean expected counts, smoothed with a
    Gaussian kernel of sd ``bandwidth`` (coordinate units) and divided by the smoothed exposure
    (the edge correction of Diggle 1985), so the map reads as points per unit area more (red)
    or fewer (blue) than the fit expects.

    Returns
    -------
    xarray.DataArray, dims lattice.dims (NaN outside the window)
    """
    from scipy.ndimage import gaussian_filter

    b = float(bandwidth)
    if not (np.isfinite(b) and b > 0):
        raise InvalidParameterError(f"bandwidth={bandwidth!r} must be a length > 0 in "
                                    "coordinate units (e.g. the posterior range / 2).")
    lat = model.lattice
    mean_lam = intensity(model, posterior).mean(("chain", "draw")).transpose(*lat.dims).values
    resid = np.where(model.inside, model.counts - np.nan_to_num(mean_lam) * model.exposure, 0.0)
    sig = [b / h for h in lat.spacing]
    num = gaussian_filter(resid, sig, mode="constant")
    den = gaussian_filter(model.exposure, sig, mode="constant")
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(model.inside & (den > 0), num / den, np.nan)
    return xr.DataArray(out, dims=lat.dims, coords=lat.coords(), name="residual",
                        attrs={"long_name": "smoothed residual",
                               "units": f"points per {measure_unit(lat)}",
                               "bandwidth": b})


#: the convergence rule of :func:`summary` (Vehtari, Gelman, Simpson, Carpenter & Bürkner 2021:
#: rank-normalised split R-hat ≤ 1.01, bulk and tail ESS > 100 per chain for 4 chains)
RHAT_MAX, ESS_MIN = 1.01, 400


def summary(model: Any, posterior: xr.Dataset, *, bound_fraction: float = 0.9,
            loglik: np.ndarray | None = None) -> Any:
    """Hyperparameters and coefficients: posterior, diagnostics and the cross-check beside.

    Rows: ``sd``, ``range``, ``intercept`` and each coefficient on the covariates' original
    scale, and ``log_likelihood`` when ``loglik`` is given.  Columns: posterior mean, sd, 2.5 %
    and 97.5 % quantiles, rank-normalised R-hat, bulk and tail ESS (ArviZ), and the
    frequentist cross-check (minimum contrast for sd and range, the Poisson GLM for the
    intercept and coefficients — the GLM intercept is the log mean intensity, so it is
    compared with ``intercept + sd²/2``).

    ``attrs["converged"]`` is True when every row has R-hat ≤ :data:`RHAT_MAX` and bulk and
    tail ESS ≥ :data:`ESS_MIN` (Vehtari et al. 2021's rule for 4 chains); ``attrs["notes"]``
    lists what fails ("not converged, run longer"), a range posterior pressing on its upper
    bound, a grid too coarse for the posterior range.

    Parameters
    ----------
    model : LGCP
    posterior : xarray.Dataset
        ArviZ-layout posterior, dims ``(chain, draw, ...)``.
    bound_fraction : float
        A range draw above this fraction of its prior's upper bound counts as pressing on it.
    loglik : ndarray, shape (chain, draw), optional
        The log-likelihood of every draw (the run's ``sample_stats.loglik``).

    Returns
    -------
    pandas.DataFrame
    """
    import arviz as az
    import pandas as pd

    _require(posterior, "sd", "range")
    rows: dict[str, np.ndarray] = {"sd": posterior["sd"].values,
                                   "range": posterior["range"].values}
    if "range_t" in posterior:
        rows["range_t"] = posterior["range_t"].values
    _require(posterior, "intercept")
    rows["intercept"] = posterior["intercept"].values
    names = list(model.covariate_names)
    if names:
        _require(posterior, "beta")
        for n in names:
            rows[n] = posterior["beta"].sel(covariate=n).values
    check: dict[str, float] = {}
    if model.min_contrast is not None:
        check.update(sd=model.min_contrast.sd, range=model.min_contrast.range)
    if model.glm is not None:
        g = model.glm
        if model.design is not None:
            gb, gi = model.design.to_original(np.asarray(g.coef), g.intercept)
            check.update({n: float(v) for n, v in zip(names, gb, strict=True)})
        else:
            gi = g.intercept
        sd_hat = check.get("sd", float(np.median(rows["sd"])))
        check["intercept"] = float(gi) - sd_hat**2 / 2
    if loglik is not None:
        rows["log_likelihood"] = np.asarray(loglik, dtype=float)
    table = []
    for name, x in rows.items():
        x = np.asarray(x, dtype=float)
        q = np.quantile(x, [0.025, 0.975])
        varies = bool(np.ptp(x) > 0)  # a constant row has no R-hat or ESS (ArviZ divides 0/0)
        rhat = float(az.rhat(x, method="rank")) if x.shape[0] > 1 and varies else float("nan")
        ess = float(az.ess(x, method="bulk")) if varies else float("nan")
        tail = float(az.ess(x, method="tail")) if varies else float("nan")
        table.append({"name": name, "mean": x.mean(), "sd": x.std(ddof=1), "2.5%": q[0],
                      "97.5%": q[1], "r_hat": rhat, "ess_bulk": ess, "ess_tail": tail,
                      "cross_check": check.get(name, float("nan"))})
    df = pd.DataFrame(table).set_index("name")
    notes = []
    bad = df.index[~(df["r_hat"] <= RHAT_MAX)].tolist()
    few = df.index[~((df["ess_bulk"] >= ESS_MIN) & (df["ess_tail"] >= ESS_MIN))].tolist()
    if bad:
        notes.append(f"not converged, run longer: R-hat > {RHAT_MAX:g} for {', '.join(bad)}")
    if few:
        notes.append(f"too few effective draws, run longer: bulk or tail ESS < {ESS_MIN} for "
                     f"{', '.join(few)}")
    df.attrs["converged"] = not bad and not few
    for name in ("range", "range_t"):
        upper = model.prior_spec[name].upper if name in rows else np.inf
        if np.isfinite(upper):
            frac = float((rows[name] > bound_fraction * upper).mean())
            if frac > 0.1:
                notes.append(f"the {name} posterior presses on its upper bound {upper:g}: "
                             f"{100 * frac:.0f}% of draws above {bound_fraction:g}× the bound; "
                             f"raise the {name} prior's upper bound (the torus grows with it)")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        resolution_check(model, posterior)
    notes += [str(w.message) for w in caught]
    df.attrs["notes"] = notes
    return df
