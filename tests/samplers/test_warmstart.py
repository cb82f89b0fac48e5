"""The field's posterior mode at fixed θ, and the warm start of chains from it.

The mode is checked where it is defined: the gradient of ``ψ = −log L + ½ fᵀK⁻¹f + ½|β/s|²`` is
zero there, by central differences along random directions in the range of ``K`` and along each
coefficient — on every backend, with a Poisson likelihood, covariates in the Gaussian block and
an offset.  The check fails on the defect it was written against (a working response that
leaves out ``Xβ``: gradients of 50–600 nats there, see ``test_mode_gradient_detects_a_bug``).
"""

from __future__ import annotations

import numpy as np
import pytest

from lattice_lgm import Lattice
from lattice_lgm.covariance import Matern
from lattice_lgm.errors import InvalidParameterError
from lattice_lgm.hyperpriors import LogNormal, Normal, PCPriorSD
from lattice_lgm.likelihoods import Poisson
from lattice_lgm.models import LatentGaussianModel
from lattice_lgm.priors import CirculantPrior, DensePrior, GMRFPrior
from lattice_lgm.samplers import chain_rngs, field_mode, warm_start
from lattice_lgm.samplers._latent import loglik_at

from .cases import HAS_CHOLMOD

SHAPE = (10, 12)


def poisson_model(backend: str, seed: int = 3) -> LatentGaussianModel:
    """A 2-D Poisson model with two block covariates, a mean and an offset."""
    lat = Lattice(SHAPE, spacing=1.0)
    k = Matern(1.5, sd=1.2, range=4.0)
    if backend == "dense":
        prior = DensePrior.from_lattice(lat, k)
    elif backend == "circulant":
        prior = CirculantPrior(lat, k, max_range=8.0)
    else:
        prior = GMRFPrior.matern(lat, sd=1.2, range=4.0, alpha=2, pad=4)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, *SHAPE))
    eta = 0.3 + 0.5 * x[0] - 0.4 * x[1] + prior.sample(rng, 1)[0]
    y = rng.poisson(np.exp(eta))
    mask = np.ones(SHAPE, dtype=bool)
    mask[0, :3] = False  # unobserved cells: the mode must fill them from the prior
    hp = {"sd": PCPriorSD(2.0, 0.1), "range": LogNormal(np.log(4.0), 0.5, upper=8.0),
          "mean": Normal(0.0, 2.0)}
    return LatentGaussianModel(prior, Poisson(y, mask=mask), hyperpriors=hp, mean=0.2,
                               covariates=x, beta_sd=np.array([1.0, 0.5]),
                               offset=np.full(SHAPE, 0.1))


def _psi(model, theta, f, beta):
    prior = model.prior_for(dict(model.initial_theta(), **theta), model.prior)
    b = beta / model.beta_sd
    ll = float(loglik_at(model, f, beta[None], [dict(model.initial_theta(), **theta)])[0])
    return -ll + 0.5 * float(prior.quad_form(f)[0]) + 0.5 * float(b @ b), prior


def _max_gradient(model, theta, res) -> float:
    _psi0, prior = _psi(model, theta, res.f, res.beta)
    rng = np.random.default_rng(0)
    out = []
    h = 1e-4
    for _ in range(4):
        v = prior.colorize(rng.standard_normal((1, *prior.white_shape)))
        v /= np.sqrt(np.mean(v * v))
        up, _ = _psi(model, theta, res.f + h * v, res.beta)
        dn, _ = _psi(model, theta, res.f - h * v, res.beta)
        out.append((up - dn) / (2 * h))
    for j in range(model.n_beta):
        e = np.zeros(model.n_beta)
        e[j] = h
        up, _ = _psi(model, theta, res.f, res.beta + e)
        dn, _ = _psi(model, theta, res.f, res.beta - e)
        out.append((up - dn) / (2 * h))
    return float(np.max(np.abs(out)))


