"""Glue from data to prior, likelihood and hyperpriors (DESIGN §2)."""

from .latent import LatentGaussianModel

__all__ = ["LatentGaussianModel"]
