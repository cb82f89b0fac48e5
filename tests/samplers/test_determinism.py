"""DESIGN §5: same seed ⇒ byte-identical draws for any thread count and any chain subset."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from lattice_lgm.hyperpriors import LogNormal, Normal
from lattice_lgm.likelihoods import Poisson
from lattice_lgm.models import LatentGaussianModel
from lattice_lgm.samplers import (
    EllipticalSlice,
    Gibbs,
    HyperMove,
    NealMH,
    chain_rngs,
    init_state,
)

from .cases import HAS_CHOLMOD, N, make_prior

SETUPS = [("circulant", "surr-scalar"), ("circulant", "prior-white"), ("dense", "surr-site"),
          ("gmrf", "prior-white")]
if HAS_CHOLMOD:
    SETUPS.append(("gmrf", "post-site"))


def _model(backend: str) -> LatentGaussianModel:
    counts = np.random.default_rng(0).poisson(1.5, size=N)
    return LatentGaussianModel(make_prior(backend), Poisson(counts), hyperpriors={
        "sd": LogNormal(0.0, 0.5), "range": LogNormal(np.log(3.0), 0.3, upper=8.0),
        "mean": Normal(0.0, 2.0)})


def _run(model, rep, seed, chains, n_sweeps=3, latent="ess"):
    rngs = chain_rngs(seed, chains)
    state = init_state(model, rngs, chains=chains)
    lat = EllipticalSlice(model) if latent == "ess" else NealMH(model, step_size=0.4)
    sweep = Gibbs(HyperMove(model, rep), lat, n_latent=3)
    for _ in range(n_sweeps):
        state, _ = sweep.step(state, rngs)
    return state


def _assert_same(a, b, ia, ib):
    assert a.f[ia].tobytes() == b.f[ib].tobytes()
    assert a.white[ia].tobytes() == b.white[ib].tobytes()
    assert a.loglik[ia] == b.loglik[ib]
    for k in a.theta:
        assert a.theta[k][ia] == b.theta[k][ib]


@pytest.mark.parametrize(("backend", "rep"), SETUPS)
def test_a_chain_alone_equals_the_same_chain_in_a_batch(backend, rep):
    model = _model(backend)
    batch = _run(model, rep, 5, [0, 1, 2, 3])
    alone = _run(model, rep, 5, [2])
    _assert_same(batch, alone, 2, 0)
    assert batch.chains == (0, 1, 2, 3) and alone.chains == (2,)


@pytest.mark.parametrize(("backend", "rep"), SETUPS[:3])
def test_one_and_two_numba_threads_give_identical_bytes(backend, rep):
    model = _model(backend)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = _run(model, rep, 6, [0, 1, 2, 3])
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        two = _run(model, rep, 6, [0, 1, 2, 3])
    finally:
        numba.set_num_threads(before)
    for c in range(4):
        _assert_same(one, two, c, c)


def test_neal_mh_is_deterministic_across_subsets():
    model = _model("dense")
    batch = _run(model, "prior-white", 7, [0, 1, 2], latent="neal")
    alone = _run(model, "prior-white", 7, [1], latent="neal")
    _assert_same(batch, alone, 1, 0)


def test_large_fields_use_the_noise_pool_deterministically():
    """At ≥ 65536 white entries the noise is drawn in a thread pool; chain 1 alone and in a
    batch still agree bitwise (the pool only decides which thread fills which chain)."""
    from lattice_lgm import Lattice
    from lattice_lgm.covariance import Matern
    from lattice_lgm.priors import CirculantPrior

    lat = Lattice((256, 256), spacing=1 / 256)
    prior = CirculantPrior(lat, Matern(1.5, range=0.1))
    counts = np.random.default_rng(1).poisson(0.5, size=lat.shape)
    model = LatentGaussianModel(prior, Poisson(counts))
    out = []
    # two chains with 2 threads (noise and colouring fused per chain in the pool, one
    # single-threaded FFT plan per thread), with 1 thread (serial, the shared plan), and chain 1
    # alone: chain 1 must agree bitwise in all three
    runs = [([0, 1], 2), ([0, 1], 1), ([1], 2)]
    before = numba.get_num_threads()
    try:
        for chains, threads in runs:
            numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
            rngs = chain_rngs(3, chains)
            state = init_state(model, rngs, chains=chains)
            for _ in range(2):
                state, _ = EllipticalSlice(model).step(state, rngs)
            out.append(state)
    finally:
        numba.set_num_threads(before)
    _assert_same(out[0], out[2], 1, 0)
    _assert_same(out[1], out[2], 1, 0)
