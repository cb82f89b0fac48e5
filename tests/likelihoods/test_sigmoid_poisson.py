"""The sigmoidal Poisson likelihood: scipy's pmf, tails, zero-exposure cells, its own site fits
(two-mode site posteriors included) against quadrature, errors.

The shared suites (test_loglik, test_derivatives, test_site_approximations, test_errors) run
over ``sigmoid-poisson-logit`` and ``sigmoid-poisson-probit`` through ``cases.KINDS``; this
module holds what is the sigmoidal Poisson's own.  Its site-fit oracle does not assume a
log-concave site posterior (the shared one does).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from scipy import integrate, optimize, special, stats

from lattice_lgm.errors import InvalidDataError, InvalidParameterError, ShapeMismatchError
from lattice_lgm.likelihoods import SigmoidPoisson
from lattice_lgm.likelihoods._sigmoid_fits import sigpois_modes

LINKS = ("logit", "probit")
NAN = float("nan")


def _phi(link, eta):
    return special.expit(eta) if link == "logit" else stats.norm.cdf(eta)


def _log_phi(link, eta):
    return special.log_expit(eta) if link == "logit" else special.log_ndtr(eta)


@pytest.mark.parametrize("link", LINKS)
def test_logpdf_with_constant_is_scipy_poisson_logpmf(link):
    rng = np.random.default_rng(60)
    e = rng.uniform(0.0, 20.0, size=(5, 6))
    y = rng.poisson(0.4 * e).astype(float)
    e[0, 0], y[0, 0] = 0.0, 0.0  # no exposure
    e[0, 1], y[0, 1] = 3.0, 9.0  # y > e
    e[0, 2], y[0, 2] = 12.0, 0.0
    lik = SigmoidPoisson(y, e, link=link)
    eta = rng.normal(scale=2.0, size=(3, 5, 6))
    flat = eta.reshape(3, -1)
    want = stats.poisson.logpmf(lik.y_obs, lik.aux_obs * _phi(link, flat))
    pos = y > 0
    const = np.where(pos, y * np.log(np.where(pos, e, 1.0)) - special.gammaln(y + 1), 0.0)
    f = np.vectorize(lik.site_logpdf)
    np.testing.assert_allclose(f(flat, lik.y_obs, lik.aux_obs) + const.reshape(-1), want,
                               rtol=1e-12, atol=1e-12)
    assert lik.constant == pytest.approx(const.sum(), rel=1e-14)
    np.testing.assert_allclose(lik.loglik(eta), want.sum(axis=1), rtol=1e-12)
    np.testing.assert_allclose(lik.loglik_reference(eta), want.sum(axis=1), rtol=1e-12)
    assert lik.name == f"sigmoid-poisson-{link}" and lik.link == link
    np.testing.assert_array_equal(lik.exposure_obs, e.reshape(-1))


H = 1e-5


@pytest.mark.parametrize("link", LINKS)
@pytest.mark.parametrize(("y", "e"), [(0.0, 7.0), (7.0, 7.0), (3.0, 7.0), (9.0, 2.0),
                                      (120.0, 300.0)])
def test_derivatives_in_the_tails_are_finite_and_match_differences(link, y, e):
    # probit switches to the continued fraction at η = −5; no point sits on that branch point
    eta = np.array([[-40.0, -37.3, -20.4, -8.2, -5.1, -4.9, -1.3, 0.4, 1.1, 4.9, 5.2, 9.9,
                     21.2, 37.0, 40.0]])
    lik = SigmoidPoisson(np.full(eta.shape[1], y), e, link=link)
    for out in (lik.loglik(eta), lik.loglik_reference(eta), lik.grad(eta), lik.hess_diag(eta),
                lik.third_diag(eta)):
        assert np.all(np.isfinite(out)), out
    f = np.vectorize(lik.site_logpdf)
    fd1 = (f(eta + H, y, e) - f(eta - H, y, e)) / (2 * H)
    # ℓ is ~yη²/2 (probit) or ~y|η| far left: its round-off over 2H sets atol
    scale = 1e-16 * np.abs(f(eta, y, e)) / H
    assert np.all(np.abs(lik.grad(eta) - fd1) <= 1e-9 + 4 * scale + 2e-6 * np.abs(fd1))
    np.testing.assert_allclose(lik.hess_diag(eta),
                               (lik.grad(eta + H) - lik.grad(eta - H)) / (2 * H),
                               rtol=2e-6, atol=1e-8)
    np.testing.assert_allclose(lik.third_diag(eta),
                               (lik.hess_diag(eta + H) - lik.hess_diag(eta - H)) / (2 * H),
                               rtol=1e-4, atol=1e-8)


@pytest.mark.parametrize("link", LINKS)
def test_not_log_concave_where_the_rate_saturates(link):
    """ℓ'' > 0 on the right when y < e (the −eΦ term), ≤ 0 everywhere when y ≥ e."""
    eta = np.linspace(-10.0, 10.0, 2001)[None]
    convex = SigmoidPoisson(np.full(eta.shape[1], 1.0), 10.0, link=link).hess_diag(eta)
    assert convex.max() > 0.5 and np.all(convex[eta <= 0.0] < 0.0)
    concave = SigmoidPoisson(np.full(eta.shape[1], 10.0), 10.0, link=link).hess_diag(eta)
    assert np.all(concave <= 0.0)


@pytest.mark.parametrize("link", LINKS)
def test_large_eta_never_nan(link):
    lik = SigmoidPoisson(np.array([0.0, 3.0, 5.0, 0.0]), np.array([5.0, 5.0, 2.0, 0.0]),
                         link=link)
    for value in (800.0, -800.0, 1e4, -1e4):
        eta = np.full((2, 4), value)
        for out in (lik.loglik(eta), lik.loglik_reference(eta), lik.grad(eta),
                    lik.hess_diag(eta), lik.third_diag(eta)):
            assert not np.any(np.isnan(out)), (value, out)
        assert np.all(np.isfinite(lik.loglik(eta))) and np.all(np.isfinite(lik.grad(eta)))
        assert np.all(lik.grad(eta)[:, 3] == 0.0) and np.all(lik.hess_diag(eta)[:, 3] == 0.0)
    # log Φ(800) − eΦ(800) = −e, log Φ(−800) − eΦ(−800) = log Φ(−800)
    got = lik.loglik(np.array([[800.0, 800.0, -800.0, 0.0]]))[0] - lik.constant
    assert got == pytest.approx(-5.0 - 5.0 + 5.0 * _log_phi(link, -800.0), rel=1e-13)


@pytest.mark.parametrize("link", LINKS)
def test_zero_exposure_cells_contribute_nothing_anywhere(link):
    y = np.array([[2.0, 0.0, 1.0], [0.0, 4.0, 0.0]])
    e = np.array([[5.0, 0.0, 3.0], [0.0, 4.0, 2.0]])
    lik = SigmoidPoisson(y, e, link=link)
    keep = e > 0
    alone = SigmoidPoisson(y, e, link=link, mask=keep)
    assert lik.n_obs == 6 and alone.n_obs == 4
    rng = np.random.default_rng(61)
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
        # ℓ is not concave, so a Laplace Π = −ℓ''(mode) may be thresholded at 0 elsewhere too
        assert np.all(fit.precision >= 0.0) and np.any(fit.precision[:, ~empty] > 0.0)
    t = lik.taylor()
    assert np.all(t.precision[empty] == 0.0) and np.all(t.center[empty] == 0.0)


def test_taylor_values():
    y = np.array([3.0, 0.0, 4.0, 5.0, 0.0, 1.0])
    e = np.array([4.0, 4.0, 4.0, 2.0, 0.0, 3.0])
    t = SigmoidPoisson(y, e).taylor()
    # logit: σ(η*) = y/e, precision y(e − y)²/e²
    np.testing.assert_allclose(t.center, [np.log(3.0), 0, 0, 0, 0, np.log(0.5)], rtol=1e-15)
    np.testing.assert_allclose(t.precision, [3 / 16, 0, 0, 0, 0, 4 / 9], rtol=1e-13)
    tp = SigmoidPoisson(y, e, link="probit").taylor()
    z = stats.norm.ppf(0.75)
    assert tp.center[0] == pytest.approx(z, rel=1e-14)
    # probit: e² φ(η*)²/y
    assert tp.precision[0] == pytest.approx(16 * stats.norm.pdf(z) ** 2 / 3, rel=1e-12)
    np.testing.assert_array_equal(tp.precision[[1, 2, 3, 4]], 0.0)


# -- site fits against quadrature (no concavity assumed) -----------------------------------------

# (y, e, m, v): y = 0 with small and large e, interior, y ≥ e, strong data, wide priors, and
# priors far right of the data, where the site posterior has two modes
SITES = [
    (0.0, 5.0, 0.0, 1.0), (3.0, 10.0, 0.0, 1.0), (5.0, 1.0, 0.0, 1.0), (0.0, 200.0, 3.0, 2.0),
    (150.0, 400.0, 0.0, 100.0), (20.0, 40.0, -2.0, 4.0), (5.0, 10.0, 1.0, 1e4),
    (0.0, 8.0, 6.0, 9.0), (0.0, 8.0, 10.0, 9.0), (0.0, 8.0, 14.0, 9.0),
    (2.0, 30.0, 10.0, 50.0), (1.0, 20.0, 15.0, 100.0),
    (0.0, 3.0, 20.0, 400.0), (0.0, 50.0, 30.0, 400.0), (0.0, 1.0, -3.0, 0.01),
    (40.0, 10.0, 8.0, 0.5),
]


def _oracle(link, y, e, m, v):
    """(mode, −ℓ''(mode), mean, variance) of N(η; m, v) Poisson(y; eΦ(η)) on grids."""

    def logp(x):
        return (stats.poisson.logpmf(y, e * _phi(link, x))
                + stats.norm.logpdf(x, loc=m, scale=np.sqrt(v)))

    # every mode lies in [m − v e/2, m + v(y + 1)(1 + |m|)]; a coarse grid over it and beyond,
    # then a fine one over where the density is within e⁻⁵⁰ of its maximum (both modes)
    lo = m - v * e / 2 - 60 * np.sqrt(v)
    hi = m + v * (y + 1) * (1 + abs(m)) + 60 * np.sqrt(v)
    x = np.linspace(lo, hi, 2_000_001)
    lp = logp(x)
    keep = np.flatnonzero(lp > lp.max() - 50)
    grid = np.linspace(x[max(keep[0] - 1, 0)], x[min(keep[-1] + 1, x.size - 1)], 400_001)
    lg = logp(grid)
    w = np.exp(lg - lg.max())
    z = integrate.simpson(w, x=grid)
    mean = integrate.simpson(w * grid, x=grid) / z
    var = integrate.simpson(w * (grid - mean) ** 2, x=grid) / z
    j = int(np.argmax(lg))
    mode = optimize.minimize_scalar(lambda t: -logp(t), bracket=(grid[j - 1], grid[j],
                                    grid[j + 1]), tol=1e-14).x
    d = 1e-3 * min(np.sqrt(var), 1.0)
    ll = stats.poisson.logpmf(y, e * _phi(link, mode + d * np.arange(-2.0, 3.0)))
    curvature = -(-ll[0] + 16 * ll[1] - 30 * ll[2] + 16 * ll[3] - ll[4]) / (12 * d**2)
    return mode, curvature, mean, var


def _fitted(approx, m, v):
    p, c = approx.precision.item(), approx.center.item()
    prec = p + 1.0 / v
    return (p * c + m / v) / prec, 1.0 / prec


@pytest.mark.parametrize("link", LINKS)
@pytest.mark.parametrize("site", SITES, ids=lambda s: "-".join(str(x) for x in s))
def test_site_fits_match_quadrature(link, site):
    y, e, m, v = site
    mode, curvature, mean, var = _oracle(link, *site)
    lik = SigmoidPoisson(np.array([y]), e, link=link)
    lap = lik.site_approximation("laplace", m, v)
    top = sigpois_modes(link == "probit", y, e, m, v)[0]
    assert abs(top - mode) <= 1e-6 * np.sqrt(var)  # the global mode
    # −ℓ''(mode) < 0 is thresholded: Π = 0, c = m
    assert lap.precision.item() == pytest.approx(max(curvature, 0.0), rel=1e-5, abs=1e-8 / v)
    if lap.precision.item() > 0.0:
        assert abs(_fitted(lap, m, v)[0] - mode) <= 1e-6 * np.sqrt(var)
    else:
        assert lap.center.item() == m
    mom = lik.site_approximation("moments", m, v)
    fit_mean, fit_var = _fitted(mom, m, v)
    if var < v * (1 - 1e-9):
        assert abs(fit_mean - mean) <= 1e-6 * np.sqrt(var)
        assert fit_var == pytest.approx(var, rel=1e-6)
    else:  # wider than the prior: no information
        assert mom.precision.item() == 0.0 and mom.center.item() == m


@pytest.mark.parametrize("link", LINKS)
def test_two_modes_are_found_and_the_higher_wins(link):
    """A prior far right of a cell with no points: the site posterior has a mode left of the
    rate's rise and one at the prior; moving the prior further right swaps the winner."""
    near = sigpois_modes(link == "probit", 0.0, 8.0, 6.0, 9.0)
    assert near[3] and near[0] < 0.0 < near[2] < near[1]
    far = sigpois_modes(link == "probit", 0.0, 8.0, 14.0, 9.0)  # the right one wins now
    assert far[3] and far[1] < 0.0 < far[2] < far[0]
    alone = sigpois_modes(link == "probit", 0.0, 8.0, 30.0, 9.0)  # and the left one is gone
    assert not alone[3] and alone[0] > 20.0


