"""FFTW's C interface for plans that compiled code executes (the FFTW that pyfftw loaded).

pyfftw's plans can only be executed from Python; a Numba kernel that runs a whole HMC
trajectory (``samplers._hmc_kernels._trajectory_chord``) needs plans it can execute itself.  This
module makes them with FFTW's guru interface through :mod:`ctypes`, from the *same* shared
library pyfftw loaded (so one planner, one wisdom, the planner lock of :mod:`._fft` for both),
and exposes ``fftw_execute`` as a ctypes function, which Numba calls in nopython mode without
the GIL.  Executing distinct plans concurrently is thread safe (FFTW's manual, §5
"Thread safety"); making and destroying plans is not, so both happen under
``_fft._PLAN_LOCK``.

Where the library cannot be found (pyfftw built against a static FFTW, an unusual layout) or
does not pass a one-transform self-check, :data:`LIB` is None and callers keep pyfftw's plans
(the same numbers, executed from Python).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import re
import threading
from pathlib import Path

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

__all__ = ["EFFORT_FLAGS", "EXECUTE_ADDRESS", "LIB", "PLAN_LOCK", "destroy", "execute",
           "execute_at", "plan"]

#: FFTW's planner is not thread safe: plans are made and destroyed under this lock, by pyfftw
#: (``_fft``) and here alike (executing them concurrently is safe).  Re-entrant: a plan's
#: finaliser may run from the garbage collector while its thread holds the lock.
PLAN_LOCK = threading.RLock()

# fftw3.h: planner flags and directions
EFFORT_FLAGS = {"FFTW_MEASURE": 0, "FFTW_EXHAUSTIVE": 1 << 3, "FFTW_PATIENT": 1 << 5,
                "FFTW_ESTIMATE": 1 << 6}
DESTROY_INPUT = 1
FORWARD, BACKWARD = -1, 1


class _IODim(ctypes.Structure):
    """``fftw_iodim``: a dimension's length and its input and output strides (in elements)."""

    _fields_ = [("n", ctypes.c_int), ("is_", ctypes.c_int), ("os", ctypes.c_int)]


def _candidates(stem: str) -> list[str]:
    """Paths of the library ``stem`` (``libfftw3``, ``libfftw3_omp``), best first.

    The one mapped into this process (pyfftw's, on Linux), then the copies beside pyfftw's
    package, then the system's.
    """
    import pyfftw  # loads the library this module must share

    out: list[str] = []
    pat = re.compile(rf"(/\S*/{stem}(-[0-9a-f]+)?\.so[.0-9]*)$")
    with contextlib.suppress(OSError):
        with open("/proc/self/maps") as fh:
            for line in fh:
                m = pat.search(line.strip())
                if m and m.group(1) not in out:
                    out.append(m.group(1))
    here = Path(pyfftw.__file__).resolve().parent
    for d in (here.parent / "pyfftw.libs", here / ".dylibs", here):
        for p in sorted(d.glob(f"{stem}[-.]*")):
            if re.fullmatch(rf"{stem}(-[0-9a-f]+)?(\.so[.0-9]*|(\.[0-9]+)*\.dylib|-3\.dll)",
                            p.name):
                out.append(str(p))
    found = ctypes.util.find_library(stem[3:])
    if found:
        out.append(found)
    return out


def _load(stem: str, symbol: str) -> ctypes.CDLL | None:
    for path in _candidates(stem):
        try:
            lib = ctypes.CDLL(path)
            getattr(lib, symbol)
        except (OSError, AttributeError):
            continue
        return lib
    return None


def _declare(lib: ctypes.CDLL) -> None:
    vp, ip, dims = ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(_IODim)
    for name, extra in (("fftw_plan_guru_dft_r2c", []), ("fftw_plan_guru_dft_c2r", []),
                        ("fftw_plan_guru_dft", [ip])):
        fn = getattr(lib, name)
        fn.restype = vp
        fn.argtypes = [ip, dims, ip, dims, vp, vp, *extra, ctypes.c_uint]
    lib.fftw_execute.restype = None
    lib.fftw_execute.argtypes = [vp]
    lib.fftw_destroy_plan.restype = None
    lib.fftw_destroy_plan.argtypes = [vp]


def _dims(axes, src: np.ndarray, dst: np.ndarray, sizes) -> ctypes.Array:
    arr = (_IODim * max(len(axes), 1))()
    for i, a in enumerate(axes):
        arr[i].n = int(sizes[a])
        arr[i].is_ = src.strides[a] // src.itemsize
        arr[i].os = dst.strides[a] // dst.itemsize
    return arr


