"""The lattice GPDS's predictive density at a user's points, from a run's store.

``p(x | D) = E[f(x | g) | D]`` with ``f(x | g) = π(x) Φ(g_{c(x)}) / ((1 − lost) Z[g])``
(:mod:`lattice_lgm.gpds.lattice`): the store holds each draw's ``g`` on the lattice
(``posterior.f``, or ``posterior_fields.f`` when fields are thinned) and its ``Z[g]``
(``posterior.normaliser``), so each draw gives the density at any point exactly and their
mean is the Rao–Blackwellised estimate.  Its Monte Carlo error is ArviZ's MCSE of the mean
over all chains (rank-normalised ESS: it sees the chains' disagreement, which batch means of
one chain cannot — decision 109 measured them ~3× too small on the ring).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InvalidParameterError
from .lattice import LatticeGPDS

__all__ = ["predictive_density_from_store"]

#: points per block (bounds the memory of the per-draw densities: chains · draws · block)
BLOCK = 256


def predictive_density_from_store(model: Any, tree: Any, x: Any) -> Any:
    """``E[f(x | g) | D]`` at points ``x`` with its Monte Carlo standard error.

    Parameters
    ----------
    model : LatticeGPDS
        The run's model (its base measure and lattice; the store's data digest must match).
    tree : xarray.DataTree
        The run (:func:`lattice_lgm.runs.sample`, ``lattice-lgm run``,
        :func:`lattice_lgm.store.open_store`).
    x : array_like, shape (n, d)
        Points; those outside the lattice's box get density 0.

    Returns
    -------
    xarray.Dataset
        ``density`` (point,), ``mcse`` (point,) and ``log_density`` (point,), with the
        points as ``x`` (point, coord); attrs ``n_draws``, ``mean_log_density`` (the mean
        over the points of ``log_density``: the test log probability per point of held-out
        data) and ``mean_log_density_mcse``, its Monte Carlo error by the delta method —
        the MCSE of the per-draw ``(1/n) Σ_x f(x | g)/p̂(x)``, so that the errors' correlation
        across points (one draw's ``g`` moves every density) and across draws are both
        counted; NaN when a point has density 0.
    """
    import arviz as az
    import xarray as xr

    if not isinstance(model, LatticeGPDS):
        raise InvalidParameterError(f"model={model!r} must be the run's LatticeGPDS.")
    stored = tree.attrs.get("data_sha256")
    if stored is not None and stored != model.data_hash():
        raise InvalidParameterError(
            "the store was written for other data or another lattice than model's (its "
            "data_sha256 differs); pass the model the run sampled.")
    pts = np.asarray(x, dtype=float)
    d = len(model.lattice.shape)
    if pts.ndim == 1 and d == 1:
        pts = pts[:, None]
    if pts.ndim != 2 or pts.shape[1] != d or not np.all(np.isfinite(pts)):
        raise InvalidParameterError(
            f"x (shape {pts.shape}) must be finite points of shape (n, {d}).")
    post = tree["posterior"].to_dataset()
    if "f" in post:
        g = post["f"]
    elif "posterior_fields" in tree and "f" in tree["posterior_fields"]:
        g = tree["posterior_fields"].to_dataset()["f"]
    else:
        raise InvalidParameterError(
            "this store keeps no field draws (thin_fields=0): the predictive density needs "
            "g per draw; rerun with thin_fields >= 1.")
    z = post["normaliser"].sel(draw=g["draw"]).values  # (chain, draw)
    flat = g.values.reshape(*z.shape, -1)
    dens, mcse = np.zeros(len(pts)), np.zeros(len(pts))
    lin = np.zeros(z.shape)  # Σ_x f(x | g)/p̂(x) per draw: the delta method's linearisation
    for a in range(0, len(pts), BLOCK):
        sl = slice(a, a + BLOCK)
        vals = np.exp(model.log_density_given(flat, z, pts[sl]))  # f(x | g) per draw
        dens[sl] = vals.mean(axis=(0, 1))
        with np.errstate(invalid="ignore", divide="ignore"):
            lin += (vals / dens[sl]).sum(axis=-1)  # NaN where p̂ = 0: mean log p̂ is −inf
        ds = xr.Dataset({"v": (("chain", "draw", "point"), vals)})
        flat_draws = vals.reshape(-1, vals.shape[-1])
        varies = flat_draws.max(axis=0) > flat_draws.min(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            err = az.mcse(ds, method="mean")["v"].values
        mcse[sl] = np.where(varies, err, 0.0)  # a constant (0 off the box) has no error
    with np.errstate(divide="ignore"):
        log_dens = np.log(dens)
    mean_log, mean_log_mcse = float(np.mean(log_dens)) if len(pts) else np.nan, np.nan
    if len(pts) and np.all(np.isfinite(lin)) and lin.max() > lin.min():
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_log_mcse = float(az.mcse(xr.Dataset({"h": (("chain", "draw"), lin / len(pts))}),
                                          method="mean")["h"].values)
    elif len(pts) and np.all(np.isfinite(lin)):
        mean_log_mcse = 0.0
    coord = np.array(["x", "y"][:d])
    return xr.Dataset(
        {"density": ("point", dens), "mcse": ("point", mcse), "log_density": ("point", log_dens),
         "x": (("point", "coord"), pts)},
        coords={"point": np.arange(len(pts)), "coord": coord},
        attrs={"n_draws": int(z.size), "mean_log_density": mean_log,
               "mean_log_density_mcse": mean_log_mcse})
