"""The GMRF structures: what a GMRFPrior keeps across ``with_params`` (DESIGN §4).

A structure holds what does not depend on the hyperparameters — the (padded) state lattice, the
sparse patterns of ``B`` and ``Q`` with one lazily computed CHOLMOD symbolic analysis each, the
spectra of the finite-difference Laplacians, the constants of the random walks — and builds
the values that do on those fixed patterns:

=========================  =====================================================================
structure                  model
=========================  =====================================================================
``_MaternStructure``       Matérn-SPDE: ``B = 8ν I + Σ_i range_i² L_i`` on the padded lattice,
                           ``Q = s B^α``; the calibration cell's variance from the spectrum
``_GraphStructure``        CAR / ICAR: the nearest-neighbour graph's ``D`` and ``W``
``_RWStructure``           RW1 / RW2: ``D_k``, its integration and the null space
``_PrecisionStructure``    a user's sparse precision
=========================  =====================================================================

With them, the checks of the constructors' arguments that define a structure (lattice, SPDE
order, padding, boundary, a user precision) and its hyperparameters (CAR's ``rho``).  The
linear algebra on a structure is in :mod:`._gmrf_engines`; the model, its calibration and
what is exact on what are described in :mod:`.gmrf`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import fft, linalg, sparse

from .._validation import positive_float, positive_vector
from ..covariance import resolve_range
from ..errors import InvalidParameterError, NotPositiveDefiniteError, ShapeMismatchError
from ..lattice import Lattice
from . import _cholmod
from ._spde import (
    SpectralBasis,
    aligned_pattern,
    axis_eigenvalues,
    axis_laplacian,
    contract_axes,
    dct_squared_basis,
    diagonal_positions,
    grid_sum,
    kron_axis,
)

_ALPHAS = {1: (1, 2), 2: (2,), 3: (2,)}
_BOUNDARIES = ("neumann", "periodic")
_SOLVERS = ("auto", "spectral", "cholmod")


# ================================================================================================
# checks of the constructors' arguments
# ================================================================================================
def _check_lattice(lattice: Any, what: str) -> Lattice:
    if not isinstance(lattice, Lattice):
        raise InvalidParameterError(
            f"lattice={lattice!r} is not a lattice_lgm.Lattice; build one with "
            f"Lattice(shape, spacing=…) before calling GMRFPrior.{what}."
        )
    return lattice


def _choice(name: str, value: Any, allowed: Sequence[str]) -> str:
    if not isinstance(value, str) or value.lower() not in allowed:
        raise InvalidParameterError(
            f"{name}={value!r} is not one of {', '.join(map(repr, allowed))}."
        )
    return value.lower()


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise InvalidParameterError(f"{name}={value!r} must be True or False.")
    return bool(value)


def _alpha(alpha: Any, ndim: int) -> int:
    if ndim == 2 and isinstance(alpha, (int, float, np.integer, np.floating)) and alpha == 1:
        raise InvalidParameterError(
            "alpha=1 in 2-D gives Matérn smoothness nu = alpha - d/2 = 0: the field has no "
            "finite marginal variance (its covariance diverges logarithmically), so sd cannot "
            "be calibrated; use alpha=2 (nu=1)."
        )
    ok = _ALPHAS[ndim]
    if (isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.integer, np.floating))
            or alpha not in ok):
        raise InvalidParameterError(
            f"alpha={alpha!r} is not supported on a {ndim}-D lattice; allowed: "
            f"{', '.join(map(str, ok))} (nu = alpha - d/2 must be > 0 and the SPDE operator "
            "a polynomial of the Laplacian)."
        )
    return int(alpha)


def _padding(pad: Any, ranges: tuple[float, ...], lattice: Lattice) -> tuple[int, ...]:
    if pad is None:
        out = []
        for n, h, r in zip(lattice.shape, lattice.spacing, ranges, strict=True):
            p = math.ceil(r / h - 1e-9)
            # smallest p' >= p with a fast transform length (at most ~12 % more cells).
            for extra in range(max(16, p // 8) + 1):
                m = n + 2 * (p + extra)
                if fft.next_fast_len(m, real=True) == m:
                    p += extra
                    break
            out.append(p)
        return tuple(out)
    arr = np.atleast_1d(np.asarray(pad, dtype=object))
    if arr.ndim != 1 or arr.size not in (1, lattice.ndim):
        raise ShapeMismatchError(
            f"pad={pad!r} must be one cell count or one per axis ({lattice.ndim} axes)."
        )
    vals = []
    for v in np.broadcast_to(arr, (lattice.ndim,)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise InvalidParameterError(
                f"pad={pad!r} must be integer cell counts >= 0 (padding on each side of each "
                "axis); use pad=None for the default of one range."
            )
        vals.append(int(v))
    return tuple(vals)


def _rho(rho: Any) -> float:
    try:
        r = float(rho)
    except (TypeError, ValueError):
        raise InvalidParameterError(f"rho={rho!r} is not a number; CAR needs 0 <= rho < 1.") \
            from None
    if not np.isfinite(r) or r < 0.0 or r >= 1.0:
        raise InvalidParameterError(
            f"rho={rho!r} must satisfy 0 <= rho < 1 for a proper CAR (D − ρW is then positive "
            "definite); rho = 1 is the intrinsic model GMRFPrior.icar."
        )
    return r


def _new_params(model: str, current: dict[str, Any], params: dict[str, Any],
                ndim: int) -> dict[str, Any]:
    """``current`` with ``params`` checked and replaced (``with_params`` of a ``model`` prior)."""
    allowed = set(current) | ({"lengthscale"} if model == "matern" else set())
    unknown = set(params) - allowed
    if model == "precision":
        raise InvalidParameterError(
            "a GMRFPrior built from a precision matrix has no hyperparameters; build a new "
            "one with GMRFPrior.from_precision."
        )
    if unknown:
        raise InvalidParameterError(
            f"with_params got {sorted(unknown)}; the {model} prior's hyperparameters "
            f"are {sorted(allowed)}."
        )
    new = dict(current)
    if "sd" in params:
        new["sd"] = positive_float("sd", params["sd"], "sd is a standard deviation > 0")
    if "tau" in params:
        new["tau"] = positive_float("tau", params["tau"], "tau is the precision > 0")
    if "rho" in params:
        new["rho"] = _rho(params["rho"])
    if "range" in params or "lengthscale" in params:
        new["range"] = positive_vector(
            "range", resolve_range(params.get("range"), params.get("lengthscale")),
            ndim, "ranges are lengths > 0 in coordinate units")
    return new


def _user_precision(precision: Any, n: int) -> sparse.csc_matrix:
    """A user's sparse precision for ``n`` cells, checked, in canonical CSC (from_precision)."""
    if not sparse.issparse(precision):
        raise InvalidParameterError(
            f"precision must be a scipy.sparse matrix, got {type(precision).__name__}; "
            "use scipy.sparse.csc_matrix(Q)."
        )
    if precision.shape != (n, n):
        raise ShapeMismatchError(
            f"precision has shape {precision.shape}; the lattice has {n} cells, so it "
            f"must be ({n}, {n}) in C order of the cells."
        )
    q = sparse.csc_matrix(precision, dtype=np.float64)
    q.sum_duplicates()
    q.sort_indices()
    if not np.all(np.isfinite(q.data)):
        raise InvalidParameterError("precision has non-finite entries.")
    asym = abs(q - q.T).max() if q.nnz else 0.0
    if asym > 1e-12 * max(abs(q).max(), 1e-300):
        raise InvalidParameterError(
            f"precision is not symmetric (max |Q - Qᵀ| = {asym:.3g}); pass (Q + Q.T) / 2 "
            "if the asymmetry is round-off."
        )
    if np.any(q.diagonal() <= 0):
        j = int(np.flatnonzero(q.diagonal() <= 0)[0])
        raise NotPositiveDefiniteError(
            f"precision[{j}, {j}] = {q.diagonal()[j]!r} <= 0: a positive-definite precision "
            "has a positive diagonal; an intrinsic model needs GMRFPrior.icar/rw1/rw2."
        )
    return q


