r"""Adams, Murray & MacKay (2009), the Gaussian Process Density Sampler: reproductions.

Issue 29. **Figure 1**, four densities drawn from the GPDS prior
with 200 exact samples each (Algorithm 1, :func:`lattice_lgm.gpds.sample_prior`). As the
paper: base measure ``N(0, I₂)``, squared-exponential kernel
``K(x, x′) = α exp(−½ Σ_i ℓ_i⁻² (x_i − x′_i)²)``, logistic ``Φ``, with (ℓx, ℓy, α) =
(1, 1, 1), (1, 1, 10), (0.2, 0.2, 5), (0.1, 2, 5). The contours are ``Φ(ĝ) π`` with ``ĝ`` the
GP's mean given the sampled history (the paper: "the approximate unnormalized densities").
Each panel reports its proposals (accepted + rejected), which estimate ``1/Z_π[g]``.

§5's **toy ring** (100 training and 50 test points uniform on a circle of radius 1.5 with
N(0, 0.2²) noise; data seed ``(RING_SEED, k)``) and, in place of the macaque skulls (not
public), the **Japanese pines** (random 50 / 15 splits): mean test log probability per split of
the GPDS by the paper's sampler (``dense``, the proposal-count predictive density; on the
first ``DENSE_SEEDS`` splits, its cost; ``dense, warm`` from a lattice state on the first
``DENSE_WARM_SEEDS``), by the lattice sampler (``lattice``: ``LATTICE_CHAINS`` chains per split
through ``sample()``, R-hat and the delta-method error from the store), scikit-learn's
Dirichlet-process Gaussian mixture (for the paper's iMoG), Parzen windows (ten-fold CV
bandwidth) and, on the ring, the true density; Figure 5 as improvements over Parzen
(``gpds2009_figure5.png``).  Every split's result is cached under ``--out``/ring and /pines:
a killed run resumes where it stopped.

Usage::

    python benchmarks/papers/gpds2009.py            # 200 samples per panel -> results/
    python benchmarks/papers/gpds2009.py --quick    # 40 samples, coarse grid -> results/quick/
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from scipy import special

from lattice_lgm.covariance import SquaredExponential
from lattice_lgm.gpds import GaussianBase, UniformBase, conditional_mean, sample_prior
from lattice_lgm.gpds.lattice import REJECTIONS, LatticeGPDS, LatticeSweep
from lattice_lgm.gpds.lattice import predictive_density as lattice_predictive
from lattice_lgm.gpds.predict import count_estimate, run_chain
from lattice_lgm.gpds.warm import lattice_history
from lattice_lgm.hyperpriors import LogNormal

RESULTS = Path(__file__).resolve().parent / "results"
SEED = 20091
#: Figure 1's panels: (ℓx, ℓy, α)
PANELS = ((1.0, 1.0, 1.0), (1.0, 1.0, 10.0), (0.2, 0.2, 5.0), (0.1, 2.0, 5.0))
#: §5's toy ring: radius, noise sd, training and test sizes; data seeds (RING_SEED, k)
RING_RADIUS, RING_NOISE, N_TRAIN, N_TEST, RING_SEED, N_SEEDS = 1.5, 0.2, 100, 50, 2009, 10
#: the paper's Parzen-window mean test log probability on the ring (§5, Figure 5's baseline)
PAPER_PARZEN = -2.253
#: the GPDS on the ring: base N(mean, (BASE_SCALE · sd)² I) of the training data; log-normal
#: priors (mu, sigma[, upper]) of the kernel's sd and range (= 2 lengthscale)
BASE_SCALE, PRIOR_SD, PRIOR_RANGE = 1.5, (np.log(2.0), 0.5), (np.log(1.0), 0.5, 4.0)
#: the dense sampler's run (sweeps kept, burn-in, thinning before the count estimator)
DENSE_SWEEPS, DENSE_BURN, DENSE_THIN = 500, 150, 2
#: §4.1 count moves per sweep (M changes by at most 3 per move: one per sweep left M far
#: from its posterior after 650 sweeps on the ring), and the seeds the dense path runs on
#: (its sweeps cost ~0.3–1 s here: all ten seeds of both data sets did not fit a session)
DENSE_COUNT_MOVES, DENSE_SEEDS = 10, {"ring": 1, "pines": 2}
#: the lattice sampler's cells per axis for the dense sampler's warm start
LATTICE_FINE = 128
#: the dense sampler warm-started from a lattice state (``gpds.warm``): the lattice's sweeps
#: before the start (LATTICE_FINE cells, its default scale augmentation), then the dense
#: sweeps kept, burn-in and thinning; on the first DENSE_WARM_SEEDS splits.  From the cold
#: start the dense chain had not left sd ≈ 4.5, M ≈ 210 after 650 sweeps on ring seed 0, where
#: the posterior is at sd ≈ 11, M ≈ 330 (README, GPDS section): M moves a few at a time
DENSE_WARM_LATTICE, DENSE_WARM, DENSE_WARM_SEEDS = 300, (4000, 100, 2), {"ring": 6, "pines": 0}
#: the lattice sampler per data set: (draws per chain, tuning sweeps, cells per axis), its
#: chains per split (``sample()``, the default sweep), and the ring's resolution check on
#: its first split: (cells per axis, draws per chain).  The ring's lattice covers ±4 base
#: sd: 128² cells are ≈ 0.1 wide, half the ring's noise sd; at 64² (≈ 0.2) chains split
#: between the ring and a smooth mode (range ≈ 3, ``M`` ≈ 100; README).  A sweep costs
#: ~0.07 s at 128² on the ring and ~0.09 s at 64² on the pines (this machine, loaded)
LATTICE = {"ring": (1000, 200, 128), "pines": (500, 100, 64)}
LATTICE_CHAINS, LATTICE_CHECK = 4, {"ring": (64, 2000)}
#: the real data set (the macaque skulls are not public): Japanese black pines, a random
#: 50 / 15 split per seed (PINES_SEED, k); uniform base on the unit square; priors as above
PINES = Path(__file__).resolve().parents[2] / "data" / "japanesepines.csv"
PINES_SEED, PINES_TRAIN = 1961, 50
PINES_PRIOR_SD, PINES_PRIOR_RANGE = (0.0, 0.5), (np.log(0.3), 0.5, 1.0)
#: truncation level of the variational Dirichlet-process mixture
DP_COMPONENTS = 20
#: bandwidths tried by the ten-fold cross-validation
BANDWIDTHS = np.exp(np.linspace(np.log(0.02), np.log(2.0), 60))


def ring(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """§5's toy data: uniform on a circle of radius 1.5 plus N(0, 0.2²) noise; (train, test)."""
    rng = np.random.default_rng([RING_SEED, seed])
    n = N_TRAIN + N_TEST
    t = rng.uniform(0.0, 2 * np.pi, n)
    x = RING_RADIUS * np.column_stack([np.cos(t), np.sin(t)]) + RING_NOISE * rng.standard_normal(
        (n, 2))
    return x[:N_TRAIN], x[N_TRAIN:]


