"""``sample()`` and ``resume()``."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .._validation import check_bools, positive_float, positive_int
from ..errors import InvalidParameterError
from ..samplers import chain_rngs
from ..settings import RUN_DEFAULTS
from ..store.base import CheckpointError, StoreExistsError
from ..store.reading import check_compatible, open_store, read_config
from ..store.writer import RunStore
from ..threads import ThreadBudget, thread_budget, using
from .dask import _sample_dask
from .loop import _Runner
from .plan import _Plan
from .resources import _check_resources, _check_sampler_memory, _state_bytes
from .sinks import MemorySink, StoreSink
from .storeops import (
    _STORE_ERRNOS,
    _block_draws,
    _check_writable,
    _config_with_draws,
    _extended_elsewhere,
    _grow_under_lock,
    _recommit,
    _require_finished,
    _require_intact,
    _store_write_error,
    _with_draws,
)


def sample(
    model: Any,
    draws: int = RUN_DEFAULTS.draws,
    tune: int = RUN_DEFAULTS.tune,
    chains: int = RUN_DEFAULTS.chains,
    random_seed: int | None = None,
    store: str | os.PathLike | None = None,
    *,
    thin: int = RUN_DEFAULTS.thin,
    thin_fields: int = RUN_DEFAULTS.thin_fields,
    checkpoint_every: int | None = None,
    step: Any = None,
    representation: str = RUN_DEFAULTS.representation,
    n_latent: int = RUN_DEFAULTS.n_latent,
    initvals: Sequence[Mapping[str, float]] | None = None,
    discard_tuned_samples: bool = RUN_DEFAULTS.discard_tuned_samples,
    progressbar: bool = True,
    resume: bool = False,
    chain_ids: Sequence[int] | None = None,
    thresholds: Sequence[float] | None = None,
    config: Mapping[str, Any] | None = None,
    max_disk_gb: float | None = None,
    max_memory_gb: float | None = None,
    dask_workers: int | None = None,
    dask_scheduler: str | None = None,
    chains_per_task: int = RUN_DEFAULTS.chains_per_task,
    threads: int | None = None,
    extend: int | None = None,
) -> Any:
    """Run ``chains`` Gibbs chains of ``model`` and return the draws in ArviZ layout.

    Parameters
    ----------
    model : LGCP or LatentGaussianModel
        The model: an LGCP (its ``sampler()`` gives the default Gibbs sweep), or any latent
        Gaussian model — GP regression or classification on a ``DensePrior`` among them —
        run with one hyperparameter move per sweep (if any are sampled) and ``n_latent``
        elliptical slice updates.
    draws : int
        Stored draws per chain after tuning (each ``thin`` sweeps).
    tune : int
        Warm-up sweeps per chain (discarded unless ``discard_tuned_samples=False``).
    chains : int
        Total chains of the run (chain ``i`` has its own stream, DESIGN §5).
    random_seed : int, optional
        The run's seed (drawn from OS entropy and recorded in the attrs when omitted).
    store : path, optional
        A zarr store to stream into (created; an existing one needs ``resume=True``).
        ``None``: in memory.
    thin : int
        Sweeps per stored draw.
    thin_fields : int
        Keep the field of every k-th stored draw (float32); ``0`` keeps none (hyperparameters,
        coefficients and the online summaries only).  ``k > 1`` puts fields in the
        ``posterior_fields`` group, whose ``draw`` coordinate names the posterior draws.
    checkpoint_every : int, optional
        Draws per chunk and between checkpoints (default 100).
    step : Gibbs, optional
        A custom sweep (default ``model.sampler(representation, n_latent=n_latent)``).
    representation, n_latent
        Of the default sweep: ``"auto"`` (default) takes the model's measured default
        (:meth:`LGCP.default_method`: joint HMC on circulant priors, ``prior-white`` otherwise);
        ``"hmc"``, or a Murray & Adams (2010) representation with ``n_latent`` ESS updates
        per sweep.
    initvals : sequence of dict, optional
        Starting hyperparameters per chain (default: ``model.chain_starts``, overdispersed).
    discard_tuned_samples : bool
        Keep the warm-up draws in ``warmup_posterior`` / ``warmup_sample_stats`` when False.
    progressbar : bool
        A progress bar (terminal) or a log line every 30 s (otherwise), on stderr.
    resume : bool
        Continue the run in ``store`` from its newest checkpoint (same data, settings and
        library versions, checked).
    extend : int, optional
        Add this many posterior draws to the *finished* run in ``store`` (sampled with the
        other arguments as given, ``draws`` included): every chain continues from its last
        state into the same store, whose arrays grow; the result is byte for byte the store
        of a run that asked for ``draws + extend`` from the start (tested).  For a run the
        summary calls unconverged.  Not for stores written by chain blocks.
    chain_ids : sequence of int, optional
        Run only these (contiguous) global chains of the ``chains``, writing their own chunks of
        one shared store (job arrays: one process per block of chains).
    thresholds : sequence of float, optional
        Relative-risk levels of the online exceedance counts (default
        :data:`lattice_lgm.settings.DEFAULT_THRESHOLDS`).
    config : mapping, optional
        The resolved run configuration (the CLI passes it), stored in the attrs.
    max_disk_gb, max_memory_gb : float, optional
        Refuse before starting when the projected store size (uncompressed) or in-memory size
        exceeds these (defaults: free disk space; half the physical memory).
    dask_workers : int, optional
        Run blocks of ``chains_per_task`` chains as tasks on a Dask ``LocalCluster`` of this many
        worker processes (one thread each), all writing into ``store``.
    dask_scheduler : str, optional
        Address of a running Dask scheduler (``tcp://host:8786``) to run the chain blocks on;
        ``store`` must be on a filesystem every worker sees.
    chains_per_task : int
        Chains per Dask task (a contiguous block; each block keeps its own checkpoints).
    threads : int, optional
        Cores this run may use, shared by Numba, the BLAS library and FFTW without
        oversubscription (:func:`lattice_lgm.threads.thread_budget`: over chains when there
        are several, inside one field's transforms when there is one).  Default:
        ``LATTICE_LGM_THREADS``, else Numba's thread count (at most the usable cores); on a
        Dask ``LocalCluster`` each single-threaded worker runs its block with 1.  The budget
        applied is stored in the attrs (``thread_budget``); the draws do not depend on it.

    Returns
    -------
    xarray.DataTree
        Groups ``posterior`` (hyperparameters (chain, draw), ``beta`` (chain, draw, covariate),
        ``f`` (chain, draw, *lattice dims) float32), ``sample_stats`` (``loglik``, ``n_loglik``,
        ``n_cov``, ``accepted`` and the sweep's own under ArviZ's names: joint HMC's
        ``acceptance_rate``, ``step_size``, ``n_steps``, ``diverging``), ``summaries``
        (per-chain online means and variances — LGCP: of intensity and relative risk, with
        exceedance counts; other models: of ``f`` — and ``n_draws``), ``observed_data``
        (LGCP: counts; else ``data``), ``constant_data``; ``posterior_fields`` / ``warmup_*``
        as described above.  Backed by the store when ``store`` is given.

    Raises
    ------
    InvalidParameterError
        Bad arguments (before any sweep or store write).
    StoreExistsError, ResumeMismatchError, CheckpointError, ResourceLimitError
    """
    check_bools(discard_tuned_samples=discard_tuned_samples, progressbar=progressbar,
                 resume=resume)
    for name, v in (("max_disk_gb", max_disk_gb), ("max_memory_gb", max_memory_gb)):
        if v is not None:
            positive_float(name, v, "a size in GiB > 0, or None for the free disk / memory")
    if extend is not None and (dask_workers is not None or dask_scheduler is not None):
        raise InvalidParameterError(
            "extend= runs in this process; leave out dask_workers/dask_scheduler.")
    if dask_workers is not None or dask_scheduler is not None:
        return _sample_dask(
            model, store=store, workers=dask_workers, scheduler=dask_scheduler,
            chains_per_task=chains_per_task, resume=resume,
            kwargs=dict(threads=threads, draws=draws, tune=tune, chains=chains,
                        random_seed=random_seed,
                        thin=thin, thin_fields=thin_fields, checkpoint_every=checkpoint_every,
                        step=step, representation=representation, n_latent=n_latent,
                        initvals=initvals, discard_tuned_samples=discard_tuned_samples,
                        thresholds=thresholds, config=config, max_disk_gb=max_disk_gb,
                        max_memory_gb=max_memory_gb), run_block=_run_block)
    old_draws = None
    if extend is not None:
        more = positive_int("extend", extend, "posterior draws to add to a finished run, e.g. "
                            "500")
        if store is None or resume:
            raise InvalidParameterError(
                "extend= continues the finished run in store=path (not with resume=True).")
        old_draws = int(draws)
        if chain_ids is not None:
            # a chain block: its own length, which another block's extension may have
            # left behind the store's (the store then grows once, see _grow_under_lock)
            old_draws = _block_draws(Path(store), chain_ids)
        draws, resume = old_draws + more, True
        config = _config_with_draws(config, draws)  # what a run of `draws` would store
    plan = _Plan(model, draws=draws, tune=tune, chains=chains, random_seed=random_seed,
                 thin=thin, thin_fields=thin_fields, checkpoint_every=checkpoint_every,
                 representation=representation, n_latent=n_latent,
                 discard_tuned_samples=discard_tuned_samples, chain_ids=chain_ids,
                 thresholds=thresholds, config=config, step=step)
    if resume and store is None:
        raise InvalidParameterError("resume=True needs store=path (the run to continue).")
    if initvals is not None and len(initvals) != len(plan.chain_ids):
        raise InvalidParameterError(
            f"initvals has {len(initvals)} entries; give one mapping per chain "
            f"({len(plan.chain_ids)}).")
    budget = thread_budget(len(plan.chain_ids), threads)
    with using(budget):
        return _sample_in_process(plan, budget, store=store, resume=resume, chain_ids=chain_ids,
                                  initvals=initvals, step=step, progressbar=progressbar,
                                  max_disk_gb=max_disk_gb, max_memory_gb=max_memory_gb,
                                  old_draws=old_draws)


def _sample_in_process(plan: _Plan, budget: ThreadBudget, *, store, resume, chain_ids,
                       initvals, step, progressbar, max_disk_gb, max_memory_gb,
                       old_draws: int | None = None) -> Any:
    """:func:`sample` in this process, under ``budget`` (applied by the caller).

    ``old_draws``: the finished run's draws when :func:`sample` extends it (``extend=``).
    """
    # a draw of the layout: the state at the start (its record uses no randomness)
    probe_rngs = chain_rngs(plan.seed, plan.chain_ids)

    def start() -> Any:
        # the warm start (LGCPs) costs a mode and some ESS updates: a resume from a
        # checkpoint skips it
        st0 = plan.view.init_state(probe_rngs, list(plan.chain_ids), initvals)
        report = getattr(plan.view, "last_start_report", None)
        if progressbar and report is not None:
            print(report, file=sys.stderr, flush=True)
        return st0

    attrs = plan.attrs()
    attrs["thread_budget"] = budget.to_attrs()
    if progressbar:
        print(budget.describe(), file=sys.stderr, flush=True)
    _check_sampler_memory(plan, max_memory_gb, progressbar)

    path = None if store is None else Path(store)
    runner_sink: Any
    if path is None:
        state = start()
        specs, coords = plan.specs(plan.view.record(state))
        _check_resources(specs, None, max_disk_gb, max_memory_gb)
        sink = MemorySink(specs, coords, attrs)
        runner = _Runner(plan, sink, probe_rngs, step=step, progressbar=progressbar,
                         checkpointing=False)
        runner.run(state, None)
        return sink.tree()
    st = None
    if not resume:
        _check_writable(path)
    try:
        if resume:
            st = RunStore(path, rebuild_markers=True)  # a lost .commits/ is rebuilt below
            # an extension is checked against the run as it was asked for (or as another
            # chain block has already extended it)
            stored = int(dict(st.attrs.get("run_config", {})).get("draws", -1))
            if old_draws is not None and stored not in (old_draws, plan.draws):
                raise _extended_elsewhere(path, stored, old_draws, plan.draws)
            before = (attrs if old_draws is None or stored == plan.draws
                      else _with_draws(attrs, old_draws))
            check_compatible(st.attrs, before)
            if old_draws is not None:
                _require_finished(st, plan, old_draws)
            _require_intact(path, plan.chain_ids)  # before anything is written
            st.lock_chains(plan.chain_ids)  # before touching their files: one writer per chain
            st.remove_orphans(plan.chain_ids, plan.tag)  # what a killed writer left half-written
            runner_sink = StoreSink(st)
            runner = _Runner(plan, runner_sink, probe_rngs, step=step, progressbar=progressbar,
                             checkpointing=True)
            try:
                meta, arrays = st.load_checkpoint(tag=plan.tag)
            except CheckpointError:
                blocks = sorted({f.name.split("-", 1)[1].rsplit("-", 1)[0] for f in
                                 (Path(path) / ".checkpoint").glob("ckpt-c*.npz")})
                if plan.tag == "" and blocks:
                    raise InvalidParameterError(
                        f"{path} was written by chain blocks ({', '.join(blocks)}); resume (or "
                        "extend) each block with its chains (chain_ids=..., CLI --chains A-B)."
                    ) from None
                if plan.tag != "" and st._generations(""):
                    raise InvalidParameterError(
                        f"{path} was written by one run of every chain, not by chain blocks; "
                        f"resume it whole (without chain_ids, CLI without --chains), not chains "
                        f"{plan.chain_ids}.") from None
                mine = set(plan.chain_ids)  # another block's finished draws do not count
                if mine & (set(st.committed("posterior")) | set(st.committed("warmup"))):
                    raise
                meta = None  # killed before the first checkpoint: start over in the same store
            if meta is None:
                runner.run(start(), None)
            else:
                # an extended block's checkpoint was written by its run of old_draws, whatever
                # length the store (grown by another block) says now
                check_compatible(meta, before if old_draws is None
                                 else _with_draws(attrs, old_draws))
                if st.markers_rebuilt:
                    _recommit(st, plan, meta)
                state = runner.restore(meta, arrays)
                if old_draws is not None:
                    if (meta["phase"], int(meta["i"])) != ("posterior", old_draws):
                        raise InvalidParameterError(
                            f"{path}'s newest checkpoint is at {meta['phase']} draw "
                            f"{meta['i']}, not at the end of its {old_draws} draws; resume "
                            "it before extending.")
                    _grow_under_lock(st, plan, old_draws, state, attrs)
                runner.run(state, (meta["phase"], int(meta["i"]), int(meta["sweeps_done"])))
        else:
            state = start()
            specs, coords = plan.specs(plan.view.record(state))
            joining = chain_ids is not None and path.exists()
            if joining:
                st = RunStore(path)
                check_compatible(st.attrs, attrs)
                st.lock_chains(plan.chain_ids)
                mine = [c for c in plan.chain_ids if st.committed("posterior").get(c)]
                if mine:
                    raise StoreExistsError(
                        f"chains {mine} already have draws in {path}; resume them (resume=True "
                        "with the same chain_ids) instead of starting again.")
            else:
                _check_resources(specs, path, max_disk_gb, max_memory_gb,
                                 checkpoint_bytes=_state_bytes(state))
                st = RunStore.create(path, specs, coords, attrs)
                st.lock_chains(plan.chain_ids)
            runner = _Runner(plan, StoreSink(st), probe_rngs, step=step, progressbar=progressbar,
                             checkpointing=True)
            runner.run(state, None)
    except OSError as exc:
        if exc.errno not in _STORE_ERRNOS:
            raise
        raise _store_write_error(path, exc) from exc
    finally:
        if st is not None:
            st.unlock()

    return open_store(path)




def _run_block(model: Any, store: str, block: list[int], resume: bool, kwargs: dict) -> int:
    """A Dask task: one block of chains into the shared store (runs in a worker process)."""
    sample(model, store=store, chain_ids=block, resume=resume, progressbar=False, **kwargs)
    return len(block)


def resume(store: str | os.PathLike, model: Any = None, *, step: Any = None,
           progressbar: bool = True, chain_ids: Sequence[int] | None = None,
           dask_workers: int | None = None, dask_scheduler: str | None = None,
           threads: int | None = None, extend: int | None = None) -> Any:
    """Continue a stopped or crashed run from its newest checkpoint(s), or extend a finished one.

    Parameters
    ----------
    store : path
        The run's store.
    model : LGCP or any model :func:`sample` takes
        The model the run sampled (``lattice_lgm.resume(store)`` rebuilds it from the
        configuration stored with runs started from the command line or with ``config=``).
    step : Gibbs, optional
        The custom sweep the run was started with (``sample(step=...)``); needed for such a
        run, whose recorded settings it must match.  Runs of the default sweep take none.
    chain_ids : sequence of int, optional
        Resume only this block of chains (the ``--chains`` of a job-array task).  Default: the
        whole run — every chain block of a Dask run, in turn (or on Dask with
        ``dask_workers``/``dask_scheduler``).
    threads : int, optional
        The resumed run's thread budget (:func:`sample`); it may differ from the original
        run's: the draws do not depend on it.
    extend : int, optional
        Add this many posterior draws to the finished run (``sample(..., extend=)`` with the
        stored settings; CLI ``lattice-lgm extend STORE --draws N``).

    Returns
    -------
    xarray.DataTree
    """
    rs = RunStore(store)
    attrs = rs.attrs
    rc = dict(attrs.get("run_config", {}))
    if "step" in rc and step is None:
        raise InvalidParameterError(
            f"{store} was sampled with a custom sweep ({rc['step']}); pass the same sweep: "
            "resume(store, model, step=...).")
    if step is not None and "step" not in rc:
        raise InvalidParameterError(
            f"step={step!r} given, but {store} was sampled with the default sweep "
            f"(representation={rc.get('representation')!r}, n_latent={rc.get('n_latent')!r}); "
            "resume it without step.")
    cfg = read_config(store)
    if model is None:
        raise InvalidParameterError(
            f"model=None: pass the model the run in {store} sampled (resume(store, model)); "
            + ("a run started from a configuration rebuilds it itself: lattice_lgm.resume("
               "store) or `lattice-lgm resume`." if cfg else
               "it was written from Python without a config, so it cannot be rebuilt."))
    kw = dict(draws=rc["draws"], tune=rc["tune"], chains=rc["chains"], random_seed=rc["seed"],
              store=store, thin=rc["thin"], thin_fields=rc["thin_fields"],
              checkpoint_every=rc["checkpoint_every"],
              discard_tuned_samples=rc["discard_tuned_samples"], thresholds=rc["thresholds"],
              config=cfg or None, resume=True, step=step, threads=threads)
    if step is None:  # the default sweep: its representation and n_latent
        kw.update(representation=rc["representation"], n_latent=rc["n_latent"])
    blocks = attrs.get("chain_blocks")
    if extend is not None:
        if dask_workers is not None or dask_scheduler:
            raise InvalidParameterError(
                "extend runs in this process; leave out the Dask options (extend chain blocks "
                "one by one, or side by side with --chains A-B, each in its own process).")
        kw.update(resume=False, extend=extend)
        if chain_ids is not None or not blocks:
            return sample(model, progressbar=progressbar, chain_ids=chain_ids, **kw)
        for b in blocks:  # the first block grows the store, the others find it grown
            sample(model, progressbar=progressbar, chain_ids=b, **kw)
        return open_store(store)
    if chain_ids is not None or not blocks:
        if dask_workers is not None or dask_scheduler is not None:
            raise InvalidParameterError(
                "this store was not written by chain blocks; resume it in-process (no Dask "
                "options) or with its --chains.")
        return sample(model, progressbar=progressbar, chain_ids=chain_ids, **kw)
    if dask_workers is not None or dask_scheduler is not None:
        per = len(blocks[0])
        return sample(model, progressbar=progressbar, dask_workers=dask_workers,
                      dask_scheduler=dask_scheduler, chains_per_task=per, **kw)
    for b in blocks:
        sample(model, progressbar=progressbar, chain_ids=b, **kw)
    return open_store(store)
