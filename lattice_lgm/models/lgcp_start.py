"""The steps before an LGCP run: the frequentist cross-check, starting values, chain starts.

An :class:`~lattice_lgm.LGCP` is a description (data, lattice, field prior, likelihood,
hyperpriors) and computes nothing about a run.  These steps read a model and never change it
(issue 28, decision 96)::

    check = cross_check(model)                  # Poisson GLM and minimum contrast
    start = start_values(model, check)          # where the chains start, on average
    theta = chain_starts(model, start, rngs)    # overdispersed, one mapping per chain
    state, report = initial_state(model, rngs, start=start)   # the field warm-started

:func:`prepare` runs the first two once per model (kept while the model lives): the run
(:class:`lattice_lgm._runview.LGCPView`), the CLI's description of a run and the summary
table's ``cross_check`` column read the same fits.  The cross-check is the spatial
statistician's frequentist answer (spatstat's ``kppm`` for ``(sd, range)``, a Poisson GLM for
the intercept and coefficients), printed beside the posterior and used as the chains' centre.
"""

from __future__ import annotations

import math
import warnings
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InvalidParameterError
from ..samplers import init_state, warm_start
from ..spatialstats import min_contrast_lgcp, poisson_glm
from .latent import BETA_PREFIX

__all__ = ["START_SPREAD", "CrossCheck", "Prepared", "Start", "analysis_record",
           "chain_starts", "cross_check", "initial_state", "prepare", "resolution_cells",
           "sampler_theta", "start_values"]

#: log-scale spread of overdispersed chain starts
START_SPREAD = 0.3
#: below this many points minimum contrast is not fitted (the pcf estimate is noise)
MIN_CONTRAST_POINTS = 10


@dataclass(frozen=True)
class CrossCheck:
    """The frequentist fits of an LGCP's data.

    Attributes
    ----------
    glm : PoissonGLMFit
        Poisson GLM of the counts on the (standardised) covariates, with the exposure.
    min_contrast : MinContrastFit or None
        Minimum contrast for ``(sd, range)`` (2-D lattices with at least
        :data:`MIN_CONTRAST_POINTS` points; else None).
    warnings : tuple of str
        What the fits warned about (printed with the description).
    """

    glm: Any
    min_contrast: Any = None
    warnings: tuple[str, ...] = ()

    def values(self, model: Any) -> dict[str, float]:
        """The fits as the posterior names them, on the covariates' original scale.

        ``sd`` and ``range`` (minimum contrast), each covariate's coefficient (the GLM) and
        ``log_mean_intensity`` (the GLM's intercept: ``log E λ`` at the covariates' zero).  A
        run records them (``attrs["analysis"]["cross_check"]``) for the summary table, whose
        ``intercept`` is ``log_mean_intensity − sd²/2`` (``E exp(f) = exp(sd²/2)``).
        """
        out: dict[str, float] = {}
        if self.min_contrast is not None:
            out.update(sd=float(self.min_contrast.sd), range=float(self.min_contrast.range))
        g = self.glm
        if model.design is not None:
            gb, gi = model.design.to_original(np.asarray(g.coef), g.intercept)
            out.update({n: float(v) for n, v in
                        zip(model.covariate_names, gb, strict=True)})
        else:
            gi = g.intercept
        out["log_mean_intensity"] = float(gi)
        return out

    def describe(self, model: Any) -> list[str]:
        """Lines for a run's description: the fits and their warnings."""
        lines = []
        if self.min_contrast is not None:
            lines.append("cross-check: " + self.min_contrast.describe())
        lines += [f"  warning: {w}" for w in self.warnings]
        lines.append(self.glm.describe())
        if model.design is not None:
            lines.append("(fitted on the standardised columns; the summary's cross_check "
                         "column states it on the original scale)")
        return lines


@dataclass(frozen=True)
class Start:
    """Where an LGCP's chains start, on average (:func:`chain_starts` spreads them).

    Attributes
    ----------
    theta : dict of str to float
        ``sd``, ``range`` (``range_t``), ``mean`` (the sampler's intercept, at the covariates'
        centres) and ``beta_<name>`` for every covariate.
    beta : ndarray, shape (p,)
        The GLM's standardised coefficients (empty without covariates or a cross-check).
    notes : tuple of str
        What was changed on the way (a fit outside a prior's support).
    """

    theta: dict[str, float]
    beta: np.ndarray = field(default_factory=lambda: np.zeros(0))
    notes: tuple[str, ...] = ()

    def describe(self, model: Any) -> list[str]:
        """Lines for a run's description."""
        u = model.lattice.units or "units"
        h = min(model.lattice.spacing)
        t = self.theta
        lines = [f"start: {n}" for n in self.notes]
        if "range_t" in t:
            lines.append(f"start: range_t at its prior median {t['range_t']:.4g} "
                         f"{model.time_units or 'time units'} (no frequentist space-time fit)")
        lines.append(f"start: sd {t['sd']:.4g}, range {t['range']:.4g} {u} "
                     f"(h/range = {h / t['range']:.3g}), intercept {t['mean']:.4g}"
                     + (" at the covariates' centres" if model.design is not None else ""))
        return lines


