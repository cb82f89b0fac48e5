"""Sigmoidal Poisson counts: ``y ~ Poisson(e · Φ(η))`` with a logistic or normal Φ, per cell.

``log L_i(η) = y log Φ(η) − e Φ(η) + y log e − log y!``; ``aux_obs`` holds the exposure ``e``
and ``constant = Σ_{y > 0} (y log e − log y!)`` — the terms the site function leaves out, as the
Poisson likelihood leaves out ``−lgamma(y + 1)``.  It is the sigmoidal Gaussian Cox process of
Adams, Murray & MacKay (2009, ICML) on a lattice: the GPDS's density ``π(x) Φ(g(x)) / Z[g]``
with the normalisation ``Z`` traded for a scale λ, an inhomogeneous Poisson process of
intensity ``λ π(x) Φ(g(x))``, so cell ``c`` holds ``Poisson(λ π_c Φ(g_c))`` points
(``e_c = λ π_c``; lattice_lgm/gpds/lattice.py).  A cell with ``e = 0`` (and so ``y = 0``)
stays an observed site that contributes nothing: ℓ ≡ 0, derivatives 0, site fits ``Π = 0``,
``c = m``, Taylor precision 0.  Unlike every other likelihood here ℓ is not concave (it
saturates at ``−e`` as ``η → ∞``); its site fits are in :mod:`._sigmoid_fits`.
"""

from __future__ import annotations

import numpy as np
from scipy import special

from ..errors import InvalidDataError, InvalidParameterError
from . import _kernels
from .base import Likelihood, as_data, as_mask, check_finite_data, per_site_array, raise_first
from .bernoulli import LINKS

__all__ = ["SigmoidPoisson"]


class SigmoidPoisson(Likelihood):
    """Poisson counts with rate ``exposure · Φ(η)``, ``Φ`` logistic or standard normal CDF.

    Parameters
    ----------
    y : array_like
        Counts, non-negative integers, shape ``shape`` (any number of axes ≥ 1).  Masked-out
        cells may hold anything (NaN included).
    exposure : float or array_like
        ``e ≥ 0`` in the rate ``e Φ(η)`` (the most the rate can reach): a scalar or an array of
        ``shape``, finite.  A cell with ``e = 0`` must have ``y = 0`` and contributes nothing.
    link : {"logit", "probit"}, default "logit"
        ``Φ(η) = 1/(1 + e^{−η})`` or the standard normal CDF.
    mask : array_like of bool, optional
        True where a cell is observed; default all True.

    Raises
    ------
    InvalidDataError
        Non-finite, negative or non-integer ``y``; non-finite or negative ``exposure``;
        ``y > 0`` where ``exposure = 0`` (each at an observed cell, the message naming the
        first index and the value); non-numeric ``exposure``; a mask with no observed cell.
    InvalidParameterError
        Unknown ``link``; ``mask`` not boolean.
    ShapeMismatchError
        ``exposure`` or ``mask`` shape differs from ``y``.

    Notes
    -----
    Taylor approximation (eq. 13): for ``0 < y < e`` the site likelihood peaks at
    ``Φ(η*) = y/e`` with precision ``−ℓ''(η*)`` (logit ``y(e − y)²/e²``, probit
    ``e² φ(η*)²/y``); ``y = 0`` (maximum at −∞), ``y ≥ e`` (at +∞) and ``e = 0`` get precision 0
    and center 0.
    """

    def __init__(
        self,
        y: np.ndarray,
        exposure: float | np.ndarray,
        link: str = "logit",
        mask: np.ndarray | None = None,
    ) -> None:
        if link not in LINKS:
            raise InvalidParameterError(
                f"link={link!r} is not supported; valid links are "
                f"{', '.join(repr(k) for k in LINKS)}."
            )
        counts = as_data("y", y)
        obs = as_mask(mask, counts.shape, "y")
        check_finite_data("y", counts, obs)
        if np.asarray(exposure).dtype.kind not in "biuf":
            raise InvalidDataError(
                f"exposure={exposure!r} is not numeric; pass the exposure per cell (λ·π_c on "
                f"the GPDS's lattice), a finite number ≥ 0 or an array of y's shape."
            )
        e = per_site_array("exposure", exposure, counts.shape, "y")
        check_finite_data("exposure", e, obs)
        raise_first(
            obs & (counts < 0),
            counts,
            lambda val, idx: f"y has a negative value {val!r} at index {idx}; counts are "
            f"non-negative integers — fix the data or mask the cell explicitly "
            f"(mask[{idx}] = False).",
        )
        raise_first(
            obs & (counts != np.floor(counts)),
            counts,
            lambda val, idx: f"y has a non-integer value {val!r} at index {idx}; y holds "
            f"counts — round them if they are counts, or mask the cell explicitly "
            f"(mask[{idx}] = False).",
        )
        raise_first(
            obs & (e < 0),
            e,
            lambda val, idx: f"exposure has a negative value {val!r} at index {idx}; the "
            f"exposure scales a rate and is ≥ 0 — fix it or mask the cell explicitly "
            f"(mask[{idx}] = False).",
        )
        raise_first(
            obs & (e == 0) & (counts > 0),
            counts,
            lambda val, idx: f"y has {val!r} points at index {idx} where the exposure is 0 "
            f"(a rate of 0 makes no points); give the cell a positive exposure, or mask it "
            f"explicitly (mask[{idx}] = False).",
        )
        self.link = link
        if link == "logit":
            self.site_logpdf = _kernels.sigpois_logit_logpdf
            self._site_logpdf_np = _kernels.sigpois_logit_logpdf_np
            self._kind = _kernels.SIGPOIS_LOGIT
        else:
            self.site_logpdf = _kernels.sigpois_probit_logpdf
            self._site_logpdf_np = _kernels.sigpois_probit_logpdf_np
            self._kind = _kernels.SIGPOIS_PROBIT
        self.name = f"sigmoid-poisson-{link}"
        self._set_sites(counts, obs, np.where(obs, e, 0.0))
        y_o, e_o = self.y_obs, self.aux_obs
        pos = y_o > 0.0  # y log e − log y!, 0 where y = 0 (e = 0 included)
        self.constant = float(np.sum(y_o[pos] * np.log(e_o[pos])
                                     - special.gammaln(y_o[pos] + 1.0)))

    @property
    def exposure_obs(self) -> np.ndarray:
        """float64 ``(n_obs,)``: the exposure at the observed cells (``aux_obs`` itself)."""
        return self.aux_obs

    def _taylor(self) -> tuple[np.ndarray, np.ndarray]:
        y, e = self.y_obs, self.aux_obs
        inner = (y > 0.0) & (y < e)
        center = np.zeros(self.n_obs)
        precision = np.zeros(self.n_obs)
        if inner.any():
            yi, ei = y[inner], e[inner]
            if self.link == "logit":
                center[inner] = np.log(yi / (ei - yi))
            else:
                center[inner] = special.ndtri(yi / ei)
            precision[inner] = -_kernels.obs_deriv_kernel(
                self._kind, 2, np.ascontiguousarray(center[inner]), np.ascontiguousarray(yi),
                np.ascontiguousarray(ei))
        return precision, center
