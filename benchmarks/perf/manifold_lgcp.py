"""Manifold MALA against elliptical slice sampling and the default (joint HMC) on LGCPs (issue 30).

The posteriors are ``mixing_lgcp.py``'s (its ``build``): ``bei20-gmrf`` (the demo's bei model
at 20 m on the Matérn-SPDE GMRF backend) and ``sim256-gmrf`` (its simulated 256² LGCP, the
range bounded at 64 cells: a 384² padded state).  Methods, all from the same warm start
(``LGCP.init_state``'s fitted field, per chain from the chain's stream):

* ``ess`` — one ``prior-white`` hyperparameter move then 10 elliptical slice updates (the
  Murray–Adams sweep, ``default_sweep(lgm, "prior-white")``);
* ``hmc`` — the measured default on the GMRF backend (decision 76,
  ``default_sweep(lgm, "auto", tune=...)``: joint HMC);
* ``mmala`` — one ``prior-white`` move then 10 simplified-mMALA updates with the metric
  ``Q_θ + diag(w)`` (``samplers.manifold.ManifoldMALA``, ``n_tune = 10 · tune`` updates);
* ``mhmc`` — one ``prior-white`` move then one HMC trajectory with that metric as its mass
  (``samplers.manifold.ManifoldHMC``: RMHMC with the metric fixed per θ, as Girolami &
  Calderhead 2011 §8; joint HMC's trajectory length and target, ``n_tune = tune``).

**Interleaved**: the methods run in one process, round-robin in blocks of ``--block``
iterations, each method's wall clock counting only its own blocks, so machine load falls on
all of them alike; the 1-minute load average is recorded at every block.  After the
``--tune`` warm-up iterations, bulk ESS (ArviZ) per second of sampling, and tail ESS, of: the
hyperparameters, the coefficients, the log-likelihood, the field's mean over the observed
cells, and the log intensity ``η`` at 32 random observed cells (the minimum and median over
them, and three of them by name), with split R-hat.  One thread per pool (as
``mixing_lgcp.py``).  JSON to ``benchmarks/results/manifold_lgcp/<problem>.json``, a table
to stdout.

Usage::

    python benchmarks/perf/manifold_lgcp.py --problems bei20-gmrf --tune 200 --draws 400
    python benchmarks/perf/manifold_lgcp.py --quick     # seconds: a smoke run, temp folder
"""

from __future__ import annotations

import os

for _k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS",
           "LATTICE_LGM_FFT_THREADS"):
    os.environ.setdefault(_k, "1")

import argparse  # noqa: E402
import copy  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
RESULTS = ROOT / "benchmarks" / "results" / "manifold_lgcp"
METHODS = ("ess", "hmc", "mmala", "mhmc")
N_CELLS = 32
N_LATENT = 10


def make_sweep(lgm: Any, method: str, tune: int) -> Any:
    from lattice_lgm.samplers import Gibbs, HyperMove, default_sweep
    from lattice_lgm.samplers.manifold import ManifoldHMC, ManifoldMALA

    if method == "ess":
        return default_sweep(lgm, "prior-white", n_latent=N_LATENT)
    if method == "hmc":
        return default_sweep(lgm, "auto", tune=tune)
    if method == "mhmc":
        return Gibbs(HyperMove(lgm, "prior-white"), ManifoldHMC(lgm, n_tune=tune), n_latent=1)
    return Gibbs(HyperMove(lgm, "prior-white"), ManifoldMALA(lgm, n_tune=N_LATENT * tune),
                 n_latent=N_LATENT)


def run(problem: str, methods: list[str], chains: int, tune: int, draws: int, block: int,
        seed: int) -> dict[str, Any]:
    import mixing_lgcp

    from lattice_lgm.models.lgcp_start import initial_state
    from lattice_lgm.samplers import chain_rngs

    model, _ = mixing_lgcp.build(problem)
    lgm = model.lgm
    names = [*lgm.hyper_names, *model.coef_names, "loglik", "field_mean"]
    cells = np.sort(np.random.default_rng(seed).choice(lgm.likelihood.n_obs,
                                                       size=min(N_CELLS, lgm.likelihood.n_obs),
                                                       replace=False))
    t0 = time.perf_counter()
    start, _ = initial_state(model, chain_rngs(seed, chains))
    warm = time.perf_counter() - t0
    runs = {}
    for m in methods:
        # every method from the same start, with its own copy of the chains' streams
        # a deep copy each: a Gibbs sweep's elliptical slice updates rotate the coefficients of
        # the state the hyperparameter move returned in place, and that move hands back its
        # input's ``beta`` array (found here: the start's ``beta`` changed under the first run)
        runs[m] = {"sweep": make_sweep(lgm, m, tune), "state": copy.deepcopy(start),
                   "rngs": chain_rngs(seed + 1, chains), "clock": [],
                   "trace": {k: [] for k in names}, "eta": []}
    loads = []
    total = tune + draws
    done = 0
    while done < total:
        k = min(block, total - done)
        loads.append(os.getloadavg()[0])
        for m in methods:
            r = runs[m]
            for _ in range(k):
                t = time.perf_counter()
                r["state"], _info = r["sweep"].step(r["state"], r["rngs"])
                r["clock"].append(time.perf_counter() - t)
                st = r["state"]
                for h in lgm.hyper_names:
                    r["trace"][h].append(np.asarray(st.theta[h], float).copy())
                cd = model.coefficient_draws(st)
                for j, h in enumerate(model.coef_names):
                    r["trace"][h].append(cd[:, j].copy())
                r["trace"]["loglik"].append(np.asarray(st.loglik, float).copy())
                fo = st.f.reshape(st.n_chains, -1)[:, lgm.state_index]
                r["trace"]["field_mean"].append(fo.mean(axis=1))
                eta = np.stack([lgm.base_obs(st.theta_of(c))[cells] for c in
                                range(st.n_chains)]) + fo[:, cells]
                if lgm.n_beta:
                    eta = eta + st.beta @ lgm.covariates_obs[:, cells]
                r["eta"].append(eta)
        done += k
        print(f"  [{problem}] {done}/{total} it; s/it " + ", ".join(
            f"{m} {np.mean(runs[m]['clock'][-k:]):.3f}" for m in methods)
            + f"; load {loads[-1]:.2f}", flush=True)
    return {"problem": problem, "chains": chains, "tune": tune, "draws": draws,
            "block": block, "seed": seed, "warm_start_seconds": warm, "loads": loads,
            "lattice": list(model.lattice.shape), "state": list(lgm.prior.state_shape),
            "methods": {m: analyse(r, tune) for m, r in runs.items()}}


