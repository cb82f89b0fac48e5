"""One exception hierarchy for lattice_lgm.

Every error raised on bad input is a subclass of :class:`LatticeLGMError` and its message names
the argument, the offending value and the remedy.  Errors are raised before any heavy work
(factorisation, FFT planning, compilation or store writes).
"""

from __future__ import annotations

__all__ = [
    "BackendUnavailableError",
    "ConvergenceError",
    "EmbeddingNotPSDError",
    "GeographicCoordinatesError",
    "IntrinsicPriorError",
    "InvalidCovarianceError",
    "InvalidDataError",
    "InvalidParameterError",
    "LatticeLGMError",
    "NotPositiveDefiniteError",
    "ParameterOutOfBoundsError",
    "ResourceLimitError",
    "SamplerError",
    "ShapeMismatchError",
    "UnsupportedOperationError",
]


class LatticeLGMError(Exception):
    """Base class of every error lattice_lgm raises on purpose."""


class InvalidParameterError(LatticeLGMError, ValueError):
    """A parameter is NaN, infinite, non-positive where it must be positive, or of a wrong kind."""


class ShapeMismatchError(LatticeLGMError, ValueError):
    """An array's shape does not match the lattice, the prior or the number of chains."""


class GeographicCoordinatesError(LatticeLGMError, ValueError):
    """Coordinates are geographic (lon/lat); lengths in degrees are meaningless, project first."""


class EmbeddingNotPSDError(LatticeLGMError, ValueError):
    """The circulant embedding has negative eigenvalues beyond round-off up to the size cap."""


class ParameterOutOfBoundsError(LatticeLGMError, ValueError):
    """A hyperparameter is outside the bounds a structure was sized for (e.g. range > max_range)."""


class NotPositiveDefiniteError(LatticeLGMError, ValueError):
    """A precision or covariance matrix is not positive definite where it must be."""


class InvalidCovarianceError(LatticeLGMError, ValueError):
    """A user-supplied covariance matrix is not square, symmetric or positive semi-definite."""


class IntrinsicPriorError(LatticeLGMError, ValueError):
    """An operation needs |Q| or Q^{-1} of an intrinsic GMRF that has no constraints to fix it."""


class BackendUnavailableError(LatticeLGMError, ImportError):
    """An optional backend (e.g. scikit-sparse for CHOLMOD) is not installed."""


class UnsupportedOperationError(LatticeLGMError, NotImplementedError):
    """The operation is not available for this model or backend at this size (says the remedy)."""


class InvalidDataError(LatticeLGMError, ValueError):
    """Observed data are invalid for the likelihood (NaN, negative or non-integer counts, …).

    The message names the first offending index; missing cells go through an explicit mask.
    """


class SamplerError(LatticeLGMError, RuntimeError):
    """A sampler could not complete a step (e.g. a slice shrink cap was hit); carries the state.

    Attributes
    ----------
    state : dict
        What the sampler was doing (chain, bracket, values) so the failure can be reproduced.
    """

    def __init__(self, message: str, state: dict | None = None) -> None:
        super().__init__(message)
        self.state = dict(state or {})


class ConvergenceError(LatticeLGMError, RuntimeError):
    """An iterative fit (e.g. IRLS for a Poisson GLM) did not converge within its iteration cap.

    The message gives the iterations run, the last change of the convergence criterion and the
    remedy (raise the cap, rescale covariates, check for separation).
    """


class ResourceLimitError(LatticeLGMError, MemoryError):
    """The projected memory, disk or time of a model build or a run exceeds what is there."""
