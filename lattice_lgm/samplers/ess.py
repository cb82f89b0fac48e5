"""Elliptical slice sampling (Murray, Adams & MacKay 2010, Figure 2) for many chains at once.

Each step, per chain ``c`` (the paper's step numbers):

1. choose the ellipse: ``ν ~ N(0, K_θc)`` — drawn as a white vector from the chain's own stream
   and coloured by the chain's prior (one inverse FFT for circulant priors);
2. threshold ``log y = log L(f) + log u`` with the cached ``log L(f)`` (§2.2);
3. initial angle and bracket: ``t ~ U[0, 2π]``, ``[t − 2π, t]``; or, with ``bracket < 2π``, a
   randomly placed bracket of that width around 0 and ``t`` uniform in it (§2.4);
4–10. ``f' = f cos t + ν sin t``; accept on the slice, else shrink towards ``t = 0`` and redraw.

Steps 4–10 run in a Numba kernel with a ``prange`` over chains, reading only the observed sites
of the state; the accepted angle then rotates the whole state (field, white vector and in-block
coefficients) once.  The shrink uniforms are pre-drawn in blocks from each chain's stream, so the
result does not depend on the thread count or on the other chains (DESIGN §5).  A chain that
needs more than ``max_shrink`` likelihood evaluations raises :class:`SamplerError` with its state:
in exact arithmetic the bracket shrinks onto the current state, which is always on the slice, so
hitting the cap means a broken likelihood (e.g. non-deterministic) and is never hidden.

Many updates of chains that share a dense factor or a small torus run in one compiled call
(:meth:`EllipticalSlice.steps`; the blocks are in ``_ess_kernels``).

Neal's (1999) Metropolis–Hastings proposal (the paper's eq. 3), ``f' = √(1−ε²) f + ε ν``, is the
baseline :class:`NealMH`.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numba
import numpy as np

from .._validation import positive_float, positive_int
from ..errors import InvalidParameterError, SamplerError
from ..models.latent import LatentGaussianModel
from ..priors import _fftw
from ..priors._fft import CompiledBackward
from ..priors.base import FourierPrior, fourier
from ..threads import chain_thread_init
from . import _kernels
from ._ess_kernels import TWO_PI, _cos_sin, _dense_steps, _spectral_steps
from ._latent import base, flat, xbeta
from .state import LatentState, white_ops

__all__ = ["EllipticalSlice", "NealMH"]

#: most chains a compiled block of updates takes (:meth:`EllipticalSlice.steps`).  The chains'
#: Generators reach compiled code as a tuple, and Numba compiles a function per tuple length
#: with a branch per element at every ``gens[c]``: the dense block compiled in 4.9 s for 4
#: or 32 chains and in 151 s for 300 (a test of the hyperparameter moves ran 300; measured
#: with an empty cache).  Beyond a few dozen chains the Python of a step is shared by so
#: many chains that compiling the block gains nothing.
MAX_FUSED_CHAINS = 32


class _Aux:
    """Scratch buffers for the auxiliary draw, owned by one sampler (never part of a state).

    Steps on lattices of 10⁶ cells would otherwise allocate, and page-fault, hundreds of MB per
    step (measured at 1024² with 4 chains: a fresh 128 MB array costs 80–250 ms to touch, a
    reused one 15 ms to rotate).
    """

    def __init__(self) -> None:
        self._buffers: dict[tuple, np.ndarray] = {}

    def get(self, name: str, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        key = (name, tuple(shape), np.dtype(dtype).str)
        buf = self._buffers.get(key)
        if buf is None:
            buf = self._buffers[key] = np.empty(shape, dtype=dtype)
        return buf


def _draw_aux(model: LatentGaussianModel, state: LatentState,
              rngs: Sequence[np.random.Generator],
              scratch: _Aux) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per chain: a white vector, its field ``ν`` and coefficients ``β_ν`` (in that draw order).

    The white vectors are drawn in parallel threads, one chain per task from the chain's own
    stream (NumPy fills arrays without the GIL), so the numbers do not depend on the thread
    count.  Circulant priors colour in the same task with the thread's own single-threaded FFT
    plans (bitwise the same transform as the shared multi-threaded plan); other backends
    colour afterwards in the calling thread (their solvers are not shared across threads):
    chains sharing a dense prior in one compiled pass over its factor, others chain by chain.
    """
    ops = white_ops(model.prior)
    n = state.n_chains
    wshape = state.white.shape
    wn = scratch.get("white", wshape, state.white.dtype)
    nu = scratch.get("nu", state.f.shape, np.float64)

    parallel = _parallel_draw(n, wn[0].size)
    fused = parallel and ops.thread_safe_colorize

    def draw(c: int) -> None:
        ops.draw(state.priors[c], rngs[c], out=wn[c])
        if fused:
            ops.colorize(state.priors[c], wn[c:c + 1], out=nu[c:c + 1], own_thread=True)

    if parallel:
        list(_pool().map(draw, range(n)))
    else:
        for c in range(n):
            draw(c)
    if not fused:
        c = 0
        while c < n:
            # chains that share one prior object (the same θ) are coloured in one call where
            # the prior promises each row the bits it would get alone (dense: one pass over
            # the factor for all of them instead of one per chain)
            p, e = state.priors[c], c + 1
            if p.colorize_batch_exact:
                while e < n and state.priors[e] is p:
                    e += 1
            ops.colorize(p, wn[c:e], out=nu[c:e])
            c = e
    beta_nu = np.zeros_like(state.beta)
    if model.n_beta:
        for c, r in enumerate(rngs):
            beta_nu[c] = model.beta_sd * r.standard_normal(model.n_beta)
    return wn, nu, beta_nu


