"""The GPDS's predictive density at test points (Adams, Murray & MacKay 2009, §4.4).

Two estimators from posterior states of the latent history (dense path):

* **Eq. 5** (Chib & Jeliazkov 2001, the paper's): detailed balance of an independence
  Metropolis–Hastings move with proposal ``π`` gives

  ``p(x | D) = E_{p(·|D)}[π(x) min(1, Φ(g(x)) / Φ(g(x′)))] /
  E_{p(·|D ∪ {x})}[min(1, Φ(g(x′)) / Φ(g(x)))]``

  where in the numerator ``x′`` is a predictive sample (the generative process continued
  from the state) and in the denominator ``x′ ~ π`` and the state is a posterior state
  *with ``x`` added to the data* — a separate run of the sampler per test point
  (:func:`chib_jeliazkov`).
* **The proposal count** (this library's): Algorithm 1 continued from a state until its first
  acceptance makes ``K`` proposals, geometric with success probability ``Z_π[g]``, so
  ``E[K | g] = 1 / Z_π[g]`` and ``π(x) Φ(g(x)) K`` is unbiased for the state's density
  ``f(x | g) = π(x) Φ(g(x)) / Z_π[g]`` (eq. 1) when ``g(x)`` and the continuation come from
  one realisation of ``g`` (``g(x)`` drawn given the state first, the continuation given
  both).  Averaged over posterior states: ``p(x | D) = E[f(x | g) | D]`` — one run for every
  test point, no run with augmented data (:func:`count_estimate`).  Decision 105 says why it
  is the default for the experiments.

Monte Carlo errors are batch-means standard errors (the states of one chain are correlated);
eq. 5's log-density error combines its two independent means by the delta method.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.linalg import solve_triangular

from .._validation import finite_array, positive_int
from ..covariance import Covariance
from ..errors import InvalidDataError, InvalidParameterError
from .base import link
from .history import LatentHistory, _conditional, sweep
from .prior import JITTER, sample_prior

__all__ = ["PredictiveDensity", "batch_means_se", "chib_jeliazkov", "count_estimate",
           "count_terms", "eq5_denominator_terms", "eq5_numerator_terms", "run_chain"]

#: batches of the batch-means standard error
N_BATCHES = 20


@dataclass(frozen=True)
class PredictiveDensity:
    """An estimate of ``p(x | D)`` at test points with its Monte Carlo error.

    Attributes
    ----------
    density : ndarray, shape (T,)
    se : ndarray, shape (T,)
        Batch-means standard error of ``density``.
    log_density : ndarray, shape (T,)
    log_se : ndarray, shape (T,)
        Standard error of ``log_density`` (delta method).
    """

    density: np.ndarray
    se: np.ndarray
    log_density: np.ndarray
    log_se: np.ndarray

    @property
    def mean_log_density(self) -> float:
        """The mean test log probability (the paper's §5 score)."""
        return float(np.mean(self.log_density))


def batch_means_se(values: np.ndarray, n_batches: int = N_BATCHES) -> np.ndarray:
    """Standard error of the mean of a correlated series by non-overlapping batch means.

    Parameters
    ----------
    values : ndarray, shape (S, ...)
        One row per (successive) state; ``S ≥ n_batches``.
    n_batches : int

    Returns
    -------
    ndarray, shape (...)
    """
    v = np.asarray(values, dtype=float)
    b = positive_int("n_batches", n_batches, "e.g. 20")
    if b < 2 or len(v) < b:
        raise InvalidParameterError(
            f"{len(v)} states for n_batches={b}: give at least as many states as batches "
            "(and n_batches >= 2).")
    size = len(v) // b
    means = v[: size * b].reshape(b, size, *v.shape[1:]).mean(axis=1)
    return np.std(means, axis=0, ddof=1) / math.sqrt(b)


def _test_points(x: Any, d: int) -> np.ndarray:
    pts = np.asarray(x, dtype=float)
    pts = pts.reshape(-1, 1) if (pts.ndim == 1 and d == 1) else pts
    if pts.ndim != 2 or pts.shape[1] != d:
        raise InvalidParameterError(f"x has shape {np.shape(x)}; give test points (T, {d}).")
    finite_array("x", pts, "test points are finite")
    return pts


def _per_state(value: Any, n: int, name: str) -> list:
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise InvalidParameterError(
                f"{name} has {len(value)} entries for {n} states; give one per state or one "
                "for all.")
        return list(value)
    return [value] * n


def _setup(states: Sequence[LatentHistory], kernel: Any, base: Any, x: Any,
           link_name: str) -> tuple[Any, np.ndarray, Any, np.ndarray]:
    """Φ, the test points, ``(s, (state, kernel, base))`` per state and the output (S, T)."""
    phi = link(link_name)
    kernels = _per_state(kernel, len(states), "kernel")
    bases = _per_state(base, len(states), "base")
    pts = _test_points(x, (base[0] if isinstance(base, (list, tuple)) else base).ndim)
    per = enumerate(zip(states, kernels, bases, strict=True))
    return phi, pts, per, np.empty((len(states), len(pts)))


def _acceptance(ratio: np.ndarray) -> np.ndarray:
    """The independence sampler's acceptance probability ``min(1, ratio)`` (eq. 5)."""
    return np.minimum(1.0, ratio)


def _cond_at(history_x: np.ndarray, chol: np.ndarray, w: np.ndarray, kernel: Covariance,
             x: np.ndarray, mean: float, nugget: float) -> tuple[np.ndarray, np.ndarray]:
    """Marginal conditional mean and sd of ``g`` at each row of ``x`` given a grown factor."""
    A = solve_triangular(chol, kernel(history_x, x), lower=True, check_finite=False)
    var = kernel.variance + nugget - np.sum(A * A, axis=0)
    return mean + A.T @ w, np.sqrt(np.maximum(var, 0.0))


def count_terms(states: Sequence[LatentHistory], rng: np.random.Generator,
                kernel: Covariance | Sequence[Covariance], base: Any, x: Any, *,
                link_name: str = "logistic", mean: float = 0.0, jitter: float = JITTER,
                max_proposals: int = 100_000) -> np.ndarray:
    """Per-state unbiased estimates ``π(x) Φ(g(x)) K`` of the state's density at ``x``.

    For each state: ``g`` at every test point jointly given the state, then Algorithm 1
    continued from the state and the test points until its first acceptance; ``K`` is the
    number of proposals it made (module docstring).

    Parameters
    ----------
    states : sequence of LatentHistory
        Posterior states (a chain's, in order).
    rng : numpy.random.Generator
    kernel : Covariance, or one per state
    base : base measure, or one per state
    x : array_like, shape (T, d)

    Returns
    -------
    ndarray, shape (S, T)
    """
    phi, pts, per, out = _setup(states, kernel, base, x, link_name)
    for s, (state, k, b) in per:
        nugget = float(jitter) * k.sd**2
        mu, Lc = _conditional(k, state.points, state.g, pts, mean, nugget)
        g_x = mu + Lc @ rng.standard_normal(len(pts))
        cont = sample_prior(k, b, 1, rng, link_name=link_name, mean=mean, jitter=jitter,
                            max_proposals=max_proposals,
                            given=(np.concatenate([state.points, pts]),
                                   np.concatenate([state.g, g_x])))
        n_prop = len(cont.x) - cont.n_given
        out[s] = np.exp(b.logpdf(pts)) * phi(g_x) * n_prop
    return out


def eq5_numerator_terms(states: Sequence[LatentHistory], rng: np.random.Generator,
                        kernel: Covariance | Sequence[Covariance], base: Any, x: Any, *,
                        link_name: str = "logistic", mean: float = 0.0,
                        jitter: float = JITTER, max_proposals: int = 100_000) -> np.ndarray:
    """Eq. 5's numerator terms ``π(x) min(1, Φ(g(x)) / Φ(g(x′)))`` per state given ``D``.

    ``x′`` is a predictive sample (Algorithm 1 continued from the state to its first
    acceptance, §4.4); ``g(x)`` is drawn given the state and that continuation (one
    realisation of ``g``), marginally at each test point.

    Returns
    -------
    ndarray, shape (S, T)
    """
    phi, pts, per, out = _setup(states, kernel, base, x, link_name)
    for s, (state, k, b) in per:
        nugget = float(jitter) * k.sd**2
        cont = sample_prior(k, b, 1, rng, link_name=link_name, mean=mean, jitter=jitter,
                            max_proposals=max_proposals, given=(state.points, state.g))
        g_prime = cont.g[-1]  # the first acceptance ends the run
        w = solve_triangular(cont.chol, cont.g - mean, lower=True, check_finite=False)
        mu, sd = _cond_at(cont.x, cont.chol, w, k, pts, mean, nugget)
        g_x = mu + sd * rng.standard_normal(len(pts))
        out[s] = np.exp(b.logpdf(pts)) * _acceptance(phi(g_x) / phi(np.asarray(g_prime)))
    return out


def eq5_denominator_terms(states: Sequence[LatentHistory], rng: np.random.Generator,
                          kernel: Covariance | Sequence[Covariance], base: Any, *,
                          index: int = -1, link_name: str = "logistic", mean: float = 0.0,
                          jitter: float = JITTER) -> np.ndarray:
    """Eq. 5's denominator terms ``min(1, Φ(g(x′)) / Φ(g(x)))``, ``x′ ~ π``, per state.

    ``states`` are posterior states given ``D ∪ {x}``: ``x`` is their datum ``index``.

    Returns
    -------
    ndarray, shape (S,)
    """
    phi = link(link_name)
    kernels = _per_state(kernel, len(states), "kernel")
    bases = _per_state(base, len(states), "base")
    out = np.empty(len(states))
    for s, (state, k, b) in enumerate(zip(states, kernels, bases, strict=True)):
        nugget = float(jitter) * k.sd**2
        x_prime = b.sample(rng, 1)
        mu, Lc = _conditional(k, state.points, state.g, x_prime, mean, nugget)
        g_prime = float(mu[0] + Lc[0, 0] * rng.standard_normal())
        g_x = state.g[:state.n_data][index]
        out[s] = _acceptance(phi(np.asarray(g_prime)) / phi(np.asarray(g_x)))
    return out


def _estimate(values: np.ndarray, n_batches: int) -> PredictiveDensity:
    dens = values.mean(axis=0)
    se = batch_means_se(values, n_batches)
    return PredictiveDensity(dens, se, np.log(dens), se / dens)


def count_estimate(states: Sequence[LatentHistory], rng: np.random.Generator,
                   kernel: Covariance | Sequence[Covariance], base: Any, x: Any, *,
                   n_batches: int = N_BATCHES, **kwargs: Any) -> PredictiveDensity:
    """``p(x | D)`` by the proposal count over posterior states, with its batch-means error.

    Parameters
    ----------
    states : sequence of LatentHistory
        Successive posterior states of one chain (after burn-in).
    rng : numpy.random.Generator
    kernel : Covariance, or one per state
    base : base measure, or one per state
    x : array_like, shape (T, d)
    n_batches : int
    **kwargs
        ``link_name``, ``mean``, ``jitter``, ``max_proposals`` (:func:`count_terms`).

    Returns
    -------
    PredictiveDensity
    """
    return _estimate(count_terms(states, rng, kernel, base, x, **kwargs), n_batches)


def chib_jeliazkov(numerator: np.ndarray, denominators: np.ndarray, *,
                   n_batches: int = N_BATCHES) -> PredictiveDensity:
    """Eq. 5 from its terms: numerator means over denominator means, with the delta method.

    Parameters
    ----------
    numerator : ndarray, shape (S, T)
        :func:`eq5_numerator_terms` of one chain given ``D``.
    denominators : ndarray, shape (S′, T)
        Column ``t``: :func:`eq5_denominator_terms` of the chain given ``D ∪ {x_t}``.

    Returns
    -------
    PredictiveDensity
    """
    num, den = np.asarray(numerator, dtype=float), np.asarray(denominators, dtype=float)
    if num.ndim != 2 or den.ndim != 2 or num.shape[1] != den.shape[1]:
        raise InvalidParameterError(
            f"numerator {num.shape} and denominators {den.shape}: give (S, T) and (S', T).")
    a, b = num.mean(axis=0), den.mean(axis=0)
    sa, sb = batch_means_se(num, n_batches), batch_means_se(den, n_batches)
    log_se = np.sqrt((sa / a) ** 2 + (sb / b) ** 2)
    dens = a / b
    return PredictiveDensity(dens, dens * log_se, np.log(dens), log_se)


def run_chain(data: Any, rng: np.random.Generator, kernel: Covariance, base: Any,
              n_sweeps: int, *, burn: int = 0, mean: float = 0.0, jitter: float = JITTER,
              thin: int = 1, init: LatentHistory | None = None,
              **sweep_kwargs: Any) -> tuple[list[LatentHistory], list[Covariance], list[Any]]:
    """A chain of the dense latent-history sampler on ``data``.

    Starts with no rejections and ``g`` at the data drawn from the GP prior (the paper's
    start), or at ``init`` with θ ``kernel`` (e.g. :func:`~lattice_lgm.gpds.warm.lattice_history`
    of a lattice state: the start does not change the target); runs
    ``burn + n_sweeps`` sweeps (:func:`~lattice_lgm.gpds.history.sweep`; θ moves when
    ``hyperpriors`` is among ``sweep_kwargs``, φ when ``base_hyperpriors`` is) and keeps
    every ``thin``-th of the last ``n_sweeps`` states with its θ and base measure.

    Parameters
    ----------
    data : array_like, shape (N, d)
        Must lie in the base measure's support.
    rng : numpy.random.Generator
    kernel : Covariance
    base : base measure
    n_sweeps, burn, thin : int
    init : LatentHistory, optional
        The first state; its data must be ``data``.
    **sweep_kwargs
        Passed to :func:`~lattice_lgm.gpds.history.sweep` (``link_name``, ``step``, …).

    Returns
    -------
    states : list of LatentHistory, length ``n_sweeps // thin``
    kernels : list of Covariance
        The θ of each kept state.
    bases : list of base measures
        The φ of each kept state.
    """
    pts = _test_points(data, base.ndim)
    outside = ~base.contains(pts)
    if np.any(outside):
        i = int(np.argmax(outside))
        raise InvalidDataError(
            f"data[{i}]={pts[i].tolist()} is outside the base measure's support: the model "
            "gives it no mass; widen the base measure or drop the point.")
    n = positive_int("n_sweeps", n_sweeps, "e.g. 2000")
    if not (isinstance(burn, int) and burn >= 0):
        raise InvalidParameterError(f"burn={burn!r} must be an int >= 0.")
    positive_int("thin", thin, "keep every thin-th state, e.g. 1")
    if init is not None:
        if not np.array_equal(init.data, pts):
            raise InvalidParameterError(
                "init.data differs from data: a warm start is a latent history of the same "
                "data set.")
        state = init
    else:
        nugget = float(jitter) * kernel.sd**2
        L = np.linalg.cholesky(kernel(pts) + nugget * np.eye(len(pts)))
        state = LatentHistory(pts, np.empty((0, pts.shape[1])),
                              mean + L @ rng.standard_normal(len(pts)))
    states, kernels, bases = [], [], []
    for i in range(burn + n):
        state, kernel, base, _ = sweep(state, rng, kernel, base, mean=mean, jitter=jitter,
                                       **sweep_kwargs)
        if i >= burn and (i - burn) % thin == thin - 1:
            states.append(state)
            kernels.append(kernel)
            bases.append(base)
    return states, kernels, bases
