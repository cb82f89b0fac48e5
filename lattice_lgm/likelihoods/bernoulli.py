"""Binary observations: ``y ~ Bernoulli(g⁻¹(η))`` with a logit or probit link.

* logit: ``log L_i(η) = y η − log(1 + e^η) = −softplus(−sη)``, ``s = 2y − 1``;
* probit: ``log L_i(η) = log Φ(sη)``.

There is no constant (``constant = 0``) and ``aux_obs`` is 0.  Every site's likelihood is
monotone in η, so its maximum is at ±∞: the Taylor approximation gives precision 0 everywhere.
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidParameterError
from . import _kernels
from .base import Likelihood, as_data, as_mask, check_finite_data, raise_first

__all__ = ["LINKS", "Bernoulli"]

#: links accepted by :class:`Bernoulli`
LINKS = ("logit", "probit")


class Bernoulli(Likelihood):
    """Bernoulli likelihood with a logit or probit link.

    Parameters
    ----------
    y : array_like
        Labels in {0, 1} (bool accepted), shape ``shape`` (any number of axes ≥ 1).
    link : {"logit", "probit"}, default "logit"
        ``P(y = 1) = 1/(1 + e^{−η})`` or ``Φ(η)``.
    mask : array_like of bool, optional
        True where a cell is observed; default all True.

    Raises
    ------
    InvalidDataError
        A non-finite label or one outside {0, 1} at an observed cell (the message names the
        first index; ±1 labels: pass ``(y + 1) / 2``), or a mask with no observed cell.
    InvalidParameterError
        Unknown ``link``; ``mask`` not boolean.
    ShapeMismatchError
        ``mask`` shape differs from ``y``.
    """

    def __init__(self, y: np.ndarray, link: str = "logit", mask: np.ndarray | None = None) -> None:
        if link not in LINKS:
            raise InvalidParameterError(
                f"link={link!r} is not supported; valid links are "
                f"{', '.join(repr(k) for k in LINKS)}."
            )
        labels = as_data("y", y)
        obs = as_mask(mask, labels.shape, "y")
        check_finite_data("y", labels, obs)
        raise_first(
            obs & (labels != 0.0) & (labels != 1.0),
            labels,
            lambda val, idx: f"y has label {val!r} at index {idx}, outside {{0, 1}}; Bernoulli "
            f"labels must be 0 or 1 (for ±1 labels pass (y + 1) / 2), or mask the cell "
            f"explicitly.",
        )
        self.link = link
        # per instance (not per class): the link picks the site function and kernel branch
        if link == "logit":
            self.site_logpdf = _kernels.bernoulli_logit_logpdf
            self._site_logpdf_np = _kernels.bernoulli_logit_logpdf_np
            self._kind = _kernels.LOGIT
        else:
            self.site_logpdf = _kernels.bernoulli_probit_logpdf
            self._site_logpdf_np = _kernels.bernoulli_probit_logpdf_np
            self._kind = _kernels.PROBIT
        self.name = f"bernoulli-{link}"
        self._set_sites(labels, obs, np.zeros(labels.shape))
        self.constant = 0.0

    def _taylor(self) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros(self.n_obs), np.zeros(self.n_obs)