def _parallel_draw(n_chains: int, size: int) -> bool:
    """Whether :func:`_draw_aux` draws the chains' white vectors (``size`` each) in threads.

    Below 65536 numbers per chain a thread hand-over costs more than the draw.
    """
    return n_chains > 1 and size >= 65536 and numba.get_num_threads() > 1


_POOLS: dict[int, ThreadPoolExecutor] = {}


def _pool() -> ThreadPoolExecutor:
    """A thread pool as wide as Numba's thread count (one knob: ``numba.set_num_threads``)."""
    n = numba.get_num_threads()
    pool = _POOLS.get(n)
    if pool is None:
        pool = _POOLS[n] = ThreadPoolExecutor(max_workers=n,
                                              thread_name_prefix="lattice_lgm-noise",
                                              initializer=chain_thread_init)
    return pool


def _rotate(kern: _kernels.SiteKernels, x: np.ndarray, nu: np.ndarray, ct: np.ndarray,
            st: np.ndarray, in_place: bool) -> np.ndarray:
    n = len(x)
    ok = in_place and x.flags.c_contiguous and x.flags.writeable
    out = x if ok else np.empty_like(x)
    kern.rotate(x.reshape(n, -1), nu.reshape(n, -1), ct, st, out.reshape(n, -1))
    return out


def _require_finite(state: LatentState, method: str) -> None:
    """Raise :class:`SamplerError` naming the first chain whose cached log L is not finite."""
    bad = ~np.isfinite(state.loglik)
    if bad.any():
        c = int(np.flatnonzero(bad)[0])
        raise SamplerError(
            f"chain {state.chains[c]} starts from log L = {state.loglik[c]!r}; {method} needs "
            "a state with finite likelihood.",
            {"chain": state.chains[c], "loglik": float(state.loglik[c])},
        )


def _new_state(kern, state: LatentState, wn, nu, beta_nu, ct, st, loglik,
               in_place: bool, n_beta: int) -> LatentState:
    return state._replace(
        f=_rotate(kern, state.f, nu, ct, st, in_place),
        white=_rotate(kern, state.white, wn, ct, st, in_place),
        beta=_rotate(kern, state.beta, beta_nu, ct, st, in_place) if n_beta else state.beta,
        loglik=loglik,
    )


