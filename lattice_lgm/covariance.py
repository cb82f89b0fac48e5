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
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import special

from ._validation import positive_float, positive_vector
from .errors import InvalidParameterError, ShapeMismatchError

__all__ = [
    "Covariance",
    "Exponential",
    "Matern",
    "RationalQuadratic",
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
        return self.from_lags(x1[:, None, :] - x2[None, :, :])

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

