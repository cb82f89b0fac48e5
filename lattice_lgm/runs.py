"""``sample()``: run chains of a model into an ArviZ-layout DataTree, in memory or a zarr store.

One *draw* is one Gibbs sweep (``thin`` sweeps per stored draw after tuning); ``draws`` counts
stored draws.  Fields are stored as float32 (``thin_fields`` keeps every k-th draw's field;
0 keeps none, only the online summaries and the hyperparameters).  With ``store=path`` the draws
stream into a zarr store (:mod:`lattice_lgm.store`) in aligned blocks, with a checkpoint every
``checkpoint_every`` draws from which :func:`resume` continues exactly: the resumed store holds
the same bytes as an uninterrupted run with the same seed (DESIGN §5 scope: same library
versions and CPU family), having lost at most one checkpoint interval of work.

Randomness (DESIGN §5): chain ``i`` of a run with seed ``s`` draws from
``SeedSequence(s, spawn_key=(i,))`` (:func:`lattice_lgm.samplers.chain_rngs`), so a chain's
draws do not depend on the other chains, on ``chain_ids`` splits or on thread counts.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ._validation import positive_float, positive_int
from .errors import InvalidParameterError, LatticeLGMError, ResourceLimitError
from .settings import RUN_DEFAULTS
from .store import (
    KEEP_GENERATIONS,
    PHASE_GROUPS,
    CheckpointError,
    RunStore,
    StoreExistsError,
    VarSpec,
    check_compatible,
    library_versions,
)
from .threads import BLAS_ENV, MEMORY_FRACTION, ThreadBudget, thread_budget, using

__all__ = ["ResourceLimitError", "StoreExistsError", "resume", "sample"]

#: default draws per chunk / checkpoint interval
DEFAULT_CHECKPOINT_EVERY = 100
#: seconds between progress records when stderr is not a terminal
LOG_INTERVAL = 30.0
PHASES = ("warmup", "posterior")
#: per phase: (draws, thinned fields, sample stats) groups — the store's own table
GROUPS = PHASE_GROUPS
STATS = (("loglik", "f8"), ("n_loglik", "i8"), ("n_cov", "i8"), ("accepted", "i8"))


def _nonneg_int(name: str, v: Any, hint: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
        raise InvalidParameterError(f"{name}={v!r} must be an int >= 0 ({hint}).")
    return int(v)


# -- the run plan ----------------------------------------------------------------------------------
class _Plan:
    """Everything fixed before the first sweep: sizes, layout, hashes (validated eagerly)."""

    def __init__(self, model: Any, *, draws, tune, chains, random_seed, thin, thin_fields,
                 checkpoint_every, representation, n_latent, discard_tuned_samples,
                 chain_ids, thresholds, config, step=None) -> None:
        from ._runview import view_of
        from .analysis import DEFAULT_THRESHOLDS

        self.view = view_of(model)
        self.draws = positive_int("draws", draws, "stored draws per chain, e.g. 1000")
        self.tune = _nonneg_int("tune", tune, "warm-up sweeps per chain, e.g. 1000")
        self.chains = positive_int("chains", chains, "e.g. 4 (R-hat needs several)")
        if random_seed is None:
            random_seed = int(np.random.SeedSequence().entropy % (2**63))
        self.seed = _nonneg_int("random_seed", random_seed, "the run's seed")
        self.thin = positive_int("thin", thin, "sweeps per stored draw, e.g. 1")
        self.thin_fields = _nonneg_int("thin_fields", thin_fields,
                                       "keep every k-th draw's field; 0 keeps none")
        ce = DEFAULT_CHECKPOINT_EVERY if checkpoint_every is None else checkpoint_every
        self.checkpoint_every = positive_int("checkpoint_every", ce,
                                             "draws between checkpoints, e.g. 100")
        if self.thin_fields > 1 and self.checkpoint_every % self.thin_fields:
            raise InvalidParameterError(
                f"checkpoint_every={self.checkpoint_every} must be a multiple of thin_fields="
                f"{self.thin_fields} (field chunks hold whole blocks of kept fields).")
        if representation == "auto":
            # the measured default per backend (issue 25, benchmarks/perf/mixing_lgcp.py)
            representation = self.view.default_representation()
        self.representation = representation
        self.n_latent = positive_int("n_latent", n_latent, "elliptical slice updates of the "
                                     "field per sweep, e.g. 10")
        if step is None:
            # build the default sweep once now, so that its settings are checked (e.g. a tune
            # too short for HMC's adaptation) before the warm start and any store write
            self.view.default_sweep(representation, self.n_latent, self.tune)
        self.discard = bool(discard_tuned_samples)
        ids = list(range(self.chains)) if chain_ids is None else [int(c) for c in chain_ids]
        if not ids or len(set(ids)) != len(ids) or min(ids) < 0 or max(ids) >= self.chains:
            raise InvalidParameterError(
                f"chain_ids={chain_ids!r} must be distinct chain indices in [0, {self.chains}) "
                f"(chains={self.chains} is the run's total).")
        self.chain_ids = ids
        self.tag = "" if chain_ids is None else f"-c{ids[0]}-{ids[-1]}"
        th = np.asarray(DEFAULT_THRESHOLDS if thresholds is None else thresholds, dtype=float)
        if th.ndim != 1 or th.size == 0 or not np.all(np.isfinite(th)) or np.any(th <= 0):
            raise InvalidParameterError(
                f"thresholds={thresholds!r} must be relative-risk levels > 0, e.g. (1.5, 2, 3).")
        self.thresholds = th
        self.model = model
        self.config = dict(config or {})
        self.lens = {"warmup": 0 if self.discard else self.tune, "posterior": self.draws}
        self.run_config = {
            "draws": self.draws, "tune": self.tune, "chains": self.chains, "seed": self.seed,
            "thin": self.thin, "thin_fields": self.thin_fields,
            "checkpoint_every": self.checkpoint_every, "representation": representation,
            "n_latent": self.n_latent, "discard_tuned_samples": self.discard,
            "thresholds": [float(x) for x in th],
        }
        if step is not None:
            # a custom sweep decides the moves: record its settings instead of the default
            # sweep's (which it does not use), so a resume with another sweep is refused
            from .samplers import sweep_settings

            self.run_config.update(representation=None, n_latent=None,
                                   step=sweep_settings(step))

    # -- data identity ----------------------------------------------------------------------------
    def data_hash(self) -> str:
        return self.view.data_hash()

    # -- layout -----------------------------------------------------------------------------------
    def field_draws(self, n: int) -> int:
        return 0 if self.thin_fields == 0 else -(-n // self.thin_fields)

    def specs(self, sample_record: dict[str, Any]) -> tuple[list[VarSpec], dict]:
        v = self.view
        dims, shape = v.dims, v.shape
        ce = self.checkpoint_every
        specs: list[VarSpec] = []
        coords: dict[str, dict[str, np.ndarray]] = {}
        lat_coords = dict(v.field_coords)
        for phase in PHASES:
            n = self.lens[phase]
            if n == 0:
                continue
            post, fields, stats = GROUPS[phase]
            chains = np.arange(self.chains)
            coords[post] = {"chain": chains, "draw": np.arange(n)}
            coords[stats] = {"chain": chains, "draw": np.arange(n)}
            for name in sample_record["scalars"]:
                specs.append(VarSpec(post, name, ("chain", "draw"), (self.chains, n), "f8", ce))
            if v.coef_names:
                specs.append(VarSpec(post, "beta", ("chain", "draw", "covariate"),
                                     (self.chains, n, len(v.coef_names)), "f8", ce))
                coords[post]["covariate"] = np.asarray(v.coef_names, dtype=str)
            if self.thin_fields == 1:
                specs.append(VarSpec(post, "f", ("chain", "draw", *dims),
                                     (self.chains, n, *shape), "f4", ce,
                                     attrs={"long_name": "latent field on the lattice"}))
                coords[post].update(lat_coords)
            elif self.thin_fields > 1:
                nf = self.field_draws(n)
                specs.append(VarSpec(fields, "f", ("chain", "draw", *dims),
                                     (self.chains, nf, *shape), "f4", ce // self.thin_fields))
                coords[fields] = {"chain": chains,
                                  "draw": np.arange(0, n, self.thin_fields), **lat_coords}
            for name, dt in STATS:
                specs.append(VarSpec(stats, name, ("chain", "draw"), (self.chains, n), dt, ce))
        # online summaries (over every stored posterior draw) and the data
        summ = dict(lat_coords, chain=np.arange(self.chains))
        coords["summaries"] = summ
        for name in v.summary_names:
            for stat in ("mean", "var"):
                specs.append(VarSpec("summaries", f"{name}_{stat}", ("chain", *dims),
                                     (self.chains, *shape), "f8"))
        if v.exceed_on is not None:
            summ["threshold"] = self.thresholds
            specs.append(VarSpec("summaries", "exceedance_count",
                                 ("chain", "threshold", *dims),
                                 (self.chains, len(self.thresholds), *shape), "i8"))
        specs.append(VarSpec("summaries", "n_draws", ("chain",), (self.chains,), "i8"))
        extra = v.extra_coords()
        for group, data in v.data_groups().items():
            coords[group] = dict(lat_coords)
            for name, (d, arr) in data.items():
                coords[group].update({k: c for k, c in extra.items() if k in d})
                specs.append(VarSpec(group, name, d, arr.shape, str(arr.dtype), data=arr))
        return specs, coords

    def attrs(self) -> dict[str, Any]:
        v = self.view
        prior = v.lgm.prior
        out = {
            "created_by": "lattice_lgm.sample",
            "model": type(self.model).__name__,
            "config": self.config,
            "run_config": self.run_config,
            "priors": v.priors_text(),
            "field_prior": prior.describe(),
            "versions": library_versions(),
            "data_sha256": self.data_hash(),
            "units": v.units,
            "dims": list(v.dims),
        }
        emb = getattr(prior, "embedding_shape", None)
        if emb is not None:
            out["embedding_shape"] = list(emb)
        return out


# -- sinks ---------------------------------------------------------------------------------------
class _MemorySink:
    """In-memory arrays with the store's layout; :meth:`tree` builds the DataTree."""

    def __init__(self, specs: list[VarSpec], coords: dict, attrs: dict) -> None:
        self.specs = {(s.group, s.name): s for s in specs}
        self.arrays = {}
        for s in specs:
            a = np.full(s.shape, s.fill(), dtype=s.dtype)
            if s.data is not None:
                a[...] = s.data
            self.arrays[(s.group, s.name)] = a
        self.coords, self._attrs = coords, attrs
        self.done: dict[str, dict[int, int]] = {}

    def write(self, group, name, chains, draws, data):
        self.arrays[(group, name)][chains, draws, ...] = data

    def read(self, group, name, chains, draws):
        return self.arrays[(group, name)][chains, draws, ...].copy()

    def commit(self, phase, counts):
        self.done.setdefault(phase, {}).update(counts)

    def tree(self) -> Any:
        import xarray as xr

        groups: dict[str, dict[str, Any]] = {}
        for (g, name), a in self.arrays.items():
            groups.setdefault(g, {})[name] = (self.specs[(g, name)].dims, a,
                                              self.specs[(g, name)].attrs)
        out = {"/": xr.Dataset(attrs=_plain(self._attrs))}
        for g, data in groups.items():
            out[g] = xr.Dataset(data, coords=self.coords.get(g, {}))
        return xr.DataTree.from_dict(out)


