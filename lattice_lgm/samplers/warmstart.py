"""A start that fits the data: the field's posterior mode at fixed θ, then elliptical slice updates.

Chains started from a *prior* draw of the field do not agree with the data, and the first
hyperparameter move then explains the misfit away (measured on bei, docs/decisions.md: the
sd collapses under ``prior-white``, or the range runs to its bound under ``post-scalar``, and the
chains need thousands of sweeps to come back).  :func:`warm_start` therefore starts every chain
from a field that fits the data at the chain's own starting ``θ``:

1. **Mode.**  The mode of ``p(f, β | θ, y)`` (field and in-block coefficients) by Newton's
   method in its iteratively-reweighted form (Rue & Held 2005, §4.4.1; Rasmussen & Williams
   2006, Alg. 3.1): at the current ``η`` with site curvatures ``D = −∂²log L/∂η²`` and working
   response ``z = η + ∇log L / D``, the Newton point of the field is the Gaussian posterior mean
   ``(K⁻¹ + D)⁻¹ D (z − Xβ)``, and the coefficients follow from its Schur complement.  The
   linear solves use the prior's own operator: :meth:`GaussianPrior.surrogate` (dense: one
   Cholesky; GMRF: one CHOLMOD factorisation of ``Q + D`` for every right-hand side at once);
   on the circulant torus, preconditioned conjugate gradients on ``I + W D W`` (``W = K^½``,
   two FFTs per product) with the per-frequency preconditioner ``(1 + p̄ λ_k)⁻¹``,
   ``p̄ = mean(D)`` (the ``surr-scalar`` approximation of DESIGN §4).  Each Newton step is
   damped by backtracking on ``ψ = −log L + ½ fᵀK⁻¹f + ½|β/s|²`` so it always descends.
2. **Around it.**  One draw of the Laplace approximation's noise is added to the mode, so the
   prior-dominated components start at a typical size rather than at ~0 (exact on dense and
   GMRF priors; on the torus with the site curvatures replaced by their mean).  Settling
   (step 3) removes what this approximation gets wrong.
3. **Settle.**  Elliptical slice updates at fixed ``θ``, in blocks, until the block mean of the
   log-likelihood stops falling.  Each chain's stopping
   decision uses only its own history and its own stream, so a chain's start is the same in
   any subset of chains (DESIGN §5).

The mode uses no random numbers; only the settling does, from each chain's stream.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._validation import positive_int
from ..errors import InvalidParameterError, SamplerError
from ..models.latent import LatentGaussianModel
from ..priors import GaussianPrior
from ..priors.base import FourierPrior, fourier
from ..threads import chain_thread_init, chain_threads
from ._latent import loglik_at, state_from_fields
from .ess import EllipticalSlice
from .state import LatentState

__all__ = ["ModeResult", "WarmStartReport", "field_mode", "warm_start"]

#: default cap on Newton iterations, and on conjugate-gradient iterations per solve
MAX_NEWTON, MAX_CG = 50, 1000
#: Newton stops when the decrease of ψ falls below this (absolute, nats)
NEWTON_TOL = 1e-6
#: relative residual at which conjugate gradients stop
CG_TOL = 1e-8
#: elliptical slice updates per settling block, and the cap on blocks
SETTLE_BLOCK, MAX_SETTLE_BLOCKS = 10, 50


@dataclass
class ModeResult:
    """The posterior mode of ``(f, β)`` at fixed ``θ`` (one chain).

    Attributes
    ----------
    f : ndarray, shape (1, *state_shape)
    beta : ndarray, shape (p,)
    loglik : float
        ``log L`` at the mode.
    objective : float
        ``ψ = −log L + ½ fᵀK⁻¹f + ½|β/s|²`` at the mode.
    n_newton, n_cg : int
        Newton iterations, and conjugate-gradient iterations over all of them (0 off the torus).
    converged : bool
    curvature : ndarray, shape (n_obs,)
        ``D = −∂²log L/∂η²`` at the observed sites at the mode (the Laplace precision's data
        part).
    """

    f: np.ndarray
    beta: np.ndarray
    loglik: float
    objective: float
    n_newton: int
    n_cg: int
    converged: bool
    curvature: np.ndarray


@dataclass
class WarmStartReport:
    """What :func:`warm_start` did, per chain (lists indexed like ``chains``)."""

    chains: list[int]
    theta: list[dict[str, float]]
    mode_loglik: list[float]
    n_newton: list[int]
    n_cg: list[int]
    converged: list[bool]
    settle_steps: list[int]
    settled: list[bool]
    loglik: list[float] = field(default_factory=list)
    seconds: float = 0.0

    def describe(self) -> str:
        """A few lines for a log or a terminal."""
        lines = ["warm start: field from the posterior mode at each chain's start, then "
                 f"elliptical slice updates at fixed θ until log L settles ({self.seconds:.1f} s)"]
        for i, c in enumerate(self.chains):
            lines.append(
                f"  chain {c}: Newton {self.n_newton[i]} it"
                + (f" ({self.n_cg[i]} CG)" if self.n_cg[i] else "")
                + ("" if self.converged[i] else " (not converged)")
                + f", log L at mode {self.mode_loglik[i]:.1f} -> {self.loglik[i]:.1f} after "
                f"{self.settle_steps[i]} ESS updates" + ("" if self.settled[i] else
                                                           " (cap reached)"))
        return "\n".join(lines)

    __str__ = describe

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {k: getattr(self, k) for k in ("chains", "theta", "mode_loglik", "n_newton",
                                               "n_cg", "converged", "settle_steps", "settled",
                                               "loglik", "seconds")}


# -- linear algebra: (K⁻¹ + D)⁻¹ D G per right-hand side -------------------------------------------
def _pcg_torus(prior: FourierPrior, d: np.ndarray, rhs: np.ndarray, tol: float,
               max_iter: int, x0: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Solve ``(I + W D W) x = rhs`` for each row of ``rhs`` (n, *state) by PCG.

    ``W = K^½`` (symmetric on the torus); preconditioner ``F⁻¹ diag(1/(1 + p̄ λ)) F``.
    """
    sq = np.sqrt(prior.eigenvalues)
    pbar = float(d.mean())
    prec_m = 1.0 / (1.0 + pbar * prior.eigenvalues)

    def op(v):
        return v + prior.apply_spectral(d * prior.apply_spectral(v, sq), sq)

    x = np.zeros_like(rhs) if x0 is None else x0.copy()
    r = rhs - op(x) if x0 is not None else rhs.copy()
    z = prior.apply_spectral(r, prec_m)
    p = z.copy()
    axes = tuple(range(1, rhs.ndim))
    rz = np.sum(r * z, axis=axes)
    bnorm = np.sqrt(np.sum(rhs * rhs, axis=axes))
    bnorm = np.where(bnorm > 0, bnorm, 1.0)
    n_it = 0
    shape1 = (-1,) + (1,) * (rhs.ndim - 1)
    for n_it in range(1, max_iter + 1):  # noqa: B007 - the count is returned
        ap = op(p)
        alpha = rz / np.sum(p * ap, axis=axes)
        x += alpha.reshape(shape1) * p
        r -= alpha.reshape(shape1) * ap
        if np.all(np.sqrt(np.sum(r * r, axis=axes)) <= tol * bnorm):
            break
        z = prior.apply_spectral(r, prec_m)
        rz_new = np.sum(r * z, axis=axes)
        p = z + (rz_new / rz).reshape(shape1) * p
        rz = rz_new
    else:
        raise SamplerError(
            f"conjugate gradients on the torus did not reach relative residual {tol:g} in "
            f"{max_iter} iterations; raise max_cg or check the data (site curvatures up to "
            f"{float(d.max()):.3g}).", {"max_cg": max_iter})
    return x, n_it