def parzen_logpdf(train: np.ndarray, test: np.ndarray, h: float) -> np.ndarray:
    """Log density of a spherical Gaussian kernel density estimate at ``test``."""
    d2 = np.sum((test[:, None, :] - train[None, :, :]) ** 2, axis=-1)
    dim = train.shape[1]
    log_k = -0.5 * d2 / h**2 - dim * np.log(h) - 0.5 * dim * np.log(2 * np.pi)
    return special.logsumexp(log_k, axis=1) - np.log(len(train))


def parzen_bandwidth(train: np.ndarray, folds: int = 10) -> float:
    """The bandwidth maximising the ten-fold cross-validated log likelihood (a grid)."""
    idx = np.arange(len(train)) % folds
    scores = [sum(parzen_logpdf(train[idx != f], train[idx == f], h).sum()
                  for f in range(folds)) for h in BANDWIDTHS]
    return float(BANDWIDTHS[int(np.argmax(scores))])


def ring_parzen(n_seeds: int) -> dict:
    """Parzen windows on the ring: mean test log probability per seed, mean and SE."""
    per = []
    for k in range(n_seeds):
        train, test = ring(k)
        h = parzen_bandwidth(train)
        per.append({"seed": k, "bandwidth": h,
                    "mean_test_logp": float(parzen_logpdf(train, test, h).mean())})
    v = np.array([p["mean_test_logp"] for p in per])
    return {"per_seed": per, "per_seed_logp": [float(x) for x in v], "mean": float(v.mean()),
            "se": float(v.std(ddof=1) / np.sqrt(len(v))) if len(v) > 1 else None,
            "paper": PAPER_PARZEN}


