"""One sweep of the lattice GPDS (:class:`~lattice_lgm.gpds.lattice.LatticeGPDS`).

The history given ``g`` exactly, then θ and ``g`` by the library's samplers given the history
(binomial sites) or given a scale ``λ`` (Poisson sites): the two augmentations of
:mod:`lattice_lgm.gpds.lattice`'s module docstring, with the same posterior of ``g`` and θ.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import InvalidParameterError
from ..samplers import EllipticalSlice, Gibbs, HyperMove, JointHMC
from ..samplers._latent import loglik_at
from ..samplers.state import LatentState

__all__ = ["AUGMENTATIONS", "DEFAULT_AUGMENTATION", "REJECTIONS", "LatticeSweep"]

#: the chain state's entry (``LatentState.extras``) holding the rejection counts per cell
REJECTIONS = "gpds_rejections"
#: what the field is updated given (:class:`LatticeSweep`), and the default (decision 106)
AUGMENTATIONS = ("history", "scale")
DEFAULT_AUGMENTATION = "scale"
#: what a model must offer the sweep (:class:`~lattice_lgm.gpds.lattice.LatticeGPDS` does)
_MODEL_API = ("eta", "normaliser", "draw_history", "model_for", "model_for_scale", "lgm",
              "hyperpriors", "data")


class LatticeSweep:
    """One sweep of the lattice GPDS: the history given ``g``, then θ, then ``g``.

    Per chain: rejection counts exactly given the field (:meth:`LatticeGPDS.draw_history`);
    then a Murray–Adams hyperparameter move (when the model has hyperpriors) and
    ``n_latent`` elliptical slice updates of the field against the binomial sites.

    Parameters
    ----------
    model : LatticeGPDS
    representation : str
        The hyperparameter move's representation
        (:data:`~lattice_lgm.samplers.hyper.REPRESENTATIONS`), or ``"hmc"``: the library's
        joint HMC over θ and the whitened field (:class:`~lattice_lgm.samplers.JointHMC`)
        in place of the move and the elliptical slice updates, its adaptation carried in the
        chain state.
    n_latent : int
        Elliptical slice updates per sweep.
    tune : int
        The run's warm-up sweeps (HMC adapts its step size and mass in them).
    augmentation : {"scale", "history"}
        What the field is updated given (default :data:`DEFAULT_AUGMENTATION`): the latent
        history's rejection counts (binomial
        sites, the paper's target) or a scale ``λ`` (Poisson sites with rate
        ``λ π_c Φ(g_c)``; module docstring).  The same posterior of ``g`` and θ either way;
        the history is drawn and recorded each sweep in both.
    """

    def __init__(self, model: Any, representation: str = "prior-white", *,
                 n_latent: int = 10, tune: int = 0,
                 augmentation: str = DEFAULT_AUGMENTATION) -> None:
        if not all(hasattr(model, a) for a in _MODEL_API):
            raise InvalidParameterError(f"model={model!r} must be a LatticeGPDS.")
        if augmentation not in AUGMENTATIONS:
            raise InvalidParameterError(
                f"augmentation={augmentation!r} is not one of {AUGMENTATIONS}.")
        self.augmentation = augmentation
        if not (isinstance(n_latent, int) and n_latent >= 1):
            raise InvalidParameterError(f"n_latent={n_latent!r} must be an int >= 1.")
        if representation == "hmc":
            if not model.hyperpriors:
                raise InvalidParameterError(
                    "representation='hmc' moves θ with the field; the model samples no "
                    "hyperparameters (give hyperpriors), or use 'prior-white'.")
            JointHMC(model.lgm, n_tune=tune)  # validates tune
        elif model.hyperpriors:
            HyperMove(model.lgm, representation)  # validates the representation
        self.model, self.representation, self.n_latent = model, representation, n_latent
        self.tune = int(tune)

    def settings(self) -> dict[str, Any]:
        """Every setting that changes the draws, JSON-ready."""
        return {"sweep": "gpds.LatticeSweep", "representation": self.representation,
                "n_latent": self.n_latent, "tune": self.tune,
                "augmentation": self.augmentation}

    def step(self, state: LatentState,
             rngs: Sequence[np.random.Generator]) -> tuple[LatentState, dict[str, Any]]:
        """One sweep of every chain.

        Returns
        -------
        state : LatentState
        info : dict
            ``n_rejections`` (n_chains,) and ``normaliser`` ``Z[g]`` (n_chains,) of the
            history drawn this sweep.
        """
        state.check_rngs(rngs)
        mdl = self.model
        parts, n_rej, zs = [], np.zeros(state.n_chains, np.int64), np.zeros(state.n_chains)
        for c in range(state.n_chains):
            sub = state.subset([c])
            eta = mdl.eta(state, c)
            zs[c] = mdl.normaliser(eta)
            counts = mdl.draw_history(eta, rngs[c])
            n_rej[c] = int(counts.sum())
            if self.augmentation == "history":
                lgm = mdl.model_for(counts)
            else:  # λ | g ~ Gamma(N, Z[g]) under p(λ) ∝ 1/λ, then Poisson sites (module doc)
                lgm = mdl.model_for_scale(rngs[c].gamma(len(mdl.data)) / zs[c])
            sub = sub._replace(loglik=loglik_at(lgm, sub.f, sub.beta, [sub.theta_of(0)]),
                               extras={**(sub.extras or {}), REJECTIONS: counts[None]})
            if self.representation == "hmc":  # θ and the whitened field jointly
                sub, _ = JointHMC(lgm, n_tune=self.tune).step(sub, [rngs[c]])
            else:
                hyper = HyperMove(lgm, self.representation) if mdl.hyperpriors else None
                sub, _ = Gibbs(hyper, EllipticalSlice(lgm), n_latent=self.n_latent).step(
                    sub, [rngs[c]])
            parts.append(sub)
        return _concat(parts, state.chains), {"n_rejections": n_rej, "normaliser": zs}


def _concat(parts: Sequence[LatentState], chains: tuple[int, ...]) -> LatentState:
    """One state from single-chain states, in order."""
    extras = {k: np.concatenate([p.extras[k] for p in parts]) for k in parts[0].extras}
    return LatentState(
        {k: np.concatenate([p.theta[k] for p in parts]) for k in parts[0].theta},
        tuple(p.priors[0] for p in parts), np.concatenate([p.f for p in parts]),
        np.concatenate([p.white for p in parts]), np.concatenate([p.beta for p in parts]),
        np.concatenate([p.loglik for p in parts]), chains, extras)
