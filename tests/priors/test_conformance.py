"""One contract suite over every prior backend against independent dense oracles.

Each backend is checked on the variables on which it claims to be exact (DESIGN §4): the
lattice for dense and GMRF priors, the torus state for the circulant prior (whose window
covariance ``W Wᵀ`` must still equal the kernel matrix).  Deterministic identities, so the
tolerances are round-off (relative 1e-8), not Monte Carlo.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from lattice_lgm.priors import DensePrior, _cholmod

from .cases import Case, all_cases

CASES = all_cases()
INVERTIBLE = [c for c in CASES if c.invertible]
RTOL = 1e-8
_NO_CHOLMOD = pytest.mark.skipif(not _cholmod.available(),
                                 reason="needs scikit-sparse (pip install 'lattice-lgm[gmrf]')")


def _params(cases):
    """Cases as pytest params; CHOLMOD cases are reported as skipped where it is missing."""
    return [pytest.param(c, id=c.id, marks=[_NO_CHOLMOD] if c.extra.get("needs_cholmod") else [])
            for c in cases]


def _close(a, b, rtol=RTOL):
    a, b = np.asarray(a, float), np.asarray(b, float)
    scale = max(np.max(np.abs(b)), 1.0)
    np.testing.assert_allclose(a, b, rtol=0, atol=rtol * scale)


def _basis(prior):
    n = int(np.prod(prior.white_shape))
    return np.eye(n).reshape(n, *prior.white_shape)


def _matrix_of(fn, prior, shape_in):
    """Matrix of a linear map on (n_chains, *shape_in) arrays: columns are images of the basis."""
    n = int(np.prod(shape_in))
    out = fn(np.eye(n).reshape(n, *shape_in))
    return out.reshape(n, -1).T


@pytest.fixture(params=_params(CASES))
def case(request) -> Case:
    return request.param


@pytest.fixture(params=_params(INVERTIBLE))
def icase(request) -> Case:
    return request.param


def test_colorize_gives_state_covariance(case):
    p = case.build(**case.params)
    w = _matrix_of(p.colorize, p, p.white_shape)
    _close(w @ w.T, case.state_cov(p))


def test_window_covariance(case):
    """W Wᵀ = K on the window — exact for every backend, including the circulant one."""
    p = case.build(**case.params)
    w = _matrix_of(lambda z: p.to_window(p.colorize(z)), p, p.white_shape)
    _close(w @ w.T, case.window_cov(p))


def test_sample_has_window_shape(case):
    p = case.build(**case.params)
    x = p.sample(np.random.default_rng(0), 3)
    assert x.shape == (3, *p.shape)
    assert np.all(np.isfinite(x))


def test_whiten_colorize_round_trip(icase):
    p = icase.build(**icase.params)
    rng = np.random.default_rng(1)
    z = rng.standard_normal((3, *p.white_shape))
    x = rng.standard_normal((3, *p.state_shape))
    _close(p.whiten(p.colorize(z)), z, 1e-7)
    _close(p.colorize(p.whiten(x)), x, 1e-7)


def test_log_det(icase):
    p = icase.build(**icase.params)
    sign, ld = np.linalg.slogdet(icase.state_cov(p))
    assert sign > 0
    assert p.log_det() == pytest.approx(ld, rel=1e-9, abs=1e-8)


def test_solve_quad_form_logpdf(icase):
    p = icase.build(**icase.params)
    k = icase.state_cov(p)
    b = np.random.default_rng(2).standard_normal((2, *p.state_shape))
    expected = np.linalg.solve(k, b.reshape(2, -1).T).T
    _close(p.solve(b).reshape(2, -1), expected, 1e-7)
    q = np.einsum("ij,ij->i", b.reshape(2, -1), expected)
    np.testing.assert_allclose(p.quad_form(b), q, rtol=1e-8)
    ref = stats.multivariate_normal(np.zeros(len(k)), k).logpdf(b.reshape(2, -1))
    np.testing.assert_allclose(p.logpdf(b), ref, rtol=1e-9, atol=1e-8)


def test_with_params_equals_fresh_build(case):
    p = case.build(**case.params)
    q = p.with_params(**case.new_params)
    fresh = case.build(**{**case.params, **case.new_params})
    assert q.params == fresh.params
    assert q.state_shape == fresh.state_shape
    z = np.random.default_rng(3).standard_normal((2, *p.white_shape))
    _close(q.colorize(z), fresh.colorize(z), 1e-12)
    if case.invertible:
        assert q.log_det() == pytest.approx(fresh.log_det(), rel=1e-12, abs=1e-12)
    # the original is untouched
    _close(p.colorize(z), case.build(**case.params).colorize(z), 1e-12)


def test_surrogate_against_dense_formulas(icase):
    """Surrogate data g ~ N(f, S), S = Π⁻¹ (Murray & Adams 2010, §3) against dense algebra."""
    p = icase.build(**icase.params)
    k = icase.state_cov(p)
    n = len(k)
    pi = np.broadcast_to(np.asarray(icase.precision, float), p.state_shape).ravel()
    g = np.random.default_rng(4).standard_normal((2, *p.state_shape))
    s = p.surrogate(g, icase.precision)
    # posterior covariance and mean by the textbook formulas
    r = np.linalg.inv(np.linalg.inv(k) + np.diag(pi))
    mean = (r @ (pi * g.reshape(2, -1)).T).T
    _close(s.mean.reshape(2, -1), mean, 1e-7)
    obs = pi > 0
    cov_g = k[np.ix_(obs, obs)] + np.diag(1.0 / pi[obs])
    ref = stats.multivariate_normal(np.zeros(obs.sum()), cov_g).logpdf(g.reshape(2, -1)[:, obs])
    np.testing.assert_allclose(s.logmarginal, ref, rtol=1e-9, atol=1e-8)
    w = _matrix_of(s.colorize, p, p.state_shape)
    _close(w @ w.T, r, 1e-7)
    eta = np.random.default_rng(5).standard_normal((2, *p.state_shape))
    _close(s.whiten(s.colorize(eta)), eta, 1e-7)
    assert n == p.state_size


def test_surrogate_matches_dense_backend(icase):
    """The same surrogate through DensePrior.from_matrix on the oracle covariance."""
    p = icase.build(**icase.params)
    oracle = DensePrior.from_matrix(icase.state_cov(p), jitter=0.0, shape=p.state_shape)
    g = np.random.default_rng(6).standard_normal((2, *p.state_shape))
    s, so = p.surrogate(g, icase.precision), oracle.surrogate(g, icase.precision)
    _close(s.mean, so.mean, 1e-7)
    np.testing.assert_allclose(s.logmarginal, so.logmarginal, rtol=1e-9, atol=1e-8)
