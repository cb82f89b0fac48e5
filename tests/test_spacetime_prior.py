"""The separable space-time kernel inside the priors: CirculantPrior against DensePrior on
``("t", "y", "x")`` lattices, per-axis ``max_range`` sizing, ``with_params`` and the
outer-product spectrum (Diggle et al. 2013, J. Stat. Softw. 52(4) §3; Brix & Diggle 2001).

Deterministic checks use round-off tolerances.  The Monte Carlo test at the end has its own
false-failure budget (see its docstring).

Oracles, all independent of ``SpaceTime``'s own code paths:

* the lattice covariance of a separable kernel is ``sd² K_t ⊗ K_s`` with ``K_t``, ``K_s`` the
  dense matrices of the *component* kernels on the time and space cell centres;
* the torus spectrum is the outer product ``sd² λ_t ⊗ λ_s`` of a 1-D and a 2-D embedding
  spectrum (the multidimensional DFT of a product of functions of disjoint axes factorises),
  and numpy's full complex FFT of the wrapped 3-D row gives it once more.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from lattice_lgm import Lattice
from lattice_lgm.covariance import Exponential, Matern, SpaceTime
from lattice_lgm.errors import (
    InvalidParameterError,
    ParameterOutOfBoundsError,
    ShapeMismatchError,
)
from lattice_lgm.priors import CirculantPrior, DensePrior
from lattice_lgm.priors.circulant import CLIP_TOL, embedding_spectrum

#: family-wise false-failure rate of this module per run, summed by conftest.py
#: (test_covariance_at_lags' docstring)
FALSE_FAILURE_RATE = 5.1e-6

LAT = Lattice((8, 16, 16), spacing=(1.0, 0.25, 0.25))  # t in days, (y, x) in km
SD, RS, RT = 1.3, 0.8, 3.0
MAX_RANGE = (6.0, 1.5, 1.5)


def kernel(**kw) -> SpaceTime:
    return SpaceTime(Matern(1.5, range=1.0), Exponential(range=1.0),
                     **{"sd": SD, "range": RS, "range_t": RT, **kw})


def kron_covariance(lat: Lattice, sd: float, time, space) -> np.ndarray:
    """``sd² K_t ⊗ K_s`` from the component kernels on the time and space cell centres."""
    c = lat.coords()
    t = c[lat.dims[0]]
    ys, xs = np.meshgrid(c[lat.dims[1]], c[lat.dims[2]], indexing="ij")
    s = np.stack([ys.ravel(), xs.ravel()], axis=-1)
    return sd**2 * np.kron(time(t[:, None]), space(s))


def window_covariance_from_spectrum(prior: CirculantPrior) -> np.ndarray:
    """The window covariance the prior's eigenvalues imply: row ``c = F⁻¹ λ``, ``K = c[i − j]``."""
    row = np.fft.irfftn(prior.eigenvalues, s=prior.embedding_shape,
                         axes=range(len(prior.embedding_shape)))
    n, m = prior.shape, prior.embedding_shape
    d = len(n)
    index = []
    for a in range(d):
        lag = (np.arange(n[a])[:, None] - np.arange(n[a])[None, :]) % m[a]
        shape = [1] * (2 * d)
        shape[a], shape[d + a] = n[a], n[a]
        index.append(lag.reshape(shape))
    size = int(np.prod(n))
    return row[tuple(index)].reshape(size, size)


def circulant_times(prior: CirculantPrior, v: np.ndarray) -> np.ndarray:
    """``K v`` for window vectors through the prior's own operators: window(C^½ C^½ embed(v))."""
    state = np.zeros((len(v), *prior.state_shape))
    state[(slice(None), *(slice(0, k) for k in prior.shape))] = v.reshape(len(v), *prior.shape)
    return prior.to_window(prior.colorize(prior.colorize(state))).reshape(len(v), -1)


def full_spectrum(k, lat: Lattice, torus_shape) -> np.ndarray:
    """Eigenvalues of the torus covariance: numpy's full FFT of the wrapped row (from_lags)."""
    lags = [h * np.minimum(np.arange(m), m - np.arange(m))
            for m, h in zip(torus_shape, lat.spacing, strict=True)]
    grid = np.stack(np.meshgrid(*lags, indexing="ij"), axis=-1)
    return np.fft.fftn(k.from_lags(grid)).real


@pytest.fixture(scope="module")
def circ() -> CirculantPrior:
    return CirculantPrior(LAT, kernel(), max_range=MAX_RANGE)


@pytest.fixture(scope="module")
def dense() -> DensePrior:
    return DensePrior.from_lattice(LAT, kernel())


# -- the dense oracle ---------------------------------------------------------------------------


