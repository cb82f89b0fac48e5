r"""The supervised GPLVM as a run model: ``sample()``, the store, ``resume`` and the CLI.

The model (Gadd, Wade, Shah & Grammatopoulos, §2): outputs ``Y`` (N × k_y) given latent points
``Z`` (N × k_z) through independent GPs with the SE-ARD kernel ``k_f`` and noise precision
``β`` (eq. 1); ``Z`` given observed inputs ``X`` (N × k_x) through independent GPs with the
unit-magnitude kernel ``k_z`` (eq. 2); kernels in :mod:`.kernels`.  Hyperparameters
``ξ = (σ, θ_S, θ, β)`` get independent normal priors on ``η = log ξ`` (the paper states none;
:data:`PRIOR_SD`), sampled by the pseudo-marginal chain of Algorithm 2 with ``Z`` integrated
out by importance sampling (eq. 6) — by default from a Fisher–Laplace Gaussian of ``Z``
started at the variational ``q(Z)`` of §3 and mixed over the latent space's rotations and
reflections (decisions 128–129), with the estimator's normals carried and moved by each
proposal (correlated pseudo-marginal, :data:`CORRELATION`); ``Z`` is then sampled by
elliptical slice sampling (Algorithm 3) for the predictions of §5 (:mod:`.sweep`).

:class:`SupervisedGPLVM` implements the run protocol (:class:`lattice_lgm._runview.RunView`)
itself, as the GP classifier does, so ``sample(SupervisedGPLVM(x, y))``, ``resume``,
``extend``, Dask chains and ``lattice-lgm run`` with ``model.family = "gplvm"`` take it as it
is.  The store's ``posterior`` holds ``ξ`` by name and ``f``, the latent points ``Z`` (dims
``obs``, ``latent``); ``sample_stats`` the carried ``log p̃``, the importance sampler's
``Var(log p̃)`` (``is_log_var``: tune ``n_importance`` until it is about 1, Doucet et al. 2015),
the variational bound and the re-fits.  ``Z`` is identified only up to the sign of each latent
dimension (the kernels see distances), so judge convergence on ``ξ`` and on predictions.

Chains start around the type-II maximum *a posteriori* of ``ξ`` — the variational bound plus
the log-ξ priors, maximised over ``ξ`` (:meth:`SupervisedGPLVM.map_fit`, computed once): at a
draw of ``N(mode, START_SPREAD² Σ)`` of its Laplace approximation (:meth:`~SupervisedGPLVM.
laplace`) from each chain's own stream, the random walk at ``2.38²/d Σ``, ``q`` fitted there
and ``Z`` a draw of it; the fits at each proposal start from the MAP's ``q``.  The paper starts
"at the ML parameters with noise" (§6.1; ``start="ml"``), but the type-II ML can be degenerate
— ``θ_j → 0`` (``Y`` ignores ``Z``) on §6.1's case 3 and on small data — and chains that share
one start and a small step keep its memory where R-hat cannot see it (decision 126).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from .._validation import check_bools, positive_float, positive_int
from ..errors import InvalidDataError, InvalidParameterError
from ..samplers.state import LatentState
from ..store.base import hash_arrays
from ..threads import one_thread
from .density import log_p_y_given_z
from .kernels import GPLVMHyper, validate_data
from .orbit import orbit_transforms
from .pmmh import HAARIO_SCALE, AdaptivePMMH, check_correlation
from .predict import Predictive, predictive_density
from .sweep import (
    REFIT,
    PseudoMarginalSweep,
    estimate_at,
    hyper_names,
    pm_extras,
    posterior_at,
    vb_extras,
)
from .vb import DEFAULT_JITTER, VBParams, VBPosterior, elbo_and_grad, fit_vb

__all__ = ["SupervisedGPLVM"]

#: sd of the normal priors on every ``log ξ`` (mean 0): ±2 sd spans e^±6 ≈ 400× either way,
#: weakly informative on standardised data (the paper states no prior)
PRIOR_SD = 3.0
#: sd of the noise on ``η`` added to the ML point per chain with ``start="ml"`` (§6.1: "with
#: noise"; the proposal then starts at ``INITIAL_COV`` as before g₀ the paper gives none)
START_NOISE = 0.1
#: ``start="map"``: chains start at ``N(mode, START_SPREAD² Σ)`` of the Laplace approximation
#: (:meth:`SupervisedGPLVM.laplace`) — overdispersed, so that R-hat can see a chain that has not
#: forgotten its start (Gelman & Rubin 1992) — and the random walk at Haario's
#: ``2.38²/d Σ_r`` (decision 126); ``LAPLACE_STEP``: its central differences in ``η``
START_SPREAD, LAPLACE_STEP = 2.0, 0.01
#: importance draws per estimate (eq. 6's Q); the paper gives none — see docs/gplvm.md for
#: the log-variance this gives on its sinusoidal data
N_IMPORTANCE = 64
#: Algorithm 2's g₀ and Haario's ε (§6.1: g₀ = 200), the initial random-walk variance of η
G0, EPSILON, INITIAL_COV = 200, 1e-6, 0.01
#: iterations of a warm VB re-fit at most ("always"/"warmup": from the chain's current q, a
#: warm re-fit takes ~20) and of the fit at each proposal from the ML fit ("proposal"; on
#: §6.1's case 3 at shifts of 0.2 in log ξ: 20 iterations 0.10 s, Var(log p̃) 1.1–5.2; 40
#: iterations 0.34 s, 1.7–2.2; a converged fit 1.3 s, 1.3–2.9 — decision 120)
VB_MAX_ITER, PROPOSAL_VB_ITER = 200, 40
#: ρ of the correlated pseudo-marginal move of the estimator's normals (:mod:`.pmmh`); 0 is the
#: paper's fresh estimate per proposal.  On §6.1's case 1 (Q = 64, q fitted at ξ') the sd of
#: log p̃(ξ', u') − log p̃(ξ, u) was 1.3–2.1 at ρ = 0, 0.30–0.37 at 0.99, 0.10–0.16 at 0.999,
#: and block acceptance rose from 0.02–0.05 to 0.32 at 0.99 (decision 123)
CORRELATION = 0.99
#: components ``K`` of the importance distribution's orbit mixture (:mod:`.orbit`, decision
#: 128); 0 is the paper's ``q`` alone.  On §6.1's case 1 the mean of ``log p̃`` (Q = 64) rose
#: by 5.5, 5.9, 5.9, 5.9 nats at K = 256, 1024, 4096, 16384 and its sd fell from 1.37 to 1.14
ORBIT = 4096
#: the importance distribution's base (:mod:`.sweep`): ``"laplace"`` — a Gaussian on all of
#: ``Z`` with the posterior's Fisher curvature at the conditional mode (:mod:`.laplace`,
#: decision 129); ``"widened"`` — its curvature lowered to the observed one where that is
#: flatter (decision 131: no better at N = 351); ``"vb"`` — the paper's variational ``q`` (§3)
IMPORTANCE = ("laplace", "widened", "vb")
#: model.options of a configuration file (``from_config``)
OPTION_KEYS = ("inputs", "outputs", "latent_dim", "n_inducing", "n_importance", "refit",
               "standardise", "prior_sd", "g0", "jitter", "correlation", "blocks", "start",
               "orbit", "importance")
#: where the chains start and the proposals' fits begin: type-II MAP (default) or ML (paper)
STARTS = ("map", "ml")


class _Prior:
    """What a run records of the field's prior (``lgm.prior``)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def describe(self) -> str:
        """One line for the store's ``field_prior`` attribute."""
        return self.text


