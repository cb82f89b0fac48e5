"""The Gaussian Process Density Sampler (Adams, Murray & MacKay 2009).

A prior over densities ``f(x) = Φ(g(x)) π(x) / Z_π[g]`` with ``g ~ GP`` (their eq. 1).
Modules: ``base`` (base measures ``π`` and squashing functions ``Φ``), ``prior`` (exact
samples from a density drawn from the prior: Algorithm 1), ``history`` (the latent history
and its moves, §4).  Issue 29 builds the latent-history
MCMC (§4), prediction (§4.4) and the lattice-scale version on these.
"""

from .base import LINKS, GaussianBase, UniformBase, link
from .history import (
    LatentHistory,
    change_rejections,
    log_count_ratio,
    move_rejections,
    predictive_samples,
    sweep,
    update_kernel,
    update_values,
)
from .prior import JITTER, PriorHistory, conditional_mean, sample_prior

__all__ = ["JITTER", "LINKS", "GaussianBase", "LatentHistory", "PriorHistory", "UniformBase",
           "change_rejections", "conditional_mean", "link", "log_count_ratio",
           "move_rejections", "predictive_samples", "sample_prior", "sweep", "update_kernel",
           "update_values"]
