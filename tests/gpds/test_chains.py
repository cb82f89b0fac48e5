"""Several dense GPDS chains: the same draws wherever they run, and their variable-size
rejection sets in a chunked zarr store that xarray reads back."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from lattice_lgm.covariance import SquaredExponential
from lattice_lgm.errors import InvalidParameterError
from lattice_lgm.gpds import UniformBase
from lattice_lgm.gpds.chains import CHUNK_DRAWS, run_chains
from lattice_lgm.gpds.predict import run_chain
from lattice_lgm.hyperpriors import LogNormal
from lattice_lgm.samplers import chain_rngs

KERNEL = SquaredExponential(sd=1.0, lengthscale=0.2)
BASE = UniformBase.create([0.0, 0.0], [1.0, 1.0])
HYPER = {"sd": LogNormal(0.0, 0.5), "range": LogNormal(np.log(0.3), 0.5)}
RUN = dict(seed=3, chains=3, hyperpriors=HYPER, n_count=3)


def _data(n=15):
    rng = np.random.default_rng(0)
    return np.clip(0.5 + 0.15 * rng.standard_normal((n, 2)), 0.01, 0.99)


@pytest.fixture(scope="module")
def here():
    return run_chains(_data(), KERNEL, BASE, 5, **RUN)


def test_each_chain_is_run_chain_on_its_own_stream(here):
    """Chain c is exactly run_chain from SeedSequence(seed, spawn_key=(c,)) (on one BLAS
    thread, as every chain runs: the bits of a factor depend on the threads splitting it)."""
    from threadpoolctl import threadpool_limits

    post = here["posterior"]
    for c in range(3):
        with threadpool_limits(limits=1, user_api="blas"):
            states, kernels, _ = run_chain(_data(), chain_rngs(3, [c])[0], KERNEL, BASE, 5,
                                           hyperpriors=HYPER, n_count=3)
        np.testing.assert_array_equal(post["range"].values[c], [k.range[0] for k in kernels])
        np.testing.assert_array_equal(post["n_rejections"].values[c],
                                      [s.n_rejections for s in states])
        last = states[-1]
        m = last.n_rejections
        np.testing.assert_array_equal(post["rejections"].values[c, -1, :m], last.rejections)
        np.testing.assert_array_equal(post["g_rejections"].values[c, -1, :m], last.g[15:])
        np.testing.assert_array_equal(post["g_data"].values[c, -1], last.g[:15])
    assert len({tuple(post["sd"].values[c]) for c in range(3)}) == 3  # independent chains


def test_the_rejection_sets_are_padded_where_each_draw_ends(here):
    post = here["posterior"]
    m = post["n_rejections"].values
    filled = np.isfinite(post["rejections"].values).all(axis=-1)
    np.testing.assert_array_equal(filled.sum(axis=-1), m)
    np.testing.assert_array_equal(np.isfinite(post["g_rejections"].values).sum(axis=-1), m)
    assert post.sizes["rejection"] == m.max() > m.min()  # variable sizes, padded to the max
    np.testing.assert_array_equal(here["observed_data"]["points"].values, _data())


def test_dask_workers_give_the_same_draws_and_the_store_reads_back(here, tmp_path):
    path = tmp_path / "dense.zarr"
    there = run_chains(_data(), KERNEL, BASE, 5, dask_workers=2, store=path, **RUN)
    xr.testing.assert_identical(here["posterior"].to_dataset(),
                                there["posterior"].to_dataset())
    back = xr.open_datatree(path, engine="zarr", consolidated=False)
    xr.testing.assert_equal(back["posterior"].to_dataset(), here["posterior"].to_dataset())
    assert back["posterior"]["rejections"].encoding["chunks"][1] == CHUNK_DRAWS
    with pytest.raises(InvalidParameterError, match="exists"):  # before any sampling
        run_chains(_data(), KERNEL, BASE, 10**9, store=path, **RUN)


@pytest.mark.parametrize("kw, match", [
    (dict(chains=0), "chains"), (dict(seed=-1), "seed"), (dict(n_sweeps=0), "n_sweeps"),
    (dict(dask_workers=2, dask_scheduler="tcp://x:1"), "not both"),
])
def test_bad_settings_are_refused_by_name(kw, match):
    args = {**RUN, "n_sweeps": 10**9, **kw}
    n = args.pop("n_sweeps")
    with pytest.raises(InvalidParameterError, match=match):
        run_chains(_data(), KERNEL, BASE, n, **args)
