r"""The supervised GPLVM's sweep: Algorithm 2 on ``ξ``, then Algorithm 3 on ``Z`` (Gadd et al.).

One sweep of chain ``c`` (each chain from its own stream, in order):

1. **Pseudo-marginal cycle** (Algorithm 2, :meth:`AdaptivePMMH.cycle`): for each Gibbs block
   ``ξ_r`` a Gaussian random walk on ``η_r = log ξ_r``, the importance-sampling estimate of
   eq. 6 at the proposal with the chain's current variational ``q(Z)`` (§3) as the importance
   distribution, acceptance against the *carried* estimate of the current state, and Haario
   et al.'s adaptation of ``Σ_r`` after ``g₀`` cycles.
2. **The importance distribution** (the ``refit`` setting):

   * ``"always"`` — the paper's: "we re-optimize [the variational distribution] after each full
     conditional sample" (§6.1): after every accepted block update ``q`` is re-fitted at the
     new ``ξ`` (:func:`~lattice_lgm.gplvm.vb.fit_vb`, warm-started from the current ``q``; a
     rejected update leaves ``ξ``, hence the optimum, where it was).  The estimate at ``ξ'``
     then depends on the chain's past through ``q``: outside the textbook pseudo-marginal
     argument (:mod:`.pmmh`'s caveat).
   * ``"proposal"`` — ``q`` at every proposal ``ξ'`` is a deterministic function of ``ξ'``
     alone: the variational fit at ``ξ'`` started from the maximum-likelihood fit and stopped
     after ``PROPOSAL_VB_ITER`` iterations (:meth:`SupervisedGPLVM.q_at`).  The estimate then
     depends on ``ξ'`` and fresh draws only, so the chain is an exact pseudo-marginal chain
     for ``p(ξ | Y, X)`` (Andrieu & Roberts 2009), Haario's adaptation aside; any
     deterministic ``q(ξ')`` is valid — a better fit only lowers the estimator's variance.
   * ``"warmup"`` — as ``"always"`` during the run's warm-up, then ``q`` frozen: exact too,
     but a ``q`` fitted at one ``ξ`` is a poor importance distribution elsewhere
     (``Var(log p̃)`` 5–50 at a shift of 0.2 in ``log ξ`` on §6.1's data, against ≈ 2 for a
     ``q`` fitted at ``ξ'``: decision 120).

   Whichever ``q``, the estimate draws from :func:`importance_q` of it: by default the
   Fisher–Laplace Gaussian ``q_L`` from ``q``'s mean (:mod:`.laplace`, decision 129) inside
   the orbit mixture (:mod:`.orbit`, decision 128); ``importance="vb"``, ``orbit=0`` give
   the paper's ``q`` itself.

3. **Uncollapsing** (§4.2, Algorithm 3): ``n_latent`` elliptical slice updates of ``Z`` given
   the new ``ξ``, from the chain's previous ``Z``.  These are the draws §5's predictions use.
   They are exact only to the extent the updates forget ``Z``'s previous ``ξ`` (a Markov
   kernel after a change of ``ξ``, not an exact draw of ``p(Z | ξ, Y)``): more ``n_latent``
   is safer.

**State.**  ``LatentState.theta`` holds ``ξ`` by name (:meth:`GPLVMHyper.names`), ``f`` the
latent points ``Z`` (chains, N, k_z), ``white`` the same, ``loglik`` ``log p(Y | Z, ξ)``;
``extras`` the pseudo-marginal state (``pm/…``: ``η``, the carried ``log p̃``, ``Σ_r``, the
Haario moments, the counters) and the variational parameters (``vb/…``: whitened means,
``log Λ``, inducing inputs and the ``η`` they were fitted at), so that a checkpoint holds
everything and a resume draws exactly what the uninterrupted run draws.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._validation import positive_int
from ..errors import InvalidParameterError, NotPositiveDefiniteError
from ..samplers.state import LatentState
from .estimator import ISEstimate, log_marginal_estimate
from .kernels import GPLVMHyper
from .laplace import laplace_q
from .latent import sample_latent
from .orbit import OrbitMixture, orbit_transforms
from .pmmh import AdaptivePMMH
from .vb import VBParams, VBPosterior, fit_vb, posterior_of

__all__ = ["REFIT", "PseudoMarginalSweep"]

#: when the importance distribution is re-fitted (module docstring)
REFIT = ("proposal", "always", "warmup")
#: prefixes of the sweep's entries in ``LatentState.extras``
PM, VB = "pm/", "vb/"
#: what a run stores of a sweep's info (ArviZ-style names)
SAMPLE_STATS = (("log_p_hat", "log_p_hat", "f8"), ("is_log_var", "is_log_var", "f8"),
                ("vb_bound", "vb_bound", "f8"), ("n_refit", "n_refit", "i8"),
                ("n_numeric_reject", "n_numeric_reject", "i8"))


def pm_extras(pm: AdaptivePMMH, states: Sequence[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Chains' :class:`AdaptivePMMH` state dicts as ``extras`` arrays (leading axis: chain)."""
    out = {PM + k: np.stack([np.asarray(s[k]) for s in states])
           for k in ("eta", "log_p_hat", "log_prior", "iteration", "accepted", "proposed")}
    for r in range(len(pm.blocks)):
        for k in ("cov", "mean", "m2"):
            out[f"{PM}{k}{r}"] = np.stack([np.asarray(s[k][r]) for s in states])
    if pm.aux_shape is not None:  # the correlated estimator's normals
        out[PM + "u"] = np.stack([s["u"] for s in states])
    return out


