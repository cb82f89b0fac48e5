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

import copy
import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from scipy import linalg

from .._validation import positive_float, positive_int
from ..errors import InvalidParameterError
from ..likelihoods import Bernoulli
from .ep import _check

__all__ = ["MetricAt", "RMHMCInfo", "RiemannGPC", "leapfrog", "rmhmc_step"]

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

    def tempered(self, beta: float) -> RiemannGPC:
        """The same target at inverse temperature ``beta``, sharing ``K``'s factor (AIS)."""
        if not (0.0 <= float(beta) <= 1.0):
            raise InvalidParameterError(f"beta={beta!r} must lie in [0, 1].")
        out = copy.copy(self)
        out.beta = float(beta)
        return out

    # -- the target -------------------------------------------------------------------------
    def _kinv(self, v: np.ndarray) -> np.ndarray:
        return linalg.cho_solve((self.chol_k, True), v)

    def log_target(self, f: np.ndarray) -> tuple[float, np.ndarray]:
        """``log γ_β(f)`` up to a constant, and its gradient; ``f`` of shape (n,)."""
        b = self.beta
        kf = self._kinv(f)
        ll = float(self.lik.loglik(f[None])[0])
        value = -0.5 * b * (f @ kf) + b * ll
        grad = -b * kf + b * self.lik.obs_derivative(f, 1)
        if b < 1.0:  # q's share (at β = 1, the posterior, it is zero: no second solve)
            r = f - self.m
            kr = self._kinv(r)
            value += -0.5 * (1.0 - b) * (r @ kr + np.sum(self.tau * r * r))
            grad = grad - (1.0 - b) * (kr + self.tau * r)
        return value, grad

    def metric_diag(self, f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``d(f)`` with ``G = K⁻¹ + diag(d)``, and ``∂d_i/∂f_i = β λ'_i`` (eqs. 16–17)."""
        lam = -self.lik.obs_derivative(f, 2)  # every site observed, in order
        dlam = -self.lik.obs_derivative(f, 3)
        return (1.0 - self.beta) * self.tau + self.beta * lam, self.beta * dlam

    def _chol_b(self, root: np.ndarray) -> np.ndarray:
        """``L`` with ``L Lᵀ = B = I + D^½ K D^½`` (§4.3; R&W Algorithm 3.1's stable factor)."""
        return np.linalg.cholesky(np.eye(self.n) + root[:, None] * self.K * root[None, :])

    def log_det_metric(self, chol_b: np.ndarray) -> float:
        """``log |G| = log |B| − log |K|`` from ``B``'s factor (the matrix determinant lemma)."""
        return 2.0 * float(np.sum(np.log(np.diag(chol_b)))) - self.log_det_k

    def inverse_metric(self, d: np.ndarray) -> tuple[np.ndarray, float]:
        """``G⁻¹`` and ``log |G|`` for ``G = K⁻¹ + diag(d)`` by Woodbury (§4.3).

        The whole matrix (``O(n³)`` beyond the factor); the integrator needs only products
        ``G⁻¹ v`` and the diagonal (:meth:`factor`).
        """
        root = np.sqrt(d)
        chol = self._chol_b(root)
        v = linalg.solve_triangular(chol, root[:, None] * self.K, lower=True)
        return self.K - v.T @ v, self.log_det_metric(chol)

    def factor(self, f: np.ndarray, full: bool = True) -> MetricAt:
        """The metric at ``f``: ``B``'s factor, and with ``full`` what ``H`` and ``∂H/∂f`` need.

        One Cholesky of ``B``; ``full`` adds ``diag(G⁻¹)`` (one triangular solve with ``n``
        right-hand sides), ``∇ log γ_β`` and ``log γ_β``.
        """
        d, dd = self.metric_diag(f)
        root = np.sqrt(d)
        chol = self._chol_b(root)
        if not full:
            return MetricAt(root, chol, dd, None, None, math.nan)
        # diag(G⁻¹) = diag(K) − Σ_j V_ji², V = L⁻¹ D^½ K (Woodbury)
        v = linalg.solve_triangular(chol, root[:, None] * self.K, lower=True)
        logp, grad = self.log_target(f)
        return MetricAt(root, chol, dd, np.diag(self.K) - np.sum(v * v, axis=0), -grad, -logp)

    def ginv_dot(self, at: MetricAt, v: np.ndarray) -> np.ndarray:
        """``G⁻¹ v = K v − K D^½ B⁻¹ D^½ K v`` (Woodbury): ``O(n²)`` given ``B``'s factor."""
        kv = self.K @ v
        w = linalg.cho_solve((at.chol, True), at.root * kv, check_finite=False)
        return kv - self.K @ (at.root * w)

    def energy(self, at: MetricAt, p: np.ndarray) -> float:
        """``H(f, p)`` (eq. 11) from the metric at ``f`` (``factor(f)``)."""
        return at.neg_logp + 0.5 * self.log_det_metric(at.chol) + 0.5 * p @ self.ginv_dot(at, p)

    def hamiltonian(self, f: np.ndarray, p: np.ndarray) -> float:
        """``H(f, p)`` (eq. 11), up to a constant."""
        return self.energy(self.factor(f), p)

    def grad_h(self, f: np.ndarray, p: np.ndarray) -> np.ndarray:
        """``∂H/∂f`` (eq. 12; Algorithm 2)."""
        return self.grad_h_at(self.factor(f), p)

    def grad_h_at(self, at: MetricAt, p: np.ndarray) -> np.ndarray:
        """``∂H/∂f`` at the metric's ``f`` (eq. 12): ``O(n²)`` given ``factor(f)``."""
        gp = self.ginv_dot(at, p)
        return at.neg_grad + 0.5 * at.dd * at.ginv_diag - 0.5 * at.dd * gp * gp

    def draw_momentum(self, f: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """``p ~ N(0, G(f))`` as ``L_K⁻ᵀ ξ₁ + d^½ ξ₂`` (covariance ``K⁻¹ + diag(d)``)."""
        d, _ = self.metric_diag(f)
        xi = rng.standard_normal((2, self.n))
        return linalg.solve_triangular(self.chol_k, xi[0], lower=True, trans="T") + np.sqrt(
            d) * xi[1]


class MetricAt(NamedTuple):
    """The metric at one ``f`` (:meth:`RiemannGPC.factor`).

    ``root`` = ``d^½`` (n,), ``chol`` = ``L`` of ``B`` (n, n), ``dd`` = ``β λ'`` (n,);
    with ``full``: ``ginv_diag`` = ``diag(G⁻¹)``, ``neg_grad`` = ``−∇ log γ_β``,
    ``neg_logp`` = ``−log γ_β`` (else None, None, NaN).
    """

    root: np.ndarray
    chol: np.ndarray
    dd: np.ndarray
    ginv_diag: np.ndarray | None
    neg_grad: np.ndarray | None
    neg_logp: float


@dataclass(frozen=True)
class RMHMCInfo:
    """One transition's diagnostics: ``accept_prob``, ``accepted``, ``energy_error``."""

    accept_prob: float
    accepted: bool
    energy_error: float


def leapfrog(target: RiemannGPC, f: np.ndarray, p: np.ndarray, eps: float, n_steps: int,
             n_fixed: int = N_FIXED) -> tuple[np.ndarray, np.ndarray]:
    """``n_steps`` generalised leapfrog steps (eqs. 13–15) from ``(f, p)``."""
    f1, p1, _ = _leapfrog(target, target.factor(f), f, p, eps, n_steps, n_fixed)
    return f1, p1


def _leapfrog(target: RiemannGPC, at: MetricAt, f: np.ndarray, p: np.ndarray, eps: float,
              n_steps: int, n_fixed: int) -> tuple[np.ndarray, np.ndarray, MetricAt]:
    """The leapfrog from the metric ``at`` ``f``; returns the metric at the end as well.

    Per step: ``n_fixed`` factors of ``B`` (the position's fixed point) and one with
    ``diag(G⁻¹)`` at the new position, which the next step and the final ``H`` reuse —
    products with ``G⁻¹`` go through the factor (``O(n²)``), never the whole inverse.
    """
    f, p = np.array(f, dtype=float), np.array(p, dtype=float)
    for _ in range(n_steps):
        # eq. 13: p½ = p − ε/2 ∂H/∂f(f, p½), by fixed-point iteration (Algorithm 1, 13–17);
        # f is fixed here, so its metric is computed once
        half = p.copy()
        for _ in range(n_fixed):
            half = p - 0.5 * eps * target.grad_h_at(at, half)
        # eq. 14: f′ = f + ε/2 [G⁻¹(f) + G⁻¹(f′)] p½ (Algorithm 1, 20–25)
        ginv_f = target.ginv_dot(at, half)
        new = f + eps * ginv_f
        for _ in range(n_fixed):
            new = f + 0.5 * eps * (ginv_f + target.ginv_dot(target.factor(new, full=False),
                                                            half))
        f = new
        at = target.factor(f)
        # eq. 15: the second half step of the momentum, explicit
        p = half - 0.5 * eps * target.grad_h_at(at, half)
    return f, p, at


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
    at = target.factor(f)
    h0 = target.energy(at, p)
    with np.errstate(all="ignore"):
        try:
            f1, p1, at1 = _leapfrog(target, at, f, p, eps, n_leapfrog, n_fixed)
            h1 = target.energy(at1, p1)
        except (np.linalg.LinAlgError, ValueError):  # a trajectory that diverged: reject
            f1, h1 = f, math.inf
    err = h1 - h0
    log_a = -err if np.isfinite(err) else -math.inf
    accepted = bool(math.log(rng.random()) < log_a)
    prob = math.exp(min(log_a, 0.0))
    return (f1 if accepted else f), RMHMCInfo(prob, accepted, float(err))