def ring_logpdf(x: np.ndarray, n_angles: int = 2048) -> np.ndarray:
    """The true density of the ring data: ``∫ N(x; 1.5 (cos t, sin t), 0.2² I) dt / 2π``.

    (Quadrature over ``t`` on ``n_angles`` points: periodic and smooth, so the rule is
    spectrally accurate.)  Its mean test log probability is the best any method can expect.
    """
    t = np.linspace(0.0, 2 * np.pi, n_angles, endpoint=False)
    c = RING_RADIUS * np.column_stack([np.cos(t), np.sin(t)])
    d2 = np.sum((x[:, None, :] - c[None]) ** 2, axis=-1)
    log_k = -0.5 * d2 / RING_NOISE**2 - np.log(2 * np.pi * RING_NOISE**2)
    return special.logsumexp(log_k, axis=1) - np.log(n_angles)


def ring_oracle(n_seeds: int) -> dict:
    """The true density's mean test log probability per seed (the ceiling of Figure 5)."""
    return _mean_se([{"mean_test_logp": float(ring_logpdf(ring(k)[1]).mean())}
                     for k in range(n_seeds)])


def ring_base(train: np.ndarray) -> GaussianBase:
    """The ring's base measure: ``N(mean(train), (BASE_SCALE · max sd(train))² I)``."""
    return GaussianBase.create(train.mean(axis=0), (BASE_SCALE * float(train.std(axis=0).max()))
                               ** 2)


def ring_hyperpriors() -> dict:
    """Priors of the kernel's ``sd`` and ``range`` (``= 2 ℓ``), both paths."""
    return {"sd": LogNormal(*PRIOR_SD), "range": LogNormal(*PRIOR_RANGE)}


def ring_kernel() -> SquaredExponential:
    """The starting θ: the priors' medians."""
    return SquaredExponential(sd=float(np.exp(PRIOR_SD[0])),
                              lengthscale=float(np.exp(PRIOR_RANGE[0])) / 2.0)