def _plain(d: dict) -> dict:
    import json

    from .store import _json

    return json.loads(_json(d))


class _StoreSink:
    def __init__(self, store: RunStore) -> None:
        self.store = store

    def write(self, group, name, chains, draws, data):
        self.store.write(group, name, chains, draws, data)

    def read(self, group, name, chains, draws):
        return self.store.read(group, name, chains, draws)

    def commit(self, phase, counts):
        self.store.commit(phase, counts)


# -- progress ------------------------------------------------------------------------------------
class _Progress:
    """A one-line bar with rate and ETA on a terminal; a log record every 30 s otherwise."""

    def __init__(self, total: int, enabled: bool, label: str) -> None:
        self.total, self.enabled, self.label = total, enabled, label
        self.tty = enabled and sys.stderr.isatty()
        self.t0 = time.monotonic()
        self.last = 0.0
        self.done0: int | None = None

    def update(self, done: int, phase: str) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if self.done0 is None:
            self.done0, self.t0 = done, now
        if done < self.total and now - self.last < (0.5 if self.tty else LOG_INTERVAL):
            return
        self.last = now
        rate = (done - self.done0) / max(now - self.t0, 1e-9)
        eta = (self.total - done) / rate if rate > 0 else float("inf")
        eta_s = "?" if not math.isfinite(eta) else time.strftime("%H:%M:%S", time.gmtime(eta))
        frac = done / self.total
        if self.tty:
            bar = "#" * int(30 * frac) + "-" * (30 - int(30 * frac))
            sys.stderr.write(f"\r{self.label} [{bar}] {done}/{self.total} sweeps ({phase}) "
                             f"{rate:.2f}/s ETA {eta_s}  ")
            if done >= self.total:
                sys.stderr.write("\n")
        else:
            sys.stderr.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {self.label}: {done}/"
                             f"{self.total} sweeps ({phase}), {rate:.2f} sweeps/s, ETA {eta_s}\n")
        sys.stderr.flush()


