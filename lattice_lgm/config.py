"""Run configuration: one TOML schema shared by Python and the ``lattice-lgm`` command.

A run is described by a TOML file with the sections ``[data]``, ``[model]`` (with
``[model.priors]``), ``[sampling]``, ``[store]`` and ``[output]``.  :data:`SCHEMA` is the single
source of truth: every key's type, default and help text is written once there and reused by
validation (:func:`load_config`), the commented template (:func:`template`) and the command
line's ``--help`` (:func:`describe_schema`).

::

    cfg = load_config("run.toml", ["sampling.draws=200"])   # validated, paths resolved
    model = cfg.build_model()                                # an LGCP
    tree = lattice_lgm.runs.sample(model, **cfg.sample_kwargs())

Rules:

- Unknown sections or keys are errors that name the key and suggest the nearest valid one
  (``unknown key 'sampling.draw'; did you mean 'sampling.draws'?``); values are type-checked
  (TOML distinguishes ``10`` from ``10.0`` and ``"10"``: an integer key refuses the other two,
  a float key accepts an integer).
- Relative paths in the file resolve against the file's directory; paths given as overrides
  (``--set data.points=x.csv``) resolve against the current directory, like any other
  command-line path.
- Model settings left out take :class:`~lattice_lgm.models.lgcp.LGCP`'s own defaults (read from
  its signature, never copied); priors left out are LGCP's window-scaled defaults (``null`` in
  :attr:`RunConfig.resolved`, stated by ``LGCP.describe()``).
- :attr:`RunConfig.resolved` is the fully resolved configuration (absolute paths, defaults
  filled, stable key order, JSON-serialisable) that a run stores with its draws;
  :meth:`RunConfig.from_resolved` rebuilds the configuration (and so the model) from it.
"""

from __future__ import annotations

import copy
import difflib
import inspect
import json
import math
import os
import re
import textwrap
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

from .covariates import METHODS as REGRID_METHODS
from .errors import BackendUnavailableError, InvalidParameterError
from .models.lgcp import (
    BACKENDS,
    DEFAULT_ALPHA,
    DEFAULT_NU,
    INTERCEPT_SD,
    LGCP,
    RANGE_ALPHA,
    RANGE_FRACTION,
    RANGE_UPPER_FRACTION,
    SD0,
    SD_ALPHA,
    default_method_for,
)
from .models.lgcp import METHODS as SAMPLER_METHODS
from .samplers.hyper import REPRESENTATIONS
from .settings import DEFAULT_THRESHOLDS, RUN_DEFAULTS
from .store import upgrade_config

__all__ = [
    "REQUIRED",
    "SCHEMA",
    "ConfigError",
    "Key",
    "RunConfig",
    "Section",
    "describe_schema",
    "load_config",
    "template",
]


class ConfigError(InvalidParameterError):
    """A run configuration is invalid: unknown or mistyped key, missing file or setting.

    The message names the key (``section.key``), the offending value and the remedy.
    """


# -- value kinds ------------------------------------------------------------------------------
class _Bad(Exception):
    """Raised by a kind's check with an optional extra reason."""


@dataclass(frozen=True)
class Kind:
    """A value type of the schema: what it expects (for messages) and how it is checked.

    Parameters
    ----------
    expected : str
        Human description, e.g. ``"an integer >= 1"``.
    check_fn : callable
        ``check_fn(value) -> normalised value``; raises ``_Bad`` when the value does not fit.
    """

    expected: str
    check_fn: Callable[[Any], Any]


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _int(lo: int) -> Kind:
    def check(v: Any) -> int:
        if not _is_int(v) or v < lo:
            raise _Bad
        return int(v)

    return Kind(f"an integer >= {lo}", check)


def _float(lo: float | None = None, hi: float | None = None, what: str | None = None) -> Kind:
    """A finite number in the open interval (lo, hi); an integer is accepted and converted."""
    def check(v: Any) -> float:
        if not _is_number(v) or not math.isfinite(v):
            raise _Bad
        if lo is not None and v <= lo:
            raise _Bad
        if hi is not None and v >= hi:
            raise _Bad
        return float(v)

    if what is None:
        what = "a finite number" + (f" > {lo:g}" if lo is not None else "")
    return Kind(what, check)


def _bool() -> Kind:
    def check(v: Any) -> bool:
        if not isinstance(v, bool):
            raise _Bad
        return v

    return Kind("true or false", check)


def _str() -> Kind:
    def check(v: Any) -> str:
        if not isinstance(v, str) or not v.strip():
            raise _Bad
        return v

    return Kind("a non-empty string", check)


def _choice(choices: Sequence[str]) -> Kind:
    def check(v: Any) -> str:
        if v not in choices:
            raise _Bad
        return v

    return Kind("one of " + ", ".join(repr(c) for c in choices), check)


def _positive_or_list(element: Kind, name: str) -> Kind:
    """One value, or a list of 1–3 values (one per lattice axis, in axis order)."""
    def check(v: Any) -> Any:
        if isinstance(v, list):
            if not 1 <= len(v) <= 3:
                raise _Bad
            return [element.check_fn(x) for x in v]
        return element.check_fn(v)

    return Kind(f"{element.expected}, or a list of them per axis ({name})", check)


