"""The default sweep of a latent Gaussian model, per prior backend (measured, decision 69).

``"hmc"`` (joint HMC over hyperparameters, coefficients and the whitened field,
:class:`~lattice_lgm.samplers.JointHMC`) on the circulant and GMRF backends: on bei at 20 m it
reached R-hat ≤ 1.01 (circulant: 83 s, GMRF: 46 s) where ``prior-white``, ``asis`` and
``surr-site`` were still at R-hat 1.4–2.7 after 1000 sweeps
(benchmarks/results/mixing_lgcp.json).  ``"prior-white"`` on the dense backend, where joint
HMC is not built (the gradient in θ through a Cholesky factor).
"""

from __future__ import annotations

from typing import Any

from ..settings import RUN_DEFAULTS
from .ess import EllipticalSlice
from .gibbs import Gibbs
from .hmc import JointHMC
from .hyper import HyperMove

__all__ = ["METHODS", "default_method_for", "default_sweep"]

#: the samplers beyond the Murray–Adams representations, and the backends each runs on
METHODS = {"hmc": ("circulant", "gmrf"), "asis": ("circulant", "gmrf", "dense")}


def default_method_for(backend: str) -> str:
    """The default sampler on ``backend`` (module docstring)."""
    return "hmc" if backend in METHODS["hmc"] else "prior-white"


def default_sweep(model: Any, representation: str = RUN_DEFAULTS.representation,
                  n_latent: int = RUN_DEFAULTS.n_latent, tune: int = 0,
                  **hyper: Any) -> Gibbs | JointHMC:
    """Joint HMC, or one hyperparameter move then ``n_latent`` elliptical slice updates.

    Parameters
    ----------
    model : LatentGaussianModel
    representation : str
        ``"auto"`` (:func:`default_method_for` the prior's backend), ``"hmc"``
        (:class:`JointHMC`, circulant and GMRF), ``"asis"`` (interweaving of the ``fixed`` and
        ``prior-white`` moves, Yu & Meng 2011; where ``fixed`` exists: not for smooth kernels
        on the torus), or a Murray–Adams representation of the hyperparameter move
        (:data:`REPRESENTATIONS`).
    n_latent : int
        Elliptical slice updates of the field (and coefficients) per sweep (Gibbs only).
    tune : int
        Warm-up iterations in which an adaptive sweep (HMC) adapts; the run's ``tune``.
    **hyper
        Passed to :class:`HyperMove` (or to :class:`JointHMC` for ``"hmc"``).

    Returns
    -------
    Gibbs or JointHMC
    """
    rep = representation
    if rep == "auto":
        rep = default_method_for(model.prior.capabilities.backend)
    if rep == "hmc":
        return JointHMC(model, n_tune=tune, **hyper)
    if rep == "asis":
        # ancillarity–sufficiency interweaving (Yu & Meng 2011): θ | f (the sufficient,
        # centred augmentation), then θ | ν with ν = W_θ⁻¹ f recomputed at the new θ (the
        # ancillary, whitened one), then the field's updates
        return Gibbs([HyperMove(model, "fixed", **hyper),
                      HyperMove(model, "prior-white", **hyper)],
                     EllipticalSlice(model), n_latent=n_latent)
    return Gibbs(HyperMove(model, rep, **hyper), EllipticalSlice(model), n_latent=n_latent)