def pines(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Japanese black pines (65 saplings, unit square): a random 50 / 15 split per seed."""
    pts = np.loadtxt(PINES, delimiter=",", skiprows=1)
    idx = np.random.default_rng([PINES_SEED, seed]).permutation(len(pts))
    return pts[idx[:PINES_TRAIN]], pts[idx[PINES_TRAIN:]]


def pines_hyperpriors() -> dict:
    """Priors of the kernel's ``sd`` and ``range`` on the unit square (both paths)."""
    return {"sd": LogNormal(*PINES_PRIOR_SD), "range": LogNormal(*PINES_PRIOR_RANGE)}


def _setting(name: str, train: np.ndarray) -> tuple:
    """(base measure, hyperpriors, starting kernel) of data set ``name``."""
    if name == "ring":
        return ring_base(train), ring_hyperpriors(), ring_kernel()
    sd, rng_ = float(np.exp(PINES_PRIOR_SD[0])), float(np.exp(PINES_PRIOR_RANGE[0]))
    return (UniformBase.create([0.0, 0.0], [1.0, 1.0]), pines_hyperpriors(),
            SquaredExponential(sd=sd, lengthscale=rng_ / 2.0))


DATASETS = {"ring": ring, "pines": pines}


def ring_dense(seed: int, n_sweeps: int, burn: int, thin: int, name: str = "ring",
               warm: tuple[int, int] | None = None) -> dict:
    """The paper's sampler on one data set; test log probabilities by the count estimator.

    ``warm``: (lattice sweeps, cells per axis): start the dense chain from the lattice
    sampler's state after that many sweeps (:func:`lattice_lgm.gpds.warm.lattice_history`;
    the same target, another start) in place of the paper's (no rejections, θ at the
    priors' medians).
    """
    train, test = DATASETS[name](seed)
    base, hyper, kernel = _setting(name, train)
    rng = np.random.default_rng([RING_SEED, seed, 1] if warm is None else
                                [RING_SEED, seed, 3])
    t0 = time.perf_counter()
    init = None
    if warm is not None:
        model = LatticeGPDS(train, base, cells=warm[1], kernel=kernel, hyperpriors=hyper)
        sweep, st = LatticeSweep(model), model.init_state([rng])
        for _ in range(warm[0]):
            st, _ = sweep.step(st, [rng])
        init, kernel = lattice_history(model, st, rng)
    start = {"start_rejections": 0 if init is None else init.n_rejections,
             "start_sd": float(kernel.sd), "start_range": float(np.atleast_1d(kernel.range)[0])}
    states, kernels, _ = run_chain(train, rng, kernel, base, n_sweeps, burn=burn,
                                   thin=thin, hyperpriors=hyper, n_count=DENSE_COUNT_MOVES,
                                   init=init)
    secs = time.perf_counter() - t0
    est = count_estimate(states, rng, kernels, base, test, n_batches=min(20, len(states)))
    return {"seed": seed, "mean_test_logp": est.mean_log_density,
            "log_se": float(np.sqrt(np.sum(est.log_se**2)) / len(test)),
            "seconds": secs, "n_sweeps": n_sweeps, "burn": burn, "thin": thin,
            "warm": warm, **start,
            "mean_rejections": float(np.mean([s.n_rejections for s in states])),
            "rejections": [s.n_rejections for s in states],
            "range": [float(np.atleast_1d(k.range)[0]) for k in kernels],
            "sd": [float(k.sd) for k in kernels]}


def ring_lattice(seed: int, n_sweeps: int, burn: int, cells: int, name: str = "ring",
                 chains: int = 1, augmentation: str = "history") -> dict:
    """The lattice-scale sampler on one data set; Rao–Blackwellised test log probabilities.

    ``chains == 1`` with the history augmentation: the first runs' single chain (its
    batch-means error; kept for the cached ``lattice_*.json`` rows).  ``chains > 1``: the
    library's own path, :func:`lattice_lgm.runs.sample` with the default sweep (scale
    augmentation) into a zarr store, the predictive density and its multi-chain MCSE from
    the store (:func:`lattice_lgm.analysis.predictive_density_from_store`) and R-hat / bulk
    ESS of sd, range and ``M`` (ArviZ).
    """
    train, test = DATASETS[name](seed)
    base, hyper, kernel = _setting(name, train)
    model = LatticeGPDS(train, base, cells=cells, kernel=kernel, hyperpriors=hyper)
    if chains > 1:
        return _lattice_chains(model, test, seed, n_sweeps, burn, cells, chains)
    sweep = LatticeSweep(model, augmentation=augmentation)
    rngs = [np.random.default_rng([RING_SEED, seed, 2])]
    state = model.init_state(rngs)
    kept, t0 = [], time.perf_counter()
    for i in range(burn + n_sweeps):
        state, _ = sweep.step(state, rngs)
        if i >= burn:
            kept.append(state)
    secs = time.perf_counter() - t0
    est = lattice_predictive(model, kept, test)
    return {"seed": seed, "mean_test_logp": est.mean_log_density,
            "log_se": float(np.sqrt(np.sum(est.log_se**2)) / len(test)), "seconds": secs,
            "n_sweeps": n_sweeps, "burn": burn, "cells": cells,
            "interpolation_bound": model.interpolation_bound(),
            "mean_rejections": float(np.mean([s.extras[REJECTIONS].sum() for s in kept])),
            "range": [float(s.theta["range"][0]) for s in kept],
            "sd": [float(s.theta["sd"][0]) for s in kept]}


def _lattice_chains(model: LatticeGPDS, test: np.ndarray, seed: int, n_sweeps: int, burn: int,
                    cells: int, chains: int) -> dict:
    """``chains`` chains of ``model`` through ``sample()``; scores and diagnostics per split."""
    import tempfile

    import arviz as az

    from lattice_lgm.analysis import predictive_density_from_store
    from lattice_lgm.runs import sample

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        tree = sample(model, draws=n_sweeps, tune=burn, chains=chains,
                      random_seed=RING_SEED * 100 + seed, store=Path(tmp) / "run.zarr",
                      progressbar=False)
        secs = time.perf_counter() - t0
        pred = predictive_density_from_store(model, tree, test)  # + its multi-chain MCSE
        post = tree["posterior"].to_dataset()[["sd", "range", "n_rejections"]]
        diag = az.summary(post, kind="diagnostics", round_to="none")
        trace = {v: post[v].values.mean(axis=1).tolist() for v in post.data_vars}
    return {"seed": seed, "mean_test_logp": pred.attrs["mean_log_density"],
            "log_se": pred.attrs["mean_log_density_mcse"], "seconds": secs,
            "n_sweeps": n_sweeps, "burn": burn, "cells": cells, "chains": chains,
            "augmentation": "scale", "interpolation_bound": model.interpolation_bound(),
            "mean_rejections": float(post["n_rejections"].values.mean()),
            "chain_means": trace,
            "r_hat": {v: float(diag.loc[v, "r_hat"]) for v in post.data_vars},
            "ess_bulk": {v: float(diag.loc[v, "ess_bulk"]) for v in post.data_vars}}


def ring_dpgmm(seed: int, name: str = "ring") -> dict:
    """scikit-learn's variational Dirichlet-process Gaussian mixture (for the paper's iMoG)."""
    from sklearn.mixture import BayesianGaussianMixture

    train, test = DATASETS[name](seed)
    m = BayesianGaussianMixture(n_components=DP_COMPONENTS, covariance_type="full",
                                weight_concentration_prior_type="dirichlet_process",
                                max_iter=2000, n_init=3, random_state=seed).fit(train)
    return {"seed": seed, "mean_test_logp": float(m.score_samples(test).mean())}


def _cached(path: Path, fn, *args) -> dict:
    """``fn(*args)`` unless ``path`` holds its result (a resumable experiment, per seed)."""
    if path.exists():
        return json.loads(path.read_text())
    res = fn(*args)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(res))
    return res


