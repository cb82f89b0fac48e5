"""Each GP classification sweep samples the posterior: the mean (and variance) of ``f`` on a
two-point problem against quadrature, within Monte Carlo error; planted bugs fail the check.

The problem: two inputs with prior correlation 0.8 and variance 3 (the squared-exponential
kernel at distance √(−2 log 0.8), sd √3) and disagreeing labels, whose posterior mean is known
by quadrature on an 801² grid (``tests.samplers.test_ep._quadrature``; its error, ~1e-6, is far
below the Monte Carlo errors here).  Each sweep runs 2 chains from EP's ``q`` with fixed seeds;
the posterior mean of each ``f_i`` and of ``(f_i − m_i)²`` (its variance, ``m_i`` quadrature's
mean) is compared with quadrature at ``Z`` times ArviZ's ``mcse(method="mean")``.

False-failure rate: 4 sweeps (HMC in two coordinates) × 2 coordinates × 2 moments = 16
two-sided checks at ``Z`` = Φ⁻¹(1 − PER_CHECK/2) with PER_CHECK = 1e-4 (Z = 3.89): 1.6e-3.
The planted-bug tests (slow tier) assert that the check *fails*; with the bug the means are
many errors away, so their false-failure rate (the check passing despite the bug) is not a
false failure of the suite.
"""

from __future__ import annotations

import math

import arviz as az
import numpy as np
import pytest
from scipy import special

from lattice_lgm import threads
from lattice_lgm.gpc import GPClassification
from lattice_lgm.likelihoods import Bernoulli
from lattice_lgm.models import LatentGaussianModel
from lattice_lgm.samplers import chain_rngs
from lattice_lgm.samplers import rmhmc as rmhmc_mod
from tests.samplers.test_ep import _quadrature

PER_CHECK = 1e-4
#: the z-threshold of each two-sided check
Z = float(special.ndtri(1.0 - PER_CHECK / 2.0))
FALSE_FAILURE_RATE = 16 * PER_CHECK
#: (tune, draws) per chain of each sweep
LENGTHS = {"rmhmc": (200, 4000), "hmc": (300, 3000), "ess": (50, 1500)}


@pytest.fixture(autouse=True)
def _one_thread():
    with threads.using(threads.thread_budget(1, threads=1)):
        yield


def _model() -> GPClassification:
    d = math.sqrt(-2.0 * math.log(0.8))
    return GPClassification(np.array([[0.0], [d]]), [1, 0], sd=math.sqrt(3.0),
                            lengthscale=1.0, jitter=1e-9)


def _draws(model: GPClassification, method: str, seed: int = 11) -> np.ndarray:
    tune, draws = LENGTHS[method]
    sweep = model.default_sweep(method, 1, tune=tune)
    rngs = chain_rngs(seed, 2)
    state = model.init_state(rngs, [0, 1])
    out = []
    for i in range(tune + draws):
        state, _ = sweep.step(state, rngs)
        if i >= tune:
            out.append(state.f.copy())
    return np.stack(out, axis=1)              # (chains, draws, 2)


def _misses(model: GPClassification, draws: np.ndarray) -> list[tuple]:
    """The posterior means and variances of ``f`` that miss quadrature's by more than Z
    Monte Carlo errors (the variance as the mean of ``(f_j − m_j)²``, m_j quadrature's)."""
    _, mean, cov = _quadrature(model.K, model.y)
    bad = []
    for j in range(2):
        for what, x, want in (("mean", draws[:, :, j], mean[j]),
                              ("var", (draws[:, :, j] - mean[j]) ** 2, cov[j, j])):
            se = float(np.asarray(az.mcse(x, method="mean")).reshape(-1)[0])
            if abs(x.mean() - want) > Z * se:
                bad.append((what, j, float(x.mean()), float(want), se))
    return bad


def test_quadrature_is_of_this_model():
    m = _model()
    np.testing.assert_allclose(m.K, [[3.0, 2.4], [2.4, 3.0]], atol=1e-8)


@pytest.mark.statistical
@pytest.mark.parametrize("method", ["ess", pytest.param("hmc", marks=pytest.mark.slow),
                                    pytest.param("rmhmc", marks=pytest.mark.slow)])
def test_each_sweep_recovers_the_posterior_mean(method):
    m = _model()
    assert _misses(m, _draws(m, method)) == []


@pytest.mark.statistical
@pytest.mark.slow
def test_hmc_in_the_prior_whitened_coordinates_recovers_the_posterior():
    """``coords="white"``: f = L z with a windowed diagonal mass in z (4 more checks; the
    default, EP's coordinates, is the parametrised test's ``hmc``)."""
    m = GPClassification(_model().x, [1, 0], sd=math.sqrt(3.0), lengthscale=1.0,
                         jitter=1e-9, sampler={"coords": "white"})
    assert _misses(m, _draws(m, "hmc")) == []


@pytest.mark.slow
def test_the_check_sees_rmhmc_without_the_log_determinant(monkeypatch):
    """Without ½ log |G(f)| in H (the report's eq. 11) RMHMC targets another density."""
    monkeypatch.setattr(rmhmc_mod.RiemannGPC, "log_det_metric", lambda self, chol: 0.0)
    m = _model()
    assert _misses(m, _draws(m, "rmhmc")) != []


@pytest.mark.slow
def test_the_check_sees_ess_on_the_wrong_link():
    """An internal model with the logit link in place of the probit: another posterior."""
    m = _model()
    m.lgm = LatentGaussianModel(m.lgm.prior, Bernoulli(m.y, link="logit"))
    assert _misses(m, _draws(m, "ess")) != []
