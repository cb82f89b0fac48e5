"""Sampler benchmark: effective samples per second, ESS iteration speed and thread scaling.

The data are one simulated log-Gaussian Cox process on the unit square: an n×n lattice with
spacing 1/n, a circulant Matérn ν = 3/2 draw with sd 1 and range 0.2 (fixed seed), and counts
``y ~ Poisson(E · exp(f + mean))`` with exposure ``E = 2000/n²`` per cell and true mean 0, so
≈ 2000·e^½ ≈ 3300 points at every size.  Hyperpriors, identical for every backend:
``sd ~ PCPriorSD(1, 0.05)``, ``range ~ PCPriorRange(0.05, 0.05, 2, upper=0.5)``,
``mean ~ Normal(0, 3)``.  Chains start at the true hyperparameters and an exact prior draw of f.

Sections (each case runs in a fresh subprocess, as ``priors.py``):

* ``mixing`` — the headline: ArviZ bulk ESS of sd, range, mean and the log-likelihood per
  second (and per likelihood evaluation, per covariance construction), for 4 chains of Gibbs
  sweeps (one univariate-slice ``HyperMove`` over sd, range, mean, then 10 elliptical slice
  updates), per backend × representation, at 64², 256² and 1024².  Circulant: torus sized for
  the range prior's upper bound 0.5; GMRF: Matérn-SPDE α = 2 (ν = 1), spectral solver, padded by
  one upper-bound range (0.5) per side — its site representations (``surr-*``, ``post-*``)
  factor ``Q + Π`` with CHOLMOD per proposal and run at 64² only; dense: LAPACK, at 64² only,
  ``fixed`` and ``prior-white`` (the representations with a circulant twin).  Each case
  runs to 300 sweeps, or stops after 120 s once 50 sweeps are kept, or at 360 s regardless
  (dense: after 240 s and 3 sweeps, or at 600 s); the first 20 % of sweeps are warm-up and are
  excluded from ESS and from the time.  Rows with fewer than 50 kept sweeps are flagged
  ``reliable: false`` (expect that at 256² and above: sweeps there take seconds to minutes —
  the circulant torus for range ≤ 0.5 is 4.5–6.75× the window per axis).
  The dense path is far too slow at 64² for a usable ESS in a budget (a covariance
  construction is a 4096² Cholesky), so the "≥ 100× dense" figure is given three ways: measured
  (when the dense row is reliable); estimated as the ratio of seconds per sweep at 64² times the
  ratio of ESS per sweep measured by ``equal``; and as a lower bound that assumes the dense ESS
  is at most its number of draws (``4 × kept sweeps``).
* ``equal`` — circulant and dense ``prior-white`` chains on the same data at 32² (where a dense
  sweep takes seconds), exactly 300 sweeps each: the ratio of their ESS per sweep, with a rough
  standard error from the spread of the four chains' own ESS.  It tests the assumption behind
  the estimate above — that the two backends' chains mix alike per sweep, which they need not:
  the circulant white state lives on the torus, the dense one on the window.
* ``ess_speed`` — circulant elliptical slice steps (4 chains, fixed hyperparameters, torus sized
  for the true range 0.2, ``in_place=True`` as inside a Gibbs sweep) at 64², 256²–2048², against the
  floor measured in the same process, in interleaved (step, floor) pairs: per chain, white noise
  for the half-spectrum (``draw_spectrum``) and one planned inverse real FFT of the embedding
  (``colorize_spectrum``), plus the step's likelihood evaluations (``info["n_loglik"]``) times
  one ``likelihood.loglik`` of one chain on the window, each piece timed alone.  The figure is
  the median of the per-pair ratios.  Dense at 64² with its own floor (white noise +
  ``prior.colorize`` + evaluations) for comparison.
* ``threads`` — the same step at 1024² with 1 and with 2 threads (``numba.set_num_threads`` and
  ``fft_threads``), each in its own subprocess, alternating; the ratio of the medians.

Targets (the issue): ESS step within 1.5× of the floor at 1024²; ≥ 1.7× from 1 to 2 threads;
at 64², hyperparameter ESS/s ≥ 100× the dense path's with the same representation.

Usage::

    python benchmarks/perf/sampling.py            # full: 2–3.5 h, writes benchmarks/results/
    python benchmarks/perf/sampling.py --quick    # ~1–2 min (run by a test), see below
    python benchmarks/perf/sampling.py --sections ess_speed threads
    python benchmarks/perf/sampling.py --sections mixing --mix-sizes 64 --budget 60
    python benchmarks/perf/sampling.py --sections equal --merge   # add to sampling.json

``--quick`` runs every section at stand-in sizes with tiny budgets — mixing at 16² (dense: fixed
and prior-white only, ≥ 4 kept sweeps: the ESS figures are placeholders), ESS speed at 64² and
128² (dense 16²), threads at 128² — and reports the targets at those sizes.

Timings on shared VMs are noisy (DESIGN §8): run the full benchmark on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent / "results"

N_CHAINS = 4
NU, SD, RANGE, UPPER = 1.5, 1.0, 0.2, 0.5
POINTS = 2000.0  # expected points at f = 0 (exposure POINTS/n² per cell, true mean 0)
DATA_SEED, CHAIN_SEED = 20240611, 1
N_LATENT = 10
WARMUP = 0.2
HYPER = ("sd", "range", "mean")
TRACES = (*HYPER, "loglik")
SITE_REPS = ("surr-site", "surr-taylor", "post-site", "post-taylor")  # CHOLMOD on a GMRF
#: GMRF site representations factor Q + Π with CHOLMOD per proposal: 60–80 ms at the 128² state
#: of 64² (192 Mflop per factorisation at ≈2.5 GFlop/s), so 256² (a 384² state) would get a few
#: sweeps in the budget — too few for an ESS; they run at 64² only
CHOLMOD_MAX = 64
SECTIONS = ("mixing", "equal", "ess_speed", "threads")

TARGET_FLOOR, TARGET_THREADS, TARGET_DENSE = 1.5, 1.7, 100.0

#: sizes and budgets; ``quick`` keeps every code path at small sizes (run by a test)
MODES = {
    "full": {
        "mix_sizes": (64, 256, 1024), "dense_n": 64,
        "max_sweeps": 1000, "budget_s": 120.0, "cap_s": 360.0, "min_kept": 50,
        "dense_budget_s": 240.0, "dense_cap_s": 600.0, "dense_min_sweeps": 3,
        "dense_reps": ("fixed", "prior-white"),
        "equal_n": 32, "equal_sweeps": 300, "equal_reps": ("prior-white",),
        "ess_sizes": (64, 256, 512, 1024, 2048), "ess_dense_n": 64,
        "ess_repeats": {512: 15, 1024: 11, 2048: 7}, "ess_warm": 5,
        "threads_n": 1024, "threads_rounds": 2, "floor_n": 1024,
    },
    "quick": {
        "mix_sizes": (16,), "dense_n": 16,
        "max_sweeps": 30, "budget_s": 1.0, "cap_s": 60.0, "min_kept": 4,
        "dense_budget_s": 1.0, "dense_cap_s": 60.0, "dense_min_sweeps": 5,
        "dense_reps": ("fixed", "prior-white"),
        "equal_n": 12, "equal_sweeps": 12, "equal_reps": ("prior-white",),
        "ess_sizes": (64, 128), "ess_dense_n": 16,
        "ess_repeats": {}, "ess_warm": 2, "quick_repeats": 5,
        "threads_n": 128, "threads_rounds": 1, "floor_n": 128,
    },
}
MIN_SWEEPS_FOR_ESS = 5  # 1 warm-up + 4 kept: the least ArviZ's bulk ESS is computed from


def _finite(x) -> float | None:
    """JSON-safe float (None for NaN / inf / missing)."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _median(xs) -> float:
    return float(np.median(np.asarray(xs, dtype=float)))