def _mean_se(per: list[dict]) -> dict:
    v = np.array([p["mean_test_logp"] for p in per])
    return {"mean": float(v.mean()),
            "se": float(v.std(ddof=1) / np.sqrt(len(v))) if len(v) > 1 else None,
            "per_seed": [float(x) for x in v]}


def parzen_split(seed: int, name: str) -> dict:
    """Parzen windows (ten-fold CV bandwidth) on one split of data set ``name``."""
    train, test = DATASETS[name](seed)
    h = parzen_bandwidth(train)
    return {"seed": seed, "bandwidth": h,
            "mean_test_logp": float(parzen_logpdf(train, test, h).mean())}


def ring_methods(n_seeds: int, out: Path, quick: bool, name: str = "ring") -> dict:
    """Every method on ``n_seeds`` splits of data set ``name`` (each cached under ``out/name``).

    Per split: the GPDS by the paper's sampler (``dense``, from the paper's start; ``dense,
    warm``, from a lattice state) and by the lattice sampler (``lattice``), the
    Dirichlet-process mixture (``dpgmm``) and Parzen windows (``parzen``).
    """
    dense_cfg = (60, 20, 2) if quick else (DENSE_SWEEPS, DENSE_BURN, DENSE_THIN)
    warm_cfg = (60, 20, 2, name, (20, 32)) if quick else (
        *DENSE_WARM, name, (DENSE_WARM_LATTICE, LATTICE_FINE))
    draws, tune, cells = (40, 10, 32) if quick else LATTICE[name]
    chains = 2 if quick else LATTICE_CHAINS
    res: dict = {"dense": [], "lattice": [], "dpgmm": [], "parzen": []}
    d = out / name
    for k in range(n_seeds):
        if k < (1 if quick else DENSE_SEEDS[name]):
            res["dense"].append(_cached(d / f"dense_{k}.json", ring_dense, k, *dense_cfg,
                                        name))
        if k < min(1 if quick else n_seeds, DENSE_WARM_SEEDS[name]):
            res.setdefault("dense, warm", []).append(_cached(
                d / f"dense_warm_{k}.json", ring_dense, k, *warm_cfg))
        res["lattice"].append(_cached(d / f"lattice_{cells}_{chains}x{draws}_{k}.json",
                                      ring_lattice, k, draws, tune, cells, name, chains))
        res["dpgmm"].append(_cached(d / f"dpgmm_{k}.json", ring_dpgmm, k, name))
        if k == 0 and not quick and name in LATTICE_CHECK:
            other, n_draws = LATTICE_CHECK[name]
            res.setdefault(f"lattice {other}²", []).append(_cached(
                d / f"lattice_{other}_{chains}x{n_draws}_{k}.json", ring_lattice, k, n_draws,
                tune, other, name, chains))
        res["parzen"].append(parzen_split(k, name))
    return {m: {**_mean_se(v), "seconds": [p.get("seconds") for p in v],
                "mean_rejections": [p.get("mean_rejections") for p in v]}
            for m, v in res.items()}


