"""The GPDS's latent history and its moves (Adams, Murray & MacKay 2009, §4).

The data ``D = {x_n}`` are modelled as the ``N`` acceptances of Algorithm 1 run until its
``N``th acceptance; the latent history is what the data do not show: the number ``M`` of
rejections, their locations ``{x_m}`` and the function values ``G_M`` there, beside the values
``G_N`` at the data.  Its joint density (their eq. 3, without the newly inserted points) is
``Π_n π(x_n) Φ(g_n) · Π_m π(x_m) (1 − Φ(g_m)) · GP(G_N, G_M)``, up to the orderings that
exchangeability sums over.

The state (:class:`~lattice_lgm.gpds.state.LatentHistory`) and the values' Bernoulli model
are in :mod:`.state`; the hyperparameters' moves (§4.3) in :mod:`.hyper`.  Here: §4.1
(changing the number of rejections), §4.2's joint move of locations and values (random walk,
conditional draw, underrelaxation), the function values' update by elliptical slice sampling
(the stronger alternative to the underrelaxed proposal: ``Π_n Φ(g_n) Π_m (1 − Φ(g_m))`` is a
Bernoulli likelihood with label 1 at the data and 0 at the rejections, so the library's ESS
runs on it unchanged), §4.4's predictive samples (:func:`predictive_samples`) and one sweep of
them all with θ and φ (:func:`sweep`).  Still to build (issue 29): §4.4's predictive
*density* (eq. 5), the model family, the lattice-scale version.

This first version refactors the dense ``(N + M)``-point covariance at each move, the cost
the paper's method has (its ``O((N + M)³)``); the lattice-scale version of issue 29 removes it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy.linalg import solve_triangular
from scipy.special import gammaln

from ..covariance import Covariance
from ..errors import InvalidParameterError, NotPositiveDefiniteError
from ..hyperpriors import Hyperprior
from ..samplers import EllipticalSlice, state_from_fields
from .base import log_link
from .hyper import update_base, update_kernel, update_kernel_surrogate
from .prior import JITTER, sample_prior
from .state import LatentHistory, values_model

__all__ = ["KERNEL_METHODS", "LatentHistory", "change_rejections", "log_count_ratio",
           "move_rejections", "predictive_samples", "sweep", "update_values"]

#: the ways :func:`sweep` moves the kernel's θ: surrogate-data slice sampling of θ with the
#: values (the default), or §4.3's M–H given the values (decision 104 measured them)
KERNEL_METHODS = ("surrogate-slice", "mh")


def log_count_ratio(m: int, m_new: int, n: int) -> float:
    """``log [M! (M̂ + N − 1)! / (M̂! (M + N − 1)!)]``: eq. 4's orderings factor.

    Inserting ``M̂ − M`` rejections among the history has ``C(M̂ + N − 1, M̂ − M)`` placements,
    removing has ``C(M, M − M̂)`` choices; both ratios simplify to this (§4.1).
    """
    return float(gammaln(m + 1) + gammaln(m_new + n) - gammaln(m_new + 1) - gammaln(m + n))


def _conditional(kernel: Covariance, x_old: np.ndarray, g_old: np.ndarray, x_new: np.ndarray,
                 mean: float, nugget: float) -> tuple[np.ndarray, np.ndarray]:
    """Mean and Cholesky factor of ``g(x_new) | g(x_old) = g_old`` under the GP."""
    K = kernel(x_old) + nugget * np.eye(len(x_old))
    Ks = kernel(x_new, x_old)
    Kss = kernel(x_new) + nugget * np.eye(len(x_new))
    try:
        L = np.linalg.cholesky(K)
    except np.linalg.LinAlgError:
        raise NotPositiveDefiniteError(
            "the history's covariance is not positive definite; raise jitter.") from None
    A = solve_triangular(L, Ks.T, lower=True, check_finite=False)
    m = mean + A.T @ solve_triangular(L, g_old - mean, lower=True, check_finite=False)
    C = Kss - A.T @ A
    try:
        Lc = np.linalg.cholesky(C + nugget * np.eye(len(x_new)))
    except np.linalg.LinAlgError:
        raise NotPositiveDefiniteError(
            "the conditional covariance of the inserted points is not positive definite "
            "(they nearly coincide with known points); raise jitter.") from None
    return m, Lc


def change_rejections(state: LatentHistory, rng: np.random.Generator, kernel: Covariance,
                      base: Any, *, link_name: str = "logistic", mean: float = 0.0,
                      max_step: int = 3, jitter: float = JITTER) -> tuple[LatentHistory, bool]:
    """One Metropolis–Hastings change of the number of rejections (§4.1, eq. 4).

    ``M̂ = M ± k`` with ``k`` uniform on ``1 … max_step`` and the sign by a fair coin (a
    symmetric ``q``; ``M̂ < 0`` has no mass and is rejected).  Insertion: ``k`` locations from
    ``π`` and their values ``G⁺`` from the GP given every value of the state; accepted with
    ``a = [M! (M̂+N−1)! / (M̂! (M+N−1)!)] Π_{G⁺} (1 − Φ(g))``.  Removal: ``k`` rejections
    chosen uniformly; ``a`` with ``Π_{G⁻} (1 − Φ(g))⁻¹``.  The locations' base-measure terms
    cancel against the proposal, the GP terms against the conditional draw.

    Parameters
    ----------
    state : LatentHistory
    rng : numpy.random.Generator
    kernel : Covariance
    base : GaussianBase or UniformBase
    link_name : {"logistic", "probit"}
    mean : float
        The GP's constant mean.
    max_step : int
        Largest change of ``M`` proposed.
    jitter : float
        Relative nugget (× sd²) on the GP's diagonal.

    Returns
    -------
    state : LatentHistory
        The new state (``state`` itself when rejected).
    accepted : bool
    """
    if not (isinstance(max_step, int) and max_step >= 1):
        raise InvalidParameterError(f"max_step={max_step!r} must be an int >= 1.")
    log_phi = log_link(link_name)
    n, m = state.n_data, state.n_rejections
    k = int(rng.integers(1, max_step + 1))
    up = bool(rng.random() < 0.5)
    m_new = m + k if up else m - k
    if m_new < 0:
        return state, False
    log_a = log_count_ratio(m, m_new, n)
    nugget = float(jitter) * kernel.sd**2
    if up:
        x_new = base.sample(rng, k)
        mu, Lc = _conditional(kernel, state.points, state.g, x_new, mean, nugget)
        g_new = mu + Lc @ rng.standard_normal(k)
        log_a += float(np.sum(log_phi(-g_new)))  # log(1 − Φ(g)) = log Φ(−g)
        if math.log(rng.random()) < log_a:
            return LatentHistory(state.data, np.concatenate([state.rejections, x_new]),
                                 np.concatenate([state.g, g_new])), True
        return state, False
    drop = rng.choice(m, size=k, replace=False)
    g_drop = state.g[n + drop]
    log_a -= float(np.sum(log_phi(-g_drop)))
    if math.log(rng.random()) < log_a:
        keep = np.setdiff1d(np.arange(m), drop)
        return LatentHistory(state.data, state.rejections[keep],
                             np.concatenate([state.g[:n], state.g[n + keep]])), True
    return state, False


def update_values(state: LatentHistory, rng: np.random.Generator, kernel: Covariance, *,
                  link_name: str = "logistic", mean: float = 0.0, n_updates: int = 1,
                  jitter: float = JITTER) -> LatentHistory:
    """The function values ``(G_N, G_M)`` at fixed locations by elliptical slice sampling.

    The target ``GP(G) Π_n Φ(g_n) Π_m (1 − Φ(g_m))`` is a GP with a Bernoulli likelihood
    (label 1 at the data, 0 at the rejections): ``n_updates`` steps of Murray, Adams & MacKay
    (2010)'s Figure 2 (:class:`lattice_lgm.samplers.EllipticalSlice`) on a dense prior over
    the state's points, with the GP's nugget ``jitter · sd²``.

    Parameters
    ----------
    state : LatentHistory
    rng : numpy.random.Generator
    kernel : Covariance
    link_name : {"logistic", "probit"}
    mean : float
        The GP's constant mean.
    n_updates : int
    jitter : float

    Returns
    -------
    LatentHistory
        The same locations with new values.
    """
    if not (isinstance(n_updates, int) and n_updates >= 1):
        raise InvalidParameterError(f"n_updates={n_updates!r} must be an int >= 1.")
    lgm = values_model(state, kernel, link_name=link_name, mean=mean, jitter=jitter)
    st = state_from_fields(lgm, state.g[None] - mean, [{}], [rng])
    ess = EllipticalSlice(lgm)
    for _ in range(n_updates):
        st, _ = ess.step(st, [rng])
    return LatentHistory(state.data, state.rejections, st.f[0] + mean)


def move_rejections(state: LatentHistory, rng: np.random.Generator, kernel: Covariance,
                    base: Any, *, link_name: str = "logistic", mean: float = 0.0,
                    step: float = 0.1, relax: float = 0.9,
                    jitter: float = JITTER) -> tuple[LatentHistory, bool]:
    """§4.2: new rejection locations and new function values, one joint M–H proposal.

    In the paper's three steps: (1) ``x̂_m = x_m + step · ε_m``, ``ε_m ~ N(0, I)`` (a
    symmetric ``q``); (2) intermediate values at ``{x̂_m}`` from the GP given every current
    value; (3) the underrelaxed proposal ``ĝ − μ = relax (g − μ) + √(1 − relax²) h`` at the
    data and the new locations, ``h`` a GP prior draw there (it leaves the GP invariant).
    Accepted with ``Π_m π(x̂_m)(1 − Φ(ĝ_m)) Π_n Φ(ĝ_n) / Π_m π(x_m)(1 − Φ(g_m)) Π_n Φ(g_n)``.

    Parameters
    ----------
    state : LatentHistory
    rng : numpy.random.Generator
    kernel : Covariance
    base : GaussianBase or UniformBase
    link_name : {"logistic", "probit"}
    mean : float
    step : float
        Scale of the locations' random walk.
    relax : float
        The underrelaxation ``α`` in ``[0, 1)`` (near 1: conservative proposals).
    jitter : float

    Returns
    -------
    state : LatentHistory
    accepted : bool
    """
    if not (isinstance(step, (int, float)) and step > 0 and math.isfinite(step)):
        raise InvalidParameterError(f"step={step!r} must be a finite number > 0.")
    if not (isinstance(relax, (int, float)) and 0.0 <= relax < 1.0):
        raise InvalidParameterError(f"relax={relax!r} must be in [0, 1).")
    log_phi = log_link(link_name)
    n, m = state.n_data, state.n_rejections
    if m == 0:
        return state, False
    nugget = float(jitter) * kernel.sd**2
    x_hat = state.rejections + step * rng.standard_normal(state.rejections.shape)
    log_pi_new = base.logpdf(x_hat)
    if not np.all(np.isfinite(log_pi_new)):
        return state, False  # outside π's support: no mass
    # step 2: the function at the new locations given every current value
    mu, Lc = _conditional(kernel, state.points, state.g, x_hat, mean, nugget)
    g_mid = mu + Lc @ rng.standard_normal(m)
    # step 3: underrelaxation at the data and the new locations.  Exact as the paper states
    # it: the joint Gaussian of (the old values at D ∪ X, the new at D ∪ X̂) has the same
    # marginals and the same cross-covariance α K(D ∪ X, D ∪ X̂) whichever way the move is
    # read, so the proposal is reversible for the GP and only π and Φ enter the ratio
    pts = np.concatenate([state.data, x_hat])
    K = kernel(pts) + nugget * np.eye(n + m)
    h = np.linalg.cholesky(K) @ rng.standard_normal(n + m)
    g_old = np.concatenate([state.g[:n], g_mid])
    g_new = mean + relax * (g_old - mean) + math.sqrt(1.0 - relax**2) * h
    log_a = (float(np.sum(log_pi_new - base.logpdf(state.rejections)))
             + float(np.sum(log_phi(-g_new[n:])) - np.sum(log_phi(-state.g[n:])))
             + float(np.sum(log_phi(g_new[:n])) - np.sum(log_phi(state.g[:n]))))
    if math.log(rng.random()) < log_a:
        return LatentHistory(state.data, x_hat, g_new), True
    return state, False


def predictive_samples(state: LatentHistory, rng: np.random.Generator, kernel: Covariance,
                       base: Any, n_samples: int, *, link_name: str = "logistic",
                       mean: float = 0.0, jitter: float = JITTER,
                       max_proposals: int = 100_000) -> np.ndarray:
    """§4.4: predictive samples — the generative process run on from a latent history.

    Algorithm 1 continued with the state's data and rejections (and ``g`` there) as its
    conditioning set, until ``n_samples`` more acceptances: draws from the density the state
    describes.  Over posterior states, draws from the predictive distribution.

    Returns
    -------
    ndarray, shape (n_samples, d)
    """
    h = sample_prior(kernel, base, n_samples, rng, link_name=link_name, mean=mean,
                     jitter=jitter, max_proposals=max_proposals,
                     given=(state.points, state.g))
    return h.samples


def sweep(state: LatentHistory, rng: np.random.Generator, kernel: Covariance, base: Any, *,
          hyperpriors: Mapping[str, Hyperprior] | None = None,
          base_hyperpriors: Mapping[str, Hyperprior] | None = None,
          kernel_method: str = "surrogate-slice", link_name: str = "logistic",
          mean: float = 0.0,
          n_count: int = 1, n_move: int = 1, n_values: int = 1, step: float = 0.1,
          relax: float = 0.9, hyper_step: float = 0.3, base_step: float = 0.3,
          jitter: float = JITTER) -> tuple[LatentHistory, Covariance, Any, dict[str, int]]:
    """One sweep of the latent-history sampler (§4).

    ``M`` (§4.1), the locations with their values (§4.2), the values by elliptical slice
    sampling, then θ (§4.3: :func:`~lattice_lgm.gpds.update_kernel`'s M–H given the values,
    or :func:`~lattice_lgm.gpds.update_kernel_surrogate`'s slice sampling of θ with the
    values) and φ (§4.3: :func:`~lattice_lgm.gpds.update_base`).  Each part leaves the
    posterior of the latent history (and θ, φ) invariant, so the sweep does (their
    composition).

    Parameters
    ----------
    state : LatentHistory
    rng : numpy.random.Generator
    kernel : Covariance
        θ.
    base : GaussianBase or UniformBase
        π, with φ.
    hyperpriors : mapping of str to Hyperprior, optional
        The kernel's hyperparameters to move (``sd``, ``range`` or ``lengthscale``); None:
        θ fixed.
    base_hyperpriors : mapping of str to Hyperprior, optional
        The base measure's parameters to move (``mean_<i>``, ``sd_<i>`` of a
        :class:`~lattice_lgm.gpds.GaussianBase`); None: φ fixed.
    kernel_method : {"surrogate-slice", "mh"}
        How θ moves (:data:`KERNEL_METHODS`).  Default ``"surrogate-slice"``: on the 1-D
        problem of decision 104 (``benchmarks/perf/gpds_kernel_moves.py``: N = 20, M = 38
        at the start, 4 chains × 20 000 sweeps, same seeds) it gave 16.7 effective samples
        of log ℓ per second against M–H's 0.23 (4.4 ms against 1.3 ms per sweep; M–H
        accepted 13 % and its chains were still drifting from their start).
    link_name : {"logistic", "probit"}
    mean : float
    n_count, n_move, n_values : int
        Repeats of §4.1, of §4.2, and elliptical slice updates of the values.
    step, relax : float
        §4.2's random-walk scale and underrelaxation.
    hyper_step : float
        θ's random-walk scale (``"mh"``) on the log scale.
    base_step : float
        φ's random-walk scale on the unconstrained scale.
    jitter : float

    Returns
    -------
    state : LatentHistory
    kernel : Covariance
        The new θ (``kernel`` when ``hyperpriors`` is None).
    base : GaussianBase or UniformBase
        The new φ (``base`` when ``base_hyperpriors`` is None).
    accepted : dict of str to int
        Accepted proposals of each move: ``count``, ``move``, ``kernel``, ``base``.
    """
    if kernel_method not in KERNEL_METHODS:
        raise InvalidParameterError(
            f"kernel_method={kernel_method!r} must be one of {list(KERNEL_METHODS)}.")
    acc = {"count": 0, "move": 0, "kernel": 0, "base": 0}
    for _ in range(n_count):
        state, a = change_rejections(state, rng, kernel, base, link_name=link_name, mean=mean,
                                     jitter=jitter)
        acc["count"] += int(a)
    for _ in range(n_move):
        state, a = move_rejections(state, rng, kernel, base, link_name=link_name, mean=mean,
                                   step=step, relax=relax, jitter=jitter)
        acc["move"] += int(a)
    state = update_values(state, rng, kernel, link_name=link_name, mean=mean,
                          n_updates=n_values, jitter=jitter)
    if hyperpriors:
        if kernel_method == "mh":
            kernel, a = update_kernel(state, rng, kernel, hyperpriors, step=hyper_step,
                                      mean=mean, jitter=jitter)
        else:
            kernel, state, a = update_kernel_surrogate(state, rng, kernel, hyperpriors,
                                                       link_name=link_name, mean=mean,
                                                       jitter=jitter)
        acc["kernel"] += a
    if base_hyperpriors:
        base, a = update_base(state, rng, base, base_hyperpriors, step=base_step)
        acc["base"] += a
    return state, kernel, base, acc
