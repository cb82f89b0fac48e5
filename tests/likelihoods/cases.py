"""Likelihood instances shared by the likelihood tests (seeded, small, every kind)."""

from __future__ import annotations

import numpy as np

from lattice_lgm.likelihoods import (
    Bernoulli,
    Binomial,
    Gaussian,
    Likelihood,
    Poisson,
    SigmoidPoisson,
)

KINDS = ("poisson", "gaussian", "bernoulli-logit", "bernoulli-probit", "binomial-logit",
         "binomial-probit", "sigmoid-poisson-logit", "sigmoid-poisson-probit")
SHAPES = ((11,), (4, 5), (3, 4, 5))


def make(kind: str, shape: tuple[int, ...], seed: int = 0, masked: bool = True) -> Likelihood:
    """A likelihood of ``kind`` on ``shape`` with random data; masked cells hold NaN."""
    rng = np.random.default_rng(seed)
    mask = rng.random(shape) < 0.75 if masked else None
    if mask is not None:
        mask.flat[0] = True
    if kind == "poisson":
        exposure = rng.uniform(0.2, 3.0, shape)
        y = rng.poisson(4.0 * exposure).astype(float)
    elif kind == "gaussian":
        exposure = rng.uniform(0.3, 2.0, shape)  # noise_sd
        y = rng.normal(size=shape)
    elif kind.startswith("binomial"):
        exposure = rng.integers(0, 7, shape).astype(float)  # trials, some 0
        exposure.flat[0] = 5.0
        y = rng.binomial(exposure.astype(int), 0.4).astype(float)
    elif kind.startswith("sigmoid"):
        exposure = rng.uniform(0.0, 8.0, shape)
        exposure[rng.random(shape) < 0.15] = 0.0  # some cells without exposure
        exposure.flat[0] = 5.0
        y = rng.poisson(0.4 * exposure).astype(float)
    else:
        y = (rng.random(shape) < 0.5).astype(float)
    if mask is not None:
        y[~mask] = np.nan
    if kind == "poisson":
        return Poisson(y, exposure=exposure, mask=mask)
    if kind == "gaussian":
        return Gaussian(y, noise_sd=exposure, mask=mask)
    if kind.startswith("binomial"):
        if mask is not None:
            exposure[~mask] = np.nan
        return Binomial(y, exposure, link=kind.split("-")[1], mask=mask)
    if kind.startswith("sigmoid"):
        if mask is not None:
            exposure[~mask] = np.nan
        return SigmoidPoisson(y, exposure, link=kind.split("-")[2], mask=mask)
    return Bernoulli(y, link=kind.split("-")[1], mask=mask)


def scalar(kind: str, y: float, aux_value: float = 1.0) -> Likelihood:
    """A one-site likelihood (exposure, noise_sd or trials ``aux_value``)."""
    if kind == "poisson":
        return Poisson(np.array([y]), exposure=aux_value)
    if kind == "gaussian":
        return Gaussian(np.array([y]), noise_sd=aux_value)
    if kind.startswith("binomial"):
        return Binomial(np.array([y]), aux_value, link=kind.split("-")[1])
    if kind.startswith("sigmoid"):
        return SigmoidPoisson(np.array([y]), aux_value, link=kind.split("-")[2])
    return Bernoulli(np.array([y]), link=kind.split("-")[1])


def eta_for(lik: Likelihood, n_chains: int, seed: int = 1, scale: float = 1.5) -> np.ndarray:
    """A random linear predictor ``(n_chains, *lik.shape)``, NaN at unobserved cells."""
    rng = np.random.default_rng(seed)
    eta = rng.normal(scale=scale, size=(n_chains, *lik.shape))
    eta[:, ~lik.mask] = np.nan
    return eta
