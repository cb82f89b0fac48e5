"""The GPDS's cost against the size of its latent history: the paper's dense sampler and ours.

Issue 29: the paper's latent-history sampler (§4) refactors the ``(N + M)``-point covariance of
the data and the rejections at every move, ``O((N + M)³)``; the lattice-scale sampler
(:mod:`lattice_lgm.gpds.lattice`) keeps ``g`` on a lattice, draws the history exactly given
``g`` and costs ``O(cells log cells)`` per iteration whatever ``N + M``.  This script runs both
on the Lansing Woods trees (2251 points, unit square; uniform base measure) — the dense path on
random subsets of ``DENSE_N`` points (started from a lattice state, ``DENSE_WARM``: timed at
the posterior's ``M``, not on the climb from the paper's empty history), the lattice path on
subsets, on all 2251 and on a
simulated pattern of 20 000 points drawn from the lattice model (``g`` from its prior at the
starting θ) — with the kernel's ``sd`` and ``range`` sampled, and reports per run:

* seconds per iteration (median over the kept sweeps; one chain, this process's threads);
* ``N + M`` (``M`` the mean number of latent rejections over the kept sweeps);
* effective samples per second of ``log sd`` and ``log range`` (ArviZ's bulk ESS of the kept
  sweeps over their wall time).

Each configuration is cached as JSON under ``results/gpds_scaling/`` (a killed run resumes
where it stopped); the summary goes to ``results/gpds_scaling.json`` and the plot (both paths,
seconds per iteration and ESS/s against ``N + M``) to ``results/gpds_scaling.png``.

Usage::

    python benchmarks/perf/gpds_scaling.py             # the full sweep (~10 min, 2 cores)
    python benchmarks/perf/gpds_scaling.py --quick --out /tmp/g   # tiny sizes (the tests)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for _p in (str(ROOT), str(ROOT / "benchmarks" / "papers")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

# before numpy: one BLAS thread — each row is one chain on matrices of a few hundred rows,
# where OpenBLAS's threads only wait for each other (the first dense warm rows, timed with
# the default threads beside a test run, were 5–7× slower)
import _one_blas_thread  # noqa: E402, F401
import numpy as np  # noqa: E402

from lattice_lgm.covariance import SquaredExponential  # noqa: E402
from lattice_lgm.gpds import UniformBase, sweep  # noqa: E402
from lattice_lgm.gpds.history import LatentHistory  # noqa: E402
from lattice_lgm.gpds.lattice import (  # noqa: E402
    DEFAULT_REPRESENTATION,
    REJECTIONS,
    LatticeGPDS,
    LatticeSweep,
)
from lattice_lgm.hyperpriors import LogNormal  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
LANSING = ROOT / "data" / "lansing.csv"
SEED = 2029
#: dense-path sizes (random subsets of Lansing) and lattice-path sizes (2251: all of it;
#: 20000: simulated from the lattice model)
DENSE_N = (50, 100, 200, 400)
LATTICE_N = (100, 400, 2251, 20000)
#: sweeps kept after burn-in, per path (the dense path's cost caps its runs)
DENSE_SWEEPS, LATTICE_SWEEPS, BURN = 300, 1000, 100
#: the dense path's start: the lattice sampler's state after this many sweeps (0: the
#: paper's start), and its §4.1 count moves per sweep (as ``gpds2009.py``'s dense runs)
DENSE_WARM, DENSE_COUNT_MOVES = 300, 10
#: the lattice path's hyperparameter moves compared for its default (decision 106)
REPRESENTATIONS = ("prior-white", "surr-scalar", "post-scalar")
#: lattice cells per axis
CELLS = 64
#: log-normal priors (mu, sigma[, upper]) of the kernel's sd and range on the unit square
PRIOR_SD, PRIOR_RANGE = (0.0, 0.5), (np.log(0.2), 0.5, 0.8)


def hyperpriors() -> dict:
    """Priors of ``sd`` and ``range`` (both paths)."""
    return {"sd": LogNormal(*PRIOR_SD), "range": LogNormal(*PRIOR_RANGE)}


def start_kernel() -> SquaredExponential:
    """The starting θ: the priors' medians."""
    return SquaredExponential(sd=float(np.exp(PRIOR_SD[0])),
                              lengthscale=float(np.exp(PRIOR_RANGE[0])) / 2.0)


def lansing() -> np.ndarray:
    """The 2251 trees, (x, y) in the unit square."""
    return np.loadtxt(LANSING, delimiter=",", skiprows=1, usecols=(0, 1))


