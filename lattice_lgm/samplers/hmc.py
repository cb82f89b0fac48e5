"""Joint Hamiltonian Monte Carlo over hyperparameters, coefficients and the whitened field.

The non-centred state of a latent Gaussian model on a circulant prior is

    x = (u, b, ζ):   u = the sampled hyperparameters on their unconstrained scale
                     (log sd, log range, the intercept ``mean``, ``beta_<name>``),
                     b = β / s (in-block coefficients over their prior sd),
                     ζ = the unitary half-spectrum of the field's white noise (the state's
                         ``white``), f = F⁻¹(√λ_θ ⊙ ζ) on the torus,

and on a Matérn-SPDE GMRF with the spectral engine (Neumann boundaries; the LGCP's ``gmrf``
backend) the same with ``ζ`` the real DCT-II coefficients of the white noise on the padded
lattice, ``f = Uᵀ(q_θ^{-½} ⊙ ζ)``, ``U`` orthonormal (``_hmc_field._DCTOps``): every formula below
holds with ``F_u → U``, ``√λ → q^{-½}`` and unit weights.

with potential ``U(x) = −log L(η) − Σ_k log p_h(u_k) + ½|ζ|² + ½|b|²`` (the white-noise and
coefficient priors are standard normal).  All of ``x`` moves at once along Hamiltonian
trajectories (Duane et al. 1987; Neal 2011, §5.3.3: leapfrog, then a Metropolis–Hastings
correction on ``H = U + K``), which is what couples the range, the sd and the field's low
frequencies that one-at-a-time moves (``prior-white``) cannot follow on fine lattices.

Gradients cost one inverse and one forward FFT per leapfrog step:

* ``∂U/∂ζ = ζ − √λ ⊙ F_u(Sᵀ g)``, with ``g = ∂log L/∂η`` at the observed sites scattered onto
  the torus (``Sᵀ``) and ``F_u`` the unitary real FFT (:meth:`CirculantPrior.spectrum`) — the
  adjoint of :meth:`CirculantPrior.colorize_spectrum` under the weighted inner product of the
  half-spectrum (Parseval; tested);
* ``∂U/∂log sd = −⟨g, f⟩`` (``f ∝ sd``); for every other covariance parameter ``u_k``,
  ``−Σ_k w_k Re(conj(F_u Sᵀg) ⊙ ∂√λ/∂u_k ⊙ ζ)`` with ``∂√λ/∂u_k`` from a table of exact
  spectra on a grid of ``log range`` (linear between nodes) or by central differences of the
  embedding spectrum; either is a deterministic function of the position, so the leapfrog map
  stays reversible and volume-preserving and the M–H step, which uses the exact spectrum,
  keeps the target exact;
* ``∂U/∂mean = −Σ g``, ``∂U/∂beta_k = −Σ g x_k``, ``∂U/∂b = b − s ⊙ X g``.

**The fixed effects' shear.**  The intercept and the coefficients are moved as *effective*
fixed effects ``c_eff = c + P f`` with ``P = (ZᵀZ)⁻¹Zᵀ`` the least-squares projection of the
field at the observed sites on the fixed effects' columns ``Z = [1, X]``: ``η = Z c_eff +
(I − ZP) f``, so the field's component along the covariates (its mean over the window above
all, which trades off against the intercept along a ridge of prior width) no longer moves
with them.  The map is a shear (unit Jacobian) and depends on nothing that changes, so the
target is unchanged; the gradient in ``f`` becomes ``(I − ZP)ᵀg − Pᵀ∇_c log p(c)``.  Measured on
bei at 20 m: the intercept's bulk ESS rose from 14–80 to ≈ 1000 per 1200 draws.  This is the
orthogonal (restricted spatial regression) parameterisation of spatial confounding used as a
reparameterisation only: the model is not changed.

**The split integrator** (default with the whitened field): ``U = Φ + ½|ζ|²`` with the
field's prior part integrated exactly — ``(ζ, ρ_ζ)`` rotate by the angle ε, the exact flow of
``½|ζ|² + ½|ρ_ζ|²`` — between half-kicks of ``∇Φ`` (the likelihood and hyperpriors only),
while ``(u, b)`` drift as in leapfrog (Beskos, Pinski, Sanz-Serna & Stuart 2011, §4; the
splitting of Shahbaba et al. 2014).  Symmetric, so reversible and volume-preserving; its
energy error comes from ``Φ`` alone, so the step size does not shrink with the number of
prior-dominated coordinates (``integrator="leapfrog"``: Neal 2011, eq. 5.18–5.20).

Kinetic energy ``K = ½ ρ_hᵀ M_h⁻¹ ρ_h + ½ Σ_k |ρ_k|²/m_k``: a diagonal (or, ``metric="dense"``,
full) mass on ``(u, b)`` adapted during warm-up, and per-frequency masses ``m_k`` on the field
(unit by default, see :data:`FIELD_MODES` for the measured alternatives: a partially
non-centred field, Papaspiliopoulos, Roberts & Sköld 2003, with the conditional precision as
mass).

Warm-up (``n_tune`` iterations) follows Stan's windowed adaptation: dual averaging of the step
size towards ``target_accept`` (Hoffman & Gelman 2014, Alg. 5: γ = 0.05, t₀ = 10, κ = 0.75),
after a first step size by their Alg. 4, and the inverse mass of
``(u, b)`` set to the regularised variance of each slow window (windows of 25, 50, 100, …
after an initial buffer of 75, with a terminal buffer of 50; scaled down for short warm-ups).
Trajectories have length ``trajectory · U(0.5, 1.5)`` in time units (jittered per iteration,
Neal 2011, §5.4.2.2), i.e. ``ceil(T/ε)`` leapfrog steps, capped at ``max_steps``.

Every chain adapts from its own history and draws from its own stream; its adaptation state
lives in the chain state (``LatentState.extras``), so it is checkpointed with it and a resume,
or a run of any subset of the chains, reproduces the same draws (DESIGN §5).  Chains run in
threads (``threads``; each with its own FFT plans and buffers, the gradient's transforms pruned
to the window, :class:`~lattice_lgm.priors._fft.WindowRealFFT`), with the same draws for any
thread count.

A position outside a hyperprior's support (or a non-finite gradient) ends the trajectory as a
divergence: the chain stays where it was (counted in ``info``).

**Compiled trajectories.**  In the default configuration (whitened field, split integrator,
an isotropic log range from the spectrum table, hyperpriors with a closed-form derivative,
a diagonal mass, a torus of ≥ 2 axes) a whole trajectory is one Numba call
(``_hmc_kernels._trajectory_chord``) that also runs the gradient's four FFTs: their plans are made
through FFTW's C interface from the library pyfftw loaded (:mod:`lattice_lgm.priors._fftw`),
so no Python runs between leapfrog steps and the chains' threads hold no GIL.  Python steps
in only to add nodes to the table and for a chord past the range's bound (that gradient on
the general path).  Same steps, same numbers as the Python loop (tested); on bei at 20 m
(one core) 110 → 69 µs per gradient of a whole transition (docs/convergence.md §2).

**Where the pieces live.**  This module holds :class:`JointHMC`: its settings, one chain's
transition and the chains' threads.  Its Hamiltonian (the coordinates, the potential and its
gradient, the integrators) is the mixin ``_hmc_dynamics._Dynamics``, Stan's windowed
adaptation the mixin ``_hmc_adapt._Adaptation``; the whitened field per transform and the
spectrum table are in ``_hmc_field``, the Numba kernels in ``_hmc_kernels``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from .._validation import positive_float, positive_int
from ..errors import InvalidParameterError
from ..models.latent import LatentGaussianModel
from ..priors import _fftw
from ..threads import chain_thread_init, chain_threads
from ._hmc_adapt import INIT_INV_MASS, MIN_TUNE, PREFIX, _Adaptation, adaptation_windows
from ._hmc_dynamics import _Dynamics, _inv_mass_times, _momentum
from ._hmc_field import _field_ops, _SpectrumTable, _TorusOps
from .state import LatentState, stack_theta

__all__ = ["JointHMC", "adaptation_windows"]

#: the field's coordinates and mass: "white" (whitened, unit mass), "scalar" (whitened, mass
#: 1 + p̄λ per frequency), "pncp" (that mass until the first slow window, then partially
#: non-centred with its conditional-precision mass).  Measured on bei at 20 m, 4 chains ×
#: (300 + 300) iterations with the shear: "white" bulk ESS sd 163, range 151, intercept 1031
#: (38 leapfrog steps per iteration); "pncp" 24, 29, 14 (15 steps); "scalar" 24, 47, 60
#: (17 steps, 300 + 300 iterations): the per-frequency mass buys a longer step but slows the
#: field's low frequencies, which must follow sd and range in the whitened coordinates, so
#: even per gradient it is 3x worse than "white".  Default "white".
FIELD_MODES = ("white", "scalar", "pncp")
#: "split": the whitened field's Gaussian part (½|x|² with unit mass) is integrated exactly, a
#: rotation of (x, ρ) by ε, between half-kicks of the likelihood's gradient only (Beskos,
#: Pinski, Sanz-Serna & Stuart 2011, §4; Shahbaba et al. 2014's splitting), so the step size
#: no longer shrinks as d^(-1/4) with the torus's prior-dominated coordinates; "leapfrog":
#: Neal (2011) eq. 5.18-5.20 (any field mode).
INTEGRATORS = ("split", "leapfrog")
#: the mass of the hyperparameters and coefficients: "diag" (Stan's diag_e: the windowed
#: variances) or "dense" (dense_e: the windowed covariance, which also undoes linear
#: correlations such as the intercept's with log sd, E[λ] fixing intercept + sd²/2)
METRICS = ("diag", "dense")
#: mean integration time (time units of the unit-variance coordinates; jittered by U(0.5, 1.5))
#: and the dual-averaging target, measured on bei at 10 m (4 chains × (200 + 300), bulk ESS
#: per 1200 draws, leapfrog steps per iteration): trajectory 0.75 → sd 54, range 17 (15 steps);
#: 1.5 → 186, 94 (31); 3.0 → 544, 598 (63); 4.5 → 502, 648 (101): per gradient 3.0 is best
#: (≈ π, half a period of the prior-dominated coordinates; the intercept and coefficients
#: become antithetic, ESS 3000 of 1200).  Target 0.65 (Beskos et al. 2013's optimum for
#: high dimensions) against Stan's 0.8 at trajectory 3.0: 47 steps instead of 63 for ESS
#: 409, 533 (sd, range) and log-likelihood 408 against 461: ≈ 15 % more ESS per gradient.
TRAJECTORY, TARGET_ACCEPT = 3.0, 0.65


class JointHMC(_Adaptation, _Dynamics):
    """One HMC transition of ``(θ, β, field)`` per chain (a full sweep).

    Parameters
    ----------
    model : LatentGaussianModel
        On a :class:`~lattice_lgm.priors.CirculantPrior` (FFT) or a
        :meth:`GMRFPrior.matern <lattice_lgm.priors.GMRFPrior.matern>` with the spectral
        engine and Neumann boundaries (DCT-II; the LGCP's ``gmrf`` backend).  Other priors
        (dense, CAR, CHOLMOD-solved or periodic GMRFs) raise: use the Murray–Adams moves or the
        interweaving sweep (``default_sweep(model, "asis")``) there.
    n_tune : int
        Warm-up iterations during which the step size and the mass adapt (the run's ``tune``);
        0 uses ``step_size`` and unit masses as given.
    target_accept : float
        Dual-averaging target of the mean acceptance probability, in (0, 1).
    trajectory : float
        Mean integration time (jittered by ``U(0.5, 1.5)``).
    step_size : float
        Initial step size (adapted during warm-up).
    inv_mass : float
        Initial inverse mass of every hyperparameter and coefficient coordinate (adapted).
    max_steps : int
        Cap on leapfrog steps per trajectory.
    field : {"pncp", "scalar", "white"}
        The field's coordinates and mass (:data:`FIELD_MODES`; :meth:`_field_params`).
    shear : bool
        Move the intercept and coefficients as *effective* fixed effects ``c + P f`` (the
        field's projection on the covariates added), which removes their ridge with the
        field's low frequencies (module docstring).
    threads : int, optional
        Chains run at once, each in its own thread with single-threaded FFTs (default: the
        run's thread budget, :mod:`lattice_lgm.threads`, else the cores this process may
        use; at most the number of chains).  The draws do not depend on it.

    Notes
    -----
    ``info`` of :meth:`step`: ``accepted/0:hmc`` (n_chains,) 0/1, ``accept_prob``,
    ``step_size``, ``n_steps``, ``divergent`` and the cost counters ``n_loglik`` (gradient
    evaluations) and ``n_cov`` (spectra built).
    """

    name = "hmc"
    #: what a run stores of ``info`` under ArviZ's names (ArviZ's plots mark ``diverging``)
    sample_stats = (("acceptance_rate", "accept_prob", "f8"), ("step_size", "step_size", "f8"),
                    ("n_steps", "n_steps", "i8"), ("diverging", "divergent", "bool"))

    def __init__(self, model: LatentGaussianModel, *, n_tune: int = 1000,
                 target_accept: float = TARGET_ACCEPT, trajectory: float = TRAJECTORY,
                 step_size: float = 0.05, inv_mass: float = INIT_INV_MASS,
                 max_steps: int = 256, field: str = "white", shear: bool = True,
                 integrator: str = "split", metric: str = "diag",
                 threads: int | None = None) -> None:
        if not isinstance(model, LatentGaussianModel):
            raise InvalidParameterError(f"model={model!r} must be a LatentGaussianModel.")
        self._ops = _field_ops(model.prior)
        if not model.hyper_names:
            raise InvalidParameterError(
                "the model samples no hyperparameters; JointHMC needs at least one.")
        if isinstance(n_tune, bool) or not isinstance(n_tune, (int, np.integer)) or n_tune < 0:
            raise InvalidParameterError(f"n_tune={n_tune!r} must be an int >= 0.")
        if 0 < n_tune < MIN_TUNE:
            raise InvalidParameterError(
                f"tune={n_tune} is too short for HMC's windowed adaptation (step size and mass "
                f"need at least {MIN_TUNE} warm-up iterations; Stan's default is 1000); give "
                f"tune >= {MIN_TUNE}, or tune=0 to sample with the given step_size and inv_mass.")
        if not 0.0 < float(target_accept) < 1.0:
            raise InvalidParameterError(
                f"target_accept={target_accept!r} must lie in (0, 1), e.g. 0.8.")
        self.model = model
        self.n_tune = int(n_tune)
        self.target_accept = float(target_accept)
        self.trajectory = positive_float("trajectory", trajectory, "an integration time, e.g. 1.5")
        self.step_size = positive_float("step_size", step_size, "e.g. 0.05")
        self.inv_mass = positive_float("inv_mass", inv_mass, "e.g. 0.01")
        if field not in FIELD_MODES:
            raise InvalidParameterError(f"field={field!r} must be one of {list(FIELD_MODES)}.")
        self.field = field
        self.max_steps = positive_int("max_steps", max_steps, "e.g. 256")
        self.windows = adaptation_windows(self.n_tune)
        self.names = tuple(model.hyper_names)
        self._cov_names = tuple(n for n in self.names if n not in model.obs_params)
        self.n_h = len(self.names) + model.n_beta
        self._hp = [model.hyperpriors[n] for n in self.names]
        self._bounds = np.array([h.unconstrained_bounds for h in self._hp]).reshape(-1, 2)
        cov = [k for k, n in enumerate(self.names)
               if n not in model.obs_params and not (n == "sd" and self._hp[k].transform == "log")]
        self._fd_params = cov
        self._table = None
        self._table_index = -1
        if len(cov) == 1 and self.names[cov[0]] == "range" and self._hp[cov[0]].transform == "log":
            self._table = _SpectrumTable(self._bounds[cov[0], 1])
            self._table_index = cov[0]
        self._mass_cache: dict[int, tuple] = {}
        self._local = threading.local()     # per-thread FFT workspaces (_workspace)
        self.threads = None if threads is None else positive_int(
            "threads", threads, "the number of chains run at once, e.g. 2")
        self._pool: ThreadPoolExecutor | None = None
        self._pool_size = 0
        # the fixed effects' shear (module docstring): columns of Z for the intercept and the
        # hyperparameter coefficients (their u entries), then the block coefficients (b)
        self._obs_u = [k for k, n in enumerate(self.names) if n in model.obs_params]
        cols = [np.ones(model.likelihood.n_obs) if self.names[k] == "mean"
                else model.hyper_covariate(self.names[k]) for k in self._obs_u]
        cols += list(model.covariates_obs)
        self._proj = None
        if cols and shear:
            z = np.column_stack(cols)
            self._proj = np.linalg.solve(z.T @ z, z.T)      # P = (ZᵀZ)⁻¹Zᵀ, (q, n_obs)
        self.shear = bool(shear)
        if integrator not in INTEGRATORS:
            raise InvalidParameterError(
                f"integrator={integrator!r} must be one of {list(INTEGRATORS)}.")
        # the split integrator needs the field's Gaussian part to be ½|x|² with unit mass
        self.integrator = integrator if field == "white" else "leapfrog"
        self._split = self.integrator == "split"
        if metric not in METRICS:
            raise InvalidParameterError(f"metric={metric!r} must be one of {list(METRICS)}.")
        self.metric = metric
        # for the gradient's compiled path (:meth:`_gradient_chord`)
        self._k_sd = self.names.index("sd") if "sd" in self.names else -1
        self._lo_a = np.ascontiguousarray(self._bounds[:, 0])
        self._hi_a = np.ascontiguousarray(self._bounds[:, 1])
        self._lo, self._hi = self._lo_a.tolist(), self._hi_a.tolist()   # Python's checks
        n_obs = model.likelihood.n_obs
        self._zt = np.ascontiguousarray(np.reshape(cols, (len(cols), n_obs)), dtype=np.float64)
        self._proj_rows = (np.ascontiguousarray(self._proj) if self._proj is not None
                           else np.zeros((0, n_obs)))
        self._beta_sd = np.ascontiguousarray(
            np.broadcast_to(model.beta_sd, (model.n_beta,)), dtype=np.float64)
        self._obs_idx = np.array(self._obs_u, dtype=np.int64)
        forms = [h.derivative_form() for h in self._hp]
        # (n_names, 4): the hyperpriors' derivatives a + b u + c e^{du}; None: a hyperprior
        # without that form (a user's subclass) keeps the general path
        self._forms = (None if any(f is None for f in forms)
                       else np.array(forms, dtype=np.float64).reshape(-1, 4))
        # η's part that no sampled fixed effect carries (the offset, fixed coefficients)
        self._base0 = np.ascontiguousarray(
            model.base_obs({self.names[k]: 0.0 for k in self._obs_u}), dtype=np.float64)
        lik = model.likelihood
        #: the sites' arguments of the compiled gradient (:func:`_chord_sites` after ``f``)
        self._site = (np.ascontiguousarray(model.state_index), self._proj_rows, self._zt,
                      self._base0, self._obs_idx, self._beta_sd, self._forms, self._lo_a,
                      self._hi_a, lik._kind, lik.y_obs, lik.aux_obs)
        #: whole trajectories compiled (:meth:`_leapfrog_compiled`): the default
        #: configuration on the torus, where FFTW's plans can be executed from compiled code
        self._compiled = (self.field == "white" and self._split and self._table is not None
                          and self._forms is not None and self._ops is _TorusOps
                          and _fftw.LIB is not None)

    def settings(self) -> dict[str, Any]:
        """Every setting that changes this move's draws, JSON-ready."""
        return {"sweep": "JointHMC", "n_tune": self.n_tune, "target_accept": self.target_accept,
                "trajectory": self.trajectory, "step_size": self.step_size,
                "inv_mass": self.inv_mass, "field": self.field, "shear": self.shear,
                "integrator": self.integrator, "metric": self.metric,
                "max_steps": self.max_steps}

    def _chain_pool(self, n: int) -> ThreadPoolExecutor | None:
        """The thread pool for ``n`` chains, or None to run them in the calling thread."""
        k = chain_threads(n, self.threads)
        if k <= 1:
            return None
        if self._pool is None or self._pool_size != k:
            if self._pool is not None:
                self._pool.shutdown()
            self._pool = ThreadPoolExecutor(max_workers=k, thread_name_prefix="lattice-hmc",
                                            initializer=self._init_worker)
            self._pool_size = k
        return self._pool

    def _init_worker(self) -> None:
        # one thread per chain: single-threaded FFTs (_workspace) and Numba kernels (its
        # thread count is per calling thread), so k chains use k cores, not k × pools
        self._local.in_pool = True
        chain_thread_init()

    def __getstate__(self) -> dict[str, Any]:
        # thread pools, thread-local FFT plans and buffers are process-local: rebuilt on use
        state = dict(self.__dict__)
        state["_local"] = state["_pool"] = None
        state["_pool_size"] = 0
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._local = threading.local()

    # -- one chain -------------------------------------------------------------------------------
    def _transition(self, state: LatentState, c: int, rng: np.random.Generator,
                    ex: dict[str, np.ndarray]) -> tuple[dict | None, dict[str, Any]]:
        model = self.model
        theta0 = state.theta_of(c)
        prior0 = state.priors[c]
        u0 = self._u_of(theta0)
        b0 = state.beta[c] / model.beta_sd if model.n_beta else np.zeros(0)
        zeta0 = np.array(state.white[c])
        # the effective fixed effects of the current state (the shear; identity without it)
        u0, b0 = self._effective(u0, b0, state.f[c].reshape(-1)[model.state_index])
        if self._table is not None:
            self._table.anchor(float(u0[self._table_index]))
        if int(ex[PREFIX + "iter"][c]) == 0 and self.n_tune > 0:
            # the field's mass and non-centring start from the warm state; without warm-up
            # they stay as given (a state-dependent map would not leave the target invariant)
            self._set_field_mass(c, ex, theta0, state.f[c], state.beta[c],
                                 prior0.state_size, u0)
        inv_m = ex[PREFIX + "inv_mass"][c]
        wk, m_z = self._field_params(c, ex, theta0, prior0)
        w = self._ops.weights(prior0)
        if self.field == "white":
            z0, jac0 = zeta0, 0.0                 # w = 1 (the general lines give the same)
        else:
            sig0 = self._ops.sigma(prior0)
            z0 = self._pow(sig0, 1.0 - wk) * zeta0     # the partially non-centred field x
            jac0 = self._log_jacobian(sig0, wk, w)

        def kinetic(rh, rz):
            return 0.5 * float(rh @ _inv_mass_times(inv_m, rh)) + 0.5 * float(
                np.sum(w * (rz.real ** 2 + rz.imag ** 2) / m_z))

        # momentum: N(0, M) — (u, b) with the diagonal mass, ζ with the per-frequency mass
        rho_h = _momentum(inv_m, rng.standard_normal(self.n_h))
        rho_z = np.sqrt(m_z) * self._ops.draw(prior0, rng)
        jitter = rng.uniform(0.5, 1.5)
        log_u = math.log(rng.random())
        ll0 = float(state.loglik[c])
        # the energy at the start from the physical values (the state's θ and β)
        up0 = self._u_of(theta0)
        bp0 = state.beta[c] / model.beta_sd if model.n_beta else np.zeros(0)
        lh0 = sum(float(h.logpdf_unconstrained(v)) for h, v in zip(self._hp, up0, strict=True))
        e0 = (-ll0 - lh0 + 0.5 * float(np.sum(w * (zeta0.real ** 2 + zeta0.imag ** 2)))
              + jac0 + 0.5 * float(bp0 @ bp0))
        if not math.isfinite(e0):
            raise InvalidParameterError(
                f"chain {state.chains[c]} starts at a non-finite density (theta={theta0}, "
                f"log L={ll0}); JointHMC needs a finite starting point.")
        grad0 = self._gradient(u0, b0, z0, theta0, prior0, wk)
        if grad0 is None:
            raise InvalidParameterError(
                f"chain {state.chains[c]} starts outside the support (theta={theta0}).")
        h0 = e0 + kinetic(rho_h, rho_z)
        n_grad, n_cov = 1, grad0[2]
        if int(ex[PREFIX + "iter"][c]) == 0 and self.n_tune > 0:
            k, nc = self._initial_step(c, ex, u0, b0, z0, rho_h, rho_z, grad0, inv_m, m_z,
                                       wk, theta0, prior0, h0, kinetic)
            n_grad, n_cov = n_grad + k, n_cov + nc
        eps = math.exp(ex[PREFIX + "log_eps"][c])
        n_steps = int(min(self.max_steps, max(1, math.ceil(self.trajectory * jitter / eps))))
        u, b, z, rh, rz, k, nc, ok = self._leapfrog(u0, b0, z0, rho_h, rho_z, grad0, eps,
                                                    n_steps, inv_m, m_z, wk, theta0, prior0)
        n_grad, n_cov = n_grad + k, n_cov + nc
        new = None
        if ok:
            e1, new = self._energy(u, b, z, theta0, prior0, wk)
            n_cov += 1
        if new is None:
            accept_prob, accept, divergent = 0.0, False, True
        else:
            log_r = h0 - (e1 + kinetic(rh, rz))
            accept_prob = math.exp(min(0.0, log_r))
            accept, divergent = log_u < log_r, False
        info = {"accept_prob": accept_prob, "accepted": int(accept), "n_steps": n_steps,
                "divergent": int(divergent), "step_size": eps, "n_grad": n_grad,
                "n_cov": n_cov}
        x_new = np.concatenate([u, b]) if accept else np.concatenate([u0, b0])
        window_end = self._adapt(c, ex, accept_prob, x_new)
        if not accept:
            if window_end:
                self._set_field_mass(c, ex, theta0, state.f[c], state.beta[c],
                                     prior0.state_size, u0)
            return None, info
        out = {"theta": new["theta"], "prior": new["prior"], "f": new["f"][0],
               "white": new["zeta"],
               "beta": new["beta"], "loglik": new["loglik"]}
        if window_end:
            self._set_field_mass(c, ex, out["theta"], out["f"], out["beta"],
                                 prior0.state_size, u)
        return out, info

    # -- the sweep -------------------------------------------------------------------------------
    def step(self, state: LatentState,
             rngs: Sequence[np.random.Generator]) -> tuple[LatentState, dict[str, Any]]:
        """One HMC transition of every chain, each from its own stream.

        Chains run in up to ``threads`` threads at once (each with its own single-threaded FFT
        plans); a chain's transition depends only on its own state and stream, so the draws
        are the same for any thread count and any subset of the chains (DESIGN §5; tested).

        Returns
        -------
        state : LatentState
            With its ``extras`` carrying each chain's adaptation state.
        info : dict
        """
        state.check_rngs(rngs)
        n = state.n_chains
        ex = self._extras(state)
        thetas = [state.theta_of(c) for c in range(n)]
        priors = list(state.priors)
        f, white, beta, ll = (state.f.copy(), state.white.copy(), state.beta.copy(),
                              state.loglik.copy())
        keys = ("accept_prob", "accepted", "n_steps", "divergent", "step_size", "n_grad",
                "n_cov")
        infos = {k: np.zeros(n) for k in keys}
        def run(c: int) -> tuple[dict | None, dict[str, Any]]:
            # a trajectory that runs away overflows on its way to being rejected: the checks
            # are explicit (non-finite → divergence), so numpy's warnings would only be noise
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                return self._transition(state, c, rngs[c], ex)

        pool = self._chain_pool(n)
        results = list(pool.map(run, range(n))) if pool is not None else [run(c) for c in range(n)]
        for c, (new, inf) in enumerate(results):
            for k in keys:
                infos[k][c] = inf[k]
            if new is not None:
                thetas[c] = new["theta"]
                priors[c] = new["prior"]
                f[c], white[c], beta[c], ll[c] = new["f"], new["white"], new["beta"], new["loglik"]
        out = LatentState(stack_theta(thetas), tuple(priors), f, white, beta, ll,
                          state.chains, ex)
        info = {"accepted/0:hmc": infos["accepted"].astype(np.int64),
                "accept_prob": infos["accept_prob"], "step_size": infos["step_size"],
                "n_steps": infos["n_steps"].astype(np.int64),
                "divergent": infos["divergent"].astype(np.int64),
                "n_loglik": infos["n_grad"].astype(np.int64),
                "n_cov": infos["n_cov"].astype(np.int64)}
        return out, info
