"""Stationary covariance functions with one parameter vocabulary.

Every covariance here is ``k(d) = sd**2 * rho(u)`` with ``u`` the distance measured in
lengthscales, ``u = sqrt(sum_i (d_i / lengthscale_i)**2)``.

Range convention (one for every backend)
----------------------------------------
``range = 2 * lengthscale``, where ``lengthscale`` is the one of Rasmussen & Williams (2006,
ch. 4) for the squared-exponential, exponential, Matérn and rational-quadratic forms.  For the
Matérn family this is exactly INLA's practical range ``sqrt(8 nu) / kappa`` (Lindgren, Rue &
Lindström 2011), the distance at which the correlation is about 0.13; for the exponential and
squared-exponential the correlation at ``range`` is exactly ``exp(-2) ≈ 0.135``.  The GMRF
(SPDE) backend uses the same ``range``, so a ``Matern(nu=1, range=r)`` and
``GMRFPrior.matern(lat, range=r)`` describe the same field.  ``lengthscale=`` is accepted
everywhere as an alias (``lengthscale = range / 2``); give one or the other.

Ranges may be per axis (a tuple, one per lattice axis, in coordinate units): the kernel is then
``rho(sqrt(sum_i (d_i / l_i)^2))`` (geometric anisotropy aligned with the axes).

Space-time
----------
:class:`SpaceTime` is the separable product ``sd² rho_t(|u| / l_t) rho_s(|s| / l_s)`` of a
temporal and a spatial correlation on ``("t", "y", "x")`` lattices (time is axis 0), with its own
``range_t`` in time units beside the spatial ``range`` in length units.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, NamedTuple

import numba
import numpy as np
from scipy import special

from ._validation import positive_float, positive_vector
from .errors import InvalidParameterError, ShapeMismatchError

__all__ = [
    "Covariance",
    "Exponential",
    "Matern",
    "RationalQuadratic",
    "SpaceTime",
    "SquaredExponential",
    "resolve_range",
]

#: ``range / lengthscale`` for every covariance in lattice_lgm (see the module docstring).
RANGE_PER_LENGTHSCALE = 2.0


def resolve_range(
    range: float | Sequence[float] | None, lengthscale: float | Sequence[float] | None
) -> tuple[float, ...]:
    """Turn ``range=`` or its alias ``lengthscale=`` into a tuple of positive ranges.

    Raises
    ------
    InvalidParameterError
        Both or neither given, or a value that is not finite and > 0.
    """
    if (range is None) == (lengthscale is None):
        raise InvalidParameterError(
            f"give exactly one of range={range!r} or lengthscale={lengthscale!r} "
            f"(range = {RANGE_PER_LENGTHSCALE:g} * lengthscale)."
        )
    if range is not None:
        return positive_vector("range", range, None, "ranges are lengths > 0 in coordinate units")
    ls = positive_vector(
        "lengthscale", lengthscale, None, "lengthscales are lengths > 0 in coordinate units"
    )
    return tuple(RANGE_PER_LENGTHSCALE * v for v in ls)


class Covariance(ABC):
    """A stationary covariance ``k(d) = sd**2 * rho(|d / lengthscale|)``.

    Attributes
    ----------
    sd : float
        Marginal standard deviation.
    range : tuple of float
        Range(s) in coordinate units, one value (isotropic) or one per axis.
    """

    sd: float
    range: tuple[float, ...]
    nu: float | None = None
    #: analytic kernels (squared-exponential, rational quadratic) whose spectra decay so fast that
    #: dense matrices are numerically rank deficient and circulant eigenvalues hit round-off.
    smooth: bool = False

    def __init__(
        self,
        *,
        sd: float = 1.0,
        range: float | Sequence[float] | None = None,
        lengthscale: float | Sequence[float] | None = None,
    ) -> None:
        object.__setattr__(self, "sd", positive_float("sd", sd, "sd is a standard deviation > 0"))
        object.__setattr__(self, "range", resolve_range(range, lengthscale))

    # -- the kernel -----------------------------------------------------------------------------
    @abstractmethod
    def correlation(self, u: np.ndarray) -> np.ndarray:
        """Correlation ``rho(u)`` at distances ``u >= 0`` measured in lengthscales."""

    @property
    def lengthscale(self) -> tuple[float, ...]:
        """``range / 2`` per axis (Rasmussen & Williams' lengthscale)."""
        return tuple(r / RANGE_PER_LENGTHSCALE for r in self.range)

    @property
    def variance(self) -> float:
        """Marginal variance ``sd**2``."""
        return self.sd**2

    @property
    def params(self) -> dict[str, Any]:
        """Hyperparameters as a dict (``sd``, ``range`` and kernel-specific shape parameters)."""
        r = self.range[0] if len(self.range) == 1 else self.range
        return {"sd": self.sd, "range": r}

    def lengthscales_for(self, ndim: int) -> np.ndarray:
        """Lengthscales broadcast to ``ndim`` axes, shape ``(ndim,)``."""
        if len(self.range) not in (1, ndim):
            raise ShapeMismatchError(
                f"range={self.range} has {len(self.range)} entries but the inputs have {ndim} "
                "axes; give one range or one per axis."
            )
        return np.broadcast_to(np.asarray(self.lengthscale), (ndim,)).astype(float)

    def from_lags(self, lags: np.ndarray) -> np.ndarray:
        """Covariance at lag vectors.

        Parameters
        ----------
        lags : ndarray, shape (..., ndim)
            Differences of coordinates, in coordinate units.

        Returns
        -------
        ndarray, shape (...)
        """
        lags = np.asarray(lags, dtype=float)
        ls = self.lengthscales_for(lags.shape[-1])
        u = np.sqrt(np.sum((lags / ls) ** 2, axis=-1))
        return self.variance * self.correlation(u)

    def from_axis_lags(self, axis_lags: Sequence[np.ndarray]) -> np.ndarray:
        """Covariance on the outer grid of per-axis lags (memory-light: no ``(..., ndim)`` array).

        Parameters
        ----------
        axis_lags : sequence of ndarray, each shape (m_i,)

        Returns
        -------
        ndarray, shape (m_0, …, m_{d-1})
        """
        ls = self.lengthscales_for(len(axis_lags))
        u2 = np.zeros((), dtype=float)
        for i, (lag, li) in enumerate(zip(axis_lags, ls, strict=True)):
            shp = [1] * len(axis_lags)
            shp[i] = -1
            u2 = u2 + (np.asarray(lag, dtype=float).reshape(shp) / li) ** 2
        return self.variance * self.correlation(np.sqrt(u2))

    def __call__(self, x1: np.ndarray, x2: np.ndarray | None = None) -> np.ndarray:
        """Dense covariance matrix between point sets.

        Parameters
        ----------
        x1 : ndarray, shape (n1, ndim)
        x2 : ndarray, shape (n2, ndim), optional (default ``x1``)

        Returns
        -------
        ndarray, shape (n1, n2)
        """
        x1 = _as_points(x1)
        x2 = x1 if x2 is None else _as_points(x2)
        if x1.shape[-1] != x2.shape[-1]:
            raise ShapeMismatchError(
                f"x1 has {x1.shape[-1]} columns and x2 has {x2.shape[-1]}; both must be (n, ndim)."
            )
        if type(self).from_lags is Covariance.from_lags and x1.shape[-1] <= _PAIRWISE_BLOCK:
            # the distances of from_lags without its (n1, n2, ndim) temporary: 5.9× less time
            # at 200 × 200 × 34 (Murray & Adams 2010's Ionosphere, one covariance per
            # hyperparameter proposal; benchmarks/perf/dense.py), bitwise the same (tested)
            u = np.empty((len(x1), len(x2)))
            _scaled_distances(x1, x2, self.lengthscales_for(x1.shape[-1]), x2 is x1, u)
            return self._from_distances(u)
        return self.from_lags(x1[:, None, :] - x2[None, :, :])

    def _self_distances(self, x: np.ndarray,
                        previous: _Distances | None = None) -> _Distances | None:
        """Scaled distances of the points ``x`` to themselves, reusing ``previous`` where it can.

        ``previous`` must come from the same ``x`` (a hyperparameter family of one prior).  A
        univariate lengthscale move changes one of the eight running sums of
        :func:`_scaled_distances` (``d mod 8``, below the remainder), so only that one is
        recomputed, and a move of ``sd`` alone reuses ``u`` as it is; the result is bitwise
        what :meth:`__call__` computes (tested).  ``None`` where :meth:`__call__` takes the
        ``from_lags`` path (then there is nothing to reuse).
        """
        n, nd = x.shape
        if type(self).from_lags is not Covariance.from_lags or nd > _PAIRWISE_BLOCK:
            return None
        ls = self.lengthscales_for(nd)
        if previous is not None and np.array_equal(previous.ls, ls):
            return previous
        u = np.empty((n, n))
        if nd < 8 or _LANES * n * n * 8 > _LANE_CACHE_BYTES:
            _scaled_distances(x, x, ls, True, u)
            return _Distances(ls, u, ())
        top = nd - nd % 8
        stale = set(range(_LANES))
        if previous is not None and previous.lanes:
            stale = {int(d) % _LANES for d in np.flatnonzero(previous.ls[:top] != ls[:top])}
        # one pass per stale sum: all eight together took no less time (0.62 against 0.64 ms
        # at 200 × 200 × 34, 11 against 12 ms at 500 × 500 × 64)
        lanes = list(previous.lanes) if len(stale) < _LANES else [None] * _LANES  # type: ignore[union-attr]
        for k in sorted(stale):
            lanes[k] = np.empty((n, n))
            _lane_sum(x, ls, k, lanes[k])
        _distances_from_lanes(x, ls, tuple(lanes), u)
        return _Distances(ls, u, tuple(lanes))

    def _from_distances(self, u: np.ndarray) -> np.ndarray:
        """Covariance from scaled distances ``u`` (what :meth:`__call__` returns for them)."""
        return self.variance * self.correlation(u)

    def with_params(self, **params: Any) -> Covariance:
        """The same kernel with some hyperparameters replaced (``sd``, ``range``, …)."""
        new = dict(self.params)
        unknown = sorted(set(params) - set(new) - {"lengthscale"})
        if unknown:
            raise InvalidParameterError(
                f"{type(self).__name__} has no hyperparameter(s) {unknown}; it has "
                f"{sorted({*new, 'lengthscale'})}."
            )
        if "lengthscale" in params:
            if "range" in params:
                raise InvalidParameterError("give range= or lengthscale=, not both.")
            new.pop("range")
        new.update(params)
        return type(self)(**new)

    def __repr__(self) -> str:
        extra = "".join(f", {k}={v!r}" for k, v in self.params.items() if k not in ("sd", "range"))
        r = self.range[0] if len(self.range) == 1 else self.range
        return f"{type(self).__name__}(sd={self.sd!r}, range={r!r}{extra})"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.params == other.params  # type: ignore[attr-defined]

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable; use with_params({name}=...).")

    def __hash__(self) -> int:
        return hash((type(self).__name__, tuple(sorted(map(str, self.params.items())))))


#: numpy sums a contiguous axis of up to this many terms with one block of its pairwise
#: summation (eight running sums); _scaled_distances repeats that order exactly
_PAIRWISE_BLOCK = 128


@numba.njit(parallel=True, nogil=True, cache=True)
def _scaled_distances(x1, x2, ls, symmetric, out):  # pragma: no cover - numba
    """``out[i, j] = sqrt(Σ_d ((x1[i, d] − x2[j, d]) / ls[d])²)``, as :meth:`Covariance.from_lags`.

    The terms are summed in numpy's order for a contiguous axis of at most 128 terms (its
    ``pairwise_sum``: sequential below 8 terms, else eight running sums over blocks of eight,
    combined as ``((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))``, then the remainder), so
    the result is bitwise that of the vectorised expression (tested), which the data sets and
    runs made before this kernel depend on.  ``symmetric`` (``x2 is x1``) fills the upper
    triangle and mirrors it: ``(a − b)²`` and ``(b − a)²`` are the same double.
    """
    n1, nd = x1.shape
    n2 = x2.shape[0]
    for i in numba.prange(n1):
        r = np.empty(8)
        for j in range(i if symmetric else 0, n2):
            if nd < 8:
                res = 0.0
                for d in range(nd):
                    t = (x1[i, d] - x2[j, d]) / ls[d]
                    res += t * t
            else:
                for k in range(8):
                    t = (x1[i, k] - x2[j, k]) / ls[k]
                    r[k] = t * t
                top = nd - nd % 8
                for d0 in range(8, top, 8):
                    for k in range(8):
                        t = (x1[i, d0 + k] - x2[j, d0 + k]) / ls[d0 + k]
                        r[k] += t * t
                res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
                for d in range(top, nd):
                    t = (x1[i, d] - x2[j, d]) / ls[d]
                    res += t * t
            out[i, j] = math.sqrt(res)
    if symmetric:
        for i in numba.prange(n1):
            for j in range(i):
                out[i, j] = out[j, i]


#: the running sums of numpy's pairwise summation (see _scaled_distances)
_LANES = 8
#: the largest set of running sums (8 · n² doubles) a prior keeps for its with_params children:
#: 16 MiB, n ≤ 512 points (twice the prior's own K and L); above that every proposal computes
#: its distances afresh
_LANE_CACHE_BYTES = 16 * 2**20


class _Distances(NamedTuple):
    """Scaled distances of a point set to itself and the running sums they were summed from.

    ``lanes`` are the eight ``(n, n)`` running sums of :func:`_scaled_distances` (upper
    triangles; empty below 8 axes or above the memory budget).  They are never written after
    construction, so a prior and the children it builds with one lengthscale moved share seven.
    """

    ls: np.ndarray
    u: np.ndarray
    lanes: tuple[np.ndarray, ...]


@numba.njit(parallel=True, nogil=True, cache=True)
def _lane_sum(x, ls, k, out):  # pragma: no cover - numba
    """Running sum ``k`` of :func:`_scaled_distances` of ``x`` to itself (``nd ≥ 8``).

    ``out[i, j] = Σ_m ((x[i, 8m + k] − x[j, 8m + k]) / ls[8m + k])²`` for ``j ≥ i`` (the upper
    triangle), summed in the same order.
    """
    n, nd = x.shape
    top = nd - nd % 8
    for i in numba.prange(n):
        for j in range(i, n):
            t = (x[i, k] - x[j, k]) / ls[k]
            r = t * t
            for d0 in range(8, top, 8):
                t = (x[i, d0 + k] - x[j, d0 + k]) / ls[d0 + k]
                r += t * t
            out[i, j] = r


@numba.njit(parallel=True, nogil=True, cache=True)
def _distances_from_lanes(x, ls, lanes, out):  # pragma: no cover - numba
    """``out`` from the eight running sums, combined and completed as _scaled_distances does."""
    n, nd = x.shape
    top = nd - nd % 8
    r0, r1, r2, r3, r4, r5, r6, r7 = lanes
    for i in numba.prange(n):
        for j in range(i, n):
            res = ((r0[i, j] + r1[i, j]) + (r2[i, j] + r3[i, j])) + (
                (r4[i, j] + r5[i, j]) + (r6[i, j] + r7[i, j]))
            for d in range(top, nd):
                t = (x[i, d] - x[j, d]) / ls[d]
                res += t * t
            out[i, j] = math.sqrt(res)
    for i in numba.prange(n):
        for j in range(i):
            out[i, j] = out[j, i]


def _as_points(x: np.ndarray) -> np.ndarray:
    """``(n, ndim)`` points; a flat ``(n,)`` array is ``n`` points on a line (as in DensePrior)."""
    x = np.asarray(x, dtype=float)
    return x[:, None] if x.ndim == 1 else np.atleast_2d(x)


def _matern_upward(nu: float, z: np.ndarray) -> np.ndarray:
    """Matérn correlation ``g_nu(z) = z^nu K_nu(z) / (2^{nu-1} Gamma(nu))`` without overflow.

    Used where ``K_nu(z)`` overflows (tiny ``z``, large ``nu``).  Starts from orders
    ``a = nu - m - 1 ∈ (0, 1]`` and ``a + 1`` and runs the upward recurrence
    ``g_{mu+1} = g_mu + z² / (4 mu (mu - 1)) g_{mu-1}`` (from
    ``K_{mu+1} = K_{mu-1} + 2 mu / z K_mu``); every term is positive, so it is stable.
    """
    m = max(math.ceil(nu) - 2, 0)
    a = nu - m - 1.0
    if a <= 0.0:  # nu ≤ 1: z^nu K_nu(z) does not overflow for representable z > 0
        m, a = 0, nu

    def direct(mu: float) -> np.ndarray:
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            v = np.exp((1.0 - mu) * math.log(2.0) - special.gammaln(mu) + mu * np.log(z)
                       + np.log(special.kve(mu, z)) - z)
        # still overflowing only for z < 1e-150, where g = 1 to double precision
        return np.where(np.isfinite(v), v, 1.0)

    if a == nu:
        return direct(nu)
    g_prev, g = direct(a), direct(a + 1.0)
    mu = a + 1.0
    for _ in range(m):
        g_prev, g = g, g + z * z / (4.0 * mu * (mu - 1.0)) * g_prev
        mu += 1.0
    return g


class SquaredExponential(Covariance):
    """Squared-exponential (Gaussian) covariance ``sd² exp(-u²/2)``; ``range = 2 lengthscale``.

    Analytic: its circulant embedding has round-off eigenvalues (DESIGN §4) and dense matrices
    are numerically rank deficient at small spacing.
    """

    smooth = True

    def correlation(self, u: np.ndarray) -> np.ndarray:  # noqa: D102
        return np.exp(-0.5 * np.square(u))


class Exponential(Covariance):
    """Exponential covariance ``sd² exp(-u)`` (Matérn ν = 1/2); ``range = 2 lengthscale``."""

    def correlation(self, u: np.ndarray) -> np.ndarray:  # noqa: D102
        return np.exp(-np.asarray(u))


class Matern(Covariance):
    """Matérn covariance of smoothness ``nu``; ``range = 2 lengthscale = sqrt(8 nu) / kappa``.

    ``rho(u) = 2^{1-nu} / Gamma(nu) (sqrt(2 nu) u)^nu K_nu(sqrt(2 nu) u)``
    (Rasmussen & Williams 2006, eq. 4.14), closed forms for ν ∈ {1/2, 3/2, 5/2} and Bessel
    functions otherwise.

    Parameters
    ----------
    nu : float
        Smoothness > 0.
    sd, range, lengthscale
        See :class:`Covariance`.
    """

    nu: float

    def __init__(
        self,
        nu: float = 1.5,
        *,
        sd: float = 1.0,
        range: float | Sequence[float] | None = None,
        lengthscale: float | Sequence[float] | None = None,
    ) -> None:
        super().__init__(sd=sd, range=range, lengthscale=lengthscale)
        object.__setattr__(self, "nu", positive_float("nu", nu, "Matérn smoothness is > 0"))

    @property
    def params(self) -> dict[str, Any]:  # noqa: D102
        return {**super().params, "nu": self.nu}

    @property
    def smooth(self) -> bool:  # type: ignore[override]
        """Whether the kernel is smooth enough to behave like the squared-exponential (ν > 5)."""
        # Spectra decaying faster than |k|^-(2 nu + d) with large nu behave like the SE's.
        return self.nu > 5.0

    def correlation(self, u: np.ndarray) -> np.ndarray:  # noqa: D102
        u = np.asarray(u, dtype=float)
        nu = self.nu
        if nu == 0.5:
            return np.exp(-u)
        if nu == 1.5:
            z = math.sqrt(3.0) * u
            return (1.0 + z) * np.exp(-z)
        if nu == 2.5:
            z = math.sqrt(5.0) * u
            return (1.0 + z + z * z / 3.0) * np.exp(-z)
        z = math.sqrt(2.0 * nu) * u
        out = np.ones_like(z)
        pos = z > 0
        zp = z[pos]
        # log form: stable for large z (kve = kv * e^z) and large nu.
        logc = (1.0 - nu) * math.log(2.0) - special.gammaln(nu)
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            val = np.exp(logc + nu * np.log(zp) + np.log(special.kve(nu, zp)) - zp)
        bad = ~np.isfinite(val)  # K_nu(z) overflowed at small z: recurrence from low orders
        if bad.any():
            val[bad] = _matern_upward(nu, zp[bad])
        out[pos] = val
        return out


class RationalQuadratic(Covariance):
    """Rational-quadratic covariance ``sd² (1 + u² / (2 alpha))^-alpha``; ``range = 2 lengthscale``.

    A scale mixture of squared exponentials (Rasmussen & Williams 2006, eq. 4.19); tends to the
    squared-exponential as ``alpha → ∞``.
    """

    smooth = True
    alpha: float

    def __init__(
        self,
        alpha: float = 1.0,
        *,
        sd: float = 1.0,
        range: float | Sequence[float] | None = None,
        lengthscale: float | Sequence[float] | None = None,
    ) -> None:
        super().__init__(sd=sd, range=range, lengthscale=lengthscale)
        object.__setattr__(self, "alpha", positive_float("alpha", alpha, "alpha is > 0"))

    @property
    def params(self) -> dict[str, Any]:  # noqa: D102
        return {**super().params, "alpha": self.alpha}

    def correlation(self, u: np.ndarray) -> np.ndarray:  # noqa: D102
        return (1.0 + np.square(u) / (2.0 * self.alpha)) ** (-self.alpha)



class SpaceTime(Covariance):
    """Separable space-time covariance ``C(u, s) = sd² rho_t(|u| / l_t) rho_s(|s| / l_s)``.

    The usual covariance of space-time log-Gaussian Cox processes (Brix & Diggle 2001, JRSS B
    63(4), §2; Diggle, Moraga, Rowlingson & Taylor 2013, J. Stat. Softw. 52(4), §3): a temporal
    correlation of the time lag ``u`` times an isotropic spatial correlation of the spatial lag
    ``s``, each with its own range in its own units (days and metres never mix, unlike an
    isotropic kernel over ``(t, y, x)``).  It is stationary on the lattice, so circulant
    embedding applies unchanged.  On a lattice its covariance matrix is ``sd² K_t ⊗ K_s``
    (C order, time slowest) and its torus spectrum the outer product ``sd² λ_t ⊗ λ_s`` of the
    temporal (1-D) and spatial embedding spectra — the multidimensional DFT of a product of
    functions of disjoint axes factorises — so the embedding is PSD exactly when both factors
    are PSD on their own tori.

    Axes: time is axis 0, the other ``ndim - 1`` axes are space (lattice dims
    ``("t", "y", "x")`` for the default ``ndim=3``, ``("t", "x")`` for ``ndim=2``).  Lags and
    points are given in this axis order.

    Parameters
    ----------
    space : Covariance
        The spatial correlation: a kernel with one range and ``sd = 1``, e.g.
        ``Matern(1.5, range=…)``.  Its type and shape parameter (``nu``, ``alpha``) give
        ``rho_s``; its range is the default of ``range``.
    time : Covariance
        The temporal correlation, one range and ``sd = 1``, e.g. ``Exponential(range=…)`` (the
        lgcp package's choice).  Its range is the default of ``range_t``.
    sd : float
        Marginal standard deviation of the field — the only sd.  Components with ``sd != 1``
        are refused (not silently ignored): give the sd here.
    range : float or tuple of float, optional
        Spatial range in coordinate units (``range = 2 lengthscale``, the module's convention),
        or the per-axis tuple ``(range_t, range, …, range)`` of length ``ndim`` — the form
        :class:`~lattice_lgm.priors.CirculantPrior` passes to :meth:`with_params`.  The spatial
        entries of such a tuple must be equal: geometric anisotropy in space is not part of this
        kernel.  Default: ``space``'s range.
    range_t : float, optional
        Temporal range in time units (``range_t = 2 lengthscale_t``).  Default: ``time``'s range.
    lengthscale, lengthscale_t : float or tuple of float, optional
        Aliases ``range / 2`` and ``range_t / 2``; give a range or its lengthscale, not both.
    ndim : int
        Number of axes, ≥ 2 (default 3).

    Attributes
    ----------
    range : tuple of float
        Per-axis ranges ``(range_t, range_s, …, range_s)``, length ``ndim`` (what the circulant
        prior sizes its torus and checks ``max_range`` with).
    range_t, range_s : float
        Temporal and spatial range.
    space, time : Covariance
        The components, with ``sd = 1`` and ranges ``range_s`` and ``range_t``.
    ndim : int

    Notes
    -----
    :attr:`params` is ``{"sd", "range", "range_t"}`` with ``range`` the *spatial* range (a
    number), plus the components' shape parameters: spatial ones under their own names (``nu``,
    ``alpha``), temporal ones with a ``_t`` suffix (``nu_t``, ``alpha_t``).  :meth:`with_params`
    takes any of these, ``lengthscale``/``lengthscale_t``, and a per-axis ``range`` tuple.

    Examples
    --------
    >>> k = SpaceTime(Matern(1.5, range=1.0), Exponential(range=1.0), sd=1.3, range=0.2,
    ...               range_t=5.0)
    >>> k.range
    (5.0, 0.2, 0.2)
    >>> k.with_params(range=(7.0, 0.3, 0.3)).params
    {'sd': 1.3, 'range': 0.3, 'range_t': 7.0, 'nu': 1.5}
    """

    space: Covariance
    time: Covariance
    range_t: float
    range_s: float
    ndim: int

    def __init__(
        self,
        space: Covariance,
        time: Covariance,
        *,
        sd: float = 1.0,
        range: float | Sequence[float] | None = None,
        range_t: float | None = None,
        lengthscale: float | Sequence[float] | None = None,
        lengthscale_t: float | None = None,
        ndim: int = 3,
    ) -> None:
        for name, comp, example in (("space", space, "Matern(1.5, range=1.0)"),
                                    ("time", time, "Exponential(range=1.0)")):
            if not isinstance(comp, Covariance) or isinstance(comp, SpaceTime):
                raise InvalidParameterError(
                    f"{name}={comp!r} must be a one-range lattice_lgm Covariance, e.g. "
                    f"{example}: the {name} correlation of the separable kernel."
                )
            if len(comp.range) != 1:
                raise InvalidParameterError(
                    f"{name}={comp!r} has per-axis ranges {comp.range}; SpaceTime's components "
                    "have one range each: build the component with one range (the temporal "
                    "range is range_t=, the spatial one range=)."
                )
            if comp.sd != 1.0:
                raise InvalidParameterError(
                    f"{name}={comp!r} has sd={comp.sd!r}; SpaceTime has one marginal sd: build "
                    f"the component with sd=1 and give SpaceTime(..., sd={comp.sd!r})."
                )
        if isinstance(ndim, bool) or not isinstance(ndim, int | np.integer) or ndim < 2:
            raise InvalidParameterError(
                f"ndim={ndim!r} must be an integer >= 2: time (axis 0) and at least one spatial "
                "axis, e.g. ndim=3 for ('t', 'y', 'x')."
            )
        ndim = int(ndim)
        rs, rt = _space_time_ranges(space, time, range, lengthscale, range_t, lengthscale_t,
                                    ndim)
        object.__setattr__(self, "sd", positive_float("sd", sd, "sd is a standard deviation > 0"))
        object.__setattr__(self, "ndim", ndim)
        object.__setattr__(self, "range_s", rs)
        object.__setattr__(self, "range_t", rt)
        object.__setattr__(self, "range", (rt, *([rs] * (ndim - 1))))
        object.__setattr__(self, "space",
                           space if space.range == (rs,) else space.with_params(range=rs))
        object.__setattr__(self, "time",
                           time if time.range == (rt,) else time.with_params(range=rt))

    # -- hyperparameters --------------------------------------------------------------------------
    @staticmethod
    def _shape_params(comp: Covariance, suffix: str) -> dict[str, Any]:
        return {k + suffix: v for k, v in comp.params.items() if k not in ("sd", "range")}

    @property
    def params(self) -> dict[str, Any]:
        """``sd``, spatial ``range``, ``range_t`` and the components' shape parameters."""
        return {"sd": self.sd, "range": self.range_s, "range_t": self.range_t,
                **self._shape_params(self.space, ""), **self._shape_params(self.time, "_t")}

    def with_params(self, **params: Any) -> SpaceTime:
        """The same kernel with some hyperparameters replaced.

        Parameters
        ----------
        **params
            Any of :attr:`params` (``sd``, ``range``, ``range_t``, ``nu``, ``nu_t``, …) and the
            aliases ``lengthscale``, ``lengthscale_t``.  ``range`` is the spatial range (a
            number) or the per-axis tuple ``(range_t, range, …, range)`` of length ``ndim``
            (then ``range_t`` must not be given too); ``nu``/``alpha`` change the spatial
            component, ``nu_t``/``alpha_t`` the temporal one.

        Returns
        -------
        SpaceTime

        Raises
        ------
        InvalidParameterError
            Unknown names, a range given twice, or a per-axis tuple with unequal spatial entries.
        ShapeMismatchError
            A per-axis tuple whose length is neither 1 nor ``ndim``.
        """
        space_shape = {k: k for k in self._shape_params(self.space, "")}
        time_shape = {k + "_t": k for k in self._shape_params(self.time, "")}
        allowed = {"sd", "range", "range_t", "lengthscale", "lengthscale_t",
                   *space_shape, *time_shape}
        unknown = sorted(set(params) - allowed)
        if unknown:
            raise InvalidParameterError(
                f"SpaceTime has no hyperparameter(s) {unknown}; it has {sorted(allowed)}."
            )
        for a, b in (("range", "lengthscale"), ("range_t", "lengthscale_t")):
            if a in params and b in params:
                raise InvalidParameterError(f"give {a}= or {b}=, not both.")
        space, time = self.space, self.time
        s_kw = {space_shape[k]: v for k, v in params.items() if k in space_shape}
        t_kw = {time_shape[k]: v for k, v in params.items() if k in time_shape}
        if s_kw:
            space = space.with_params(**s_kw)
        if t_kw:
            time = time.with_params(**t_kw)
        kw: dict[str, Any] = {"sd": params.get("sd", self.sd), "ndim": self.ndim}
        spatial = {k: params[k] for k in ("range", "lengthscale") if k in params}
        temporal = {k: params[k] for k in ("range_t", "lengthscale_t") if k in params}
        per_axis = any(np.size(v) > 1 for v in spatial.values())
        kw.update(spatial or {"range": self.range_s})
        # a per-axis tuple carries the temporal range; otherwise keep the current one
        kw.update(temporal or ({} if per_axis else {"range_t": self.range_t}))
        return SpaceTime(space, time, **kw)

    def lengthscales_for(self, ndim: int) -> np.ndarray:
        """Per-axis lengthscales ``(l_t, l_s, …, l_s)``, shape ``(ndim,)``; ``ndim`` must match."""
        self._check_axes(ndim, "the inputs")
        return np.asarray(self.lengthscale, dtype=float)

    @property
    def smooth(self) -> bool:  # type: ignore[override]
        """Whether either factor is smooth (its spectrum, and so the product's, hits round-off)."""
        return bool(self.space.smooth or self.time.smooth)

    def _check_axes(self, n: int, what: str) -> None:
        if n == self.ndim:
            return
        remedy = ("a space-time kernel needs a time axis (axis 0) and at least one spatial axis"
                  if n < 2 else f"build SpaceTime(..., ndim={n}) for {n}-axis inputs")
        raise ShapeMismatchError(
            f"{what} have {n} axes but this SpaceTime has ndim={self.ndim} (time on axis 0, "
            f"then {self.ndim - 1} spatial axes); {remedy}."
        )

    # -- the kernel -----------------------------------------------------------------------------
    def correlation(self, u: np.ndarray) -> np.ndarray:
        """Correlation ``rho_t(u_t) rho_s(u_s)`` at pairs of distances in lengthscales.

        A separable kernel is not a function of one distance, so a scalar ``u`` (or a last axis
        other than 2) is refused.

        Parameters
        ----------
        u : ndarray, shape (..., 2)
            ``u[..., 0] = |time lag| / lengthscale_t`` and
            ``u[..., 1] = |spatial lag| / lengthscale_s``.

        Returns
        -------
        ndarray, shape (...)
        """
        u = np.asarray(u, dtype=float)
        if u.ndim == 0 or u.shape[-1] != 2:
            raise ShapeMismatchError(
                f"SpaceTime.correlation takes (u_t, u_s) pairs of shape (..., 2), got shape "
                f"{u.shape}: a separable space-time kernel is not a function of one distance. "
                "Use from_lags with lags in (t, y, x) order, or the components' correlation."
            )
        return self.time.correlation(u[..., 0]) * self.space.correlation(u[..., 1])

    def from_lags(self, lags: np.ndarray) -> np.ndarray:
        """Covariance ``sd² rho_t(|u| / l_t) rho_s(|s| / l_s)`` at lag vectors.

        Parameters
        ----------
        lags : ndarray, shape (..., ndim)
            Lags in axis order: the time lag first, then the spatial lags.

        Returns
        -------
        ndarray, shape (...)
        """
        lags = np.asarray(lags, dtype=float)
        self._check_axes(lags.shape[-1] if lags.ndim else 0, "lags")
        # the components have sd = 1: their from_lags are the correlations rho_t and rho_s
        return self.variance * (self.time.from_lags(lags[..., :1])
                                * self.space.from_lags(lags[..., 1:]))

    def from_axis_lags(self, axis_lags: Sequence[np.ndarray]) -> np.ndarray:
        """Covariance on the outer grid of per-axis lags, as ``sd² rho_t ⊗ rho_s``.

        Memory-light: the temporal factor ``(m_0,)`` and the spatial factor
        ``(m_1, …, m_{d-1})`` are computed separately and multiplied by broadcasting.

        Parameters
        ----------
        axis_lags : sequence of ndarray, each shape (m_i,)
            Time lags first.

        Returns
        -------
        ndarray, shape (m_0, …, m_{d-1})
        """
        self._check_axes(len(axis_lags), "axis_lags")
        ct = self.time.from_axis_lags([axis_lags[0]])
        cs = self.space.from_axis_lags(list(axis_lags[1:]))
        return self.variance * (ct.reshape((-1,) + (1,) * (self.ndim - 1)) * cs)

    # -- identity -------------------------------------------------------------------------------
    def __repr__(self) -> str:
        nd = "" if self.ndim == 3 else f", ndim={self.ndim}"
        return (f"SpaceTime({self.space!r}, {self.time!r}, sd={self.sd!r}, "
                f"range={self.range_s!r}, range_t={self.range_t!r}{nd})")

    def _key(self) -> tuple:
        return (type(self.space), type(self.time), self.ndim)

    def __eq__(self, other: object) -> bool:
        return (type(self) is type(other) and self._key() == other._key()  # type: ignore[attr-defined]
                and self.params == other.params)  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, type(self.space).__name__, type(self.time).__name__,
                     self.ndim, tuple(sorted(map(str, self.params.items())))))


