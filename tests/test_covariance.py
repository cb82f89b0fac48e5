"""Covariance functions: closed forms against Bessel functions, the range convention, anisotropy,
immutability and input errors.  Deterministic identities: tolerances are round-off.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import special

from lattice_lgm.covariance import (
    Covariance,
    Exponential,
    Matern,
    RationalQuadratic,
    SquaredExponential,
    resolve_range,
)
from lattice_lgm.errors import InvalidParameterError, ShapeMismatchError

U = np.concatenate([[0.0], np.geomspace(1e-4, 12.0, 200)])  # distances in lengthscales


def matern_scipy(nu: float, u: np.ndarray) -> np.ndarray:
    """Rasmussen & Williams (2006) eq. 4.14 straight from scipy.special.kv."""
    z = math.sqrt(2.0 * nu) * np.asarray(u, dtype=float)
    out = np.ones_like(z)
    pos = z > 0
    out[pos] = 2.0 ** (1.0 - nu) / special.gamma(nu) * z[pos] ** nu * special.kv(nu, z[pos])
    return out


# -- closed forms and the Bessel path -----------------------------------------------------------


@pytest.mark.parametrize("nu", [0.5, 1.5, 2.5])
def test_closed_forms_match_general_bessel_path(nu):
    closed = Matern(nu, range=2.0).correlation(U)
    general = Matern(nu + 1e-9, range=2.0).correlation(U)  # takes the kve branch
    np.testing.assert_allclose(closed, general, rtol=0, atol=1e-6)


@pytest.mark.parametrize("nu", [0.5, 1.5, 2.5, 0.3, 0.8, 1.0, 2.0, 3.7, 6.0])
def test_matern_matches_scipy_kv(nu):
    np.testing.assert_allclose(
        Matern(nu, range=1.0).correlation(U), matern_scipy(nu, U), rtol=1e-10, atol=1e-14
    )


@pytest.mark.parametrize("nu", [0.7, 1.7, 3.3, 20.0, 60.0])
def test_matern_general_path_is_finite_near_zero(nu):
    """kν(z) overflows as z → 0; the correlation must still tend to 1, never inf or NaN."""
    u = np.array([1e-300, 1e-150, 1e-30, 1e-12, 1e-8])
    rho = Matern(nu, range=1.0).correlation(u)
    assert np.all(np.isfinite(rho)), rho
    np.testing.assert_allclose(rho, 1.0, rtol=0, atol=1e-8)


def test_matern_near_coincident_points_give_finite_matrix():
    x = np.array([[1e6, 2e6], [1e6 + 1e-9, 2e6]])  # UTM-sized coordinates, 1 nm apart
    k = Matern(60.0, range=1.0, sd=2.0)(x)
    assert np.all(np.isfinite(k))
    np.testing.assert_allclose(k, 4.0, rtol=1e-8)


def test_matern_half_equals_exponential():
    x = np.random.default_rng(11).uniform(0, 5, size=(30, 2))
    a = Matern(0.5, sd=1.7, range=(1.3, 0.6))(x)
    b = Exponential(sd=1.7, range=(1.3, 0.6))(x)
    np.testing.assert_allclose(a, b, rtol=1e-14, atol=0)


def test_rational_quadratic_tends_to_squared_exponential():
    se = SquaredExponential(range=1.0).correlation(U)
    errs = [np.max(np.abs(RationalQuadratic(a, range=1.0).correlation(U) - se))
            for a in (1.0, 10.0, 1e3, 1e6)]
    assert all(e2 < e1 for e1, e2 in itertools.pairwise(errs)), errs
    assert errs[-1] < 1e-6
    assert errs[0] > 1e-2  # alpha = 1 is visibly different: the check has teeth


def test_rational_quadratic_formula():
    rq = RationalQuadratic(2.5, range=1.0)
    np.testing.assert_allclose(rq.correlation(U), (1 + U**2 / 5.0) ** -2.5, rtol=1e-14)


# -- the range convention -----------------------------------------------------------------------


@pytest.mark.parametrize("cls", [SquaredExponential, Exponential])
def test_correlation_at_range_is_exp_minus_two(cls):
    k = cls(sd=3.0, range=0.7)
    assert k.from_lags(np.array([[0.7]]))[0] / k.variance == pytest.approx(math.exp(-2.0),
                                                                           rel=1e-14)
    # the same in 2-D along a diagonal
    d = 0.7 / math.sqrt(2.0)
    assert k.from_lags(np.array([d, d])) / 9.0 == pytest.approx(math.exp(-2.0), rel=1e-13)


@pytest.mark.parametrize("nu", [0.5, 1.0, 1.5, 2.5, 3.7])
def test_matern_range_is_inla_practical_range(nu):
    """range = sqrt(8 nu) / kappa with kappa = sqrt(2 nu) / lengthscale (Lindgren et al. 2011)."""
    r = 0.3
    k = Matern(nu, range=r)
    kappa = math.sqrt(2.0 * nu) / k.lengthscale[0]
    assert math.sqrt(8.0 * nu) / kappa == pytest.approx(r, rel=1e-14)
    # Matérn in kappa form: 2^{1-nu}/Gamma(nu) (kappa d)^nu K_nu(kappa d)
    kd = kappa * r
    expected = 2.0 ** (1 - nu) / special.gamma(nu) * kd**nu * special.kv(nu, kd)
    assert k.from_lags(np.array([r]))[()] == pytest.approx(expected, rel=1e-10)
    if nu == 1.0:  # INLA's "correlation about 0.13 at the practical range"
        assert 0.13 < expected < 0.145


def test_range_is_twice_the_lengthscale_and_lengthscale_is_an_alias():
    a = Matern(1.5, lengthscale=0.15)
    b = Matern(1.5, range=0.3)
    assert a == b
    assert a.range == (0.3,)
    assert b.lengthscale == (0.15,)
    x = np.random.default_rng(3).uniform(0, 1, size=(20, 2))
    np.testing.assert_array_equal(a(x), b(x))
    assert SquaredExponential(lengthscale=(1.0, 2.0)).range == (2.0, 4.0)
    assert resolve_range(None, 0.25) == (0.5,)


@pytest.mark.parametrize("kw", [{}, {"range": 1.0, "lengthscale": 0.5}])
def test_range_and_lengthscale_exactly_one(kw):
    with pytest.raises(InvalidParameterError, match="exactly one of range="):
        Matern(1.5, **kw)
    with pytest.raises(InvalidParameterError, match="exactly one of range="):
        SquaredExponential(**kw)


# -- anisotropy, lags and matrices --------------------------------------------------------------


def test_per_axis_ranges_scale_each_axis():
    aniso = Matern(1.5, sd=1.2, range=(2.0, 5.0))
    d = np.linspace(0, 6, 13)
    zeros = np.zeros_like(d)
    along0 = aniso.from_lags(np.stack([d, zeros], axis=-1))
    along1 = aniso.from_lags(np.stack([zeros, d], axis=-1))
    np.testing.assert_allclose(along0, Matern(1.5, sd=1.2, range=2.0).from_lags(d[:, None]),
                               rtol=1e-14)
    np.testing.assert_allclose(along1, Matern(1.5, sd=1.2, range=5.0).from_lags(d[:, None]),
                               rtol=1e-14)
    # an oblique lag: u = sqrt((a / l0)^2 + (b / l1)^2)
    u = math.hypot(1.0 / 1.0, 3.0 / 2.5)
    assert aniso.from_lags(np.array([1.0, 3.0])) == pytest.approx(1.44 * matern_scipy(1.5, u),
                                                                  rel=1e-12)


def test_from_axis_lags_equals_from_lags_on_outer_grid():
    k = Matern(2.5, sd=0.8, range=(1.0, 2.0, 3.0))
    lags = [np.linspace(-2, 2, 5), np.linspace(0, 3, 4), np.array([0.0, 0.5, 7.0])]
    grid = np.stack(np.meshgrid(*lags, indexing="ij"), axis=-1)
    np.testing.assert_allclose(k.from_axis_lags(lags), k.from_lags(grid), rtol=1e-14, atol=0)
    assert k.from_axis_lags(lags).shape == (5, 4, 3)


@pytest.mark.parametrize(
    "kernel",
    [
        Matern(1.5, sd=1.3, range=0.8),
        Matern(0.8, range=(0.5, 1.5)),
        Exponential(range=1.0),
        SquaredExponential(sd=0.5, range=0.6),
        RationalQuadratic(0.7, range=1.1),
    ],
    ids=repr,
)
def test_call_is_symmetric_and_psd(kernel):
    x = np.random.default_rng(5).uniform(0, 4, size=(80, 2))
    k = kernel(x)
    assert k.shape == (80, 80)
    np.testing.assert_array_equal(k, k.T)
    np.testing.assert_allclose(np.diag(k), kernel.variance, rtol=1e-14)
    eig = np.linalg.eigvalsh(k)
    assert eig[0] >= -1e-10 * eig[-1]


def test_call_cross_covariance():
    k = Matern(1.5, range=1.0)
    x1 = np.random.default_rng(6).uniform(0, 2, size=(5, 2))
    x2 = np.random.default_rng(7).uniform(0, 2, size=(3, 2))
    kx = k(x1, x2)
    assert kx.shape == (5, 3)
    np.testing.assert_allclose(kx, k(x2, x1).T, rtol=1e-15)
    np.testing.assert_allclose(kx[1, 2], k.from_lags(x1[1] - x2[2]), rtol=1e-15)


def test_call_on_flat_1d_inputs_means_points_on_a_line():
    """A flat (n,) array is n points in 1-D, as in DensePrior (not one point in n-D)."""
    k = Matern(1.5, range=1.0)
    x = np.linspace(0, 2, 7)
    np.testing.assert_array_equal(k(x), k(x[:, None]))


def test_call_column_mismatch():
    k = Matern(1.5, range=1.0)
    with pytest.raises(ShapeMismatchError, match="x1 has 2 columns and x2 has 3"):
        k(np.zeros((4, 2)), np.zeros((4, 3)))


def test_range_tuple_length_must_match_inputs():
    k = Matern(1.5, range=(1.0, 2.0))
    with pytest.raises(ShapeMismatchError, match=r"range=\(1\.0, 2\.0\) has 2 entries .* 3 axes"):
        k.from_lags(np.zeros((4, 3)))
    with pytest.raises(ShapeMismatchError, match="has 2 entries"):
        k.from_axis_lags([np.zeros(2)])
    with pytest.raises(ShapeMismatchError, match="has 2 entries"):
        k(np.zeros((4, 1)))


# -- with_params, immutability, equality --------------------------------------------------------


def test_with_params_changes_only_what_is_asked():
    k = Matern(2.5, sd=1.3, range=(0.4, 0.9))
    k2 = k.with_params(sd=0.5)
    assert k2.params == {"sd": 0.5, "range": (0.4, 0.9), "nu": 2.5}
    k3 = k.with_params(range=2.0)
    assert k3.params == {"sd": 1.3, "range": 2.0, "nu": 2.5}
    k4 = k.with_params(lengthscale=0.5)
    assert k4.range == (1.0,) and k4.sd == 1.3 and k4.nu == 2.5
    k5 = k.with_params(nu=0.5)
    assert type(k5) is Matern and k5.nu == 0.5 and k5.range == (0.4, 0.9)
    rq = RationalQuadratic(3.0, sd=2.0, range=1.0).with_params(alpha=0.5)
    assert rq.params == {"sd": 2.0, "range": 1.0, "alpha": 0.5}
    # the original is untouched
    assert k.params == {"sd": 1.3, "range": (0.4, 0.9), "nu": 2.5}


def test_with_params_both_range_and_lengthscale():
    with pytest.raises(InvalidParameterError, match="range= or lengthscale="):
        Matern(1.5, range=1.0).with_params(range=2.0, lengthscale=1.0)


def test_with_params_unknown_name_is_named():
    with pytest.raises(InvalidParameterError, match="alpha"):
        Matern(1.5, range=1.0).with_params(alpha=2.0)
    with pytest.raises(InvalidParameterError, match="nu"):
        SquaredExponential(range=1.0).with_params(nu=2.0)


@pytest.mark.parametrize(
    "kernel", [Matern(1.5, range=1.0), SquaredExponential(range=1.0),
               RationalQuadratic(1.0, range=1.0)], ids=repr
)
@pytest.mark.parametrize("attr", ["sd", "range", "nu", "alpha", "new_attribute"])
def test_covariance_is_immutable(kernel, attr):
    with pytest.raises(AttributeError, match="immutable"):
        setattr(kernel, attr, 2.0)
    assert kernel.sd == 1.0 and kernel.range == (1.0,)


def test_equality_and_hash():
    assert Matern(1.5, range=1.0) == Matern(1.5, range=1.0)
    assert hash(Matern(1.5, range=1.0)) == hash(Matern(1.5, range=1.0))
    assert Matern(1.5, range=1.0) != Matern(2.5, range=1.0)
    assert Matern(0.5, range=1.0) != Exponential(range=1.0)  # same values, different type
    assert len({Matern(1.5, range=1.0), Matern(1.5, range=1.0), Exponential(range=1.0)}) == 2


def test_repr_round_trips_the_parameters():
    k = Matern(2.5, sd=1.3, range=(0.4, 0.9))
    assert repr(k) == "Matern(sd=1.3, range=(0.4, 0.9), nu=2.5)"
    assert eval(repr(k)) == k  # a trusted literal


def test_smooth_flags():
    assert SquaredExponential(range=1.0).smooth
    assert RationalQuadratic(range=1.0).smooth
    assert not Exponential(range=1.0).smooth
    assert not Matern(1.5, range=1.0).smooth
    assert Matern(6.0, range=1.0).smooth


def test_covariance_is_abstract():
    with pytest.raises(TypeError):
        Covariance(range=1.0)  # type: ignore[abstract]


# -- errors -------------------------------------------------------------------------------------

NAN = float("nan")


@pytest.mark.parametrize(
    ("build", "pattern"),
    [
        (lambda: Matern(1.5, sd=NAN, range=1.0), r"sd=nan"),
        (lambda: Matern(1.5, sd=-1.0, range=1.0), r"sd=-1\.0"),
        (lambda: Matern(1.5, sd=0.0, range=1.0), r"sd=0\.0"),
        (lambda: Matern(1.5, range=NAN), r"range=nan"),
        (lambda: Matern(1.5, range=-2.0), r"range=-2\.0"),
        (lambda: Matern(1.5, range=(1.0, -2.0)), r"range\[1\]=-2\.0"),
        (lambda: Matern(1.5, range=float("inf")), r"range=inf"),
        (lambda: Matern(1.5, lengthscale=0.0), r"lengthscale=0\.0"),
        (lambda: Matern(NAN, range=1.0), r"nu=nan"),
        (lambda: Matern(-0.5, range=1.0), r"nu=-0\.5"),
        (lambda: Matern(0.0, range=1.0), r"nu=0\.0"),
        (lambda: RationalQuadratic(NAN, range=1.0), r"alpha=nan"),
        (lambda: RationalQuadratic(-1.0, range=1.0), r"alpha=-1\.0"),
        (lambda: SquaredExponential(sd="big", range=1.0), r"sd='big' is not a number"),
        (lambda: Exponential(range=[[1.0, 2.0]]), r"scalar or a 1-D sequence"),
    ],
)
def test_invalid_parameters(build, pattern):
    with pytest.raises(InvalidParameterError, match=pattern):
        build()
