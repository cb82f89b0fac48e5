r"""Elliptical slice sampling of ``Z | Y, X, ξ`` (Gadd et al., §4.2, Algorithm 3).

The target is the full conditional
``p(Z | Y, X, ξ) ∝ p(Y | Z, θ, β) · Π_j N(z_:,j | 0, K_z)`` — a likelihood (eq. 1) times a
Gaussian prior (eq. 2) — so Murray, Adams & MacKay's (2010, Fig. 2) elliptical slice sampler
applies with the prior ``N(0, K_z)`` per column: each step moves on the ellipse
``Z' = ν sin α + Z cos α`` through the current ``Z`` and a prior draw ``ν`` and needs no tuning.

Unlike :mod:`lattice_lgm.samplers.ess` (many chains, circulant or sparse priors, compiled
kernels), this is one chain with a dense ``K_z`` factorised once per call: the step costs one
``O(N³)`` Cholesky of ``K_f + β⁻¹ I`` per likelihood evaluation, which dwarfs the loop.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._validation import positive_int
from ..errors import InvalidParameterError, SamplerError
from .density import (
    as_draws,
    check_hyper,
    check_jitter,
    check_x,
    check_y,
    kz_factor,
    log_p_y_given_z,
)
from .kernels import GPLVMHyper

__all__ = ["LatentDraws", "sample_latent"]

TWO_PI = 2.0 * np.pi


class LatentDraws(NamedTuple):
    """The result of :func:`sample_latent`.

    Attributes
    ----------
    z : ndarray, shape (N, k_z)
        The state after the last step.
    loglik : float
        ``log p(Y | z, θ, β)`` (eq. 1) at :attr:`z` — pass it back as ``loglik`` to continue.
    path : ndarray, shape (n_steps, N, k_z), or None
        The state after every step when ``keep_path=True``.
    n_evals : int
        Likelihood evaluations over all steps (1 + the number of shrinks, per step).
    """

    z: np.ndarray
    loglik: float
    path: np.ndarray | None
    n_evals: int


def sample_latent(y: np.ndarray, x: np.ndarray, hyper: GPLVMHyper, z: np.ndarray,
                  rng: np.random.Generator, n_steps: int = 1, *, jitter: float = 1e-6,
                  loglik: float | None = None, keep_path: bool = False,
                  max_shrink: int = 200) -> LatentDraws:
    r"""``n_steps`` elliptical slice updates of ``Z`` given ``Y``, ``X`` and ``ξ`` (Algorithm 3).

    Parameters
    ----------
    y : ndarray, shape (N, k_y)
    x : ndarray, shape (N, k_x)
    hyper : GPLVMHyper
        ``ξ``, held fixed (e.g. a draw of :class:`~lattice_lgm.gplvm.pmmh.AdaptivePMMH`).
    z : ndarray, shape (N, k_z)
        The current state.
    rng : numpy.random.Generator
    n_steps : int
    jitter : float
        ``ε`` on ``K_z``'s diagonal (§6.1) — part of the prior ``ν`` is drawn from.
    loglik : float, optional
        ``log p(Y | z, θ, β)`` if already known (saves one evaluation); computed otherwise.
    keep_path : bool
        Also return every step's state.
    max_shrink : int
        Cap on bracket shrinks per step.  The bracket shrinks onto ``α = 0``, the current state,
        which is always on the slice, so reaching it means a broken likelihood and raises.

    Returns
    -------
    LatentDraws

    Raises
    ------
    SamplerError
        If the start has a non-finite likelihood or a step needs more than ``max_shrink``
        shrinks (the error carries the step's state).
    """
    check_hyper(hyper)
    y = check_y(y)
    x = check_x(x, y.shape[0], hyper)
    jitter = check_jitter(jitter)
    n_steps = positive_int("n_steps", n_steps, "run at least one step")
    max_shrink = positive_int("max_shrink", max_shrink, "e.g. 200")
    if not isinstance(rng, np.random.Generator):
        raise InvalidParameterError(
            f"rng={rng!r} is not a numpy.random.Generator; pass np.random.default_rng(seed).")
    z = as_draws(z, y.shape[0], hyper.k_z)
    if z.shape[0] != 1:
        raise InvalidParameterError(
            f"z holds {z.shape[0]} draws; sample_latent moves one state of shape (N, k_z).")
    z = z[0].copy()
    chol_z = kz_factor(x, hyper, jitter)

    def loglik_of(zz: np.ndarray) -> float:
        return float(log_p_y_given_z(y, zz, hyper)[0])

    ll = loglik_of(z) if loglik is None else float(loglik)
    if not np.isfinite(ll):
        raise SamplerError(f"the starting Z has log p(Y|Z) = {ll!r}; start from a finite one.",
                           {"loglik": ll})
    path = np.empty((n_steps, *z.shape)) if keep_path else None
    n_evals = 0
    for t in range(n_steps):
        # 1: the ellipse through Z and ν, ν_:,j ~ N(0, K_z) iid over columns
        nu = chol_z @ rng.standard_normal(z.shape)
        # 2: the slice threshold log h = log p(Y|Z) + log u
        log_h = ll + np.log(rng.uniform())
        # 3: the initial angle and the bracket [α − 2π, α] that contains α = 0
        alpha = rng.uniform(0.0, TWO_PI)
        lo, hi = alpha - TWO_PI, alpha
        for _ in range(max_shrink + 1):
            # 5: a point on the ellipse
            prop = nu * np.sin(alpha) + z * np.cos(alpha)
            ll_prop = loglik_of(prop)
            n_evals += 1
            # 6–7: on the slice — accept
            if ll_prop > log_h:
                z, ll = prop, ll_prop
                break
            # 9–10: shrink the bracket towards α = 0 (the current state) ...
            if alpha < 0.0:
                lo = alpha
            else:
                hi = alpha
            # 11: ... and draw the next angle from it
            alpha = rng.uniform(lo, hi)
        else:
            raise SamplerError(
                f"elliptical slice step {t} shrank {max_shrink} times without reaching the "
                "slice; the likelihood is not a deterministic function of Z.",
                {"step": t, "bracket": (lo, hi), "log_h": float(log_h), "loglik": ll})
        if path is not None:
            path[t] = z
    return LatentDraws(z, ll, path, n_evals)
