r"""Gadd, Wade, Shah & Grammatopoulos: pseudo-marginal inference for supervised GPLVMs (§6).

Issue 31.  Reproduces §6.1 (the sinusoidal data) and adds a real data set:

* **Sinusoidal data** (§6.1, eq. 9): ``N = 30`` inputs evenly on [0, 4π], six features
  ``f_{n,i} = ζ_i cos(F_i x_n)`` (i ≤ 3) or ``ζ_i sin(F_i x_n)`` (i > 3), ``ζ_i ~ U(0, 1)``,
  noise ``N(0, 0.05²)``; three cases: ``F_i = 1``, ``F_i ~ U(0.8, 1.2)``,
  ``F_i ~ U(0.7, 1.3)``.  ``k_z = 2``; kernels as §6.1 (:mod:`lattice_lgm.gplvm.kernels`).
  The model runs through ``sample()`` (:class:`~lattice_lgm.gplvm.SupervisedGPLVM`): four
  chains of 1000 iterations, the first 250 burn-in, ``g₀ = 200``, the paper's two Gibbs
  blocks, chains started at the ML point plus noise, and — as the paper — the variational
  ``q`` re-optimised after each accepted block update (``refit="always"``); case 3 again,
  shorter (``FULL["check"]``), with the library's exact default ``refit="proposal"`` (``q``
  fitted at each proposal from the ML fit) for its cost and behaviour beside the paper's.
* **Figure 1**: the hyperparameter pairs ``(σ_1, β⁻¹)``, ``(θ_1, θ_2)``, ``(θ_S, β⁻¹)`` per
  case, the ML point marked with a cross (``gplvm_figure1.png``).
* **Table 1**: percentage errors of the binned predictive density of each feature — the
  normalised squared error ``100 Σ (p̂ − p)² / Σ p²`` over a grid of ``X_GRID`` test inputs on
  [0, 4π] × ``Y_BINS`` output bins — for the marginalised predictive (§5, from
  ``PRED_DRAWS`` posterior draws) and the maximum-likelihood one (type-II ML of the same
  variational model, ``Z`` from its ``q``), beside the paper's pairs.  The "true" density of
  feature ``i`` at ``x*`` averages ``N(y; ζ_i trig(F x*), 0.05²)`` over ``F ~ U(a, b)`` of the
  case (a point mass at 1 in case 1): the data-generating process with its frequency
  uncertain, which is how we read the paper's multi-modal "true" heat maps (its text does
  not define the reference; stated in the README).
* **Ionosphere** (the depression case study's data are not public): inputs ``IONO_INPUTS``,
  outputs ``IONO_OUTPUTS`` (standardised), all 351 cases, the library's default chain
  (correlated, one block, ``q`` fitted at each proposal: ~4 s an iteration at N = 351, so
  ``FULL["iono"]`` is shorter than the paper's protocol, with ``g₀`` to match) — to show the
  model runs beyond toys and whether it converges there; R-hat and ESS of ``ξ`` and of the
  carried ``log p̂`` (the extended chain's state, :func:`extended_diagnostics`) and the
  estimator's log-variance; beside it an independent data-augmentation reference on the
  same data (``FULL["iono_reference"]``, :func:`reference_row` with ``case = 0``).

* **Convergence** (cases ``FULL["converge_cases"]``): the library's default chain — the
  correlated pseudo-marginal move of the estimator's normals (``correlation = 0.99``,
  decision 123), ``q`` fitted at each proposal (``refit="proposal"``), chains started
  overdispersed around the type-II MAP by its Laplace approximation (decision 126), the
  Fisher–Laplace ``q_L`` from the fit's mean (decision 129) in the orbit mixture (decision
  128) — with one Gibbs block of all ``ξ`` (the paper's two blocks split the strongly
  correlated ``θ_S`` and ``θ_j``); the same chain with the variational ``q`` alone (tag
  ``cpm-joint``), with its orbit mixture (tag ``orbit``) and with ``q_L`` widened to the
  observed curvature (tag ``widened``, decision 131); on case 1 the default at ``ρ = 0.9``
  (tag ``rho-0.9``); at the paper's sizes, chains over ``workers`` Dask
  processes; their Table 1 errors; and their agreement with an independent reference, a
  long data-augmentation Gibbs chain on ``(ξ, Z)`` (:mod:`gplvm_reference`):
  quantiles of ``log ξ`` side by side and
  ``z = Δmean / √(MCSE² + MCSE_ref²)``.  ``--no-converge`` skips them.

Every case runs into its own zarr store under ``--out`` (a killed run resumes from its last
checkpoint); summaries are cached as JSON.  One BLAS thread.

Usage::

    python benchmarks/papers/gplvm.py            # -> results/gplvm.{json,md,png}
    python benchmarks/papers/gplvm.py --quick    # seconds, tiny sizes -> results/quick/
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for _p in (str(ROOT), str(HERE)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import _one_blas_thread  # noqa: E402, F401  (before numpy: see its docstring)
import numpy as np  # noqa: E402
from ess2010 import _machine, write_outputs  # noqa: E402
from gpds2009 import _cached  # noqa: E402
from gplvm_reference import augmented_chain  # noqa: E402

from lattice_lgm.gplvm.kernels import GPLVMHyper  # noqa: E402
from lattice_lgm.gplvm.model import ORBIT, SupervisedGPLVM  # noqa: E402
from lattice_lgm.runs import sample  # noqa: E402

RESULTS = HERE / "results"
DATA = ROOT / "data"
SEED = 2017
#: §6.1: inputs, features, noise sd; the three cases' ranges of F_i
N, K_Y, NOISE = 30, 6, 0.05
CASES = {1: (1.0, 1.0), 2: (0.8, 1.2), 3: (0.7, 1.3)}
#: the paper's Table 1 (marginalised %, ML %), features 1-5 as printed (its feature 6 row is
#: not in the text we have)
PAPER_TABLE1 = {1: [(14.543, 28.38), (12.136, 20.966), (14.529, 31.03), (10.067, 26.164),
                    (5.9431, 18.077)],
                2: [(29.014, 64.603), (17.182, 72.581), (12.116, 89.269), (15.159, 60.252),
                    (10.227, 86.005)],
                3: [(31.078, 100.17), (19.235, 106.04), (12.856, 94.032), (16.915, 85.664),
                    (12.358, 94.287)]}
#: Ionosphere: two continuous inputs and six outputs (columns of data/ionosphere.csv)
IONO_INPUTS = ["a03", "a04"]
IONO_OUTPUTS = ["a05", "a06", "a07", "a08", "a09", "a10"]
#: run sizes
FULL = {"n": N, "chains": 4, "iterations": 1000, "burn": 250, "g0": 200, "n_importance": 64,
        "pred_draws": 200, "x_grid": 60, "y_bins": 120, "check_case": 3,
        "check": {"chains": 2, "iterations": 300, "burn": 100},
        "iono": {"n": None, "chains": 4, "tune": 100, "draws": 200, "g0": 100},
        # ≈ 55 ms an iteration at N = 351: 18 minutes a chain alone
        "iono_reference": {"chains": 2, "iterations": 20000, "burn": 5000, "thin": 10},
        "converge_cases": [1, 3], "correlation": 0.99, "workers": 2,
        "reference": {"chains": 4, "iterations": 40000, "burn": 5000, "thin": 10}}
QUICK = {"n": 10, "chains": 2, "iterations": 6, "burn": 3, "g0": 2, "n_importance": 4,
         "pred_draws": 4, "x_grid": 6, "y_bins": 20, "check_case": 3,
         "check": {"chains": 2, "iterations": 6, "burn": 3},
         "iono": {"n": 12, "chains": 2, "tune": 2, "draws": 2, "g0": 2},
         "iono_reference": {"chains": 2, "iterations": 40, "burn": 20, "thin": 2},
         "converge_cases": [1], "correlation": 0.99, "workers": None,
         "reference": {"chains": 2, "iterations": 60, "burn": 30, "thin": 3}}
#: the rows of the convergence comparison: (tag, correlated, one joint block, orbit K,
#: importance, ρ (None: ``cfg["correlation"]``), cases (None: all)) — the correlated chain
#: with the variational q alone, with its orbit mixture (decision 128), the default (the
#: Fisher–Laplace q_L in the orbit mixture, decision 129), q_L's curvature widened
#: to the observed (decision 131) and, on case 1, the default at ρ = 0.9
CONVERGE = (("cpm-joint", True, True, 0, "vb", None, None),
            ("orbit", True, True, ORBIT, "vb", None, None),
            ("default", True, True, ORBIT, "laplace", None, None),
            ("widened", True, True, ORBIT, "widened", None, None),
            ("rho-0.9", True, True, ORBIT, "laplace", 0.9, (1,)))


# -- data ------------------------------------------------------------------------------------
def sinusoids(case: int, n: int = N) -> dict[str, Any]:
    """§6.1's data for ``case``: x (n,), y (n, 6), with ζ (6,) and F (n, 6) (eq. 9).

    ``F`` is drawn per observation and feature: the "poorly-specified" cases (a GP with
    Gaussian noise cannot describe a frequency that varies from point to point; a frequency
    fixed per feature would be a well-specified model again) whose "true" predictive density
    is multi-modal, as the paper's Figure 2 shows.
    """
    rng = np.random.default_rng([SEED, case])
    x = np.linspace(0.0, 4.0 * np.pi, n)
    zeta = rng.uniform(0.0, 1.0, K_Y)
    lo, hi = CASES[case]
    freq = rng.uniform(lo, hi, (n, K_Y)) if hi > lo else np.full((n, K_Y), lo)
    f = np.stack([zeta[i] * (np.cos if i < 3 else np.sin)(freq[:, i] * x) for i in range(K_Y)],
                 axis=1)
    return {"x": x, "y": f + NOISE * rng.standard_normal(f.shape), "zeta": zeta, "F": freq}


def true_density(data: dict, case: int, xs: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """The reference density (module docstring), shape (len(xs), len(grid), 6)."""
    lo, hi = CASES[case]
    fs = np.array([lo]) if hi == lo else lo + (hi - lo) * (np.arange(400) + 0.5) / 400
    out = np.zeros((len(xs), len(grid), K_Y))
    for i in range(K_Y):
        trig = np.cos if i < 3 else np.sin
        mean = data["zeta"][i] * trig(fs[None, :] * xs[:, None])            # (X, F)
        r = (grid[None, :, None] - mean[:, None, :]) / NOISE                  # (X, G, F)
        out[:, :, i] = np.exp(-0.5 * r * r).mean(axis=2) / (NOISE * np.sqrt(2 * np.pi))
    return out


def percentage_error(p_hat: np.ndarray, p: np.ndarray) -> list[float]:
    """``100 Σ (p̂ − p)² / Σ p²`` per feature over the (x*, y) bins."""
    return [float(100 * np.sum((p_hat[..., i] - p[..., i]) ** 2) / np.sum(p[..., i] ** 2))
            for i in range(p.shape[-1])]


# -- runs ------------------------------------------------------------------------------------
def run_store(model: SupervisedGPLVM, path: Path, **run: Any) -> Any:
    """``sample()`` into ``path``, resuming a store a killed run left."""
    return sample(model, store=path, resume=path.exists(), progressbar=False, **run)


def diagnostics(post: Any, names: Sequence[str]) -> dict[str, Any]:
    """R-hat, bulk and tail ESS of every hyperparameter (ArviZ)."""
    import arviz as az

    out = {}
    for k in names:
        v = np.log(post[k].values)
        out[k] = {"rhat": _num(az.rhat(v)), "ess_bulk": _num(az.ess(v, method="bulk")),
                  "ess_tail": _num(az.ess(v, method="tail")),
                  "median": float(np.exp(np.median(v)))}
    return out


def extended_diagnostics(stats: Any) -> dict[str, float | None]:
    """R-hat and bulk ESS of the carried ``log p̂``.

    The pseudo-marginal chain's state is ``(ξ, u)``: chains whose normals ``u`` have not mixed
    can agree on ``ξ`` while their ``log p̂`` — and with it the weight they give each ``ξ`` —
    do not (decision 128).
    """
    import arviz as az

    v = np.asarray(stats["log_p_hat"].values, dtype=float)
    return {"rhat": _num(az.rhat(v)), "ess_bulk": _num(az.ess(v, method="bulk"))}


def _num(v: Any) -> float | None:
    """A JSON number, or None where ArviZ could not say (too few draws)."""
    v = float(v)
    return v if np.isfinite(v) else None


def _g(v: float | None) -> str:
    return "—" if v is None else f"{v:.3g}"


def _ext(d: Any, key: str, fn: Any) -> str:
    vals = [v[key] for v in d if v[key] is not None]
    return f"{fn(vals):.3g}" if vals else "—"


def _draws(model: SupervisedGPLVM, post: Any, n: int) -> tuple[list[GPLVMHyper], np.ndarray]:
    """``n`` posterior draws ``(ξ, Z)`` evenly over chains and draws."""
    xi = np.stack([post[k].values for k in model.names], axis=-1)        # (C, D, d)
    z = post["f"].values.astype(float)                                   # (C, D, N, k_z)
    flat_xi, flat_z = xi.reshape(-1, xi.shape[-1]), z.reshape(-1, *z.shape[2:])
    idx = np.linspace(0, len(flat_xi) - 1, min(n, len(flat_xi))).astype(int)
    return [model.hyper_of(np.log(flat_xi[i])) for i in idx], flat_z[idx]


def case_row(case: int, cfg: dict, out: Path, refit: str, tag: str | None = None,
             correlated: bool = False, joint: bool = False,
             orbit: int = ORBIT, importance: str = "laplace",
             correlation: float | None = None) -> dict[str, Any]:
    """One case: the run, its diagnostics, the predictive errors against ML's.

    The paper's rows draw a fresh estimate per proposal (``correlation=0``, Algorithm 2 as
    printed).  The check row (``refit="proposal"``) runs at ``cfg["check"]``'s smaller size: a
    fit per proposal costs ~0.7 s per iteration and chain.  ``correlated``: the library's
    default correlated pseudo-marginal chain (``correlation=cfg["correlation"]``) at the full
    protocol, chains over ``cfg["workers"]`` processes; ``joint``: one Gibbs block of all ξ;
    ``orbit``, ``importance``: the correlated chain's importance distribution (the paper's
    rows use its variational ``q`` alone); ``correlation``: its ρ (default
    ``cfg["correlation"]``).
    """
    if refit == "proposal" and not correlated:
        cfg = {**cfg, **cfg["check"]}
    data = sinusoids(case, cfg["n"])
    model = SupervisedGPLVM(data["x"], data["y"], latent_dim=2, refit=refit,
                            n_importance=cfg["n_importance"], g0=cfg["g0"],
                            correlation=((cfg["correlation"] if correlation is None
                                          else correlation) if correlated else 0.0),
                            blocks="joint" if joint else "paper",
                            start="map" if correlated else "ml",
                            orbit=orbit if correlated else 0,  # the paper's: q alone
                            importance=importance if correlated else "vb")
    t0 = time.perf_counter()
    ml = model.ml_fit()
    t_ml = time.perf_counter() - t0
    start = {"start": model.start}
    if correlated:  # the default start: once, before the chains go to the workers
        t0 = time.perf_counter()
        mode, cov = model.laplace()
        start |= {"seconds_start": time.perf_counter() - t0, "laplace_mode": mode.tolist(),
                  "laplace_sd": np.sqrt(np.diag(cov)).tolist()}
    t0 = time.perf_counter()
    tag = tag or refit
    tree = run_store(model, out / f"case{case}-{tag}.zarr", chains=cfg["chains"],
                     tune=cfg["burn"], draws=cfg["iterations"] - cfg["burn"],
                     random_seed=SEED + case,
                     **({"dask_workers": cfg["workers"]} if correlated and cfg["workers"]
                        else {}))
    t_run = time.perf_counter() - t0
    post, stats = tree["posterior"], tree["sample_stats"]
    xs = np.linspace(0.0, 4.0 * np.pi, cfg["x_grid"])
    grid = np.linspace(-1.6, 1.6, cfg["y_bins"])
    p_true = true_density(data, case, xs, grid)
    rng = np.random.default_rng([SEED, case, 5])
    hypers, zs = _draws(model, post, cfg["pred_draws"])
    p_marg = model.predictive(hypers, zs, xs, grid, rng).density
    z_ml = ml.sample(rng, cfg["pred_draws"])
    p_ml = model.predictive([ml.hyper] * len(z_ml), z_ml, xs, grid, rng).density
    # the fraction of block updates accepted (``accepted`` counts the blocks accepted per sweep)
    acc = {"accepted": float(stats["accepted"].values.mean()) / len(model.blocks)}
    xi = {k: post[k].values.ravel().tolist() for k in model.names}
    return {"case": case, "refit": refit, "tag": tag, "correlation": model.correlation,
            "blocks": model.block_names, "zeta": data["zeta"].tolist(), **start,
            "ml": dict(zip(model.names, ml.hyper.to_vector().tolist(), strict=True)),
            "ml_bound": ml.bound, "seconds_ml": t_ml, "seconds_run": t_run,
            "diagnostics": diagnostics(post, model.names),
            "log_p_hat": extended_diagnostics(stats), "orbit": model.orbit,
            "importance": model.importance,
            "is_log_var_mean": _num(np.nanmean(stats["is_log_var"].values)),
            "vb_refits_per_iteration": float(stats["n_refit"].values.mean()), **acc,
            "error_marginal": percentage_error(p_marg, p_true),
            "error_ml": percentage_error(p_ml, p_true), "draws": xi, "chains": cfg["chains"]}


def ionosphere_model(cfg: dict) -> SupervisedGPLVM:
    """Ionosphere's GPLVM (module docstring): all cases, or ``cfg["n"]`` drawn with ``SEED``."""
    import pandas as pd

    tab = pd.read_csv(DATA / "ionosphere.csv")
    if cfg["n"] is not None:
        tab = tab.iloc[np.sort(np.random.default_rng(SEED).choice(len(tab), cfg["n"],
                                                                  replace=False))]
    return SupervisedGPLVM(tab[IONO_INPUTS].to_numpy(), tab[IONO_OUTPUTS].to_numpy(),
                           latent_dim=2, standardise=True, g0=cfg["g0"])


