"""Start-up of a sampling process: import, model, warm start, first sweep, and what compiles.

Issue 26: every CLI run, resume and Dask worker is a new process; with kernels compiled in
every process a run paid ~13 s before its first sweep.  This script starts ``--processes``
fresh Python processes one after another, each of which imports lattice_lgm, builds a model,
and runs :func:`lattice_lgm.sample` for one draw (warm start included; no tuning), counting
Numba compilations with Numba's ``numba:compile`` event (fired only when a function is
compiled, not when it is loaded from the on-disk cache).  The first process may compile
(a fresh clone's caches are empty); every later one should compile nothing.

Phases per process (seconds): ``python`` (interpreter start to the child's first line,
measured by the parent), ``import`` (``import lattice_lgm``), ``build`` (the model),
``warm_start`` and ``first_sweep`` (inside ``sample``), ``to_sampling`` (import done →
sampling starts: model, warm start and the run's set-up; the issue's "a second process starts
sampling within 2 s of import"), ``total`` (the parent's wall time to the end of the first
sweep).

Models: ``bei20`` (the demo's model at 20 m cells) and ``small`` (a 16 × 16 LGCP of the
tests); methods: the default (joint HMC on the circulant torus) and ``prior-white``.

Usage::

    python benchmarks/perf/startup.py                        # bei20, 4 processes
    python benchmarks/perf/startup.py --quick --out /tmp/s.json   # small, 2 processes (tests)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "startup.json"

CHILD = r"""
import sys, time
t0 = time.perf_counter()
from numba.core import event as ev
compiles = []

class _Count(ev.Listener):
    def on_start(self, event):
        d = event.data or {}
        compiles.append(str(getattr(d.get("dispatcher"), "py_func", d.get("dispatcher"))))

    def on_end(self, event):
        pass

ev.register("numba:compile", _Count())
sys.path.insert(0, CODE)
import lattice_lgm as ll
t_import = time.perf_counter()
if MODEL == "bei20":
    from lattice_lgm.config import load_config
    model = load_config(ROOT + "/examples/bei_demo.toml", ["data.cell_size=20"]).build_model()
else:
    sys.path.insert(0, ROOT + "/tests/runs")
    from test_runs import build_model
    model = build_model()
t_model = time.perf_counter()
marks = {}
import lattice_lgm.models.lgcp_start as _samplers  # the LGCP's start step calls warm_start here
_orig = _samplers.warm_start

def _timed(*a, **k):
    t = time.perf_counter()
    out = _orig(*a, **k)
    marks["warm_start"] = time.perf_counter() - t
    marks["sampling_starts"] = time.perf_counter()
    return out

_samplers.warm_start = _timed
n_before = len(compiles)
ll.sample(model, draws=1, tune=0, chains=4, random_seed=1, progressbar=False,
          representation=METHOD)
t_end = time.perf_counter()
starts = marks.get("sampling_starts", t_end)
print("RESULT " + repr({
    "import": t_import - t0, "build": t_model - t_import,
    "warm_start": marks.get("warm_start"), "to_sampling": starts - t_import,
    "first_sweep": t_end - starts, "child": t_end - t0,
    "compiles": len(compiles), "compiled": sorted(set(compiles))[:20],
    "compiles_in_sample": len(compiles) - n_before}))
"""


def one_process(model: str, method: str, code_tree: Path = ROOT) -> dict:
    code = (f"ROOT = {str(ROOT)!r}\nCODE = {str(code_tree)!r}\nMODEL = {model!r}\n"
            f"METHOD = {method!r}\n" + CHILD)
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, env=os.environ.copy(), timeout=900)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"child failed ({model}, {method}):\n{proc.stderr[-3000:]}")
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    res = eval(line[len("RESULT "):], {})
    res["total"] = wall
    res["python"] = wall - res["child"]
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="bei20", choices=("bei20", "small"))
    ap.add_argument("--methods", nargs="+", default=["auto", "prior-white"])
    ap.add_argument("--processes", type=int, default=4)
    ap.add_argument("--quick", action="store_true", help="small model, 2 processes")
    ap.add_argument("--code", type=Path, default=ROOT,
                    help="the checkout whose lattice_lgm is timed (default this one)")
    ap.add_argument("--out", type=Path, default=None, help=f"results (default {RESULTS})")
    a = ap.parse_args(argv)
    if a.quick:
        a.model, a.processes = "small", 2
    out = a.out or RESULTS
    rows = []
    for method in a.methods:
        for i in range(a.processes):
            r = one_process(a.model, method, a.code.resolve())
            r.update(model=a.model, method=method, process=i, loadavg=list(os.getloadavg()),
                     code=subprocess.run(["git", "-C", str(a.code), "rev-parse", "--short",
                                          "HEAD"], capture_output=True, text=True).stdout.strip())
            rows.append(r)
            print(f"{a.model} {method:>11} process {i}: import {r['import']:.2f} s, model "
                  f"{r['build']:.2f} s, warm start {r['warm_start'] or 0:.2f} s, import→sampling "
                  f"{r['to_sampling']:.2f} s, first sweep {r['first_sweep']:.2f} s, total "
                  f"{r['total']:.2f} s; {r['compiles']} compilations", flush=True)
    later = [r for r in rows if r["process"] > 0]
    summary = {
        "code": rows[0]["code"], "model": a.model,
        "later_processes_compile": sum(r["compiles"] for r in later),
        "median_to_sampling_s": float(np.median([r["to_sampling"] for r in later]))
        if later else None,
        "median_total_s": float(np.median([r["total"] for r in later])) if later else None,
    }
    # one file for every tree and model timed (e.g. before/after a change): replace ours only
    old = json.loads(out.read_text()) if out.exists() and not a.quick else {}
    keep = [r for r in old.get("rows", [])
            if (r.get("code"), r.get("model")) != (summary["code"], a.model)]
    summaries = [x for x in old.get("summaries", [])
                 if (x.get("code"), x.get("model")) != (summary["code"], a.model)]
    out.write_text(json.dumps({"rows": keep + rows, "summaries": [*summaries, summary],
                               "summary": summary, "cpu": platform.processor(),
                               "cores": len(os.sched_getaffinity(0)),
                               "date": time.strftime("%Y-%m-%d %H:%M")}, indent=1))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