# -- the model (child processes) ------------------------------------------------------------------
def make_likelihood(n: int):
    """The simulated LGCP counts on the n×n lattice (same seed at every backend)."""
    from lattice_lgm import Lattice
    from lattice_lgm.covariance import Matern
    from lattice_lgm.likelihoods import Poisson
    from lattice_lgm.priors import CirculantPrior

    lat = Lattice((n, n), spacing=1.0 / n)
    truth = CirculantPrior(lat, Matern(NU, sd=SD, range=RANGE)).sample(
        np.random.default_rng(DATA_SEED), 1)[0]
    exposure = POINTS / (n * n)
    counts = np.random.default_rng(DATA_SEED + 1).poisson(exposure * np.exp(truth))
    return lat, Poisson(counts, exposure=exposure), int(counts.sum())


def make_prior(backend: str, lat, *, max_range: float, fft_threads: int | None = None):
    """The field prior at the true hyperparameters, sized for ranges up to ``max_range``."""
    from lattice_lgm.covariance import Matern
    from lattice_lgm.priors import CirculantPrior, DensePrior, GMRFPrior

    kernel = Matern(NU, sd=SD, range=RANGE)
    if backend == "circulant":
        return CirculantPrior(lat, kernel, max_range=max_range, fft_threads=fft_threads)
    if backend == "gmrf":
        # padding of one range at the upper bound (GMRFPrior's default rule), kept by with_params
        return GMRFPrior.matern(lat, sd=SD, range=max_range, alpha=2).with_params(range=RANGE)
    if backend == "dense":
        return DensePrior.from_lattice(lat, kernel)
    raise SystemExit(f"unknown backend {backend!r}")


def prior_info(prior) -> dict:
    cells = int(np.prod(prior.state_shape))
    return {"state_shape": list(prior.state_shape),
            "padding": [float(p) for p in getattr(prior, "padding", ())],
            "state_over_window": cells / int(np.prod(prior.shape)),
            "describe": prior.describe()}


def have_cholmod() -> bool:
    try:
        import sksparse.cholmod  # noqa: F401
    except ImportError:
        return False
    return True


