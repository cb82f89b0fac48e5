"""Planned real FFTs of one torus field (pyfftw), made once per torus shape.

One :class:`RealFFTPlans` owns two aligned buffers — a real one ``M = torus_shape`` and a complex
half-spectrum one ``(*M[:-1], M[-1]//2 + 1)`` — and the forward (r2c) and backward (c2r) plans
between them.  Batches of chains run through the same single-field plans one chain at a time:
FFTW picks different algorithms (and so different last bits) for different batch sizes, which
would make a chain's draw depend on how many chains run with it (DESIGN §5).  For the fields this
library is for (≥ 64² cells) the loop costs nothing measurable, and the buffers no longer grow
with the number of chains.

Plans are not thread safe (STYLE: never share a plan across threads); each prior and its
``with_params`` descendants share one instance within one thread.

Planning (DESIGN §5): ``FFTW_MEASURE`` picks algorithms by timing, so two fresh processes may
produce different last bits; lattice_lgm therefore defaults to ``FFTW_ESTIMATE`` (deterministic
plans; draws are bitwise identical for 1 and 2 FFT threads, tested).  Pass
``planner_effort="FFTW_MEASURE"`` for speed and keep bitwise reproducibility by saving
:func:`export_wisdom` with the run and calling :func:`import_wisdom` before planning on resume.
"""

from __future__ import annotations

import functools
import os
import weakref
from collections.abc import Callable

import numpy as np
import pyfftw

from ..errors import InvalidParameterError
from ..threads import available_cores, env_int, inner_threads
from . import _fftw

__all__ = ["PLANNER_EFFORTS", "CompiledBackward", "RealFFTPlans", "SplitRealFFT",
           "WindowRealFFT", "export_wisdom", "import_wisdom"]

PLANNER_EFFORTS = ("FFTW_ESTIMATE", "FFTW_MEASURE", "FFTW_PATIENT", "FFTW_EXHAUSTIVE")
DEFAULT_PLANNER = "FFTW_ESTIMATE"


#: below this many torus cells FFTs run on one thread (thread hand-over costs more than the FFT)
SMALL_FFT = 4096
# FFTW's planner is not thread safe (plans may be executed concurrently, not made concurrently);
# one lock for pyfftw's plans and the compiled kernels' (:mod:`._fftw`)
_PLAN_LOCK = _fftw.PLAN_LOCK


def default_threads(size: int | None = None) -> int:
    """FFTW threads: one chain's share of the run's thread budget, 1 below SMALL_FFT cells.

    Under a run's budget (:func:`lattice_lgm.threads.using`) that share is its ``inner``
    threads; outside one, the cores this process may use.  ``LATTICE_LGM_FFT_THREADS`` (an
    int >= 1) overrides both.
    """
    if os.environ.get("LATTICE_LGM_FFT_THREADS"):
        return env_int("LATTICE_LGM_FFT_THREADS", "FFTW threads, e.g. 1")
    if size is not None and size < SMALL_FFT:
        return 1
    inner = inner_threads()
    return available_cores() if inner is None else inner


def _check_effort(planner_effort: str) -> None:
    if planner_effort not in PLANNER_EFFORTS:
        raise InvalidParameterError(
            f"planner_effort={planner_effort!r} is not one of {PLANNER_EFFORTS}.")


def export_wisdom() -> tuple[bytes, ...]:
    """FFTW's accumulated wisdom, to store with a run (see the module docstring)."""
    return pyfftw.export_wisdom()


def import_wisdom(wisdom: tuple[bytes, ...]) -> None:
    """Load wisdom saved by :func:`export_wisdom` before planning."""
    pyfftw.import_wisdom(wisdom)


