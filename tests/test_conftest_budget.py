"""The false-failure budget of conftest.py adds the rates and names modules that state none."""

from __future__ import annotations

import types

from tests.conftest import false_failure_total


class _Item:
    def __init__(self, module, marks=()):
        self.module, self._marks = module, set(marks)

    def get_closest_marker(self, name):
        return name if name in self._marks else None


def _module(name, rate=None):
    m = types.ModuleType(name)
    if rate is not None:
        m.FALSE_FAILURE_RATE = rate
    return m


def test_rates_add_once_per_module_and_silent_statistical_modules_are_named():
    a, b, c = _module("a", 1e-3), _module("b", 2e-3), _module("c")
    items = [_Item(a, ["statistical"]), _Item(a), _Item(b), _Item(c, ["statistical"]),
             _Item(_module("d"))]
    total, missing = false_failure_total(items)
    assert abs(total - 3e-3) < 1e-15 and missing == ["c"]

