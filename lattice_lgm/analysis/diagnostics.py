"""The posterior table and the notes that say what to do.

Mean, sd, 95 % interval, rank R-hat, bulk and tail ESS and the cross-check per row.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from ..errors import InvalidParameterError
from ..models import LGCP
from ..models.lgcp_start import analysis_record
from ._core import _require, _resolution

#: the convergence rule of :func:`summary` (Vehtari, Gelman, Simpson, Carpenter & Bürkner 2021:
#: rank-normalised split R-hat ≤ 1.01, bulk and tail ESS > 100 per chain for 4 chains)
RHAT_MAX, ESS_MIN = 1.01, 400
#: per-draw statistics of ``sample_stats`` that join the table and the convergence rule: a
#: pseudo-marginal chain's carried ``log p̂`` — its state is ``(ξ, u)``, and chains can agree on
#: ``ξ`` while their estimator's normals have not mixed (decision 128)
STATS_ROWS = ("log_p_hat",)


def summary(model: Any, posterior: xr.Dataset, *, bound_fraction: float = 0.9,
            loglik: np.ndarray | None = None,
            stats_rows: Mapping[str, np.ndarray] | None = None) -> Any:
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
    stats_rows : mapping of str to ndarray of shape (chain, draw), optional
        Further per-draw statistics, rows of the table and of the convergence rule (the
        run's ``sample_stats`` entries named in :data:`STATS_ROWS`).

    Returns
    -------
    pandas.DataFrame
    """
    # an LGCP states its rows, cross-check, bounds and cell sizes as its runs record them;
    # any other family's table is its posterior's scalars and coefficients
    meta = analysis_record(model) if isinstance(model, LGCP) else {}
    return _table(posterior, meta, loglik, bound_fraction, stats_rows)


def summary_of(tree: Any, *, bound_fraction: float = 0.9) -> Any:
    """:func:`summary` of a run from its DataTree alone: no model, no data files.

    The draws, ``sample_stats.loglik`` and what the run recorded for its analysis
    (``attrs["analysis"]``: the rows, the cross-check's values, the ranges' upper bounds, the
    cell sizes; :func:`lattice_lgm.models.lgcp_start.analysis_record`) — so a store can be
    summarised on another machine, or after its data moved.

    Parameters
    ----------
    tree : xarray.DataTree
        :func:`lattice_lgm.open_store`'s or ``sample()``'s result.
    bound_fraction : float
        As :func:`summary`.

    Returns
    -------
    pandas.DataFrame
        As :func:`summary`.

    Raises
    ------
    InvalidParameterError
        ``tree`` has no posterior, or is a run of an LGCP written before runs recorded their
        analysis (then :func:`summary` with the rebuilt model gives the table).
    """
    attrs = dict(tree.attrs)
    if "posterior" not in tree.children:
        raise InvalidParameterError(
            "tree has no posterior group; give lattice_lgm.open_store(path) of a run store or "
            "the result of sample().")
    meta = attrs.get("analysis")
    if meta is None and attrs.get("model") == "LGCP":
        raise InvalidParameterError(
            "this LGCP run was written before runs recorded what their summary needs (its "
            "attrs have no 'analysis'); use analysis.summary(model, posterior) with the model "
            "rebuilt from the stored config (lattice-lgm summary does so).")
    stats = tree["sample_stats"].to_dataset() if "sample_stats" in tree.children else {}
    loglik = stats["loglik"].values if "loglik" in stats else None
    return _table(tree["posterior"].to_dataset(), meta or {}, loglik, bound_fraction,
                  stats_rows_of(stats))


def stats_rows_of(stats: Any) -> dict[str, np.ndarray]:
    """The :data:`STATS_ROWS` a run's ``sample_stats`` (Dataset or mapping) holds."""
    return {k: np.asarray(stats[k].values, dtype=float) for k in STATS_ROWS if k in stats}


def _table(posterior: xr.Dataset, meta: Mapping[str, Any], loglik: Any,
           bound_fraction: float, stats_rows: Mapping[str, np.ndarray] | None = None) -> Any:
    """The table of :func:`summary` from the draws and a run's analysis record."""
    order = meta.get("rows")
    covariates = ([str(n) for n in posterior["beta"]["covariate"].values]
                  if "beta" in posterior else [])
    if order is None:
        names = [n for n in posterior.data_vars if posterior[n].dims == ("chain", "draw")]
        order = names + covariates
    rows: dict[str, np.ndarray] = {}
    for n in order:
        if n in covariates:
            rows[n] = posterior["beta"].sel(covariate=n).values
        else:
            _require(posterior, n)
            rows[n] = posterior[n].values
    fits = dict(meta.get("cross_check", {}))
    check = {k: float(v) for k, v in fits.items() if k in rows}
    if "log_mean_intensity" in fits and "intercept" in rows:
        # the GLM's intercept is log E λ; the field-free intercept is less E exp(f) = sd²/2
        sd_hat = fits.get("sd", float(np.median(rows["sd"])) if "sd" in rows else 0.0)
        check["intercept"] = float(fits["log_mean_intensity"]) - sd_hat**2 / 2
    if loglik is not None:
        rows["log_likelihood"] = np.asarray(loglik, dtype=float)
    for k, v in (stats_rows or {}).items():
        rows[k] = np.asarray(v, dtype=float)
    df = diagnostics_table(rows, check)
    notes = df.attrs["notes"]
    for name, upper in meta.get("bounds", {}).items():
        if name in rows:
            frac = float((rows[name] > bound_fraction * upper).mean())
            if frac > 0.1:
                notes.append(f"the {name} posterior presses on its upper bound {upper:g}: "
                             f"{100 * frac:.0f}% of draws above {bound_fraction:g}× the bound; "
                             f"raise the {name} prior's upper bound (the torus grows with it)")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _resolution(posterior, meta.get("cells", {}))
    notes += [str(w.message) for w in caught]
    return df


def diagnostics_table(rows: dict[str, np.ndarray], check: dict[str, float] | None = None,
                      ) -> Any:
    """Posterior mean, sd, 95 % interval, rank R-hat, bulk and tail ESS of each row's draws.

    Parameters
    ----------
    rows : dict of str to ndarray, each shape (chain, draw)
    check : dict of str to float, optional
        A cross-check per row (the ``cross_check`` column; NaN where absent).

    Returns
    -------
    pandas.DataFrame
        Indexed by row name; ``attrs["converged"]`` (every row R-hat ≤ :data:`RHAT_MAX`, bulk
        and tail ESS ≥ :data:`ESS_MIN`) and ``attrs["notes"]`` (what fails, "run longer").
    """
    import arviz as az
    import pandas as pd

    check = check or {}
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
    df.attrs["notes"] = notes
    return df