def _posterior_means(prior: GaussianPrior, d_state: np.ndarray, g: np.ndarray, tol: float,
                     max_cg: int, warm: dict[str, np.ndarray]) -> tuple[np.ndarray, int]:
    """``(K⁻¹ + D)⁻¹ D g`` for each row of ``g`` (n, *state); ``D`` on the state (0 off sites).

    ``warm`` carries the previous Newton step's CG solution (its starting point now).
    """
    if prior.capabilities.fourier:
        torus = fourier(prior)
        sq = np.sqrt(torus.eigenvalues)
        # (K⁻¹ + D)⁻¹ D = W (I + W D W)⁻¹ W D: defined with the pseudo-inverse when λ has zeros
        rhs = torus.apply_spectral(d_state * g, sq)
        x, n = _pcg_torus(torus, d_state, rhs, tol, max_cg, warm.get("x"))
        warm["x"] = x
        return torus.apply_spectral(x, sq), n
    return prior.surrogate(g, d_state).mean, 0


# -- the mode ----------------------------------------------------------------------------------
def field_mode(model: LatentGaussianModel, theta: Mapping[str, float], *,
               f0: np.ndarray | None = None, beta0: np.ndarray | None = None,
               tol: float = NEWTON_TOL, max_newton: int = MAX_NEWTON, cg_tol: float = CG_TOL,
               max_cg: int = MAX_CG) -> ModeResult:
    """The mode of ``p(f, β | θ, y)`` by damped Newton (IRLS) with the prior's own solves.

    Parameters
    ----------
    model : LatentGaussianModel
        Its likelihood must be log-concave in ``η`` (Poisson, Bernoulli, binomial,
        Gaussian): the site curvatures ``D`` must be ≥ 0.  A sigmoidal Poisson likelihood is
        not; it is accepted while every curvature met is ≥ 0 and refused where one is not.
    theta : mapping
        Hyperparameters (missing names take the model's values).
    f0 : ndarray, shape (1, *state_shape), optional
        Starting field (default 0).
    beta0 : ndarray, shape (p,), optional
        Starting in-block coefficients (default 0).
    tol : float
        Stop when one Newton step lowers ``ψ`` by less than ``tol`` nats.
    max_newton, max_cg : int
        Caps (the mode is returned with ``converged=False`` past ``max_newton``).
    cg_tol : float
        Relative residual of the conjugate-gradient solves on the torus.

    Returns
    -------
    ModeResult
    """
    positive_int("max_newton", max_newton, "e.g. 50")
    positive_int("max_cg", max_cg, "e.g. 1000")
    theta = dict(model.initial_theta(), **theta)
    prior = model.prior_for(theta, model.prior)
    lik = model.likelihood
    idx = model.state_index
    s = model.beta_sd
    xo = model.covariates_obs                     # (p, n_obs)
    base = model.base_obs(theta)                  # (n_obs,)
    p = model.n_beta
    f = np.zeros((1, *prior.state_shape)) if f0 is None else np.array(f0, dtype=np.float64)
    b = np.zeros(p) if beta0 is None else np.array(beta0, dtype=np.float64) / s
    win = np.zeros((1, *lik.shape))
    wflat = win.reshape(-1)
    obs = lik.obs_index

    def eta_obs(f_, b_):
        return base + f_.reshape(-1)[idx] + (s * b_) @ xo

    def derivs(e):
        wflat[obs] = e
        g = lik.grad(win).reshape(-1)[obs]
        h = -lik.hess_diag(win).reshape(-1)[obs]
        return g, h

    def objective(f_, b_):
        ll = float(loglik_at(model, f_, s * b_[None], [theta])[0])
        return -ll + 0.5 * float(prior.quad_form(f_)[0]) + 0.5 * float(b_ @ b_), ll

    psi, ll = objective(f, b)
    warm: dict[str, np.ndarray] = {}
    dec = np.inf
    n_cg = 0
    converged = False
    it = 0
    for it in range(1, max_newton + 1):  # noqa: B007 - reported
        e = eta_obs(f, b)
        g, h = derivs(e)
        if np.any(h < 0) or not np.all(np.isfinite(h)):
            raise InvalidParameterError(
                f"field_mode needs a log-concave likelihood (site curvatures >= 0); "
                f"{lik.name} gives {float(h.min()):.3g}.")
        h = np.maximum(h, 1e-12)
        # working response of the field and coefficients together: η − base + ∇log L / D
        z = e - base + g / h
        # right-hand sides: the working response and one column per coefficient (Schur)
        g_state = np.zeros((1 + p, prior.state_size))
        g_state[0, idx] = z
        for j in range(p):
            g_state[1 + j, idx] = s[j] * xo[j]
        d_state = np.zeros(prior.state_size)
        d_state[idx] = h
        shape = (1 + p, *prior.state_shape)
        # inexact Newton: loose solves while far from the mode (the step is damped anyway),
        # the requested accuracy once a step gains less than one nat
        tol_k = cg_tol if dec < 1.0 else max(cg_tol, 1e-4)
        m, k = _posterior_means(prior, d_state.reshape(prior.state_shape),
                                g_state.reshape(shape), tol_k, max_cg, warm)
        n_cg += k
        m = m.reshape(1 + p, -1)
        if p:
            # b = (I + sX P Xᵀs)⁻¹ sX P z with P v = D (v − m(v)) (Schur complement of f)
            pv = h * (g_state[:, idx] - m[:, idx])          # (1 + p, n_obs)
            sx = s[:, None] * xo                            # (p, n_obs)
            a = np.eye(p) + sx @ pv[1:].T
            b_new = np.linalg.solve(a, sx @ pv[0])
            f_new = (m[0] - b_new @ m[1:]).reshape(1, *prior.state_shape)
        else:
            b_new = b
            f_new = m[0].reshape(1, *prior.state_shape)
        # damped step: backtrack on ψ so every step descends (Newton from far away overshoots)
        t = 1.0
        for _ in range(30):
            f_try = f + t * (f_new - f)
            b_try = b + t * (b_new - b)
            psi_try, ll_try = objective(f_try, b_try)
            if np.isfinite(psi_try) and psi_try <= psi + 1e-10 * abs(psi):
                break
            t *= 0.5
        else:
            break
        dec = psi - psi_try
        f, b, psi, ll = f_try, b_try, psi_try, ll_try
        if dec < tol and tol_k == cg_tol:
            converged = True
            break
    _, h_end = derivs(eta_obs(f, b))
    return ModeResult(f=f, beta=s * b, loglik=ll, objective=psi, n_newton=it, n_cg=n_cg,
                      converged=converged, curvature=h_end)


