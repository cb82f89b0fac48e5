"""Likelihoods on lattice windows: Poisson, Gaussian, Bernoulli, binomial and sigmoidal Poisson.

Each likelihood factorises over the observed cells of a window and offers, for a linear
predictor of shape ``(n_chains, *shape)``: ``loglik`` (Numba, parallel over chains, bitwise
reproducible per chain) with its NumPy twin ``loglik_reference``, ``grad``, ``hess_diag``,
``third_diag``, and per-site Gaussian approximations in precision form (``site_approximation``
with ``"laplace"`` or ``"moments"``, Murray & Adams 2010 eq. 12; ``taylor``, eq. 13).  A site
with no information has precision 0.  See docs/likelihoods.md.
"""

from .base import SITE_METHODS, Likelihood, SiteApproximation
from .bernoulli import LINKS, Bernoulli
from .binomial import Binomial
from .gaussian import Gaussian
from .poisson import Poisson
from .sigmoid_poisson import SigmoidPoisson

__all__ = [
    "LINKS",
    "SITE_METHODS",
    "Bernoulli",
    "Binomial",
    "Gaussian",
    "Likelihood",
    "Poisson",
    "SigmoidPoisson",
    "SiteApproximation",
]