def test_dense_lattice_covariance_is_the_kronecker_product(dense):
    expected = kron_covariance(LAT, SD, Exponential(range=RT), Matern(1.5, range=RS))
    np.testing.assert_allclose(dense.cov, expected, rtol=1e-13, atol=0)
    assert dense.jitter == 0.0  # positive definite as is: the comparisons below are of K itself


# -- circulant against dense --------------------------------------------------------------------


def test_circulant_builds_with_per_axis_max_range(circ):
    assert circ.sized_for_range == MAX_RANGE
    assert circ.kernel.range == (RT, RS, RS)
    assert circ.params == {"sd": SD, "range": RS, "range_t": RT, "nu": 1.5}
    assert circ.n_clipped_approximate == 0
    assert all(m >= 2 * (n - 1) for m, n in zip(circ.embedding_shape, LAT.shape, strict=True))
    # the torus is PSD for the largest ranges it was sized for (independent numpy spectrum)
    lam = full_spectrum(kernel(range=MAX_RANGE[1], range_t=MAX_RANGE[0]), LAT,
                        circ.embedding_shape)
    assert lam.min() >= -CLIP_TOL * lam.max()


def test_circulant_window_covariance_equals_dense(circ, dense):
    k_circ = window_covariance_from_spectrum(circ)
    np.testing.assert_allclose(k_circ, dense.cov, rtol=0, atol=1e-10)
    # and through the prior's operators (colorize twice on the torus = C), on random probes
    v = np.random.default_rng(0).standard_normal((4, LAT.size))
    np.testing.assert_allclose(circulant_times(circ, v), v @ dense.cov, rtol=0,
                               atol=1e-10 * np.abs(v @ dense.cov).max())


def test_sampler_map_gives_the_kernel_on_a_small_window():
    """W Wᵀ = K for the linear map ``sample`` applies to its normals (full matrix, small case)."""
    lat = Lattice((3, 4, 4), spacing=(1.0, 0.5, 0.5))
    k = kernel()
    p = CirculantPrior(lat, k)
    half = p.half_shape
    u_shape = (*half[:-1], 2 * half[-1])
    n_in = int(np.prod(u_shape))
    w = p.colorize_half(np.eye(n_in).reshape(n_in, *u_shape))
    w = w[(slice(None), *(slice(0, n) for n in lat.shape))].reshape(n_in, -1)
    expected = kron_covariance(lat, SD, Exponential(range=RT), Matern(1.5, range=RS))
    np.testing.assert_allclose(w.T @ w, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    "new", [{"range_t": 5.5}, {"range": 0.4}, {"range": (2.0, 1.2, 1.2)}, {"sd": 0.6},
            {"nu": 2.5}],
    ids=str,
)
def test_with_params_equals_building_anew(circ, new):
    q = circ.with_params(**new)
    assert q._plans is circ._plans and q.embedding_shape == circ.embedding_shape
    k_new = kernel().with_params(**new)
    assert q.kernel == k_new
    fresh = CirculantPrior(LAT, k_new, max_range=MAX_RANGE)
    assert fresh.embedding_shape == q.embedding_shape
    np.testing.assert_array_equal(q.eigenvalues, fresh.eigenvalues)
    # … and its window covariance is the new kernel's (independent Kronecker oracle)
    expected = kron_covariance(LAT, k_new.sd, k_new.time, k_new.space)
    np.testing.assert_allclose(window_covariance_from_spectrum(q), expected, rtol=0, atol=1e-10)
    assert circ.kernel == kernel()  # the original prior is untouched


def test_dense_with_params_range_t(dense):
    q = dense.with_params(range_t=4.0)
    expected = kron_covariance(LAT, SD, Exponential(range=4.0), Matern(1.5, range=RS))
    np.testing.assert_allclose(q.cov, expected, rtol=1e-13, atol=0)


def test_ranges_above_max_range_are_refused(circ):
    with pytest.raises(ParameterOutOfBoundsError, match=r"exceeds the max_range=\(6\.0, 1\.5"):
        circ.with_params(range_t=6.5)
    with pytest.raises(ParameterOutOfBoundsError, match="max_range"):
        circ.with_params(range=1.6)
    with pytest.raises(ParameterOutOfBoundsError, match="max_range"):
        circ.with_params(range=(7.0, 1.0, 1.0))
    with pytest.raises(ParameterOutOfBoundsError, match=r"exceeds max_range=\(6\.0, 1\.5, 1\.5\)"):
        CirculantPrior(LAT, kernel(range_t=6.5), max_range=MAX_RANGE)
    # just inside is fine
    assert circ.with_params(range_t=6.0, range=1.5).kernel.range == (6.0, 1.5, 1.5)