def simulated(n: int, cells: int) -> np.ndarray:
    """``n`` points from the lattice model with ``g`` drawn from its prior at the start θ."""
    box = UniformBase.create([0.0, 0.0], [1.0, 1.0])
    m = LatticeGPDS([[0.5, 0.5]], box, cells=cells, kernel=start_kernel())
    rng = np.random.default_rng([SEED, n])
    g = m.prior.sample(rng, 1).reshape(-1)
    p = m.masses.reshape(-1) / (1.0 + np.exp(-g))
    cell = rng.choice(len(p), size=n, p=p / p.sum())
    iy, ix = np.divmod(cell, cells)
    return (np.column_stack([ix, iy]) + rng.random((n, 2))) / cells


def data_of(n: int, cells: int) -> np.ndarray:
    """Lansing (all, or a random subset of ``n``), or a simulated pattern beyond 2251."""
    pts = lansing()
    if n > len(pts):
        return simulated(n, cells)
    if n == len(pts):
        return pts
    return pts[np.random.default_rng([SEED, n]).choice(len(pts), n, replace=False)]


def _ess_per_s(draws: dict[str, list[float]], seconds: float) -> dict[str, float]:
    import arviz as az

    return {k: float(az.ess(np.log(np.asarray(v))[None], method="bulk")) / seconds
            for k, v in draws.items()}


def run_dense(n: int, sweeps: int, burn: int, warm: int = 0) -> dict:
    """The paper's sampler (θ by §4.3's M–H) on ``n`` points.

    ``warm > 0``: start from the lattice sampler's state (``CELLS``², its default scale
    augmentation) after ``warm`` sweeps (:func:`lattice_lgm.gpds.warm.lattice_history`), so
    that the timed sweeps run at the posterior's ``M`` and ``θ``: from the paper's start (no
    rejections, θ at the priors' medians) ``M`` grows a few per sweep and the first rows'
    seconds per iteration and ESS were of a chain still climbing (issue 29, decision 109).
    """
    from lattice_lgm.gpds.warm import lattice_history

    data = data_of(n, CELLS)
    box = UniformBase.create([0.0, 0.0], [1.0, 1.0])
    rng = np.random.default_rng([SEED, n, 1 if warm == 0 else 3])
    kernel = start_kernel()
    state = LatentHistory(data, np.empty((0, 2)), np.zeros(n))
    if warm:
        model = LatticeGPDS(data, box, cells=CELLS, kernel=kernel, hyperpriors=hyperpriors())
        step, lat = LatticeSweep(model), model.init_state([rng])
        for _ in range(warm):
            lat, _ = step.step(lat, [rng])
        state, kernel = lattice_history(model, lat, rng)
    times, nm, draws = [], [], {"sd": [], "range": []}
    for i in range(burn + sweeps):
        t0 = time.perf_counter()
        state, kernel, _, _ = sweep(state, rng, kernel, box, hyperpriors=hyperpriors(),
                                    n_count=DENSE_COUNT_MOVES)
        if i >= burn:
            times.append(time.perf_counter() - t0)
            nm.append(n + state.n_rejections)
            draws["sd"].append(float(kernel.sd))
            draws["range"].append(float(np.atleast_1d(kernel.range)[0]))
    return {**_row("dense", n, times, nm, draws), "warm": warm,
            "n_count": DENSE_COUNT_MOVES}


def run_lattice(n: int, sweeps: int, burn: int, cells: int,
                representation: str = DEFAULT_REPRESENTATION,
                augmentation: str = "history") -> dict:
    """The lattice sampler (θ by the Murray–Adams move) on ``n`` points, ``cells²`` cells."""
    data = data_of(n, cells)
    model = LatticeGPDS(data, UniformBase.create([0.0, 0.0], [1.0, 1.0]), cells=cells,
                        kernel=start_kernel(), hyperpriors=hyperpriors())
    step = LatticeSweep(model, representation, augmentation=augmentation)
    rngs = [np.random.default_rng([SEED, n, 2])]
    state = model.init_state(rngs)
    times, nm, draws = [], [], {"sd": [], "range": []}
    for i in range(burn + sweeps):
        t0 = time.perf_counter()
        state, _ = step.step(state, rngs)
        if i >= burn:
            times.append(time.perf_counter() - t0)
            nm.append(n + int(state.extras[REJECTIONS].sum()))
            draws["sd"].append(float(state.theta["sd"][0]))
            draws["range"].append(float(state.theta["range"][0]))
    return {**_row("lattice", n, times, nm, draws), "cells": cells,
            "representation": representation, "augmentation": augmentation,
            "interpolation_bound": model.interpolation_bound()}


