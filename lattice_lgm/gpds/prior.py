"""Exact samples from one density drawn from the GPDS prior (Adams, Murray & MacKay 2009, §3).

Algorithm 1 of the paper, step by step: proposals ``x̃ ~ π`` (step 3); the function at ``x̃``
drawn from the Gaussian process *conditional on every value drawn so far* (step 4); a uniform
``r`` (step 5); accept when ``r < Φ(g̃)`` (steps 6–10); ``x̃`` and ``g̃`` join the conditioning
set either way (step 11); until ``P`` proposals are accepted (step 12).  Retrospective
sampling: ``g`` is discovered only where it is needed, so the accepted points are exact and
exchangeable draws from ``f ∝ Φ(g) π``.

Cost: the conditioning set grows by one point per proposal, and its Cholesky factor by one
row, ``O(n²)`` per proposal (a forward solve), never refactored.  With ``K = L Lᵀ`` and the
white vector ``w = L⁻¹(G − μ)``, the conditional of the next value is
``g̃ = μ + lᵀ w + d z`` with ``l = L⁻¹ k(X, x̃)``, ``d² = k(x̃, x̃) − lᵀl`` and ``z ~ N(0, 1)``;
``z`` is the new entry of ``w`` and ``[lᵀ, d]`` the new row of ``L``.  A nugget
``jitter · sd²`` on the diagonal (default :data:`JITTER`) keeps ``d² > 0`` when proposals
nearly coincide (squared-exponential kernels are numerically rank deficient there).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.linalg import solve_triangular

from .._validation import positive_int
from ..covariance import Covariance
from ..errors import InvalidParameterError, NotPositiveDefiniteError
from .base import link

__all__ = ["JITTER", "PriorHistory", "conditional_mean", "sample_prior"]

#: relative nugget on the GP's diagonal (× sd²): conditional variances stay positive
JITTER = 1e-10


@dataclass(frozen=True)
class PriorHistory:
    """The latent history of Algorithm 1: every proposal, its function value, its fate.

    Attributes
    ----------
    x : ndarray, shape (n_proposals, d)
        Proposals in the order they were made.
    g : ndarray, shape (n_proposals,)
        The function ``g`` at each proposal.
    accepted : ndarray of bool, shape (n_proposals,)
    chol : ndarray, shape (n_proposals, n_proposals)
        The Cholesky factor of ``K(x, x) + jitter · sd² I`` grown row by row.
    """

    x: np.ndarray
    g: np.ndarray
    accepted: np.ndarray
    chol: np.ndarray
    #: leading entries that were given (the conditioning set a run continued from, §4.4)
    n_given: int = 0

    @property
    def samples(self) -> np.ndarray:
        """The accepted points, shape (P, d): exact draws from ``f ∝ Φ(g) π``."""
        return self.x[self.n_given:][self.accepted[self.n_given:]]

    @property
    def rejections(self) -> np.ndarray:
        """The rejected proposals, shape (M, d) (the latent history of §4)."""
        return self.x[self.n_given:][~self.accepted[self.n_given:]]


def sample_prior(kernel: Covariance, base: Any, n_samples: int, rng: np.random.Generator,
                 *, link_name: str = "logistic", mean: float = 0.0,
                 jitter: float = JITTER, max_proposals: int = 100_000,
                 given: tuple[np.ndarray, np.ndarray] | None = None) -> PriorHistory:
    """Algorithm 1: ``n_samples`` exact samples from one density drawn from the GPDS prior.

    Parameters
    ----------
    kernel : Covariance
        The GP's covariance (the paper's ``K(x, x′) = α exp(−½ Σ_i ℓ_i⁻²(x_i − x′_i)²)`` is
        ``SquaredExponential(sd=√α, lengthscale=(ℓ_1, …))``).
    base : GaussianBase or UniformBase
        The base measure ``π`` (proposals).
    n_samples : int
        ``P``, the number of accepted samples wanted.
    rng : numpy.random.Generator
    link_name : {"logistic", "probit"}
        The squashing function ``Φ``.
    mean : float
        A constant GP mean (the paper's is 0).
    jitter : float
        Relative nugget (× ``sd²``) on the GP's diagonal.
    max_proposals : int
        Stop with an error after this many proposals (a density whose mass ``Z_π[g]`` is tiny
        would reject for ever): say what was reached instead of running on.
    given : (ndarray (n0, d), ndarray (n0,)), optional
        Points where ``g`` is already known and its values: the run continues the generative
        process from them (§4.4: predictive samples from a posterior state of the latent
        history, its data and rejections).  Factored once, then grown as above.

    Returns
    -------
    PriorHistory
        Its :attr:`~PriorHistory.samples` are the ``P`` accepted points.

    Raises
    ------
    InvalidParameterError
        Bad arguments, or ``max_proposals`` reached before ``P`` acceptances.
    NotPositiveDefiniteError
        A conditional variance not positive even with the nugget (raise ``jitter``).
    """
    p = positive_int("n_samples", n_samples, "the number of accepted samples, e.g. 200")
    cap = positive_int("max_proposals", max_proposals, "a bound on the proposals, e.g. 100000")
    phi = link(link_name)
    if not isinstance(kernel, Covariance):
        raise InvalidParameterError(
            f"kernel={kernel!r} must be a lattice_lgm.covariance.Covariance, e.g. "
            "SquaredExponential(sd=1.0, lengthscale=(1.0, 1.0)).")
    if not isinstance(rng, np.random.Generator):
        raise InvalidParameterError(
            f"rng={rng!r} must be a numpy.random.Generator, e.g. np.random.default_rng(1).")
    if not (isinstance(mean, (int, float)) and math.isfinite(mean)):
        raise InvalidParameterError(f"mean={mean!r} must be a finite number (the GP's mean).")
    if not (isinstance(jitter, (int, float)) and 0.0 <= jitter < 1.0):
        raise InvalidParameterError(f"jitter={jitter!r} must be in [0, 1) (× sd²).")
    nugget = float(jitter) * kernel.sd**2
    d = base.ndim
    n0 = 0
    if given is not None:
        x0 = np.asarray(given[0], dtype=float).reshape(-1, d)
        g0 = np.asarray(given[1], dtype=float).ravel()
        if len(x0) != len(g0) or not (np.all(np.isfinite(x0)) and np.all(np.isfinite(g0))):
            raise InvalidParameterError(
                f"given has {len(x0)} points and {len(g0)} values; give finite (points (n0, "
                f"{d}), values (n0,)) of the same length.")
        n0 = len(x0)
    cap += n0
    cap0 = min(cap, max(16, 4 * p + n0))
    L = np.zeros((cap0, cap0))
    X = np.empty((cap0, d))
    w = np.empty(cap0)  # L⁻¹(G − μ): the white draws, one per proposal
    acc = np.zeros(cap0, dtype=bool)
    if n0:
        try:
            L[:n0, :n0] = np.linalg.cholesky(kernel(x0) + nugget * np.eye(n0))
        except np.linalg.LinAlgError:
            raise NotPositiveDefiniteError(
                "the given points' covariance is not positive definite (points nearly "
                f"coincide); raise jitter={jitter!r}.") from None
        X[:n0] = x0
        w[:n0] = solve_triangular(L[:n0, :n0], g0 - mean, lower=True, check_finite=False)
    n, n_acc = n0, 0
    while n_acc < p:  # step 12
        if n == cap:
            raise InvalidParameterError(
                f"max_proposals={cap - n0} reached with {n_acc} of n_samples={p} accepted: "
                "this density puts little mass where π proposes (Z_π[g] ≈ "
                f"{n_acc / max(n - n0, 1):.3g}); raise max_proposals, or use a GP mean or α "
                "that gives Φ(g) more mass.")
        if n == len(L):  # grow the buffers (the factor keeps its rows: never refactored)
            m = min(cap, 2 * n)
            L2 = np.zeros((m, m))
            L2[:n, :n] = L[:n, :n]
            L, X = L2, np.concatenate([X[:n], np.empty((m - n, d))])
            w = np.concatenate([w[:n], np.empty(m - n)])
            acc = np.concatenate([acc[:n], np.zeros(m - n, dtype=bool)])
        x = base.sample(rng, 1)  # step 3: x̃ ~ π
        kxx = kernel.variance + nugget  # k(x, x) of a stationary kernel
        if n:
            # step 4: g̃ ~ GP(g | X, G, x̃): mean μ + lᵀw, variance k(x̃, x̃) − lᵀl
            k = kernel(X[:n], x)[:, 0]
            lvec = solve_triangular(L[:n, :n], k, lower=True, check_finite=False)
            d2 = kxx - float(lvec @ lvec)
            cond_mean = mean + float(lvec @ w[:n])
        else:
            lvec, d2, cond_mean = np.zeros(0), kxx, float(mean)
        if not d2 > 0.0:
            raise NotPositiveDefiniteError(
                f"the conditional variance of proposal {n} is {d2:.3g} <= 0 (it nearly "
                f"coincides with an earlier one); raise jitter={jitter!r} (× sd²).")
        dd = math.sqrt(d2)
        z = rng.standard_normal()
        g = cond_mean + dd * z
        r = rng.random()  # step 5: r ~ U(0, 1)
        acc[n] = bool(r < phi(np.asarray(g)))  # steps 6–10: accept when r < Φ(g̃)
        n_acc += int(acc[n])
        # step 11: x̃ and g̃ join the conditioning set (a new row of L, a new white draw)
        X[n] = x[0]
        L[n, :n] = lvec
        L[n, n] = dd
        w[n] = z
        n += 1
    G = mean + L[:n, :n] @ w[:n]
    return PriorHistory(X[:n].copy(), G, acc[:n].copy(), L[:n, :n].copy(), n0)


def conditional_mean(kernel: Covariance, history: PriorHistory, points: np.ndarray,
                     mean: float = 0.0) -> np.ndarray:
    """``E[g(points) | the history's values]``: the GP's conditional (kriging) mean.

    ``μ + K(points, X) (L Lᵀ)⁻¹ (G − μ)`` with the history's own factor ``L`` (two
    triangular solves).  Drawn with ``Φ(·) π`` it shows the density a history came from (the
    paper's Figure 1 contours "the approximate unnormalized densities").

    Parameters
    ----------
    kernel : Covariance
        The kernel the history was sampled with.
    history : PriorHistory
    points : ndarray, shape (m, d)
    mean : float
        The GP's constant mean.

    Returns
    -------
    ndarray, shape (m,)
    """
    pts = np.asarray(points, dtype=float)
    if pts.ndim != 2 or pts.shape[1] != history.x.shape[1]:
        raise InvalidParameterError(
            f"points has shape {pts.shape}; give (m, {history.x.shape[1]}) points.")
    L = history.chol
    w = solve_triangular(L, history.g - mean, lower=True, check_finite=False)
    alpha = solve_triangular(L.T, w, lower=False, check_finite=False)
    return mean + kernel(pts, history.x) @ alpha
