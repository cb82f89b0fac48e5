"""The GPDS's latent history as a state, and its values' model (Adams, Murray & MacKay 2009, §4).

:class:`LatentHistory` is the state every move of §4 reads and returns (``history`` moves it,
``hyper`` moves the hyperparameters given it).  With the locations fixed, the function values
have the target ``GP(G_N, G_M) Π_n Φ(g_n) Π_m (1 − Φ(g_m))``: a Gaussian prior with a
Bernoulli likelihood, label 1 at the data and 0 at the rejections (:func:`values_model`), on
which the library's elliptical slice sampling (the values) and Murray & Adams (2010)'s
surrogate-data slice sampling (θ jointly with the values) run unchanged.  Both of those moves
build the model here, so they read one and the same target.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..covariance import Covariance
from ..hyperpriors import Hyperprior
from ..likelihoods import Bernoulli
from ..models.latent import LatentGaussianModel
from ..priors import DensePrior
from .base import link
from .prior import JITTER, PriorHistory

__all__ = ["BERNOULLI_LINK", "LatentHistory", "labels", "values_model"]

#: the Bernoulli likelihood's link for each squashing function Φ
BERNOULLI_LINK = {"logistic": "logit", "probit": "probit"}


@dataclass(frozen=True)
class LatentHistory:
    """One state of the latent history.

    Attributes
    ----------
    data : ndarray, shape (N, d)
        The observed points ``D``.
    rejections : ndarray, shape (M, d)
        The latent rejected proposals ``{x_m}``.
    g : ndarray, shape (N + M,)
        The function at the data, then at the rejections: ``(G_N, G_M)``.
    """

    data: np.ndarray
    rejections: np.ndarray
    g: np.ndarray

    @property
    def n_data(self) -> int:
        """``N``."""
        return len(self.data)

    @property
    def n_rejections(self) -> int:
        """``M``."""
        return len(self.rejections)

    @property
    def points(self) -> np.ndarray:
        """Data then rejections, shape (N + M, d): where ``g`` is known."""
        return np.concatenate([self.data, self.rejections])

    @classmethod
    def from_prior(cls, history: PriorHistory) -> LatentHistory:
        """The latent history of a run of Algorithm 1: its acceptances are the data."""
        acc = history.accepted
        return cls(history.x[acc], history.x[~acc],
                   np.concatenate([history.g[acc], history.g[~acc]]))


def labels(n_data: int, n_rejections: int) -> np.ndarray:
    """The acceptances as Bernoulli outcomes: 1 at the data, 0 at the rejections."""
    return np.concatenate([np.ones(n_data), np.zeros(n_rejections)])


def values_model(state: LatentHistory, kernel: Covariance, *, link_name: str = "logistic",
                 mean: float = 0.0, jitter: float = JITTER,
                 hyperpriors: Mapping[str, Hyperprior] | None = None) -> LatentGaussianModel:
    """The values' target at fixed locations as a latent Gaussian model.

    A :class:`~lattice_lgm.priors.DensePrior` over the state's points (data, then rejections)
    with the GP's nugget ``jitter · sd²`` (absolute, at ``kernel``'s sd), and a
    :class:`~lattice_lgm.likelihoods.Bernoulli` likelihood with :func:`labels` (the
    ``Π_n Φ(g_n) Π_m (1 − Φ(g_m))`` of eq. 3): logit link for ``"logistic"``, probit for
    ``"probit"``.  The model's field is ``g − mean``.

    Parameters
    ----------
    state : LatentHistory
    kernel : Covariance
    link_name : {"logistic", "probit"}
    mean : float
        The GP's constant mean (the model's fixed mean offset).
    jitter : float
        Relative nugget (× sd²).
    hyperpriors : mapping of str to Hyperprior, optional
        The model's sampled hyperparameters (its names: ``sd``, ``range``).

    Returns
    -------
    LatentGaussianModel
    """
    link(link_name)  # a clear error for an unknown Φ
    prior = DensePrior(state.points, kernel, jitter=float(jitter) * kernel.sd**2)
    lik = Bernoulli(labels(state.n_data, state.n_rejections), link=BERNOULLI_LINK[link_name])
    return LatentGaussianModel(prior, lik, mean=mean, hyperpriors=hyperpriors)