# ================================================================================================
# structures: what with_params keeps (patterns, symbolic analyses, spectra, constants)
# ================================================================================================
class _SparseQ:
    """A fixed CSC pattern for ``Q`` (and ``Q + Π``) with one lazily computed symbolic analysis."""

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, n: int) -> None:
        self.indptr, self.indices, self.n = indptr, indices, n
        self.diag_pos = diagonal_positions(indptr, indices)
        self._symbolic: _cholmod.SymbolicFactor | None = None

    def matrix(self, data: np.ndarray) -> sparse.csc_matrix:
        return sparse.csc_matrix((data, self.indices, self.indptr), shape=(self.n, self.n))

    def scatter(self, a: sparse.csc_matrix) -> np.ndarray:
        """Values of ``a`` (pattern ⊆ this pattern) as a data array on this pattern."""
        a = sparse.csc_matrix(a)
        a.sort_indices()
        if a.nnz == len(self.indices) and np.array_equal(a.indices, self.indices) \
                and np.array_equal(a.indptr, self.indptr):
            return a.data.copy()
        # rare: an exact cancellation dropped an entry; look positions up by (col, row) key
        keys = self.indices.astype(np.int64) + self.n * np.repeat(
            np.arange(self.n, dtype=np.int64), np.diff(self.indptr))
        cols = np.repeat(np.arange(self.n, dtype=np.int64), np.diff(a.indptr))
        out = np.zeros(len(self.indices))
        out[np.searchsorted(keys, a.indices.astype(np.int64) + self.n * cols)] = a.data
        return out

    def symbolic(self, feature: str) -> _cholmod.SymbolicFactor:
        if self._symbolic is None:
            _cholmod.require(feature)
            self._symbolic = _cholmod.SymbolicFactor(self.matrix(np.ones(len(self.indices))))
        return self._symbolic


