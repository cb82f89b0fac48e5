"""Projections of a run's memory, disk and time, refused before the work (issue 27)."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import threads
from ..errors import ResourceLimitError
from ..priors import GaussianPrior
from ..store.base import KEEP_GENERATIONS, VarSpec
from ..threads import MEMORY_FRACTION


# -- public API ----------------------------------------------------------------------------------
def _projected_bytes(specs: Sequence[VarSpec]) -> int:
    return int(sum(np.prod(s.shape) * np.dtype(s.dtype).itemsize for s in specs))


def _state_bytes(state: Any) -> int:
    """Bytes of a sampler state's arrays: the bulk of one checkpoint (uncompressed npz)."""
    total = 0
    for v in (state.f, state.white, state.beta, state.loglik, *state.theta.values(),
              *(state.extras or {}).values()):
        with contextlib.suppress(TypeError, ValueError):  # an extra that is not numeric
            total += int(np.asarray(v).nbytes)
    return total


@dataclass(frozen=True)
class SamplerCost:
    """The default sampler's peak working memory and time per iteration.

    Power laws in the state size ``n`` (``prior.state_shape`` cells: the torus of a
    circulant prior, the padded lattice of a GMRF, the cells of a dense prior).

    Peak bytes are ``(shared + chains · per_chain) · n^p``: most of the peak is shared by the
    chains of a process (the warm start's and the adaptation's work arrays: one chain or two
    on a 5 m bei torus peaked within 1%), not one copy per chain.  Seconds are
    ``chains · iterations · seconds · n^q`` on the machine measured (2 cores).

    From ``benchmarks/perf/resources.py`` (``benchmarks/results/resources.json``): the rate
    of the largest case, the exponent from the two largest.  Rough projections, to refuse
    what cannot fit and to say how long a run will take, not predictions to the second.
    """

    shared: float
    per_chain: float
    p: float
    seconds: float
    q: float
    measured: str

    def peak_bytes(self, n: float, chains: int) -> float:
        """Peak bytes of ``chains`` chains in one process on a state of ``n`` cells."""
        return (self.shared + chains * self.per_chain) * n**self.p

    def seconds_per_iteration(self, n: float) -> float:
        """Seconds per iteration and chain on a state of ``n`` cells."""
        return self.seconds * n**self.q


#: per backend (see :class:`SamplerCost`): ``benchmarks/results/resources.json``, bei with two
#: covariates, the default method (joint HMC; ``prior-white`` on dense), 2-core machine.  The
#: benchmark's runs (20 + 10 iterations) are mostly warm-up, whose unadapted step sizes make
#: long trajectories: against the demo (bei at 5 m, 4 × 1200 iterations, sampled in 261 s on
#: the idle machine: 0.0544 s per chain and iteration on a 207 360-cell torus) its 2.57e-7
#: overstated the time 6×, so the circulant level is the demo's (the exponent stays the
#: benchmark's); the GMRF and dense times are the benchmark's and likely as pessimistic.
SAMPLER_COST: dict[str, SamplerCost] = {
    "circulant": SamplerCost(2373.0, 26.5, 1.0, 4.18e-8, 1.15,
                             "≈ 2.3 KiB per torus cell, measured on bei up to 1.04 M cells"),
    "gmrf": SamplerCost(176.1, 68.7, 1.27, 9.31e-8, 1.28,
                        "≈ 176 B · n^1.27, measured on bei up to 0.24 M cells"),
    "dense": SamplerCost(663.9, 319.8, 1.79, 7.38e-7, 1.88,
                         "≈ 664 B · N^1.79, measured on bei up to 1250 cells"),
}


def _backend_of(prior: Any) -> str | None:
    """The backend's name (``Capabilities.backend``), or None for a model without a prior."""
    return prior.capabilities.backend if isinstance(prior, GaussianPrior) else None


