"""Stencils and spectra of finite-difference Laplacians on rectangles (helpers for the GMRFs).

Notation: on an axis of ``n`` cells of size ``h``, ``L = -Δ_h`` is the (positive semi-definite)
second-difference matrix.

* Neumann (reflecting) boundary: ghost cells mirror the edge cells, so ``L`` has rows
  ``(1, -1) / h²`` at the ends and ``(-1, 2, -1) / h²`` inside — the path-graph Laplacian.  It is
  diagonalised by the orthonormal DCT-II: ``L = Uᵀ diag(μ) U`` with
  ``μ_k = 4 sin²(π k / (2 n)) / h²`` and ``U[k, j] = c_k cos(π k (j + ½) / n)``,
  ``c_0 = √(1/n)``, ``c_k = √(2/n)`` (Strang 1999, "The discrete cosine transform", SIAM Rev.).
* Periodic boundary: the cycle-graph Laplacian, diagonalised by the unitary DFT with
  ``μ_k = 4 sin²(π k / n) / h²``.

On a d-dimensional rectangle ``-Δ_h = Σ_i I ⊗ … ⊗ L_i ⊗ … ⊗ I`` (Kronecker sum, C order), whose
eigenvalues are ``Σ_i μ_{i, k_i}`` on the tensor-product basis.
"""

from __future__ import annotations

import numpy as np
from scipy import fft, sparse

__all__ = [
    "SpectralBasis",
    "aligned_pattern",
    "axis_eigenvalues",
    "axis_laplacian",
    "contract_axes",
    "dct_squared_basis",
    "diagonal_positions",
    "grid_sum",
    "kron_axis",
]

FFT_WORKERS = 2


def axis_laplacian(n: int, h: float, boundary: str) -> sparse.coo_matrix:
    """``-Δ_h`` on one axis as COO (duplicates summed on conversion), shape ``(n, n)``."""
    j = np.arange(n)
    if boundary == "periodic":
        rows = np.concatenate([j, j, j])
        cols = np.concatenate([j, (j + 1) % n, (j - 1) % n])
        vals = np.concatenate([np.full(n, 2.0), -np.ones(n), -np.ones(n)])
    else:  # neumann: the path graph
        deg = np.full(n, 2.0)
        deg[0] -= 1.0
        deg[-1] -= 1.0
        rows = np.concatenate([j, j[:-1], j[1:]])
        cols = np.concatenate([j, j[1:], j[:-1]])
        vals = np.concatenate([deg, -np.ones(n - 1), -np.ones(n - 1)])
    return sparse.coo_matrix((vals / h**2, (rows, cols)), shape=(n, n))


def kron_axis(mat: sparse.spmatrix, axis: int, shape: tuple[int, ...]) -> sparse.coo_matrix:
    """``I ⊗ … ⊗ mat ⊗ … ⊗ I`` acting on axis ``axis`` of a C-ordered array of ``shape``."""
    left = int(np.prod(shape[:axis]))
    right = int(np.prod(shape[axis + 1:]))
    out = sparse.kron(sparse.identity(left, format="coo"), mat, format="coo")
    return sparse.kron(out, sparse.identity(right, format="coo"), format="coo")


