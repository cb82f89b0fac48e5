r"""How much the dense jitter fix (architecture decision 60) changes the structured.py targets.

``structured.py``'s dense mining and redwoods runs were sampled before decision 60, when every
``DensePrior`` of a hyperparameter family ran the ``'auto'`` jitter ladder (0, then
``ε·mean(diag K)`` for ε = 1e-10 … 1e-6) afresh at every θ; now the family keeps the level its
root prior needed.  Their sampler is ``prior-white``: the field is ``f = L_θ ν`` with ν held
during a θ move, so what matters is how far ``L_θ ν`` and the log-likelihood move between the
two policies, and where.

For θ drawn log-uniformly in two boxes of (sd, range) — the runs' posterior (the 5 %–95 %
quantiles of both backends in ``results/structured.json``) and the hyperprior's support — this
script builds the old prior (a root ``DensePrior`` at θ: the ladder from 0) and the new one
(``with_params`` of the problem's prior), counts the jitter levels each policy picks, and,
where they differ, measures ``max |L_old ν − L_new ν| / sd`` and ``|log p(y | f_old) − log
p(y | f_new)|`` for a few ν ~ N(0, I).  Where the levels agree the factors are bitwise equal
(checked), so the targets are the same there.

Usage::

    python benchmarks/papers/jitter_jumps.py            # 400 θ per box; results/jitter_jumps.*
    python benchmarks/papers/jitter_jumps.py --quick    # mining only, 20 θ; results/quick/
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import structured as S

from lattice_lgm.covariance import SquaredExponential
from lattice_lgm.priors import DensePrior

RESULTS = Path(__file__).resolve().parent / "results"
#: ν draws per θ where the two policies pick different levels
N_NU = 4
SEED = 20261125


def problems(names: Sequence[str]) -> dict[str, S.Problem]:
    """The dense problems of ``structured.py`` by name."""
    build = {"mining": lambda: S.mining_problem("dense"),
             "redwoods": lambda: S.redwoods_problem("dense", S.Settings().bins)}
    return {n: build[n]() for n in names}


def boxes(name: str, structured: dict[str, Any] | None) -> dict[str, list[list[float]]]:
    """``{box: [[sd_lo, sd_hi], [range_lo, range_hi]]}`` of one problem.

    ``prior``: the hyperpriors' support of ``sd`` and ``range`` (``structured._hyperpriors``);
    ``posterior``: the widest 5 %–95 % interval of the two backends in ``structured``'s results
    (left out when those are not given).
    """
    lo_r, hi_r = S.RANGE_MINING if name == "mining" else S.RANGE_UNIT
    hp = S._hyperpriors((lo_r, hi_r))
    out = {"prior": [[float(hp["sd"].lower), float(hp["sd"].upper)], [lo_r, hi_r]]}
    if structured is not None:
        h = structured["experiments"][name]["hyper"]
        out["posterior"] = [
            [math.exp(min(h[k]["q05"]["a"], h[k]["q05"]["b"])),
             math.exp(max(h[k]["q95"]["a"], h[k]["q95"]["b"]))]
            for k in ("log sd", "log range")]
    return out


def measure(prob: S.Problem, box: Sequence[Sequence[float]], n: int,
            rng: np.random.Generator) -> dict[str, Any]:
    """Jitter levels of both policies at ``n`` θ in ``box``, and the moves where they differ.

    Returns
    -------
    dict
        ``levels_old`` / ``levels_new``: ``{level: count}``; ``n_differ``; ``df_over_sd`` and
        ``dloglik``: median and max over θ (where the levels differ) and ν.
    """
    model, prior = prob.model, prob.model.prior
    lat = prob.lattice
    lo = np.log([box[0][0], box[1][0]])
    hi = np.log([box[0][1], box[1][1]])
    thetas = np.exp(rng.uniform(lo, hi, size=(n, 2)))
    nus = rng.standard_normal((N_NU, lat.size))
    shape = (1, *lat.shape)

    def loglik(f: np.ndarray) -> float:
        return float(model.likelihood.loglik((model.mean + f).reshape(shape))[0])

    old_lv: list[float] = []
    new_lv: list[float] = []
    df: list[float] = []
    dll: list[float] = []
    for sd, rng_ in thetas:
        new = prior.with_params(sd=float(sd), range=float(rng_))
        old = DensePrior.from_lattice(lat, SquaredExponential(sd=float(sd), range=float(rng_)))
        if not np.array_equal(old.cov, new.cov):
            raise AssertionError(f"sd={sd}, range={rng_}: the two policies' K differ")
        lv_old, lv_new = old.jitter_level, new.jitter / np.mean(np.diag(new.cov))
        old_lv.append(lv_old)
        new_lv.append(float(f"{lv_new:.0e}") if lv_new else 0.0)
        if old.jitter == new.jitter:
            if not np.array_equal(old.chol, new.chol):
                raise AssertionError(f"sd={sd}, range={rng_}: one jitter, two factors")
            continue
        for nu in nus:
            f_old, f_new = old.chol @ nu, new.chol @ nu
            df.append(float(np.max(np.abs(f_old - f_new)) / sd))
            dll.append(abs(loglik(f_old) - loglik(f_new)))

    def counts(v: list[float]) -> dict[str, int]:
        keys, cnt = np.unique(v, return_counts=True)
        return {f"{k:g}": int(c) for k, c in zip(keys, cnt, strict=True)}

    def spread(v: list[float]) -> dict[str, float | None]:
        return ({"median": float(np.median(v)), "max": float(np.max(v))} if v
                else {"median": None, "max": None})

    return {"n_theta": n, "box": [list(map(float, b)) for b in box],
            "levels_old": counts(old_lv), "levels_new": counts(new_lv),
            "n_differ": int(sum(a != b for a, b in zip(old_lv, new_lv, strict=True))),
            "df_over_sd": spread(df), "dloglik": spread(dll)}


def markdown(res: dict[str, Any]) -> str:
    """The results as a markdown table."""
    lines = ["# Jitter policy before and after decision 60, on structured.py's dense problems",
             "",
             f"{res['n_theta']} θ per box, log-uniform; {N_NU} ν per θ where the levels differ. "
             "Levels are ε of `ε·mean(diag K_θ)`.", "",
             "| problem | box (sd; range) | levels before | levels now | θ that differ | "
             "max \\|Δf\\|/sd | max \\|Δ log-lik\\| (nats) |",
             "|---|---|---|---|---|---|---|"]
    for name, per in res["problems"].items():
        for box, r in per.items():
            (s0, s1), (r0, r1) = r["box"]
            mx = r["df_over_sd"]["max"]
            ml = r["dloglik"]["max"]
            lines.append(
                f"| {name} | {box}: {s0:.3g}–{s1:.3g}; {r0:.3g}–{r1:.3g} | "
                f"{r['levels_old']} | {r['levels_new']} | {r['n_differ']} | "
                f"{'—' if mx is None else f'{mx:.2g}'} | {'—' if ml is None else f'{ml:.2g}'} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="mining only, 20 θ per box")
    ap.add_argument("--n", type=int, default=None, help="θ per box (default 400; quick 20)")
    ap.add_argument("--out", type=Path, default=None,
                    help="output directory (default results/, quick: results/quick/)")
    a = ap.parse_args(argv)
    n = a.n if a.n is not None else (20 if a.quick else 400)
    if n < 1:
        ap.error(f"--n {n}: give at least one θ per box")
    out = a.out or (RESULTS / "quick" if a.quick else RESULTS)
    names = ["mining"] if a.quick else ["mining", "redwoods"]
    sres = RESULTS / "structured.json"
    structured = json.loads(sres.read_text()) if sres.exists() else None
    rng = np.random.default_rng(SEED)
    t0 = time.perf_counter()
    res: dict[str, Any] = {"n_theta": n, "seed": SEED, "problems": {}}
    for name, prob in problems(names).items():
        res["problems"][name] = {}
        for box, b in boxes(name, structured).items():
            r = measure(prob, b, n, rng)
            res["problems"][name][box] = r
            print(f"[jitter_jumps] {name} {box}: levels before {r['levels_old']}, now "
                  f"{r['levels_new']}; max |Δf|/sd {r['df_over_sd']['max']}, "
                  f"max |Δ loglik| {r['dloglik']['max']}", flush=True)
    res["seconds"] = time.perf_counter() - t0
    out.mkdir(parents=True, exist_ok=True)
    (out / "jitter_jumps.json").write_text(json.dumps(res, indent=1))
    (out / "jitter_jumps.md").write_text(markdown(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
