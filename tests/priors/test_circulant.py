"""CirculantPrior specifics: torus sizing, max_range, round-off and approximate clipping, the
half-spectrum sampler's linear map, per-chain streams and reporting (DESIGN §4, §5).

The contract identities shared with the other backends live in test_conformance.py.  Everything
here is deterministic: tolerances are round-off, never Monte Carlo (see test_statistical.py).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from lattice_lgm import Lattice
from lattice_lgm.covariance import Exponential, Matern, SquaredExponential
from lattice_lgm.errors import (
    EmbeddingNotPSDError,
    InvalidParameterError,
    ParameterOutOfBoundsError,
    ShapeMismatchError,
)
from lattice_lgm.priors import CirculantPrior
from lattice_lgm.priors.circulant import CLIP_TOL

from .cases import torus_covariance


def full_spectrum(prior: CirculantPrior, kernel=None) -> np.ndarray:
    """Eigenvalues of the torus covariance by a full complex FFT of the wrapped row (numpy)."""
    kernel = prior.kernel if kernel is None else kernel
    lags = [h * np.minimum(np.arange(m), m - np.arange(m))
            for m, h in zip(prior.embedding_shape, prior.lattice.spacing, strict=True)]
    grid = np.stack(np.meshgrid(*lags, indexing="ij"), axis=-1)
    return np.fft.fftn(kernel.from_lags(grid)).real


def map_matrix(fn, n_in: int, shape_in) -> np.ndarray:
    """Matrix of a linear map on (n_chains, *shape_in) arrays (columns are basis images)."""
    out = fn(np.eye(n_in).reshape(n_in, *shape_in))
    return out.reshape(n_in, -1).T


def sampler_matrix(prior: CirculantPrior) -> np.ndarray:
    """The linear map ``sample`` applies to its normals (full torus state)."""
    half = prior._plans.half_shape
    u_shape = (*half[:-1], 2 * half[-1])
    return map_matrix(prior.colorize_half, int(np.prod(u_shape)), u_shape)


def window_rows(prior: CirculantPrior) -> np.ndarray:
    """Flat indices of the window cells inside the flattened torus."""
    idx = np.arange(prior.state_size).reshape(prior.embedding_shape)
    return idx[tuple(slice(0, n) for n in prior.shape)].ravel()


# -- sizing --------------------------------------------------------------------------------------


def test_short_range_uses_the_minimal_nice_torus():
    p = CirculantPrior(Lattice((24, 20)), Matern(1.5, range=3.0))
    assert len(p.attempts) == 1
    assert p.embedding_shape == (48, 40)  # 5-smooth sizes ≥ 2(n - 1) = (46, 38)
    assert p.state_shape == p.white_shape == p.embedding_shape
    assert p.padding == (2.0, 2.0)
    assert p.sized_for_range == (3.0, 3.0)


@pytest.mark.parametrize(
    ("shape", "kernel"),
    [
        ((32,), Matern(1.5, range=32.0)),  # lengthscale = L/2 (DESIGN §4: M ≈ 9n per axis)
        ((16, 16), Matern(1.5, range=16.0)),
        ((16, 12), Exponential(range=(30.0, 8.0))),
    ],
    ids=["1d-matern", "2d-matern", "2d-exponential-aniso"],
)
def test_sizing_grows_the_torus_for_long_ranges(shape, kernel):
    lat = Lattice(shape)
    p = CirculantPrior(lat, kernel)
    assert len(p.attempts) > 1
    sizes = [a[0] for a in p.attempts]
    ratios = [a[1] for a in p.attempts]
    first_pass = next(i for i, r in enumerate(ratios) if r >= -CLIP_TOL)
    assert first_pass > 0
    # growth phase: strictly growing sizes, every one before the first PSD torus really not PSD
    for earlier, later in itertools.pairwise(sizes[: first_pass + 1]):
        assert all(b >= a for a, b in zip(earlier, later, strict=True))
        assert later != earlier
    # refinement: the chosen torus was checked, is PSD, no larger than the first PSD one, and
    # every smaller size tried was really not PSD
    chosen = p.embedding_shape
    assert chosen in sizes and ratios[sizes.index(chosen)] >= -CLIP_TOL
    assert all(c <= f for c, f in zip(chosen, sizes[first_pass], strict=True))
    for size, ratio in zip(sizes, ratios, strict=True):
        if size != chosen and all(a <= c for a, c in zip(size, chosen, strict=True)):
            assert ratio < -CLIP_TOL
    assert all(m >= 2 * (n - 1) for m, n in zip(p.embedding_shape, shape, strict=True))
    # independent check of the final embedding's spectrum (numpy full FFT)
    lam = full_spectrum(p)
    assert lam.min() >= -CLIP_TOL * lam.max()
    assert p.padding == tuple(m / n for m, n in zip(p.embedding_shape, shape, strict=True))
    assert p.n_clipped_approximate == 0


def test_sizing_bisects_back_the_growth_overshoot():
    # 64² lattice of spacing 1/64, Matérn 3/2 sized for range 0.5: growth ×1.5 passes first at
    # 288², the bisection finds 240² PSD (216² is not) — 1.44× fewer cells per FFT
    p = CirculantPrior(Lattice((64, 64), spacing=1 / 64), Matern(1.5, range=0.2), max_range=0.5)
    sizes = [a[0] for a in p.attempts]
    assert (288, 288) in sizes
    assert p.embedding_shape == (240, 240)
    lam = full_spectrum(p, Matern(1.5, range=0.5))
    assert lam.min() >= -CLIP_TOL * lam.max()


def test_max_range_sizes_the_torus_for_the_larger_range():
    lat = Lattice((16, 16))
    small = CirculantPrior(lat, Matern(1.5, range=4.0))
    big = CirculantPrior(lat, Matern(1.5, range=4.0), max_range=16.0)
    assert all(b >= s for b, s in zip(big.embedding_shape, small.embedding_shape, strict=True))
    assert big.embedding_shape != small.embedding_shape
    assert big.embedding_shape == CirculantPrior(lat, Matern(1.5, range=16.0)).embedding_shape
    assert big.sized_for_range == (16.0, 16.0)
    assert big.params["range"] == 4.0  # the kernel itself keeps its own range


def test_with_params_beyond_max_range_raises():
    p = CirculantPrior(Lattice((16, 16)), Matern(1.5, range=4.0), max_range=8.0)
    with pytest.raises(ParameterOutOfBoundsError, match=r"exceeds the max_range=\(8\.0, 8\.0\)"):
        p.with_params(range=8.5)
    with pytest.raises(ParameterOutOfBoundsError, match="max_range"):
        p.with_params(range=(1.0, 9.0))
    with pytest.raises(ParameterOutOfBoundsError, match="max_range"):
        p.with_params(lengthscale=4.5)


def test_kernel_range_beyond_max_range_raises():
    with pytest.raises(ParameterOutOfBoundsError, match=r"exceeds max_range=\(2\.0,\)"):
        CirculantPrior(Lattice((16,)), Matern(1.5, range=3.0), max_range=2.0)


def test_with_params_within_max_range_reuses_plans():
    lat = Lattice((16, 16))
    p = CirculantPrior(lat, Matern(1.5, range=4.0), max_range=16.0)
    for r in np.geomspace(0.3, 16.0, 12):
        q = p.with_params(range=float(r))
        assert q._plans is p._plans
        assert q.embedding_shape == p.embedding_shape
        assert q.params["range"] == pytest.approx(r)
        assert q.n_clipped_approximate == 0
        # the new spectrum is the new kernel's, computed independently
        lam = full_spectrum(q)
        np.testing.assert_allclose(q.eigenvalues, np.maximum(lam[..., : q.eigenvalues.shape[-1]],
                                                             0.0),
                                   rtol=0, atol=1e-10 * lam.max())
    assert p.params["range"] == 4.0  # untouched


def test_with_params_sd_scales_the_spectrum_exactly():
    p = CirculantPrior(Lattice((10, 12)), Matern(2.5, sd=1.0, range=3.0))
    q = p.with_params(sd=3.0)
    np.testing.assert_allclose(q.eigenvalues, 9.0 * p.eigenvalues, rtol=1e-13, atol=0)
    assert q.log_det() == pytest.approx(p.log_det() + p.rank * np.log(9.0), rel=1e-13)


def test_per_axis_max_range():
    lat = Lattice((12, 12))
    p = CirculantPrior(lat, Matern(1.5, range=(2.0, 2.0)), max_range=(2.0, 12.0))
    assert p.sized_for_range == (2.0, 12.0)
    assert len(p.attempts) > 1  # the long axis forces growth
    lam = full_spectrum(p, Matern(1.5, range=(2.0, 12.0)))
    assert lam.min() >= -CLIP_TOL * lam.max()
    q = p.with_params(range=(1.5, 10.0))
    assert q._plans is p._plans
    with pytest.raises(ParameterOutOfBoundsError):
        p.with_params(range=(3.0, 3.0))


# -- round-off clipping --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def se_clipped():
    # SE with a moderately long range: its spectrum decays below double precision
    return CirculantPrior(Lattice((64,)), SquaredExponential(range=8.0))


def test_squared_exponential_records_roundoff_clipping(se_clipped):
    p = se_clipped
    assert p.n_clipped_roundoff > 0
    assert p.n_clipped_approximate == 0
    assert p.min_eigenvalue < 0.0  # the raw spectrum had round-off negatives …
    assert p.min_eigenvalue >= -1e-10 * p.eigenvalues.max()  # … within the stated tolerance
    assert np.all(p.eigenvalues >= 0.0)  # and they were set to 0
    assert p.rank < p.state_size
    assert p.rank + p.n_clipped_roundoff <= p.state_size
    # independent spectrum (numpy, full FFT): round-off level only
    lam = full_spectrum(p)
    assert lam.min() >= -1e-10 * lam.max()
    # the stated policy: |λ| ≤ clip_tol·λ_max is round-off and set to 0, the rest kept
    half = lam[: p.eigenvalues.size]
    expected = np.where(np.abs(half) > p.clip_tol * lam.max(), half, 0.0)
    np.testing.assert_allclose(p.eigenvalues, expected, rtol=0, atol=1e-13 * lam.max())


def test_clipped_log_det_is_the_pseudo_determinant(se_clipped):
    p = se_clipped
    half = p.eigenvalues
    m = p.embedding_shape[0]
    full = np.concatenate([half, half[1:(m + 1) // 2][::-1]])  # Hermitian extension (1-D)
    assert full.size == m
    nonzero = full[full > 0]
    assert p.rank == nonzero.size
    assert p.log_det() == pytest.approx(np.sum(np.log(nonzero)), rel=1e-12)
    # logpdf uses the rank, not the state size
    x = p.sample_state(np.random.default_rng(0), 2)
    np.testing.assert_allclose(
        p.logpdf(x), -0.5 * (p.quad_form(x) + p.log_det() + p.rank * np.log(2 * np.pi)),
        rtol=1e-12,
    )


def test_clipped_log_det_does_not_depend_on_fft_round_off(se_clipped):
    """rank and log_det must be properties of the kernel and torus, not of FFT round-off.

    Oracle: a different FFT (numpy, full complex) of the same row, with every eigenvalue within
    the stated round-off tolerance (|λ| ≤ clip_tol·λ_max) treated as 0.
    """
    p = se_clipped
    lam = full_spectrum(p)
    robust = lam[np.abs(lam) > p.clip_tol * lam.max()]
    assert np.all(robust > 0)
    assert p.rank == robust.size
    assert p.log_det() == pytest.approx(np.sum(np.log(robust)), rel=1e-8)


def test_clipped_prior_still_has_the_right_window_covariance(se_clipped):
    """Clipping round-off changes K on the window by no more than round-off."""
    p = se_clipped
    w = map_matrix(lambda z: p.to_window(p.colorize(z)), p.state_size, p.white_shape)
    k = p.kernel(p.lattice.cell_centers())
    np.testing.assert_allclose(w @ w.T, k, rtol=0, atol=1e-10)
    ws = sampler_matrix(p)[window_rows(p)]
    np.testing.assert_allclose(ws @ ws.T, k, rtol=0, atol=1e-10)


# -- the cap, approximate clipping, forced shapes ------------------------------------------------

LONG_1D = (Lattice((32,)), Matern(1.5, range=32.0))  # needs a (216,) torus (see above)


def test_cap_on_padding_raises_listing_sizes_tried():
    lat, k = LONG_1D
    with pytest.raises(EmbeddingNotPSDError,
                       match=r"smallest eigenvalue -.*sizes tried \[\(64,\), \(96,\)\] "
                             r"\(cap: 3\.0× per axis"):
        CirculantPrior(lat, k, max_padding=3.0)


def test_cap_on_cells_raises_listing_sizes_tried():
    lat, k = LONG_1D
    with pytest.raises(EmbeddingNotPSDError, match=r"sizes tried \[\(64,\), \(96,\)\] .*100 "
                                                   r"cells"):
        CirculantPrior(lat, k, max_cells=100)


def test_approximate_clips_warns_and_records():
    lat, k = LONG_1D
    with pytest.warns(UserWarning, match=r"clipping \d+ negative eigenvalues"):
        p = CirculantPrior(lat, k, max_padding=3.0, approximate=True)
    assert p.embedding_shape == (96,)
    assert p.n_clipped_approximate > 0
    assert np.all(p.eigenvalues >= 0)
    assert p.rank <= p.state_size - p.n_clipped_approximate
    assert f"approximate {p.n_clipped_approximate}" in p.describe()
    # the clipped eigenvalues are really below the round-off tolerance (not round-off)
    lam = full_spectrum(p)
    assert np.sum(lam < -CLIP_TOL * lam.max()) == p.n_clipped_approximate


def test_forced_embedding_shape_too_small_raises():
    with pytest.raises(ShapeMismatchError, match=r"embedding_shape=\(29,\) .* >= 2\(n-1\) = "
                                                 r"\(30,\)"):
        CirculantPrior(Lattice((16,)), Matern(1.5, range=2.0), embedding_shape=(29,))
    with pytest.raises(ShapeMismatchError, match=r"embedding_shape=\(30,\) must have one size "
                                                 r"per axis"):
        CirculantPrior(Lattice((16, 16)), Matern(1.5, range=2.0), embedding_shape=(30,))


def test_forced_embedding_shape_that_is_not_psd_raises():
    lat, k = LONG_1D
    with pytest.raises(EmbeddingNotPSDError, match=r"torus \(64,\) \(sized for range \(32\.0,\)\)"):
        CirculantPrior(lat, k, embedding_shape=(64,))


def test_forced_odd_embedding_shape_is_used():
    p = CirculantPrior(Lattice((5, 4)), Matern(1.5, range=2.0), embedding_shape=(9, 7))
    assert p.embedding_shape == (9, 7)
    assert p._plans.half_shape == (9, 4)


# -- the sampler's linear map on odd and even tori ----------------------------------------------


@pytest.mark.parametrize(
    ("shape", "embedding"),
    [
        ((5,), (8,)), ((5,), (9,)),
        ((4, 5), (8, 8)), ((4, 5), (7, 9)), ((4, 5), (8, 9)), ((4, 5), (7, 8)),
        ((2, 3, 3), (3, 5, 4)), ((2, 3, 3), (4, 4, 5)),
    ],
    ids=str,
)
def test_sampler_map_gives_torus_covariance(shape, embedding):
    """W Wᵀ = K_torus for the half-spectrum sampler on odd and even sizes (DESIGN §4 trap)."""
    lat = Lattice(shape, spacing=0.5)
    p = CirculantPrior(lat, Exponential(sd=1.3, range=1.0), embedding_shape=embedding)
    w = sampler_matrix(p)
    k = torus_covariance(lat, p.kernel, p.embedding_shape)
    np.testing.assert_allclose(w @ w.T, k, rtol=0, atol=1e-12 * np.abs(k).max())


def test_three_d_lattice_window_covariance():
    lat = Lattice((3, 4, 5), spacing=(1.0, 0.5, 0.5))
    p = CirculantPrior(lat, Matern(1.5, sd=1.2, range=(2.0, 1.0, 1.5)))
    assert p.lattice.ndim == 3
    k = p.kernel(lat.cell_centers())
    w = map_matrix(lambda z: p.to_window(p.colorize(z)), p.state_size, p.white_shape)
    np.testing.assert_allclose(w @ w.T, k, rtol=0, atol=1e-10)
    ws = sampler_matrix(p)[window_rows(p)]
    np.testing.assert_allclose(ws @ ws.T, k, rtol=0, atol=1e-10)
    assert p.sample(np.random.default_rng(0), 2).shape == (2, 3, 4, 5)


# -- randomness ---------------------------------------------------------------------------------

SHAPES = [(24, 20), (17,), (32,), (3, 4, 5)]


@pytest.fixture(params=SHAPES, ids=str, scope="module")
def prior(request):
    return CirculantPrior(Lattice(request.param), Matern(1.5, range=3.0))


def test_sample_is_the_window_of_sample_state(prior):
    s = prior.sample_state(np.random.default_rng(3), 3)
    x = prior.sample(np.random.default_rng(3), 3)
    assert s.shape == (3, *prior.state_shape)
    assert x.shape == (3, *prior.shape)
    np.testing.assert_array_equal(x, prior.to_window(s))


def test_same_seed_gives_bitwise_identical_draws(prior):
    a = prior.sample(np.random.default_rng(12), 3)
    b = prior.sample(np.random.default_rng(12), 3)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(prior.sample(12, 3), a)  # int seed = default_rng(seed)
    assert not np.array_equal(prior.sample(np.random.default_rng(13), 3), a)


def test_per_chain_streams_give_chain_subset_determinism(prior):
    """DESIGN §5: chain i's draw depends on its own stream only, bit for bit."""
    seeds = np.random.SeedSequence(2024).spawn(4)
    together = prior.sample([np.random.default_rng(s) for s in seeds], 4)
    for i, s in enumerate(seeds):
        alone = prior.sample([np.random.default_rng(s)], 1)
        np.testing.assert_array_equal(together[i], alone[0], err_msg=f"chain {i}")
        np.testing.assert_array_equal(alone, prior.sample(np.random.default_rng(s), 1))
    subset = prior.sample([np.random.default_rng(seeds[i]) for i in (3, 1)], 2)
    np.testing.assert_array_equal(subset, together[[3, 1]])


