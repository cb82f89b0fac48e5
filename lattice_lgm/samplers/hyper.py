"""Covariance-hyperparameter moves of Murray & Adams (2010), on every prior backend.

A move updates the hyperparameters θ of each chain jointly with its latent field, in one of the
paper's *representations* (§2–4 and §5 "Methods"), by one of its *algorithms*:

========================  =====================================================================
representation            what is held fixed while θ moves (the paper's section)
========================  =====================================================================
``fixed``                 the field ``f``: target ``N(f; 0, K_θ) L(f) p_h(θ)`` (eq. 4, Alg. 1)
``prior-white``           the white vector ``ν``, ``f = L_θ ν``: target ``L(f) p_h(θ)`` (eq. 6,
                          Alg. 2)
``surr-site``             surrogate data ``g ~ N(f, S_θ)`` and ``η = L_R⁻¹(f − m_θ,g)``:
                          target ``L(f) N(g; 0, K_θ + S_θ) p_h(θ)`` (eq. 11, Alg. 3–4), with
                          ``S_θ`` from Gaussian fits to the site posteriors (eq. 12)
``surr-taylor``           the same with ``S_θ`` from the Taylor expansion of eq. 13
``post-site``,            a fixed reparameterisation ``ω = L_R⁻¹(f − m_θ,ĝ)`` with ``ĝ, S_θ``
``post-taylor``           from the site fits or eq. 13: target eq. 14, including its Jacobian
``surr-scalar``,          circulant priors: ``S_θ = s(θ) I`` on the torus, computed per
``post-scalar``           frequency by the stable rotation of DESIGN §4 (no division by λ)
========================  =====================================================================

Algorithms: ``method="slice"`` is Algorithm 4 (one log-hyperparameter at a time, optional
stepping out; or ``scheme="joint"`` for a hyperrectangle slice over all of them), and
``method="mh"`` is Algorithms 1–3 (a Gaussian random walk on the unconstrained scale; with
``fixed`` it is Algorithm 1, with ``prior-white`` Algorithm 2, with ``surr-*`` Algorithm 3).

The post- target (eq. 14), ``L(f) N(f; 0, K_θ) |L_R| p_h(θ)`` with ``ω`` fixed, is evaluated
through the identity ``N(f; 0, K) N(ĝ; f, S) = N(ĝ; 0, K + S) N(f; m, R)``:
``N(f; 0, K)|L_R| ∝ N(ĝ; 0, K + S) / N(ĝ; f, S)``, so no log-determinant of ``R`` is needed.

Any ``S_θ`` that depends on θ and the data only is valid (Murray & Adams §3); here it depends on
θ, the data and the in-block coefficients ``β`` (held fixed by these moves).  Site precisions
come from the likelihood's site approximations; sites a fit leaves with zero precision under
``*-site`` are floored at ``1e-12 / prior variance`` so that the set of surrogate sites does not
change with θ (the auxiliary variables must exist at every θ).  For GMRF priors the site
posterior (eq. 12) uses the nominal marginal variance ``sd²`` rather than ``diag(Q⁻¹)`` (not
available without selected inversion): a different but equally valid ``S_θ`` (DESIGN §4).

Parameterisations: ``"natural"`` moves ``log sd``, ``log range`` (per axis) and ``mean``;
``"ridge"`` moves ``(log range, 2 log sd − 2ν log range)`` — along and across the ridge
``σ²/ℓ^{2ν}`` of the Matérn likelihood (DESIGN §4); the map is linear, so no Jacobian.

This module holds :class:`HyperMove` (the parameterisations, the algorithms, the sweep over
chains); the representations at one chain are in ``_hyper_reps``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .._validation import positive_float, positive_int
from ..errors import InvalidParameterError
from ..models.latent import LatentGaussianModel
from ..priors import GaussianPrior
from ._hyper_reps import (
    _Chain,
    _Context,
    _Fixed,
    _Posterior,
    _Prepared,
    _PriorWhite,
    _Proposal,
    _SpectralScalar,
    _Surrogate,
)
from .slice import slice_hyperrect, slice_univariate
from .state import LatentState, stack_theta, white_ops

__all__ = ["REPRESENTATIONS", "HyperMove", "representations_for"]

#: every representation name, and the backends each applies to
REPRESENTATIONS = {
    "fixed": ("dense", "gmrf", "circulant", "generic"),
    "prior-white": ("dense", "gmrf", "circulant", "generic"),
    "surr-site": ("dense", "gmrf"),
    "surr-taylor": ("dense", "gmrf"),
    "post-site": ("dense", "gmrf"),
    "post-taylor": ("dense", "gmrf"),
    "surr-scalar": ("circulant",),
    "post-scalar": ("circulant",),
}


def representations_for(prior: GaussianPrior) -> tuple[str, ...]:
    """The representation names available on ``prior``'s backend."""
    b = prior.capabilities.backend
    out = tuple(k for k, v in REPRESENTATIONS.items() if b in v)
    kernel = getattr(prior, "kernel", None)
    if b == "circulant" and kernel is not None and kernel.smooth:
        out = tuple(r for r in out if r != "fixed")
    return out


