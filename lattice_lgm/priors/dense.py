"""DensePrior: N(0, K) with a LAPACK Cholesky factor — exact for any inputs.

This is the papers' path (Murray, Adams & MacKay 2010; Murray & Adams 2010 use dense Cholesky
factors throughout) and the oracle every structured backend is tested against.  Cost is O(N³)
time and O(N²) memory: use it up to N ≈ 8000 (DESIGN §8).

Jitter policy
-------------
``jitter="auto"`` (default) first factors ``K`` as is.  If LAPACK reports it is not positive
definite (smooth kernels on dense inputs are numerically rank deficient, DESIGN §4) it retries
with ``K + ε·mean(diag K)·I`` for ``ε = 1e-10, 1e-9, …, 1e-6`` and raises
:class:`~lattice_lgm.errors.NotPositiveDefiniteError` past that.  The absolute jitter added is
stored in :attr:`DensePrior.jitter` and every operation (including ``log_det``) is exact for
``K + jitter·I``.  A float ``jitter`` adds exactly that value and does not retry.

The level ``ε`` found for the prior the user built is kept for its whole hyperparameter family:
a prior from :meth:`~lattice_lgm.priors.base.GaussianPrior.with_params` (what a hyperparameter
move builds at every proposal) adds ``ε·mean(diag K_θ)`` and climbs the ladder from ``ε`` only if
that fails.  So the jitter is a fixed function of θ chosen at the start, continuous in θ at that
level (``mean(diag K_θ)`` is ``sd²`` for a stationary kernel), not of the factorisation history.
Re-running the ladder from 0 at every θ made ``K_θ`` jump wherever round-off flips a smooth
kernel's ``K`` between factorable and not: a one-ulp change of θ moved ``log N(f; 0, K_θ)`` from
+2.9e3 to −5.0e5 and stranded a ``fixed`` hyperparameter slice sampler (architecture
decision 60).
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from scipy import linalg
from scipy.linalg.lapack import dlauum as _dlauum

from .._validation import finite_array, positive_float
from ..covariance import Covariance
from ..covariance._distances import _Distances
from ..errors import InvalidCovarianceError, InvalidParameterError, NotPositiveDefiniteError
from ..lattice import Lattice
from .base import LOG_2PI, Capabilities, GaussianPrior, SurrogateConditional


@numba.njit(cache=True, nogil=True, boundscheck=False, fastmath={"reassoc", "contract"})
def _lower_row(low: np.ndarray, w: np.ndarray, out: np.ndarray, i: int) -> None:  # pragma: no cover
    """``out[:, i] = L[i, :i+1] · w[:, :i+1]``: one row of :func:`_lower_matvecs`."""
    row = low[i, : i + 1]
    for c in range(w.shape[0]):
        wc = w[c, : i + 1]
        s = 0.0
        for j in range(i + 1):
            s += row[j] * wc[j]
        out[c, i] = s


@numba.njit(cache=True, nogil=True, parallel=True)
def _lower_matvecs(low: np.ndarray, w: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover
    """``out[c] = L w[c]`` for a lower-triangular ``L`` (n, n), rows ``w`` (m, n).

    Colourisation of dense white noise, all chains in one pass over the factor: each row of
    ``L`` is read once (and stays in L1) for every chain, and only the triangle (half the
    bytes of a general product) is read.  Each output element is one dot product of a row
    of ``L`` with one chain's ``w``, compiled once (:func:`_lower_row`): the reassociation
    allowed there lets LLVM vectorise that reduction (its partial sums depend on the row's
    length only), so a chain's field is bitwise the same alone, in any batch or subset of
    chains and on any thread count (DESIGN §5) — which a batched BLAS product does not
    promise (its blocking depends on the batch size).  Its last bits depend on the CPU's
    vector width, as BLAS's do.  Rows run in parallel threads in pairs ``(k, n−1−k)`` of
    equal total length, so a static split of the pairs balances the triangle.  Measured on
    the coal-mining factor (811², 4 chains, one core): 0.23 ms, against 0.41 ms for the
    same product summed in a fixed scalar order and 0.43 ms for one BLAS GEMM.
    """
    n = low.shape[0]
    for k in numba.prange((n + 1) // 2):
        _lower_row(low, w, out, k)
        if n - 1 - k != k:
            _lower_row(low, w, out, n - 1 - k)


__all__ = ["DensePrior"]

_AUTO_JITTERS = (0.0, 1e-10, 1e-9, 1e-8, 1e-7, 1e-6)


class _AutoFrom(float):
    """The ``'auto'`` policy of a hyperparameter family: the ladder starts at this level."""


def _cholesky(k: np.ndarray, jitter: float | str,
              what: str) -> tuple[np.ndarray, float, float | None]:
    """Lower Cholesky factor of ``k`` under the jitter policy.

    Returns ``(L, absolute jitter, relative level ε)``; the level is ``None`` for a float jitter.
    """
    scale = float(np.mean(np.diag(k)))
    if jitter == "auto" or isinstance(jitter, _AutoFrom):
        start = 0.0 if jitter == "auto" else float(jitter)
        rel: tuple[float | None, ...] = (start, *(e for e in _AUTO_JITTERS if e > start))
    else:
        rel = (None,)
    for eps in rel:
        add = float(jitter) if eps is None else eps * scale
        try:
            a = k + add * np.eye(len(k)) if add else k
            return linalg.cholesky(a, lower=True, check_finite=False), add, eps
        except linalg.LinAlgError:
            continue
    top = float(jitter) if rel == (None,) else max(rel[-1], _AUTO_JITTERS[-1]) * scale
    raise NotPositiveDefiniteError(
        f"{what} is not positive definite even with jitter up to {top:.3g}; use a rougher "
        "kernel, remove duplicate inputs, or pass a larger jitter= explicitly."
    )


def _lattice_covariance(lattice: Lattice, kernel: Covariance) -> np.ndarray:
    """``K[(i), (j)] = k(h ⊙ |i − j|)`` for C-ordered lattice cells, shape ``(N, N)``."""
    shape = lattice.shape
    d = len(shape)
    per_lag = kernel.from_axis_lags([h * np.arange(n) for n, h in
                                     zip(shape, lattice.spacing, strict=True)])
    index = []
    for a, n in enumerate(shape):
        lag = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])
        broadcast = [1] * (2 * d)
        broadcast[a] = broadcast[d + a] = n
        index.append(lag.reshape(broadcast))
    n_cells = lattice.size
    return per_lag[tuple(index)].reshape(n_cells, n_cells)


class DensePrior(GaussianPrior):
    """Gaussian prior with a dense covariance matrix and LAPACK Cholesky.

    Exact on its inputs (``exact_on = "inputs"``; for :meth:`from_lattice`, on the lattice).

    Parameters
    ----------
    x : ndarray, shape (n, ndim)
        Input locations in coordinate units.
    kernel : Covariance
        Covariance function.
    jitter : "auto" or float
        See the module docstring.
    shape : tuple of int, optional
        Field shape (default ``(n,)``); ``from_lattice`` sets the lattice shape.

    Examples
    --------
    >>> from lattice_lgm import Lattice
    >>> from lattice_lgm.covariance import Matern
    >>> d = DensePrior.from_lattice(Lattice((4, 5)), Matern(1.5, range=2.0))
    >>> d.sample(np.random.default_rng(0), 3).shape
    (3, 4, 5)
    """

    exact_on = "inputs"
    colorize_batch_exact = True  # _lower_matvecs: each element one compiled dot product

    @property
    def capabilities(self) -> Capabilities:
        """Holds the Cholesky factor of the whole covariance."""
        return Capabilities(backend="dense", dense_factor=True)

    def __init__(
        self,
        x: np.ndarray,
        kernel: Covariance,
        *,
        jitter: float | str = "auto",
        shape: tuple[int, ...] | None = None,
    ) -> None:
        x = np.asarray(x, dtype=np.float64)
        if x.ndim == 1:
            x = x[:, None]
        if x.ndim != 2:
            raise InvalidParameterError(f"x has shape {x.shape}; inputs must be (n, ndim).")
        finite_array("x", x, "inputs must be finite coordinates")
        if not isinstance(kernel, Covariance):
            raise InvalidParameterError(
                f"kernel={kernel!r} is not a lattice_lgm Covariance; use e.g. Matern(1.5, range=…)"
                " or DensePrior.from_matrix for a matrix."
            )
        if shape is not None and int(np.prod(shape)) != len(x):
            raise InvalidParameterError(f"shape={shape} does not hold the {len(x)} inputs.")
        self._init_inputs(x, kernel, tuple(shape) if shape is not None else (len(x),), jitter,
                          None)

    def _init_inputs(self, x: np.ndarray, kernel: Covariance, shape: tuple[int, ...],
                     jitter: float | str, previous: _Distances | None) -> None:
        self.x = x
        self.kernel = kernel
        self.shape = shape
        # the scaled distances, kept for with_params: a hyperparameter move changes one
        # coordinate, so a child recomputes one of their eight running sums, or none for sd
        # (Covariance._self_distances; bitwise kernel(x))
        self._distances = kernel._self_distances(x, previous)
        k = kernel(x) if self._distances is None else kernel._from_distances(self._distances.u)
        self._init_matrix(k, jitter)

    def _init_matrix(self, k: np.ndarray, jitter: float | str) -> None:
        if jitter != "auto" and not isinstance(jitter, _AutoFrom):
            if float(jitter) != 0.0:
                positive_float("jitter", jitter, "jitter is an absolute variance >= 0 or 'auto'")
        self.state_shape = self.white_shape = self.shape
        self.cov = k
        self.chol, self.jitter, level = _cholesky(k, jitter, "the covariance matrix")
        # what with_params passes on: under 'auto' the level this (root) prior needed, so the
        # whole family adds ε·mean(diag K_θ) (module docstring); a child passes its parent's
        # level on unchanged, never its own, so the level is fixed at the start
        self._jitter_arg = _AutoFrom(level) if jitter == "auto" else jitter

    def __getstate__(self) -> dict[str, Any]:
        # the distances are a cache (with their running sums 9 n² doubles, more than K and L):
        # not shipped to Dask workers or files; the first child of an unpickled prior rebuilds them
        return {**self.__dict__, "_distances": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        # a prior pickled before the distances were kept has no entry: none to pass on
        self.__dict__.update({"_distances": None, **state})

    @property
    def jitter_level(self) -> float | None:
        """Relative jitter level ``ε`` of this prior's hyperparameter family.

        Under ``'auto'`` every prior of the family adds ``ε·mean(diag K_θ)`` (module docstring);
        ``None`` for an explicit float jitter.
        """
        return float(self._jitter_arg) if isinstance(self._jitter_arg, _AutoFrom) else None

    @classmethod
    def from_lattice(
        cls, lattice: Lattice, kernel: Covariance, *, jitter: float | str = "auto"
    ) -> DensePrior:
        """Dense prior on a lattice's cell centres, exact on the lattice (fields ``lat.shape``).

        The covariance of a stationary kernel on a lattice is multilevel Toeplitz: the kernel is
        evaluated once per distinct lag (``N`` evaluations instead of ``N²``, which matters for
        Bessel-function Matérn kernels) and gathered into the ``N × N`` matrix.
        """
        if not isinstance(lattice, Lattice):
            raise InvalidParameterError(f"lattice={lattice!r} must be a lattice_lgm.Lattice.")
        if not isinstance(kernel, Covariance):
            raise InvalidParameterError(
                f"kernel={kernel!r} is not a lattice_lgm Covariance; use e.g. Matern(1.5, range=…)."
            )
        obj = cls.__new__(cls)
        obj.x = lattice.cell_centers()
        obj.kernel = kernel
        obj.shape = lattice.shape
        obj.exact_on = "lattice"
        obj.lattice = lattice
        obj._init_matrix(_lattice_covariance(lattice, kernel), jitter)
        return obj

    @classmethod
    def from_matrix(
        cls, cov: np.ndarray, *, jitter: float | str = "auto", shape: tuple[int, ...] | None = None
    ) -> DensePrior:
        """Dense prior from a user covariance matrix (checked: square, finite, symmetric, PSD).

        Raises
        ------
        InvalidCovarianceError
            Not square, not finite, not symmetric (relative 1e-10) or with an eigenvalue below
            ``-1e-8·max|eig|``.
        """
        cov = np.asarray(cov, dtype=np.float64)
        if cov.ndim != 2 or cov.shape[0] != cov.shape[1]:
            raise InvalidCovarianceError(f"cov has shape {cov.shape}; it must be square (n, n).")
        if not np.all(np.isfinite(cov)):
            idx = tuple(int(i) for i in np.argwhere(~np.isfinite(cov))[0])
            raise InvalidCovarianceError(f"cov has a non-finite entry at {idx}.")
        asym = np.max(np.abs(cov - cov.T))
        if asym > 1e-10 * np.max(np.abs(cov)):
            i, j = np.unravel_index(np.argmax(np.abs(cov - cov.T)), cov.shape)
            raise InvalidCovarianceError(
                f"cov is not symmetric: cov[{i},{j}]={cov[i, j]!r} but cov[{j},{i}]={cov[j, i]!r}; "
                "pass (cov + cov.T) / 2 if the asymmetry is round-off."
            )
        eig = np.linalg.eigvalsh(cov)
        if eig[0] < -1e-8 * np.max(np.abs(eig)):
            raise InvalidCovarianceError(
                f"cov is not positive semi-definite: smallest eigenvalue {eig[0]:.3g} "
                f"(largest {eig[-1]:.3g}); check how it was built."
            )
        if shape is not None and int(np.prod(shape)) != len(cov):
            raise InvalidParameterError(f"shape={tuple(shape)} does not hold the {len(cov)} "
                                        "variables of cov; give a shape with prod(shape) = n.")
        obj = cls.__new__(cls)
        obj.x = None
        obj.kernel = None
        obj.shape = tuple(shape) if shape is not None else (len(cov),)
        obj._init_matrix(0.5 * (cov + cov.T), jitter)
        return obj

    # -- hooks ----------------------------------------------------------------------------------
    @property
    def params(self) -> dict[str, Any]:  # noqa: D102
        return {} if self.kernel is None else self.kernel.params

    def _flat(self, a: np.ndarray) -> np.ndarray:
        return a.reshape(len(a), -1)

    def _colorize(self, z: np.ndarray) -> np.ndarray:
        zf = np.ascontiguousarray(self._flat(z), dtype=np.float64)
        out = np.empty_like(zf)
        _lower_matvecs(self._chol_c, zf, out)
        return out.reshape(z.shape)

    @property
    def _chol_c(self) -> np.ndarray:
        """The factor as a C-contiguous float64 array (what the compiled product reads)."""
        chol = self.chol
        cached = self.__dict__.get("_chol_c_cache")
        if cached is None or cached[0] is not chol:
            cached = (chol, np.ascontiguousarray(chol, dtype=np.float64))
            self.__dict__["_chol_c_cache"] = cached
        return cached[1]

    def _whiten(self, x: np.ndarray) -> np.ndarray:
        z = linalg.solve_triangular(self.chol, self._flat(x).T, lower=True, check_finite=False)
        return z.T.reshape(x.shape)

    def _solve(self, b: np.ndarray) -> np.ndarray:
        y = linalg.cho_solve((self.chol, True), self._flat(b).T, check_finite=False)
        return y.T.reshape(b.shape)

    def _log_det(self) -> float:
        return 2.0 * float(np.sum(np.log(np.diag(self.chol))))

    def _with_params(self, **params: Any) -> DensePrior:
        if self.kernel is None:
            raise InvalidParameterError(
                "a DensePrior built from a matrix has no hyperparameters; build a new one."
            )
        kernel = self.kernel.with_params(**params)
        if hasattr(self, "lattice"):
            return type(self).from_lattice(self.lattice, kernel, jitter=self._jitter_arg)
        # self.x was validated when the family's root was built
        obj = type(self).__new__(type(self))
        obj._init_inputs(self.x, kernel, self.shape, self._jitter_arg, self._distances)
        return obj

    def _surrogate(self, g: np.ndarray, precision: np.ndarray) -> SurrogateConditional:
        # Stable forms (Rasmussen & Williams 2006, Alg. 3.1; DESIGN §4).  With K = L Lᵀ and
        # W = Π^½ L:  A = I + WᵀW (eigenvalues ≥ 1),  R = (K⁻¹ + Π)⁻¹ = L A⁻¹ Lᵀ,
        # L_R = L L_A⁻ᵀ, and the posterior mean m = R Π g = L y with y = L_A⁻ᵀ L_A⁻¹ Lᵀ Π g.
        # One factorisation serves the marginal over the observed sites O too:
        #   log N(g_O; 0, K_OO + S_O) = −½ q − log|L_A| + ½ Σ_O log π − ½ n_O log 2π,
        # since |I + Π_O^½ K_OO Π_O^½| = |A| (Sylvester), and
        #   q = g_Oᵀ(K_OO + S_O)⁻¹g_O = min_f (g − f)ᵀΠ(g − f) + fᵀK⁻¹f
        #     = Σ_O π (g − m)² + ‖y‖²,
        # a sum of two non-negative terms (no cancellation, no division by a small precision).
        # W is lower triangular (a row scaling of L), so A − I = WᵀW is LAPACK's dlauum: n³/3
        # flops, a third of a symmetric rank-n update (dsyrk; timed in benchmarks/perf/dense.py).
        pi = precision.ravel()
        obs = pi > 0
        gf = self._flat(g)
        n = len(pi)
        lmat = self.chol
        # built in Fortran order so dlauum overwrites it in place; it reads and writes the
        # lower triangle only, which is all the Cholesky of A below reads
        w = np.multiply(np.sqrt(pi)[:, None], lmat, order="F")
        a, info = _dlauum(w, lower=1, overwrite_c=1)
        if info != 0:  # only for an invalid argument, never for a value of W
            raise RuntimeError(f"LAPACK dlauum failed (info={info}); this is a bug.")
        a[np.diag_indices(n)] += 1.0
        la = linalg.cholesky(a, lower=True, check_finite=False)
        rhs = (gf * pi) @ lmat  # (c, n) = (Lᵀ Π g)ᵀ
        z = linalg.solve_triangular(la, rhs.T, lower=True, check_finite=False)
        y = linalg.solve_triangular(la, z, lower=True, trans="T", check_finite=False)  # (n, c)
        mean = y.T @ lmat.T
        n_obs = int(obs.sum())
        if n_obs:
            resid = (gf - mean)[:, obs]
            q = np.sum(pi[obs] * resid * resid, axis=1) + np.sum(y * y, axis=0)
            logm = (-0.5 * q - np.sum(np.log(np.diag(la)))
                    + 0.5 * np.sum(np.log(pi[obs])) - 0.5 * n_obs * LOG_2PI)
        else:
            logm = np.zeros(len(g))
        shape = g.shape

        def colorize(eta: np.ndarray) -> np.ndarray:
            e = self._flat(np.asarray(eta, dtype=np.float64))
            y = linalg.solve_triangular(la, e.T, lower=True, trans="T", check_finite=False)
            return (lmat @ y).T.reshape(eta.shape)

        def whiten(x: np.ndarray) -> np.ndarray:
            u = linalg.solve_triangular(lmat, self._flat(x).T, lower=True, check_finite=False)
            return (la.T @ u).T.reshape(x.shape)

        return SurrogateConditional(mean=mean.reshape(shape), logmarginal=np.asarray(logm),
                                    colorize=colorize, whiten=whiten)

    def __repr__(self) -> str:
        return (f"DensePrior(n={self.state_size}, kernel={self.kernel!r}, "
                f"jitter={self.jitter:.3g}, exact on the {self.exact_on})")
