"""Joint Hamiltonian Monte Carlo over hyperparameters, coefficients and the whitened field.

The non-centred state of a latent Gaussian model on a circulant prior is

    x = (u, b, ζ):   u = the sampled hyperparameters on their unconstrained scale
                     (log sd, log range, the intercept ``mean``, ``beta_<name>``),
                     b = β / s (in-block coefficients over their prior sd),
                     ζ = the unitary half-spectrum of the field's white noise (the state's
                         ``white``), f = F⁻¹(√λ_θ ⊙ ζ) on the torus,

and on a Matérn-SPDE GMRF with the spectral engine (Neumann boundaries; the LGCP's ``gmrf``
backend) the same with ``ζ`` the real DCT-II coefficients of the white noise on the padded
lattice, ``f = Uᵀ(q_θ^{-½} ⊙ ζ)``, ``U`` orthonormal (:class:`_DCTOps`): every formula below
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
(:func:`_trajectory_chord`) that also runs the gradient's four FFTs: their plans are made
through FFTW's C interface from the library pyfftw loaded (:mod:`lattice_lgm.priors._fftw`),
so no Python runs between leapfrog steps and the chains' threads hold no GIL.  Python steps
in only to add nodes to the table and for a chord past the range's bound (that gradient on
the general path).  Same steps, same numbers as the Python loop (tested); on bei at 20 m
(one core) 110 → 69 µs per gradient of a whole transition (docs/convergence.md §2).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numba
import numpy as np
import scipy.fft
import scipy.linalg

from .._validation import positive_float, positive_int
from ..errors import InvalidParameterError, ParameterOutOfBoundsError
from ..likelihoods._kernels import site_deriv
from ..models.latent import LatentGaussianModel
from ..priors import CirculantPrior, GMRFPrior, _fftw
from ..priors._fft import SplitRealFFT, WindowRealFFT
from ..threads import chain_thread_init, chain_threads
from ._latent import loglik_at
from .state import LatentState, stack_theta

__all__ = ["JointHMC", "adaptation_windows"]

#: dual-averaging constants (Hoffman & Gelman 2014, §3.2.1; Stan's defaults)
DA_GAMMA, DA_T0, DA_KAPPA = 0.05, 10.0, 0.75
#: Stan's windowed adaptation: initial fast buffer, first slow window, terminal fast buffer
INIT_BUFFER, BASE_WINDOW, TERM_BUFFER = 75, 25, 50
#: step of the central difference of √λ in an unconstrained covariance parameter
FD_STEP = 1e-5
#: initial inverse mass of (u, b), until the first slow window ends: posterior sds of log sd,
#: log range, the intercept and standardised coefficients on bei (5-20 m) are 0.07-0.19, and a
#: unit mass there made the first 100 warm-up iterations cost 256-step trajectories
INIT_INV_MASS = 0.01
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
#: the shortest warm-up with a slow window (below it, the mass could not adapt)
MIN_TUNE = 20
#: the largest argument of exp that stays finite (an unbounded log sd past it has diverged)
_LOG_MAX = math.log(np.finfo(np.float64).max)
#: prefix of this move's entries in ``LatentState.extras``
PREFIX = "hmc/"
#: a trajectory whose log range spreads over more than max(SPAN_MIN, SPAN_SD × its scale in
#: the mass) ends as a divergence (:meth:`JointHMC._span_limit`)
SPAN_MIN = 1.0
SPAN_SD = 12.0


def adaptation_windows(n_tune: int) -> list[tuple[int, int]]:
    """The slow windows ``(start, end]`` (1-based iterations); the mass is set at each end.

    Stan's schedule: a fast buffer, slow windows doubling from 25, a terminal buffer; for
    ``n_tune < 150`` the buffers are 15 % and 10 % of the warm-up and one window fills the rest;
    below 20 iterations only the step size adapts (no window).

    Parameters
    ----------
    n_tune : int

    Returns
    -------
    list of (int, int)
    """
    if n_tune < MIN_TUNE:
        return []
    init, term, base = INIT_BUFFER, TERM_BUFFER, BASE_WINDOW
    if init + term + base > n_tune:
        init, term = int(0.15 * n_tune), int(0.1 * n_tune)
        base = n_tune - init - term
    ends = []
    start, size = init, base
    last = n_tune - term
    while start < last:
        end = start + size
        if end + 2 * size > last:  # the next window would not fit: stretch this one
            end = last
        ends.append((start, end))
        start, size = end, 2 * size
    return ends


class JointHMC:
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

    # -- adaptation state ------------------------------------------------------------------------
    def init_extras(self, n: int) -> dict[str, np.ndarray]:
        """Fresh adaptation state for ``n`` chains."""
        le = math.log(self.step_size)
        return {PREFIX + "iter": np.zeros(n, np.int64),
                PREFIX + "log_eps": np.full(n, le), PREFIX + "log_eps_bar": np.zeros(n),
                PREFIX + "h_bar": np.zeros(n), PREFIX + "mu": np.full(n, math.log(10) + le),
                PREFIX + "da_m": np.zeros(n, np.int64),
                PREFIX + "inv_mass": (np.full((n, self.n_h), self.inv_mass)
                                      if self.metric == "diag" else
                                      np.tile(self.inv_mass * np.eye(self.n_h), (n, 1, 1))),
                PREFIX + "win_n": np.zeros(n, np.int64),
                PREFIX + "win_mean": np.zeros((n, self.n_h)),
                PREFIX + "win_m2": np.zeros((n, self.n_h) if self.metric == "diag"
                                            else (n, self.n_h, self.n_h)),
                PREFIX + "mass_p": np.zeros(n),
                PREFIX + "mass_u": np.zeros((n, len(self.names))),
                PREFIX + "centred": np.zeros(n, np.int64)}

    def _extras(self, state: LatentState) -> dict[str, np.ndarray]:
        ex = dict(state.extras or {})
        if PREFIX + "iter" not in ex:
            ex.update(self.init_extras(state.n_chains))
        return {k: np.array(v, copy=True) for k, v in ex.items()}

    # -- coordinates -----------------------------------------------------------------------------
    def _u_of(self, theta: dict[str, float]) -> np.ndarray:
        return np.array([float(h.to_unconstrained(theta[n]))
                         for n, h in zip(self.names, self._hp, strict=True)])

    def _theta_of(self, u: np.ndarray, theta0: dict[str, float]) -> dict[str, float]:
        out = dict(theta0)
        for n, h, v in zip(self.names, self._hp, u, strict=True):
            out[n] = float(h.from_unconstrained(v))
        return out

    def _shift(self, f_obs: np.ndarray) -> np.ndarray:
        """``P f``: the field's least-squares projection on the fixed effects' columns."""
        return self._proj @ f_obs

    def _physical(self, u: np.ndarray, b: np.ndarray, f_obs: np.ndarray, sign: float = -1.0):
        """Effective ``(u, b)`` → physical, ``c = c_eff − P f`` (``sign=+1``: the inverse).

        The identity without the shear.
        """
        if self._proj is None:
            return u, b
        d = sign * self._shift(f_obs)
        u2, b2 = u.copy(), b.copy()
        n = len(self._obs_u)
        u2[self._obs_u] += d[:n]
        if len(b):
            b2 += d[n:] / self.model.beta_sd
        return u2, b2

    def _effective(self, u: np.ndarray, b: np.ndarray, f_obs: np.ndarray):
        """Physical ``(u, b)`` → effective (the inverse of :meth:`_physical`)."""
        return self._physical(u, b, f_obs, sign=1.0)

    def _in_support(self, u: np.ndarray) -> bool:
        """Every coordinate of ``u`` inside its hyperprior's support (False for NaN)."""
        for v, lo, hi in zip(u.tolist(), self._lo, self._hi, strict=True):
            if not lo <= v <= hi:
                return False
        return True

    @staticmethod
    def _pow(sig: np.ndarray, e: np.ndarray) -> np.ndarray:
        """``σ^e`` with ``0^0 = 1`` (clipped bins have ``e = 0``: they stay whitened)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.where(e == 0.0, 1.0, np.power(sig, e))
        return out

    @staticmethod
    def _log_jacobian(sig: np.ndarray, wk: np.ndarray, weights: np.ndarray) -> float:
        """``−log|∂ζ/∂x| = Σ_k (1 − w_k) log σ_k`` over the full spectrum (``ζ = σ^{w−1} x``)."""
        pos = wk != 1.0
        return float(np.sum((weights * (1.0 - wk) * np.log(np.where(pos, sig, 1.0)))[pos]))

    def _energy(self, u, b, x, theta0, prior0, wk):
        """The exact potential ``U`` at ``(u, b, x)`` and the pieces a chain keeps (or inf, None).

        ``x`` is the partially non-centred field (``f̂ = σ^w x``, ``ζ = σ^{w−1} x``), so ``U``
        has the Jacobian ``Σ_k (1 − w_k) log σ_k`` of ``x → ζ`` (over the full spectrum).
        """
        model = self.model
        if not self._in_support(u):
            return math.inf, None
        theta = self._theta_of(u, theta0)
        try:
            prior = model.prior_for(theta, prior0)
        except (InvalidParameterError, ParameterOutOfBoundsError):
            return math.inf, None
        sig = self._ops.sigma(prior)
        if self.field == "white":
            zeta, jac = x, 0.0      # w = 1: ζ = x, no Jacobian (what the general lines give)
        else:
            if np.any((sig == 0.0) & (wk != 1.0)):
                return math.inf, None  # a bin the map needs vanished (never in the torus' sizing)
            zeta = self._pow(sig, wk - 1.0) * x
            jac = None
        f = self._ops.colorize(prior, zeta, self._workspace(prior)).copy()[None]
        u, b = self._physical(u, b, f.reshape(-1)[model.state_index])
        if not self._in_support(u):
            return math.inf, None
        theta = self._theta_of(u, theta0)
        beta = model.beta_sd * b
        ll = float(loglik_at(model, f, beta[None], [theta])[0])
        lh = [float(h.logpdf_unconstrained(v)) for h, v in zip(self._hp, u, strict=True)]
        w = self._ops.weights(prior)
        if jac is None:
            jac = self._log_jacobian(sig, wk, w)
        energy = (-ll - sum(lh) + 0.5 * float(np.sum(w * (zeta.real ** 2 + zeta.imag ** 2)))
                  + jac + 0.5 * float(b @ b))
        if not math.isfinite(energy):
            return math.inf, None
        return energy, {"theta": theta, "prior": prior, "f": f, "beta": beta, "loglik": ll,
                        "zeta": zeta}

    def _sqrt_spectrum(self, u: np.ndarray, theta: dict[str, float], prior0: CirculantPrior):
        """``√λ_θ`` and ``∂√λ/∂u_k`` for the covariance parameters other than ``sd``.

        With one such parameter (an isotropic range) both come from :class:`_SpectrumTable`
        (linear interpolation in ``u`` between exact spectra on a fixed grid, computed once per
        node); otherwise from exact spectra and central differences.  Either is a
        deterministic function of the position, which is all the leapfrog needs (the
        acceptance step uses the exact spectrum).
        """
        model = self.model
        sd = float(theta.get("sd", prior0.params.get("sd", 1.0)))
        if self._table is not None:
            k = self._table_index
            val = self._table.at(float(u[k]), prior0, self._ops, sd)
            if val is not None:
                a, da = val
                return a, {k: da}, 0
        prior = model.prior_for(theta, prior0)
        sq = self._ops.sigma(prior)
        out, n_cov = {}, 1
        for k in self._fd_params:
            # central difference (one-sided at a bound of the support)
            lo = max(u[k] - FD_STEP, self._bounds[k, 0])
            hi = min(u[k] + FD_STEP, self._bounds[k, 1])
            ends = []
            for v in (lo, hi):
                if v == u[k]:
                    ends.append(sq)
                    continue
                u2 = u.copy()
                u2[k] = v
                ends.append(self._ops.sigma(model.prior_for(self._theta_of(u2, theta), prior)))
                n_cov += 1
            out[k] = (ends[1] - ends[0]) / (hi - lo)
        return sq, out, n_cov

    def _gradient_chord(self, u, b, x, theta0, prior0):
        """:meth:`_gradient` for the whitened field with the range from the table, compiled.

        The same formulas in three compiled passes around the two transforms: the field's
        spectrum on the table's chord (:func:`_color_pass`); the sites (:func:`_chord_sites`:
        gather, the shear's shift to the physical fixed effects, the hyperpriors' derivatives
        in their closed form, the likelihood's gradient, ``Zᵀg`` and the shear's correction);
        the spectral sums (:func:`_white_chord`).  Python is left with the bounds, the table's
        lookup and the two transforms' calls: on bei at 20 m a whole transition takes
        ≈ 100 µs per gradient against 235 µs for the general path (docs/convergence.md §2).
        Returns ``False`` where the general path must answer (a chord past the range's upper
        bound).
        """
        if not self._in_support(u):
            return None
        ul = u.tolist()
        try:
            ch = self._table.chord(ul[self._table_index], prior0, self._ops)
        except (InvalidParameterError, ParameterOutOfBoundsError):
            return None  # a range no covariance can take (e.g. exp(u) = 0): diverged
        if ch is None:
            return False
        a0, a1, t = ch
        k_sd = self._k_sd
        if k_sd >= 0 and ul[k_sd] > _LOG_MAX:
            return None  # an sd that overflows: a trajectory that ran away (divergence)
        scale = (math.exp(ul[k_sd]) if k_sd >= 0
                 else float(theta0.get("sd", prior0.params.get("sd", 1.0))))
        _, ws, c, root_m = self._chord_context(prior0)
        _color_pass(x, a0, a1, t, scale, root_m, ws.bwd_in)
        idx, proj, zt, base, obs_u, beta_sd, forms, lo, hi, kind, y, aux = self._site
        ok, grad = _chord_sites(ws.backward(), idx, proj, zt, base, u, b, obs_u, beta_sd, forms,
                                lo, hi, kind, y, aux, ws.fwd_in)
        if not ok:
            return None
        grad_x = np.empty_like(x)
        s_sd, s_cov = _white_chord(x, ws.forward(), 1.0 / root_m, a0, a1, t,
                                   1.0 / _SpectrumTable.STEP, scale, c, not self._split, grad_x)
        if k_sd >= 0:
            grad[k_sd] -= s_sd
        grad[self._table_index] -= s_cov
        return grad, grad_x, 0

    def _chord_context(self, prior0):
        """``(prior0, workspace, half-spectrum weights, √M)`` of the calling thread.

        The compiled gradient's transforms and constants, cached per prior.
        """
        ctx = getattr(self._local, "chord", None)
        if ctx is None or ctx[0] is not prior0:
            ws = self._workspace(prior0, window=True)
            ctx = self._local.chord = (prior0, ws, self._ops.weights(prior0),
                                       math.sqrt(ws.size))
        return ctx

    def _gradient(self, u, b, x, theta0, prior0, wk):
        """``∇U`` in ``(u, b)`` and in ``x`` (module docstring), or None outside the support.

        With ``σ = √λ``, ``ĝ = F_u(Sᵀ ∂log L/∂η)`` and ``ℓ′_k = ∂log σ_k/∂u``:
        ``∂U/∂x = σ^{2(w−1)} x − σ^w ĝ`` and, per covariance parameter,
        ``∂U/∂u = Σ_k c_k ℓ′_k [(w_k − 1)(σ_k^{2(w_k−1)}|x_k|² − 1) − w_k Re(ĝ_k* σ_k^{w_k} x_k)]``
        (``c_k`` the half-spectrum weights; ``ℓ′ = 1`` for ``log sd``).
        """
        if self.field == "white" and self._table is not None and self._forms is not None:
            # the compiled path of the default configuration
            res = self._gradient_chord(u, b, x, theta0, prior0)
            if res is not False:
                return res
        model = self.model
        if not self._in_support(u):
            return None
        theta = self._theta_of(u, theta0)
        try:
            sq, dsq, n_cov = self._sqrt_spectrum(u, theta, prior0)
        except (InvalidParameterError, ParameterOutOfBoundsError):
            return None  # a parameter no covariance can take (e.g. a range of 0): diverged
        s = model.beta_sd
        # FFTs pruned to the window: the field is needed at the observed sites only, and the
        # likelihood's derivative is zero off them
        ws = self._workspace(prior0, window=True)
        scale = 1.0 / math.sqrt(ws.size)            # the unitary transforms' 1/√M
        white = self.field == "white" or not np.any(wk != 1.0)
        if white:  # w = 1: f = F⁻¹(σ x), no powers needed
            sw = sq
            _color_pass(x, sq, sq, 0.0, 1.0, math.sqrt(ws.size), ws.bwd_in)
        else:
            sw = self._pow(sq, wk)                  # σ^w
            s2 = self._pow(sq, 2.0 * (wk - 1.0))    # σ^{2(w−1)}
            fx = sw * x
            one = np.ones_like(sq)
            _color_pass(fx, one, one, 0.0, 1.0, math.sqrt(ws.size), ws.bwd_in)
        f = ws.backward()
        lik = model.likelihood
        idx = model.state_index
        f_obs = f.reshape(-1)[idx]
        u, b = self._physical(u, b, f_obs)          # physical intercept and coefficients
        if not self._in_support(u):
            return None
        theta = self._theta_of(u, theta)
        beta = s * b
        eta_obs = (model.base_obs(theta) + f_obs
                   + (beta @ model.covariates_obs if model.n_beta else 0.0))
        g = lik.grad_obs(eta_obs)                  # ∂log L/∂η at the observed sites
        if not np.all(np.isfinite(g)) or not np.all(np.isfinite(f_obs)):
            return None
        # ∂log p/∂c of the fixed effects at their physical values (hyperpriors by central
        # differences; the block coefficients' N(0, s²) exactly)
        dlh_all = np.array([self._dlogprior(k, u) for k in range(len(self.names))])
        if self._proj is not None:
            grad_c = np.concatenate([dlh_all[self._obs_u], -beta / s ** 2])
            zg = np.concatenate([[g.sum() if self.names[k] == "mean"
                                  else g @ model.hyper_covariate(self.names[k])
                                  for k in self._obs_u], model.covariates_obs @ g])
            h_c = zg + grad_c                       # −∂U/∂c_eff
            g_field = g - self._proj.T @ h_c        # −∂U/∂f at the sites: (I − ZP)ᵀg − Pᵀ∇log p
        else:
            g_field = g
        # the workspace's forward input is zero off the observed sites, and only they are
        # ever written (the same sites every time)
        ws.fwd_in.reshape(-1)[idx] = g_field
        gk_raw = ws.forward()
        c = self._ops.weights(prior0)
        if white and len(dsq) <= 1:
            # one fused pass: ∂U/∂x = x − σĝ and the sums Σ c σ Re(ĝ* x), Σ c ∂σ Re(ĝ* x)
            k_cov = next(iter(dsq), -1)
            grad_x, s_sd, s_cov = _white_pass(x, gk_raw, scale, sq,
                                              dsq[k_cov] if k_cov >= 0 else sq, c,
                                              not self._split)
            sums = {k_cov: -s_cov} if k_cov >= 0 else {}
            sum_sd = -s_sd
            return self._grad_hyper(u, b, g, beta, dlh_all, sum_sd, sums), grad_x, n_cov
        gk = gk_raw * scale
        if white:
            grad_x = -(sq * gk) if self._split else x - sq * gk
            re = c * (np.conj(gk) * x).real
            sum_sd = -float(np.sum(sq * re))
            sums = {k: -float(np.sum(d * re)) for k, d in dsq.items()}
        else:
            grad_x = s2 * x - sw * gk
            # the bracket of ∂U/∂u, shared by every covariance parameter
            common = c * ((wk - 1.0) * (s2 * (x.real ** 2 + x.imag ** 2) - 1.0)
                          - wk * (np.conj(gk) * fx).real)
            pos = sq > 0
            sum_sd = float(np.sum(common[pos]))
            sums = {k: float(np.sum(common * np.where(pos, d / np.where(pos, sq, 1.0), 0.0)))
                    for k, d in dsq.items()}
        return self._grad_hyper(u, b, g, beta, dlh_all, sum_sd, sums), grad_x, n_cov

    def _grad_hyper(self, u, b, g, beta, dlh_all, sum_sd, sums) -> np.ndarray:
        """``∇U`` in ``(u, b)`` from the likelihood's site gradient ``g`` and the spectral sums."""
        model = self.model
        s = model.beta_sd
        grad_u = np.empty(len(self.names))
        for k, (n, h) in enumerate(zip(self.names, self._hp, strict=True)):
            dlh = dlh_all[k]
            if n == "mean":
                du = -float(g.sum())
            elif n in model.obs_params:  # beta_<name>: η += value · x
                du = -float(g @ model.hyper_covariate(n))
            elif n == "sd" and h.transform == "log":
                du = sum_sd                                   # ℓ′ = 1: σ ∝ sd
            else:
                du = sums[k]
            grad_u[k] = du - dlh
        grad_b = b - s * (model.covariates_obs @ g) if model.n_beta else np.zeros(0)
        return np.concatenate([grad_u, grad_b])

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

    def _workspace(self, prior0: CirculantPrior,
                   window: bool = False) -> SplitRealFFT | WindowRealFFT:
        """The calling thread's FFT workspace of ``prior0``'s torus (made on first use).

        FFTW plans and their buffers are not shared between threads (chains may run in
        threads, :meth:`step`); the forward input stays zero off the observed sites.
        ``window``: transforms pruned to the window (gradients), else full (the state's
        field).
        """
        cache = getattr(self._local, "ws", None)
        if cache is None:
            cache = self._local.ws = {}
        key = (self._ops.key(prior0), window)
        ws = cache.get(key)
        if ws is None:
            ws = cache[key] = self._ops.workspace(
                prior0, 1 if getattr(self._local, "in_pool", False) else None, window)
        return ws

    def _dlogprior(self, k: int, u: np.ndarray) -> float:
        """``∂log p_h/∂u_k`` (Jacobian in): analytic for the usual priors, else differences."""
        return self._hp[k].dlogpdf_unconstrained(u[k])

    # -- one chain -------------------------------------------------------------------------------
    def _field_params(self, c: int, ex: dict[str, np.ndarray], theta0: dict[str, float],
                      prior0: CirculantPrior) -> tuple[np.ndarray, np.ndarray]:
        """Per-frequency non-centring weight ``w_k`` and mass ``m_k`` of the field.

        The partially non-centred field ``x_k = f̂_k / σ_k^{w_k}`` (Papaspiliopoulos, Roberts
        & Sköld 2003) with their optimal weight for a Gaussian with data precision ``p̄``,
        ``w_k = 1 / (1 + p̄ λ_k(θ*))``: prior-dominated frequencies stay whitened (``w ≈ 1``),
        data-dominated ones become centred (``w ≈ 0``), so moving ``θ`` no longer drags
        them.  ``p̄`` (the site curvatures' torus mean, the ``surr-scalar`` approximation of
        DESIGN §4) and ``θ*`` are the chain's adaptation state; the mass is the conditional
        precision of ``x_k`` in that approximation, ``σ_k^{2(w_k−1)} / w_k`` (Neal 2011, §4.1).
        The zero frequency (the field's mean, confounded with the intercept along a ridge of
        prior width) stays whitened with unit mass.  Both are fixed after warm-up.
        """
        pbar = float(ex[PREFIX + "mass_p"][c])
        key = (pbar, tuple(ex[PREFIX + "mass_u"][c]), int(ex[PREFIX + "centred"][c]))
        cached = self._mass_cache.get(c)
        if cached is not None and cached[0] == key:
            return cached[1], cached[2]
        shape = self._ops.sigma(prior0).shape
        if pbar == 0.0 or self.field == "white":
            wk, m = np.ones(shape), np.ones(shape)
        else:
            th = self._theta_of(ex[PREFIX + "mass_u"][c], theta0)
            lam = self._ops.sigma(self.model.prior_for(th, prior0)) ** 2
            if ex[PREFIX + "centred"][c] and self.field == "pncp":
                wk = 1.0 / (1.0 + pbar * lam)
                wk[pbar * lam < 1e-8] = 1.0  # effectively whitened (incl. clipped bins)
                wk.flat[0] = 1.0
                m = self._pow(np.sqrt(lam), 2.0 * (wk - 1.0)) / wk
            else:
                # before the first slow window: whitened field, per-frequency mass only
                # (non-centring at an overdispersed start's θ* opened a funnel on bei: a chain
                # at sd 2.5 slid to the range bound)
                wk = np.ones(shape)
                m = 1.0 + pbar * lam
            m.flat[0] = 1.0
        self._mass_cache[c] = (key, wk, m)
        return wk, m

    def _set_field_mass(self, c: int, ex: dict[str, np.ndarray], theta: dict[str, float],
                        f: np.ndarray, beta: np.ndarray, state_size: int,
                        u: np.ndarray) -> None:
        """``p̄`` (mean site curvature over the torus) and ``θ*`` from one chain's field."""
        model = self.model
        lik = model.likelihood
        eta = np.zeros((1, *lik.shape))
        eta.reshape(-1)[lik.obs_index] = (
            model.base_obs(theta) + f.reshape(-1)[model.state_index]
            + (beta @ model.covariates_obs if model.n_beta else 0.0))
        d = -lik.hess_diag(eta).reshape(-1)[lik.obs_index]
        ex[PREFIX + "mass_p"][c] = max(float(np.sum(d)) / state_size, 0.0)
        ex[PREFIX + "mass_u"][c] = u
        ex[PREFIX + "centred"][c] = int(ex[PREFIX + "iter"][c] > 0)

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

    def _initial_step(self, c, ex, u0, b0, z0, rho_h, rho_z, grad0, inv_m, m_z, wk, theta0,
                      prior0, h0, kinetic) -> tuple[int, int]:
        """A first step size by Hoffman & Gelman (2014), Algorithm 4.

        Double or halve ε until one leapfrog step's acceptance probability crosses 1/2; the
        dual averaging then starts from it.
        """
        eps = math.exp(ex[PREFIX + "log_eps"][c])
        n_grad = n_cov = 0

        def log_a(e):
            nonlocal n_grad, n_cov
            u, b, z, rh, rz, k, nc, ok = self._leapfrog(u0, b0, z0, rho_h, rho_z, grad0, e, 1,
                                                        inv_m, m_z, wk, theta0, prior0)
            n_grad += k
            n_cov += nc + 1
            e1, new = self._energy(u, b, z, theta0, prior0, wk) if ok else (math.inf, None)
            return -math.inf if new is None else h0 - (e1 + kinetic(rh, rz))

        la = log_a(eps)
        direction = 1.0 if la > math.log(0.5) else -1.0
        for _ in range(40):
            if direction * la <= -direction * math.log(2.0):
                break
            eps *= 2.0 ** direction
            la = log_a(eps)
        le = math.log(eps)
        ex[PREFIX + "log_eps"][c] = le
        ex[PREFIX + "mu"][c] = math.log(10.0) + le
        return n_grad, n_cov

    def _leapfrog(self, u0, b0, z0, rho_h, rho_z, grad0, eps, n_steps, inv_m, m_z, wk, theta0,
                  prior0):
        """``n_steps`` leapfrog steps from ``(u0, b0, z0)`` with momenta ``(ρ_h, ρ_ζ)``.

        Neal (2011), eq. 5.18–5.20 with mass ``M``: half step of the momenta, full step
        ``x += ε M⁻¹ ρ`` of the position, half step of the momenta.  A position outside a
        hyperprior's support (or a non-finite gradient) ends the trajectory: ``ok=False``, and
        the transition rejects (the reversed trajectory meets the same point, so the rule is
        symmetric).

        Returns
        -------
        u, b, z, ρ_h, ρ_ζ, n_grad, n_cov, ok
        """
        if self._compiled and inv_m.ndim == 1:
            ctx = self._chord_context(prior0)
            if getattr(ctx[1], "plans", None) is not None:   # (a 1-D torus has none)
                return self._leapfrog_compiled(u0, b0, z0, rho_h, rho_z, grad0, eps, n_steps,
                                               inv_m, wk, theta0, prior0, ctx)
        nt = len(self.names)
        hb = np.concatenate([u0, b0])      # (u, b) in one vector: u and b are views of it
        u, b, z = hb[:nt], hb[nt:], z0.copy()
        rh, rz = rho_h.copy(), rho_z.copy()
        gh, gz, _ = grad0
        n_grad = n_cov = 0
        c, s = math.cos(eps), math.sin(eps)
        h = 0.5 * eps        # the first half kick; between steps the two half kicks are one
        kt = self._table_index
        if self._table is not None:
            limit, lowest, highest = self._span_limit(inv_m), float(u[kt]), float(u[kt])
        for _ in range(n_steps):
            if not math.isfinite(float(hb.sum())):
                return u, b, z, rh, rz, n_grad, n_cov, False
            rh -= h * gh
            hb += eps * _inv_mass_times(inv_m, rh)
            if self._table is not None:
                lowest, highest = min(lowest, float(u[kt])), max(highest, float(u[kt]))
                if highest - lowest > limit:
                    return u, b, z, rh, rz, n_grad, n_cov, False
            # the field: its kick, then its exact rotation (split) or drift (leapfrog)
            if self._split:
                _kick_rotate(z, rz, gz, h, c, s)
            else:
                _kick(rz, gz, h)
                (_drift_real if self._ops.real else _drift)(z, rz, eps, m_z)
            res = self._gradient(u, b, z, theta0, prior0, wk)
            n_grad += 1
            if res is None:
                return u, b, z, rh, rz, n_grad, n_cov, False
            gh, gz, nc = res
            n_cov += nc
            h = eps
        rh -= 0.5 * eps * gh
        _kick(rz, gz, 0.5 * eps)
        return u, b, z, rh, rz, n_grad, n_cov, True

    def _span_limit(self, inv_m: np.ndarray) -> float:
        """How far the log range may spread along one trajectory before it ends as divergent.

        ``max(SPAN_MIN, SPAN_SD · s)`` with ``s`` the log range's scale in the mass
        (``√M⁻¹``, the adapted posterior sd): 1 (a factor 2.7 in range, 14 posterior sds) on
        bei, where the posterior sd is 0.07; within it the table keeps its nodes
        (:attr:`_SpectrumTable.FAR` = 100 nodes = 1.0).  A trajectory that does spread so far
        is an early warm-up's, running away with too long a step (measured on bei at 20 m: to
        ``range = e^{-9}`` and beyond, 13–40 steps each, every step's spectra outside the
        table: ≈ 4 s of a 37 s run).  Exact: the rule depends only on the set of positions
        visited, which the reversed trajectory visits too, so a move and its reverse are
        rejected alike and detailed balance holds (as for the support's bounds; tested with
        the rule made active).  Only with the spectrum table
        (where far positions are costly); the limit is fixed once warm-up ends.
        """
        kt = self._table_index
        var = inv_m[kt] if inv_m.ndim == 1 else inv_m[kt, kt]
        return max(SPAN_MIN, SPAN_SD * math.sqrt(float(var)))

    def _leapfrog_compiled(self, u0, b0, z0, rho_h, rho_z, grad0, eps, n_steps, inv_m, wk,
                           theta0, prior0, ctx):
        """:meth:`_leapfrog` as one compiled call (:func:`_trajectory_chord`).

        The default configuration's: the same steps, the same numbers to round-off (tested).
        Python only steps in where the kernel cannot go on: to extend the spectrum table
        (the chord's nodes are not made yet) and, for a gradient whose chord crosses the
        range's bound or lies far from the trajectory's start
        (:meth:`_SpectrumTable.is_far`), to take that one gradient on the general path.
        """
        nt = len(self.names)
        hb = np.concatenate([u0, b0])
        z, rh, rz = z0.copy(), rho_h.copy(), rho_z.copy()
        gh = np.array(grad0[0], dtype=np.float64)
        gz = np.array(grad0[1])
        _, ws, c, root_m = ctx
        fft = (_fftw.EXECUTE_ADDRESS, ws.plans, ws.bwd_in, ws.bwd_out, ws.fwd_in, ws.fwd_out)
        k_sd, table, step = self._k_sd, self._table, _SpectrumTable.STEP
        sd_fixed = (1.0 if k_sd >= 0
                    else float(theta0.get("sd", prior0.params.get("sd", 1.0))))
        s, pending, n_grad, n_cov, ok = 0, False, 0, 0, False
        u_t = float(hb[self._table_index])
        span = np.array([self._span_limit(inv_m), u_t, u_t])
        while True:
            j0, nodes = table.block or (0, np.zeros((0, *z.shape)))
            tab = (nodes, j0, step, table.u_max, self._table_index, k_sd, sd_fixed, c, root_m,
                   _LOG_MAX, True)
            st, s, k = _trajectory_chord(hb, z, rh, rz, gh, gz, inv_m, eps, n_steps, s,
                                         pending, tab, fft, self._site, span)
            n_grad += k
            if st == _DONE or st == _DIVERGED:
                ok = st == _DONE
                break
            j = math.floor(float(hb[self._table_index]) / step)
            if st == _NEED_NODES and not table.is_far(j):
                try:
                    table.cover(j, j + 1, prior0, self._ops)
                except (InvalidParameterError, ParameterOutOfBoundsError):
                    n_grad += 1     # a range no covariance can take: diverged
                    break
                pending = True
                continue
            # _PAST_TABLE, or a chord far from the trajectory's start (it runs away,
            # :meth:`_SpectrumTable.is_far`): this step's gradient on the general path
            res = self._gradient(hb[:nt], hb[nt:], z, theta0, prior0, wk)
            n_grad += 1
            if res is None:
                break
            gh[:] = res[0]
            gz[...] = res[1]
            n_cov += res[2]
            s, pending = s + 1, False
        return hb[:nt], hb[nt:], z, rh, rz, n_grad, n_cov, ok

    def _adapt(self, c: int, ex: dict[str, np.ndarray], accept_prob: float,
               x: np.ndarray) -> bool:
        """Dual averaging of ε and the windowed variance of ``(u, b)`` (warm-up only).

        Returns whether a slow window ended (the caller then re-centres the field's mass).
        """
        it = int(ex[PREFIX + "iter"][c]) + 1
        ex[PREFIX + "iter"][c] = it
        if it > self.n_tune:
            return False
        ended = False
        # Hoffman & Gelman (2014), Algorithm 5, lines 9-11 (adaptation iterations m = 1, 2, …)
        m = int(ex[PREFIX + "da_m"][c]) + 1
        ex[PREFIX + "da_m"][c] = m
        hb = ((1.0 - 1.0 / (m + DA_T0)) * ex[PREFIX + "h_bar"][c]
              + (self.target_accept - accept_prob) / (m + DA_T0))
        ex[PREFIX + "h_bar"][c] = hb
        le = ex[PREFIX + "mu"][c] - math.sqrt(m) / DA_GAMMA * hb
        ex[PREFIX + "log_eps"][c] = le
        eta = m ** (-DA_KAPPA)
        ex[PREFIX + "log_eps_bar"][c] = eta * le + (1.0 - eta) * ex[PREFIX + "log_eps_bar"][c]
        # slow windows: Welford's running variance of (u, b) inside the window
        win = next((se for se in self.windows if se[0] < it <= se[1]), None)
        if win is not None:
            k = int(ex[PREFIX + "win_n"][c]) + 1
            ex[PREFIX + "win_n"][c] = k
            d = x - ex[PREFIX + "win_mean"][c]
            ex[PREFIX + "win_mean"][c] += d / k
            d2 = x - ex[PREFIX + "win_mean"][c]
            ex[PREFIX + "win_m2"][c] += d * d2 if self.metric == "diag" else np.outer(d, d2)
            if it == win[1]:
                ended = True
                var = ex[PREFIX + "win_m2"][c] / max(k - 1, 1)   # variances or covariance
                if self.metric == "dense":  # symmetric exactly (Welford's outer products
                    var = 0.5 * (var + var.T)  # are not, to round-off)
                # Stan's regularisation towards 1e-3 (n/(n+5) var + 1e-3 · 5/(n+5))
                reg = 1e-3 * (5.0 / (k + 5.0))
                ex[PREFIX + "inv_mass"][c] = (k / (k + 5.0)) * var + (
                    reg if self.metric == "diag" else reg * np.eye(self.n_h))
                ex[PREFIX + "win_n"][c] = 0
                ex[PREFIX + "win_mean"][c] = 0.0
                ex[PREFIX + "win_m2"][c] = 0.0
                # restart dual averaging at the current step size
                ex[PREFIX + "mu"][c] = math.log(10.0) + le
                ex[PREFIX + "da_m"][c] = 0
                ex[PREFIX + "h_bar"][c] = 0.0
                ex[PREFIX + "log_eps_bar"][c] = 0.0
        if it == self.n_tune:
            ex[PREFIX + "log_eps"][c] = ex[PREFIX + "log_eps_bar"][c]
        return ended

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


