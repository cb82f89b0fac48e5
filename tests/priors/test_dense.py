"""DensePrior specifics: matrix validation, the jitter policy and input errors.

The operator identities (W Wᵀ = K, solve, log_det, surrogate) are in test_conformance.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from lattice_lgm import Lattice
from lattice_lgm.covariance import Matern, SquaredExponential
from lattice_lgm.errors import (
    InvalidCovarianceError,
    InvalidParameterError,
    LatticeLGMError,
    NotPositiveDefiniteError,
    ShapeMismatchError,
)
from lattice_lgm.priors import DensePrior
from tests._jitter import assert_jitter_is_the_ladders

NAN = float("nan")


def _spd(n: int = 5, seed: int = 0) -> np.ndarray:
    a = np.random.default_rng(seed).standard_normal((n, n))
    return a @ a.T + n * np.eye(n)


# -- from_matrix validation ---------------------------------------------------------------------


@pytest.mark.parametrize("cov", [np.ones((3, 4)), np.ones(5), np.ones((2, 2, 2))])
def test_from_matrix_rejects_non_square(cov):
    with pytest.raises(InvalidCovarianceError, match=r"cov has shape .* must be square"):
        DensePrior.from_matrix(cov)


@pytest.mark.parametrize("bad", [NAN, np.inf, -np.inf])
def test_from_matrix_rejects_non_finite_naming_the_index(bad):
    cov = _spd()
    cov[2, 3] = cov[3, 2] = bad
    with pytest.raises(InvalidCovarianceError, match=r"non-finite entry at \(2, 3\)"):
        DensePrior.from_matrix(cov)


def test_from_matrix_rejects_asymmetric_naming_the_index():
    cov = _spd()
    cov[1, 4] += 1e-3
    with pytest.raises(InvalidCovarianceError,
                       match=r"not symmetric: cov\[(1,4|4,1)\]=.* but cov\[(4,1|1,4)\]"):
        DensePrior.from_matrix(cov)


def test_from_matrix_symmetrises_round_off():
    cov = _spd()
    cov[1, 4] += 1e-14 * np.abs(cov).max()  # round-off, well under the 1e-10 tolerance
    d = DensePrior.from_matrix(cov)
    np.testing.assert_array_equal(d.cov, d.cov.T)


def test_from_matrix_rejects_non_psd():
    cov = np.diag([1.0, 2.0, -0.5, 3.0])
    with pytest.raises(InvalidCovarianceError, match=r"not positive semi-definite: smallest "
                       r"eigenvalue -0\.5"):
        DensePrior.from_matrix(cov)


def test_from_matrix_accepts_spd_and_keeps_shape():
    cov = _spd(6)
    d = DensePrior.from_matrix(cov, shape=(2, 3))
    assert d.shape == d.state_shape == d.white_shape == (2, 3)
    assert d.jitter == 0.0
    assert d.params == {}
    assert d.sample(np.random.default_rng(0), 4).shape == (4, 2, 3)


def test_from_matrix_shape_must_hold_the_matrix():
    with pytest.raises(InvalidParameterError, match=r"shape=\(3, 3\) does not hold the 4"):
        DensePrior.from_matrix(np.eye(4), shape=(3, 3))


def test_with_params_on_from_matrix_prior_raises():
    d = DensePrior.from_matrix(_spd())
    with pytest.raises(InvalidParameterError, match="built from a matrix has no hyperparameters"):
        d.with_params(range=2.0)


# -- jitter policy -------------------------------------------------------------------------------
# Whether a numerically singular K factors without jitter is decided by round-off, so by the BLAS
# kernel OpenBLAS picks for the CPU (tests/_jitter.py): these tests expect a particular level only
# of matrices whose outcome is exact, and otherwise the ladder's level as this CPU finds it.

X60 = np.linspace(0.0, 1.0, 60)  # 60 closely spaced points: SE is numerically rank deficient
SE = SquaredExponential(range=1.0)
# so smooth that K is exactly the all-ones matrix (d²/ℓ² < 1e-19 rounds exp to 1): rank one, an
# exact zero pivot at jitter 0 on every CPU, and λ_min(K + 1e-10·I) = 1e-10, a thousand times
# Cholesky's round-off, so the level is 1e-10 on every CPU
SE_FLAT = SquaredExponential(range=1e10)


def test_auto_jitter_is_needed_and_recorded():
    d = DensePrior(X60, SE_FLAT)
    assert np.all(d.cov == 1.0)
    assert d.jitter > 0.0
    # the policy: relative steps 1e-10 … 1e-6 of the mean diagonal
    rel = d.jitter / np.mean(np.diag(d.cov))
    assert any(np.isclose(rel, r, rtol=1e-12) for r in (1e-10, 1e-9, 1e-8, 1e-7, 1e-6))
    # every operation is exact for K + jitter I: the factor reproduces it
    np.testing.assert_allclose(d.chol @ d.chol.T, d.cov + d.jitter * np.eye(60), rtol=0,
                               atol=1e-12)
    assert f"jitter={d.jitter:.3g}" in repr(d)
    # a numerically (not exactly) singular K: the level is the ladder's on this CPU, whatever
    # the kernel
    assert_jitter_is_the_ladders(DensePrior(X60, SE))


def test_auto_jitter_level_is_fixed_for_the_hyperparameter_family():
    """with_params keeps the level the user's prior needed (ε·mean diag K_θ at every θ), so the
    jitter is a function of θ fixed at the start, not of the factorisation history."""
    root = DensePrior(X60, SE_FLAT)  # K = all ones: needs ε = 1e-10 on every CPU
    eps = root.jitter / np.mean(np.diag(root.cov))
    assert eps == pytest.approx(1e-10, rel=1e-12)
    # range 0.05 factors exactly from scratch (λ_min ≈ 2e-4), but in the family it carries ε
    assert DensePrior(X60, SE.with_params(range=0.05)).jitter == 0.0
    child = root.with_params(range=0.05, sd=2.0)
    assert child.jitter == pytest.approx(eps * 4.0, rel=1e-12)
    np.testing.assert_allclose(child.chol @ child.chol.T, child.cov + child.jitter * np.eye(60),
                               rtol=0, atol=1e-12)
    # a grandchild takes the root's level, not its parent's: back at the root's θ it is the root
    back = child.with_params(range=1e10, sd=1.0)
    assert back.jitter == root.jitter
    np.testing.assert_array_equal(back.chol, root.chol)
    # a numerically singular root: its family climbs from the level this CPU found for it
    root = DensePrior(X60, SE)
    assert_jitter_is_the_ladders(root)
    for r in (0.05, 0.2, 3.0):
        assert_jitter_is_the_ladders(root.with_params(range=r), root.jitter_level)


def test_auto_jitter_family_density_is_continuous_in_theta():
    """One ulp of range moves log N(f; 0, K_θ) by round-off only.  Under the old per-θ ladder
    a neighbour factored at jitter 0 and it moved by 5e5 here (decision 60); at range 0.05 the
    old ladder factors at 0 on every CPU, so it would fail the level check below."""
    f = DensePrior(X60, SE).sample(np.random.default_rng(5), 1)
    root = DensePrior(X60, SE_FLAT)  # level 1e-10 on every CPU
    for r0 in (0.05, 0.1, 0.15, 0.2, 0.3):
        ref = root.with_params(range=r0)
        levels = set()
        for r in (r0, np.nextafter(r0, 1.0), np.nextafter(r0, 0.0)):
            nb = root.with_params(range=float(r))
            levels.add(nb.jitter / np.mean(np.diag(nb.cov)))
            assert abs(nb.logpdf(f)[0] - ref.logpdf(f)[0]) < 1e-6 * abs(ref.logpdf(f)[0]), r
        assert levels == {1e-10}


def test_zero_jitter_on_rank_deficient_kernel_raises():
    with pytest.raises(NotPositiveDefiniteError, match="not positive definite"):
        DensePrior(X60, SE_FLAT, jitter=0.0)


def test_auto_jitter_is_zero_when_not_needed():
    d = DensePrior(X60, Matern(0.5, range=0.5))  # λ_min(K) ≈ 0.03: factors on every CPU
    assert d.jitter == 0.0


def test_explicit_jitter_is_added_exactly():
    d = DensePrior(X60, SE, jitter=1e-6)
    assert d.jitter == 1e-6
    np.testing.assert_allclose(d.chol @ d.chol.T, d.cov + 1e-6 * np.eye(60), rtol=0, atol=1e-12)


@pytest.mark.parametrize(("jitter", "pattern"), [(-1e-6, r"jitter=-1e-06"), (NAN, r"jitter=nan")])
def test_invalid_jitter(jitter, pattern):
    with pytest.raises(InvalidParameterError, match=pattern):
        DensePrior(X60, Matern(0.5, range=0.5), jitter=jitter)


def test_rank_one_matrix_needs_jitter():
    cov = np.ones((4, 4))  # rank one, PSD: accepted by from_matrix, singular for Cholesky
    d = DensePrior.from_matrix(cov)
    assert d.jitter > 0
    with pytest.raises(NotPositiveDefiniteError, match="jitter"):
        DensePrior.from_matrix(cov, jitter=0.0)


def test_auto_jitter_gives_up_past_the_cap():
    # PSD to from_matrix's tolerance (-5e-9 ≥ -1e-8·max|eig|) but beyond the largest auto jitter,
    # 1e-6·mean(diag) = 1e-6 · (1 - 5e-9) / 400 ≈ 2.5e-9.
    cov = np.diag([1.0, -5e-9, *([0.0] * 398)])
    with pytest.raises(NotPositiveDefiniteError, match=r"jitter up to 2\.5e-09"):
        DensePrior.from_matrix(cov)
    assert DensePrior.from_matrix(cov, jitter=1e-8).jitter == 1e-8


# -- inputs --------------------------------------------------------------------------------------


def test_nan_input_names_the_index():
    x = np.random.default_rng(1).uniform(size=(6, 2))
    x[3, 1] = NAN
    with pytest.raises(InvalidParameterError, match=r"x has a non-finite value nan at index "
                                                    r"\(3, 1\)"):
        DensePrior(x, Matern(1.5, range=1.0))


def test_bad_input_shapes_and_kernel():
    with pytest.raises(InvalidParameterError, match=r"x has shape \(2, 3, 4\)"):
        DensePrior(np.zeros((2, 3, 4)), Matern(1.5, range=1.0))
    with pytest.raises(InvalidParameterError, match="is not a lattice_lgm Covariance"):
        DensePrior(X60, lambda a, b: a @ b.T)
    with pytest.raises(InvalidParameterError, match=r"shape=\(7, 7\) does not hold the 60"):
        DensePrior(X60, SE, shape=(7, 7))


def test_flat_inputs_are_points_on_a_line():
    d = DensePrior(X60, Matern(1.5, range=0.3))
    assert d.x.shape == (60, 1)
    np.testing.assert_array_equal(d.cov, Matern(1.5, range=0.3)(X60[:, None]))


def test_from_lattice_and_with_params():
    lat = Lattice((3, 4), spacing=0.5)
    d = DensePrior.from_lattice(lat, Matern(1.5, range=1.0, sd=2.0))
    assert d.exact_on == "lattice" and d.lattice is lat
    assert d.shape == (3, 4)
    e = d.with_params(sd=0.5)
    assert e.exact_on == "lattice" and e.lattice is lat
    assert e.params == {"sd": 0.5, "range": 1.0, "nu": 1.5}
    np.testing.assert_allclose(e.cov, d.cov / 16.0, rtol=1e-14)
    assert d.params["sd"] == 2.0  # untouched


# -- sampling arguments -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def prior():
    return DensePrior.from_lattice(Lattice((3, 4)), Matern(1.5, range=2.0))


@pytest.mark.parametrize(
    "rng", [None, np.random.RandomState(0), 1.5, "seed", True], ids=repr
)
def test_sample_rejects_non_generator_rng(prior, rng):
    with pytest.raises(InvalidParameterError, match=r"rng=.* must be a numpy\.random\.Generator"):
        prior.sample(rng)


@pytest.mark.parametrize("n", [0, -1, 2.0, True])
def test_sample_rejects_bad_n_chains(prior, n):
    with pytest.raises(InvalidParameterError, match=r"n_chains="):
        prior.sample(np.random.default_rng(0), n)


def test_int_seed_equals_generator(prior):
    np.testing.assert_array_equal(prior.sample(3, 2), prior.sample(np.random.default_rng(3), 2))


def test_chain_axis_errors(prior):
    with pytest.raises(ShapeMismatchError, match=r"x has shape \(3, 4\); expected \(n_chains"):
        prior.whiten(np.zeros((3, 4)))
    with pytest.raises(ShapeMismatchError, match=r"b has shape \(2, 4, 3\)"):
        prior.solve(np.zeros((2, 4, 3)))


# -- surrogate arguments ------------------------------------------------------------------------


def test_surrogate_rejects_negative_precision_naming_the_index(prior):
    pi = np.ones((3, 4))
    pi[2, 1] = -0.5
    with pytest.raises(InvalidParameterError, match=r"negative value -0\.5 at index \(2, 1\)"):
        prior.surrogate(np.zeros((1, 3, 4)), pi)


@pytest.mark.parametrize("bad", [NAN, np.inf])
def test_surrogate_rejects_non_finite_precision(prior, bad):
    pi = np.ones((3, 4))
    pi[0, 2] = bad
    with pytest.raises(InvalidParameterError, match=r"precision has a non-finite value .* "
                                                    r"index \(0, 2\)"):
        prior.surrogate(np.zeros((1, 3, 4)), pi)


def test_surrogate_rejects_non_finite_g(prior):
    g = np.zeros((2, 3, 4))
    g[1, 0, 3] = NAN
    with pytest.raises(InvalidParameterError, match=r"g has a non-finite value nan at index "
                                                    r"\(1, 0, 3\)"):
        prior.surrogate(g, 1.0)


@pytest.mark.parametrize("g_shape", [(3, 4), (2, 4, 3), (2, 12)])
def test_surrogate_rejects_wrong_g_shape(prior, g_shape):
    with pytest.raises(ShapeMismatchError, match=r"g has shape"):
        prior.surrogate(np.zeros(g_shape), 1.0)


def test_surrogate_rejects_wrong_precision_shape(prior):
    with pytest.raises(ShapeMismatchError, match=r"precision has shape \(4, 3\)"):
        prior.surrogate(np.zeros((1, 3, 4)), np.ones((4, 3)))


def test_surrogate_with_no_information_is_the_prior(prior):
    g = np.random.default_rng(2).standard_normal((2, 3, 4))
    s = prior.surrogate(g, 0.0)
    np.testing.assert_array_equal(s.mean, 0.0)
    np.testing.assert_array_equal(s.logmarginal, 0.0)
    z = np.random.default_rng(3).standard_normal((2, 3, 4))
    np.testing.assert_allclose(s.colorize(z), prior.colorize(z), rtol=1e-12, atol=1e-12)


def _exact_gaussian_logpdf(cov: np.ndarray, v: np.ndarray) -> float:
    """log N(v; 0, cov) with cov and v taken exactly as rationals (LDLᵀ by exact elimination)."""
    import math
    from fractions import Fraction

    a = [[Fraction(float(c)) for c in row] for row in cov]
    b = [Fraction(float(x)) for x in v]
    n, quad, det = len(b), Fraction(0), Fraction(1)
    for p in range(n):
        d = a[p][p]
        for i in range(p + 1, n):
            f = a[i][p] / d
            for j in range(p, n):
                a[i][j] -= f * a[p][j]
            b[i] -= f * b[p]
        quad += b[p] * b[p] / d
        det *= d
    logdet = math.log(det.numerator) - math.log(det.denominator)
    return -0.5 * float(quad) - 0.5 * logdet - 0.5 * n * math.log(2 * math.pi)


def test_surrogate_marginal_over_decades_of_site_precision():
    """The one-factor marginal (|B| = |A|, q = Σ π (g − m)² + ‖y‖²) against the exact
    (rational) density when site precisions span 1e-8 … 1e4, with unobserved sites among
    them.  scipy's eigh-based logpdf is off by ~1e-5 here, so it cannot be the reference."""
    rng = np.random.default_rng(11)
    x = rng.uniform(0, 1, (24, 2))
    k = SquaredExponential(sd=1.5, lengthscale=0.4)(x) + 1e-4 * np.eye(24)
    prior = DensePrior.from_matrix(k, jitter=0.0)
    pi = 10.0 ** rng.uniform(-8, 4, 24)
    pi[::7] = 0.0
    g = 3.0 * rng.standard_normal((2, 24))
    s = prior.surrogate(g, pi)
    obs = pi > 0
    cov = k[np.ix_(obs, obs)] + np.diag(1.0 / pi[obs])
    ref = [_exact_gaussian_logpdf(cov, row) for row in g[:, obs]]
    np.testing.assert_allclose(s.logmarginal, ref, rtol=1e-12)
    r = np.linalg.inv(np.linalg.inv(k) + np.diag(pi))
    np.testing.assert_allclose(s.mean, (r @ (pi * g).T).T, rtol=1e-7, atol=1e-9)


