"""EllipticalSlice.steps: a block of updates, compiled for dense and small circulant priors.

Its promise is the same numbers as the same number of ``step`` calls (issue 26: Python once
per block, the draws unchanged), on the compiled path and the fallback alike.
"""

from __future__ import annotations

import numpy as np
import pytest

from lattice_lgm import Lattice
from lattice_lgm.covariance import Matern
from lattice_lgm.errors import SamplerError
from lattice_lgm.likelihoods import Poisson
from lattice_lgm.models import LatentGaussianModel
from lattice_lgm.priors import CirculantPrior, DensePrior, GMRFPrior
from lattice_lgm.samplers import EllipticalSlice, chain_rngs, init_state

#: the compiled block each backend runs (GMRF: none, step by step)
FUSED = {"dense": "dense", "circulant": "spectral", "circulant-2d": "spectral", "gmrf": None}


def _model(backend: str, n: int = 37) -> LatentGaussianModel:
    rng = np.random.default_rng(4)
    kern = Matern(1.5, sd=1.1, range=6.0)
    if backend == "circulant-2d":  # even torus sides: two self-paired planes (0 and M/2)
        lat = Lattice((9, 7), spacing=1.0)
        prior = CirculantPrior(lat, kern, max_range=6.0)
        counts = rng.poisson(np.exp(0.5 + np.sin(np.arange(63) / 5.0))).astype(float)
        return LatentGaussianModel(prior, Poisson(counts.reshape(9, 7)), mean=0.4)
    lat = Lattice((n,), spacing=1.0)
    if backend == "dense":
        prior = DensePrior.from_lattice(lat, kern)
    elif backend == "gmrf":
        prior = GMRFPrior.matern(lat, sd=1.1, range=6.0, alpha=2, pad=4)
    else:
        prior = CirculantPrior(lat, kern, max_range=6.0)
    counts = rng.poisson(np.exp(0.5 + np.sin(np.arange(n) / 5.0))).astype(float)
    return LatentGaussianModel(prior, Poisson(counts), mean=0.4)


def _with_own_theta(state, model):
    """Each chain its own prior (θ): the spectral block colours chain by chain."""
    priors = [model.prior._with_params(sd=1.1 + 0.1 * c) for c in range(state.n_chains)]
    return state._replace(priors=tuple(priors))


@pytest.mark.parametrize("backend, bracket, own_theta", [
    ("dense", 2 * np.pi, False), ("dense", 1.3, False), ("circulant", 2 * np.pi, False),
    ("circulant", 1.3, False), ("circulant-2d", 2 * np.pi, False),
    ("circulant-2d", 2 * np.pi, True), ("gmrf", 2 * np.pi, False)])
def test_a_block_of_updates_equals_as_many_steps(backend, bracket, own_theta):
    model = _model(backend)
    ess = EllipticalSlice(model, bracket=bracket, block=3)
    ra, rb = chain_rngs(9, 3), chain_rngs(9, 3)
    a, b = init_state(model, ra), init_state(model, rb)
    if own_theta:
        a, b = _with_own_theta(a, model), _with_own_theta(b, model)
    assert ess._fused(b) == FUSED[backend]
    trace = np.empty((25, 3))
    evals = np.zeros(3, dtype=np.int64)
    for k in range(25):
        a, info = ess.step(a, ra)
        trace[k] = a.loglik
        evals += info["n_loglik"]
    f0 = b.f.copy()
    got = np.empty((25, 3))
    b2, binfo = ess.steps(b, rb, 25, trace=got)
    np.testing.assert_array_equal(b.f, f0)  # not in place: the input is untouched
    for name in ("f", "white", "loglik"):
        np.testing.assert_array_equal(getattr(b2, name), getattr(a, name), err_msg=name)
    np.testing.assert_array_equal(got, trace)
    np.testing.assert_array_equal(binfo["n_loglik"], evals)
    np.testing.assert_array_equal(binfo["angle"], info["angle"])
    for r1, r2 in zip(ra, rb, strict=True):  # the streams are left at the same place
        assert r1.bit_generator.state == r2.bit_generator.state


def test_the_shrink_cap_is_an_error_in_a_compiled_block():
    model = _model("dense")
    ess = EllipticalSlice(model, max_shrink=1)
    rngs = chain_rngs(2, 4)
    state = init_state(model, rngs)
    with pytest.raises(SamplerError, match="shrink cap"):
        ess.steps(state, rngs, 50)


def test_steps_refuses_bad_arguments():
    model = _model("dense")
    ess = EllipticalSlice(model)
    rngs = chain_rngs(2, 2)
    state = init_state(model, rngs)
    with pytest.raises(Exception, match="n_steps=0"):
        ess.steps(state, rngs, 0)
    with pytest.raises(Exception, match=r"trace has shape \(3, 2\)"):
        ess.steps(state, rngs, 4, trace=np.empty((3, 2)))


def test_many_chains_take_the_step_path():
    """Above MAX_FUSED_CHAINS the Generators' tuple would cost minutes of compilation."""
    from lattice_lgm.samplers.ess import MAX_FUSED_CHAINS

    model = _model("dense")
    ess = EllipticalSlice(model)
    state = init_state(model, chain_rngs(1, MAX_FUSED_CHAINS + 1))
    assert ess._fused(state) is None
    assert ess._fused(state.subset(list(range(MAX_FUSED_CHAINS)))) == "dense"