def _inv_mass_times(inv_m: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """``M⁻¹ ρ`` for a diagonal (1-D ``inv_m``) or dense (2-D) inverse mass."""
    return inv_m * rho if inv_m.ndim == 1 else inv_m @ rho


def _momentum(inv_m: np.ndarray, z: np.ndarray) -> np.ndarray:
    """``ρ ~ N(0, M)`` from standard normals ``z``.

    ``z / √(M⁻¹)`` for a diagonal mass; ``L⁻ᵀ z`` with ``M⁻¹ = L Lᵀ`` for a dense one (its
    covariance is ``L⁻ᵀ L⁻¹ = M``).
    """
    if inv_m.ndim == 1:
        return z / np.sqrt(inv_m)
    return scipy.linalg.solve_triangular(np.linalg.cholesky(inv_m).T, z, lower=False)


class _TorusOps:
    """The circulant prior's whitened field: the unitary half-spectrum ``ζ`` of white noise.

    ``f = F_u⁻¹(√λ ⊙ ζ)`` on the torus; bins weigh 1 or 2 in the full spectrum
    (:attr:`CirculantPrior.half_weights`); the FFTs run through per-thread workspaces, the
    gradient's pruned to the window (:class:`~lattice_lgm.priors._fft.WindowRealFFT`).
    """

    real = False

    @staticmethod
    def sigma(prior: CirculantPrior) -> np.ndarray:
        """``√λ`` over the half-spectrum (the field's standard deviation per bin)."""
        return np.sqrt(prior.eigenvalues)

    @staticmethod
    def weights(prior: CirculantPrior) -> np.ndarray:
        return prior.half_weights

    @staticmethod
    def draw(prior: CirculantPrior, rng: np.random.Generator) -> np.ndarray:
        return prior.draw_spectrum(rng)

    @staticmethod
    def colorize(prior: CirculantPrior, zeta: np.ndarray, ws: Any) -> np.ndarray:
        return prior.colorize_into(zeta, ws)

    @staticmethod
    def workspace(prior: CirculantPrior, threads: int | None, window: bool) -> Any:
        return prior.workspace(threads=threads, window=window)

    @staticmethod
    def key(prior: CirculantPrior) -> tuple[int, ...]:
        return tuple(prior.embedding_shape)


class _DCTWorkspace:
    """The orthonormal DCT-II of one padded lattice, with :class:`SplitRealFFT`'s interface.

    ``bwd_in`` → :meth:`backward` is the inverse transform ``Uᵀ`` (coefficients to field),
    ``fwd_in`` → :meth:`forward` the forward one ``U`` (field to coefficients); ``size = 1``
    because both are already orthonormal (the circulant workspace's unnormalised FFTs carry
    ``√M``).  scipy's pocketfft with one worker: thread-safe, no plans.
    """

    size = 1

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.bwd_in = np.zeros(shape)
        self.fwd_in = np.zeros(shape)

    def backward(self) -> np.ndarray:
        return scipy.fft.idctn(self.bwd_in, type=2, norm="ortho", workers=1)

    def forward(self) -> np.ndarray:
        return scipy.fft.dctn(self.fwd_in, type=2, norm="ortho", workers=1)


class _DCTOps:
    """A Matérn-SPDE GMRF's whitened field (spectral engine, Neumann boundaries).

    ``Q = Uᵀ diag(q) U`` with ``U`` the orthonormal DCT-II of the padded lattice
    (:class:`~lattice_lgm.priors.GMRFPrior`), so the state's white vector ``ζ = q^½ ⊙ U f`` is
    real, one coefficient per cell, each of weight 1, and ``f = Uᵀ(σ ⊙ ζ)`` with
    ``σ = q^{-½}`` proportional to ``sd``: the same algebra as the torus with a real
    orthonormal transform in place of the unitary FFT (the gradient in ``ζ`` is
    ``ζ − σ ⊙ U Sᵀg``).  The transforms are not pruned (the padding is about one range).
    """

    real = True

    @staticmethod
    def sigma(prior: GMRFPrior) -> np.ndarray:
        return prior.coefficient_sd

    @staticmethod
    def weights(prior: GMRFPrior) -> np.ndarray:
        return np.ones(prior.white_shape)

    @staticmethod
    def draw(prior: GMRFPrior, rng: np.random.Generator) -> np.ndarray:
        return rng.standard_normal(prior.white_shape)

    @staticmethod
    def colorize(prior: GMRFPrior, zeta: np.ndarray, ws: _DCTWorkspace) -> np.ndarray:
        np.multiply(zeta, prior.coefficient_sd, out=ws.bwd_in)
        return ws.backward()

    @staticmethod
    def workspace(prior: GMRFPrior, threads: int | None, window: bool) -> _DCTWorkspace:
        return _DCTWorkspace(prior.white_shape)

    @staticmethod
    def key(prior: GMRFPrior) -> tuple[int, ...]:
        return tuple(prior.white_shape)


def _field_ops(prior: Any) -> type[_TorusOps] | type[_DCTOps]:
    """The whitened field's operations for ``prior``, or an error naming what to use instead."""
    # the backend says which transform diagonalises its whitened field (Capabilities)
    ops = _FIELD_OPS.get(prior.capabilities.white_transform)
    if ops is not None:
        return ops
    what = type(prior).__name__
    if prior.capabilities.backend == "gmrf":
        what = f"GMRFPrior.{prior.model} with solver={prior.solver!r}" + (
            f", boundary={prior.boundary!r}" if prior.boundary is not None else "")
    raise InvalidParameterError(
        f"JointHMC needs a prior whose whitened field has a fast orthonormal transform: a "
        f"CirculantPrior (FFT) or GMRFPrior.matern with solver='spectral' and "
        f"boundary='neumann' (DCT); the model's prior is {what}. Use one of those (LGCP's "
        "backends 'circulant' and 'gmrf' are), or the Murray–Adams moves "
        "(default_sweep(model, 'prior-white')) or the interweaving sweep ('asis') on this "
        "one.")


#: the whitened field's operations per ``Capabilities.white_transform``
_FIELD_OPS: dict[str | None, type[_TorusOps] | type[_DCTOps]] = {"fft": _TorusOps,
                                                                  "dct": _DCTOps}


class _SpectrumTable:
    """``√λ₁`` (unit sd) of a circulant prior on a fixed grid of ``u = log range``, lazily.

    Nodes sit at ``u_j = j · STEP`` (the same grid whatever the chains, so the values do not
    depend on which chain asked first); between nodes ``√λ₁`` is linear in ``u``, and its
    derivative is the chord's slope.  Returns None when the interval crosses the range's upper
    bound (the caller then uses exact spectra).

    The nodes kept are one contiguous block, ``nodes[i]`` at ``j = j0 + i`` (what the
    compiled trajectory, :func:`_trajectory_chord`, reads); a node outside it extends the
    block (:meth:`cover`), unless it lies more than ``FAR`` nodes from the trajectory's start
    (:meth:`is_far`: made for the call, not kept).  Chains in threads share the table: it is
    extended under a lock, and a block once handed out is never written again.
    """

    STEP = 0.01
    MARGIN = 8
    FAR = 100

    def __init__(self, u_max: float) -> None:
        self.u_max = u_max
        #: ``(j0, nodes)``, nodes ``(n_nodes, *half_shape)``; one attribute, replaced whole
        self.block: tuple[int, np.ndarray] | None = None
        self._lock = threading.Lock()
        self._local = threading.local()          # each thread's anchor (:meth:`anchor`)

    def _make(self, j: int, prior: Any, ops: Any) -> np.ndarray:
        return ops.sigma(prior.with_params(sd=1.0, range=math.exp(j * self.STEP)))

    def cover(self, j_lo: int, j_hi: int, prior: Any, ops: Any) -> tuple[int, np.ndarray]:
        """``(j0, nodes)`` with nodes ``j_lo … j_hi`` in the block (made where missing).

        A block that must grow grows on that side by its own length (between ``MARGIN`` and
        ``FAR`` nodes, up to the range's bound), so a chain wandering over the table asks
        rarely and the block is copied a few times; nodes are made only for the new part.
        Raises what the prior raises for a needed node it cannot make (a range of 0); a node
        of the margin it cannot make ends the margin there.
        """
        with self._lock:
            old = self.block
            if old is not None:
                j0, nodes = old
                top = j0 + len(nodes) - 1
                if j0 <= j_lo and j_hi <= top:
                    return old
            j_max = math.floor(self.u_max / self.STEP)       # the last node inside the bound
            while j_max * self.STEP > self.u_max:
                j_max -= 1
            if old is None:
                lo, hi = j_lo - self.MARGIN, min(j_hi + self.MARGIN, j_max)
                have = range(0)
            else:
                grow = max(self.MARGIN, min(len(nodes), self.FAR))
                lo = j_lo - grow if j_lo < j0 else j0
                hi = min(j_hi + grow, j_max) if j_hi > top else top
                have = range(j0, top + 1)
            # the core (the request and any gap to the block) must be made: errors propagate
            c_lo = min(j_lo, have.start) if have else j_lo
            c_hi = max(j_hi, have.stop - 1) if have else j_hi
            new = {j: self._make(j, prior, ops) for j in range(c_lo, c_hi + 1) if j not in have}
            # the margin, outwards, up to a node the prior cannot make
            for step, start, end in ((-1, c_lo - 1, lo), (1, c_hi + 1, hi)):
                j = start
                while (j >= end) if step < 0 else (j <= end):
                    try:
                        new[j] = self._make(j, prior, ops)
                    except (InvalidParameterError, ParameterOutOfBoundsError):
                        break
                    j += step
            lo = min([*new, *have[:1]])
            hi = max([*new, *have[-1:]])
            block = np.empty((hi - lo + 1, *next(iter(new.values())).shape))
            for j in range(lo, hi + 1):
                block[j - lo] = new[j] if j in new else nodes[j - j0]
            self.block = (lo, block)
            return lo, block

    def chord(self, u: float, prior: Any,
              ops: Any) -> tuple[np.ndarray, np.ndarray, float] | None:
        """The nodes ``(√λ₁(u_j), √λ₁(u_{j+1}))`` around ``u`` and ``t = u/STEP − j``.

        None when the interval crosses the range's upper bound.
        """
        j = math.floor(u / self.STEP)
        if (j + 1) * self.STEP > self.u_max:
            return None
        blk = self.block
        if blk is None or not blk[0] <= j < blk[0] + len(blk[1]) - 1:
            if self.is_far(j):
                return self._make(j, prior, ops), self._make(j + 1, prior, ops), u / self.STEP - j
            blk = self.cover(j, j + 1, prior, ops)
        j0, nodes = blk
        return nodes[j - j0], nodes[j + 1 - j0], u / self.STEP - j

    def anchor(self, u: float) -> None:
        """Anchor the calling thread's trajectory at ``u`` (its starting point).

        Nodes are kept only within ``FAR`` nodes of the anchor (:meth:`is_far`).
        """
        self._local.j = math.floor(u / self.STEP) if math.isfinite(u) else None

    def is_far(self, j: int) -> bool:
        """Whether node ``j`` lies more than ``FAR`` nodes from the thread's anchor.

        Such a chord's two nodes are made for the call and not kept: a trajectory that runs
        away would otherwise extend the block to thousands of nodes (one running off to
        ``range = e^{-600}`` made a 63 000-node block, 19 s of one bei run, before this
        rule).  Without an anchor nothing is far.
        """
        a = getattr(self._local, "j", None)
        return a is not None and abs(j - a) > self.FAR

    def __getstate__(self) -> dict[str, Any]:
        # the lock and the anchors are process-local; the nodes are remade on use
        return {"u_max": self.u_max}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["u_max"])

    def at(self, u: float, prior: Any, ops: Any,
           scale: float = 1.0) -> tuple[np.ndarray, np.ndarray] | None:
        """``scale · √λ₁(u)`` and ``scale · ∂√λ₁/∂u`` (one fused pass), or None past the bound."""
        ch = self.chord(u, prior, ops)
        if ch is None:
            return None
        a0, a1, t = ch
        return _interpolate(a0, a1, t, 1.0 / self.STEP, scale)


