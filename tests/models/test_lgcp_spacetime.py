"""Space-time LGCPs: the separable kernel's hyperparameters in the samplers, and the LGCP glue.

The statistical test starts independent chains at exact posterior draws (1-D quadrature of the
sampled range on a fine log grid, exact Gaussian conditionals of the field) and runs a few sweeps;
an invariant sampler leaves the final draws distributed as the target, so the KS test is exact up
to the quadrature grid.  Level ``ALPHA = 1e-4`` per test over 4 tests: family-wise
false-failure rate ≤ 4e-4 per run.  Seeds were fixed before the first run and not tuned.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from lattice_lgm import LGCP, Lattice, analysis
from lattice_lgm.covariance import Matern, SpaceTime
from lattice_lgm.errors import InvalidParameterError, UnsupportedOperationError
from lattice_lgm.hyperpriors import LogNormal
from lattice_lgm.likelihoods import Gaussian
from lattice_lgm.models import LatentGaussianModel
from lattice_lgm.models.lgcp_start import initial_state, prepare
from lattice_lgm.priors import CirculantPrior, DensePrior
from lattice_lgm.samplers import (
    EllipticalSlice,
    Gibbs,
    HyperMove,
    chain_rngs,
    default_sweep,
    state_from_fields,
)
from tests.samplers.cases import conditional_draws, log_marginal

#: family-wise false-failure rate of this module per run (module docstring); summed by conftest.py
FALSE_FAILURE_RATE = 4e-4

ALPHA = 1e-4
SHAPE = (5, 3, 3)
UPPER = {"range": 2.5, "range_t": 4.0}


def _model(backend: str, name: str) -> LatentGaussianModel:
    lat = Lattice(SHAPE, dims=("t", "y", "x"))
    k = SpaceTime(Matern(1.5, range=1.5), Matern(0.5, range=2.0), sd=1.0)
    prior = (CirculantPrior(lat, k, max_range=(UPPER["range_t"], UPPER["range"], UPPER["range"]))
             if backend == "circulant" else DensePrior.from_lattice(lat, k, jitter=0.0))
    y = np.random.default_rng(5).normal(size=SHAPE)
    centre = 1.5 if name == "range" else 2.0
    return LatentGaussianModel(prior, Gaussian(y, noise_sd=0.5), hyperpriors={
        name: LogNormal(np.log(centre), 0.5, upper=UPPER[name])})


@pytest.mark.statistical
@pytest.mark.parametrize("backend", ["dense", "circulant"])
@pytest.mark.parametrize("name", ["range", "range_t"])
def test_spacetime_ranges_match_quadrature(backend, name):
    """The spatial range and range_t of SpaceTime are sampled from their exact posterior.

    The quadrature uses the dense oracle for both backends (the circulant prior's window
    marginal must equal it)."""
    model = _model(backend, name)
    oracle = _model("dense", name)
    hp = model.hyperpriors[name]
    lo = np.log(0.2)
    hi = np.log(UPPER[name])
    edges = np.linspace(lo, hi, 201)
    mid = 0.5 * (edges[1:] + edges[:-1])
    lp = np.array([log_marginal(oracle, {name: np.exp(u)}) + hp.logpdf_unconstrained(u)
                   for u in mid])
    p = np.exp(lp - lp.max())
    p /= p.sum()
    cum = np.concatenate([[0.0], np.cumsum(p)])
    rng = np.random.default_rng(17)
    cell = rng.choice(len(mid), size=150, p=p)
    u = edges[cell] + rng.random(150) * (edges[1] - edges[0])
    thetas = [{name: float(np.exp(v))} for v in u]
    f = np.concatenate([conditional_draws(model, t, rng, 1) for t in thetas])
    rngs = chain_rngs(18, 150)
    state = state_from_fields(model, f, thetas, rngs)
    sweep = Gibbs(HyperMove(model, "prior-white"), EllipticalSlice(model), n_latent=2)
    for _ in range(3):
        state, info = sweep.step(state, rngs)
    pval = stats.kstest(state.theta[name], lambda x: np.interp(np.log(x), edges, cum)).pvalue
    assert pval > ALPHA, f"{backend}/{name}: KS p = {pval}"
    assert info["n_cov"].sum() > 0
    # the chains' priors carry the sampled value (the kernel really moved)
    got = [s.kernel.params[name] for s in state.priors]
    np.testing.assert_allclose(got, state.theta[name], rtol=1e-12)


def _pattern(n=300, seed=0):
    rng = np.random.default_rng(seed)
    return np.column_stack([rng.uniform(0, 100, (n, 2)), rng.uniform(0, 20, n)])


def _lattice():
    return Lattice((10, 8, 8), spacing=(2.0, 12.5, 12.5), dims=("t", "y", "x"), units="m")


def test_space_time_lgcp_builds_runs_and_reports():
    m = LGCP(_pattern(), (0, 100, 0, 100), lattice=_lattice(), time_units="day")
    assert m.lgm.hyper_names == ("sd", "range", "mean", "range_t")
    assert m.prior.sized_for_range == (10.0, 50.0, 50.0)  # (T/2, L/2, L/2)
    assert m.prior_spec["range_t"].upper == 10.0
    assert prepare(m).start.theta["range_t"] == pytest.approx(m.prior_spec["range_t"].ppf(0.5))
    text = m.describe()
    assert "range_t (day)" in text and "over 20 day" in text and "2 day × 12.5 × 12.5 m" in text
    # exposure: area × time step, the same in every time slice
    np.testing.assert_allclose(m.exposure, 12.5 * 12.5 * 2.0)
    assert m.counts.sum() == 300
    rngs = chain_rngs(2, 2)
    state = initial_state(m, rngs)[0]
    sweep = default_sweep(m.lgm, n_latent=2)
    states = []
    for _ in range(3):
        state, _ = sweep.step(state, rngs)
        states.append(state)
    post = analysis.posterior_dataset(m, states)
    assert post["f"].dims == ("chain", "draw", "t", "y", "x")
    assert "range_t" in post
    lam = analysis.intensity(m, post)
    assert lam.attrs["units"] == "points per m²·day"
    total = analysis.expected_counts(m, post)
    assert total.shape == (2, 3)
    with pytest.warns(UserWarning, match="range_t"):
        out = analysis.resolution_check(m, post.assign(range_t=post["range_t"] * 0 + 3.0))
    assert out["steps_per_range_t"] == pytest.approx(1.5)
    assert out["h"] == 12.5  # the spatial cell side, not the time step
    table = analysis.summary(m, post)
    assert "range_t" in table.index
    with pytest.raises(UnsupportedOperationError, match="planar"):
        analysis.second_order_check(m, post, nsim=19, rng=np.random.default_rng(0))
    pats = analysis.predictive_patterns(m, post, 2, np.random.default_rng(1))
    for p in pats:  # (x, y, t) inside the window and the time extent
        assert p.shape[1] == 3
        assert np.all((p[:, :2] >= 0) & (p[:, :2] <= 100)) and np.all((p[:, 2] >= 0)
                                                                     & (p[:, 2] <= 20))


def test_space_time_refusals():
    with pytest.raises(UnsupportedOperationError, match="gmrf"):
        LGCP(_pattern(), (0, 100, 0, 100), lattice=_lattice(), backend="gmrf")
    with pytest.raises(InvalidParameterError, match="range_t_prior"):
        LGCP(_pattern()[:, :2], (0, 100, 0, 100), cell_size=10.0,
             range_t_prior=LogNormal(0.0, 1.0, upper=5.0))
    with pytest.raises(InvalidParameterError, match="range_t"):
        LGCP(_pattern(), (0, 100, 0, 100), lattice=_lattice(),
             range_t_prior=LogNormal(0.0, 1.0))  # no upper bound: the torus cannot be sized
