"""The binomial likelihood: scipy's pmf, Bernoulli at one trial, tails, zero-trial cells, errors.

The shared suites (test_loglik, test_derivatives, test_site_approximations, test_errors) run
over ``binomial-logit`` and ``binomial-probit`` through ``cases.KINDS``; this module holds what
is binomial's own.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from scipy import special, stats

from lattice_lgm.errors import InvalidDataError, InvalidParameterError, ShapeMismatchError
from lattice_lgm.likelihoods import Bernoulli, Binomial

LINKS = ("logit", "probit")
NAN = float("nan")


def _prob(link, eta):
    return special.expit(eta) if link == "logit" else stats.norm.cdf(eta)


@pytest.mark.parametrize("link", LINKS)
def test_logpdf_with_constant_is_scipy_binom_logpmf(link):
    rng = np.random.default_rng(40)
    n = rng.integers(0, 30, size=(5, 6)).astype(float)
    y = rng.binomial(n.astype(int), 0.3).astype(float)
    n[0, 0], y[0, 0] = 12.0, 12.0  # y = n
    n[0, 1], y[0, 1] = 12.0, 0.0  # y = 0
    n[0, 2], y[0, 2] = 0.0, 0.0  # no trials
    lik = Binomial(y, n, link=link)
    eta = rng.normal(scale=1.5, size=(3, 5, 6))
    # per site: site_logpdf + log C(n, y) is binom.logpmf
    e = eta.reshape(3, -1)
    want = stats.binom.logpmf(lik.y_obs, lik.aux_obs, _prob(link, e))
    log_c = special.gammaln(n + 1) - special.gammaln(y + 1) - special.gammaln(n - y + 1)
    f = np.vectorize(lik.site_logpdf)
    np.testing.assert_allclose(f(e, lik.y_obs, lik.aux_obs) + log_c.reshape(-1), want,
                               rtol=1e-12, atol=1e-12)
    # the constant is Σ log C(n, y), as Poisson's is Σ −log y!
    assert lik.constant == pytest.approx(log_c.sum(), rel=1e-14)
    np.testing.assert_allclose(lik.loglik(eta), want.sum(axis=1), rtol=1e-12)
    np.testing.assert_allclose(lik.loglik_reference(eta), want.sum(axis=1), rtol=1e-12)
    assert lik.name == f"binomial-{link}" and lik.link == link
    np.testing.assert_array_equal(lik.trials_obs, n.reshape(-1))


@pytest.mark.parametrize("link", LINKS)
def test_one_trial_is_bernoulli_bit_for_bit(link):
    labels = np.array([[1.0, 0.0, 0.0, 1.0, 1.0, 0.0]])
    ber = Bernoulli(labels, link=link)
    bin_ = Binomial(labels, 1, link=link)
    eta = np.array([[-800.0, -40.0, -7.3, -0.2, 0.0, 3.1], [5.5, 12.0, 40.0, 800.0, -5.0, 5.0]]
                   ).reshape(2, 1, 6)
    assert bin_.constant == 0.0
    for method in ("loglik", "grad", "hess_diag", "third_diag"):
        np.testing.assert_array_equal(getattr(bin_, method)(eta), getattr(ber, method)(eta),
                                      err_msg=method)
    np.testing.assert_allclose(bin_.loglik_reference(eta), ber.loglik_reference(eta),
                               rtol=1e-15)
    # the site fits: the same Laplace fit; the moments agree with Bernoulli's (probit: its
    # closed form against our quadrature)
    m, v = np.array([-1.0, 0.5, 2.0, 0.0, -3.0, 1.0]), np.array([0.5, 2.0, 1.0, 30.0, 1.0, 4.0])
    lap_b, lap_n = ber.site_approximation("laplace", m, v), bin_.site_approximation("laplace", m, v)
    np.testing.assert_allclose(lap_n.precision, lap_b.precision, rtol=1e-12)
    np.testing.assert_allclose(lap_n.center, lap_b.center, rtol=1e-12)
    mom_b, mom_n = ber.site_approximation("moments", m, v), bin_.site_approximation("moments", m, v)
    np.testing.assert_allclose(mom_n.precision, mom_b.precision, rtol=1e-7)
    np.testing.assert_allclose(mom_n.center, mom_b.center, rtol=1e-7)


H = 1e-5


@pytest.mark.parametrize("link", LINKS)
@pytest.mark.parametrize(("y", "n"), [(0.0, 7.0), (7.0, 7.0), (3.0, 7.0), (120.0, 300.0)])
def test_derivatives_in_the_tails_are_finite_and_match_differences(link, y, n):
    # probit switches to the continued fraction at ±η = −5; no point sits on that branch point
    eta = np.array([[-40.0, -37.3, -20.4, -8.2, -5.1, -4.9, -1.3, 0.4, 4.9, 5.2, 9.9, 21.2,
                     37.0, 40.0]])
    lik = Binomial(np.full(eta.shape[1], y), n, link=link)
    outs = [lik.loglik(eta), lik.loglik_reference(eta), lik.grad(eta), lik.hess_diag(eta),
            lik.third_diag(eta)]
    for out in outs:
        assert np.all(np.isfinite(out)), out
    f = np.vectorize(lik.site_logpdf)
    fd1 = (f(eta + H, y, n) - f(eta - H, y, n)) / (2 * H)
    # the log-likelihood is ~n|η| or ~nη²/2 out there: its round-off over 2H sets atol
    scale = 1e-16 * np.abs(f(eta, y, n)) / H
    assert np.all(np.abs(lik.grad(eta) - fd1) <= 1e-9 + 4 * scale + 2e-6 * np.abs(fd1))
    np.testing.assert_allclose(lik.hess_diag(eta),
                               (lik.grad(eta + H) - lik.grad(eta - H)) / (2 * H),
                               rtol=2e-6, atol=1e-8)
    np.testing.assert_allclose(lik.third_diag(eta),
                               (lik.hess_diag(eta + H) - lik.hess_diag(eta - H)) / (2 * H),
                               rtol=1e-4, atol=1e-8)
    assert np.all(lik.hess_diag(eta) <= 0.0)


@pytest.mark.parametrize("link", LINKS)
def test_large_eta_never_nan(link):
    lik = Binomial(np.array([0.0, 3.0, 5.0, 0.0]), np.array([5.0, 5.0, 5.0, 0.0]), link=link)
    for value in (800.0, -800.0, 1e4, -1e4):
        eta = np.full((2, 4), value)
        for out in (lik.loglik(eta), lik.loglik_reference(eta), lik.grad(eta),
                    lik.hess_diag(eta), lik.third_diag(eta)):
            assert not np.any(np.isnan(out)), (value, out)
        assert np.all(lik.grad(eta)[:, 3] == 0.0) and np.all(lik.hess_diag(eta)[:, 3] == 0.0)


@pytest.mark.parametrize("link", LINKS)
def test_zero_trial_cells_contribute_nothing_anywhere(link):
    y = np.array([[2.0, 0.0, 1.0], [0.0, 4.0, 0.0]])
    n = np.array([[5.0, 0.0, 3.0], [0.0, 4.0, 2.0]])
    lik = Binomial(y, n, link=link)
    keep = n > 0
    alone = Binomial(y, n, link=link, mask=keep)  # the same data without the empty cells
    assert lik.n_obs == 6 and alone.n_obs == 4
    rng = np.random.default_rng(41)
    eta = rng.normal(scale=3.0, size=(4, 2, 3))
    np.testing.assert_array_equal(lik.loglik(eta), alone.loglik(eta))
    assert lik.constant == alone.constant
    for method in ("grad", "hess_diag", "third_diag"):
        d = getattr(lik, method)(eta)
        assert np.all(d[:, ~keep] == 0.0), method
        np.testing.assert_array_equal(d, getattr(alone, method)(eta))
    empty = lik.aux_obs == 0.0
    f = np.vectorize(lik.site_logpdf)
    assert np.all(f(np.array([-50.0, 0.0, 3.0, 50.0])[:, None], 0.0, 0.0) == 0.0)
    m = rng.normal(size=(3, lik.n_obs))
    v = rng.uniform(0.1, 5.0, size=(3, lik.n_obs))
    for method in ("laplace", "moments"):
        fit = lik.site_approximation(method, m, v)
        assert np.all(fit.precision[:, empty] == 0.0), method
        np.testing.assert_array_equal(fit.center[:, empty], m[:, empty])
        assert np.all(fit.precision[:, ~empty] > 0.0)
    t = lik.taylor()
    assert np.all(t.precision[empty] == 0.0) and np.all(t.center[empty] == 0.0)


def test_taylor_values():
    y = np.array([3.0, 0.0, 4.0, 1.0, 0.0])
    n = np.array([4.0, 4.0, 4.0, 3.0, 0.0])
    t = Binomial(y, n).taylor()
    np.testing.assert_allclose(t.center, [np.log(3.0), 0.0, 0.0, np.log(0.5), 0.0], rtol=1e-15)
    np.testing.assert_allclose(t.precision, [0.75, 0.0, 0.0, 2.0 / 3.0, 0.0], rtol=1e-14)
    tp = Binomial(y, n, link="probit").taylor()
    z = stats.norm.ppf(0.75)
    # at the MLE the observed information is the expected n φ(z)²/(p(1 − p))
    assert tp.center[0] == pytest.approx(z, rel=1e-14)
    assert tp.precision[0] == pytest.approx(4 * stats.norm.pdf(z) ** 2 / (0.75 * 0.25),
                                            rel=1e-12)
    np.testing.assert_array_equal(tp.precision[[1, 2, 4]], 0.0)


# -- errors ----------------------------------------------------------------------------------------


def _grid(value=None, at=(1, 2), shape=(3, 4), fill=2.0):
    a = np.full(shape, fill)
    if value is not None:
        a[at] = value
        a[2, 3] = value  # a later offender: the message must name the first one
    return a


@pytest.mark.parametrize("bad", [NAN, np.inf, -np.inf])
def test_non_finite_successes_or_trials(bad):
    with pytest.raises(InvalidDataError, match=r"y has a non-finite value .* at index \(1, 2\);"
                                               r".*mask it explicitly"):
        Binomial(_grid(bad, fill=1.0), 3)
    with pytest.raises(InvalidDataError, match=r"trials has a non-finite value .* at index "
                                               r"\(1, 2\);.*mask it explicitly"):
        Binomial(_grid(fill=1.0), _grid(bad, fill=3.0))


@pytest.mark.parametrize(("name", "bad", "what"), [
    ("y", -1.0, "negative"), ("y", 0.5, "non-integer"),
    ("trials", -2.0, "negative"), ("trials", 2.5, "non-integer"),
])
def test_negative_or_non_integer_counts(name, bad, what):
    y, n = _grid(fill=1.0), _grid(fill=3.0)
    (y if name == "y" else n)[1, 2] = bad
    (y if name == "y" else n)[2, 3] = bad
    with pytest.raises(InvalidDataError, match=rf"{name} has a {what} value "
                                               rf"{re.escape(repr(bad))} at index \(1, 2\);.*"
                                               r"mask\[\(1, 2\)\] = False"):
        Binomial(y, n)


def test_more_successes_than_trials():
    with pytest.raises(InvalidDataError, match=r"y has 4\.0 successes at index \(1, 2\) but only "
                                               r"3\.0 trials; pass y ≤ trials"):
        Binomial(_grid(4.0, fill=1.0), 3)


def test_masked_cells_may_hold_anything():
    y, n = _grid(-3.0, fill=1.0), _grid(NAN, fill=2.0)
    y[0, 0], n[0, 0] = 9.0, 1.0  # y > n, masked
    mask = np.isfinite(n) & (y >= 0) & (y <= np.nan_to_num(n))
    lik = Binomial(y, n, mask=mask)
    assert lik.n_obs == 9
    assert np.all(np.isfinite(lik.aux_obs))


def test_shapes_links_and_types():
    with pytest.raises(ShapeMismatchError, match=r"trials has shape \(12,\) but y has shape"):
        Binomial(_grid(fill=1.0), np.ones(12))
    with pytest.raises(ShapeMismatchError, match=r"mask has shape \(4, 3\) but"):
        Binomial(_grid(fill=1.0), 3, mask=np.ones((4, 3), dtype=bool))
    with pytest.raises(InvalidParameterError, match=r"link='cloglog'.*'logit', 'probit'"):
        Binomial(np.array([1.0]), 2, link="cloglog")
    with pytest.raises(InvalidDataError, match=r"trials='ten' is not numeric"):
        Binomial(np.array([1.0]), "ten")
    ok = Binomial(np.array([1, 0, 2], dtype=np.int16), np.array([2, 0, 2], dtype=np.uint8))
    np.testing.assert_array_equal(ok.y_obs, [1.0, 0.0, 2.0])
    np.testing.assert_array_equal(ok.aux_obs, [2.0, 0.0, 2.0])
