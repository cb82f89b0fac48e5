"""The kinds of value a configuration key takes, each with its check and its description."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from .._validation import is_number
from ..errors import InvalidParameterError


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


def _int(lo: int) -> Kind:
    def check(v: Any) -> int:
        if not _is_int(v) or v < lo:
            raise _Bad
        return int(v)

    return Kind(f"an integer >= {lo}", check)


def _float(lo: float | None = None, hi: float | None = None, what: str | None = None) -> Kind:
    """A finite number in the open interval (lo, hi); an integer is accepted and converted."""
    def check(v: Any) -> float:
        if not is_number(v) or not math.isfinite(v):
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




#: model families known by a short name (``model.family``), beside "package.module:Class"
FAMILIES = {"gpds": "lattice_lgm.gpds.lattice:LatticeGPDS",
            "gpc": "lattice_lgm.gpc.model:GPClassification",
            "gplvm": "lattice_lgm.gplvm.model:SupervisedGPLVM"}


def _family() -> Kind:
    def check(v: Any) -> str:
        if not isinstance(v, str) or not (v == "lgcp" or v in FAMILIES or re.fullmatch(
                r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", v)):
            raise _Bad
        return v

    return Kind('"lgcp", "gpds", "gpc", "gplvm", or "package.module:Class"', check)


def _free_table() -> Kind:
    def check(v: Any) -> dict:
        if not isinstance(v, dict):
            raise _Bad
        return dict(v)

    return Kind("a table (passed to the model family as it is)", check)