def ionosphere_row(cfg: dict, out: Path, workers: int | None = None) -> dict[str, Any]:
    """The real-data run with the library's default chain (module docstring)."""
    model = ionosphere_model(cfg)
    model.laplace()  # the chains' start: once, before the chains go to the workers
    t0 = time.perf_counter()
    tree = run_store(model, out / "ionosphere-default.zarr", chains=cfg["chains"],
                     tune=cfg["tune"], draws=cfg["draws"], random_seed=SEED,
                     dask_workers=workers)
    post, stats = tree["posterior"], tree["sample_stats"]
    return {"n": model.n, "inputs": IONO_INPUTS, "outputs": IONO_OUTPUTS,
            "seconds": time.perf_counter() - t0, "ml": dict(zip(
                model.names, model.ml_fit().hyper.to_vector().tolist(), strict=True)),
            "diagnostics": diagnostics(post, model.names),
            "log_p_hat": extended_diagnostics(stats), "orbit": model.orbit,
            "importance": model.importance,
            "is_log_var_mean": _num(np.nanmean(stats["is_log_var"].values)),
            "accepted": float(stats["accepted"].values.mean()) / len(model.blocks)}


def reference_row(case: int, cfg: dict) -> dict[str, Any]:
    """The data-augmentation reference posterior of ``ξ`` (:mod:`gplvm_reference`).

    ``case`` 1–3 of §6.1, or 0 for Ionosphere (``cfg["iono"]``, ``cfg["iono_reference"]``;
    seeds ``[SEED, N, 7, c]``).
    """
    from concurrent.futures import ProcessPoolExecutor

    if case:
        rc = cfg["reference"]
        data = sinusoids(case, cfg["n"])
        model = SupervisedGPLVM(data["x"], data["y"], latent_dim=2, g0=cfg["g0"])
    else:
        rc = cfg["iono_reference"]
        model = ionosphere_model(cfg["iono"])
    model.laplace()  # the chains start as the default pseudo-marginal chains do
    seeds = [[SEED, case or model.n, 7, c] for c in range(rc["chains"])]
    args = ([model] * len(seeds), seeds, *([rc[k]] * len(seeds)
                                           for k in ("iterations", "burn", "thin")))
    t0 = time.perf_counter()
    if cfg["workers"]:
        with ProcessPoolExecutor(cfg["workers"]) as ex:
            res = list(ex.map(augmented_chain, *args))
    else:
        res = [augmented_chain(*a) for a in zip(*args, strict=True)]
    eta = np.stack([r[0] for r in res])                                  # (C, D, d)
    # what diagnostics() reads of a DataArray: .values
    post = {k: SimpleNamespace(values=np.exp(eta[:, :, i])) for i, k in enumerate(model.names)}
    return {"case": case, "seconds": time.perf_counter() - t0, **rc,
            "acceptance": [r[1].tolist() for r in res],
            "diagnostics": diagnostics(post, model.names),
            "summary": {k: _summary(eta[:, :, i]) for i, k in enumerate(model.names)}}


