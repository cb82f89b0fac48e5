"""Backend cases for the conformance suite (tests/priors/test_conformance.py).

A :class:`Case` builds a prior from hyperparameters and gives *independent* dense oracles:
the covariance of the state (the variables on which the backend is exact) and of the window.
Each backend module contributes a list: DENSE_CASES, CIRCULANT_CASES here, GMRF_CASES in
cases_gmrf.py.  Well-conditioned kernels are marked ``invertible`` (solve, log_det, whiten).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lattice_lgm import Lattice
from lattice_lgm.covariance import Covariance, Exponential, Matern, SquaredExponential
from lattice_lgm.priors import CirculantPrior, DensePrior, GaussianPrior


@dataclass
class Case:
    """One backend configuration with its dense oracles.

    Attributes
    ----------
    id : str
    build : callable(**params) -> GaussianPrior
        A fresh prior for the given hyperparameters.
    params, new_params : dict
        Hyperparameters to build with, and the ones ``with_params`` is tested with.
    state_cov : callable(prior) -> ndarray (n_state, n_state)
        Dense covariance of the state, computed independently of the backend.
    window_cov : callable(prior) -> ndarray (n, n)
        Dense covariance of the window fields returned by ``sample``/``to_window``.
    precision : float or ndarray
        Surrogate-data site precision (broadcastable to ``state_shape``).
    invertible : bool
        Whether ``state_cov`` is well-conditioned enough for solve/log_det/whiten checks.
    """

    id: str
    build: Callable[..., GaussianPrior]
    params: dict[str, Any]
    new_params: dict[str, Any]
    state_cov: Callable[[GaussianPrior], np.ndarray]
    window_cov: Callable[[GaussianPrior], np.ndarray]
    precision: Any = 2.0
    invertible: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


def torus_covariance(lattice: Lattice, kernel: Covariance, torus_shape) -> np.ndarray:
    """Dense covariance of a stationary field on a torus: the kernel at wrapped lags."""
    idx = np.stack(
        [g.ravel() for g in np.meshgrid(*[np.arange(m) for m in torus_shape], indexing="ij")],
        axis=-1,
    )
    d = np.abs(idx[:, None, :] - idx[None, :, :])
    m = np.asarray(torus_shape)
    wrapped = np.minimum(d, m - d) * np.asarray(lattice.spacing)
    return kernel.from_lags(wrapped)


def _dense_case(shape, spacing, kernel_cls, kw, new, invertible=True, precision=2.0):
    lat = Lattice(shape, spacing=spacing)

    def build(**p):
        return DensePrior.from_lattice(lat, kernel_cls(**{**kw, **p}))

    def cov(prior):
        return prior.kernel(lat.cell_centers()) + prior.jitter * np.eye(lat.size)

    return Case(f"dense-{kernel_cls.__name__}-{'x'.join(map(str, shape))}", build,
                {}, new, cov, cov, precision=precision, invertible=invertible)


def _circ_case(shape, spacing, kernel_cls, kw, new, embedding=None, max_range=None,
               invertible=True, precision=2.0):
    lat = Lattice(shape, spacing=spacing)

    def build(**p):
        return CirculantPrior(lat, kernel_cls(**{**kw, **p}), embedding_shape=embedding,
                              max_range=max_range)

    def state_cov(prior):
        return torus_covariance(lat, prior.kernel, prior.embedding_shape)

    def window_cov(prior):
        return prior.kernel(lat.cell_centers())

    tag = "odd" if embedding is not None and any(m % 2 for m in embedding) else "even"
    return Case(f"circulant-{kernel_cls.__name__}-{'x'.join(map(str, shape))}-{tag}", build,
                {}, new, state_cov, window_cov, precision=precision, invertible=invertible)


def _points_case():
    x = np.random.default_rng(42).uniform(0, 3, size=(12, 2))

    def build(**p):
        return DensePrior(x, Matern(2.5, **{"range": 1.0, "sd": 1.3, **p}))

    def cov(prior):
        return prior.kernel(x) + prior.jitter * np.eye(len(x))

    pi = np.where(np.arange(12) % 3 == 0, 0.0, 1.5)  # some sites without information
    return Case("dense-points-Matern52", build, {}, {"range": 1.4}, cov, cov, precision=pi)


M15 = {"nu": 1.5, "range": 1.2, "sd": 1.3}
EXP = {"range": 1.5, "sd": 0.8}
SE = {"range": 1.0, "sd": 1.0}
_pi_43 = np.linspace(0.0, 3.0, 16).reshape(4, 4)  # includes a site with precision 0

DENSE_CASES = [
    _dense_case((4, 4), 0.5, Matern, M15, {"range": 0.9, "sd": 1.1}, precision=_pi_43),
    _dense_case((5, 3), (0.5, 0.7), Exponential, EXP, {"range": 2.0}),
    _dense_case((17,), 0.25, Matern, M15, {"sd": 0.7}),
    _dense_case((4, 4), 0.5, SquaredExponential, SE, {"range": 0.8}, invertible=False),
    _points_case(),
]

CIRCULANT_CASES = [
    _circ_case((4, 4), 0.5, Matern, M15, {"range": 0.9, "sd": 1.1}),
    _circ_case((4, 4), 0.5, Matern, M15, {"range": 0.9}, embedding=(7, 7)),
    _circ_case((5, 3), (0.5, 0.7), Exponential, EXP, {"range": 2.0}, max_range=2.5),
    _circ_case((5, 3), (0.5, 0.7), Exponential, EXP, {"range": 2.0}, embedding=(9, 5),
               max_range=2.0),
    _circ_case((17,), 0.25, Matern, M15, {"sd": 0.7}),
    _circ_case((17,), 0.25, Matern, M15, {"sd": 0.7, "range": 1.0}, embedding=(33,)),
    _circ_case((4, 4), 0.5, SquaredExponential, SE, {"range": 0.8}, invertible=False),
]


def all_cases() -> list[Case]:
    """Every backend's cases (GMRF cases come from cases_gmrf.py)."""
    from .cases_gmrf import GMRF_CASES

    return [*DENSE_CASES, *CIRCULANT_CASES, *GMRF_CASES]
