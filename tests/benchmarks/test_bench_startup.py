"""A second sampling process compiles nothing: Numba's kernels load from the on-disk cache.

Runs ``benchmarks/perf/startup.py --quick``: two fresh processes per method (joint HMC, the
default on the circulant torus, and the Murray–Adams ``prior-white`` sweep with elliptical
slice updates) each import lattice_lgm, build a small LGCP and run ``sample`` for one draw
with its warm start, counting Numba compilations (the ``numba:compile`` event fires only for a
compilation, not for a cache load).  The first process may compile (a fresh clone); the
second must not (issue 26: every CLI run, resume and Dask worker paid ~13 s of compilation).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_second_process_compiles_nothing(tmp_path):
    dest = tmp_path / "startup.json"
    proc = subprocess.run(
        [sys.executable, "benchmarks/perf/startup.py", "--quick", "--out", str(dest)],
        capture_output=True, text=True, cwd=ROOT, env=os.environ.copy(), timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    res = json.loads(dest.read_text())
    rows = res["rows"]
    assert {r["method"] for r in rows} == {"auto", "prior-white"}
    for r in rows:
        assert r["first_sweep"] > 0 and r["warm_start"] is not None and r["total"] > 0
        if r["process"] > 0:
            assert r["compiles"] == 0, f"{r['method']}: compiled again: {r['compiled']}"
    assert res["summary"]["later_processes_compile"] == 0
