"""The circulant prior's Fourier operations: the spectral white state and its surrogates.

:class:`TorusSpectralOps` is the half of :class:`~lattice_lgm.priors.CirculantPrior` that a
prior with ``capabilities.fourier`` offers the samplers (:class:`~lattice_lgm.priors.base.
FourierPrior`, DESIGN §4 "white state"): unitary real half-spectra ``ζ`` with ``f̂ = √λ ζ``,
their draws and colourings through FFTW plans owned per thread, real symmetric circulant
operators ``F⁻¹ diag(m) F``, and surrogate data whose noise is diagonal in Fourier space
(``surr-scalar``, Murray & Adams 2010 §3 with ``S`` circulant).
"""

from __future__ import annotations

import math
import threading

import numpy as np

from .._validation import chain_array, finite_array
from ..errors import InvalidParameterError
from ..threads import inner_threads
from ._fft import RealFFTPlans, SplitRealFFT, WindowRealFFT
from .base import LOG_2PI, SurrogateConditional

__all__ = ["TorusSpectralOps"]


class TorusSpectralOps:
    """Fourier operations of a torus prior (a mixin of :class:`CirculantPrior`).

    The host sets ``_plans`` (shared :class:`RealFFTPlans`), ``_thread_plans`` (per-thread
    plans by thread id), ``_weights`` (half-spectrum multiplicities), ``eigenvalues``
    (``λ``, ``half_shape``), ``embedding_shape``, ``shape`` and ``state_shape``, and
    implements ``_get`` (cached spectral multipliers), ``_hermitian_fix`` and
    ``_spectral_sum``.
    """

    _plans: RealFFTPlans
    _thread_plans: dict[int, RealFFTPlans]
    _weights: np.ndarray
    eigenvalues: np.ndarray
    embedding_shape: tuple[int, ...]
    shape: tuple[int, ...]
    state_shape: tuple[int, ...]

    @property
    def planner_effort(self) -> str:
        """The FFTW planner of this torus's plans (``"FFTW_ESTIMATE"``: deterministic)."""
        return self._plans.planner_effort

    @property
    def half_shape(self) -> tuple[int, ...]:
        """Shape of the half-spectrum of a torus field (last axis ``M // 2 + 1``)."""
        return tuple(self._plans.half_shape)

    @property
    def half_weights(self) -> np.ndarray:
        """Multiplicity (1 or 2) of each half-spectrum bin in the full spectrum, ``half_shape``."""
        return self._weights

    def draw_spectrum(self, rng: np.random.Generator,
                      out: np.ndarray | None = None) -> np.ndarray:
        """One unitary half-spectrum ``ζ`` of real white noise on the torus.

        ``ζ = rfftn(z)/√M`` for ``z ~ N(0, I)``, drawn directly: complex normals with
        ``E|ζ_k|² = 1``, the self-paired planes made Hermitian (see :meth:`_hermitian_fix`).

        Parameters
        ----------
        rng : numpy.random.Generator
        out : ndarray of complex128, shape half_shape, C-contiguous, optional
            Filled in place (no allocation).

        Returns
        -------
        ndarray of complex128, shape half_shape
        """
        if out is None:
            out = np.empty(self.half_shape, dtype=np.complex128)
        rng.standard_normal(out=out.view(np.float64))
        zeta = out
        self._hermitian_fix(zeta)
        zeta *= 1.0 / math.sqrt(2.0)
        return zeta

    def colorize_spectrum(self, zeta: np.ndarray, out: np.ndarray | None = None, *,
                          own_thread: bool = False) -> np.ndarray:
        """Torus fields from unitary white half-spectra: ``f = irfftn(√λ · √M ζ)``.

        Parameters
        ----------
        zeta : ndarray of complex, shape (n_chains, *half_shape)
        out : ndarray, shape (n_chains, *state_shape), optional
        own_thread : bool
            Use single-threaded plans owned by the calling thread, so several threads may
            colourise different chains at once (chain-level parallelism scales better than
            FFTW's own threads on one field: measured at 1024²).  The numbers are the same:
            FFTW_ESTIMATE plans give bitwise identical transforms with 1 and 2 threads (tested).

        Returns
        -------
        ndarray, shape (n_chains, *state_shape)
        """
        plans = self._own_thread_plans() if own_thread else self._fft()
        return plans.backward(zeta, self._get("color_mult"), out=out)

    def colorize_with(self, zeta: np.ndarray, sqrt_eigenvalues: np.ndarray) -> np.ndarray:
        """Torus fields ``irfftn(s · √M ζ)`` for a given square-root spectrum ``s``.

        :meth:`colorize_spectrum` with ``s = √λ`` of another covariance on the same torus
        (e.g. an interpolated spectrum inside an HMC trajectory).

        Parameters
        ----------
        zeta : ndarray of complex, shape (n_chains, *half_shape)
        sqrt_eigenvalues : ndarray, shape half_shape

        Returns
        -------
        ndarray, shape (n_chains, *state_shape)
        """
        return self._fft().backward(zeta, sqrt_eigenvalues / math.sqrt(self._plans.size))

    def colorize_into(self, zeta: np.ndarray, fft: SplitRealFFT) -> np.ndarray:
        """One torus field ``irfftn(√λ · √M ζ)`` through a caller's :class:`SplitRealFFT`.

        The same numbers as :meth:`colorize_spectrum` for one chain, without its copies:
        for a caller that owns a workspace per thread (HMC runs chains in threads).

        Parameters
        ----------
        zeta : ndarray of complex, shape half_shape
        fft : SplitRealFFT
            A workspace of this torus (``embedding_shape``), owned by the calling thread.

        Returns
        -------
        ndarray, shape state_shape
            ``fft.bwd_out``: overwritten by the workspace's next backward transform.
        """
        np.multiply(zeta, self._get("color_mult"), out=fft.bwd_in)
        return fft.backward()

    def workspace(self, threads: int | None = None,
                  window: bool = False) -> SplitRealFFT | WindowRealFFT:
        """New FFT buffers and plans of this torus with this prior's planner effort.

        Parameters
        ----------
        threads : int, optional
            FFTW threads (default: this prior's).
        window : bool
            A :class:`WindowRealFFT` pruned to the window's extent along axis 0 (for fields
            that are zero off the window, and results needed on it only); on a 1-D torus
            (nothing to prune) a :class:`SplitRealFFT`.

        Returns
        -------
        SplitRealFFT or WindowRealFFT
        """
        t = self._plans.threads if threads is None else threads
        effort = self._plans.planner_effort
        if window and len(self.embedding_shape) >= 2:
            return WindowRealFFT(self.embedding_shape, self.shape[0], planner_effort=effort,
                                 threads=t)
        return SplitRealFFT(self.embedding_shape, planner_effort=effort, threads=t)

    def _fft(self) -> RealFFTPlans:
        """The plans this thread may execute: the shared ones in the main thread.

        FFTW plans and their buffers must not run in two threads at once (STYLE); any other
        thread (chains or warm starts run in a pool, Dask's worker threads) gets its own
        single-threaded plans, with the same numbers (FFTW_ESTIMATE plans are bitwise
        identical for 1 and more threads; tested).  So does the main thread when a run's
        thread budget gives one chain fewer threads than the shared plans use
        (:mod:`lattice_lgm.threads`: several chains side by side).
        """
        if threading.current_thread() is threading.main_thread():
            inner = inner_threads()
            if inner is None or inner >= self._plans.threads:
                return self._plans
        return self._own_thread_plans()

    def _own_thread_plans(self) -> RealFFTPlans:
        key = threading.get_ident()
        plans = self._thread_plans.get(key)
        if plans is None:  # setdefault is atomic: one instance per thread even under a race
            plans = self._thread_plans.setdefault(key, RealFFTPlans(
                self.embedding_shape, planner_effort=self._plans.planner_effort, threads=1))
        return plans

    def apply_spectral(self, x: np.ndarray, multiplier: np.ndarray) -> np.ndarray:
        """A real symmetric circulant operator ``F⁻¹ diag(m) F`` applied to torus fields.

        Parameters
        ----------
        x : ndarray, shape (n, *state_shape)
        multiplier : ndarray, shape half_shape
            Eigenvalues ``m_k`` of the operator (even in ``k``, e.g. a function of
            :attr:`eigenvalues`); ``m = λ`` applies ``K``, ``m = √λ`` applies ``colorize``.

        Returns
        -------
        ndarray, shape (n, *state_shape)
        """
        return self._fft().filter(np.asarray(x, dtype=np.float64),
                                  np.asarray(multiplier, dtype=np.float64) / self._plans.size)

    def spectrum(self, x: np.ndarray) -> np.ndarray:
        """Unitary half-spectra ``rfftn(x)/√M`` of torus fields ``(n_chains, *state_shape)``."""
        return self._fft().forward(x) * (1.0 / math.sqrt(self._plans.size))

    def surrogate_spectral(self, g: np.ndarray, precision_k: np.ndarray) -> SurrogateConditional:
        """Surrogate data with stationary noise: ``S`` diagonal in Fourier space.

        ``S = F* diag(s_k) F / M`` with precisions ``p_k = 1 / s_k ≥ 0`` given on the
        half-spectrum.  Everything stays diagonal and no division by ``λ`` occurs:
        ``R_k = λ_k / (1 + λ_k p_k)``, ``E[f̂_k | g] = λ_k p_k / (1 + λ_k p_k) ĝ_k`` and
        ``log N(g; 0, C + S)`` sums over bins with ``p_k > 0``.

        Parameters
        ----------
        g : ndarray, shape (n_chains, *state_shape)
        precision_k : ndarray, broadcastable to half_shape

        Returns
        -------
        SurrogateConditional
        """
        g = chain_array("g", g, self.state_shape)
        finite_array("g", g)
        p = np.broadcast_to(np.asarray(precision_k, dtype=np.float64), self._plans.half_shape)
        finite_array("precision_k", p, "precisions are finite and >= 0")
        if np.any(p < 0):
            raise InvalidParameterError("precision_k has negative entries; precisions are >= 0.")
        # S must be a real symmetric circulant: p_k = p_{-k} where both lie in the half-spectrum
        for jj in self._plans.hermitian_planes():
            plane = p[..., jj]
            rev = plane
            for ax in range(plane.ndim):
                rev = np.roll(np.flip(rev, axis=ax), 1, axis=ax)
            if not np.allclose(plane, rev, rtol=1e-12, atol=0.0):
                raise InvalidParameterError(
                    f"precision_k is not even on the last-axis plane {jj}: p_k != p_(-k), so S "
                    "would not be a real symmetric matrix; build it from an even function of "
                    "the frequency (e.g. of prior.eigenvalues)."
                )
        return self._surrogate_k(g, p)

    def _surrogate_k(self, g: np.ndarray, p: np.ndarray) -> SurrogateConditional:
        lam = self.eigenvalues
        one = 1.0 + lam * p
        r = lam / one
        gk = self._fft().forward(g)  # one forward FFT serves the mean and the marginal
        size = self._plans.size
        mean = self._fft().backward(gk, lam * p / one / size)
        obs = p > 0
        w = self._weights
        # log N(g; 0, C+S) in Fourier: (C+S)_k = (1 + λ_k p_k) / p_k on observed bins.
        quad = self._spectral_sum(gk, np.where(obs, p / one, 0.0))
        logdet = float(np.sum(w[obs] * (np.log(one[obs]) - np.log(p[obs]))))
        n_obs = float(w[obs].sum())
        logm = -0.5 * (quad + logdet + n_obs * LOG_2PI)
        sqrt_r = np.sqrt(r) / size
        inv_sqrt_r = np.where(r > 0, 1.0 / np.sqrt(np.where(r > 0, r, 1.0)), 0.0) / size
        plans = self._fft()
        return SurrogateConditional(
            mean=mean, logmarginal=logm,
            colorize=lambda eta: plans.filter(np.asarray(eta, dtype=np.float64), sqrt_r),
            whiten=lambda x: plans.filter(np.asarray(x, dtype=np.float64), inv_sqrt_r),
        )