def pm_state(pm: AdaptivePMMH, ex: dict[str, np.ndarray], c: int) -> dict[str, Any]:
    """Chain ``c``'s :class:`AdaptivePMMH` state dict from ``extras`` (copies)."""
    s: dict[str, Any] = {"eta": ex[PM + "eta"][c].copy(),
                         "log_p_hat": float(ex[PM + "log_p_hat"][c]),
                         "log_prior": float(ex[PM + "log_prior"][c]),
                         "iteration": int(ex[PM + "iteration"][c]),
                         "accepted": ex[PM + "accepted"][c].copy(),
                         "proposed": ex[PM + "proposed"][c].copy()}
    for k in ("cov", "mean", "m2"):
        s[k] = [ex[f"{PM}{k}{r}"][c].copy() for r in range(len(pm.blocks))]
    if pm.aux_shape is not None:
        s["u"] = ex[PM + "u"][c].copy()
    return s


def vb_extras(fits: Sequence[VBPosterior], etas: np.ndarray) -> dict[str, np.ndarray]:
    """Chains' variational fits as ``extras`` arrays, with the ``η`` each was fitted at."""
    return {VB + "mean_white": np.stack([q.mean_white for q in fits]),
            VB + "log_lambda": np.stack([q.log_lambda for q in fits]),
            VB + "z_u": np.stack([q.z_u for q in fits]),
            VB + "eta": np.array(etas, dtype=float, copy=True),
            VB + "bound": np.array([q.bound for q in fits], dtype=float),
            VB + "n_refit": np.zeros(len(fits), dtype=np.int64)}


