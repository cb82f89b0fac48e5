"""The thread-budget benchmark runs end to end in quick mode and writes well-formed JSON."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_threads_benchmark_quick_writes_json(tmp_path):
    dest = tmp_path / "threads.json"
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "NUMBA_NUM_THREADS")}
    proc = subprocess.run(
        [sys.executable, "benchmarks/perf/threads.py", "--quick", "--out", str(dest)],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    res = json.loads(dest.read_text())
    rows = res["rows"]
    assert {(r["case"], r["config"]) for r in rows} == {("mining", "pools"), ("mining", "budget")}
    for r in rows:
        assert math.isfinite(r["median_step_s"]) and r["median_step_s"] > 0
        assert r["load"] == 0 and r["budget"]["chains"] >= 1
    assert res["slowdown"] == []  # no loaded run in this file yet
