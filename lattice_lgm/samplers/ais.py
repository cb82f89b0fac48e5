r"""Annealed importance sampling for probit GP classification, with HMC or RMHMC transitions.

Fraccaro, Paquet & Winther (technical report, §1.1, eqs. 4–5) write the GP classification
posterior ``p(f | y) ∝ N(f; 0, K) Π_i Φ(y_i f_i)`` as the end of a tempered family between a
normalised Gaussian ``q(f)`` — the prior, or EP's approximation
(:func:`lattice_lgm.samplers.ep.expectation_propagation`) — and the posterior:

    log γ_β(f) = (1 − β) log q(f) + β [log N(f; 0, K) + Σ_i log Φ(y_i f_i)],   β ∈ [0, 1],

so that ``γ_0 = q`` has normaliser 1 and ``γ_1``'s normaliser is the marginal likelihood
``Z = p(y | K)``.  AIS (Neal 2001) draws ``f`` from ``q``, and at each ``β_k`` of an increasing
schedule adds ``log γ_{β_k}(f) − log γ_{β_{k−1}}(f) = (β_k − β_{k−1}) [log p(f, y) − log q(f)]``
to the chain's log weight, then moves ``f`` by a transition that leaves ``γ_{β_k}``
invariant.  ``mean(exp(log w))`` is unbiased for ``Z`` (tested over repeats); its log, the
estimate reported, is biased low by ~½ of its relative variance.

The transition is HMC (§2 of the report) in the coordinates ``z`` with ``f = m_q + L_q z``,
``L_q L_qᵀ = Σ_q``: there ``q`` is ``N(0, I)``, so an identity mass matrix is ``q``'s own
scaling — the role the report gives EP's ``q`` ("to further aid AIS ... anneal from a
Gaussian approximation").  The schedule is a geometric progression of ``β`` (the report's
"AIS's β-grid is a geometric progression"), preceded by ``β_0 = 0``.

``transition="rmhmc"`` replaces HMC by the report's RMHMC (§3, :mod:`.rmhmc`) in ``f``
itself, whose metric at ``β`` is the tempered target's negative Hessian
``K⁻¹ + diag((1 − β) τ̃ + β λ(f))`` — the report's AIS+RMHMC rows, from the prior or from
EP's ``q`` (which then needs EP's site precisions ``τ̃``: :meth:`TemperedGPC.from_ep`).

Every chain's arithmetic is a row of one array, so chains run together in NumPy's BLAS; the
draws depend only on ``rng``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import linalg, special

from .._validation import positive_float, positive_int
from ..errors import InvalidParameterError
from .ep import EPResult, _check
from .rmhmc import N_FIXED, RiemannGPC, rmhmc_step

__all__ = ["TRANSITIONS", "AISResult", "TemperedGPC", "ais", "geometric_schedule",
           "hmc_transition"]

#: AIS's transition kernels
TRANSITIONS = ("hmc", "rmhmc")

_LOG_2PI = math.log(2.0 * math.pi)


def geometric_schedule(n_temps: int, beta_min: float = 1e-4) -> np.ndarray:
    """``β_0 = 0`` then ``n_temps`` values in geometric progression from ``beta_min`` to 1.

    Returns
    -------
    ndarray, shape (n_temps + 1,)
    """
    n_temps = positive_int("n_temps", n_temps, "pass e.g. 200")
    beta_min = positive_float("beta_min", beta_min, "pass e.g. 1e-4")
    if beta_min >= 1.0:
        raise InvalidParameterError(f"beta_min={beta_min!r} must lie in (0, 1).")
    if n_temps == 1:
        return np.array([0.0, 1.0])
    return np.concatenate([[0.0], np.geomspace(beta_min, 1.0, n_temps)])


class TemperedGPC:
    """The report's tempered target (eq. 4) for probit GP classification.

    Evaluated in ``q``'s whitened coordinates ``z`` (``f = m_q + L_q z``).

    Parameters
    ----------
    K : array_like, shape (n, n)
        Prior covariance of ``f`` at the inputs (positive definite).
    y : array_like, shape (n,)
        Labels in {0, 1}.
    q_mean, q_cov : array_like, shapes (n,) and (n, n), optional
        The Gaussian ``q`` at ``β = 0``; default the prior ``N(0, K)``.
    q_tau : array_like, shape (n,), optional
        EP's site precisions ``τ̃`` (``q``'s precision is ``K⁻¹ + diag(τ̃)``): the RMHMC
        transitions' metric needs them (:meth:`from_ep` passes them).
    """

    def __init__(self, K: Any, y: Any, q_mean: Any = None, q_cov: Any = None, *,
                 q_tau: Any = None) -> None:
        self.K, self.s = _check(K, y)  # the same checks of K and the labels as EP's
        n = len(self.s)
        self.chol_k = _cholesky("K", self.K)
        if (q_mean is None) != (q_cov is None):
            raise InvalidParameterError("give both q_mean and q_cov, or neither (the prior).")
        if q_tau is not None and q_mean is None:
            raise InvalidParameterError("q_tau belongs to an EP q: give q_mean and q_cov too.")
        self.q_tau = None if q_tau is None else np.asarray(q_tau, dtype=float).reshape(-1)
        if self.q_tau is not None and (self.q_tau.shape != (n,) or not np.all(
                np.isfinite(self.q_tau)) or np.any(self.q_tau < 0)):
            raise InvalidParameterError(
                f"q_tau (shape {self.q_tau.shape}) must be ({n},), finite and >= 0.")
        if q_mean is None:
            self.m_q, self.chol_q = np.zeros(n), self.chol_k
        else:
            self.m_q = np.asarray(q_mean, dtype=float).reshape(-1)
            cov = np.asarray(q_cov, dtype=float)
            if self.m_q.shape != (n,) or cov.shape != (n, n):
                raise InvalidParameterError(
                    f"q_mean (shape {self.m_q.shape}) and q_cov (shape {cov.shape}) must be "
                    f"({n},) and ({n}, {n}).")
            self.chol_q = _cholesky("q_cov", cov)
        self.n = n
        self._log_norm_q = float(np.sum(np.log(np.diag(self.chol_q)))) + 0.5 * n * _LOG_2PI
        self._log_norm_k = float(np.sum(np.log(np.diag(self.chol_k)))) + 0.5 * n * _LOG_2PI

    @classmethod
    def from_ep(cls, K: Any, y: Any, ep: EPResult) -> TemperedGPC:
        """The tempered target from EP's ``q`` (its mean, covariance and site precisions)."""
        return cls(K, y, ep.mean, ep.cov, q_tau=ep.tau_site)

    def riemann(self) -> RiemannGPC:
        """The posterior's :class:`~.rmhmc.RiemannGPC` with this ``q`` (for RMHMC transitions).

        Raises
        ------
        InvalidParameterError
            ``q`` is not the prior and its site precisions are unknown (build with
            :meth:`from_ep` or ``q_tau=``).
        """
        if self.q_tau is None and self.chol_q is not self.chol_k:  # q given, sites unknown
            raise InvalidParameterError(
                "RMHMC transitions from a q other than the prior need its site precisions: "
                "build the target with TemperedGPC.from_ep(K, y, ep) or q_tau=ep.tau_site.")
        if self.q_tau is None:
            return RiemannGPC(self.K, (self.s + 1.0) / 2.0)
        return RiemannGPC(self.K, (self.s + 1.0) / 2.0, 1.0, self.m_q, self.q_tau)

    def z_of(self, f: np.ndarray) -> np.ndarray:
        """``z = L_q⁻¹ (f − m_q)`` for ``f`` of shape (chains, n)."""
        return linalg.solve_triangular(self.chol_q, (f - self.m_q).T, lower=True).T

    def f_of(self, z: np.ndarray) -> np.ndarray:
        """``f = m_q + L_q z`` for ``z`` of shape (chains, n)."""
        return self.m_q + z @ self.chol_q.T

    def log_q(self, z: np.ndarray) -> np.ndarray:
        """``log q(f(z))`` (normalised in ``f``), shape (chains,)."""
        return -0.5 * np.sum(z * z, axis=1) - self._log_norm_q

    def log_joint(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``log N(f; 0, K) + Σ log Φ(y f)`` at ``f(z)`` and its gradient in ``z``."""
        f = self.f_of(z)
        # K⁻¹ f per chain (columns solved independently: a diverged chain's NaNs stay in its
        # row, and its transition is rejected)
        w = linalg.cho_solve((self.chol_k, True), f.T, check_finite=False).T
        sf = self.s * f
        log_phi = special.log_ndtr(sf)
        value = -0.5 * np.sum(f * w, axis=1) - self._log_norm_k + np.sum(log_phi, axis=1)
        # d log Φ(s f)/df = s ϕ(s f)/Φ(s f), the ratio formed in logs (no 0/0 in the tail)
        ratio = np.exp(-0.5 * sf * sf - 0.5 * _LOG_2PI - log_phi)
        grad_f = -w + self.s * ratio
        return value, grad_f @ self.chol_q

    def log_gamma(self, z: np.ndarray, beta: float) -> tuple[np.ndarray, np.ndarray]:
        """``log γ_β`` (eq. 4) at ``f(z)`` and its gradient in ``z``."""
        joint, grad = self.log_joint(z)
        return (1.0 - beta) * self.log_q(z) + beta * joint, -(1.0 - beta) * z + beta * grad


@dataclass(frozen=True)
class AISResult:
    """AIS's weights and estimate of ``log Z``.

    Attributes
    ----------
    log_weights : ndarray, shape (chains,)
    log_z : float
        ``log mean exp(log_weights)``.
    log_z_se : float
        Its standard error by the delta method, ``sd(w) / (mean(w) √chains)``.
    ess : float
        The weights' effective sample size ``(Σ w)² / Σ w²``.
    betas : ndarray, shape (temps + 1,)
    acceptance : ndarray, shape (temps,)
        The transitions' mean acceptance probability at each ``β_k``, ``k ≥ 1``.
    f : ndarray, shape (chains, n)
        The chains' final states (weighted by ``exp(log_weights)`` for the posterior).
    """

    log_weights: np.ndarray
    log_z: float
    log_z_se: float
    ess: float
    betas: np.ndarray
    acceptance: np.ndarray
    f: np.ndarray


def ais(target: TemperedGPC, rng: np.random.Generator, *, chains: int = 100,
        betas: Any = None, step_size: float = 0.1, n_leapfrog: int = 10,
        transition: str = "hmc", n_fixed: int = N_FIXED) -> AISResult:
    """Annealed importance sampling from ``q`` to the posterior with HMC or RMHMC transitions.

    Parameters
    ----------
    target : TemperedGPC
    rng : numpy.random.Generator
    chains : int
        Independent AIS runs (rows of one array).
    betas : array_like, shape (T + 1,), optional
        Increasing from 0 to 1; default :func:`geometric_schedule` ``(200)``.
    step_size : float or array_like, shape (T,)
        The leapfrog step (HMC: in ``q``'s whitened coordinates; RMHMC: in ``f``, the metric
        scales it), or one per temperature ``β_1 … β_T`` (a tempered target near ``q`` takes
        longer steps than the posterior: tune them in a pilot, never from this run's draws,
        which would bias the weights).
    n_leapfrog : int
        Leapfrog steps per transition.
    transition : {"hmc", "rmhmc"}
        HMC with an identity mass in ``q``'s whitened coordinates, all chains as rows of one
        array; or the report's RMHMC (:func:`~.rmhmc.rmhmc_step`, one chain at a time) with
        the tempered metric ``K⁻¹ + diag((1 − β) τ̃ + β λ(f))`` (§4.2).
    n_fixed : int
        RMHMC's fixed-point iterations per implicit half step.

    Returns
    -------
    AISResult
    """
    if not isinstance(target, TemperedGPC):
        raise InvalidParameterError(f"target={target!r} must be a TemperedGPC.")
    chains = positive_int("chains", chains, "pass e.g. 100")
    n_leapfrog = positive_int("n_leapfrog", n_leapfrog, "pass e.g. 10")
    if transition not in TRANSITIONS:
        raise InvalidParameterError(
            f"transition={transition!r} is unknown; use one of {TRANSITIONS}.")
    n_fixed = positive_int("n_fixed", n_fixed, "pass e.g. 5")
    riemann = target.riemann() if transition == "rmhmc" else None
    b = geometric_schedule(200) if betas is None else np.asarray(betas, dtype=float)
    if (b.ndim != 1 or len(b) < 2 or b[0] != 0.0 or b[-1] != 1.0
            or not np.all(np.diff(b) > 0)):
        raise InvalidParameterError(
            "betas must increase strictly from 0 to 1 (e.g. geometric_schedule(200)); got "
            f"{len(b)} values from {b[0] if b.size else None} to "
            f"{b[-1] if b.size else None}.")
    try:
        eps = np.asarray(step_size, dtype=float)
    except (TypeError, ValueError):
        raise InvalidParameterError(
            f"step_size={step_size!r} must be a number > 0 or one per temperature.") from None
    if eps.ndim == 0:
        eps = np.full(len(b) - 1, float(positive_float("step_size", float(eps),
                                                       "pass e.g. 0.1")))
    elif eps.shape != (len(b) - 1,) or not np.all(np.isfinite(eps) & (eps > 0)):
        raise InvalidParameterError(
            f"step_size has shape {eps.shape}; give one step > 0 or one per temperature "
            f"β_1 … β_T ({len(b) - 1} values).")
    z = rng.standard_normal((chains, target.n))  # exact draws from q = γ_0
    log_w = np.zeros(chains)
    acc = np.zeros(len(b) - 1)
    for k in range(1, len(b)):
        joint, _ = target.log_joint(z)
        log_w += (b[k] - b[k - 1]) * (joint - target.log_q(z))  # γ_{β_k}/γ_{β_{k−1}} at z
        if riemann is None:
            z, acc[k - 1] = hmc_transition(target, z, b[k], rng, eps[k - 1], n_leapfrog)
        else:
            z, acc[k - 1] = _rmhmc(target, riemann.tempered(b[k]), z, rng, eps[k - 1],
                                   n_leapfrog, n_fixed)
    top = float(np.max(log_w))
    w = np.exp(log_w - top)
    log_z = top + math.log(float(np.mean(w)))
    se = float(np.std(w, ddof=1) / (np.mean(w) * math.sqrt(chains))) if chains > 1 else np.nan
    return AISResult(log_w, log_z, se, float(w.sum() ** 2 / np.sum(w * w)), b, acc,
                     target.f_of(z))


def hmc_transition(target: TemperedGPC, z: np.ndarray, beta: float, rng: np.random.Generator,
                   eps: float, n_steps: int) -> tuple[np.ndarray, float]:
    """One HMC transition of every chain leaving ``γ_β`` invariant (the report's §2, eq. 9).

    In ``q``'s whitened coordinates with an identity mass: in ``f`` the mass matrix is
    ``q``'s precision (``K⁻¹`` from the prior, ``K⁻¹ + diag(τ̃)`` from EP).  At ``β = 1`` it
    is plain HMC on the posterior — the report's baseline.

    Parameters
    ----------
    target : TemperedGPC
    z : ndarray, shape (chains, n)
        The chains' states in whitened coordinates (``target.z_of(f)``).
    beta : float
    rng : numpy.random.Generator
    eps, n_steps : float, int
        Leapfrog step and steps (not checked here: :func:`ais` checks them).

    Returns
    -------
    z : ndarray, shape (chains, n)
    acceptance : float
        The mean acceptance probability over chains.
    """
    p = rng.standard_normal(z.shape)
    logp, grad = target.log_gamma(z, beta)
    h0 = -logp + 0.5 * np.sum(p * p, axis=1)
    with np.errstate(all="ignore"):  # a diverging chain ends non-finite and is rejected
        zn, pn = z.copy(), p + 0.5 * eps * grad  # half step of the momentum
        for i in range(n_steps):
            zn = zn + eps * pn
            logp_n, grad_n = target.log_gamma(zn, beta)
            pn = pn + (eps if i < n_steps - 1 else 0.5 * eps) * grad_n
        h1 = -logp_n + 0.5 * np.sum(pn * pn, axis=1)
        log_a = np.where(np.isfinite(h1), h0 - h1, -np.inf)
    accept = np.log(rng.random(len(z))) < log_a
    return np.where(accept[:, None], zn, z), float(np.mean(np.exp(np.minimum(log_a, 0.0))))


def _rmhmc(target: TemperedGPC, riemann: RiemannGPC, z: np.ndarray, rng: np.random.Generator,
           eps: float, n_steps: int, n_fixed: int) -> tuple[np.ndarray, float]:
    """One RMHMC transition of every chain leaving ``γ_β`` invariant (the report's §3)."""
    f = target.f_of(z)
    probs = np.empty(len(z))
    for c in range(len(z)):
        f[c], info = rmhmc_step(riemann, f[c], rng, step_size=eps, n_leapfrog=n_steps,
                                n_fixed=n_fixed)
        probs[c] = info.accept_prob
    return target.z_of(f), float(np.mean(probs))


def _cholesky(name: str, a: np.ndarray) -> np.ndarray:
    try:
        return np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        raise InvalidParameterError(
            f"{name} is not positive definite; add a small jitter to its diagonal "
            "(e.g. 1e-6 × its largest variance).") from None
