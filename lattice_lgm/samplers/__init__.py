"""Samplers: one algorithm per module, each a step ``(state, rngs) -> (state, info)``.

=====================  =========================================================================
module                 algorithm
=====================  =========================================================================
``ess``                elliptical slice sampling (Murray, Adams & MacKay 2010, Fig. 2) and
                       Neal's (1999) M–H baseline (their eq. 3), Numba ``prange`` over chains
``line``               slice sampling along a straight line ``f + εν`` (Murray et al. 2010,
                       §3.1; Neal 2003 stepping out and shrinkage)
``hyper``              Murray & Adams (2010) hyperparameter moves, Algorithms 1–4, in the
                       representations fixed / prior-white / surr-* / post-* (and *-scalar on
                       circulant priors)
``slice``              generic univariate and hyperrectangle slice samplers (Neal 2003)
``gibbs``              a sweep: hyperparameter moves then k latent updates
``state``              chain state, per-chain random streams, white representations
=====================  =========================================================================
"""

from . import hyper
from ._latent import init_state, state_from_fields
from .ess import EllipticalSlice, NealMH
from .gibbs import Gibbs, sweep_settings
from .hyper import REPRESENTATIONS, HyperMove, representations_for
from .line import LineSlice
from .slice import SliceResult, slice_hyperrect, slice_univariate
from .state import LatentState, chain_rngs

__all__ = [
    "REPRESENTATIONS",
    "EllipticalSlice",
    "Gibbs",
    "HyperMove",
    "LatentState",
    "LineSlice",
    "NealMH",
    "SliceResult",
    "chain_rngs",
    "hyper",
    "init_state",
    "representations_for",
    "slice_hyperrect",
    "slice_univariate",
    "state_from_fields",
    "sweep_settings",
]
