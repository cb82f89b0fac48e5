r"""Riemannian-manifold HMC for probit GP classification (Fraccaro, Paquet & Winther, §§3–4).

The target is the report's tempered density (eq. 4; :class:`~.ais.TemperedGPC`)

    log γ_β(f) = (1 − β) log q(f) + β [log N(f; 0, K) + Σ_i log Φ(y_i f_i)],

with ``q = N(m, (K⁻¹ + S̃)⁻¹)`` — the prior (``S̃ = 0``, ``m = 0``) or EP's approximation with
its site precisions ``S̃ = diag(τ̃)`` (§4.1).  The report's equations are lost in our text
copy; they are rebuilt here from its descriptions and Girolami & Calderhead (2011), and each
is checked numerically in ``tests/samplers/test_rmhmc.py``.

**Metric** (§4.2): the negative Hessian of ``log γ_β``,

    G(f) = K⁻¹ + diag(d(f)),   d(f) = (1 − β) τ̃ + β λ(f),   λ_i = −∂² log Φ(y_i f_i)/∂f_i²,

where only ``λ`` depends on ``f`` (eq. 16), and ``∂G/∂f_i`` is non-zero only at ``(i, i)``,
where it is ``β λ'_i`` with ``λ'_i = −∂³ log Φ/∂f_i³`` (eq. 17).  The probit's first, second
and third derivatives come from :class:`lattice_lgm.likelihoods.Bernoulli` (§4.4).

**Inverse and determinant** (§4.3, the Woodbury identity with the stable factor of R&W
Algorithm 3.1): with ``B = I + D^½ K D^½ = L Lᵀ`` and ``V = L⁻¹ D^½ K``,
``G⁻¹ = K − Vᵀ V`` and ``log |G| = 2 Σ log L_ii − log |K|``.  (``B`` is well conditioned:
its eigenvalues are ≥ 1.)

**Hamiltonian** (eq. 11) ``H(f, p) = −log γ_β(f) + ½ log |G(f)| + ½ pᵀ G(f)⁻¹ p`` and its
gradient in ``f`` (eq. 12; Algorithm 2)::

    ∂H/∂f_i = −∂ log γ_β/∂f_i + ½ β λ'_i (G⁻¹)_ii − ½ β λ'_i (G⁻¹ p)_i²

(the trace and quadratic terms of ``∂G/∂f_i`` collapse to one entry each).

**Generalised leapfrog** (eqs. 13–15; Algorithm 1): with ``p`` drawn from ``N(0, G(f))``,

1. ``p ← p − ε/2 ∂H/∂f(f, p′)`` solved for ``p′`` by fixed-point iteration (lines 13–17);
2. ``f ← f + ε/2 [G⁻¹(f) + G⁻¹(f′)] p`` solved for ``f′`` by fixed-point iteration
   (lines 20–25);
3. ``p ← p − ε/2 ∂H/∂f(f, p)`` (explicit);

repeated ``n_leapfrog`` times, then accepted with probability ``min(1, e^{H₀ − H₁})``.
The integrator is reversible and volume preserving when the fixed points are solved
exactly (tested with many iterations); with a few the error is of the iterations'
tolerance.  Cost: one Cholesky of an ``n × n`` matrix per evaluation of ``H``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import linalg

from .._validation import positive_float, positive_int
from ..errors import InvalidParameterError
from ..likelihoods import Bernoulli
from .ep import _check

__all__ = ["RMHMCInfo", "RiemannGPC", "leapfrog", "rmhmc_step"]

#: fixed-point iterations per implicit half-step (the report: "pre-set to, say, 5" — a
#: small fixed number; more only tighten the integrator's reversibility)
N_FIXED = 5


class RiemannGPC:
    """The tempered GPC target with its metric and Hamiltonian (module docstring).

    Parameters
    ----------
    K : array_like, shape (n, n)
        Prior covariance of ``f`` (positive definite).
    y : array_like, shape (n,)
        Labels in {0, 1}.
    beta : float
        Inverse temperature in [0, 1].
    q_mean, q_tau : array_like, shape (n,), optional
        EP's ``q``: its mean and site precisions ``τ̃`` (``q``'s precision is
        ``K⁻¹ + diag(τ̃)``); default the prior.
    """

    def __init__(self, K: Any, y: Any, beta: float = 1.0, q_mean: Any = None,
                 q_tau: Any = None) -> None:
        self.K, self.s = _check(K, y)
        n = len(self.s)
        if not (0.0 <= float(beta) <= 1.0):
            raise InvalidParameterError(f"beta={beta!r} must lie in [0, 1].")
        self.beta = float(beta)
        if (q_mean is None) != (q_tau is None):
            raise InvalidParameterError("give both q_mean and q_tau, or neither (the prior).")
        self.m = np.zeros(n) if q_mean is None else np.asarray(q_mean, float).reshape(-1)
        self.tau = np.zeros(n) if q_tau is None else np.asarray(q_tau, float).reshape(-1)
        if self.m.shape != (n,) or self.tau.shape != (n,):
            raise InvalidParameterError(f"q_mean and q_tau must have shape ({n},).")
        if not (np.all(np.isfinite(self.m)) and np.all(self.tau >= 0)):
            raise InvalidParameterError("q_mean must be finite and q_tau finite and >= 0.")
        try:
            self.chol_k = np.linalg.cholesky(self.K)
        except np.linalg.LinAlgError:
            raise InvalidParameterError(
                "K is not positive definite; add a small jitter to its diagonal.") from None
        self.log_det_k = 2.0 * float(np.sum(np.log(np.diag(self.chol_k))))
        self.lik = Bernoulli((self.s + 1.0) / 2.0, link="probit")
        self.n = n

    # -- the target -------------------------------------------------------------------------
    def _kinv(self, v: np.ndarray) -> np.ndarray:
        return linalg.cho_solve((self.chol_k, True), v)

    def log_target(self, f: np.ndarray) -> tuple[float, np.ndarray]:
        """``log γ_β(f)`` up to a constant, and its gradient; ``f`` of shape (n,)."""
        b, r = self.beta, f - self.m
        kf, kr = self._kinv(f), self._kinv(r)
        ll = float(self.lik.loglik(f[None])[0])
        value = (-0.5 * (1.0 - b) * (r @ kr + np.sum(self.tau * r * r))
                 - 0.5 * b * (f @ kf) + b * ll)
        grad = -(1.0 - b) * (kr + self.tau * r) - b * kf + b * self.lik.grad(f[None])[0]
        return value, grad

    def metric_diag(self, f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``d(f)`` with ``G = K⁻¹ + diag(d)``, and ``∂d_i/∂f_i = β λ'_i`` (eqs. 16–17)."""
        lam = -self.lik.hess_diag(f[None])[0]
        dlam = -self.lik.third_diag(f[None])[0]
        return (1.0 - self.beta) * self.tau + self.beta * lam, self.beta * dlam

    def inverse_metric(self, d: np.ndarray) -> tuple[np.ndarray, float]:
        """``G⁻¹`` and ``log |G|`` for ``G = K⁻¹ + diag(d)`` by Woodbury (§4.3)."""
        root = np.sqrt(d)
        rk = root[:, None] * self.K
        chol = np.linalg.cholesky(np.eye(self.n) + rk * root[None, :])
        v = linalg.solve_triangular(chol, rk, lower=True)
        return self.K - v.T @ v, 2.0 * float(np.sum(np.log(np.diag(chol)))) - self.log_det_k

    def hamiltonian(self, f: np.ndarray, p: np.ndarray) -> float:
        """``H(f, p)`` (eq. 11), up to a constant."""
        d, _ = self.metric_diag(f)
        ginv, log_det = self.inverse_metric(d)
        return -self.log_target(f)[0] + 0.5 * log_det + 0.5 * p @ ginv @ p

    def grad_h(self, f: np.ndarray, p: np.ndarray) -> np.ndarray:
        """``∂H/∂f`` (eq. 12; Algorithm 2)."""
        return self._grad_h_at(self._at(f), p)

    def _at(self, f: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What ``∂H/∂f`` needs at ``f`` whatever ``p``: ``−∇ log γ``, ``β λ'``, ``G⁻¹``."""
        d, dd = self.metric_diag(f)
        ginv, _ = self.inverse_metric(d)
        return -self.log_target(f)[1], dd, ginv

    @staticmethod
    def _grad_h_at(at: tuple[np.ndarray, np.ndarray, np.ndarray], p: np.ndarray) -> np.ndarray:
        neg_grad, dd, ginv = at
        gp = ginv @ p
        return neg_grad + 0.5 * dd * np.diag(ginv) - 0.5 * dd * gp * gp

    def draw_momentum(self, f: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """``p ~ N(0, G(f))`` as ``L_K⁻ᵀ ξ₁ + d^½ ξ₂`` (covariance ``K⁻¹ + diag(d)``)."""
        d, _ = self.metric_diag(f)
        xi = rng.standard_normal((2, self.n))
        return linalg.solve_triangular(self.chol_k, xi[0], lower=True, trans="T") + np.sqrt(
            d) * xi[1]


@dataclass(frozen=True)
class RMHMCInfo:
    """One transition's diagnostics: ``accept_prob``, ``accepted``, ``energy_error``."""

    accept_prob: float
    accepted: bool
    energy_error: float


def leapfrog(target: RiemannGPC, f: np.ndarray, p: np.ndarray, eps: float, n_steps: int,
             n_fixed: int = N_FIXED) -> tuple[np.ndarray, np.ndarray]:
    """``n_steps`` generalised leapfrog steps (eqs. 13–15) from ``(f, p)``."""
    f, p = f.copy(), p.copy()
    for _ in range(n_steps):
        # eq. 13: p½ = p − ε/2 ∂H/∂f(f, p½), by fixed-point iteration (Algorithm 1, 13–17)
        at = target._at(f)  # f is fixed while p½ is solved: its metric once
        half = p.copy()
        for _ in range(n_fixed):
            half = p - 0.5 * eps * target._grad_h_at(at, half)
        # eq. 14: f′ = f + ε/2 [G⁻¹(f) + G⁻¹(f′)] p½ (Algorithm 1, 20–25)
        ginv_f = at[2] @ half
        new = f + eps * ginv_f
        for _ in range(n_fixed):
            new = f + 0.5 * eps * (ginv_f + target.inverse_metric(
                target.metric_diag(new)[0])[0] @ half)
        f = new
        # eq. 15: the second half step of the momentum, explicit
        p = half - 0.5 * eps * target.grad_h(f, half)
    return f, p


def rmhmc_step(target: RiemannGPC, f: Any, rng: np.random.Generator, *, step_size: float,
               n_leapfrog: int, n_fixed: int = N_FIXED) -> tuple[np.ndarray, RMHMCInfo]:
    """One RMHMC transition (the report's Algorithm 1).

    Momentum from ``N(0, G(f))``, the generalised leapfrog, the Metropolis–Hastings test on
    ``H``.

    Parameters
    ----------
    target : RiemannGPC
    f : array_like, shape (n,)
    rng : numpy.random.Generator
    step_size : float
    n_leapfrog : int
    n_fixed : int
        Fixed-point iterations per implicit half step.

    Returns
    -------
    f : ndarray, shape (n,)
    info : RMHMCInfo
    """
    if not isinstance(target, RiemannGPC):
        raise InvalidParameterError(f"target={target!r} must be a RiemannGPC.")
    eps = positive_float("step_size", step_size, "pass e.g. 0.5")
    n_leapfrog = positive_int("n_leapfrog", n_leapfrog, "pass e.g. 10")
    n_fixed = positive_int("n_fixed", n_fixed, "pass e.g. 5")
    f = np.asarray(f, dtype=float).reshape(-1)
    if f.shape != (target.n,) or not np.all(np.isfinite(f)):
        raise InvalidParameterError(f"f (shape {f.shape}) must be finite of shape ({target.n},).")
    p = target.draw_momentum(f, rng)
    h0 = target.hamiltonian(f, p)
    with np.errstate(all="ignore"):
        try:
            f1, p1 = leapfrog(target, f, p, eps, n_leapfrog, n_fixed)
            h1 = target.hamiltonian(f1, p1)
        except np.linalg.LinAlgError:  # a trajectory that diverged: reject
            f1, h1 = f, math.inf
    err = h1 - h0
    log_a = -err if np.isfinite(err) else -math.inf
    accepted = bool(math.log(rng.random()) < log_a)
    prob = math.exp(min(log_a, 0.0))
    return (f1 if accepted else f), RMHMCInfo(prob, accepted, float(err))
