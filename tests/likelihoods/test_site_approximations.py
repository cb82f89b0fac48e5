"""Site approximations against brute-force 1-D quadrature of the site posterior (eq. 12), Taylor
values (eq. 13), thresholding, shapes.

The oracle writes each site posterior with scipy.stats / scipy.special — independent of the
Numba site functions — and integrates it on a fine grid spanning where it is within e⁻⁵⁰ of its
maximum.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, optimize, special, stats

from lattice_lgm.likelihoods import Bernoulli, Gaussian, Poisson, SiteApproximation
from lattice_lgm.likelihoods._kernels import pseudo_likelihood

from .cases import KINDS, make, scalar

PRIORS = [(0.0, 1.0), (-3.0, 0.01), (4.0, 100.0), (1.5, 1e4), (-6.0, 2.0), (8.0, 0.5)]
POISSON_DATA = [(0.0, 1.0), (1.0, 1.0), (7.0, 0.25), (500.0, 1.0), (500.0, 20.0)]
BINOMIAL_DATA = [(3.0, 10.0), (0.0, 6.0), (6.0, 6.0), (1.0, 1.0), (0.0, 0.0), (170.0, 400.0)]


def _log_lik(kind, y, aux_value):
    """Site log-likelihood from scipy, as a vectorised function of η."""
    if kind == "poisson":
        return lambda e: stats.poisson.logpmf(y, aux_value * np.exp(e))
    if kind == "gaussian":
        return lambda e: stats.norm.logpdf(y, loc=e, scale=aux_value)
    if kind.startswith("binomial"):
        # written apart from the Numba code: log C(n, y) + y log p(η) + (n − y) log(1 − p(η))
        n = aux_value
        log_c = special.gammaln(n + 1) - special.gammaln(y + 1) - special.gammaln(n - y + 1)
        log_p = special.log_expit if kind == "binomial-logit" else special.log_ndtr
        return lambda e: log_c + y * log_p(e) + (n - y) * log_p(-e)
    s = 2 * y - 1
    if kind == "bernoulli-logit":
        return lambda e: special.log_expit(s * e)
    return lambda e: special.log_ndtr(s * e)


def _site_posterior(kind, y, aux_value, m, v):
    loglik = _log_lik(kind, y, aux_value)

    def logp(e):
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            out = loglik(e) + stats.norm.logpdf(e, loc=m, scale=np.sqrt(v))
        return np.where(np.isnan(out), -np.inf, out)

    return loglik, logp


def _brute_force(kind, y, aux_value, m, v, n=200_001):
    """(mode, −ℓ''(mode), mean, variance) of the site posterior by grid search and quadrature."""
    loglik, logp = _site_posterior(kind, y, aux_value, m, v)
    # a coarse grid wide enough for any mode (|mode − m| ≤ v·max|ℓ'| ≤ v(y + 1) + 50√v here)
    reach = 60 * np.sqrt(v) + v * (y + 2) + 10
    x = np.linspace(m - reach, m + reach, 400_001)
    k = int(np.argmax(logp(x)))
    top = logp(x[k : k + 1])[0]
    # outward from the grid mode until the density has dropped by e^50 (concave: monotone)
    lo, hi = x[max(k - 1, 0)], x[min(k + 1, x.size - 1)]
    step = x[1] - x[0]
    while logp(np.array([lo]))[0] > top - 50:
        lo -= step
        step *= 2
    step = x[1] - x[0]
    while logp(np.array([hi]))[0] > top - 50:
        hi += step
        step *= 2
    grid = np.linspace(lo, hi, n)
    lp = logp(grid)
    w = np.exp(lp - lp.max())
    z = integrate.simpson(w, x=grid)
    mean = integrate.simpson(w * grid, x=grid) / z
    var = integrate.simpson(w * (grid - mean) ** 2, x=grid) / z
    # the mode: root of a central-difference slope between the grid neighbours of the maximum
    j = int(np.argmax(lp))
    d = 1e-4 * min(np.sqrt(var), 1.0)  # below the scales of both the posterior and ℓ

    def slope(e):
        return (logp(np.array([e + d]))[0] - logp(np.array([e - d]))[0]) / (2 * d)

    mode = optimize.brentq(slope, grid[j - 1], grid[j + 1], xtol=1e-15, rtol=1e-15)
    # −ℓ'' at the mode, five-point stencil on a step below both the posterior and unit scales
    d = 1e-2 * min(np.sqrt(var), 1.0)
    ll = loglik(mode + d * np.arange(-2.0, 3.0))
    curvature = -(-ll[0] + 16 * ll[1] - 30 * ll[2] + 16 * ll[3] - ll[4]) / (12 * d**2)
    return mode, curvature, mean, var


def _fitted(approx, m, v):
    """Mean and variance of N(c; η, 1/Π) N(η; m, v) (the site fit the approximation encodes)."""
    p = approx.precision.item()
    c = approx.center.item()
    prec = p + 1.0 / v
    return (p * c + m / v) / prec, 1.0 / prec


def _cases():
    out = []
    for m, v in PRIORS[:4]:
        for y, e in POISSON_DATA:
            out.append(("poisson", y, e, m, v))
    for m, v in PRIORS:
        for link in ("bernoulli-logit", "bernoulli-probit"):
            for y in (0.0, 1.0):
                out.append((link, y, 1.0, m, v))
    # binomial (y, n): interior, both monotone ends, one trial, none, many trials
    for m, v in PRIORS:
        for link in ("binomial-logit", "binomial-probit"):
            for y, n in BINOMIAL_DATA:
                out.append((link, y, n, m, v))
    out.append(("gaussian", 0.7, 0.3, 2.0, 0.5))
    out.append(("gaussian", -1.2, 4.0, 0.0, 1e4))
    return out


CASES = _cases()
_ORACLE: dict = {}


def _oracle(case):
    if case not in _ORACLE:
        _ORACLE[case] = _brute_force(*case)
    return _ORACLE[case]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(str(x) for x in c))
def test_laplace_matches_grid_mode_and_curvature(case):
    kind, y, aux_value, m, v = case
    mode, curvature, _, var = _oracle(case)
    approx = scalar(kind, y, aux_value).site_approximation("laplace", m, v)
    fit_mean, _ = _fitted(approx, m, v)
    assert abs(fit_mean - mode) <= 1e-7 * np.sqrt(var)  # measured ≤ 2e-9
    assert approx.precision.item() == pytest.approx(curvature, rel=1e-5, abs=1e-9 / v)


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(str(x) for x in c))
def test_moments_match_quadrature(case):
    kind, y, aux_value, m, v = case
    _, _, mean, var = _oracle(case)
    approx = scalar(kind, y, aux_value).site_approximation("moments", m, v)
    fit_mean, fit_var = _fitted(approx, m, v)
    assert abs(fit_mean - mean) <= 1e-6 * np.sqrt(var)  # measured ≤ 6e-8
    assert fit_var == pytest.approx(var, rel=1e-6)


def test_moment_and_laplace_fits_differ_where_the_posterior_is_skewed():
    # Poisson y = 0 under a wide prior is strongly skewed left: the mean is ~0.8 sd below the mode
    lik = Poisson(np.array([0.0]))
    lap = lik.site_approximation("laplace", 0.0, 100.0)
    mom = lik.site_approximation("moments", 0.0, 100.0)
    (lm, lv), (mm, mv) = _fitted(lap, 0.0, 100.0), _fitted(mom, 0.0, 100.0)
    assert lm - mm > 0.5 * np.sqrt(mv)
    assert mv > 1.3 * lv
    assert lap.method == "laplace" and mom.method == "moments"


@pytest.mark.parametrize("method", ["laplace", "moments"])
def test_gaussian_site_approximation_is_exact(method):
    sd = np.array([[0.5, 2.0, 1.0]])
    y = np.array([[1.0, -2.0, 0.3]])
    lik = Gaussian(y, noise_sd=sd)
    approx = lik.site_approximation(method, np.zeros((4, 3)), np.array([0.1, 1.0, 1e3]))
    assert approx.precision.shape == (4, 3)
    np.testing.assert_array_equal(approx.precision, np.broadcast_to(1 / sd.ravel() ** 2, (4, 3)))
    np.testing.assert_array_equal(approx.center, np.broadcast_to(y.ravel(), (4, 3)))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("method", ["laplace", "moments"])
def test_shapes_broadcasting_and_row_independence(kind, method):
    lik = make(kind, (3, 4), seed=21)
    rng = np.random.default_rng(2)
    m = rng.normal(size=(5, lik.n_obs))
    v = rng.uniform(0.1, 4.0, size=(5, lik.n_obs))
    batch = lik.site_approximation(method, m, v)
    assert isinstance(batch, SiteApproximation)
    assert batch.precision.shape == batch.center.shape == (5, lik.n_obs)
    assert batch.precision.dtype == batch.center.dtype == np.float64
    assert np.all(batch.precision >= 0) and np.all(np.isfinite(batch.center))
    one = lik.site_approximation(method, m[3], v[3])
    assert one.precision.shape == (lik.n_obs,)
    np.testing.assert_array_equal(one.precision, batch.precision[3])
    np.testing.assert_array_equal(one.center, batch.center[3])
    scalar_prior = lik.site_approximation(method, 0.5, 2.0)
    assert scalar_prior.precision.shape == (lik.n_obs,)
    col = lik.site_approximation(method, np.full((2, 1), 0.5), 2.0)
    assert col.precision.shape == (2, lik.n_obs)
    np.testing.assert_array_equal(col.precision[1], scalar_prior.precision)


@pytest.mark.parametrize("kind", ["poisson", "bernoulli-logit", "bernoulli-probit"])
@pytest.mark.parametrize("method", ["laplace", "moments"])
def test_sites_sharing_data_and_prior_are_fitted_once_bitwise(kind, method, monkeypatch):
    """Where every site of a row has the same prior moments, the fit is computed once per
    distinct (y, aux) and scattered: bitwise the per-site kernel's answer. A row whose moments
    differ anywhere (even 0.0 against -0.0) takes the per-site kernel."""
    from lattice_lgm.likelihoods import _kernels

    rng = np.random.default_rng(31)
    y = rng.poisson(0.7, size=60).astype(float) if kind == "poisson" else (
        rng.random(60) < 0.4).astype(float)
    lik = Poisson(y, exposure=0.25) if kind == "poisson" else Bernoulli(
        y, link=kind.split("-")[1])
    n_distinct = len(np.unique(y))
    assert n_distinct < lik.n_obs
    m = np.array([[0.3], [-1.2], [0.0]]) * np.ones((3, lik.n_obs))
    v = np.array([[0.8], [2.5], [1.0]]) * np.ones((3, lik.n_obs))
    mixed = m.copy()
    mixed[2, 7] = -0.0  # same value, other bits
    real = _kernels.site_approx_kernel
    widths = []

    def counting(kind_code, code, yy, aux, mm, vv, nodes, weights):
        widths.append(mm.shape[1])
        return real(kind_code, code, yy, aux, mm, vv, nodes, weights)

    nodes, weights = _kernels.gauss_legendre()
    code = _kernels.LAPLACE if method == "laplace" else _kernels.MOMENTS
    for mm in (m, mixed):
        want = real(lik._kind, code, lik.y_obs, lik.aux_obs, np.ascontiguousarray(mm), v,
                    nodes, weights)
        monkeypatch.setattr(_kernels, "site_approx_kernel", counting)
        got = lik.site_approximation(method, mm, v)
        monkeypatch.setattr(_kernels, "site_approx_kernel", real)
        np.testing.assert_array_equal(got.precision, want[0])
        np.testing.assert_array_equal(got.center, want[1])
    assert widths == [n_distinct, lik.n_obs]
    one = lik.site_approximation(method, 0.3, 0.8)  # scalar moments: the grouped path
    np.testing.assert_array_equal(one.precision, lik.site_approximation(method, m, v).precision[0])


@pytest.mark.parametrize("kind", ["poisson", "bernoulli-logit", "bernoulli-probit",
                                  "binomial-logit", "binomial-probit", "sigmoid-poisson-logit",
                                  "sigmoid-poisson-probit"])
@pytest.mark.parametrize("method", ["laplace", "moments"])
def test_extreme_priors_give_valid_pseudo_likelihoods(kind, method):
    lik = make(kind, (20,), seed=22, masked=False)
    rng = np.random.default_rng(3)
    m = rng.uniform(-60, 60, size=(8, 20))
    v = 10.0 ** rng.uniform(-6, 6, size=(8, 20))
    approx = lik.site_approximation(method, m, v)
    assert np.all(approx.precision >= 0) and np.all(np.isfinite(approx.precision))
    assert np.all(np.isfinite(approx.center))
    zero = approx.precision == 0
    np.testing.assert_array_equal(approx.center[zero], m[zero])


# -- thresholding at 0 -----------------------------------------------------------------------------


def test_pseudo_likelihood_thresholds_non_positive_precision():
    # a fitted variance above the prior variance (raw Π < 0) is "no information"
    assert pseudo_likelihood(0.3, -1e-17, 0.25, 2.0) == (0.0, 0.25)
    assert pseudo_likelihood(0.3, 0.0, 0.25, 2.0) == (0.0, 0.25)
    assert pseudo_likelihood(0.3, np.nan, 0.25, 2.0) == (0.0, 0.25)
    # Π so small that the center overflows: also no information
    assert pseudo_likelihood(1.0, 5e-324, 0.0, 1.0) == (0.0, 0.0)
    # otherwise Π is kept and the center reproduces the fit: c = (μ/σ² − m/v)/Π
    p, c = pseudo_likelihood(0.3, 0.5, 0.25, 2.0)
    assert p == 0.5
    assert c == pytest.approx((0.3 * (0.5 + 0.5) - 0.25 / 2.0) / 0.5, rel=1e-15)


def test_laplace_threshold_where_the_curvature_underflows():
    # logit, y = 1, prior mean −800: at the mode (≈ −799) ℓ'' = −σ(η)σ(−η) underflows to −0
    approx = Bernoulli(np.array([1.0])).site_approximation("laplace", -800.0, 1.0)
    assert approx.precision.item() == 0.0 and not np.signbit(approx.precision.item())
    assert approx.center.item() == -800.0


def test_probit_moments_threshold_when_the_site_is_uninformative():
    # label agrees with a prior mean 60 sd away: φ(z)/Φ(z) underflows, Π is exactly 0
    approx = Bernoulli(np.array([1.0]), link="probit").site_approximation("moments", 60.0, 1.0)
    assert approx.precision.item() == 0.0
    assert approx.center.item() == 60.0
    # and shrinks smoothly to it: Π > 0 but tiny 20 sd away
    near = Bernoulli(np.array([1.0]), link="probit").site_approximation("moments", 20.0, 1.0)
    assert 0.0 < near.precision.item() < 1e-40


def test_quadrature_moments_of_an_uninformative_site_are_near_zero_never_negative():
    # logit y = 1, prior mean 40: the true Π ≈ e^-40 is below the quadrature accuracy of
    # 1/σ² − 1/v; the result may be 0 (thresholded) or a ~1e-14 noise floor, never negative
    approx = Bernoulli(np.array([1.0, 1.0])).site_approximation(
        "moments", np.array([40.0, 45.0]), 1.0)
    assert np.all(approx.precision >= 0.0)
    assert np.all(approx.precision < 1e-12)
    zero = approx.precision == 0.0
    np.testing.assert_array_equal(approx.center[zero], np.array([40.0, 45.0])[zero])


# -- Taylor (eq. 13) -------------------------------------------------------------------------------


def test_taylor_poisson():
    y = np.array([0.0, 1.0, 7.0, 500.0])
    e = np.array([1.0, 0.25, 2.0, 1.0])
    t = Poisson(y, exposure=e).taylor()
    assert t.method == "taylor" and t.precision.shape == t.center.shape == (4,)
    np.testing.assert_allclose(t.precision, [0.0, 1.0, 7.0, 500.0], rtol=1e-15)
    np.testing.assert_allclose(t.center, [0.0, np.log(4.0), np.log(3.5), np.log(500.0)],
                               rtol=1e-14)


@pytest.mark.parametrize("kind", KINDS)
def test_taylor_is_the_maximum_of_each_site_likelihood(kind):
    lik = make(kind, (3, 5), seed=23)
    t = lik.taylor()
    eta = np.zeros((1, *lik.shape))
    eta[0].reshape(-1)[lik.obs_index] = t.center
    info = t.precision > 0
    grad = lik.grad(eta)[0].reshape(-1)[lik.obs_index]
    hess = lik.hess_diag(eta)[0].reshape(-1)[lik.obs_index]
    np.testing.assert_allclose(grad[info], 0.0, atol=1e-12)
    np.testing.assert_allclose(-hess[info], t.precision[info], rtol=1e-12)
    assert np.all(t.center[~info] == 0.0)
    if kind == "poisson":
        np.testing.assert_array_equal(info, lik.y_obs > 0)
    elif kind == "gaussian":
        np.testing.assert_allclose(t.precision, lik.aux_obs)
        np.testing.assert_array_equal(t.center, lik.y_obs)
    elif kind.startswith(("binomial", "sigmoid")):
        np.testing.assert_array_equal(info, (lik.y_obs > 0) & (lik.y_obs < lik.aux_obs))
        assert info.any() and not info.all()
    else:
        assert not info.any()
