"""GMRFPrior: Gaussian Markov random fields with sparse precision ``Q`` on a lattice.

Covariance ``K = Q⁻¹`` (a generalised inverse for intrinsic models).  Models:

=================  ===============================================  ===============================
constructor        precision Q                                      engine
=================  ===============================================  ===============================
``matern``         ``τ² V (κ² I − Δ_h)^α`` (Lindgren, Rue &         spectral (DCT-II / real FFT),
                   Lindström 2011), calibrated sd, padded           or CHOLMOD (``solver=``)
``car``            ``τ (D − ρ W)``, ``0 ≤ ρ < 1`` (Besag 1974)      CHOLMOD
``icar``           ``τ (D − W)``, sum-to-zero, rank N − 1           spectral (DCT-II)
``rw1`` / ``rw2``  ``τ D_kᵀ D_k`` (Rue & Held 2005, §3.3–3.4)       increments (O(N) cumsums)
``from_precision`` any sparse SPD matrix                            CHOLMOD
=================  ===============================================  ===============================

What is exact on what
---------------------
*Proper models* (``matern``, ``car``, ``from_precision``): every operation is exact for
``N(0, Q⁻¹)`` on the state — the padded lattice for ``matern`` (``exact_on = "padded
lattice"``; padding cells are latent variables without likelihood, so a posterior on the state
is exact for the window) and the lattice otherwise.  ``sample`` returns the window.

*Matérn-SPDE.*  The SPDE ``(κ² − Δ)^{α/2} (τ x) = W`` (Lindgren et al. 2011, eq. 2) is
discretised on the regular lattice with the finite-difference Laplacian and lumped mass
(cell volume ``V``), giving ``Q = τ² V (κ² I − Δ_h)^α`` with per-axis spacing in ``Δ_h`` and
``κ = √(8ν) / range``, ``ν = α − d/2`` (INLA's practical range; the same ``range`` as
``covariance.Matern(nu=ν)``).  Allowed: α = 2 in 2-D (ν = 1), α ∈ {1, 2} in 1-D (ν = ½, 3/2),
α = 2 in 3-D (ν = ½).  Per-axis ranges give axis-aligned geometric anisotropy: the operator is
``8ν − Σ_i range_i² ∂_i²`` up to a constant.  The discretisation is an approximation of the
continuous Matérn field (good when the range spans many cells; DESIGN §4 warns below ~5);
everything below is exact for the discrete model.

*Calibration ("exact" variance).*  ``τ`` is not the continuum formula: it is set so that the
discrete model's marginal variance is exactly ``sd²`` (to round-off) at a stated cell:

* periodic: on the torus every cell has the same variance ``(1/N) Σ_k 1/q_k``; it is ``sd²``
  everywhere;
* Neumann: at the centre cell of the padded grid (index ``n_i // 2`` on each axis; for even
  ``n_i`` its mirror image has the same variance), from the DCT-II spectrum:
  ``Var(x_c) = Σ_k Π_i U_i[k_i, c_i]² / q_k``.  Elsewhere the variance is not constant:
  reflection at the boundary raises it by about the correlation at twice the distance to the
  boundary (×2 at an edge, ≈ ×4 at a corner), so with the default padding of one range the
  window's edge cells are ≈ 1 % and corners ≈ 2 % above ``sd²`` for α = 2 in 2-D.
  :meth:`GMRFPrior.marginal_variance` gives the exact value of every window cell.

*Padding* (``matern``).  Default: ``ceil(range_i / h_i)`` cells on each side of axis ``i`` (at
least one practical range), rounded up so that the padded size is a fast FFT length.  The
padding is fixed when the prior is built (``with_params`` keeps it): size it for the largest
range you will sample, or pass ``pad=`` (``pad=0`` allowed).

*Intrinsic models* (``icar``, ``rw1``, ``rw2``; ``Q`` singular with null space spanned by the
constraint rows ``A``, :attr:`GMRFPrior.constraints`).  With ``constrained=True`` (default) the
prior is the proper Gaussian on the subspace ``{x : A x = 0}`` with covariance ``K = Q⁺``
(Rue & Held 2005, §3.2 and eq. 3.18): ``rank = N − r``; ``log_det`` is ``−Σ log`` of the nonzero
eigenvalues of ``Q`` (the generalised determinant); ``solve(b) = Q b = K⁺ b``; ``quad_form(x) =
xᵀ Q x``; ``logpdf`` is the density with respect to Lebesgue measure on the subspace (for ``x``
off the subspace it is that of its projection).  ``colorize`` maps onto the subspace, so draws
satisfy ``A x = 0`` to round-off; ``whiten ∘ colorize`` is the identity on white vectors
orthogonal to the null modes (ICAR: the zero-frequency DCT coefficient is ignored; RW: the white
space is the ``N − k`` increments, where it is exactly the identity).  ``scale=True`` applies
Sørbye & Rue (2014): ``Q`` is scaled so that the geometric mean of the constrained marginal
variances ``diag(Q⁺)`` is ``sd²`` (``sd = 1``: their scaled model).  With
``constrained=False`` only ``solve`` and ``quad_form`` are defined; operations that need
``|Q|`` or ``Q⁻¹`` raise :class:`~lattice_lgm.errors.IntrinsicPriorError`.

*Surrogate data* (Murray & Adams 2010, §3; ``Π`` diagonal): a precision constant over the state
keeps the spectral engine diagonal (no factorisation, exact); site-specific ``Π`` factors
``Q + Π`` with CHOLMOD (symbolic analysis done once per structure), with
``|K + S| = |S| |Q + Π| / |Q|`` and Woodbury for the marginal (proper models only).

Notation (local variables): ``B`` the sparse "root" operator with ``Q = s·B^m`` (``m = α`` for
Matérn, 1 otherwise), ``s`` the precision scale, ``q`` eigenvalues of ``Q`` on the spectral
coefficient grid, ``Π`` site precisions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cached_property
from typing import Any

import numpy as np
from scipy import fft, linalg, sparse

from .._validation import positive_float, positive_vector
from ..covariance import resolve_range
from ..errors import (
    IntrinsicPriorError,
    InvalidParameterError,
    NotPositiveDefiniteError,
    ShapeMismatchError,
    UnsupportedOperationError,
)
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
from .base import LOG_2PI, Capabilities, GaussianPrior, SurrogateConditional

__all__ = ["GMRFPrior"]

_ALPHAS = {1: (1, 2), 2: (2,), 3: (2,)}
_BOUNDARIES = ("neumann", "periodic")
_SOLVERS = ("auto", "spectral", "cholmod")
#: largest state for which marginal_variance of CAR / user precisions inverts Q densely
DENSE_VARIANCE_MAX = 4096


# ================================================================================================
# validation helpers
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


def _intrinsic_error(model: str, op: str) -> IntrinsicPriorError:
    return IntrinsicPriorError(
        f"{op} needs |Q| or Q⁻¹, but this {model} prior is intrinsic (Q is singular) and was "
        f"built with constrained=False; build it with constrained=True (the standard "
        f"sum-to-zero{'/linear-trend' if model == 'rw2' else ''} constraints, with Sørbye–Rue "
        "scaling) or use a proper model (GMRFPrior.car with rho < 1, or GMRFPrior.matern)."
    )


def _flat(a: np.ndarray) -> np.ndarray:
    return a.reshape(len(a), -1)


# ================================================================================================
# surrogate with site-specific precision (CHOLMOD on Q + Π)
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


def _site_surrogate(
    q_data: np.ndarray, logdet_q: float, sq: _SparseQ, g: np.ndarray, prec: np.ndarray
) -> SurrogateConditional:
    # Posterior precision Q + Π; mean (Q + Π)⁻¹ Π g; with b = Π g (Rue & Held 2005, §2.3),
    #   log N(g_O; 0, K_OO + S_O) = −½ n_O log 2π + ½ Σ_O log π + ½ log|Q| − ½ log|Q + Π|
    #                               − ½ (gᵀ Π g − bᵀ (Q + Π)⁻¹ b)
    # (|K + S| = |S| |Q + Π| / |Q| and Woodbury, taken over the observed sites O).
    pi = prec.ravel()
    data = q_data.copy()
    data[sq.diag_pos] += pi
    a = sq.matrix(data)
    fac = sq.symbolic("a surrogate with site-specific precision").factor(a, "Q + Π")
    shape = g.shape
    gt = _flat(g).T  # (N, c)
    b = pi[:, None] * gt
    mu = fac.solve(b)
    obs = pi > 0
    quad = np.sum(gt * b, axis=0) - np.sum(b * mu, axis=0)
    logm = (-0.5 * int(obs.sum()) * LOG_2PI + 0.5 * float(np.sum(np.log(pi[obs])))
            + 0.5 * logdet_q - 0.5 * fac.logdet() - 0.5 * quad)

    def colorize(eta: np.ndarray) -> np.ndarray:
        e = np.asarray(eta, dtype=np.float64)
        return fac.solve_lt_pt(_flat(e).T).T.reshape(e.shape)

    def whiten(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        return fac.solve_l_p(a @ _flat(x).T).T.reshape(x.shape)

    return SurrogateConditional(mean=mu.T.reshape(shape), logmarginal=np.asarray(logm),
                                colorize=colorize, whiten=whiten)


# ================================================================================================
# engines: one per way of doing the linear algebra
# ================================================================================================
class _SpectralEngine:
    """``Q = Uᵀ diag(q) U`` with ``U`` an orthonormal DCT-II / real-FFT basis: O(N log N) all."""

    def __init__(self, basis: SpectralBasis, q: np.ndarray, q_full: np.ndarray,
                 sparse_q: Any = None) -> None:
        # q: eigenvalues of Q on the coefficient grid (0 on null modes); q_full: on the full
        # frequency grid (= q for the DCT).  sparse_q: callable -> (data, _SparseQ) or None.
        self.basis = basis
        self.q = q
        self.q_full = q_full
        self.null = q == 0.0
        self.has_null = bool(self.null.any())
        nz = q_full[q_full > 0]
        self.logdet_q = float(np.sum(np.log(nz)))
        self.rank = int(nz.size)
        self.white_shape = basis.shape
        self._sparse_q = sparse_q

    def _inv_sqrt(self, q: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.where(q > 0, 1.0 / np.sqrt(np.where(q > 0, q, 1.0)), 0.0)

    @cached_property
    def inv_sqrt_q(self) -> np.ndarray:
        return self._inv_sqrt(self.q)

    def colorize(self, z: np.ndarray) -> np.ndarray:
        # W = Uᵀ diag(q^-½) (DCT) or the symmetric root F* diag(q^-½) F (periodic).
        if self.basis.boundary == "neumann":
            return self.basis.inverse(z * self.inv_sqrt_q, overwrite=True)
        return self.basis.inverse(self.basis.forward(z) * self.inv_sqrt_q, overwrite=True)

    @cached_property
    def inv_sqrt_q_full(self) -> np.ndarray:
        return self._inv_sqrt(self.q_full)

    @cached_property
    def sqrt_q(self) -> np.ndarray:
        return np.sqrt(self.q)

    def whiten(self, x: np.ndarray) -> np.ndarray:
        sq = self.sqrt_q
        if self.basis.boundary == "neumann":
            return self.basis.forward(x) * sq
        return self.basis.inverse(self.basis.forward(x) * sq, overwrite=True)

    def solve(self, b: np.ndarray) -> np.ndarray:
        return self.basis.inverse(self.basis.forward(b) * self.q, overwrite=True)

    def sample(self, rng: np.random.Generator, n_chains: int) -> np.ndarray:
        if self.basis.boundary == "neumann":
            z = rng.standard_normal((n_chains, *self.basis.shape))
            z *= self.inv_sqrt_q
            return self.basis.inverse(z, overwrite=True)
        # Periodic: y = F (q^-½ ⊙ ξ) with ξ complex white noise; Re y and Im y are two
        # independent N(0, Q⁻¹) fields (one complex FFT per two fields; DESIGN §4).
        m = (n_chains + 1) // 2
        w = rng.standard_normal((m, *self.basis.shape, 2)).view(np.complex128)[..., 0]
        w *= self.inv_sqrt_q_full
        y = self.basis.fft_full(w)
        out = np.concatenate([y.real, y.imag], axis=0)[:n_chains]
        return np.ascontiguousarray(out)

    def surrogate(self, g: np.ndarray, prec: np.ndarray, model: str) -> SurrogateConditional:
        p0 = float(prec.flat[0])
        if np.all(prec == p0):
            return self._scalar_surrogate(g, p0)
        if self.has_null:
            raise IntrinsicPriorError(
                f"a surrogate with site-specific precision on the intrinsic {model} prior needs "
                "|Q|, which is zero; use a precision constant over the state (exact, spectral) "
                "or a proper model (GMRFPrior.car with rho < 1)."
            )
        data, sq = self._sparse_q()
        return _site_surrogate(data, self.logdet_q, sq, g, prec)

    def _scalar_surrogate(self, g: np.ndarray, pi: float) -> SurrogateConditional:
        b = self.basis
        q, null = self.q, self.null
        p = q + pi
        # Per mode: posterior precision p = q + π (null modes are fixed at 0 by the constraint);
        # Var(ĝ_k) = 1/q_k + 1/π, i.e. precision of ĝ_k is qπ/p (π on null modes).
        gain = np.where(null, 0.0, pi / p)
        prec_g = np.where(null, pi, q * pi / p)
        isp = np.where(null, 0.0, 1.0 / np.sqrt(p))
        sp = np.sqrt(p)
        gh = b.forward(g)
        mean = b.inverse(gh * gain)
        quad = np.einsum("ij,ij->i", _flat(g), _flat(b.inverse(gh * prec_g, overwrite=True)))
        qf = self.q_full
        qs = np.where(qf > 0, qf, 1.0)
        logdet_prec_g = float(np.sum(np.where(qf > 0, np.log(qs * pi) - np.log(qs + pi),
                                              math.log(pi))))
        n = int(np.prod(b.shape))
        logm = -0.5 * quad + 0.5 * logdet_prec_g - 0.5 * n * LOG_2PI

        if b.boundary == "neumann":
            def colorize(eta):
                return b.inverse(np.asarray(eta, float) * isp, overwrite=True)

            def whiten(x):
                return b.forward(np.asarray(x, float)) * sp
        else:
            def colorize(eta):
                return b.inverse(b.forward(np.asarray(eta, float)) * isp, overwrite=True)

            def whiten(x):
                return b.inverse(b.forward(np.asarray(x, float)) * sp, overwrite=True)

        return SurrogateConditional(mean=mean, logmarginal=np.asarray(logm),
                                    colorize=colorize, whiten=whiten)


class _CholmodEngine:
    """``Q = s · B^m`` with a CHOLMOD factor ``P B Pᵀ = L Lᵀ`` (m ∈ {1, 2}).

    ``m = 1``: ``W = Pᵀ L⁻ᵀ / √s`` (Rue & Held 2005, Alg. 2.4).  ``m = 2`` (Matérn α = 2): the
    symmetric root ``W = B⁻¹ / √s`` — literally solving the discretised SPDE
    ``B x = s^-½ z`` — so only the sparse ``B`` (5-point in 2-D) is factored, not the 13-point
    ``Q``.
    """

    def __init__(self, b: sparse.csc_matrix, m: int, s: float,
                 factor: _cholmod.NumericFactor, sparse_q: Any, symbolic: Any) -> None:
        self.b, self.m, self.s, self.factor = b, m, s, factor
        self.symbolic = symbolic  # the shared symbolic analysis of B (tests check reuse)
        self.white_shape = None  # the state shape (set by the prior)
        n = b.shape[0]
        self.logdet_q = n * math.log(s) + m * factor.logdet()
        self.rank = n
        self._sparse_q = sparse_q

    def colorize(self, z: np.ndarray) -> np.ndarray:
        zt = _flat(z).T
        x = self.factor.solve(zt) if self.m == 2 else self.factor.solve_lt_pt(zt)
        return (x / math.sqrt(self.s)).T.reshape(z.shape)

    def whiten(self, x: np.ndarray) -> np.ndarray:
        bx = self.b @ _flat(x).T
        z = bx if self.m == 2 else self.factor.solve_l_p(bx)
        return (z * math.sqrt(self.s)).T.reshape(x.shape)

    def solve(self, b: np.ndarray) -> np.ndarray:
        y = _flat(b).T
        for _ in range(self.m):
            y = self.b @ y
        return (self.s * y).T.reshape(b.shape)

    def sample(self, rng: np.random.Generator, n_chains: int, shape: tuple[int, ...]):
        return self.colorize(rng.standard_normal((n_chains, *shape)))

    def surrogate(self, g: np.ndarray, prec: np.ndarray, model: str) -> SurrogateConditional:
        data, sq = self._sparse_q()
        return _site_surrogate(data, self.logdet_q, sq, g, prec)


class _IncrementEngine:
    """RW1/RW2 on the constrained subspace through their ``N − k`` white increments.

    ``Q = s D_kᵀ D_k`` (``D_k`` the k-th difference, (N − k) × N).  ``W = D_k⁺ / √s`` where the
    Moore–Penrose inverse is the k-fold cumulative sum followed by the orthogonal projection on
    ``{A x = 0}`` (the unique right inverse of ``D_k`` with columns in the row space), so
    ``W Wᵀ = Q⁺`` and ``whiten = √s D_k`` is its exact inverse on the subspace.
    """

    def __init__(self, struct: _RWStructure, s: float) -> None:
        self.st, self.s = struct, s
        n, k = struct.n, struct.k
        self.white_shape = (n - k,)
        self.rank = n - k
        self.logdet_q = (n - k) * math.log(s) + struct.logdet_ddt

    def colorize(self, z: np.ndarray) -> np.ndarray:
        x = self.st.integrate(z) / math.sqrt(self.s)
        v = self.st.null_basis
        return x - (x @ v) @ v.T

    def whiten(self, x: np.ndarray) -> np.ndarray:
        return math.sqrt(self.s) * np.diff(x, n=self.st.k, axis=1)

    def solve(self, b: np.ndarray) -> np.ndarray:
        return self.s * self.st.dt(np.diff(b, n=self.st.k, axis=1))

    def sample(self, rng: np.random.Generator, n_chains: int) -> np.ndarray:
        return self.colorize(rng.standard_normal((n_chains, *self.white_shape)))

    def surrogate(self, g: np.ndarray, prec: np.ndarray, model: str) -> SurrogateConditional:
        raise IntrinsicPriorError(
            f"surrogate-data operations on the intrinsic {model} prior need |Q| and Q⁻¹, which "
            "do not exist; use prior-whitened hyperparameter moves for its sd, or a proper "
            "model (GMRFPrior.car with rho < 1, GMRFPrior.matern)."
        )


# ================================================================================================
# structures: what with_params keeps (patterns, symbolic analyses, spectra, constants)
# ================================================================================================
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


# ================================================================================================
# the prior
# ================================================================================================
class GMRFPrior(GaussianPrior):
    """Gaussian Markov random field ``N(0, Q⁻¹)`` on a (padded) lattice.

    Build with :meth:`matern`, :meth:`car`, :meth:`icar`, :meth:`rw1`, :meth:`rw2` or
    :meth:`from_precision`; see the module docstring for what is exact on what.

    Attributes
    ----------
    lattice : Lattice
        The user's lattice; fields from :meth:`sample` have ``shape = lattice.shape``.
    state_lattice : Lattice
        The lattice of the state (padded for ``matern``), ``state_shape``.
    padding : tuple of int
        Cells of padding on each side of each axis (zeros unless ``matern``).
    model : str
        ``"matern"``, ``"car"``, ``"icar"``, ``"rw1"``, ``"rw2"`` or ``"precision"``.
    solver : str
        ``"spectral"``, ``"cholmod"`` or ``"increments"``.
    intrinsic, constrained : bool

    Examples
    --------
    >>> from lattice_lgm import Lattice
    >>> lat = Lattice((64, 96), spacing=10.0, units="m")
    >>> g = GMRFPrior.matern(lat, sd=1.0, range=200.0)
    >>> g.padding, g.state_shape  # ≥ 20 cells (one range), rounded to fast FFT lengths
    ((22, 24), (108, 144))
    >>> g.sample(np.random.default_rng(0), 2).shape
    (2, 64, 96)
    """

    def __init__(self, *_args: Any, **_kw: Any) -> None:
        raise TypeError(
            "build a GMRFPrior with GMRFPrior.matern, .car, .icar, .rw1, .rw2 or .from_precision"
        )

    @classmethod
    def _make(cls, model: str, struct: Any, params: dict[str, Any], solver: str, *,
              lattice: Lattice, state_lattice: Lattice, padding: tuple[int, ...],
              intrinsic: bool = False, constrained: bool = True, scale: bool = False,
              extra: dict[str, Any] | None = None,
              fixed: dict[str, Any] | None = None) -> GMRFPrior:
        obj = object.__new__(cls)
        obj.model = model
        obj._struct = struct
        obj._params = dict(params)
        obj.solver = solver
        obj.lattice = lattice
        obj.state_lattice = state_lattice
        obj.padding = padding
        obj.intrinsic = intrinsic
        obj.constrained = constrained
        obj.scaled = scale
        obj._extra = dict(extra or {})
        obj._fixed = dict(fixed or {})  # constructor arguments that are not hyperparameters
        obj.shape = lattice.shape
        obj.state_shape = state_lattice.shape
        obj.exact_on = "padded lattice" if any(padding) else "lattice"
        obj._engine = obj._build_engine()
        obj.white_shape = tuple(obj._engine.white_shape or obj.state_shape)
        return obj

    # -- constructors ---------------------------------------------------------------------------
    @classmethod
    def matern(
        cls,
        lattice: Lattice,
        *,
        sd: float,
        range: float | Sequence[float] | None = None,
        lengthscale: float | Sequence[float] | None = None,
        alpha: int = 2,
        boundary: str = "neumann",
        pad: int | Sequence[int] | None = None,
        solver: str = "auto",
    ) -> GMRFPrior:
        """Matérn-SPDE prior ``Q = τ² V (κ² I − Δ_h)^α``, calibrated to marginal sd ``sd``.

        Parameters
        ----------
        lattice : Lattice
            The window; the state is this lattice padded by ``pad`` cells per side.
        sd : float
            Marginal standard deviation (exact at the calibration cell, see module docstring).
        range, lengthscale : float or sequence of float
            Practical range ``√(8ν)/κ`` (one, or one per axis), or ``lengthscale = range/2``.
        alpha : int
            SPDE order: 2 in 2-D and 3-D, 1 or 2 in 1-D (``ν = α − d/2``).
        boundary : {"neumann", "periodic"}
            Boundary condition of the finite-difference Laplacian on the padded rectangle.
        pad : int or sequence of int, optional
            Padding cells on each side of each axis; default ``ceil(range_i / h_i)`` rounded up
            to a fast FFT length.
        solver : {"auto", "spectral", "cholmod"}
            ``auto``/``spectral``: DCT-II (Neumann) or real FFT (periodic), O(N log N), no
            factorisation.  ``cholmod``: sparse Cholesky of ``κ² I − Δ_h`` (needs
            scikit-sparse).

        Returns
        -------
        GMRFPrior
            ``shape = lattice.shape``, ``state_shape`` the padded shape.

        Raises
        ------
        InvalidParameterError
            Non-positive/NaN ``sd`` or ``range``; ``alpha`` not allowed for the dimension;
            unknown ``boundary``/``solver``; bad ``pad``.
        BackendUnavailableError
            ``solver="cholmod"`` without scikit-sparse.
        """
        lattice = _check_lattice(lattice, "matern")
        d = lattice.ndim
        alpha = _alpha(alpha, d)
        sd = positive_float("sd", sd, "sd is the marginal standard deviation > 0")
        ranges = positive_vector("range", resolve_range(range, lengthscale), d,
                                 "ranges are lengths > 0 in coordinate units")
        boundary = _choice("boundary", boundary, _BOUNDARIES)
        solver = _choice("solver", solver, _SOLVERS)
        solver = "spectral" if solver == "auto" else solver
        if solver == "cholmod":
            _cholmod.require("GMRFPrior.matern(solver='cholmod')")
        padding = _padding(pad, ranges, lattice)
        cells = math.prod(n + 2 * q for n, q in zip(lattice.shape, padding, strict=True))
        if cells >= 2**31:
            raise InvalidParameterError(
                f"the padded state would have {cells} cells (padding {padding} for "
                f"range={_fmt(ranges)}); pass a smaller pad= (e.g. pad=0) or a shorter range."
            )
        struct = _MaternStructure(lattice, padding, alpha, boundary)
        return cls._make("matern", struct, {"sd": sd, "range": ranges}, solver,
                         lattice=lattice, state_lattice=struct.state_lattice, padding=padding,
                         extra={"alpha": alpha, "boundary": boundary},
                         fixed={"alpha": alpha, "boundary": boundary, "pad": padding,
                                "solver": solver})

    @classmethod
    def car(cls, lattice: Lattice, *, rho: float, tau: float = 1.0) -> GMRFPrior:
        """Proper CAR prior ``Q = τ (D − ρ W)`` on the lattice's nearest-neighbour graph.

        ``D`` is the diagonal of neighbour counts and ``W`` the adjacency (4 neighbours in 2-D,
        2 in 1-D); Besag (1974), Rue & Held (2005, §1.3).  The marginal variance depends on
        ``ρ`` and on the position (edges, corners), so the model is parametrised by the
        conditional precision ``τ``.  Solved with CHOLMOD (``D`` is not constant at the edges,
        so no spectral path); needs scikit-sparse.

        Parameters
        ----------
        lattice : Lattice
        rho : float
            Spatial dependence, ``0 <= rho < 1`` (``rho = 1`` is :meth:`icar`).
        tau : float
            Conditional precision ``> 0``.

        Raises
        ------
        InvalidParameterError
            ``rho`` outside ``[0, 1)`` or ``tau`` not finite and > 0; a single-cell lattice.
        BackendUnavailableError
            scikit-sparse is not installed.
        """
        lattice = _check_lattice(lattice, "car")
        tau = positive_float("tau", tau, "tau is the conditional precision > 0")
        rho = _rho(rho)
        _cholmod.require("GMRFPrior.car")
        if lattice.size < 2:
            raise InvalidParameterError(
                f"lattice={lattice!r} has one cell: a CAR model needs neighbours."
            )
        struct = _GraphStructure(lattice)
        return cls._make("car", struct, {"tau": tau, "rho": rho}, "cholmod", lattice=lattice,
                         state_lattice=lattice, padding=(0,) * lattice.ndim)

    @classmethod
    def icar(cls, lattice: Lattice, *, sd: float = 1.0, scale: bool = True,
             constrained: bool = True) -> GMRFPrior:
        """Intrinsic CAR (Besag) prior ``Q = τ (D − W)`` with the sum-to-zero constraint.

        Rank ``N − 1`` (the lattice graph is connected).  ``D − W`` is the Neumann graph
        Laplacian, diagonalised by the DCT-II: all operations are spectral, O(N log N), and
        the zero-frequency mode is the sum constraint.

        Parameters
        ----------
        lattice : Lattice
        sd : float
            With ``scale=True`` (Sørbye & Rue 2014): the geometric mean of the constrained
            marginal sds (``τ = c / sd²``, ``c`` the geometric mean of ``diag((D − W)⁺)``).
            With ``scale=False``: ``τ = 1 / sd²`` (a conditional scale).
        scale : bool
        constrained : bool
            ``False`` keeps the improper prior: only ``solve`` (= ``Q b``) and ``quad_form``.

        Raises
        ------
        InvalidParameterError
            ``sd`` not finite and > 0; a single-cell lattice.
        """
        lattice = _check_lattice(lattice, "icar")
        sd = positive_float("sd", sd, "sd is a standard deviation > 0")
        scale = _flag("scale", scale)
        constrained = _flag("constrained", constrained)
        if lattice.size < 2:
            raise InvalidParameterError(
                f"lattice={lattice!r} has one cell: an ICAR model needs neighbours."
            )
        struct = _GraphStructure(lattice)
        return cls._make("icar", struct, {"sd": sd}, "spectral", lattice=lattice,
                         state_lattice=lattice, padding=(0,) * lattice.ndim, intrinsic=True,
                         constrained=constrained, scale=scale,
                         fixed={"scale": scale, "constrained": constrained})

    @classmethod
    def rw1(cls, lattice: Lattice, *, sd: float = 1.0, scale: bool = True,
            constrained: bool = True) -> GMRFPrior:
        """First-order random walk on a 1-D lattice (Rue & Held 2005, §3.3), rank N − 1.

        ``Q = τ D_1ᵀ D_1`` on the cell index (equal spacing; with ``scale=True`` the spacing is
        irrelevant).  Constraint: sum to zero.  ``sd`` as in :meth:`icar`.
        """
        return cls._rw(lattice, 1, sd, scale, constrained)

    @classmethod
    def rw2(cls, lattice: Lattice, *, sd: float = 1.0, scale: bool = True,
            constrained: bool = True) -> GMRFPrior:
        """Second-order random walk on a 1-D lattice (Rue & Held 2005, §3.4), rank N − 2.

        ``Q = τ D_2ᵀ D_2``.  Constraints: sum and linear trend zero.  ``sd`` as in :meth:`icar`.
        """
        return cls._rw(lattice, 2, sd, scale, constrained)

    @classmethod
    def _rw(cls, lattice: Lattice, k: int, sd: float, scale: bool,
            constrained: bool) -> GMRFPrior:
        name = f"rw{k}"
        lattice = _check_lattice(lattice, name)
        if lattice.ndim != 1:
            raise InvalidParameterError(
                f"GMRFPrior.{name} needs a 1-D lattice but got shape {lattice.shape}; use "
                "GMRFPrior.icar (or .matern) on 2-D/3-D lattices."
            )
        if lattice.size < k + 2:
            raise InvalidParameterError(
                f"GMRFPrior.{name} needs at least {k + 2} cells, got {lattice.size}."
            )
        sd = positive_float("sd", sd, "sd is a standard deviation > 0")
        scale = _flag("scale", scale)
        constrained = _flag("constrained", constrained)
        struct = _RWStructure(lattice.size, k)
        return cls._make(name, struct, {"sd": sd}, "increments", lattice=lattice,
                         state_lattice=lattice, padding=(0,), intrinsic=True,
                         constrained=constrained, scale=scale,
                         fixed={"scale": scale, "constrained": constrained})

    @classmethod
    def from_precision(cls, lattice: Lattice, precision: Any) -> GMRFPrior:
        """A GMRF with a user-supplied sparse symmetric positive-definite precision (CHOLMOD).

        Parameters
        ----------
        lattice : Lattice
        precision : scipy sparse matrix, shape (lattice.size, lattice.size)
            In C (row-major) order of the lattice cells.  No hyperparameters
            (``with_params`` raises).

        Raises
        ------
        ShapeMismatchError
            Wrong shape.
        InvalidParameterError
            Non-finite or non-symmetric entries.
        NotPositiveDefiniteError
            CHOLMOD reports it is not positive definite.
        BackendUnavailableError
            scikit-sparse is not installed.
        """
        lattice = _check_lattice(lattice, "from_precision")
        if not sparse.issparse(precision):
            raise InvalidParameterError(
                f"precision must be a scipy.sparse matrix, got {type(precision).__name__}; "
                "use scipy.sparse.csc_matrix(Q)."
            )
        n = lattice.size
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
        _cholmod.require("GMRFPrior.from_precision")
        struct = _PrecisionStructure(q, lattice)
        return cls._make("precision", struct, {}, "cholmod", lattice=lattice,
                         state_lattice=lattice, padding=(0,) * lattice.ndim,
                         fixed={"precision": q})

    # -- engines ----------------------------------------------------------------------------------
    def _build_engine(self, reuse: GMRFPrior | None = None):
        st, p = self._struct, self._params
        if self.model == "matern":
            return self._matern_engine(reuse)
        if self.model == "car":
            b = st.sparse.matrix(st.b_data(p["rho"]))
            sym = st.sparse.symbolic("GMRFPrior.car")
            if reuse is not None and reuse._params["rho"] == p["rho"]:
                fac = reuse._engine.factor  # only tau changed: same factor, new scale
            else:
                fac = sym.factor(b, f"the CAR matrix D − ρW with rho={p['rho']!r}")
            tau = p["tau"]
            return _CholmodEngine(b, 1, tau, fac,
                                  lambda: (tau * st.b_data(p["rho"]), st.sparse), sym)
        if self.model == "icar":
            s = (st.icar_scale() if self.scaled else 1.0) / p["sd"] ** 2
            self._extra["s"] = s
            q = s * st.lam
            data = s * st.b_data(1.0)
            return _SpectralEngine(st.basis, q, q, lambda: (data, st.sparse))
        if self.model in ("rw1", "rw2"):
            s = (st.scale if self.scaled else 1.0) / p["sd"] ** 2
            return _IncrementEngine(st, s)
        # user precision
        sym = st.sparse.symbolic("GMRFPrior.from_precision")
        fac = reuse._engine.factor if reuse is not None else sym.factor(st.sparse.matrix(st.data))
        return _CholmodEngine(st.sparse.matrix(st.data), 1, 1.0, fac,
                              lambda: (st.data, st.sparse), sym)

    def _matern_engine(self, reuse: GMRFPrior | None):
        st, p = self._struct, self._params
        ranges, sd = p["range"], p["sd"]
        same_b = reuse is not None and reuse._params["range"] == ranges
        b_full = (reuse._extra["b_full"] if same_b else st.b_eigs(ranges, full=True))
        unit_var = reuse._extra["unit_var"] if same_b else st.unit_variance(b_full)
        self._extra["b_full"], self._extra["unit_var"] = b_full, unit_var
        # Var(x_c) = unit_var / s  ⇒  s = unit_var / sd²  (exact calibration, module docstring)
        if not 0.0 < sd * sd < math.inf:   # (sd**2 would raise OverflowError)
            raise InvalidParameterError(
                f"sd={sd!r}: its square is not a positive finite float64, so the precision "
                "cannot be scaled to it; give an sd between about 1e-150 and 1e150.")
        s = unit_var / sd**2
        self._extra["s"] = s
        nu, a = st.nu, st.alpha
        # τ² = s · range^{2α} / V for isotropic ranges (B = range² (κ² I − Δ_h)).
        vol = self.state_lattice.cell_volume
        self._extra["tau"] = (math.sqrt(s * ranges[0] ** (2 * a) / vol)
                              if len(set(ranges)) == 1 else None)
        self._extra["kappa"] = tuple(math.sqrt(8.0 * nu) / r for r in ranges)
        if self.solver == "spectral":
            q_full = s * b_full**a
            q = q_full if st.boundary == "neumann" else s * st.b_eigs(ranges, full=False) ** a

            def sparse_q():
                return st.q_data(s, st.b_matrix(ranges))

            return _SpectralEngine(st.basis, q, q_full, sparse_q)
        b = st.b_matrix(ranges)
        sym = st.b_symbolic()
        fac = reuse._engine.factor if same_b else sym.factor(b, "the SPDE operator κ²I − Δ_h")
        return _CholmodEngine(b, a, s, fac, lambda: st.q_data(s, b), sym)

    # -- hooks ------------------------------------------------------------------------------------
    @property
    def params(self) -> dict[str, Any]:
        """Hyperparameters (``sd``, ``range`` for Matérn; ``tau``, ``rho`` for CAR; ``sd``)."""
        out = dict(self._params)
        if "range" in out:
            r = out["range"]
            out["range"] = r[0] if len(set(r)) == 1 else r
        return out

    @property
    def rank(self) -> int:
        """``N`` for proper models, ``N − r`` (r constraints) for intrinsic ones."""
        return self._engine.rank

    @property
    def constraints(self) -> np.ndarray | None:
        """Constraint rows ``A`` (orthonormal, shape ``(r, N)``) with ``A x = 0``, or None."""
        if not self.intrinsic:
            return None
        if self.model == "icar":
            n = self.state_size
            return np.full((1, n), 1.0 / math.sqrt(n))
        return self._struct.null_basis.T.copy()

    def _need_proper(self, op: str) -> None:
        if self.intrinsic and not self.constrained:
            raise _intrinsic_error(self.model, op)

    def _colorize(self, z: np.ndarray) -> np.ndarray:
        self._need_proper("colorize")
        return self._engine.colorize(z)

    def _whiten(self, x: np.ndarray) -> np.ndarray:
        self._need_proper("whiten")
        return self._engine.whiten(x)

    def _solve(self, b: np.ndarray) -> np.ndarray:
        return self._engine.solve(b)

    def _log_det(self) -> float:
        self._need_proper("log_det")
        return -self._engine.logdet_q

    def _quad_form(self, x: np.ndarray) -> np.ndarray:
        if self.intrinsic and not self.constrained:
            return np.einsum("ij,ij->i", _flat(x), _flat(self._engine.solve(x)))
        return super()._quad_form(x)

    def _sample_state(self, rng: np.random.Generator, n_chains: int) -> np.ndarray:
        self._need_proper("sample")
        eng = self._engine
        if isinstance(eng, _CholmodEngine):
            return eng.sample(rng, n_chains, self.white_shape)
        return eng.sample(rng, n_chains)

    def _to_window(self, x: np.ndarray) -> np.ndarray:
        if not any(self.padding):
            return x
        sl = tuple(slice(p, p + n) for p, n in zip(self.padding, self.shape, strict=True))
        return x[(slice(None), *sl)]

    def _surrogate(self, g: np.ndarray, precision: np.ndarray) -> SurrogateConditional:
        self._need_proper("surrogate")
        if not np.any(precision):  # no information anywhere: the prior itself
            eng = self._engine
            return SurrogateConditional(
                mean=np.zeros_like(g), logmarginal=np.zeros(len(g)),
                colorize=lambda e: eng.colorize(np.asarray(e, dtype=np.float64)),
                whiten=lambda x: eng.whiten(np.asarray(x, dtype=np.float64)))
        return self._engine.surrogate(g, precision, self.model)

    def _with_params(self, **params: Any) -> GMRFPrior:
        allowed = set(self._params) | ({"lengthscale"} if self.model == "matern" else set())
        unknown = set(params) - allowed
        if self.model == "precision":
            raise InvalidParameterError(
                "a GMRFPrior built from a precision matrix has no hyperparameters; build a new "
                "one with GMRFPrior.from_precision."
            )
        if unknown:
            raise InvalidParameterError(
                f"with_params got {sorted(unknown)}; the {self.model} prior's hyperparameters "
                f"are {sorted(allowed)}."
            )
        new = dict(self._params)
        if "sd" in params:
            new["sd"] = positive_float("sd", params["sd"], "sd is a standard deviation > 0")
        if "tau" in params:
            new["tau"] = positive_float("tau", params["tau"], "tau is the precision > 0")
        if "rho" in params:
            new["rho"] = _rho(params["rho"])
        if "range" in params or "lengthscale" in params:
            new["range"] = positive_vector(
                "range", resolve_range(params.get("range"), params.get("lengthscale")),
                self.lattice.ndim, "ranges are lengths > 0 in coordinate units")
        obj = object.__new__(type(self))
        obj.__dict__.update({k: v for k, v in self.__dict__.items() if k != "_engine"})
        obj._params = new
        obj._extra = {k: v for k, v in self._extra.items() if k in ("alpha", "boundary")}
        obj._engine = obj._build_engine(reuse=self)
        return obj

    # -- extras -----------------------------------------------------------------------------------
    @property
    def boundary(self) -> str | None:
        """The Matérn-SPDE lattice's boundary condition, ``"neumann"`` or ``"periodic"``.

        None for the other models (CAR, ICAR, random walks), which have no SPDE boundary.
        """
        return self._struct.boundary if self.model == "matern" else None

    @property
    def capabilities(self) -> Capabilities:
        """Joint HMC's DCT transform where :attr:`spectral_neumann` holds."""
        return Capabilities(backend="gmrf",
                            white_transform="dct" if self.spectral_neumann else None)

    @property
    def spectral_neumann(self) -> bool:
        """Whether ``Q = Uᵀ diag(q) U`` with ``U`` the orthonormal DCT-II of the state.

        True for the Matérn-SPDE model with ``solver="spectral"`` and Neumann boundaries:
        then the white vector is ``ζ = q^½ ⊙ U x`` (real, ``white_shape == state_shape``)
        and :attr:`coefficient_sd` is ``q^{-½}`` (what joint HMC differentiates).
        """
        return self.solver == "spectral" and self.boundary == "neumann"

    @property
    def coefficient_sd(self) -> np.ndarray:
        """``q^{-½}``: the standard deviation of each DCT-II coefficient, shape ``white_shape``.

        ``colorize(ζ) = Uᵀ(coefficient_sd ⊙ ζ)``; proportional to ``sd``.  Only where
        :attr:`spectral_neumann` holds.

        Raises
        ------
        InvalidParameterError
            For any other model, solver or boundary (no real orthonormal diagonalising basis).
        """
        if not self.spectral_neumann:
            raise InvalidParameterError(
                f"coefficient_sd needs GMRFPrior.matern with solver='spectral' and "
                f"boundary='neumann'; this prior is {self.model!r} with solver={self.solver!r}.")
        return self._engine.inv_sqrt_q

    def precision_matrix(self) -> sparse.csc_matrix:
        """The sparse precision ``Q`` on the state, CSC, shape ``(state_size, state_size)``.

        Cells in C (row-major) order of ``state_shape``.  For intrinsic models this is the
        singular ``Q`` itself (the constrained covariance is its pseudo-inverse).
        """
        eng = self._engine
        if self.model == "matern":
            st = self._struct
            data, sq = st.q_data(self._extra["s"], st.b_matrix(self._params["range"]))
            return sq.matrix(data)
        if self.model in ("rw1", "rw2"):
            n, k = self._struct.n, self._struct.k
            d = sparse.eye(n, format="csc")
            for _ in range(k):
                d = sparse.csc_matrix(d[1:] - d[:-1])
            return sparse.csc_matrix(eng.s * (d.T @ d))
        data, sq = eng._sparse_q()
        return sq.matrix(np.array(data, dtype=np.float64))

    def marginal_variance(self) -> np.ndarray:
        """Exact marginal variances ``diag(K)`` on the window, shape ``shape``.

        Spectral models (Matérn with either solver — the same ``Q`` — and ICAR): from the
        DCT spectrum, O(N Σ n_i).  RW1/RW2: closed form, O(N).  CAR and user precisions would
        need a selected inversion, which scikit-sparse 0.4.16 lacks: up to
        ``DENSE_VARIANCE_MAX`` state cells they are computed exactly from the dense inverse of
        ``Q``, beyond that they raise.

        Raises
        ------
        UnsupportedOperationError
            For ``car`` and ``from_precision`` models on states larger than
            ``DENSE_VARIANCE_MAX`` cells.
        IntrinsicPriorError
            An intrinsic model built with ``constrained=False``.
        """
        self._need_proper("marginal_variance")
        st = self._struct
        if self.model == "matern":
            s = self._extra["s"]
            if st.boundary == "periodic":
                return np.full(self.shape, self._params["sd"] ** 2)
            mats = [dct_squared_basis(n, slice(p, p + m)) for n, p, m in
                    zip(self.state_shape, self.padding, self.shape, strict=True)]
            return contract_axes(self._extra["b_full"] ** (-st.alpha), mats) / s
        if self.model == "icar":
            return st.unit_icar_variances() / self._extra["s"]
        if self.model in ("rw1", "rw2"):
            return st.unit_var / self._engine.s
        if self.state_size <= DENSE_VARIANCE_MAX:
            var = np.diag(np.linalg.inv(self.precision_matrix().toarray()))
            return self._to_window(var.reshape(1, *self.state_shape))[0]
        raise UnsupportedOperationError(
            f"marginal_variance for the {self.model} model on {self.state_size} cells needs a "
            "selected inversion (Takahashi recursions), which scikit-sparse 0.4.16 does not "
            f"provide; it is computed exactly only up to {DENSE_VARIANCE_MAX} cells. Estimate "
            "it from draws (prior.sample) instead."
        )

    def describe(self) -> str:
        """Model, solver, state, padding and what the operations are exact on."""
        p = ", ".join(f"{k}={_fmt(v)}" for k, v in self.params.items())
        parts = [f"GMRFPrior.{self.model}({p})"]
        if self.model == "matern":
            st = self._struct
            ratio = tuple(h / r for h, r in zip(self.lattice.spacing, self._params["range"],
                                                strict=True))
            parts.append(f"alpha={st.alpha} (nu={st.nu:g}), {st.boundary} boundary, "
                         f"h/range={_fmt(ratio)}")
            c = "every cell" if st.boundary == "periodic" else f"centre cell {st.centre}"
            parts.append(f"sd exact at {c}")
            if self._extra.get("tau") is not None:
                parts.append(f"tau={self._extra['tau']:.4g}, kappa={self._extra['kappa'][0]:.4g}")
        if self.intrinsic:
            parts.append(f"intrinsic, rank {self.rank}/{self.state_size}, "
                         + ("constrained" if self.constrained else "UNconstrained")
                         + (", Sørbye–Rue scaled" if self.scaled else ""))
        parts.append(f"{self.solver} solver; exact on the {self.exact_on}, state "
                     f"{self.state_shape}, padding {self.padding}")
        return "; ".join(parts)

    def __reduce__(self):
        # CHOLMOD factors and FFT state are not serialisable: rebuild from the constructor
        # arguments (re-analyses once in the receiving process, e.g. a Dask worker).
        ctor = "from_precision" if self.model == "precision" else self.model
        return (_rebuild, (ctor, {"lattice": self.lattice, **self._fixed, **self._params}))

    def __repr__(self) -> str:
        p = ", ".join(f"{k}={_fmt(v)}" for k, v in self.params.items())
        return (f"GMRFPrior.{self.model}({p}, shape={self.shape}, state={self.state_shape}, "
                f"solver={self.solver!r}, exact on the {self.exact_on})")


def _rebuild(ctor: str, kwargs: dict[str, Any]) -> GMRFPrior:
    return getattr(GMRFPrior, ctor)(**kwargs)


def _fmt(v: Any) -> str:
    if isinstance(v, tuple):
        return "(" + ", ".join(_fmt(x) for x in v) + ")"
    if isinstance(v, float):
        return f"{v:.4g}"
    return repr(v)


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
