"""Binomial counts: ``y ~ Binomial(n, g⁻¹(η))`` with a logit or probit link, per observed cell.

* logit: ``log L_i(η) = y η − n softplus(η) + log C(n, y)``;
* probit: ``log L_i(η) = y log Φ(η) + (n − y) log Φ(−η) + log C(n, y)``.

``aux_obs`` holds the number of trials ``n_i`` and ``constant = Σ log C(n_i, y_i)`` — the
binomial coefficient is left out of the site function and summed into the constant, as the
Poisson likelihood does with ``−lgamma(y + 1)``.  A cell with ``n = 0`` stays an observed site
that contributes nothing: ℓ ≡ 0, derivatives 0, site fits with precision 0 (``c = m``), Taylor
precision 0.  With ``n = 1`` every site is the :class:`~.bernoulli.Bernoulli` site of the same
link, bit for bit.  It serves the GPDS's lattice path (Adams, Murray & MacKay 2009): per cell,
``y`` data points among ``n`` accepted and rejected proposals, ``Π Φ(g)^y (1 − Φ(g))^(n − y)``.
"""

from __future__ import annotations

import numpy as np
from scipy import special

from ..errors import InvalidDataError, InvalidParameterError
from . import _kernels
from .base import Likelihood, as_data, as_mask, check_finite_data, per_site_array, raise_first
from .bernoulli import LINKS

__all__ = ["Binomial"]


class Binomial(Likelihood):
    """Binomial likelihood, ``y`` successes of ``n`` trials, with a logit or probit link.

    Parameters
    ----------
    y : array_like
        Successes, non-negative integers, shape ``shape`` (any number of axes ≥ 1).  Masked-out
        cells may hold anything (NaN included).
    trials : int or array_like
        Trials ``n ≥ y``, non-negative integers: a scalar or an array of ``shape``.  A cell with
        0 trials (and so 0 successes) contributes nothing.
    link : {"logit", "probit"}, default "logit"
        Success probability ``1/(1 + e^{−η})`` or ``Φ(η)``.
    mask : array_like of bool, optional
        True where a cell is observed; default all True.

    Raises
    ------
    InvalidDataError
        Non-finite, negative or non-integer ``y`` or ``trials``, or ``y > trials``, at an
        observed cell (the message names the first index and the value); non-numeric
        ``trials``; a mask with no observed cell.
    InvalidParameterError
        Unknown ``link``; ``mask`` not boolean.
    ShapeMismatchError
        ``trials`` or ``mask`` shape differs from ``y``.

    Notes
    -----
    Taylor approximation (eq. 13): for ``0 < y < n``, center ``η* = g(y/n)`` (logit
    ``log(y/(n − y))``, probit ``Φ⁻¹(y/n)``) and precision ``−ℓ''(η*)`` (logit
    ``y(n − y)/n``); ``y = 0`` and ``y = n`` peak at ∓∞ and, like ``n = 0``, get precision 0
    and center 0.
    """

    def __init__(
        self,
        y: np.ndarray,
        trials: int | np.ndarray,
        link: str = "logit",
        mask: np.ndarray | None = None,
    ) -> None:
        if link not in LINKS:
            raise InvalidParameterError(
                f"link={link!r} is not supported; valid links are "
                f"{', '.join(repr(k) for k in LINKS)}."
            )
        succ = as_data("y", y)
        obs = as_mask(mask, succ.shape, "y")
        check_finite_data("y", succ, obs)
        if np.asarray(trials).dtype.kind not in "biuf":
            raise InvalidDataError(
                f"trials={trials!r} is not numeric; pass the number of trials per cell, a "
                f"non-negative integer or an integer array of y's shape."
            )
        n = per_site_array("trials", trials, succ.shape, "y")
        check_finite_data("trials", n, obs)
        for name, arr in (("y", succ), ("trials", n)):
            raise_first(
                obs & (arr < 0),
                arr,
                lambda val, idx, name=name: f"{name} has a negative value {val!r} at index "
                f"{idx}; successes and trials are non-negative integers — fix the data or "
                f"mask the cell explicitly (mask[{idx}] = False).",
            )
            raise_first(
                obs & (arr != np.floor(arr)),
                arr,
                lambda val, idx, name=name: f"{name} has a non-integer value {val!r} at index "
                f"{idx}; successes and trials are counts — round them if they are counts, or "
                f"mask the cell explicitly (mask[{idx}] = False).",
            )
        raise_first(
            obs & (succ > n),
            succ,
            lambda val, idx: f"y has {val!r} successes at index {idx} but only "
            f"{n[idx].item()!r} trials; pass y ≤ trials (trials counts successes and "
            f"failures together), or mask the cell explicitly (mask[{idx}] = False).",
        )
        self.link = link
        if link == "logit":
            self.site_logpdf = _kernels.binomial_logit_logpdf
            self._site_logpdf_np = _kernels.binomial_logit_logpdf_np
            self._kind = _kernels.BINOMIAL_LOGIT
        else:
            self.site_logpdf = _kernels.binomial_probit_logpdf
            self._site_logpdf_np = _kernels.binomial_probit_logpdf_np
            self._kind = _kernels.BINOMIAL_PROBIT
        self.name = f"binomial-{link}"
        self._set_sites(succ, obs, np.where(obs, n, 0.0))
        y_o, n_o = self.y_obs, self.aux_obs
        # log C(n, y), the term the site function leaves out (0 where n = 0)
        self.constant = float(np.sum(special.gammaln(n_o + 1.0) - special.gammaln(y_o + 1.0)
                                     - special.gammaln(n_o - y_o + 1.0)))

    @property
    def trials_obs(self) -> np.ndarray:
        """float64 ``(n_obs,)``: the trials at the observed cells (``aux_obs`` itself)."""
        return self.aux_obs

    def _taylor(self) -> tuple[np.ndarray, np.ndarray]:
        y, n = self.y_obs, self.aux_obs
        inner = (y > 0.0) & (y < n)
        center = np.zeros(self.n_obs)
        precision = np.zeros(self.n_obs)
        if inner.any():
            yi, ni = y[inner], n[inner]
            if self.link == "logit":
                center[inner] = np.log(yi / (ni - yi))
            else:
                center[inner] = special.ndtri(yi / ni)
            precision[inner] = -_kernels.obs_deriv_kernel(
                self._kind, 2, np.ascontiguousarray(center[inner]), np.ascontiguousarray(yi),
                np.ascontiguousarray(ni))
        return precision, center