def _number_list(n: int | None, element: Kind, increasing: bool = False) -> Kind:
    def check(v: Any) -> list:
        if not isinstance(v, list) or (n is not None and len(v) != n) or not v:
            raise _Bad
        out = [element.check_fn(x) for x in v]
        if increasing and any(b <= a for a, b in pairwise(out)):
            raise _Bad("the values must increase")
        return out

    size = f"a list of {n} values" if n is not None else "a non-empty list of values"
    return Kind(f"{size}, each {element.expected}" + (", increasing" if increasing else ""),
                check)


def _window() -> Kind:
    box = _float(what="number")

    def check(v: Any) -> Any:
        if isinstance(v, str):
            return _str().check_fn(v)
        if not isinstance(v, list) or len(v) != 4:
            raise _Bad
        xmin, xmax, ymin, ymax = (box.check_fn(x) for x in v)
        if not (xmin < xmax and ymin < ymax):
            raise _Bad("need xmin < xmax and ymin < ymax")
        return [xmin, xmax, ymin, ymax]

    return Kind("[xmin, xmax, ymin, ymax] (numbers) or a path to a vector file", check)


def _table(value: Kind) -> Kind:
    def check(v: Any) -> dict:
        if not isinstance(v, dict):
            raise _Bad
        out = {}
        for k, x in v.items():
            try:
                out[k] = value.check_fn(x)
            except _Bad:
                raise _Bad(f"entry {k!r} = {x!r} is not {value.expected}") from None
        return out

    return Kind(f"a table of name = {value.expected}", check)


# -- the schema -------------------------------------------------------------------------------
class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


#: marks a key without default
REQUIRED: Any = _Required()


@dataclass(frozen=True)
class Key:
    """One configuration key.

    Parameters
    ----------
    name : str
        The key inside its section.
    kind : Kind
        Its type.
    default : Any
        The value when the key is left out (:data:`REQUIRED`: it must be given; ``None``:
        unset, with the meaning stated in ``help``).
    help : str
        One-sentence documentation, reused by the template and ``--help``.
    example : Any, optional
        A value shown (commented out) in the template when the default is ``None``.
    path : bool
        The value is a path (or holds paths) resolved against the config's directory.
    """

    name: str
    kind: Kind
    default: Any
    help: str
    example: Any = None
    path: bool = False


@dataclass(frozen=True)
class Section:
    """A TOML table of the schema.

    Parameters
    ----------
    name : str
        Dotted name, e.g. ``"model.priors.range"``.
    help : str
    keys : tuple of Key
    optional : bool
        The whole table may be left out (its resolved value is then ``None``); when given, its
        required keys must all be there.
    """

    name: str
    help: str
    keys: tuple[Key, ...]
    optional: bool = False

    def key(self, name: str) -> Key | None:
        """The key called ``name``, or None."""
        return next((k for k in self.keys if k.name == name), None)


def _signature_defaults(fn: Callable) -> dict[str, Any]:
    return {k: p.default for k, p in inspect.signature(fn).parameters.items()
            if p.default is not inspect.Parameter.empty}


# LGCP's own defaults, read from its signature so that they are never copied here
_LGCP = _signature_defaults(LGCP.__init__)
_SAMPLER = _signature_defaults(LGCP.sampler)
_RUN = RUN_DEFAULTS.as_dict()
_PROB = _float(0.0, 1.0, what="a probability in (0, 1)")

