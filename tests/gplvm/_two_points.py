"""A supervised GPLVM small enough for an exact hyperparameter posterior, for end-to-end tests.

``N = 2`` points, ``k_x = k_z = 1``, six outputs.  ``Y`` depends on ``Z`` only through
``d = z₁ − z₂ ~ N(0, v_d(σ))`` (the kernels see distances), so ``p(Y | X, ξ)`` is a 1-D Gaussian
integral, done here by Gauss–Hermite quadrature (``NODES`` nodes: 1e-6 nats from adaptive
quadrature, :func:`test_the_oracle_is_the_library_s_likelihood_integrated`), written from the
kernels' formulas (Gadd et al. §6.1), not from the library's densities.  With independent
``N(0, PRIOR_SD²)`` priors on ``η = log(σ, θ_S, θ, β)`` the posterior moments of ``η`` come from a
4-D grid (``GRID`` points per axis over ±``HALF`` prior sds: moments to ~1e-3 of a posterior sd,
far below the tests' Monte Carlo errors).
"""

from __future__ import annotations

import functools

import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from scipy.integrate import quad

from lattice_lgm.gplvm.density import log_p_y_given_z
from lattice_lgm.gplvm.kernels import GPLVMHyper, k_z

X = np.array([[0.0], [0.8]])
Y = np.array([[0.9, -0.3, 0.5, 1.1, -0.8, 0.2], [0.6, 0.1, 0.7, 0.8, -1.2, 0.5]])
#: the library's default K_z jitter (``gplvm.vb.DEFAULT_JITTER``) — the model under test uses it
JITTER = 1e-6
PRIOR_SD = 0.7
NODES, GRID, HALF = 120, 25, 4.5


def library_marginal(y: np.ndarray, x: np.ndarray, hyper: GPLVMHyper, jitter: float) -> float:
    """``p(Y | X, ξ)`` of any two-point data by adaptive quadrature of the library's own
    ``log p(Y | Z)`` over ``d = z₁ − z₂ ~ N(0, v_d)`` (to ~1e-12 relative)."""
    kz = k_z(x, None, hyper.sigma, jitter)
    v_d = kz[0, 0] + kz[1, 1] - 2 * kz[0, 1]

    def integrand(d):
        lik = np.exp(log_p_y_given_z(y, np.array([[d], [0.0]]), hyper)[0])
        return lik * np.exp(-d * d / (2 * v_d)) / np.sqrt(2 * np.pi * v_d)

    val, err = quad(integrand, -np.inf, np.inf, epsabs=0, epsrel=1e-12)
    assert err < 1e-10 * val
    return val


def log_marginal(eta: np.ndarray) -> np.ndarray:
    """``log p(Y | X, ξ)`` for ``eta`` (..., 4) = ``log(σ, θ_S, θ, β)``; shape (...)."""
    s, ts, th, b = (np.exp(eta[..., i])[..., None] for i in range(4))
    dx2 = float((X[0, 0] - X[1, 0]) ** 2)
    v_d = 2.0 * (1.0 + JITTER) - 2.0 * np.exp(-0.5 * s * dx2)   # Var(z₁ − z₂) under K_z
    t, w = hermegauss(NODES)                                    # ∫ f(t) e^{−t²/2} dt
    d = np.sqrt(v_d) * t
    a = ts + 1.0 / b                                            # K_y = [[a, c], [c, a]]
    c = ts * np.exp(-0.5 * th * d * d)
    det = a * a - c * c
    yy = Y @ Y.T
    quad = (a * (yy[0, 0] + yy[1, 1]) - 2.0 * c * yy[0, 1]) / det
    k = Y.shape[1]
    ll = -k * np.log(2.0 * np.pi) - 0.5 * k * np.log(det) - 0.5 * quad
    top = ll.max(axis=-1, keepdims=True)
    return top[..., 0] + np.log(np.sum(w * np.exp(ll - top), axis=-1)) - 0.5 * np.log(2 * np.pi)


@functools.cache
def posterior_moments() -> tuple[np.ndarray, np.ndarray]:
    """``E[η_i]`` and ``E[η_i²]`` (4,) under the exact posterior, by the 4-D grid."""
    g = np.linspace(-HALF * PRIOR_SD, HALF * PRIOR_SD, GRID)
    e = np.stack(np.meshgrid(g, g, g, g, indexing="ij"), axis=-1)
    lp = np.stack([log_marginal(e[i]) for i in range(GRID)]) - 0.5 * np.sum((e / PRIOR_SD) ** 2,
                                                                             axis=-1)
    w = np.exp(lp - lp.max())
    w /= w.sum()
    return (np.array([np.sum(w * e[..., i]) for i in range(4)]),
            np.array([np.sum(w * e[..., i] ** 2) for i in range(4)]))


def z_scores(eta: np.ndarray) -> np.ndarray:
    """``(mean − exact) / MCSE`` of ``η_i`` and ``η_i²`` for draws ``eta`` (chains, draws, 4).

    MCSE from ArviZ's multi-chain bulk ESS; shape (8,).
    """
    import arviz as az

    m1, m2 = posterior_moments()
    out = []
    for i in range(4):
        for v, want in ((eta[..., i], m1[i]), (eta[..., i] ** 2, m2[i])):
            out.append((v.mean() - want) / (v.std() / np.sqrt(float(az.ess(v)))))
    return np.array(out)
