"""Mixing of LGCP samplers: wall seconds to R-hat ≤ 1.01 and bulk ESS per second after it.

Issue 25's benchmark.  Every run: 4 chains from :meth:`LGCP.init_state` (overdispersed θ, the
field warm-started from the data: the posterior mode at each chain's θ, Laplace noise, settled
by elliptical slice updates), then iterations of one sampler, recording every hyperparameter,
coefficient and the log-likelihood per iteration with the wall clock.  After the run:

* **time to convergence** — the first iteration ``t`` on a grid (every 2 % of the run) at
  which the split R-hat (ArviZ, rank-normalised) of every hyperparameter, coefficient and the
  log-likelihood over draws ``[t/2, t)`` is ≤ 1.01; its wall seconds include the warm start
  and the discarded half (``seconds_to_rhat``);
* **ESS per second after it** — bulk and tail ESS of each quantity over draws ``[t, end)``,
  divided by the wall seconds of those draws;
* **the posterior** of each converged run: 5/50/95 % quantiles with their Monte Carlo
  standard errors (ArviZ ``mcse`` of quantiles), stored in the JSON;
* **agreement** — for every pair of converged runs of one problem, z-tests of the difference of
  each quantile, Bonferroni-bounded over all tests of the problem at family-wise level 1 %.

Problems: ``bei20``, ``bei10``, ``bei5`` (the ``make demo`` model at 20, 10 and 5 m cells) and
``sim256``, ``sim512`` (simulated LGCPs with known truth: Matérn 3/2, sd 1.5, range 20 cells,
an expected 8 000 points (9 846 at 256²), one covariate with coefficient 0.5; the range prior
bounded at a quarter of the window) on the circulant backend; a ``-gmrf`` suffix
(``bei20-gmrf``, …) is the same problem on the Matérn-SPDE GMRF backend.  Methods: ``hmc``
(:class:`~lattice_lgm.samplers.JointHMC`, ``--tune`` adaptation iterations), ``asis``
(interweaving) and the Murray–Adams Gibbs sweeps (``prior-white``, ``surr-scalar``,
``post-scalar``; ``surr-site``, ``post-site`` on the GMRF: one hyperparameter move and 10
elliptical slice updates per iteration).

One thread budget (issue 25): OpenBLAS, Numba, OpenMP and FFTW each get one thread (set before
numpy is imported; recorded in the JSON), and joint HMC runs its chains in one thread per usable
core (``chain_threads``, recorded), so runs are comparable on a shared 2-core machine.
The machine load (1-minute load average) is recorded at each run's start and end.  Runs are
sequential, not interleaved: each is minutes long, so the load is stated per run instead.

Each finished run is written to ``benchmarks/results/mixing_lgcp/<problem>-<method>.json`` as
it completes (re-running skips finished runs: the script is resumable), and the summary
``benchmarks/results/mixing_lgcp.json`` and ``mixing_lgcp.png`` (traces and rank plots of sd
and range) are rebuilt from those files at the end.

Usage::

    python benchmarks/perf/mixing_lgcp.py --problems bei20 --methods hmc prior-white
    python benchmarks/perf/mixing_lgcp.py --problems bei10 --methods hmc --iterations 700
    python benchmarks/perf/mixing_lgcp.py --report      # rebuild the summary from the runs
    python benchmarks/perf/mixing_lgcp.py --quick       # tiny smoke run (a test runs it)
"""

from __future__ import annotations

import os

for _k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS",
           "LATTICE_LGM_FFT_THREADS"):
    os.environ.setdefault(_k, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "benchmarks" / "results"
RUNS = RESULTS / "mixing_lgcp"
THREADS = {k: os.environ[k] for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                      "NUMBA_NUM_THREADS", "LATTICE_LGM_FFT_THREADS")}
# joint HMC and the warm start run chains in threads, one per usable core (each with
# single-threaded pools): the run's whole budget is this many cores
THREADS["chain_threads"] = str(len(os.sched_getaffinity(0)))
RHAT_TARGET = 1.01
FAMILY_ALPHA = 0.01
QUANTILES = (0.05, 0.5, 0.95)
PROBLEMS = ("bei20", "bei10", "bei5", "sim256", "sim512", "bei20-gmrf", "bei10-gmrf",
            "bei5-gmrf", "sim256-gmrf")