# -- the run -------------------------------------------------------------------------------------
class _Welford:
    """Per-chain running means and M2 (Welford 1962) of summary values; exceedance counts."""

    def __init__(self, names: tuple[str, ...], exceed_on: str | None, n: int,
                 shape: tuple[int, ...], n_thr: int) -> None:
        self.names, self.exceed_on = names, exceed_on
        self.n = np.zeros(n, dtype=np.int64)
        self.mean = {k: np.zeros((n, *shape)) for k in names}
        self.m2 = {k: np.zeros((n, *shape)) for k in names}
        self.exceed = np.zeros((n, n_thr if exceed_on else 0, *shape), dtype=np.int64)

    def update(self, values: dict[str, np.ndarray], thresholds: np.ndarray) -> None:
        self.n += 1
        for name in self.names:
            x = values[name]
            k = self.n.reshape(-1, *([1] * (x.ndim - 1)))
            d = x - self.mean[name]
            self.mean[name] += d / k
            self.m2[name] += d * (x - self.mean[name])
        if self.exceed_on is not None:
            x = values[self.exceed_on]
            self.exceed += x[:, None] > thresholds.reshape(1, -1, *([1] * (x.ndim - 1)))

    def arrays(self) -> dict[str, np.ndarray]:
        out = {"w_n": self.n, "w_exceed": self.exceed}
        for name in self.names:
            out[f"w_mean_{name}"] = self.mean[name]
            out[f"w_m2_{name}"] = self.m2[name]
        return out

    def load(self, a: Mapping[str, np.ndarray]) -> None:
        self.n = a["w_n"].copy()
        self.exceed = a["w_exceed"].copy()
        for name in self.names:
            self.mean[name] = a[f"w_mean_{name}"].copy()
            self.m2[name] = a[f"w_m2_{name}"].copy()

    def outputs(self, inside: np.ndarray) -> dict[str, np.ndarray]:
        shp = (-1, *([1] * inside.ndim))
        km1 = np.maximum(self.n - 1, 1).reshape(shp)
        out: dict[str, np.ndarray] = {"n_draws": self.n}
        if self.exceed_on is not None:
            out["exceedance_count"] = self.exceed
        for name in self.names:
            out[f"{name}_mean"] = np.where(inside, self.mean[name], np.nan)
            var = np.where(inside, self.m2[name] / km1, np.nan)
            out[f"{name}_var"] = np.where((self.n > 1).reshape(shp), var, np.nan)
        return out


