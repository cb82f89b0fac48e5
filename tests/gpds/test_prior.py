"""Algorithm 1 of the GPDS (exact prior sampling): the factor, the conditionals, the rule."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special

from lattice_lgm.covariance import SquaredExponential
from lattice_lgm.errors import InvalidParameterError
from lattice_lgm.gpds import GaussianBase, UniformBase, sample_prior

#: family-wise false-failure rate of this module per run, summed by conftest.py: two
#: two-sided 4-SE checks (6.3e-5 each) and one Kolmogorov–Smirnov test at 1e-4
FALSE_FAILURE_RATE = 2.3e-4

R = 4000  # independent prior densities per statistical check


def _gh(fn, mu, sd, n=80):
    """E[fn(c)] for c ~ N(mu, sd²) by Gauss–Hermite quadrature."""
    t, w = np.polynomial.hermite_e.hermegauss(n)
    return float(np.sum(w * fn(mu + sd * t)) / np.sqrt(2 * np.pi))


def test_the_grown_factor_is_the_cholesky_factor_of_the_history():
    k = SquaredExponential(sd=1.5, lengthscale=(1.0, 0.5))
    h = sample_prior(k, GaussianBase.create([0.0, 0.0], 1.0), 50, np.random.default_rng(1))
    n = len(h.x)
    assert h.accepted.sum() == 50 and h.accepted[-1] and n > 50
    K = k(h.x) + 1e-10 * 1.5**2 * np.eye(n)
    np.testing.assert_allclose(h.chol @ h.chol.T, K, rtol=0, atol=1e-12)
    assert np.allclose(np.triu(h.chol, 1), 0.0)
    # the stored function values are μ + L w: whitening them gives the standard normals drawn
    w = np.linalg.solve(h.chol, h.g)
    assert abs(w.mean()) < 4 / np.sqrt(n) + 0.1 and 0.5 < w.std() < 1.5


def test_same_seed_same_history():
    k = SquaredExponential(sd=1.0, lengthscale=0.3)
    b = UniformBase.create([0.0], [1.0])
    a = sample_prior(k, b, 20, np.random.default_rng(7))
    c = sample_prior(k, b, 20, np.random.default_rng(7))
    np.testing.assert_array_equal(a.x, c.x)
    np.testing.assert_array_equal(a.g, c.g)


def test_the_first_proposal_is_accepted_with_probability_e_phi():
    """P(accept x̃_1) = E[Φ(g)], g ~ N(μ, α): the acceptance rule r < Φ(g̃) (steps 5–10).

    With μ = 0.8 the rule reversed (r > Φ) gives 1 − E[Φ] ≈ 0.35 against ≈ 0.65: caught.
    """
    k = SquaredExponential(sd=1.0, lengthscale=1.0)
    b = GaussianBase.create([0.0], 1.0)
    rng = np.random.default_rng(11)
    first = np.array([len(sample_prior(k, b, 1, rng, mean=0.8).x) == 1 for _ in range(R)])
    p = _gh(special.expit, 0.8, 1.0)
    assert abs(first.mean() - p) < 4 * np.sqrt(p * (1 - p) / R), (first.mean(), p)


def test_the_second_value_is_drawn_given_the_first():
    """Step 4 conditions on the history: two proposals at (nearly) one point share g.

    On a box of side 1e-3 with lengthscale 1 the function is one value c ~ N(0, 4), so
    P(accept x̃_2 | x̃_1 rejected) = E[(1 − Φ(c)) Φ(c)] / E[1 − Φ(c)] ≈ 0.31; values drawn
    ignoring the history would give E[Φ] = 0.5.
    """
    k = SquaredExponential(sd=2.0, lengthscale=1.0)
    b = UniformBase.create([0.0, 0.0], [1e-3, 1e-3])
    rng = np.random.default_rng(12)
    second = []
    for _ in range(R):
        h = sample_prior(k, b, 1, rng, jitter=1e-12)
        if not h.accepted[0]:
            second.append(bool(h.accepted[1]))
    second = np.array(second)
    num = _gh(lambda c: (1 - special.expit(c)) * special.expit(c), 0.0, 2.0)
    p = num / _gh(lambda c: 1 - special.expit(c), 0.0, 2.0)
    assert abs(second.mean() - p) < 4 * np.sqrt(p * (1 - p) / len(second)), (second.mean(), p)


def test_bad_inputs_are_refused_by_name():
    k = SquaredExponential(sd=1.0, lengthscale=1.0)
    b = GaussianBase.create([0.0], 1.0)
    rng = np.random.default_rng(0)
    with pytest.raises(InvalidParameterError, match="n_samples"):
        sample_prior(k, b, 0, rng)
    with pytest.raises(InvalidParameterError, match="link="):
        sample_prior(k, b, 1, rng, link_name="tanh")
    with pytest.raises(InvalidParameterError, match="kernel="):
        sample_prior("se", b, 1, rng)
    with pytest.raises(InvalidParameterError, match="rng="):
        sample_prior(k, b, 1, 3)
    with pytest.raises(InvalidParameterError, match="max_proposals=5 reached"):
        sample_prior(k, b, 10, rng, mean=-8.0, max_proposals=5)
    with pytest.raises(InvalidParameterError, match="no mass"):
        UniformBase.create([0.0, 1.0], [1.0, 1.0])
    with pytest.raises(InvalidParameterError, match="not positive definite"):
        GaussianBase.create([0.0, 0.0], [[1.0, 1.0], [1.0, 1.0]])
    with pytest.raises(InvalidParameterError, match="mean"):
        GaussianBase.create([np.nan], 1.0)


def test_a_run_continues_from_given_points():
    """§4.4's continuation: the given points condition g and are not among the samples."""
    k = SquaredExponential(sd=1.0, lengthscale=0.5)
    b = UniformBase.create([0.0], [1.0])
    x0, g0 = np.array([[0.2], [0.7]]), np.array([3.0, -3.0])
    h = sample_prior(k, b, 5, np.random.default_rng(2), given=(x0, g0))
    assert h.n_given == 2 and len(h.samples) == 5
    np.testing.assert_array_equal(h.x[:2], x0)
    np.testing.assert_allclose(h.g[:2], g0, rtol=0, atol=1e-12)
    K = k(h.x) + 1e-10 * np.eye(len(h.x))
    np.testing.assert_allclose(h.chol @ h.chol.T, K, rtol=0, atol=1e-12)
    with pytest.raises(InvalidParameterError, match="given has 2 points and 1 values"):
        sample_prior(k, b, 1, np.random.default_rng(2), given=(x0, g0[:1]))


