"""The mixing benchmark (issue 25) runs end to end in quick mode and writes its report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_mixing_benchmark_quick_writes_json_and_png(tmp_path):
    proc = subprocess.run(
        [sys.executable, "benchmarks/perf/mixing_lgcp.py", "--quick", "--out", str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT, env=os.environ.copy(), timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    res = json.loads((tmp_path / "mixing_lgcp.json").read_text())
    assert (tmp_path / "mixing_lgcp.png").stat().st_size > 0
    rows = {(r["problem"], r["method"]): r for r in res["rows"]}
    assert set(rows) == {("bei20", "hmc"), ("bei20", "prior-white")}
    for r in rows.values():
        assert r["iterations"] == 30 and r["seconds_per_iteration"] > 0
        assert set(r["final_rhat"]) >= {"sd", "range", "mean", "elev", "grad", "loglik"}
        assert r["threads"]["NUMBA_NUM_THREADS"] == "1"
    # resumable: a second call skips the finished runs and rebuilds the same summary
    again = subprocess.run(
        [sys.executable, "benchmarks/perf/mixing_lgcp.py", "--quick", "--out", str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT, env=os.environ.copy(), timeout=300,
    )
    assert again.returncode == 0 and again.stdout.count("done before, skipped") == 2