class _Runner:
    def __init__(self, plan: _Plan, sink: Any, rngs: list, *, step: Any, progressbar: bool,
                 checkpointing: bool) -> None:
        # the chains' streams: the ones that drew the starting state (a resume then sets their
        # bit-generator states from the checkpoint)
        self.plan, self.sink, self.rngs = plan, sink, rngs
        self.view = plan.view
        self.sweep = step if step is not None else self.view.default_sweep(
            plan.representation, plan.n_latent, plan.tune)
        self.checkpointing = checkpointing
        self.local = slice(plan.chain_ids[0], plan.chain_ids[-1] + 1)
        if plan.chain_ids != list(range(plan.chain_ids[0], plan.chain_ids[-1] + 1)):
            raise InvalidParameterError(
                f"chain_ids={plan.chain_ids} must be a contiguous range (e.g. 4-7): each "
                "process writes one block of chains.")
        v = self.view
        self.welford = _Welford(v.summary_names, v.exceed_on, len(plan.chain_ids), v.shape,
                                len(plan.thresholds))
        total = plan.tune + plan.draws * plan.thin
        label = f"chains {plan.chain_ids[0]}-{plan.chain_ids[-1]}"
        self.progress = _Progress(total, progressbar, label)
        self.stop = False

    # -- one draw's record -----------------------------------------------------------------------
    def record(self, state: Any, info: Mapping[str, Any]) -> dict[str, Any]:
        rec = self.view.record(state)
        acc = sum(np.asarray(v, dtype=np.int64) for k, v in info.items()
                  if k.startswith("accepted/"))
        n = state.n_chains
        rec["stats"] = {"loglik": np.asarray(state.loglik, dtype=float),
                        "n_loglik": np.asarray(info.get("n_loglik", np.zeros(n)), np.int64),
                        "n_cov": np.asarray(info.get("n_cov", np.zeros(n)), np.int64),
                        "accepted": np.broadcast_to(np.asarray(acc, np.int64), (n,)).copy()}
        return rec

    # -- buffers ---------------------------------------------------------------------------------
    def _flush(self, phase: str, buf: list[dict], start: int) -> None:
        """Write draws ``[start, start + len(buf))`` of ``phase`` for the local chains."""
        if not buf:
            return
        plan = self.plan
        post, fields, stats = GROUPS[phase]
        sl = slice(start, start + len(buf))
        ch = self.local
        for name in buf[0]["scalars"]:
            self.sink.write(post, name, ch, sl, np.stack([r["scalars"][name] for r in buf], 1))
        if buf[0]["beta"] is not None:
            self.sink.write(post, "beta", ch, sl, np.stack([r["beta"] for r in buf], 1))
        for name, _ in STATS:
            self.sink.write(stats, name, ch, sl, np.stack([r["stats"][name] for r in buf], 1))
        if plan.thin_fields == 1:
            self.sink.write(post, "f", ch, sl, np.stack([r["f"] for r in buf], 1))
        elif plan.thin_fields > 1:
            keep = [(i, r) for i, r in enumerate(buf, start) if i % plan.thin_fields == 0]
            if keep:
                j0 = keep[0][0] // plan.thin_fields
                self.sink.write(fields, "f", ch, slice(j0, j0 + len(keep)),
                                np.stack([r["f"] for _, r in keep], 1))

    def _refill(self, phase: str, start: int, stop: int) -> list[dict]:
        """Read back committed draws ``[start, stop)`` of a partly written block (resume)."""
        plan = self.plan
        post, fields, stats = GROUPS[phase]
        sl, ch = slice(start, stop), self.local
        names = self._scalar_names
        sc = {n: self.sink.read(post, n, ch, sl) for n in names}
        beta = self.sink.read(post, "beta", ch, sl) if self.view.coef_names else None
        st = {n: self.sink.read(stats, n, ch, sl) for n, _ in STATS}
        f = None
        if plan.thin_fields == 1:
            f = self.sink.read(post, "f", ch, sl)
        out = []
        for k in range(stop - start):
            i = start + k
            rec = {"scalars": {n: sc[n][:, k] for n in names},
                   "beta": None if beta is None else beta[:, k],
                   "stats": {n: st[n][:, k] for n in st}}
            if plan.thin_fields == 1:
                rec["f"] = f[:, k]
            elif plan.thin_fields > 1 and i % plan.thin_fields == 0:
                j = i // plan.thin_fields
                rec["f"] = self.sink.read(fields, "f", ch, slice(j, j + 1))[:, 0]
            else:
                rec["f"] = None
            out.append(rec)
        return out

    def _write_summaries(self) -> None:
        for name, v in self.welford.outputs(self.view.inside).items():
            self._write_summary(name, v)

    def _write_summary(self, name: str, v: np.ndarray) -> None:
        if isinstance(self.sink, _MemorySink):
            self.sink.arrays[("summaries", name)][self.local] = v
        else:
            self.sink.store.root["summaries"][name][self.local, ...] = v

    # -- checkpoints -----------------------------------------------------------------------------
    def _checkpoint(self, phase: str, i: int, sweeps_done: int, state: Any) -> None:
        if not self.checkpointing:
            return
        import pyfftw

        plan = self.plan
        meta = {"phase": phase, "i": i, "sweeps_done": sweeps_done,
                "chain_ids": plan.chain_ids,
                "rng": [r.bit_generator.state for r in self.rngs],
                "theta_names": list(state.theta),
                "data_sha256": plan.data_hash(), "run_config": plan.run_config,
                "config": plan.config, "versions": library_versions()}
        arrays = {"f": state.f, "white": state.white, "beta": state.beta,
                  "loglik": state.loglik, **{f"theta/{k}": v for k, v in state.theta.items()},
                  **{f"extras/{k}": v for k, v in (state.extras or {}).items()},
                  **self.welford.arrays()}
        meta["extras_names"] = sorted(state.extras or {})
        wis = pyfftw.export_wisdom()
        for j, w in enumerate(wis):
            arrays[f"wisdom/{j}"] = np.frombuffer(w, dtype=np.uint8)
        self.sink.store.save_checkpoint(meta, arrays, tag=plan.tag)

    def restore(self, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> Any:
        """The sampler state, streams and accumulators of a checkpoint."""
        import pyfftw

        from .samplers.state import LatentState

        if list(meta["chain_ids"]) != self.plan.chain_ids:
            raise InvalidParameterError(
                f"the checkpoint holds chains {meta['chain_ids']}, this run {self.plan.chain_ids};"
                " resume with the same --chains.")
        for r, s in zip(self.rngs, meta["rng"], strict=True):
            r.bit_generator.state = s
        wis = tuple(bytes(arrays[f"wisdom/{j}"]) for j in range(3) if f"wisdom/{j}" in arrays)
        if wis:
            pyfftw.import_wisdom(wis)
        theta = {k: np.array(arrays[f"theta/{k}"]) for k in meta["theta_names"]}
        lgm = self.view.lgm
        priors = tuple(lgm.prior_for({k: float(v[c]) for k, v in theta.items()}, lgm.prior)
                       for c in range(len(self.plan.chain_ids)))
        self.welford.load(arrays)
        names = meta.get("extras_names") or []
        extras = {k: np.array(arrays[f"extras/{k}"]) for k in names} or None
        return LatentState(theta, priors, np.array(arrays["f"]), np.array(arrays["white"]),
                           np.array(arrays["beta"]), np.array(arrays["loglik"]),
                           tuple(self.plan.chain_ids), extras)

    # -- the loop --------------------------------------------------------------------------------
    def run(self, state: Any, position: tuple[str, int, int] | None) -> None:
        plan = self.plan
        phase0, i0, sweeps = position or ("warmup", 0, 0)
        first = self.view.record(state)  # names and shapes (no randomness used)
        self._scalar_names = list(first["scalars"])
        ce = plan.checkpoint_every
        handler = self._install_sigint()
        try:
            for phase in PHASES:
                if PHASES.index(phase) < PHASES.index(phase0):
                    continue
                n_phase = plan.tune if phase == "warmup" else plan.draws
                stored = plan.lens[phase] > 0
                per = 1 if phase == "warmup" else plan.thin
                i = i0 if phase == phase0 else 0
                start = (i // ce) * ce
                buf = self._refill(phase, start, i) if stored and i > start else []
                while i < n_phase:
                    info: dict[str, Any] = {}
                    for _ in range(per):
                        state, info = self.sweep.step(state, self.rngs)
                        sweeps += 1
                    i += 1
                    if stored or phase == "posterior":
                        rec = self.record(state, info)
                    if phase == "posterior":
                        self.welford.update(rec["summary"], plan.thresholds)
                    if stored:
                        buf.append(rec)
                    self.progress.update(sweeps, phase)
                    boundary = i % ce == 0 or i == n_phase
                    if boundary or self.stop:
                        if stored:
                            self._flush(phase, buf, start)
                            if phase == "posterior":
                                self._write_summaries()
                            self.sink.commit(phase, {c: i for c in plan.chain_ids})
                        self._checkpoint(phase, i, sweeps, state)
                        if i % ce == 0:
                            buf, start = [], i
                    if self.stop:
                        raise KeyboardInterrupt
                if stored and phase == "warmup" and n_phase == 0:
                    self.sink.commit(phase, {c: 0 for c in plan.chain_ids})
            self.progress.update(plan.tune + plan.draws * plan.thin, "done")
        finally:
            self._restore_sigint(handler)

    def _install_sigint(self) -> Any:
        if threading.current_thread() is not threading.main_thread():
            return None

        def on_sigint(signum, frame):
            if self.stop:  # a second Ctrl-C: stop now
                raise KeyboardInterrupt
            self.stop = True
            sys.stderr.write("\ninterrupt: stopping after this draw's checkpoint "
                             "(Ctrl-C again to stop at once)\n")

        return signal.signal(signal.SIGINT, on_sigint)

    @staticmethod
    def _restore_sigint(handler: Any) -> None:
        if handler is not None:
            signal.signal(signal.SIGINT, handler)


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
        return (self.shared + chains * self.per_chain) * n**self.p

    def seconds_per_iteration(self, n: float) -> float:
        return self.seconds * n**self.q


#: per backend (see :class:`SamplerCost`): ``benchmarks/results/resources.json``, bei with two
#: covariates, the default method (joint HMC; ``prior-white`` on dense), 2-core machine
SAMPLER_COST: dict[str, SamplerCost] = {
    "circulant": SamplerCost(2373.0, 26.5, 1.0, 2.57e-7, 1.15,
                             "≈ 2.3 KiB per torus cell, measured on bei up to 1.04 M cells"),
    "gmrf": SamplerCost(176.1, 68.7, 1.27, 9.31e-8, 1.28,
                        "≈ 176 B · n^1.27, measured on bei up to 0.24 M cells"),
    "dense": SamplerCost(663.9, 319.8, 1.79, 7.38e-7, 1.88,
                         "≈ 664 B · N^1.79, measured on bei up to 1250 cells"),
}


def _backend_of(prior: Any) -> str | None:
    from .priors import CirculantPrior, DensePrior, GMRFPrior

    for cls, name in ((CirculantPrior, "circulant"), (GMRFPrior, "gmrf"),
                      (DensePrior, "dense")):
        if isinstance(prior, cls):
            return name
    return None


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
    from .threads import available_memory

    proj = _sampler_projection(plan)
    if proj is None:
        return
    n, what, cost = proj
    k = len(plan.chain_ids)
    need = cost.peak_bytes(n, k)
    avail = available_memory() if max_memory_gb is None else float(max_memory_gb) * 2**30
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
        :data:`lattice_lgm.analysis.DEFAULT_THRESHOLDS`).
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
        ``n_cov``, ``accepted``), ``summaries`` (per-chain online means and variances —
        LGCP: of intensity and relative risk, with exceedance counts; other models: of
        ``f`` — and ``n_draws``), ``observed_data`` (LGCP: counts; else ``data``),
        ``constant_data``; ``posterior_fields`` / ``warmup_*`` as described above.  Backed by
        the store when ``store`` is given.

    Raises
    ------
    InvalidParameterError
        Bad arguments (before any sweep or store write).
    StoreExistsError, ResumeMismatchError, CheckpointError, ResourceLimitError
    """
    _check_flags(discard_tuned_samples=discard_tuned_samples, progressbar=progressbar,
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
                        max_memory_gb=max_memory_gb))
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
    from .samplers import chain_rngs

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
        sink = _MemorySink(specs, coords, attrs)
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
            runner_sink = _StoreSink(st)
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
                if st.committed("posterior") or st.committed("warmup"):
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
            runner = _Runner(plan, _StoreSink(st), probe_rngs, step=step, progressbar=progressbar,
                             checkpointing=True)
            runner.run(state, None)
    except OSError as exc:
        if exc.errno not in _STORE_ERRNOS:
            raise
        raise _store_write_error(path, exc) from exc
    finally:
        if st is not None:
            st.unlock()
    from .store import open_store

    return open_store(path)


def chain_blocks(chains: int, per_task: int) -> list[list[int]]:
    """Contiguous blocks of ``per_task`` chains covering ``range(chains)``."""
    per = positive_int("chains_per_task", per_task, "chains per Dask task, e.g. 1")
    return [list(range(a, min(a + per, chains))) for a in range(0, chains, per)]


def _run_block(model: Any, store: str, block: list[int], resume: bool, kwargs: dict) -> int:
    """A Dask task: one block of chains into the shared store (runs in a worker process)."""
    sample(model, store=store, chain_ids=block, resume=resume, progressbar=False, **kwargs)
    return len(block)


def _sample_dask(model: Any, *, store, workers, scheduler, chains_per_task, resume,
                 kwargs) -> Any:
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
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError as exc:  # pragma: no cover - an optional extra
        raise InvalidParameterError(
            "the Dask path needs dask.distributed: pip install 'lattice_lgm[dask]'.") from exc
    chains = positive_int("chains", kwargs["chains"], "e.g. 4")
    blocks = chain_blocks(chains, chains_per_task)
    path = Path(store)
    if not resume:
        # lay the store out here (validation, refusals and the resource check happen once,
        # before any task starts); the tasks then join it block by block
        _create_only(model, path, kwargs, blocks)
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
        futures = [client.submit(_run_block, model, str(path), b, resume, kwargs,
                                 pure=False, key=f"lattice-lgm-chains-{b[0]}-{b[-1]}")
                   for b in blocks]
        client.gather(futures)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    from .store import open_store

    return open_store(path)


def _create_only(model: Any, path: Path, kwargs: dict, blocks: list[list[int]]) -> None:
    from .samplers import chain_rngs

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
_STORE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM)


def _check_writable(path: Path) -> None:
    """Refuse a store path in a location this process cannot write, before any work."""
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise InvalidParameterError(
            f"store={str(path)!r} cannot be written: {str(ancestor)!r} is read-only for this "
            "process. Choose a writable location (store.path in the config).")


def _store_write_error(path: Path, exc: OSError) -> LatticeLGMError:
    """A clear error for a write the filesystem refused; the store stays resumable."""
    full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
    what = "the disk is full" if full else f"the filesystem refused a write ({exc.strerror})"
    cls = ResourceLimitError if full else InvalidParameterError
    return cls(
        f"writing {str(path)!r} failed: {what} at {exc.filename or 'a store file'}. Every "
        "committed draw is safe (commit markers are written after their data, checkpoints by "
        "rename): " + ("free space" if full else "fix the permissions")
        + f", then `lattice-lgm resume {path}` (or sample(..., resume=True)) continues exactly.")


def _config_with_draws(config: Mapping[str, Any] | None, draws: int) -> Any:
    """A resolved configuration (a copy) whose ``sampling.draws`` is ``draws``."""
    import json

    if not config:
        return config
    out = json.loads(json.dumps(config, default=str))
    if isinstance(out.get("sampling"), dict) and "draws" in out["sampling"]:
        out["sampling"]["draws"] = int(draws)
    return out


def _with_draws(attrs: Mapping[str, Any], draws: int) -> dict[str, Any]:
    """A run's attrs as they read with ``draws`` posterior draws (run_config and config)."""
    import json

    out = json.loads(json.dumps(attrs, default=str))
    out["run_config"]["draws"] = int(draws)
    if out.get("config"):
        out["config"] = _config_with_draws(out["config"], draws)
    return out


