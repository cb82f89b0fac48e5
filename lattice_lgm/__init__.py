"""lattice_lgm: Bayesian inference in latent Gaussian models on large lattices.

The public API is curated here; see the README for a tour.
"""

import os

# Two OpenMP runtimes run here: the libgomp bundled with pyFFTW (FFTW's threads) and the one
# behind Numba's `omp` threading layer. By default idle libgomp threads spin for ~300k
# iterations, so after every FFT or kernel one runtime's spinning threads steal the cores the
# other needs: measured on 2 cores, a 10×8-torus colourisation took 12.6 ms instead of 25 µs
# next to another busy process, and an elliptical slice step 4.9 s instead of 0.04 s. A short
# spin keeps the hand-over fast without the fight (1024² ESS step: 0.50 s vs 0.56 s default,
# 0.66 s with no spin, 1.1 s with OMP_WAIT_POLICY=PASSIVE). Read by libgomp when it loads, so
# it must be set before pyfftw and numba are imported; a user's own setting wins.
os.environ.setdefault("GOMP_SPINCOUNT", "10000")

from importlib.metadata import PackageNotFoundError, version

from . import (
    _numba_cache,  # noqa: F401  (first: drops stale Numba cache files before any kernel loads)
    covariance,
    errors,
    priors,
)
from .api import resume
from .errors import LatticeLGMError
from .lattice import Lattice
from .models import LGCP
from .runs import sample
from .store import open_store
from .window import Window, bin_points, lattice_for_window, read_points

try:
    __version__ = version("lattice-lgm")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0+unknown"

__all__ = [
    "LGCP",
    "Lattice",
    "LatticeLGMError",
    "Window",
    "__version__",
    "bin_points",
    "covariance",
    "errors",
    "lattice_for_window",
    "open_store",
    "priors",
    "read_points",
    "resume",
    "sample",
]
