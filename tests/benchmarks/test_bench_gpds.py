"""The GPDS benchmarks (scaling against N + M, Lansing through sample()) run in quick mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(script, out):
    proc = subprocess.run([sys.executable, script, "--quick", "--out", str(out)],
                          capture_output=True, text=True, cwd=ROOT, env=os.environ.copy(),
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout


def test_gpds_scaling_quick_writes_both_paths_and_resumes(tmp_path):
    _run("benchmarks/perf/gpds_scaling.py", tmp_path)
    res = json.loads((tmp_path / "gpds_scaling.json").read_text())
    assert {r["path"] for r in res["rows"]} == {"dense", "lattice", "lattice-scale"}
    for r in res["rows"]:
        assert r["s_per_iter"] > 0 and r["n_plus_m"] >= r["n"]
        assert set(r["ess_per_s"]) == {"sd", "range"}
        if r["path"] == "dense":  # started from a lattice state, not the empty history
            assert r["warm"] > 0 and r["n_count"] >= 1
    reps = json.loads((tmp_path / "gpds_lattice_representations.json").read_text())
    assert [r["representation"] for r in reps] == ["prior-white", "surr-scalar", "post-scalar"]
    assert (tmp_path / "gpds_scaling.png").stat().st_size > 10_000
    # every configuration is cached: a second run recomputes nothing and says the same
    before = (tmp_path / "gpds_scaling.json").read_text()
    _run("benchmarks/perf/gpds_scaling.py", tmp_path)
    assert (tmp_path / "gpds_scaling.json").read_text() == before


def test_gpds_lansing_quick_runs_four_diagnostics(tmp_path):
    out = _run("benchmarks/perf/gpds_lansing.py", tmp_path)
    res = json.loads((tmp_path / "gpds_lansing_quick.json").read_text())
    assert res["n_points"] == 2251 and set(res["rows"]) == {"sd", "range", "n_rejections",
                                                            "normaliser"}
    assert 0 < res["rows"]["normaliser"]["mean"] < 1
    assert "R-hat" in out and (tmp_path / "gpds_lansing_quick.png").is_file()
