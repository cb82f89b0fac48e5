"""Supervised GP latent variable models with pseudo-marginal inference (Gadd et al., issue 31).

The model (Gadd, Wade, Shah & Grammatopoulos, §2): outputs ``Y`` (N × k_y) given latent points
``Z`` (N × k_z) through independent GPs with the SE-ARD kernel ``k_f`` and Gaussian noise of
precision ``β`` (their eq. 1); ``Z`` given observed inputs ``X`` (N × k_x) through independent
GPs with the unit-magnitude SE-ARD kernel ``k_z`` (their eq. 2).  :mod:`.kernels` holds the two
kernels and the hyperparameters ``ξ = (σ, θ, β)`` with their log transform.
"""

from .kernels import GPLVMHyper, k_f, k_z

__all__ = ["GPLVMHyper", "k_f", "k_z"]
