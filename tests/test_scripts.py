"""The demo and the benchmark script run end to end (small sizes), so they never rot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_demo_runs_small(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "lattice_lgm.demo", "--n", "64", "--side", "640", "--range",
         "100", "--out", str(tmp_path)],
        capture_output=True, text=True, check=True, cwd=ROOT,
    ).stdout
    assert "circulant" in out and "gmrf" in out
    png = tmp_path / "prior_fields.png"
    assert png.stat().st_size > 10_000
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_benchmark_quick_writes_json(tmp_path):
    dest = tmp_path / "priors.json"
    subprocess.run(
        [sys.executable, "benchmarks/perf/priors.py", "--quick", "--repeats", "2",
         "--out", str(dest)],
        capture_output=True, text=True, check=True, cwd=ROOT, env=os.environ.copy(),
    )
    res = json.loads(dest.read_text())
    backends = {r["backend"] for r in res["rows"]}
    assert {"dense", "circulant", "gmrf-spectral"} <= backends
    for r in res["rows"]:
        assert r["draw_s"] > 0 and r["peak_rss_mb"] > 0 and r["range"] > 0
    circ = next(r for r in res["rows"] if r["backend"] == "circulant")
    assert circ["draw_over_floor"] > 0 and "speedup_draw_vs_dense" in circ
