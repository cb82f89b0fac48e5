"""Global envelope tests: MAD and extreme rank length, exact rank p-values.

Myllymäki, Mrkvička, Grabarnik, Seijo & Hahn (2017).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import xarray as xr

from .._validation import finite_array, positive_float
from ..errors import (
    InvalidParameterError,
    ShapeMismatchError,
)


# ------------------------------------------------------------------------------------------------
# Global envelopes
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Envelope:
    """A global envelope test (Myllymäki et al. 2017).

    Attributes
    ----------
    kind : str
        ``"mad"`` or ``"erl"``.
    alpha : float
        Level; the envelope is a (1 − α) global envelope.
    nsim : int
        Simulations used.
    p_value : float
        Exact (conservative under ties) Monte Carlo p-value: ``P(p ≤ α) ≤ α`` under H0.
    outside : bool
        Whether the observed curve leaves the envelope somewhere — equivalent to
        ``p_value ≤ α``.
    statistic : float
        MAD: ``u₀ = max_r |T₀(r) − T̄(r)|``; ERL: the observed curve's extreme-rank measure
        (the p-value's numerator over nsim + 1).
    lower, upper, central : xarray.DataArray, shape (k,)
        Envelope bounds and central curve on ``r`` (MAD: the mean of all ``nsim + 1`` curves;
        ERL: their pointwise median, for display).
    observed : xarray.DataArray, shape (k,)
    """

    kind: str
    alpha: float
    nsim: int
    p_value: float
    outside: bool
    statistic: float
    lower: xr.DataArray = field(repr=False)
    upper: xr.DataArray = field(repr=False)
    central: xr.DataArray = field(repr=False)
    observed: xr.DataArray = field(repr=False)

    def describe(self) -> str:
        """One paragraph: the test, its p-value and whether the curve leaves the envelope."""
        name = {"mad": "maximum absolute deviation", "erl": "extreme rank length"}[self.kind]
        verdict = ("leaves the envelope: reject H0" if self.outside
                   else "stays inside the envelope: no evidence against H0")
        return (f"Global {name} envelope test at level {self.alpha:g} with {self.nsim} "
                f"simulations: p = {self.p_value:.4g}; the observed curve {verdict} "
                f"(Myllymäki et al. 2017).")


def global_envelope(
    observed: np.ndarray | xr.DataArray,
    simulated: np.ndarray | xr.DataArray,
    *,
    alpha: float = 0.05,
    kind: Literal["mad", "erl"] = "mad",
    r: np.ndarray | None = None,
) -> Envelope:
    """Global envelope test of an observed curve against simulated curves under H0.

    ``T₀`` (observed) and ``T₁ … T_s`` (simulations) are exchangeable under H0, so ranking
    them by a symmetric measure of extremeness gives an exact Monte Carlo test (Myllymäki et al.
    2017, J. R. Statist. Soc. B 79, 381–404):

    * ``"mad"`` — ``u_i = max_r |T_i(r) − T̄(r)|`` with the central curve ``T̄`` the mean of *all*
      ``s + 1`` curves (a symmetric function, which keeps the test exact); ``p =
      (1 + #{i ≥ 1: u_i ≥ u₀}) / (s + 1)``; envelope ``T̄ ± u_(k)`` with ``u_(k)`` the
      ``k = ⌊α(s + 1)⌋``-th largest of ``u₁ … u_s``, so that ``T₀`` leaves it iff ``p ≤ α``.
    * ``"erl"`` — extreme rank length: pointwise two-sided ranks
      ``R_i(r) = min(#{j: T_j(r) ≤ T_i(r)}, #{j: T_j(r) ≥ T_i(r)})`` among all ``s + 1``
      curves, each curve's ranks sorted ascending and compared lexicographically;
      ``p = #{i: R_i ⪯ R₀} / (s + 1)``; the envelope is the pointwise range of the curves
      with ``p_i > α`` (observed included), which ``T₀`` leaves iff ``p ≤ α`` (no ties).
      Myllymäki et al. recommend ``s ≥ 2499`` for ERL at α = 0.05.

    Ties count against the observed curve (conservative p-values).

    Parameters
    ----------
    observed : ndarray or DataArray, shape (k,)
    simulated : ndarray or DataArray, shape (nsim, k)
    alpha : float
        In (0, 1); needs ``nsim + 1 ≥ 1/alpha``.
    kind : {"mad", "erl"}
    r : ndarray, shape (k,), optional
        Coordinates of the curves (default: ``observed``'s ``r`` coordinate, else 0…k−1).

    Returns
    -------
    Envelope
    """
    if kind not in ("mad", "erl"):
        raise InvalidParameterError(f"kind={kind!r} must be 'mad' or 'erl'.")
    alpha = positive_float("alpha", alpha, "a level in (0, 1), e.g. 0.05")
    if alpha >= 1:
        raise InvalidParameterError(f"alpha={alpha!r} must be < 1, e.g. 0.05.")
    t0 = np.asarray(observed, dtype=float)
    ts = np.asarray(simulated, dtype=float)
    if t0.ndim != 1:
        raise ShapeMismatchError(f"observed has shape {t0.shape}; pass one curve (k,).")
    if ts.ndim != 2 or ts.shape[1] != t0.shape[0]:
        raise ShapeMismatchError(
            f"simulated has shape {ts.shape}; expected (nsim, {t0.shape[0]}) — one row per "
            "simulated curve on the observed curve's r values."
        )
    finite_array("observed", t0, "evaluate the curves where they are finite (e.g. r > 0)")
    finite_array("simulated", ts, "evaluate the curves where they are finite (e.g. r > 0)")
    nsim = ts.shape[0]
    # k = ⌊α(s + 1)⌋ ≥ 1 is needed for any rejection region (1e-9 guards 1/0.05 round-off)
    k = math.floor(alpha * (nsim + 1) + 1e-9)
    if k < 1:
        need = math.ceil(1.0 / alpha - 1e-9) - 1
        raise InvalidParameterError(
            f"nsim={nsim} simulations cannot give a test at alpha={alpha:g} (the smallest "
            f"attainable p-value is 1/(nsim + 1) = {1 / (nsim + 1):.3g}); simulate at least "
            f"{need} curves (e.g. 19 for alpha=0.05; 2499 recommended for kind='erl')."
        )
    if r is None:
        rc = (np.asarray(observed["r"]) if isinstance(observed, xr.DataArray)
              and "r" in observed.coords else np.arange(t0.size, dtype=float))
    else:
        rc = np.asarray(r, dtype=float)
        if rc.shape != t0.shape:
            raise ShapeMismatchError(f"r has shape {rc.shape}; expected {t0.shape}.")
    allc = np.vstack([t0[None, :], ts])  # (s + 1, k): row 0 observed

    if kind == "mad":
        central = allc.mean(axis=0)
        u = np.max(np.abs(allc - central), axis=1)
        p_val = (1 + int(np.sum(u[1:] >= u[0]))) / (nsim + 1)
        u_k = np.sort(u[1:])[::-1][k - 1]
        outside = bool(u[0] > u_k)
        lower, upper, stat = central - u_k, central + u_k, float(u[0])
    else:
        up = np.sum(allc[None, :, :] <= allc[:, None, :], axis=1)  # #{j: T_j ≤ T_i} per r
        down = np.sum(allc[None, :, :] >= allc[:, None, :], axis=1)
        ranks = np.sort(np.minimum(up, down), axis=1)  # (s + 1, k), ascending
        p_all = _lex_le_counts(ranks) / (nsim + 1)
        p_val = float(p_all[0])
        keep = p_all > alpha
        outside = bool(p_val <= alpha)
        lower, upper = allc[keep].min(axis=0), allc[keep].max(axis=0)
        central = np.median(allc, axis=0)
        stat = float(p_val * (nsim + 1))
    # one Dataset builds the shared r index once (4 separate DataArrays cost 3× more)
    ds = xr.Dataset({"lower": ("r", lower), "upper": ("r", upper), "central": ("r", central),
                     "observed": ("r", t0)}, coords={"r": rc})
    return Envelope(kind=kind, alpha=alpha, nsim=nsim, p_value=float(p_val), outside=outside,
                    statistic=stat, lower=ds["lower"], upper=ds["upper"],
                    central=ds["central"], observed=ds["observed"])


def _lex_le_counts(v: np.ndarray) -> np.ndarray:
    """For each row i, ``#{j: v_j ⪯ v_i}`` in lexicographic order (ties included)."""
    order = np.lexsort(v.T[::-1])
    sv = v[order]
    # rows equal to their successor share the count of the last one of their run
    same_next = np.all(sv[1:] == sv[:-1], axis=1)
    counts = np.arange(1, len(v) + 1)
    for i in range(len(v) - 2, -1, -1):
        if same_next[i]:
            counts[i] = counts[i + 1]
    out = np.empty(len(v), dtype=np.int64)
    out[order] = counts
    return out


