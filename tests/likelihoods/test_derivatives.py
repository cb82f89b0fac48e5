"""Derivatives against central finite differences; overflow; the probit log Φ."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special

from lattice_lgm.likelihoods import Bernoulli, Gaussian, Poisson
from lattice_lgm.likelihoods._kernels import log_normal_cdf, log_normal_cdf_np

from .cases import KINDS, eta_for, make

H = 1e-5  # central differences: truncation ~H² f'''/6, round-off ~eps |f|/H


def _site_fd(lik, eta):
    """Central difference of each observed site's logpdf (through the scalar site function)."""
    flat = eta.reshape(eta.shape[0], -1)
    out = np.zeros_like(flat)
    f = np.vectorize(lik.site_logpdf)
    e = flat[:, lik.obs_index]
    out[:, lik.obs_index] = (f(e + H, lik.y_obs, lik.aux_obs)
                             - f(e - H, lik.y_obs, lik.aux_obs)) / (2 * H)
    return out.reshape(eta.shape)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shape", [(9,), (3, 4, 5)])
def test_grad_matches_finite_differences(kind, shape):
    lik = make(kind, shape, seed=11)
    eta = eta_for(lik, 3, seed=2)
    g = lik.grad(eta)
    assert g.shape == eta.shape and g.dtype == np.float64
    assert np.all(g[:, ~lik.mask] == 0.0)
    np.testing.assert_allclose(g, _site_fd(lik, eta), rtol=1e-6, atol=1e-7)
    # and the directional derivative of the summed log-likelihood
    d = np.where(lik.mask, np.random.default_rng(0).normal(size=eta.shape), 0.0)
    fd = (lik.loglik_reference(eta + H * d) - lik.loglik_reference(eta - H * d)) / (2 * H)
    np.testing.assert_allclose(np.nansum(g * d, axis=tuple(range(1, g.ndim))), fd,
                               rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kind", KINDS)
def test_hess_and_third_match_finite_differences(kind):
    lik = make(kind, (4, 5), seed=12)
    eta = eta_for(lik, 2, seed=3)
    eta_c = np.nan_to_num(eta)  # unobserved cells stay 0 in every derivative
    h2 = lik.hess_diag(eta_c)
    h3 = lik.third_diag(eta_c)
    # the Hessian is diagonal, so shifting every cell at once differentiates each cell alone
    fd2 = (lik.grad(eta_c + H) - lik.grad(eta_c - H)) / (2 * H)
    fd3 = (lik.hess_diag(eta_c + H) - lik.hess_diag(eta_c - H)) / (2 * H)
    np.testing.assert_allclose(h2, fd2, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(h3, fd3, rtol=1e-5, atol=1e-7)
    assert np.all(h2[:, ~lik.mask] == 0) and np.all(h3[:, ~lik.mask] == 0)
    if not kind.startswith("sigmoid"):  # its own module checks where ℓ'' > 0
        assert np.all(h2 <= 0)  # log-concave
    if kind != "gaussian":
        assert np.any(h3 != 0)


@pytest.mark.parametrize("link", ["logit", "probit"])
@pytest.mark.parametrize("label", [0.0, 1.0])
def test_bernoulli_derivatives_in_the_tails(link, label):
    # probit switches to the continued fraction at sη = −5; no point sits on that branch point
    eta = np.array([[-37.3, -20.4, -8.2, -5.1, -4.9, -1.3, 0.4, 4.9, 5.2, 9.9, 19.6, 21.2]])
    lik = Bernoulli(np.full(eta.shape[1], label), link=link)
    g = lik.grad(eta)
    np.testing.assert_allclose(g, _site_fd(lik, eta), rtol=2e-6, atol=1e-9)
    np.testing.assert_allclose(lik.hess_diag(eta),
                               (lik.grad(eta + H) - lik.grad(eta - H)) / (2 * H),
                               rtol=2e-6, atol=1e-9)
    np.testing.assert_allclose(lik.third_diag(eta),
                               (lik.hess_diag(eta + H) - lik.hess_diag(eta - H)) / (2 * H),
                               rtol=1e-4, atol=1e-8)


def _extreme_cases():
    return [
        Poisson(np.array([0.0, 3.0, 40.0]), exposure=np.array([1.0, 1e-3, 50.0])),
        Gaussian(np.array([0.0, 1.0, -2.0]), noise_sd=0.1),
        Bernoulli(np.array([0.0, 1.0, 1.0]), link="logit"),
        Bernoulli(np.array([0.0, 1.0, 1.0]), link="probit"),
    ]


@pytest.mark.parametrize("value", [800.0, -800.0, 1e4, -1e4])
@pytest.mark.parametrize("lik", _extreme_cases(), ids=lambda lik: lik.name)
def test_overflow_is_never_nan(lik, value):
    eta = np.full((2, 3), value)
    for out in (lik.loglik(eta), lik.loglik_reference(eta), lik.grad(eta), lik.hess_diag(eta),
                lik.third_diag(eta)):
        assert not np.any(np.isnan(out)), (lik.name, value, out)
    if lik.name in ("bernoulli-logit", "bernoulli-probit"):
        assert np.all(np.isfinite(lik.loglik(eta)))
        assert np.all(np.isfinite(lik.grad(eta)))
    if lik.name == "poisson" and value > 0:
        assert np.all(lik.loglik(eta) == -np.inf)
    if lik.name == "poisson" and value < 0:
        assert np.all(np.isfinite(lik.loglik(eta)))


def test_bernoulli_extreme_values():
    eta = np.array([[800.0, -800.0]])
    logit = Bernoulli(np.array([1.0, 1.0]), link="logit")
    # log σ(800) = −log1p(e^−800) ≈ 0; log σ(−800) = −800 − log1p(e^−800)
    np.testing.assert_allclose(logit.loglik(eta), [-800.0], rtol=1e-15)
    probit = Bernoulli(np.array([1.0, 1.0]), link="probit")
    # log Φ(800) + log Φ(−800)
    np.testing.assert_allclose(probit.loglik(eta), special.log_ndtr(-800.0), rtol=1e-13)


def test_log_normal_cdf_matches_scipy_log_ndtr():
    z = np.concatenate([np.linspace(-40.0, 10.0, 2001), [-20.0, -20.0 - 1e-12, -19.9999, 0.0,
                                                         -1e-300, 37.0, 40.0, -300.0]])
    expected = special.log_ndtr(z)
    got = np.array([log_normal_cdf(v) for v in z])
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=0)
    np.testing.assert_allclose(log_normal_cdf_np(z), expected, rtol=1e-12, atol=0)
    assert np.isfinite(log_normal_cdf(-40.0)) and log_normal_cdf(-40.0) < -800


def test_one_chains_derivatives_at_the_observed_sites_are_the_lattice_ones():
    """``obs_derivative`` (serial, one chain) equals grad/hess_diag/third_diag there."""
    from lattice_lgm.errors import InvalidParameterError

    lik = Bernoulli(np.array([1.0, 0.0, 0.0, 1.0]), link="probit",
                    mask=np.array([True, True, False, True]))
    eta = np.array([[0.3, -1.2, 0.5, 4.0]])
    for order, full in ((1, lik.grad), (2, lik.hess_diag), (3, lik.third_diag)):
        want = full(eta)[0][lik.obs_index]
        np.testing.assert_allclose(lik.obs_derivative(eta[0, lik.obs_index], order), want,
                                   rtol=1e-14)
    with pytest.raises(InvalidParameterError, match="order=4"):
        lik.obs_derivative(eta[0, lik.obs_index], 4)