# -- mixing (child) -----------------------------------------------------------------------------
def _summarise_chain(rep: str, tr: dict, dts: list, nll: list, ncov: list, n_sweeps: int,
                     wall: float, min_kept: int) -> dict:
    import arviz as az

    warm = max(1, math.ceil(WARMUP * n_sweeps))
    kept = n_sweeps - warm
    row: dict = {"representation": rep, "sweeps": n_sweeps, "warmup": warm, "kept": kept,
                 "wall_s": wall, "kept_s": float(np.sum(dts[warm:])),
                 "sweep_s_median": _median(dts[warm:] or dts), "first_sweep_s": dts[0],
                 "n_loglik": int(np.sum(nll[warm:])), "n_cov": int(np.sum(ncov[warm:])),
                 "reliable": kept >= min_kept}
    row["draws_per_s"] = N_CHAINS * kept / row["kept_s"] if kept else None
    ess, rhat, mean, sd, per_chain = {}, {}, {}, {}, {}
    for k in TRACES:
        x = np.asarray(tr[k])[warm:].T  # (chain, draw)
        mean[k], sd[k] = _finite(np.mean(x)) if kept else None, _finite(np.std(x)) if kept else None
        if kept >= MIN_SWEEPS_FOR_ESS - 1:
            ess[k] = _finite(az.ess(x, method="bulk"))
            rhat[k] = _finite(az.rhat(x, method="rank"))
            # each chain alone: their spread gives a rough standard error of the ESS
            per_chain[k] = [_finite(az.ess(xc[None, :], method="bulk")) for xc in x]
        else:
            ess[k] = rhat[k] = None
    row.update(ess=ess, rhat=rhat, post_mean=mean, post_sd=sd, ess_chain=per_chain)
    row["ess_per_sweep"] = {k: (v / kept if v is not None and kept else None)
                            for k, v in ess.items()}

    def per(den):
        return {k: (v / den if v is not None and den else None) for k, v in ess.items()}

    row["ess_per_s"] = per(row["kept_s"])
    row["ess_per_loglik"] = per(row["n_loglik"])
    row["ess_per_cov"] = per(row["n_cov"])
    return row


def run_mixing(backend: str, n: int, cfg: dict, *, reps: tuple[str, ...] | None = None,
               fixed_sweeps: int | None = None, section: str = "mixing") -> list[dict]:
    """Gibbs sweeps per representation; a time budget, or exactly ``fixed_sweeps`` sweeps."""
    from lattice_lgm.hyperpriors import Normal, PCPriorRange, PCPriorSD
    from lattice_lgm.models import LatentGaussianModel
    from lattice_lgm.samplers import (
        EllipticalSlice,
        Gibbs,
        HyperMove,
        chain_rngs,
        init_state,
        representations_for,
    )

    lat, lik, total = make_likelihood(n)
    prior = make_prior(backend, lat, max_range=UPPER)
    hp = {"sd": PCPriorSD(1.0, 0.05), "range": PCPriorRange(0.05, 0.05, 2, upper=UPPER),
          "mean": Normal(0.0, 3.0)}
    model = LatentGaussianModel(prior, lik, hyperpriors=hp, mean=0.0)
    dense = backend == "dense"
    budget = cfg["dense_budget_s"] if dense else cfg["budget_s"]
    cap = cfg["dense_cap_s"] if dense else cfg["cap_s"]
    common = {"section": section, "backend": backend, "n": n, "chains": N_CHAINS,
              "points": total, "n_latent": N_LATENT, **prior_info(prior)}
    rows = []
    for rep in representations_for(prior):
        base = {**common, "representation": rep}
        if reps is not None and rep not in reps:
            continue
        if reps is None and dense and cfg["dense_reps"] and rep not in cfg["dense_reps"]:
            rows.append({**base, "skipped": "not selected (quick mode or --dense-reps)"})
            continue
        if backend == "gmrf" and rep in SITE_REPS:
            if n > CHOLMOD_MAX:
                rows.append({**base, "skipped": f"site representations only up to "
                                                f"{CHOLMOD_MAX}² (CHOLMOD)"})
                continue
            if not have_cholmod():
                rows.append({**base, "skipped": "scikit-sparse not installed"})
                continue
        print(f"    {section} {backend} {n}² {rep} ...", file=sys.stderr, flush=True)
        try:
            rngs = chain_rngs(CHAIN_SEED, N_CHAINS)
            state = init_state(model, rngs)
            sweep = Gibbs(HyperMove(model, rep), EllipticalSlice(model), n_latent=N_LATENT)
            tr: dict = {k: [] for k in TRACES}
            dts, nll, ncov = [], [], []
            t0 = time.perf_counter()
            while True:
                t = time.perf_counter()
                state, info = sweep.step(state, rngs)
                dts.append(time.perf_counter() - t)
                for k in HYPER:
                    tr[k].append(np.array(state.theta[k], dtype=float))
                tr["loglik"].append(np.array(state.loglik, dtype=float))
                nll.append(int(info["n_loglik"].sum()))
                ncov.append(int(info["n_cov"].sum()))
                s, el = len(dts), time.perf_counter() - t0
                kept = s - max(1, math.ceil(WARMUP * s))
                if fixed_sweeps is not None:
                    if s >= fixed_sweeps:
                        break
                    continue
                enough = s >= cfg["dense_min_sweeps"] if dense else kept >= cfg["min_kept"]
                if s >= cfg["max_sweeps"] or (el >= budget and enough) or el >= cap:
                    break
            row = _summarise_chain(rep, tr, dts, nll, ncov, len(dts),
                                   time.perf_counter() - t0, cfg["min_kept"])
        except Exception as exc:  # a representation that fails is a finding, not a crash
            rows.append({**base, "error": f"{type(exc).__name__}: {exc}"})
            continue
        rows.append({**common, **row, "loadavg": list(os.getloadavg())})
    return rows


