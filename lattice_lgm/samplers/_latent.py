"""Shared pieces of the latent-field samplers: likelihood at a state, initial states."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .._validation import chain_array, finite_array
from ..errors import InvalidParameterError, ShapeMismatchError
from ..models.latent import LatentGaussianModel
from ._kernels import site_kernels
from .state import LatentState, stack_theta, white_ops


def xbeta(model: LatentGaussianModel, beta: np.ndarray) -> np.ndarray:
    """In-block covariate terms ``X β`` at the observed sites, (n, n_obs); (n, 0) without."""
    if not model.n_beta:
        return np.zeros((len(beta), 0))
    return np.ascontiguousarray(beta @ model.covariates_obs)


def base(model: LatentGaussianModel, thetas: Sequence[Mapping[str, float]],
         out: np.ndarray | None = None) -> np.ndarray:
    """The non-rotating part of ``η`` per chain (mean + offsets), shape (n, n_obs)."""
    if out is None:
        return np.stack([model.base_obs(t) for t in thetas])
    for c, t in enumerate(thetas):
        out[c] = model.base_obs(t)
    return out


def flat(x: np.ndarray) -> np.ndarray:
    """``(n, *shape) -> (n, prod(shape))`` view (C-contiguous input)."""
    return x.reshape(len(x), -1)


def loglik_at(model: LatentGaussianModel, f: np.ndarray, beta: np.ndarray,
              thetas: Sequence[Mapping[str, float]]) -> np.ndarray:
    """Full log-likelihood (with constants) of fields ``f`` (n, *state) per chain, shape (n,)."""
    lik = model.likelihood
    kern = site_kernels(lik)
    n = len(f)
    f2 = flat(np.ascontiguousarray(f, dtype=np.float64))
    xa = xbeta(model, beta)
    out = np.empty(n)
    kern.rotated_loglik(f2, f2, model.state_index, xa, xa, base(model, thetas), np.ones(n),
                        np.zeros(n), lik.y_obs, lik.aux_obs, out)
    return out + lik.constant


def init_state(
    model: LatentGaussianModel,
    rngs: Sequence[np.random.Generator],
    chains: Sequence[int] | None = None,
    theta: Mapping[str, float] | Sequence[Mapping[str, float]] | None = None,
) -> LatentState:
    """Start chains at an exact prior draw of the field given ``theta``.

    Parameters
    ----------
    model : LatentGaussianModel
    rngs : sequence of Generator
        One per chain (:func:`~lattice_lgm.samplers.chain_rngs`); each chain draws its white
        vector from its own stream (then ``β`` from it).
    chains : sequence of int, optional
        Global chain indices (default ``0 … n−1``).
    theta : mapping or sequence of mappings, optional
        Starting hyperparameters (one mapping for all chains or one per chain); default the
        model's initial values.  Missing names take the model's values.

    Returns
    -------
    LatentState
    """
    n = len(rngs)
    if n == 0 or not all(isinstance(r, np.random.Generator) for r in rngs):
        raise InvalidParameterError("rngs must be a non-empty sequence of numpy Generators.")
    chains = tuple(range(n)) if chains is None else tuple(int(c) for c in chains)
    if len(chains) != n:
        raise ShapeMismatchError(f"{len(chains)} chain indices for {n} rngs.")
    theta0 = model.initial_theta()
    if theta is None or isinstance(theta, Mapping):
        per = [dict(theta0, **(theta or {})) for _ in range(n)]
    else:
        if len(theta) != n:
            raise ShapeMismatchError(f"theta has {len(theta)} entries for {n} chains.")
        per = [dict(theta0, **t) for t in theta]
    for t in per:
        unknown = set(t) - set(theta0)
        if unknown:
            raise InvalidParameterError(
                f"theta has unknown names {sorted(unknown)}; known: {sorted(theta0)}."
            )
        if not np.isfinite(model.log_hyperprior(t)):
            raise InvalidParameterError(
                f"starting theta={t} has zero hyperprior density; start inside the support."
            )
    ops = white_ops(model.prior)
    priors = []
    whites = []
    betas = np.zeros((n, model.n_beta))
    for c in range(n):
        p = model.prior_for(per[c], model.prior)
        priors.append(p)
        whites.append(ops.draw(p, rngs[c]))
        if model.n_beta:
            betas[c] = model.beta_sd * rngs[c].standard_normal(model.n_beta)
    white = np.stack(whites)
    f = np.concatenate([ops.colorize(p, white[c:c + 1]) for c, p in enumerate(priors)])
    ll = loglik_at(model, f, betas, per)
    return LatentState(stack_theta(per), tuple(priors), f, white, betas, ll, chains)


def state_from_fields(
    model: LatentGaussianModel,
    f: np.ndarray,
    theta: Sequence[Mapping[str, float]],
    rngs: Sequence[np.random.Generator],
    chains: Sequence[int] | None = None,
    beta: np.ndarray | None = None,
) -> LatentState:
    """A state at given fields and hyperparameters (user starting values, exact test draws).

    Parameters
    ----------
    model : LatentGaussianModel
    f : ndarray, shape (n_chains, *prior.state_shape)
        Latent fields on the prior's state.
    theta : sequence of mappings, length n_chains
        Each chain's hyperparameters (missing names take the model's values).
    rngs : sequence of Generator
        Used only where the white vector is not determined by ``f`` (circulant bins with
        ``λ = 0`` are drawn from their prior, their exact conditional).
    chains : sequence of int, optional
    beta : ndarray, shape (n_chains, p), optional

    Returns
    -------
    LatentState
    """
    n = len(theta)
    f = chain_array("f", f, model.prior.state_shape)
    finite_array("f", f)
    if len(f) != n or len(rngs) != n:
        raise ShapeMismatchError(f"f has {len(f)} chains, theta {n}, rngs {len(rngs)}.")
    theta0 = model.initial_theta()
    per = [dict(theta0, **t) for t in theta]
    chains = tuple(range(n)) if chains is None else tuple(int(c) for c in chains)
    betas = np.zeros((n, model.n_beta)) if beta is None else np.asarray(beta, dtype=np.float64)
    if betas.shape != (n, model.n_beta):
        raise ShapeMismatchError(f"beta has shape {betas.shape}; expected {(n, model.n_beta)}.")
    ops = white_ops(model.prior)
    priors = [model.prior_for(t, model.prior) for t in per]
    white = np.concatenate([ops.whiten(p, f[c:c + 1], rngs[c]) for c, p in enumerate(priors)])
    ll = loglik_at(model, f, betas, per)
    return LatentState(stack_theta(per), tuple(priors), f.copy(), white, betas, ll, chains)
