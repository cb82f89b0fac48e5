"""The run plan: a run's settings checked once, its store layout and its attributes."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from .._runview import view_of
from .._validation import positive_int
from ..errors import InvalidParameterError
from ..samplers import sweep_settings
from ..settings import DEFAULT_THRESHOLDS
from ..store.base import PHASE_GROUPS, VarSpec, library_versions

#: default draws per chunk / checkpoint interval
DEFAULT_CHECKPOINT_EVERY = 100
#: seconds between progress records when stderr is not a terminal
LOG_INTERVAL = 30.0
PHASES = ("warmup", "posterior")
#: per phase: (draws, thinned fields, sample stats) groups — the store's own table
GROUPS = PHASE_GROUPS
#: the sample stats of every run, (name, dtype): the log-likelihood of the draw and our cost
#: counters (likelihood evaluations, covariance builds, accepted M–H proposals), for which
#: ArviZ has no convention; a sweep adds ArviZ-named ones (:func:`sweep_stats`, decision 99)
STATS = (("loglik", "f8"), ("n_loglik", "i8"), ("n_cov", "i8"), ("accepted", "i8"))


def sweep_stats(sweep: Any) -> tuple[tuple[str, str, str], ...]:
    """The sample stats ``sweep`` adds: ``(name, key of its step's info, dtype)``.

    A sweep states them as ``sample_stats`` (e.g. joint HMC: ArviZ's ``acceptance_rate``,
    ``step_size``, ``n_steps`` and ``diverging``, which ArviZ's plots and summaries read).
    """
    out = tuple(getattr(sweep, "sample_stats", ()))
    base = {n for n, _ in STATS}

    def numeric(dt: Any) -> bool:
        try:
            return np.dtype(dt).kind in "biuf"
        except TypeError:
            return False

    for entry in out:
        if (not isinstance(entry, tuple) or len(entry) != 3 or entry[0] in base
                or not numeric(entry[2])):
            raise InvalidParameterError(
                f"{type(sweep).__name__}.sample_stats has {entry!r}; give (name, info key, "
                f"numeric or bool dtype) tuples whose names differ from {sorted(base)}.")
    return out


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
        # build the default sweep once now, so that its settings are checked (e.g. a tune too
        # short for HMC's adaptation) before the warm start and any store write
        sweep = (self.view.default_sweep(representation, self.n_latent, self.tune)
                 if step is None else step)
        #: the sweep's own sample stats (name, info key, dtype) and every stored one
        self.extra_stats = sweep_stats(sweep)
        self.stats = STATS + tuple((n, dt) for n, _, dt in self.extra_stats)
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

            self.run_config.update(representation=None, n_latent=None,
                                   step=sweep_settings(step))
        else:
            # the default sweep's own settings (e.g. the GPLVM's estimator: Q, ρ, the
            # importance distribution), so a resume with other ones is refused; JSON-normalised
            # as the store's attributes hold them.  Stores written before this key existed
            # resume without the check (store.reading.check_compatible)
            self.run_config["sweep"] = json.loads(json.dumps(sweep_settings(sweep)))

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
            # the field and the view's other per-draw lattice arrays (``record()["fields"]``,
            # e.g. the GPDS's rejection counts), kept or thinned alike
            lattice_vars = [("f", "f4", {"long_name": "latent field on the lattice"})]
            lattice_vars += [(name, str(np.asarray(a).dtype), {})
                             for name, a in sample_record.get("fields", {}).items()]
            if self.thin_fields == 1:
                for name, dt, at in lattice_vars:
                    specs.append(VarSpec(post, name, ("chain", "draw", *dims),
                                         (self.chains, n, *shape), dt, ce, attrs=at))
                coords[post].update(lat_coords)
            elif self.thin_fields > 1:
                nf = self.field_draws(n)
                for name, dt, at in lattice_vars:
                    specs.append(VarSpec(fields, name, ("chain", "draw", *dims),
                                         (self.chains, nf, *shape), dt,
                                         ce // self.thin_fields, attrs=at))
                coords[fields] = {"chain": chains,
                                  "draw": np.arange(0, n, self.thin_fields), **lat_coords}
            for name, dt in self.stats:
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
        record = getattr(v, "analysis_attrs", None)  # optional in the RunView protocol
        if record is not None:
            out["analysis"] = record()
        return out


