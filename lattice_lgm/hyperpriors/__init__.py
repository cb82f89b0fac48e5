"""Priors for covariance hyperparameters, each with its support stated explicitly.

Every prior is a normalised density on the natural scale (``logpdf`` integrates to 1 over the
support, truncated priors included) together with the bijection to the unconstrained scale the
samplers move on: ``"log"`` for positive parameters (range, sd, lengthscale), ``"identity"`` for
real ones (intercepts, regression coefficients, the mean offset).  ``logpdf_unconstrained`` is
the density of ``u = transform(x)``, Jacobian included, so a slice sampler on ``u`` targets the
right distribution.

A finite ``upper`` bound matters for the range: a circulant embedding is sized for the largest
range it will ever see, so the prior is truncated to ``(0, upper]`` and renormalised; the sampler
is told the bound (``unconstrained_bounds``) and never proposes beyond it.

Supports
--------
Positive (``transform="log"``) priors have support ``(0, upper]`` (``upper`` may be ``inf``; the
lower end 0 is excluded) except :class:`LogUniform`, whose support is ``[lower, upper]``.
Real (``transform="identity"``) priors have support ``[lower, upper]`` (``(-inf, inf)`` for
:class:`Normal`).  Infinite or NaN arguments are never in the support: ``logpdf`` returns
``-inf`` outside the support and NaN for a NaN argument, and never raises for a float.

The base class and its checks are in :mod:`.base`, the penalised-complexity priors in
:mod:`.pc`, the standard families in :mod:`.distributions`.
"""

from .base import Hyperprior
from .distributions import HalfNormal, LogNormal, LogUniform, Normal, Uniform
from .pc import PCPriorRange, PCPriorSD

__all__ = [
    "HalfNormal",
    "Hyperprior",
    "LogNormal",
    "LogUniform",
    "Normal",
    "PCPriorRange",
    "PCPriorSD",
    "Uniform",
]
