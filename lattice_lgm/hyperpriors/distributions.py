"""The standard families as hyperpriors: log-normal, half-normal, log-uniform, uniform, normal.

The positive ones (log-normal, half-normal) may be truncated to ``(0, upper]``, as the range
needs.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from .._validation import positive_float
from ..errors import InvalidParameterError
from .base import _LOG_SQRT_2PI, Hyperprior, _finite_float, _fmt, _PositiveTruncated


class LogNormal(_PositiveTruncated):
    """Log-normal prior: ``log x ~ N(mu, sigma²)``, optionally truncated to ``(0, upper]``.

    Parameters
    ----------
    mu : float
        Mean of ``log x``.
    sigma : float
        Standard deviation of ``log x``, > 0.
    upper : float, optional
        Truncation point (the density is renormalised).
    """

    def __init__(self, mu: float, sigma: float, upper: float | None = None) -> None:
        self.mu = _finite_float("mu", mu, "pass the mean of log x")
        self.sigma = positive_float("sigma", sigma, "pass the sd of log x, > 0")
        self._init_support(upper)

    def derivative_form(self) -> tuple[float, float, float, float]:
        """:meth:`Hyperprior.derivative_form`: ``log π(e^u) + u = −(u − μ)²/(2σ²) + c``."""
        v = self.sigma * self.sigma
        return (self.mu / v, -1.0 / v, 0.0, 0.0)

    def _logpdf0(self, x: np.ndarray) -> np.ndarray:
        lx = np.log(x)
        z = (lx - self.mu) / self.sigma
        return -0.5 * z * z - _LOG_SQRT_2PI - math.log(self.sigma) - lx

    def _logcdf0(self, x: np.ndarray) -> np.ndarray:
        return special.log_ndtr((np.log(x) - self.mu) / self.sigma)

    def _ppf0_log(self, log_p: np.ndarray) -> np.ndarray:
        return np.exp(self.mu + self.sigma * special.ndtri_exp(log_p))

    def _statement(self, name: str) -> str:
        return (f"log-normal prior on {name}: log {name} ~ N({_fmt(self.mu)}, "
                f"{_fmt(self.sigma)}²){self._truncation(name)}")

    def _params_repr(self) -> str:
        return f"mu={self.mu!r}, sigma={self.sigma!r}{self._upper_repr()}"


class HalfNormal(_PositiveTruncated):
    """Half-normal prior: ``x = |N(0, scale²)|``, optionally truncated to ``(0, upper]``.

    Parameters
    ----------
    scale : float
        Scale of the underlying normal, > 0.
    upper : float, optional
        Truncation point (the density is renormalised).
    """

    def __init__(self, scale: float, upper: float | None = None) -> None:
        self.scale = positive_float("scale", scale, "pass the sd of the underlying normal, > 0")
        self._init_support(upper)

    def derivative_form(self) -> tuple[float, float, float, float]:
        """:meth:`Hyperprior.derivative_form`: ``log π(e^u) + u = −e^{2u}/(2s²) + u + c``."""
        return (1.0, 0.0, -1.0 / (self.scale * self.scale), 2.0)

    def _logpdf0(self, x: np.ndarray) -> np.ndarray:
        z = x / self.scale
        return math.log(2.0) - _LOG_SQRT_2PI - math.log(self.scale) - 0.5 * z * z

    def _logcdf0(self, x: np.ndarray) -> np.ndarray:
        return np.log(special.erf(x / (self.scale * math.sqrt(2.0))))

    def _ppf0_log(self, log_p: np.ndarray) -> np.ndarray:
        # erfinv keeps full relative precision for small p (ndtri((1+p)/2) would round to 0)
        return self.scale * math.sqrt(2.0) * special.erfinv(np.exp(log_p))

    def _statement(self, name: str) -> str:
        return (f"half-normal prior on {name}: {name} = |N(0, {_fmt(self.scale)}²)|"
                f"{self._truncation(name)}")

    def _params_repr(self) -> str:
        return f"scale={self.scale!r}{self._upper_repr()}"


class LogUniform(Hyperprior):
    """Log-uniform prior on ``[lower, upper]``: density ``1 / (x log(upper / lower))``.

    Parameters
    ----------
    lower, upper : float
        Finite bounds with ``0 < lower < upper``.
    """

    transform = "log"

    def __init__(self, lower: float, upper: float) -> None:
        self.lower = positive_float("lower", lower, "pass a finite lower bound > 0")
        self.upper = positive_float("upper", upper, "pass a finite upper bound > lower")
        if not self.lower < self.upper:
            raise InvalidParameterError(
                f"lower={lower!r} must be < upper={upper!r}; pass lower < upper."
            )
        self._log_lo = math.log(self.lower)
        self._log_width = math.log(self.upper) - self._log_lo

    def derivative_form(self) -> tuple[float, float, float, float]:
        """:meth:`Hyperprior.derivative_form`: ``log π(e^u) + u = −u + u + c``, flat in u."""
        return (0.0, 0.0, 0.0, 0.0)

    def _logpdf_in(self, x: np.ndarray) -> np.ndarray:
        return -np.log(x) - math.log(self._log_width)

    def _cdf_in(self, x: np.ndarray) -> np.ndarray:
        return (np.log(x) - self._log_lo) / self._log_width

    def _ppf_in(self, p: np.ndarray) -> np.ndarray:
        return np.exp(self._log_lo + p * self._log_width)

    def _statement(self, name: str) -> str:
        return (f"log-uniform prior on {name}: log {name} ~ U(log {_fmt(self.lower)}, "
                f"log {_fmt(self.upper)})")

    def _params_repr(self) -> str:
        return f"lower={self.lower!r}, upper={self.upper!r}"


class Uniform(Hyperprior):
    """Uniform prior on ``[lower, upper]`` (identity transform: the sampler moves on ``x``).

    Parameters
    ----------
    lower, upper : float
        Finite bounds with ``lower < upper``.
    """

    transform = "identity"

    def __init__(self, lower: float, upper: float) -> None:
        self.lower = _finite_float("lower", lower, "pass a finite lower bound")
        self.upper = _finite_float("upper", upper, "pass a finite upper bound > lower")
        if not self.lower < self.upper:
            raise InvalidParameterError(
                f"lower={lower!r} must be < upper={upper!r}; pass lower < upper."
            )
        self._width = self.upper - self.lower

    def derivative_form(self) -> tuple[float, float, float, float]:
        """:meth:`Hyperprior.derivative_form`: flat on the identity scale."""
        return (0.0, 0.0, 0.0, 0.0)

    def _logpdf_in(self, x: np.ndarray) -> np.ndarray:
        return np.full(x.shape, -math.log(self._width))

    def _cdf_in(self, x: np.ndarray) -> np.ndarray:
        return (x - self.lower) / self._width

    def _ppf_in(self, p: np.ndarray) -> np.ndarray:
        return self.lower + p * self._width

    def _statement(self, name: str) -> str:
        return f"uniform prior on {name}: {name} ~ U({_fmt(self.lower)}, {_fmt(self.upper)})"

    def _params_repr(self) -> str:
        return f"lower={self.lower!r}, upper={self.upper!r}"


class Normal(Hyperprior):
    """Normal prior ``N(mean, sd²)`` on the real line, for intercepts, β and the mean offset.

    Parameters
    ----------
    mean : float
        Prior mean.
    sd : float
        Prior standard deviation, > 0.
    """

    transform = "identity"
    lower = -math.inf
    upper = math.inf

    def __init__(self, mean: float, sd: float) -> None:
        self.mean = _finite_float("mean", mean, "pass the prior mean")
        self.sd = positive_float("sd", sd, "pass the prior standard deviation, > 0")

    def _logpdf_in(self, x: np.ndarray) -> np.ndarray:
        z = (x - self.mean) / self.sd
        return -0.5 * z * z - _LOG_SQRT_2PI - math.log(self.sd)

    def _cdf_in(self, x: np.ndarray) -> np.ndarray:
        return special.ndtr((x - self.mean) / self.sd)

    def derivative_form(self) -> tuple[float, float, float, float]:
        """:meth:`Hyperprior.derivative_form`: ``d/du log p = −(u − mean)/sd²``."""
        v = self.sd * self.sd
        return (self.mean / v, -1.0 / v, 0.0, 0.0)

    def _ppf_in(self, p: np.ndarray) -> np.ndarray:
        return self.mean + self.sd * special.ndtri(p)

    def _statement(self, name: str) -> str:
        return f"normal prior on {name}: {name} ~ N({_fmt(self.mean)}, {_fmt(self.sd)}²)"

    def _params_repr(self) -> str:
        return f"mean={self.mean!r}, sd={self.sd!r}"
