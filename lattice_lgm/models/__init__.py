"""Glue from data to prior, likelihood and hyperpriors (DESIGN §2)."""

from .latent import LatentGaussianModel
from .lgcp import LGCP

__all__ = ["LGCP", "LatentGaussianModel"]
