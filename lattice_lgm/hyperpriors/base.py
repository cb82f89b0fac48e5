"""The hyperprior base: support, densities, the unconstrained scale and statements.

:class:`Hyperprior` handles the support, NaN, scalars versus arrays and floating-point
warnings around its subclasses' hooks; :class:`_PositiveTruncated` adds the truncation of a
positive prior to ``(0, upper]`` and its renormalisation.  The families are in
:mod:`.distributions` and :mod:`.pc`; the conventions (supports, transforms) are stated in the
package docstring (:mod:`lattice_lgm.hyperpriors`).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Literal

import numpy as np

from .._validation import positive_float
from ..errors import InvalidParameterError

ArrayLike = float | np.ndarray

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


# --------------------------------------------------------------------------------------------
# argument checks of the hyperpriors (positive numbers go through _validation.positive_float)
# --------------------------------------------------------------------------------------------
def _finite_float(name: str, value: float, remedy: str = "pass a finite number") -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InvalidParameterError(f"{name}={value!r} is not a number; {remedy}.") from None
    if not math.isfinite(v):
        raise InvalidParameterError(f"{name}={value!r} must be finite; {remedy}.")
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
