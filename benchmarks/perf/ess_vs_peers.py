"""Elliptical slice sampling against blackjax's: bulk ESS of the log-likelihood per second.

Issue 26's targets.  The same latent Gaussian models at fixed hyperparameters, 4 chains, both
libraries with their default threads (lattice_lgm under the thread budget ``sample`` applies;
XLA as it comes), interleaved in one process tree (the two sides one after the other, the
order alternating between repeats):

* ``mining`` — the coal-mining disasters in 811 bins of 50 days (Murray, Adams & MacKay 2010
  §4.1): squared exponential, σ_f = 1, ℓ = 13 516 days, mean log(191/811), Poisson counts;
  lattice_lgm on the dense backend;
* ``redwood`` — Strauss's redwoods in 25 × 25 cells of the unit square, squared exponential
  σ_f = 1, ℓ = 0.1, exposure the cell area, mean log(total); dense;
* ``redwood-circulant`` — the same posterior with lattice_lgm's circulant torus (its window
  covariance is exact), blackjax still dense.

The peer's sampler is ``blackjax.elliptical_slice`` with the window's covariance matrix,
``vmap`` over chains and ``lax.scan`` over iterations, compiled ahead of time (compile time
excluded, as our warm-up is).  The peer's log-likelihood is written here from the model's
definition (Poisson log-pmf with ``log E + m + f``), not from lattice_lgm.  jax and blackjax
never become dependencies: they live in ``benchmarks/.peer-venv`` (``peer_numpyro.py
setup``).  Both sides record the log-likelihood per iteration after a burn-in; ESS (ArviZ
bulk, rank-normalised) is computed the same way for both in the project environment, and the
two posteriors are checked to agree: a z-test of the difference of the mean log-likelihoods
with both Monte Carlo standard errors (Bonferroni over the cases at family-wise 1 %).

Usage::

    python benchmarks/perf/ess_vs_peers.py --repeats 2          # → results/ess_vs_peers.json
    python benchmarks/perf/ess_vs_peers.py --quick --out /tmp/e.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks" / "papers"))
VENV_PY = ROOT / "benchmarks" / ".peer-venv" / "bin" / "python"
RESULTS = ROOT / "benchmarks" / "results" / "ess_vs_peers.json"
N_CHAINS = 4
CASES = ("mining", "redwood", "redwood-circulant")
FAMILY_ALPHA = 0.01
#: updates per call of EllipticalSlice.steps (a Gibbs sweep's default n_latent)
BLOCK = 10


# -- the models (project environment) -----------------------------------------------------------
def build(case: str) -> Any:
    """lattice_lgm's model of ``case`` (module docstring)."""
    from lattice_lgm import Lattice
    from lattice_lgm.covariance import SquaredExponential
    from lattice_lgm.likelihoods import Poisson
    from lattice_lgm.models import LatentGaussianModel
    from lattice_lgm.priors import CirculantPrior, DensePrior

    if case == "mining":
        from ess2010 import coal_counts

        counts, _ = coal_counts()
        lat = Lattice((len(counts),), spacing=50.0)
        prior = DensePrior.from_lattice(lat, SquaredExponential(sd=1.0, range=13516.0))
        return LatentGaussianModel(prior, Poisson(counts),
                                   mean=math.log(counts.sum() / len(counts)))
    from hyper2010 import redwood_counts

    counts, lat, area = redwood_counts(n_bins=25)
    kern = SquaredExponential(sd=1.0, range=0.1)
    prior = (CirculantPrior(lat, kern, max_range=0.1) if case.endswith("circulant")
             else DensePrior.from_lattice(lat, kern))
    return LatentGaussianModel(prior, Poisson(counts, exposure=area),
                               mean=math.log(counts.sum()))


def export(case: str, path: Path) -> None:
    """The peer's inputs: counts, exposure, mean and the covariance matrix it samples with.

    The matrix is lattice_lgm's dense prior's ``L Lᵀ`` (its jitter included, if its policy
    kept one), for the circulant case too: the torus's window covariance is the same kernel's
    exact one, which the peer could not factor when it is numerically singular.
    """
    model = build(case)
    dense = model if not case.endswith("circulant") else build(case.rsplit("-", 1)[0])
    lik = model.likelihood
    if lik.obs_index.size != int(np.prod(lik.shape)):
        raise SystemExit(f"{case}: the peer's model assumes every cell observed.")
    chol = dense.prior.chol
    np.savez(path, counts=lik.y_obs, exposure=np.exp(lik.aux_obs),  # aux: log E
             mean=float(model.mean),
             cov=chol @ chol.T)


