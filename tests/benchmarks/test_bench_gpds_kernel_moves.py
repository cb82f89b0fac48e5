"""benchmarks/perf/gpds_kernel_moves.py runs end to end in quick mode and writes its JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_gpds_kernel_moves_quick_writes_json(tmp_path):
    dest = tmp_path / "gpds_kernel_moves.json"
    proc = subprocess.run(
        [sys.executable, "benchmarks/perf/gpds_kernel_moves.py", "--quick", "--out", str(dest)],
        capture_output=True, text=True, cwd=ROOT, env=os.environ.copy(), timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    res = json.loads(dest.read_text())
    assert {r["method"] for r in res["rows"]} == {"mh", "surrogate-slice"}
    assert all(r["seconds"] > 0 and r["ess"] > 0 for r in res["rows"])
    # a slice sampler always moves; the summary has both methods
    assert all(r["kernel_accept_rate"] == 1.0 for r in res["rows"]
               if r["method"] == "surrogate-slice")
    assert set(res["summary"]) == {"mh", "surrogate-slice"}