def _accepted_given_g(n_runs, rng, reverse=False):
    """First acceptances of runs continued from ``g`` known on a fine grid of [0, 1].

    With the grid's 61 values given, the GP's conditional sd between grid points is below
    1e-4 of its prior sd: ``g`` is fixed to ``2 sin(2π x) + 0.5 x`` for every run.
    """
    k = SquaredExponential(sd=2.0, lengthscale=0.2)
    b = UniformBase.create([0.0], [1.0])
    grid = np.linspace(0.0, 1.0, 61)[:, None]
    g = 2.0 * np.sin(2 * np.pi * grid[:, 0]) + 0.5 * grid[:, 0]
    link = "logistic"
    if reverse:  # the deliberate bug: accept when r > Φ(g), i.e. Φ replaced by 1 − Φ
        g = -g
    return np.array([sample_prior(k, b, 1, rng, link_name=link, given=(grid, g)).samples[0, 0]
                     for _ in range(n_runs)])


def _ks_against_phi_pi(x):
    """KS p-value of points against ``Φ(g) π / Z`` for the fixed ``g`` (quadrature CDF)."""
    from scipy import stats

    t = np.linspace(0.0, 1.0, 20_001)
    dens = special.expit(2.0 * np.sin(2 * np.pi * t) + 0.5 * t)
    cdf = np.concatenate([[0.0], np.cumsum(0.5 * (dens[1:] + dens[:-1]) * np.diff(t))])
    cdf /= cdf[-1]
    return stats.kstest(x, lambda v: np.interp(v, t, cdf)).pvalue


def test_accepted_points_follow_phi_g_pi_over_z_for_a_fixed_g():
    """Goodness of fit in 1-D with ``Z`` known by quadrature (steps 3–10 exact)."""
    x = _accepted_given_g(1500, np.random.default_rng(21))
    assert _ks_against_phi_pi(x) > 1e-4


def test_the_check_sees_the_acceptance_rule_reversed():
    x = _accepted_given_g(1500, np.random.default_rng(21), reverse=True)
    assert _ks_against_phi_pi(x) < 1e-4

