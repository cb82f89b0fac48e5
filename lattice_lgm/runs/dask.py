"""Chain blocks as Dask tasks writing one shared store."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .._validation import positive_int
from ..errors import InvalidParameterError
from ..samplers import chain_rngs
from ..store.reading import open_store
from ..store.writer import RunStore
from ..threads import BLAS_ENV, thread_budget
from .plan import _Plan
from .resources import _check_resources


def chain_blocks(chains: int, per_task: int) -> list[list[int]]:
    """Contiguous blocks of ``per_task`` chains covering ``range(chains)``."""
    per = positive_int("chains_per_task", per_task, "chains per Dask task, e.g. 1")
    return [list(range(a, min(a + per, chains))) for a in range(0, chains, per)]


@contextlib.contextmanager
def dask_client(workers: int | None, scheduler: str | None) -> Iterator[Any]:
    """A Dask client, closed (and the environment restored) after the ``with`` block.

    On a local cluster of ``workers`` single-threaded processes, or on the running scheduler
    at address ``scheduler``.
    """
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError as exc:  # pragma: no cover - an optional extra
        raise InvalidParameterError(
            "the Dask path needs dask.distributed: pip install 'lattice_lgm[dask]'.") from exc
    cluster = None
    # distributed's nanny writes OMP/MKL/OPENBLAS_NUM_THREADS=1 into this process's environment
    # for its workers and leaves them there: afterwards they would read as the user's own BLAS
    # setting (lattice_lgm.threads); put the environment back when done
    saved_env = {k: os.environ.get(k) for k in BLAS_ENV}
    if workers is not None:
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        client = Client(cluster)
    else:
        client = Client(scheduler)
    try:
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _sample_dask(model: Any, *, store, workers, scheduler, chains_per_task, resume,
                 kwargs, run_block: Any) -> Any:
    """Run the chain blocks as Dask tasks; ``run_block`` is the task (``entry._run_block``)."""
    if store is None:
        raise InvalidParameterError(
            "the Dask path writes into a store every worker can reach; give store=path.")
    if workers is not None and scheduler is not None:
        raise InvalidParameterError(
            f"give dask_workers={workers!r} (a LocalCluster) or dask_scheduler={scheduler!r} "
            "(an existing cluster), not both.")
    if workers is not None:
        workers = positive_int("dask_workers", workers, "worker processes, e.g. 2")
        # the LocalCluster's workers are single-threaded processes: one thread per block
        # unless the user says otherwise
        kwargs = {**kwargs, "threads": 1 if kwargs.get("threads") is None else kwargs["threads"]}
    chains = positive_int("chains", kwargs["chains"], "e.g. 4")
    blocks = chain_blocks(chains, chains_per_task)
    path = Path(store)
    if not resume:
        # lay the store out here (validation, refusals and the resource check happen once,
        # before any task starts); the tasks then join it block by block
        _create_only(model, path, kwargs, blocks)
    with dask_client(workers, scheduler) as client:
        futures = [client.submit(run_block, model, str(path), b, resume, kwargs,
                                 pure=False, key=f"lattice-lgm-chains-{b[0]}-{b[-1]}")
                   for b in blocks]
        client.gather(futures)

    return open_store(path)


def _create_only(model: Any, path: Path, kwargs: dict, blocks: list[list[int]]) -> None:

    kw = {k: kwargs[k] for k in ("draws", "tune", "chains", "random_seed", "thin",
                                 "thin_fields", "checkpoint_every", "representation",
                                 "n_latent", "discard_tuned_samples", "thresholds", "config",
                                 "step")}
    if kw["random_seed"] is None:
        raise InvalidParameterError(
            "the Dask path needs random_seed (every task must draw from the run's streams).")
    plan = _Plan(model, chain_ids=None, **kw)
    # the store's layout only: no warm start (each block's task starts its own chains)
    state = plan.view.init_state(chain_rngs(plan.seed, [0]), [0], warm=False)
    specs, coords = plan.specs(plan.view.record(state))
    _check_resources(specs, path, kwargs.get("max_disk_gb"), None)
    attrs = plan.attrs()
    attrs["chain_blocks"] = blocks
    # each task applies its own budget (its worker's cores); a LocalCluster's tasks run with
    # the 1 thread _sample_dask passes, a scheduler's with the user's threads or the default
    t = kwargs.get("threads")
    attrs["thread_budget"] = (thread_budget(len(blocks[0]), t).to_attrs() if t is not None
                              else "each Dask worker's default")
    RunStore.create(path, specs, coords, attrs)


#: errors of the filesystem a user can fix, reported as such rather than as a traceback
