"""The lattice-scale GPDS: its geometry, its exact latent history, its posterior.

* The rejection counts drawn given ``g`` (negative binomial ``M``, multinomial cells) have the
  distribution of Algorithm 1's rejections run on the lattice model to its ``N``th acceptance
  (simulated directly, proposal by proposal).
* The sweep (history, then elliptical slice sampling of ``g``) targets the lattice model's
  posterior ``p(g | D) ∝ GP(g) Π_c Φ(g_c)^{a_c} / Z[g]^N``: against importance sampling from
  the prior, on a 1-D lattice of 12 cells.
* Against the dense (continuous-``g``) GPDS: the lattice predictive density on a fine lattice
  agrees with the numerical integration of tests/gpds/test_predict.py.

False failures (union bound): every check is two-sided at 5 SEs; the simulation checks use
thousands of independent replicates (normal: 5.7e-7 each), the MCMC checks batch means with
19 degrees of freedom (8.0e-5 each): 4 + 4 + 6 + 3 MCMC points (the posterior under both
augmentations), 4 simulation points; the
predictive samples' χ² and KS tests at 1e-4 each, two bases.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special

from lattice_lgm.covariance import SquaredExponential
from lattice_lgm.errors import InvalidDataError, InvalidParameterError
from lattice_lgm.gpds import GaussianBase, UniformBase
from lattice_lgm.gpds.lattice import (
    REJECTIONS,
    LatticeGPDS,
    LatticeSweep,
    predictive_density,
)
from lattice_lgm.gpds.predict import batch_means_se

FALSE_FAILURE_RATE = 17 * 8.0e-5 + 4 * 5.7e-7 + 4 * 1e-4
Z_SE = 5.0


def test_cell_masses_counts_and_cells():
    base = GaussianBase.create([0.5, -1.0], [1.0, 4.0])
    data = np.array([[0.5, -0.5], [0.6, -0.6], [3.0, 5.0]])
    m = LatticeGPDS(data, base, cells=(10, 6), kernel=SquaredExponential(sd=1.0,
                                                                          lengthscale=1.0))
    assert m.lattice.shape == (6, 10)  # array order (y, x)
    assert np.isclose(m.masses.sum(), 1.0)
    # Gaussian masses: products of normal CDF differences over each axis' edges
    ex = np.linspace(0.5 - 4, 0.5 + 4, 11)
    mx = np.diff(special.ndtr(ex - 0.5))
    assert np.allclose(m.masses.sum(axis=0), mx / mx.sum())
    assert m.data_counts.sum() == 3 and m.data_counts[3, 5] == 2  # one cell
    centres = m.lattice.cell_centers()[:, ::-1]  # (y, x) -> the data's (x, y)
    np.testing.assert_array_equal(m.cell_of(centres), np.arange(m.lattice.size))
    assert 0 < m.lost_mass < 2e-4
    u = LatticeGPDS(np.array([[0.2]]), UniformBase.create([0.0], [1.0]), cells=8)
    assert np.allclose(u.masses, 1 / 8) and u.lost_mass == 0.0


def _simulate_history(model, eta, n, rng):
    """Algorithm 1 on the lattice model, proposal by proposal: rejections per cell."""
    phi = special.expit(eta)
    counts = np.zeros(len(eta), dtype=np.int64)
    acc = 0
    masses = model.masses.reshape(-1)
    while acc < n:
        c = rng.choice(len(eta), p=masses)
        if rng.random() < phi[c]:
            acc += 1
        else:
            counts[c] += 1
    return counts


def _history_check(draw, r=4000):
    data = np.array([[0.1], [0.5], [0.9]])
    model = LatticeGPDS(data, UniformBase.create([0.0], [1.0]), cells=8)
    eta = np.linspace(-2.0, 1.5, 8)
    rng = np.random.default_rng(11)
    sim = np.array([_simulate_history(model, eta, 3, rng) for _ in range(r)])
    got = np.array([draw(model, eta, rng).reshape(-1) for _ in range(r)])
    out = []
    for f in (lambda c: c.sum(axis=1), lambda c: c.sum(axis=1) ** 2, lambda c: c[:, 0],
              lambda c: c[:, 7]):
        a, b = f(sim).astype(float), f(got).astype(float)
        out.append((a.mean() - b.mean()) / np.hypot(a.std() / np.sqrt(r), b.std() / np.sqrt(r)))
    return np.array(out)


def test_the_history_given_g_is_algorithm_1s():
    z = _history_check(lambda m, eta, rng: m.draw_history(eta, rng))
    assert np.all(np.abs(z) < Z_SE), z


def test_the_check_sees_rejections_placed_by_pi_alone(monkeypatch):
    """Rejections spread by ``π_c`` alone (the ``1 − Φ(g_c)`` forgotten): the check fails."""
    import lattice_lgm.gpds.lattice as L

    monkeypatch.setattr(L, "_one_minus", lambda link_name, eta: 0.5 + 0 * eta)
    z = _history_check(lambda m, eta, rng: m.draw_history(eta, rng))
    assert np.any(np.abs(z) > Z_SE)


KERNEL = SquaredExponential(sd=1.5, lengthscale=0.15)
DATA = np.array([[0.05], [0.12], [0.2], [0.55], [0.6], [0.93]])


def _reference(model, n_draws=200_000, seed=0):
    """Posterior means of g at three cells and of Z by importance sampling from the prior."""
    g = model.prior.sample(np.random.default_rng(seed), n_draws).reshape(n_draws, -1)
    p = special.expit(g)
    z = p @ model.masses.reshape(-1)
    logw = (model.data_counts.reshape(-1) * np.log(p)).sum(axis=1) - len(DATA) * np.log(z)
    w = np.exp(logw - logw.max())
    stats = np.column_stack([g[:, [1, 5, 10]], z])
    est = (w[:, None] * stats).sum(axis=0) / w.sum()
    se = np.sqrt(((w[:, None] * (stats - est)) ** 2).sum(axis=0)) / w.sum()
    return est, se


def _posterior_check(model, n_sweeps=1500, burn=100, augmentation="history"):
    sweep = LatticeSweep(model, n_latent=2, augmentation=augmentation)
    rngs = [np.random.default_rng([7, c]) for c in range(2)]
    state = model.init_state(rngs)
    rows = []
    for i in range(burn + n_sweeps):
        state, _ = sweep.step(state, rngs)
        if i >= burn:
            rows.append([np.r_[model.eta(state, c)[[1, 5, 10]], model.normaliser(
                model.eta(state, c))] for c in range(2)])
    v = np.array(rows)  # (sweeps, chains, 4)
    est = v.mean(axis=(0, 1))
    se = np.sqrt(sum(batch_means_se(v[:, c]) ** 2 for c in range(2))) / 2
    ref, ref_se = _reference(model)
    return (est - ref) / np.hypot(se, ref_se)


@pytest.fixture(scope="module")
def small_model():
    return LatticeGPDS(DATA, UniformBase.create([0.0], [1.0]), cells=12, kernel=KERNEL)


@pytest.mark.parametrize("augmentation", ["history", "scale"])
def test_the_sweep_targets_the_lattice_posterior(small_model, augmentation):
    z = _posterior_check(small_model, augmentation=augmentation)
    assert np.all(np.abs(z) < Z_SE), z


def test_the_check_sees_a_scale_with_the_wrong_shape(small_model, monkeypatch):
    """``λ | g ~ Gamma(N + 5, Z[g])`` (a wrong prior on the scale): the check fails."""
    real = LatticeGPDS.model_for_scale
    monkeypatch.setattr(LatticeGPDS, "model_for_scale",
                        lambda self, scale: real(self, scale * (len(DATA) + 5) / len(DATA)))
    z = _posterior_check(small_model, n_sweeps=600, augmentation="scale")
    assert np.any(np.abs(z) > Z_SE)


def test_the_check_sees_a_sweep_without_rejections(small_model, monkeypatch):
    """With ``M = 0`` at every sweep (the latent history left out: the field sees
    ``Π Φ(g_n)`` without ``1/Z[g]^N``) the check fails.  (Swapping ``Z`` and ``1 − Z`` in the
    negative binomial is not seen: ``Z[g]`` is near ½ here.)"""
    class NoRejections:
        def __init__(self, rng):
            self.rng = rng

        def negative_binomial(self, n, p):
            return 0

        def __getattr__(self, name):
            return getattr(self.rng, name)

    real = LatticeGPDS.draw_history
    monkeypatch.setattr(LatticeGPDS, "draw_history",
                        lambda self, eta, rng: real(self, eta, NoRejections(rng)))
    z = _posterior_check(small_model, n_sweeps=600)
    assert np.any(np.abs(z) > Z_SE)


def test_lattice_predictive_density_agrees_with_the_dense_gpds():
    """1-D, the setting of test_predict.py: a fine lattice against the continuous-g integral."""
    from tests.gpds.test_predict import BASE, TEST
    from tests.gpds.test_predict import DATA as D
    from tests.gpds.test_predict import KERNEL as K
    from tests.gpds.test_predict import _reference as ref

    model = LatticeGPDS(D, BASE, cells=256, kernel=K)
    assert model.interpolation_bound() < 0.01
    sweep = LatticeSweep(model, n_latent=2)
    rngs = [np.random.default_rng(3)]
    state = model.init_state(rngs)
    kept = []
    for i in range(1700):
        state, _ = sweep.step(state, rngs)
        if i >= 200:
            kept.append(state)
    est = predictive_density(model, kept, TEST)
    r, r_se = ref()
    z = (est.density - r) / np.hypot(est.se, r_se)
    assert np.all(np.abs(z) < Z_SE), (est.density, r)


def test_the_sweep_records_its_history():
    m = LatticeGPDS(DATA, UniformBase.create([0.0], [1.0]), cells=12, kernel=KERNEL)
    s0 = m.init_state([np.random.default_rng(0), np.random.default_rng(5)], chains=[4, 9])
    s1, info = LatticeSweep(m, n_latent=1).step(
        s0, [np.random.default_rng(1), np.random.default_rng(2)])
    assert s1.chains == (4, 9)
    np.testing.assert_array_equal(s1.extras[REJECTIONS].sum(axis=(1,)), info["n_rejections"])
    again = LatticeSweep(m, n_latent=1).step(
        s0, [np.random.default_rng(1), np.random.default_rng(2)])[0]
    np.testing.assert_array_equal(again.f, s1.f)  # same seed, same draws


def test_bad_inputs_are_refused_by_name():
    box = UniformBase.create([0.0, 0.0], [1.0, 1.0])
    with pytest.raises(InvalidDataError, match=r"data\[1\]"):
        LatticeGPDS([[0.5, 0.5], [1.5, 0.5]], box)
    with pytest.raises(InvalidDataError, match="data"):
        LatticeGPDS([[0.5, np.nan]], box)
    with pytest.raises(InvalidDataError, match="shape"):
        LatticeGPDS(np.zeros((0, 2)), box)
    with pytest.raises(InvalidParameterError, match="cells"):
        LatticeGPDS([[0.5, 0.5]], box, cells=(4,))
    with pytest.raises(InvalidParameterError, match="diagonal"):
        LatticeGPDS([[0.0, 0.0]], GaussianBase.create([0.0, 0.0], [[1.0, 0.5], [0.5, 1.0]]))
    with pytest.raises(InvalidParameterError, match="link"):
        LatticeGPDS([[0.5, 0.5]], box, link_name="tanh")
    from lattice_lgm.hyperpriors import LogNormal

    with pytest.raises(InvalidParameterError, match="no upper bound"):
        LatticeGPDS([[0.5, 0.5]], box, hyperpriors={"range": LogNormal(0.0, 1.0)})
    with pytest.raises(InvalidParameterError, match="exceeds the range prior"):
        LatticeGPDS([[0.5, 0.5]], box, kernel=SquaredExponential(sd=1.0, lengthscale=0.1),
                    hyperpriors={"range": LogNormal(-3.0, 0.5, upper=0.05)})
    with pytest.raises(InvalidParameterError, match="lengthscale"):
        LatticeGPDS([[0.5, 0.5]], box, hyperpriors={"lengthscale": LogNormal(0.0, 1.0)})
    m = LatticeGPDS([[0.5, 0.5]], box, cells=4)
    with pytest.raises(InvalidParameterError, match="n_latent"):
        LatticeSweep(m, n_latent=0)


@pytest.mark.parametrize("base", [UniformBase.create([0.0, 0.0], [1.0, 2.0]),
                                  GaussianBase.create([0.5, 1.0], [0.25, 1.0])])
def test_predictive_samples_follow_the_states_density(base):
    """Points drawn from one state: their cells' frequencies are π_c Φ(g_c) / Z (χ², 1e-4),
    and they stay in their cells' box."""
    from scipy import stats

    m = LatticeGPDS([[0.5, 1.0]], base, cells=(5, 4))
    rng = np.random.default_rng(3)
    eta = m.prior.sample(rng, 1).reshape(-1)
    x = m.sample_points(eta, 20_000, rng)
    counts = np.bincount(m.cell_of(x), minlength=m.lattice.size)
    p = m.masses.reshape(-1) * special.expit(eta)
    assert stats.chisquare(counts, 20_000 * p / p.sum()).pvalue > 1e-4
    assert np.all((x >= m._lo) & (x <= m._hi))
    # within its cell a point follows π: the x coordinates against the mixture's CDF (KS)
    assert stats.kstest(x[:, 0], lambda v: _x_cdf(m, p / p.sum(), v)).pvalue > 1e-4


