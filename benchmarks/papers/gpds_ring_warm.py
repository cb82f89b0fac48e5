r"""Dense against lattice GPDS on the ring: diagnostic runs of where each chain goes.

Issue 29's check of the lattice path (``benchmarks/papers/README.md``, GPDS section): on ring
seed 0 the dense chain of ``gpds2009.py`` (started with no rejections, θ at the priors'
medians) sat at sd ≈ 4.5, ``M`` ≈ 210 and mean test log p −2.50, the lattice chains at
sd ≈ 10, ``M`` ≈ 330 and −2.29 (64²) / −2.25 (128²).  Either the dense chain had not mixed or
the two target different posteriors.  This script starts the *dense* sampler from a lattice
posterior state (legitimate MCMC: the start does not change the target) and records where it
goes; ``--lattice-from-dense`` starts the lattice chain from the dense chain's region.

The dense start is :func:`lattice_lgm.gpds.warm.lattice_history` of the lattice chain's last
state: θ of that draw, the rejections a history drawn exactly given its ``g``, placed by ``π``
within their cells, the values drawn from the GP given the cell values.  ``--cold``: the dense
chain from ``gpds2009.py``'s start for the same wall clock; ``--fixed SD RANGE``: both chains
with θ held; ``--lattice-chains K``: independent lattice chains under both augmentations.

Every ``--log-every`` sweeps the trace (``M``, sd, range, seconds) is written to the JSON and
a line to the log; the count estimator (decision 105) runs on the kept states at the end.

Usage::

    python benchmarks/papers/gpds_ring_warm.py --minutes 12 --out /tmp/warm.json
    python benchmarks/papers/gpds_ring_warm.py --cold --minutes 12 --out /tmp/cold.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for _p in (str(ROOT), str(HERE)):
    if _p not in sys.path:  # run as a script from a checkout, or loaded by a test
        sys.path.insert(0, _p)

import _one_blas_thread  # noqa: E402, F401  (before numpy: see its docstring)
import gpds2009 as G  # noqa: E402
import numpy as np  # noqa: E402

from lattice_lgm.covariance import SquaredExponential  # noqa: E402
from lattice_lgm.gpds import LatentHistory  # noqa: E402
from lattice_lgm.gpds.history import sweep  # noqa: E402
from lattice_lgm.gpds.lattice import REJECTIONS, LatticeGPDS, LatticeSweep  # noqa: E402
from lattice_lgm.gpds.lattice import predictive_density as lattice_predictive  # noqa: E402
from lattice_lgm.gpds.predict import batch_means_se, count_estimate  # noqa: E402
from lattice_lgm.gpds.prior import JITTER  # noqa: E402
from lattice_lgm.gpds.warm import lattice_history  # noqa: E402


def lattice_chain(seed: int, cells: int, n_sweeps: int, rng_tag: int | Sequence[int],
                  theta: dict | None = None, fixed: bool = False,
                  augmentation: str = "history") -> tuple[LatticeGPDS, list]:
    """The lattice GPDS on ring split ``seed`` (history augmentation, as ``gpds2009.py``).

    ``theta``: the start (default the priors' medians); ``fixed``: θ held there.
    """
    train, _ = G.ring(seed)
    base, hyper, kernel = G._setting("ring", train)
    if theta is not None:
        kernel = SquaredExponential(sd=theta["sd"], lengthscale=theta["range"] / 2.0)
    model = LatticeGPDS(train, base, cells=cells, kernel=kernel,
                        hyperpriors=None if fixed else hyper)
    sw = LatticeSweep(model, augmentation=augmentation)
    rngs = [np.random.default_rng([G.RING_SEED, seed, *np.atleast_1d(rng_tag)])]
    state = model.init_state(rngs, initvals=None if (theta is None or fixed) else theta)
    states = []
    for _ in range(n_sweeps):
        state, _ = sw.step(state, rngs)
        states.append(state)
    return model, states


def run_dense(hist: LatentHistory, kernel, seed: int, rng: np.random.Generator,
              seconds: float, out: Path, log_every: int = 10, thin: int = 2,
              keep_from: int = 0, fixed: bool = False) -> dict:
    """Dense sweeps (``gpds2009``'s settings) for at most ``seconds``; trace to ``out``.

    ``fixed``: θ held at ``kernel`` (no hyperparameter move).
    """
    train, test = G.ring(seed)
    base, hyper, _ = G._setting("ring", train)
    hyper = None if fixed else hyper
    trace: dict = {"M": [], "sd": [], "range": [], "t": []}
    kept, kernels = [], []
    t0 = time.perf_counter()
    i = 0
    while time.perf_counter() - t0 < seconds:
        hist, kernel, base, _ = sweep(hist, rng, kernel, base, hyperpriors=hyper,
                                      n_count=G.DENSE_COUNT_MOVES)
        trace["M"].append(hist.n_rejections)
        trace["sd"].append(float(kernel.sd))
        trace["range"].append(float(np.atleast_1d(kernel.range)[0]))
        trace["t"].append(time.perf_counter() - t0)
        if i >= keep_from and (i - keep_from) % thin == thin - 1:
            kept.append(hist)
            kernels.append(kernel)
        i += 1
        if i % log_every == 0:
            print(f"sweep {i}: M {hist.n_rejections}, sd {kernel.sd:.2f}, range "
                  f"{trace['range'][-1]:.2f}, {trace['t'][-1]:.0f} s", flush=True)
            out.write_text(json.dumps({"trace": trace}))
    res = {"trace": trace, "n_sweeps": i, "thin": thin, "keep_from": keep_from}
    if kept:
        est = count_estimate(kept, rng, kernels, base, test, n_batches=min(20, len(kept)))
        res.update(mean_test_logp=est.mean_log_density,
                   log_se=float(np.sqrt(np.sum(est.log_se**2)) / len(test)),
                   per_point=[float(v) for v in est.log_density],
                   per_point_se=[float(v) for v in est.log_se])
    out.write_text(json.dumps(res))
    return res


def main(argv: Sequence[str] | None = None) -> int:
    """Warm-start one chain (module docstring); write its trace and estimate to ``--out``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0, help="ring split")
    ap.add_argument("--cells", type=int, default=G.LATTICE_FINE)
    ap.add_argument("--lattice-sweeps", type=int, default=300)
    ap.add_argument("--minutes", type=float, default=10.0, help="dense chain's wall clock")
    ap.add_argument("--keep-from", type=int, default=50, help="dense sweeps discarded")
    ap.add_argument("--lattice-from-dense", action="store_true",
                    help="run the lattice from sd 4.5, range 1.5 instead")
    ap.add_argument("--cold", action="store_true",
                    help="the dense chain from gpds2009.py's start instead (no rejections, "
                    "θ at the priors' medians), for the same wall clock")
    ap.add_argument("--fixed", type=float, nargs=2, default=None, metavar=("SD", "RANGE"),
                    help="θ held at (sd, range) in both chains: the lattice's for "
                    "--lattice-sweeps (its M and test log p reported), then the dense one "
                    "started from its last state")
    ap.add_argument("--fixed-cells", type=int, nargs="+", default=None,
                    help="with --fixed: only the lattice, at each of these cells per axis "
                    "(600 sweeps at 256 or more, else --lattice-sweeps); E[M | θ] and test "
                    "log p per lattice")
    ap.add_argument("--lattice-chains", type=int, default=0,
                    help="instead: this many independent lattice chains from the priors' "
                    "medians (--lattice-sweeps each, the first quarter discarded), under both "
                    "augmentations; each chain's test log p, M, sd and range")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    if args.lattice_chains:
        rows = []
        for aug in ("history", "scale"):
            for k in range(args.lattice_chains):
                model, states = lattice_chain(args.seed, args.cells, args.lattice_sweeps,
                                              (6, k), augmentation=aug)
                kept = states[len(states) // 4:]
                est = lattice_predictive(model, kept, G.ring(args.seed)[1])
                rows.append({"augmentation": aug, "chain": k,
                             "mean_test_logp": est.mean_log_density,
                             "log_se": float(np.sqrt(np.sum(est.log_se**2))
                                             / len(est.log_se)),
                             "M": float(np.mean([s.extras[REJECTIONS].sum() for s in kept])),
                             "sd": float(np.mean([s.theta["sd"][0] for s in kept])),
                             "range": float(np.mean([s.theta["range"][0] for s in kept]))})
                print(rows[-1], flush=True)
                args.out.write_text(json.dumps(rows))
        return 0
    if args.lattice_from_dense:
        model, states = lattice_chain(args.seed, args.cells, args.lattice_sweeps, 3,
                                      theta={"sd": 4.5, "range": 1.5})
        kept = states[len(states) // 4:]
        est = lattice_predictive(model, kept, G.ring(args.seed)[1])
        res = {"sd": [float(s.theta["sd"][0]) for s in states],
               "range": [float(s.theta["range"][0]) for s in states],
               "M": [int(s.extras[REJECTIONS].sum()) for s in states],
               "mean_test_logp": est.mean_log_density,
               "log_se": float(np.sqrt(np.sum(est.log_se**2)) / len(est.log_se))}
        args.out.write_text(json.dumps(res))
        print(f"lattice from the dense region: test log p {res['mean_test_logp']:.3f} ± "
              f"{res['log_se']:.3f}; sd by fifths "
              f"{[round(float(np.mean(v)), 2) for v in np.array_split(res['sd'], 5)]}")
        return 0
    rng = np.random.default_rng([G.RING_SEED, args.seed, 4])
    if args.fixed is not None and args.fixed_cells:
        theta, out = {"sd": args.fixed[0], "range": args.fixed[1]}, {}
        for cells in args.fixed_cells:
            n = 600 if cells >= 256 else args.lattice_sweeps
            model, states = lattice_chain(args.seed, cells, n, (7, cells), theta=theta,
                                          fixed=True)
            kept = states[len(states) // 4:]
            M = np.array([s.extras[REJECTIONS].sum() for s in kept], dtype=float)
            est = lattice_predictive(model, kept, G.ring(args.seed)[1])
            out[str(cells)] = {"M": float(M.mean()),
                               "M_se": float(batch_means_se(M[:, None])[0]),
                               "M_sd": float(M.std()), "logp": est.mean_log_density,
                               "logp_se": float(np.sqrt(np.sum(est.log_se**2))
                                                / len(est.log_se))}
            print(cells, out[str(cells)], flush=True)
            args.out.write_text(json.dumps(out))
        return 0
    if args.fixed is not None:
        theta = {"sd": args.fixed[0], "range": args.fixed[1]}
        model, states = lattice_chain(args.seed, args.cells, args.lattice_sweeps, 5,
                                      theta=theta, fixed=True)
        kept = states[len(states) // 4:]
        est = lattice_predictive(model, kept, G.ring(args.seed)[1])
        lat = {"M": [int(s.extras[REJECTIONS].sum()) for s in states],
               "mean_test_logp": est.mean_log_density,
               "log_se": float(np.sqrt(np.sum(est.log_se**2)) / len(est.log_se))}
        args.out.with_suffix(".lattice.json").write_text(json.dumps(lat))
        print(f"lattice, θ fixed at {theta}: M {np.mean(lat['M'][len(states) // 4:]):.1f}, "
              f"test log p {lat['mean_test_logp']:.3f} ± {lat['log_se']:.3f}", flush=True)
        st = states[-1]._replace(theta={k: np.array([v]) for k, v in theta.items()})
        hist, kernel = lattice_history(model, st, rng)
        run_dense(hist, kernel, args.seed, rng, 60.0 * args.minutes, args.out,
                  keep_from=args.keep_from, fixed=True)
        return 0
    if args.cold:  # as run_chain: no rejections, g at the data from the GP prior
        train = G.ring(args.seed)[0]
        kernel = G.ring_kernel()
        L = np.linalg.cholesky(kernel(train) + JITTER * kernel.variance * np.eye(len(train)))
        hist = LatentHistory(train, np.empty((0, 2)), L @ rng.standard_normal(len(train)))
    else:
        model, states = lattice_chain(args.seed, args.cells, args.lattice_sweeps, 2)
        hist, kernel = lattice_history(model, states[-1], rng)
    print(f"start: M {hist.n_rejections}, sd {kernel.sd:.2f}, range "
          f"{np.atleast_1d(kernel.range)[0]:.2f}", flush=True)
    run_dense(hist, kernel, args.seed, rng, 60.0 * args.minutes, args.out,
              keep_from=args.keep_from)
    return 0


if __name__ == "__main__":
    sys.exit(main())