@numba.njit(cache=True, nogil=True)
def _interpolate(a0, a1, t, inv_step, scale):  # pragma: no cover - compiled
    """``(scale (a0 + t (a1 − a0)), scale (a1 − a0) / step)``: the table's chord and slope."""
    a = np.empty_like(a0)
    da = np.empty_like(a0)
    af, df, f0, f1 = a.ravel(), da.ravel(), a0.ravel(), a1.ravel()
    for i in range(af.size):
        d = f1[i] - f0[i]
        af[i] = scale * (f0[i] + t * d)
        df[i] = scale * (d * inv_step)
    return a, da


@numba.njit(cache=True, nogil=True)
def _white_pass(x, gk_raw, scale, sq, dsq, c, prior_term):  # pragma: no cover - compiled
    """``(x − σĝ, Σ c σ Re(ĝ* x), Σ c ∂σ Re(ĝ* x))`` over the half-spectrum, in index order.

    ``ĝ = scale · gk_raw`` (the unnormalised forward FFT times ``1/√M``); without
    ``prior_term`` the first is ``−σĝ`` (the split integrator's kick, the prior's ``x`` being
    integrated exactly).
    """
    xf, gr, sf, df, cf = x.ravel(), gk_raw.ravel(), sq.ravel(), dsq.ravel(), c.ravel()
    out = np.empty_like(xf)
    s1 = 0.0
    s2 = 0.0
    for i in range(xf.size):
        g = gr[i] * scale
        re = g.real * xf[i].real + g.imag * xf[i].imag
        out[i] = xf[i] - sf[i] * g if prior_term else -(sf[i] * g)
        s1 += cf[i] * sf[i] * re
        s2 += cf[i] * df[i] * re
    return out.reshape(x.shape), s1, s2