# -- the warm start --------------------------------------------------------------------------------
def _laplace_perturb(model: LatentGaussianModel, theta: Mapping[str, float], mode: ModeResult,
                     rng: np.random.Generator) -> np.ndarray:
    """``f_mode + ε``, ``ε`` one draw of the Laplace approximation's field noise (1, *state).

    ``ε ~ N(0, (K⁻¹ + D)⁻¹)`` exactly on dense and GMRF priors (the surrogate conditional's
    square root); on the circulant torus with ``D`` replaced by its mean ``p̄`` over the observed
    sites, which is diagonal in Fourier: ``ε̂_k = √(λ_k / (1 + p̄ λ_k)) ξ_k`` (DESIGN §4,
    ``surr-scalar``).
    """
    prior = model.prior_for(dict(model.initial_theta(), **theta), model.prior)
    if prior.capabilities.fourier:
        torus = fourier(prior)
        # the mean curvature over the observed sites (the noise matters where the data are;
        # the torus mean would dilute it by the padding and over-perturb the window)
        pbar = float(mode.curvature.mean())
        lam = torus.eigenvalues
        xi = torus.draw_spectrum(rng)[None]
        eps = torus.colorize_with(xi, np.sqrt(lam / (1.0 + pbar * lam)))
        return mode.f + eps
    d = np.zeros(prior.state_size)
    d[model.state_index] = mode.curvature
    sc = prior.surrogate(np.zeros((1, *prior.state_shape)), d.reshape(prior.state_shape))
    return mode.f + sc.colorize(rng.standard_normal((1, *prior.state_shape)))



