"""§5's predictions (Gadd et al., eqs. 7–8) against dense closed forms.

Deterministic checks (no Monte Carlo tolerance): the ``z_*`` draws are eq. 8's mean plus its
standard deviation times the documented normals; every mixture component is the GP regression
predictive computed with an explicit inverse; the density on a fine, wide grid integrates to 1
and its first moment is the returned mean (trapezoid rule, error < 1e-6 at this spacing:
components' sd ≥ β^(-1/2) = 0.2 against a spacing of 0.006).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from lattice_lgm.errors import InvalidParameterError, ShapeMismatchError
from lattice_lgm.gplvm.kernels import GPLVMHyper, k_f, k_z
from lattice_lgm.gplvm.predict import output_predictive, predictive_density, sample_z_star

N, KX, KZ, KY, EPS = 6, 2, 2, 3, 1e-4
_r = np.random.default_rng(0)
X = _r.uniform(0, 2, (N, KX))
Y = _r.standard_normal((N, KY))
XS = _r.uniform(0, 2, (4, KX))
HYPERS = [GPLVMHyper(np.array([0.8, 1.5]), 1.1, np.array([0.6, 2.0]), 25.0),
          GPLVMHyper(np.array([2.0, 0.4]), 0.7, np.array([1.3, 0.9]), 40.0)]
ZS = _r.standard_normal((2, N, KZ))
GRID = np.linspace(-6.0, 6.0, 2001)


def _dense_component(zs, z, h):
    kf = k_f(z, None, h.theta_s, h.theta) + np.eye(N) / h.beta
    kc = k_f(z, zs, h.theta_s, h.theta)
    inv = np.linalg.inv(kf)
    return kc.T @ inv @ Y, h.theta_s - np.einsum("nm,nk,km->m", kc, inv, kc) + 1 / h.beta


def test_z_star_is_eq8():
    h, z = HYPERS[0], ZS[0]
    got = sample_z_star(XS, X, z, h, np.random.default_rng(3), n=5, jitter=EPS)
    kz = k_z(X, None, h.sigma, EPS)
    kc = k_z(X, XS, h.sigma)
    mean = kc.T @ np.linalg.solve(kz, z)
    var = 1 + EPS - np.einsum("nm,nk,km->m", kc, np.linalg.inv(kz), kc)
    eps = np.random.default_rng(3).standard_normal((5, 4, KZ))
    np.testing.assert_allclose(got, mean + np.sqrt(var)[:, None] * eps, rtol=1e-8, atol=1e-10)


def test_one_draw_gives_the_closed_form_mixture():
    pred = predictive_density(XS, X, Y, HYPERS[:1], ZS[:1], GRID, np.random.default_rng(1),
                              n_latent=3, jitter=EPS)
    assert pred.density.shape == (4, GRID.size, KY) and pred.z_star.shape == (1, 3, 4, KZ)
    want = np.zeros_like(pred.density)
    for ell in range(3):
        m, v = _dense_component(pred.z_star[0, ell], ZS[0], HYPERS[0])
        np.testing.assert_allclose(pred.comp_mean[0, ell], m, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(pred.comp_var[0, ell], v, rtol=1e-8)
        want += norm.pdf(GRID[None, :, None], m[:, None, :], np.sqrt(v)[:, None, None]) / 3
    np.testing.assert_allclose(pred.density, want, rtol=1e-8, atol=1e-300)
    np.testing.assert_allclose(pred.mean, pred.comp_mean[0].mean(axis=0), rtol=1e-12)


def test_density_integrates_to_one_and_its_mean_is_the_mean():
    pred = predictive_density(XS, X, Y, HYPERS, ZS, GRID, np.random.default_rng(2),
                              n_latent=2, jitter=EPS)
    mass = np.trapezoid(pred.density, GRID, axis=1)
    np.testing.assert_allclose(mass, 1.0, atol=1e-6)
    first = np.trapezoid(pred.density * GRID[None, :, None], GRID, axis=1)
    np.testing.assert_allclose(first, pred.mean, atol=1e-6)
    # a per-feature grid gives the same values where the grids agree
    per = predictive_density(XS, X, Y, HYPERS, ZS, np.repeat(GRID[:, None], KY, 1),
                             np.random.default_rng(2), n_latent=2, jitter=EPS)
    np.testing.assert_array_equal(per.density, pred.density)


def test_output_predictive_matches_dense():
    zs = np.random.default_rng(5).standard_normal((3, KZ))
    m, v = output_predictive(zs, ZS[1], Y, HYPERS[1])
    m2, v2 = _dense_component(zs, ZS[1], HYPERS[1])
    np.testing.assert_allclose(m, m2, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(v, v2, rtol=1e-8)


def test_bad_inputs_are_named():
    rng = np.random.default_rng(0)
    with pytest.raises(ShapeMismatchError, match="zs holds 2 draws of Z but hypers holds 1"):
        predictive_density(XS, X, Y, HYPERS[:1], ZS, GRID, rng)
    with pytest.raises(ShapeMismatchError, match=r"x_star has shape \(4, 1\)"):
        predictive_density(XS[:, :1], X, Y, HYPERS, ZS, GRID, rng)
    with pytest.raises(ShapeMismatchError, match=r"y_grid has shape \(5, 2\)"):
        predictive_density(XS, X, Y, HYPERS, ZS, np.zeros((5, 2)), rng)
    with pytest.raises(InvalidParameterError, match="hypers is empty"):
        predictive_density(XS, X, Y, [], ZS, GRID, rng)
    with pytest.raises(InvalidParameterError, match="n_latent=0"):
        predictive_density(XS, X, Y, HYPERS, ZS, GRID, rng, n_latent=0)
    with pytest.raises(ShapeMismatchError, match=r"z_star has shape \(3,\)"):
        output_predictive(np.zeros(3), ZS[0], Y, HYPERS[0])
