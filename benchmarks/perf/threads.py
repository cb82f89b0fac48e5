"""Thread pools under the run's thread budget against the pools left alone, quiet and loaded.

Issue 26's first target: Numba, OpenBLAS and FFTW each start a pool per core; on this 2-core
machine their threads spun against each other and an elliptical slice step became 3-4x slower
on a quiet machine and 10-40x on a loaded one.  This script times one elliptical slice step of
4 chains (fixed hyperparameters, the chains' own streams) in two configurations, interleaved
in one process:

* ``pools``  — what a user got before the budget: Numba, OpenBLAS and FFTW at their defaults
  (every usable core each), the chains' noise pool as wide as Numba's threads;
* ``budget`` — inside :func:`lattice_lgm.threads.using` with the default
  :func:`~lattice_lgm.threads.thread_budget` of 4 chains (what :func:`lattice_lgm.sample` and
  the CLI apply), set once around each block of steps.

``--code TREE`` times another checkout's package instead (e.g. a worktree of the commit before
the budget and the compiled dense colourisation, where only ``pools`` exists); each row
records the commit it timed.

Cases: ``mining`` (the coal-mining LGCP of Murray, Adams & MacKay 2010 §4.1 on the dense
backend: 811 bins of 50 days, squared exponential σ_f = 1, ℓ = 13 516 days, Poisson counts)
and ``lattice`` (a 256² Poisson field on the circulant backend, a 512² torus).

``--load N`` starts N busy processes (one spinning Python loop each, what "another process busy
on both cores" means here) for the duration of the timings; the slowdown is the ratio of the
loaded median to the quiet one, both measured by this script on the same machine (run it once
quiet and once with ``--load 2``; the summary pairs them).  Results:
``benchmarks/results/threads.json`` (one entry per case, configuration and load).

Usage::

    python benchmarks/perf/threads.py                 # quiet
    python benchmarks/perf/threads.py --load 2        # with two busy processes
    python benchmarks/perf/threads.py --quick         # a smoke run (tests)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import multiprocessing as mp
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
# ``--code TREE`` times another checkout's lattice_lgm (e.g. the commit before the budget);
# read here, before anything imports the package
CODE = Path(sys.argv[sys.argv.index("--code") + 1]).resolve() if "--code" in sys.argv else ROOT
sys.path.insert(0, str(CODE))
sys.path.insert(0, str(ROOT / "benchmarks" / "papers"))
RESULTS = ROOT / "benchmarks" / "results" / "threads.json"
N_CHAINS = 4
CONFIGS = ("pools", "budget")


def _spin() -> None:  # pragma: no cover - a busy neighbour, killed by the parent
    x = 0
    while True:
        x += 1


def mining() -> Any:
    from ess2010 import COAL_N_BINS, coal_counts

    from lattice_lgm import Lattice
    from lattice_lgm.covariance import SquaredExponential
    from lattice_lgm.likelihoods import Poisson
    from lattice_lgm.models import LatentGaussianModel
    from lattice_lgm.priors import DensePrior

    counts, _ = coal_counts()
    assert len(counts) == COAL_N_BINS
    lat = Lattice((len(counts),), spacing=50.0)
    prior = DensePrior.from_lattice(lat, SquaredExponential(sd=1.0, range=13516.0))
    return LatentGaussianModel(prior, Poisson(counts), mean=math.log(counts.sum() / len(counts)))


def lattice(n: int = 256) -> Any:
    from lattice_lgm import Lattice
    from lattice_lgm.covariance import Matern
    from lattice_lgm.likelihoods import Poisson
    from lattice_lgm.models import LatentGaussianModel
    from lattice_lgm.priors import CirculantPrior

    rng = np.random.default_rng(3)
    lat = Lattice((n, n))
    prior = CirculantPrior(lat, Matern(1.5, sd=1.0, range=n / 16), max_range=n / 16)
    f = prior.sample(rng, 1)[0]
    counts = rng.poisson(np.exp(f - 1.0)).astype(float)
    return LatentGaussianModel(prior, Poisson(counts), mean=-1.0)


CASES = {"mining": mining, "lattice": lattice}


def time_case(name: str, rounds: int, steps: int) -> list[dict[str, Any]]:
    """Median seconds per ESS step of each configuration, ``rounds`` interleaved blocks."""
    import numba

    from lattice_lgm.samplers import EllipticalSlice, chain_rngs, init_state

    try:
        from lattice_lgm.threads import thread_budget, using
        configs, budget = CONFIGS, thread_budget(N_CHAINS)
    except ImportError:  # a tree from before the budget: its pools only
        configs, budget, using = ("pools",), None, None
    model = CASES[name]()
    rngs = chain_rngs(11, N_CHAINS)
    state = init_state(model, rngs)
    ess = EllipticalSlice(model)
    for _ in range(3):  # compile, settle
        state, _ = ess.step(state, rngs, in_place=True)
        if budget is not None:
            with using(budget):
                state, _ = ess.step(state, rngs, in_place=True)
    per: dict[str, list[float]] = {c: [] for c in configs}
    for r in range(rounds):
        order = configs if r % 2 == 0 else configs[::-1]
        for c in order:
            times = []
            # the budget is applied once around the block, as sample() applies it once per run
            # (threadpoolctl's limit costs milliseconds to set: never per step)
            with using(budget) if c == "budget" else contextlib.nullcontext():
                for _ in range(steps):
                    t = time.perf_counter()
                    state, _ = ess.step(state, rngs, in_place=True)
                    times.append(time.perf_counter() - t)
            per[c].append(float(np.median(times)))
    code = subprocess.run(["git", "-C", str(CODE), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    return [{"case": name, "config": c, "code": code, "median_step_s": float(np.median(v)),
             "round_medians_s": v, "numba_threads_default": numba.get_num_threads(),
             "budget": None if budget is None else budget.to_attrs()}
            for c, v in per.items()]


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per code, case and configuration: loaded / quiet median (the newest of each)."""
    out = []
    for code in sorted({r.get("code") for r in rows}):
        for case in CASES:
            for c in CONFIGS:
                sel = [r for r in rows if r.get("code") == code and r["case"] == case
                       and r["config"] == c]
                q = [r for r in sel if r["load"] == 0]
                ld = [r for r in sel if r["load"] > 0]
                if q and ld:
                    out.append({"code": code, "case": case, "config": c,
                                "quiet_s": q[-1]["median_step_s"],
                                "loaded_s": ld[-1]["median_step_s"], "load": ld[-1]["load"],
                                "slowdown": ld[-1]["median_step_s"] / q[-1]["median_step_s"]})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--load", type=int, default=0, help="busy processes beside the timings")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved blocks per config")
    ap.add_argument("--steps", type=int, default=40, help="ESS steps per block")
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    ap.add_argument("--code", type=Path, default=ROOT,
                    help="the checkout whose lattice_lgm is timed (default this one); a tree "
                         "from before the thread budget runs its pools only")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run (saved only where --out says)")
    ap.add_argument("--out", type=Path, default=None, help=f"results file (default {RESULTS})")
    a = ap.parse_args(argv)
    if a.quick:
        a.rounds, a.steps, a.cases = 2, 2, ["mining"]
    elif a.out is None:
        a.out = RESULTS
    busy = [mp.Process(target=_spin, daemon=True) for _ in range(max(0, a.load))]
    for p in busy:
        p.start()
    try:
        rows = []
        for case in a.cases:
            for r in time_case(case, a.rounds, a.steps):
                r.update(load=a.load, loadavg=list(os.getloadavg()), cpu=platform.processor(),
                         cores=len(os.sched_getaffinity(0)), date=time.strftime("%Y-%m-%d %H:%M"))
                rows.append(r)
                print(f"{r['case']:>8} {r['config']:>7} load {a.load}: "
                      f"{1e3 * r['median_step_s']:8.2f} ms/step  (rounds "
                      + ", ".join(f"{1e3 * x:.2f}" for x in r["round_medians_s"]) + ")",
                      flush=True)
    finally:
        for p in busy:
            p.kill()
    if a.out is None:
        return 0
    old = json.loads(a.out.read_text())["rows"] if a.out.exists() else []
    codes = {r["code"] for r in rows}
    keep = [r for r in old if not (r["load"] == a.load and r["case"] in a.cases
                                   and r.get("code") in codes)]
    rows = keep + rows
    summary = summarise(rows)
    a.out.write_text(json.dumps({"rows": rows, "slowdown": summary}, indent=1))
    for s in summary:
        print(f"{s['code']} {s['case']:>8} {s['config']:>7}: loaded/quiet {s['slowdown']:.2f}x "
              f"({1e3 * s['quiet_s']:.2f} -> {1e3 * s['loaded_s']:.2f} ms, load {s['load']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
