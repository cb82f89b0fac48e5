"""Every input error: type, and a message naming the argument, the first index and the remedy."""

from __future__ import annotations

import re

import numpy as np
import pytest

from lattice_lgm.errors import (
    InvalidDataError,
    InvalidParameterError,
    LatticeLGMError,
    ShapeMismatchError,
)
from lattice_lgm.likelihoods import Bernoulli, Gaussian, Poisson

from .cases import KINDS, make

NAN = float("nan")


def _grid(value=None, at=(1, 2), shape=(3, 4), fill=2.0):
    a = np.full(shape, fill)
    if value is not None:
        a[at] = value
        a[2, 3] = value  # a later offender: the message must name the first one
    return a


# -- data ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [NAN, np.inf, -np.inf])
@pytest.mark.parametrize("build", [
    lambda y: Poisson(y),
    lambda y: Gaussian(y, noise_sd=1.0),
    lambda y: Bernoulli(y),
], ids=["poisson", "gaussian", "bernoulli"])
def test_non_finite_data_names_first_index_and_says_mask(build, bad):
    y = _grid(bad, fill=1.0)
    with pytest.raises(InvalidDataError, match=r"has a non-finite value .* at index \(1, 2\);.*"
                                               r"mask it explicitly"):
        build(y)


@pytest.mark.parametrize("bad", [NAN, np.inf])
def test_masked_cells_may_hold_anything(bad):
    y = _grid(bad, fill=1.0)
    mask = np.isfinite(y)
    for lik in (Poisson(y, mask=mask), Gaussian(y, 1.0, mask=mask), Bernoulli(y, mask=mask)):
        assert lik.n_obs == 10
        assert 6 not in lik.obs_index and 11 not in lik.obs_index
    # a negative count, a label 7 and a non-positive exposure at masked cells are fine too
    y2 = _grid(-3.0)
    m2 = y2 >= 0
    Poisson(y2, exposure=np.where(m2, 1.0, -1.0), mask=m2)
    Bernoulli(np.where(m2, 1.0, 7.0), mask=m2)
    Gaussian(y2, noise_sd=np.where(m2, 1.0, 0.0), mask=m2)


def test_negative_counts():
    with pytest.raises(InvalidDataError, match=r"counts has a negative value -3\.0 at index "
                                               r"\(1, 2\).*non-negative integers"):
        Poisson(_grid(-3.0))


def test_non_integer_counts():
    with pytest.raises(InvalidDataError, match=r"counts has a non-integer value 2\.5 at index "
                                               r"\(1, 2\).*round"):
        Poisson(_grid(2.5))


def test_counts_one_dimensional_and_three_dimensional_indices():
    with pytest.raises(InvalidDataError, match=r"index \(4,\)"):
        Poisson(np.array([1.0, 2, 3, 4, 0.5]))
    y = np.ones((2, 3, 4))
    y[1, 0, 2] = -1
    with pytest.raises(InvalidDataError, match=r"index \(1, 0, 2\)"):
        Poisson(y)


@pytest.mark.parametrize("bad", [0.0, -1.0, NAN, np.inf])
def test_exposure_array_non_positive_or_non_finite(bad):
    with pytest.raises(InvalidDataError, match=r"exposure has a non-positive or non-finite value "
                                               r".* at index \(1, 2\);.*mask"):
        Poisson(_grid(fill=1.0), exposure=_grid(bad, fill=1.0))


@pytest.mark.parametrize("bad", [0.0, -2.0, NAN, np.inf, "a"])
def test_exposure_scalar_invalid(bad):
    with pytest.raises(InvalidDataError, match=r"exposure="):
        Poisson(_grid(fill=1.0), exposure=bad)


def test_exposure_shape_mismatch():
    with pytest.raises(ShapeMismatchError, match=r"exposure has shape \(4, 3\) but counts has "
                                                 r"shape \(3, 4\)"):
        Poisson(_grid(fill=1.0), exposure=np.ones((4, 3)))


@pytest.mark.parametrize("label", [2.0, -1.0, 0.5])
def test_labels_outside_zero_one(label):
    with pytest.raises(InvalidDataError, match=rf"y has label {re.escape(repr(label))} at index "
                                               r"\(1, 2\), outside \{0, 1\}.*\(y \+ 1\) / 2"):
        Bernoulli(_grid(label, fill=1.0))


def test_bool_labels_accepted_and_integer_labels():
    assert Bernoulli(np.array([True, False])).y_obs.tolist() == [1.0, 0.0]
    assert Bernoulli(np.array([1, 0, 1], dtype=np.int8), link="probit").n_obs == 3


def test_unknown_link_lists_valid_ones():
    with pytest.raises(InvalidParameterError, match=r"link='cloglog'.*'logit', 'probit'"):
        Bernoulli(np.array([1.0, 0.0]), link="cloglog")