# -- ESS step speed and its floor (child) -------------------------------------------------------
def run_ess_speed(backend: str, n: int, repeats: int, warm: int,
                  threads: int | None) -> dict:
    import numba

    from lattice_lgm.models import LatentGaussianModel
    from lattice_lgm.samplers import EllipticalSlice, chain_rngs, init_state

    if threads:
        numba.set_num_threads(threads)
    lat, lik, total = make_likelihood(n)
    # fixed hyperparameters: the torus only has to embed the true range
    prior = make_prior(backend, lat, max_range=RANGE, fft_threads=threads)
    model = LatentGaussianModel(prior, lik, mean=0.0)
    rngs = chain_rngs(CHAIN_SEED, N_CHAINS)
    state = init_state(model, rngs)
    ess = EllipticalSlice(model)
    t = time.perf_counter()
    state, _ = ess.step(state, rngs)  # compiles the site kernels
    first = time.perf_counter() - t
    for _ in range(warm):
        state, _ = ess.step(state, rngs, in_place=True)

    frng = np.random.default_rng(7)
    if backend == "circulant":
        zeta = np.empty(prior.half_shape, dtype=np.complex128)
        fbuf = np.empty((1, *prior.state_shape))

        def noise():
            prior.draw_spectrum(frng, out=zeta)

        def color():
            prior.colorize_spectrum(zeta[None], out=fbuf)
    else:
        w = np.empty((1, *prior.white_shape))

        def noise():
            frng.standard_normal(out=w)

        def color():
            prior.colorize(w)

    eta = np.ascontiguousarray(state.f[:1, :n, :n])  # the window of chain 0

    def chains(fn):
        t = time.perf_counter()
        for _ in range(N_CHAINS):
            fn()
        return time.perf_counter() - t

    chains(noise), chains(color), chains(lambda: lik.loglik(eta))  # warm the floor's pieces
    pairs = []
    for _ in range(repeats):
        t = time.perf_counter()
        state, info = ess.step(state, rngs, in_place=True)
        step = time.perf_counter() - t
        evals = int(info["n_loglik"].sum())
        t_noise, t_color = chains(noise), chains(color)
        t_ll = chains(lambda: lik.loglik(eta)) / N_CHAINS
        floor = t_noise + t_color + evals * t_ll
        pairs.append({"step": step, "floor": floor, "noise": t_noise, "c2r": t_color,
                      "loglik1": t_ll, "evals": evals})
    step_s = _median([p["step"] for p in pairs])
    out = {
        "section": "ess_speed", "backend": backend, "n": n, "chains": N_CHAINS,
        "repeats": repeats, "points": total, **prior_info(prior),
        "numba_threads": numba.get_num_threads(), "threading_layer": numba.threading_layer(),
        "fft_threads": getattr(getattr(prior, "_plans", None), "threads", None),
        "first_step_s": first, "step_s": step_s, "iter_per_s": 1.0 / step_s,
        "chain_iter_per_s": N_CHAINS / step_s,
        "floor_s": _median([p["floor"] for p in pairs]),
        "noise_s": _median([p["noise"] for p in pairs]),
        "colorize_s": _median([p["c2r"] for p in pairs]),
        "loglik_1chain_s": _median([p["loglik1"] for p in pairs]),
        "evals_per_step": _median([p["evals"] for p in pairs]),
        "step_over_floor": _median([p["step"] / p["floor"] for p in pairs]),
        "loadavg": list(os.getloadavg()),
    }
    return out


# -- driver -------------------------------------------------------------------------------------
def _child(args: list[str]) -> list[dict]:
    cmd = [sys.executable, __file__, "--one", *args]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=os.environ.copy())
    if proc.returncode != 0:
        return [{"section": args[0], "backend": args[1], "n": int(args[2]),
                 "error": f"subprocess {' '.join(args)} exited with {proc.returncode}"}]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return out if isinstance(out, list) else [out]


def mixing_cases(cfg: dict) -> list[tuple[str, int]]:
    out = [(b, n) for n in cfg["mix_sizes"] for b in ("circulant", "gmrf")]
    return [*out, ("dense", cfg["dense_n"])]


def equal_cases(cfg: dict) -> list[tuple[str, int]]:
    return [("circulant", cfg["equal_n"]), ("dense", cfg["equal_n"])]


def _ess_per_sweep_se(row: dict, k: str) -> float | None:
    """Rough standard error of the pooled ESS per sweep from the spread of the chains' ESS."""
    xs = [v for v in row.get("ess_chain", {}).get(k, []) if v is not None]
    if len(xs) < 2 or not row["kept"]:
        return None
    return float(np.std(xs, ddof=1) * math.sqrt(len(xs)) / row["kept"])


