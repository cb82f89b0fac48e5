"""The lattice GPDS on all 2251 Lansing Woods trees: four chains through ``sample()``.

Issue 29 asks the lattice path to run "on thousands of data points (lansing: 2251 points)"
where the paper's dense sampler cannot; the project's test of done for sampling work is
convergence (R-hat, ESS).  This script runs :class:`lattice_lgm.gpds.lattice.LatticeGPDS`
(uniform base on the unit square, ``CELLS²`` cells, squared-exponential kernel with log-normal
priors on ``sd`` and ``range``) with the run machinery — four chains, a zarr store, the default
sweep — and reports ArviZ's rank-normalised R-hat and bulk/tail ESS of ``sd``, ``range``, the
number of rejections ``M`` and ``Z[g]``, the sampling time, and the posterior mean density map
(``results/gpds_lansing.png``).  Results: ``results/gpds_lansing.json``.

Usage::

    python benchmarks/perf/gpds_lansing.py              # 4 chains × 800 draws (~12 min, 2 cores)
    python benchmarks/perf/gpds_lansing.py --quick --out /tmp/l   # a smoke run (the tests)
    python benchmarks/perf/gpds_lansing.py --draws 3000 --tune 300 --store /tmp/lansing.zarr
                                      # a long run; rerun the same line to resume after a kill
    python benchmarks/perf/gpds_lansing.py --draws 3000 --tune 300 --store /tmp/lansing.zarr \
        --extend 1000                 # 1000 more draws per chain on the finished run
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from lattice_lgm.covariance import SquaredExponential
from lattice_lgm.gpds import UniformBase
from lattice_lgm.gpds.lattice import LatticeGPDS
from lattice_lgm.gpds.plots import density_map
from lattice_lgm.hyperpriors import LogNormal
from lattice_lgm.runs import sample

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
LANSING = ROOT / "data" / "lansing.csv"
SEED, CELLS, CHAINS, DRAWS, TUNE = 2251, 64, 4, 800, 200
#: log-normal priors (mu, sigma[, upper]) of the kernel's sd and range on the unit square
PRIOR_SD, PRIOR_RANGE = (0.0, 0.5), (np.log(0.2), 0.5, 0.8)
VARS = ("sd", "range", "n_rejections", "normaliser")


def model(cells: int) -> LatticeGPDS:
    """The Lansing GPDS on ``cells²`` cells."""
    pts = np.loadtxt(LANSING, delimiter=",", skiprows=1, usecols=(0, 1))
    return LatticeGPDS(pts, UniformBase.create([0.0, 0.0], [1.0, 1.0]), cells=cells,
                       kernel=SquaredExponential(sd=1.0, lengthscale=0.1),
                       hyperpriors={"sd": LogNormal(*PRIOR_SD),
                                    "range": LogNormal(*PRIOR_RANGE)})


def main(argv: Sequence[str] | None = None) -> int:
    """Run, diagnose, plot; write JSON and PNG."""
    import arviz as az

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="16² cells, 2 chains × 20 draws")
    ap.add_argument("--out", type=Path, default=None, help="results directory")
    ap.add_argument("--draws", type=int, default=DRAWS, help="draws per chain")
    ap.add_argument("--tune", type=int, default=TUNE, help="tuning sweeps per chain")
    ap.add_argument("--chains", type=int, default=CHAINS, help="number of chains")
    ap.add_argument("--representation", default="auto",
                    help="the sweep's θ move: auto (the default, prior-white) or hmc (joint "
                         "HMC of θ and the field); results go to gpds_lansing_<it>.json "
                         "unless auto")
    ap.add_argument("--extend", type=int, default=None,
                    help="add this many draws per chain to the finished run in --store "
                         "(its --draws, --tune, --chains as first run)")
    ap.add_argument("--store", type=Path, default=None,
                    help="keep the zarr store here; an existing one is resumed")
    args = ap.parse_args(argv)
    out = args.out or RESULTS
    out.mkdir(parents=True, exist_ok=True)
    cells, chains, draws, tune = ((16, 2, 20, 5) if args.quick
                                  else (CELLS, args.chains, args.draws, args.tune))
    m = model(cells)
    tag = "" if args.representation == "auto" else f"_{args.representation}"
    with tempfile.TemporaryDirectory() as tmp:
        store = args.store or Path(tmp) / "lansing.zarr"
        resumed = store.exists()
        t0 = time.perf_counter()
        more = {"extend": args.extend} if args.extend else {"resume": resumed}
        tree = sample(m, draws=draws, tune=tune, chains=chains, random_seed=SEED,
                      store=store, progressbar=False, representation=args.representation,
                      **more)
        draws += args.extend or 0
        secs = time.perf_counter() - t0
        post = tree["posterior"].to_dataset()[list(VARS)]
        table = az.summary(post, kind="diagnostics", round_to="none")
        stats = az.summary(post, kind="stats", round_to="none")
        density_map(tree, out / ("gpds_lansing_quick.png" if args.quick
                                 else f"gpds_lansing{tag}.png"))
    rows = {v: {"mean": float(stats.loc[v, "mean"]), "sd": float(stats.loc[v, "sd"]),
                "r_hat": float(table.loc[v, "r_hat"]), "ess_bulk": float(table.loc[v, "ess_bulk"]),
                "ess_tail": float(table.loc[v, "ess_tail"])} for v in VARS}
    res = {"representation": args.representation, "cells": cells, "chains": chains,
           "draws": draws, "tune": tune, "seconds": secs,
           # resumed or extended: seconds and sweeps_per_s cover this invocation only
           "resumed": resumed, "extended_by": args.extend,
           "sweeps_per_s": chains * ((args.extend or draws + tune) if resumed else
                                     draws + tune) / secs, "n_points": len(m.data),
           "interpolation_bound": m.interpolation_bound(), "rows": rows,
           "machine_load": os.getloadavg()[0]}
    name = f"gpds_lansing{tag}_quick.json" if args.quick else f"gpds_lansing{tag}.json"
    (out / name).write_text(json.dumps(res, indent=1))
    for v, r in rows.items():
        print(f"{v:13s} mean {r['mean']:.4g} sd {r['sd']:.3g}  R-hat {r['r_hat']:.3f}  "
              f"ESS bulk {r['ess_bulk']:.0f} tail {r['ess_tail']:.0f}")
    done = f"{args.extend} more draws each" if args.extend else f"{draws + tune} sweeps"
    print(f"{chains} chains × {done} in {secs:.0f} s (this invocation)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
