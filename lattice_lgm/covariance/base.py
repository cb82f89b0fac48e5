"""The covariance base class: ``k(d) = sd² rho(u)`` with one parameter vocabulary.

:class:`Covariance` holds ``sd`` and ``range`` (or its alias ``lengthscale``; the range
convention is stated in the package docstring, :mod:`lattice_lgm.covariance`), evaluates the
kernel at lag vectors, on outer grids of per-axis lags and as dense matrices between point
sets, and replaces hyperparameters (:meth:`Covariance.with_params`).  The compiled distance
kernels behind its dense matrices are in :mod:`._distances`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._validation import positive_float, positive_vector
from ..errors import InvalidParameterError, ShapeMismatchError
from ._distances import _PAIRWISE_BLOCK, _as_points, _Distances, _scaled_distances, self_distances

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
        :func:`._distances._scaled_distances` (``d mod 8``, below the remainder), so only that
        one is recomputed, and a move of ``sd`` alone reuses ``u`` as it is
        (:func:`._distances.self_distances`); the result is bitwise what :meth:`__call__`
        computes (tested).  ``None`` where :meth:`__call__` takes the
        ``from_lags`` path (then there is nothing to reuse).
        """
        _, nd = x.shape
        if type(self).from_lags is not Covariance.from_lags or nd > _PAIRWISE_BLOCK:
            return None
        return self_distances(x, self.lengthscales_for(nd), previous)

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