SCHEMA: tuple[Section, ...] = (
    Section("data", "the point pattern, its window, the lattice and the covariates", (
        Key("points", _str(), REQUIRED,
            "CSV file of the points, one header row, columns x, y (and t for space-time), in "
            "projected coordinates", path=True),
        Key("window", _window(), REQUIRED,
            "observation window: [xmin, xmax, ymin, ymax], or a path to a vector file of "
            "polygons (read with geopandas)", path=True),
        Key("cell_size", _positive_or_list(_float(0.0), "h_y, h_x"), None,
            "cell side in coordinate units, one number or [h_y, h_x] in lattice axis order "
            "(give cell_size or shape)", example=10.0),
        Key("shape", _positive_or_list(_int(1), "n_y, n_x"), None,
            "cells per axis, one integer or [n_y, n_x] (instead of cell_size)",
            example=[50, 100]),
        Key("units", _str(), _LGCP["units"],
            "coordinate units, e.g. \"m\" (intensity maps are then per ha)", example="m"),
        Key("crs", _str(), _LGCP["crs"], "projected CRS of the coordinates, e.g. \"EPSG:32617\"",
            example="EPSG:32617"),
        Key("covariates", _table(_str()), {},
            "covariates, name = path: a long CSV table (columns x, y, <name>) or a GeoTIFF / "
            "NetCDF raster", path=True),
        Key("regrid", _table(_choice(REGRID_METHODS)), {},
            "regridding method per covariate, name = \"area\" (default), \"nearest\" or "
            "\"majority\"", example={"elev": "area"}),
        Key("formula", _str(), _LGCP["formula"],
            "covariate terms, e.g. \"~ elev + grad\" (default: every covariate, in order)",
            example="~ elev + grad"),
        Key("outside", _choice(("raise", "drop")), _LGCP["outside"],
            "points outside the window: \"raise\" an error naming them, or \"drop\" them with "
            "a warning"),
        Key("time", _number_list(2, _float(what="a number"), increasing=True), None,
            "space-time only: [t0, t1], the time extent of the points' t column",
            example=[0.0, 10.0]),
        Key("time_step", _float(0.0), None, "space-time only: the lattice's time step",
            example=1.0),
        Key("time_units", _str(), _LGCP["time_units"], "space-time only: units of t",
            example="day"),
    )),
    Section("model", "the log-Gaussian Cox process (lattice_lgm.LGCP)", (
        Key("backend", _choice(BACKENDS), _LGCP["backend"],
            "field prior: circulant embedding, Matérn-SPDE GMRF, or dense (the oracle, small "
            "lattices)"),
        Key("nu", _float(0.0), _LGCP["nu"],
            f"Matérn smoothness of the circulant and dense backends (unset: {DEFAULT_NU}; the "
            "gmrf backend's is alpha - d/2)", example=DEFAULT_NU),
        Key("nu_t", _float(0.0), _LGCP["nu_t"],
            "space-time only: Matérn smoothness in time (0.5: exponential)"),
        Key("alpha", _int(1), _LGCP["alpha"],
            f"SPDE order of the gmrf backend (unset: {DEFAULT_ALPHA}, i.e. nu = 1 in 2-D)",
            example=DEFAULT_ALPHA),
        Key("coefficients", _choice(("block", "hyper")), _LGCP["coefficients"],
            "covariate coefficients in the Gaussian \"block\" with the field, or as \"hyper\" "
            "parameters moved by slice sampling"),
        Key("intercept", _choice(("hyper", "block")), _LGCP["intercept"],
            "the intercept as a \"hyper\" parameter, or in the Gaussian \"block\""),
        Key("beta_sd", _float(0.0), _LGCP["beta_sd"],
            "prior sd of the standardised coefficients"),
    )),
    Section("model.priors.range",
            "PC prior on the range, P(range < rho0) = alpha, truncated at upper (default: "
            "P(range < L/10) = 0.05 truncated at L/2, L the window's shorter side)", (
                Key("rho0", _float(0.0), REQUIRED, "a small range, in coordinate units"),
                Key("alpha", _PROB, REQUIRED, "P(range < rho0)"),
                Key("upper", _float(0.0), None,
                    "truncation point (the circulant torus is sized for it; required by the "
                    "circulant backend)"),
            ), optional=True),
    Section("model.priors.sd", "PC prior on the field's sd, P(sd > sd0) = alpha (default: "
            "P(sd > 2) = 0.05)", (
                Key("sd0", _float(0.0), REQUIRED, "a large sd"),
                Key("alpha", _PROB, REQUIRED, "P(sd > sd0)"),
            ), optional=True),
    Section("model.priors.intercept", "Normal prior on the intercept (log points per unit "
            "area; default: Normal(log(n/|W|), 5))", (
                Key("mean", _float(what="a finite number"), REQUIRED, "prior mean"),
                Key("sd", _float(0.0), REQUIRED, "prior sd"),
            ), optional=True),
    Section("sampling", "the chains (lattice_lgm.runs.sample)", (
        Key("draws", _int(1), _RUN["draws"], "stored draws per chain after warm-up, each thin "
            "sweeps apart"),
        Key("tune", _int(0), _RUN["tune"], "warm-up sweeps per chain"),
        Key("discard_tuned_samples", _bool(), _RUN["discard_tuned_samples"],
            "drop the warm-up draws (false: keep them in warmup_posterior)"),
        Key("chains", _int(1), _RUN["chains"], "number of chains"),
        Key("seed", _int(0), None,
            "the run's seed; required by `lattice-lgm run`, so that the run can be reproduced",
            example=1),
        Key("thin", _int(1), _RUN["thin"], "sweeps per stored draw"),
        Key("thin_fields", _int(0), _RUN["thin_fields"],
            "keep the field of every thin_fields-th stored draw (fields are the big arrays); "
            "0 keeps none: hyperparameters and the online summary maps only"),
        Key("checkpoint_every", _int(1), None,
            "stored draws per chunk and between checkpoints (unset: the runner's default)",
            example=100),
        Key("representation", _choice(("auto", *SAMPLER_METHODS, *REPRESENTATIONS)),
            _SAMPLER["representation"],
            "the sampler: 'auto' (the backend's measured default: 'hmc' on circulant and "
            "gmrf, 'prior-white' on dense), 'hmc' (joint HMC, circulant and gmrf), 'asis' "
            "(interweaving; gmrf, dense, and circulant kernels with a fixed-f move), or a "
            "Murray–Adams representation of the hyperparameter move"),
        Key("n_latent", _int(1), _SAMPLER["n_latent"],
            "elliptical slice updates of the field per sweep"),
        Key("chains_per_task", _int(1), _RUN["chains_per_task"],
            "chains per Dask task with --workers/--scheduler (each block checkpoints itself)"),
    )),
    Section("store", "where the draws go", (
        Key("path", _str(), None,
            "zarr store of the run (default: <config stem>.zarr next to the config)",
            example="run.zarr", path=True),
        Key("max_disk_gb", _float(0.0), None, "refuse a run whose store would exceed this",
            example=20.0),
        Key("max_memory_gb", _float(0.0), None, "refuse a run that would need more memory",
            example=8.0),
    )),
    Section("output", "maps written after the run", (
        Key("maps", _str(), None,
            "directory of the PNG maps (default: the store's path without .zarr, plus _maps)",
            example="run_maps", path=True),
        Key("thresholds", _number_list(None, _float(0.0)), list(DEFAULT_THRESHOLDS),
            "relative-risk levels c of the exceedance maps P(RR > c | data)"),
    )),
)