METHODS = ("hmc", "asis", "prior-white", "surr-scalar", "post-scalar", "surr-site", "post-site")


# -- problems ------------------------------------------------------------------------------------
def bei(cell: float, backend: str = "circulant") -> Any:
    """The ``make demo`` LGCP (examples/bei_demo.toml) at ``cell`` metres on ``backend``.

    ``"gmrf"``: the same data, covariates and priors with the Matérn-SPDE GMRF (α = 2,
    ν = 1, DCT-II with Neumann boundaries, padded by the range prior's bound) in place of the
    circulant Matérn 3/2 (the demo's ``nu`` removed: the SPDE order sets it).
    """
    import tempfile

    from lattice_lgm.config import load_config

    path = ROOT / "examples" / "bei_demo.toml"
    if backend == "circulant":
        return load_config(path, [f"data.cell_size={cell:g}"]).build_model()
    text = path.read_text().replace('"../data/', f'"{ROOT}/data/').replace(
        'backend = "circulant"\nnu = 1.5', f'backend = "{backend}"')
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "bei.toml"
        p.write_text(text)
        return load_config(p, [f"data.cell_size={cell:g}"]).build_model()


def simulated(n: int, seed: int = 25, backend: str = "circulant") -> tuple[Any, dict[str, float]]:
    """An LGCP on an n×n window of unit cells with known truth (module docstring)."""
    import xarray as xr

    from lattice_lgm import LGCP, Lattice
    from lattice_lgm.covariance import Matern
    from lattice_lgm.hyperpriors import PCPriorRange
    from lattice_lgm.priors import CirculantPrior

    truth = {"sd": 1.5, "range": 20.0, "beta_x": 0.5}
    rng = np.random.default_rng(seed)
    lat = Lattice((n, n), spacing=1.0)
    f = CirculantPrior(lat, Matern(1.5, sd=truth["sd"], range=truth["range"]),
                       max_range=truth["range"]).sample(rng, 1)[0]
    c = np.arange(n) + 0.5
    cov = np.sin(2 * np.pi * c[None, :] / n) + np.cos(2 * np.pi * c[:, None] / (0.7 * n))
    cov = (cov - cov.mean()) / cov.std()
    target = 8000.0
    mean = math.log(target / (n * n)) - truth["sd"] ** 2 / 2
    truth["mean"] = mean
    # the intercept is identified with the field's average over the window (the two are one
    # direction of the likelihood): what the posterior of ``mean`` estimates is the intercept
    # plus the realised field's window mean (+0.16 at 256², +0.14 at 512² for seed 25)
    truth["mean_effective"] = mean + float(f.mean())
    lam = np.exp(mean + truth["beta_x"] * cov + f)
    counts = rng.poisson(lam)
    # points uniformly inside their cells, (x, y) order
    iy, ix = np.nonzero(counts)
    reps = counts[iy, ix]
    pts = np.column_stack([np.repeat(ix, reps) + rng.random(reps.sum()),
                           np.repeat(iy, reps) + rng.random(reps.sum())])
    da = xr.DataArray(cov, dims=("y", "x"), coords={"y": c, "x": c})
    # the range prior: PC with P(range < n/10) = 0.05 as the LGCP default, but bounded at n/4
    # (64 cells at 256²) instead of the default n/2: the torus is sized for the bound, and
    # n/2 makes it 1250² at 256² (a gradient ≈ 20× the window's cost; a run of hours here)
    rp = PCPriorRange(0.1 * n, 0.05, 2, upper=0.25 * n)
    model = LGCP(pts, (0, n, 0, n), cell_size=1.0, covariates={"x": da}, formula="~ x",
                 range_prior=rp, backend=backend)
    return model, truth


def build(problem: str) -> tuple[Any, dict[str, float] | None]:
    """``bei20``, ``sim256``, … on the circulant backend; ``-gmrf`` suffixed: the GMRF one."""
    name, _, backend = problem.partition("-")
    backend = backend or "circulant"
    if name.startswith("bei"):
        return bei(float(name[3:]), backend), None
    if name.startswith("sim"):
        return simulated(int(name[3:]), backend=backend)
    raise SystemExit(f"unknown problem {problem!r}; choose from {PROBLEMS}")