@numba.njit(cache=True, nogil=True)
def _color_pass(x, a0, a1, t, scale, root_m, out):  # pragma: no cover - compiled
    """``out = x · (σ / √M)``: the c2r's input for ``f = F_u⁻¹(σ x)`` (the 1/√M of F_u⁻¹).

    ``σ = scale (a0 + t (a1 − a0))``: the table's chord, formed bin by bin exactly as
    :func:`_interpolate` forms it and never stored; ``a1 = a0``, ``t = 0``, ``scale = 1``
    give ``σ = a0`` exactly.
    """
    xf, f0, f1, of = x.ravel(), a0.ravel(), a1.ravel(), out.ravel()
    for i in range(xf.size):
        s = scale * (f0[i] + t * (f1[i] - f0[i]))
        of[i] = xf[i] * (s / root_m)


@numba.njit(cache=True, nogil=True)
def _white_chord(x, gk_raw, fscale, a0, a1, t, inv_step, scale, c, prior_term,
                 out):  # pragma: no cover - compiled
    """:func:`_white_pass` with ``σ`` and ``∂σ/∂u`` from the table's chord (never stored).

    The field's gradient goes into ``out`` (shaped like ``x``), the two sums are returned.

    In real arithmetic on the arrays' float views (complex ones interleave their parts; a
    real field, the GMRF's DCT coefficients, has none), with the sums split over even and
    odd bins: the two dependency chains of one running sum were half this loop's time.
    """
    f0, f1, cf = a0.ravel(), a1.ravel(), c.ravel()
    xv, gv, ov = _floats(x), _floats(gk_raw), _floats(out)
    n = f0.size
    k = xv.size // n                         # 2: complex bins, 1: real ones
    s1e = s1o = s2e = s2o = 0.0
    for i in range(n):
        d = f1[i] - f0[i]
        sf = scale * (f0[i] + t * d)
        df = scale * (d * inv_step)
        if k == 2:
            gre = gv[2 * i] * fscale
            gim = gv[2 * i + 1] * fscale
            xre = xv[2 * i]
            xim = xv[2 * i + 1]
            re = gre * xre + gim * xim
            ov[2 * i] = xre - sf * gre if prior_term else -(sf * gre)
            ov[2 * i + 1] = xim - sf * gim if prior_term else -(sf * gim)
        else:
            gre = gv[i] * fscale
            re = gre * xv[i]
            ov[i] = xv[i] - sf * gre if prior_term else -(sf * gre)
        if i & 1:
            s1o += cf[i] * sf * re
            s2o += cf[i] * df * re
        else:
            s1e += cf[i] * sf * re
            s2e += cf[i] * df * re
    return s1e + s1o, s2e + s2o


