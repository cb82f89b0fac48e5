"""Simplified manifold MALA of the latent field with a metric fixed per θ, factored by CHOLMOD.

Girolami & Calderhead (2011), §5 ("simplified mMALA", their eq. 10 with the metric taken
constant in the position): with a metric ``G`` that does not depend on the field,

    f* = f + ½ ε² G⁻¹ ∇_f log π(f) + ε G^{-½} z,      z ~ N(0, I),

accepted with the Metropolis–Hastings ratio
``π(f*) N(f | μ(f*), ε² G⁻¹) / (π(f) N(f* | μ(f), ε² G⁻¹))``, ``μ(x) = x + ½ ε² G⁻¹ ∇ log π(x)``.
For the latent Gaussian model ``π(f) ∝ L(y | η) N(f; 0, Q_θ⁻¹)`` at fixed θ and the expected
Fisher metric of a GMRF prior (their §8's LGCP, there with a dense ``Σ⁻¹``)

    G_θ = Q_θ + diag(w),       w_i = −E[∂² log L / ∂η_i²]   (Poisson: E_i e^{η_i}),

which is sparse with ``Q_θ``'s pattern: CHOLMOD's symbolic analysis of that pattern is made
once per sampler, and a numeric factorisation per chain whenever its θ (its prior object) or
``w`` changes.  ``G^{-½} z`` is ``Pᵀ L⁻ᵀ z`` (Rue & Held 2005, Alg. 2.4).

**Which w (the metric's site curvatures).**  Detailed balance needs a metric that does not
depend on the field being moved (else the proposal's normaliser ``|G(f)|^½`` and the reverse
metric enter the ratio, and every step would need a factorisation at the proposal).  ``w`` is
therefore a per-chain constant: the curvature at the chain's current ``η`` when the move first
sees the chain, then, during warm-up, the running mean of ``−∂² log L/∂η²`` over the warm-up
draws, copied into the metric at the end of each of Stan's slow windows
(:func:`~lattice_lgm.samplers._hmc_adapt.adaptation_windows`) and frozen after warm-up — the
posterior average of the Fisher information, not its value at a plug-in mode (the mode at each
θ, :func:`~lattice_lgm.samplers.warmstart.field_mode`, costs several factorisations per θ; a
Gibbs sweep changes θ every sweep).  After warm-up the chain is exact for any such ``w``;
during warm-up the adaptation, as Stan's, is not.

In-block coefficients ``β ~ N(0, β_sd²)`` move in the same proposal with the diagonal metric
``1/β_sd² + Σ_i w_i x_{ki}²`` (block diagonal with ``G_θ``: any fixed positive definite metric
leaves the target invariant).  The step size ``ε`` adapts per chain by dual averaging
(Hoffman & Gelman 2014, Alg. 5, shared with joint HMC) towards acceptance 0.574 (Roberts &
Rosenthal 1998's optimum for MALA) during the first ``n_tune`` updates, in
``LatentState.extras`` under ``"mmala/"``.  One step's ``white`` is the prior's ``whiten`` of
the new field, ``loglik`` its log-likelihood.

Backends: priors with a sparse precision, i.e. :class:`~lattice_lgm.priors.GMRFPrior` (every
proper model; the spectral Matérn-SPDE GMRF included, whose ``Q`` is the same sparse matrix).
Circulant priors are refused by name: there the Fourier-diagonal metric ``K⁻¹ + c I`` is joint
HMC's field mass already (docs/decisions.md, 115).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import sparse

from .._validation import positive_float, positive_int
from ..errors import InvalidParameterError, SamplerError
from ..models.latent import LatentGaussianModel
from ..priors import _cholmod
from ._hmc_adapt import adaptation_extras, adaptation_windows, dual_average
from ._latent import loglik_at
from .hmc import TARGET_ACCEPT as HMC_TARGET_ACCEPT
from .hmc import TRAJECTORY
from .state import LatentState

__all__ = ["ManifoldHMC", "ManifoldMALA", "mmala_log_ratio"]

#: prefix of this move's entries in ``LatentState.extras``
PREFIX = "mmala/"
#: MALA's optimal acceptance rate in high dimension (Roberts & Rosenthal 1998)
TARGET_ACCEPT = 0.574


def mmala_log_ratio(logpi_new: float, logpi_old: float, z2: float, r_gr: float,
                    eps: float) -> float:
    """``log`` of the M–H ratio of one simplified-mMALA proposal.

    Parameters
    ----------
    logpi_new, logpi_old : float
        ``log π`` at the proposal and at the current state.
    z2 : float
        ``|z|²`` of the forward noise: ``log q(f* | f) = −½|z|²`` (up to the normaliser, the same
        both ways because ``G`` is fixed).
    r_gr : float
        ``rᵀ G r`` with ``r = f − μ(f*)``: ``log q(f | f*) = −rᵀ G r / (2ε²)``.
    eps : float
        The step size.
    """
    return logpi_new - logpi_old - 0.5 * r_gr / (eps * eps) + 0.5 * z2


def _decide(state: LatentState, c: int, log_u: float, log_a: float,
            new: tuple[np.ndarray, np.ndarray, float] | None
            ) -> tuple[bool, float, tuple[np.ndarray, np.ndarray, float]]:
    """Metropolis–Hastings: accepted, the acceptance probability, the chain's next point."""
    if new is None:  # the proposal left the support (or diverged): a rejection
        return False, 0.0, (state.f[c].reshape(-1), state.beta[c], float(state.loglik[c]))
    p = 1.0 if log_a >= 0 else math.exp(log_a)
    return log_u < log_a, p, new


