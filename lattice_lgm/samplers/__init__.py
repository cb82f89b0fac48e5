"""Samplers: one algorithm per module, each a step ``(state, rngs) -> (state, info)``.

=====================  =========================================================================
module                 algorithm
=====================  =========================================================================
``ess``                elliptical slice sampling (Murray, Adams & MacKay 2010, Fig. 2) and
                       Neal's (1999) M–H baseline (their eq. 3), Numba ``prange`` over chains;
                       ``_ess_kernels``: its compiled blocks of many updates
``line``               slice sampling along a straight line ``f + εν`` (Murray et al. 2010,
                       §3.1; Neal 2003 stepping out and shrinkage)
``hyper``              Murray & Adams (2010) hyperparameter moves, Algorithms 1–4, in the
                       representations fixed / prior-white / surr-* / post-* (and *-scalar on
                       circulant priors); ``_hyper_reps``: the representations at one chain
``slice``              generic univariate and hyperrectangle slice samplers (Neal 2003)
``gibbs``              a sweep: hyperparameter moves then k latent updates
``state``              chain state, per-chain random streams, white representations
``hmc``                joint HMC over (θ, β, whitened field) on circulant priors and spectral
                       Matérn-SPDE GMRFs (FFT / DCT-II gradients), with Stan's
                       windowed adaptation carried in the chain state; its parts:
                       ``_hmc_dynamics`` (potential, gradient, integrators), ``_hmc_adapt``
                       (the windowed adaptation), ``_hmc_field`` (the whitened field per
                       transform, the spectrum table), ``_hmc_kernels`` (Numba kernels)
``defaults``           the default sweep per prior backend (measured, decision 69)
``warmstart``          the field's posterior mode at fixed θ (Newton with the prior's own
                       solves) and the warm start of chains from it
=====================  =========================================================================
"""

from . import hyper
from ._latent import init_state, state_from_fields
from .defaults import default_method_for, default_sweep
from .ess import EllipticalSlice, NealMH
from .gibbs import Gibbs, sweep_settings
from .hmc import JointHMC
from .hyper import REPRESENTATIONS, HyperMove, representations_for
from .line import LineSlice
from .slice import SliceResult, slice_hyperrect, slice_univariate
from .state import LatentState, chain_rngs
from .warmstart import WarmStartReport, field_mode, warm_start

__all__ = [
    "REPRESENTATIONS",
    "EllipticalSlice",
    "Gibbs",
    "HyperMove",
    "JointHMC",
    "LatentState",
    "LineSlice",
    "NealMH",
    "SliceResult",
    "WarmStartReport",
    "chain_rngs",
    "default_method_for",
    "default_sweep",
    "field_mode",
    "hyper",
    "init_state",
    "representations_for",
    "slice_hyperrect",
    "slice_univariate",
    "state_from_fields",
    "sweep_settings",
    "warm_start",
]
