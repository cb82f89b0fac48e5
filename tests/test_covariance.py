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
    SpaceTime,
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


# -- the separable space-time kernel ------------------------------------------------------------
# Oracles: the closed forms of the components written out by hand, and products of the component
# kernels evaluated on their own sub-lags.  Tolerances are round-off.

ST_SD, ST_RS, ST_RT = 1.3, 0.8, 3.0


def st_kernel(**kw) -> SpaceTime:
    return SpaceTime(Matern(1.5, range=1.0), Exponential(range=1.0),
                     **{"sd": ST_SD, "range": ST_RS, "range_t": ST_RT, **kw})


def st_by_hand(lags: np.ndarray) -> np.ndarray:
    """sd² exp(-|u| / l_t) (1 + √3 r / l_s) exp(-√3 r / l_s), l = range / 2 (R&W eq. 4.17)."""
    u = np.abs(lags[..., 0]) / (ST_RT / 2)
    z = math.sqrt(3.0) * np.sqrt(np.sum(lags[..., 1:] ** 2, axis=-1)) / (ST_RS / 2)
    return ST_SD**2 * np.exp(-u) * (1.0 + z) * np.exp(-z)


ST_LAGS = np.random.default_rng(21).uniform(-3.0, 3.0, size=(60, 3)) * [2.0, 0.5, 0.5]


def test_space_time_from_lags_is_the_product_of_the_components():
    k = st_kernel()
    got = k.from_lags(ST_LAGS)
    product = ST_SD**2 * (Exponential(range=ST_RT).from_lags(ST_LAGS[:, :1])
                          * Matern(1.5, range=ST_RS).from_lags(ST_LAGS[:, 1:]))
    np.testing.assert_allclose(got, product, rtol=1e-14, atol=0)
    # the closed forms by hand: u computed as |s| / l instead of |s / l| costs an ulp or two of
    # the argument, amplified by at most u·|ρ'/ρ| ≈ 20 here
    np.testing.assert_allclose(got, st_by_hand(ST_LAGS), rtol=1e-13, atol=0)
    # time is axis 0 with its own range: a pure time lag of range_t gives exp(-2)
    assert k.from_lags(np.array([ST_RT, 0.0, 0.0])) == pytest.approx(ST_SD**2 * math.exp(-2.0),
                                                                     rel=1e-14)
    # a spatial lag of the spatial range along y or x gives the Matérn 3/2 value at u = 2
    m = (1 + 2 * math.sqrt(3.0)) * math.exp(-2 * math.sqrt(3.0))
    for lag in ([0.0, ST_RS, 0.0], [0.0, 0.0, ST_RS]):
        assert k.from_lags(np.array(lag)) == pytest.approx(ST_SD**2 * m, rel=1e-14)


def test_space_time_from_axis_lags_is_the_outer_product():
    k = st_kernel()
    lags = [np.array([0.0, 1.0, 2.5, 7.0]), np.linspace(0, 2, 5), np.array([0.0, 0.3, 1.1])]
    got = k.from_axis_lags(lags)
    assert got.shape == (4, 5, 3)
    grid = np.stack(np.meshgrid(*lags, indexing="ij"), axis=-1)
    np.testing.assert_allclose(got, st_by_hand(grid), rtol=1e-13, atol=0)
    outer = ST_SD**2 * (Exponential(range=ST_RT).from_lags(lags[0][:, None])[:, None, None]
                        * Matern(1.5, range=ST_RS).from_axis_lags(lags[1:])[None])
    np.testing.assert_allclose(got, outer, rtol=1e-14, atol=0)
    np.testing.assert_allclose(got, k.from_lags(grid), rtol=1e-14, atol=0)


def test_space_time_call_is_the_hadamard_product_of_component_matrices():
    k = st_kernel()
    x = np.random.default_rng(22).uniform(0, 4, size=(40, 3))
    got = k(x)
    expected = ST_SD**2 * Exponential(range=ST_RT)(x[:, :1]) * Matern(1.5, range=ST_RS)(x[:, 1:])
    np.testing.assert_allclose(got, expected, rtol=1e-14, atol=0)
    np.testing.assert_array_equal(got, got.T)
    eig = np.linalg.eigvalsh(got)
    assert eig[0] > 0  # Schur product of positive definite matrices
    x2 = x[:7] + 0.1
    np.testing.assert_allclose(k(x, x2), ST_SD**2 * Exponential(range=ST_RT)(x[:, :1], x2[:, :1])
                               * Matern(1.5, range=ST_RS)(x[:, 1:], x2[:, 1:]), rtol=1e-14)