@pytest.mark.parametrize("method", ["laplace", "moments"])
@pytest.mark.parametrize("link", LINKS)
def test_extreme_sites_give_valid_pseudo_likelihoods(link, method):
    rng = np.random.default_rng(62)
    e = 10.0 ** rng.uniform(-3, 4, size=40)
    y = rng.poisson(e * rng.uniform(0, 1.2, size=40)).astype(float)
    lik = SigmoidPoisson(y, e, link=link)
    m = rng.uniform(-60, 60, size=(6, 40))
    v = 10.0 ** rng.uniform(-6, 6, size=(6, 40))
    fit = lik.site_approximation(method, m, v)
    assert np.all(fit.precision >= 0) and np.all(np.isfinite(fit.precision))
    assert np.all(np.isfinite(fit.center))
    zero = fit.precision == 0
    np.testing.assert_array_equal(fit.center[zero], m[zero])


# -- errors ----------------------------------------------------------------------------------------


def _grid(value=None, at=(1, 2), shape=(3, 4), fill=2.0):
    a = np.full(shape, fill)
    if value is not None:
        a[at] = value
        a[2, 3] = value  # a later offender: the message must name the first one
    return a


@pytest.mark.parametrize("bad", [NAN, np.inf, -np.inf])
def test_non_finite_counts_or_exposure(bad):
    with pytest.raises(InvalidDataError, match=r"y has a non-finite value .* at index \(1, 2\);"
                                               r".*mask it explicitly"):
        SigmoidPoisson(_grid(bad, fill=1.0), 3.0)
    with pytest.raises(InvalidDataError, match=r"exposure has a non-finite value .* at index "
                                               r"\(1, 2\);.*mask it explicitly"):
        SigmoidPoisson(_grid(fill=1.0), _grid(bad, fill=3.0))