def equal_ratios(rows: list[dict]) -> list[dict]:
    """ESS per sweep of each fast backend over dense's, same representation, equal sweeps."""
    dense = {r["representation"]: r for r in rows if r.get("backend") == "dense" and "ess" in r}
    out = []
    for r in rows:
        d = dense.get(r.get("representation"))
        if r.get("backend") == "dense" or d is None or "ess" not in r:
            continue
        ratio, se = {}, {}
        for k in HYPER:
            a, b = r["ess_per_sweep"].get(k), d["ess_per_sweep"].get(k)
            if not a or not b:
                ratio[k] = se[k] = None
                continue
            ratio[k] = a / b
            sa, sb = _ess_per_sweep_se(r, k), _ess_per_sweep_se(d, k)
            # delta method for a ratio of independent estimates
            se[k] = (ratio[k] * math.hypot(sa / a, sb / b)
                     if sa is not None and sb is not None else None)
        out.append({"backend": r["backend"], "representation": r["representation"],
                    "n": r["n"], "sweeps": r["sweeps"], "ratio": ratio, "se": se})
    return out


def ess_cases(cfg: dict) -> list[tuple[str, int]]:
    return [("circulant", n) for n in cfg["ess_sizes"]] + [("dense", cfg["ess_dense_n"])]


def _repeats(cfg: dict, n: int) -> int:
    if "quick_repeats" in cfg:
        return cfg["quick_repeats"]
    big = [k for k in sorted(cfg["ess_repeats"]) if n >= k]
    return cfg["ess_repeats"][big[-1]] if big else 21


def dense_ratios(rows: list[dict], dense_n: int, equal: list[dict] | None = None) -> list[dict]:
    """Hyperparameter ESS/s of circulant and GMRF over dense, same representation, at dense_n.

    Three figures, best first: ``measured`` (when the dense row has enough sweeps for an ESS);
    ``estimate`` = (dense s/sweep ÷ this s/sweep) × (this ESS/sweep ÷ dense ESS/sweep measured
    at equal sweeps on the smaller ``equal`` problem, same backend pair and representation);
    ``lower_bound`` taking the dense ESS as its number of draws.
    """
    eq = {(e["backend"], e["representation"]): e for e in (equal or [])}
    dense = {r["representation"]: r for r in rows
             if r.get("backend") == "dense" and r.get("n") == dense_n and "ess" in r}
    out = []
    for r in rows:
        if r.get("backend") not in ("circulant", "gmrf") or r.get("n") != dense_n:
            continue
        d = dense.get(r.get("representation"))
        if d is None or "ess" not in r:
            continue
        measured, bound, estimate = {}, {}, {}
        cost = d["sweep_s_median"] / r["sweep_s_median"]
        e = eq.get((r["backend"], r["representation"]))
        for k in HYPER:
            v = r["ess_per_s"].get(k)
            dv = d["ess_per_s"].get(k)
            measured[k] = v / dv if v and dv and d["reliable"] else None
            bound[k] = v / d["draws_per_s"] if v and d["draws_per_s"] else None
            rho = e["ratio"].get(k) if e else None
            estimate[k] = cost * rho if rho else None
        vals_m = [v for v in measured.values() if v is not None]
        vals_b = [v for v in bound.values() if v is not None]
        min_m = min(vals_m) if len(vals_m) == len(HYPER) else None
        min_b = min(vals_b) if len(vals_b) == len(HYPER) else None
        vals_e = [v for v in estimate.values() if v is not None]
        min_e = min(vals_e) if len(vals_e) == len(HYPER) else None
        if not r["reliable"]:
            met, basis = None, "this row has too few sweeps"
        elif min_m is not None:
            met, basis = min_m >= TARGET_DENSE, "measured"
        elif min_b is not None and min_b >= TARGET_DENSE:
            met, basis = True, "lower bound"
        elif min_e is not None:
            met, basis = min_e >= TARGET_DENSE, (
                f"estimate: cost ratio at {dense_n}² x ESS-per-sweep ratio at "
                f"{e['n']}² ({e['sweeps']} sweeps each)")
        else:
            met, basis = None, "no dense ESS and no equal-sweeps ratio"
        out.append({"backend": r["backend"], "representation": r["representation"],
                    "n": dense_n, "measured": measured, "lower_bound": bound,
                    "cost_ratio": cost, "estimate": estimate,
                    "min_measured": min_m, "min_lower_bound": min_b, "min_estimate": min_e,
                    "dense_reliable": d["reliable"], "met": met, "basis": basis})
    return out


def _f(x, fmt: str = "9.2f") -> str:
    """``x`` formatted, or a dash of the same width when it is missing."""
    if x is None:
        width = fmt.split(".")[0]
        return format("-", f">{width}") if width else "-"
    return format(x, fmt)


def _clean(x):
    """JSON-safe copy: NumPy scalars to Python, non-finite floats to None."""
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return _finite(x)
    return x


