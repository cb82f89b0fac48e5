"""The configuration's documentation.

``--help`` and the commented template (``lattice-lgm init``).
"""

from __future__ import annotations

import json
import math
import re
import textwrap
from collections.abc import Mapping
from typing import Any

from ..models.lgcp import (
    INTERCEPT_SD,
    RANGE_ALPHA,
    RANGE_FRACTION,
    RANGE_UPPER_FRACTION,
    SD0,
    SD_ALPHA,
)
from .schema import REQUIRED, SCHEMA, Key


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
