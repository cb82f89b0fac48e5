"""Poisson counts with exposure: ``y ~ Poisson(E · exp(η))``, one count per observed cell.

``log L_i(η) = y_i (η + log E_i) − E_i e^η − lgamma(y_i + 1)``; ``aux_obs`` holds ``log E_i`` and
``constant = −Σ lgamma(y_i + 1)``.  Exposure is typically the area of cell ∩ window (DESIGN §9).
"""

from __future__ import annotations

import numpy as np
from scipy import special

from ..errors import InvalidDataError
from . import _kernels
from .base import (
    Likelihood,
    as_data,
    as_mask,
    check_finite_data,
    per_site_array,
    raise_first,
)

__all__ = ["Poisson"]


class Poisson(Likelihood):
    """Poisson likelihood with log link and exposure.

    Parameters
    ----------
    counts : array_like
        Non-negative integer counts, shape ``shape`` (any number of axes ≥ 1).  Masked-out cells
        may hold anything (NaN included).
    exposure : float or array_like, default 1.0
        ``E`` in ``λ = E · exp(η)``: a scalar or an array of ``shape``; finite and > 0 at
        observed cells.
    mask : array_like of bool, optional
        True where a cell is observed; default all True.

    Raises
    ------
    InvalidDataError
        Non-finite, negative or non-integer counts, or non-positive / non-finite exposure at an
        observed cell (the message names the first index), or a mask with no observed cell.
    ShapeMismatchError
        ``exposure`` or ``mask`` shape differs from ``counts``.
    InvalidParameterError
        ``mask`` is not boolean.

    Notes
    -----
    Taylor approximation (eq. 13): center ``log(y/E)``, precision ``y`` for ``y > 0``; ``y = 0``
    has its maximum at −∞ and gets precision 0.
    """

    site_logpdf = staticmethod(_kernels.poisson_logpdf)
    _site_logpdf_np = staticmethod(_kernels.poisson_logpdf_np)
    _kind = _kernels.POISSON
    name = "poisson"

    def __init__(
        self, counts: np.ndarray, exposure: float | np.ndarray = 1.0, mask: np.ndarray | None = None
    ) -> None:
        y = as_data("counts", counts)
        obs = as_mask(mask, y.shape, "counts")
        check_finite_data("counts", y, obs)
        raise_first(
            obs & (y < 0),
            y,
            lambda val, idx: f"counts has a negative value {val!r} at index {idx}; counts must "
            f"be non-negative integers — fix the data or mask it explicitly.",
        )
        raise_first(
            obs & (y != np.floor(y)),
            y,
            lambda val, idx: f"counts has a non-integer value {val!r} at index {idx}; counts "
            f"must be non-negative integers — round the data if they are counts, use a "
            f"Gaussian likelihood for continuous data, or mask the cell explicitly.",
        )
        e = _exposure(exposure, y.shape, obs)
        log_e = np.zeros(y.shape)
        log_e[obs] = np.log(e[obs])
        self._set_sites(y, obs, log_e)
        self.constant = float(-np.sum(special.gammaln(self.y_obs + 1.0)))

    def _taylor(self) -> tuple[np.ndarray, np.ndarray]:
        y = self.y_obs
        positive = y > 0
        precision = np.where(positive, y, 0.0)
        center = np.zeros_like(y)
        center[positive] = np.log(y[positive]) - self.aux_obs[positive]
        return precision, center


def _exposure(exposure: object, shape: tuple[int, ...], obs: np.ndarray) -> np.ndarray:
    if np.ndim(exposure) == 0:
        try:
            e = float(exposure)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise InvalidDataError(
                f"exposure={exposure!r} is not a number; pass a finite number > 0 or an array "
                f"of the counts' shape."
            ) from None
        if not (np.isfinite(e) and e > 0.0):
            raise InvalidDataError(
                f"exposure={exposure!r} must be finite and > 0 (it multiplies the intensity); "
                f"pass the cell areas or 1.0."
            )
    arr = per_site_array("exposure", exposure, shape, "counts")
    raise_first(
        obs & ~(np.isfinite(arr) & (arr > 0.0)),
        arr,
        lambda val, idx: f"exposure has a non-positive or non-finite value {val!r} at index "
        f"{idx}; exposure must be finite and > 0 at observed cells — mask cells with no "
        f"exposure explicitly (mask[{idx}] = False).",
    )
    return arr