class PseudoMarginalSweep:
    """One sweep of every chain: Algorithm 2's cycle on ``ξ`` and Algorithm 3 on ``Z``.

    Parameters
    ----------
    model : SupervisedGPLVM
        The data, the blocks, the prior on ``η`` and the settings (:mod:`.model`).
    tune : int
        The run's warm-up sweeps (``refit="warmup"`` re-fits ``q`` during these only).
    n_latent : int
        Elliptical slice updates of ``Z`` per sweep (>= 1).

    Notes
    -----
    ``info`` of :meth:`step`, per chain: ``accepted/<r>:<block>`` (0/1), ``log_p_hat`` (the
    carried estimate), ``is_log_var`` (the delta-method ``Var(log p̃)`` of the last proposal's
    estimate; NaN if none was estimated), ``vb_bound`` (the current ``q``'s bound at the
    ``ξ`` it was fitted at), ``n_refit`` (re-fits this sweep), ``n_numeric_reject`` (proposals
    rejected because a factorisation failed there), ``n_loglik`` (likelihood evaluations:
    importance draws plus slice evaluations).
    """

    name = "pmmh"
    sample_stats = SAMPLE_STATS

    def __init__(self, model: Any, *, tune: int = 0, n_latent: int = 1) -> None:
        if isinstance(tune, bool) or not isinstance(tune, int | np.integer) or tune < 0:
            raise InvalidParameterError(f"tune={tune!r} must be an int >= 0 (warm-up sweeps).")
        self.model = model
        self.tune = int(tune)
        self.n_latent = positive_int("n_latent", n_latent, "elliptical slice updates of Z per "
                                     "sweep, e.g. 1")

    def settings(self) -> dict[str, Any]:
        """Every setting that changes this sweep's draws, JSON-ready."""
        m = self.model
        return {"sweep": "gplvm.PseudoMarginalSweep", "tune": self.tune,
                "n_latent": self.n_latent, "refit": m.refit, "n_importance": m.n_importance,
                "blocks": [b.tolist() for b in m.pmmh().blocks], "g0": m.g0,
                "epsilon": m.epsilon, "initial_cov": m.initial_cov, "prior_sd": m.prior_sd,
                "jitter": m.jitter, "correlation": m.correlation, "start": m.start,
                "orbit": m.orbit, "importance": m.importance}

    def step(self, state: LatentState,
             rngs: Sequence[np.random.Generator]) -> tuple[LatentState, dict[str, Any]]:
        """One sweep of every chain, each from its own stream (module docstring).

        Returns
        -------
        state : LatentState
        info : dict
            See the class notes.
        """
        state.check_rngs(rngs)
        m = self.model
        n = state.n_chains
        ex = {k: np.array(v, copy=True) for k, v in (state.extras or {}).items()}
        if PM + "eta" not in ex:
            raise InvalidParameterError(
                "the state has no pseudo-marginal extras; start it with "
                "SupervisedGPLVM.init_state.")
        z = np.array(state.f, dtype=float, copy=True)
        ll = np.array(state.loglik, dtype=float, copy=True)
        nb = len(m.pmmh().blocks)
        acc = np.zeros((n, nb), dtype=np.int64)
        log_var = np.full(n, np.nan)
        n_refit = np.zeros(n, dtype=np.int64)
        n_eval = np.zeros(n, dtype=np.int64)
        n_fail = np.zeros(n, dtype=np.int64)
        with m.threads():
            for c in range(n):
                acc[c], log_var[c], n_refit[c], n_eval[c], n_fail[c] = self._cycle(ex, c,
                                                                                    rngs[c])
                hyper = m.hyper_of(ex[PM + "eta"][c])
                # 3: Algorithm 3 at the new ξ, from the chain's previous Z
                dr = sample_latent(m.y, m.x, hyper, z[c], rngs[c], self.n_latent,
                                   jitter=m.jitter)
                z[c], ll[c] = dr.z, dr.loglik
                n_eval[c] += int(dr.n_evals)
        theta = m.theta_dict(ex[PM + "eta"])
        out = state._replace(theta=theta, priors=(m.lgm.prior,) * n, f=z, white=z.copy(),
                             loglik=ll, extras=ex)
        info: dict[str, Any] = {f"accepted/{r}:{m.block_names[r]}": acc[:, r]
                                for r in range(nb)}
        info.update({"log_p_hat": ex[PM + "log_p_hat"].copy(), "is_log_var": log_var,
                     "vb_bound": ex[VB + "bound"].copy(), "n_refit": n_refit,
                     "n_numeric_reject": n_fail,
                     "n_loglik": n_eval, "n_cov": np.zeros(n, np.int64)})
        return out, info

    def _cycle(self, ex: dict[str, np.ndarray], c: int,
               rng: np.random.Generator) -> tuple[np.ndarray, float, int, int, int]:
        """Algorithm 2's cycle for chain ``c`` with its ``q`` (and re-fits), ``ex`` in place."""
        m = self.model
        q: list[VBPosterior | None] = [None]  # the chain's q, rebuilt only when used

        def current_q() -> VBPosterior:
            if q[0] is None:  # "proposal" never reads it: no bound and factors per sweep
                q[0] = m.q_of(VBParams(ex[VB + "mean_white"][c], ex[VB + "log_lambda"][c],
                                       ex[VB + "z_u"][c]), ex[VB + "eta"][c])
            return q[0]

        last: dict[str, Any] = {"log_var": np.nan, "n_eval": 0, "n_refit": 0, "q": None,
                                "n_fail": 0}
        s = pm_state(m.pmmh(), ex, c)
        per_proposal = m.refit == "proposal"
        refit = m.refit == "always" or (m.refit == "warmup" and s["iteration"] < self.tune)

        def estimate(eta: np.ndarray, r: np.random.Generator | np.ndarray) -> float:
            try:
                if per_proposal:  # q(ξ'), a function of ξ' alone: exact pseudo-marginal
                    last["n_refit"] += 1
                    qq = last["q"] = m.q_at(eta)
                else:
                    qq = current_q()
                est = estimate_at(m, eta, qq, r)
            except NotPositiveDefiniteError:
                # a proposal where a factorisation fails (far out: e.g. K_u or I + βK_u^-½ψ2
                # K_u^-½ singular in floating point) is rejected, as Stan rejects a proposal
                # whose density throws; counted in sample_stats.n_numeric_reject
                last["n_fail"] += 1
                return -np.inf
            last["log_var"] = float(est.log_var)
            last["n_eval"] += m.n_importance
            return float(est.log_p_hat)

        def hook(eta: np.ndarray, block: int, accepted: bool) -> None:
            if not accepted:
                return
            if per_proposal:  # the accepted proposal's q is the chain's q now
                q[0] = last["q"]
                ex[VB + "eta"][c] = eta
            elif refit:  # the paper's re-optimisation after each full conditional sample
                q[0] = fit_vb(m.y, m.x, m.hyper_of(eta), init=current_q(), jitter=m.jitter,
                              max_iter=m.vb_max_iter)
                ex[VB + "eta"][c] = eta
                last["n_refit"] += 1

        acc = m.pmmh(estimate, hook).cycle(s, rng)
        for k, v in pm_extras(m.pmmh(), [s]).items():
            ex[k][c] = v[0]
        ex[VB + "n_refit"][c] += last["n_refit"]
        fit = q[0]
        if fit is not None:  # else q was neither read nor changed: its extras stand
            ex[VB + "mean_white"][c] = fit.mean_white
            ex[VB + "log_lambda"][c] = fit.log_lambda
            ex[VB + "z_u"][c] = fit.z_u
            ex[VB + "bound"][c] = fit.bound
        return (acc.astype(np.int64), last["log_var"], last["n_refit"], last["n_eval"],
                last["n_fail"])