def plan(src: np.ndarray, dst: np.ndarray, axes: tuple[int, ...], *, effort: str,
         threads: int = 1, sign: int = FORWARD, destroy_input: bool = False) -> int:
    """A plan of the unnormalised DFT of ``src`` into ``dst`` over ``axes``.

    The other axes are a batch; the plan runs on exactly these buffers.  r2c when ``src``
    is real, c2r when ``dst`` is real, else c2c with ``sign``.  The caller holds the
    planner lock and plans before writing data (MEASURE overwrites the buffers).

    Returns
    -------
    int
        The plan's address (never 0).

    Raises
    ------
    RuntimeError
        FFTW could not make the plan (or no library, or threads > 1 without FFTW's threads).
    """
    if LIB is None:
        raise RuntimeError("no FFTW library could be loaded for compiled plans.")
    if threads != 1:
        if OMP is None:
            raise RuntimeError("FFTW's threads library was not found: plans of 1 thread only.")
        OMP.fftw_plan_with_nthreads(int(threads))
    real_src, real_dst = src.dtype == np.float64, dst.dtype == np.float64
    logical = dst.shape if real_dst else src.shape
    batch = tuple(a for a in range(src.ndim) if a not in axes)
    d = _dims(axes, src, dst, logical)
    h = _dims(batch, src, dst, src.shape)
    flags = EFFORT_FLAGS[effort] | (DESTROY_INPUT if destroy_input else 0)
    args = (len(axes), d, len(batch), h, src.ctypes.data, dst.ctypes.data)
    try:
        if real_src:
            p = LIB.fftw_plan_guru_dft_r2c(*args, flags)
        elif real_dst:
            p = LIB.fftw_plan_guru_dft_c2r(*args, flags)
        else:
            p = LIB.fftw_plan_guru_dft(*args, int(sign), flags)
    finally:
        if threads != 1:
            OMP.fftw_plan_with_nthreads(1)
    if not p:
        raise RuntimeError(f"FFTW made no plan for {src.shape} -> {dst.shape} over {axes}.")
    return int(p)


def destroy(p: int) -> None:
    """Free a plan of :func:`plan` (under the planner lock)."""
    LIB.fftw_destroy_plan(p)


def _self_check() -> bool:
    """One small 2-D r2c against numpy: a library that loads but misbehaves is not used."""
    a = np.zeros((6, 5))
    b = np.zeros((6, 3), dtype=np.complex128)
    p = plan(a, b, (0, 1), effort="FFTW_ESTIMATE")
    try:
        a[...] = np.arange(30.0).reshape(6, 5) ** 0.5
        LIB.fftw_execute(p)
        return bool(np.allclose(b, np.fft.rfft2(a), rtol=1e-12, atol=1e-12))
    finally:
        destroy(p)


LIB: ctypes.CDLL | None = _load("libfftw3", "fftw_plan_guru_dft_r2c")
OMP: ctypes.CDLL | None = None
if LIB is not None:
    _declare(LIB)
    OMP = _load("libfftw3_omp", "fftw_plan_with_nthreads") or _load(
        "libfftw3_threads", "fftw_plan_with_nthreads")
    if OMP is not None:
        OMP.fftw_plan_with_nthreads.restype = None
        OMP.fftw_plan_with_nthreads.argtypes = [ctypes.c_int]
    with PLAN_LOCK:
        try:
            ok = _self_check()
        except (RuntimeError, OSError):
            ok = False
    if not ok:
        LIB = OMP = None

#: ``fftw_execute(plan)`` from Python (None without a library)
execute = LIB.fftw_execute if LIB is not None else None
#: its address, for :func:`execute_at` (0 without a library)
EXECUTE_ADDRESS = ctypes.cast(LIB.fftw_execute, ctypes.c_void_p).value if LIB is not None else 0


@intrinsic
def execute_at(typingctx, fn, p):
    """``fn(p)`` in compiled code, ``fn`` the address of ``fftw_execute`` (an int).

    The address is an argument, not a constant baked into the machine code, so kernels that
    call it can be cached on disk (a ctypes function referenced as a global could not: its
    address changes from process to process).
    """
    sig = types.void(types.intp, types.intp)

    def codegen(context, builder, signature, args):
        ptr = ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(ir.VoidType(), [ptr])
        target = builder.inttoptr(args[0], fnty.as_pointer())
        builder.call(target, [builder.inttoptr(args[1], ptr)])
        return context.get_dummy_value()

    return sig, codegen