def print_mixing(rows: list[dict]) -> None:
    hdr = (f"{'backend':>9} {'n':>5} {'representation':>14} {'state':>11} {'sweeps':>9} "
           f"{'s/sweep':>8} | {'ESS sd':>7} {'range':>7} {'mean':>7} {'loglik':>7} | "
           f"{'ESS/s sd':>9} {'range':>9} {'mean':>9} {'loglik':>9} | "
           f"{'ESS/kLL':>8} {'ESS/cov':>8}")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        if "ess" not in r:
            why = r.get("skipped") or r.get("error")
            print(f"{r.get('backend', '?'):>9} {r.get('n', 0):>4}² "
                  f"{r.get('representation', '?'):>14}  {why}")
            continue
        st = "x".join(map(str, r["state_shape"]))
        e, s = r["ess"], r["ess_per_s"]
        hyp = [v for k, v in r["ess_per_loglik"].items() if k in HYPER and v is not None]
        cov = [v for k, v in r["ess_per_cov"].items() if k in HYPER and v is not None]
        flag = "" if r["reliable"] else "  (few draws)"
        print(f"{r['backend']:>9} {r['n']:>4}² {r['representation']:>14} {st:>11} "
              f"{r['kept']:>4}/{r['sweeps']:<4} {r['sweep_s_median']:8.3f} | "
              + " ".join(_f(e[k], "7.1f") for k in TRACES) + " | "
              + " ".join(_f(s[k], "9.3f") for k in TRACES) + " | "
              + f"{_f(1e3 * min(hyp) if hyp else None, '8.3f')} "
              + f"{_f(min(cov) if cov else None, '8.4f')}{flag}")
    print("ESS/kLL, ESS/cov: the smallest hyperparameter ESS per 1000 likelihood evaluations "
          "and per covariance construction; time and counts over kept sweeps.")