def _replace_rows(state: LatentState, pos: Sequence[int], sub: LatentState) -> LatentState:
    """``state`` with the chains at positions ``pos`` replaced by ``sub``'s."""
    pos = list(pos)
    theta = {k: v.copy() for k, v in state.theta.items()}
    for k in theta:
        theta[k][pos] = sub.theta[k]
    priors = list(state.priors)
    for i, j in enumerate(pos):
        priors[j] = sub.priors[i]
    f, white, beta, ll = (state.f.copy(), state.white.copy(), state.beta.copy(),
                          state.loglik.copy())
    f[pos], white[pos], beta[pos], ll[pos] = sub.f, sub.white, sub.beta, sub.loglik
    return LatentState(theta, tuple(priors), f, white, beta, ll, state.chains)


def warm_start(model: LatentGaussianModel, rngs: Sequence[np.random.Generator],
               theta: Sequence[Mapping[str, float]], chains: Sequence[int] | None = None, *,
               latent: Any = None, block: int = SETTLE_BLOCK,
               max_blocks: int = MAX_SETTLE_BLOCKS, threads: int | None = None,
               **mode_kw: Any
               ) -> tuple[LatentState, WarmStartReport]:
    """Chains started at the posterior mode of the field at their own ``θ``, then settled.

    Parameters
    ----------
    model : LatentGaussianModel
    rngs : sequence of Generator, one per chain
    theta : sequence of mappings, one per chain
        Each chain's starting hyperparameters (e.g. ``LGCP.chain_starts``).
    chains : sequence of int, optional
        Global chain indices.
    latent : EllipticalSlice, optional
        The settling update (default ``EllipticalSlice(model)``).
    block, max_blocks : int
        Settling runs in blocks of ``block`` updates; a chain stops when its block mean of
        ``log L`` differs from the previous block's by less than half the block's standard
        deviation (no trend left), or after ``max_blocks`` blocks.
    threads : int, optional
        Chains whose modes are found at once, in threads (circulant prior; default: the
        cores this process may use).  The result does not depend on it.
    **mode_kw
        Passed to :func:`field_mode`.

    Returns
    -------
    state : LatentState
    report : WarmStartReport
    """
    t0 = time.perf_counter()
    n = len(rngs)
    if len(theta) != n:
        raise InvalidParameterError(f"theta has {len(theta)} entries for {n} chains (rngs).")
    positive_int("block", block, "e.g. 10")
    positive_int("max_blocks", max_blocks, "e.g. 50")
    chains = list(range(n)) if chains is None else [int(c) for c in chains]
    def start(c: int) -> tuple[ModeResult, np.ndarray]:
        md = field_mode(model, theta[c], **mode_kw)
        # around the mode: one draw of the Laplace approximation's field noise, so that the
        # prior-dominated components start typical (the mode's are ~0: on bei at 20 m |ζ|²
        # was 327 at the mode against ~7200 for a draw, which biases the first θ moves
        # towards smooth long-range fields)
        return md, _laplace_perturb(model, theta[c], md, rngs[c])

    # chains are independent (no shared random numbers), so on the torus they run in threads
    # (each with its own FFT plans, CirculantPrior._fft); the same numbers in any thread
    k = chain_threads(n, threads)
    if k > 1 and model.prior.capabilities.fourier:
        with ThreadPoolExecutor(max_workers=k, thread_name_prefix="lattice-warm",
                                initializer=chain_thread_init) as pool:
            started = list(pool.map(start, range(n)))
    else:
        started = [start(c) for c in range(n)]
    modes = [md for md, _ in started]
    fields = np.concatenate([f for _, f in started])
    state = state_from_fields(model, fields, list(theta), rngs,
                              chains=chains, beta=np.stack([m.beta for m in modes]))
    latent = EllipticalSlice(model) if latent is None else latent
    steps = np.zeros(n, dtype=np.int64)
    settled = np.zeros(n, dtype=bool)
    prev = np.full(n, np.inf)
    for _ in range(max_blocks):
        active = np.flatnonzero(~settled)
        if not len(active):
            break
        sub = state.subset(active)
        sub_rngs = [rngs[i] for i in active]
        lls = np.empty((block, len(active)))
        for k in range(block):
            sub, _ = latent.step(sub, sub_rngs)
            lls[k] = sub.loglik
        steps[active] += block
        state = _replace_rows(state, active, sub)
        mean, sd = lls.mean(axis=0), lls.std(axis=0)
        done = np.abs(prev[active] - mean) < 0.5 * sd
        settled[active[done]] = True
        prev[active] = mean
    report = WarmStartReport(
        chains=chains, theta=[dict(t) for t in theta],
        mode_loglik=[m.loglik for m in modes], n_newton=[m.n_newton for m in modes],
        n_cg=[m.n_cg for m in modes], converged=[m.converged for m in modes],
        settle_steps=[int(x) for x in steps], settled=[bool(x) for x in settled],
        loglik=[float(x) for x in state.loglik], seconds=time.perf_counter() - t0)
    return state, report

