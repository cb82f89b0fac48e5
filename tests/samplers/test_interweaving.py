"""Ancillarity–sufficiency interweaving (LGCP ``representation="asis"``): exactness.

The sweep is ``fixed`` (θ | f), then ``prior-white`` (θ | ν, ν recomputed at the new θ), then
elliptical slice updates.  As in ``test_hyper``: chains start at exact posterior draws (quadrature
over (sd, range), exact conditional fields), take 3 sweeps, and a KS test at level 1e-4 compares
the final (sd, range) with the quadrature marginals; 2 backends × 2 parameters: family-wise
false-failure rate ≤ 4e-4.  Seeds fixed, not tuned.  A broken fixed-f move (its prior density
term dropped) makes the same test fail.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from lattice_lgm.samplers import (
    EllipticalSlice,
    Gibbs,
    HyperMove,
    _hyper_reps,
    chain_rngs,
    default_method_for,
    default_sweep,
    state_from_fields,
)

from .cases import HAS_CHOLMOD, Grid2D, conditional_draws, gaussian_model

#: family-wise false-failure rate of this module per run (module docstring); summed by conftest.py
FALSE_FAILURE_RATE = 4e-4

ALPHA = 1e-4
N_CHAINS = 120
_DATA = np.random.default_rng(20261122).normal(size=12)
_GRIDS: dict = {}


def _run(backend: str, seed: int, n_sweeps: int = 3):
    model = gaussian_model(backend, _DATA, noise_sd=0.5)
    if backend not in _GRIDS:
        _GRIDS[backend] = Grid2D(model, 80)
    grid = _GRIDS[backend]
    rng = np.random.default_rng(seed)
    thetas = grid.sample(rng, N_CHAINS)
    f = np.concatenate([conditional_draws(model, dict(t, mean=0.0), rng, 1) for t in thetas])
    rngs = chain_rngs(seed, N_CHAINS)
    state = state_from_fields(model, f, thetas, rngs)
    sweep = Gibbs([HyperMove(model, "fixed"), HyperMove(model, "prior-white")],
                  EllipticalSlice(model), n_latent=2)
    for _ in range(n_sweeps):
        state, info = sweep.step(state, rngs)
    return [stats.kstest(state.theta[k], grid.cdf(k)).pvalue for k in ("sd", "range")], info


@pytest.mark.statistical
@pytest.mark.parametrize("backend", ["dense", "gmrf"])
def test_interweaving_leaves_the_posterior_invariant(backend):
    if backend == "gmrf" and not HAS_CHOLMOD:
        pytest.skip("scikit-sparse missing")
    p, info = _run(backend, seed=51)
    assert min(p) > ALPHA, p
    assert info["accepted/0:fixed/slice"].sum() > 0 and info["accepted/1:prior-white/slice"].sum()


@pytest.mark.slow
@pytest.mark.statistical
def test_a_broken_centred_move_is_detected(monkeypatch):
    """Drop N(f; 0, K_θ) from the fixed-f target: θ | f then follows the hyperprior alone."""
    orig = _hyper_reps._Fixed.evaluate

    def broken(self, theta, prior):
        val, prop = orig(self, theta, prior)
        return val - float(prior.logpdf(self.ch.f)[0]), prop

    def broken_init(self, ctx, ch, moves_mean):
        self.ctx, self.ch, self.moves_mean = ctx, ch, moves_mean
        self.logp0 = ch.loglik if moves_mean else 0.0

    monkeypatch.setattr(_hyper_reps._Fixed, "evaluate", broken)
    monkeypatch.setattr(_hyper_reps._Fixed, "__init__", broken_init)
    p, _ = _run("dense", seed=52, n_sweeps=6)
    assert min(p) < ALPHA, p


def test_lgcp_sampler_builds_the_interweaving_sweep():
    from lattice_lgm import LGCP

    rng = np.random.default_rng(0)
    pts = rng.uniform(0, 100, size=(200, 2))
    m = LGCP(pts, (0, 100, 0, 100), cell_size=10.0, backend="dense")
    sw = default_sweep(m.lgm, "asis")
    assert [h.representation for h in sw.hyper] == ["fixed", "prior-white"]
    assert default_method_for(m.backend) == "prior-white"
    # a smooth kernel on the torus (Matérn ν > 5) has no fixed-f move, so no interweaving
    from lattice_lgm.errors import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="'fixed' is not available"):
        default_sweep(LGCP(pts, (0, 100, 0, 100), cell_size=10.0, nu=6.0).model, "asis")