def run_ours(case: str, iters: int, burn: int, seed: int) -> dict[str, Any]:
    from lattice_lgm.samplers import EllipticalSlice, chain_rngs, init_state
    from lattice_lgm.threads import thread_budget, using

    model = build(case)
    rngs = chain_rngs(seed, N_CHAINS)
    budget = thread_budget(N_CHAINS)
    with using(budget):
        state = init_state(model, rngs)
        ess = EllipticalSlice(model)
        t0 = time.perf_counter()
        for i in range(0, burn, BLOCK):  # also loads the compiled block from the cache
            state, _ = ess.steps(state, rngs, min(BLOCK, burn - i), in_place=True)
        t1 = time.perf_counter()
        # blocks of BLOCK updates, as a Gibbs sweep runs its n_latent updates (steps():
        # compiled per block where the chains share a dense factor, else step by step)
        trace = np.empty((iters, N_CHAINS))
        evals = 0.0
        for i in range(0, iters, BLOCK):
            k = min(BLOCK, iters - i)
            state, info = ess.steps(state, rngs, k, in_place=True, trace=trace[i:i + k])
            evals += float(np.mean(info["n_loglik"]))
        trace = trace.T
        t2 = time.perf_counter()
    return {"side": "lattice_lgm", "loglik": trace.tolist(), "seconds": t2 - t1,
            "burn_seconds": t1 - t0, "evals_per_iteration": evals / iters,
            "threads": budget.to_attrs()}


# -- the peer (its own environment) -------------------------------------------------------------
PEER = r"""
import json, sys, time
import numpy as np
import jax, jax.numpy as jnp
import blackjax
from jax.scipy.special import gammaln
jax.config.update("jax_enable_x64", True)
d = np.load(sys.argv[1]); iters, burn, seed = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
y, e, m, cov = (jnp.asarray(d["counts"]), jnp.asarray(d["exposure"]), float(d["mean"]),
                jnp.asarray(d["cov"]))
const = -gammaln(y + 1.0)

def loglik(f):  # Poisson log-pmf, rate E exp(m + f)
    eta = jnp.log(e) + m + f
    return jnp.sum(y * eta - jnp.exp(eta) + const)

n = y.shape[0]
ess = blackjax.elliptical_slice(loglik, mean=jnp.zeros(n), cov=cov)
chol = jnp.linalg.cholesky(cov)

def run(key, length):
    k0, k1 = jax.random.split(key)
    f0 = (chol @ jax.random.normal(k0, (n, 4))).T  # prior draws
    states = jax.vmap(ess.init)(f0)

    def one(states, k):
        keys = jax.random.split(k, 4)
        states, info = jax.vmap(ess.step)(keys, states)
        return states, states.logdensity

    states, ll = jax.lax.scan(one, states, jax.random.split(k1, length))
    return ll.T

key = jax.random.PRNGKey(seed)
t0 = time.perf_counter()
burn_fn = jax.jit(run, static_argnums=1).lower(key, burn).compile()
main_fn = jax.jit(run, static_argnums=1).lower(key, burn + iters).compile()
t1 = time.perf_counter()
burn_fn(key).block_until_ready()
t2 = time.perf_counter()
ll = np.asarray(main_fn(key).block_until_ready())[:, burn:]
t3 = time.perf_counter()
# the main call runs burn + iters iterations: its sampling seconds are the part after the burn-in,
# estimated by subtracting the timed burn-in call of the same length
print("RESULT " + json.dumps({"side": "blackjax", "loglik": ll.tolist(),
                              "seconds": (t3 - t2) - (t2 - t1), "burn_seconds": t2 - t1,
                              "compile_seconds": t1 - t0, "jax": jax.__version__,
                              "blackjax": blackjax.__version__}))
"""


def run_peer(case: str, iters: int, burn: int, seed: int, work: Path) -> dict[str, Any]:
    if not VENV_PY.exists():
        raise SystemExit(f"no peer environment at {VENV_PY}: run "
                         "`python benchmarks/perf/peer_numpyro.py setup` first.")
    npz = work / f"{case}.npz"
    if not npz.exists():
        export(case, npz)
    proc = subprocess.run([str(VENV_PY), "-c", PEER, str(npz), str(iters), str(burn),
                           str(seed)], capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"peer failed on {case}:\n{proc.stderr[-3000:]}")
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