def test_errors_are_lattice_lgm_errors():
    for cls in (InvalidCovarianceError, InvalidParameterError, NotPositiveDefiniteError,
                ShapeMismatchError):
        assert issubclass(cls, LatticeLGMError) and issubclass(cls, ValueError)


@pytest.mark.parametrize("shape,spacing,rng_", [((3, 4, 5), (0.3, 0.5, 0.7), (1.0, 2.0, 1.5)),
                                               ((6, 7), (0.4, 0.9), (2.0, 1.0))])
def test_from_lattice_toeplitz_gather_equals_pairwise_kernel(shape, spacing, rng_):
    """from_lattice evaluates the kernel once per lag; it must equal k at every cell pair."""
    lat = Lattice(shape, spacing=spacing, origin=(1.5,) * len(shape))
    k = Matern(2.5, range=rng_, sd=1.3)
    d = DensePrior.from_lattice(lat, k)
    np.testing.assert_allclose(d.cov, k(lat.cell_centers()), rtol=0, atol=1e-14)
    q = d.with_params(range=tuple(r * 0.8 for r in rng_))
    np.testing.assert_allclose(q.cov, q.kernel(lat.cell_centers()), rtol=0, atol=1e-14)
    assert q.exact_on == "lattice" and q.lattice is lat