class EllipticalSlice:
    """Elliptical slice sampling of the latent field (and in-block coefficients).

    Parameters
    ----------
    model : LatentGaussianModel
    bracket : float
        Width of the initial angle bracket, in ``(0, 2π]``; ``2π`` is Figure 2 exactly, smaller
        values are the randomly placed smaller bracket of §2.4.
    max_shrink : int
        Cap on likelihood evaluations per chain and step (an error, never a silent stay).
    block : int
        Shrink uniforms drawn per chain at a time (more are drawn as needed).

    Examples
    --------
    >>> ess = EllipticalSlice(model)                       # doctest: +SKIP
    >>> state, info = ess.step(state, rngs)                # doctest: +SKIP
    """

    name = "ess"

    def __init__(self, model: LatentGaussianModel, *, bracket: float = TWO_PI,
                 max_shrink: int = 200, block: int = 16) -> None:
        if not isinstance(model, LatentGaussianModel):
            raise InvalidParameterError(f"model={model!r} must be a LatentGaussianModel.")
        b = positive_float("bracket", bracket, "the initial angle bracket is in (0, 2π]")
        if b > TWO_PI * (1 + 1e-12):
            raise InvalidParameterError(f"bracket={bracket!r} exceeds 2π; use a width in (0, 2π].")
        positive_int("max_shrink", max_shrink, "a cap on evaluations per step, e.g. 200")
        positive_int("block", block, "uniforms drawn per chain at a time, e.g. 16")
        self.model = model
        self.bracket = min(b, TWO_PI)
        self.max_shrink = max_shrink
        self.block = block
        self._kern = _kernels.site_kernels(model.likelihood)
        self._scratch = _Aux()
        self._c2r_plans: dict[tuple, CompiledBackward] = {}

    def settings(self) -> dict[str, Any]:
        """Every setting that changes this update's draws, JSON-ready.

        ``block`` is included: it sets the order in which the shrink uniforms are drawn.
        """
        return {"move": self.name, "bracket": self.bracket, "max_shrink": self.max_shrink,
                "block": self.block}

    def step(self, state: LatentState, rngs: Sequence[np.random.Generator], *,
             in_place: bool = False) -> tuple[LatentState, dict[str, Any]]:
        """One elliptical slice update of every chain.

        Parameters
        ----------
        state : LatentState
        rngs : sequence of Generator, one per chain
        in_place : bool
            Let the step overwrite ``state``'s field, white and coefficient arrays (used by
            :class:`~lattice_lgm.samplers.Gibbs` for states it created itself within a sweep;
            the default never modifies its input).

        Returns
        -------
        state : LatentState
            New state (the input is not modified).
        info : dict
            ``angle`` (n_chains,) accepted angles; ``bracket`` (n_chains, 2) the final
            bracket (it always contains 0 and the accepted angle); ``n_loglik`` (n_chains,)
            likelihood evaluations; ``n_cov`` zeros (no covariance is built).
        """
        state.check_rngs(rngs)
        _require_finite(state, "elliptical slice sampling")
        model, kern, n = self.model, self._kern, state.n_chains
        lik = model.likelihood
        # step 1: the ellipse, per chain, from the chain's own stream
        wn, nu, beta_nu = _draw_aux(model, state, rngs, self._scratch)
        # steps 2-3: threshold and initial bracket (fixed order of draws per chain)
        log_y = np.empty(n)
        lo, hi, t = np.empty(n), np.empty(n), np.empty(n)
        for c, r in enumerate(rngs):
            log_y[c] = state.loglik[c] - lik.constant + math.log(r.random())
            lo[c], hi[c], t[c] = self._initial_bracket(r)
        f2, nu2 = flat(state.f), flat(nu)
        xa, xb = xbeta(model, state.beta), xbeta(model, beta_nu)
        bs = base(model, [state.theta_of(c) for c in range(n)],
                  out=self._scratch.get("base", (n, lik.n_obs), np.float64))
        status = np.full(n, _kernels.ESS_EVALUATE, dtype=np.int64)
        n_evals = np.zeros(n, dtype=np.int64)
        out_ll = np.empty(n)
        while True:
            # shrink uniforms, a block at a time, only for chains still shrinking (DESIGN §5)
            uniforms = np.stack([r.random(self.block) if status[c] != _kernels.ESS_DONE
                                 else np.zeros(self.block) for c, r in enumerate(rngs)])
            kern.ess(f2, nu2, model.state_index, xa, xb, bs, lik.y_obs, lik.aux_obs, log_y,
                     lo, hi, t, uniforms, n_evals, out_ll, status, self.max_shrink)
            self._check(state, status, n_evals, lo, hi, t, log_y)
            if (status == _kernels.ESS_DONE).all():
                break
        ct, st = np.empty(n), np.empty(n)
        _cos_sin(t, ct, st)  # the same libm calls as the fused steps (steps())
        new = _new_state(kern, state, wn, nu, beta_nu, ct, st,
                         out_ll + lik.constant, in_place, model.n_beta)
        return new, {"angle": t, "bracket": np.stack([lo, hi], axis=1), "n_loglik": n_evals,
                     "n_cov": np.zeros(n, dtype=np.int64)}

    def steps(self, state: LatentState, rngs: Sequence[np.random.Generator], n_steps: int,
              *, in_place: bool = False, trace: np.ndarray | None = None
              ) -> tuple[LatentState, dict[str, Any]]:
        """``n_steps`` updates of every chain: the same draws as ``n_steps`` calls of :meth:`step`.

        Chains without in-block coefficients that share one dense prior (one θ), or whose
        circulant priors share one small torus (any θ), run all the updates in one compiled
        call, Python touched once per block (issue 26: the Python between compiled calls
        was most of a step on small problems; see :meth:`_fused`); anything else calls
        :meth:`step` in turn.

        Parameters
        ----------
        state : LatentState
        rngs : sequence of Generator, one per chain
        n_steps : int
            Updates (>= 1).
        in_place : bool
            As :meth:`step`.
        trace : ndarray, shape (n_steps, n_chains), optional
            Filled with every chain's log-likelihood after each update.

        Returns
        -------
        state : LatentState
        info : dict
            ``n_loglik`` (n_chains,) evaluations over the block, ``n_cov`` zeros, ``angle``
            of the last update.
        """
        positive_int("n_steps", n_steps, "updates per call, e.g. 10")
        if trace is not None and trace.shape != (n_steps, state.n_chains):
            raise InvalidParameterError(
                f"trace has shape {trace.shape}; give (n_steps, n_chains) = "
                f"{(n_steps, state.n_chains)}.")
        fused = self._fused(state)
        if fused is None:
            total = np.zeros(state.n_chains, dtype=np.int64)
            info: dict[str, Any] = {}
            for k in range(n_steps):
                state, info = self.step(state, rngs, in_place=in_place or k > 0)
                total += info["n_loglik"]
                if trace is not None:
                    trace[k] = state.loglik
            return state, {**info, "n_loglik": total}
        state.check_rngs(rngs)
        _require_finite(state, "elliptical slice sampling")
        model, lik, n = self.model, self.model.likelihood, state.n_chains
        f = state.f if in_place and state.f.flags.c_contiguous else state.f.copy()
        white = (state.white if in_place and state.white.flags.c_contiguous
                 else state.white.copy())
        loglik = np.array(state.loglik, dtype=np.float64)
        bs = base(model, [state.theta_of(c) for c in range(n)])
        n_evals = np.zeros(n, dtype=np.int64)
        last_t = np.zeros(n)
        err = np.zeros(3, dtype=np.int64)
        out = trace if trace is not None else np.empty((n_steps, n))
        common = (loglik, model.state_index, bs, lik.y_obs, lik.aux_obs, lik.constant,
                  self.bracket, self.block, self.max_shrink, out, n_evals, last_t, err)
        if fused == "dense":
            _dense_steps(self._kern.kind, tuple(rngs), n_steps, state.priors[0]._chol_c,
                         flat(f), flat(white), *common)
        else:
            p0 = state.priors[0]
            c2r = self._c2r(p0, n)
            wn = self._scratch.get("white-block", (n, state.white[0].size), np.complex128)
            mults = np.stack([p._get("color_mult").reshape(-1) for p in state.priors])
            _spectral_steps(self._kern.kind, tuple(rngs), n_steps, mults,
                            p0._plans.plane_reversal(),
                            np.array(p0._plans.hermitian_planes(), dtype=np.int64),
                            p0.half_shape[-1], c2r.bwd_in, c2r.bwd_out, c2r.plans,
                            _fftw.EXECUTE_ADDRESS, wn, wn.view(np.float64), flat(f),
                            flat(white), *common)
        if err[0]:
            c = int(err[1])
            what = ("the log-likelihood is NaN" if err[0] == 1 else
                    f"elliptical slice sampling hit the shrink cap ({self.max_shrink} "
                    "evaluations)")
            raise SamplerError(
                f"chain {state.chains[c]}, update {int(err[2])} of the block: {what}; check "
                "the data and the likelihood (the current state should always be on the "
                "slice).", {"chain": state.chains[c], "update": int(err[2])})
        new = state._replace(f=f, white=white, loglik=loglik)
        return new, {"angle": last_t, "n_loglik": n_evals,
                     "n_cov": np.zeros(n, dtype=np.int64)}

    def _fused(self, state: LatentState) -> str | None:
        """Which compiled block :meth:`steps` can run: ``"dense"``, ``"spectral"`` or None.

        ``"dense"``: every chain holds the same dense prior object (one θ).  ``"spectral"``:
        circulant priors on one torus (any θ per chain: the colour multipliers are per
        chain, the transform is shared), planned with FFTW_ESTIMATE (the plan the compiled
        block makes is then pyfftw's, bit for bit), with FFTW's library loadable for
        compiled plans, and a torus small enough that :func:`_draw_aux` would draw the
        chains' normals in one thread anyway (the block draws them in one thread, then
        colours the chains in parallel threads, one single-threaded transform each; on
        larger tori the per-step path draws in parallel too, and the transforms dominate
        the Python between them).  Both need float64 fields, no in-block coefficients and
        at most :data:`MAX_FUSED_CHAINS` chains.
        """
        p0 = state.priors[0]
        if (self.model.n_beta != 0 or state.f.dtype != np.float64
                or not state.f[0].flags.c_contiguous or state.n_chains > MAX_FUSED_CHAINS):
            return None
        caps = p0.capabilities
        if caps.dense_factor:
            ok = (all(p is p0 for p in state.priors) and state.white.dtype == np.float64
                  and state.f[0].size == state.white[0].size == p0.chol.shape[0])
            return "dense" if ok else None
        if caps.fourier:
            t0 = fourier(p0)
            ok = (_fftw.LIB is not None and state.white.dtype == np.complex128
                  and t0.planner_effort == "FFTW_ESTIMATE"
                  and not _parallel_draw(state.n_chains, int(np.prod(t0.half_shape)))
                  and all(p.capabilities.fourier
                          and fourier(p).embedding_shape == t0.embedding_shape
                          and fourier(p).planner_effort == "FFTW_ESTIMATE"
                          for p in state.priors)
                  and tuple(state.f.shape[1:]) == tuple(t0.embedding_shape)
                  and tuple(state.white.shape[1:]) == tuple(t0.half_shape))
            return "spectral" if ok else None
        return None

    def _c2r(self, prior: FourierPrior, n_chains: int) -> CompiledBackward:
        """The calling thread's compiled c2r transforms of ``prior``'s torus, one per chain.

        Made once per thread and chain count (a sampler may be stepped from several threads,
        each with its own chains).
        """
        key = (threading.get_ident(), tuple(prior.embedding_shape), n_chains)
        c2r = self._c2r_plans.get(key)
        if c2r is None:  # setdefault is atomic: one per thread even under a race
            c2r = self._c2r_plans.setdefault(key, CompiledBackward(
                prior.embedding_shape, planner_effort="FFTW_ESTIMATE", copies=n_chains))
        return c2r

    def _initial_bracket(self, r: np.random.Generator) -> tuple[float, float, float]:
        """Step 3: the initial angle and bracket.

        ``t ~ U[0, 2π]`` and ``[t − 2π, t]`` (Figure 2); or a randomly placed bracket of width
        ``w < 2π`` containing 0, with ``t`` uniform in it (§2.4).
        """
        if self.bracket >= TWO_PI:
            t = r.random() * TWO_PI
            return t - TWO_PI, t, t
        lo = -self.bracket * r.random()
        hi = lo + self.bracket
        return lo, hi, lo + r.random() * (hi - lo)

    def _check(self, state, status, n_evals, lo, hi, t, log_y) -> None:
        for c in range(len(status)):
            if status[c] == _kernels.ESS_NAN:
                raise SamplerError(
                    f"chain {state.chains[c]}: the log-likelihood is NaN at angle {t[c]!r}; "
                    "check the data and the likelihood.",
                    {"chain": state.chains[c], "angle": float(t[c])},
                )
            if status[c] == _kernels.ESS_NEED_UNIFORMS and n_evals[c] >= self.max_shrink:
                raise SamplerError(
                    f"chain {state.chains[c]}: elliptical slice sampling hit the shrink cap "
                    f"({self.max_shrink} evaluations) with bracket [{lo[c]!r}, {hi[c]!r}] around "
                    f"the current state (log L = {state.loglik[c]!r}, threshold "
                    f"{log_y[c] + self.model.likelihood.constant!r}); the current state should "
                    "always be on the slice, so the likelihood is not reproducible at it.",
                    {"chain": state.chains[c], "bracket": (float(lo[c]), float(hi[c])),
                     "loglik": float(state.loglik[c]), "n_evals": int(n_evals[c])},
                )