def _space_time_ranges(
    space: Covariance,
    time: Covariance,
    range: float | Sequence[float] | None,
    lengthscale: float | Sequence[float] | None,
    range_t: float | None,
    lengthscale_t: float | None,
    ndim: int,
) -> tuple[float, float]:
    """``(range_s, range_t)`` of a :class:`SpaceTime` from its arguments (see its docstring)."""
    if range_t is not None and lengthscale_t is not None:
        raise InvalidParameterError(
            f"give range_t={range_t!r} or lengthscale_t={lengthscale_t!r}, not both "
            f"(range_t = {RANGE_PER_LENGTHSCALE:g} * lengthscale_t)."
        )
    rt: float | None = None
    if range_t is not None:
        rt = positive_float("range_t", range_t, "the temporal range is a duration > 0")
    elif lengthscale_t is not None:
        rt = RANGE_PER_LENGTHSCALE * positive_float(
            "lengthscale_t", lengthscale_t, "the temporal lengthscale is a duration > 0")
    if range is None and lengthscale is None:
        return space.range[0], time.range[0] if rt is None else rt
    r = resolve_range(range, lengthscale)
    name, value = ("range", range) if range is not None else ("lengthscale", lengthscale)
    if len(r) == 1:
        return r[0], time.range[0] if rt is None else rt
    if len(r) != ndim:
        raise ShapeMismatchError(
            f"{name}={value!r} has {len(r)} entries; give the spatial {name} as one number or "
            f"the per-axis tuple ({name}_t, {name}, ...) of ndim={ndim} entries."
        )
    if rt is not None:
        given = "range_t" if range_t is not None else "lengthscale_t"
        raise InvalidParameterError(
            f"{name}={value!r} is a per-axis tuple whose first entry is the temporal {name}, and "
            f"{given}={range_t if range_t is not None else lengthscale_t!r} was given too; give "
            "the temporal range once."
        )
    spatial = r[1:]
    if any(v != spatial[0] for v in spatial):
        raise InvalidParameterError(
            f"{name}={value!r} has spatial entries {spatial} that differ; SpaceTime is isotropic "
            f"in space (no geometric anisotropy): give equal spatial entries, e.g. "
            f"CirculantPrior(..., max_range=(range_t_max, r_max, r_max))."
        )
    return spatial[0], r[0]