class _Metric:
    """One chain's ``G_θ = Q_θ + diag(w)`` with its factor and the coefficients' diagonal."""

    def __init__(self, q: sparse.csc_matrix, w_state: np.ndarray, factor: Any,
                 g_beta: np.ndarray) -> None:
        self.q, self.w, self.factor, self.g_beta = q, w_state, factor, g_beta

    def times(self, r: np.ndarray) -> np.ndarray:
        """``G r`` (the field block)."""
        return self.q @ r + self.w * r


class ManifoldMALA:
    """Simplified manifold MALA of the field and in-block coefficients (module docstring).

    Parameters
    ----------
    model : LatentGaussianModel
        With a GMRF prior (a sparse ``precision_matrix``).
    step_size : float, optional
        Initial ``ε`` (> 0); default ``d^{-1/6}`` for ``d`` the state's size (MALA's scaling).
    n_tune : int
        Updates (calls of :meth:`step`, i.e. ``n_latent`` per Gibbs sweep) during which ``ε``
        and the metric's ``w`` adapt; 0 keeps ``ε`` and the first ``w`` throughout.
    target_accept : float
        Dual averaging's target acceptance probability, in (0, 1).

    Examples
    --------
    >>> sweep = Gibbs(HyperMove(lgm, "prior-white"), ManifoldMALA(lgm, n_tune=2000),
    ...               n_latent=10)                                       # doctest: +SKIP
    """

    name = "mmala"
    #: prefix of this move's entries in ``LatentState.extras``
    prefix = PREFIX

    def __init__(self, model: LatentGaussianModel, *, step_size: float | None = None,
                 n_tune: int = 0, target_accept: float = TARGET_ACCEPT) -> None:
        if not isinstance(model, LatentGaussianModel):
            raise InvalidParameterError(f"model={model!r} must be a LatentGaussianModel.")
        if not hasattr(model.prior, "precision_matrix") or model.prior.capabilities.fourier:
            raise InvalidParameterError(
                f"ManifoldMALA needs a prior with a sparse precision (GMRFPrior); "
                f"{type(model.prior).__name__} has none: use JointHMC (whose field mass is the "
                "metric K⁻¹ + c·I there) or EllipticalSlice.")
        if not isinstance(n_tune, (int, np.integer)) or isinstance(n_tune, bool) or n_tune < 0:
            raise InvalidParameterError(f"n_tune={n_tune!r} must be an int >= 0.")
        ta = positive_float("target_accept", target_accept, "an acceptance rate in (0, 1)")
        if ta >= 1.0:
            raise InvalidParameterError(f"target_accept={target_accept!r} must be in (0, 1).")
        d = int(np.prod(model.prior.state_shape)) + model.n_beta
        if step_size is None:
            step_size = d ** (-1.0 / 6.0)
        self.step_size = positive_float("step_size", step_size, "the initial mMALA step, e.g. 0.3")
        self.model = model
        self.n_tune = int(n_tune)
        self.target_accept = ta
        self.windows = adaptation_windows(self.n_tune)
        self._sym: _cholmod.SymbolicFactor | None = None
        self._metrics: dict[int, tuple[Any, int, _Metric]] = {}

    def settings(self) -> dict[str, Any]:
        """Every setting that changes this update's draws, JSON-ready."""
        return {"move": self.name, "step_size": self.step_size, "n_tune": self.n_tune,
                "target_accept": self.target_accept}

    def __getstate__(self) -> dict[str, Any]:  # CHOLMOD factors do not pickle: rebuilt lazily
        return {**self.__dict__, "_sym": None, "_metrics": {}}

    # -- adaptation state ------------------------------------------------------------------------
    def init_extras(self, state: LatentState) -> dict[str, np.ndarray]:
        """Fresh per-chain state: ``ε``, dual averaging, the metric's ``w`` and its running sum."""
        n, n_obs = state.n_chains, self.model.likelihood.n_obs
        w = np.stack([self._curvature(self._eta_obs(state, c)) for c in range(n)])
        # the step size's dual-averaging state as joint HMC's (no mass adapts: n_h = 0)
        ex = adaptation_extras(n, self.step_size, 1.0, 0, prefix=self.prefix)
        ex.update({self.prefix + "w": w, self.prefix + "w_version": np.zeros(n, np.int64),
                   self.prefix + "w_sum": np.zeros((n, n_obs)),
                   self.prefix + "w_n": np.zeros(n, np.int64)})
        return ex

    def _extras(self, state: LatentState) -> dict[str, np.ndarray]:
        ex = dict(state.extras or {})
        if self.prefix + "iter" not in ex:
            ex.update(self.init_extras(state))
        return {k: np.array(v, copy=True) for k, v in ex.items()}

    # -- the target ----------------------------------------------------------------------------
    def _eta_obs(self, state: LatentState, c: int, f: np.ndarray | None = None,
                 beta: np.ndarray | None = None) -> np.ndarray:
        m = self.model
        f = state.f[c].reshape(-1) if f is None else f
        b = state.beta[c] if beta is None else beta
        eta = m.base_obs(state.theta_of(c)) + f[m.state_index]
        return eta + b @ m.covariates_obs if m.n_beta else eta

    def _curvature(self, eta_obs: np.ndarray) -> np.ndarray:
        """``−∂² log L/∂η²`` at the observed sites (≥ 0 for log-concave likelihoods)."""
        lik = self.model.likelihood
        full = np.zeros((1, int(np.prod(lik.shape))))
        full[0, lik.obs_index] = eta_obs
        h = -lik.hess_diag(full.reshape(1, *lik.shape)).reshape(-1)[lik.obs_index]
        return np.maximum(h, 0.0)

    def _log_target(self, state: LatentState, c: int, met: _Metric, f: np.ndarray,
                    b: np.ndarray) -> tuple[float, float, np.ndarray, np.ndarray]:
        """``log π``, ``log L``, and the gradients in ``f`` and ``β`` at ``(f, β)``."""
        m = self.model
        shape = (1, *state.f.shape[1:])
        ll = float(loglik_at(m, f.reshape(shape), b[None, :], [state.theta_of(c)])[0])
        qf = met.q @ f
        logpi = ll - 0.5 * float(f @ qf)
        if not math.isfinite(logpi):
            return -math.inf, ll, qf, b
        g = m.likelihood.grad_obs(self._eta_obs(state, c, f, b))
        gf = -qf
        np.add.at(gf, m.state_index, g)
        gb = np.zeros(0)
        if m.n_beta:
            prec = 1.0 / m.beta_sd ** 2
            logpi -= 0.5 * float(np.sum(prec * b * b))
            gb = m.covariates_obs @ g - prec * b
        return logpi, ll, gf, gb

    def _metric(self, state: LatentState, c: int, ex: dict[str, np.ndarray]) -> _Metric:
        """Chain ``c``'s metric: cached while its prior object and ``w`` are the same."""
        prior, version = state.priors[c], int(ex[self.prefix + "w_version"][c])
        key = state.chains[c]
        hit = self._metrics.get(key)
        if hit is not None and hit[0] is prior and hit[1] == version:
            return hit[2]
        m = self.model
        q = sparse.csc_matrix(prior.precision_matrix())
        q.sort_indices()
        w_state = np.zeros(q.shape[0])
        np.add.at(w_state, m.state_index, ex[self.prefix + "w"][c])
        g = sparse.csc_matrix(q + sparse.diags(w_state, format="csc"))
        g.sort_indices()
        if self._sym is None or not self._sym.same_pattern(g):
            self._sym = _cholmod.SymbolicFactor(g)  # once per sampler (one pattern)
        fac = self._sym.factor(g, "the mMALA metric Q_θ + diag(w)")
        g_beta = np.zeros(0)
        if m.n_beta:
            g_beta = 1.0 / m.beta_sd ** 2 + (m.covariates_obs ** 2) @ ex[self.prefix + "w"][c]
        met = _Metric(q, w_state, fac, g_beta)
        self._metrics[key] = (prior, version, met)
        return met

    # -- one update ----------------------------------------------------------------------------
    def step(self, state: LatentState, rngs: Sequence[np.random.Generator], *,
             in_place: bool = False) -> tuple[LatentState, dict[str, Any]]:
        """One simplified-mMALA update of every chain (the input state is not modified).

        Returns
        -------
        state : LatentState
        info : dict
            ``accepted`` (n_chains,) bool, ``acceptance_rate`` (n_chains,) the M–H
            probability, ``step_size`` (n_chains,) the ε used, ``n_loglik`` (n_chains,)
            gradients of log L evaluated (mMALA: 2, the proposal's and the current point's),
            ``n_cov`` (n_chains,) metric factorisations this update.
        """
        state.check_rngs(rngs)
        n = state.n_chains
        ex = self._extras(state)
        f = state.f.copy()
        white = state.white.copy()
        beta = state.beta.copy()
        loglik = np.array(state.loglik, dtype=np.float64)
        acc = np.zeros(n, dtype=bool)
        prob = np.zeros(n)
        eps_used = np.zeros(n)
        n_cov = np.zeros(n, dtype=np.int64)
        n_grad = np.zeros(n, dtype=np.int64)
        for c in range(n):
            before = self._metrics.get(state.chains[c])
            met = self._metric(state, c, ex)
            n_cov[c] = int(before is None or before[2] is not met)
            eps = math.exp(ex[self.prefix + "log_eps"][c])  # log_eps_bar once warm-up ends
            eps_used[c] = eps
            a, p, new, n_grad[c] = self._chain(state, c, rngs[c], met, eps)
            acc[c], prob[c] = a, p
            if a:
                fc, bc, llc = new
                f[c] = fc.reshape(f.shape[1:])
                beta[c] = bc
                loglik[c] = llc
                white[c] = state.priors[c].whiten(f[c:c + 1])[0]
            self._adapt(state, c, ex, p, f[c].reshape(-1), beta[c])
        new_state = state._replace(f=f, white=white, beta=beta, loglik=loglik, extras=ex)
        return new_state, {"accepted": acc, "acceptance_rate": prob, "step_size": eps_used,
                           "n_loglik": n_grad, "n_cov": n_cov}

    def steps(self, state: LatentState, rngs: Sequence[np.random.Generator], n_steps: int,
              *, in_place: bool = False) -> tuple[LatentState, dict[str, Any]]:
        """``n_steps`` calls of :meth:`step` (a Gibbs sweep's block of latent updates)."""
        if not isinstance(n_steps, (int, np.integer)) or n_steps < 1:
            raise InvalidParameterError(f"n_steps={n_steps!r} must be an int >= 1.")
        total = np.zeros(state.n_chains, dtype=np.int64)
        acc = np.zeros(state.n_chains)
        info: dict[str, Any] = {}
        for _ in range(n_steps):
            state, info = self.step(state, rngs)
            total += info["n_loglik"]
            acc += info["accepted"]
        return state, {**info, "n_loglik": total, "accept_fraction": acc / n_steps}

    def _chain(self, state: LatentState, c: int, rng: np.random.Generator, met: _Metric,
               eps: float) -> tuple[bool, float, tuple[np.ndarray, np.ndarray, float], int]:
        """Propose and accept or reject for chain ``c`` (draws: z, the β noise, u).

        Returns accepted, the M–H probability, the new ``(f, β, log L)`` and the number of
        log-likelihood gradients evaluated.
        """
        m = self.model
        z = rng.standard_normal(state.f[c].size)
        zb = rng.standard_normal(m.n_beta)
        log_u = math.log(rng.random())
        log_a, new = self.propose(state, c, met, eps, z, zb)
        return (*_decide(state, c, log_u, log_a, new), 2)

    def _start(self, state: LatentState, c: int,
               met: _Metric) -> tuple[np.ndarray, np.ndarray, float, np.ndarray, np.ndarray]:
        """The chain's ``(f, β)`` with ``log π`` and its gradients; raises where it is -inf."""
        f0 = state.f[c].reshape(-1)
        b0 = state.beta[c]
        lp0, _, gf0, gb0 = self._log_target(state, c, met, f0, b0)
        if not math.isfinite(lp0):
            raise SamplerError(
                f"chain {state.chains[c]} starts {self.name} at log π = {lp0!r}; it needs a "
                "state with a finite posterior density.", {"chain": state.chains[c]})
        return f0, b0, lp0, gf0, gb0

    def propose(self, state: LatentState, c: int, met: _Metric, eps: float, z: np.ndarray,
                zb: np.ndarray) -> tuple[float, tuple[np.ndarray, np.ndarray, float] | None]:
        """The proposal from noise ``(z, zb)`` and its log M–H ratio (``None``: -inf density).

        Returns
        -------
        log_ratio : float
        new : (f (n_state,), β (n_beta,), log L) or None
        """
        m = self.model
        f0, b0, lp0, gf0, gb0 = self._start(state, c, met)
        h = 0.5 * eps * eps
        f1 = f0 + h * met.factor.solve(gf0) + eps * met.factor.solve_lt_pt(z)
        b1 = b0 + h * gb0 / met.g_beta + eps * zb / np.sqrt(met.g_beta) if m.n_beta else b0
        lp1, ll1, gf1, gb1 = self._log_target(state, c, met, f1, b1)
        if not math.isfinite(lp1):
            return -math.inf, None
        r = f0 - f1 - h * met.factor.solve(gf1)
        r_gr = float(r @ met.times(r))
        if m.n_beta:
            rb = b0 - b1 - h * gb1 / met.g_beta
            r_gr += float(np.sum(met.g_beta * rb * rb))
        z2 = float(z @ z + zb @ zb)
        return mmala_log_ratio(lp1, lp0, z2, r_gr, eps), (f1, b1, ll1)

    def _adapt(self, state: LatentState, c: int, ex: dict[str, np.ndarray], prob: float,
               f: np.ndarray, b: np.ndarray) -> None:
        """Warm-up: dual averaging of ε; the running mean of the curvature into ``w``."""
        it = int(ex[self.prefix + "iter"][c]) + 1
        ex[self.prefix + "iter"][c] = it
        if it > self.n_tune:
            return
        dual_average(ex, self.prefix, c, self.target_accept, prob)
        win = next((se for se in self.windows if se[0] < it <= se[1]), None)
        if win is None:
            return
        ex[self.prefix + "w_sum"][c] += self._curvature(self._eta_obs(state, c, f, b))
        ex[self.prefix + "w_n"][c] += 1
        if it == win[1]:  # the window's mean curvature becomes the metric's
            ex[self.prefix + "w"][c] = ex[self.prefix + "w_sum"][c] / ex[self.prefix + "w_n"][c]
            ex[self.prefix + "w_version"][c] += 1
            ex[self.prefix + "w_sum"][c] = 0.0
            ex[self.prefix + "w_n"][c] = 0
            ex[self.prefix + "mu"][c] = math.log(10.0) + ex[self.prefix + "log_eps"][c]
            ex[self.prefix + "da_m"][c] = 0
            ex[self.prefix + "h_bar"][c] = 0.0
            ex[self.prefix + "log_eps_bar"][c] = 0.0
        if it == self.n_tune:
            ex[self.prefix + "log_eps"][c] = ex[self.prefix + "log_eps_bar"][c]