def figure1(n_samples: int, grid: int, seed: int = SEED) -> dict:
    """The four prior densities: samples, history sizes, contour fields and timings."""
    base = GaussianBase.create([0.0, 0.0], 1.0)
    ax = np.linspace(-3.0, 3.0, grid)
    gx, gy = np.meshgrid(ax, ax)
    pts = np.column_stack([gx.ravel(), gy.ravel()])
    log_pi = base.logpdf(pts)
    out = []
    for k, (lx, ly, alpha) in enumerate(PANELS):
        kernel = SquaredExponential(sd=float(np.sqrt(alpha)), lengthscale=(lx, ly))
        rng = np.random.default_rng([seed, k])
        t0 = time.perf_counter()
        h = sample_prior(kernel, base, n_samples, rng)
        secs = time.perf_counter() - t0
        g_hat = conditional_mean(kernel, h, pts)
        dens = special.expit(g_hat) * np.exp(log_pi)
        out.append({"lx": lx, "ly": ly, "alpha": alpha, "samples": h.samples.tolist(),
                    "n_proposals": len(h.x), "n_rejections": int((~h.accepted).sum()),
                    "seconds": secs, "density": dens.reshape(grid, grid).tolist()})
    return {"panels": out, "grid": ax.tolist(), "n_samples": n_samples, "seed": seed}