_SECTIONS = {s.name: s for s in SCHEMA}
#: tables that only hold other tables (``model.priors``)
_CONTAINERS = {p for s in SCHEMA for p in (".".join(s.name.split(".")[:i])
                                           for i in range(1, s.name.count(".") + 1))
               } - set(_SECTIONS)


def _all_keys() -> list[str]:
    return [f"{s.name}.{k.name}" for s in SCHEMA for k in s.keys]


def _what(v: Any) -> str:
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int):
        return "an integer"
    if isinstance(v, float):
        return "a float"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, dict):
        return "a table"
    return f"a {type(v).__name__}"


def _suggest(dotted: str, siblings: Sequence[str]) -> str:
    """``; did you mean …?`` for a mistyped dotted name, or the valid names of its table.

    The same name in another table first (a key put in the wrong section), then the nearest
    name in the same table (a typo), compared on the last part only (the shared section
    prefix would make every sibling look close).
    """
    leaf = dotted.rsplit(".", 1)[-1]
    elsewhere = [k for k in _all_keys() + sorted(_SECTIONS) + sorted(_CONTAINERS)
                 if k.rsplit(".", 1)[-1] == leaf and k != dotted]
    if elsewhere:
        return f"; did you mean {elsewhere[0]!r}?"
    leaves = {s.rsplit(".", 1)[-1]: s for s in siblings}
    near = difflib.get_close_matches(leaf, list(leaves), n=1, cutoff=0.6)
    if near:
        return f"; did you mean {leaves[near[0]]!r}?"
    return f"; valid here: {', '.join(repr(s) for s in siblings)}" if siblings else ""


def _children(prefix: str) -> list[str]:
    """Valid dotted names one level below ``prefix`` ("" for the top level)."""
    names = set()
    for s in SCHEMA:
        full = [s.name] + [f"{s.name}.{k.name}" for k in s.keys]
        for n in full:
            if prefix == "" or n.startswith(prefix + "."):
                rest = n[len(prefix) + 1:] if prefix else n
                names.add((prefix + "." if prefix else "") + rest.split(".")[0])
    return sorted(names)


def _check_names(raw: Mapping[str, Any], prefix: str = "") -> None:
    """Refuse unknown sections and keys, with a suggestion; tables must be tables."""
    siblings = _children(prefix)
    for k, v in raw.items():
        dotted = f"{prefix}.{k}" if prefix else k
        if dotted not in siblings:
            what = "section" if isinstance(v, dict) and not prefix else "key"
            raise ConfigError(f"unknown {what} {dotted!r}{_suggest(dotted, siblings)}")
        if dotted in _SECTIONS or dotted in _CONTAINERS:
            if v is None and dotted in _SECTIONS and _SECTIONS[dotted].optional:
                continue  # a resolved config's "left out" (TOML itself has no null)
            if not isinstance(v, dict):
                raise ConfigError(
                    f"{dotted} = {v!r} ({_what(v)}) must be a table: write [{dotted}] with "
                    f"its keys below it, or {dotted.rsplit('.', 1)[-1]} = {{ ... }}.")
            _check_names(v, dotted)


