"""Small argument checks shared by every module (one definition each, see STYLE §7)."""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import numpy as np

from .errors import InvalidParameterError, ShapeMismatchError


def positive_float(name: str, value: float, remedy: str = "pass a finite number > 0") -> float:
    """Return ``value`` as a float, or raise if it is NaN, infinite or not > 0.

    Only numbers are taken: a string (``"10"``) or a bool is refused rather than converted,
    so that a value read from the wrong field of a file is never silently reinterpreted.
    """
    if not is_number(value):
        raise InvalidParameterError(
            f"{name}={value!r} is not a number ({type(value).__name__}); {remedy}.")
    v = float(value)
    if not np.isfinite(v) or v <= 0.0:
        raise InvalidParameterError(f"{name}={value!r} must be finite and > 0; {remedy}.")
    return v


def is_number(value: object) -> bool:
    """A real number (Python or numpy, a 0-d numeric array included), not a bool or a string."""
    if isinstance(value, bool | np.bool_ | str | bytes):
        return False
    if isinstance(value, numbers.Real):
        return True
    return (isinstance(value, np.ndarray) and value.ndim == 0
            and value.dtype.kind in "iuf")


def check_bools(**flags: object) -> None:
    """Refuse a switch that is not a bool (``"no"`` would count as true)."""
    for name, v in flags.items():
        if not isinstance(v, bool | np.bool_):
            raise InvalidParameterError(
                f"{name}={v!r} is a {type(v).__name__}, not a bool; pass True or False.")


def positive_int(name: str, value: int, remedy: str = "pass e.g. 1") -> int:
    """Return ``value`` as an int, or raise unless it is an integer >= 1 (bools refused)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise InvalidParameterError(f"{name}={value!r} must be an integer >= 1; {remedy}.")
    return int(value)


def positive_vector(
    name: str, value: float | Sequence[float], ndim: int | None, remedy: str = "pass values > 0"
) -> tuple[float, ...]:
    """Broadcast a scalar or a per-axis sequence to a tuple of ``ndim`` positive floats.

    With ``ndim=None`` the length of ``value`` is kept (a scalar gives a 1-tuple).
    """
    arr = np.atleast_1d(np.asarray(value, dtype=object))
    if arr.ndim != 1:
        raise InvalidParameterError(f"{name}={value!r} must be a scalar or a 1-D sequence.")
    vals = tuple(positive_float(f"{name}[{i}]" if arr.size > 1 else name, v, remedy)
                 for i, v in enumerate(arr))
    if ndim is None:
        return vals
    if len(vals) == 1:
        return vals * ndim
    if len(vals) != ndim:
        raise ShapeMismatchError(
            f"{name}={value!r} has {len(vals)} entries but the lattice has {ndim} axes; "
            f"pass one value or one per axis."
        )
    return vals


def finite_array(
    name: str, x: np.ndarray, remedy: str = "remove or mask non-finite values"
) -> None:
    """Raise naming the first non-finite index of ``x``."""
    bad = ~np.isfinite(x)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise InvalidParameterError(
            f"{name} has a non-finite value {x[idx].item()!r} at index {idx}; {remedy}."
        )


def chain_array(name: str, x: np.ndarray, core_shape: tuple[int, ...]) -> np.ndarray:
    """Check that ``x`` has shape ``(n_chains, *core_shape)``; return it as float64."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != len(core_shape) + 1 or x.shape[1:] != tuple(core_shape):
        raise ShapeMismatchError(
            f"{name} has shape {x.shape}; expected (n_chains, *{tuple(core_shape)}) — "
            f"add a leading chain axis (x[None]) or reshape to the prior's shape."
        )
    return x