def _summary(v: np.ndarray) -> dict[str, float]:
    """Mean, sd, MCSE of the mean (ArviZ) and 5/50/95 % quantiles of ``log ξ`` (chains, draws)."""
    import arviz as az

    return {"mean": float(v.mean()), "sd": float(v.std()), "mcse": float(np.ravel(az.mcse(v))[0]),
            "q05": float(np.quantile(v, 0.05)), "q50": float(np.quantile(v, 0.5)),
            "q95": float(np.quantile(v, 0.95))}


def agreement(row: dict[str, Any], ref: dict[str, Any]) -> dict[str, float | None]:
    """Per hyperparameter, ``z = (mean − mean_ref) / √(MCSE² + MCSE_ref²)`` of ``log ξ``."""
    out = {}
    for k, r in ref["summary"].items():
        v = np.log(np.asarray(row["draws"][k])).reshape(row["chains"], -1)
        mine = _summary(v)
        out[k] = _num((mine["mean"] - r["mean"]) / np.hypot(mine["mcse"], r["mcse"]))
    return out


# -- report ----------------------------------------------------------------------------------
def markdown(res: dict[str, Any]) -> str:
    lines = [f"# Supervised GPLVM, pseudo-marginal (Gadd et al. §6) — {res['mode']} run", ""]
    lines += ["## Table 1: percentage error of the binned predictive density",
              "(marginalised %, ML %) per feature; ours beside the paper's (features 1–5).", "",
              "| feature | " + " | ".join(f"case {c} ours | case {c} paper" for c in CASES)
              + " |", "|---|" + "---|---|" * len(CASES)]
    rows = {r["case"]: r for r in res["cases"] if r["refit"] == "always"}
    for i in range(K_Y):
        cells = []
        for c in CASES:
            r = rows.get(c)
            ours = (f"({r['error_marginal'][i]:.1f}, {r['error_ml'][i]:.1f})" if r else "—")
            paper = PAPER_TABLE1[c][i] if i < len(PAPER_TABLE1[c]) else None
            cells += [ours, f"({paper[0]:.1f}, {paper[1]:.1f})" if paper else "—"]
        lines.append(f"| {i + 1} | " + " | ".join(cells) + " |")
    lines += ["", "## Convergence of ξ (log scale): max R-hat, min bulk / tail ESS", "",
              "| run | max R-hat | min bulk ESS | min tail ESS | log p̂: R-hat, bulk ESS | "
              "accept | Var(log p̂) | re-fits / it | run s |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in res["cases"]:
        d = list(r["diagnostics"].values())
        how = (f"refit {r['refit']}" if not r.get("correlation") else
               f"correlated ρ = {r['correlation']}, blocks {' / '.join(r['blocks'])}, "
               f"{r.get('importance', 'vb')} q, orbit K = {r.get('orbit', 0)}")
        lp = r.get("log_p_hat") or {"rhat": None, "ess_bulk": None}
        lines.append(f"| case {r['case']}, {how} | {_ext(d, 'rhat', max)} | "
                     f"{_ext(d, 'ess_bulk', min)} | {_ext(d, 'ess_tail', min)} | "
                     f"{_g(lp['rhat'])}, {_g(lp['ess_bulk'])} | {r['accepted']:.2f} | "
                     f"{_g(r['is_log_var_mean'])} | "
                     f"{r['vb_refits_per_iteration']:.2f} | {r['seconds_run']:.0f} |")
    conv = [r for r in res["cases"] if r.get("correlation")]
    if conv:
        lines += ["", "## Table 1 again, from the correlated chains", "",
                  "(marginalised %, ML %) per feature; ML is the same fit as above.", "",
                  "| feature | " + " | ".join(f"case {r['case']} {r['tag']}" for r in conv)
                  + " |", "|---|" + "---|" * len(conv)]
        for i in range(K_Y):
            lines.append(f"| {i + 1} | " + " | ".join(
                f"({r['error_marginal'][i]:.1f}, {r['error_ml'][i]:.1f})" for r in conv) + " |")
    for cv in res.get("converge", []):
        ref = cv["reference"]
        d = list(ref["diagnostics"].values())
        lines += ["", f"## Case {cv['case']}: agreement with a data-augmentation reference", "",
                  f"Reference: {ref['chains']} Gibbs chains on (ξ, Z) × {ref['iterations']} "
                  f"iterations ({ref['burn']} burn-in, thinned {ref['thin']}); max R-hat "
                  f"{_ext(d, 'rhat', max)}, min bulk ESS {_ext(d, 'ess_bulk', min)}, "
                  f"{ref['seconds']:.0f} s.  z = difference of the posterior means of log ξ "
                  "over its Monte Carlo standard error (both chains').", "",
                  "| log ξ | reference 5/50/95 % | " + " | ".join(
                      f"{r['tag']} 5/50/95 % | z" for r in cv["rows"]) + " |",
                  "|---|---|" + "---|---|" * len(cv["rows"])]
        by_tag = {r.get("tag"): r for r in res["cases"] if r["case"] == cv["case"]}
        for k, sref in ref["summary"].items():
            cells = [f"{sref['q05']:.2f} / {sref['q50']:.2f} / {sref['q95']:.2f}"]
            for a in cv["rows"]:
                v = np.log(np.asarray(by_tag[a["tag"]]["draws"][k]))
                q = np.quantile(v, [0.05, 0.5, 0.95])
                cells += [f"{q[0]:.2f} / {q[1]:.2f} / {q[2]:.2f}", _g(a["agreement"][k])]
            lines.append(f"| {k} | " + " | ".join(cells) + " |")
    io = res.get("ionosphere")
    if io:
        d = list(io["diagnostics"].values())
        lines += ["", f"## Ionosphere (N = {io['n']}, inputs {io['inputs']}, outputs "
                  f"{io['outputs']})", "",
                  f"max R-hat {_ext(d, 'rhat', max)}, min bulk ESS {_ext(d, 'ess_bulk', min)}"
                  f", min tail ESS {_ext(d, 'ess_tail', min)}; log p̂: R-hat "
                  f"{_g((io.get('log_p_hat') or {}).get('rhat'))}, bulk ESS "
                  f"{_g((io.get('log_p_hat') or {}).get('ess_bulk'))}; "
                  f"{io.get('importance', 'vb')} q, orbit K = "
                  f"{io.get('orbit', 0)}; Var(log p̂) "
                  f"{_g(io['is_log_var_mean'])}, acceptance {io['accepted']:.2f}, "
                  f"{io['seconds']:.0f} s"]
    ref = res.get("ionosphere_reference")
    if io and ref:
        d = list(ref["diagnostics"].values())
        lines += ["", f"Data-augmentation reference: {ref['chains']} chains × "
                  f"{ref['iterations']} iterations ({ref['burn']} burn-in, thinned "
                  f"{ref['thin']}); max R-hat {_ext(d, 'rhat', max)}, min bulk ESS "
                  f"{_ext(d, 'ess_bulk', min)}, {ref['seconds']:.0f} s.", "",
                  "| log ξ | reference 5/50/95 % | R-hat | pseudo-marginal median |",
                  "|---|---|---|---|"]
        for k, s in ref["summary"].items():
            med = io["diagnostics"][k].get("median")
            lines.append(f"| {k} | {s['q05']:.2f} / {s['q50']:.2f} / {s['q95']:.2f} | "
                         f"{_g(ref['diagnostics'][k]['rhat'])} | "
                         f"{'' if med is None else f'{np.log(med):.2f}'} |")
    return "\n".join(lines) + "\n"


def plot(res: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in res["cases"] if r["refit"] == "always"]
    fig, axes = plt.subplots(len(rows), 3, figsize=(11, 3.3 * len(rows)), squeeze=False)
    pairs = [("sigma_1", "inv_beta"), ("theta_1", "theta_2"), ("theta_s", "inv_beta")]
    for row, r in zip(axes, rows, strict=True):
        d = {k: np.asarray(v) for k, v in r["draws"].items()}
        d["inv_beta"] = 1.0 / d["noise_precision"]
        ml = dict(r["ml"], inv_beta=1.0 / r["ml"]["noise_precision"])
        for ax, (a, b) in zip(row, pairs, strict=True):
            ax.scatter(d[a], d[b], s=2, alpha=0.3)
            ax.plot(ml[a], ml[b], "rx", ms=10, mew=2, label="ML")
            ax.set_xlabel(a.replace("inv_beta", "1/β"))
            ax.set_ylabel(b.replace("inv_beta", "1/β"))
            ax.set_title(f"case {r['case']}")
        row[0].legend(loc="best", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the experiment (``--quick``: the pipeline at tiny sizes); see the module doc."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes (seconds)")
    ap.add_argument("--out", type=Path, default=None,
                    help="results dir (default results/quick/ with --quick, else results/)")
    ap.add_argument("--cases", type=int, nargs="+", default=list(CASES))
    ap.add_argument("--no-ionosphere", action="store_true")
    ap.add_argument("--no-converge", action="store_true",
                    help="skip the correlated chains and the data-augmentation reference")
    args = ap.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    out = args.out or (RESULTS / "quick" if args.quick else RESULTS)
    runs = out / "gplvm_runs"
    runs.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    res: dict[str, Any] = {"mode": "quick" if args.quick else "full", "config": cfg,
                           "machine": _machine(), "cases": []}
    def cases(todo: list[tuple[int, str]]) -> None:
        for case, refit in todo:
            res["cases"].append(_cached(runs / f"case{case}-{refit}.json", case_row, case, cfg,
                                        runs, refit))
            print(f"[gplvm] case {case} refit {refit} done", flush=True)

    cases([(c, "always") for c in args.cases])
    if not args.no_ionosphere:
        res["ionosphere"] = _cached(runs / "ionosphere-default.json", ionosphere_row,
                                    cfg["iono"], runs, cfg["workers"])
        res["ionosphere_reference"] = _cached(runs / "ionosphere-reference.json",
                                              reference_row, 0, cfg)
    if cfg["check_case"] in args.cases:  # the exact default policy against the paper's
        cases([(cfg["check_case"], "proposal")])
    res["converge"] = []
    for case in ([] if args.no_converge else
                 [c for c in cfg["converge_cases"] if c in args.cases]):
        ref = _cached(runs / f"case{case}-reference.json", reference_row, case, cfg)
        rows = []
        for tag, correlated, joint, orbit, importance, rho, only in CONVERGE:
            if only is not None and case not in only:
                continue
            row = _cached(runs / f"case{case}-{tag}.json", case_row, case, cfg, runs,
                          "proposal", tag, correlated, joint, orbit, importance, rho)
            res["cases"].append(row)
            rows.append({"tag": tag, "agreement": agreement(row, ref)})
            print(f"[gplvm] case {case} {tag} done", flush=True)
        res["converge"].append({"case": case, "reference": ref, "rows": rows})
    res["seconds_total"] = time.perf_counter() - t0
    write_outputs(out, "gplvm", res, markdown(res), lambda p: plot(res, p))
    return 0


if __name__ == "__main__":
    sys.exit(main())