def test_max_range_with_unequal_spatial_entries_is_refused():
    with pytest.raises(InvalidParameterError, match=r"spatial entries \(1\.5, 2\.0\) that differ"):
        CirculantPrior(LAT, kernel(), max_range=(6.0, 1.5, 2.0))
    with pytest.raises(InvalidParameterError, match="isotropic in space"):
        CirculantPrior(LAT, kernel()).with_params(range=(3.0, 0.5, 0.6))


def test_a_three_axis_kernel_on_a_two_axis_lattice_is_refused():
    lat2 = Lattice((16, 16), spacing=0.25)
    with pytest.raises(ShapeMismatchError, match=r"2 axes but this SpaceTime has ndim=3"):
        CirculantPrior(lat2, kernel())
    with pytest.raises(ShapeMismatchError, match=r"2 axes but this SpaceTime has ndim=3"):
        DensePrior.from_lattice(lat2, kernel())
    with pytest.raises(ShapeMismatchError, match=r"1 axes .* needs a time axis"):
        CirculantPrior(Lattice((16,)), kernel())
    # a (t, x) lattice with a two-axis kernel works
    k2 = SpaceTime(Matern(1.5, range=1.0), Exponential(range=1.0), range=RS, range_t=RT, ndim=2)
    lat_tx = Lattice((6, 10), spacing=(1.0, 0.25), dims=("t", "x"))
    p = CirculantPrior(lat_tx, k2)
    c = lat_tx.coords()
    expected = np.kron(Exponential(range=RT)(c["t"]), Matern(1.5, range=RS)(c["x"]))
    np.testing.assert_allclose(window_covariance_from_spectrum(p), expected, rtol=0, atol=1e-12)


# -- the spectrum -------------------------------------------------------------------------------