class _MaternStructure:
    """Padded lattice, spectra and sparse patterns of ``B = 8ν I + Σ_i range_i² L_i``.

    With ``κ = √(8ν)/range`` and isotropic ``range``, ``B = range² (κ² I − Δ_h)``; per-axis
    ranges scale each axis' Laplacian (axis-aligned geometric anisotropy).  ``Q = s B^α``.
    """

    def __init__(self, lattice: Lattice, padding: tuple[int, ...], alpha: int,
                 boundary: str) -> None:
        self.lattice = lattice
        self.padding = padding
        self.state_lattice = lattice.padded(padding) if any(padding) else lattice
        self.alpha = alpha
        self.nu = alpha - lattice.ndim / 2.0
        self.boundary = boundary
        shape, spacing = self.state_lattice.shape, self.state_lattice.spacing
        self.shape = shape
        self.basis = SpectralBasis(shape, boundary)
        last = len(shape) - 1
        self.mu = [axis_eigenvalues(n, h, boundary, half=(boundary == "periodic" and i == last))
                   for i, (n, h) in enumerate(zip(shape, spacing, strict=True))]
        self.mu_full = [axis_eigenvalues(n, h, boundary) for n, h in zip(shape, spacing,
                                                                           strict=True)]
        # weights of each mode in the variance of the calibration cell
        if boundary == "neumann":
            self.centre = tuple(n // 2 for n in shape)
            self.centre_w = [dct_squared_basis(n, c) for n, c in zip(shape, self.centre,
                                                                     strict=True)]
        else:
            self.centre = tuple(0 for _ in shape)
            self.centre_w = [np.full(n, 1.0 / n) for n in shape]
        self._b_parts = None
        self._b_symbolic: _cholmod.SymbolicFactor | None = None
        self._q_sparse: _SparseQ | None = None

    # -- spectra --------------------------------------------------------------------------------
    def b_eigs(self, ranges: tuple[float, ...], *, full: bool) -> np.ndarray:
        mu = self.mu_full if full else self.mu
        return 8.0 * self.nu + grid_sum([r * r * m for r, m in zip(ranges, mu, strict=True)])

    def unit_variance(self, b_full: np.ndarray) -> float:
        """Variance of the calibration cell under ``Q = B^α`` (s = 1), from the spectrum."""
        return float(contract_axes(b_full ** (-self.alpha), self.centre_w))

    # -- sparse ---------------------------------------------------------------------------------
    def _parts(self):
        if self._b_parts is None:
            shape, spacing = self.shape, self.state_lattice.spacing
            n = int(np.prod(shape))
            mats = [sparse.identity(n, format="coo")]
            mats += [kron_axis(axis_laplacian(m, h, self.boundary), i, shape)
                     for i, (m, h) in enumerate(zip(shape, spacing, strict=True))]
            self._b_parts = aligned_pattern(mats)
        return self._b_parts

    def b_matrix(self, ranges: tuple[float, ...]) -> sparse.csc_matrix:
        indptr, indices, datas = self._parts()
        data = 8.0 * self.nu * datas[0]
        for r, d in zip(ranges, datas[1:], strict=True):
            data = data + r * r * d
        n = len(indptr) - 1
        return sparse.csc_matrix((data, indices, indptr), shape=(n, n))

    def b_symbolic(self) -> _cholmod.SymbolicFactor:
        if self._b_symbolic is None:
            self._b_symbolic = _cholmod.SymbolicFactor(self.b_matrix((1.0,) * len(self.shape)))
        return self._b_symbolic

    def q_sparse(self) -> _SparseQ:
        if self._q_sparse is None:
            indptr, indices, _ = self._parts()
            n = len(indptr) - 1
            pat = sparse.csc_matrix((np.ones(len(indices)), indices, indptr), shape=(n, n))
            p = pat
            for _ in range(self.alpha - 1):
                p = sparse.csc_matrix(p @ pat)  # positive entries: no cancellation
            p.sort_indices()
            self._q_sparse = _SparseQ(p.indptr.astype(np.int32), p.indices.astype(np.int32), n)
        return self._q_sparse

    def q_data(self, s: float, b: sparse.csc_matrix) -> tuple[np.ndarray, _SparseQ]:
        sq = self.q_sparse()
        qm = b
        for _ in range(self.alpha - 1):
            qm = qm @ b
        return s * sq.scatter(qm), sq


class _GraphStructure:
    """The lattice's nearest-neighbour graph (4 in 2-D, 2 in 1-D, 6 in 3-D): ``D`` and ``W``."""

    def __init__(self, lattice: Lattice) -> None:
        self.lattice = lattice
        self.shape = lattice.shape
        n = lattice.size
        lap = [kron_axis(axis_laplacian(m, 1.0, "neumann"), i, self.shape)
               for i, m in enumerate(self.shape)]
        total = sparse.csc_matrix(lap[0])
        for m in lap[1:]:
            total = total + m
        deg = total.diagonal()
        w = sparse.diags(deg) - total  # adjacency
        self.indptr, self.indices, (self.d_data, self.w_data) = aligned_pattern(
            [sparse.diags(deg).tocoo(), sparse.coo_matrix(w)])
        self.n = n
        self.sparse = _SparseQ(self.indptr, self.indices, n)
        # spectral (ICAR): D − W is the Neumann graph Laplacian, diagonalised by the DCT-II
        self.basis = SpectralBasis(self.shape, "neumann")
        self.lam = grid_sum([axis_eigenvalues(m, 1.0, "neumann") for m in self.shape])
        self._scale: float | None = None

    def b_data(self, rho: float) -> np.ndarray:
        """Values of ``D − ρ W`` on the fixed pattern."""
        return self.d_data - rho * self.w_data

    def unit_icar_variances(self) -> np.ndarray:
        """``diag((D − W)⁺)`` on the lattice, exactly from the DCT spectrum, O(N Σ n_i)."""
        inv = np.where(self.lam > 0, 1.0 / np.where(self.lam > 0, self.lam, 1.0), 0.0)
        return contract_axes(inv, [dct_squared_basis(m) for m in self.shape])

    def icar_scale(self) -> float:
        """Sørbye & Rue (2014): geometric mean of ``diag((D − W)⁺)``."""
        if self._scale is None:
            self._scale = float(np.exp(np.mean(np.log(self.unit_icar_variances()))))
        return self._scale


class _RWStructure:
    """Random walk of order ``k`` on ``n`` equally spaced cells (Rue & Held 2005, §3.3–3.4)."""

    def __init__(self, n: int, k: int) -> None:
        self.n, self.k = n, k
        t = np.arange(n, dtype=np.float64)
        t = (t - t.mean()) / max(n, 1)
        self.null_basis = np.linalg.qr(np.vander(t, k, increasing=True))[0]  # (n, k)
        # log det(D Dᵀ) from a banded Cholesky of the (n − k) Toeplitz matrix D Dᵀ.
        coef = np.array([(-1) ** (k - j) * math.comb(k, j) for j in range(k + 1)], float)
        acf = np.array([np.dot(coef[: k + 1 - lag], coef[lag:]) for lag in range(k + 1)])
        m = n - k
        ab = np.zeros((k + 1, m))
        for lag in range(k + 1):
            ab[k - lag, lag:] = acf[lag]
        cb = linalg.cholesky_banded(ab, lower=False)
        self.logdet_ddt = 2.0 * float(np.sum(np.log(cb[-1])))
        self.unit_var = self._unit_variances()
        self.scale = float(np.exp(np.mean(np.log(self.unit_var))))

    def integrate(self, u: np.ndarray) -> np.ndarray:
        """``S u``: k cumulative sums with a leading 0 each, so ``D_k S u = u``."""
        for _ in range(self.k):
            u = np.concatenate([np.zeros((len(u), 1)), np.cumsum(u, axis=1)], axis=1)
        return u

    def integrate_t(self, w: np.ndarray) -> np.ndarray:
        """``Sᵀ w`` (adjoint of :meth:`integrate`)."""
        for _ in range(self.k):
            w = np.cumsum(w[:, :0:-1], axis=1)[:, ::-1]
        return w

    def dt(self, v: np.ndarray) -> np.ndarray:
        """``D_kᵀ v`` (``D_1ᵀ v = −diff(pad(v))``)."""
        for _ in range(self.k):
            v = -np.diff(np.pad(v, ((0, 0), (1, 1))), axis=1)
        return v

    def _unit_variances(self) -> np.ndarray:
        # diag(Q⁺) for s = 1: Q⁺ = D⁺ D⁺ᵀ with D⁺ = (I − V Vᵀ) S, so
        # diag = diag(S Sᵀ) − 2 Σ_c V_jc (S SᵀV)_jc + (V G Vᵀ)_jj,  G = (SᵀV)ᵀ (SᵀV).  O(n).
        n, k, v = self.n, self.k, self.null_basis
        j = np.arange(n, dtype=np.float64)
        sst = j if k == 1 else (j - 1) * j * (2 * j - 1) / 6.0  # Σ_m S_jm²
        stv = self.integrate_t(v.T)  # (k, n − k) = (Sᵀ V)ᵀ
        s_stv = self.integrate(stv).T  # (n, k)
        gmat = stv @ stv.T
        return sst - 2.0 * np.sum(v * s_stv, axis=1) + np.einsum("jc,cd,jd->j", v, gmat, v)


class _PrecisionStructure:
    """A user-supplied sparse SPD precision on a lattice."""

    def __init__(self, q: sparse.csc_matrix, lattice: Lattice) -> None:
        self.lattice = lattice
        self.shape = lattice.shape
        self.sparse = _SparseQ(q.indptr.astype(np.int32), q.indices.astype(np.int32), q.shape[0])
        self.data = q.data.copy()
