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


def test_dense_benchmark_quick_writes_json(tmp_path):
    """benchmarks/perf/dense.py: the kernel matrix is bitwise the lag-array expression, and
    every Ionosphere representation and the old-path fixed sweep are timed (no time targets)."""
    dest = tmp_path / "dense.json"
    subprocess.run([sys.executable, "benchmarks/perf/dense.py", "--quick", "--out", str(dest)],
                   capture_output=True, text=True, check=True, cwd=ROOT, env=os.environ.copy())
    res = json.loads(dest.read_text())
    assert [(r["n"], r["ndim"]) for r in res["kernel"]] == [(200, 34), (200, 10), (811, 1),
                                                           (625, 2)]
    assert all(r["bitwise_equal"] and r["speedup"] > 0 for r in res["kernel"])
    # the one-factor surrogate states the same density as the two-factor algebra it replaced
    assert [r["n"] for r in res["surrogate"]] == [200, 625]
    assert all(r["max_abs_diff_logmarginal"] < 1e-8 and r["max_abs_diff_mean"] < 1e-10
               and r["speedup"] > 0 for r in res["surrogate"])
    assert all(r["wtw_dsyrk_s"] > 0 and r["syrk_over_lauum"] > 0 for r in res["surrogate"])
    methods = [r["method"] for r in res["sweep"]]
    assert methods[:4] == ["fixed", "prior-white", "surr-site", "post-site"]
    assert all(r["seconds_per_sweep"] > 0 for r in res["sweep"])
    # reusing the parent's distances leaves every representation's draws bitwise the same
    assert all(r["same_draws"] and r["speedup_of_distance_reuse"] > 0 for r in res["sweep"][:4])
    assert res["sweep"][-1]["speedup_of_new"] > 0