def _check_flags(**flags: Any) -> None:
    """Refuse a switch that is not a bool (``"no"`` would count as true)."""
    for name, v in flags.items():
        if not isinstance(v, bool | np.bool_):
            raise InvalidParameterError(
                f"{name}={v!r} is a {type(v).__name__}, not a bool; pass True or False.")


def _block_draws(path: Path, chain_ids: Sequence[int]) -> int:
    """The committed posterior draws of a block of chains (all alike), for its extension."""
    from .store import RunStore

    done = RunStore(path).committed("posterior")
    have = {int(c): done.get(int(c), 0) for c in chain_ids}
    if len(set(have.values())) != 1:
        raise InvalidParameterError(
            f"chains {sorted(have)} of {path} have different numbers of committed draws "
            f"({have}); resume them first, then extend them.")
    return next(iter(have.values()))


def _grow_under_lock(st: Any, plan: Any, old_draws: int, state: Any,
                     attrs: Mapping[str, Any]) -> None:
    """Grow the store from ``old_draws`` to ``plan.draws`` once, whichever block comes first.

    Under the store's layout lock the stored length is read afresh: still ``old_draws`` —
    every chain must have finished it, then this process grows the store; already
    ``plan.draws`` — another chain block extended it for the same request, and only the
    handles are opened again (writes beyond the shape they knew would be clipped); anything
    else — an extension by another amount, refused.
    """
    from .store import RunStore

    with st.layout_lock():
        now = RunStore(st.path)
        stored = int(dict(now.attrs.get("run_config", {})).get("draws", -1))
        if stored == old_draws:
            chains = int(dict(now.attrs.get("run_config", {})).get("chains", 0))
            done = now.committed("posterior")
            short = [c for c in range(chains) if done.get(c, 0) != old_draws]
            if short:
                raise InvalidParameterError(
                    f"{st.path} cannot grow to {plan.draws} draws while chains {short} have not "
                    f"finished its {old_draws} (resume their blocks first, then extend).")
            st.grow(*plan.specs(plan.view.record(state)), attrs)
        elif stored == plan.draws:
            st.reopen()
        else:
            raise _extended_elsewhere(st.path, stored, old_draws, plan.draws)