# -- the move ------------------------------------------------------------------------------------
class HyperMove:
    """One Murray–Adams hyperparameter update of every chain.

    Parameters
    ----------
    model : LatentGaussianModel
    representation : str
        One of :data:`REPRESENTATIONS` available on the prior's backend
        (:func:`representations_for`).
    params : sequence of str, optional
        The hyperparameters this move updates (default: all of ``model.hyper_names``).
    method : {"slice", "mh"}
        Algorithm 4 (slice) or Algorithms 1–3 (random-walk M–H on the unconstrained scale).
    scheme : {"univariate", "joint"}
        Slice: one coordinate at a time (fresh auxiliaries for each), or one hyperrectangle
        slice over all of them.
    parameterisation : {"natural", "ridge"}
        See the module docstring; ``"ridge"`` needs ``params == ("sd", "range")``.
    nu : float, optional
        Matérn smoothness for ``"ridge"`` (default: the kernel's ``nu``; 1 for a 2-D SPDE
        α = 2 prior).
    width : float
        Initial slice bracket width on the unconstrained scale (per coordinate).
    step_out : bool
        Neal's stepping out for the univariate slice.
    proposal_sd : float
        Random-walk scale on the unconstrained scale for ``method="mh"``.
    site_method : {"laplace", "moments"}, optional
        Site fit for ``*-site`` and ``*-scalar``: default Laplace, moments for Bernoulli
        likelihoods (as the paper, §5), binomial and sigmoidal Poisson ones.
    max_shrink : int
        Shrink cap of the slice sampler (an error, never a silent stay).
    """

    def __init__(
        self,
        model: LatentGaussianModel,
        representation: str = "prior-white",
        *,
        params: Sequence[str] | None = None,
        method: str = "slice",
        scheme: str = "univariate",
        parameterisation: str = "natural",
        nu: float | None = None,
        width: float = 2.0,
        step_out: bool = True,
        proposal_sd: float = 0.3,
        site_method: str | None = None,
        max_shrink: int = 100,
    ) -> None:
        if not isinstance(model, LatentGaussianModel):
            raise InvalidParameterError(f"model={model!r} must be a LatentGaussianModel.")
        avail = representations_for(model.prior)
        if representation not in REPRESENTATIONS:
            raise InvalidParameterError(
                f"representation={representation!r} is unknown; choose from "
                f"{sorted(REPRESENTATIONS)}."
            )
        if representation not in avail:
            why = ("a smooth kernel makes the torus density degenerate at round-off"
                   if representation == "fixed" else "not defined on this backend")
            raise InvalidParameterError(
                f"representation={representation!r} is not available on "
                f"{type(model.prior).__name__} ({why}); available: {list(avail)}."
            )
        self.params = tuple(model.hyper_names if params is None else params)
        if not self.params:
            raise InvalidParameterError(
                "the model samples no hyperparameters; give hyperpriors to LatentGaussianModel."
            )
        for p in self.params:
            if p not in model.hyper_names:
                raise InvalidParameterError(
                    f"params has {p!r}, which the model does not sample; sampled: "
                    f"{list(model.hyper_names)}."
                )
        for name, allowed in (("method", ("slice", "mh")), ("scheme", ("univariate", "joint")),
                              ("parameterisation", ("natural", "ridge"))):
            val = locals()[name]
            if val not in allowed:
                raise InvalidParameterError(f"{name}={val!r} must be one of {list(allowed)}.")
        self.model = model
        self.representation = representation
        self.method, self.scheme, self.parameterisation = method, scheme, parameterisation
        self.width = positive_float("width", width, "a bracket width on the log scale, e.g. 2")
        self.proposal_sd = positive_float("proposal_sd", proposal_sd, "e.g. 0.3 on the log scale")
        self.step_out = bool(step_out)
        self.max_shrink = positive_int("max_shrink", max_shrink, "e.g. 100")
        lik_name = model.likelihood.name
        if site_method is None:
            # binomial sites are Bernoulli sites in bulk (y = 0 or n is as monotone); sigmoidal
            # Poisson sites are as skewed (y = 0 is monotone) and may be bimodal
            site_method = ("moments" if lik_name.startswith(("bernoulli", "binomial", "sigmoid"))
                           else "laplace")
        if site_method not in ("laplace", "moments"):
            raise InvalidParameterError(
                f"site_method={site_method!r} must be 'laplace' or 'moments'."
            )
        self.site_method = site_method
        self._ridge = None
        if parameterisation == "ridge":
            if sorted(self.params) != ["range", "sd"]:
                raise InvalidParameterError(
                    f"parameterisation='ridge' moves (log range, 2 log sd − 2ν log range); "
                    f"params must be ('sd', 'range'), got {self.params}."
                )
            if nu is None:
                kernel = getattr(model.prior, "kernel", None)
                nu = getattr(kernel, "nu", None)
                if nu is None and model.prior.capabilities.backend == "gmrf":
                    nu = 2 - len(model.prior.shape) / 2  # SPDE α = 2: ν = α − d/2
            self._ridge = positive_float("nu", nu, "the Matérn smoothness of the ridge σ²/ℓ^{2ν}")
        self.name = f"{representation}/{method}"
        self._taylor = None

    def settings(self) -> dict[str, Any]:
        """Every setting that changes this move's draws, JSON-ready.

        A run records them, so a resume with a different move is refused.
        """
        return {"move": "hyper", "representation": self.representation,
                "params": list(self.params), "method": self.method, "scheme": self.scheme,
                "parameterisation": self.parameterisation, "nu": self._ridge,
                "width": self.width, "step_out": self.step_out,
                "proposal_sd": self.proposal_sd, "site_method": self.site_method,
                "max_shrink": self.max_shrink}

    def _taylor_fit(self) -> Any:
        """The likelihood's Taylor fit (eq. 13), computed on first use and kept."""
        if self._taylor is None:
            self._taylor = self.model.likelihood.taylor()
        return self._taylor

    # -- coordinates -----------------------------------------------------------------------------
    def _to_u(self, theta: Mapping[str, float]) -> np.ndarray:
        hp = self.model.hyperpriors
        v = np.array([float(hp[k].to_unconstrained(theta[k])) for k in self.params])
        if self._ridge is not None:
            i_r, i_s = self.params.index("range"), self.params.index("sd")
            u = np.empty(2)
            u[0] = v[i_r]
            u[1] = 2.0 * v[i_s] - 2.0 * self._ridge * v[i_r]
            return u
        return v

    def _from_u(self, u: np.ndarray, theta: Mapping[str, float]) -> dict[str, float]:
        hp = self.model.hyperpriors
        v = np.array(u, dtype=np.float64)
        if self._ridge is not None:
            i_r, i_s = self.params.index("range"), self.params.index("sd")
            v = np.empty(2)
            v[i_r] = u[0]
            v[i_s] = 0.5 * (u[1] + 2.0 * self._ridge * u[0])
        out = dict(theta)
        for k, vk in zip(self.params, v, strict=True):
            out[k] = float(hp[k].from_unconstrained(vk))
        return out

    def _log_h_term(self, name: str, value: float) -> Any:
        """Log hyperprior density of one moved coordinate on its unconstrained (log) scale."""
        h = self.model.hyperpriors[name]
        return h.logpdf_unconstrained(h.to_unconstrained(value))

    def _log_h(self, theta: Mapping[str, float]) -> float:
        """Log hyperprior density of the moved coordinates on the unconstrained (log) scale."""
        return float(sum(self._log_h_terms(theta)))

    def _bounds(self, k: int) -> tuple[float, float]:
        if self._ridge is not None:
            if k == 0:
                return self.model.hyperpriors["range"].unconstrained_bounds
            return -np.inf, np.inf
        return self.model.hyperpriors[self.params[k]].unconstrained_bounds

    # -- representation at one chain -------------------------------------------------------------
    def _prepare(self, ctx: _Context, ch: _Chain, rng: np.random.Generator) -> _Prepared:
        r = self.representation
        if r == "fixed":
            moves_eta = any(n in self.model.obs_params for n in self.params)
            return _Fixed(ctx, ch, moves_mean=moves_eta)
        if r == "prior-white":
            return _PriorWhite(ctx, ch)
        if r in ("surr-site", "surr-taylor"):
            return _Surrogate(ctx, ch, r.split("-")[1], rng)
        if r in ("post-site", "post-taylor"):
            return _Posterior(ctx, ch, r.split("-")[1])
        return _SpectralScalar(ctx, ch, post=(r == "post-scalar"), rng=rng)

    def _log_h_terms(self, theta: Mapping[str, float]) -> list[Any]:
        """The terms of :meth:`_log_h`, in its order (their ``float(sum(...))`` is it, bitwise)."""
        return [self._log_h_term(n, theta[n]) for n in self.params]

    def _logp_fn(self, ctx: _Context, prep: _Prepared, ch: _Chain, u_full: np.ndarray,
                 k: int | None, terms: list[Any] | None = None):
        model = self.model
        # A univariate move changes one coordinate: the others' θ and hyperprior terms are the
        # same at every proposal, so they are computed once (or passed in as ``terms``, the
        # chain's, kept up to date by _update_chain) and only term k per call. The sum runs
        # over the same terms in the same order as _log_h, so it is bitwise the same (tested);
        # with Ionosphere's 35 hyperparameters this was a third of a sweep. The others are
        # the chain's θ itself, not θ rebuilt from u: from_unconstrained ∘ to_unconstrained is
        # not exact, and a one-ulp change of sd made a move of the mean build a new
        # covariance (decision 60).
        one = k is not None and self._ridge is None
        if one:
            name_k = self.params[k]
            h_k = model.hyperpriors[name_k]
            theta_u = dict(ch.theta)
            if terms is None:
                terms = self._log_h_terms(theta_u)

        def logp(x):
            if one:
                theta = dict(theta_u)
                theta[name_k] = float(h_k.from_unconstrained(x))
                t = list(terms)
                t[k] = self._log_h_term(name_k, theta[name_k])
                lh = float(sum(t))
            else:
                u = u_full.copy()
                if k is None:
                    u[:] = x
                else:
                    u[k] = x
                theta = self._from_u(u, ch.theta)
                lh = self._log_h(theta)
            if not np.isfinite(lh):
                return -np.inf, None
            kw = model.kernel_params(theta)
            if kw and any(theta[n] != ch.theta[n] for n in self.params
                           if n not in model.obs_params):
                prior = model.prior_for(theta, ch.prior)
                ctx.n_cov += 1
            else:
                prior = ch.prior
            val, prop = prep.evaluate(theta, prior)
            return val + lh, prop

        return logp

    def _update_chain(self, ch: _Chain, rng: np.random.Generator,
                      ctx: _Context) -> tuple[_Chain, dict[str, Any]]:
        groups: list[int | None] = (list(range(len(self.params)))
                                    if self.method == "slice" and self.scheme == "univariate"
                                    else [None])
        n_accept = 0
        # The hyperprior terms of the chain's θ, carried from one coordinate's move to the next
        # (only the moved term can change): recomputing all of them for every coordinate was
        # 35 × 70 calls per Ionosphere sweep, 14 % of its time. Bitwise the same as _log_h.
        carry = groups[0] is not None and self._ridge is None
        terms = self._log_h_terms(ch.theta) if carry else None
        for k in groups:
            prep = self._prepare(ctx, ch, rng)
            u0 = self._to_u(ch.theta)
            logp0 = prep.logp0 + (float(sum(terms)) if carry else self._log_h(ch.theta))
            logp = self._logp_fn(ctx, prep, ch, u0, k, terms)
            if self.method == "mh":
                u1 = u0 + self.proposal_sd * rng.standard_normal(len(u0))
                log_u = math.log(rng.random())
                val, prop = logp(u1)
                accept = prop is not None and log_u < val - logp0
            else:
                if k is None:
                    lo = np.array([self._bounds(i)[0] for i in range(len(u0))])
                    hi = np.array([self._bounds(i)[1] for i in range(len(u0))])
                    res = slice_hyperrect(logp, u0, logp0, np.full(len(u0), self.width), rng,
                                          max_shrink=self.max_shrink, lower=lo, upper=hi)
                else:
                    lo, hi = self._bounds(k)
                    res = slice_univariate(logp, float(u0[k]), logp0, self.width, rng,
                                           step_out=self.step_out, max_shrink=self.max_shrink,
                                           lower=lo, upper=hi)
                prop = res.payload
                accept = prop is not None
            if accept:
                n_accept += 1
                ch = self._accept(ch, prop, rng)
                if carry:
                    terms[k] = self._log_h_term(self.params[k], ch.theta[self.params[k]])
        return ch, {"accepted": n_accept}

    def _accept(self, ch: _Chain, prop: _Proposal, rng: np.random.Generator) -> _Chain:
        white = prop.white
        if white is None:
            if prop.prior is ch.prior and prop.f is ch.f:
                white = ch.white
            else:
                white = white_ops(prop.prior).whiten(prop.prior, prop.f, rng)
        return _Chain(prop.theta, prop.prior, prop.f, white, ch.beta, prop.loglik)

    def step(self, state: LatentState,
             rngs: Sequence[np.random.Generator]) -> tuple[LatentState, dict[str, Any]]:
        """Update the hyperparameters (and, as a side effect, the field) of every chain.

        Returns
        -------
        state : LatentState
        info : dict
            ``accepted`` (n_chains,) accepted updates in this step, ``n_loglik`` and ``n_cov``
            (n_chains,) likelihood evaluations and covariance constructions.
        """
        state.check_rngs(rngs)
        n = state.n_chains
        out: list[_Chain] = []
        n_ll = np.zeros(n, dtype=np.int64)
        n_cov = np.zeros(n, dtype=np.int64)
        acc = np.zeros(n, dtype=np.int64)
        for c in range(n):
            ctx = _Context(self.model, self.site_method, self._taylor_fit)
            ch = _Chain(state.theta_of(c), state.priors[c], state.f[c:c + 1],
                        state.white[c:c + 1], state.beta[c], float(state.loglik[c]))
            ch, info = self._update_chain(ch, rngs[c], ctx)
            out.append(ch)
            n_ll[c], n_cov[c], acc[c] = ctx.n_loglik, ctx.n_cov, info["accepted"]
        new = state._replace(
            theta=stack_theta([ch.theta for ch in out]),
            priors=tuple(ch.prior for ch in out),
            f=np.concatenate([ch.f for ch in out]),
            white=np.concatenate([ch.white for ch in out]),
            # a copy: a Gibbs sweep's latent moves may then rotate β in place (the caller's
            # state must not change, and the hyperparameter move itself leaves β alone)
            beta=state.beta.copy(),
            loglik=np.array([ch.loglik for ch in out]),
        )
        return new, {"accepted": acc, "n_loglik": n_ll, "n_cov": n_cov}
