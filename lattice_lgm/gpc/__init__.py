"""Probit GP classification as a model family (issue 30; Fraccaro, Paquet & Winther).

``model`` (:class:`GPClassification`: the data, ``K`` built once, the run protocol, the
configuration file's ``model.family = "gpc"``) and ``sweeps`` (:class:`RMHMCSweep`, the
report's Riemannian-manifold HMC, and :class:`HMCSweep`, plain HMC with a tuned diagonal
mass).  The numerical pieces (EP, AIS, the RMHMC target and integrator) are in
:mod:`lattice_lgm.samplers`; docs/gpc_model.md.
"""

from .model import DEFAULT_METHOD, METHODS, GPClassification
from .sweeps import HMCSweep, RMHMCSweep

__all__ = ["DEFAULT_METHOD", "METHODS", "GPClassification", "HMCSweep", "RMHMCSweep"]
