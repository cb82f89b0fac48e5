"""The Gibbs combinator of Murray & Adams (2010, §5): hyperparameter moves, then k latent moves.

One *sweep* applies each hyperparameter move once (a cycle when there are several, e.g. a ridge
move and a mean move), then ``n_latent`` elliptical slice (or Neal M–H) updates of the field at
the new hyperparameters — the paper used ``k = 10``, because after a covariance is built, latent
updates are cheap.  Each move leaves the joint posterior invariant, so the cycle does too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import InvalidParameterError
from .ess import EllipticalSlice, NealMH
from .hyper import HyperMove
from .line import LineSlice
from .manifold import ManifoldMALA
from .state import LatentState

__all__ = ["Gibbs", "sweep_settings"]


class Gibbs:
    """A sweep of hyperparameter moves followed by ``n_latent`` latent-field updates.

    Parameters
    ----------
    hyper : HyperMove or sequence of HyperMove, optional
        Applied in order once per sweep (none: the hyperparameters stay fixed).
    latent : EllipticalSlice, NealMH, LineSlice or ManifoldMALA
        The latent-field update.
    n_latent : int
        Latent updates per sweep (default 10, as the paper).

    Notes
    -----
    ``info`` of :meth:`step` adds the cost counters of every move: ``n_loglik`` (likelihood
    evaluations) and ``n_cov`` (covariance constructions) per chain, and keeps each hyper move's
    ``accepted`` under ``"accepted/<move name>"``.
    """

    def __init__(self, hyper: HyperMove | Sequence[HyperMove] | None,
                 latent: EllipticalSlice | NealMH | LineSlice | ManifoldMALA, *,
                 n_latent: int = 10) -> None:
        moves = [] if hyper is None else [hyper] if isinstance(hyper, HyperMove) else list(hyper)
        for m in moves:
            if not isinstance(m, HyperMove):
                raise InvalidParameterError(f"hyper move {m!r} must be a HyperMove.")
        if not isinstance(latent, (EllipticalSlice, NealMH, LineSlice, ManifoldMALA)):
            raise InvalidParameterError(
                f"latent={latent!r} must be EllipticalSlice, NealMH, LineSlice or "
                "ManifoldMALA.")
        if not isinstance(n_latent, int) or n_latent < 0:
            raise InvalidParameterError(f"n_latent={n_latent!r} must be an int >= 0.")
        models = {id(m.model) for m in moves} | {id(latent.model)}
        if len(models) != 1:
            raise InvalidParameterError("every move of a Gibbs sweep must use the same model.")
        self.hyper = tuple(moves)
        self.latent = latent
        self.n_latent = n_latent

    def settings(self) -> dict[str, Any]:
        """Every setting that changes this sweep's draws, JSON-ready.

        Its moves' :meth:`settings` in order, and ``n_latent``.
        """
        return {"sweep": "Gibbs", "hyper": [m.settings() for m in self.hyper],
                "latent": self.latent.settings(), "n_latent": self.n_latent}

    def step(self, state: LatentState,
             rngs: Sequence[np.random.Generator]) -> tuple[LatentState, dict[str, Any]]:
        """One sweep.

        Returns
        -------
        state : LatentState
        info : dict
            ``n_loglik``, ``n_cov`` (n_chains,) totals over the sweep; ``accepted/<name>``
            per hyper move; ``angle`` of the last elliptical slice update, ``accepted`` of
            the last M–H update, ``step`` of the last line slice update (when used).
        """
        n = state.n_chains
        info: dict[str, Any] = {"n_loglik": np.zeros(n, dtype=np.int64),
                                "n_cov": np.zeros(n, dtype=np.int64)}
        for i, move in enumerate(self.hyper):
            state, inf = move.step(state, rngs)
            info["n_loglik"] += inf["n_loglik"]
            info["n_cov"] += inf["n_cov"]
            info[f"accepted/{i}:{move.name}"] = inf["accepted"]
        # the latent steps may overwrite arrays this sweep created itself (never the input's)
        owned = bool(self.hyper)
        if self.n_latent and hasattr(self.latent, "steps"):
            # the whole block in one call (compiled where the state allows: the same draws)
            state, inf = self.latent.steps(state, rngs, self.n_latent, in_place=owned)
            info["n_loglik"] += inf["n_loglik"]
            for k in ("angle", "accepted", "accept_fraction", "step_size"):
                if k in inf:
                    info[k] = inf[k]
            return state, info
        for _ in range(self.n_latent):
            state, inf = self.latent.step(state, rngs, in_place=owned)
            owned = True
            info["n_loglik"] += inf["n_loglik"]
            for k in ("angle", "accepted", "step"):
                if k in inf:
                    info[k] = inf[k]
        return state, info


def sweep_settings(step: Any) -> dict[str, Any]:
    """What a run records of a custom sweep, so that a resume with another sweep is refused.

    Parameters
    ----------
    step : object with ``step(state, rngs)``
        A :class:`Gibbs` (or any object with a ``settings()`` method returning a JSON-ready
        dict of everything that changes its draws).

    Returns
    -------
    dict
        ``step.settings()``; for an object without one, only its class
        (``{"sweep": "module.QualName"}``) — a resume can then check the class, not its
        settings.
    """
    fn = getattr(step, "settings", None)
    if callable(fn):
        out = fn()
        if not isinstance(out, dict):
            raise InvalidParameterError(
                f"step.settings() of {type(step).__name__} returned {type(out).__name__}; it "
                "must return a dict of the sweep's settings.")
        return out
    return {"sweep": f"{type(step).__module__}.{type(step).__qualname__}"}
