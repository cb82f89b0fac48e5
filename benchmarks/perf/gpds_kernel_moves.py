"""The GPDS's two moves of the kernel's θ: effective samples of the lengthscale per second.

Adams, Murray & MacKay (2009), §4.3: θ by Metropolis–Hastings given the function values
(``kernel_method="mh"``, :func:`lattice_lgm.gpds.update_kernel`), or jointly with them by
Murray & Adams (2010)'s surrogate-data slice sampling (``"surrogate-slice"``,
:func:`lattice_lgm.gpds.update_kernel_surrogate`).  Both run inside the whole sweep
(:func:`lattice_lgm.gpds.sweep`: M, locations, values by elliptical slice sampling, θ), which
is what a user runs; the rest of the sweep is the same for both.

The problem: one 1-D data set of ``N`` points from Algorithm 1 (uniform π on [0, 1], a
squared-exponential GP with sd 1.5 and the lengthscale below, logistic Φ); θ is the
lengthscale with a log-normal prior (median 0.3, log-sd 0.5), the sd fixed.  Every chain
starts at the data's own latent history and lengthscale (an exact posterior draw: no
burn-in), with seeds ``0 … chains − 1``, the same for both methods.  Effective sample sizes of
``log ℓ`` by ArviZ's bulk ESS per chain; ESS per second of the sweeps' wall time.  Pools are
single-threaded (``threads.using(thread_budget(1, 1))``): a chain's work is small and a
shared machine's neighbours make threads wait (decision 79).

Usage::

    python benchmarks/perf/gpds_kernel_moves.py    # decision 104: 4 × 20 000 sweeps, ~8 min
    python benchmarks/perf/gpds_kernel_moves.py --quick --out /tmp/k.json   # a smoke run
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import arviz as az
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from lattice_lgm import threads  # noqa: E402
from lattice_lgm.covariance import SquaredExponential  # noqa: E402
from lattice_lgm.gpds import (  # noqa: E402
    LatentHistory,
    UniformBase,
    sample_prior,
    sweep,
)
from lattice_lgm.hyperpriors import LogNormal  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "gpds_kernel_moves.json"
#: the data: N points at this lengthscale (sd 1.5), from this seed
N_DATA, ELL_TRUE, SD, DATA_SEED = 20, 0.15, 1.5, 2009
HYPER = LogNormal(math.log(0.3), 0.5)
#: the methods in the order each seed runs them
METHODS = ("mh", "surrogate-slice")


def run_chain(method: str, seed: int, n_sweeps: int, start: LatentHistory) -> dict:
    """One chain of ``n_sweeps`` sweeps: log ℓ per sweep, wall time, acceptances."""
    rng = np.random.default_rng(seed)
    base = UniformBase.create([0.0], [1.0])
    k = SquaredExponential(sd=SD, lengthscale=ELL_TRUE)
    s, trace, acc = start, np.empty(n_sweeps), 0
    t0 = time.perf_counter()
    for i in range(n_sweeps):
        s, k, _, a = sweep(s, rng, k, base, hyperpriors={"lengthscale": HYPER},
                           kernel_method=method)
        trace[i] = math.log(k.lengthscale[0])
        acc += a["kernel"]
    wall = time.perf_counter() - t0
    ess = float(az.ess(trace[None, :], method="bulk"))
    return {"method": method, "seed": seed, "seconds": wall, "ess": ess,
            "ess_per_s": ess / wall, "kernel_accept_rate": acc / n_sweeps,
            "mean_log_ell": float(trace.mean()), "final_M": s.n_rejections,
            "trace": trace}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 chains of 30 sweeps (a smoke run)")
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--sweeps", type=int, default=20000)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    chains, n_sweeps = (2, 30) if args.quick else (args.chains, args.sweeps)
    data = sample_prior(SquaredExponential(sd=SD, lengthscale=ELL_TRUE),
                        UniformBase.create([0.0], [1.0]), N_DATA,
                        np.random.default_rng(DATA_SEED))
    start = LatentHistory.from_prior(data)
    rows = []
    with threads.using(threads.thread_budget(1, 1)):
        run_chain("surrogate-slice", 99, 5, start)  # compile / load the kernels once
        for seed in range(chains):
            for method in METHODS:  # interleaved: both see the same machine load
                r = run_chain(method, seed, n_sweeps, start)
                rows.append(r)
                print(f"{method:16s} seed {seed}: ESS {r['ess']:7.1f} in {r['seconds']:6.1f} s "
                      f"= {r['ess_per_s']:6.2f}/s (θ accepted {r['kernel_accept_rate']:.2f})",
                      flush=True)
    summary = {}
    for method in METHODS:
        mine = [r for r in rows if r["method"] == method]
        ess, sec = sum(r["ess"] for r in mine), sum(r["seconds"] for r in mine)
        # the chains together: ArviZ's rank-normalised bulk ESS sees chains that disagree
        traces = np.stack([r.pop("trace") for r in mine])
        pooled = float(az.ess(traces, method="bulk")) if len(mine) > 1 else ess
        summary[method] = {"ess": ess, "seconds": sec, "ess_per_s": ess / sec,
                           "ess_multichain": pooled, "ess_multichain_per_s": pooled / sec,
                           "mean_log_ell": float(traces.mean()),
                           "seconds_per_sweep": sec / (len(mine) * n_sweeps),
                           "ess_per_sweep": ess / (len(mine) * n_sweeps)}
        print(f"{method:16s} total: ESS {ess:.1f} (the chains together {pooled:.1f}) in "
              f"{sec:.1f} s = {ess / sec:.2f}/s ({pooled / sec:.2f}/s), "
              f"{1e3 * sec / (len(mine) * n_sweeps):.1f} ms per sweep, mean log ℓ "
              f"{traces.mean():.3f}")
    res = {"n_data": N_DATA, "n_rejections_start": start.n_rejections, "ell_true": ELL_TRUE,
           "sd": SD, "data_seed": DATA_SEED, "chains": chains, "sweeps": n_sweeps,
           "machine": platform.platform(), "rows": rows, "summary": summary}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
