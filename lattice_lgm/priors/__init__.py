"""Gaussian priors N(0, K) over lattices as operators, one backend per module.

=================  ===========================================  ==============================
backend            exact on                                     cost per draw / solve
=================  ===========================================  ==============================
DensePrior         its inputs (the lattice for ``from_lattice``)  O(N²) after an O(N³) factor
CirculantPrior     the embedding torus (draws exact on window)  O(M log M), M = torus cells
GMRFPrior          the (padded) lattice                         O(N log N) (FFT/DCT) or CHOLMOD
=================  ===========================================  ==============================
"""

from .base import Capabilities, FourierPrior, GaussianPrior, SurrogateConditional, fourier
from .circulant import CirculantPrior
from .dense import DensePrior
from .gmrf import GMRFPrior

#: the backends by name (the vocabulary of ``Capabilities.backend``, configs and LGCP)
BACKENDS = {"circulant": CirculantPrior, "gmrf": GMRFPrior, "dense": DensePrior}

__all__ = ["BACKENDS", "Capabilities", "CirculantPrior", "DensePrior", "FourierPrior",
           "GMRFPrior", "GaussianPrior", "SurrogateConditional", "fourier"]