# -- one run -------------------------------------------------------------------------------------
def run_one(problem: str, method: str, iterations: int, tune: int, budget: float,
            seed: int, checkpoint: Path | None = None,
            checkpoint_seconds: float = 600.0) -> dict[str, Any]:
    """Run ``method`` on ``problem`` (≤ ``iterations`` or ``budget`` seconds), the traces.

    ``checkpoint``: a pickle of the run so far (sampler with its adaptation, chain state,
    generators, traces, clock) is written there atomically every ``checkpoint_seconds``; a
    run that finds it continues from it (the clock resumes where it stopped: time between a
    kill and the restart is not counted) and removes it when done — except when the run
    stopped at ``budget``: then the final state is kept there, and ``--extend`` with a larger
    budget continues the same chains.  For the hour-long ``sim512`` runs, so that a session's
    end or a crash loses at most one interval.
    """
    import pickle

    from lattice_lgm.models.lgcp_start import initial_state
    from lattice_lgm.samplers import chain_rngs, default_sweep

    model, truth = build(problem)
    names = list(model.lgm.hyper_names)
    coef = list(model.coef_names)
    if checkpoint is not None and checkpoint.exists():
        with open(checkpoint, "rb") as fh:
            ck = pickle.load(fh)
        sweep, state, rngs = ck["sweep"], ck["state"], ck["rngs"]
        trace, clock, steps = ck["trace"], ck["clock"], ck["steps"]
        load0, t_warm, warm = ck["load0"], ck["t_warm"], ck["warm_start"]
        print(f"  [{problem}/{method}] resumed at {len(clock)} it, {clock[-1]:.0f} s",
              flush=True)
    else:
        load0 = os.getloadavg()[0]
        rngs = chain_rngs(seed, 4)
        t0 = time.perf_counter()
        state, report = initial_state(model, rngs)
        t_warm = time.perf_counter() - t0
        warm = report.to_dict() if report else None
        sweep = default_sweep(model.lgm, method, tune=tune if method == "hmc" else 0)
        trace = {k: [] for k in (*names, *coef, "loglik")}
        clock, steps = [], []
    def save() -> None:
        tmp = checkpoint.with_suffix(".tmp")
        with open(tmp, "wb") as fh:
            pickle.dump({"sweep": sweep, "state": state, "rngs": rngs, "trace": trace,
                         "clock": clock, "steps": steps, "load0": load0,
                         "t_warm": t_warm, "warm_start": warm}, fh,
                        protocol=pickle.HIGHEST_PROTOCOL)
        tmp.replace(checkpoint)

    offset = clock[-1] if clock else 0.0
    start = time.perf_counter() - offset
    saved = time.perf_counter()
    out_of_budget = False
    for i in range(len(clock), iterations):
        if clock and clock[-1] > budget:
            out_of_budget = True
            break
        if checkpoint is not None and time.perf_counter() - saved > checkpoint_seconds:
            w0 = time.perf_counter()
            save()
            saved = time.perf_counter()
            start += saved - w0  # writing the checkpoint is not sampling time
        state, info = sweep.step(state, rngs)
        for k in names:
            trace[k].append(np.asarray(state.theta[k], dtype=float).copy())
        cd = model.coefficient_draws(state)
        for j, k in enumerate(coef):
            trace[k].append(cd[:, j].copy())
        trace["loglik"].append(np.asarray(state.loglik, dtype=float).copy())
        clock.append(time.perf_counter() - start)
        steps.append(float(np.mean(info.get("n_loglik", 0))))
        if (i + 1) % 50 == 0:
            print(f"  [{problem}/{method}] {i + 1} it, {clock[-1]:.0f} s", flush=True)
    if checkpoint is not None:
        if out_of_budget:  # kept: `--extend` with a larger budget continues the same chains
            save()
        else:
            checkpoint.unlink(missing_ok=True)
    return {"problem": problem, "method": method, "seed": seed, "tune": tune,
            "iterations": len(clock), "warm_start_seconds": t_warm,
            "warm_start": warm,
            "clock": clock, "evaluations_per_iteration": float(np.mean(steps)),
            "trace": {k: np.stack(v, axis=1).tolist() for k, v in trace.items()},
            "truth": truth, "load": [load0, os.getloadavg()[0]], "threads": THREADS,
            "backend": model.backend, "torus": list(getattr(model.prior, "embedding_shape",
                                                            model.prior.state_shape)),
            "lattice": list(model.lattice.shape)}