def test_colorize_of_a_batch_equals_per_chain_colorize(prior):
    """The white-state map a sampler step uses is also independent of the batch (DESIGN §5)."""
    z = np.random.default_rng(8).standard_normal((4, *prior.white_shape))
    together = prior.colorize(z)
    for i in range(4):
        np.testing.assert_array_equal(together[i], prior.colorize(z[i : i + 1])[0],
                                      err_msg=f"chain {i}")


def test_per_chain_rng_list_errors():
    p = CirculantPrior(Lattice((8,)), Matern(1.5, range=2.0))
    gens = [np.random.default_rng(i) for i in range(3)]
    with pytest.raises(InvalidParameterError, match=r"sequence of 3 items.*n_chains=2"):
        p.sample(gens, 2)
    with pytest.raises(InvalidParameterError, match="one numpy Generator per chain"):
        p.sample([np.random.default_rng(0), np.random.RandomState(0)], 2)


@pytest.mark.parametrize("n", [0, -2, 2.5, True])
def test_sample_rejects_bad_n_chains(n):
    p = CirculantPrior(Lattice((8,)), Matern(1.5, range=2.0))
    with pytest.raises(InvalidParameterError, match="n_chains="):
        p.sample(np.random.default_rng(0), n)
    with pytest.raises(InvalidParameterError, match="n_chains="):
        p.sample_state(np.random.default_rng(0), n)


