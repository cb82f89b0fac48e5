"""Dense colourisation of a batch: each chain's field bitwise as alone (issue 26)."""

from __future__ import annotations

import numpy as np
import pytest

from lattice_lgm import Lattice
from lattice_lgm.covariance import Matern, SquaredExponential
from lattice_lgm.priors import DensePrior


@pytest.mark.parametrize("n", [1, 7, 8, 9, 64, 203])
def test_batched_colorize_is_each_row_alone_and_equals_the_matrix_product(n):
    prior = DensePrior.from_lattice(Lattice((n,)), Matern(1.5, sd=1.3, range=n / 5 + 1.0))
    z = np.random.default_rng(n).standard_normal((5, n))
    batch = prior.colorize(z)
    for c in range(5):  # alone, and in every contiguous sub-batch it can be part of
        np.testing.assert_array_equal(prior.colorize(z[c:c + 1])[0], batch[c])
        np.testing.assert_array_equal(prior.colorize(z[c:])[0], batch[c])
    ref = z @ prior.chol.T  # the definition x = L z; a different summation order
    np.testing.assert_allclose(batch, ref, rtol=1e-12, atol=1e-12 * np.abs(ref).max())


def test_batched_colorize_on_a_2d_lattice_keeps_shapes():
    prior = DensePrior.from_lattice(Lattice((6, 5)), SquaredExponential(sd=1.0, range=2.0))
    z = np.random.default_rng(0).standard_normal((3, 6, 5))
    x = prior.colorize(z)
    assert x.shape == (3, 6, 5)
    np.testing.assert_allclose(x.reshape(3, -1), z.reshape(3, -1) @ prior.chol.T,
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(prior.whiten(x), z, rtol=1e-8, atol=1e-8)