def test_embedding_spectrum_is_the_outer_product(circ):
    m = circ.embedding_shape
    k = circ.kernel
    lam = embedding_spectrum(k, LAT, m)
    lam_t_half = embedding_spectrum(Exponential(range=RT), Lattice((8,), spacing=1.0), m[:1])
    lam_s = embedding_spectrum(Matern(1.5, range=RS), Lattice((16, 16), spacing=0.25), m[1:])
    # both factors PSD on their own tori (the case the identity is stated for)
    assert lam_t_half.min() >= -CLIP_TOL * lam_t_half.max()
    assert lam_s.min() >= -CLIP_TOL * lam_s.max()
    # the 1-D half spectrum of an even row is even: mirror it to the full time axis
    lam_t = lam_t_half[np.minimum(np.arange(m[0]), m[0] - np.arange(m[0]))]
    outer = SD**2 * lam_t[:, None, None] * lam_s[None, :, :]
    assert lam.shape == outer.shape == circ.eigenvalues.shape
    scale = np.abs(outer).max()
    np.testing.assert_allclose(lam, outer, rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(circ.eigenvalues, outer, rtol=0, atol=1e-12 * scale)
    # and numpy's full complex FFT of the wrapped row (from_lags, not from_axis_lags)
    full = full_spectrum(k, LAT, m)
    np.testing.assert_allclose(full[..., : lam.shape[-1]], outer, rtol=0, atol=1e-12 * scale)


def test_sizing_grows_only_the_time_axis_and_both_factors_end_psd():
    """A long, smooth temporal correlation is what wraps: only the time axis of the torus grows.

    The product spectrum is PSD iff both factors are, so the chosen time size must be PSD for the
    1-D temporal embedding and the sizes tried before it not.
    """
    lat = Lattice((8, 8, 8), spacing=(1.0, 0.25, 0.25))
    k = SpaceTime(Matern(1.5, range=1.0), Matern(2.5, range=1.0), range=0.5, range_t=8.0)
    p = CirculantPrior(lat, k)
    minimal = CirculantPrior(lat, k.with_params(range_t=1.0)).embedding_shape
    assert len(p.attempts) > 1
    assert p.embedding_shape[1:] == minimal[1:]  # space never grew
    assert p.embedding_shape[0] > minimal[0]
    time_lat = Lattice((8,), spacing=1.0)
    for size, ratio in p.attempts:
        lam_t = embedding_spectrum(Matern(2.5, range=8.0), time_lat, size[:1])
        time_psd = lam_t.min() >= -CLIP_TOL * lam_t.max()
        assert time_psd == (ratio >= -CLIP_TOL), (size, ratio)
    lam = full_spectrum(k, lat, p.embedding_shape)
    assert lam.min() >= -CLIP_TOL * lam.max()


# -- draws (Monte Carlo) ------------------------------------------------------------------------

Z = 5.0  # two-sided P(|N(0, 1)| > 5) = 5.7e-7
N_DRAWS = 20_000
BATCH = 2_000
LAGS = [(0, 0, 0), (1, 0, 0), (2, 0, 0), (0, 1, 0), (0, 0, 2), (1, 1, -1), (3, 2, 2)]


def lag_means(x: np.ndarray, lag: tuple[int, ...]) -> np.ndarray:
    """Per draw, the mean of ``x(s) x(s + lag)`` over all window pairs; x is (n, *shape)."""
    a, b = [slice(None)], [slice(None)]
    for h, n in zip(lag, x.shape[1:], strict=True):
        a.append(slice(0, n - h) if h >= 0 else slice(-h, n))
        b.append(slice(h, n) if h >= 0 else slice(0, n + h))
    return (x[tuple(a)] * x[tuple(b)]).reshape(len(x), -1).mean(axis=1)


@pytest.mark.statistical
def test_circulant_draws_have_the_separable_covariance():
    """Sample covariance of circulant draws against the kernel, and whitened draws are white.

    False-failure budget (one run, union bound): 7 lag z-tests + 2 χ² z-tests (mean and
    variance of ``|L⁻¹ x|²`` with ``L`` the dense Cholesky factor of the kernel) at ``|z| < 5``:
    9 × 5.7e-7 ≈ 5.1e-6.  Seed fixed, never tuned.  Standard errors are honest: each draw
    contributes one number per statistic (the mean over all window pairs at that lag) and the
    draws are independent, so SE = sd / √n_draws.

    Power: the same statistics against a kernel whose temporal range is 30 % shorter must give
    some |z| > 10 (their expected z is far beyond that, so this can fail only if the
    check is blind to the temporal factor).
    """
    lat = Lattice((4, 6, 6), spacing=(1.0, 0.5, 0.5))
    k = SpaceTime(Matern(1.5, range=1.0), Exponential(range=1.0), sd=1.3, range=1.5,
                  range_t=3.0)
    prior = CirculantPrior(lat, k)
    chol = np.linalg.cholesky(kron_covariance(lat, k.sd, k.time, k.space))
    rng = np.random.default_rng(20240611)
    per_lag, chi2 = [], []
    for _ in range(N_DRAWS // BATCH):
        x = prior.sample(rng, BATCH)
        per_lag.append(np.stack([lag_means(x, lag) for lag in LAGS], axis=1))
        z = np.linalg.solve(chol, x.reshape(BATCH, -1).T)
        chi2.append(np.sum(z * z, axis=0))
    stats_ = np.concatenate(per_lag)
    n = len(stats_)
    se = stats_.std(axis=0, ddof=1) / math.sqrt(n)
    lags_h = np.asarray(LAGS, dtype=float) * np.asarray(lat.spacing)
    expected = k.from_lags(lags_h)
    # independent expected values: sd² exp(-|u|/l_t) (1 + √3 r/l_s) exp(-√3 r/l_s)
    r = np.hypot(lags_h[:, 1], lags_h[:, 2]) * math.sqrt(3.0) / (k.range_s / 2)
    by_hand = k.sd**2 * np.exp(-np.abs(lags_h[:, 0]) / (k.range_t / 2)) * (1 + r) * np.exp(-r)
    np.testing.assert_allclose(expected, by_hand, rtol=1e-13)
    z_lags = (stats_.mean(axis=0) - by_hand) / se
    bad = [f"lag {lag}: {m:.4f} vs {e:.4f} (z={zz:+.2f})"
           for lag, m, e, zz in zip(LAGS, stats_.mean(axis=0), by_hand, z_lags, strict=True)
           if not abs(zz) < Z]
    assert not bad, "; ".join(bad)
    s = np.concatenate(chi2)
    dof = lat.size
    z_mean = (s.mean() - dof) / math.sqrt(2.0 * dof / n)
    # Var of the sample variance of χ²_M: (μ4 − σ⁴)/n with μ4 = 12M² + 48M, σ⁴ = 4M²
    z_var = (s.var(ddof=1) - 2.0 * dof) / math.sqrt((8.0 * dof**2 + 48.0 * dof) / n)
    assert abs(z_mean) < Z, f"mean |L⁻¹x|² = {s.mean():.2f} vs {dof} (z={z_mean:+.2f})"
    assert abs(z_var) < Z, f"var |L⁻¹x|² = {s.var(ddof=1):.1f} vs {2 * dof} (z={z_var:+.2f})"
    # power: the lag statistics see a 30 % shorter temporal range
    wrong = k.with_params(range_t=0.7 * k.range_t).from_lags(lags_h)
    assert np.max(np.abs((stats_.mean(axis=0) - wrong) / se)) > 10.0
