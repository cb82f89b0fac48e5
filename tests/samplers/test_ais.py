"""AIS for probit GP classification: log Z against quadrature (HMC and RMHMC
transitions), Z unbiased over repeats, the tempered target's gradient; each check fails for
a planted bug.

False-failure rate: seven two-sided checks at 4 SE (6.3e-5 each): 4.4e-4 per run (the
RMHMC runs at 300 chains are in the slow tier, ~40 s each; a 60-chain one is not).
"""

from __future__ import annotations

import numpy as np
import pytest

from lattice_lgm.errors import InvalidDataError, InvalidParameterError
from lattice_lgm.samplers.ais import TemperedGPC, ais, geometric_schedule
from lattice_lgm.samplers.ep import expectation_propagation
from tests.samplers.test_ep import _quadrature

FALSE_FAILURE_RATE = 4.4e-4

#: a correlated pair with disagreeing labels (log Z by quadrature below)
K2 = np.array([[3.0, 2.4], [2.4, 3.0]])
Y2 = [1, 0]


@pytest.fixture(scope="module")
def exact():
    return _quadrature(K2, Y2)[0]


def test_the_gradient_is_the_log_density_s():
    rng = np.random.default_rng(0)
    ep = expectation_propagation(K2, Y2)
    t = TemperedGPC(K2, Y2, ep.mean, ep.cov)
    z = rng.standard_normal((3, 2))
    for beta in (0.0, 0.3, 1.0):
        _, g = t.log_gamma(z, beta)
        h = 1e-6
        for j in range(2):
            e = np.zeros(2)
            e[j] = h
            num = (t.log_gamma(z + e, beta)[0] - t.log_gamma(z - e, beta)[0]) / (2 * h)
            np.testing.assert_allclose(g[:, j], num, rtol=1e-6, atol=1e-8)
    # at β = 1 it is the posterior's log density up to the Jacobian |L_q| (constant)
    f = t.f_of(z)
    from scipy import special, stats

    want = (stats.multivariate_normal(np.zeros(2), K2).logpdf(f)
            + special.log_ndtr((2 * np.array(Y2) - 1) * f).sum(axis=1))
    np.testing.assert_allclose(t.log_gamma(z, 1.0)[0], want, rtol=1e-10)


@pytest.mark.parametrize("start", ["prior", "ep"])
def test_log_z_matches_quadrature(exact, start):
    """2000 chains, 100 temperatures: within 4 SE (the log's bias, ~½ SE², is negligible)."""
    q = {}
    if start == "ep":
        ep = expectation_propagation(K2, Y2)
        q = {"q_mean": ep.mean, "q_cov": ep.cov}
    res = ais(TemperedGPC(K2, Y2, **q), np.random.default_rng(1), chains=2000,
              betas=geometric_schedule(100), step_size=0.4, n_leapfrog=5)
    assert abs(res.log_z - exact) < 4 * res.log_z_se, (res.log_z, exact, res.log_z_se)
    assert res.log_z_se < 0.02 and 0.5 < res.acceptance.mean() <= 1.0


def _rmhmc_run(start, seed=3, chains=300, temps=30):
    t = (TemperedGPC.from_ep(K2, Y2, expectation_propagation(K2, Y2)) if start == "ep"
         else TemperedGPC(K2, Y2))
    return ais(t, np.random.default_rng(seed), chains=chains, betas=geometric_schedule(temps),
               step_size=0.5, n_leapfrog=3, transition="rmhmc")


@pytest.fixture(autouse=True)
def _one_thread():
    """RMHMC's per-chain 2 × 2 algebra: BLAS and Numba threads only wait for each other."""
    from lattice_lgm import threads

    with threads.using(threads.thread_budget(1, threads=1)):
        yield


def test_log_z_with_rmhmc_transitions_from_ep_matches_quadrature_quickly(exact):
    """60 chains, 10 temperatures (~2 s): a coarse estimate, still within 4 SE."""
    res = _rmhmc_run("ep", seed=4, chains=60, temps=10)
    assert abs(res.log_z - exact) < 4 * res.log_z_se, (res.log_z, exact, res.log_z_se)


@pytest.mark.slow
@pytest.mark.parametrize("start", ["prior", "ep"])
def test_log_z_with_rmhmc_transitions_matches_quadrature(exact, start):
    """300 chains, 30 temperatures of the report's RMHMC (the tempered metric)."""
    res = _rmhmc_run(start)
    assert abs(res.log_z - exact) < 4 * res.log_z_se, (res.log_z, exact, res.log_z_se)
    assert res.log_z_se < 0.05 and 0.5 < res.acceptance.mean() <= 1.0


@pytest.mark.slow
def test_the_rmhmc_check_sees_transitions_at_the_wrong_temperature(exact, monkeypatch):
    """RMHMC moves that leave the posterior, not γ_β, invariant bias the weights."""
    from lattice_lgm.samplers.rmhmc import RiemannGPC

    monkeypatch.setattr(RiemannGPC, "tempered", lambda self, beta: self)
    res = _rmhmc_run("prior")
    assert abs(res.log_z - exact) > 4 * res.log_z_se