@pytest.mark.parametrize("rng", [None, np.random.RandomState(1)], ids=repr)
def test_sample_rejects_legacy_rng(rng):
    p = CirculantPrior(Lattice((8,)), Matern(1.5, range=2.0))
    with pytest.raises(InvalidParameterError, match=r"must be a numpy\.random\.Generator"):
        p.sample(rng)


# -- construction errors and reporting ----------------------------------------------------------


def test_planner_effort_invalid():
    with pytest.raises(InvalidParameterError, match=r"planner_effort='FFTW_FAST' is not one of"):
        CirculantPrior(Lattice((8,)), Matern(1.5, range=2.0), planner_effort="FFTW_FAST")


def test_construction_errors():
    k = Matern(1.5, range=2.0)
    with pytest.raises(InvalidParameterError, match=r"lattice=.* must be a lattice_lgm\.Lattice"):
        CirculantPrior((8, 8), k)
    with pytest.raises(InvalidParameterError, match=r"kernel=.* must be a lattice_lgm"):
        CirculantPrior(Lattice((8,)), None)
    with pytest.raises(ShapeMismatchError, match=r"range=\(1\.0, 2\.0, 3\.0\) has 3 entries"):
        CirculantPrior(Lattice((8, 8)), Matern(1.5, range=(1.0, 2.0, 3.0)))
    with pytest.raises(ShapeMismatchError, match=r"max_range=\(1\.0, 2\.0, 3\.0\) has 3"):
        CirculantPrior(Lattice((8, 8)), k, max_range=(1.0, 2.0, 3.0))
    with pytest.raises(InvalidParameterError, match=r"clip_tol=-1e-10"):
        CirculantPrior(Lattice((8,)), k, clip_tol=-1e-10)


