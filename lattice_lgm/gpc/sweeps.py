r"""The GP classifier's sweeps: RMHMC (the report's Algorithm 1) and plain HMC on ``f``.

Both move the latent values ``f`` (n,) of :class:`~lattice_lgm.gpc.model.GPClassification`
under ``log p(f | y) = log N(f; 0, K) + Σ_i log Φ(y_i f_i) + const`` (the report's eq. 4 at
``β = 1``), one transition per chain per sweep, each chain from its own stream:

* :class:`RMHMCSweep` — :func:`~lattice_lgm.samplers.rmhmc.rmhmc_step`: momentum from
  ``N(0, G(f))`` with the metric ``G(f) = K⁻¹ + diag(λ(f))`` (§4.2, eqs. 16–17), the
  generalised leapfrog (eqs. 13–15) with ``n_fixed`` fixed-point iterations, the M–H test on
  ``H`` (eq. 11).  ``n_leapfrog`` is fixed; the step size is tuned during warm-up.
* :class:`HMCSweep` — the report's §2 baseline: leapfrog (eq. 9) with a diagonal mass,
  ``H = −log p(f | y) + ½ pᵀ M⁻¹ p``; step size and mass tuned during warm-up.

**Warm-up** (the run's ``tune`` sweeps).  The step size follows Hoffman & Gelman (2014,
Alg. 5: dual averaging towards ``target_accept``; HMC starts from their Alg. 4's step), and
HMC's inverse mass is set to the regularised variance of ``f`` over Stan's slow windows
(:func:`~lattice_lgm.samplers._hmc_adapt.adaptation_windows`; below 20 warm-up sweeps the
step size only) — the library's joint-HMC code
(:func:`~lattice_lgm.samplers._hmc_adapt.adapt_step`), each sweep under its own prefix of
``LatentState.extras`` (:data:`RMHMC_PREFIX`, :data:`HMC_PREFIX`), so that a checkpoint holds
the adaptation and a resume draws exactly what the uninterrupted run draws.  After warm-up
both are fixed (``log ε`` at its dual average), which keeps the chain Markov.

**The state** a sweep returns keeps the library's invariants: ``white = L⁻¹ f`` (``L`` the
prior's Cholesky factor, :mod:`lattice_lgm.samplers.state`) and ``loglik`` the Bernoulli
log-likelihood at ``f`` (:func:`~lattice_lgm.samplers._latent.loglik_at`, the elliptical
slice sampler's own).

**Threads.**  The matrices are small (n × n, n in the hundreds): BLAS threads only wait for
each other (``docs/gp_classification.md``: 20× slower on a busy 2-core machine).  Outside a
run (no :func:`lattice_lgm.threads.current` budget) :meth:`step` runs on one BLAS and one
Numba thread (:func:`lattice_lgm.threads.one_thread`); inside ``sample()`` the run's budget stands.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import linalg

from .._validation import positive_float, positive_int
from ..errors import ConvergenceError, InvalidParameterError
from ..samplers._hmc_adapt import (
    adapt_step,
    adaptation_extras,
    adaptation_windows,
    initial_step_size,
)
from ..samplers._latent import loglik_at
from ..samplers.rmhmc import N_FIXED, rmhmc_step
from ..samplers.state import LatentState
from ..threads import one_thread

__all__ = ["HMC_PREFIX", "RMHMC_PREFIX", "HMCSweep", "RMHMCSweep"]

#: prefixes of the sweeps' entries in ``LatentState.extras``
RMHMC_PREFIX, HMC_PREFIX = "gpc-rmhmc/", "gpc-hmc/"
#: dual-averaging target of both sweeps (Stan's default; the report cites Neal's 0.65 as
#: optimal for HMC in high dimension — with n_leapfrog fixed a higher target costs nothing)
TARGET_ACCEPT = 0.8
#: an energy error above this ends the transition as a divergence (Stan's threshold)
MAX_ENERGY_ERROR = 1000.0
#: defaults of the settings (benchmarks/perf/gpc_samplers.py, docs/gpc_model.md): RMHMC's
#: step size tunes to ≈ 0.4 at acceptance 0.8; 6 leapfrog steps gave 4× the minimum bulk ESS
#: per second of 3 (near-antithetic draws: ESS 1940 of 800); HMC's step size and mass adapt,
#: 10 steps did as badly as 20 in twice less time (neither mixes on that problem)
RMHMC_STEP_SIZE, RMHMC_N_LEAPFROG = 0.5, 6
HMC_STEP_SIZE, HMC_N_LEAPFROG = 0.1, 20
#: HMC's coordinates by default: EP's (decision 116, benchmarks/perf/gpc_samplers.py): on
#: Ionosphere (n = 351) 20 leapfrog steps there reached R-hat 1.02 and min bulk ESS 114 of
#: 800 draws (10 steps: 1.12 and 13; the prior-whitened z with a windowed mass: 1.55 and 3.6);
#: in f with a diagonal mass HMC did not mix even at n = 30 (R-hat 2.5)
HMC_COORDS = "ep"
HMC_COORDS_ALL = ("white", "ep", "f")
#: what a run stores of a sweep's info, under ArviZ's names (decision 99)
SAMPLE_STATS = (("acceptance_rate", "accept_prob", "f8"), ("step_size", "step_size", "f8"),
                ("energy_error", "energy_error", "f8"), ("n_steps", "n_steps", "i8"),
                ("diverging", "divergent", "bool"))
#: what a sweep needs of its model (GPClassification offers it)
_MODEL_API = ("K", "chol", "target", "lgm", "n")


class _GPCSweep:
    """What both sweeps share: settings, extras, the state's invariants."""

    name = ""
    prefix = ""
    sample_stats = SAMPLE_STATS

    def __init__(self, model: Any, *, step_size: float, n_leapfrog: int, tune: int,
                 target_accept: float) -> None:
        missing = [a for a in _MODEL_API if not hasattr(model, a)]
        if missing:
            raise InvalidParameterError(
                f"model={type(model).__name__} lacks {missing}; pass a "
                "lattice_lgm.gpc.GPClassification.")
        self.model = model
        self.step_size = positive_float("step_size", step_size, "the (first) step size, e.g. 0.5")
        self.n_leapfrog = positive_int("n_leapfrog", n_leapfrog, "leapfrog steps per "
                                       "transition, e.g. 10")
        if isinstance(tune, bool) or not isinstance(tune, (int, np.integer)) or tune < 0:
            raise InvalidParameterError(f"tune={tune!r} must be an int >= 0 (warm-up sweeps).")
        self.tune = int(tune)
        if not (isinstance(target_accept, (int, float)) and 0.0 < float(target_accept) < 1.0):
            raise InvalidParameterError(
                f"target_accept={target_accept!r} must lie in (0, 1), e.g. 0.8.")
        self.target_accept = float(target_accept)

    def settings(self) -> dict[str, Any]:
        """Every setting that changes this sweep's draws, JSON-ready."""
        return {"sweep": f"gpc.{type(self).__name__}", "step_size": self.step_size,
                "n_leapfrog": self.n_leapfrog, "tune": self.tune,
                "target_accept": self.target_accept}

    def _fresh(self, n: int) -> dict[str, np.ndarray]:
        return adaptation_extras(n, self.step_size, 1.0, 0, prefix=self.prefix)

    def _extras(self, state: LatentState) -> dict[str, np.ndarray]:
        ex = dict(state.extras or {})
        if self.prefix + "iter" not in ex:
            ex.update(self._fresh(state.n_chains))
        return {k: np.array(v, copy=True) for k, v in ex.items()}

    def _transition(self, f: np.ndarray, rng: np.random.Generator, c: int,
                    ex: dict[str, np.ndarray]) -> tuple[np.ndarray, dict[str, float]]:
        raise NotImplementedError

    def step(self, state: LatentState,
             rngs: Sequence[np.random.Generator]) -> tuple[LatentState, dict[str, Any]]:
        """One transition of every chain, each from its own stream.

        Returns
        -------
        state : LatentState
            ``f``, ``white = L⁻¹ f`` and ``loglik`` updated; ``extras`` with the adaptation.
        info : dict
            Per chain (n_chains,): ``accepted/0:<name>``, ``accept_prob``, ``step_size``,
            ``energy_error``, ``n_steps``, ``divergent``, ``n_loglik`` (likelihood
            evaluations: gradients or metrics).
        """
        state.check_rngs(rngs)
        n = state.n_chains
        ex = self._extras(state)
        f = np.array(state.f, dtype=float, copy=True)
        keys = ("accept_prob", "accepted", "step_size", "energy_error", "n_steps",
                "divergent", "n_loglik")
        infos = {k: np.zeros(n) for k in keys}
        with one_thread():
            for c in range(n):
                f[c], inf = self._transition(f[c], rngs[c], c, ex)
                for k in keys:
                    infos[k][c] = inf[k]
            # the state's invariants (module docstring): white = L⁻¹ f, the cached log L
            white = linalg.solve_triangular(self.model.chol, f.T, lower=True,
                                            check_finite=False).T
        thetas = [state.theta_of(c) for c in range(n)]
        ll = loglik_at(self.model.lgm, f, state.beta, thetas)
        out = state._replace(f=f, white=white, loglik=ll, extras=ex)
        info = {f"accepted/0:{self.name}": infos["accepted"].astype(np.int64),
                "accept_prob": infos["accept_prob"], "step_size": infos["step_size"],
                "energy_error": infos["energy_error"],
                "n_steps": infos["n_steps"].astype(np.int64),
                "divergent": infos["divergent"].astype(np.int64),
                "n_loglik": infos["n_loglik"].astype(np.int64),
                "n_cov": np.zeros(n, np.int64)}
        return out, info


