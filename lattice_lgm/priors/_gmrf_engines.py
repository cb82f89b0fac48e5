"""The GMRF engines: one per way of doing a GMRFPrior's linear algebra on its structure.

=====================  ===========================================================================
engine                 ``Q`` and how it is applied
=====================  ===========================================================================
``_SpectralEngine``    ``Uᵀ diag(q) U``, ``U`` the orthonormal DCT-II or real FFT: O(N log N), no
                       factorisation (Matérn-SPDE with ``solver="spectral"``, ICAR)
``_CholmodEngine``     ``s · B^m`` with a CHOLMOD factor of ``B`` (CAR, Matérn with
                       ``solver="cholmod"``, user precisions)
``_IncrementEngine``   ``s D_kᵀ D_k`` through the ``N − k`` white increments (RW1, RW2)
=====================  ===========================================================================

Each gives ``colorize``, ``whiten``, ``solve``, ``sample``, ``surrogate``, ``logdet_q`` and
``rank``; :func:`build_engine` picks and builds the one of a prior (reusing its parent's
spectra and factors under ``with_params``), and :func:`precision_matrix` and
:func:`marginal_variance` are the prior's sparse ``Q`` and exact ``diag(K)``.  Site-specific
surrogate precisions ``Π`` factor ``Q + Π`` with CHOLMOD (:func:`_site_surrogate`).

Notation (local variables): ``B`` the sparse "root" operator with ``Q = s·B^m`` (``m = α`` for
Matérn, 1 otherwise), ``s`` the precision scale, ``q`` eigenvalues of ``Q`` on the spectral
coefficient grid, ``Π`` site precisions.
"""

from __future__ import annotations

import math
from functools import cached_property
from typing import Any

import numpy as np
from scipy import sparse

from ..errors import IntrinsicPriorError, InvalidParameterError, UnsupportedOperationError
from . import _cholmod
from ._gmrf_structures import _RWStructure, _SparseQ
from ._spde import SpectralBasis, contract_axes, dct_squared_basis
from .base import LOG_2PI, SurrogateConditional

#: largest state for which marginal_variance of CAR / user precisions inverts Q densely
DENSE_VARIANCE_MAX = 4096


def _flat(a: np.ndarray) -> np.ndarray:
    return a.reshape(len(a), -1)


def _intrinsic_error(model: str, op: str) -> IntrinsicPriorError:
    return IntrinsicPriorError(
        f"{op} needs |Q| or Q⁻¹, but this {model} prior is intrinsic (Q is singular) and was "
        f"built with constrained=False; build it with constrained=True (the standard "
        f"sum-to-zero{'/linear-trend' if model == 'rw2' else ''} constraints, with Sørbye–Rue "
        "scaling) or use a proper model (GMRFPrior.car with rho < 1, or GMRFPrior.matern)."
    )


# ================================================================================================
# surrogate with site-specific precision (CHOLMOD on Q + Π)
# ================================================================================================
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
# a prior's engine, its sparse Q and its marginal variances
# ================================================================================================
def build_engine(prior: Any, reuse: Any = None):
    """The engine of a GMRFPrior ``prior`` for its model and hyperparameters.

    ``reuse``: the prior that ``prior`` was derived from by ``with_params``, whose
    spectra and factors are reused where the hyperparameters that they depend on are
    unchanged.  Sets the calibration constants of ``prior._extra``.
    """
    st, p = prior._struct, prior._params
    if prior.model == "matern":
        return _matern_engine(prior, reuse)
    if prior.model == "car":
        b = st.sparse.matrix(st.b_data(p["rho"]))
        sym = st.sparse.symbolic("GMRFPrior.car")
        if reuse is not None and reuse._params["rho"] == p["rho"]:
            fac = reuse._engine.factor  # only tau changed: same factor, new scale
        else:
            fac = sym.factor(b, f"the CAR matrix D − ρW with rho={p['rho']!r}")
        tau = p["tau"]
        return _CholmodEngine(b, 1, tau, fac,
                              lambda: (tau * st.b_data(p["rho"]), st.sparse), sym)
    if prior.model == "icar":
        s = (st.icar_scale() if prior.scaled else 1.0) / p["sd"] ** 2
        prior._extra["s"] = s
        q = s * st.lam
        data = s * st.b_data(1.0)
        return _SpectralEngine(st.basis, q, q, lambda: (data, st.sparse))
    if prior.model in ("rw1", "rw2"):
        s = (st.scale if prior.scaled else 1.0) / p["sd"] ** 2
        return _IncrementEngine(st, s)
    # user precision
    sym = st.sparse.symbolic("GMRFPrior.from_precision")
    fac = reuse._engine.factor if reuse is not None else sym.factor(st.sparse.matrix(st.data))
    return _CholmodEngine(st.sparse.matrix(st.data), 1, 1.0, fac,
                          lambda: (st.data, st.sparse), sym)