@dataclass(frozen=True)
class Prepared:
    """:func:`cross_check` and :func:`start_values` of one model (:func:`prepare`)."""

    check: CrossCheck | None
    start: Start

    def describe(self, model: Any) -> str:
        """The cross-check and the start, one fact per line (printed before a run)."""
        lines = [] if self.check is None else self.check.describe(model)
        return "\n".join(lines + self.start.describe(model))


def cross_check(model: Any) -> CrossCheck:
    """The Poisson GLM and (2-D) minimum-contrast fits of ``model``'s data.

    Parameters
    ----------
    model : LGCP

    Returns
    -------
    CrossCheck
    """
    X = None if model.design is None else np.nan_to_num(model.design.X, nan=0.0)
    names = None if model.design is None else model.design.names
    glm = poisson_glm(model.counts, model.exposure, X, mask=model.inside, names=names)
    if model.lattice.ndim != 2 or model.n_points < MIN_CONTRAST_POINTS:
        return CrossCheck(glm)
    kw: dict[str, Any] = {}
    if model.design is not None:
        # spatstat's kppm(X ~ covariates, "LGCP"): the trend from the Poisson GLM, then
        # (sd, range) from the *inhomogeneous* pcf, whose LGCP form is still exp(C_θ(r))
        # (Baddeley, Møller & Waagepetersen 2000; Waagepetersen 2007)
        import xarray as xr

        rho = np.exp(glm.intercept + X @ np.asarray(glm.coef, dtype=float))
        kw = {"intensity": xr.DataArray(rho, dims=model.lattice.dims,
                                        coords=model.lattice.coords()),
              "intensity_source": "the Poisson GLM of the covariates"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mc = min_contrast_lgcp(model.points, model.window.to_shapely(), nu=model.nu, **kw)
    return CrossCheck(glm, mc, tuple(str(w.message) for w in caught))


def start_values(model: Any, check: CrossCheck | None) -> Start:
    """The chains' centre: the cross-check's values, else the priors' medians.

    ``sd`` and ``range`` from minimum contrast (a range outside the prior's support is moved
    inside it, with a note), the intercept from the GLM less ``sd²/2`` (``E exp(f) =
    exp(sd²/2)``, so that the mean intensity matches), the coefficients from the GLM; without a
    cross-check, the priors' medians and the observed log intensity.  ``range_t`` (space-time)
    always starts at its prior's median: there is no frequentist space-time fit here.

    Parameters
    ----------
    model : LGCP
    check : CrossCheck or None

    Returns
    -------
    Start
    """
    spec = model.prior_spec
    sdp, rp = spec["sd"], spec["range"]
    sd, rng = float(sdp.ppf(0.5)), float(rp.ppf(0.5))
    notes = []
    mc = None if check is None else check.min_contrast
    if mc is not None:
        sd, rng = mc.sd, mc.range
        lo_r, hi_r = rp.lower, rp.upper
        if not lo_r < rng < hi_r:
            moved = float(np.clip(rng, lo_r + 1e-9 * (1 + abs(lo_r)), 0.9 * hi_r))
            notes.append(f"minimum-contrast range {rng:.4g} outside the range prior's "
                         f"support ({lo_r:.4g}, {hi_r:.4g}); starting at {moved:.4g}")
            rng = moved
    glm = None if check is None else check.glm
    intercept = glm.intercept if glm is not None else math.log(model.n_points / model.area)
    coef = (np.zeros(0) if glm is None or model.design is None
            else np.asarray(glm.coef, dtype=float))
    theta = {"sd": float(sd), "range": float(rng), "mean": float(intercept - sd * sd / 2)}
    if "range_t" in spec:
        theta["range_t"] = float(spec["range_t"].ppf(0.5))
    if model.design is not None:
        b = coef if len(coef) else np.zeros(model.design.p)
        theta.update({BETA_PREFIX + n: float(v)
                      for n, v in zip(model.design.names, b, strict=True)})
    return Start(theta, coef, tuple(notes))


_PREPARED: weakref.WeakKeyDictionary[Any, Prepared] = weakref.WeakKeyDictionary()


def prepare(model: Any) -> Prepared:
    """:func:`cross_check` (when ``model.cross_check``) and :func:`start_values`, once.

    Kept while ``model`` lives, so that a run, its description and its summary table share
    one fit.

    Parameters
    ----------
    model : LGCP

    Returns
    -------
    Prepared
    """
    got = _PREPARED.get(model)
    if got is None:
        check = cross_check(model) if model.cross_check else None
        got = _PREPARED[model] = Prepared(check, start_values(model, check))
    return got


def resolution_cells(lattice: Any) -> dict[str, float]:
    """The cell size each range is compared with by the resolution check.

    ``range``: the largest spatial side; ``range_t`` (space-time): the time step.
    """
    spatial = lattice.spacing[1:] if lattice.ndim == 3 else lattice.spacing
    out = {"range": float(max(spatial))}
    if lattice.ndim == 3:
        out["range_t"] = float(lattice.spacing[0])
    return out


def analysis_record(model: Any) -> dict[str, Any]:
    """What the summary of a run needs beyond its draws, recorded in the store (decision 101).

    So that :func:`lattice_lgm.analysis.summary_of` reads a run from its store alone (data
    moved or gone, another machine): the table's rows in order, the cross-check's values
    (:meth:`CrossCheck.values`, empty without one), the ranges' finite upper bounds and the
    cell sizes of the resolution check.

    Parameters
    ----------
    model : LGCP

    Returns
    -------
    dict
        ``rows`` (list of str), ``cross_check`` (str → float), ``bounds`` (str → float),
        ``cells`` (str → float), ``lattice`` (its fields), ``time_units``, the window's
        ``outline`` rings, and the covariates' ``center`` and ``scale``: JSON-ready
        (:class:`lattice_lgm.analysis.StoredLGCP` rebuilds what the intensity and the maps
        need from them and the stored data).
    """
    spec = model.prior_spec
    fits = prepare(model).check
    ranges = ["range", *(["range_t"] if "range_t" in spec else [])]
    lat = model.lattice
    d = model.design
    return {"rows": ["sd", *ranges, "intercept", *model.covariate_names],
            "cross_check": {} if fits is None else fits.values(model),
            "bounds": {k: float(spec[k].upper) for k in ranges
                       if math.isfinite(float(spec[k].upper))},
            "cells": resolution_cells(lat),
            # the intensity's yardsticks: the lattice exactly, and the standardisation of the
            # stored covariate columns (constant_data.covariates) back to their original scale
            "lattice": {"shape": list(lat.shape), "spacing": [float(h) for h in lat.spacing],
                        "origin": [float(o) for o in lat.origin], "dims": list(lat.dims),
                        "units": lat.units, "crs": lat.crs},
            "time_units": model.time_units,
            # the window's boundary rings, drawn on the maps, and its geometry (WKB, exact)
            "outline": [np.asarray(r, dtype=float).tolist() for r in model.window.outline()],
            "window_wkb": (model.window.to_shapely().wkb_hex
                           if model.window.kind != "interval" else None),
            "nu": float(model.nu),
            "center": [] if d is None else [float(c) for c in np.ravel(d.center)],
            "scale": [] if d is None else [float(s) for s in np.ravel(d.scale)]}


def chain_starts(model: Any, start: Start, rngs: Sequence[np.random.Generator],
                 spread: float = START_SPREAD) -> list[dict[str, float]]:
    """Overdispersed starting hyperparameters, one mapping per chain.

    Around ``start``: ``sd`` and ``range`` multiplied by ``exp(spread · z)`` and the intercept
    (and hyperparameter coefficients) shifted by ``spread · z`` (``z ~ N(0, 1)`` from each
    chain's own stream), kept inside the priors' supports (values that would leave it are
    redrawn, never clipped).  R-hat compares chains started apart, so they must start apart.

    Parameters
    ----------
    model : LGCP
    start : Start
    rngs : list of Generator, one per chain
    spread : float
        Log-scale spread (0 starts every chain at ``start``).

    Returns
    -------
    list of dict
    """
    lgm = model.lgm
    out = []
    for r in rngs:
        theta = {}
        for name in lgm.hyper_names:
            hp, centre = model.prior_spec[name], start.theta[name]
            for _ in range(100):
                z = spread * r.standard_normal()
                additive = name in lgm.obs_params
                v = centre + z if additive else centre * math.exp(z)
                if hp.lower < v < hp.upper:
                    break
            else:  # pragma: no cover - only with an absurd spread
                v = centre
            theta[name] = float(v)
        out.append(theta)
    return out


def sampler_theta(model: Any, start: Start, values: Mapping[str, float],
                  arg: str = "theta") -> dict[str, float]:
    """Starting values named as the posterior names them, in the sampler's parameters.

    ``intercept`` is on the covariates' original scale (as ``posterior.intercept``); the
    sampler's intercept hyperparameter works on standardised columns, so it is shifted by
    ``Σ_j β_j c_j / s_j`` with the starting coefficients ``β`` (those given, else ``start``'s).

    Parameters
    ----------
    model : LGCP
    start : Start
    values : mapping of str to float
        Any of ``sd``, ``range`` (``range_t``), ``intercept`` (unless
        ``intercept="block"``) and ``beta_<covariate>`` (``coefficients="hyper"``).
    arg : str
        The argument's name in error messages.

    Returns
    -------
    dict of str to float

    Raises
    ------
    InvalidParameterError
        An unknown name, a non-finite value or one outside its prior's support.
    """
    lgm = model.lgm
    hyper = {k: hp for k, hp in lgm.hyperpriors.items() if k != "mean"}
    names = [*hyper, *(["intercept"] if "mean" in lgm.hyperpriors else [])]
    unknown = sorted(set(values) - set(names))
    if unknown:
        extra = (" (with intercept='block' the intercept starts inside the Gaussian "
                 "block: drop it)" if "intercept" in unknown else "")
        raise InvalidParameterError(
            f"{arg} names {unknown}, which this model does not sample{extra}; give any of "
            f"{names}.")
    out: dict[str, float] = {}
    for k, v in values.items():
        x = float(v)
        ok = math.isfinite(x) and (k == "intercept" or bool(np.isfinite(hyper[k].logpdf(x))))
        if not ok:
            raise InvalidParameterError(
                f"{arg}[{k!r}]={v!r} is outside the support of its prior "
                f"({lgm.hyperpriors['mean' if k == 'intercept' else k]!r}); give a "
                "finite value the prior allows.")
        out[k] = x
    if "intercept" in out:
        shift = 0.0
        if model.design is not None:
            b = np.array([out.get(BETA_PREFIX + n, start.theta[BETA_PREFIX + n])
                          for n in model.design.names])
            shift = float(np.sum(b / model.design.scale * model.design.center))
        out["mean"] = out.pop("intercept") + shift
    return out


def initial_state(model: Any, rngs: Sequence[np.random.Generator],
                  chains: Sequence[int] | None = None, *, start: Start | None = None,
                  spread: float = START_SPREAD,
                  theta: Sequence[Mapping[str, float]] | None = None,
                  warm: bool = True) -> tuple[Any, Any]:
    """Chains started at :func:`chain_starts` with a field that fits the data.

    With ``warm`` (default) each chain's field starts at the posterior mode at its own
    starting θ, then elliptical slice updates at fixed θ until the log-likelihood settles
    (:func:`lattice_lgm.samplers.warm_start`); without, at an exact prior draw.

    Parameters
    ----------
    model : LGCP
    rngs : list of Generator, one per chain
    chains : list of int, optional
        The chains' ids (default ``0 … n-1``).
    start : Start, optional
        Default: :func:`prepare`'s.
    spread : float
        Overdispersion of the starting hyperparameters (:func:`chain_starts`).
    theta : list of dict, optional
        Starting hyperparameters per chain, named as the posterior names them
        (:func:`sampler_theta`), instead of :func:`chain_starts`; names not given start at
        ``start``.
    warm : bool

    Returns
    -------
    state : lattice_lgm.samplers.LatentState
    report : WarmStartReport or None
        The warm start's report (None with ``warm=False``).
    """
    start = prepare(model).start if start is None else start
    lgm = model.lgm
    if theta is None:
        starts = chain_starts(model, start, rngs, spread)
    else:
        centre = {k: start.theta[k] for k in lgm.hyper_names}
        starts = [dict(centre, **sampler_theta(model, start, t, f"initvals[{k}]"))
                  for k, t in enumerate(theta)]
    if not warm:
        return init_state(lgm, list(rngs), chains=chains, theta=starts), None
    full = [dict(lgm.initial_theta(), **t) for t in starts]
    return warm_start(lgm, list(rngs), full, chains=chains)
