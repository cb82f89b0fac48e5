r"""The importance-sampling estimate of ``p(Y | X, ξ)`` (Gadd et al., eq. 6).

.. math::

    \tilde p(Y \mid X, ξ) = \frac1Q \sum_{q=1}^{Q}
        \frac{p(Y \mid Z^{(q)}, θ, β)\, p(Z^{(q)} \mid X, σ)}{q(Z^{(q)})},
    \qquad Z^{(q)} \overset{iid}{\sim} q,

is unbiased for ``p(Y | X, ξ)`` (not its log) whenever ``q`` covers the posterior's support —
the property the pseudo-marginal chain needs (Andrieu & Roberts 2009).  It is computed in log
space: ``log p̃ = logsumexp(log w) − log Q`` with ``log w_q = log p(Y|Z) + log p(Z|X) − log q``,
so no weight under- or overflows.

Tuning ``Q``: Doucet, Pitt, Deligiannidis & Kohn (2015, "Efficient implementation of Markov
chain Monte Carlo when using an unbiased likelihood estimator", *Biometrika* 102, 295–313) show
that the computing time per effective draw of a pseudo-marginal chain is smallest when the
standard deviation of ``log p̃`` is about 0.92 (an efficient exact-likelihood chain) to 1.68 (an
inefficient one) — in practice ``Var(log p̃) ≈ 1–2``: larger ``Q`` wastes estimator time, smaller
``Q`` makes the chain stick.  :attr:`ISEstimate.log_var` estimates that variance from one
estimate's weights by the delta method, ``Var(log p̃) ≈ Var(p̃)/p² ≈ var(w) / (Q · mean(w)²)``
(sample variance with ``Q − 1`` in its denominator), i.e. ``(Q/ESS − 1)/(Q − 1)`` with Kish's
``ESS = (Σw)²/Σw²``.  It is itself noisy, and optimistic when the weights are heavy-tailed (the
rare large weights not yet drawn), so read it at several ``ξ`` before choosing ``Q``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, Protocol

import numpy as np

from .._validation import positive_int
from ..errors import InvalidParameterError, ShapeMismatchError
from .density import (
    GaussianQ,
    check_hyper,
    check_jitter,
    check_x,
    check_y,
    log_p_y_given_z,
    log_p_z_given_x,
)
from .kernels import GPLVMHyper

__all__ = ["ISEstimate", "ImportanceDistribution", "importance_estimate",
           "log_marginal_estimate"]


class ImportanceDistribution(Protocol):
    """What the estimator needs of ``q``: draws and their log density.

    A ``VBPosterior`` or a :class:`~lattice_lgm.gplvm.density.GaussianQ` qualifies.
    """

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Draws of shape (n, N, k_z)."""

    def log_density(self, z: np.ndarray) -> np.ndarray:
        """``log q`` per draw, shape (n,)."""

    # optional: ``from_normals(eps (n, k_z, N)) -> (n, N, k_z)``, the draws of given normals,
    # which a correlated pseudo-marginal chain needs (``normals=`` below)


class ISEstimate(NamedTuple):
    """One importance-sampling estimate (eq. 6).

    Attributes
    ----------
    log_p_hat : float
        ``log p̃`` — the log of the unbiased estimate (``log p̃`` itself is biased low).
    log_weights : ndarray, shape (Q,)
        ``log w_q = log p(Y|Z_q) + log p(Z_q|X) − log q(Z_q)``.
    ess : float
        Kish's effective sample size ``(Σw)²/Σw²``, in ``[1, Q]``.
    log_var : float
        Delta-method estimate of ``Var(log p̃)`` (module docstring); NaN when ``Q = 1``.
    """

    log_p_hat: float
    log_weights: np.ndarray
    ess: float
    log_var: float


def _as_q(q: ImportanceDistribution | tuple[np.ndarray, np.ndarray]) -> ImportanceDistribution:
    """A ``(mu, S)`` pair as a :class:`GaussianQ`; an object must have the two methods."""
    if isinstance(q, tuple | list) and len(q) == 2:
        return GaussianQ(q[0], q[1])
    if not (callable(getattr(q, "sample", None)) and callable(getattr(q, "log_density", None))):
        raise InvalidParameterError(
            f"q={q!r} is neither a (mu, S) pair nor an object with sample(rng, n) and "
            "log_density(z) methods; pass e.g. GaussianQ(mu, S) or a VBPosterior.")
    return q


def _summarise(log_w: np.ndarray) -> ISEstimate:
    """``log p̃``, Kish's ESS and the delta-method ``Var(log p̃)`` from the log weights."""
    n_w = log_w.size
    if np.any(np.isnan(log_w)):
        raise InvalidParameterError(
            "an importance log weight is NaN (log p(Y|Z) + log p(Z|X) − log q(Z)); the "
            "densities or q.log_density returned NaN — check q and the hyperparameters.")
    top = float(log_w.max())
    if not np.isfinite(top):
        # every weight is 0 (or one is +inf): nothing to normalise by
        return ISEstimate(top, log_w, 0.0 if top < 0 else np.nan, np.nan)
    # the weights scaled by the largest are in (0, 1]: logsumexp without overflow, and Σw̃²
    # cannot overflow either
    w = np.exp(log_w - top)
    log_p_hat = top + float(np.log(w.sum())) - float(np.log(n_w))
    ess = float(w.sum() ** 2 / np.sum(w * w))
    log_var = float(np.var(w, ddof=1) / (n_w * w.mean() ** 2)) if n_w > 1 else float("nan")
    return ISEstimate(log_p_hat, log_w, ess, log_var)


