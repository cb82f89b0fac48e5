"""Supervised GP latent variable models with pseudo-marginal inference (Gadd et al., issue 31).

The model (Gadd, Wade, Shah & Grammatopoulos, §2): outputs ``Y`` (N × k_y) given latent points
``Z`` (N × k_z) through independent GPs with the SE-ARD kernel ``k_f`` and Gaussian noise of
precision ``β`` (their eq. 1); ``Z`` given observed inputs ``X`` (N × k_x) through independent
GPs with the unit-magnitude SE-ARD kernel ``k_z`` (their eq. 2).  :class:`SupervisedGPLVM` is
the run model (docs/gplvm.md); the modules hold the paper's pieces: :mod:`.kernels`,
:mod:`.psi` and :mod:`.vb` (§3), :mod:`.estimator` (eq. 6), :mod:`.pmmh` (Algorithm 2),
:mod:`.latent` (Algorithm 3), :mod:`.predict` (§5), :mod:`.sweep`.
"""

from .kernels import GPLVMHyper, k_f, k_z
from .model import SupervisedGPLVM
from .sweep import PseudoMarginalSweep
from .vb import VBPosterior, fit_vb

__all__ = ["GPLVMHyper", "PseudoMarginalSweep", "SupervisedGPLVM", "VBPosterior", "fit_vb",
           "k_f", "k_z"]
