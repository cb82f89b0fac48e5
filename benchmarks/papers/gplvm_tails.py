r"""The upper tail of the GPLVM's importance-sampling estimate at a fixed ξ (decision 128).

At one fixed ``ξ`` — of §6.1's case 1 the data-augmentation reference's posterior medians; of
Ionosphere (N = 351, ``--data ionosphere``) the type-II MAP, the chains' start — this
runs what a correlated pseudo-marginal chain does to the estimator's normals when ``ξ`` stands
still: a Metropolis walk on ``u`` alone with the chain's proposal ``u' = ρu + √(1 − ρ²)ε`` and
target ``N(u) p̂(ξ, u)``.  For an estimator with a light upper tail that walk settles a little
above the typical ``log p̂`` (``+Var(log p̂)`` for a log-normal one); where it keeps climbing, the
estimate has values far above its typical ones that fresh draws never show, and a chain on
``(ξ, u)`` cannot mix in ``u`` in practical time — while ``ξ``'s R-hat may look fine.

Per configuration (the variational ``q`` alone; its orbit mixture; the Fisher–Laplace ``q_L``
in the orbit mixture, the default; ``q_L`` with its curvature widened to the observed one,
in the orbit mixture — decision 131): the mean and sd of 200 fresh estimates,
the walk's ``log p̂`` in ten blocks, and the draw that dominates the final estimate — its
squared whitened normal ``|ε|²`` (typical: ``N k_z``) and how far below a typical draw its
``log q`` lies while ``log p(Y, Z)`` does not.  Usage::

    python benchmarks/papers/gplvm_tails.py     # -> results/gplvm_tails.{json,md}, ~10 min
    python benchmarks/papers/gplvm_tails.py --data ionosphere
        # -> results/gplvm_tails_ionosphere.{json,md}: three estimators, one seed, ~35 min
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import logsumexp

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _one_blas_thread  # noqa: F401
from ess2010 import _machine
from gplvm import FULL, RESULTS, ionosphere_model, sinusoids

from lattice_lgm.gplvm.density import log_p_y_given_z, log_p_z_given_x
from lattice_lgm.gplvm.estimator import log_marginal_estimate
from lattice_lgm.gplvm.model import CORRELATION, N_IMPORTANCE, ORBIT, SupervisedGPLVM
from lattice_lgm.gplvm.sweep import importance_q

#: the configurations: (label, importance, orbit K); the walks' lengths and seeds
CONFIGS = (("q alone", "vb", 0), ("orbit mixture", "vb", ORBIT),
           ("Fisher–Laplace + orbit", "laplace", ORBIT),
           ("widened Laplace + orbit", "widened", ORBIT))
STEPS, SEEDS, N_FRESH = 3000, (2, 3), 200
#: Ionosphere's walks: each estimate costs ≈ 0.3 s at N = 351, so shorter and fewer, and
#: without ``q`` alone (its fresh estimates are far below the orbit mixture's already)
IONO = {"steps": 2000, "seeds": (2,), "fresh": 50, "configs": CONFIGS[1:]}
#: the ξ: the reference chain's posterior medians of log ξ on case 1 (results/gplvm.json)
REFERENCE = RESULTS / "gplvm.json"


def _parts(model: Any, hyper: Any, q: Any, u: np.ndarray) -> tuple[np.ndarray, ...]:
    z = q.from_normals(u)
    return (log_p_y_given_z(model.y, z, hyper) + log_p_z_given_x(z, model.x, hyper,
                                                                 model.jitter),
            q.log_density(z))


def walk(model: Any, eta: np.ndarray, importance: str, orbit: int, steps: int, seed: int,
         n_fresh: int = N_FRESH) -> dict[str, Any]:
    """One fixed-ξ walk on ``u`` with one estimator, and its summaries (module docstring)."""
    hyper = model.hyper_of(eta)
    q = importance_q(model, eta, model.q_at(eta), importance, orbit)
    shape = q.normals_shape if orbit else (N_IMPORTANCE, model.k_z, model.n)
    rng = np.random.default_rng([seed, orbit])

    def est(u: np.ndarray) -> float:
        return float(log_marginal_estimate(model.y, model.x, hyper, q, N_IMPORTANCE, None,
                                           model.jitter, u).log_p_hat)

    t0 = time.perf_counter()
    fresh = np.array([est(rng.standard_normal(shape)) for _ in range(n_fresh)])
    u = rng.standard_normal(shape)
    cur, trace, acc = est(u), [], 0
    s = np.sqrt(1.0 - CORRELATION**2)
    for _ in range(steps):
        prop = CORRELATION * u + s * rng.standard_normal(shape)
        lp = est(prop)
        if np.log(rng.uniform()) < lp - cur:
            u, cur, acc = prop, lp, acc + 1
        trace.append(cur)
    lj, lq = _parts(model, hyper, q, u)
    lw = lj - lq
    top = int(np.argmax(lw))
    u0 = rng.standard_normal(shape)
    lj0, lq0 = _parts(model, hyper, q, u0)
    eps = u[:, :, :model.n]
    return {"importance": importance, "orbit": orbit, "seed": seed,
            "fresh_mean": float(fresh.mean()),
            "fresh_sd": float(fresh.std(ddof=1)), "fresh_max": float(fresh.max()),
            "blocks": np.asarray(trace).reshape(10, -1).mean(1).tolist(),
            "acceptance": acc / steps, "final": cur,
            "top_share": float(np.exp(lw[top] - logsumexp(lw))),
            "top_eps2": float((eps[top] ** 2).sum()),
            "typical_eps2": float(model.n * model.k_z),
            "top_log_q_below_typical": float(np.mean(lq0) - lq[top]),
            "top_log_joint_minus_typical": float(lj[top] - np.mean(lj0)),
            "seconds": time.perf_counter() - t0}


def markdown(res: dict[str, Any]) -> str:
    data = {"case1": "case 1", "ionosphere": "Ionosphere"}[res["data"]]
    lines = ["# The upper tail of the GPLVM's importance-sampling estimate "
             f"({data}, fixed ξ)",
             "", f"ξ: {res['xi']}, log ξ {res['eta']}; Q = {res['q']}, ρ = "
             f"{res['rho']}, {res['steps']} steps per walk.", "",
             "| estimator | seed | fresh mean ± sd (max) | walk's log p̂, blocks 1 / 5 / 10 | "
             "top draw's share, \\|ε\\|² | its log q below typical | its log p(Y, Z) minus "
             "typical |", "|---|---|---|---|---|---|---|"]
    for r in res["walks"]:
        b = r["blocks"]
        lines.append(
            f"| {r['label']} | {r['seed']} | "
            f"{r['fresh_mean']:.1f} ± {r['fresh_sd']:.2f} ({r['fresh_max']:.1f}) | "
            f"{b[0]:.1f} / {b[4]:.1f} / {b[9]:.1f} | {r['top_share']:.2f}, "
            f"{r['top_eps2']:.0f} (typical {r['typical_eps2']:.0f}) | "
            f"{r['top_log_q_below_typical']:.1f} | {r['top_log_joint_minus_typical']:+.1f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", choices=("case1", "ionosphere"), default="case1",
                    help="§6.1's case 1 at the reference's medians, or Ionosphere at its MAP")
    ap.add_argument("--steps", type=int, default=None,
                    help=f"steps per walk, a multiple of 10 ({STEPS}; Ionosphere {IONO['steps']})")
    ap.add_argument("--fresh", type=int, default=None, help="fresh estimates per walk")
    ap.add_argument("--seeds", type=int, nargs="+", default=None)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    iono = args.data == "ionosphere"
    steps = args.steps or (IONO["steps"] if iono else STEPS)
    fresh = args.fresh or (IONO["fresh"] if iono else N_FRESH)
    seeds = args.seeds or list(IONO["seeds"] if iono else SEEDS)
    if steps < 10 or steps % 10:
        ap.error(f"--steps {steps}: the walk is summarised in ten blocks; give a positive "
                 "multiple of 10.")
    t0 = time.perf_counter()
    if iono:  # the experiment's Ionosphere model (its g₀ does not enter a fixed-ξ walk)
        model = ionosphere_model(FULL["iono"])
        eta, xi = model.map_fit().hyper.to_log(), "Ionosphere's type-II MAP (N = 351)"
    else:
        refs = ([c["reference"] for c in json.loads(REFERENCE.read_text()).get("converge", [])
                 if c["case"] == 1] if REFERENCE.is_file() else [])
        if not refs:
            raise SystemExit(f"{REFERENCE} has no case-1 reference: run benchmarks/papers/"
                             "gplvm.py first (its reference row gives the ξ held fixed).")
        d = sinusoids(1)
        model = SupervisedGPLVM(d["x"], d["y"], latent_dim=2)
        eta = np.array([refs[0]["summary"][k]["q50"] for k in model.names])
        xi = "case 1, the reference's medians"
    res: dict[str, Any] = {"data": args.data, "xi": xi, "eta": np.round(eta, 3).tolist(),
                           "q": N_IMPORTANCE,
                           "rho": CORRELATION, "steps": steps, "fresh": fresh,
                           "machine": _machine(),
                           "walks": []}
    for lab, importance, orbit in (IONO["configs"] if iono else CONFIGS):
        for seed in seeds:
            res["walks"].append({"label": lab, **walk(model, eta, importance, orbit,
                                                      steps, seed, fresh)})
            print(f"[gplvm_tails] {lab} seed {seed} done", flush=True)
    res["seconds_total"] = time.perf_counter() - t0
    md = markdown(res)
    stem = "gplvm_tails" + ("_ionosphere" if iono else "")
    (args.out / f"{stem}.json").write_text(json.dumps(res, indent=1, allow_nan=False))
    (args.out / f"{stem}.md").write_text(md)
    print(md + f"[gplvm_tails] wrote {args.out}/{stem}.{{json,md}}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
