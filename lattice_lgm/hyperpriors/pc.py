"""Penalised-complexity priors: the range of a Matérn field and a standard deviation.

Fuglstad, Simpson, Lindgren & Rue (2019) for the range, Simpson et al. (2017) for the sd; each
states a tail probability (``P(range < rho0) = alpha``, ``P(sd > sigma0) = alpha``).
"""

from __future__ import annotations

import math

import numpy as np

from .._validation import positive_float, positive_int
from ..errors import InvalidParameterError
from .base import _fmt, _PositiveTruncated


def _probability(name: str, value: float) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InvalidParameterError(
            f"{name}={value!r} is not a number; pass a probability strictly between 0 and 1 "
            f"(e.g. 0.05)."
        ) from None
    if not 0.0 < v < 1.0:  # also rejects NaN
        raise InvalidParameterError(
            f"{name}={value!r} must be strictly between 0 and 1; pass a tail probability such "
            f"as 0.05."
        )
    return v


class PCPriorRange(_PositiveTruncated):
    r"""Penalised-complexity prior for the range of a Matérn field in ``ndim`` dimensions.

    Fuglstad, Simpson, Lindgren & Rue (2019), "Constructing priors that penalize the complexity
    of Gaussian random fields", *JASA* 114(525), 445–452: the PC prior on the range ρ of a
    Matérn field on a ``d``-dimensional domain is

    .. math:: π(ρ) = \tfrac{d}{2} λ ρ^{-1-d/2} \exp(-λ ρ^{-d/2}),
              \qquad λ = -\log(α)\, ρ_0^{d/2},

    so that ``P(range < rho0) = alpha`` (its CDF is ``exp(-λ ρ^{-d/2})``).  With ``upper`` the
    prior is truncated to ``(0, upper]`` and renormalised (divided by ``exp(-λ upper^{-d/2})``);
    the statement then holds for the untruncated prior, and the truncated one has
    ``P(range < rho0) = alpha / exp(-λ upper^{-d/2})`` (slightly more than ``alpha`` when
    ``upper`` is well above ``rho0``).

    Parameters
    ----------
    rho0 : float
        A small range, > 0.
    alpha : float
        ``P(range < rho0)``, in (0, 1).
    ndim : int
        Dimension ``d`` of the domain (1, 2, 3, …).
    upper : float, optional
        Truncation point (e.g. the largest range a circulant embedding is sized for).
    """

    _default_name = "range"

    def __init__(
        self, rho0: float, alpha: float, ndim: int, upper: float | None = None
    ) -> None:
        self.rho0 = positive_float("rho0", rho0, "pass a small range (coordinate units) > 0")
        self.alpha = _probability("alpha", alpha)
        self.ndim = positive_int(
            "ndim", ndim, "pass the dimension of the domain (1, 2 or 3 for a lattice)"
        )
        self.lam = -math.log(self.alpha) * self.rho0 ** (self.ndim / 2.0)
        self._init_support(upper)
        if self.rho0 >= self.upper:
            # the truncated prior has all its mass below rho0: "P(range < rho0) = alpha"
            # would state nothing (issue 27: it was accepted silently)
            raise InvalidParameterError(
                f"rho0={rho0!r} is not below upper={upper!r}: the truncated prior puts all its "
                "mass below rho0, so P(range < rho0) = alpha would state nothing. Give a rho0 "
                "well below the upper bound (a small range, e.g. a tenth of the window).")

    def _logpdf0(self, x: np.ndarray) -> np.ndarray:
        h = self.ndim / 2.0
        return (math.log(h) + math.log(self.lam) - (1.0 + h) * np.log(x)
                - self.lam * np.exp(-h * np.log(x)))

    def _logcdf0(self, x: np.ndarray) -> np.ndarray:
        return -self.lam * np.exp(-(self.ndim / 2.0) * np.log(x))

    def derivative_form(self) -> tuple[float, float, float, float]:
        """:meth:`Hyperprior.derivative_form`: ``log π(e^u) + u = c − (d/2) u − λ e^{−(d/2) u}``."""
        h = self.ndim / 2.0
        return (-h, 0.0, self.lam * h, -h)

    def _ppf0_log(self, log_p: np.ndarray) -> np.ndarray:
        # exp(-λ ρ^{-d/2}) = p  ⇔  ρ = (λ / -log p)^{2/d}
        return (self.lam / -log_p) ** (2.0 / self.ndim)

    def _statement(self, name: str) -> str:
        if not math.isfinite(self.upper):
            return (f"PC prior on {name} (d={self.ndim}): P({name} < {_fmt(self.rho0)}) = "
                    f"{_fmt(self.alpha)}")
        # the truncation renormalises: state the probability that actually holds as well
        return (f"PC prior on {name} (d={self.ndim}): P({name} < {_fmt(self.rho0)}) = "
                f"{_fmt(self.alpha)} before truncation to {name} ≤ {_fmt(self.upper)} "
                f"({_fmt(float(self.cdf(self.rho0)))} after)")

    def _params_repr(self) -> str:
        return f"rho0={self.rho0!r}, alpha={self.alpha!r}, ndim={self.ndim}{self._upper_repr()}"


class PCPriorSD(_PositiveTruncated):
    """Penalised-complexity prior for a standard deviation: ``P(sd > sigma0) = alpha``.

    The PC prior on a standard deviation is exponential with rate ``λ = -log(alpha) / sigma0``
    (Simpson, Rue, Riebler, Martins & Sørbye 2017, *Statistical Science* 32(1), 1–28; the
    marginal-sd part of the Matérn prior of Fuglstad et al. 2019).

    Parameters
    ----------
    sigma0 : float
        A large standard deviation, > 0.
    alpha : float
        ``P(sd > sigma0)``, in (0, 1).
    """

    _default_name = "sd"

    def __init__(self, sigma0: float, alpha: float) -> None:
        self.sigma0 = positive_float("sigma0", sigma0, "pass a large standard deviation > 0")
        self.alpha = _probability("alpha", alpha)
        self.rate = -math.log(self.alpha) / self.sigma0
        self._init_support(None)

    def _logpdf0(self, x: np.ndarray) -> np.ndarray:
        return math.log(self.rate) - self.rate * x

    def derivative_form(self) -> tuple[float, float, float, float]:
        """:meth:`Hyperprior.derivative_form`: ``log π(e^u) + u = log r − r e^u + u + c``."""
        return (1.0, 0.0, -self.rate, 1.0)

    def _logcdf0(self, x: np.ndarray) -> np.ndarray:
        return np.log(-np.expm1(-self.rate * x))

    def _ppf0_log(self, log_p: np.ndarray) -> np.ndarray:
        return -np.log1p(-np.exp(log_p)) / self.rate

    def _statement(self, name: str) -> str:
        return f"PC prior on {name}: P({name} > {_fmt(self.sigma0)}) = {_fmt(self.alpha)}"

    def _params_repr(self) -> str:
        return f"sigma0={self.sigma0!r}, alpha={self.alpha!r}"