def print_ess(rows: list[dict], title: str) -> None:
    print(title)
    hdr = (f"{'backend':>9} {'n':>5} {'thr':>3} {'state':>11} {'step ms':>9} {'it/s':>8} "
           f"{'floor ms':>9} {'noise ms':>9} {'c2r ms':>9} {'ll ms':>8} {'evals':>6} "
           f"{'step/floor':>10}")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        if "step_s" not in r:
            print(f"{r.get('backend', '?'):>9} {r.get('n', 0):>4}²  {r.get('error')}")
            continue
        st = "x".join(map(str, r["state_shape"]))
        print(f"{r['backend']:>9} {r['n']:>4}² {r['numba_threads']:>3} {st:>11} "
              f"{r['step_s'] * 1e3:9.2f} {r['iter_per_s']:8.2f} {r['floor_s'] * 1e3:9.2f} "
              f"{r['noise_s'] * 1e3:9.2f} {r['colorize_s'] * 1e3:9.2f} "
              f"{r['loglik_1chain_s'] * 1e3:8.3f} {r['evals_per_step']:6.0f} "
              f"{r['step_over_floor']:10.2f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes and budgets (a test)")
    ap.add_argument("--out", type=Path, default=None, help="JSON path")
    ap.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    ap.add_argument("--budget", type=float, default=None,
                    help="seconds per mixing case (cap 3x; default 120, quick 1)")
    ap.add_argument("--mix-sizes", type=int, nargs="+", default=None,
                    help="lattice sides of the mixing section (default 64 256 1024)")
    ap.add_argument("--backends", nargs="+", choices=("circulant", "gmrf", "dense"),
                    default=None, help="mixing: only these backends")
    ap.add_argument("--dense-reps", nargs="+", default=None,
                    help="mixing: only these representations on the dense path")
    ap.add_argument("--merge", action="store_true",
                    help="keep the sections not run now from the existing --out file and "
                         "recompute the targets over the union")
    ap.add_argument("--one", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    mode = "quick" if args.quick else "full"
    cfg = dict(MODES[mode])
    if args.budget is not None:
        cfg["budget_s"], cfg["cap_s"] = args.budget, 3 * args.budget
    if args.mix_sizes:
        cfg["mix_sizes"] = tuple(args.mix_sizes)
    if args.dense_reps:
        cfg["dense_reps"] = tuple(args.dense_reps)
    if args.one:
        section, backend, n = args.one[0], args.one[1], int(args.one[2])
        if section == "mixing":
            res = run_mixing(backend, n, cfg)
        elif section == "equal":
            res = run_mixing(backend, n, cfg, reps=cfg["equal_reps"],
                             fixed_sweeps=cfg["equal_sweeps"], section="equal")
        else:
            threads = int(args.one[3]) if len(args.one) > 3 else None
            res = run_ess_speed(backend, n, _repeats(cfg, n), cfg["ess_warm"], threads)
        print(json.dumps(_clean(res), allow_nan=False))
        return 0

    t_start = time.perf_counter()
    q = ["--quick"] if args.quick else []
    bud = ["--budget", str(args.budget)] if args.budget is not None else []
    out = args.out or RESULTS / ("sampling_quick.json" if args.quick else "sampling.json")
    result: dict = {sec: [] for sec in SECTIONS}
    previous: dict = {}
    if args.merge and out.exists():
        previous = json.loads(out.read_text())
    ran: set = set()  # (section, backend, n) cases run now; merge keeps every other old row
    if "mixing" in args.sections:
        print(f"== mixing: {N_CHAINS} chains, HyperMove(sd, range, mean) + {N_LATENT} ESS "
              "per sweep", flush=True)
        dreps = ["--dense-reps", *args.dense_reps] if args.dense_reps else []
        for backend, n in mixing_cases(cfg):
            if args.backends and backend not in args.backends:
                continue
            ran.add(("mixing", backend, n))
            rows = _child(["mixing", backend, str(n), *q, *bud, *dreps])
            for r in rows:
                r.setdefault("backend", backend)
                r.setdefault("n", n)
            result["mixing"] += rows
            for r in rows:
                if "ess_per_s" in r:
                    s = r["ess_per_s"]
                    print(f"  {backend:>9} {n:>5}² {r['representation']:>12}: {r['kept']:>4} "
                          f"kept, {r['kept_s']:7.1f} s, ESS/s sd {_f(s['sd'], '.3g')} range "
                          f"{_f(s['range'], '.3g')} mean {_f(s['mean'], '.3g')}", flush=True)
                else:
                    print(f"  {backend:>9} {n:>5}² {r.get('representation', '')}: "
                          f"{r.get('skipped') or r.get('error')}", flush=True)
    if "equal" in args.sections:
        print(f"== equal: ESS per sweep, {cfg['equal_sweeps']} sweeps each, at "
              f"{cfg['equal_n']}² ({', '.join(cfg['equal_reps'])})", flush=True)
        for backend, n in equal_cases(cfg):
            ran.add(("equal", backend, n))
            rows = _child(["equal", backend, str(n), *q])
            for r in rows:
                r.setdefault("backend", backend)
                r.setdefault("n", n)
                if "ess_per_sweep" in r:
                    e = r["ess_per_sweep"]
                    print(f"  {backend:>9} {n:>5}² {r['representation']:>12}: ESS/sweep sd "
                          f"{_f(e['sd'], '.3g')} range {_f(e['range'], '.3g')} mean "
                          f"{_f(e['mean'], '.3g')} ({r['sweep_s_median']:.3f} s/sweep)",
                          flush=True)
                else:
                    print(f"  {backend:>9} {n:>5}²: {r.get('skipped') or r.get('error')}")
            result["equal"] += rows
    if "ess_speed" in args.sections:
        ran.update(("ess_speed", b, n) for b, n in ess_cases(cfg))
    if "threads" in args.sections:
        ran.add(("threads", "circulant", cfg["threads_n"]))
    for sec in SECTIONS:
        kept = [r for r in previous.get(sec, [])
                if (sec, r.get("backend"), r.get("n")) not in ran]
        result[sec] = kept + result[sec]
    result["equal_ratio"] = equal_ratios(result["equal"])
    result["dense_ratio"] = dense_ratios(result["mixing"], cfg["dense_n"], result["equal_ratio"])
    if "ess_speed" in args.sections:
        print("== ess_speed: one elliptical slice step of 4 chains vs its floor", flush=True)
        for backend, n in ess_cases(cfg):
            row = _child(["ess_speed", backend, str(n), *q])[0]
            row.setdefault("backend", backend)
            row.setdefault("n", n)
            result["ess_speed"].append(row)
            if "step_s" in row:
                print(f"  {backend:>9} {n:>5}²: step {row['step_s'] * 1e3:9.2f} ms, "
                      f"step/floor {row['step_over_floor']:.2f}", flush=True)
            else:
                print(f"  {backend:>9} {n:>5}²: {row.get('error')}", flush=True)
    if "threads" in args.sections:
        n = cfg["threads_n"]
        print(f"== threads: circulant {n}², 1 vs 2 threads", flush=True)
        from lattice_lgm.threads import available_cores

        if available_cores() < 2:  # the affinity's cores: Numba refuses more threads
            print("  skipped: fewer than 2 usable cores")
        else:
            for _ in range(cfg["threads_rounds"]):
                for k in (1, 2):
                    row = _child(["ess_speed", "circulant", str(n), str(k), *q])[0]
                    row.update(section="threads", threads=k)
                    row.setdefault("backend", "circulant")
                    row.setdefault("n", n)
                    result["threads"].append(row)
                    if "step_s" in row:
                        print(f"  {k} thread(s): step {row['step_s'] * 1e3:9.2f} ms, "
                              f"step/floor {row['step_over_floor']:.2f}", flush=True)

    # -- targets ---------------------------------------------------------------------------------
    fn = cfg["floor_n"]
    floor_row = next((r for r in result["ess_speed"]
                      if r.get("backend") == "circulant" and r.get("n") == fn
                      and "step_s" in r), None)
    floor_ratio = floor_row["step_over_floor"] if floor_row else None
    t1 = [r["step_s"] for r in result["threads"] if r.get("threads") == 1 and "step_s" in r]
    t2 = [r["step_s"] for r in result["threads"] if r.get("threads") == 2 and "step_s" in r]
    speedup = _median(t1) / _median(t2) if t1 and t2 else None
    dense_by_rep = {f"{d['backend']}/{d['representation']}": {
        "min_measured": d["min_measured"], "min_lower_bound": d["min_lower_bound"],
        "min_estimate": d["min_estimate"], "cost_ratio": d["cost_ratio"], "met": d["met"],
        "basis": d["basis"]} for d in result["dense_ratio"]}
    targets = {
        f"ESS step / floor at {fn}^2 (<= {TARGET_FLOOR})": {
            "value": floor_ratio,
            "met": None if floor_ratio is None else floor_ratio <= TARGET_FLOOR},
        f"ESS step speed-up 1 -> 2 threads at {cfg['threads_n']}^2 (>= {TARGET_THREADS})": {
            "value": speedup, "met": None if speedup is None else speedup >= TARGET_THREADS},
        f"hyperparameter ESS/s vs dense at {cfg['dense_n']}^2, per representation "
        f"(>= {TARGET_DENSE})": dense_by_rep,
    }

    # -- report ----------------------------------------------------------------------------------
    if result["mixing"]:
        print()
        print_mixing(result["mixing"])
    if result["equal_ratio"]:
        print("\nESS per sweep over dense's, equal sweeps (± rough SE from the chains' spread)")
        for e in result["equal_ratio"]:
            parts = " ".join(f"{k} {_f(e['ratio'][k], '.2f')}±{_f(e['se'][k], '.2f')}"
                             for k in HYPER)
            print(f"  {e['backend']:>9} {e['n']:>4}² {e['representation']:>12}: {parts}")
    if result["dense_ratio"]:
        print(f"\nhyperparameter ESS/s over dense at {cfg['dense_n']}² (same representation; "
              "'≥' = lower bound taking the dense ESS as its number of draws; est = s/sweep "
              "ratio × equal-sweeps ESS ratio)")
        for d in result["dense_ratio"]:
            m = " ".join(f"{k} {_f(d['measured'][k], '.3g')}" for k in HYPER)
            b = " ".join(f"{k} ≥{_f(d['lower_bound'][k], '.3g')}" for k in HYPER)
            est = " ".join(f"{k} {_f(d['estimate'][k], '.3g')}" for k in HYPER)
            print(f"  {d['backend']:>9} {d['representation']:>12}: s/sweep ratio "
                  f"{d['cost_ratio']:.0f} | measured {m} | {b} | est {est}")
    if result["ess_speed"]:
        print()
        print_ess(result["ess_speed"], "elliptical slice step (4 chains) vs floor")
    if result["threads"]:
        print()
        print_ess(result["threads"], "threads")

    import arviz
    import numba
    import pyfftw
    import scipy

    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "runtime_s": time.perf_counter() - t_start,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(), "loadavg_end": list(os.getloadavg())},
        "versions": {"numpy": np.__version__, "scipy": scipy.__version__,
                     "numba": numba.__version__, "pyfftw": pyfftw.__version__,
                     "arviz": arviz.__version__},
        "merged_from": previous.get("date") if previous else None,
        "settings": {"mode": mode, **{k: v for k, v in cfg.items() if k != "ess_repeats"},
                     "ess_repeats": {str(k): v for k, v in cfg["ess_repeats"].items()},
                     "sections": args.sections, "chains": N_CHAINS, "n_latent": N_LATENT,
                     "warmup_fraction": WARMUP,
                     "data": {"kernel": f"Matern nu={NU}", "sd": SD, "range": RANGE,
                              "expected_points_at_f0": POINTS, "true_mean": 0.0,
                              "seed": DATA_SEED},
                     "hyperpriors": {"sd": "PCPriorSD(1, 0.05)",
                                     "range": f"PCPriorRange(0.05, 0.05, 2, upper={UPPER})",
                                     "mean": "Normal(0, 3)"},
                     "priors": {"circulant": f"Matern nu={NU}, torus sized for range {UPPER} "
                                             f"(mixing) / {RANGE} (ess_speed, threads)",
                                "gmrf": f"Matern-SPDE alpha=2 (nu=1), spectral solver, padded "
                                        f"one range {UPPER} per side; site representations "
                                        "factor Q + Pi with CHOLMOD",
                                "dense": f"Matern nu={NU}, LAPACK Cholesky"},
                     "numba_threads_env": os.environ.get("NUMBA_NUM_THREADS"),
                     "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY")},
        "targets": targets,
        **result,
    }
    errors = [r for sec in SECTIONS for r in result[sec] if "error" in r]
    meta["errors"] = errors
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(_clean(meta), indent=2, allow_nan=False))
    print(f"\nwrote {out}  ({meta['runtime_s']:.0f} s)")
    print(f"  ESS/floor at {fn}²: {_f(floor_ratio, '.2f')} (target ≤ {TARGET_FLOOR})")
    print(f"  threads 1→2 at {cfg['threads_n']}²: {_f(speedup, '.2f')} "
          f"(target ≥ {TARGET_THREADS})")
    parts = []
    for k, v in dense_by_rep.items():
        if v["min_measured"] is not None:
            parts.append(f"{k} {_f(v['min_measured'], '.3g')}")
        elif v["min_estimate"] is not None:
            parts.append(f"{k} ≈{_f(v['min_estimate'], '.3g')} (est.; lower bound "
                         f"≥{_f(v['min_lower_bound'], '.3g')})")
        else:
            parts.append(f"{k} ≥{_f(v['min_lower_bound'], '.3g')}")
    print(f"  hyperparameter ESS/s vs dense at {cfg['dense_n']}² (min over sd, range, mean): "
          f"{', '.join(parts) or '-'} (target ≥ {TARGET_DENSE:g})")
    for r in errors:
        print(f"  ERROR {r.get('section', '')} {r.get('backend')} {r.get('n')} "
              f"{r.get('representation', '')}: {r['error']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
