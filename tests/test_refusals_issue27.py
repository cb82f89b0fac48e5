"""Inputs accepted silently before issue 27, refused before any work now."""

from __future__ import annotations

import numpy as np
import pytest

from lattice_lgm import LGCP
from lattice_lgm.errors import InvalidParameterError
from lattice_lgm.hyperpriors import PCPriorRange


def _points(n=40, seed=0):
    return np.random.default_rng(seed).uniform(0, 100, size=(n, 2))


def test_a_pc_range_prior_with_rho0_above_its_bound_is_vacuous():
    with pytest.raises(InvalidParameterError, match=r"rho0=50.0 is not below upper=20.0"):
        PCPriorRange(50.0, 0.05, ndim=2, upper=20.0)
    with pytest.raises(InvalidParameterError, match="state nothing"):
        PCPriorRange(20.0, 0.05, ndim=2, upper=20.0)
    assert PCPriorRange(5.0, 0.05, ndim=2, upper=20.0).upper == 20.0


def test_a_one_cell_lattice_is_refused():
    with pytest.raises(InvalidParameterError, match=r"shape \(1, 1\): one cell"):
        LGCP(_points(), (0, 100, 0, 100), cell_size=100.0, units="m")
    LGCP(_points(), (0, 100, 0, 100), cell_size=50.0, units="m")  # 2 × 2 is a field


def test_a_range_bound_below_the_cell_size_is_refused():
    with pytest.raises(InvalidParameterError,
                       match=r"upper bound 4\.0 is below the cell size 10\.0"):
        LGCP(_points(), (0, 100, 0, 100), cell_size=10.0, units="m",
             range_prior=PCPriorRange(1.0, 0.05, ndim=2, upper=4.0))
    LGCP(_points(), (0, 100, 0, 100), cell_size=10.0, units="m",
         range_prior=PCPriorRange(1.0, 0.05, ndim=2, upper=40.0))
