"""Monte Carlo tests of prior draws: covariance at lags, whitened χ², the half-spectrum sampler.

False-failure budget (whole file, one run)
------------------------------------------
Every Monte Carlo check is a two-sided z-test at ``Z = 5`` (P(|N(0,1)| > 5) = 5.7e-7) or a KS
test at ``KS_ALPHA = 1e-6``, with seeds fixed (never tuned):

* (a) covariance at lags: 2 kernels × 2 backends × 7 lags (2-D) + 2 backends × 4 lags (1-D)
  = 36 z-checks;
* (b) whitened χ²: 3 configurations × (mean, variance) = 6 z-checks, plus 3 KS tests;
* (c) odd/even tori: 4 × 3 (2-D) + 2 × 2 (1-D) = 16 z-checks.

58 × 5.7e-7 + 3 × 1e-6 ≈ 3.6e-5 per run (union bound).  The power check of (c) fails only if a
deliberately wrong sampler passes: its expected z is about −23 against a threshold of
−10 (probability ≈ 0).

Standard errors are computed honestly from independent draws: each draw contributes one number
per lag — the mean of ``x(s) x(s + h)`` over every window pair at lag ``h`` (pooling within a
draw gains precision; the draws themselves are independent) — and SE = sd / √n_draws.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from scipy import stats

from lattice_lgm import Lattice
from lattice_lgm.covariance import Covariance, Exponential, Matern
from lattice_lgm.priors import CirculantPrior, DensePrior, GaussianPrior

#: family-wise false-failure rate of this module per run (module docstring); summed by conftest.py
FALSE_FAILURE_RATE = 3.6e-5

pytestmark = pytest.mark.statistical

Z = 5.0
KS_ALPHA = 1e-6
N_DRAWS = 20_000
BATCH = 2_000

LAGS_2D = [(0, 0), (1, 0), (3, 0), (0, 1), (0, 3), (1, 1), (2, -2)]
LAGS_1D = [(0,), (1,), (3,), (10,)]


def lag_means(x: np.ndarray, lag: tuple[int, ...]) -> np.ndarray:
    """Per draw, the mean of ``x(s) x(s + lag)`` over all window pairs; x is (n, *shape)."""
    a, b = [slice(None)], [slice(None)]
    for h, n in zip(lag, x.shape[1:], strict=True):
        a.append(slice(0, n - h) if h >= 0 else slice(-h, n))
        b.append(slice(h, n) if h >= 0 else slice(0, n + h))
    prod = x[tuple(a)] * x[tuple(b)]
    return prod.reshape(len(x), -1).mean(axis=1)


def batches(draw: Callable[[np.random.Generator, int], np.ndarray], seed: int,
            n_draws: int = N_DRAWS) -> Iterator[np.ndarray]:
    rng = np.random.default_rng(seed)
    for _ in range(n_draws // BATCH):
        yield draw(rng, BATCH)


def per_draw_lag_stats(draw, lags, seed, n_draws=N_DRAWS) -> np.ndarray:
    """(n_draws, n_lags) array of per-draw lag means."""
    return np.concatenate(
        [np.stack([lag_means(x, lag) for lag in lags], axis=1) for x in batches(draw, seed,
                                                                                n_draws)]
    )


def z_scores(per_draw: np.ndarray, expected: np.ndarray) -> np.ndarray:
    n = len(per_draw)
    se = per_draw.std(axis=0, ddof=1) / math.sqrt(n)
    return (per_draw.mean(axis=0) - expected) / se


def kernel_at(kernel: Covariance, lattice: Lattice, lags) -> np.ndarray:
    return kernel.from_lags(np.asarray(lags, dtype=float) * np.asarray(lattice.spacing))


def assert_z_small(z: np.ndarray, labels, per_draw, expected, what: str) -> None:
    bad = [f"lag {lab}: mean {m:.5f} vs kernel {e:.5f} (z = {zz:+.2f})"
           for lab, m, e, zz in zip(labels, per_draw.mean(axis=0), expected, z, strict=True)
           if not abs(zz) < Z]
    assert not bad, f"{what}: " + "; ".join(bad)


def build(backend: str, lattice: Lattice, kernel: Covariance, **kw) -> GaussianPrior:
    if backend == "circulant":
        return CirculantPrior(lattice, kernel, **kw)
    return DensePrior.from_lattice(lattice, kernel)


# -- (a) covariance at lags ---------------------------------------------------------------------

LAT_2D = Lattice((24, 20))
KERNELS_2D = {
    # anisotropic, so that a swap of the axes would be seen
    "matern32-aniso": Matern(1.5, sd=1.3, range=(6.0, 4.0)),
    "exponential": Exponential(sd=0.8, range=6.0),
}


@pytest.mark.parametrize("backend", ["circulant", "dense"])
@pytest.mark.parametrize("kname", list(KERNELS_2D))
def test_empirical_covariance_at_lags_2d(backend, kname):
    kernel = KERNELS_2D[kname]
    prior = build(backend, LAT_2D, kernel)
    seed = {"circulant": 101, "dense": 102}[backend] + 10 * list(KERNELS_2D).index(kname)
    per_draw = per_draw_lag_stats(prior.sample, LAGS_2D, seed)
    expected = kernel_at(kernel, LAT_2D, LAGS_2D)
    assert_z_small(z_scores(per_draw, expected), LAGS_2D, per_draw, expected,
                   f"{backend} {kname}")


@pytest.mark.parametrize("backend", ["circulant", "dense"])
def test_empirical_covariance_at_lags_1d(backend):
    lat = Lattice((64,), spacing=0.5)
    kernel = Matern(1.5, sd=1.1, range=3.0)
    prior = build(backend, lat, kernel)
    per_draw = per_draw_lag_stats(prior.sample, LAGS_1D, {"circulant": 201, "dense": 202}[backend])
    expected = kernel_at(kernel, lat, LAGS_1D)
    assert_z_small(z_scores(per_draw, expected), LAGS_1D, per_draw, expected, f"{backend} 1-D")


# -- (b) whitened draws are white ----------------------------------------------------------------

N_CHI2 = 4_000
N_KS_DRAWS = 25


def _chi2_configs():
    return {
        "circulant-2d": CirculantPrior(LAT_2D, Matern(1.5, sd=1.3, range=(6.0, 4.0))),
        "circulant-1d-odd": CirculantPrior(Lattice((40,)), Exponential(range=5.0),
                                           embedding_shape=(81,)),
        "dense-2d": DensePrior.from_lattice(Lattice((12, 10)), Matern(1.5, range=4.0)),
    }


@pytest.mark.parametrize("name", list(_chi2_configs()))
def test_whitened_state_draws_are_chi_square_and_normal(name):
    prior = _chi2_configs()[name]
    m = prior.rank
    assert m == prior.state_size  # no clipping here: χ² with the full state dimension
    rng = np.random.default_rng(300 + list(_chi2_configs()).index(name))
    sums, cells = [], []
    for _ in range(N_CHI2 // 500):
        z = prior.whiten(prior.sample_state(rng, 500))
        sums.append(np.sum(z.reshape(500, -1) ** 2, axis=1))
        if len(cells) * 500 < N_KS_DRAWS:
            cells.append(z[:N_KS_DRAWS].ravel())
    s = np.concatenate(sums)
    n = len(s)
    # mean of χ²_M is M with variance 2M per draw
    z_mean = (s.mean() - m) / math.sqrt(2.0 * m / n)
    # sample variance of χ²_M: E = 2M, Var ≈ (μ4 − σ⁴) / n with μ4 = 12M² + 48M, σ⁴ = 4M²
    z_var = (s.var(ddof=1) - 2.0 * m) / math.sqrt((8.0 * m * m + 48.0 * m) / n)
    assert abs(z_mean) < Z, f"{name}: mean of Σz² = {s.mean():.2f}, M = {m}, z = {z_mean:+.2f}"
    assert abs(z_var) < Z, f"{name}: var of Σz² = {s.var(ddof=1):.1f}, 2M = {2 * m}, " \
                           f"z = {z_var:+.2f}"
    # every cell of a whitened draw is an independent N(0, 1) under the null
    ks = stats.kstest(np.concatenate(cells), "norm")
    assert ks.pvalue > KS_ALPHA, f"{name}: KS statistic {ks.statistic:.4g}, p = {ks.pvalue:.3g}"


# -- (c) the half-spectrum sampler on odd and even tori -----------------------------------------

KERNEL_C = Matern(1.5, sd=1.0, range=6.0)
LAGS_C = [(0, 0), (0, 1), (0, 3)]  # variance and lags along the last (half-spectrum) axis


@pytest.mark.parametrize("embedding", [(48, 40), (49, 41), (48, 41), (49, 40)], ids=str)
def test_half_spectrum_sampler_odd_and_even_tori(embedding):
    prior = CirculantPrior(LAT_2D, KERNEL_C, embedding_shape=embedding)
    assert prior.embedding_shape == embedding
    per_draw = per_draw_lag_stats(prior.sample, LAGS_C, 400 + embedding[0] + embedding[1])
    expected = kernel_at(KERNEL_C, LAT_2D, LAGS_C)
    assert_z_small(z_scores(per_draw, expected), LAGS_C, per_draw, expected,
                   f"torus {embedding}")


@pytest.mark.parametrize("embedding", [(64,), (65,)], ids=str)
def test_half_spectrum_sampler_odd_and_even_tori_1d(embedding):
    lat = Lattice((32,))
    prior = CirculantPrior(lat, KERNEL_C, embedding_shape=embedding)
    lags = [(0,), (1,)]
    per_draw = per_draw_lag_stats(prior.sample, lags, 500 + embedding[0])
    expected = kernel_at(KERNEL_C, lat, lags)
    assert_z_small(z_scores(per_draw, expected), lags, per_draw, expected, f"torus {embedding}")


def test_lag_checks_detect_the_self_conjugate_plane_trap():
    """Power: drawing every half-spectrum bin independently (c2r then drops the imaginary parts
    of the self-paired planes, DESIGN §4) gives too small a variance, and the check above sees it.
    """
    prior = CirculantPrior(LAT_2D, KERNEL_C)
    mult = np.sqrt(prior.eigenvalues / (2.0 * prior.state_size))
    window = (slice(None), *(slice(0, n) for n in prior.shape))

    def wrong_sample(rng, n):
        half = prior.eigenvalues.shape
        u = rng.standard_normal((n, *half)) + 1j * rng.standard_normal((n, *half))
        x = np.fft.irfftn(u * mult, s=prior.embedding_shape, axes=(1, 2)) * prior.state_size
        return x[window]

    per_draw = per_draw_lag_stats(wrong_sample, LAGS_C, 601, n_draws=BATCH * 2)
    z = z_scores(per_draw, kernel_at(KERNEL_C, LAT_2D, LAGS_C))
    assert z[0] < -2 * Z, f"the wrong sampler's variance was not detected (z = {z[0]:+.2f})"
