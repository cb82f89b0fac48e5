r"""Predictions from posterior draws ``(ξ^{(g)}, Z^{(g)})`` (Gadd et al., §5, eqs. 7–8).

The marginal predictive density (eq. 7) integrates over ``z_*``, ``Z`` and ``ξ``.  Given draws
``(ξ^{(g)}, Z^{(g)})`` from the chain (Algorithm 2 for ``ξ``, Algorithm 3 for ``Z``):

1. draw ``z_*^{(g)}`` from eq. 8, the GP predictive of the latent point at ``x_*``:
   ``z_{*j} ~ N(K_{z*}ᵀ K_z⁻¹ z_:,j, s_*)``, ``s_* = k_z(x_*, x_*) − K_{z*}ᵀ K_z⁻¹ K_{z*}``;
2. the GP regression predictive of each feature given ``z_*``:
   ``y_{*i} ~ N(A y_:,i, S + β⁻¹)``, ``A = K_{f*}ᵀ (K_f + β⁻¹ I)⁻¹``,
   ``S = k_f(z_*, z_*) − K_{f*}ᵀ (K_f + β⁻¹ I)⁻¹ K_{f*}``;
3. average the Gaussians over the draws: the paper's estimate
   ``p(y_* | x_*, Y, X) ≈ (1/G) Σ_g p(y_* | z_*^{(g)}, Z^{(g)}, Y, θ^{(g)}, β^{(g)})``, and the
   predictive mean ``(1/G) Σ_g A^{(g)} Y`` (the paper's displayed formula omits the inverse of
   ``K_f + β⁻¹ I``; the mean of the Gaussian in step 2 has it).

``K_z`` carries the white noise ``ε`` of §6.1 on its diagonal, and so does ``k_z(x_*, x_*)``
(``= 1 + ε``: the nugget is part of every latent point's prior variance); cross-covariances
never carry it.  Each test point is predicted on its own (its marginal), as in eq. 8.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from scipy.linalg import cho_solve, solve_triangular

from .._validation import finite_array, positive_int
from ..errors import InvalidParameterError, ShapeMismatchError
from .density import (
    as_draws,
    check_hyper,
    check_jitter,
    check_x,
    check_y,
    kf_noise_factor,
    kz_factor,
)
from .kernels import GPLVMHyper, k_f, k_z

__all__ = ["Predictive", "output_predictive", "predictive_density", "sample_z_star"]

_LOG_2PI = float(np.log(2.0 * np.pi))


class Predictive(NamedTuple):
    """The Monte Carlo predictive of :func:`predictive_density`.

    With ``D`` posterior draws, ``L`` latent draws ``z_*`` per posterior draw, ``M`` test
    points, ``G`` grid values and ``k_y`` features:

    Attributes
    ----------
    grid : ndarray, shape (G, k_y)
        The ``y`` values of feature ``i`` are ``grid[:, i]``.
    density : ndarray, shape (M, G, k_y)
        ``p(y_{*i} = grid[g, i] | x_*[m], Y, X)``, the mixture of the ``D·L`` Gaussians.
    mean : ndarray, shape (M, k_y)
        The predictive mean, the average of the components' means.
    z_star : ndarray, shape (D, L, M, k_z)
        The ``z_*`` drawn from eq. 8.
    comp_mean : ndarray, shape (D, L, M, k_y)
        Each component's mean ``A y_:,i``.
    comp_var : ndarray, shape (D, L, M)
        Each component's variance ``S + β⁻¹`` (the same for every feature).
    """

    grid: np.ndarray
    density: np.ndarray
    mean: np.ndarray
    z_star: np.ndarray
    comp_mean: np.ndarray
    comp_var: np.ndarray


def sample_z_star(x_star: np.ndarray, x: np.ndarray, z: np.ndarray, hyper: GPLVMHyper,
                  rng: np.random.Generator, n: int = 1, jitter: float = 1e-6) -> np.ndarray:
    r"""Draws of ``z_*`` at each test input from eq. 8 (marginally per test point).

    Parameters
    ----------
    x_star : ndarray, shape (M, k_x)
    x : ndarray, shape (N, k_x)
    z : ndarray, shape (N, k_z)
        One draw of the training latents.
    hyper : GPLVMHyper
        Uses ``σ``.
    rng : numpy.random.Generator
    n : int
        Draws per test point.
    jitter : float
        ``ε`` (§6.1).

    Returns
    -------
    ndarray, shape (n, M, k_z)
    """
    check_hyper(hyper)
    jitter = check_jitter(jitter)
    x = check_x(x, None, hyper)
    x_star = check_x(x_star, None, hyper, name="x_star")
    z = as_draws(z, x.shape[0], hyper.k_z)[0]
    n = positive_int("n", n, "draw at least one z_* per test point")
    chol = kz_factor(x, hyper, jitter)
    k_cross = k_z(x, x_star, hyper.sigma)                                    # K_{z*}: (N, M)
    mean = k_cross.T @ cho_solve((chol, True), z)                            # (M, k_z)
    v = solve_triangular(chol, k_cross, lower=True)
    # s_* = k_z(x_*, x_*) − K_{z*}ᵀ K_z⁻¹ K_{z*} with k_z(x_*, x_*) = 1 + ε (module docstring)
    var = np.maximum(1.0 + jitter - np.sum(v * v, axis=0), 0.0)             # (M,)
    eps = rng.standard_normal((n, *mean.shape))
    return mean[None] + np.sqrt(var)[None, :, None] * eps


def output_predictive(z_star: np.ndarray, z: np.ndarray, y: np.ndarray,
                      hyper: GPLVMHyper) -> tuple[np.ndarray, np.ndarray]:
    r"""The GP regression predictive of ``y_*`` given ``z_*``, ``Z``, ``Y`` and ``ξ`` (§5).

    Parameters
    ----------
    z_star : ndarray, shape (M, k_z)
    z : ndarray, shape (N, k_z)
    y : ndarray, shape (N, k_y)
    hyper : GPLVMHyper
        Uses ``θ_S``, ``θ``, ``β``.

    Returns
    -------
    mean : ndarray, shape (M, k_y)
        ``K_{f*}ᵀ (K_f + β⁻¹ I)⁻¹ Y``.
    var : ndarray, shape (M,)
        ``k_f(z_*, z_*) − K_{f*}ᵀ (K_f + β⁻¹ I)⁻¹ K_{f*} + β⁻¹``, shared by every feature.
    """
    check_hyper(hyper)
    y = check_y(y)
    z = as_draws(z, y.shape[0], hyper.k_z)[0]
    z_star = np.asarray(z_star, dtype=float)
    if z_star.ndim != 2 or z_star.shape[1] != hyper.k_z:
        raise ShapeMismatchError(f"z_star has shape {z_star.shape}; expected (M, {hyper.k_z}).")
    finite_array("z_star", z_star, "latent test points must be finite")
    chol = kf_noise_factor(z, hyper)
    k_cross = k_f(z, z_star, hyper.theta_s, hyper.theta)                     # K_{f*}: (N, M)
    mean = k_cross.T @ cho_solve((chol, True), y)
    v = solve_triangular(chol, k_cross, lower=True)
    # k_f(z_*, z_*) = θ_S for the SE kernel
    var = np.maximum(hyper.theta_s - np.sum(v * v, axis=0), 0.0) + 1.0 / hyper.beta
    return mean, var


def _grid(y_grid: np.ndarray, k_y: int) -> np.ndarray:
    g = np.asarray(y_grid, dtype=float)
    if g.ndim == 1:
        g = np.repeat(g[:, None], k_y, axis=1)
    if g.ndim != 2 or g.shape[1] != k_y or g.shape[0] < 1:
        raise ShapeMismatchError(
            f"y_grid has shape {np.shape(y_grid)}; expected (G,) for one grid shared by all "
            f"features or (G, k_y) = (G, {k_y}) for one column per feature.")
    finite_array("y_grid", g, "grid values must be finite")
    return g


def predictive_density(x_star: np.ndarray, x: np.ndarray, y: np.ndarray,
                       hypers: Sequence[GPLVMHyper], zs: np.ndarray, y_grid: np.ndarray,
                       rng: np.random.Generator, n_latent: int = 1,
                       jitter: float = 1e-6) -> Predictive:
    r"""The Monte Carlo predictive density and mean at test inputs (§5, eqs. 7–8).

    Parameters
    ----------
    x_star : ndarray, shape (M, k_x)
    x : ndarray, shape (N, k_x)
    y : ndarray, shape (N, k_y)
    hypers : sequence of GPLVMHyper, length D
        Posterior draws ``ξ^{(g)}``.
    zs : ndarray, shape (D, N, k_z)
        The matching draws ``Z^{(g)}``.
    y_grid : ndarray, shape (G,) or (G, k_y)
        Where to evaluate each feature's density.
    rng : numpy.random.Generator
        For the ``z_*`` draws (eq. 8), posterior draw by posterior draw.
    n_latent : int
        ``L``: ``z_*`` draws per posterior draw (the paper uses 1).
    jitter : float
        ``ε`` (§6.1).

    Returns
    -------
    Predictive
        ``density`` (M, G, k_y) and ``mean`` (M, k_y), with the components behind them.
    """
    jitter = check_jitter(jitter)
    y = check_y(y)
    hypers = list(hypers)
    if not hypers:
        raise InvalidParameterError("hypers is empty; pass the chain's draws of ξ.")
    for h in hypers:
        check_hyper(h)
    h0 = hypers[0]
    if any(h.k_x != h0.k_x or h.k_z != h0.k_z for h in hypers):
        raise ShapeMismatchError("the draws in hypers disagree on k_x or k_z.")
    x = check_x(x, y.shape[0], h0)
    x_star = check_x(x_star, None, h0, name="x_star")
    zs = as_draws(zs, y.shape[0], h0.k_z, name="zs")
    if zs.shape[0] != len(hypers):
        raise ShapeMismatchError(
            f"zs holds {zs.shape[0]} draws of Z but hypers holds {len(hypers)} draws of ξ; "
            "pass the matching pairs (ξ^(g), Z^(g)).")
    n_latent = positive_int("n_latent", n_latent, "e.g. 1, as in the paper")
    grid = _grid(y_grid, y.shape[1])
    n_d, n_m, k_y = len(hypers), x_star.shape[0], y.shape[1]
    z_star = np.empty((n_d, n_latent, n_m, h0.k_z))
    comp_mean = np.empty((n_d, n_latent, n_m, k_y))
    comp_var = np.empty((n_d, n_latent, n_m))
    density = np.zeros((n_m, grid.shape[0], k_y))
    for d, (h, z) in enumerate(zip(hypers, zs, strict=True)):
        # 1: z_*^(g) from eq. 8
        z_star[d] = sample_z_star(x_star, x, z, h, rng, n_latent, jitter)
        for ell in range(n_latent):
            # 2: the Gaussian of y_* given z_*^(g), Z^(g), Y, θ^(g), β^(g)
            m, v = output_predictive(z_star[d, ell], z, y, h)
            comp_mean[d, ell], comp_var[d, ell] = m, v
            # 3: accumulate the mixture on the grid: N(grid[g, i] | m[m, i], v[m])
            resid = grid[None, :, :] - m[:, None, :]                         # (M, G, k_y)
            density += np.exp(-0.5 * (resid**2 / v[:, None, None]
                                      + np.log(v)[:, None, None] + _LOG_2PI))
    density /= n_d * n_latent
    mean = comp_mean.mean(axis=(0, 1))
    return Predictive(grid, density, mean, z_star, comp_mean, comp_var)
