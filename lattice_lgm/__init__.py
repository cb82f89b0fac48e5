"""lattice_lgm: Bayesian inference in latent Gaussian models on large lattices.

The public API is curated here; see the README for a tour.
"""

from importlib.metadata import PackageNotFoundError, version

from . import covariance, errors, priors
from .errors import LatticeLGMError
from .lattice import Lattice

try:
    __version__ = version("lattice-lgm")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0+unknown"

__all__ = ["Lattice", "LatticeLGMError", "__version__", "covariance", "errors", "priors"]
