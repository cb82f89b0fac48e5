"""The test suite's shared settings: the false-failure budget of the statistical tests.

Every module with Monte Carlo checks states its family-wise false-failure rate per run as
``FALSE_FAILURE_RATE`` (derived in its docstring by a union bound over its checks, with fixed,
never-tuned seeds).  A module with a test marked ``statistical`` must state one.  The rates of
the modules a run collects add up (a union bound again) and must stay within the budget of
its tier: :data:`DEFAULT_TIER_BUDGET` for ``make test`` (``-m "not slow"``),
:data:`ALL_TIERS_BUDGET` when the slow tier runs too.  The total is printed at the end.
"""

from __future__ import annotations

import pytest

#: the default tier fails falsely in at most 2 % of runs
DEFAULT_TIER_BUDGET = 0.02
#: every tier together, at most 5 %
ALL_TIERS_BUDGET = 0.05


def false_failure_total(items: list[pytest.Item]) -> tuple[float, list[str]]:
    """The summed rate of the modules of ``items`` and the statistical modules stating none."""
    total, missing, seen = 0.0, [], set()
    for item in items:
        mod = getattr(item, "module", None)
        if mod is None or mod.__name__ in seen:
            continue
        seen.add(mod.__name__)
        rate = getattr(mod, "FALSE_FAILURE_RATE", None)
        if rate is None:
            if any(i.get_closest_marker("statistical") for i in items
                   if getattr(i, "module", None) is mod):
                missing.append(mod.__name__)
            continue
        total += float(rate)
    return total, sorted(missing)


def pytest_collection_finish(session: pytest.Session) -> None:
    total, missing = false_failure_total(session.items)
    if missing:
        raise pytest.UsageError(
            f"statistical test modules without FALSE_FAILURE_RATE: {missing}; state each "
            "module's family-wise false-failure rate (conftest.py).")
    slow = any(i.get_closest_marker("slow") for i in session.items)
    budget = ALL_TIERS_BUDGET if slow else DEFAULT_TIER_BUDGET
    if total > budget:
        raise pytest.UsageError(
            f"the collected tests fail falsely with probability up to {total:.2g} per run, "
            f"over the budget {budget:g}: tighten a test's threshold (and say so in its "
            "docstring) rather than add to the sum.")
    session.config.stash[_TOTAL] = (total, budget)


_TOTAL = pytest.StashKey[tuple[float, float]]()


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    total, budget = config.stash.get(_TOTAL, (None, None))
    if total is not None and total > 0:
        terminalreporter.write_line(
            f"false-failure rate of the statistical tests collected: ≤ {total:.2g} per run "
            f"(budget {budget:g})")