def _lookup(raw: Mapping[str, Any], dotted: str) -> Any:
    node: Any = raw
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _set(out: dict, dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    node = out
    for p in parents:
        node = node.setdefault(p, {})
    node[leaf] = value


def _check_value(key: Key, dotted: str, value: Any) -> Any:
    try:
        return key.kind.check_fn(value)
    except _Bad as exc:
        reason = f" ({exc.args[0]})" if exc.args else ""
        raise ConfigError(
            f"{dotted} = {value!r} ({_what(value)}) is not valid{reason}: expected "
            f"{key.kind.expected}.") from None


def _abspath(value: str, base: Path) -> str:
    p = Path(value).expanduser()
    return os.path.abspath(p if p.is_absolute() else base / p)


def _resolve(raw: Mapping[str, Any], *, base: Path, stem: str | None,
             cli_keys: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Validate ``raw`` and return the resolved configuration (see :attr:`RunConfig.resolved`).

    ``base`` resolves relative paths; keys in ``cli_keys`` (given as overrides) resolve
    against the current directory instead.
    """
    if not isinstance(raw, Mapping):
        raise ConfigError(f"the configuration must be a table of sections, not {_what(raw)}.")
    _check_names(raw)
    cwd = Path.cwd()

    def base_for(dotted: str) -> Path:
        return cwd if dotted in cli_keys else base

    out: dict[str, Any] = {}
    for sec in SCHEMA:
        given = _lookup(raw, sec.name)
        if sec.optional and given is None:
            _set(out, sec.name, None)
            continue
        given = given or {}
        vals: dict[str, Any] = {}
        for key in sec.keys:
            dotted = f"{sec.name}.{key.name}"
            if key.name in given and given[key.name] is not None:
                v = _check_value(key, dotted, given[key.name])
            elif key.default is REQUIRED:
                extra = (f" when [{sec.name}] is given (or leave the whole table out for "
                         "LGCP's default)") if sec.optional else ""
                raise ConfigError(f"{dotted} is required{extra}; {key.help}.")
            else:
                v = copy.deepcopy(key.default)
            if key.path and isinstance(v, str):
                v = _abspath(v, base_for(dotted))
            elif key.path and isinstance(v, dict):
                v = {n: _abspath(p, base_for(f"{dotted}.{n}")) for n, p in v.items()}
            vals[key.name] = v
        _set(out, sec.name, vals)
    _cross_checks(out, stem, base)
    return out


def _exists(dotted: str, path: str) -> None:
    if not os.path.exists(path):
        raise ConfigError(
            f"{dotted} = {path!r} does not exist; relative paths in a config file are "
            "resolved against the file's directory (and --set paths against the current one).")


def _cross_checks(out: dict[str, Any], stem: str | None, base: Path) -> None:
    d, m, s = out["data"], out["model"], out["sampling"]
    if (d["cell_size"] is None) == (d["shape"] is None):
        got = "both" if d["cell_size"] is not None else "neither"
        raise ConfigError(
            f"give exactly one of data.cell_size and data.shape (got {got}); e.g. "
            "cell_size = 10.0 for 10-unit cells over the window's bounding box.")
    _exists("data.points", d["points"])
    if isinstance(d["window"], str):
        _exists("data.window", d["window"])
    for name, p in d["covariates"].items():
        _exists(f"data.covariates.{name}", p)
        suffix = Path(p).suffix.lower()
        if suffix not in (".csv", ".tif", ".tiff", ".nc", ".nc4"):
            raise ConfigError(
                f"data.covariates.{name} = {p!r} has suffix {suffix!r}; give a long CSV table "
                "(.csv, columns x, y and the covariate's name) or a raster (.tif, .tiff, .nc).")
    unknown = sorted(set(d["regrid"]) - set(d["covariates"]))
    if unknown:
        raise ConfigError(
            f"data.regrid names {unknown}, which are not in data.covariates "
            f"({sorted(d['covariates'])}); regrid covariates that are given.")
    spacetime = d["time"] is not None
    if spacetime != (d["time_step"] is not None):
        raise ConfigError(
            "a space-time model needs both data.time = [t0, t1] and data.time_step (got "
            f"time={d['time']!r}, time_step={d['time_step']!r}).")
    if not spacetime:
        for k, v, dflt in (("data.time_units", d["time_units"], _LGCP["time_units"]),
                           ("model.nu_t", m["nu_t"], _LGCP["nu_t"])):
            if v != dflt:
                raise ConfigError(
                    f"{k} = {v!r} is for space-time models; set data.time and data.time_step "
                    "as well, or remove it.")
    _check_time_column(d["points"], spacetime)
    rep, backend = s["representation"], m["backend"]
    # a smoothness key the backend would ignore (LGCP raises too; here the error names the key)
    if backend == "gmrf" and m["nu"] is not None:
        raise ConfigError(
            f"model.nu = {m['nu']!r} is the Matérn smoothness of the circulant and dense "
            "backends; model.backend = 'gmrf' takes model.alpha (nu = alpha - d/2) instead. "
            "Remove model.nu, or change model.backend.")
    if backend != "gmrf" and m["alpha"] is not None:
        raise ConfigError(
            f"model.alpha = {m['alpha']!r} is the SPDE order of the gmrf backend; model.backend "
            f"= {backend!r} takes model.nu instead. Remove model.alpha, or change model.backend.")
    # the resolved config (stored with a run) states the smoothness in force
    if backend == "gmrf":
        m["alpha"] = DEFAULT_ALPHA if m["alpha"] is None else m["alpha"]
    else:
        m["nu"] = DEFAULT_NU if m["nu"] is None else m["nu"]
    if rep == "auto":  # the resolved config (stored with a run) names the method in force
        rep = s["representation"] = default_method_for(backend)
    if rep in SAMPLER_METHODS:
        if backend not in SAMPLER_METHODS[rep]:
            ok = [r for r, b in (*SAMPLER_METHODS.items(), *REPRESENTATIONS.items())
                  if backend in b]
            raise ConfigError(
                f"sampling.representation = {rep!r} runs on model.backend in "
                f"{list(SAMPLER_METHODS[rep])}; with {backend!r} choose one of {ok} "
                "(or 'auto').")
    elif backend not in REPRESENTATIONS[rep]:
        ok = [r for r, b in REPRESENTATIONS.items() if backend in b]
        raise ConfigError(
            f"sampling.representation = {rep!r} is not available with model.backend = "
            f"{backend!r}; choose one of {ok}.")
    if out["store"]["path"] is None:
        if stem is None:
            raise ConfigError("store.path is not set; give the run's zarr store path.")
        out["store"]["path"] = os.path.abspath(base / f"{stem}.zarr")
    if out["output"]["maps"] is None:
        store = Path(out["store"]["path"])
        out["output"]["maps"] = str(store.with_name(store.name.removesuffix(".zarr") + "_maps"))


def _check_time_column(points: str, spacetime: bool) -> None:
    """The points' t column and the space-time keys go together (nothing silently ignored)."""
    import pandas as pd

    try:
        cols = list(pd.read_csv(points, nrows=0).columns)
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"data.points = {points!r} is not a readable CSV file: {exc}") from None
    if spacetime and "t" not in cols:
        raise ConfigError(
            f"data.time is set but data.points = {points!r} has no 't' column (columns "
            f"{cols}); add the time of each point, or remove data.time and data.time_step.")
    if not spacetime and "t" in cols:
        raise ConfigError(
            f"data.points = {points!r} has a 't' column; for a space-time model set data.time "
            "= [t0, t1] and data.time_step, or drop the column for a spatial model.")


# -- overrides --------------------------------------------------------------------------------
def _parse_override(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not p for p in key.split(".")):
        raise ConfigError(
            f"override {text!r} is not 'section.key=value'; e.g. --set sampling.draws=200.")
    try:
        parsed = tomllib.loads(f"v = {value.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        parsed = value.strip()  # a bare string, e.g. data.units=m
    return key, parsed


def _apply_overrides(raw: dict[str, Any], overrides: Sequence[str]) -> set[str]:
    keys = set()
    for text in overrides:
        key, value = _parse_override(text)
        node = raw
        parts = key.split(".")
        for i, p in enumerate(parts[:-1]):
            nxt = node.setdefault(p, {})
            if not isinstance(nxt, dict):
                raise ConfigError(
                    f"override {text!r}: {'.'.join(parts[:i + 1])} is {_what(nxt)}, not a "
                    "table, so it has no keys.")
            node = nxt
        node[parts[-1]] = value
        keys.add(key)
        if isinstance(value, dict):  # a whole table set on the command line
            keys.update(f"{key}.{k}" for k in value)
    return keys


# -- the resolved configuration ---------------------------------------------------------------
class RunConfig:
    """A validated run configuration.

    Build it with :func:`load_config` (from a TOML file) or :meth:`from_resolved` (from the
    dict a run stored).

    Attributes
    ----------
    path : Path or None
        The config file (None when rebuilt from a stored dict).
    """

    def __init__(self, resolved: dict[str, Any], path: Path | None = None) -> None:
        self._resolved = resolved
        self.path = path

    @classmethod
    def from_resolved(cls, d: Mapping[str, Any]) -> RunConfig:
        """Rebuild from :attr:`resolved` (e.g. ``lattice_lgm.store.read_config(path)``).

        The dict is validated again; its paths are absolute, so the current directory does not
        matter.

        Raises
        ------
        ConfigError
            An empty dict (a run started from Python without ``config=``) or an invalid one.
        """
        if not d:
            raise ConfigError(
                "the stored configuration is empty: the run was started from Python without "
                "config=; rebuild its model in Python instead.")
        resolved = _resolve(upgrade_config(d), base=Path.cwd(), stem=None)
        return cls(resolved)

    @property
    def resolved(self) -> dict[str, Any]:
        """The fully resolved configuration: a fresh JSON-serialisable dict.

        Sections and keys in schema order; absolute paths; every default filled (priors left
        out are ``None``: LGCP's window-scaled defaults); the value stored with a run.
        """
        return copy.deepcopy(self._resolved)

    @property
    def store_path(self) -> Path:
        """The run's zarr store."""
        return Path(self._resolved["store"]["path"])

    @property
    def maps_dir(self) -> Path:
        """Directory of the PNG maps."""
        return Path(self._resolved["output"]["maps"])

    @property
    def thresholds(self) -> tuple[float, ...]:
        """Relative-risk levels of the exceedance maps."""
        return tuple(self._resolved["output"]["thresholds"])

    def sample_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``lattice_lgm.runs.sample`` (everything but the model).

        Returns
        -------
        dict
            ``draws, tune, chains, random_seed, thin, thin_fields, checkpoint_every,
            representation, n_latent, thresholds, discard_tuned_samples, chains_per_task,
            store, max_disk_gb, max_memory_gb, config``
            (``thresholds``: the exceedance levels the runner counts online).

        Raises
        ------
        ConfigError
            ``sampling.seed`` is not set: a run from a config must be reproducible.
        """
        s, st = self._resolved["sampling"], self._resolved["store"]
        if s["seed"] is None:
            where = f" in {self.path}" if self.path else ""
            raise ConfigError(
                f"sampling.seed is not set{where}; a run needs a seed so that it can be "
                "reproduced: add seed = <integer> under [sampling], or pass "
                "--set sampling.seed=1.")
        return {
            "draws": s["draws"], "tune": s["tune"], "chains": s["chains"],
            "random_seed": s["seed"], "thin": s["thin"], "thin_fields": s["thin_fields"],
            "checkpoint_every": s["checkpoint_every"], "representation": s["representation"],
            "n_latent": s["n_latent"], "thresholds": list(self.thresholds),
            "discard_tuned_samples": s["discard_tuned_samples"],
            "chains_per_task": s["chains_per_task"],
            "store": st["path"], "max_disk_gb": st["max_disk_gb"],
            "max_memory_gb": st["max_memory_gb"], "config": self.resolved,
        }

    def build_model(self) -> LGCP:
        """The :class:`~lattice_lgm.models.lgcp.LGCP` this configuration describes.

        Reads the points, the window (geopandas for a vector file) and the covariates
        (``covariates.from_table`` for ``.csv``, ``covariates.read_raster`` for rasters).

        Returns
        -------
        LGCP
        """
        from .covariates import from_table, read_raster
        from .hyperpriors import Normal, PCPriorRange, PCPriorSD

        d, m = self._resolved["data"], self._resolved["model"]
        window = self._window()
        kw: dict[str, Any] = {
            "units": d["units"], "crs": d["crs"], "formula": d["formula"],
            "outside": d["outside"], "backend": m["backend"], "nu": m["nu"],
            "alpha": m["alpha"], "coefficients": m["coefficients"],
            "intercept": m["intercept"], "beta_sd": m["beta_sd"],
        }
        if d["covariates"]:
            kw["covariates"] = {
                name: (from_table(p, name) if p.lower().endswith(".csv")
                       else read_raster(p, name=name))
                for name, p in d["covariates"].items()}
        if d["regrid"]:
            kw["regrid"] = dict(d["regrid"])
        pri = m["priors"]
        # the spatial dimension of the range prior: windows here are planar
        if pri["range"] is not None:
            r = pri["range"]
            kw["range_prior"] = PCPriorRange(r["rho0"], r["alpha"], 2, upper=r["upper"])
        if pri["sd"] is not None:
            kw["sd_prior"] = PCPriorSD(pri["sd"]["sd0"], pri["sd"]["alpha"])
        if pri["intercept"] is not None:
            kw["intercept_prior"] = Normal(pri["intercept"]["mean"], pri["intercept"]["sd"])
        if d["time"] is not None:
            kw["lattice"] = self._spacetime_lattice(window)
            kw["nu_t"], kw["time_units"] = m["nu_t"], d["time_units"]
        elif d["cell_size"] is not None:
            kw["cell_size"] = _as_axes(d["cell_size"])
        else:
            kw["shape"] = _as_axes(d["shape"])
        return LGCP(d["points"], window, **kw)

    def _window(self) -> Any:
        w = self._resolved["data"]["window"]
        if not isinstance(w, str):
            return tuple(w)
        try:
            import geopandas
        except ImportError:  # pragma: no cover - geopandas is in the dev/geo extras
            raise BackendUnavailableError(
                f"data.window = {w!r} is a vector file, which needs geopandas: pip install "
                "'lattice-lgm[geo]', or give the window as [xmin, xmax, ymin, ymax].") from None
        return geopandas.read_file(w)

    def _spacetime_lattice(self, window: Any) -> Any:
        """(t, y, x) lattice: the window's planar lattice times ``time`` cut by ``time_step``."""
        from .lattice import Lattice
        from .window import Window, lattice_for_window

        d = self._resolved["data"]
        size = {"cell_size": _as_axes(d["cell_size"])} if d["cell_size"] is not None else {
            "shape": _as_axes(d["shape"])}
        plane = lattice_for_window(Window.coerce(window), units=d["units"], crs=d["crs"],
                                   **size)
        t0, t1 = d["time"]
        axis = lattice_for_window(Window.interval(t0, t1), cell_size=d["time_step"])
        return Lattice(shape=(axis.shape[0], *plane.shape),
                       spacing=(axis.spacing[0], *plane.spacing),
                       origin=(t0, *plane.origin), dims=("t", "y", "x"),
                       units=plane.units, crs=plane.crs)

    def __repr__(self) -> str:
        src = f"{str(self.path)!r}" if self.path else "stored"
        return f"RunConfig({src}, store={str(self.store_path)!r})"


def _as_axes(v: Any) -> Any:
    return tuple(v) if isinstance(v, list) else v


def load_config(path: str | os.PathLike, overrides: Sequence[str] = ()) -> RunConfig:
    """Read, validate and resolve a TOML run configuration.

    Parameters
    ----------
    path : str or path-like
        The TOML file.
    overrides : sequence of str
        ``"section.key=value"`` strings (``"sampling.draws=200"``, ``"model.priors.range.rho0=
        50"``), applied on top of the file; the value is parsed as a TOML value, or taken as
        a bare string when it is not one.

    Returns
    -------
    RunConfig

    Raises
    ------
    ConfigError
        A missing file, invalid TOML, an unknown section or key (with the nearest valid
        name), a value of the wrong type (naming key, value and expected type), a missing
        required key or data file.
    """
    p = Path(path).expanduser()
    if not p.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist; write one with "
                          "`lattice-lgm init`.")
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p} is not valid TOML: {exc}.") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p} is not UTF-8 text: {exc}.") from None
    cli_keys = _apply_overrides(raw, overrides)
    resolved = _resolve(raw, base=p.resolve().parent, stem=p.stem,
                        cli_keys=frozenset(cli_keys))
    return RunConfig(resolved, path=p.resolve())