def axis_eigenvalues(n: int, h: float, boundary: str, *, half: bool = False) -> np.ndarray:
    """Eigenvalues of ``-Δ_h`` on one axis, in the order of the transform's output.

    ``half=True`` (periodic only) gives the ``n // 2 + 1`` frequencies of a real FFT.
    """
    if boundary == "periodic":
        k = np.arange(n // 2 + 1 if half else n)
        return 4.0 * np.sin(np.pi * k / n) ** 2 / h**2
    k = np.arange(n)
    return 4.0 * np.sin(np.pi * k / (2.0 * n)) ** 2 / h**2


def grid_sum(vectors: list[np.ndarray]) -> np.ndarray:
    """``out[k_0, …, k_{d-1}] = Σ_i vectors[i][k_i]`` (broadcast outer sum)."""
    d = len(vectors)
    out = np.zeros((), dtype=np.float64)
    for i, v in enumerate(vectors):
        shp = [1] * d
        shp[i] = -1
        out = out + np.asarray(v, dtype=np.float64).reshape(shp)
    return out


def dct_squared_basis(n: int, rows: slice | int | None = None) -> np.ndarray:
    """``Φ²[j, k] = U[k, j]²`` for the orthonormal DCT-II basis ``U`` of length ``n``.

    Row ``j`` holds the weights with which mode ``k`` contributes to the variance of cell ``j``:
    for ``Q = Uᵀ diag(q) U``, ``(Q⁻¹)_{jj} = Σ_k Φ²[j, k] / q_k``.  ``rows`` (a slice or one
    index) builds only those rows: shape ``(len(rows), n)`` or ``(n,)``.
    """
    j = np.arange(n)[slice(None) if rows is None else rows]
    k = np.arange(n)
    c2 = np.where(k == 0, 1.0 / n, 2.0 / n)
    return c2 * np.cos(np.pi * k * (np.asarray(j, dtype=np.float64)[..., None] + 0.5) / n) ** 2


def contract_axes(grid: np.ndarray, mats: list[np.ndarray]) -> np.ndarray:
    """Apply ``mats[i]`` (shape ``(m_i, n_i)``) along axis ``i`` of ``grid`` (shape ``(n_0, …)``).

    With ``mats[i] = Φ²_i`` restricted to some rows this gives marginal variances
    ``Σ_k Π_i Φ²_i[j_i, k_i] · grid[k]`` in O(N Σ m_i) flops (BLAS), without forming the
    N × N operator.  A 1-D ``mats[i]`` contracts the axis away (a single cell).
    """
    out = grid
    for i in reversed(range(len(mats))):
        m = np.asarray(mats[i])
        out = np.moveaxis(np.tensordot(m, out, axes=([m.ndim - 1], [i])), 0, i) if m.ndim == 2 \
            else np.tensordot(out, m, axes=([i], [0]))
    return out


def aligned_pattern(
    mats: list[sparse.spmatrix],
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """Union sparsity pattern of square matrices and each one's values aligned to it.

    Returns ``(indptr, indices, datas)`` of a canonical CSC pattern: ``Σ_i a_i * datas[i]`` on
    that pattern is ``Σ_i a_i * mats[i]`` with *every* pattern entry kept (explicit zeros too),
    so CHOLMOD sees one fixed pattern whatever the coefficients (needed to refactor without
    re-analysing).
    """
    comps = []
    for m in mats:
        c = sparse.csc_matrix(m, dtype=np.float64)
        c.sum_duplicates()
        c.eliminate_zeros()
        c.sort_indices()
        comps.append(c)
    union = abs(comps[0])
    for c in comps[1:]:
        union = union + abs(c)  # positive values: the sum cannot cancel an entry
    union = sparse.csc_matrix(union)
    union.sort_indices()
    # position of each component entry in the union pattern: multiply a copy of the union
    # holding 1-based positions by the component's 0/1 pattern (canonical order is kept).
    where = union.copy()
    where.data = np.arange(1, union.nnz + 1, dtype=np.float64)
    datas = []
    for c in comps:
        pos = sparse.csc_matrix(where.multiply(c != 0))
        pos.sort_indices()
        d = np.zeros(union.nnz)
        d[pos.data.astype(np.int64) - 1] = c.data
        datas.append(d)
    return union.indptr.astype(np.int32), union.indices.astype(np.int32), datas


def diagonal_positions(indptr: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Positions of the diagonal entries in a canonical CSC pattern (each must be present)."""
    n = len(indptr) - 1
    cols = np.repeat(np.arange(n), np.diff(indptr))
    pos = np.flatnonzero(indices == cols)
    if len(pos) != n:  # pragma: no cover - internal invariant
        raise ValueError("pattern lacks diagonal entries")
    return pos


class SpectralBasis:
    """Orthonormal transforms that diagonalise ``-Δ_h`` on a rectangle of ``shape``.

    ``forward`` maps a state ``(n_chains, *shape)`` to coefficients: the orthonormal DCT-II
    (Neumann; real, same shape) or the unitary real FFT (periodic; complex, last axis
    ``n // 2 + 1``).  ``inverse`` is its adjoint/inverse.  scipy.fft (pocketfft) is used with
    ``FFT_WORKERS`` threads: on this machine it is as fast as planned pyFFTW for DCTs (measured
    1024²: ≈ 10 ms each), needs no plans and is thread-safe.
    """

    def __init__(self, shape: tuple[int, ...], boundary: str) -> None:
        self.shape = tuple(shape)
        self.boundary = boundary
        self.axes = tuple(range(1, len(shape) + 1))
        self.coef_shape = (self.shape if boundary == "neumann"
                           else (*self.shape[:-1], self.shape[-1] // 2 + 1))

    def forward(self, x: np.ndarray) -> np.ndarray:
        """Coefficients ``U x`` per chain."""
        if self.boundary == "neumann":
            return fft.dctn(x, type=2, norm="ortho", axes=self.axes, workers=FFT_WORKERS)
        return fft.rfftn(x, norm="ortho", axes=self.axes, workers=FFT_WORKERS)

    def inverse(self, c: np.ndarray, *, overwrite: bool = False) -> np.ndarray:
        """States ``Uᵀ c`` per chain (``overwrite=True`` lets the transform reuse ``c``)."""
        if self.boundary == "neumann":
            return fft.idctn(c, type=2, norm="ortho", axes=self.axes, workers=FFT_WORKERS,
                             overwrite_x=overwrite)
        return fft.irfftn(c, s=self.shape, norm="ortho", axes=self.axes, workers=FFT_WORKERS,
                          overwrite_x=overwrite)

    def fft_full(self, w: np.ndarray) -> np.ndarray:
        """Unitary complex FFT over the lattice axes (periodic sampling, two fields at once)."""
        return fft.fftn(w, norm="ortho", axes=self.axes, workers=FFT_WORKERS, overwrite_x=True)
