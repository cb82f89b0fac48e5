"""One thread budget for a run: Numba, OpenBLAS and FFTW share the cores, decided here.

Three thread pools live in one sampling process: Numba's (``prange`` kernels and the width of
the chains' thread pool), the BLAS library's (dense Cholesky factors, matrix products) and
FFTW's (circulant transforms).  Left alone each takes every core, and on a 2-core machine
their idle threads spin against each other: an elliptical slice step of the dense coal-mining
LGCP took 2.2 ms with Numba and OpenBLAS at 2 threads each and 0.51-0.68 ms with either at 1;
on a loaded machine 10-40x slower (issue 26, docs/decisions.md decision 79).

The rule (:func:`thread_budget`): a run may use ``threads`` cores; parallelism goes over
chains when there are several — ``chains = min(threads, n_chains)`` of them advance side by
side, each on one thread with single-threaded BLAS and FFTs — and inside one chain's
transforms only with the cores the chains leave over (``inner = threads // chains``: all of
them for a single chain).  :func:`using` applies a budget for the duration of a run and
restores every pool after it.

Where ``threads`` comes from, first match wins (each an explicit choice of the user):

1. the ``threads=`` argument (:func:`lattice_lgm.sample`, ``lattice-lgm run --threads``);
2. the ``LATTICE_LGM_THREADS`` environment variable;
3. Numba's thread count (``numba.set_num_threads`` or ``NUMBA_NUM_THREADS``), at most the
   cores this process may run on (its CPU affinity), less the cores other processes keep
   busy as the run starts (:func:`busy_cores`, at least one left).  Threads that share a
   core with a busy neighbour wait for each other at every parallel region's barrier (a
   time slice each): on 2 cores beside two busy processes an elliptical slice step of the
   coal-mining LGCP took 1.38 ms on 2 threads and 0.50 ms on 1 (quiet: 0.27 ms on 2).

A BLAS thread count the user set in the environment (``OPENBLAS_NUM_THREADS``,
``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``) is left alone, and ``LATTICE_LGM_FFT_THREADS``
still fixes FFTW's; the budget records what it applied (:meth:`ThreadBudget.to_attrs`, stored
in a run's attrs).  Draws do not depend on the budget (DESIGN §5: each chain has its own
stream; reductions use fixed partitions; FFTW_ESTIMATE plans give the same bits on any
number of threads), which the tests check.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from ._validation import positive_int
from .errors import InvalidParameterError

#: the environment variable naming the run's thread budget (an integer >= 1)
THREADS_ENV = "LATTICE_LGM_THREADS"
#: environment variables by which a user fixes the BLAS library's threads (then kept)
BLAS_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def busy_cores(samples: int = 5, interval: float = 0.002) -> float:
    """Cores of this process's affinity that other processes keep busy now (0 if unknown).

    Linux's count of runnable tasks (``/proc/loadavg``, the fourth field) less this
    process's own runnable threads (``/proc/self/task``: the reading thread, and e.g.
    OpenBLAS's workers, which yield in a loop for a while after each call), its minimum over
    ``samples`` readings ``interval`` seconds apart (a task that runs for a moment is not a
    busy neighbour), scaled by the share of the machine's CPUs this process may use (a
    container pinned to 2 of 64 cores sees the host's count).

    Returns
    -------
    float
    """
    counts = []
    try:
        for i in range(samples):
            if i:
                time.sleep(interval)
            with open("/proc/loadavg") as fh:
                running = int(fh.read().split()[3].split("/")[0])
            counts.append(running - _own_runnable_threads())
    except (OSError, ValueError, IndexError):  # not Linux, or an unexpected format
        return 0.0
    mine = available_cores()
    return max(0, min(counts)) * mine / max(mine, os.cpu_count() or 1)


#: the share of memory one step may plan to use: an in-memory run's draws (of physical memory),
#: a model build (of the memory available: the sampler needs the rest)
MEMORY_FRACTION = 0.5


def available_memory() -> float:
    """Bytes of memory available to a new allocation now (Linux ``MemAvailable``).

    Elsewhere the physical memory.
    """
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024.0
    except (OSError, ValueError, IndexError):
        pass
    return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def _own_runnable_threads() -> int:
    """Threads of this process in state R (running or runnable), at least 1 (the caller)."""
    n = 0
    for task in os.scandir("/proc/self/task"):
        with contextlib.suppress(OSError, IndexError):  # a thread may end meanwhile
            with open(f"{task.path}/stat") as fh:
                # the state follows the command name in parentheses, which may hold spaces
                n += fh.read().rsplit(")", 1)[1].split()[0] == "R"
    return max(1, n)


@dataclass(frozen=True)
class ThreadBudget:
    """How a run's threads are shared (see the module docstring).

    Attributes
    ----------
    threads : int
        Cores the run may use.
    chains : int
        Chains advanced side by side (the width of the chains' thread pool and of Numba's
        ``prange`` over chains): ``min(threads, n_chains)``.
    inner : int
        Threads inside one chain's transforms and BLAS calls: ``max(1, threads // chains)``.
    source : str
        Where ``threads`` came from: ``"argument"``, ``"LATTICE_LGM_THREADS"`` or ``"numba"``.
    blas : int or None
        BLAS threads applied during the run (None: the user's own setting, left alone).
    busy : float or None
        Cores other processes kept busy as the default was decided (None: the user chose
        ``threads``).
    """

    threads: int
    chains: int
    inner: int
    source: str
    blas: int | None
    busy: float | None = None

    def describe(self) -> str:
        """One line for a run's log, e.g. ``threads: 2 (2 chains side by side, ...)``."""
        blas = "the user's setting" if self.blas is None else str(self.blas)
        busy = (f", {self.busy:.0f} core(s) busy with other processes"
                if self.busy is not None and round(self.busy) >= 1 else "")
        return (f"threads: {self.threads} (from {self.source}{busy}): {self.chains} chain(s) "
                f"side by side, {self.inner} thread(s) inside each; BLAS {blas}")

    def to_attrs(self) -> dict[str, Any]:
        """A plain dict for a run's attrs (``thread_budget``)."""
        return asdict(self)


def env_int(name: str, remedy: str) -> int:
    """An environment variable as an int >= 1, else raise naming it."""
    value = os.environ[name]
    if not value.strip().isdigit() or int(value) < 1:
        raise InvalidParameterError(f"{name}={value!r} must be an integer >= 1; {remedy}.")
    return int(value)


def thread_budget(n_chains: int, threads: int | None = None) -> ThreadBudget:
    """The budget for a run of ``n_chains`` chains in this process.

    Parameters
    ----------
    n_chains : int
        Chains this process advances (>= 1).
    threads : int, optional
        Cores the run may use; default ``LATTICE_LGM_THREADS``, else Numba's thread count,
        capped at the cores this process may run on less those other processes keep busy
        (:func:`busy_cores`; at least 1).

    Returns
    -------
    ThreadBudget

    Raises
    ------
    InvalidParameterError
        ``threads`` or ``LATTICE_LGM_THREADS`` not an integer >= 1.
    """
    import numba

    n_chains = positive_int("n_chains", n_chains, "a run has at least one chain")
    busy = None
    if threads is not None:
        n = positive_int("threads", threads, "give the cores the run may use, or leave it out "
                         "for the default")
        source = "argument"
    elif os.environ.get(THREADS_ENV):
        n = env_int(THREADS_ENV, "unset it or give the cores the run may use")
        source = THREADS_ENV
    else:
        busy = busy_cores()
        n = max(1, min(numba.get_num_threads(), available_cores() - round(busy)))
        source = "numba"
    # Numba cannot run more threads than it started with (NUMBA_NUM_THREADS, default the
    # machine's CPUs): the chains side by side are capped there too
    chains = min(n, n_chains, numba.config.NUMBA_NUM_THREADS)
    inner = max(1, n // chains)
    blas = None if any(os.environ.get(k) for k in BLAS_ENV) else inner
    return ThreadBudget(threads=n, chains=chains, inner=inner, source=source, blas=blas,
                        busy=busy)


# the run's budget is the process's (chains run in pool threads that must see it too); which
# threads advance one chain each is per thread
_BUDGET: ThreadBudget | None = None
_LOCAL = threading.local()


def current() -> ThreadBudget | None:
    """The budget :func:`using` applies (None outside a run)."""
    return _BUDGET


def inner_threads() -> int | None:
    """FFT threads for work in this thread (None: no budget, and not a chain's thread).

    1 in a thread that advances one chain (:func:`chain_thread_init`), else the budget's
    ``inner``.
    """
    if getattr(_LOCAL, "one_chain", False):
        return 1
    b = current()
    return None if b is None else b.inner


def chain_thread_init() -> None:
    """Initialise a thread that advances one chain: single-threaded kernels and transforms.

    The initialiser of joint HMC's, the warm start's and the elliptical slice noise pool's
    threads, so that ``k`` chains use ``k`` cores, not ``k`` pools.
    """
    import numba

    _LOCAL.one_chain = True
    numba.set_num_threads(1)


def chain_threads(n_chains: int, threads: int | None = None) -> int:
    """Threads to advance ``n_chains`` chains side by side (joint HMC, the warm start).

    ``threads`` (a sampler's own setting) wins; else the current budget's ``chains``; else
    the cores this process may use.  Never more than the chains.
    """
    if threads is not None:
        k = positive_int("threads", threads, "the number of chains advanced at once, e.g. 2")
    else:
        b = current()
        k = available_cores() if b is None else b.chains
    return max(1, min(n_chains, k))


@contextlib.contextmanager
def using(budget: ThreadBudget) -> Iterator[ThreadBudget]:
    """Apply ``budget`` to the process for the ``with`` block, then restore every pool.

    Numba's thread count (per calling thread) becomes ``budget.chains`` — the width of the
    chains' thread pool (:mod:`lattice_lgm.samplers.ess`) and of ``prange`` over chains —
    and the BLAS library's ``budget.blas`` (threadpoolctl; skipped when None).  FFTW plans
    made or chosen while it is active use ``budget.inner`` threads
    (:func:`lattice_lgm.priors._fft.default_threads`).
    """
    import numba
    from threadpoolctl import threadpool_limits

    global _BUDGET
    before = numba.get_num_threads()
    outer = _BUDGET
    numba.set_num_threads(budget.chains)
    _BUDGET = budget
    try:
        if budget.blas is None:
            yield budget
        else:
            with threadpool_limits(limits=budget.blas, user_api="blas"):
                yield budget
    finally:
        _BUDGET = outer
        numba.set_num_threads(before)


_CONTROLLER: list[Any] = []


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """One BLAS and one Numba thread for the block, unless a run's budget is in force.

    For small dense algebra outside ``sample()`` (the GP classifier's and the GPLVM's
    matrices are N × N: extra threads only contend).  :func:`using` with a one-thread budget,
    less its cost: that builds a threadpoolctl controller per call (≈ 5 ms, as long as an HMC
    sweep of n = 10); here one is built at the first call and reused (0.02 ms).  A BLAS thread
    count the user set in the environment is left alone, as the library's budget does.
    """
    import numba
    from threadpoolctl import ThreadpoolController

    if current() is not None or any(os.environ.get(k) for k in BLAS_ENV):
        yield
        return
    if not _CONTROLLER:
        _CONTROLLER.append(ThreadpoolController())
    before = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        with _CONTROLLER[0].limit(limits=1, user_api="blas"):
            yield
    finally:
        numba.set_num_threads(before)