def _x_cdf(m, w, v):
    """CDF of the x coordinate: cells' weights times π's within-cell CDF along x."""
    cols = w.reshape(m.lattice.shape).sum(axis=0)  # weight per x column
    edges = np.linspace(m._lo[0], m._hi[0], len(cols) + 1)
    if isinstance(m.base, UniformBase):
        F = lambda z: z  # noqa: E731
    else:
        F = lambda z: special.ndtr((z - m.base.mean[0]) / m.base.chol[0, 0])  # noqa: E731
    a, b = F(edges[:-1]), F(edges[1:])
    frac = np.clip((F(np.asarray(v)[:, None]) - a) / (b - a), 0.0, 1.0)
    return frac @ cols


def test_the_check_sees_uniform_positions_under_a_gaussian_base(monkeypatch):
    """Positions uniform within their cells under a Gaussian π: the KS check fails."""
    from scipy import stats

    base = GaussianBase.create([0.5, 1.0], [0.25, 1.0])
    m = LatticeGPDS([[0.5, 1.0]], base, cells=(5, 4))
    m.base = UniformBase.create(m._lo, m._hi)  # the bug: the sampler reads π as uniform
    rng = np.random.default_rng(3)
    eta = m.prior.sample(rng, 1).reshape(-1)
    x = m.sample_points(eta, 20_000, rng)
    m.base = base
    p = m.masses.reshape(-1) * special.expit(eta)
    assert stats.kstest(x[:, 0], lambda v: _x_cdf(m, p / p.sum(), v)).pvalue < 1e-4
