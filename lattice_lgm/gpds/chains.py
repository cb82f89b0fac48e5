"""Several chains of the dense GPDS sampler in parallel, and their draws as xarray / zarr.

The dense path is the paper's sampler (§4), exact and ``O((N + M)³)`` per sweep; its states
carry rejection sets whose size ``M`` changes from draw to draw.  :func:`run_chains` runs
``chains`` independent chains of :func:`~lattice_lgm.gpds.predict.run_chain`, as Dask tasks
(or one after another here), each from its own stream ``SeedSequence(seed, spawn_key=(c,))``
(:func:`~lattice_lgm.samplers.chain_rngs`), so the draws depend on ``seed`` and the chain
index only — not on where or how many at a time they ran.  :func:`to_datatree` lays the draws out in
ArviZ's groups: θ (and φ) per ``(chain, draw)``, ``M`` as ``n_rejections``, and the
variable-size sets padded to the largest ``M`` along a ``rejection`` dim — ``rejections``
``(chain, draw, rejection, coord)`` and their function values ``g_rejections``, NaN beyond
each draw's ``M`` (``n_rejections`` says where the set ends) — and ``g`` at the data as
``g_data``.  ``store=`` writes that tree to a chunked zarr store xarray opens
(``xarray.open_datatree(path, engine="zarr", consolidated=False)``).

Not a run model: :func:`lattice_lgm.runs.sample`'s checkpoints and exact resume are the
lattice path's (:class:`~lattice_lgm.gpds.lattice.LatticeGPDS`); a dense run that dies is
rerun (decision 108).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._validation import positive_int
from ..covariance import Covariance
from ..errors import InvalidParameterError
from ..runs.dask import dask_client
from ..samplers.state import chain_rngs
from .predict import run_chain
from .state import LatentHistory

__all__ = ["DenseChain", "run_chains", "to_datatree"]

#: draws per zarr chunk along ``draw``
CHUNK_DRAWS = 100


class DenseChain:
    """One chain's kept draws: the states and the θ and φ of each.

    Attributes
    ----------
    states : list of LatentHistory
    kernels : list of Covariance
    bases : list of base measures
    """

    def __init__(self, states: list[LatentHistory], kernels: list[Covariance],
                 bases: list[Any]) -> None:
        self.states, self.kernels, self.bases = states, kernels, bases


def _one_chain(args: tuple) -> DenseChain:
    """Worker: chain ``c`` of the run (its stream from the seed and ``c`` alone).

    On one BLAS thread wherever it runs: a Cholesky factor's last bits depend on how many
    threads split it, and a chain's accept/reject decisions on those bits.
    """
    from threadpoolctl import threadpool_limits

    data, seed, c, kernel, base, n_sweeps, burn, thin, kw = args
    rng = chain_rngs(seed, [c])[0]
    with threadpool_limits(limits=1, user_api="blas"):
        return DenseChain(*run_chain(data, rng, kernel, base, n_sweeps, burn=burn, thin=thin,
                                     **kw))


def run_chains(data: Any, kernel: Covariance, base: Any, n_sweeps: int, *, seed: int,
               chains: int = 4, burn: int = 0, thin: int = 1,
               dask_workers: int | None = None, dask_scheduler: str | None = None,
               store: str | os.PathLike | None = None, **sweep_kwargs: Any) -> Any:
    """``chains`` independent chains of the dense GPDS sampler, in parallel on Dask.

    Parameters
    ----------
    data : array_like, shape (N, d)
        Inside the base measure's support.
    kernel : Covariance
        The starting θ (moved when ``hyperpriors`` is among ``sweep_kwargs``).
    base : base measure
        ``π``, the starting φ (moved when ``base_hyperpriors`` is).
    n_sweeps, burn, thin : int
        Per chain, as :func:`~lattice_lgm.gpds.predict.run_chain`.
    seed : int
        The run's seed (>= 0); chain ``c`` draws from ``SeedSequence(seed, spawn_key=(c,))``.
    chains : int
        Number of chains.
    dask_workers : int, optional
        Run the chains as tasks on a local Dask cluster of this many single-threaded worker
        processes (the sampler is Python-bound: threads would share one interpreter).  In a
        script, call this under ``if __name__ == "__main__":`` (Dask starts its workers by
        spawning).
    dask_scheduler : str, optional
        Address of a running Dask scheduler (``tcp://host:8786``) to run them on instead.
        Neither: the chains run one after another in this process.  The draws are the
        same every way.
    store : path, optional
        A zarr store to write the draws to (must not exist; checked before any sampling).
    **sweep_kwargs
        Passed to :func:`~lattice_lgm.gpds.history.sweep` (``hyperpriors``, ``link_name``,
        ``n_count``, …).

    Returns
    -------
    xarray.DataTree
        :func:`to_datatree` of the chains.
    """
    n_chains = positive_int("chains", chains, "e.g. 4")
    positive_int("n_sweeps", n_sweeps, "e.g. 2000")
    chain_rngs(seed, 1)  # validates the seed before any work
    if dask_workers is not None and dask_scheduler is not None:
        raise InvalidParameterError(
            f"give dask_workers={dask_workers!r} (a LocalCluster) or "
            f"dask_scheduler={dask_scheduler!r} (an existing cluster), not both.")
    if store is not None and Path(store).exists():
        raise InvalidParameterError(
            f"store={str(store)!r} exists; give a new path (a dense run is not resumed).")
    pts = np.asarray(data, dtype=float)
    jobs = [(pts, seed, c, kernel, base, n_sweeps, burn, thin, sweep_kwargs)
            for c in range(n_chains)]
    if dask_workers is None and dask_scheduler is None:
        runs = [_one_chain(j) for j in jobs]
    else:
        runs = _on_dask(jobs, dask_workers, dask_scheduler)
    tree = to_datatree(runs, pts, settings={"seed": seed, "n_sweeps": n_sweeps, "burn": burn,
                                            "thin": thin})
    if store is not None:
        enc = {v: {"chunks": tuple(CHUNK_DRAWS if dim == "draw" else n
                                   for dim, n in tree["posterior"][v].sizes.items())}
               for v in tree["posterior"].data_vars}
        tree.to_zarr(store, mode="w-", encoding={"/posterior": enc}, consolidated=False)
    return tree


def _on_dask(jobs: list[tuple], workers: int | None, scheduler: str | None) -> list[DenseChain]:
    """One Dask task per chain; the results in chain order."""
    if workers is not None:
        positive_int("dask_workers", workers, "worker processes, e.g. 2")
    with dask_client(workers, scheduler) as client:
        futures = [client.submit(_one_chain, j, pure=False, key=f"lattice-lgm-gpds-chain-{j[2]}")
                   for j in jobs]
        return client.gather(futures)


def _pad(rows: Sequence[Sequence[np.ndarray]], width: int, tail: tuple[int, ...]) -> np.ndarray:
    """``rows[c][k]`` (m, *tail) stacked to (chains, draws, width, *tail), NaN beyond ``m``."""
    out = np.full((len(rows), len(rows[0]), width, *tail), np.nan)
    for c, row in enumerate(rows):
        for k, a in enumerate(row):
            out[c, k, : len(a)] = a
    return out


def to_datatree(runs: Sequence[DenseChain], data: np.ndarray,
                settings: dict[str, Any] | None = None) -> Any:
    """The chains' draws in ArviZ's layout (``posterior``, ``observed_data``).

    Parameters
    ----------
    runs : sequence of DenseChain
        One per chain, each with the same number of kept draws.
    data : ndarray, shape (N, d)
    settings : dict, optional
        Recorded as the tree's attributes.

    Returns
    -------
    xarray.DataTree
        ``posterior``: each θ parameter and each φ parameter ``(chain, draw)`` (a vector
        parameter gets a ``<name>_dim`` dim), ``n_rejections`` ``(chain, draw)``,
        ``rejections`` ``(chain, draw, rejection, coord)``, ``g_rejections``
        ``(chain, draw, rejection)`` (NaN beyond each draw's ``n_rejections``) and
        ``g_data`` ``(chain, draw, point)``; ``observed_data``: ``points``.  A store
        written by :func:`run_chains` is chunked by :data:`CHUNK_DRAWS` draws.
    """
    import xarray as xr

    n_draws = {len(r.states) for r in runs}
    if len(n_draws) != 1 or 0 in n_draws:
        raise InvalidParameterError(
            f"runs keep {sorted(n_draws)} draws; every chain must keep the same number > 0.")
    d = data.shape[1]
    width = max(s.n_rejections for r in runs for s in r.states)
    post: dict[str, Any] = {}
    for name in runs[0].kernels[0].params:
        v = np.array([[np.atleast_1d(k.params[name]) for k in r.kernels] for r in runs],
                     dtype=float)
        post[name] = (("chain", "draw"), v[..., 0]) if v.shape[-1] == 1 else (
            ("chain", "draw", f"{name}_dim"), v)
    if hasattr(runs[0].bases[0], "params"):
        for name in runs[0].bases[0].params:
            post[f"base_{name}"] = (("chain", "draw"),
                                    np.array([[b.params[name] for b in r.bases] for r in runs]))
    post["n_rejections"] = (("chain", "draw"),
                            np.array([[s.n_rejections for s in r.states] for r in runs]))
    post["rejections"] = (("chain", "draw", "rejection", "coord"),
                          _pad([[s.rejections for s in r.states] for r in runs], width, (d,)))
    post["g_rejections"] = (("chain", "draw", "rejection"),
                            _pad([[s.g[s.n_data:] for s in r.states] for r in runs], width, ()))
    post["g_data"] = (("chain", "draw", "point"),
                      np.array([[s.g[: s.n_data] for s in r.states] for r in runs]))
    coords = {"chain": np.arange(len(runs)), "draw": np.arange(n_draws.pop()),
              "coord": np.arange(d), "point": np.arange(len(data)),
              "rejection": np.arange(width)}
    ds = xr.Dataset(post, coords=coords)
    obs = xr.Dataset({"points": (("point", "coord"), data)},
                     coords={"point": coords["point"], "coord": coords["coord"]})
    return xr.DataTree.from_dict({"/": xr.Dataset(attrs={
        "created_by": "lattice_lgm.gpds.chains.run_chains", **(settings or {})}),
        "posterior": ds, "observed_data": obs})