def _row(path: str, n: int, times: list[float], nm: list[int], draws: dict) -> dict:
    secs = float(np.sum(times))
    return {"path": path, "n": n, "n_plus_m": float(np.mean(nm)),
            "s_per_iter": float(np.median(times)), "seconds": secs, "sweeps": len(times),
            "ess_per_s": _ess_per_s(draws, secs),
            "posterior_mean": {k: float(np.mean(v)) for k, v in draws.items()}}


def plot(rows: list[dict], path: Path) -> None:
    """Seconds per iteration and ESS/s of the hyperparameters against N + M, both paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    for p, mk in (("dense", "o-"), ("lattice", "s-"), ("lattice-scale", "^-")):
        r = sorted((x for x in rows if x["path"] == p), key=lambda x: x["n_plus_m"])
        if not r:
            continue
        nm = [x["n_plus_m"] for x in r]
        a.loglog(nm, [x["s_per_iter"] for x in r], mk, label=p)
        for k, ls in (("sd", "-"), ("range", "--")):
            b.loglog(nm, [max(x["ess_per_s"][k], 1e-4) for x in r], mk[0] + ls,
                     label=f"{p}: log {k}")
    a.set_xlabel("N + M (data + latent rejections)")
    a.set_ylabel("seconds per iteration")
    b.set_xlabel("N + M")
    b.set_ylabel("effective samples per second")
    a.legend()
    b.legend(fontsize=8)
    fig.suptitle(f"GPDS: the paper's dense sampler and the lattice sampler ({CELLS}² cells), "
                 "Lansing Woods and a simulated 20 000", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    """Run (or resume) every configuration; write JSON and PNG."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes and runs (the tests)")
    ap.add_argument("--out", type=Path, default=None, help="results directory")
    args = ap.parse_args(argv)
    out = args.out or RESULTS
    cache = out / "gpds_scaling"
    cache.mkdir(parents=True, exist_ok=True)
    dense_n, lattice_n = ((20, 40), (40, 300)) if args.quick else (DENSE_N, LATTICE_N)
    sweeps, burn, cells = (20, 5, 16) if args.quick else (LATTICE_SWEEPS, BURN, CELLS)
    dense_sweeps = 20 if args.quick else DENSE_SWEEPS
    rows = []
    for kind, sizes in (("dense", dense_n), ("lattice", lattice_n), ("lattice-scale",
                                                                     lattice_n)):
        for n in sizes:
            f = cache / (f"dense_warm{DENSE_WARM}_{n}.json" if kind == "dense"
                         else f"{kind}_{n}.json")
            if f.exists():
                row = json.loads(f.read_text())
            elif kind == "dense":
                row = run_dense(n, dense_sweeps, burn, warm=5 if args.quick else DENSE_WARM)
            else:
                row = run_lattice(n, sweeps, burn, cells, augmentation=(
                    "scale" if kind == "lattice-scale" else "history"))
            if kind == "lattice-scale":
                row["path"] = "lattice-scale"
            if "machine_load" not in row:
                row["machine_load"] = os.getloadavg()[0]
                f.write_text(json.dumps(row))
            rows.append(row)
            print(f"{kind:13s} N={n:6d} N+M={row['n_plus_m']:9.0f} "
                  f"{row['s_per_iter']:.4f} s/iter  ESS/s sd {row['ess_per_s']['sd']:.2f} "
                  f"range {row['ess_per_s']['range']:.2f}")
    reps = []
    for rep in REPRESENTATIONS:  # the lattice path's default move, measured on all of Lansing
        f = cache / f"representation_{rep}.json"
        if f.exists():
            row = json.loads(f.read_text())
        else:
            row = run_lattice(lattice_n[-2] if args.quick else 2251, sweeps, burn, cells, rep,
                              augmentation="history")
            row["machine_load"] = os.getloadavg()[0]
            f.write_text(json.dumps(row))
        reps.append(row)
        print(f"lattice {rep:12s} N={row['n']}: {row['s_per_iter']:.4f} s/iter  ESS/s sd "
              f"{row['ess_per_s']['sd']:.2f} range {row['ess_per_s']['range']:.2f}")
    (out / "gpds_lattice_representations.json").write_text(json.dumps(reps, indent=1))
    (out / "gpds_scaling.json").write_text(json.dumps(
        {"rows": rows, "cells": cells, "sweeps": {"dense": dense_sweeps, "lattice": sweeps},
         "burn": burn}, indent=1))
    plot(rows, out / "gpds_scaling.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
