"""Elliptical slice sampling of ``Z | Y, X, ξ`` (Gadd et al., Algorithm 3) hits the posterior.

With ``N = 2`` and ``k_z = 1`` the full conditional ``p(z₁, z₂ | Y, X, ξ)`` is a 2-D density,
computed on a 601² grid over ``[−6, 6]²`` (mass on the grid's edge 7e-10; the moments below
change by < 2e-5 between 401², 601² and 1201² grids and by < 3e-7 on ``[−8, 8]²``, against
Monte Carlo standard errors ≈ 0.01).
Inputs 0.3 apart make the prior of ``(z₁, z₂)`` strongly correlated (0.96), and outputs of
opposite signs pull ``|z₁ − z₂|`` up: a non-Gaussian, ridge-shaped target.

One chain of 5000 steps (the first 200 dropped): ``E[z₁²]``, ``E[z₂²]``, ``E[z₁z₂]`` and
``E|z₁ − z₂|`` each within 5 MCSE (Geyer ESS, as in test_pmmh) of the grid's value.  Per
check ≤ 1e-5 (two-sided normal 5.7e-7, widened for ±20 % error in the ESS); 4 checks: 4e-5.

Planted bug (temporary edit, not committed): drawing ``ν ~ N(0, I)`` instead of
``N(0, K_z)`` in step 1 fails the check.
"""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import lattice_lgm.gplvm.latent as latent_module
from lattice_lgm.errors import InvalidParameterError, SamplerError, ShapeMismatchError
from lattice_lgm.gplvm.density import log_p_y_given_z, log_p_z_given_x
from lattice_lgm.gplvm.kernels import GPLVMHyper
from lattice_lgm.gplvm.latent import sample_latent
from tests.gplvm.test_pmmh import ess

#: 4 two-sided 5-MCSE checks at ≤ 1e-5 each (union bound)
FALSE_FAILURE_RATE = 4e-5

H = GPLVMHyper(np.array([1.0]), 1.0, np.array([3.0]), 10.0)
X = np.array([[0.0], [0.3]])
Y = np.array([[0.8, 0.5], [-0.6, -0.2]])
EPS = 1e-3


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():
    """2×2 factorisations: BLAS threads only spin against each other (lattice_lgm.threads)."""
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def _grid_moments() -> np.ndarray:
    g = np.linspace(-6.0, 6.0, 601)
    z1, z2 = np.meshgrid(g, g, indexing="ij")
    pts = np.stack([z1.ravel(), z2.ravel()], axis=-1)[:, :, None]        # (G², 2, 1)
    lp = log_p_y_given_z(Y, pts, H) + log_p_z_given_x(pts, X, H, EPS)
    w = np.exp(lp - lp.max())
    w /= w.sum()
    a, b = pts[:, 0, 0], pts[:, 1, 0]
    return np.array([w @ a**2, w @ b**2, w @ (a * b), w @ np.abs(a - b)])


def _stats(path: np.ndarray) -> list[np.ndarray]:
    a, b = path[:, 0, 0], path[:, 1, 0]
    return [a**2, b**2, a * b, np.abs(a - b)]


@pytest.mark.statistical
def test_ess_of_z_matches_the_grid_posterior():
    out = sample_latent(Y, X, H, np.zeros((2, 1)), np.random.default_rng(77), 5000,
                        jitter=EPS, keep_path=True)
    path = out.path[200:]
    want = _grid_moments()
    z = [(s.mean() - w) / (s.std() / np.sqrt(ess(s))) for s, w in zip(_stats(path), want,
                                                                        strict=True)]
    assert np.all(np.abs(z) < 5.0), (z, want)
    # the returned log-likelihood is the final state's
    assert out.loglik == pytest.approx(log_p_y_given_z(Y, out.z, H)[0], rel=1e-12)


def test_same_seed_same_path_and_continuation():
    a = sample_latent(Y, X, H, np.zeros((2, 1)), np.random.default_rng(1), 30, jitter=EPS,
                      keep_path=True)
    rng = np.random.default_rng(1)
    b1 = sample_latent(Y, X, H, np.zeros((2, 1)), rng, 10, jitter=EPS)
    b2 = sample_latent(Y, X, H, b1.z, rng, 20, jitter=EPS, loglik=b1.loglik, keep_path=True)
    np.testing.assert_array_equal(a.path[10:], b2.path)
    assert a.n_evals >= 30 and a.path.shape == (30, 2, 1)


def test_a_broken_likelihood_raises_with_the_state(monkeypatch):
    """A likelihood that is not a function of Z can never be sliced: named error, no hang."""
    monkeypatch.setattr(latent_module, "log_p_y_given_z", lambda y, z, h: np.array([-1e300]))
    with pytest.raises(SamplerError, match="shrank 5 times") as info:
        sample_latent(Y, X, H, np.zeros((2, 1)), np.random.default_rng(0), 1, jitter=EPS,
                      loglik=0.0, max_shrink=5)
    assert "bracket" in info.value.state


def test_bad_inputs_are_named():
    rng = np.random.default_rng(0)
    with pytest.raises(ShapeMismatchError, match=r"z has shape \(3, 1\)"):
        sample_latent(Y, X, H, np.zeros((3, 1)), rng)
    with pytest.raises(InvalidParameterError, match="holds 2 draws"):
        sample_latent(Y, X, H, np.zeros((2, 2, 1)), rng)
    with pytest.raises(InvalidParameterError, match="n_steps=0"):
        sample_latent(Y, X, H, np.zeros((2, 1)), rng, 0)
    with pytest.raises(ShapeMismatchError, match="x has shape"):
        sample_latent(Y, X[:1], H, np.zeros((2, 1)), rng)
    with pytest.raises(InvalidParameterError, match=r"not a numpy\.random\.Generator"):
        sample_latent(Y, X, H, np.zeros((2, 1)), 3)
    with pytest.raises(SamplerError, match="starting Z"):
        sample_latent(Y, X, H, np.zeros((2, 1)), rng, loglik=-np.inf)
