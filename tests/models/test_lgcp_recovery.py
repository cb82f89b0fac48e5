"""Slow tier: a simulated LGCP is recovered within its credible intervals at the stated coverage."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lattice_lgm import LGCP, analysis
from lattice_lgm.covariance import Matern
from lattice_lgm.models.lgcp_start import initial_state
from lattice_lgm.samplers import chain_rngs, default_sweep
from lattice_lgm.simulate import simulate_lgcp

#: family-wise false-failure rate of this module per run, summed by conftest.py
#: (the 90 % band of the recovery fraction and the 99.9 % intervals (docstring))
FALSE_FAILURE_RATE = 1e-2

pytestmark = [pytest.mark.slow, pytest.mark.statistical]


def test_simulated_lgcps_are_recovered_at_the_stated_coverage():
    """Ten data sets from a known LGCP (Matérn 3/2, sd 1, range 30, ≈ 400 points on a 100 × 100
    square, 5-unit cells — the model's own lattice, so the simulator is the model exactly), each
    fitted with the default LGCP (PC priors, circulant prior, prior-white hyperparameter slice +
    10 elliptical slice updates per sweep, 4 chains × 600 sweeps, first 200 dropped).

    Checked: the 90 % pointwise intervals of the log-intensity cover the true log-intensity in
    (0.80, 0.98) of the 4000 cell-data set pairs (calibrated inference gives 0.90 in expectation
    over data sets; the spread of the pooled fraction over ten spatially correlated data sets
    is ≈ 0.02–0.03, so the band is ≥ 3 SD wide on each side: false-failure rate < 1e-2
    including MCMC error); and the observed count lies inside the central 99 % interval of its
    posterior expected count in every data set (each fails with probability ≈ 0.01 when
    calibrated: ≈ 0.1 over ten, so this check uses the 99.9 % interval: ≈ 1e-2 in all).
    """
    sd, rng_range, side, h = 1.0, 30.0, 100.0, 5.0
    mean = math.log(0.04) - sd**2 / 2
    covered, cells = 0, 0
    for rep in range(10):
        rng = np.random.default_rng(500 + rep)
        pts, field, lat = simulate_lgcp((0, side, 0, side),
                                        kernel=Matern(1.5, sd=sd, range=rng_range),
                                        mean=mean, cell_size=h, rng=rng)
        m = LGCP(pts, (0, side, 0, side), cell_size=h)
        assert m.lattice.shape == lat.shape
        rngs = chain_rngs(rep, 4)
        state = initial_state(m, rngs)[0]
        sweep = default_sweep(m.lgm)
        states = []
        for k in range(600):
            state, _ = sweep.step(state, rngs)
            if k >= 200:
                states.append(state)
        post = analysis.posterior_dataset(m, states)
        eta = analysis.log_intensity(m, post)
        lo = eta.quantile(0.05, dim=("chain", "draw")).values
        hi = eta.quantile(0.95, dim=("chain", "draw")).values
        truth = mean + field
        covered += int(((truth >= lo) & (truth <= hi)).sum())
        cells += truth.size
        tot = analysis.expected_counts(m, post)
        q = tot.quantile([0.0005, 0.9995], dim=("chain", "draw")).values
        assert q[0] <= m.n_points <= q[1], (rep, m.n_points, q)
    frac = covered / cells
    print(f"pointwise 90% coverage of the log-intensity: {frac:.3f}")
    assert 0.80 < frac < 0.98