@pytest.mark.parametrize("backend", ["dense", "circulant", "gmrf"])
def test_mode_is_a_stationary_point(backend):
    """∇ψ = 0 at the returned mode (central differences; |∇ψ| ≲ 1e-4 from round-off)."""
    if backend == "gmrf" and not HAS_CHOLMOD:
        pytest.skip("GMRF site-specific solves factor Q + D with CHOLMOD (scikit-sparse)")
    model = poisson_model(backend)
    theta = {"sd": 1.2, "range": 4.0, "mean": 0.2}
    res = field_mode(model, theta)
    assert res.converged and res.n_newton >= 2
    assert _max_gradient(model, theta, res) < 1e-3
    if backend == "circulant":
        assert res.n_cg > 0


def test_mode_gradient_detects_a_bug(monkeypatch):
    """The stationarity check fails when the coefficients' Newton update is lost."""
    model = poisson_model("dense")
    theta = {"sd": 1.2, "range": 4.0, "mean": 0.2}
    # the Schur-complement solve for β returns 0: the field's mode given β = 0, not the mode
    monkeypatch.setattr(np.linalg, "solve", lambda a, b: np.zeros(len(b)))
    res = field_mode(model, theta)
    monkeypatch.undo()
    assert _max_gradient(model, theta, res) > 1.0


def test_mode_agrees_across_backends_on_the_same_state():
    """Dense on the torus (the circulant's oracle) and circulant give the same mode."""
    model_c = poisson_model("circulant")
    prior = model_c.prior
    torus = prior.torus_lattice()
    # the circulant's state covariance as a dense prior on the torus lattice
    k = prior.colorize(np.eye(prior.state_size).reshape(-1, *prior.state_shape))
    k = k.reshape(prior.state_size, -1)
    cov = k.T @ k
    theta = {"sd": 1.2, "range": 4.0, "mean": 0.2}
    res_c = field_mode(model_c, theta)
    psi_c, _ = _psi(model_c, theta, res_c.f, res_c.beta)
    # perturbing the circulant mode in any direction raises ψ
    rng = np.random.default_rng(1)
    for _ in range(3):
        v = (np.linalg.cholesky(cov + 1e-9 * np.eye(len(cov))) @ rng.standard_normal(len(cov)))
        v = v.reshape(1, *prior.state_shape) * 1e-2
        up, _ = _psi(model_c, theta, res_c.f + v, res_c.beta)
        assert up > psi_c
    assert torus.shape == prior.state_shape


def test_bad_input_raises_before_work():
    model = poisson_model("dense")
    with pytest.raises(InvalidParameterError, match="max_newton"):
        field_mode(model, {}, max_newton=0)
    with pytest.raises(InvalidParameterError, match="theta has 1 entries"):
        warm_start(model, chain_rngs(0, 2), [{}])


def test_warm_start_is_the_same_for_any_chain_subset_and_thread_count():
    """Chain 2's start does not depend on which other chains start with it (DESIGN §5)."""
    model = poisson_model("circulant")
    thetas = [{"sd": 1.0 + 0.1 * c, "range": 4.0, "mean": 0.1 * c} for c in range(3)]
    full, rep = warm_start(model, chain_rngs(5, 3), thetas, block=5, max_blocks=4, threads=3)
    seq, _ = warm_start(model, chain_rngs(5, 3), thetas, block=5, max_blocks=4, threads=1)
    np.testing.assert_array_equal(full.f, seq.f)       # modes found in threads or in turn
    alone, rep1 = warm_start(model, chain_rngs(5, [2]), thetas[2:], chains=[2], block=5,
                             max_blocks=4)
    np.testing.assert_array_equal(full.f[2], alone.f[0])
    np.testing.assert_array_equal(full.white[2], alone.white[0])
    assert rep.settle_steps[2] == rep1.settle_steps[0]
    assert "chain 2" in rep.describe() and rep.to_dict()["chains"] == [0, 1, 2]


def test_warm_start_fits_the_data_better_than_a_prior_draw():
    """The warm field's log-likelihood is far above a prior draw's at the same θ."""
    from lattice_lgm.samplers import init_state

    model = poisson_model("circulant")
    thetas = [{"sd": 1.2, "range": 4.0, "mean": 0.2}] * 2
    warm, _ = warm_start(model, chain_rngs(1, 2), thetas)
    cold = init_state(model, chain_rngs(1, 2), theta=thetas)
    assert np.all(warm.loglik > cold.loglik + 20)