@numba.njit(cache=True, nogil=True, inline="always")
def _floats(a):  # pragma: no cover - compiled
    """A contiguous array's elements as float64s (a complex one's parts interleaved)."""
    return a.ravel().view(np.float64)


@numba.njit(cache=True, nogil=True)
def _chord_sites(f, idx, proj, zt, base, u, b, obs_u, beta_sd, forms, lo, hi, kind, y, aux,
                 out):  # pragma: no cover - compiled
    """Everything of ∇U between the two transforms, for :meth:`JointHMC._gradient_chord`.

    From the field ``f`` and the effective ``(u, b)``: the physical fixed effects ``c = c_eff
    − P f_obs`` (the shear; ``proj`` has no rows without it), ``η = base + Zc + f_obs``
    (``Zᵀ = zt``), the site gradient ``g``, ``Zᵀg``, and ``out[idx] = g − Pᵀ(Zᵀg + ∇_c log
    p)`` for the forward transform.  Returns ``(ok, ∇U)`` with ∇U complete except the
    spectral sums of ``sd`` and the range (their hyperpriors' terms are in); ``ok`` is False
    outside the support or at a non-finite gradient.  The hyperpriors' derivatives are
    ``a + b u + c e^{du}`` (:meth:`Hyperprior.derivative_form`, rows of ``forms``).
    """
    n = idx.size
    n_u = obs_u.size
    nb = b.size
    nh = u.size
    q = n_u + nb
    grad = np.zeros(nh + nb)
    ff = f.ravel()
    f_obs = np.empty(n)
    for i in range(n):
        f_obs[i] = ff[idx[i]]
    shift = np.zeros(q)
    _rows_dot(proj, f_obs, shift)
    up = u.copy()
    c_phys = np.empty(q)
    for j in range(n_u):
        k = obs_u[j]
        v = u[k] - shift[j]
        if not (lo[k] <= v <= hi[k]):
            return False, grad
        up[k] = v
        c_phys[j] = v
    bp = np.empty(nb)
    for j in range(nb):
        bp[j] = b[j] - shift[n_u + j] / beta_sd[j]
        c_phys[n_u + j] = beta_sd[j] * bp[j]
    dlh = np.empty(nh)
    for k in range(nh):
        v = forms[k, 0] + forms[k, 1] * up[k]
        if forms[k, 2] != 0.0:
            v += forms[k, 2] * math.exp(forms[k, 3] * up[k])
        dlh[k] = v
    grad_c = np.empty(q)
    for j in range(n_u):
        grad_c[j] = dlh[obs_u[j]]
    for j in range(nb):
        grad_c[n_u + j] = -c_phys[n_u + j] / beta_sd[j] ** 2
    g = np.empty(n)
    ok = True
    for i in range(n):
        e = base[i] + f_obs[i]
        for j in range(q):
            e += c_phys[j] * zt[j, i]
        gi = site_deriv(kind, 1, e, y[i], aux[i])
        if not (math.isfinite(gi) and math.isfinite(f_obs[i])):
            ok = False
        g[i] = gi
    zg = np.zeros(q)
    _rows_dot(zt, g, zg)
    of = out.ravel()
    for i in range(n):
        v = g[i]
        for j in range(proj.shape[0]):
            v -= proj[j, i] * (zg[j] + grad_c[j])
        of[idx[i]] = v
    for k in range(nh):
        grad[k] = -dlh[k]
    for j in range(n_u):
        grad[obs_u[j]] -= zg[j]
    for j in range(nb):
        grad[nh + j] = bp[j] - beta_sd[j] * zg[n_u + j]
    return ok and math.isfinite(grad.sum()), grad


