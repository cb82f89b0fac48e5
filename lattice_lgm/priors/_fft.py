"""Planned real FFTs over a batch of chains (pyfftw), made once per (torus shape, batch size).

One :class:`RealFFTPlans` owns two aligned buffers per batch size — a real one ``(c, *M)`` and a
complex half-spectrum one ``(c, *M[:-1], M[-1]//2 + 1)`` — and the forward (r2c) and backward
(c2r) plans between them.  Plans are not thread safe (STYLE: never share a plan across threads);
each prior and its ``with_params`` descendants share one instance within one thread.

Planning (DESIGN §5): ``FFTW_MEASURE`` picks algorithms by timing, so two fresh processes may
produce different last bits; lattice_lgm therefore defaults to ``FFTW_ESTIMATE`` (deterministic
plans, ≈1.3× slower per FFT here).  Pass ``planner_effort="FFTW_MEASURE"`` for speed and keep
bitwise reproducibility by saving :func:`export_wisdom` with the run and calling
:func:`import_wisdom` before planning on resume.
"""

from __future__ import annotations

import os

import numpy as np
import pyfftw

from ..errors import InvalidParameterError

__all__ = ["PLANNER_EFFORTS", "RealFFTPlans", "export_wisdom", "import_wisdom"]

PLANNER_EFFORTS = ("FFTW_ESTIMATE", "FFTW_MEASURE", "FFTW_PATIENT", "FFTW_EXHAUSTIVE")
DEFAULT_PLANNER = "FFTW_ESTIMATE"


def default_threads() -> int:
    """FFTW threads: the cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def export_wisdom() -> tuple[bytes, ...]:
    """FFTW's accumulated wisdom, to store with a run (see the module docstring)."""
    return pyfftw.export_wisdom()


def import_wisdom(wisdom: tuple[bytes, ...]) -> None:
    """Load wisdom saved by :func:`export_wisdom` before planning."""
    pyfftw.import_wisdom(wisdom)


class RealFFTPlans:
    """Batched real FFTs on a torus of shape ``torus_shape``.

    Parameters
    ----------
    torus_shape : tuple of int
    planner_effort : str
        One of :data:`PLANNER_EFFORTS`.
    threads : int, optional
        FFTW threads (default: the cores available).
    """

    def __init__(
        self,
        torus_shape: tuple[int, ...],
        planner_effort: str = DEFAULT_PLANNER,
        threads: int | None = None,
    ) -> None:
        if planner_effort not in PLANNER_EFFORTS:
            raise InvalidParameterError(
                f"planner_effort={planner_effort!r} is not one of {PLANNER_EFFORTS}."
            )
        self.torus_shape = tuple(int(m) for m in torus_shape)
        self.half_shape = (*self.torus_shape[:-1], self.torus_shape[-1] // 2 + 1)
        self.planner_effort = planner_effort
        self.threads = default_threads() if threads is None else int(threads)
        self.size = int(np.prod(self.torus_shape))
        self._plans: dict[int, tuple[pyfftw.FFTW, pyfftw.FFTW]] = {}
        axes = tuple(range(1, len(self.torus_shape) + 1))
        self._axes = axes

    def buffers(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``(real, complex)`` work buffers for a batch of ``n`` (planned on first use)."""
        return self._get(n)[0].input_array, self._get(n)[0].output_array

    def _get(self, n: int) -> tuple[pyfftw.FFTW, pyfftw.FFTW]:
        plans = self._plans.get(n)
        if plans is None:
            real = pyfftw.empty_aligned((n, *self.torus_shape), dtype=np.float64)
            cplx = pyfftw.empty_aligned((n, *self.half_shape), dtype=np.complex128)
            # Planning with MEASURE overwrites the buffers: plan before any data is put in them.
            fwd = pyfftw.FFTW(real, cplx, axes=self._axes, direction="FFTW_FORWARD",
                              flags=(self.planner_effort,), threads=self.threads)
            bwd = pyfftw.FFTW(cplx, real, axes=self._axes, direction="FFTW_BACKWARD",
                              flags=(self.planner_effort, "FFTW_DESTROY_INPUT"),
                              threads=self.threads)
            plans = self._plans[n] = (fwd, bwd)
        return plans

    def forward(self, x: np.ndarray) -> np.ndarray:
        """Unnormalised ``rfftn`` over the torus axes; returns a new ``(n, *half_shape)`` array."""
        fwd, _ = self._get(len(x))
        fwd.input_array[...] = x
        fwd.execute()
        return fwd.output_array.copy()

    def backward_inplace(self, n: int) -> np.ndarray:
        """Run the unnormalised c2r transform on the complex buffer of batch ``n`` (destroyed).

        Returns the real buffer (a view owned by the plan: copy what you keep).
        """
        _, bwd = self._get(n)
        bwd.execute()
        return bwd.output_array

    def backward(self, xk: np.ndarray) -> np.ndarray:
        """Unnormalised ``irfftn`` (no 1/M factor) of a Hermitian half-spectrum; new array."""
        _, bwd = self._get(len(xk))
        bwd.input_array[...] = xk
        bwd.execute()
        return bwd.output_array.copy()

    def filter(self, x: np.ndarray, multiplier: np.ndarray) -> np.ndarray:
        """``irfftn(multiplier · rfftn(x))`` (normalised) with one copy in and one out.

        Parameters
        ----------
        x : ndarray, shape (n, *torus_shape)
        multiplier : ndarray, real, broadcastable to (n, *half_shape)
        """
        n = len(x)
        fwd, bwd = self._get(n)
        fwd.input_array[...] = x
        fwd.execute()
        np.multiply(fwd.output_array, multiplier * (1.0 / self.size), out=bwd.input_array)
        bwd.execute()
        return bwd.output_array.copy()

    def half_weights(self) -> np.ndarray:
        """Multiplicity of each half-spectrum bin in the full spectrum (1 or 2), ``half_shape``."""
        w = np.full(self.half_shape, 2.0)
        w[..., 0] = 1.0
        if self.torus_shape[-1] % 2 == 0:
            w[..., -1] = 1.0
        return w

    def hermitian_planes(self) -> tuple[int, ...]:
        """Last-axis indices of the half-spectrum whose bins pair up within the half-spectrum."""
        m = self.torus_shape[-1]
        return (0, m // 2) if m % 2 == 0 and m > 1 else (0,)
