"""The kernels of one distance: squared-exponential, exponential, Matérn, rational quadratic.

Each is ``sd² rho(u)`` with ``u`` the distance in lengthscales (per-axis lengthscales give
axis-aligned geometric anisotropy); see :mod:`lattice_lgm.covariance` for the range convention.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import special

from .._validation import positive_float
from .base import Covariance


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
