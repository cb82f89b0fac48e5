"""The Gaussian Process Density Sampler (Adams, Murray & MacKay 2009).

A prior over densities ``f(x) = Φ(g(x)) π(x) / Z_π[g]`` with ``g ~ GP`` (their eq. 1).
Modules: ``base`` (base measures ``π`` and squashing functions ``Φ``), ``prior`` (exact
samples from a density drawn from the prior: Algorithm 1), ``state`` (the latent history and
the values' Bernoulli model), ``history`` (its moves, §4.1, §4.2, §4.4, and the sweep),
``hyper`` (the hyperparameters θ and φ given it, §4.3).  Issue 29 builds the latent-history
MCMC (§4), prediction (§4.4) and the lattice-scale version on these.
"""

from .base import LINKS, GaussianBase, UniformBase, link
from .history import (
    KERNEL_METHODS,
    change_rejections,
    log_count_ratio,
    move_rejections,
    predictive_samples,
    sweep,
    update_values,
)
from .hyper import gp_logpdf, update_base, update_kernel, update_kernel_surrogate
from .prior import JITTER, PriorHistory, conditional_mean, sample_prior
from .state import LatentHistory

__all__ = ["JITTER", "KERNEL_METHODS", "LINKS", "GaussianBase", "LatentHistory", "PriorHistory",
           "UniformBase", "change_rejections", "conditional_mean", "gp_logpdf", "link",
           "log_count_ratio", "move_rejections", "predictive_samples", "sample_prior", "sweep",
           "update_base", "update_kernel", "update_kernel_surrogate", "update_values"]