class _Shim:
    """The ``lgm`` a run's bookkeeping reads: the prior's description and ``prior_for``."""

    def __init__(self, prior: _Prior, names: list[str]) -> None:
        self.prior = prior
        self.hyper_names = names
        self.beta_sd = np.zeros(0)

    def prior_for(self, theta: Mapping[str, float], prior: _Prior) -> _Prior:
        """The prior object of a chain (one for all: ``Z``'s prior lives in the sweep)."""
        return self.prior


class SupervisedGPLVM:
    """Supervised GPLVM with pseudo-marginal hyperparameters (module docstring).

    Parameters
    ----------
    x : array_like, shape (N, k_x) or (N,)
        Observed inputs (finite).
    y : array_like, shape (N, k_y)
        Outputs (finite).
    latent_dim : int
        ``k_z`` (<= k_y and <= N − 1).
    n_inducing : int, optional
        Inducing inputs of the variational fit (default ``min(N, 15)``).
    n_importance : int
        ``Q`` of eq. 6 (>= 1).
    refit : {"proposal", "always", "warmup"}
        Which importance distribution each estimate uses (:mod:`.sweep`): ``"always"`` is the
        paper's (re-fitted after each accepted block update; the estimate then depends on the
        chain's past); ``"proposal"`` fits ``q`` at each proposal from the start's fit (exact);
        ``"warmup"`` freezes it after warm-up (exact, high variance).
    standardise : bool
        Centre and scale the columns of ``x`` and ``y`` to unit sd (the sampled ``ξ`` are then
        in standardised units; predictions are mapped back).
    prior_sd : float
        sd of the ``N(0, prior_sd²)`` priors on each ``log ξ``.
    g0 : int
        Algorithm 2's ``g₀``.
    jitter : float
        ``ε`` of ``K_z`` (§6.1).
    blocks : "joint", "paper" or sequence of sequences of str
        The Gibbs blocks: ``"joint"`` (default) one block of all ``ξ``; ``"paper"`` §6.1's two,
        ``(σ, θ_1..θ_kz)`` and ``(θ_S, β)``; or lists of hyperparameter names partitioning
        ``ξ``.  One block learns the strong ``θ_S``–``θ_j`` correlation that the paper's blocks
        split, and costs one estimate per sweep instead of two (decision 124).
    correlation : float
        ``ρ ∈ [0, 1)``: each proposal moves the estimator's standard normals ``u`` (Q, k_z, N)
        by ``u' = ρu + √(1 − ρ²)ε`` (correlated pseudo-marginal, Deligiannidis et al. 2018);
        0 draws fresh ones (the paper's Algorithm 2).  Exact for every ``ρ``.
    start : {"map", "ml"}
        The fit the chains start from (plus noise) and each proposal's fit begins at:
        type-II MAP (:meth:`map_fit`, default) or the paper's type-II ML (:meth:`ml_fit`).
    orbit : int
        ``K``: the estimate draws half its ``Q`` draws from ``q`` and half from ``q``'s images
        under ``K`` fixed rotations and reflections of the latent space (:mod:`.orbit`) — the
        posterior of ``Z`` is nearly invariant under them and ``q`` covers one point of the
        orbit.  Even, or 0 for the paper's ``q`` alone.  The normals ``u`` are then
        (Q, k_z, N + 1).
    importance : {"laplace", "widened", "vb"}
        The Gaussian the estimate draws from (before the orbit mixture): ``"laplace"`` (default)
        the Fisher–Laplace ``q_L`` at the conditional mode of ``Z`` from the variational mean
        (:mod:`.laplace`); ``"widened"`` its curvature widened; ``"vb"`` the paper's ``q``.
    """

    summary_names = ("z",)
    exceed_on: str | None = None
    family = "gplvm"

    def __init__(self, x: Any, y: Any, *, latent_dim: int = 2, n_inducing: int | None = None,
                 n_importance: int = N_IMPORTANCE, refit: str = "proposal",
                 standardise: bool = False, prior_sd: float = PRIOR_SD, g0: int = G0,
                 jitter: float = DEFAULT_JITTER,
                 blocks: str | Sequence[Sequence[str]] = "joint",
                 correlation: float = CORRELATION, start: str = "map",
                 orbit: int = ORBIT, importance: str = IMPORTANCE[0]) -> None:
        xa = np.asarray(x)
        ya = np.asarray(y)
        for name, a in (("x", xa), ("y", ya)):
            if a.dtype.kind not in "biuf":
                raise InvalidDataError(f"{name} has dtype {a.dtype}; give numbers.")
        xa = xa.astype(float)
        xa = xa[:, None] if xa.ndim == 1 else xa
        ya = ya.astype(float)
        ya = ya[:, None] if ya.ndim == 1 else ya
        kz = positive_int("latent_dim", latent_dim, "the latent dimension k_z, e.g. 2")
        check_bools(standardise=standardise)
        if refit not in REFIT:
            raise InvalidParameterError(f"refit={refit!r} must be one of {list(REFIT)}.")
        if start not in STARTS:
            raise InvalidParameterError(f"start={start!r} must be one of {list(STARTS)}: "
                                        "type-II MAP (the default) or the paper's type-II ML.")
        self.start = start
        self.n_importance = positive_int("n_importance", n_importance,
                                         "importance draws per estimate, e.g. 64")
        self.prior_sd = positive_float("prior_sd", prior_sd, "the sd of the log-ξ priors")
        self.g0 = positive_int("g0", g0, "Algorithm 2's adaptation start, e.g. 200")
        self.jitter = positive_float("jitter", jitter, "K_z's white noise, e.g. 1e-6")
        self.refit, self.standardise = refit, bool(standardise)
        self.correlation = check_correlation(correlation)
        if (isinstance(orbit, bool) or not isinstance(orbit, int | np.integer) or orbit < 0
                or orbit % 2):
            raise InvalidParameterError(
                f"orbit={orbit!r} must be an even integer >= 0 (the orbit mixture's "
                f"components, e.g. {ORBIT}; 0 for the paper's q alone).")
        self.orbit = int(orbit)
        if importance not in IMPORTANCE:
            raise InvalidParameterError(
                f"importance={importance!r} must be one of {list(IMPORTANCE)}: the Fisher–"
                "Laplace Gaussian (default), its widened form or the paper's variational q.")
        self.importance = importance
        hyper0 = GPLVMHyper(np.ones(xa.shape[1] if xa.ndim == 2 else 1), 1.0, np.ones(kz), 1.0)
        # shapes, finiteness and k_z against the data, before any heavy work
        validate_data(ya, xa, hyper0)
        self.x_raw, self.y_raw = xa, ya
        self.x_mean = xa.mean(0) if standardise else np.zeros(xa.shape[1])
        self.x_scale = _scale(xa) if standardise else np.ones(xa.shape[1])
        self.y_mean = ya.mean(0) if standardise else np.zeros(ya.shape[1])
        self.y_scale = _scale(ya) if standardise else np.ones(ya.shape[1])
        self.x = (xa - self.x_mean) / self.x_scale
        self.y = (ya - self.y_mean) / self.y_scale
        self.n, self.k_x, self.k_y, self.k_z = len(xa), xa.shape[1], ya.shape[1], kz
        if n_inducing is not None and not (isinstance(n_inducing, int | np.integer)
                                           and 1 <= n_inducing <= self.n):
            raise InvalidParameterError(
                f"n_inducing={n_inducing!r} must be an integer in [1, N] = [1, {self.n}].")
        self.n_inducing = min(self.n, 15) if n_inducing is None else int(n_inducing)
        self.names = hyper_names(self.k_x, kz)
        self.blocks = self._blocks(blocks)
        self.block_names = ["+".join(self.names[i] for i in b) for b in self.blocks]
        self.epsilon, self.initial_cov, self.vb_max_iter = EPSILON, INITIAL_COV, VB_MAX_ITER
        self.dims, self.shape = ("obs", "latent"), (self.n, kz)
        self.field_coords = {"obs": np.arange(self.n), "latent": np.arange(kz)}
        self.coef_names: list[str] = []
        self.inside = np.ones(self.shape, dtype=bool)
        self.units = ""
        self.lgm = _Shim(_Prior(self.priors_text()["Z"]), self.names)
        self._fits: dict[str, VBPosterior] = {}
        self._laplace: tuple[np.ndarray, np.ndarray] | None = None
        self._orbit_t: np.ndarray | None = None
        self.last_start_report: str | None = None

    def _blocks(self, blocks: str | Sequence[Sequence[str]]) -> list[np.ndarray]:
        kx, kz = self.k_x, self.k_z
        if isinstance(blocks, str):
            if blocks == "joint":
                return [np.arange(len(self.names))]
            if blocks == "paper":  # §6.1: ξ1 = (σ, θ_1..θ_kz), ξ2 = (θ_S, β)
                return [np.r_[0:kx, kx + 1:kx + 1 + kz], np.array([kx, kx + kz + 1])]
            raise InvalidParameterError(
                f"blocks={blocks!r} must be 'joint', 'paper' or lists of the hyperparameter "
                f"names {self.names}.")
        idx = [[self.names.index(v) if v in self.names else -1 for v in b] for b in blocks]
        flat = sorted(i for b in idx for i in b)
        if flat != list(range(len(self.names))):
            raise InvalidParameterError(
                f"blocks={blocks!r} must partition the hyperparameters {self.names} (each "
                "name in exactly one block).")
        return [np.array(b) for b in idx]

    # -- the pieces the sweep uses -------------------------------------------------------------
    def hyper_of(self, eta: np.ndarray) -> GPLVMHyper:
        """``ξ = exp(η)``."""
        return GPLVMHyper.from_log(eta, self.k_x, self.k_z)

    def theta_dict(self, etas: np.ndarray) -> dict[str, np.ndarray]:
        """``ξ`` of every chain by name, from ``η`` (chains, d)."""
        xi = np.exp(np.asarray(etas, dtype=float))
        return {k: xi[:, i].copy() for i, k in enumerate(self.names)}

    def log_prior(self, eta: np.ndarray) -> float:
        """``log p(η)``: independent ``N(0, prior_sd²)`` on each ``log ξ``."""
        return float(-0.5 * np.sum((eta / self.prior_sd) ** 2)
                     - eta.size * np.log(self.prior_sd * np.sqrt(2 * np.pi)))

    def pmmh(self, estimate: Any = None, hook: Any = None,
             initial_cov: Any = None) -> AdaptivePMMH:
        """Algorithm 2's sampler with this model's blocks, prior and settings.

        ``initial_cov`` (a start's; later cycles read ``Σ_r`` from the chain's state):
        default ``INITIAL_COV``.
        """
        aux = ((self.n_importance, self.k_z, self.n + (self.orbit > 0))
               if self.correlation > 0 else None)
        return AdaptivePMMH(estimate or (lambda e, r: 0.0), self.log_prior, self.blocks,
                            prior_on="eta", g0=self.g0, n0=0, epsilon=self.epsilon,
                            initial_cov=self.initial_cov if initial_cov is None else initial_cov,
                            hook=hook, aux_shape=aux, correlation=self.correlation)

    def laplace(self) -> tuple[np.ndarray, np.ndarray]:
        """The Laplace approximation of ``p(η | Y, X)`` at the type-II MAP (computed once).

        Returns
        -------
        mode : ndarray, shape (d,)
            :meth:`map_fit`'s ``η``.
        cov : ndarray, shape (d, d)
            The inverse Hessian of ``−(bound + log p(η))`` with ``q`` re-optimised at each
            ``η``: central differences (``LAPLACE_STEP``) of its gradient, which at an optimal
            ``q`` is the bound's partial gradient in ``log ξ`` (the envelope theorem), from 2d
            warm-started fits.  Eigenvalues of the Hessian below the prior's ``1/prior_sd²`` are
            raised to it: never wider than the prior, and positive definite.
        """
        if self._laplace is None:
            fit = self.map_fit()
            mode = fit.hyper.to_log()

            def grad(eta: np.ndarray) -> np.ndarray:
                q = fit_vb(self.y, self.x, self.hyper_of(eta), init=fit, jitter=self.jitter,
                           max_iter=self.vb_max_iter)
                _, g = elbo_and_grad(self.y, self.x, q.hyper, VBParams(
                    q.mean_white, q.log_lambda, q.z_u), self.jitter)
                return g.log_hyper - eta / self.prior_sd**2

            with self.threads():
                h = np.stack([grad(mode + LAPLACE_STEP * e) - grad(mode - LAPLACE_STEP * e)
                              for e in np.eye(mode.size)]) / (2 * LAPLACE_STEP)
            w, v = np.linalg.eigh(-0.5 * (h + h.T))
            w = np.maximum(w, 1.0 / self.prior_sd**2)
            self._laplace = (mode, (v / w) @ v.T)
        return self._laplace

    def q_at(self, eta: np.ndarray) -> VBPosterior:
        """``q(ξ)`` of ``refit="proposal"``: a deterministic function of ``η`` alone.

        The variational fit at ``ξ = exp(η)`` started from :meth:`start_fit` and stopped after
        ``PROPOSAL_VB_ITER`` iterations.
        """
        return fit_vb(self.y, self.x, self.hyper_of(eta), init=self.start_fit(),
                      jitter=self.jitter, max_iter=PROPOSAL_VB_ITER)

    def orbit_transforms(self) -> np.ndarray:
        """The orbit mixture's orthogonal matrices (K, k_z, k_z) (:mod:`.orbit`; computed once)."""
        if self._orbit_t is None:
            self._orbit_t = orbit_transforms(self.k_z, self.orbit)
        return self._orbit_t

    def q_of(self, params: VBParams, eta: np.ndarray) -> VBPosterior:
        """The variational ``q`` of ``params`` fitted at ``η``."""
        return posterior_at(self, params, eta)

    @contextlib.contextmanager
    def threads(self) -> Iterator[None]:
        """One BLAS thread for the small dense algebra, unless a run's budget is in force."""
        with one_thread():
            yield

    # -- maximum likelihood (the paper's comparison and the chains' start) ----------------------
    def initial_hyper(self) -> GPLVMHyper:
        """The ML search's start: σ_l = 1/Var(x_l), θ_S = Var(y), θ_j = 1, β = 10/Var(y)."""
        vy = float(np.mean(np.var(self.y, axis=0))) or 1.0
        vx = np.var(self.x, axis=0)
        return GPLVMHyper(1.0 / np.where(vx > 0, vx, 1.0), vy, np.ones(self.k_z), 10.0 / vy)

    def ml_fit(self) -> VBPosterior:
        """Type-II maximum likelihood of the variational bound over ``ξ`` (computed once).

        The paper's "maximum likelihood" comparison (§6.1) and, with ``start="ml"``, the
        chains' start; its ``hyper`` is ``ξ̂``.
        """
        return self._fit("ml")

    def map_fit(self) -> VBPosterior:
        """Type-II maximum *a posteriori*: the bound plus the log-ξ priors (computed once).

        The chains' start by default (module docstring); its ``hyper`` is the mode.
        """
        return self._fit("map")

    def start_fit(self) -> VBPosterior:
        """The fit of the ``start`` setting: :meth:`map_fit` or :meth:`ml_fit`."""
        return self._fit(self.start)

    def _fit(self, kind: str) -> VBPosterior:
        if kind not in self._fits:
            with self.threads():
                self._fits[kind] = fit_vb(
                    self.y, self.x, self.initial_hyper(), optimise_hyper=True,
                    n_inducing=self.n_inducing, jitter=self.jitter, rng=np.random.default_rng(0),
                    prior_sd=self.prior_sd if kind == "map" else None)
        return self._fits[kind]

    # -- lattice_lgm._runview.RunView -----------------------------------------------------------
    def init_state(self, rngs: Sequence[np.random.Generator],
                   chains: Sequence[int] | None = None, initvals: Any = None,
                   warm: bool = True) -> LatentState:
        """Chains at :meth:`start_etas` (or ``initvals``), ``q`` fitted there (module docstring).

        ``initvals``: a mapping of hyperparameter name to value (or one per chain), all names.
        ``warm=False`` (a store's layout only): ``ξ`` at :meth:`initial_hyper`, ``Z`` zero.
        """
        n = len(rngs)
        chains = tuple(range(n)) if chains is None else tuple(int(c) for c in chains)
        if not warm:
            eta = np.tile(self.initial_hyper().to_log(), (n, 1))
            z = np.zeros((n, *self.shape))
            return LatentState(self.theta_dict(eta), (self.lgm.prior,) * n, z, z.copy(),
                               np.zeros((n, 0)), np.zeros(n), chains, None)
        etas = self.start_etas(rngs, initvals)
        pm = self.pmmh(initial_cov=None if self.start == "ml" else [
            HAARIO_SCALE / b.size * self.laplace()[1][np.ix_(b, b)] for b in self.blocks])
        fits, states, z, ll = [], [], np.zeros((n, *self.shape)), np.zeros(n)
        with self.threads():
            fit0 = self.start_fit()
            for c, rng in enumerate(rngs):
                h = self.hyper_of(etas[c])
                q = (self.q_at(etas[c]) if self.refit == "proposal"
                     else fit_vb(self.y, self.x, h, init=fit0, jitter=self.jitter))
                fits.append(q)

                def estimate(e: np.ndarray, r: np.random.Generator, q: VBPosterior = q) -> float:
                    return estimate_at(self, e, q, r).log_p_hat

                pm.log_estimate = estimate
                s = pm.initial_state(etas[c], rng)
                states.append(s)
                z[c] = q.sample(rng, 1)[0]
                ll[c] = float(log_p_y_given_z(self.y, z[c], h)[0])
        ex = {**pm_extras(pm, states), **vb_extras(fits, etas)}
        return LatentState(self.theta_dict(etas), (self.lgm.prior,) * n, z, z.copy(),
                           np.zeros((n, 0)), ll, chains, ex)

    def start_etas(self, rngs: Sequence[np.random.Generator], initvals: Any = None) -> np.ndarray:
        """The chains' starting ``η`` (chains, d), one draw from each chain's stream.

        ``initvals`` (:meth:`init_state`) if given; else ``start="map"``: ``N(mode,
        START_SPREAD² Σ)`` of :meth:`laplace`; ``start="ml"``: the ML point plus
        ``N(0, START_NOISE²)``.
        """
        n = len(rngs)
        if initvals is not None:
            per = [initvals] * n if isinstance(initvals, Mapping) else list(initvals)
            if len(per) != n or any(set(p) != set(self.names) for p in per):
                raise InvalidParameterError(
                    f"initvals={initvals!r}: give a mapping of every hyperparameter "
                    f"{self.names} to a value > 0, for all chains or one per chain.")
            out = np.array([[float(p[k]) for k in self.names] for p in per])
            if not np.all(np.isfinite(out) & (out > 0)):
                raise InvalidParameterError(
                    f"initvals hold non-positive or non-finite values {out.tolist()}; every "
                    "hyperparameter is positive.")
            self.last_start_report = "initvals"
            return np.log(out)
        self.last_start_report = self.start
        if self.start == "ml":
            eta0 = self.ml_fit().hyper.to_log()
            return np.stack([eta0 + START_NOISE * r.standard_normal(eta0.size) for r in rngs])
        mode, cov = self.laplace()
        chol = np.linalg.cholesky(cov)
        return np.stack([mode + START_SPREAD * chol @ r.standard_normal(mode.size)
                         for r in rngs])

    def default_representation(self) -> str:
        """The only sampler: Algorithm 2 then Algorithm 3 (``"pmmh"``)."""
        return "pmmh"

    def default_sweep(self, representation: str, n_latent: int,
                      tune: int = 0) -> PseudoMarginalSweep:
        """The pseudo-marginal sweep (``n_latent``: elliptical slice updates of ``Z``)."""
        if representation not in ("auto", "pmmh"):
            raise InvalidParameterError(
                f"representation={representation!r} is not a GPLVM sampler; choose 'auto' or "
                "'pmmh'.")
        return PseudoMarginalSweep(self, tune=tune, n_latent=n_latent)

    def record(self, state: LatentState) -> dict[str, Any]:
        """``ξ`` by name, the latent points ``Z`` and their running summary."""
        z = np.asarray(state.f, dtype=float)
        scalars = {k: np.asarray(state.theta[k], dtype=float) for k in self.names}
        return {"scalars": scalars, "beta": None, "f": z.astype(np.float32),
                "summary": {"z": z}}

    def data_groups(self) -> dict[str, dict[str, tuple[tuple[str, ...], np.ndarray]]]:
        """The outputs (``observed_data.y``) and inputs (``constant_data.x``), as given."""
        return {"observed_data": {"y": (("obs", "output"), self.y_raw)},
                "constant_data": {"x": (("obs", "input"), self.x_raw)}}

    def extra_coords(self) -> dict[str, np.ndarray]:
        """Output and input indices."""
        return {"output": np.arange(self.k_y), "input": np.arange(self.k_x)}

    def data_hash(self) -> str:
        """A digest of the data and the settings that change the target."""
        return hash_arrays({"x": self.x_raw, "y": self.y_raw,
                            "settings": np.array([self.k_z, self.prior_sd, self.jitter,
                                                  float(self.standardise)])})

    def priors_text(self) -> dict[str, str]:
        """The priors as stated."""
        return {"xi": f"log ξ ~ N(0, {self.prior_sd:g}²) each, ξ = {tuple(self.names)}",
                "Z": f"Z[:, j] ~ GP(0, exp(−½ Σ σ_l Δx_l²) + {self.jitter:g}·δ), j < {self.k_z}"}

    def describe(self) -> str:
        """One line for ``lattice-lgm run``."""
        std = ", standardised" if self.standardise else ""
        return (f"supervised GPLVM: N = {self.n}, k_x = {self.k_x}, k_y = {self.k_y}, "
                f"k_z = {self.k_z}{std}; pseudo-marginal ξ (Q = {self.n_importance}, "
                f"{self.importance} q, refit {self.refit}, orbit K = {self.orbit}), elliptical "
                "slice Z")

    # -- predictions (§5) -----------------------------------------------------------------------
    def predictive(self, hypers: Sequence[GPLVMHyper], zs: np.ndarray, x_new: Any,
                   y_grid: Any, rng: np.random.Generator, n_latent: int = 1) -> Predictive:
        """§5's predictive density and mean at ``x_new`` from draws ``(ξ^(g), Z^(g))``.

        Parameters
        ----------
        hypers : sequence of GPLVMHyper, length D
        zs : ndarray, shape (D, N, k_z)
        x_new : array_like, shape (M, k_x)
            In the units of the data as given.
        y_grid : array_like, shape (G,) or (G, k_y)
            In the data's units.
        rng : numpy Generator
        n_latent : int
            ``z_*`` draws per posterior draw.

        Returns
        -------
        Predictive
            ``density`` (M, G, k_y) per unit of ``y`` as given, ``mean`` (M, k_y), in the
            data's units (the standardisation undone).
        """
        xn = np.asarray(x_new, dtype=float)
        xn = xn[:, None] if xn.ndim == 1 else xn
        g = np.asarray(y_grid, dtype=float)
        g_std = (g - self.y_mean) / self.y_scale if g.ndim == 2 else (
            (g[:, None] - self.y_mean) / self.y_scale)
        with self.threads():
            p = predictive_density((xn - self.x_mean) / self.x_scale, self.x, self.y, hypers,
                                   zs, g_std, rng, n_latent, self.jitter)
        grid = g_std * self.y_scale + self.y_mean
        return p._replace(grid=grid, density=p.density / self.y_scale,
                          mean=p.mean * self.y_scale + self.y_mean)

    # -- the configuration file ---------------------------------------------------------------
    @classmethod
    def from_config(cls, config: Any) -> SupervisedGPLVM:
        """The model of a configuration with ``model.family = "gplvm"``.

        ``data.points``: a CSV with a header row.  ``model.options``: ``inputs`` (the X
        columns, required), ``outputs`` (the Y columns; default every other column),
        ``latent_dim`` (2), ``n_inducing``, ``n_importance`` (64), ``refit`` ("proposal"),
        ``standardise`` (false), ``prior_sd`` (3.0), ``g0`` (200), ``jitter`` (1e-6),
        ``correlation`` (:data:`CORRELATION`), ``blocks`` ("joint"), ``start`` ("map"),
        ``orbit`` (:data:`ORBIT`), ``importance`` ("laplace").
        """
        import pandas as pd

        r = config.resolved
        opts = dict(r["model"]["options"])
        unknown = sorted(set(opts) - set(OPTION_KEYS))
        if unknown:
            raise InvalidParameterError(
                f"model.options has unknown keys {unknown} for the GPLVM; known: "
                f"{list(OPTION_KEYS)}.")
        path = r["data"]["points"]
        table = pd.read_csv(path)
        inputs = opts.get("inputs")
        if inputs is None:
            raise InvalidParameterError(
                "model.options.inputs is required for the GPLVM: the columns of X, e.g. "
                f"inputs = [{', '.join(repr(c) for c in list(table.columns)[:1])}].")
        inputs = [inputs] if isinstance(inputs, str) else list(inputs)
        outputs = opts.get("outputs", [c for c in table.columns if c not in inputs])
        outputs = [outputs] if isinstance(outputs, str) else list(outputs)
        missing = [c for c in [*inputs, *outputs] if c not in table.columns]
        if missing or not outputs or set(inputs) & set(outputs):
            raise InvalidDataError(
                f"model.options inputs={inputs!r}, outputs={outputs!r}: {missing or 'overlap'}"
                f" — name distinct columns of {path} ({list(table.columns)}).")
        kw = {k: opts[k] for k in OPTION_KEYS[3:] if k in opts}
        return cls(table[inputs].to_numpy(), table[outputs].to_numpy(),
                   latent_dim=opts.get("latent_dim", 2), **kw)


def _scale(a: np.ndarray) -> np.ndarray:
    s = a.std(axis=0)
    return np.where(s > 0, s, 1.0)