class NealMH:
    """Neal's (1999) M–H update ``f' = √(1−ε²) f + ε ν`` (Murray et al. 2010, eq. 3).

    Parameters
    ----------
    model : LatentGaussianModel
    step_size : float
        ``ε`` in ``(0, 1]``; ``ε = 1`` proposes independent prior draws.
    """

    name = "neal_mh"

    def __init__(self, model: LatentGaussianModel, step_size: float) -> None:
        if not isinstance(model, LatentGaussianModel):
            raise InvalidParameterError(f"model={model!r} must be a LatentGaussianModel.")
        eps = positive_float("step_size", step_size, "ε is in (0, 1]")
        if eps > 1.0:
            raise InvalidParameterError(f"step_size={step_size!r} must be in (0, 1].")
        self.model = model
        self.step_size = eps
        self._kern = _kernels.site_kernels(model.likelihood)
        self._scratch = _Aux()

    def settings(self) -> dict[str, Any]:
        """Every setting that changes this update's draws, JSON-ready."""
        return {"move": self.name, "step_size": self.step_size}

    def step(self, state: LatentState, rngs: Sequence[np.random.Generator], *,
             in_place: bool = False) -> tuple[LatentState, dict[str, Any]]:
        """One M–H update of every chain (``in_place`` as :meth:`EllipticalSlice.step`).

        Returns
        -------
        state : LatentState
        info : dict
            ``accepted`` (n_chains,) bool, ``acceptance_rate`` (n_chains,) the M–H ratio capped
            at 1, ``n_loglik`` ones, ``n_cov`` zeros.
        """
        state.check_rngs(rngs)
        model, kern, n = self.model, self._kern, state.n_chains
        lik = model.likelihood
        wn, nu, beta_nu = _draw_aux(model, state, rngs, self._scratch)
        log_u = np.array([math.log(r.random()) for r in rngs])
        eps = self.step_size
        ct = np.full(n, math.sqrt(1.0 - eps * eps))
        st = np.full(n, eps)
        xa, xb = xbeta(model, state.beta), xbeta(model, beta_nu)
        bs = base(model, [state.theta_of(c) for c in range(n)])
        prop = np.empty(n)
        kern.rotated_loglik(flat(state.f), flat(nu), model.state_index, xa, xb, bs, ct, st,
                            lik.y_obs, lik.aux_obs, prop)
        prop += lik.constant
        if np.isnan(prop).any():
            c = int(np.flatnonzero(np.isnan(prop))[0])
            raise SamplerError(f"chain {state.chains[c]}: log-likelihood NaN at the proposal.",
                               {"chain": state.chains[c]})
        log_ratio = prop - state.loglik
        acc = log_u < log_ratio
        # rejected chains rotate by (cos, sin) = (1, 0): bitwise the current state
        ct = np.where(acc, ct, 1.0)
        st = np.where(acc, st, 0.0)
        new = _new_state(kern, state, wn, nu, beta_nu, ct, st,
                         np.where(acc, prop, state.loglik), in_place, model.n_beta)
        return new, {"accepted": acc, "acceptance_rate": np.exp(np.minimum(log_ratio, 0.0)),
                     "n_loglik": np.ones(n, dtype=np.int64),
                     "n_cov": np.zeros(n, dtype=np.int64)}