def test_space_time_two_axes():
    k = SpaceTime(Matern(2.5, range=0.5), Exponential(range=4.0), ndim=2)
    assert k.range == (4.0, 0.5)
    lags = ST_LAGS[:, :2]
    np.testing.assert_allclose(
        k.from_lags(lags),
        Exponential(range=4.0).from_lags(lags[:, :1]) * Matern(2.5, range=0.5).from_lags(
            lags[:, 1:]), rtol=1e-14, atol=0)
    assert k.from_axis_lags([np.arange(3.0), np.arange(4.0)]).shape == (3, 4)


def test_space_time_correlation_takes_pairs_and_refuses_one_distance():
    k = st_kernel()
    u = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 2.0], [1.0, 0.5]])
    m = lambda z: (1 + math.sqrt(3) * z) * math.exp(-math.sqrt(3) * z)  # noqa: E731
    np.testing.assert_allclose(k.correlation(u), [1.0, math.exp(-2.0), m(2.0),
                                                  math.exp(-1.0) * m(0.5)], rtol=1e-14)
    with pytest.raises(ShapeMismatchError, match=r"\(u_t, u_s\) pairs .* not a function of one "
                                                  "distance"):
        k.correlation(1.0)
    with pytest.raises(ShapeMismatchError, match=r"got shape \(5,\)"):
        k.correlation(np.zeros(5))


def test_space_time_ranges_params_and_defaults():
    k = st_kernel()
    assert k.range == (ST_RT, ST_RS, ST_RS)
    assert k.lengthscale == (ST_RT / 2, ST_RS / 2, ST_RS / 2)
    np.testing.assert_array_equal(k.lengthscales_for(3), [ST_RT / 2, ST_RS / 2, ST_RS / 2])
    assert (k.range_t, k.range_s, k.ndim, k.sd, k.variance) == (ST_RT, ST_RS, 3, ST_SD,
                                                                ST_SD**2)
    assert k.params == {"sd": ST_SD, "range": ST_RS, "range_t": ST_RT, "nu": 1.5}
    assert k.space == Matern(1.5, range=ST_RS) and k.time == Exponential(range=ST_RT)
    # ranges default to the components'; sd defaults to 1
    d = SpaceTime(Matern(0.7, range=0.3), Matern(2.5, range=4.0))
    assert d.range == (4.0, 0.3, 0.3) and d.sd == 1.0
    assert d.params == {"sd": 1.0, "range": 0.3, "range_t": 4.0, "nu": 0.7, "nu_t": 2.5}
    # lengthscale aliases and a per-axis tuple
    assert SpaceTime(Matern(1.5, range=1.0), Exponential(range=1.0), lengthscale=0.2,
                     lengthscale_t=1.5).range == (3.0, 0.4, 0.4)
    assert SpaceTime(Matern(1.5, range=1.0), Exponential(range=1.0),
                     range=(5.0, 0.2, 0.2)).range == (5.0, 0.2, 0.2)
    assert SpaceTime(Matern(1.5, range=1.0), Exponential(range=1.0),
                     lengthscale=(2.5, 0.1, 0.1)).range == (5.0, 0.2, 0.2)
    rq = SpaceTime(RationalQuadratic(0.5, range=1.0), RationalQuadratic(3.0, range=2.0))
    assert rq.params == {"sd": 1.0, "range": 1.0, "range_t": 2.0, "alpha": 0.5, "alpha_t": 3.0}


def test_space_time_with_params():
    k = st_kernel()
    assert k.with_params(sd=0.5).params == {**k.params, "sd": 0.5}
    assert k.with_params(range=0.4).range == (ST_RT, 0.4, 0.4)
    assert k.with_params(range_t=7.0).range == (7.0, ST_RS, ST_RS)
    assert k.with_params(lengthscale=0.1, lengthscale_t=1.0).range == (2.0, 0.2, 0.2)
    # the circulant prior's calls: a per-axis tuple broadcast to ndim
    assert k.with_params(range=(9.0, 1.5, 1.5)).range == (9.0, 1.5, 1.5)
    assert k.with_params(range=(ST_RT, ST_RS, ST_RS)) == k
    assert k.with_params(range=[4.0]).range == (ST_RT, 4.0, 4.0)
    k2 = k.with_params(nu=2.5)
    assert k2.space == Matern(2.5, range=ST_RS) and k2.time == k.time
    t2 = SpaceTime(Matern(1.5, range=1.0), Matern(0.5, range=2.0)).with_params(nu_t=2.5)
    assert t2.time == Matern(2.5, range=2.0) and t2.space == Matern(1.5, range=1.0)
    assert type(k.with_params(sd=2.0)) is SpaceTime
    assert k == st_kernel()  # untouched