class ManifoldHMC(ManifoldMALA):
    """HMC of the field and in-block coefficients with the constant metric ``G_θ`` as its mass.

    Riemannian-manifold HMC with the metric fixed per hyperparameter value, as Girolami &
    Calderhead (2011, §8) ran their 64 × 64 LGCP ("the metric tensor ... is constant"): with a
    position-free metric the generalised leapfrog of their eqs. 16-18 reduces to the ordinary
    leapfrog with mass matrix ``G_θ = Q_θ + diag(w)`` (the same sparse metric, CHOLMOD factor,
    warm-up of ``w`` and dual averaging as :class:`ManifoldMALA`; module docstring), so no
    fixed-point iterations and no ``log |G|`` term are needed (``|G|`` cancels in the ratio).
    One trajectory (Neal 2011, eqs. 5.18-5.20) in ``v = G⁻¹ p``:

        p ~ N(0, G):  v = Pᵀ L⁻ᵀ z  (so v ~ N(0, G⁻¹)),  p = G v,  ½ pᵀ G⁻¹ p = ½ |z|²;
        p ← p + ½ ε ∇ log π(f),  v ← v + ½ ε G⁻¹ ∇ log π(f);   f ← f + ε v;   (half step again)

    — one CHOLMOD solve per gradient.  With one leapfrog step this *is* :class:`ManifoldMALA`'s
    proposal and ratio (Neal 2011, §5.2: Langevin is one-step HMC), which the tests check.
    Trajectory lengths are joint HMC's (:data:`~lattice_lgm.samplers.hmc.TRAJECTORY` time units
    jittered by ``U(0.5, 1.5)``, the units of ``G``'s unit-variance coordinates) and so is the
    acceptance target (:data:`~lattice_lgm.samplers.hmc.TARGET_ACCEPT`).

    Parameters
    ----------
    model : LatentGaussianModel
        With a GMRF prior (a sparse ``precision_matrix``).
    trajectory : float
        Mean integration time (> 0), jittered by ``U(0.5, 1.5)`` per transition.
    step_size : float, optional
        Initial ``ε`` (> 0); default ``d^{-1/4}`` (HMC's scaling; adapted during ``n_tune``).
    n_tune : int
        Updates during which ``ε`` and ``w`` adapt (:class:`ManifoldMALA`).
    target_accept : float
        Dual averaging's target acceptance probability, in (0, 1).
    max_steps : int
        Cap on leapfrog steps per trajectory (>= 1).

    Examples
    --------
    >>> sweep = Gibbs(HyperMove(lgm, "prior-white"), ManifoldHMC(lgm, n_tune=tune),
    ...               n_latent=1)                                         # doctest: +SKIP
    """

    name = "mhmc"
    prefix = "mhmc/"

    def __init__(self, model: LatentGaussianModel, *, trajectory: float = TRAJECTORY,
                 step_size: float | None = None, n_tune: int = 0,
                 target_accept: float = HMC_TARGET_ACCEPT, max_steps: int = 64) -> None:
        if step_size is None and isinstance(model, LatentGaussianModel):
            d = int(np.prod(model.prior.state_shape)) + model.n_beta
            step_size = d ** (-0.25)
        super().__init__(model, step_size=step_size, n_tune=n_tune, target_accept=target_accept)
        self.trajectory = positive_float("trajectory", trajectory,
                                         "a mean integration time such as 3.0")
        self.max_steps = positive_int("max_steps", max_steps, "a cap such as 64")

    def settings(self) -> dict[str, Any]:
        """Every setting that changes this update's draws, JSON-ready."""
        return {**super().settings(), "trajectory": self.trajectory, "max_steps": self.max_steps}

    def _chain(self, state: LatentState, c: int, rng: np.random.Generator, met: _Metric,
               eps: float) -> tuple[bool, float, tuple[np.ndarray, np.ndarray, float], int]:
        """One trajectory of chain ``c`` (draws: z, the β noise, the jitter, u)."""
        z = rng.standard_normal(state.f[c].size)
        zb = rng.standard_normal(self.model.n_beta)
        jitter = rng.uniform(0.5, 1.5)
        log_u = math.log(rng.random())
        n_steps = int(min(self.max_steps, max(1, math.ceil(self.trajectory * jitter / eps))))
        log_a, new = self.integrate(state, c, met, eps, n_steps, z, zb)
        return (*_decide(state, c, log_u, log_a, new), n_steps + 1)

    def integrate(self, state: LatentState, c: int, met: _Metric, eps: float, n_steps: int,
                  z: np.ndarray, zb: np.ndarray
                  ) -> tuple[float, tuple[np.ndarray, np.ndarray, float] | None]:
        """``n_steps`` leapfrog steps from momentum noise ``(z, zb)``; log ratio and end point.

        Returns
        -------
        log_ratio : float
            ``H(start) − H(end)``.
        new : (f (n_state,), β (n_beta,), log L) or None
            ``None`` where the trajectory left the support (a divergence: rejected).
        """
        m = self.model
        f, b, lp, gf, gb = self._start(state, c, met)
        h0 = -lp + 0.5 * float(z @ z + zb @ zb)
        v = met.factor.solve_lt_pt(z)            # G⁻¹ p for p ~ N(0, G)
        gb_inv = 1.0 / met.g_beta if m.n_beta else np.zeros(0)
        vb = zb * np.sqrt(gb_inv)               # the coefficients' diagonal block
        s = met.factor.solve(gf)                 # G⁻¹ ∇_f log π
        ll = float(state.loglik[c])
        for _ in range(n_steps):
            v = v + 0.5 * eps * s
            vb = vb + 0.5 * eps * gb * gb_inv
            f = f + eps * v
            b = b + eps * vb
            lp, ll, gf, gb = self._log_target(state, c, met, f, b)
            if not math.isfinite(lp):
                return -math.inf, None
            s = met.factor.solve(gf)
            v = v + 0.5 * eps * s
            vb = vb + 0.5 * eps * gb * gb_inv
        # kinetic energy ½ pᵀ G⁻¹ p = ½ vᵀ G v
        h1 = -lp + 0.5 * float(v @ met.times(v)) + 0.5 * float(np.sum(met.g_beta * vb * vb))
        log_r = h0 - h1
        if not math.isfinite(log_r):
            return -math.inf, None
        return log_r, (f, b, ll)