@numba.njit(cache=True, nogil=True, inline="always")
def _rows_dot(a, x, out):  # pragma: no cover - compiled
    """``out[j] = Σ_i a[j, i] x[i]``, each sum in index order from 0.0 (as a plain loop).

    The first four rows in one pass with their sums in registers: a row at a time, each sum
    waits on the previous addition (four cycles), which made these products a third of the
    sites' pass on bei at 20 m; four independent sums fill that wait.
    """
    m, n = a.shape
    r4 = min(m, 4)
    s0 = s1 = s2 = s3 = 0.0
    for i in range(n):
        v = x[i]
        if r4 > 0:
            s0 += a[0, i] * v
        if r4 > 1:
            s1 += a[1, i] * v
        if r4 > 2:
            s2 += a[2, i] * v
        if r4 > 3:
            s3 += a[3, i] * v
    for j, sj in enumerate((s0, s1, s2, s3)):
        if j < r4:
            out[j] = sj
    for j in range(4, m):
        acc = 0.0
        for i in range(n):
            acc += a[j, i] * x[i]
        out[j] = acc


@numba.njit(cache=True, nogil=True)
def _kick(r, g, h):  # pragma: no cover - compiled
    """``r −= h g`` in place (a half step of the field's momenta)."""
    rf, gf = _floats(r), _floats(g)
    for i in range(rf.size):
        rf[i] = rf[i] - h * gf[i]