def _extended_elsewhere(path: Path, stored: int, old: int, draws: int) -> InvalidParameterError:
    return InvalidParameterError(
        f"{path} has been extended to {stored} draws by another chain block, not to {draws}; "
        f"extend this block by {stored - old} (--draws {stored - old}) to finish it alike.")


def _require_finished(st: Any, plan: Any, draws: int) -> None:
    """Refuse to extend a run whose chains have not all committed their ``draws``."""
    done = st.committed("posterior")
    short = [c for c in plan.chain_ids if done.get(c, 0) < draws]
    if short:
        raise InvalidParameterError(
            f"{st.path} is not finished (chains {short} have fewer than {draws} committed "
            "draws); resume it first, then extend it.")


def _recommit(st: Any, plan: Any, meta: Mapping[str, Any]) -> None:
    """Commit what a checkpoint covers, for a store whose markers were lost.

    A checkpoint at ``(phase, i)`` is written right after the commit of draw ``i`` of that
    phase (:meth:`_Runner.run`), so the markers it implies are: every stored phase before
    it in full, and ``i`` draws of its own.  The chunk digests are taken from the files as
    they are (nothing older is left to compare them with).
    """
    phase, i = str(meta["phase"]), int(meta["i"])
    for ph in PHASES[: PHASES.index(phase) + 1]:
        if plan.lens[ph] > 0:
            n = i if ph == phase else (plan.tune if ph == "warmup" else plan.draws)
            st.commit(ph, {c: n for c in plan.chain_ids})
    print(f"rebuilt the commit markers of {st.path} from its checkpoint ({phase} draw {i})",
          file=sys.stderr)