def test_z_is_unbiased_over_repeats(exact):
    """Each run's mean weight is unbiased for Z: 300 small runs (20 chains, 10
    temperatures: crude, high-variance estimates) average to Z within 4 SE."""
    rng = np.random.default_rng(2)
    t = TemperedGPC(K2, Y2)
    z = np.array([np.exp(ais(t, rng, chains=20, betas=geometric_schedule(10, 1e-2),
                             step_size=0.4, n_leapfrog=3).log_z) for _ in range(300)])
    assert abs(z.mean() - np.exp(exact)) < 4 * z.std(ddof=1) / np.sqrt(len(z))


def test_the_check_sees_a_wrong_weight(exact, monkeypatch):
    """Weights that add log γ_β itself instead of the ratio of successive targets."""
    import lattice_lgm.samplers.ais as A

    real = A.TemperedGPC.log_q
    monkeypatch.setattr(A.TemperedGPC, "log_q", lambda self, z: 0.5 * real(self, z))
    res = ais(TemperedGPC(K2, Y2), np.random.default_rng(1), chains=2000,
              betas=geometric_schedule(100), step_size=0.4, n_leapfrog=5)
    assert abs(res.log_z - exact) > 4 * res.log_z_se


def test_bad_inputs_are_refused():
    t = TemperedGPC(K2, Y2)
    rng = np.random.default_rng(0)
    with pytest.raises(InvalidParameterError, match="increase strictly"):
        ais(t, rng, betas=[0.0, 0.5, 0.4, 1.0])
    with pytest.raises(InvalidParameterError, match="increase strictly"):
        ais(t, rng, betas=[0.1, 1.0])
    with pytest.raises(InvalidParameterError, match="step_size"):
        ais(t, rng, step_size=0.0)
    with pytest.raises(InvalidParameterError, match="chains"):
        ais(t, rng, chains=0)
    with pytest.raises(InvalidParameterError, match="beta_min"):
        geometric_schedule(10, beta_min=1.5)
    with pytest.raises(InvalidParameterError, match="positive definite"):
        TemperedGPC(np.ones((2, 2)), Y2)
    with pytest.raises(InvalidParameterError, match="both q_mean and q_cov"):
        TemperedGPC(K2, Y2, q_mean=np.zeros(2))
    with pytest.raises(InvalidDataError, match="label"):
        TemperedGPC(K2, [1, 3])
    with pytest.raises(InvalidParameterError, match="transition='nuts'"):
        ais(t, rng, transition="nuts")
    with pytest.raises(InvalidParameterError, match="n_fixed"):
        ais(t, rng, transition="rmhmc", n_fixed=0)
    ep = expectation_propagation(K2, Y2)
    with pytest.raises(InvalidParameterError, match="site precisions"):
        ais(TemperedGPC(K2, Y2, ep.mean, ep.cov), rng, transition="rmhmc")
    with pytest.raises(InvalidParameterError, match="q_tau"):
        TemperedGPC(K2, Y2, ep.mean, ep.cov, q_tau=-ep.tau_site)
    with pytest.raises(InvalidParameterError, match="n_temps"):
        geometric_schedule(0)
    with pytest.raises(InvalidParameterError, match="betas"):
        ais(t, rng, betas=[0.0, np.nan, 1.0])
    with pytest.raises(InvalidParameterError, match="one per temperature"):
        ais(t, rng, betas=[0.0, 0.5, 1.0], step_size=[0.1, 0.2, 0.3])
    with pytest.raises(InvalidParameterError, match="one per temperature"):
        ais(t, rng, betas=[0.0, 0.5, 1.0], step_size=[0.1, -0.2])
    with pytest.raises(InvalidParameterError, match="step_size"):
        ais(t, rng, step_size="big")


def test_a_step_per_temperature_is_the_same_as_one_step_when_equal(exact):
    """Per-temperature steps: equal values give the scalar's run exactly; the estimate
    with steps halving towards β = 1 still matches quadrature (4 SE)."""
    b = geometric_schedule(20)
    t = TemperedGPC.from_ep(K2, Y2, expectation_propagation(K2, Y2))
    one = ais(t, np.random.default_rng(5), chains=200, betas=b, step_size=0.4, n_leapfrog=3)
    per = ais(t, np.random.default_rng(5), chains=200, betas=b, step_size=np.full(20, 0.4),
              n_leapfrog=3)
    np.testing.assert_array_equal(one.log_weights, per.log_weights)
    res = ais(t, np.random.default_rng(6), chains=2000, betas=b,
              step_size=np.geomspace(0.8, 0.4, 20), n_leapfrog=3)
    assert abs(res.log_z - exact) < 4 * res.log_z_se


def test_a_diverging_hmc_transition_is_rejected_not_raised():
    """A step far too large sends trajectories to inf/NaN: those chains keep their state."""
    from lattice_lgm.samplers.ais import hmc_transition

    t = TemperedGPC(K2 * 1e3 + np.eye(2), Y2)
    z = np.random.default_rng(0).standard_normal((4, 2))
    new, acc = hmc_transition(t, z, 1.0, np.random.default_rng(1), 1e6, 20)
    np.testing.assert_array_equal(new, z)
    assert acc == 0.0