@numba.njit(cache=True, nogil=True)
def _kick_rotate(z, r, g, h, c, s):  # pragma: no cover - compiled
    """``r −= h g``, then ``(z, r) ← (z cos ε + r sin ε, r cos ε − z sin ε)``, in one pass.

    The rotation is the exact flow of ``½|z|² + ½|r|²`` for time ε (the split integrator).
    """
    zf, rf, gf = _floats(z), _floats(r), _floats(g)   # real and imaginary parts alike
    for i in range(zf.size):
        zi = zf[i]
        ri = rf[i] - h * gf[i]
        zf[i] = zi * c + ri * s
        rf[i] = ri * c - zi * s


@numba.njit(cache=True, nogil=True)
def _drift(z, r, eps, m):  # pragma: no cover - compiled
    """``z += ε r / m`` in place (a full step of the field's position)."""
    zf, rf, mf = z.ravel(), r.ravel(), m.ravel()
    for i in range(zf.size):
        # r / m part by part: numpy's complex ÷ real, without a complex division
        zf[i] = zf[i] + eps * complex(rf[i].real / mf[i], rf[i].imag / mf[i])


@numba.njit(cache=True, nogil=True)
def _drift_real(z, r, eps, m):  # pragma: no cover - compiled
    """``z += ε r / m`` in place for a real field (the DCT coefficients of a GMRF)."""
    zf, rf, mf = z.ravel(), r.ravel(), m.ravel()
    for i in range(zf.size):
        zf[i] = zf[i] + eps * (rf[i] / mf[i])


