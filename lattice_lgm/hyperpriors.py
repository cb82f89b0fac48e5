"""Priors for covariance hyperparameters, each with its support stated explicitly.

Every prior is a normalised density on the natural scale (``logpdf`` integrates to 1 over the
support, truncated priors included) together with the bijection to the unconstrained scale the
samplers move on: ``"log"`` for positive parameters (range, sd, lengthscale), ``"identity"`` for
real ones (intercepts, regression coefficients, the mean offset).  ``logpdf_unconstrained`` is
the density of ``u = transform(x)``, Jacobian included, so a slice sampler on ``u`` targets the
right distribution.

A finite ``upper`` bound matters for the range: a circulant embedding is sized for the largest
range it will ever see, so the prior is truncated to ``(0, upper]`` and renormalised; the sampler
is told the bound (``unconstrained_bounds``) and never proposes beyond it.

Supports
--------
Positive (``transform="log"``) priors have support ``(0, upper]`` (``upper`` may be ``inf``; the
lower end 0 is excluded) except :class:`LogUniform`, whose support is ``[lower, upper]``.
Real (``transform="identity"``) priors have support ``[lower, upper]`` (``(-inf, inf)`` for
:class:`Normal`).  Infinite or NaN arguments are never in the support: ``logpdf`` returns
``-inf`` outside the support and NaN for a NaN argument, and never raises for a float.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Literal

import numpy as np
from scipy import special

from ._validation import positive_float, positive_int
from .errors import InvalidParameterError

__all__ = [
    "HalfNormal",
    "Hyperprior",
    "LogNormal",
    "LogUniform",
    "Normal",
    "PCPriorRange",
    "PCPriorSD",
    "Uniform",
]

ArrayLike = float | np.ndarray

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


# --------------------------------------------------------------------------------------------
# argument checks specific to this module (positive numbers go through _validation.positive_float)
# --------------------------------------------------------------------------------------------
def _finite_float(name: str, value: float, remedy: str = "pass a finite number") -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InvalidParameterError(f"{name}={value!r} is not a number; {remedy}.") from None
    if not math.isfinite(v):
        raise InvalidParameterError(f"{name}={value!r} must be finite; {remedy}.")
    return v


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


def _optional_upper(value: float | None) -> float:
    if value is None:
        return math.inf
    return positive_float(
        "upper", value, "pass a finite bound > 0, or upper=None for an untruncated prior"
    )


def _open_unit(rng: np.random.Generator, size: int | tuple[int, ...] | None) -> np.ndarray:
    """Uniform draws on the open interval (0, 1): ``rng.random`` with exact zeros redrawn."""
    if not isinstance(rng, np.random.Generator):
        raise InvalidParameterError(
            f"rng={rng!r} is not a numpy.random.Generator; pass np.random.default_rng(seed)."
        )
    p = np.asarray(rng.random(size))
    while True:  # P(a zero) = 2**-53 per draw; redrawing keeps the draws exactly uniform on (0,1)
        zero = p == 0.0
        if not zero.any():
            return p
        if p.ndim == 0:
            p = np.asarray(rng.random())
        else:
            p[zero] = rng.random(int(zero.sum()))


def _fmt(x: float) -> str:
    return f"{x:g}"


def _as_output(out: np.ndarray, scalar: bool) -> ArrayLike:
    return float(out) if scalar else out


class Hyperprior(ABC):
    """A prior for one scalar hyperparameter, with explicit support and unconstrained transform.

    Attributes
    ----------
    lower, upper : float
        The support on the natural scale (``lower`` is excluded when it is 0 for a ``"log"``
        prior; see the module notes).
    transform : {"log", "identity"}
        The map to the unconstrained scale: ``u = log(x)`` or ``u = x``.

    Notes
    -----
    Subclasses implement the private hooks ``_logpdf_in`` / ``_cdf_in`` / ``_ppf_in`` for
    arguments inside the support (resp. probabilities in (0, 1)); the public methods here handle
    the support, NaN, scalars versus arrays and floating-point warnings.
    """

    lower: float
    upper: float
    transform: Literal["log", "identity"]
    #: noun used by :meth:`describe` when no name is given
    _default_name: str = "x"

    # ---------------------------------------------------------------- hooks
    @abstractmethod
    def _logpdf_in(self, x: np.ndarray) -> np.ndarray:
        """Log density at points strictly inside the support."""

    @abstractmethod
    def _cdf_in(self, x: np.ndarray) -> np.ndarray:
        """CDF at points inside the support."""

    @abstractmethod
    def _ppf_in(self, p: np.ndarray) -> np.ndarray:
        """Quantile function at probabilities in the open interval (0, 1)."""

    @abstractmethod
    def _statement(self, name: str) -> str:
        """The one-line description with the parameter called ``name``."""

    @abstractmethod
    def _params_repr(self) -> str:
        """``key=value`` list for ``__repr__``."""

    # ---------------------------------------------------------------- support
    def _in_support(self, x: np.ndarray) -> np.ndarray:
        inside = np.isfinite(x) & (x >= self.lower) & (x <= self.upper)
        if self.transform == "log":
            inside &= x > 0.0
        return inside

    # ---------------------------------------------------------------- densities
    def logpdf(self, x: ArrayLike) -> ArrayLike:
        """Normalised log density on the natural scale.

        Parameters
        ----------
        x : float or ndarray
            Points on the natural scale.

        Returns
        -------
        float or ndarray
            ``log π(x)``; ``-inf`` outside the support, NaN where ``x`` is NaN.
        """
        xa = np.asarray(x, dtype=np.float64)
        if xa.ndim == 0:
            # one point (what samplers ask, several times per transition): the same numbers
            # without the masks, at a fraction of their cost
            if math.isnan(float(xa)):
                return math.nan
            if not self._in_support(xa):
                return -math.inf
            with np.errstate(all="ignore"):
                return float(self._logpdf_in(xa.reshape(1))[0])
        out = np.full(xa.shape, -np.inf)
        inside = self._in_support(xa)
        with np.errstate(all="ignore"):
            if inside.any():
                out[inside] = self._logpdf_in(xa[inside])
        out[np.isnan(xa)] = np.nan
        return _as_output(out, xa.ndim == 0)

    def cdf(self, x: ArrayLike) -> ArrayLike:
        """Cumulative distribution function ``P(X <= x)`` on the natural scale."""
        xa = np.asarray(x, dtype=np.float64)
        out = np.where(xa >= self.upper, 1.0, 0.0)
        inside = self._in_support(xa)
        with np.errstate(all="ignore"):
            if inside.any():
                out[inside] = np.clip(self._cdf_in(xa[inside]), 0.0, 1.0)
        out[np.isnan(xa)] = np.nan
        return _as_output(out, xa.ndim == 0)

    def ppf(self, p: ArrayLike) -> ArrayLike:
        """Quantile function, the inverse of :meth:`cdf`.

        ``ppf(0)`` and ``ppf(1)`` are the ends of the support; probabilities outside [0, 1] or
        NaN give NaN.
        """
        pa = np.asarray(p, dtype=np.float64)
        out = np.full(pa.shape, np.nan)
        out[pa == 0.0] = self.lower
        out[pa == 1.0] = self.upper
        inner = (pa > 0.0) & (pa < 1.0)
        with np.errstate(all="ignore"):
            if inner.any():
                # round-off must not push a quantile past a bound of the support
                out[inner] = np.clip(self._ppf_in(pa[inner]), self.lower, self.upper)
        return _as_output(out, pa.ndim == 0)

    def sample(
        self, rng: np.random.Generator, size: int | tuple[int, ...] | None = None
    ) -> ArrayLike:
        """Exact draws by inversion, ``ppf(U)`` with ``U`` uniform on the open interval (0, 1).

        Parameters
        ----------
        rng : numpy.random.Generator
            Source of randomness (one ``rng.random(size)`` call, plus a redraw of any exact 0).
        size : int or tuple of int, optional
            Output shape; ``None`` returns a float.

        Returns
        -------
        float or ndarray
            Draws inside the support.
        """
        return self.ppf(_open_unit(rng, size))

    # ---------------------------------------------------------------- unconstrained scale
    def to_unconstrained(self, x: ArrayLike) -> ArrayLike:
        """``u = log(x)`` (``"log"``) or ``u = x`` (``"identity"``)."""
        xa = np.asarray(x, dtype=np.float64)
        if self.transform == "log":
            with np.errstate(divide="ignore", invalid="ignore"):
                xa = np.log(xa)
        return _as_output(xa, xa.ndim == 0)

    def from_unconstrained(self, u: ArrayLike) -> ArrayLike:
        """``x = exp(u)`` (``"log"``) or ``x = u`` (``"identity"``)."""
        ua = np.asarray(u, dtype=np.float64)
        if self.transform == "log":
            with np.errstate(over="ignore"):
                ua = np.exp(ua)
        return _as_output(ua, ua.ndim == 0)

    def logpdf_unconstrained(self, u: ArrayLike) -> ArrayLike:
        """Log density of ``u = transform(x)``, Jacobian included.

        For ``"log"`` this is ``logpdf(exp(u)) + u``; for ``"identity"`` it is ``logpdf(u)``.
        ``-inf`` outside :attr:`unconstrained_bounds` (and at ``u = ±inf``), NaN for NaN.
        """
        ua = np.asarray(u, dtype=np.float64)
        if self.transform == "identity":
            return self.logpdf(u)
        if ua.ndim == 0:
            v = float(ua)
            if math.isinf(v):
                return -math.inf     # exp(±inf) is 0 or inf: no mass there
            with np.errstate(over="ignore", invalid="ignore"):
                return self.logpdf(np.exp(ua)) + v
        with np.errstate(over="ignore", invalid="ignore"):
            out = np.asarray(self.logpdf(np.exp(ua)), dtype=np.float64) + ua
        out = np.where(np.isinf(ua), -np.inf, out)  # exp(±inf) is 0 or inf: no mass there
        return _as_output(out, ua.ndim == 0)

    def dlogpdf_unconstrained(self, u: float) -> float:
        """``d/du`` of :meth:`logpdf_unconstrained` at one point inside the support.

        Analytic where a subclass gives :meth:`_dlogpdf_u`; otherwise a central difference
        (step ``1e-6 · max(1, |u|)``, one-sided at a bound of the support).

        Parameters
        ----------
        u : float
            A point of the unconstrained scale inside :attr:`unconstrained_bounds`.

        Returns
        -------
        float
        """
        u = float(u)
        exact = self._dlogpdf_u(u)
        if exact is not None:
            return exact
        e = 1e-6 * max(1.0, abs(u))
        lo_b, hi_b = self.unconstrained_bounds
        a, c = max(u - e, lo_b), min(u + e, hi_b)
        return (float(self.logpdf_unconstrained(c)) - float(self.logpdf_unconstrained(a))) / (
            c - a)

    def _dlogpdf_u(self, u: float) -> float | None:
        """The analytic derivative of :meth:`logpdf_unconstrained`, or None (differences)."""
        form = self.derivative_form()
        if form is None:
            return None
        a, b, c, d = form
        return a + b * u + (c * math.exp(d * u) if c != 0.0 else 0.0)

    def derivative_form(self) -> tuple[float, float, float, float] | None:
        """``(a, b, c, d)`` with ``d/du log p(u) = a + b·u + c·exp(d·u)``, or None.

        The derivative of :meth:`logpdf_unconstrained` (Jacobian included) inside the
        support, in one closed form that every built-in family takes (normal and log-normal:
        linear; PC and half-normal: an exponential; uniform and log-uniform: constant).
        :meth:`dlogpdf_unconstrained` evaluates it, and so does the compiled gradient of
        joint HMC (:mod:`lattice_lgm.samplers.hmc`).  None (a subclass without one): central
        differences, and joint HMC's general path.
        """
        return None

    @property
    def unconstrained_bounds(self) -> tuple[float, float]:
        """The support on the unconstrained scale, e.g. ``(-inf, log(upper))``."""
        if self.transform == "log":
            lo = math.log(self.lower) if self.lower > 0.0 else -math.inf
            hi = math.log(self.upper) if math.isfinite(self.upper) else math.inf
            return (lo, hi)
        return (self.lower, self.upper)

    # ---------------------------------------------------------------- statements
    def describe(self, name: str | None = None) -> str:
        """One line stating the prior, INLA-style.

        Parameters
        ----------
        name : str, optional
            What the hyperparameter is called (default: ``"range"`` for :class:`PCPriorRange`,
            ``"sd"`` for :class:`PCPriorSD`, ``"x"`` otherwise).

        Examples
        --------
        >>> PCPriorRange(0.1, 0.05, ndim=2, upper=2.0).describe()
        'PC prior on range (d=2): P(range < 0.1) = 0.05, range ≤ 2'
        """
        return self._statement(self._default_name if name is None else name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._params_repr()})"


class _PositiveTruncated(Hyperprior):
    """A positive prior with an optional truncation to ``(0, upper]``, renormalised.

    Subclasses give the *untruncated* log density, log CDF and a quantile function of the log
    probability (so a tiny ``F(upper)`` does not underflow); the normaliser ``log F(upper)``
    is subtracted here.
    """

    transform = "log"

    def _init_support(self, upper: float | None) -> None:
        self.lower = 0.0
        self.upper = _optional_upper(upper)
        self._log_norm = (
            float(self._logcdf0(np.asarray(self.upper))) if math.isfinite(self.upper) else 0.0
        )

    @property
    def upper_bound(self) -> float:
        """The truncation point (``inf`` for an untruncated prior)."""
        return self.upper

    @abstractmethod
    def _logpdf0(self, x: np.ndarray) -> np.ndarray: ...

    @abstractmethod
    def _logcdf0(self, x: np.ndarray) -> np.ndarray: ...

    @abstractmethod
    def _ppf0_log(self, log_p: np.ndarray) -> np.ndarray: ...

    def _logpdf_in(self, x: np.ndarray) -> np.ndarray:
        return self._logpdf0(x) - self._log_norm

    def _cdf_in(self, x: np.ndarray) -> np.ndarray:
        return np.exp(self._logcdf0(x) - self._log_norm)

    def _ppf_in(self, p: np.ndarray) -> np.ndarray:
        return self._ppf0_log(np.log(p) + self._log_norm)

    def _truncation(self, name: str) -> str:
        return f", {name} ≤ {_fmt(self.upper)}" if math.isfinite(self.upper) else ""

    def _upper_repr(self) -> str:
        return f", upper={self.upper!r}" if math.isfinite(self.upper) else ""


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