class RMHMCSweep(_GPCSweep):
    """One RMHMC transition per chain (the report's Algorithm 1; module docstring).

    Parameters
    ----------
    model : GPClassification
    step_size : float
        The step size (the first one when ``tune > 0``: dual averaging then tunes it).
    n_leapfrog : int
        Generalised leapfrog steps per transition (fixed).
    tune : int
        Warm-up sweeps (the run's ``tune``) during which the step size adapts.
    target_accept : float
        Dual averaging's target acceptance probability.
    n_fixed : int
        Fixed-point iterations per implicit half step (the report's "say, 5").
    """

    name = "rmhmc"
    prefix = RMHMC_PREFIX

    def __init__(self, model: Any, *, step_size: float = RMHMC_STEP_SIZE,
                 n_leapfrog: int = RMHMC_N_LEAPFROG, tune: int = 0,
                 target_accept: float = TARGET_ACCEPT, n_fixed: int = N_FIXED) -> None:
        super().__init__(model, step_size=step_size, n_leapfrog=n_leapfrog, tune=tune,
                         target_accept=target_accept)
        self.n_fixed = positive_int("n_fixed", n_fixed, "fixed-point iterations, e.g. 5")

    def settings(self) -> dict[str, Any]:
        """Every setting that changes this sweep's draws, JSON-ready."""
        return {**super().settings(), "n_fixed": self.n_fixed}

    def _transition(self, f, rng, c, ex):
        eps = math.exp(ex[self.prefix + "log_eps"][c])
        # a trajectory that reaches non-finite values is rejected inside rmhmc_step
        new, inf = rmhmc_step(self.model.target, f, rng, step_size=eps,
                              n_leapfrog=self.n_leapfrog, n_fixed=self.n_fixed)
        err = inf.energy_error
        divergent = not (math.isfinite(err) and err < MAX_ENERGY_ERROR)
        adapt_step(ex, c, inf.accept_prob, new, n_tune=self.tune,
                   target_accept=self.target_accept, windows=(), prefix=self.prefix)
        # metric factorisations (a Cholesky of B each, decision 111): one at the start, and
        # per leapfrog step n_fixed in the position's fixed point and one at f′ (which the
        # next step and the final H reuse)
        n_eval = 1 + self.n_leapfrog * (self.n_fixed + 1)
        return new, {"accept_prob": inf.accept_prob, "accepted": int(inf.accepted),
                     "step_size": eps, "energy_error": err, "n_steps": self.n_leapfrog,
                     "divergent": int(divergent), "n_loglik": n_eval}


