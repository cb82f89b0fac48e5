"""Generic slice samplers for expensive scalar and low-dimensional targets.

These are the moves behind the Murray & Adams (2010) hyperparameter updates ("Slice sampling
covariance hyperparameters of latent Gaussian models", NIPS 23, Algorithm 4): a univariate slice
sampler with a randomly positioned bracket, optional stepping out and shrinkage (Neal 2003,
"Slice sampling", *Annals of Statistics* 31(3), 705–767, Figures 3 and 5), and Neal's
hyperrectangle sampler (§5.1) for a joint move such as (log ℓ, log σ²).

Every evaluation of the target may build a covariance, so the samplers evaluate it only where
the algorithm needs a value, never at the current point (its value is passed in), and never at
points outside known support bounds.  They count what they do (:class:`SliceResult`).

Order of random draws
---------------------
Both samplers consume ``rng`` in a fixed order, so a run is reproducible from the generator's
state (and tests replay it):

1. ``u = rng.random()``: the slice level ``log y = logp0 + log u`` (Murray & Adams Alg. 4,
   steps 4–5; Neal 2003 §4, "draw y uniformly from (0, f(x0))").  Alg. 4 places the bracket
   (step 3) before the level; the two draws are independent, so the order is immaterial to
   the transition and is fixed here for reproducibility.
2. The bracket offset: ``rng.random()`` (univariate) or ``rng.random(d)`` (hyperrectangle),
   scaled by the width(s) (Alg. 4 step 3; Neal Fig. 3 first lines; Neal §5.1).
3. Univariate with ``step_out=True`` only: ``V = rng.random()`` for the split of the step-out
   budget ``J = floor(m V)``, ``K = m − 1 − J`` (Neal Fig. 3).
4. One ``rng.random()`` (or ``rng.random(d)``) per proposal in the shrinkage loop (Alg. 4
   step 6; Neal Fig. 5).

Notation: ``log_y`` is the log slice level, ``lo``/``hi`` the bracket ends (θ_min/θ_max of
Alg. 4, L/R of Neal), ``j``/``k`` Neal's J/K.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validation import positive_float, positive_int, positive_vector
from ..errors import InvalidParameterError, SamplerError, ShapeMismatchError

__all__ = ["SliceResult", "slice_hyperrect", "slice_univariate"]

#: ``logp(x) -> (log density, payload)``
LogpFn = Callable[[Any], tuple[float, Any]]


@dataclass(frozen=True)
class SliceResult:
    """Outcome of one slice-sampling transition.

    Attributes
    ----------
    x : float or ndarray
        The accepted point.
    logp : float
        Its log density (as returned by ``logp``).
    payload : Any
        What ``logp`` returned alongside the value at the accepted point (e.g. the implied
        latent field of Murray & Adams Alg. 4 step 7), so the caller need not recompute it.
    n_evals : int
        Calls of ``logp`` made, step-out included (the given current value is not counted).
    n_stepout : int
        Step-out expansions made (always 0 for the hyperrectangle sampler).
    n_shrink : int
        Rejected proposals, each followed by a shrink; proposals outside the support bounds are
        counted here and are not evaluated.
    bracket : tuple
        ``(lo, hi)`` of the initial bracket after stepping out (arrays for the hyperrectangle).
    """

    x: float | np.ndarray
    logp: float
    payload: Any
    n_evals: int
    n_stepout: int
    n_shrink: int
    bracket: tuple


# --------------------------------------------------------------------------------------------
# checks (run before any random number is drawn)
# --------------------------------------------------------------------------------------------
def _check_common(logp: LogpFn, logp0: float, rng: np.random.Generator, max_shrink: int) -> float:
    if not callable(logp):
        raise InvalidParameterError(
            f"logp={logp!r} is not callable; pass a function x -> (log density, payload)."
        )
    if not isinstance(rng, np.random.Generator):
        raise InvalidParameterError(
            f"rng={rng!r} is not a numpy.random.Generator; pass np.random.default_rng(seed)."
        )
    positive_int("max_shrink", max_shrink, "pass e.g. 100")
    try:
        lp0 = float(logp0)
    except (TypeError, ValueError):
        raise InvalidParameterError(
            f"logp0={logp0!r} is not a number; pass logp(x0)[0], the current log density."
        ) from None
    if not math.isfinite(lp0):
        raise InvalidParameterError(
            f"logp0={logp0!r} must be finite: the current point must have positive density "
            f"(and a finite log density); start the chain inside the support."
        )
    return lp0


def _evaluate(logp: LogpFn, x: Any, state: dict) -> tuple[float, Any]:
    """Call ``logp`` once; raise :class:`SamplerError` on NaN or +inf (−inf is a valid value)."""
    out = logp(x)
    try:
        value, payload = out
    except (TypeError, ValueError):
        raise InvalidParameterError(
            f"logp returned {out!r}; it must return a pair (log density, payload)."
        ) from None
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InvalidParameterError(
            f"logp returned the log density {value!r} at x={x!r}; it must be a float."
        ) from None
    if math.isnan(v) or v == math.inf:
        raise SamplerError(
            f"logp returned {v!r} at x={x!r}; the log density must be finite or -inf there "
            f"(check the model's parameter bounds or pass lower=/upper= to exclude the point).",
            state={**state, "x": x, "value": v},
        )
    return v, payload


def _log_level(logp0: float, rng: np.random.Generator) -> float:
    # Murray & Adams Alg. 4 steps 4–5: u ~ U(0, 1), log y = log L(f) N(g; …) p_h(θ) + log u.
    u = rng.random()
    return logp0 + (math.log(u) if u > 0.0 else -math.inf)


def _initial_bracket(x0: float, width: float, rng: np.random.Generator) -> tuple[float, float]:
    # Murray & Adams Alg. 4 step 3 / Neal (2003) Fig. 3: v ~ U(0, w), lo = x0 − v, hi = lo + w.
    # The random position makes P(bracket | x0) = P(bracket | x1) for any x1 in it.
    lo = x0 - width * rng.random()
    return lo, lo + width


def _initial_box(
    x0: np.ndarray, widths: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    # Neal (2003) §5.1: L_i = x0_i − w_i U_i, R_i = L_i + w_i, independently per coordinate.
    lo = x0 - widths * rng.random(x0.size)
    return lo, lo + widths


# --------------------------------------------------------------------------------------------
# univariate
# --------------------------------------------------------------------------------------------
def slice_univariate(
    logp: LogpFn,
    x0: float,
    logp0: float,
    width: float,
    rng: np.random.Generator,
    *,
    step_out: bool = False,
    max_stepout: int = 50,
    max_shrink: int = 100,
    lower: float = -np.inf,
    upper: float = np.inf,
) -> SliceResult:
    """One univariate slice-sampling transition (Murray & Adams 2010 Alg. 4; Neal 2003).

    Parameters
    ----------
    logp : callable
        ``logp(x) -> (value, payload)``: the log density (up to a constant) at the float ``x``
        and anything worth keeping if ``x`` is accepted.  ``value`` may be ``-inf``; NaN or
        ``+inf`` raise :class:`~lattice_lgm.errors.SamplerError`.
    x0 : float
        Current point, inside ``[lower, upper]``.
    logp0 : float
        ``logp(x0)[0]``, finite; it is not re-evaluated.
    width : float
        Bracket width (σ of Alg. 4), > 0; the step-out increment too.
    rng : numpy.random.Generator
        Consumed in the order given in the module notes.
    step_out : bool, default False
        Expand the randomly positioned bracket by steps of ``width`` until both ends are off
        the slice (Neal 2003 Fig. 3), at most ``max_stepout`` widths in all.
    max_stepout : int, default 50
        Neal's ``m`` (only used with ``step_out=True``), >= 1.
    max_shrink : int, default 100
        Rejections allowed before giving up with :class:`~lattice_lgm.errors.SamplerError`.
    lower, upper : float, default ±inf
        Support bounds known without evaluating ``logp`` (the closed interval ``[lower,
        upper]``); the chain targets ``exp(logp)`` restricted to it.

    Returns
    -------
    SliceResult
        The accepted point, its value and payload, and the work done.

    Raises
    ------
    InvalidParameterError
        Bad input (NaN/inf ``logp0``, ``width <= 0``, ``x0`` outside the bounds, …), raised
        before any random number is drawn.
    SamplerError
        ``logp`` returned NaN or +inf, or ``max_shrink`` proposals in a row were rejected
        (``.state`` holds x0, logp0, log_y, the brackets and the last proposal).
    """
    logp0 = _check_common(logp, logp0, rng, max_shrink)
    try:
        x0 = float(x0)
    except (TypeError, ValueError):
        raise InvalidParameterError(
            f"x0={x0!r} is not a number; pass the current point."
        ) from None
    if not math.isfinite(x0):
        raise InvalidParameterError(f"x0={x0!r} must be finite; pass the current point.")
    width = positive_float("width", width, "pass a bracket width > 0 (e.g. the prior's scale)")
    try:
        lower, upper = float(lower), float(upper)
    except (TypeError, ValueError):
        raise InvalidParameterError(
            f"lower={lower!r}, upper={upper!r} must be numbers; pass ±inf for no bound."
        ) from None
    if math.isnan(lower) or math.isnan(upper) or not lower < upper:
        raise InvalidParameterError(
            f"lower={lower!r}, upper={upper!r} must satisfy lower < upper; pass the support "
            f"bounds (±inf for none)."
        )
    if not lower <= x0 <= upper:
        raise InvalidParameterError(
            f"x0={x0!r} is outside [lower, upper] = [{lower!r}, {upper!r}]; start inside the "
            f"support."
        )
    if step_out and (isinstance(max_stepout, bool)
                     or not isinstance(max_stepout, int | np.integer) or max_stepout < 1):
        raise InvalidParameterError(
            f"max_stepout={max_stepout!r} must be an integer >= 1 with step_out=True; pass e.g. 50."
        )

    n_evals = 0
    state: dict[str, Any] = {"x0": x0, "logp0": logp0, "width": width,
                             "lower": lower, "upper": upper}

    def on_slice(x: float) -> bool:
        # Step-out test "y < f(x)" (Neal Fig. 3).  Outside [lower, upper] the answer is known
        # without evaluating: f = 0 there (see the reversibility note below).
        nonlocal n_evals
        if not lower <= x <= upper:
            return False
        value, _ = _evaluate(logp, x, state)
        n_evals += 1
        return value > log_y

    log_y = _log_level(logp0, rng)                              # Alg. 4 steps 4–5
    lo, hi = _initial_bracket(x0, width, rng)                   # Alg. 4 step 3
    state["log_y"] = log_y

    # Stepping out (Neal 2003 Fig. 3).  The budget of m widths is split at random between the
    # two sides, J = floor(m V) to the left and K = m − 1 − J to the right, which keeps the
    # bracket distribution the same from any point of the slice inside it (Neal §4.1, §4.3).
    n_stepout = 0
    if step_out:
        j = math.floor(max_stepout * rng.random())
        k = max_stepout - 1 - j
        while j > 0 and on_slice(lo):
            lo -= width
            j -= 1
            n_stepout += 1
        while k > 0 and on_slice(hi):
            hi += width
            k -= 1
            n_stepout += 1
    bracket = (lo, hi)
    state["bracket"] = bracket

    # Shrinkage (Neal 2003 Fig. 5; Alg. 4 steps 6–14).
    #
    # Reversibility with support bounds: a point outside [lower, upper] is treated exactly as
    # if logp had returned -inf there — it is never above the level (log_y >= -inf and the test
    # is strict), so it stops the step-out and is rejected and shrunk on, with the same random
    # draws as an evaluation would give.  The chain is therefore Neal's procedure applied to the
    # density exp(logp) · 1[lower <= x <= upper], which is reversible with respect to it
    # (Neal 2003 §4.3); skipping the call changes the cost, not the transition.
    n_shrink = 0
    while True:
        x1 = lo + rng.random() * (hi - lo)                      # Alg. 4 step 6
        if lower <= x1 <= upper:
            value, payload = _evaluate(logp, x1, state)          # Alg. 4 step 7
            n_evals += 1
            if value > log_y:                                   # Alg. 4 step 8: accept
                return SliceResult(x=x1, logp=value, payload=payload, n_evals=n_evals,
                                   n_stepout=n_stepout, n_shrink=n_shrink, bracket=bracket)
        if x1 < x0:                                             # Alg. 4 steps 10–13
            lo = x1
        else:
            hi = x1
        n_shrink += 1
        if n_shrink >= max_shrink:
            raise SamplerError(
                f"slice_univariate rejected {n_shrink} proposals in a row (max_shrink="
                f"{max_shrink}) from x0={x0!r}; the slice around x0 is tiny or logp is not "
                f"reproducible (same x must give the same value). Check logp near x0, or raise "
                f"max_shrink.",
                state={**state, "last_proposal": x1, "current_bracket": (lo, hi),
                       "n_evals": n_evals, "n_shrink": n_shrink, "n_stepout": n_stepout},
            )


# --------------------------------------------------------------------------------------------
# hyperrectangle
# --------------------------------------------------------------------------------------------
def _bound_vector(name: str, value: Any, d: int, default: float) -> np.ndarray:
    if value is None:
        return np.full(d, default)
    try:
        arr = np.broadcast_to(np.asarray(value, dtype=np.float64), (d,)).copy()
    except (TypeError, ValueError):
        raise ShapeMismatchError(
            f"{name}={value!r} cannot be broadcast to x0's shape ({d},); pass a scalar or one "
            f"bound per coordinate."
        ) from None
    if np.isnan(arr).any():
        raise InvalidParameterError(f"{name}={value!r} contains NaN; pass ±inf for no bound.")
    return arr


def slice_hyperrect(
    logp: LogpFn,
    x0: np.ndarray,
    logp0: float,
    widths: np.ndarray | float,
    rng: np.random.Generator,
    *,
    max_shrink: int = 100,
    lower: np.ndarray | float | None = None,
    upper: np.ndarray | float | None = None,
) -> SliceResult:
    """One hyperrectangle slice-sampling transition (Neal 2003, §5.1, no stepping out).

    A box of side ``widths`` is placed at random around ``x0``; proposals are uniform in the
    box and, on rejection, every coordinate of the box is shrunk to the proposal on the side
    away from ``x0`` (Neal's basic version).

    Parameters
    ----------
    logp : callable
        ``logp(x) -> (value, payload)`` for a 1-D array ``x`` (a fresh array each call).
    x0 : ndarray, shape (d,)
        Current point, finite, inside the bounds.
    logp0 : float
        ``logp(x0)[0]``, finite; not re-evaluated.
    widths : float or ndarray, shape (d,)
        Box sides, > 0 (a scalar is used for every coordinate).
    rng : numpy.random.Generator
        Consumed in the order given in the module notes.
    max_shrink : int, default 100
        Rejections allowed before :class:`~lattice_lgm.errors.SamplerError`.
    lower, upper : float or ndarray, shape (d,), optional
        Per-coordinate support bounds known without evaluating ``logp`` (closed box).

    Returns
    -------
    SliceResult
        ``x`` is an array of shape ``(d,)``; ``bracket`` is ``(lo, hi)`` of the initial box;
        ``n_stepout`` is 0.

    Raises
    ------
    InvalidParameterError, ShapeMismatchError
        Bad input, raised before any random number is drawn.
    SamplerError
        ``logp`` returned NaN or +inf, or ``max_shrink`` proposals in a row were rejected.
    """
    logp0 = _check_common(logp, logp0, rng, max_shrink)
    try:
        x0 = np.array(x0, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidParameterError(
            f"x0={x0!r} is not numeric; pass a 1-D float array."
        ) from None
    if x0.ndim != 1 or x0.size == 0:
        raise ShapeMismatchError(
            f"x0 has shape {x0.shape}; pass a non-empty 1-D array (use slice_univariate for a "
            f"scalar)."
        )
    if not np.isfinite(x0).all():
        raise InvalidParameterError(f"x0={x0!r} must be finite; pass the current point.")
    d = x0.size
    widths = np.asarray(positive_vector("widths", widths, d, "pass box widths > 0"))
    lower = _bound_vector("lower", lower, d, -np.inf)
    upper = _bound_vector("upper", upper, d, np.inf)
    if not (lower < upper).all():
        raise InvalidParameterError(
            f"lower={lower!r}, upper={upper!r} must satisfy lower < upper in every coordinate."
        )
    if not ((lower <= x0) & (x0 <= upper)).all():
        raise InvalidParameterError(
            f"x0={x0!r} is outside the box [lower, upper] = [{lower!r}, {upper!r}]; start "
            f"inside the support."
        )

    state: dict[str, Any] = {"x0": x0.copy(), "logp0": logp0, "widths": widths,
                             "lower": lower, "upper": upper}
    log_y = _log_level(logp0, rng)                              # Neal §4: level under f(x0)
    lo, hi = _initial_box(x0, widths, rng)                      # Neal §5.1: random box
    bracket = (lo.copy(), hi.copy())
    state.update(log_y=log_y, bracket=bracket)

    # Shrinkage (Neal §5.1).  Points outside the bounds are rejected unevaluated, which is the
    # same transition as logp = -inf there (see slice_univariate), hence still reversible.
    n_evals = n_shrink = 0
    while True:
        x1 = lo + rng.random(d) * (hi - lo)
        if ((lower <= x1) & (x1 <= upper)).all():
            value, payload = _evaluate(logp, x1.copy(), state)
            n_evals += 1
            if value > log_y:
                return SliceResult(x=x1, logp=value, payload=payload, n_evals=n_evals,
                                   n_stepout=0, n_shrink=n_shrink, bracket=bracket)
        # shrink every coordinate toward x0: L_i = x1_i if x1_i < x0_i, else R_i = x1_i
        below = x1 < x0
        lo = np.where(below, x1, lo)
        hi = np.where(below, hi, x1)
        n_shrink += 1
        if n_shrink >= max_shrink:
            raise SamplerError(
                f"slice_hyperrect rejected {n_shrink} proposals in a row (max_shrink="
                f"{max_shrink}) from x0={x0!r}; the slice around x0 is tiny or logp is not "
                f"reproducible. Check logp near x0, use smaller widths, or raise max_shrink.",
                state={**state, "last_proposal": x1, "current_bracket": (lo, hi),
                       "n_evals": n_evals, "n_shrink": n_shrink, "n_stepout": 0},
            )
