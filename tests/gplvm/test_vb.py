"""Variational Bayes for the supervised GPLVM (Gadd et al. §3, Algorithm 1).

Deterministic checks only (fixed seeds, quadrature instead of Monte Carlo): the gradient
against central finite differences, the bound below the exact log marginal likelihood of a
3-point problem (by Gauss–Hermite quadrature over Z ∈ ℝ³), its limit at a point-mass q with
M = N inducing inputs, fit_vb's monotone ascent and warm starts, q's sampler and density, and
the refusals.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from lattice_lgm import threads
from lattice_lgm.errors import InvalidDataError, InvalidParameterError, ShapeMismatchError
from lattice_lgm.gplvm.kernels import GPLVMHyper, k_f, k_z
from lattice_lgm.gplvm.vb import VBParams, VBPosterior, elbo, elbo_and_grad, fit_vb


@pytest.fixture(autouse=True)
def _one_thread():
    # N ≤ 30 dense algebra: BLAS threads only spin against each other (threads.py)
    with threads.using(threads.thread_budget(1, threads=1)):
        yield

def _gp_loglik(y, z, hyper):
    """Σ_i log N(y_:,i | 0, K_f(Z) + β⁻¹ I) (Gadd et al. eq. 1)."""
    c = k_f(z, None, hyper.theta_s, hyper.theta) + np.eye(len(y)) / hyper.beta
    return float(stats.multivariate_normal(np.zeros(len(y)), c).logpdf(y.T).sum())


def _kl(mu, s, k):
    """Σ_j KL(N(μ_j, S_j) || N(0, K)) by the textbook formula."""
    out = 0.0
    ki = np.linalg.inv(k)
    for j in range(mu.shape[1]):
        out += 0.5 * (np.trace(ki @ s[j]) + mu[:, j] @ ki @ mu[:, j] - len(k)
                      + np.linalg.slogdet(k)[1] - np.linalg.slogdet(s[j])[1])
    return out


def _small(seed=1, n=7, ky=3, kz=2, kx=1, m=4):
    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=(n, kx)), rng.normal(size=(n, ky))
    h = GPLVMHyper(np.full(kx, 0.7), 1.3, np.linspace(0.8, 1.5, kz), 5.0)
    p = VBParams(rng.normal(size=(n, kz)), rng.normal(size=(kz, n)) - 0.5,
                 rng.normal(size=(m, kz)))
    return y, x, h, p


def _sinusoid(seed=0, n=30):
    """Gadd et al. §6.1, case 1: six sinusoids of one input plus N(0, 0.05²) noise."""
    rng = np.random.default_rng(seed)
    x = np.linspace(0.0, 4 * np.pi, n)[:, None]
    zeta = rng.uniform(size=6)
    f = np.column_stack([zeta[i] * np.cos(x[:, 0]) for i in range(3)]
                        + [zeta[i] * np.sin(x[:, 0]) for i in range(3, 6)])
    return f + 0.05 * rng.normal(size=f.shape), x


H_SIN = GPLVMHyper(np.array([1.0]), 1.0, np.array([1.0, 1.0]), 100.0)


def _central(fun, v, eps=1e-5):
    out = np.zeros(v.shape)
    for i in np.ndindex(v.shape):
        e = np.zeros(v.shape)
        e[i] = eps
        out[i] = (fun(v + e) - fun(v - e)) / (2 * eps)
    return out


def test_every_gradient_matches_central_finite_differences():
    y, x, h, p = _small()
    jit = 1e-3
    b, g = elbo_and_grad(y, x, h, p, jit)
    assert b == pytest.approx(elbo(y, x, h, p, jit), rel=1e-14)
    for name in VBParams._fields:
        num = _central(lambda w, name=name: elbo(y, x, h, p._replace(**{name: w}), jit),
                       getattr(p, name))
        np.testing.assert_allclose(getattr(g, name), num, rtol=1e-6, atol=1e-7, err_msg=name)
    num = _central(lambda e: elbo(y, x, GPLVMHyper.from_log(e, h.k_x, h.k_z), p, jit),
                   h.to_log())
    np.testing.assert_allclose(g.log_hyper, num, rtol=1e-6, atol=1e-7, err_msg="log ξ")


def test_the_hyper_gradient_with_two_inputs_and_one_latent_dimension():
    y, x, h, p = _small(seed=4, n=6, ky=2, kz=1, kx=2, m=3)
    _, g = elbo_and_grad(y, x, h, p, 1e-4)
    num = _central(lambda e: elbo(y, x, GPLVMHyper.from_log(e, h.k_x, h.k_z), p, 1e-4),
                   h.to_log())
    np.testing.assert_allclose(g.log_hyper, num, rtol=1e-6, atol=1e-7)


def _loglik_batch(y, z, h):
    """log p(Y | Z) (eq. 1) for a batch of Z ∈ ℝ^{N×1}, z of shape (Q, N)."""
    n = y.shape[0]
    c = h.theta_s * np.exp(-0.5 * h.theta[0] * (z[:, :, None] - z[:, None, :]) ** 2)
    c = c + np.eye(n) / h.beta
    _, logdet = np.linalg.slogdet(c)
    quad = np.einsum("ai,qab,bi->q", y, np.linalg.inv(c), y)
    return -0.5 * (y.shape[1] * (logdet + n * np.log(2 * np.pi)) + quad)


def _exact_log_marginal(y, x, h, post, n_nodes):
    """log ∫ p(Y|Z) p(Z|X) dZ for N = 3, k_z = 1 by a 3-D Gauss–Hermite rule centred at q's
    mean with twice q's covariance (so the integrand over the rule's weight stays bounded)."""
    t, w = np.polynomial.hermite_e.hermegauss(n_nodes)
    nodes = np.array(list(itertools.product(t, repeat=3)))
    logw = np.log(np.array(list(itertools.product(w, repeat=3)))).sum(1)
    chol = np.sqrt(2.0) * post.chol_S[0]
    z = post.mu[:, 0] + nodes @ chol.T                                     # (Q, 3)
    logprior = stats.multivariate_normal(np.zeros(3), k_z(x, None, h.sigma, post.jitter)
                                         ).logpdf(z)
    # ∫ f(z) dz = |chol| (2π)^{3/2} E_t[f(μ + chol t)], t ~ N(0, I)
    logf = _loglik_batch(y, z, h) + logprior + 0.5 * (nodes**2).sum(1) + logw
    return float(np.logaddexp.reduce(logf) + np.log(abs(np.linalg.det(chol))))


def test_the_bound_is_below_the_exact_log_marginal_likelihood_and_close_to_it():
    rng = np.random.default_rng(7)
    x = np.array([[0.0], [1.0], [2.0]])
    y = rng.normal(size=(3, 2))
    h = GPLVMHyper(np.array([0.5]), 1.0, np.array([1.0]), 4.0)
    post = fit_vb(y, x, h, n_inducing=3)
    exact = _exact_log_marginal(y, x, h, post, 40)
    assert exact == pytest.approx(_exact_log_marginal(y, x, h, post, 30), abs=1e-4)
    # the uncollapsed bound of eq. 3, E_q[log p(Y|Z)] − KL, by a 20³-node rule under q: the
    # collapsed one lies below it (Titsias's step, eq. 5), and it below log p(Y|X) (Jensen)
    t, w = np.polynomial.hermite_e.hermegauss(20)
    nodes = np.array(list(itertools.product(t, repeat=3)))
    wts = np.prod(np.array(list(itertools.product(w, repeat=3))), 1) / (2 * np.pi) ** 1.5
    z = post.mu[:, 0] + nodes @ post.chol_S[0].T
    ell = float(wts @ _loglik_batch(y, z, h))
    uncollapsed = ell - _kl(post.mu, post.S, k_z(x, None, h.sigma, post.jitter))
    assert post.bound <= uncollapsed <= exact
    # not vacuous (measured: −8.07 ≤ −6.79 ≤ −6.23; the sparse step costs most, Z being
    # uncertain around M = N inducing inputs)
    assert exact - post.bound < 2.5
    # any q, any inducing inputs: still a lower bound
    for seed in range(3):
        r = np.random.default_rng(seed)
        p = VBParams(r.normal(size=(3, 1)), r.normal(size=(1, 3)), r.normal(size=(2, 1)))
        assert elbo(y, x, h, p, post.jitter) <= exact


def test_a_point_mass_q_with_inducing_inputs_at_its_mean_gives_the_gp_likelihood_minus_kl():
    y, x, h, _ = _small(seed=2, n=6, ky=3, kz=2, m=6)
    jit = 1e-2
    rng = np.random.default_rng(0)
    a = rng.normal(size=(6, 2))
    rho = np.full((2, 6), np.log(1e8))       # S_j = (K⁻¹ + 10⁸ I)⁻¹ ≈ 10⁻⁸ I
    k = k_z(x, None, h.sigma, jit)
    mu = np.linalg.cholesky(k) @ a
    bound = elbo(y, x, h, VBParams(a, rho, mu.copy()), jit)
    s = np.stack([np.linalg.inv(np.linalg.inv(k) + 1e8 * np.eye(6))] * 2)
    assert bound == pytest.approx(_gp_loglik(y, mu, h) - _kl(mu, s, k), abs=2e-3)


def test_fit_vb_climbs_monotonically_and_a_warm_refit_is_short():
    y, x = _sinusoid()
    post = fit_vb(y, x, H_SIN, n_inducing=12, max_iter=300)
    tr = np.array(post.trace)
    assert np.all(np.diff(tr) >= -1e-9 * np.abs(tr[1:]))
    assert post.bound > tr[0] + 100.0 and post.bound == pytest.approx(tr[-1], abs=1e-8)
    assert post.S.shape == (2, 30, 30) and post.z_u.shape == (12, 2)
    h2 = H_SIN._replace(beta=110.0)
    warm = fit_vb(y, x, h2, init=post)
    assert warm.n_iter < 150 and warm.trace[0] > post.bound - 5.0
    assert warm.hyper == h2 and warm.bound >= warm.trace[0]


def test_different_inducing_subsets_reach_the_same_optimum():
    # with the raw PCA scores whitened (‖a‖² ~ 10⁵) the optimiser collapsed μ to 0 and threw
    # the inducing inputs away for some subsets (bounds −10250, −1370, −294 against 63.09)
    y, x = _sinusoid()
    bounds = [fit_vb(y, x, H_SIN, n_inducing=m, rng=np.random.default_rng(s)).bound
              for m, s in ((10, 0), (15, 0))]
    assert min(bounds) > 62.5 and max(bounds) - min(bounds) < 0.2


def test_the_start_is_deterministic_given_rng():
    y, x = _sinusoid(n=12)
    a = fit_vb(y, x, H_SIN, n_inducing=5, max_iter=3, rng=np.random.default_rng(4))
    b = fit_vb(y, x, H_SIN, n_inducing=5, max_iter=3, rng=np.random.default_rng(4))
    np.testing.assert_array_equal(a.mu, b.mu)
    np.testing.assert_array_equal(a.z_u, b.z_u)


def test_q_samples_and_density_are_those_of_its_gaussians():
    y, x, h, _ = _small(seed=3, n=5, ky=3, kz=2, m=3)
    post = fit_vb(y, x, h, n_inducing=3, max_iter=5, jitter=1e-3)
    for j in range(2):
        np.testing.assert_allclose(post.chol_S[j] @ post.chol_S[j].T, post.S[j],
                                   rtol=1e-10, atol=1e-12)
        assert np.allclose(np.triu(post.chol_S[j], 1), 0.0)
    z = post.sample(np.random.default_rng(9), 4)
    assert z.shape == (4, 5, 2)
    eps = np.random.default_rng(9).standard_normal((4, 2, 5))
    np.testing.assert_allclose(z[:, :, 0], post.mu[:, 0] + eps[:, 0] @ post.chol_S[0].T)
    ref = sum(stats.multivariate_normal(post.mu[:, j], post.S[j]).logpdf(z[:, :, j])
              for j in range(2))
    np.testing.assert_allclose(post.log_density(z), ref, rtol=1e-10)
    # a VBPosterior built from (μ, S) alone factors S itself
    bare = VBPosterior(post.mu, post.S, post.z_u, post.bound, 0, False)
    np.testing.assert_allclose(bare.log_density(z), ref, rtol=1e-8)


@pytest.mark.slow
def test_type_ii_maximum_likelihood_recovers_the_noise_level():
    y, x = _sinusoid()
    fixed = fit_vb(y, x, H_SIN, n_inducing=12)
    ml = fit_vb(y, x, H_SIN, n_inducing=12, optimise_hyper=True)
    assert ml.bound > fixed.bound
    assert 200.0 < ml.hyper.beta < 800.0          # the data's noise precision is 1/0.05² = 400


@pytest.mark.parametrize(("kwargs", "err", "words"), [
    ({"y": np.zeros(5)}, ShapeMismatchError, "y has shape"),
    ({"x": np.zeros((4, 1))}, ShapeMismatchError, "y has 5 rows but x has 4"),
    ({"y": np.where(np.eye(5, 3) > 0, np.nan, 1.0)}, InvalidDataError, "non-finite"),
    ({"x": np.full((5, 1), np.inf)}, InvalidDataError, "x has a non-finite"),
    ({"x": np.zeros((5, 2))}, ShapeMismatchError, "hyper.sigma has 1 entries"),
    ({"hyper": GPLVMHyper(np.ones(1), 1.0, np.ones(4), 1.0)}, InvalidParameterError,
     "exceeds the output dimension k_y=3"),
    ({"y": np.arange(15.0).reshape(5, 3) ** 2, "x": np.zeros((3, 1)),
      "hyper": GPLVMHyper(np.ones(1), 1.0, np.ones(3), 1.0), "n": 3}, InvalidParameterError,
     "exceeds N − 1 = 2"),
    ({"hyper": GPLVMHyper(np.ones(1), -1.0, np.ones(2), 1.0)}, InvalidParameterError,
     "hyperparameter theta_s="),
    ({"n_inducing": 0}, InvalidParameterError, "n_inducing=0 must be an integer in [1, N]"),
    ({"n_inducing": 6}, InvalidParameterError, "[1, N] = [1, 5]"),
    ({"jitter": -1.0}, InvalidParameterError, "jitter=-1.0"),
    ({"init": "previous"}, InvalidParameterError, "init is a str"),
])
def test_bad_inputs_are_refused_naming_the_argument(kwargs, err, words):
    rng = np.random.default_rng(0)
    n = kwargs.pop("n", 5)
    y = kwargs.pop("y", rng.normal(size=(n, 3)))[:n]
    x = kwargs.pop("x", np.linspace(0, 1, n)[:, None])
    hyper = kwargs.pop("hyper", GPLVMHyper(np.ones(1), 1.0, np.ones(2), 1.0))
    with pytest.raises(err) as info:
        fit_vb(y, x, hyper, **kwargs)
    assert words in str(info.value)


def test_a_warm_start_of_the_wrong_shape_is_refused():
    y, x, h, _ = _small(seed=1, n=7)
    post = fit_vb(y, x, h, n_inducing=3, max_iter=2, jitter=1e-3)
    with pytest.raises(ShapeMismatchError, match="init has means of shape"):
        fit_vb(y[:6], x[:6], h, init=post)