@pytest.mark.parametrize(("name", "bad", "what"), [
    ("y", -1.0, "negative"), ("y", 0.5, "non-integer"), ("exposure", -2.0, "negative"),
])
def test_negative_or_non_integer(name, bad, what):
    y, e = _grid(fill=1.0), _grid(fill=3.0)
    (y if name == "y" else e)[1, 2] = bad
    (y if name == "y" else e)[2, 3] = bad
    with pytest.raises(InvalidDataError, match=rf"{name} has a {what} value "
                                               rf"{re.escape(repr(bad))} at index \(1, 2\);.*"
                                               r"mask\[\(1, 2\)\] = False"):
        SigmoidPoisson(y, e)


def test_points_where_the_exposure_is_zero():
    with pytest.raises(InvalidDataError, match=r"y has 2\.0 points at index \(1, 2\) where the "
                                               r"exposure is 0.*positive exposure.*"
                                               r"mask\[\(1, 2\)\] = False"):
        SigmoidPoisson(_grid(fill=2.0), _grid(0.0, fill=3.0))
    ok = SigmoidPoisson(_grid(0.0, fill=2.0), _grid(0.0, fill=3.0))  # 0 points there: fine
    assert ok.n_obs == 12


def test_masked_cells_may_hold_anything():
    y, e = _grid(-3.0, fill=1.0), _grid(NAN, fill=2.0)
    y[0, 0], e[0, 0] = 9.0, 0.0  # points without exposure, masked
    mask = np.isfinite(e) & (y >= 0) & (np.nan_to_num(e) > 0)
    lik = SigmoidPoisson(y, e, mask=mask)
    assert lik.n_obs == 9 and np.all(np.isfinite(lik.aux_obs))


def test_shapes_links_and_types():
    with pytest.raises(ShapeMismatchError, match=r"exposure has shape \(12,\) but y has shape"):
        SigmoidPoisson(_grid(fill=1.0), np.ones(12))
    with pytest.raises(ShapeMismatchError, match=r"mask has shape \(4, 3\) but"):
        SigmoidPoisson(_grid(fill=1.0), 3.0, mask=np.ones((4, 3), dtype=bool))
    with pytest.raises(InvalidParameterError, match=r"link='cloglog'.*'logit', 'probit'"):
        SigmoidPoisson(np.array([1.0]), 2.0, link="cloglog")
    with pytest.raises(InvalidDataError, match=r"exposure='ten' is not numeric"):
        SigmoidPoisson(np.array([1.0]), "ten")
    ok = SigmoidPoisson(np.array([1, 0, 2], dtype=np.int16), np.array([2, 0, 2], dtype=np.uint8))
    np.testing.assert_array_equal(ok.y_obs, [1.0, 0.0, 2.0])
    np.testing.assert_array_equal(ok.aux_obs, [2.0, 0.0, 2.0])
