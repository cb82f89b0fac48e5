"""The GPDS's base measure ``π`` and squashing function ``Φ`` (Adams, Murray & MacKay 2009, §2).

``f(x) = Φ(g(x)) π(x) / Z_π[g]`` (their eq. 1): ``π`` proposes, ``Φ`` (a sigmoid bounded by 1)
accepts.  A base measure draws proposals, evaluates its log density and says where its mass
is (data outside its support cannot come from the model).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import special
from scipy.linalg import solve_triangular

from .._validation import finite_array
from ..errors import InvalidParameterError

__all__ = ["LINKS", "GaussianBase", "UniformBase", "link"]


def _logistic(z: np.ndarray) -> np.ndarray:
    return special.expit(z)


def _probit(z: np.ndarray) -> np.ndarray:
    return special.ndtr(z)


#: the squashing functions Φ: R → (0, 1) of the paper (§2: "the logistic function or
#: cumulative normal distribution function")
LINKS: dict[str, Callable[[np.ndarray], np.ndarray]] = {"logistic": _logistic,
                                                         "probit": _probit}


def link(name: str) -> Callable[[np.ndarray], np.ndarray]:
    """The squashing function ``Φ`` called ``name`` (:data:`LINKS`)."""
    if name not in LINKS:
        raise InvalidParameterError(
            f"link={name!r} is not one of {sorted(LINKS)}; the paper uses 'logistic' (its "
            "figures and §4) or 'probit' (the cumulative normal).")
    return LINKS[name]


#: ``log Φ`` of each link without underflow or cancellation (``log(1 − Φ(g)) = log Φ(−g)``
#: for both, as both are symmetric: ``log1p(−Φ(g))`` was −inf, with a warning, for logistic
#: ``g`` above ~37)
LOG_LINKS: dict[str, Callable[[np.ndarray], np.ndarray]] = {"logistic": special.log_expit,
                                                             "probit": special.log_ndtr}


def log_link(name: str) -> Callable[[np.ndarray], np.ndarray]:
    """``log Φ`` of the squashing function called ``name``, computed stably."""
    link(name)  # validates the name
    return LOG_LINKS[name]


@dataclass(frozen=True)
class GaussianBase:
    """``π = N(mean, cov)`` on ``R^d`` (the paper's Figure 1: zero mean, unit variance).

    Parameters
    ----------
    mean : array_like, shape (d,)
    cov : array_like, shape (d, d), or (d,) for a diagonal, or a scalar variance
    """

    mean: np.ndarray
    chol: np.ndarray

    @classmethod
    def create(cls, mean, cov=1.0) -> GaussianBase:
        """Validated: a finite mean, a symmetric positive definite covariance."""
        m = np.atleast_1d(np.asarray(mean, dtype=float))
        finite_array("mean", m, "the base measure's mean is finite")
        d = len(m)
        c = np.asarray(cov, dtype=float)
        c = c * np.eye(d) if c.ndim == 0 else np.diag(c) if c.ndim == 1 else c
        if c.shape != (d, d):
            raise InvalidParameterError(
                f"cov has shape {c.shape}; give a variance, ({d},) variances or a ({d}, {d}) "
                f"matrix for a mean of length {d}.")
        finite_array("cov", c, "the base measure's covariance is finite")
        if not np.allclose(c, c.T, rtol=1e-12, atol=0.0):
            raise InvalidParameterError("cov is not symmetric; a covariance matrix is.")
        try:
            chol = np.linalg.cholesky(c)
        except np.linalg.LinAlgError:
            raise InvalidParameterError(
                "cov is not positive definite: the base measure would have no density (no "
                "mass off a subspace); give variances > 0.") from None
        return cls(m, chol)

    @property
    def ndim(self) -> int:
        """Dimension ``d`` of the data space."""
        return len(self.mean)

    @property
    def params(self) -> dict[str, float]:
        """The base measure's parameters φ (§4.3) by name.

        ``mean_<i>`` (the mean of axis ``i``, on the real line) and ``sd_<i>`` (its marginal
        sd ``√cov_ii``, positive), ``i = 0 … d − 1``.
        """
        sd = np.sqrt(np.sum(self.chol**2, axis=1))
        return {**{f"mean_{i}": float(m) for i, m in enumerate(self.mean)},
                **{f"sd_{i}": float(s) for i, s in enumerate(sd)}}

    def with_params(self, **params: float) -> GaussianBase:
        """The same base measure with some of :attr:`params` replaced.

        A new ``sd_<i>`` rescales axis ``i`` and keeps the correlations (``cov → D cov D``
        with ``D = diag(sd_new / sd)``; the factor's row ``i`` scales the same way, so it
        stays a Cholesky factor).  Values are not checked here beyond a positive sd: the
        moves give finite ones.
        """
        known = self.params
        unknown = sorted(set(params) - set(known))
        if unknown:
            raise InvalidParameterError(
                f"GaussianBase has no parameter {unknown[0]!r}; its parameters are "
                f"{sorted(known)} (the mean and marginal sd of each axis).")
        mean = self.mean.copy()
        scale = np.ones(self.ndim)
        for name, value in params.items():
            kind, i = name.rsplit("_", 1)
            if kind == "mean":
                mean[int(i)] = float(value)
            else:
                if not float(value) > 0.0:
                    raise InvalidParameterError(f"{name}={value!r} must be > 0 (an sd).")
                scale[int(i)] = float(value) / known[name]
        return GaussianBase(mean, self.chol * scale[:, None])

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` proposals, shape (n, d)."""
        return self.mean + rng.standard_normal((n, self.ndim)) @ self.chol.T

    def logpdf(self, x: np.ndarray) -> np.ndarray:
        """``log π(x)`` for points ``x`` (n, d)."""
        z = solve_triangular(self.chol, (np.asarray(x, dtype=float) - self.mean).T, lower=True,
                             check_finite=False)
        half_logdet = float(np.sum(np.log(np.diag(self.chol))))
        return -0.5 * np.sum(z * z, axis=0) - half_logdet - 0.5 * self.ndim * math.log(
            2 * math.pi)

    def contains(self, x: np.ndarray) -> np.ndarray:
        """Every finite point is in the support."""
        return np.all(np.isfinite(x), axis=-1)


@dataclass(frozen=True)
class UniformBase:
    """``π`` uniform on the box ``[lower, upper]`` (the paper's Figure 2 uses ``[0, 1]``).

    Parameters
    ----------
    lower, upper : array_like, shape (d,)
    """

    lower: np.ndarray
    upper: np.ndarray

    @classmethod
    def create(cls, lower, upper) -> UniformBase:
        """Validated: finite bounds, ``lower < upper`` on every axis (a box with mass)."""
        lo = np.atleast_1d(np.asarray(lower, dtype=float))
        hi = np.atleast_1d(np.asarray(upper, dtype=float))
        finite_array("lower", lo, "the box's corners are finite")
        finite_array("upper", hi, "the box's corners are finite")
        if lo.shape != hi.shape:
            raise InvalidParameterError(
                f"lower has shape {lo.shape} and upper {hi.shape}; give one bound per axis.")
        if np.any(hi <= lo):
            i = int(np.argmax(hi <= lo))
            raise InvalidParameterError(
                f"the box has no mass: upper[{i}]={hi[i]!r} <= lower[{i}]={lo[i]!r}; give "
                "lower < upper on every axis.")
        return cls(lo, hi)

    @property
    def ndim(self) -> int:
        """Dimension ``d`` of the data space."""
        return len(self.lower)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` proposals, shape (n, d)."""
        return self.lower + (self.upper - self.lower) * rng.random((n, self.ndim))

    def logpdf(self, x: np.ndarray) -> np.ndarray:
        """``log π(x)``: ``−log volume`` inside the box, ``−inf`` outside."""
        inside = self.contains(x)
        return np.where(inside, -float(np.sum(np.log(self.upper - self.lower))), -np.inf)

    def contains(self, x: np.ndarray) -> np.ndarray:
        """Points inside the closed box."""
        x = np.asarray(x, dtype=float)
        return np.all((x >= self.lower) & (x <= self.upper), axis=-1)