# -- analysis ------------------------------------------------------------------------------------
def analyse(run: dict[str, Any]) -> dict[str, Any]:
    """Time to R-hat ≤ 1.01, ESS per second after it, quantiles with MCSE."""
    import arviz as az

    tr = {k: np.asarray(v) for k, v in run["trace"].items()}  # (chains, draws)
    n = run["iterations"]
    clock = np.asarray(run["clock"])
    names = list(tr)
    t_conv = None
    rhat_at = []
    for t in range(max(20, n // 50), n + 1, max(1, n // 50)):
        lo = t // 2
        rh = {k: float(az.rhat(tr[k][:, lo:t])) for k in names}
        rhat_at.append((t, max(rh.values())))
        if max(rh.values()) <= RHAT_TARGET:
            t_conv = t
            break
    out: dict[str, Any] = {"problem": run["problem"], "method": run["method"],
                           "iterations": n, "load": run["load"], "threads": run["threads"],
                           "warm_start_seconds": run["warm_start_seconds"],
                           "seconds_per_iteration": float(clock[-1] / n),
                           "evaluations_per_iteration": run["evaluations_per_iteration"],
                           "max_rhat_trace": rhat_at[-5:], "truth": run["truth"]}
    final_lo = n // 2
    out["final_rhat"] = {k: float(az.rhat(tr[k][:, final_lo:])) for k in names}
    if t_conv is None:
        out.update(converged=False, seconds_to_rhat=None)
        post = {k: v[:, final_lo:] for k, v in tr.items()}
        secs = float(clock[-1] - clock[final_lo - 1]) if final_lo else float(clock[-1])
    else:
        out.update(converged=True, iterations_to_rhat=t_conv,
                   seconds_to_rhat=float(run["warm_start_seconds"] + clock[t_conv - 1]))
        post = {k: v[:, t_conv:] for k, v in tr.items()}
        secs = float(clock[-1] - clock[t_conv - 1])
    out["draws_after"] = int(next(iter(post.values())).shape[1])
    if out["draws_after"] >= 8:
        ess_b = {k: float(az.ess(v, method="bulk")) for k, v in post.items()}
        ess_t = {k: float(az.ess(v, method="tail")) for k, v in post.items()}
        out["ess_bulk"], out["ess_tail"] = ess_b, ess_t
        out["ess_bulk_per_second"] = {k: v / secs for k, v in ess_b.items()} if secs > 0 else None
        out["min_ess_bulk_per_second"] = (min(out["ess_bulk_per_second"].values())
                                          if secs > 0 else None)
        q = {}
        for k, v in post.items():
            q[k] = {f"q{int(100 * p)}": [float(np.quantile(v, p)),
                                         float(az.mcse(v, method="quantile", prob=p))]
                    for p in QUANTILES}
        out["posterior"] = q
    return out


def agreement(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pairwise z-tests of the quantiles of converged runs of one problem (Bonferroni)."""
    from scipy import stats

    out = []
    by_problem: dict[str, list] = {}
    for r in rows:
        if r.get("converged") and "posterior" in r:
            by_problem.setdefault(r["problem"], []).append(r)
    for prob, rs in by_problem.items():
        tests = []
        for i in range(len(rs)):
            for j in range(i + 1, len(rs)):
                a, b = rs[i], rs[j]
                for k in a["posterior"]:
                    if k not in b["posterior"] or k == "loglik":
                        continue
                    for qn, (va, sa) in a["posterior"][k].items():
                        vb, sb = b["posterior"][k][qn]
                        z = (va - vb) / math.sqrt(sa * sa + sb * sb) if sa + sb > 0 else 0.0
                        tests.append((a["method"], b["method"], k, qn, z))
        if not tests:
            continue
        crit = stats.norm.ppf(1 - FAMILY_ALPHA / (2 * len(tests)))
        worst = max(tests, key=lambda t: abs(t[4]))
        out.append({"problem": prob, "n_tests": len(tests), "critical_z": float(crit),
                    "max_abs_z": float(abs(worst[4])), "worst": list(worst[:4]),
                    "agree": bool(abs(worst[4]) <= crit)})
    return out


def medians(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per problem and method: medians over its repeats (None where a repeat did not converge)."""
    groups: dict[tuple[str, str], list] = {}
    for r in rows:
        groups.setdefault((r["problem"], r["method"]), []).append(r)
    out = []
    for (prob, meth), rs in groups.items():
        conv = [r for r in rs if r.get("converged")]
        all_conv = len(conv) == len(rs)

        def med(key: str, rs: list = rs, ok: bool = all_conv) -> float | None:
            vals = [r.get(key) for r in rs]
            return float(np.median(vals)) if ok and all(v is not None for v in vals) else None

        out.append({"problem": prob, "method": meth, "repeats": len(rs),
                    "converged": len(conv), "seconds_to_rhat": med("seconds_to_rhat"),
                    "min_ess_bulk_per_second": med("min_ess_bulk_per_second"),
                    "seconds_per_iteration": float(np.median(
                        [r["seconds_per_iteration"] for r in rs]))})
    return out


def report() -> dict[str, Any]:
    rows = []
    for f in sorted(RUNS.glob("*.json")):
        rows.append(analyse(json.loads(f.read_text())))
    summary = {"rows": rows, "medians": medians(rows), "agreement": agreement(rows),
               "threads": THREADS, "rhat_target": RHAT_TARGET, "family_alpha": FAMILY_ALPHA}
    (RESULTS / "mixing_lgcp.json").write_text(json.dumps(summary, indent=1))
    for r in rows:
        conv = (f"{r['seconds_to_rhat']:.0f} s" if r["converged"] else
                f"not converged (max R-hat {max(r['final_rhat'].values()):.3f})")
        ess = r.get("min_ess_bulk_per_second")
        print(f"{r['problem']:>7} {r['method']:>12}: {r['iterations']} it, "
              f"{r['seconds_per_iteration']:.3f} s/it, R-hat ≤ 1.01 at {conv}; "
              f"min bulk ESS/s {ess if ess is None else round(ess, 3)}; "
              f"load {r['load'][0]:.1f}-{r['load'][1]:.1f}")
    for m in summary["medians"]:
        if m["repeats"] > 1:
            t, e = m["seconds_to_rhat"], m["min_ess_bulk_per_second"]
            print(f"{m['problem']:>7} {m['method']:>12}: median over {m['repeats']} repeats: "
                  f"{m['converged']} converged, R-hat ≤ 1.01 at "
                  f"{'—' if t is None else f'{t:.0f}'} s, min bulk ESS/s "
                  f"{'—' if e is None else f'{e:.2f}'}")
    for a in summary["agreement"]:
        print(f"agreement {a['problem']}: max |z| {a['max_abs_z']:.2f} over {a['n_tests']} tests "
              f"(critical {a['critical_z']:.2f}): {'agree' if a['agree'] else 'DISAGREE'}")
    plot(rows)
    return summary


def peek() -> list[dict[str, Any]]:
    """Analyse the runs still going (or stopped) from their checkpoints: partial results.

    Each ``*.ckpt.pkl`` holds the traces so far; they are analysed like a finished run and
    written to ``<problem>-<method>.partial.json`` beside it (for the record of a long run
    that a session's end interrupts), with the truth where the problem has one.
    """
    import pickle

    out = []
    for ck in sorted(RUNS.glob("*.ckpt.pkl")):
        with open(ck, "rb") as fh:
            d = pickle.load(fh)
        stem = ck.name[: -len(".ckpt.pkl")]
        base = stem.rsplit("-r", 1)[0] if stem.rsplit("-r", 1)[-1].isdigit() else stem
        method = next(m for m in METHODS if base.endswith("-" + m))
        problem = base[: -len(method) - 1]
        truth = build(problem)[1] if problem.startswith("sim") else None
        run = {"problem": problem, "method": method, "iterations": len(d["clock"]),
               "warm_start_seconds": d["t_warm"], "clock": d["clock"],
               "evaluations_per_iteration": float(np.mean(d["steps"])), "truth": truth,
               "load": [d["load0"], os.getloadavg()[0]], "threads": THREADS,
               "trace": {k: np.stack(v, axis=1).tolist() for k, v in d["trace"].items()}}
        a = analyse(run)
        a["partial"] = True
        ck.with_name(ck.name.replace(".ckpt.pkl", ".partial.json")).write_text(
            json.dumps(a, indent=1))
        conv = (f"{a['seconds_to_rhat']:.0f} s" if a["converged"] else
                f"not yet (max R-hat {max(a['final_rhat'].values()):.3f} over the second half)")
        print(f"{problem}/{method} so far: {a['iterations']} it, "
              f"{a['seconds_per_iteration']:.2f} s/it, R-hat ≤ 1.01 {conv}", flush=True)
        for k, q in (a.get("posterior") or {}).items():
            print(f"   {k:>10}: median {q['q50'][0]:.3f}  90 % ({q['q5'][0]:.3f}, "
                  f"{q['q95'][0]:.3f})", flush=True)
        out.append(a)
    return out


def plot(rows: list[dict[str, Any]]) -> None:
    """Traces and rank plots of sd and range per run (mixing_lgcp.png)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [json.loads(f.read_text()) for f in sorted(RUNS.glob("*.json"))]
    if not runs:
        return
    fig, axes = plt.subplots(len(runs), 4, figsize=(16, 2.4 * len(runs)), squeeze=False)
    for ax_row, run in zip(axes, runs, strict=True):
        for j, name in enumerate(("sd", "range")):
            v = np.asarray(run["trace"][name])
            t = np.asarray(run["clock"])
            for c in range(len(v)):
                ax_row[2 * j].plot(t, v[c], lw=0.5)
            ax_row[2 * j].set_title(f"{run['problem']} {run['method']}: {name}", fontsize=8)
            ax_row[2 * j].set_xlabel("seconds", fontsize=7)
            half = v[:, v.shape[1] // 2:]
            ranks = np.argsort(np.argsort(half.ravel())).reshape(half.shape)
            for c in range(len(half)):
                ax_row[2 * j + 1].hist(ranks[c], bins=20, histtype="step")
            ax_row[2 * j + 1].set_title(f"ranks (second half): {name}", fontsize=8)
    fig.tight_layout()
    fig.savefig(RESULTS / "mixing_lgcp.png", dpi=80)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problems", nargs="+", default=["bei20"], choices=PROBLEMS)
    ap.add_argument("--methods", nargs="+", default=["hmc", "prior-white"], choices=METHODS)
    ap.add_argument("--iterations", type=int, default=600)
    ap.add_argument("--tune", type=int, default=200, help="HMC adaptation iterations")
    ap.add_argument("--budget", type=float, default=1800.0, help="seconds per run")
    ap.add_argument("--seed", type=int, default=2025)
    ap.add_argument("--repeats", type=int, default=1,
                    help="runs per problem and method (seeds seed + r), interleaved: the "
                         "methods' order alternates between repeats; medians in the summary")
    ap.add_argument("--extend", action="store_true",
                    help="continue finished runs that stopped at --budget and kept their "
                         "checkpoint, up to the new --iterations/--budget")
    ap.add_argument("--report", action="store_true", help="only rebuild the summary")
    ap.add_argument("--peek", action="store_true",
                    help="analyse the checkpoints of unfinished runs (partial results)")
    ap.add_argument("--quick", action="store_true", help="smoke run into a temporary folder")
    ap.add_argument("--out", type=Path, default=None, help="results folder (default: the repo's)")
    args = ap.parse_args(argv)
    global RESULTS, RUNS
    if args.out is not None:
        RESULTS = args.out
        RUNS = RESULTS / "mixing_lgcp"
    if args.quick:
        args.problems, args.methods = ["bei20"], ["hmc", "prior-white"]
        args.iterations, args.tune, args.budget = 30, 20, 60.0
    RUNS.mkdir(parents=True, exist_ok=True)
    if args.peek:
        peek()
        return
    if not args.report:
        for r in range(args.repeats):
            methods = args.methods if r % 2 == 0 else args.methods[::-1]
            for p in args.problems:
                for m in methods:
                    f = RUNS / (f"{p}-{m}.json" if r == 0 else f"{p}-{m}-r{r}.json")
                    ck = f.with_suffix(".ckpt.pkl")
                    if f.exists() and not (args.extend and ck.exists()):
                        print(f"[mixing] {p}/{m} repeat {r}: done before, skipped", flush=True)
                        continue
                    print(f"[mixing] {p}/{m} repeat {r} ...", flush=True)
                    res = run_one(p, m, args.iterations, args.tune, args.budget,
                                  args.seed + r, checkpoint=ck)
                    res["repeat"] = r
                    tmp = f.with_suffix(".tmp")
                    tmp.write_text(json.dumps(res))
                    tmp.replace(f)
    report()


if __name__ == "__main__":
    main()
