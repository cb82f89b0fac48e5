"""A lattice state as the dense sampler's latent history (``gpds.warm``) and its use as a start.

* Each rejection lies in a cell the lattice history put it in, the counts per cell being the
  lattice model's draw given ``g`` (same generator, same draw); θ is the state's; the values
  are finite at every point.
* ``run_chain(init=...)`` starts there: with one count move per sweep ``M`` changes by at most
  three, so the first kept state is within three of the start's ``M`` (the cold start has none).

No statistical tests: no false-failure budget is used.
"""

from __future__ import annotations

import numpy as np
import pytest

from lattice_lgm.covariance import SquaredExponential
from lattice_lgm.errors import InvalidParameterError
from lattice_lgm.gpds import GaussianBase, UniformBase
from lattice_lgm.gpds.lattice import LatticeGPDS, LatticeSweep
from lattice_lgm.gpds.predict import run_chain
from lattice_lgm.gpds.warm import lattice_history
from lattice_lgm.hyperpriors import LogNormal


def _model(base):
    rng = np.random.default_rng(11)
    data = base.sample(rng, 30)
    return LatticeGPDS(data, base, cells=(16, 12),
                       kernel=SquaredExponential(sd=2.0, lengthscale=0.4),
                       hyperpriors={"sd": LogNormal(np.log(2.0), 0.5),
                                    "range": LogNormal(np.log(0.8), 0.5, upper=2.0)})


def _state(model, sweeps=5):
    rngs = [np.random.default_rng(12)]
    st = model.init_state(rngs)
    sw = LatticeSweep(model)
    for _ in range(sweeps):
        st, _ = sw.step(st, rngs)
    return st


@pytest.mark.parametrize("base", [UniformBase.create([0.0, 0.0], [2.0, 1.5]),
                                  GaussianBase.create([0.5, 1.0], [0.25, 1.0])])
def test_positions_lie_in_their_cells(base):
    m = _model(base)
    rng = np.random.default_rng(1)
    cells = rng.integers(0, m.lattice.size, 2000)
    np.testing.assert_array_equal(m.cell_of(m.positions_in(cells, rng)), cells)


def test_the_history_is_the_lattice_history_given_g():
    m = _model(GaussianBase.create([0.5, 1.0], [0.25, 1.0]))
    st = _state(m)
    hist, kernel = lattice_history(m, st, np.random.default_rng(5))
    counts = m.draw_history(m.eta(st, 0), np.random.default_rng(5)).reshape(-1)
    np.testing.assert_array_equal(hist.data, m.data)
    np.testing.assert_array_equal(
        np.bincount(m.cell_of(hist.rejections), minlength=m.lattice.size), counts)
    assert kernel == st.priors[0].kernel
    assert np.isclose(kernel.sd, st.theta["sd"][0])
    assert hist.g.shape == (len(m.data) + counts.sum(),) and np.all(np.isfinite(hist.g))


def test_run_chain_starts_at_init():
    m = _model(UniformBase.create([0.0, 0.0], [2.0, 1.5]))
    st = _state(m)
    rng = np.random.default_rng(6)
    hist, kernel = lattice_history(m, st, rng)
    assert hist.n_rejections > 10
    states, _, _ = run_chain(m.data, rng, kernel, m.base, 1, init=hist, n_count=1)
    assert abs(states[0].n_rejections - hist.n_rejections) <= 3
    with pytest.raises(InvalidParameterError, match=r"init\.data"):
        run_chain(m.data[:-1], rng, kernel, m.base, 1, init=hist)