def plot(res: dict, path: Path) -> None:
    """Figure 1 as a PNG: contours of Φ(ĝ)π and the 200 samples per panel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ax_ = np.asarray(res["grid"])
    fig, axes = plt.subplots(1, 4, figsize=(16, 4.2))
    for a, p, tag in zip(axes, res["panels"], "abcd", strict=True):
        a.contour(ax_, ax_, np.asarray(p["density"]), levels=8, colors="0.5", linewidths=0.7)
        s = np.asarray(p["samples"])
        a.plot(s[:, 0], s[:, 1], ".", color="k", ms=3)
        a.set_xlim(-3, 3)
        a.set_ylim(-3, 3)
        a.set_aspect("equal")
        a.set_title(f"({tag}) ℓx = {p['lx']:g}, ℓy = {p['ly']:g}, α = {p['alpha']:g}\n"
                    f"{p['n_proposals']} proposals for {len(s)} samples", fontsize=9)
    fig.suptitle("GPDS prior samples (Adams, Murray & MacKay 2009, Figure 1): base N(0, I), "
                 "logistic Φ", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_ring(ring_methods_: dict, pines_methods: dict, path: Path) -> None:
    """Figure 5 in our terms: improvement over Parzen windows per method, both data sets.

    Bars: the mean over splits of each method's mean test log probability minus Parzen's on
    the same split, with the standard error of those paired differences.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, (title, methods) in zip(axes, (("Toy ring (§5)", ring_methods_),
                                           ("Japanese pines (in place of the skulls)",
                                            pines_methods)), strict=True):
        base = np.asarray(methods["parzen"]["per_seed"])
        names, means, ses = [], [], []
        for name, r in methods.items():
            if name == "parzen":
                continue
            dd = np.asarray(r["per_seed"]) - base[: len(r["per_seed"])]
            names.append(f"{name}\n({len(dd)})")
            means.append(dd.mean())
            ses.append(dd.std(ddof=1) / np.sqrt(len(dd)) if len(dd) > 1 else 0.0)
        ax.bar(names, means, yerr=ses, color="0.6", capsize=4)
        ax.axhline(0.0, color="k", lw=0.8)
        ax.set_ylabel("improvement over Parzen (nats per test point)")
        ax.set_title(f"{title} (splits per method in brackets)", fontsize=9)
        ax.tick_params(axis="x", labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the reproductions built so far; write JSON and PNG under ``--out``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="40 samples per panel, 25² grid")
    ap.add_argument("--out", type=Path, default=None, help="results directory")
    ap.add_argument("--seeds", type=int, default=N_SEEDS, help="ring data seeds (full run)")
    args = ap.parse_args(argv)
    out = args.out or (RESULTS / "quick" if args.quick else RESULTS)
    out.mkdir(parents=True, exist_ok=True)
    n, grid = (40, 25) if args.quick else (200, 121)
    res = figure1(n, grid)
    n_seeds = 1 if args.quick else args.seeds
    parzen = ring_parzen(2 if args.quick else max(args.seeds, N_SEEDS))
    methods = ring_methods(n_seeds, out, args.quick)
    methods["true density"] = ring_oracle(n_seeds)
    pines_methods = ring_methods(n_seeds, out, args.quick, "pines")
    summary = {"figure1": [{k: p[k] for k in ("lx", "ly", "alpha", "n_proposals",
                                               "n_rejections", "seconds")}
                           for p in res["panels"]],
               "n_samples": n, "seed": res["seed"], "ring_parzen": parzen,
               "ring_methods": methods, "pines_methods": pines_methods,
               "machine_load": _load()}
    (out / "gpds2009.json").write_text(json.dumps(summary, indent=1))
    plot(res, out / "gpds2009_figure1.png")
    for p in summary["figure1"]:
        print(f"ℓ = ({p['lx']:g}, {p['ly']:g}), α = {p['alpha']:g}: {p['n_proposals']} "
              f"proposals for {n} samples ({p['seconds']:.2f} s)")
    se = "" if parzen["se"] is None else f" ± {parzen['se']:.3f}"
    print(f"ring, Parzen windows: mean test log probability {parzen['mean']:.3f}{se} over "
          f"{len(parzen['per_seed'])} data seeds (the paper: {PAPER_PARZEN})")
    for name, r in methods.items():
        se = "" if r["se"] is None else f" ± {r['se']:.3f}"
        print(f"ring, {name}: mean test log probability {r['mean']:.3f}{se} over "
              f"{len(r['per_seed'])} data seeds")
    for name, r in pines_methods.items():
        se = "" if r["se"] is None else f" ± {r['se']:.3f}"
        print(f"Japanese pines, {name}: mean test log probability {r['mean']:.3f}{se} over "
              f"{len(r['per_seed'])} splits")
    plot_ring(methods, pines_methods, out / "gpds2009_figure5.png")
    return 0


def _load() -> float | None:
    try:
        import os

        return float(os.getloadavg()[0])
    except OSError:  # pragma: no cover - platforms without load averages
        return None


if __name__ == "__main__":
    sys.exit(main())
