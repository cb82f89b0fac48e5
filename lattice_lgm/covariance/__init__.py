"""Stationary covariance functions with one parameter vocabulary.

Every covariance here is ``k(d) = sd**2 * rho(u)`` with ``u`` the distance measured in
lengthscales, ``u = sqrt(sum_i (d_i / lengthscale_i)**2)``.

Range convention (one for every backend)
----------------------------------------
``range = 2 * lengthscale``, where ``lengthscale`` is the one of Rasmussen & Williams (2006,
ch. 4) for the squared-exponential, exponential, Matérn and rational-quadratic forms.  For the
Matérn family this is exactly INLA's practical range ``sqrt(8 nu) / kappa`` (Lindgren, Rue &
Lindström 2011), the distance at which the correlation is about 0.13; for the exponential and
squared-exponential the correlation at ``range`` is exactly ``exp(-2) ≈ 0.135``.  The GMRF
(SPDE) backend uses the same ``range``, so a ``Matern(nu=1, range=r)`` and
``GMRFPrior.matern(lat, range=r)`` describe the same field.  ``lengthscale=`` is accepted
everywhere as an alias (``lengthscale = range / 2``); give one or the other.

Ranges may be per axis (a tuple, one per lattice axis, in coordinate units): the kernel is then
``rho(sqrt(sum_i (d_i / l_i)^2))`` (geometric anisotropy aligned with the axes).

Space-time
----------
:class:`SpaceTime` is the separable product ``sd² rho_t(|u| / l_t) rho_s(|s| / l_s)`` of a
temporal and a spatial correlation on ``("t", "y", "x")`` lattices (time is axis 0), with its own
``range_t`` in time units beside the spatial ``range`` in length units.

Modules: the base class and ``resolve_range`` in :mod:`.base`, the kernels of one distance in
:mod:`.kernels`, :class:`SpaceTime` in :mod:`.spacetime`, the compiled distances in
:mod:`._distances`.
"""

from .base import RANGE_PER_LENGTHSCALE as RANGE_PER_LENGTHSCALE
from .base import Covariance, resolve_range
from .kernels import Exponential, Matern, RationalQuadratic, SquaredExponential
from .spacetime import SpaceTime

__all__ = [
    "Covariance",
    "Exponential",
    "Matern",
    "RationalQuadratic",
    "SpaceTime",
    "SquaredExponential",
    "resolve_range",
]