@pytest.mark.parametrize("bad", [0.0, -1.0, NAN, np.inf])
def test_noise_sd_scalar_invalid(bad):
    with pytest.raises(InvalidParameterError, match=r"noise_sd=.*must be finite and > 0"):
        Gaussian(_grid(), noise_sd=bad)


@pytest.mark.parametrize("bad", [0.0, -1.0, NAN])
def test_noise_sd_array_invalid_names_index(bad):
    with pytest.raises(InvalidParameterError, match=r"noise_sd has a non-positive or non-finite "
                                                    r"value .* at index \(1, 2\)"):
        Gaussian(_grid(), noise_sd=_grid(bad, fill=1.0))


def test_noise_sd_shape_mismatch():
    with pytest.raises(ShapeMismatchError, match=r"noise_sd has shape \(12,\) but y has shape"):
        Gaussian(_grid(), noise_sd=np.ones(12))


@pytest.mark.parametrize("data", [np.array(["a", "b"]), np.array([1 + 2j, 3j]),
                                  np.array([None, 1.0])])
def test_non_numeric_data(data):
    with pytest.raises(InvalidDataError, match=r"counts has dtype"):
        Poisson(data)


@pytest.mark.parametrize("data", [np.float64(3.0), np.zeros((0, 3))])
def test_scalar_or_empty_data(data):
    with pytest.raises(ShapeMismatchError, match=r"y has shape"):
        Gaussian(data, noise_sd=1.0)


# -- mask ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("build", [
    lambda y, m: Poisson(y, mask=m),
    lambda y, m: Gaussian(y, 1.0, mask=m),
    lambda y, m: Bernoulli(np.ones_like(y), mask=m),
], ids=["poisson", "gaussian", "bernoulli"])
def test_mask_errors(build):
    y = _grid(fill=1.0)
    with pytest.raises(InvalidParameterError, match=r"mask has dtype int64; it must be boolean"):
        build(y, np.ones((3, 4), dtype=np.int64))
    with pytest.raises(ShapeMismatchError, match=r"mask has shape \(4, 3\) but"):
        build(y, np.ones((4, 3), dtype=bool))
    with pytest.raises(InvalidDataError, match=r"mask has no observed cell"):
        build(y, np.zeros((3, 4), dtype=bool))


# -- methods ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("method", ["loglik", "loglik_reference", "grad", "hess_diag",
                                    "third_diag"])
def test_eta_with_wrong_shape(kind, method):
    lik = make(kind, (3, 4), seed=30)
    for eta in (np.zeros((3, 4)), np.zeros((2, 4, 3)), np.zeros((2, 12))):
        with pytest.raises(ShapeMismatchError, match=r"eta has shape .*expected \(n_chains, "
                                                     r"\*\(3, 4\)\)"):
            getattr(lik, method)(eta)


def test_unknown_site_method_lists_valid_ones():
    lik = make("poisson", (3, 4))
    with pytest.raises(InvalidParameterError, match=r"method='ep'.*'laplace', 'moments'"):
        lik.site_approximation("ep", 0.0, 1.0)
    with pytest.raises(InvalidParameterError, match=r"method='taylor'"):
        lik.site_approximation("taylor", 0.0, 1.0)


@pytest.mark.parametrize("kind", KINDS)
def test_prior_moment_errors(kind):
    lik = make(kind, (3, 4), masked=False)
    n = lik.n_obs
    v = np.ones((2, n))
    v[1, 5] = 0.0
    v[1, 7] = -1.0
    with pytest.raises(InvalidParameterError, match=r"prior_var has a non-positive value 0\.0 at "
                                                    r"index \(1, 5\)"):
        lik.site_approximation("laplace", 0.0, v)
    m = np.zeros(n)
    m[3] = NAN
    with pytest.raises(InvalidParameterError, match=r"prior_mean has a non-finite value nan at "
                                                    r"index \(3,\)"):
        lik.site_approximation("moments", m, 1.0)
    with pytest.raises(InvalidParameterError, match=r"prior_var has a non-finite value inf"):
        lik.site_approximation("moments", 0.0, np.inf)
    with pytest.raises(ShapeMismatchError, match=r"prior_mean has shape \(5,\).*n_obs=12"):
        lik.site_approximation("laplace", np.zeros(5), 1.0)
    with pytest.raises(ShapeMismatchError, match=r"prior_var has shape \(1, 2, 12\)"):
        lik.site_approximation("laplace", 0.0, np.ones((1, 2, n)))
    with pytest.raises(InvalidParameterError, match=r"prior_mean='zero' is not numeric"):
        lik.site_approximation("laplace", "zero", 1.0)


def test_every_error_is_a_lattice_lgm_error():
    for call in (lambda: Poisson(np.array([-1.0])), lambda: Bernoulli(np.array([1.0]), link="x"),
                 lambda: Gaussian(np.ones(2), noise_sd=np.ones(3))):
        with pytest.raises(LatticeLGMError):
            call()