# -- analysis -----------------------------------------------------------------------------------
def analyse(run: dict[str, Any]) -> dict[str, Any]:
    import arviz as az

    ll = np.asarray(run["loglik"])
    ess = float(az.ess(ll, method="bulk"))
    out = {k: v for k, v in run.items() if k != "loglik"}
    mcse = float(np.ravel(az.mcse(ll, method="mean"))[0])
    out.update(ess_bulk=ess, ess_per_second=ess / run["seconds"],
               mean_loglik=float(ll.mean()), mcse_mean=mcse,
               rhat=float(az.rhat(ll)), iterations=int(ll.shape[1]))
    return out


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from scipy import stats

    out = []
    cases = sorted({r["case"] for r in rows})
    crit = float(stats.norm.ppf(1 - FAMILY_ALPHA / (2 * max(1, len(cases)))))
    for case in cases:
        ours = [r for r in rows if r["case"] == case and r["side"] == "lattice_lgm"]
        peer = [r for r in rows if r["case"] == case and r["side"] == "blackjax"]
        if not ours or not peer:
            continue
        ratios = [a["ess_per_second"] / b["ess_per_second"]
                  for a, b in zip(ours, peer, strict=False)]
        # the same algorithm has the same ESS per iteration in expectation; the log L's ESS
        # from one run is noisy where it mixes slowly (redwood: 50-260 of 80 000 draws), so
        # the ratio of seconds per iteration is reported beside it
        speed = [(b["seconds"] / b["iterations"]) / (a["seconds"] / a["iterations"])
                 for a, b in zip(ours, peer, strict=False)]
        # pooled over the repeats (total ESS per total second, each side): the per-repeat
        # ratios of slowly mixing cases scatter by a factor of several
        pooled = ((sum(r["ess_bulk"] for r in ours) / sum(r["seconds"] for r in ours))
                  / (sum(r["ess_bulk"] for r in peer) / sum(r["seconds"] for r in peer)))
        a, b = ours[-1], peer[-1]
        z = (a["mean_loglik"] - b["mean_loglik"]) / math.hypot(a["mcse_mean"], b["mcse_mean"])
        out.append({"case": case, "ratio_median": float(np.median(ratios)),
                    "ratios": ratios, "ratio_pooled": pooled,
                    "speed_ratio_median": float(np.median(speed)),
                    "speed_ratios": speed,
                    "ours_ms_per_iteration": [1e3 * r["seconds"] / r["iterations"] for r in ours],
                    "peer_ms_per_iteration": [1e3 * r["seconds"] / r["iterations"] for r in peer],
                    "ours_ess_per_s": [r["ess_per_second"] for r in ours],
                    "peer_ess_per_s": [r["ess_per_second"] for r in peer],
                    "z_mean_loglik": z, "critical_z": crit, "agree": abs(z) <= crit})
    return out


def _print_summary(s: list[dict[str, Any]]) -> None:
    for x in s:
        print(f"{x['case']:>18}: lattice_lgm / blackjax ESS per second {x['ratio_median']:.2f}× "
              f"(per repeat {', '.join(f'{v:.2f}' for v in x['ratios'])}; pooled "
              f"{x['ratio_pooled']:.2f}×), per iteration "
              f"{x['speed_ratio_median']:.2f}× as fast; posteriors "
              f"{'agree' if x['agree'] else 'DISAGREE'} (z = {x['z_mean_loglik']:.2f})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    ap.add_argument("--iterations", type=int, default=4000)
    ap.add_argument("--burn", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--seed", type=int, default=26)
    ap.add_argument("--quick", action="store_true", help="tiny run (tests)")
    ap.add_argument("--report", action="store_true", help="only rebuild the summary")
    ap.add_argument("--out", type=Path, default=None, help=f"results (default {RESULTS})")
    a = ap.parse_args(argv)
    if a.quick:
        a.cases, a.iterations, a.burn, a.repeats = ["mining"], 60, 20, 1
    out = a.out or RESULTS
    if a.report:
        res = json.loads(out.read_text())
        res["summary"] = summary(res["rows"])
        out.write_text(json.dumps(res, indent=1))
        _print_summary(res["summary"])
        return 0
    work = out.parent / (out.stem + "_work")  # the peer's inputs (git-ignored)
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for r in range(a.repeats):
        for case in a.cases:
            sides = ("ours", "peer") if r % 2 == 0 else ("peer", "ours")
            for side in sides:
                load = os.getloadavg()[0]
                run = (run_ours(case, a.iterations, a.burn, a.seed + r) if side == "ours"
                       else run_peer(case, a.iterations, a.burn, a.seed + r, work))
                row = analyse(run)
                row.update(case=case, repeat=r, load=[load, os.getloadavg()[0]])
                rows.append(row)
                print(f"{case:>18} {row['side']:>11} repeat {r}: {row['seconds']:.2f} s, bulk "
                      f"ESS {row['ess_bulk']:.0f}, {row['ess_per_second']:.1f}/s, mean log L "
                      f"{row['mean_loglik']:.2f} ± {row['mcse_mean']:.2f}", flush=True)
    s = summary(rows)
    _print_summary(s)
    out.write_text(json.dumps({"rows": rows, "summary": s, "cores": len(os.sched_getaffinity(0)),
                               "date": time.strftime("%Y-%m-%d %H:%M")}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