@pytest.mark.parametrize(
    ("kw", "exc", "pattern"),
    [
        ({"range": (9.0, 1.0, 2.0)}, InvalidParameterError,
         r"range=\(9\.0, 1\.0, 2\.0\) has spatial entries \(1\.0, 2\.0\) that differ.*isotropic"),
        ({"range": (9.0, 1.0, 1.0), "range_t": 2.0}, InvalidParameterError,
         r"per-axis tuple .* range_t=2\.0 was given too"),
        ({"range": (1.0, 2.0)}, ShapeMismatchError, r"range=\(1\.0, 2\.0\) has 2 entries.*ndim=3"),
        ({"range": 1.0, "lengthscale": 0.5}, InvalidParameterError, "range= or lengthscale="),
        ({"range_t": 1.0, "lengthscale_t": 0.5}, InvalidParameterError,
         "range_t= or lengthscale_t="),
        ({"alpha": 1.0}, InvalidParameterError, r"no hyperparameter\(s\) \['alpha'\]"),
        ({"nu_t": 1.0}, InvalidParameterError, r"\['nu_t'\]"),  # Exponential has no nu
        ({"range_t": -1.0}, InvalidParameterError, r"range_t=-1\.0 must be finite"),
        ({"range": float("nan")}, InvalidParameterError, r"range=nan"),
        ({"sd": 0.0}, InvalidParameterError, r"sd=0\.0"),
    ],
)
def test_space_time_with_params_errors(kw, exc, pattern):
    with pytest.raises(exc, match=pattern):
        st_kernel().with_params(**kw)


def _m():
    return Matern(1.5, range=1.0)


@pytest.mark.parametrize(
    ("build", "exc", "pattern"),
    [
        (lambda: SpaceTime("matern", _m()), InvalidParameterError,
         r"space='matern' must be a one-range lattice_lgm Covariance"),
        (lambda: SpaceTime(_m(), None), InvalidParameterError, r"time=None must be"),
        (lambda: SpaceTime(SpaceTime(_m(), _m()), _m()), InvalidParameterError,
         r"space=SpaceTime\(.* must be a one-range"),
        (lambda: SpaceTime(Matern(1.5, range=(1.0, 2.0)), _m()), InvalidParameterError,
         r"per-axis ranges \(1\.0, 2\.0\)"),
        (lambda: SpaceTime(_m(), Exponential(range=(1.0, 2.0))), InvalidParameterError,
         r"time=.* per-axis ranges"),
        (lambda: SpaceTime(Matern(1.5, sd=2.0, range=1.0), _m()), InvalidParameterError,
         r"sd=2\.0; SpaceTime has one marginal sd.*SpaceTime\(\.\.\., sd=2\.0\)"),
        (lambda: SpaceTime(_m(), _m(), ndim=1), InvalidParameterError, r"ndim=1 must be"),
        (lambda: SpaceTime(_m(), _m(), ndim=True), InvalidParameterError, r"ndim=True"),
        (lambda: SpaceTime(_m(), _m(), range=(1.0, 1.0, 2.0, 2.0)), ShapeMismatchError,
         "has 4 entries"),
        (lambda: SpaceTime(_m(), _m(), range=(1.0, 1.0, 1.0), lengthscale_t=2.0),
         InvalidParameterError, r"lengthscale_t=2\.0 was given too"),
        (lambda: SpaceTime(_m(), _m(), lengthscale_t=0.0), InvalidParameterError,
         r"lengthscale_t=0\.0"),
    ],
)
def test_space_time_construction_errors(build, exc, pattern):
    with pytest.raises(exc, match=pattern):
        build()


def test_space_time_refuses_inputs_with_the_wrong_number_of_axes():
    k = st_kernel()
    with pytest.raises(ShapeMismatchError, match=r"lags have 2 axes but this SpaceTime has "
                                                 r"ndim=3 .*SpaceTime\(\.\.\., ndim=2\)"):
        k.from_lags(np.zeros((4, 2)))
    with pytest.raises(ShapeMismatchError, match=r"lags have 1 axes .* needs a time axis"):
        k.from_lags(np.zeros((4, 1)))
    with pytest.raises(ShapeMismatchError, match=r"lags have 0 axes"):
        k.from_lags(1.0)
    with pytest.raises(ShapeMismatchError, match=r"axis_lags have 2 axes"):
        k.from_axis_lags([np.zeros(2), np.zeros(3)])
    with pytest.raises(ShapeMismatchError, match=r"the inputs have 2 axes"):
        k.lengthscales_for(2)
    with pytest.raises(ShapeMismatchError, match=r"lags have 1 axes"):
        k(np.linspace(0, 1, 5))  # a flat array is points on a line
    with pytest.raises(ShapeMismatchError, match=r"lags have 3 axes .*ndim=2"):
        SpaceTime(_m(), _m(), ndim=2).from_lags(np.zeros(3))


