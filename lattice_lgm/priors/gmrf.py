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
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import sparse

from .._validation import positive_float, positive_vector
from ..covariance import resolve_range
from ..errors import InvalidParameterError
from ..lattice import Lattice
from . import _cholmod
from ._gmrf_engines import DENSE_VARIANCE_MAX as DENSE_VARIANCE_MAX
from ._gmrf_engines import (
    _CholmodEngine,
    _flat,
    _intrinsic_error,
    build_engine,
    marginal_variance,
    precision_matrix,
)
from ._gmrf_structures import (
    _BOUNDARIES,
    _SOLVERS,
    _alpha,
    _check_lattice,
    _choice,
    _flag,
    _GraphStructure,
    _MaternStructure,
    _new_params,
    _padding,
    _PrecisionStructure,
    _rho,
    _RWStructure,
    _user_precision,
)
from .base import Capabilities, GaussianPrior, SurrogateConditional

__all__ = ["GMRFPrior"]


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
        obj._engine = build_engine(obj)
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
        q = _user_precision(precision, lattice.size)
        _cholmod.require("GMRFPrior.from_precision")
        struct = _PrecisionStructure(q, lattice)
        return cls._make("precision", struct, {}, "cholmod", lattice=lattice,
                         state_lattice=lattice, padding=(0,) * lattice.ndim,
                         fixed={"precision": q})

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
        new = _new_params(self.model, self._params, params, self.lattice.ndim)
        obj = object.__new__(type(self))
        obj.__dict__.update({k: v for k, v in self.__dict__.items() if k != "_engine"})
        obj._params = new
        obj._extra = {k: v for k, v in self._extra.items() if k in ("alpha", "boundary")}
        obj._engine = build_engine(obj, reuse=self)
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
        return precision_matrix(self)

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
        return marginal_variance(self)

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