def analyse(r: dict[str, Any], tune: int) -> dict[str, Any]:
    import arviz as az

    secs = float(np.sum(r["clock"][tune:]))
    out: dict[str, Any] = {"seconds_per_iteration": float(np.mean(r["clock"][tune:])),
                           "sampling_seconds": secs, "ess_bulk": {}, "ess_tail": {},
                           "rhat": {}}
    series = {k: np.stack(v, axis=1)[:, tune:] for k, v in r["trace"].items()}
    eta = np.stack(r["eta"], axis=1)[:, tune:]  # (chains, draws, cells)
    for j in range(eta.shape[2]):
        series[f"eta_cell{j}"] = eta[:, :, j]
    for k, v in series.items():
        out["ess_bulk"][k] = float(az.ess(v, method="bulk"))
        out["ess_tail"][k] = float(az.ess(v, method="tail"))
        out["rhat"][k] = float(az.rhat(v))
    cell = [out["ess_bulk"][f"eta_cell{j}"] for j in range(eta.shape[2])]
    out["ess_bulk"]["eta_cells_min"] = float(np.min(cell))
    out["ess_bulk"]["eta_cells_median"] = float(np.median(cell))
    out["ess_per_second"] = {k: v / secs for k, v in out["ess_bulk"].items()}
    out["min_ess_tail"] = float(min(out["ess_tail"].values()))
    out["max_rhat"] = float(max(out["rhat"].values()))
    return out


def table(res: dict[str, Any]) -> str:
    ms = res["methods"]
    keys = [k for k in next(iter(ms.values()))["ess_bulk"] if not k.startswith("eta_cell")
            or k in ("eta_cells_min", "eta_cells_median")]
    keys += ["eta_cell0", "eta_cell1", "eta_cell2"]
    lines = [f"{res['problem']}: {res['chains']} chains × ({res['tune']} + {res['draws']}); "
             f"load {min(res['loads']):.2f}–{max(res['loads']):.2f}",
             f"{'bulk ESS / s':>18} " + " ".join(f"{m:>10}" for m in ms)]
    lines.append(f"{'s / iteration':>18} " + " ".join(
        f"{ms[m]['seconds_per_iteration']:>10.3f}" for m in ms))
    for k in keys:
        lines.append(f"{k:>18} " + " ".join(f"{ms[m]['ess_per_second'][k]:>10.3f}" for m in ms))
    lines.append(f"{'max R-hat':>18} " + " ".join(f"{ms[m]['max_rhat']:>10.3f}" for m in ms))
    if all("min_ess_tail" in ms[m] for m in ms):
        lines.append(f"{'min tail ESS':>18} " + " ".join(
            f"{ms[m]['min_ess_tail']:>10.1f}" for m in ms))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problems", nargs="+", default=["bei20-gmrf"])
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--tune", type=int, default=200)
    ap.add_argument("--draws", type=int, default=400)
    ap.add_argument("--block", type=int, default=10)
    ap.add_argument("--seed", type=int, default=30)
    ap.add_argument("--suffix", default="", help="appended to the result files' names")
    ap.add_argument("--quick", action="store_true", help="smoke run into a temporary folder")
    args = ap.parse_args(argv)
    out = RESULTS
    if args.quick:
        args.problems, args.chains, args.tune, args.draws, args.block = (
            ["bei20-gmrf"], 2, 20, 10, 10)
        out = Path(tempfile.mkdtemp()) / "manifold_lgcp"
    out.mkdir(parents=True, exist_ok=True)
    for p in args.problems:
        res = run(p, args.methods, args.chains, args.tune, args.draws, args.block, args.seed)
        (out / f"{p}{args.suffix}.json").write_text(json.dumps(res, indent=1))
        (out / f"{p}{args.suffix}.txt").write_text(table(res) + "\n")
        print(table(res), flush=True)


if __name__ == "__main__":
    main()