class HMCSweep(_GPCSweep):
    """One HMC transition per chain with a diagonal mass (module docstring).

    ``coords="white"`` moves ``z = L⁻¹ f`` (``L`` the prior's Cholesky factor): there the
    prior is ``N(0, I)`` and a diagonal mass in ``z`` is the dense mass ``K⁻¹`` scaled per
    direction in ``f``.  ``coords="ep"`` moves ``z = L_q⁻¹ (f − m_q)`` with EP's ``q =
    N(m_q, L_q L_qᵀ)`` (the model's ``ep``): the mass in ``f`` is then EP's precision
    ``K⁻¹ + diag(τ̃)``, the posterior's curvature near its bulk — the report's remedy for
    AIS ("anneal from a Gaussian approximation") used as HMC's mass matrix.  ``coords="f"``
    moves ``f`` itself (the report's §2.1 example of a diagonal mass failing on correlated
    variables: ``K``'s condition number sets the step).

    Parameters
    ----------
    model : GPClassification
    step_size : float
        The first step size (replaced by Hoffman & Gelman's Alg. 4 at the first warm-up
        sweep; used as given when ``tune == 0``).
    n_leapfrog : int
        Leapfrog steps per transition (fixed).
    tune : int
        Warm-up sweeps: dual averaging of the step size, and from 20 on Stan's windowed
        diagonal mass (the inverse of ``f``'s warm-up variance).  Before the first window
        ends (and with ``tune == 0``) the inverse mass is ``diag(K)``, ``f``'s prior variance.
    target_accept : float
    coords : {"white", "f"}
        The coordinates HMC moves (above); the mass adapts in them.
    """

    name = "hmc"
    prefix = HMC_PREFIX

    def __init__(self, model: Any, *, step_size: float = HMC_STEP_SIZE,
                 n_leapfrog: int = HMC_N_LEAPFROG, tune: int = 0,
                 target_accept: float = TARGET_ACCEPT, coords: str = HMC_COORDS) -> None:
        super().__init__(model, step_size=step_size, n_leapfrog=n_leapfrog, tune=tune,
                         target_accept=target_accept)
        if coords not in HMC_COORDS_ALL:
            raise InvalidParameterError(
                f"coords={coords!r} must be one of {HMC_COORDS_ALL} (default {HMC_COORDS!r}).")
        self.coords = coords
        # in EP's coordinates the identity is already the tuned mass (EP's precision): a
        # diagonal re-estimated from a slow window's few draws of n values only adds noise
        # (Ionosphere, n = 351, 2 chains × 150 warm-up: min bulk ESS 5.5 with it)
        self.windows = () if coords == "ep" else adaptation_windows(self.tune)
        # f = m + T z: the moved coordinates' map (module docstring); T = None for f itself
        if coords == "white":
            self._m, self._t = np.zeros(model.n), model.chol
        elif coords == "ep":
            try:
                q = model.ep
            except ConvergenceError as exc:
                raise ConvergenceError(
                    f"HMC's default coordinates are EP's, and EP did not converge ({exc}); "
                    "choose sampler={'coords': 'white'} or representation='ess'.") from exc
            self._m, self._t = q.mean, np.linalg.cholesky(q.cov)
        else:
            self._m, self._t = np.zeros(model.n), None

    def settings(self) -> dict[str, Any]:
        """Every setting that changes this sweep's draws, JSON-ready."""
        return {**super().settings(), "coords": self.coords}

    def _fresh(self, n: int) -> dict[str, np.ndarray]:
        ex = adaptation_extras(n, self.step_size, 1.0, self.model.n, prefix=self.prefix)
        if self._t is None:  # f's prior variance; in z the reference's is 1
            ex[self.prefix + "inv_mass"][:] = np.diag(self.model.K)
        return ex

    def _log_target(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        """``log p(f | y)`` and its gradient in the moved coordinates.

        With ``f = m + T z`` the Jacobian is constant and ``∇_z = Tᵀ ∇_f``.
        """
        if self._t is None:
            return self.model.target.log_target(x)
        value, grad = self.model.target.log_target(self._m + self._t @ x)
        return value, self._t.T @ grad

    def _leapfrog(self, f, p, grad, eps, n_steps, inv_m):
        """``n_steps`` leapfrog steps (the report's eq. 9) of ``U = −log p(f | y)``."""
        log_target = self._log_target
        for _ in range(n_steps):
            p = p + 0.5 * eps * grad
            f = f + eps * inv_m * p
            value, grad = log_target(f)
            p = p + 0.5 * eps * grad
        return f, p, value, grad

    def _transition(self, f, rng, c, ex):
        if self._t is None:
            return self._move(f, rng, c, ex)
        z = linalg.solve_triangular(self._t, f - self._m, lower=True, check_finite=False)
        z, info = self._move(z, rng, c, ex)
        return self._m + self._t @ z, info

    def _move(self, f, rng, c, ex):
        """The transition in the moved coordinates (``f`` here is ``z`` when white)."""
        P = self.prefix
        inv_m = ex[P + "inv_mass"][c]
        value0, grad0 = self._log_target(f)
        p0 = rng.standard_normal(len(f)) / np.sqrt(inv_m)      # p ~ N(0, M)
        h0 = -value0 + 0.5 * float(np.sum(inv_m * p0 * p0))
        n_eval = 1
        if int(ex[P + "iter"][c]) == 0 and self.tune > 0:
            def log_a(e: float) -> float:
                nonlocal n_eval
                n_eval += 1
                with np.errstate(all="ignore"):
                    _, q, v, _ = self._leapfrog(f, p0, grad0, e, 1, inv_m)
                    h = -v + 0.5 * float(np.sum(inv_m * q * q))
                return h0 - h if math.isfinite(h) else -math.inf

            le = math.log(initial_step_size(log_a, math.exp(ex[P + "log_eps"][c])))
            ex[P + "log_eps"][c] = le
            ex[P + "mu"][c] = math.log(10.0) + le
        eps = math.exp(ex[P + "log_eps"][c])
        with np.errstate(all="ignore"):
            f1, p1, value1, _ = self._leapfrog(f, p0, grad0, eps, self.n_leapfrog, inv_m)
            h1 = -value1 + 0.5 * float(np.sum(inv_m * p1 * p1))
        n_eval += self.n_leapfrog
        err = h1 - h0
        divergent = not (math.isfinite(err) and err < MAX_ENERGY_ERROR)
        log_a = -math.inf if divergent else -err
        accepted = bool(math.log(rng.random()) < log_a)
        prob = math.exp(min(log_a, 0.0))
        new = f1 if accepted else f
        adapt_step(ex, c, prob, new, n_tune=self.tune, target_accept=self.target_accept,
                   windows=self.windows, metric="diag", prefix=P)
        return new, {"accept_prob": prob, "accepted": int(accepted), "step_size": eps,
                     "energy_error": err if math.isfinite(err) else math.inf,
                     "n_steps": self.n_leapfrog, "divergent": int(divergent),
                     "n_loglik": n_eval}
