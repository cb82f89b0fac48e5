r"""Adams, Murray & MacKay (2009), the Gaussian Process Density Sampler: reproductions.

Built so far (issue 29, in progress): **Figure 1**, four densities drawn from the GPDS prior
with 200 exact samples each (Algorithm 1, :func:`lattice_lgm.gpds.sample_prior`). As the
paper: base measure ``N(0, I₂)``, squared-exponential kernel
``K(x, x′) = α exp(−½ Σ_i ℓ_i⁻² (x_i − x′_i)²)``, logistic ``Φ``, with (ℓx, ℓy, α) =
(1, 1, 1), (1, 1, 10), (0.2, 0.2, 5), (0.1, 2, 5). The contours are ``Φ(ĝ) π`` with ``ĝ`` the
GP's mean given the sampled history (the paper: "the approximate unnormalized densities").
Each panel reports its proposals (accepted + rejected), which estimate ``1/Z_π[g]``.

Also built: §5's **toy ring** data (100 training and 50 test points uniform on a circle of
radius 1.5 with N(0, 0.2²) noise; data seed ``(RING_SEED, k)``) and its **Parzen-window**
baseline (a spherical Gaussian kernel, bandwidth by ten-fold cross-validation on a log grid):
mean test log probability per seed, over ``N_SEEDS`` seeds, beside the paper's −2.253.

Still to build here (issue 29): the GPDS posterior on the ring (latent-history MCMC and the
predictive density of eq. 5), the Dirichlet-process mixture (scikit-learn's
``BayesianGaussianMixture``) and the lattice-scale comparison.

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
from lattice_lgm.gpds import GaussianBase, conditional_mean, sample_prior

RESULTS = Path(__file__).resolve().parent / "results"
SEED = 20091
#: Figure 1's panels: (ℓx, ℓy, α)
PANELS = ((1.0, 1.0, 1.0), (1.0, 1.0, 10.0), (0.2, 0.2, 5.0), (0.1, 2.0, 5.0))
#: §5's toy ring: radius, noise sd, training and test sizes; data seeds (RING_SEED, k)
RING_RADIUS, RING_NOISE, N_TRAIN, N_TEST, RING_SEED, N_SEEDS = 1.5, 0.2, 100, 50, 2009, 10
#: the paper's Parzen-window mean test log probability on the ring (§5, Figure 5's baseline)
PAPER_PARZEN = -2.253
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
    return {"per_seed": per, "mean": float(v.mean()),
            "se": float(v.std(ddof=1) / np.sqrt(len(v))) if len(v) > 1 else None,
            "paper": PAPER_PARZEN}


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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the reproductions built so far; write JSON and PNG under ``--out``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="40 samples per panel, 25² grid")
    ap.add_argument("--out", type=Path, default=None, help="results directory")
    args = ap.parse_args(argv)
    out = args.out or (RESULTS / "quick" if args.quick else RESULTS)
    out.mkdir(parents=True, exist_ok=True)
    n, grid = (40, 25) if args.quick else (200, 121)
    res = figure1(n, grid)
    parzen = ring_parzen(2 if args.quick else N_SEEDS)
    summary = {"figure1": [{k: p[k] for k in ("lx", "ly", "alpha", "n_proposals",
                                               "n_rejections", "seconds")}
                           for p in res["panels"]],
               "n_samples": n, "seed": res["seed"], "ring_parzen": parzen,
               "machine_load": _load()}
    (out / "gpds2009.json").write_text(json.dumps(summary, indent=1))
    plot(res, out / "gpds2009_figure1.png")
    for p in summary["figure1"]:
        print(f"ℓ = ({p['lx']:g}, {p['ly']:g}), α = {p['alpha']:g}: {p['n_proposals']} "
              f"proposals for {n} samples ({p['seconds']:.2f} s)")
    se = "" if parzen["se"] is None else f" ± {parzen['se']:.3f}"
    print(f"ring, Parzen windows: mean test log probability {parzen['mean']:.3f}{se} over "
          f"{len(parzen['per_seed'])} data seeds (the paper: {PAPER_PARZEN})")
    return 0


def _load() -> float | None:
    try:
        import os

        return float(os.getloadavg()[0])
    except OSError:  # pragma: no cover - platforms without load averages
        return None


if __name__ == "__main__":
    sys.exit(main())
