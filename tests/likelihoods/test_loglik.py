"""loglik: the Numba kernel against its NumPy twin and scipy.stats, layout, determinism."""

from __future__ import annotations

import numba
import numpy as np
import pytest
from scipy import special, stats

from lattice_lgm.likelihoods import Bernoulli, Gaussian, Poisson

from .cases import KINDS, SHAPES, eta_for, make

# The Numba kernel calls the C library's exp/log1p/erfc and sums sequentially; the twin calls
# NumPy's (and SciPy's erfc) and sums pairwise.  Both differ by a few ulp per site, so the sums
# agree to rtol 1e-12 (measured: ≤ 4e-16).
RTOL_TWIN = 1e-12


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("n_chains", [1, 5])
def test_numba_matches_reference(kind, shape, n_chains):
    lik = make(kind, shape, seed=len(shape))
    eta = eta_for(lik, n_chains)
    got = lik.loglik(eta)
    ref = lik.loglik_reference(eta)
    assert got.shape == ref.shape == (n_chains,)
    assert got.dtype == np.float64
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, ref, rtol=RTOL_TWIN, atol=0)


def _scipy_loglik(lik, eta):
    """The same log-likelihood from scipy.stats, written from the model definitions."""
    e = eta.reshape(eta.shape[0], -1)[:, lik.obs_index]
    y = lik.y_obs
    if lik.name == "poisson":
        return stats.poisson.logpmf(y, np.exp(lik.aux_obs) * np.exp(e)).sum(axis=1)
    if lik.name == "gaussian":
        return stats.norm.logpdf(y, loc=e, scale=1 / np.sqrt(lik.aux_obs)).sum(axis=1)
    p = special.expit(e) if lik.name.endswith("logit") else stats.norm.cdf(e)
    if lik.name.startswith("sigmoid-poisson"):
        return stats.poisson.logpmf(y, lik.aux_obs * p).sum(axis=1)
    if lik.name.startswith("binomial"):
        return stats.binom.logpmf(y, lik.aux_obs, p).sum(axis=1)
    return stats.bernoulli.logpmf(y, p).sum(axis=1)


@pytest.mark.parametrize("kind", KINDS)
def test_loglik_matches_scipy_stats(kind):
    lik = make(kind, (4, 5), seed=3)
    eta = eta_for(lik, 3, scale=1.0)
    np.testing.assert_allclose(lik.loglik(eta), _scipy_loglik(lik, eta), rtol=1e-10)


def test_constants_and_aux():
    y = np.array([[0.0, 3.0], [7.0, np.nan]])
    mask = np.isfinite(y)
    lik = Poisson(y, exposure=np.array([[2.0, 0.5], [1.0, -1.0]]), mask=mask)
    np.testing.assert_array_equal(lik.obs_index, [0, 1, 2])
    assert lik.obs_index.dtype == np.int64
    np.testing.assert_array_equal(lik.y_obs, [0.0, 3.0, 7.0])
    np.testing.assert_allclose(lik.aux_obs, np.log([2.0, 0.5, 1.0]), rtol=1e-15)
    assert lik.constant == pytest.approx(-(np.log(6.0) + np.log(5040.0)), rel=1e-14)
    assert lik.n_obs == 3 and lik.shape == (2, 2) and lik.name == "poisson"

    g = Gaussian(np.array([1.0, 2.0]), noise_sd=np.array([0.5, 2.0]))
    np.testing.assert_allclose(g.aux_obs, [4.0, 0.25])
    expected = 0.5 * np.log(4.0 / (2 * np.pi)) + 0.5 * np.log(0.25 / (2 * np.pi))
    assert g.constant == pytest.approx(expected, rel=1e-14)

    b = Bernoulli(np.array([True, False, True]), link="probit")
    np.testing.assert_array_equal(b.y_obs, [1.0, 0.0, 1.0])
    np.testing.assert_array_equal(b.aux_obs, 0.0)
    assert b.constant == 0.0 and b.name == "bernoulli-probit"
    assert Bernoulli(np.array([1, 0])).name == "bernoulli-logit"


@pytest.mark.parametrize("kind", KINDS)
def test_contract_formula_with_site_logpdf(kind):
    """loglik == constant + Σ site_logpdf(eta[obs_index], y_obs, aux_obs), called from Python."""
    lik = make(kind, (3, 4, 5), seed=4)
    eta = eta_for(lik, 2)
    for c in range(2):
        e = eta[c].reshape(-1)[lik.obs_index]
        vals = [lik.site_logpdf(e[i], lik.y_obs[i], lik.aux_obs[i]) for i in range(lik.n_obs)]
        assert lik.loglik(eta)[c] == pytest.approx(lik.constant + np.sum(vals), rel=1e-13)


@numba.njit
def _sum_sites(site_fn, eta, idx, y, aux):
    total = 0.0
    for i in range(idx.shape[0]):
        total += site_fn(eta[idx[i]], y[i], aux[i])
    return total


@pytest.mark.parametrize("kind", KINDS)
def test_site_logpdf_is_callable_from_njit(kind):
    lik = make(kind, (4, 5), seed=5)
    assert isinstance(lik.site_logpdf, numba.core.registry.CPUDispatcher)
    assert not lik.site_logpdf.targetoptions.get("fastmath", False)
    eta = eta_for(lik, 3)
    for c in range(3):
        got = lik.constant + _sum_sites(lik.site_logpdf, eta[c].reshape(-1), lik.obs_index,
                                        lik.y_obs, lik.aux_obs)
        # same scalar function, same order: bitwise equal to the prange kernel
        assert got == lik.loglik(eta)[c]


@pytest.mark.parametrize("kind", KINDS)
def test_chain_alone_equals_chain_in_batch_bitwise(kind):
    lik = make(kind, (6, 7), seed=6)
    eta = eta_for(lik, 7)
    batch = lik.loglik(eta)
    for c in range(7):
        assert lik.loglik(eta[c:c + 1])[0] == batch[c]
    np.testing.assert_array_equal(lik.loglik(eta[[5, 2]]), batch[[5, 2]])


def test_loglik_independent_of_thread_count():
    lik = make("bernoulli-probit", (8, 9), seed=7)
    eta = eta_for(lik, 6)
    n = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = lik.loglik(eta)
    finally:
        numba.set_num_threads(n)
    np.testing.assert_array_equal(lik.loglik(eta), one)


@pytest.mark.parametrize("kind", KINDS)
def test_unobserved_cells_are_ignored(kind):
    lik = make(kind, (4, 5), seed=8)
    eta = eta_for(lik, 2)  # NaN at unobserved cells
    other = eta.copy()
    other[:, ~lik.mask] = 1e300
    np.testing.assert_array_equal(lik.loglik(eta), lik.loglik(other))
    assert np.isnan(eta).any()


@pytest.mark.parametrize("kind", KINDS)
def test_non_contiguous_and_integer_eta(kind):
    lik = make(kind, (4, 5), seed=9, masked=False)
    eta = np.asfortranarray(eta_for(lik, 3))
    np.testing.assert_array_equal(lik.loglik(eta), lik.loglik(np.ascontiguousarray(eta)))
    ints = np.ones((2, 4, 5), dtype=np.int32)
    np.testing.assert_array_equal(lik.loglik(ints), lik.loglik(ints.astype(float)))