def _require_intact(path: str | os.PathLike, chains: Sequence[int]) -> None:
    """Refuse to continue ``chains`` of a store whose committed chunk files are damaged.

    Raises
    ------
    StoreIntegrityError
        Naming the missing and corrupt files.  Lost draws cannot be rebuilt from the
        checkpoints (they hold the newest state only).
    """
    from .store import StoreIntegrityError, verify_store

    report = verify_store(path, chains=chains)
    if not report.ok:
        raise StoreIntegrityError(
            f"cannot resume {str(path)!r}: committed draws are damaged; "
            + report.describe(limit=5).replace("\n", ";")
            + ". The checkpoints hold the newest state only, so these draws cannot be "
            "rebuilt in place: run again into a new store (the same seed and settings give "
            "the same draws), or restore the store from a copy.")


def resume(store: str | os.PathLike, model: Any = None, *, step: Any = None,
           progressbar: bool = True, chain_ids: Sequence[int] | None = None,
           dask_workers: int | None = None, dask_scheduler: str | None = None,
           threads: int | None = None, extend: int | None = None) -> Any:
    """Continue a stopped or crashed run from its newest checkpoint(s), or extend a finished one.

    Parameters
    ----------
    store : path
        The run's store.
    model : LGCP, optional
        The model; default: rebuilt from the configuration stored with the run (runs started
        from the command line or with ``config=``).
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
    from .store import open_store, read_config

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
