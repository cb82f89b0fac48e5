"""Reading a configuration.

Names checked, values checked, paths resolved, cross-checks, overrides.
"""

from __future__ import annotations

import copy
import difflib
import os
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..models.lgcp import DEFAULT_ALPHA, DEFAULT_NU
from ..samplers.defaults import METHODS as SAMPLER_METHODS
from ..samplers.defaults import default_method_for
from ..samplers.hyper import REPRESENTATIONS
from .kinds import ConfigError, _Bad
from .schema import _CONTAINERS, _LGCP, _SECTIONS, REQUIRED, SCHEMA, Key


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

    family = (_lookup(raw, "model") or {}).get("family", "lgcp")
    # another model family reads the data keys it needs; only the points file is required
    lgcp_only = {"data.window"} if family != "lgcp" else set()
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
            elif key.default is REQUIRED and dotted not in lgcp_only:
                extra = (f" when [{sec.name}] is given (or leave the whole table out for "
                         "LGCP's default)") if sec.optional else ""
                raise ConfigError(f"{dotted} is required{extra}; {key.help}.")
            else:
                v = None if key.default is REQUIRED else copy.deepcopy(key.default)
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
    if out["model"]["family"] == "lgcp":
        _lgcp_checks(out)
    else:
        _exists("data.points", out["data"]["points"])
    if out["store"]["path"] is None:
        if stem is None:
            raise ConfigError("store.path is not set; give the run's zarr store path.")
        out["store"]["path"] = os.path.abspath(base / f"{stem}.zarr")
    if out["output"]["maps"] is None:
        store = Path(out["store"]["path"])
        out["output"]["maps"] = str(store.with_name(store.name.removesuffix(".zarr") + "_maps"))


def _lgcp_checks(out: dict[str, Any]) -> None:
    """What only an LGCP's keys must satisfy together (and the method they resolve to)."""
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
    if rep not in SAMPLER_METHODS and rep not in REPRESENTATIONS:  # GP classification's
        raise ConfigError(
            f"sampling.representation = {rep!r} is a sampler of model.family = \"gpc\"; an "
            "LGCP takes 'auto', one of "
            f"{[*SAMPLER_METHODS, *REPRESENTATIONS]}.")
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


