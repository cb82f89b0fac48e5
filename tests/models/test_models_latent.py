"""LatentGaussianModel: what it samples, how θ maps to the prior, and every refusal."""

from __future__ import annotations

import numpy as np
import pytest

from lattice_lgm import Lattice
from lattice_lgm.covariance import Matern
from lattice_lgm.errors import InvalidParameterError, ParameterOutOfBoundsError, ShapeMismatchError
from lattice_lgm.hyperpriors import LogNormal, Normal, PCPriorRange
from lattice_lgm.likelihoods import Poisson
from lattice_lgm.models import LatentGaussianModel
from lattice_lgm.priors import CirculantPrior, DensePrior

LAT = Lattice((6, 5), spacing=1.0)
COUNTS = np.arange(30).reshape(6, 5) % 3


def _circ(rng=(2.0, 2.0), max_range=4.0):
    return CirculantPrior(LAT, Matern(1.5, range=rng), max_range=max_range)


def test_initial_theta_and_kernel_params():
    m = LatentGaussianModel(_circ(), Poisson(COUNTS), hyperpriors={
        "sd": LogNormal(0, 1), "range": LogNormal(0.5, 0.3, upper=4.0), "mean": Normal(0, 1)},
        mean=0.3)
    assert m.initial_theta() == {"sd": 1.0, "range": 2.0, "mean": 0.3}
    assert m.hyper_names == ("sd", "range", "mean")
    assert m.kernel_params({"sd": 2.0, "range": 3.0, "mean": 0.0}) == {"sd": 2.0, "range": 3.0}
    p = m.prior_for({"sd": 2.0, "range": 3.0, "mean": 0.0}, m.prior)
    assert p.params["range"] == 3.0 and p.params["sd"] == 2.0
    np.testing.assert_array_equal(m.base_obs({"mean": 0.3}), np.full(30, 0.3))


def test_per_axis_ranges():
    m = LatentGaussianModel(_circ((2.0, 3.0)), Poisson(COUNTS), hyperpriors={
        "range_y": LogNormal(0.5, 0.3, upper=4.0), "range_x": LogNormal(0.5, 0.3, upper=4.0)})
    th = m.initial_theta()
    assert th["range_y"] == 2.0 and th["range_x"] == 3.0
    assert m.kernel_params(dict(th, range_x=3.5))["range"] == (2.0, 3.5)
    with pytest.raises(InvalidParameterError, match="per-axis"):
        LatentGaussianModel(_circ((2.0, 3.0)), Poisson(COUNTS),
                            hyperpriors={"range": LogNormal(0.5, 0.3, upper=4.0)})


def test_state_index_reads_the_window_from_the_torus():
    prior = _circ()
    m = LatentGaussianModel(prior, Poisson(COUNTS, mask=COUNTS > 0))
    x = prior.sample_state(np.random.default_rng(0), 1)
    np.testing.assert_array_equal(
        x.reshape(-1)[m.state_index], prior.to_window(x)[0][COUNTS > 0])


def test_refusals():
    lik = Poisson(COUNTS)
    with pytest.raises(ShapeMismatchError, match=r"likelihood\.shape"):
        LatentGaussianModel(_circ(), Poisson(COUNTS[:5]))
    with pytest.raises(InvalidParameterError, match="unknown parameter 'nu'"):
        LatentGaussianModel(_circ(), lik, hyperpriors={"nu": LogNormal(0, 1)})
    with pytest.raises(InvalidParameterError, match="Hyperprior"):
        LatentGaussianModel(_circ(), lik, hyperpriors={"sd": 1.0})
    with pytest.raises(ParameterOutOfBoundsError, match="zero density"):
        LatentGaussianModel(_circ(), lik, hyperpriors={"range": LogNormal(0, 1, upper=1.0)})
    with pytest.raises(ParameterOutOfBoundsError, match="finite upper bound"):
        LatentGaussianModel(_circ(), lik, hyperpriors={"range": PCPriorRange(1.0, 0.05, 2)})
    with pytest.raises(ShapeMismatchError, match="offset"):
        LatentGaussianModel(_circ(), lik, offset=np.zeros(3))
    with pytest.raises(ShapeMismatchError, match="covariates"):
        LatentGaussianModel(_circ(), lik, covariates=np.zeros((2, 5, 6)))
    with pytest.raises(InvalidParameterError, match="beta_sd"):
        LatentGaussianModel(_circ(), lik, covariates=np.zeros((1, 6, 5)), beta_sd=0.0)
    with pytest.raises(InvalidParameterError, match="GaussianPrior"):
        LatentGaussianModel("prior", lik)
    dense = DensePrior.from_matrix(np.eye(30))
    with pytest.raises(InvalidParameterError, match=r"can sample \['mean'\]"):
        LatentGaussianModel(dense, Poisson(COUNTS.reshape(-1)), hyperpriors={
            "sd": LogNormal(0, 1)})


def test_describe_names_priors_and_coefficients():
    m = LatentGaussianModel(_circ(), Poisson(COUNTS), hyperpriors={"sd": LogNormal(0, 1)},
                            covariates=np.ones((1, 6, 5)), beta_sd=2.0)
    text = m.describe()
    assert "sd:" in text and "1 coefficients in the Gaussian block" in text