def importance_estimate(log_joint: Callable[[np.ndarray], np.ndarray],
                        q: ImportanceDistribution | tuple[np.ndarray, np.ndarray],
                        n_importance: int, rng: np.random.Generator | None,
                        normals: np.ndarray | None = None) -> ISEstimate:
    r"""Eq. 6 for any model: ``(1/Q) Σ_q p(y, Z_q) / q(Z_q)`` with ``Z_q ~ q``, in log space.

    Parameters
    ----------
    log_joint : callable
        ``z (Q, N, k_z) -> (Q,)``, the log of the unnormalised target ``p(y, Z)``.
    q : object with ``sample``/``log_density``, or ``(mu (N, k_z), S (k_z, N, N))``
    n_importance : int
        ``Q ≥ 1``.
    rng : numpy.random.Generator or None
        The only randomness: ``q.sample(rng, Q)``; unused (may be None) with ``normals``.
    normals : ndarray, shape (Q, k_z, N), optional
        Standard normals to draw with, ``Z = q.from_normals(normals)``: the estimate is then a
        deterministic function of them (the correlated pseudo-marginal chain of :mod:`.pmmh`).

    Returns
    -------
    ISEstimate
    """
    n_importance = positive_int("n_importance", n_importance,
                                "the number of importance draws Q must be >= 1 (e.g. 50)")
    q = _as_q(q)
    if normals is not None:
        if np.shape(normals)[:1] != (n_importance,):
            raise ShapeMismatchError(
                f"normals has shape {np.shape(normals)}; with n_importance={n_importance} it "
                f"must be ({n_importance}, k_z, N).")
        if not callable(getattr(q, "from_normals", None)):
            raise InvalidParameterError(
                f"q={q!r} has no from_normals(eps) method, so it cannot draw from given "
                "normals; use a GaussianQ or a VBPosterior, or pass normals=None.")
        z = np.asarray(q.from_normals(normals), dtype=np.float64)
    elif not isinstance(rng, np.random.Generator):
        raise InvalidParameterError(
            f"rng={rng!r} is not a numpy.random.Generator; pass np.random.default_rng(seed).")
    else:
        z = np.asarray(q.sample(rng, n_importance), dtype=np.float64)
    if z.ndim != 3 or z.shape[0] != n_importance:
        raise ShapeMismatchError(
            f"q.sample(rng, {n_importance}) returned shape {z.shape}; expected "
            f"({n_importance}, N, k_z).")
    log_w = (np.asarray(log_joint(z), dtype=np.float64)
             - np.asarray(q.log_density(z), dtype=np.float64))
    if log_w.shape != (n_importance,):
        raise ShapeMismatchError(
            f"the log weights have shape {log_w.shape}; log_joint and q.log_density must each "
            f"return one value per draw, shape ({n_importance},).")
    return _summarise(log_w)


def log_marginal_estimate(y: np.ndarray, x: np.ndarray, hyper: GPLVMHyper,
                          q: ImportanceDistribution | tuple[np.ndarray, np.ndarray],
                          n_importance: int, rng: np.random.Generator | None,
                          jitter: float = 1e-6, normals: np.ndarray | None = None
                          ) -> ISEstimate:
    r"""Eq. 6 for the supervised GPLVM: the unbiased estimate of ``p(Y | X, ξ)``.

    ``log w_q = log p(Y | Z_q, θ, β)`` (eq. 1) ``+ log p(Z_q | X, σ)`` (eq. 2) ``− log q(Z_q)``.

    Parameters
    ----------
    y : ndarray, shape (N, k_y)
    x : ndarray, shape (N, k_x)
    hyper : GPLVMHyper
        ``ξ``; ``len(hyper.sigma) = k_x`` and ``len(hyper.theta) = k_z``.
    q : object with ``sample(rng, n) -> (n, N, k_z)`` and ``log_density(z) -> (n,)``, or a
        ``(mu (N, k_z), S (k_z, N, N))`` pair (a :class:`~.density.GaussianQ` is built)
    n_importance : int
        ``Q ≥ 1`` importance draws.
    rng : numpy.random.Generator or None
        Draws ``Z ~ q``; unused (may be None) with ``normals``.
    jitter : float
        ``ε`` on ``K_z``'s diagonal (§6.1).
    normals : ndarray, shape (Q, k_z, N), optional
        The standard normals of the draws (:func:`importance_estimate`).

    Returns
    -------
    ISEstimate
        ``log_p_hat`` is ``log p̃(Y | X, ξ)``; see the module docstring for ``log_var``.

    Raises
    ------
    InvalidParameterError
        ``n_importance < 1``, non-finite data, a negative jitter or a bad ``q``.
    ShapeMismatchError
        ``y``/``x``/``q`` disagree on ``N``, or ``x``/``q`` on ``k_x``/``k_z``.
    """
    # every cheap check before any draw or factorisation
    n_importance = positive_int("n_importance", n_importance,
                                "the number of importance draws Q must be >= 1 (e.g. 50)")
    check_hyper(hyper)
    y = check_y(y)
    x = check_x(x, y.shape[0], hyper)
    jitter = check_jitter(jitter)
    q = _as_q(q)
    mu = getattr(q, "mu", None)
    if mu is not None and np.shape(mu) != (y.shape[0], hyper.k_z):
        raise ShapeMismatchError(
            f"q.mu has shape {np.shape(mu)}; with y of {y.shape[0]} rows and k_z = "
            f"{hyper.k_z} (len(hyper.theta)) it must be ({y.shape[0]}, {hyper.k_z}).")

    def log_joint(z: np.ndarray) -> np.ndarray:
        return log_p_y_given_z(y, z, hyper) + log_p_z_given_x(z, x, hyper, jitter)

    return importance_estimate(log_joint, q, n_importance, rng, normals)
