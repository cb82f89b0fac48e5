"""Wall-clock medians for the demo and the benchmarks (DESIGN §8: medians, never single times)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def median_time(fn: Callable[[], Any], repeats: int) -> float:
    """Median wall-clock seconds of ``repeats`` calls of ``fn()``."""
    times = sorted(_once(fn)[1] for _ in range(max(1, int(repeats))))
    mid = len(times) // 2
    return times[mid] if len(times) % 2 else 0.5 * (times[mid - 1] + times[mid])


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """``(fn(), seconds)`` for one call."""
    return _once(fn)


def _once(fn: Callable[[], Any]) -> tuple[Any, float]:
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t
