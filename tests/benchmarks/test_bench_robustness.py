"""The issue-27 campaigns: bad inputs refused by name, faults survived or named.

``benchmarks/robustness/bad_inputs.py --quick`` tries every bad input of its list against the
API and the CLI; it exits 1 if any is accepted, raises a raw exception or is refused without
naming the argument.  ``faults.py --quick`` damages a finished and an interrupted store in
each of its ways and exits 1 if any damage gives a raw exception or loses data (slow tier:
a minute of small runs; its classes have unit tests in test_store_integrity).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(script: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, script, "--quick"], capture_output=True, text=True,
                          cwd=ROOT, env=os.environ.copy(), timeout=1200)


def test_every_bad_input_of_the_campaign_is_refused_by_name():
    proc = _run("benchmarks/robustness/bad_inputs.py")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "refused" in proc.stdout.splitlines()[-1]


@pytest.mark.slow
def test_every_fault_of_the_campaign_is_survived_or_named():
    proc = _run("benchmarks/robustness/faults.py")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    last = proc.stdout.splitlines()[-1]
    assert "raw" not in last and "lost" not in last, last