def _sampler_projection(plan: Any) -> tuple[float, str, SamplerCost] | None:
    """(state cells, the state described, the backend's cost), or None if not measured."""
    prior = getattr(plan.model, "prior", None)
    backend = _backend_of(prior)
    cost = SAMPLER_COST.get(backend or "")
    shape = getattr(prior, "state_shape", None)
    if cost is None or shape is None:
        return None
    return float(np.prod(shape)), f"a {' × '.join(map(str, shape))} {backend} state", cost


def _check_sampler_memory(plan: Any, max_memory_gb: float | None, progressbar: bool) -> None:
    """Refuse a run whose sampler would not fit in memory, before the warm start.

    With a progress bar, say what it will take.

    The projection is :data:`SAMPLER_COST` for the prior's backend at its state size and
    the chains in this process, against the memory available now (or ``max_memory_gb``).
    Issue 27: a run that does not fit should say so at once, not be killed by the kernel
    after its warm start.
    """
    proj = _sampler_projection(plan)
    if proj is None:
        return
    n, what, cost = proj
    k = len(plan.chain_ids)
    need = cost.peak_bytes(n, k)
    avail = threads.available_memory() if max_memory_gb is None else float(max_memory_gb) * 2**30
    if need > avail:
        fit = int((avail / n**cost.p - cost.shared) // cost.per_chain)
        fewer = (f"run at most {fit} chain(s) per process (chain_ids=..., CLI --chains A-B, "
                 "or Dask workers), " if 1 <= fit < k else "")
        raise ResourceLimitError(
            f"{k} chain(s) on {what} need ≈ {need / 2**30:.3g} GiB while sampling "
            f"({cost.measured}), over the {avail / 2**30:.3g} GiB "
            + ("available" if max_memory_gb is None else "of max_memory_gb")
            + f". Use a coarser cell_size, {fewer}a smaller range prior bound (the state "
            "grows with it), or a machine with more memory.")
    if progressbar:
        its = plan.tune + plan.draws
        secs = its * k * cost.seconds_per_iteration(n)
        print(f"projected: ≈ {need / 2**20:.4g} MiB and ≈ {_duration(secs)} for {k} chain(s) "
              f"× {its} iterations on {what} (rough: {cost.measured}; trajectory lengths "
              "vary with the posterior)", file=sys.stderr, flush=True)


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _check_resources(specs, store: Path | None, max_disk_gb, max_memory_gb,
                     checkpoint_bytes: int = 0) -> None:
    """Refuse a run whose draws (and, in a store, checkpoints) exceed memory or disk.

    ``checkpoint_bytes``: one checkpoint's size; ``KEEP_GENERATIONS + 1`` of them can sit on
    disk at once (the two kept and the one being written).  Issue 27: a checkpoint of bei at
    1 m was 263 MB against 47 MB of stored arrays, and was not counted.
    """
    need = _projected_bytes(specs)
    if store is not None:
        need += (KEEP_GENERATIONS + 1) * int(checkpoint_bytes)
    gb = need / 2**30
    if store is None:
        limit = max_memory_gb
        if limit is None:
            phys = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
            limit = MEMORY_FRACTION * phys / 2**30
        if gb > limit:
            raise ResourceLimitError(
                f"this in-memory run needs ≈{gb:.3g} GiB for its draws, over the limit "
                f"{limit:.3g} GiB (max_memory_gb); write to a store (store=path), thin the "
                "fields (thin_fields=k, or 0 for summaries only) or raise max_memory_gb.")
        return
    parent = store.parent if store.parent.exists() else Path(".")
    free = shutil.disk_usage(parent).free / 2**30
    limit = free if max_disk_gb is None else min(float(max_disk_gb), free)
    if gb > limit:
        raise ResourceLimitError(
            f"the store needs up to ≈{gb:.3g} GiB uncompressed (draws and "
            f"{KEEP_GENERATIONS + 1} checkpoints), over the limit {limit:.3g} GiB "
            f"({'free disk' if max_disk_gb is None else 'max_disk_gb'}); thin the fields "
            "(thin_fields=k, or 0 for summaries only), store fewer draws, or raise max_disk_gb.")