def test_space_time_identity_repr_and_immutability():
    k = st_kernel()
    assert repr(k) == ("SpaceTime(Matern(sd=1.0, range=0.8, nu=1.5), Exponential(sd=1.0, "
                       "range=3.0), sd=1.3, range=0.8, range_t=3.0)")
    assert eval(repr(k)) == k  # a trusted literal
    k2 = SpaceTime(_m(), Exponential(range=2.0), ndim=2)
    assert repr(k2).endswith("ndim=2)") and eval(repr(k2)) == k2
    assert k == st_kernel() and hash(k) == hash(st_kernel())
    assert k != st_kernel(range_t=3.5)
    assert k != k2
    # same parameter dicts, different component types: not equal
    a = SpaceTime(SquaredExponential(range=1.0), Exponential(range=1.0))
    b = SpaceTime(Exponential(range=1.0), SquaredExponential(range=1.0))
    assert a.params == b.params and a != b
    assert len({a, b, SpaceTime(SquaredExponential(range=1.0), Exponential(range=1.0))}) == 2
    assert k != Matern(1.5, range=(3.0, 0.8, 0.8))
    for attr in ("sd", "range", "range_t", "space", "new_attribute"):
        with pytest.raises(AttributeError, match="immutable"):
            setattr(k, attr, 2.0)
    import pickle

    assert pickle.loads(pickle.dumps(k)) == k


def test_space_time_smooth_if_either_factor_is():
    assert not st_kernel().smooth
    assert SpaceTime(SquaredExponential(range=1.0), Exponential(range=1.0)).smooth
    assert SpaceTime(Exponential(range=1.0), Matern(6.0, range=1.0)).smooth


@pytest.mark.parametrize("ndim", [1, 2, 3, 7, 8, 9, 16, 17, 34, 128, 129])
def test_dense_matrix_is_bitwise_the_lag_formula(ndim):
    """``k(x1, x2)`` (a Numba distance kernel for ≤ 128 axes) is bitwise ``from_lags`` of the
    lag array: the data sets and stored runs made before the kernel depend on those bits."""
    rng = np.random.default_rng(ndim)
    x, y = rng.uniform(-1, 1, (23, ndim)), rng.uniform(-1, 1, (17, ndim))
    for k in (SquaredExponential(sd=1.3, lengthscale=rng.uniform(0.5, 3, ndim)),
              Matern(1.5, sd=0.7, range=2.0), RationalQuadratic(alpha=2.0, range=0.3)):
        assert np.array_equal(k(x), k.from_lags(x[:, None, :] - x[None, :, :]))
        assert np.array_equal(k(x, y), k.from_lags(x[:, None, :] - y[None, :, :]))
        assert np.array_equal(k(x), k(x).T)


@pytest.mark.parametrize("ndim", [3, 8, 10, 34, 128])
def test_distances_reused_across_moves_are_bitwise_fresh(ndim, monkeypatch):
    """A hyperparameter family reuses its parent's scaled distances (one running sum recomputed
    for a univariate lengthscale move, none for sd); every step is bitwise the fresh matrix, and
    a univariate move shares all but one running sum with its parent."""
    import lattice_lgm.covariance._distances as cov

    rng = np.random.default_rng(ndim)
    x = rng.uniform(-1, 1, (29, ndim))
    k = SquaredExponential(sd=1.1, lengthscale=rng.uniform(0.5, 3, ndim))
    dist = k._self_distances(x)
    assert np.array_equal(k._from_distances(dist.u), k(x))
    top = ndim - ndim % 8
    # coordinates in the running sums and in the remainder, sd alone, two and all at once
    moves = [[0], [ndim - 1], [], [ndim // 2], [1, ndim - 2], list(range(ndim)), [top - 1]]
    for dims in moves:
        ls = k.lengthscales_for(ndim).copy()
        ls[dims] *= rng.uniform(0.5, 2.0, len(dims))
        child = k.with_params(sd=k.sd * 1.01, lengthscale=ls)
        new = child._self_distances(x, dist)
        assert np.array_equal(child._from_distances(new.u), child(x)), dims
        if not dims:
            assert new is dist
        elif len(dims) == 1 and dist.lanes:
            moved = {dims[0] % 8} if dims[0] < top else set()
            shared = {i for i in range(8) if new.lanes[i] is dist.lanes[i]}
            assert shared == set(range(8)) - moved
        k, dist = child, new
    # above the memory budget there are no running sums to keep, and the result is the same
    monkeypatch.setattr(cov, "_LANE_CACHE_BYTES", 0)
    ls = k.lengthscales_for(ndim) * 1.5
    child = k.with_params(lengthscale=ls)
    new = child._self_distances(x, dist)
    assert new.lanes == () and np.array_equal(child._from_distances(new.u), child(x))
