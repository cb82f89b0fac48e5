"""What a run costs before it starts: peak memory and time of the model build and of sampling.

The figures behind the projections that refuse a run before any work (issue 27):
``models.lgcp.BUILD_BYTES_PER_CELL`` / ``BUILD_SECONDS_PER_CELL`` and the per-backend sampler
figures in ``lattice_lgm.runs.SAMPLER_COST``.  Every case (backend, cell size, chains) runs in
a fresh subprocess, so that its peak resident memory (``ru_maxrss``) is its own:

1. resident memory after the imports (the baseline);
2. build the bei LGCP (two covariates, the demo's model) at the cell size: its time and its
   peak above the baseline, per lattice cell;
3. sample in memory with the backend's default method (fields not kept: the draws' own
   memory is the store's business, projected separately): the peak above the build's, per
   chain and state cell (``prior.state_shape``: the torus for circulant priors, the padded
   lattice for GMRFs, the cells for dense), and, from a second identical run (its Numba
   kernels loaded), the seconds per iteration and chain per state cell.

Usage::

    python benchmarks/perf/resources.py           # writes benchmarks/results/resources.json
    python benchmarks/perf/resources.py --quick   # the smallest case per backend (a test)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RESULTS = HERE.parent / "results"
#: (backend, cell size in m, chains); dense only where its O(N³) hyperparameter moves are
#: short (bei at 12.5 m, N = 3200, took minutes per run)
CASES = [("circulant", 10.0, 1), ("circulant", 5.0, 1), ("circulant", 5.0, 2),
         ("circulant", 2.5, 1),
         ("gmrf", 10.0, 1), ("gmrf", 5.0, 1), ("gmrf", 5.0, 2), ("gmrf", 2.5, 1),
         ("dense", 25.0, 1), ("dense", 20.0, 1), ("dense", 20.0, 2)]
QUICK = [("circulant", 20.0, 1), ("gmrf", 20.0, 1), ("dense", 25.0, 1)]
#: iterations of each sampling run: HMC's windowed adaptation needs 20 warm-up iterations
TUNE, DRAWS = 20, 10


def _rss() -> float:
    """Peak resident memory of this process so far, bytes (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024.0


def run_one(backend: str, cell: float, chains: int) -> dict:
    import numpy as np
    import pandas as pd

    from lattice_lgm import LGCP
    from lattice_lgm.covariates import from_table
    from lattice_lgm.runs import sample
    from lattice_lgm.samplers import default_method_for

    base = _rss()
    data = ROOT / "data"
    pts = pd.read_csv(data / "bei.csv")
    cov = {k: from_table(data / "bei_covariates.csv", k) for k in ("elev", "grad")}
    t0 = time.perf_counter()
    model = LGCP(pts, (0, 1000, 0, 500), cell_size=cell, units="m", covariates=cov,
                 formula="~ elev + grad", backend=backend, allow_dense=backend == "dense")
    build_s = time.perf_counter() - t0
    built = _rss()
    run = dict(draws=DRAWS, tune=TUNE, chains=chains, random_seed=1, thin_fields=0,
               progressbar=False)
    t0 = time.perf_counter()
    sample(model, **run)
    first_s = time.perf_counter() - t0
    peak = _rss()
    t0 = time.perf_counter()
    sample(model, **run)
    second_s = time.perf_counter() - t0
    cells = int(model.lattice.size)
    state = int(np.prod(model.prior.state_shape))
    its = TUNE + DRAWS
    return {
        "backend": backend, "cell_size": cell, "chains": chains, "lattice_cells": cells,
        "state_cells": state, "method": default_method_for(model.backend),
        "build_s": build_s, "build_peak_bytes": built - base,
        "build_bytes_per_cell": (built - base) / cells,
        "sample_peak_bytes": peak - built,
        "sampler_bytes_per_chain_state_cell": (peak - built) / (chains * state),
        "first_run_s": first_s, "sample_s": second_s,
        "seconds_per_iteration_chain_state_cell": second_s / (its * chains * state),
    }


def fit(rows: list[dict]) -> dict[str, dict]:
    """Per backend, the constants of ``lattice_lgm.runs.SamplerCost``.

    The exponents come from the one-chain cases at the two largest state sizes, never below
    1 (a state of n cells is itself n numbers: a smaller slope is a fixed overhead fading);
    the rates from the largest; the per-chain rate from a two-chain case against the
    one-chain case of the same size.
    """
    import math

    out = {}
    for backend in sorted({r["backend"] for r in rows}):
        one = sorted((r for r in rows if r["backend"] == backend and r["chains"] == 1),
                     key=lambda r: r["state_cells"])
        if len(one) < 2:
            continue
        a, b = one[-2], one[-1]
        ratio = math.log(b["state_cells"] / a["state_cells"])
        p = max(1.0, math.log(b["sample_peak_bytes"] / a["sample_peak_bytes"]) / ratio)
        q = max(1.0, math.log(b["sample_s"] / a["sample_s"]) / ratio)
        n = b["state_cells"]
        per_chain = 0.0
        for two in (r for r in rows if r["backend"] == backend and r["chains"] == 2):
            same = next(r for r in one if r["state_cells"] == two["state_cells"])
            per_chain = max(0.0, (two["sample_peak_bytes"] - same["sample_peak_bytes"])
                            / two["state_cells"] ** p)
        its = TUNE + DRAWS
        out[backend] = {"shared": b["sample_peak_bytes"] / n**p, "per_chain": per_chain,
                        "p": p, "seconds": b["sample_s"] / (its * n**q), "q": q,
                        "largest_state_cells": n}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="one small case per backend")
    ap.add_argument("--out", type=Path, default=RESULTS / "resources.json")
    ap.add_argument("--one", nargs=3, metavar=("BACKEND", "CELL", "CHAINS"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(run_one(args.one[0], float(args.one[1]), int(args.one[2]))))
        return 0
    rows: list[dict] = []
    if not args.quick and args.out.exists():  # resumable: the cases already measured stay
        rows = json.loads(args.out.read_text()).get("rows", [])
    done = {(r["backend"], r["cell_size"], r["chains"]) for r in rows}
    for backend, cell, chains in (QUICK if args.quick else CASES):
        if (backend, cell, chains) in done:
            continue
        cmd = [sys.executable, __file__, "--one", backend, str(cell), str(chains)]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy())
        if proc.returncode != 0:
            print(proc.stderr[-2000:], file=sys.stderr)
            return proc.returncode
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(f"{backend:9s} {cell:5g} m {chains} chain(s): {row['lattice_cells']:7d} cells, "
              f"state {row['state_cells']:8d}; build {row['build_s']:6.2f} s "
              f"{row['build_bytes_per_cell']:7.0f} B/cell; sampling peak "
              f"{row['sample_peak_bytes'] / 2**20:7.1f} MiB = "
              f"{row['sampler_bytes_per_chain_state_cell']:7.0f} B/(chain·state cell); "
              f"{row['sample_s']:6.2f} s = "
              f"{row['seconds_per_iteration_chain_state_cell'] * 1e9:7.1f} ns/(it·chain·cell)",
              flush=True)
        if not args.quick:
            _write(args.out, rows)
    for backend, f in fit(rows).items():
        print(f"{backend}: SamplerCost(shared={f['shared']:.4g}, per_chain={f['per_chain']:.4g}, "
              f"p={f['p']:.3g}, seconds={f['seconds']:.4g}, q={f['q']:.3g})")
    if not args.quick:
        _write(args.out, rows)
        print(f"wrote {args.out}")
    return 0


def _write(path: Path, rows: list[dict]) -> None:
    """The rows so far and their fit (after every case: an interrupted run keeps them)."""
    out = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                       "load": os.getloadavg()},
           "tune": TUNE, "draws": DRAWS, "rows": rows, "fit": fit(rows)}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    raise SystemExit(main())
