"""GP classification's three sweeps: effective samples of ``f`` per second (the default).

The problem: ``n`` inputs uniform on [−2, 2]², labels from the sign of ``sin(2 x₀) + x₁ / 2``
plus N(0, 0.3²) noise, a squared-exponential kernel with sd 2 and lengthscale 1 (a strongly
correlated posterior, as the report's GPs), jitter 1e-6.  Each method runs ``chains`` chains
of ``tune`` warm-up and ``draws`` kept sweeps from EP's ``q`` (as ``sample()`` starts them),
seeds ``0 … chains − 1``, in one process under a one-thread budget; ``ess`` is
``n_latent = 10`` elliptical slice updates per sweep.  ESS: ArviZ's bulk ESS per coordinate of
``f`` over all chains (minimum and median) and of the log-likelihood; per second of the kept
sweeps' wall time (the warm-up's time is reported apart).  Convergence: the largest R-hat over
``f``, and each method's posterior means of ``f`` against the elliptical slice sampler's in
combined Monte Carlo standard errors (``max_z_vs_ess``).

Usage::

    python benchmarks/perf/gpc_samplers.py --out benchmarks/results/gpc_samplers.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import arviz as az
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from lattice_lgm import threads  # noqa: E402
from lattice_lgm.gpc import GPClassification  # noqa: E402
from lattice_lgm.samplers import chain_rngs  # noqa: E402


def problem(n: int, seed: int = 0) -> GPClassification:
    """The benchmark's classifier (module docstring)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2.0, 2.0, (n, 2))
    y = (np.sin(2.0 * x[:, 0]) + 0.5 * x[:, 1] + 0.3 * rng.standard_normal(n) > 0).astype(int)
    return GPClassification(x, y, sd=2.0, lengthscale=1.0)


def ionosphere() -> GPClassification:
    """Ionosphere with the USPS-mapped kernel of ``benchmarks/papers/ess2010.py`` (n = 351)."""
    sys.path.insert(0, str(ROOT / "benchmarks" / "papers"))
    import math

    from ess2010 import USPS_LOG_ELL, USPS_LOG_SF, USPS_PIXELS, ionosphere_data

    x, y = ionosphere_data()
    ell = math.exp(USPS_LOG_ELL) * math.sqrt(x.shape[1] / USPS_PIXELS)
    sd = math.exp(USPS_LOG_SF)
    # the paper script's jitter: 1e-6 of the prior variance (never a near-singular K)
    return GPClassification(x, y, sd=sd, lengthscale=ell, jitter=1e-6 * sd * sd)


def run(model: GPClassification, method: str, chains: int, tune: int, draws: int,
        sampler: dict) -> dict:
    """One method's chains; ESS and times."""
    m = GPClassification(model.x, model.y, kernel=model.kernel, jitter=model.jitter,
                         sampler=sampler)
    sweep = m.default_sweep(method, 10, tune=tune)
    rngs = chain_rngs(0, chains)
    state = m.init_state(rngs, list(range(chains)))
    t0 = time.perf_counter()
    for _ in range(tune):
        state, _ = sweep.step(state, rngs)
    t1 = time.perf_counter()
    fs, lls, acc = [], [], []
    for _ in range(draws):
        state, info = sweep.step(state, rngs)
        fs.append(state.f.copy())
        lls.append(state.loglik.copy())
        acc.append(info.get("accept_prob", np.full(chains, np.nan)))
    t2 = time.perf_counter()
    f = np.stack(fs, axis=1)                   # (chains, draws, n)
    ess = np.array([float(az.ess(f[:, :, i], method="bulk")) for i in range(f.shape[2])])
    ll_ess = float(az.ess(np.stack(lls, axis=1), method="bulk"))
    rhat = np.array([np.asarray(az.rhat(f[:, :, i])).item() for i in range(f.shape[2])])
    mcse = np.array([np.asarray(az.mcse(f[:, :, i], method="mean")).item()
                     for i in range(f.shape[2])])
    secs = t2 - t1
    return {"method": method, "sampler": sampler, "tune_s": t1 - t0, "draws_s": secs,
            "min_ess": float(ess.min()), "median_ess": float(np.median(ess)),
            "loglik_ess": ll_ess, "min_ess_per_s": float(ess.min()) / secs,
            "median_ess_per_s": float(np.median(ess)) / secs,
            "max_rhat": float(rhat.max()), "mean_f": f.mean(axis=(0, 1)).tolist(),
            "mcse_f": mcse.tolist(),
            "mean_accept": float(np.nanmean(acc)) if np.isfinite(acc).any() else None,
            "step_size": np.asarray(info.get("step_size", np.nan)).tolist()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--tune", type=int, default=150)
    ap.add_argument("--draws", type=int, default=400)
    ap.add_argument("--methods", default="rmhmc:3,rmhmc:6,hmc:10,hmc:20,ess",
                    help="method[:n_leapfrog[:coords]], comma-separated (coords of hmc: "
                         "white, ep or f)")
    ap.add_argument("--problem", choices=("sin2d", "ionosphere"), default="sin2d")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    model = problem(a.n) if a.problem == "sin2d" else ionosphere()
    rows = []
    with threads.using(threads.thread_budget(1, threads=1)):
        model.default_sweep("ess", 10).step(model.init_state(chain_rngs(0, 1)),
                                            chain_rngs(0, 1))  # compile outside the timing
        for spec in a.methods.split(","):
            method, _, rest = spec.partition(":")
            steps, _, coords = rest.partition(":")
            sampler = {"n_leapfrog": int(steps)} if steps else {}
            if coords:
                sampler["coords"] = coords
            row = run(model, method, a.chains, a.tune, a.draws, sampler)
            rows.append(row)
            print(json.dumps(row), flush=True)
    # agreement between methods: the largest |difference of posterior means of f_i| in
    # combined Monte Carlo errors, of each method against the elliptical slice sampler
    ref = next((r for r in rows if r["method"] == "ess"), None)
    for r in rows:
        if ref is not None and r is not ref:
            z = np.abs(np.subtract(r["mean_f"], ref["mean_f"])) / np.hypot(r["mcse_f"],
                                                                            ref["mcse_f"])
            r["max_z_vs_ess"] = float(z.max())
            print(r["method"], r["sampler"], "max |z| of mean f vs ess:", round(float(z.max()), 2),
                  "max R-hat:", round(r["max_rhat"], 3), flush=True)
    out = {"problem": a.problem, "n": model.n, "chains": a.chains, "tune": a.tune,
           "draws": a.draws, "rows": rows,
           "machine": platform.processor() or platform.machine(),
           "loadavg": os.getloadavg()}
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