def estimate_at(model: Any, eta: np.ndarray, q: VBPosterior,
                rng_or_u: np.random.Generator | np.ndarray) -> ISEstimate:
    """Eq. 6 at ``ξ = exp(η)`` with ``q``, from a generator or from carried normals.

    :mod:`.pmmh` passes the chain's stream, or the normals ``u`` (Q, k_z, N) of a correlated
    chain.
    """
    rng, u = ((rng_or_u, None) if isinstance(rng_or_u, np.random.Generator)
              else (None, rng_or_u))
    return log_marginal_estimate(model.y, model.x, model.hyper_of(eta),
                                 importance_q(model, eta, q), model.n_importance, rng,
                                 model.jitter, u)


def importance_q(model: Any, eta: np.ndarray, q: VBPosterior, importance: str | None = None,
                 orbit: int | None = None) -> Any:
    """The importance distribution of eq. 6 at ``ξ = exp(η)`` built from the variational ``q``.

    ``importance == "laplace"``: the Fisher–Laplace Gaussian from ``q``'s mean
    (:func:`~.laplace.laplace_q`, decision 129); ``"widened"``: the same with its curvature
    widened to the observed (decision 131); ``"vb"``: ``q`` itself.  Then, with ``orbit``
    components, the orbit mixture around it (:class:`~.orbit.OrbitMixture`, decision 128).
    Both default to the model's settings (a diagnostic may ask for others).  A deterministic
    function of ``η`` and ``q``.
    """
    importance = model.importance if importance is None else importance
    orbit = model.orbit if orbit is None else orbit
    if importance != "vb":
        q = laplace_q(model.y, model.x, model.hyper_of(eta), q.mu, model.jitter,
                      curvature="widened" if importance == "widened" else "fisher")
    if orbit:
        q = OrbitMixture(q, model.orbit_transforms() if orbit == model.orbit
                         else orbit_transforms(model.k_z, orbit), model.n_importance)
    return q


def hyper_names(k_x: int, k_z: int) -> list[str]:
    """The names of ``ξ``'s entries (:meth:`GPLVMHyper.names`) for ``k_x`` inputs, ``k_z``."""
    return GPLVMHyper(np.ones(k_x), 1.0, np.ones(k_z), 1.0).names()


def posterior_at(model: Any, params: VBParams, eta: np.ndarray) -> VBPosterior:
    """``q`` of ``params`` as fitted at ``η`` (``S_j`` and ``μ_j`` depend on ``K_z(σ)``)."""
    return posterior_of(model.y, model.x, model.hyper_of(eta), params, model.jitter)