class RealFFTPlans:
    """Planned real FFTs on a torus of shape ``torus_shape``, one field at a time.

    Parameters
    ----------
    torus_shape : tuple of int
    planner_effort : str
        One of :data:`PLANNER_EFFORTS`.
    threads : int, optional
        FFTW threads (default: the cores available; 1 below :data:`SMALL_FFT` cells).
    """

    def __init__(
        self,
        torus_shape: tuple[int, ...],
        planner_effort: str = DEFAULT_PLANNER,
        threads: int | None = None,
    ) -> None:
        _check_effort(planner_effort)
        self.torus_shape = tuple(int(m) for m in torus_shape)
        self.half_shape = (*self.torus_shape[:-1], self.torus_shape[-1] // 2 + 1)
        self.planner_effort = planner_effort
        self.size = int(np.prod(self.torus_shape))
        self.threads = default_threads(self.size) if threads is None else int(threads)
        self._fwd: pyfftw.FFTW | None = None
        self._bwd: pyfftw.FFTW | None = None

    def __getstate__(self) -> dict:
        # FFTW plans and their buffers are process-local: pickled plans (Dask tasks, copies)
        # are re-planned on first use; FFTW_ESTIMATE plans are deterministic (DESIGN §5)
        state = dict(self.__dict__)
        state["_fwd"] = state["_bwd"] = None
        return state

    def _plan(self) -> tuple[pyfftw.FFTW, pyfftw.FFTW]:
        if self._fwd is None:
            with _PLAN_LOCK:
                if self._fwd is None:
                    self._make_plans()
        return self._fwd, self._bwd

    def _make_plans(self) -> None:
        real = pyfftw.empty_aligned(self.torus_shape, dtype=np.float64)
        cplx = pyfftw.empty_aligned(self.half_shape, dtype=np.complex128)
        # MEASURE overwrites the buffers while planning: plan before any data goes in.
        fwd = pyfftw.FFTW(real, cplx, axes=tuple(range(real.ndim)),
                          direction="FFTW_FORWARD", flags=(self.planner_effort,),
                          threads=self.threads)
        self._bwd = pyfftw.FFTW(cplx, real, axes=tuple(range(real.ndim)),
                                direction="FFTW_BACKWARD",
                                flags=(self.planner_effort, "FFTW_DESTROY_INPUT"),
                                threads=self.threads)
        self._fwd = fwd  # last: _plan's unlocked check reads _fwd

    @property
    def real_buffer(self) -> np.ndarray:
        """The real work buffer, ``torus_shape`` (owned by the plans)."""
        return self._plan()[0].input_array

    @property
    def complex_buffer(self) -> np.ndarray:
        """The complex half-spectrum work buffer, ``half_shape`` (owned by the plans)."""
        return self._plan()[0].output_array

    def execute_backward(self) -> np.ndarray:
        """Unnormalised c2r of :attr:`complex_buffer` (destroyed) into :attr:`real_buffer`."""
        bwd = self._plan()[1]
        bwd.execute()
        return bwd.output_array

    def forward(self, x: np.ndarray) -> np.ndarray:
        """Unnormalised ``rfftn`` of each chain's field.

        Parameters
        ----------
        x : ndarray, shape (n, *torus_shape)

        Returns
        -------
        ndarray, shape (n, *half_shape), complex
        """
        fwd, _ = self._plan()
        out = np.empty((len(x), *self.half_shape), dtype=np.complex128)
        for i in range(len(x)):
            fwd.input_array[...] = x[i]
            fwd.execute()
            out[i] = fwd.output_array
        return out

    def backward(self, xk: np.ndarray, multiplier: np.ndarray,
                 out: np.ndarray | None = None) -> np.ndarray:
        """Unnormalised ``F⁻¹ (multiplier · x̂)`` per chain from given half-spectra.

        For callers that already hold ``F x`` (it saves the forward FFT of :meth:`filter`).

        Parameters
        ----------
        xk : ndarray, shape (n, *half_shape), complex
        multiplier : ndarray, real, shape half_shape (carrying the 1/M normalisation)
        out : ndarray, shape (n, *torus_shape), optional
            Where to write (avoids allocating, and page-faulting, a fresh array per call).

        Returns
        -------
        ndarray, shape (n, *torus_shape)
        """
        _, bwd = self._plan()
        if out is None:
            out = np.empty((len(xk), *self.torus_shape), dtype=np.float64)
        for i in range(len(xk)):
            np.multiply(xk[i], multiplier, out=bwd.input_array)
            bwd.execute()
            out[i] = bwd.output_array
        return out

    def filter(self, x: np.ndarray, multiplier: np.ndarray) -> np.ndarray:
        """``F⁻¹ diag(multiplier) F x`` per chain with *unnormalised* transforms.

        The multiplier carries the ``1/M`` normalisation (``M = size``), so a caller that
        applies the same filter many times precomputes it once: ``irfftn(m · rfftn(x))`` is
        ``filter(x, m / size)``.

        Parameters
        ----------
        x : ndarray, shape (n, *torus_shape)
        multiplier : ndarray, real, shape half_shape

        Returns
        -------
        ndarray, shape (n, *torus_shape)
        """
        return self.map_spectrum(x, lambda xk, i: np.multiply(xk, multiplier, out=xk))

    def map_spectrum(
        self, x: np.ndarray, fn: Callable[[np.ndarray, int], object]
    ) -> np.ndarray:
        """Unnormalised ``F⁻¹ fn(F x[i])`` per chain; ``fn(xk, i)`` edits the spectrum in place."""
        fwd, bwd = self._plan()
        out = np.empty((len(x), *self.torus_shape), dtype=np.float64)
        for i in range(len(x)):
            fwd.input_array[...] = x[i]
            fwd.execute()
            fn(fwd.output_array, i)
            bwd.execute()
            out[i] = bwd.output_array
        return out

    def half_weights(self) -> np.ndarray:
        """Multiplicity of each half-spectrum bin in the full spectrum (1 or 2), ``half_shape``."""
        w = np.full(self.half_shape, 2.0)
        w[..., 0] = 1.0
        if self.torus_shape[-1] % 2 == 0:
            w[..., -1] = 1.0
        return w

    def plane_reversal(self) -> np.ndarray:
        """Flat indices that reverse a last-axis plane: ``p[k] → p[−k mod n]`` per axis.

        ``p.reshape(-1)[plane_reversal()]`` for a plane ``p`` of shape ``torus_shape[:-1]``
        (made once per torus).
        """
        rev = getattr(self, "_plane_reversal", None)
        if rev is None:
            dims = self.torus_shape[:-1]
            src = tuple((-np.arange(n)) % n for n in dims)
            rev = np.ravel_multi_index(np.meshgrid(*src, indexing="ij"), dims).reshape(-1)
            self._plane_reversal = rev
        return rev

    def hermitian_planes(self) -> tuple[int, ...]:
        """Last-axis indices of the half-spectrum whose bins pair up within the half-spectrum."""
        m = self.torus_shape[-1]
        return (0, m // 2) if m % 2 == 0 and m > 1 else (0,)


class SplitRealFFT:
    """A forward and a backward real FFT of one torus shape with four separate buffers.

    Unlike :class:`RealFFTPlans` (whose two plans share their real buffer), the forward
    plan's input is never written by the backward transform, so a caller can keep it zero
    off a fixed set of cells and write only those cells per call (HMC's gradient scatters
    the likelihood's derivative onto the observed sites of a much larger torus).  Plans are
    made once per instance under the planner lock; an instance belongs to one thread.

    Parameters
    ----------
    torus_shape : tuple of int
    planner_effort : str
        One of :data:`PLANNER_EFFORTS`.
    threads : int
        FFTW threads of both plans.

    Attributes
    ----------
    fwd_in : ndarray, float64, torus_shape
        Input of :meth:`forward` (preserved by it; zero-initialised).
    fwd_out : ndarray, complex128, half_shape
    bwd_in : ndarray, complex128, half_shape
        Input of :meth:`backward` (destroyed by it).
    bwd_out : ndarray, float64, torus_shape
    """

    def __init__(self, torus_shape: tuple[int, ...], planner_effort: str = DEFAULT_PLANNER,
                 threads: int = 1) -> None:
        _check_effort(planner_effort)
        shape = tuple(int(m) for m in torus_shape)
        half = (*shape[:-1], shape[-1] // 2 + 1)
        axes = tuple(range(len(shape)))
        self.fwd_in = pyfftw.empty_aligned(shape, dtype=np.float64)
        self.fwd_out = pyfftw.empty_aligned(half, dtype=np.complex128)
        self.bwd_in = pyfftw.empty_aligned(half, dtype=np.complex128)
        self.bwd_out = pyfftw.empty_aligned(shape, dtype=np.float64)
        with _PLAN_LOCK:  # MEASURE overwrites the buffers: plan before any data goes in
            self._fwd = pyfftw.FFTW(self.fwd_in, self.fwd_out, axes=axes,
                                    direction="FFTW_FORWARD", flags=(planner_effort,),
                                    threads=int(threads))
            self._bwd = pyfftw.FFTW(self.bwd_in, self.bwd_out, axes=axes,
                                    direction="FFTW_BACKWARD",
                                    flags=(planner_effort, "FFTW_DESTROY_INPUT"),
                                    threads=int(threads))
        self.fwd_in[...] = 0.0
        self.size = int(np.prod(shape))

    def forward(self) -> np.ndarray:
        """Unnormalised r2c of :attr:`fwd_in` into :attr:`fwd_out` (returned, owned here)."""
        self._fwd.execute()
        return self.fwd_out

    def backward(self) -> np.ndarray:
        """Unnormalised c2r of :attr:`bwd_in` into :attr:`bwd_out` (returned, owned here)."""
        self._bwd.execute()
        return self.bwd_out


class CompiledBackward:
    """Unnormalised c2r transforms of a torus for compiled callers: buffers and plan addresses.

    ``copies`` independent single-field transforms, each with its own buffers and plan, so
    that compiled code may run them in different threads at once (FFTW executes distinct
    plans concurrently; §5 of its manual).  Each is the backward transform of
    :class:`RealFFTPlans` — 64-byte aligned buffers, one field, one thread,
    ``FFTW_DESTROY_INPUT``, the same planner effort — planned through FFTW's guru interface
    (:mod:`._fftw`) so that a Numba kernel executes it with ``_fftw.execute_at``
    (elliptical slice sampling's compiled blocks, ``samplers._ess_kernels``).  FFTW_ESTIMATE picks
    its algorithm from the problem alone (sizes, strides, alignment), so a transform is
    bitwise the one pyfftw's plan computes (tested through the samplers).  An instance
    belongs to one thread at a time.

    Parameters
    ----------
    torus_shape : tuple of int
    planner_effort : str
    copies : int
        Independent transforms (e.g. one per chain).

    Attributes
    ----------
    bwd_in : ndarray, complex128, (copies, prod(half_shape))
        Inputs, one row each (destroyed by a transform); rows are 64-byte aligned.
    bwd_out : ndarray, float64, (copies, prod(torus_shape))
    plans : ndarray of int64, (copies,)
        The plans' addresses, for ``_fftw.execute_at(_fftw.EXECUTE_ADDRESS, plans[i])``.

    Raises
    ------
    RuntimeError
        No FFTW library could be loaded for compiled plans (``_fftw.LIB`` is None), or FFTW
        made no plan: callers keep pyfftw's plans.
    """

    def __init__(self, torus_shape: tuple[int, ...], planner_effort: str = DEFAULT_PLANNER,
                 copies: int = 1) -> None:
        _check_effort(planner_effort)
        if _fftw.LIB is None:
            raise RuntimeError("no FFTW library could be loaded for compiled plans.")
        shape = tuple(int(m) for m in torus_shape)
        half = (*shape[:-1], shape[-1] // 2 + 1)
        self.bwd_in = _aligned_rows(int(copies), int(np.prod(half)), np.complex128)
        self.bwd_out = _aligned_rows(int(copies), int(np.prod(shape)), np.float64)
        made: list[int] = []
        with _PLAN_LOCK:  # MEASURE overwrites the buffers: plan before any data goes in
            try:
                for i in range(int(copies)):
                    made.append(_fftw.plan(self.bwd_in[i].reshape(half),
                                           self.bwd_out[i].reshape(shape),
                                           tuple(range(len(shape))), effort=planner_effort,
                                           sign=_fftw.BACKWARD, destroy_input=True))
            except RuntimeError:
                for p in made:
                    _fftw.destroy(p)
                raise
        self.plans = np.array(made, dtype=np.int64)
        weakref.finalize(self, _destroy_plans, tuple(made))


def _aligned_rows(rows: int, n: int, dtype: type) -> np.ndarray:
    """``(rows, n)`` rows of ``dtype``, each starting on a 64-byte boundary (padded stride)."""
    item = np.dtype(dtype).itemsize
    stride = -(-n * item // 64) * 64 // item
    return pyfftw.empty_aligned((rows, stride), dtype=dtype, n=64)[:, :n]


class WindowRealFFT:
    """Real FFTs of torus fields that live on the window's first ``n0`` slices along axis 0.

    The transforms of :class:`SplitRealFFT` pruned to the window (a sparse-input forward and
    a partial-output backward): the forward input is zero beyond slice ``n0`` of axis 0, so
    the real transform over the other axes runs on those ``n0`` slices only, followed by a
    complex transform along axis 0 (zero-padded); the backward transform runs the complex
    transform along axis 0 in full and the real one over the other axes for the first ``n0``
    slices only.  On bei at 5 m (window 100 of a 480 × 432 torus) a transform costs 0.54 ms
    instead of 1.31 ms.  The numbers equal the full transforms' to round-off (not bitwise).
    Needs at least two axes.

    Parameters
    ----------
    torus_shape : tuple of int
    n0 : int
        The window's extent along axis 0 (1 ≤ n0 ≤ torus_shape[0]).
    planner_effort : str
    threads : int

    Attributes
    ----------
    fwd_in : ndarray, float64, (n0, *torus_shape[1:])
        Input of :meth:`forward` (preserved by it; zero-initialised).
    fwd_out : ndarray, complex128, half_shape
    bwd_in : ndarray, complex128, half_shape
        Input of :meth:`backward` (preserved by it).
    bwd_out : ndarray, float64, (n0, *torus_shape[1:])
    """

    def __init__(self, torus_shape: tuple[int, ...], n0: int,
                 planner_effort: str = DEFAULT_PLANNER, threads: int = 1) -> None:
        shape = tuple(int(m) for m in torus_shape)
        if len(shape) < 2 or not 1 <= int(n0) <= shape[0]:
            raise InvalidParameterError(
                f"WindowRealFFT needs >= 2 axes and 1 <= n0 <= {shape[0]}; got torus {shape}, "
                f"n0={n0}.")
        _check_effort(planner_effort)
        n0 = int(n0)
        half = (*shape[:-1], shape[-1] // 2 + 1)
        slab = (n0, *shape[1:])
        rest = tuple(range(1, len(shape)))
        self.fwd_in = pyfftw.empty_aligned(slab, dtype=np.float64)
        self._mid_f = pyfftw.empty_aligned(half, dtype=np.complex128)
        self.fwd_out = pyfftw.empty_aligned(half, dtype=np.complex128)
        self.bwd_in = pyfftw.empty_aligned(half, dtype=np.complex128)
        self._mid_b = pyfftw.empty_aligned(half, dtype=np.complex128)
        self.bwd_out = pyfftw.empty_aligned(slab, dtype=np.float64)
        #: the four plans' addresses (forward over the other axes, forward along axis 0,
        #: backward along axis 0, backward over the other axes) for compiled callers
        #: (:mod:`._fftw`); None where pyfftw's plans run instead (no loadable FFTW)
        self.plans: tuple[int, int, int, int] | None = None
        with _PLAN_LOCK:  # MEASURE overwrites the buffers: plan before any data goes in
            if _fftw.LIB is not None:
                made: list[int] = []
                try:
                    for src, dst, axes, sign, destroy in (
                            (self.fwd_in, self._mid_f[:n0], rest, _fftw.FORWARD, False),
                            (self._mid_f, self.fwd_out, (0,), _fftw.FORWARD, False),
                            (self.bwd_in, self._mid_b, (0,), _fftw.BACKWARD, False),
                            (self._mid_b[:n0], self.bwd_out, rest, _fftw.BACKWARD, True)):
                        made.append(_fftw.plan(src, dst, axes, effort=planner_effort,
                                               threads=int(threads), sign=sign,
                                               destroy_input=destroy))
                    self.plans = tuple(made)
                except RuntimeError:
                    for p in made:
                        _fftw.destroy(p)
            if self.plans is None:
                flags = (planner_effort,)
                self._f_rest = pyfftw.FFTW(self.fwd_in, self._mid_f[:n0], axes=rest,
                                           direction="FFTW_FORWARD", flags=flags,
                                           threads=threads)
                self._f_0 = pyfftw.FFTW(self._mid_f, self.fwd_out, axes=(0,),
                                        direction="FFTW_FORWARD", flags=flags, threads=threads)
                self._b_0 = pyfftw.FFTW(self.bwd_in, self._mid_b, axes=(0,),
                                        direction="FFTW_BACKWARD", flags=flags, threads=threads)
                self._b_rest = pyfftw.FFTW(self._mid_b[:n0], self.bwd_out, axes=rest,
                                           direction="FFTW_BACKWARD",
                                           flags=(*flags, "FFTW_DESTROY_INPUT"),
                                           threads=threads)
        if self.plans is not None:
            weakref.finalize(self, _destroy_plans, self.plans)
            run = [functools.partial(_fftw.execute, p) for p in self.plans]
        else:
            run = [self._f_rest.execute, self._f_0.execute, self._b_0.execute,
                   self._b_rest.execute]
        # each direction's two transforms, in order
        self._forward_steps, self._backward_steps = run[:2], run[2:]
        self.fwd_in[...] = 0.0
        self._mid_f[...] = 0.0     # slices ≥ n0 stay zero: only the first plan writes, below n0
        self.size = int(np.prod(shape))
        self.n0 = n0

    def forward(self) -> np.ndarray:
        """Unnormalised r2c of the torus field whose first ``n0`` slices are :attr:`fwd_in`."""
        for step in self._forward_steps:
            step()
        return self.fwd_out

    def backward(self) -> np.ndarray:
        """The first ``n0`` slices of the unnormalised c2r of :attr:`bwd_in`."""
        for step in self._backward_steps:
            step()
        return self.bwd_out


def _destroy_plans(plans: tuple[int, ...]) -> None:
    """Free :class:`WindowRealFFT`'s compiled plans (its finaliser)."""
    with _PLAN_LOCK:
        for p in plans:
            _fftw.destroy(p)