def test_site_specific_surrogate_is_refused():
    p = CirculantPrior(Lattice((8,)), Matern(1.5, range=2.0))
    pi = np.ones(p.state_shape)
    pi[0] = 2.0
    with pytest.raises(InvalidParameterError, match="scalar precision"):
        p.surrogate(np.zeros((1, *p.state_shape)), pi)
    with pytest.raises(InvalidParameterError, match="precision_k has negative"):
        p.surrogate_spectral(np.zeros((1, *p.state_shape)), -1.0)


@pytest.mark.parametrize("shape,embedding", [((6, 5), None), ((6, 5), (11, 9)), ((9,), (17,))])
def test_spectral_surrogate_against_dense_formulas(shape, embedding):
    """Stationary surrogate noise S = F* diag(s_k) F / M against dense algebra on the torus."""
    from scipy import stats

    from .cases import torus_covariance

    lat = Lattice(shape, spacing=0.5)
    k = Matern(1.5, range=1.5, sd=1.2)
    p = CirculantPrior(lat, k, embedding_shape=embedding)
    m = p.embedding_shape
    s_k = 0.3 + p.eigenvalues / p.eigenvalues.max()  # an even, positive noise spectrum
    row = np.fft.irfftn(s_k, s=m, axes=tuple(range(len(m))))  # first row of the circulant S
    idx = np.stack([g.ravel() for g in np.meshgrid(*[np.arange(n) for n in m], indexing="ij")], -1)
    lag = (idx[None, :, :] - idx[:, None, :]) % np.asarray(m)
    smat = row[tuple(lag[..., a] for a in range(len(m)))]
    c = torus_covariance(lat, k, m)
    g = np.random.default_rng(9).standard_normal((2, *m))
    sur = p.surrogate_spectral(g, 1.0 / s_k)
    r = np.linalg.inv(np.linalg.inv(c) + np.linalg.inv(smat))
    mean = (r @ np.linalg.solve(smat, g.reshape(2, -1).T)).T
    np.testing.assert_allclose(sur.mean.reshape(2, -1), mean, atol=1e-9)
    ref = stats.multivariate_normal(np.zeros(len(c)), c + smat).logpdf(g.reshape(2, -1))
    np.testing.assert_allclose(sur.logmarginal, ref, rtol=1e-10)
    n = int(np.prod(m))
    w = sur.colorize(np.eye(n).reshape(n, *m)).reshape(n, n).T
    np.testing.assert_allclose(w @ w.T, r, atol=1e-9)
    np.testing.assert_allclose(sur.whiten(sur.colorize(g)), g, atol=1e-9)