def _matern_engine(prior: Any, reuse: Any):
    st, p = prior._struct, prior._params
    ranges, sd = p["range"], p["sd"]
    same_b = reuse is not None and reuse._params["range"] == ranges
    b_full = (reuse._extra["b_full"] if same_b else st.b_eigs(ranges, full=True))
    unit_var = reuse._extra["unit_var"] if same_b else st.unit_variance(b_full)
    prior._extra["b_full"], prior._extra["unit_var"] = b_full, unit_var
    # Var(x_c) = unit_var / s  ⇒  s = unit_var / sd²  (exact calibration, gmrf.py's docstring)
    if not 0.0 < sd * sd < math.inf:   # (sd**2 would raise OverflowError)
        raise InvalidParameterError(
            f"sd={sd!r}: its square is not a positive finite float64, so the precision "
            "cannot be scaled to it; give an sd between about 1e-150 and 1e150.")
    s = unit_var / sd**2
    prior._extra["s"] = s
    nu, a = st.nu, st.alpha
    # τ² = s · range^{2α} / V for isotropic ranges (B = range² (κ² I − Δ_h)).
    vol = prior.state_lattice.cell_volume
    prior._extra["tau"] = (math.sqrt(s * ranges[0] ** (2 * a) / vol)
                          if len(set(ranges)) == 1 else None)
    prior._extra["kappa"] = tuple(math.sqrt(8.0 * nu) / r for r in ranges)
    if prior.solver == "spectral":
        q_full = s * b_full**a
        q = q_full if st.boundary == "neumann" else s * st.b_eigs(ranges, full=False) ** a

        def sparse_q():
            return st.q_data(s, st.b_matrix(ranges))

        return _SpectralEngine(st.basis, q, q_full, sparse_q)
    b = st.b_matrix(ranges)
    sym = st.b_symbolic()
    fac = reuse._engine.factor if same_b else sym.factor(b, "the SPDE operator κ²I − Δ_h")
    return _CholmodEngine(b, a, s, fac, lambda: st.q_data(s, b), sym)


def precision_matrix(prior: Any) -> sparse.csc_matrix:
    """``Q`` of a GMRFPrior on its state (:meth:`GMRFPrior.precision_matrix`)."""
    eng = prior._engine
    if prior.model == "matern":
        st = prior._struct
        data, sq = st.q_data(prior._extra["s"], st.b_matrix(prior._params["range"]))
        return sq.matrix(data)
    if prior.model in ("rw1", "rw2"):
        n, k = prior._struct.n, prior._struct.k
        d = sparse.eye(n, format="csc")
        for _ in range(k):
            d = sparse.csc_matrix(d[1:] - d[:-1])
        return sparse.csc_matrix(eng.s * (d.T @ d))
    data, sq = eng._sparse_q()
    return sq.matrix(np.array(data, dtype=np.float64))


def marginal_variance(prior: Any) -> np.ndarray:
    """``diag(K)`` of a proper GMRFPrior on its window (:meth:`GMRFPrior.marginal_variance`)."""
    st = prior._struct
    if prior.model == "matern":
        s = prior._extra["s"]
        if st.boundary == "periodic":
            return np.full(prior.shape, prior._params["sd"] ** 2)
        mats = [dct_squared_basis(n, slice(p, p + m)) for n, p, m in
                zip(prior.state_shape, prior.padding, prior.shape, strict=True)]
        return contract_axes(prior._extra["b_full"] ** (-st.alpha), mats) / s
    if prior.model == "icar":
        return st.unit_icar_variances() / prior._extra["s"]
    if prior.model in ("rw1", "rw2"):
        return st.unit_var / prior._engine.s
    if prior.state_size <= DENSE_VARIANCE_MAX:
        var = np.diag(np.linalg.inv(prior.precision_matrix().toarray()))
        return prior._to_window(var.reshape(1, *prior.state_shape))[0]
    raise UnsupportedOperationError(
        f"marginal_variance for the {prior.model} model on {prior.state_size} cells needs a "
        "selected inversion (Takahashi recursions), which scikit-sparse 0.4.16 does not "
        f"provide; it is computed exactly only up to {DENSE_VARIANCE_MAX} cells. Estimate "
        "it from draws (prior.sample) instead."
    )
