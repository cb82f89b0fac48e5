"""The demo behind ``make demo``: prior fields on a 1024 × 1024 lattice, two structured backends.

Until the LGCP model lands (issue 4/5), the main job draws Matérn fields with the circulant
embedding (FFT) and the Matérn-SPDE GMRF backend on a 1024² lattice, prints timings and the
facts a user should see (torus size and padding, what each backend is exact on), and writes a
PNG of the draws.

Run ``python -m lattice_lgm.demo --help`` for options.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from . import Lattice, __version__
from ._timing import median_time, timed
from .covariance import Matern
from .priors import CirculantPrior, GMRFPrior


def _run_backend(name: str, build, rng: np.random.Generator, chains: int) -> tuple:
    """Build a prior, draw ``chains`` fields and time it, printing one report.

    Returns ``(fields, median draw seconds)``.
    """
    prior, t_build = timed(build)
    fields, t_first = timed(lambda: prior.sample(rng, chains))
    t_draw = median_time(lambda: prior.sample(rng, chains), 5)
    print(f"[{name}] {prior.describe()}")
    print(f"{'':{len(name) + 3}}build {t_build:.2f} s, first draw {t_first:.2f} s (plans, "
          f"buffers), draw of {chains} fields {t_draw * 1e3:.0f} ms (median of 5)")
    return fields, t_draw


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns a process exit code."""
    ap = argparse.ArgumentParser(
        prog="python -m lattice_lgm.demo",
        description="Draw Matérn prior fields on a large lattice with the circulant and GMRF "
                    "backends, print timings and write a PNG.",
    )
    ap.add_argument("--n", type=int, default=1024, help="cells per side (default 1024)")
    ap.add_argument("--side", type=float, default=1000.0, help="window side in metres")
    ap.add_argument("--range", type=float, default=100.0, help="Matérn range in metres")
    ap.add_argument("--sd", type=float, default=1.0, help="marginal standard deviation")
    ap.add_argument("--chains", type=int, default=4, help="fields drawn per backend")
    ap.add_argument("--seed", type=int, default=20101, help="random seed")
    ap.add_argument("--out", type=Path, default=Path("demo_output"), help="output folder")
    args = ap.parse_args(argv)

    lat = Lattice((args.n, args.n), spacing=args.side / args.n, units="m")
    print(f"lattice_lgm {__version__} — prior draws on {lat}")
    print(f"Matérn ν=1, range {args.range:g} m (= {args.range / lat.spacing[0]:.0f} cells), "
          f"sd {args.sd:g}; {args.chains} fields per backend, seed {args.seed}\n")
    rng = np.random.default_rng(args.seed)
    kernel = Matern(1.0, sd=args.sd, range=args.range)
    results = {}
    results["circulant"], t_circ = _run_backend(
        "circulant", lambda: CirculantPrior(lat, kernel, max_range=2 * args.range), rng,
        args.chains)
    results["gmrf"], t_gmrf = _run_backend(
        "gmrf", lambda: GMRFPrior.matern(lat, sd=args.sd, range=args.range, alpha=2), rng,
        args.chains)
    print(f"GMRF / circulant draw time: {t_gmrf / t_circ:.2f}\n")

    for name, f in results.items():
        v = f.var(axis=(1, 2)).mean()
        print(f"{name:>10}: mean within-field variance {v:.3f} (sd² = {args.sd**2:g}; "
              "a single field underestimates it by its spatial mean's variance)")

    args.out.mkdir(parents=True, exist_ok=True)
    png = args.out / "prior_fields.png"
    _plot(results, lat, args, png)
    print(f"\nwrote {png}")
    return 0


def _plot(results: dict, lat: Lattice, args: argparse.Namespace, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    (y0, y1), (x0, x1) = lat.extent
    fig, axes = plt.subplots(2, 2, figsize=(10, 9.2), constrained_layout=True)
    lim = 3 * args.sd
    titles = {"circulant": "circulant embedding (FFT), Matérn ν=1",
              "gmrf": "GMRF Matérn-SPDE α=2 (DCT)"}
    for row, (name, fields) in enumerate(results.items()):
        for col in range(2):
            ax = axes[row, col]
            im = ax.imshow(fields[col], origin="lower", extent=(x0, x1, y0, y1),
                           cmap="RdBu_r", vmin=-lim, vmax=lim, interpolation="nearest")
            ax.set_title(f"{titles[name]} — draw {col + 1}", fontsize=10)
            ax.set_xlabel(f"x ({lat.units})")
            ax.set_ylabel(f"y ({lat.units})")
            ax.set_aspect("equal")
    fig.colorbar(im, ax=axes, shrink=0.8, label="f (prior field, sd units)")
    fig.suptitle(f"Prior draws on a {lat.shape[0]}×{lat.shape[1]} lattice, range "
                 f"{args.range:g} {lat.units}")
    fig.savefig(png, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