def test_spectral_surrogate_refuses_an_uneven_spectrum():
    p = CirculantPrior(Lattice((6, 5)), Matern(1.5, range=2.0))
    prec = np.ones(p.eigenvalues.shape)
    prec[1, 0] = 2.0  # its partner (-1 mod M, 0) keeps 1.0: S would not be symmetric
    with pytest.raises(InvalidParameterError, match="not even"):
        p.surrogate_spectral(np.zeros((1, *p.state_shape)), prec)


def test_describe_reports_torus_and_sizing():
    p = CirculantPrior(Lattice((16, 16)), Matern(1.5, range=4.0), max_range=16.0)
    d = p.describe()
    assert f"torus {p.embedding_shape}" in d
    assert "sized for range (16.0, 16.0)" in d
    assert "exact on the torus" in d
    assert "FFTW_ESTIMATE" in d
    assert repr(p) == d


def test_torus_lattice():
    lat = Lattice((5, 4), spacing=(2.0, 0.5), origin=(1.0, 1.0), units="m")
    p = CirculantPrior(lat, Matern(1.5, range=2.0), embedding_shape=(9, 7))
    t = p.torus_lattice()
    assert t.shape == (9, 7)
    assert (t.spacing, t.origin, t.dims, t.units) == (lat.spacing, lat.origin, lat.dims, "m")


