"""CirculantPrior: a stationary Gaussian field on a regular lattice by circulant embedding.

The lattice (the *window*) is embedded in a torus of ``M_i ≥ 2(n_i − 1)`` cells per axis whose
covariance is the kernel at wrapped lags; its eigenvalues are the real FFT of the embedded row,
``λ = F c`` (Dietrich & Newsam 1997; Wood & Chan 1994).  When every ``λ ≥ 0`` the torus field is
a valid Gaussian whose restriction to the window is *exactly* N(0, K) (DESIGN §4):

* ``sample`` and ``colorize`` followed by ``to_window`` are exact on the window;
* ``solve``, ``log_det``, ``quad_form``, ``logpdf``, ``whiten`` and the surrogate operations are
  exact for the torus state — their oracle is a dense prior with the kernel at wrapped distances.
  Torus cells outside the window are latent variables without likelihood, so posteriors computed
  on the torus state are exact for the window.

Round-off and sizing
--------------------
Eigenvalues with ``|λ| ≤ clip_tol·λ_max`` (default ``clip_tol = 1e-10``) are round-off — smooth
kernels give ``λ_min ≈ −1e-16·λ_max`` at every size, and the FFT fixes any λ only to about
``ε·λ_max`` — and are set to 0, counted in :attr:`CirculantPrior.n_clipped_roundoff` (so
``log_det`` and ``rank`` do not depend on the FFT library's last bits).  Below
``−clip_tol·λ_max`` the torus grows by a factor 1.5 along the axes whose wrap-around causes it
(up to ``max_padding × n_i`` per axis and ``max_cells`` in all), then a short bisection between
the last failing and the first passing size takes back most of that overshoot; past the cap
:class:`~lattice_lgm.errors.EmbeddingNotPSDError` reports the smallest eigenvalue and every size
tried, unless ``approximate=True`` (opt-in) clips the negative eigenvalues and records it in
:attr:`CirculantPrior.n_clipped_approximate`.  The torus is sized once, for ``max_range`` (the
largest range the caller will ever pass to :meth:`CirculantPrior.with_params`), because the
padding needed grows with the range; it is fixed for the prior's life.  A clipped eigenvalue
makes the torus prior singular: ``log_det`` is then the log pseudo-determinant, ``rank`` drops,
and ``whiten``/``solve`` use the pseudo-inverse.

White state
-----------
``colorize(z) = irfftn(√λ · rfftn(z))`` for real white noise ``z`` on the torus (the symmetric
square root, ``white_shape = state_shape``).  ``sample`` skips the forward FFT: it draws the
unitary half-spectrum of real white noise directly — independent complex normals, with the bins
of the last-axis planes 0 and M/2 (which pair up inside the half-spectrum) made Hermitian by
``(u_k + conj u_{−k}) / √2`` — and runs one planned inverse real FFT per draw.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.fft

from .._validation import positive_float, positive_vector
from ..covariance import Covariance
from ..errors import (
    EmbeddingNotPSDError,
    InvalidParameterError,
    ParameterOutOfBoundsError,
    ShapeMismatchError,
)
from ..lattice import Lattice
from ._fft import DEFAULT_PLANNER, RealFFTPlans, default_threads
from ._torus import TorusSpectralOps
from .base import Capabilities, GaussianPrior, SurrogateConditional, _n_chains, as_rng

__all__ = ["CirculantPrior", "embedding_spectrum", "torus_lags"]

#: default relative tolerance under which negative eigenvalues count as round-off
CLIP_TOL = 1e-10
#: growth factor of the torus per attempt
GROWTH = 1.5
#: bisection steps between the last failing and the first passing torus (see ``_refine``)
REFINE_STEPS = 4
#: default cap on the torus size per axis, as a multiple of the lattice size
MAX_PADDING = 16.0
#: default cap on the number of torus cells (2**28 float64 = 2 GiB per field)
MAX_CELLS = 2**28


def _nice(m: int) -> int:
    """Smallest 5-smooth size ≥ m (fast for FFTW and pocketfft)."""
    return int(scipy.fft.next_fast_len(max(int(m), 1), real=True))


def torus_lags(lattice: Lattice, torus_shape: Sequence[int]) -> list[np.ndarray]:
    """Wrapped lags ``h_i · min(k, M_i − k)`` for ``k = 0 … M_i − 1`` per axis."""
    out = []
    for m, h in zip(torus_shape, lattice.spacing, strict=True):
        k = np.arange(m)
        out.append(h * np.minimum(k, m - k))
    return out


def embedding_spectrum(
    kernel: Covariance, lattice: Lattice, torus_shape: Sequence[int], workers: int = 1
) -> np.ndarray:
    """Eigenvalues of the circulant embedding on the half-spectrum, shape ``half_shape``.

    The embedded row is even, so the kernel is evaluated on one quadrant
    (``k ≤ M_i/2`` per axis) and mirrored (DESIGN §4).
    """
    quad_lags = [h * np.arange(m // 2 + 1) for m, h in zip(torus_shape, lattice.spacing,
                                                            strict=True)]
    cq = kernel.from_axis_lags(quad_lags)
    if all(m % 2 == 0 and m >= 2 for m in torus_shape):
        # For an even row on even tori the DFT is the (unnormalised) DCT-I of the quadrant,
        # ≈ 2^d times less work than the real FFT of the mirrored row; mirror the result
        # along all but the last axis to fill the half-spectrum.
        lam = scipy.fft.dctn(cq, type=1, workers=workers)
        for ax, m in enumerate(torus_shape[:-1]):
            lam = np.take(lam, np.minimum(np.arange(m), m - np.arange(m)), axis=ax)
        return lam
    idx = [np.minimum(np.arange(m), m - np.arange(m)) for m in torus_shape]
    row = cq[np.ix_(*idx)]
    return scipy.fft.rfftn(row, workers=workers).real


class CirculantPrior(TorusSpectralOps, GaussianPrior):
    """Stationary Gaussian prior on a regular lattice by circulant embedding on a torus.

    Parameters
    ----------
    lattice : Lattice
        The window.
    kernel : Covariance
        A stationary covariance (per-axis ranges allowed).
    max_range : float or tuple of float, optional
        The largest range that :meth:`with_params` will be asked for (coordinate units, per
        axis allowed); the torus is sized for it.  Default: the kernel's range.
    embedding_shape : tuple of int, optional
        Force the torus size (each ``≥ 2(n_i − 1)``); it is still checked for PSD.
    clip_tol : float
        Relative round-off tolerance for negative eigenvalues (default 1e-10).
    max_padding : float
        Cap on ``M_i / n_i`` while growing (default 16).
    max_cells : int
        Cap on the number of torus cells (default 2**28).
    approximate : bool
        Opt in to clipping negative eigenvalues past the cap (recorded, and warned about).
    planner_effort : str
        FFTW planner (default ``"FFTW_ESTIMATE"``: deterministic, see ``priors._fft``).
    fft_threads : int, optional
        FFTW threads (default: available cores).

    Attributes
    ----------
    embedding_shape : tuple of int
        Torus cells per axis, ``state_shape``.
    padding : tuple of float
        ``M_i / n_i`` per axis.
    sized_for_range : tuple of float
        The range the torus was sized for.
    attempts : list of (tuple, float)
        Each torus size tried with its ``λ_min / λ_max``.
    n_clipped_roundoff, n_clipped_approximate : int
        Eigenvalues (full spectrum) set to 0 as round-off / by opt-in approximation.

    Examples
    --------
    >>> from lattice_lgm import Lattice
    >>> from lattice_lgm.covariance import Matern
    >>> lat = Lattice((64, 64), spacing=1 / 64)
    >>> p = CirculantPrior(lat, Matern(1.5, range=0.2), max_range=0.5)
    >>> p.sample(np.random.default_rng(0), 4).shape
    (4, 64, 64)
    """

    exact_on = "torus"

    @property
    def capabilities(self) -> Capabilities:
        """Fourier-diagonal and FFT-whitened."""
        return Capabilities(backend="circulant", fourier=True, white_transform="fft")

    def __init__(
        self,
        lattice: Lattice,
        kernel: Covariance,
        *,
        max_range: float | Sequence[float] | None = None,
        embedding_shape: Sequence[int] | None = None,
        clip_tol: float = CLIP_TOL,
        max_padding: float = MAX_PADDING,
        max_cells: int = MAX_CELLS,
        approximate: bool = False,
        planner_effort: str = DEFAULT_PLANNER,
        fft_threads: int | None = None,
    ) -> None:
        if not isinstance(lattice, Lattice):
            raise InvalidParameterError(f"lattice={lattice!r} must be a lattice_lgm.Lattice.")
        if not isinstance(kernel, Covariance):
            raise InvalidParameterError(
                f"kernel={kernel!r} must be a lattice_lgm.covariance.Covariance."
            )
        ndim = lattice.ndim
        kernel.lengthscales_for(ndim)  # validates per-axis ranges against the lattice
        krange = np.broadcast_to(np.asarray(kernel.range), (ndim,))
        if max_range is None:
            sized = tuple(float(r) for r in krange)
        else:
            sized = positive_vector("max_range", max_range, ndim,
                                    "max_range is the largest range allowed, > 0")
        if np.any(krange > np.asarray(sized) * (1 + 1e-12)):
            raise ParameterOutOfBoundsError(
                f"kernel range {tuple(krange)} exceeds max_range={sized}; raise max_range."
            )
        self.clip_tol = positive_float("clip_tol", clip_tol, "a small relative tolerance")
        self.lattice = lattice
        self.shape = lattice.shape
        self.sized_for_range = sized
        self.approximate = bool(approximate)
        size_kernel = kernel.with_params(range=sized if ndim > 1 else sized[0])
        self.attempts: list[tuple[tuple[int, ...], float]] = []
        mshape = self._size(size_kernel, embedding_shape, max_padding, int(max_cells))
        self.state_shape = self.white_shape = self.embedding_shape = mshape
        self.padding = tuple(m / n for m, n in zip(mshape, self.shape, strict=True))
        self._plans = RealFFTPlans(mshape, planner_effort=planner_effort, threads=fft_threads)
        # single-threaded plans per calling thread, shared with with_params copies
        self._thread_plans: dict[int, RealFFTPlans] = {}
        self._weights = self._plans.half_weights()
        self._set_kernel(kernel)

    # -- sizing and spectrum --------------------------------------------------------------------
    def _spectrum(self, kernel: Covariance, mshape: Sequence[int]) -> np.ndarray:
        # pocketfft's threads follow the run's budget like FFTW's (two workers on a busy
        # 2-core machine made a 72 × 100 torus's spectrum 3× slower, every HMC transition);
        # its multi-threaded transforms split independent lines: the same bits (tested)
        return embedding_spectrum(kernel, self.lattice, mshape,
                                  workers=default_threads(int(np.prod(mshape))))

    def _size(
        self, kernel: Covariance, forced: Sequence[int] | None, max_padding: float, max_cells: int
    ) -> tuple[int, ...]:
        n = self.lattice.shape
        minimum = tuple(max(2 * (ni - 1), 1) for ni in n)
        if forced is not None:
            forced = tuple(int(m) for m in forced)
            if len(forced) != len(n) or any(f < mi for f, mi in zip(forced, minimum, strict=True)):
                raise ShapeMismatchError(
                    f"embedding_shape={forced} must have one size per axis, each >= 2(n-1) = "
                    f"{minimum}."
                )
            mshape = forced
        else:
            mshape = tuple(_nice(mi) for mi in minimum)
        cap = tuple(max(int(max_padding * ni), mi) for ni, mi in zip(n, mshape, strict=True))
        while True:
            lam = self._spectrum(kernel, mshape)
            ratio = float(lam.min() / lam.max())
            self.attempts.append((mshape, ratio))
            if ratio >= -self.clip_tol or forced is not None:
                if len(self.attempts) > 1:
                    return self._refine(kernel, self.attempts[-2][0], mshape)
                return mshape
            grown = self._grow(kernel, mshape, cap)
            if grown == mshape or int(np.prod(grown)) > max_cells:
                if self.approximate:
                    return mshape
                raise EmbeddingNotPSDError(
                    f"the circulant embedding of {kernel!r} is not PSD: smallest eigenvalue "
                    f"{ratio:.3g}·λ_max at the largest torus tried; sizes tried "
                    f"{[a[0] for a in self.attempts]} (cap: {max_padding}× per axis, "
                    f"{max_cells} cells). Lower max_range, use a rougher kernel or a GMRF "
                    "prior, raise max_padding/max_cells, or opt in to approximate=True."
                )
            mshape = grown

    def _refine(
        self, kernel: Covariance, failed: tuple[int, ...], passed: tuple[int, ...]
    ) -> tuple[int, ...]:
        """Bisect between the last failing and the first passing torus for a smaller PSD one.

        Growth by ×GROWTH overshoots by up to that factor per axis (a 1024² lattice sized for
        range 0.5 went 4608² → 6912², with 4608² short of PSD by 2e-10·λ_max).  The candidates
        are the points ``failed + t (passed − failed)`` rounded up to fast FFT lengths; a
        bisection over ``t`` costs a few spectra (each far cheaper than one sampling sweep on
        the bigger torus) and only ever returns a size whose spectrum was checked.
        """
        def at(t: float) -> tuple[int, ...]:
            pairs = zip(failed, passed, strict=True)
            return tuple(min(_nice(math.ceil(f + t * (p - f))), p) for f, p in pairs)

        lo, hi, best = 0.0, 1.0, passed
        for _ in range(REFINE_STEPS):
            mid = 0.5 * (lo + hi)
            cand = at(mid)
            if cand == best or cand == failed:
                break
            lam = self._spectrum(kernel, cand)
            ratio = float(lam.min() / lam.max())
            self.attempts.append((cand, ratio))
            if ratio >= -self.clip_tol:
                hi, best = mid, cand
            else:
                lo = mid
        return best

    def _grow(
        self, kernel: Covariance, mshape: tuple[int, ...], cap: tuple[int, ...]
    ) -> tuple[int, ...]:
        """Grow the axes whose wrap-around is the culprit, ×GROWTH each, within the caps.

        The negative eigenvalues come from the kernel still being non-negligible where the
        torus wraps; the axes whose covariance at half the torus length is within a factor 10
        of the worst one grow (all of them for an isotropic kernel on a square).
        """
        h = self.lattice.spacing
        wrap = np.array([
            abs(float(kernel.from_lags(np.eye(len(mshape))[i] * (m // 2) * h[i])))
            for i, m in enumerate(mshape)
        ])
        grow = wrap >= 0.1 * wrap.max()
        return tuple(
            min(_nice(math.ceil(GROWTH * m)), c) if g else m
            for m, c, g in zip(mshape, cap, grow, strict=True)
        )

    def _set_kernel(self, kernel: Covariance) -> None:
        lam = self._spectrum(kernel, self.embedding_shape)
        lmax = float(lam.max())
        self.min_eigenvalue = float(lam.min())
        # |λ| ≤ τ·λ_max is round-off: the FFT of the embedded row computes λ only to about
        # ε·λ_max absolutely, so keeping tiny positive values would make log_det and rank
        # depend on the FFT implementation (measured: SE, 64 cells, rank 103 vs 101).
        small = np.abs(lam) <= self.clip_tol * lmax
        big = lam < -self.clip_tol * lmax
        neg = small | big
        if big.any():
            if not self.approximate:
                raise EmbeddingNotPSDError(
                    f"with {kernel!r} the torus {self.embedding_shape} (sized for range "
                    f"{self.sized_for_range}) has eigenvalue {self.min_eigenvalue:.3g} "
                    f"< -{self.clip_tol:g}·λ_max; build the prior with a larger max_range "
                    "(or approximate=True to clip, recorded)."
                )
            warnings.warn(
                f"CirculantPrior: clipping {int(self._weights[big].sum())} negative eigenvalues "
                f"(smallest {self.min_eigenvalue:.3g}, {-lam[big].sum() / lam.sum():.2e} of the "
                "trace): draws are approximate (approximate=True).",
                stacklevel=3,
            )
        self.n_clipped_roundoff = int(self._weights[small].sum()) if small.any() else 0
        self.n_clipped_approximate = int(self._weights[big].sum()) if big.any() else 0
        if neg.any():
            lam = np.where(neg, 0.0, lam)
        self.kernel = kernel
        self.eigenvalues = lam
        # Everything else derives from λ and is computed on first use: a hyperparameter move
        # builds a prior per proposal and usually needs only λ and one multiplier (measured
        # at 1024²: with_params 0.44 s → see docs/decisions.md).
        self._derived: dict[str, Any] = {}

    def _get(self, name: str) -> Any:
        d = self._derived
        if name not in d:
            lam = self.eigenvalues
            pos = lam > 0
            size = self._plans.size
            if name == "inv":
                d[name] = np.where(pos, 1.0 / np.where(pos, lam, 1.0), 0.0)
            elif name == "m_sqrt":  # filter multipliers carry the 1/M of the c2r (_fft.filter)
                d[name] = np.sqrt(lam) / size
            elif name == "m_inv":
                d[name] = self._get("inv") / size
            elif name == "m_inv_sqrt":
                d[name] = np.sqrt(self._get("inv")) / size
            elif name == "rank":
                d[name] = int(self._weights[pos].sum())
            elif name == "logdet":
                d[name] = float(np.sum(self._weights[pos] * np.log(lam[pos])))
            elif name == "sample_mult":
                # u ~ N(0, 1) in both parts → unitary white half-spectrum (÷√2) → ×√(λ/M)
                d[name] = np.sqrt(lam / (2.0 * size))
            elif name == "color_mult":  # unitary ζ → field, 1/M of the c2r included
                d[name] = np.sqrt(lam / size)
            else:  # pragma: no cover - programming error
                raise KeyError(name)
        return d[name]

    # -- protocol hooks -------------------------------------------------------------------------
    @property
    def params(self) -> dict[str, Any]:  # noqa: D102
        return self.kernel.params

    @property
    def rank(self) -> int:  # noqa: D102
        return self._get("rank")

    def _colorize(self, z: np.ndarray) -> np.ndarray:
        return self._fft().filter(z, self._get("m_sqrt"))

    def _whiten(self, x: np.ndarray) -> np.ndarray:
        return self._fft().filter(x, self._get("m_inv_sqrt"))

    def _solve(self, b: np.ndarray) -> np.ndarray:
        return self._fft().filter(b, self._get("m_inv"))

    def _log_det(self) -> float:
        return self._get("logdet")

    def _spectral_sum(self, xk: np.ndarray, weight: np.ndarray) -> np.ndarray:
        """``Σ_full weight_k |x̂_k|² / M`` per chain (Parseval on the half-spectrum)."""
        p = (xk.real**2 + xk.imag**2) * (self._weights * weight)
        return p.reshape(len(p), -1).sum(axis=1) / self._plans.size

    def _quad_form(self, x: np.ndarray) -> np.ndarray:
        return self._spectral_sum(self._fft().forward(x), self._get("inv"))

    def _to_window(self, x: np.ndarray) -> np.ndarray:
        return x[(slice(None), *(slice(0, n) for n in self.shape))].copy()

    def _hermitian_fix(self, buf: np.ndarray) -> None:
        """Make the self-paired planes of one half-spectrum of iid complex normals Hermitian.

        Bins ``k`` and ``−k`` of the last-axis planes 0 and M/2 both lie in the half-spectrum;
        c2r would silently drop the inconsistent part (DESIGN §4), so each pair is replaced by
        ``(u_k + conj u_{−k}) / √2`` — complex with Re, Im ~ N(0, 1/2) for a pair, and real
        N(0, 1) for a self-conjugate bin, exactly the unitary rfft of real white noise.
        """
        rev = self._plans.plane_reversal()
        for j in self._plans.hermitian_planes():
            plane = buf[..., j]
            buf[..., j] = (plane + np.conj(plane.reshape(-1)[rev].reshape(plane.shape))) * (
                1.0 / math.sqrt(2.0))

    def _draw(
        self,
        fill: Any,
        n: int,
        window: bool,
    ) -> np.ndarray:
        """Run ``fill(u, i)`` (normals for chain i into ``u``), then one c2r, per chain."""
        plans = self._fft()
        cplx = plans.complex_buffer
        u = cplx.view(np.float64)
        out = np.empty((n, *(self.shape if window else self.state_shape)))
        win = tuple(slice(0, m) for m in self.shape) if window else ...
        for i in range(n):
            fill(u, i)
            self._hermitian_fix(cplx)
            cplx *= self._get("sample_mult")
            out[i] = plans.execute_backward()[win]
        return out

    def _draw_normals(
        self, rng: np.random.Generator | Sequence[np.random.Generator], n: int, window: bool
    ) -> np.ndarray:
        if isinstance(rng, np.random.Generator):
            # chains in order from one stream: the same numbers as one (n, …) draw
            return self._draw(lambda u, i: rng.standard_normal(out=u), n, window)
        return self._draw(lambda u, i: rng[i].standard_normal(out=u), n, window)  # DESIGN §5

    def colorize_half(self, u: np.ndarray) -> np.ndarray:
        """The linear map ``sample`` applies to its normals (exposed for tests of W Wᵀ = K).

        Parameters
        ----------
        u : ndarray, shape (n_chains, *half_shape[:-1], 2 * half_shape[-1])
            Real normals, read as the real/imaginary parts of the half-spectrum.

        Returns
        -------
        ndarray, shape (n_chains, *state_shape)
        """
        u = np.asarray(u, dtype=np.float64)

        def fill(buf: np.ndarray, i: int) -> None:
            buf[...] = u[i]

        return self._draw(fill, len(u), window=False)

    def _sample_state(self, rng: np.random.Generator, n_chains: int) -> np.ndarray:
        return self._draw_normals(rng, n_chains, window=False)

    # -- the spectral white state: priors/_torus.py (TorusSpectralOps) -------------------

    def sample(
        self, rng: np.random.Generator | int | Sequence[np.random.Generator], n_chains: int = 1
    ) -> np.ndarray:
        """Draw fields on the window, exactly N(0, K): one inverse real FFT per chain.

        Parameters
        ----------
        rng : numpy.random.Generator, int, or sequence of Generator
            A sequence gives each chain its own stream (its length must be ``n_chains``).
        n_chains : int

        Returns
        -------
        ndarray, shape (n_chains, *lattice.shape)
        """
        n = _n_chains(n_chains)
        if isinstance(rng, (list, tuple)):
            if len(rng) != n_chains or not all(isinstance(r, np.random.Generator) for r in rng):
                raise InvalidParameterError(
                    f"rng is a sequence of {len(rng)} items; give one numpy Generator per chain "
                    f"(n_chains={n_chains})."
                )
            gen: Any = rng
        else:
            gen = as_rng(rng)
        return self._draw_normals(gen, n, window=True)

    def _with_params(self, **params: Any) -> CirculantPrior:
        kernel = self.kernel.with_params(**params)
        kr = np.broadcast_to(np.asarray(kernel.range), (self.lattice.ndim,))
        if np.any(kr > np.asarray(self.sized_for_range) * (1 + 1e-12)):
            raise ParameterOutOfBoundsError(
                f"range={tuple(kr)} exceeds the max_range={self.sized_for_range} this torus "
                f"{self.embedding_shape} was sized for; build the prior with a larger max_range "
                "(the range prior's upper bound)."
            )
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)  # shares the FFT plans and the sizing record
        new._set_kernel(kernel)
        return new

    def _surrogate(self, g: np.ndarray, precision: np.ndarray) -> SurrogateConditional:
        pi = float(precision.flat[0])
        if np.any(precision != pi):
            raise InvalidParameterError(
                "CirculantPrior supports surrogate data with a scalar precision over the torus "
                "('surr-scalar') or a per-frequency one (surrogate_spectral); site-specific S "
                "needs a DensePrior or a GMRFPrior."
            )
        return self._surrogate_k(g, np.full(self._plans.half_shape, pi))

    # -- reporting ------------------------------------------------------------------------------
    def torus_lattice(self) -> Lattice:
        """The embedding torus as a Lattice (same spacing and origin; wraps at its far edge)."""
        la = self.lattice
        return Lattice(self.embedding_shape, la.spacing, la.origin, la.dims, la.units, la.crs)

    def describe(self) -> str:  # noqa: D102
        pad = "×".join(f"{p:.2f}" for p in self.padding)
        return (
            f"CirculantPrior({self.kernel!r}) on {self.shape}: torus {self.embedding_shape} "
            f"(padding {pad}, sized for range {self.sized_for_range}); exact on the torus, draws "
            f"exact on the window; round-off clipped {self.n_clipped_roundoff}, approximate "
            f"{self.n_clipped_approximate}; FFTW {self._plans.planner_effort}, "
            f"{self._plans.threads} thread(s)"
        )

    __repr__ = describe