# -- the whole trajectory, compiled (the default configuration) ---------------------------------
#: statuses of :func:`_trajectory_chord`
_DONE, _DIVERGED, _NEED_NODES, _PAST_TABLE = 0, 1, 2, 3


@numba.njit(cache=True, nogil=True)
def _chord_gradient(hb, z, gh, gz, tab, fft, site):  # pragma: no cover - compiled
    """:meth:`JointHMC._gradient_chord` without Python: ``∇U`` at ``(hb, z)`` into ``gh, gz``.

    ``tab = (nodes, j0, step, u_max, k_tab, k_sd, sd_fixed, c, root_m, log_max, split)``,
    ``fft = (execute, plans, bwd_in, bwd_out, fwd_in, fwd_out)``, ``site`` the arguments of
    :func:`_chord_sites` after ``f``.  Returns a status: ``_DONE``; ``_DIVERGED`` (outside the
    support, a range no covariance takes, an sd that overflows, a non-finite gradient — the
    Python path's ``None``); ``_NEED_NODES`` (the table's block lacks the chord's nodes: the
    caller extends it and asks again); ``_PAST_TABLE`` (the chord crosses the range's bound:
    the caller takes this gradient on the general path).
    """
    nodes, j0, step, u_max, k_tab, k_sd, sd_fixed, c, root_m, log_max, split = tab
    execute, plans, bwd_in, bwd_out, fwd_in, fwd_out = fft
    idx, proj, zt, base, obs_u, beta_sd, forms, lo, hi, kind, y, aux = site
    nt = lo.size
    u = hb[:nt]
    b = hb[nt:]
    for k in range(nt):
        if not (lo[k] <= u[k] <= hi[k]):
            return _DIVERGED
    ut = u[k_tab]
    j = math.floor(ut / step)
    if (j + 1) * step > u_max:
        return _PAST_TABLE
    if j < j0 or j + 1 - j0 >= nodes.shape[0]:
        return _NEED_NODES
    t = ut / step - j
    a0 = nodes[j - j0]
    a1 = nodes[j + 1 - j0]
    if k_sd >= 0:
        if u[k_sd] > log_max:
            return _DIVERGED
        scale = math.exp(u[k_sd])
    else:
        scale = sd_fixed
    _color_pass(z, a0, a1, t, scale, root_m, bwd_in)
    _fftw.execute_at(execute, plans[2])
    _fftw.execute_at(execute, plans[3])
    ok, grad = _chord_sites(bwd_out, idx, proj, zt, base, u, b, obs_u, beta_sd, forms, lo, hi,
                            kind, y, aux, fwd_in)
    if not ok:
        return _DIVERGED
    _fftw.execute_at(execute, plans[0])
    _fftw.execute_at(execute, plans[1])
    s_sd, s_cov = _white_chord(z, fwd_out, 1.0 / root_m, a0, a1, t, 1.0 / step, scale, c,
                               not split, gz)
    if k_sd >= 0:
        grad[k_sd] -= s_sd
    grad[k_tab] -= s_cov
    gh[:] = grad
    return _DONE


@numba.njit(cache=True, nogil=True)
def _trajectory_chord(hb, z, rh, rz, gh, gz, inv_m, eps, n_steps, s, pending, tab, fft, site,
                      span):  # pragma: no cover - compiled
    """Steps ``s … n_steps − 1`` of :meth:`JointHMC._leapfrog`, in place.

    The split integrator with a diagonal mass and the gradient of :func:`_chord_gradient`;
    the final half kick after the last step.

    ``pending``: step ``s`` has moved the position but its gradient is still to take (a
    resumed call).  ``span = [limit, lowest, highest]``: the log range's extremes along the
    trajectory so far (updated); a trajectory whose log range spans more than ``limit`` ends
    as a divergence (:meth:`JointHMC._span_limit`).  Returns ``(status, s, n_grad)``: the
    status of :func:`_chord_gradient` (``_DONE`` at the end), the step it stopped in and the
    gradients taken.
    """
    k_tab = tab[4]
    c = math.cos(eps)
    sn = math.sin(eps)
    n_grad = 0
    while s < n_steps:
        if not pending:
            for k in range(hb.size):
                if not math.isfinite(hb[k]):
                    return _DIVERGED, s, n_grad
            h = 0.5 * eps if s == 0 else eps   # the first half kick; later two halves in one
            for k in range(hb.size):
                rh[k] = rh[k] - h * gh[k]
            for k in range(hb.size):
                hb[k] = hb[k] + eps * (inv_m[k] * rh[k])
            v = hb[k_tab]
            span[1] = min(span[1], v)
            span[2] = max(span[2], v)
            if span[2] - span[1] > span[0]:
                return _DIVERGED, s, n_grad
            _kick_rotate(z, rz, gz, h, c, sn)
        st = _chord_gradient(hb, z, gh, gz, tab, fft, site)
        if st == _NEED_NODES or st == _PAST_TABLE:
            return st, s, n_grad
        n_grad += 1
        if st != _DONE:
            return st, s, n_grad
        pending = False
        s += 1
    for k in range(hb.size):
        rh[k] = rh[k] - 0.5 * eps * gh[k]
    _kick(rz, gz, 0.5 * eps)
    return _DONE, s, n_grad