def test_split_workspace_transforms_and_keeps_its_forward_input():
    """``SplitRealFFT`` is rfftn/irfftn; ``colorize_into`` is one field of ``colorize_spectrum``."""
    prior = CirculantPrior(Lattice((12, 10)), Matern(1.5, range=3.0))
    ws = prior.workspace(threads=1)
    rng = np.random.default_rng(3)
    x = rng.standard_normal(prior.embedding_shape)
    ws.fwd_in[...] = x
    np.testing.assert_allclose(ws.forward(), np.fft.rfftn(x), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(ws.fwd_in, x)          # r2c preserved its input
    zeta = prior.draw_spectrum(rng)
    got = prior.colorize_into(zeta, ws)
    np.testing.assert_allclose(got, prior.colorize_spectrum(zeta[None])[0], rtol=0, atol=1e-13)


@pytest.mark.parametrize("plans", ["compiled", "compiled-2-threads", "pyfftw"])
@pytest.mark.parametrize("shape", [(12, 10), (6, 5, 4)])
def test_window_workspace_is_the_pruned_transform(shape, plans, monkeypatch):
    """``WindowRealFFT``: rfftn of a field zero off the window; irfftn's window slices —
    with the plans made through FFTW's C interface (executable from compiled code) and with
    pyfftw's (where no FFTW library can be loaded)."""
    from lattice_lgm.priors import _fftw

    if plans == "pyfftw":
        monkeypatch.setattr(_fftw, "LIB", None)
    elif _fftw.LIB is None:
        pytest.fail("no FFTW library for compiled plans: the pyfftw install lost its FFTW")
    prior = CirculantPrior(Lattice(shape), Matern(1.5, range=2.0))
    ws = prior.workspace(threads=2 if plans == "compiled-2-threads" else 1, window=True)
    assert (ws.plans is None) == (plans == "pyfftw")
    n0 = shape[0]
    rng = np.random.default_rng(4)
    x = np.zeros(prior.embedding_shape)
    x[:n0] = rng.standard_normal((n0, *prior.embedding_shape[1:]))
    ws.fwd_in[...] = x[:n0]
    np.testing.assert_allclose(ws.forward(), np.fft.rfftn(x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ws.forward(), np.fft.rfftn(x), rtol=1e-12, atol=1e-12)
    spec = np.fft.rfftn(rng.standard_normal(prior.embedding_shape))
    ws.bwd_in[...] = spec
    axes = tuple(range(len(shape)))
    full = np.fft.irfftn(spec, s=prior.embedding_shape, axes=axes) * prior.state_size
    np.testing.assert_allclose(ws.backward(), full[:n0], rtol=1e-12, atol=1e-10)
