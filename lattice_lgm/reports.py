"""What a finished run reports: the posterior table with its notes, and the LGCP's maps.

Used by the command line after ``run``, ``resume`` and ``extend`` and by ``summary`` and
``plot``; importable for notebooks.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from .errors import InvalidParameterError
from .lattice import _LENGTH_M, measure_unit

__all__ = ["describe_run", "print_run_summary", "print_summary", "write_maps"]


def describe_run(model: Any) -> str:
    """What ``lattice-lgm run`` prints before sampling.

    The model's description, and for an LGCP the frequentist cross-check and the chains'
    start (:func:`lattice_lgm.models.lgcp_start.prepare`, fitted once for the run).
    """
    from .models import LGCP, lgcp_start

    text = model.describe()
    if isinstance(model, LGCP):
        text += "\n" + lgcp_start.prepare(model).describe(model)
    return text


def print_summary(model: Any, posterior: Any, file: TextIO | None = None,
                  loglik: Any = None, stats: Any = None) -> Any:
    """Print :func:`lattice_lgm.analysis.summary`, its notes and whether the run converged.

    Parameters
    ----------
    model : LGCP
    posterior : xarray.Dataset
        ArviZ-layout posterior, dims ``(chain, draw, ...)``.
    file : text stream, optional
        Default ``sys.stdout``.
    loglik : array-like, shape (chain, draw), optional
        The draws' log-likelihood (a row of the table and of the convergence rule).
    stats : xarray.Dataset, optional
        The run's ``sample_stats``: its entries named in
        :data:`lattice_lgm.analysis.diagnostics.STATS_ROWS` (a pseudo-marginal chain's carried
        ``log p̂``, decision 128) are rows of the table and of the rule too.

    Returns
    -------
    pandas.DataFrame
        The table printed (with or without field draws kept).
    """
    import numpy as np

    from .analysis.diagnostics import stats_rows_of, summary

    # the table and its notes come from the scalar draws: they never depend on whether the
    # fields were kept (issue 27: with thin_fields = 0 nothing at all was printed)
    table = summary(model, posterior, loglik=None if loglik is None else np.asarray(loglik),
                    stats_rows=None if stats is None else stats_rows_of(stats))
    return _print_table(table, posterior, file)


def print_run_summary(tree: Any, posterior: Any, file: TextIO | None = None) -> Any:
    """Print :func:`lattice_lgm.analysis.summary_of` of a run: from its store alone.

    Parameters
    ----------
    tree : xarray.DataTree
        The run (:func:`lattice_lgm.open_store`).
    posterior : xarray.Dataset
        Its posterior as printed (with the kept fields, for the line saying so).
    file : text stream, optional

    Returns
    -------
    pandas.DataFrame
    """
    from .analysis import summary_of

    return _print_table(summary_of(tree), posterior, file)


def _print_table(table: Any, posterior: Any, file: TextIO | None) -> Any:
    from .analysis import ESS_MIN, RHAT_MAX

    out = sys.stdout if file is None else file
    n_chain, n_draw = posterior.sizes["chain"], posterior.sizes["draw"]
    kept = "" if "f" in posterior else (", no field draws kept (thin_fields = 0: maps come "
                                        "from the online summaries)")
    print(f"\nposterior: {n_chain} chains × {n_draw} draws{kept}", file=out)
    print(table.to_string(float_format=lambda v: f"{v:.4g}"), file=out)
    notes = table.attrs.get("notes", [])
    for note in notes:
        print(f"note: {note}", file=out)
    if not notes:
        print("notes: none", file=out)
    if table.attrs.get("converged"):
        print(f"converged: R-hat ≤ {RHAT_MAX:g} and bulk and tail ESS ≥ {ESS_MIN} for every "
              "row", file=out)
    return table


def _intensity_per(units: str | None) -> str | None:
    """``"ha"`` when the coordinates are in metres, else None (points per unit²)."""
    return "ha" if _LENGTH_M.get((units or "").strip().lower()) == 1.0 else None


def _maps_from_draws(model: Any, posterior: Any, thresholds: Sequence[float]) -> tuple:
    from .analysis import exceedance, intensity, relative_risk

    lam = intensity(model, posterior, per=_intensity_per(model.lattice.units))
    lam_mean = lam.mean(("chain", "draw"))
    return lam_mean, lam.attrs["units"], exceedance(relative_risk(posterior), thresholds)


def _maps_from_summaries(model: Any, summ: Any) -> tuple:
    """Pool the runner's per-chain online summaries (means and exceedance counts) over chains.

    The pooled mean of chains with ``n_c`` draws and means ``m_c`` is ``Σ n_c m_c / Σ n_c``;
    the exceedance probability is ``Σ counts_c / Σ n_c``.
    """
    from .analysis._core import _per_factor

    n = summ["n_draws"]
    total = int(n.sum())
    if total == 0:
        raise InvalidParameterError(
            "the run's online summaries hold no draws yet; wait for the first block.")
    lam_mean = (summ["intensity_mean"] * n).sum("chain", skipna=False) / total
    factor, label = _per_factor(model.lattice, _intensity_per(model.lattice.units),
                                measure_unit(model.lattice, getattr(model, "time_units", None)))
    inside = summ["intensity_mean"].notnull().all("chain")
    exc = (summ["exceedance_count"].sum("chain") / total).where(inside)
    return lam_mean * factor, label, exc.transpose("threshold", ...)


def write_maps(model: Any, posterior: Any, out_dir: str | os.PathLike,
               thresholds: Sequence[float], file: TextIO | None = None,
               summaries: Any = None) -> list[Path]:
    """Write the posterior-mean intensity and the exceedance maps as PNG files.

    ``intensity_mean.png``: the posterior mean of ``λ`` per ha when the coordinates are in
    metres, else per unit²; ``exceedance_rr_gt_<c>.png``: ``P(RR > c | data)`` for each
    threshold ``c`` (:mod:`lattice_lgm.analysis`), drawn with
    :func:`lattice_lgm.plotting.plot_map` on matplotlib's Agg backend.  From the runner's
    online ``summaries`` when given (they pool every stored draw, whatever ``thin_fields``
    kept) and they counted the thresholds asked for, else from the field draws.

    Parameters
    ----------
    model : LGCP
    posterior : xarray.Dataset, dims (chain, draw, y, x)
    out_dir : path
        Created if needed.
    thresholds : sequence of float
    file : text stream, optional
        Where to report (default ``sys.stdout``).
    summaries : xarray.Dataset, optional
        The run's ``summaries`` group: per-chain ``intensity_mean`` (points per unit²),
        ``exceedance_count`` (chain, threshold, ...) and ``n_draws``.

    Returns
    -------
    list of Path
        The files written (none for a model that is not 2-D: the maps are planar).
    """
    out = sys.stdout if file is None else file
    if model.lattice.ndim != 2:
        print(f"maps: none written (the lattice is {model.lattice.ndim}-D; maps are planar, "
              "analyse time slices from Python)", file=out)
        return []
    wanted = [float(c) for c in thresholds]
    counted = [] if summaries is None else [float(c) for c in summaries["threshold"].values]
    if summaries is not None and ("f" not in posterior or set(wanted) <= set(counted)):
        # every stored draw, whatever thin_fields kept
        lam_mean, units, exc = _maps_from_summaries(model, summaries)
        missing = sorted(set(wanted) - set(counted))
        if missing:
            print(f"maps: thresholds {missing} were not counted during the run (it counted "
                  f"{counted}) and no field draws were kept to compute them", file=out)
        exc = exc.sel(threshold=[c for c in counted if c in wanted] or counted)
    elif "f" in posterior:
        lam_mean, units, exc = _maps_from_draws(model, posterior, wanted)
    else:
        raise InvalidParameterError(
            "the run kept no field draws (thin_fields = 0) and has no online summaries; no "
            "maps can be drawn.")
    import matplotlib

    matplotlib.use("Agg")  # files only: no display is needed or wanted
    import matplotlib.pyplot as plt

    from .plotting import plot_map

    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    maps = [("intensity_mean.png",
             lam_mean.assign_attrs(long_name="posterior mean intensity", units=units),
             "posterior mean intensity", {})]
    for c in exc["threshold"].values:
        da = exc.sel(threshold=c).assign_attrs(long_name=f"P(RR > {c:g} | data)", units="")
        maps.append((f"exceedance_rr_gt_{c:g}.png", da, f"P(relative risk > {c:g} | data)",
                     {"vmin": 0.0, "vmax": 1.0}))
    written = []
    for name, da, title, kw in maps:
        fig, ax = plt.subplots(figsize=(7.0, 5.0))
        try:
            plot_map(da, model, ax=ax, title=title, **kw)
            fig.savefig(d / name, dpi=120, bbox_inches="tight")
        finally:
            plt.close(fig)
        written.append(d / name)
    print(f"maps: {len(written)} PNG files in {d}", file=out)
    return written
