"""The run loop: sweeps, buffered writes, online summaries, checkpoints and commits."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import InvalidParameterError
from ..samplers.state import LatentState
from ..store.base import library_versions
from .plan import GROUPS, PHASES, _Plan
from .progress import _Progress
from .sinks import Sink


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
    def __init__(self, plan: _Plan, sink: Sink, rngs: list, *, step: Any, progressbar: bool,
                 checkpointing: bool) -> None:
        # the chains' streams: the ones that drew the starting state (a resume then sets their
        # bit-generator states from the checkpoint)
        self.plan, self.sink, self.rngs = plan, sink, rngs
        self.view = plan.view
        self._held: dict[str, frozenset[str]] = {}
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
        for name, key, dt in self.plan.extra_stats:
            if key not in info:
                raise InvalidParameterError(
                    f"{type(self.sweep).__name__}.sample_stats stores {name!r} from its step's "
                    f"info[{key!r}], which the step did not return (it returned "
                    f"{sorted(info)}); name a key the step returns.")
            rec["stats"][name] = np.broadcast_to(np.asarray(info[key]).astype(dt), (n,)).copy()
        return rec

    def _stats_held(self, group: str) -> frozenset[str]:
        """The arrays ``group`` holds, listed once per run.

        A store written by an older version lacks the sweep's own sample stats and a view's
        newer per-draw lattice arrays (``record()["fields"]``).
        """
        held = self._held.get(group)
        if held is None:
            held = self._held[group] = self.sink.names(group)
        return held

    def _lattice_held(self, group: str) -> list[str]:
        """``f`` and those of the view's per-draw lattice arrays that ``group`` holds."""
        held = self._stats_held(group)
        return [n for n in self._lattice_names if n == "f" or n in held]

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
        have = self._stats_held(stats)
        for name, _ in plan.stats:
            if name in have:
                self.sink.write(stats, name, ch, sl,
                                np.stack([r["stats"][name] for r in buf], 1))
        if plan.thin_fields == 1:
            for name in self._lattice_held(post):
                self.sink.write(post, name, ch, sl, np.stack([_lat(r, name) for r in buf], 1))
        elif plan.thin_fields > 1:
            keep = [(i, r) for i, r in enumerate(buf, start) if i % plan.thin_fields == 0]
            if keep:
                j0 = keep[0][0] // plan.thin_fields
                for name in self._lattice_held(fields):
                    self.sink.write(fields, name, ch, slice(j0, j0 + len(keep)),
                                    np.stack([_lat(r, name) for _, r in keep], 1))

    def _refill(self, phase: str, start: int, stop: int) -> list[dict]:
        """Read back committed draws ``[start, stop)`` of a partly written block (resume)."""
        plan = self.plan
        post, fields, stats = GROUPS[phase]
        sl, ch = slice(start, stop), self.local
        names = self._scalar_names
        sc = {n: self.sink.read(post, n, ch, sl) for n in names}
        beta = self.sink.read(post, "beta", ch, sl) if self.view.coef_names else None
        have = self._stats_held(stats)
        st = {n: self.sink.read(stats, n, ch, sl) for n, _ in plan.stats if n in have}
        lat_names = ([] if plan.thin_fields == 0
                     else self._lattice_held(post if plan.thin_fields == 1 else fields))
        lat = {}
        if plan.thin_fields == 1:
            lat = {n: self.sink.read(post, n, ch, sl) for n in lat_names}
        out = []
        for k in range(stop - start):
            i = start + k
            rec = {"scalars": {n: sc[n][:, k] for n in names},
                   "beta": None if beta is None else beta[:, k],
                   "stats": {n: st[n][:, k] for n in st}}
            if plan.thin_fields == 1:
                got = {n: lat[n][:, k] for n in lat_names}
            elif plan.thin_fields > 1 and i % plan.thin_fields == 0:
                j = i // plan.thin_fields
                got = {n: self.sink.read(fields, n, ch, slice(j, j + 1))[:, 0]
                       for n in lat_names}
            else:
                got = dict.fromkeys(lat_names)
            rec["f"] = got.pop("f", None)
            rec["fields"] = got
            out.append(rec)
        return out

    def _write_summaries(self) -> None:
        for name, v in self.welford.outputs(self.view.inside).items():
            self._write_summary(name, v)

    def _write_summary(self, name: str, v: np.ndarray) -> None:
        self.sink.put("summaries", name, self.local, v)

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
        self.sink.save_checkpoint(meta, arrays, tag=plan.tag)

    def restore(self, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> Any:
        """The sampler state, streams and accumulators of a checkpoint."""
        import pyfftw


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
        #: ``f`` and the view's other per-draw lattice arrays (RunView ``record()["fields"]``)
        self._lattice_names = ["f", *first.get("fields", {})]
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


def _lat(rec: Mapping[str, Any], name: str) -> np.ndarray:
    """``rec``'s lattice array ``name``: the field ``f`` or one of ``rec["fields"]``."""
    return rec["f"] if name == "f" else rec["fields"][name]