def test_with_params_family_on_inputs_is_bitwise_a_fresh_prior():
    """Children built by with_params reuse their parent's distances (Murray & Adams 2010's
    Ionosphere: 34 lengthscales moved one at a time); each is bitwise a prior built afresh."""
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 1, (40, 34))
    ls = rng.uniform(0.5, 2.0, 34)
    p = DensePrior(x, SquaredExponential(sd=1.0, lengthscale=ls))
    for d in (0, 9, 33, None, 17):
        ls = ls.copy()
        if d is not None:
            ls[d] *= 1.3
        sd = p.kernel.sd * (1.0 if d is not None else 0.8)
        p = p.with_params(sd=sd, lengthscale=ls)
        fresh = DensePrior(x, SquaredExponential(sd=sd, lengthscale=ls), jitter=p._jitter_arg)
        assert np.array_equal(p.cov, fresh.cov) and np.array_equal(p.chol, fresh.chol)
        assert p.log_det() == fresh.log_det()


def test_pickled_prior_drops_its_distance_cache_and_children_stay_exact():
    import pickle

    rng = np.random.default_rng(4)
    x = rng.uniform(0, 1, (30, 12))
    ls = rng.uniform(0.5, 2.0, 12)
    p = DensePrior(x, SquaredExponential(sd=1.0, lengthscale=ls))
    assert p._distances is not None and len(p._distances.lanes) == 8
    q = pickle.loads(pickle.dumps(p))
    assert q._distances is None and np.array_equal(q.cov, p.cov)
    ls = ls.copy()
    ls[3] *= 0.7
    a, b = p.with_params(lengthscale=ls), q.with_params(lengthscale=ls)
    assert np.array_equal(a.cov, b.cov) and np.array_equal(a.chol, b.chol)
    assert len(pickle.dumps(p)) < 3 * (p.cov.nbytes + p.chol.nbytes)
    # a prior pickled before the distances were kept (no entry at all) still builds children
    state = {k: v for k, v in p.__getstate__().items() if k != "_distances"}
    old = DensePrior.__new__(DensePrior)
    old.__setstate__(state)
    c = old.with_params(lengthscale=ls)
    assert np.array_equal(c.cov, a.cov) and np.array_equal(c.chol, a.chol)
