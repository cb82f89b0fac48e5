"""Gaussian observations with known noise: ``y ~ N(η, σ²)`` per observed cell.

``log L_i(η) = −½ τ_i (y_i − η)² + ½ log(τ_i/2π)`` with precision ``τ_i = 1/σ_i²``; ``aux_obs``
holds ``τ_i`` and ``constant = Σ ½ log(τ_i/2π)``.  Every site approximation is exact here:
precision ``τ_i`` and center ``y_i`` whatever the prior.
"""

from __future__ import annotations

import numpy as np

from .._validation import positive_float
from ..errors import InvalidParameterError
from . import _kernels
from .base import (
    Likelihood,
    SiteApproximation,
    as_data,
    as_mask,
    check_finite_data,
    per_site_array,
    raise_first,
)

__all__ = ["Gaussian"]


class Gaussian(Likelihood):
    """Gaussian likelihood with known noise standard deviation.

    Parameters
    ----------
    y : array_like
        Observations, shape ``shape`` (any number of axes ≥ 1); finite at observed cells.
    noise_sd : float or array_like
        Noise standard deviation σ, a scalar or an array of ``shape``; finite and > 0 at
        observed cells.
    mask : array_like of bool, optional
        True where a cell is observed; default all True.

    Raises
    ------
    InvalidDataError
        Non-finite ``y`` at an observed cell (the message names the first index), or a mask with
        no observed cell.
    InvalidParameterError
        ``noise_sd`` not finite and > 0 (at observed cells); ``mask`` not boolean.
    ShapeMismatchError
        ``noise_sd`` or ``mask`` shape differs from ``y``.
    """

    site_logpdf = staticmethod(_kernels.gaussian_logpdf)
    _site_logpdf_np = staticmethod(_kernels.gaussian_logpdf_np)
    _kind = _kernels.GAUSSIAN
    name = "gaussian"

    def __init__(
        self, y: np.ndarray, noise_sd: float | np.ndarray, mask: np.ndarray | None = None
    ) -> None:
        data = as_data("y", y)
        obs = as_mask(mask, data.shape, "y")
        check_finite_data("y", data, obs)
        if np.ndim(noise_sd) == 0:
            positive_float("noise_sd", noise_sd, "pass the observation noise standard deviation")
        sd = per_site_array("noise_sd", noise_sd, data.shape, "y")
        raise_first(
            obs & ~(np.isfinite(sd) & (sd > 0.0)),
            sd,
            lambda val, idx: f"noise_sd has a non-positive or non-finite value {val!r} at index "
            f"{idx}; noise standard deviations must be finite and > 0 at observed cells.",
            InvalidParameterError,
        )
        precision = np.ones(data.shape)
        precision[obs] = 1.0 / (sd[obs] * sd[obs])
        self._set_sites(data, obs, precision)
        self.constant = float(np.sum(0.5 * np.log(self.aux_obs / (2.0 * np.pi))))

    def _exact_site_approximation(
        self, out_shape: tuple[int, ...], method: str
    ) -> SiteApproximation:
        precision = np.array(np.broadcast_to(self.aux_obs, out_shape))
        center = np.array(np.broadcast_to(self.y_obs, out_shape))
        return SiteApproximation(precision=precision, center=center, method=method)

    def _taylor(self) -> tuple[np.ndarray, np.ndarray]:
        return self.aux_obs.copy(), self.y_obs.copy()
