"""The representations of the Murray & Adams (2010) hyperparameter moves, at one chain.

Each representation (:class:`_Fixed`, :class:`_PriorWhite`, :class:`_Surrogate`,
:class:`_Posterior`, :class:`_SpectralScalar`) prepares, at a chain's current state, what it
holds fixed while θ moves and evaluates its log target at a proposed θ′
(:meth:`_Prepared.evaluate`), with the chain's view (:class:`_Chain`), a proposal
(:class:`_Proposal`) and the model-level pieces they share (:class:`_Context`: site fits, the
likelihood at a field).  The table of representations, the paper's equations and the choice of
``S_θ`` are in the module docstring of :mod:`lattice_lgm.samplers.hyper`, whose
:class:`~lattice_lgm.samplers.hyper.HyperMove` prepares one per chain and move.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import UnsupportedOperationError
from ..models.latent import LatentGaussianModel
from ..priors import GaussianPrior, fourier
from ._latent import loglik_at
from .state import white_ops

LOG_2PI = math.log(2.0 * math.pi)

#: floor for site precisions under ``*-site``, relative to the prior precision (the module
#: docstring of :mod:`lattice_lgm.samplers.hyper`)
SITE_FLOOR = 1e-12


# -- one chain's view --------------------------------------------------------------------------
@dataclass
class _Chain:
    theta: dict[str, float]
    prior: GaussianPrior
    f: np.ndarray        # (1, *state)
    white: np.ndarray    # (1, *white) or None when it must be recomputed
    beta: np.ndarray     # (p,)
    loglik: float


@dataclass
class _Proposal:
    theta: dict[str, float]
    prior: GaussianPrior
    f: np.ndarray
    white: np.ndarray | None
    loglik: float


class _Context:
    """Model-level pieces shared by the representations (site fits, likelihood at a field)."""

    def __init__(self, model: LatentGaussianModel, site_method: str,
                 taylor: Callable[[], Any]) -> None:
        self.model = model
        self.site_method = site_method
        self.n_loglik = 0
        self.n_cov = 0
        self._taylor = taylor  # the eq. 13 fit depends on the data only: computed once per move

    def loglik(self, f: np.ndarray, beta: np.ndarray, theta: Mapping[str, float]) -> float:
        self.n_loglik += 1
        return float(loglik_at(self.model, f, beta[None], [theta])[0])

    def xbeta(self, beta: np.ndarray) -> np.ndarray:
        m = self.model
        return beta @ m.covariates_obs if m.n_beta else np.zeros(m.likelihood.n_obs)

    def prior_var(self, prior: GaussianPrior) -> np.ndarray | float:
        """Prior marginal variance of ``f`` at the observed sites (GMRF: ``hyper``'s docstring)."""
        if prior.capabilities.dense_factor:
            return np.diag(prior.cov)[self.model.state_index] + prior.jitter
        sd = prior.params.get("sd")
        if sd is None:
            raise UnsupportedOperationError(
                f"site fits need the prior marginal variance, which {type(prior).__name__} with "
                f"parameters {prior.params} does not state; use 'surr-taylor', 'post-taylor' or "
                "'prior-white'."
            )
        return float(sd) ** 2

    def site_fit(self, kind: str, theta: Mapping[str, float], prior: GaussianPrior,
                 beta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Site precisions and centres on the ``f`` scale at the observed sites, (n_obs,) each."""
        m = self.model
        lik = m.likelihood
        shift = m.base_obs(theta) + self.xbeta(beta)
        if kind == "taylor":
            fit = self._taylor()
            prec = np.asarray(fit.precision, dtype=np.float64).reshape(-1)
            centre = np.asarray(fit.center, dtype=np.float64).reshape(-1)
            return prec, np.where(prec > 0, centre - shift, 0.0)
        var = self.prior_var(prior)
        fit = lik.site_approximation(self.site_method, shift, var)
        prec = np.asarray(fit.precision, dtype=np.float64).reshape(-1)
        prec = np.maximum(prec, SITE_FLOOR / np.broadcast_to(var, prec.shape))
        centre = np.asarray(fit.center, dtype=np.float64).reshape(-1) - shift
        return prec, centre

    def state_array(self, prior: GaussianPrior, obs_values: np.ndarray) -> np.ndarray:
        out = np.zeros((1, prior.state_size))
        out[0, self.model.state_index] = obs_values
        return out.reshape(1, *prior.state_shape)


# -- representations -----------------------------------------------------------------------------
class _Prepared:
    """A representation at the current state: current log target and ``evaluate(θ′, prior′)``."""

    logp0: float

    def evaluate(self, theta: dict[str, float], prior: GaussianPrior) -> tuple[float, _Proposal]:
        raise NotImplementedError


class _Fixed(_Prepared):
    """``fixed``: f held; target N(f; 0, K_θ) L(f) (Algorithm 1, eq. 4)."""

    def __init__(self, ctx: _Context, ch: _Chain, moves_mean: bool) -> None:
        self.ctx, self.ch, self.moves_mean = ctx, ch, moves_mean
        self.logp0 = float(ch.prior.logpdf(ch.f)[0]) + (ch.loglik if moves_mean else 0.0)

    def evaluate(self, theta, prior):
        ch = self.ch
        lp = float(prior.logpdf(ch.f)[0])
        ll = self.ctx.loglik(ch.f, ch.beta, theta) if self.moves_mean else ch.loglik
        return lp + (ll if self.moves_mean else 0.0), _Proposal(theta, prior, ch.f, None, ll)


class _PriorWhite(_Prepared):
    """``prior-white``: the white vector held; target L(L_θ ν) (Algorithm 2, eq. 6)."""

    def __init__(self, ctx: _Context, ch: _Chain) -> None:
        self.ctx, self.ch = ctx, ch
        self.ops = white_ops(ch.prior)
        self.logp0 = ch.loglik

    def evaluate(self, theta, prior):
        ch = self.ch
        f = ch.f if prior is ch.prior else self.ops.colorize(prior, ch.white)
        ll = self.ctx.loglik(f, ch.beta, theta)
        return ll, _Proposal(theta, prior, f, ch.white, ll)


def _log_normal_sites(g: np.ndarray, f: np.ndarray, prec: np.ndarray) -> float:
    """``Σ_{Π>0} log N(g_i; f_i, 1/Π_i)``."""
    o = prec > 0
    r = g[o] - f[o]
    return float(-0.5 * np.sum(prec[o] * r * r - np.log(prec[o]) + LOG_2PI))


class _Surrogate(_Prepared):
    """``surr-site`` / ``surr-taylor`` on dense and GMRF priors (Algorithms 3–4, eq. 9–11)."""

    def __init__(self, ctx: _Context, ch: _Chain, kind: str, rng: np.random.Generator) -> None:
        self.ctx, self.ch, self.kind = ctx, ch, kind
        prec, _ = ctx.site_fit(kind, ch.theta, ch.prior, ch.beta)
        idx = ctx.model.state_index
        # step 1: g ~ N(f, S_θ) at the sites with information (one normal per observed site)
        eps = rng.standard_normal(len(idx))
        pos = prec > 0
        f_obs = ch.f.reshape(-1)[idx]
        g_obs = np.where(pos, f_obs + eps / np.sqrt(np.where(pos, prec, 1.0)), 0.0)
        self.g = ctx.state_array(ch.prior, g_obs)
        sc = ch.prior.surrogate(self.g, ctx.state_array(ch.prior, prec)[0])
        # step 2: η = L_R⁻¹ (f − m_θ,g)
        self.eta = sc.whiten(ch.f - sc.mean)
        self.logp0 = ch.loglik + float(sc.logmarginal[0])

    def evaluate(self, theta, prior):
        ctx, ch = self.ctx, self.ch
        prec, _ = ctx.site_fit(self.kind, theta, prior, ch.beta)
        sc = prior.surrogate(self.g, ctx.state_array(prior, prec)[0])
        f = sc.colorize(self.eta) + sc.mean  # step 7: f' = L_R' η + m_θ',g
        ll = ctx.loglik(f, ch.beta, theta)
        return ll + float(sc.logmarginal[0]), _Proposal(theta, prior, f, None, ll)


class _Posterior(_Prepared):
    """``post-site`` / ``post-taylor`` on dense and GMRF priors (eq. 14, via the identity)."""

    def __init__(self, ctx: _Context, ch: _Chain, kind: str) -> None:
        self.ctx, self.ch, self.kind = ctx, ch, kind
        logp0, sc, _ = self._at(ch.theta, ch.prior, ch.f)
        self.omega = sc.whiten(ch.f - sc.mean)
        self.logp0 = ch.loglik + logp0

    def _at(self, theta, prior, f=None):
        ctx = self.ctx
        prec, centre = ctx.site_fit(self.kind, theta, prior, self.ch.beta)
        g = ctx.state_array(prior, centre)
        sc = prior.surrogate(g, ctx.state_array(prior, prec)[0])
        if f is None:
            f = sc.colorize(self.omega) + sc.mean
        f_obs = f.reshape(-1)[ctx.model.state_index]
        extra = float(sc.logmarginal[0]) - _log_normal_sites(centre, f_obs, prec)
        return extra, sc, f

    def evaluate(self, theta, prior):
        extra, _, f = self._at(theta, prior)
        ll = self.ctx.loglik(f, self.ch.beta, theta)
        return ll + extra, _Proposal(theta, prior, f, None, ll)


class _SpectralScalar(_Prepared):
    """``surr-scalar`` / ``post-scalar`` on circulant priors, per frequency (DESIGN §4).

    With unitary half-spectra (``ζ`` white, ``f̂ = √λ ζ``) and scalar site precision ``p``:
    surrogate data ``ĝ = √λ ζ + ε̂/√p``; ``η = a ζ − b ε̂`` with ``a = 1/√(1+λp)``,
    ``b = √(λp/(1+λp))``; at θ′: ``ζ′ = a′ η + √λ′ p′/(1+λ′p′) ĝ``.  The post- variant fixes
    ``ĝ(θ)`` (site centres on the window, 0 elsewhere) and ``ω = (ζ − c ĝ)/a``.
    """

    def __init__(self, ctx: _Context, ch: _Chain, post: bool, rng: np.random.Generator) -> None:
        self.ctx, self.ch, self.post = ctx, ch, post
        prior = fourier(ch.prior)
        self.w = prior.half_weights
        zeta = ch.white[0]
        lam = prior.eigenvalues
        p, g_hat, g_real = self._data(ch.theta, prior)
        a = 1.0 / np.sqrt(1.0 + lam * p)
        c = np.sqrt(lam) * p / (1.0 + lam * p)
        if post:
            self.g_hat = g_hat
            self.omega = (zeta - c * g_hat) / a
            self.logp0 = ch.loglik + self._logmarg(g_hat, lam, p) - self._lognorm(
                g_real, ch.f[0], p)
        else:
            eps = prior.draw_spectrum(rng)  # step 1: g = f + ε/√p, in Fourier
            self.g_hat = np.sqrt(lam) * zeta + (eps / math.sqrt(p) if p > 0 else 0.0)
            self.eta = a * zeta - np.sqrt(lam * p / (1.0 + lam * p)) * eps
            self.logp0 = ch.loglik + (self._logmarg(self.g_hat, lam, p) if p > 0 else 0.0)
            self.p0 = p

    def _data(self, theta, prior):
        ctx = self.ctx
        prec, centre = ctx.site_fit("site", theta, prior, self.ch.beta)
        p = float(prec.sum()) / prior.state_size  # information spread evenly over the torus
        if not self.post:
            return p, None, None
        g_real = ctx.state_array(prior, centre)
        return p, prior.spectrum(g_real)[0], g_real[0]

    def _logmarg(self, g_hat, lam, p) -> float:
        """``log N(g; 0, C + S)`` from the half-spectrum (weights count conjugate bins)."""
        one = 1.0 + lam * p
        q = (g_hat.real ** 2 + g_hat.imag ** 2) * p / one + np.log(one) - math.log(p) + LOG_2PI
        return float(-0.5 * np.sum(self.w * q))

    @staticmethod
    def _lognorm(g_real, f, p) -> float:
        r = g_real - f
        return float(-0.5 * (p * np.sum(r * r) - r.size * math.log(p) + r.size * LOG_2PI))

    def evaluate(self, theta, prior):
        ctx, ch = self.ctx, self.ch
        lam = prior.eigenvalues
        p, g_hat, g_real = self._data(theta, prior)
        a = 1.0 / np.sqrt(1.0 + lam * p)
        c = np.sqrt(lam) * p / (1.0 + lam * p)
        if self.post:
            zeta = a * self.omega + c * g_hat
        else:
            if (p > 0) != (self.p0 > 0):
                return -np.inf, None
            zeta = a * self.eta + c * self.g_hat
        f = prior.colorize_spectrum(zeta[None])
        ll = ctx.loglik(f, ch.beta, theta)
        if self.post:
            extra = self._logmarg(g_hat, lam, p) - self._lognorm(g_real, f[0], p)
        else:
            extra = self._logmarg(self.g_hat, lam, p) if p > 0 else 0.0
        return ll + extra, _Proposal(theta, prior, f, zeta[None], ll)

