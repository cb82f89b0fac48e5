"""Model criticism of an LGCP.

Prior and posterior predictive patterns, the second-order check against global envelopes,
smoothed residual maps.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr

from ..covariance import Matern
from ..errors import InvalidParameterError, UnsupportedOperationError
from ..spatialstats import global_envelope, lfunction, lgcp_pcf, pcf
from ._core import _reported, intensity, measure_unit


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
             for k in model.lgm.hyper_names}
    f = np.empty((n, *lat.shape))
    for i in range(n):
        theta = {k: draws[k][i] for k in ("sd", "range")}
        prior = model.lgm.prior_for(theta, model.prior)
        f[i] = prior.sample(rng, 1)[0]  # exact draws on the window (every backend)
    data = {"f": (("chain", "draw", *lat.dims), f[None])}
    as_coef = getattr(model, "hyper_coefficients", {})
    coords: dict[str, Any] = {"chain": [0], "draw": np.arange(n), **lat.coords()}
    coef = np.zeros((n, 0))
    if model.coef_names:
        sds = np.asarray(model.lgm.beta_sd)
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