# -- documentation: --help and the template ---------------------------------------------------
def _default_text(key: Key) -> str:
    if key.default is REQUIRED:
        return "required"
    if key.default is None:
        return "unset"
    return f"default {_toml(key.default)}"


def describe_schema(width: int = 79) -> str:
    """Every section and key with its type, default and help (the ``--help`` epilogue).

    Returns
    -------
    str
    """
    lines = []
    for sec in SCHEMA:
        lines.append(f"[{sec.name}]{' (optional table)' if sec.optional else ''}: {sec.help}")
        for key in sec.keys:
            text = f"{key.help} ({key.kind.expected}; {_default_text(key)})"
            lines.extend(textwrap.wrap(text, width, initial_indent=f"  {key.name:<17} ",
                                       subsequent_indent=" " * 20))
    return "\n".join(lines)


def _toml(v: Any) -> str:
    """A TOML literal for a config value (strings, numbers, booleans, lists, tables)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)  # a valid TOML basic string
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    if isinstance(v, Mapping):
        items = ", ".join(f"{k if re.fullmatch(r'[A-Za-z0-9_-]+', k) else _toml(k)}"
                          f" = {_toml(x)}" for k, x in v.items())
        return "{ " + items + " }" if items else "{}"
    raise TypeError(f"no TOML literal for {v!r}")


def _comment(text: str, indent: str = "") -> list[str]:
    return textwrap.wrap(text, 96, initial_indent=indent + "# ",
                         subsequent_indent=indent + "# ")


def template(data_dir: str = "data") -> str:
    """A commented TOML configuration for the *bei* demo, with every key of :data:`SCHEMA`.

    Required keys and the demo's settings are active; every other key is commented out with
    its default (or an example when it has none).  :func:`load_config` parses it.

    Parameters
    ----------
    data_dir : str
        Directory of ``bei.csv`` and ``bei_covariates.csv`` relative to where the file is
        written (``lattice-lgm init`` computes it; default ``"data"``, the repository root).

    Returns
    -------
    str
    """
    bei, cov = f"{data_dir}/bei.csv", f"{data_dir}/bei_covariates.csv"
    demo = {
        "data.points": bei, "data.window": [0.0, 1000.0, 0.0, 500.0], "data.cell_size": 10.0,
        "data.units": "m", "data.covariates": {"elev": cov, "grad": cov},
        "data.formula": "~ elev + grad", "sampling.seed": 1,
    }
    # the bei window's shorter side is L = 500 m; n = 3604 trees in |W| = 5e5 m²
    L = 500.0
    prior_examples = {
        "model.priors.range": {"rho0": RANGE_FRACTION * L, "alpha": RANGE_ALPHA,
                               "upper": RANGE_UPPER_FRACTION * L},
        "model.priors.sd": {"sd0": SD0, "alpha": SD_ALPHA},
        "model.priors.intercept": {"mean": round(math.log(3604 / 5e5), 2), "sd": INTERCEPT_SD},
    }
    lines = [
        "# lattice_lgm run configuration (written by `lattice-lgm init`).",
        "#",
        "# Relative paths are resolved against the directory of THIS file. The demo paths",
        "# below point at the bei data of the lattice_lgm repository (data/bei.csv and",
        "# data/bei_covariates.csv) from where this file was written; edit them for your data.",
        "#",
        "# Run:        lattice-lgm run THIS.toml [--set sampling.draws=200]",
        "# Keys:       lattice-lgm run --help lists every key; commented keys show their",
        "#             default (or an example when they have none).",
        "",
    ]
    priors_started = False
    for sec in SCHEMA:
        if sec.optional:
            parent, _, leaf = sec.name.rpartition(".")
            if not priors_started:
                lines += [f"[{parent}]", *_comment("priors left out are LGCP's defaults, "
                                                   "scaled to the window"), ""]
                priors_started = True
            lines += _comment(sec.help)
            fields = "; ".join(f"{k.name}: {k.help} ({_default_text(k)})" for k in sec.keys)
            lines += _comment(fields)
            lines += [f"# {leaf} = {_toml(prior_examples[sec.name])}", ""]
            continue
        lines += [f"[{sec.name}]", *_comment(sec.help), ""]
        for key in sec.keys:
            dotted = f"{sec.name}.{key.name}"
            note = {"required": " (required)", "unset": " (unset by default)"}.get(
                _default_text(key), "")
            lines += _comment(key.help + note)
            if dotted in demo:
                lines.append(f"{key.name} = {_toml(demo[dotted])}")
            else:
                value = key.example if key.default in (None, {}) else key.default
                lines.append(f"# {key.name} = {_toml(value)}")
        lines.append("")
    return "\n".join(lines)
