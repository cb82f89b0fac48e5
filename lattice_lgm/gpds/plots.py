"""The GPDS's density map: the posterior mean density per cell with the data on top.

Reads a run's store alone (``summaries.density_mean`` averaged over chains, the points in
``observed_data``), so a map can be drawn after the data files have moved.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InvalidParameterError

__all__ = ["density_map", "posterior_density"]


def posterior_density(tree: Any) -> Any:
    """The posterior mean density per cell, ``E[f(x) | D]`` averaged over each cell.

    Parameters
    ----------
    tree : xarray.DataTree
        A lattice GPDS run (:func:`lattice_lgm.runs.sample` or ``lattice-lgm run``).

    Returns
    -------
    xarray.DataArray, dims (y, x) (or (x,))
        The chains' running means weighted by their draws (per unit area).
    """
    if "summaries" not in tree or "density_mean" not in tree["summaries"]:
        raise InvalidParameterError(
            "this store holds no GPDS density summary (summaries/density_mean); it is not a "
            "lattice GPDS run.")
    s = tree["summaries"].to_dataset()
    w = s["n_draws"] / s["n_draws"].sum()
    return (s["density_mean"] * w).sum("chain")


def density_map(tree: Any, path: str | Path | None = None, *, ax: Any = None,
                points: bool = True) -> Any:
    """Draw the posterior mean density (and the data) of a lattice GPDS run.

    Parameters
    ----------
    tree : xarray.DataTree
    path : str or Path, optional
        Write a PNG there.
    ax : matplotlib Axes, optional
    points : bool
        Overlay the observed points.

    Returns
    -------
    matplotlib Figure
    """
    import matplotlib

    if path is not None and ax is None:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dens = posterior_density(tree)
    fig = None
    if ax is None:
        fig, ax = plt.subplots(figsize=(6, 5))
    else:
        fig = ax.figure
    if dens.ndim == 2:
        im = ax.pcolormesh(dens["x"], dens["y"], dens.values, shading="nearest",
                           cmap="viridis")
        fig.colorbar(im, ax=ax, label="posterior mean density")
        ax.set_aspect("equal")
        if points:
            p = np.asarray(tree["observed_data"]["points"].values)
            ax.plot(p[:, 0], p[:, 1], ".", color="w", ms=2, alpha=0.8)
        ax.set_xlabel("x")
        ax.set_ylabel("y")
    else:
        ax.plot(dens["x"], dens.values, color="k")
        if points:
            p = np.asarray(tree["observed_data"]["points"].values)[:, 0]
            ax.plot(p, np.zeros_like(p), "|", color="C1")
        ax.set_xlabel("x")
        ax.set_ylabel("posterior mean density")
    post = tree["posterior"]
    ax.set_title(f"GPDS: {post.sizes['chain']} chains × {post.sizes['draw']} draws, "
                 f"{len(tree['observed_data']['points'])} points", fontsize=9)
    if path is not None:
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
    return fig
