r"""The supervised GPLVM's two kernels and its hyperparameters ``ξ = (σ, θ, β)``.

Gadd et al., §6.1 (their kernels, used throughout the paper):

    k_z(x, x'; σ) = exp(−½ Σ_l σ_l (x_l − x'_l)²) + ε δ(x, x'),
    k_f(z, z'; θ) = θ_S exp(−½ Σ_j θ_j (z_j − z'_j)²),

``σ`` (k_x,) and ``θ_1..θ_kz`` are inverse squared lengthscales ("ARD weights"), the input
kernel's magnitude is fixed to one for identifiability, and ``ε`` is white noise "for numerical
stability" (a setting, not a hyperparameter).  ``β`` is the output noise precision (their eq. 1).
Every hyperparameter is positive; the samplers move ``log ξ`` (Algorithm 2's transformation
``η = t(ξ)``, with the Jacobian ``Σ log ξ`` of :meth:`GPLVMHyper.log_jacobian`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..errors import InvalidDataError, InvalidParameterError, ShapeMismatchError

__all__ = ["GPLVMHyper", "k_f", "k_z", "validate_data"]


def _sq_weighted(a: np.ndarray, b: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``Σ_l w_l (a_nl − b_ml)²`` (N, M), clipped at 0 against round-off."""
    aw, bw = a * np.sqrt(w), b * np.sqrt(w)
    d = (aw * aw).sum(1)[:, None] + (bw * bw).sum(1)[None, :] - 2.0 * aw @ bw.T
    return np.maximum(d, 0.0)


def k_z(x: np.ndarray, x2: np.ndarray | None, sigma: np.ndarray, jitter: float = 0.0) -> np.ndarray:
    """The input kernel ``k_z`` (Gadd et al. §6.1).

    Parameters
    ----------
    x : ndarray, shape (N, k_x)
    x2 : ndarray, shape (M, k_x), or None
        ``None`` gives the symmetric ``K_z(x, x)`` with ``jitter`` added to its diagonal (the
        paper's ``ε δ(x, x')``); a cross-covariance never gets it.
    sigma : ndarray, shape (k_x,)
        Inverse squared lengthscales ``σ_l > 0``.
    jitter : float
        ``ε``.

    Returns
    -------
    ndarray, shape (N, M) or (N, N)
    """
    same = x2 is None
    k = np.exp(-0.5 * _sq_weighted(x, x if same else x2, np.asarray(sigma, float)))
    if same and jitter:
        k[np.diag_indices_from(k)] += jitter
    return k


def k_f(z: np.ndarray, z2: np.ndarray | None, theta_s: float, theta: np.ndarray) -> np.ndarray:
    """The latent-to-output SE-ARD kernel ``k_f`` (Gadd et al. §6.1).

    Parameters
    ----------
    z : ndarray, shape (N, k_z)
    z2 : ndarray, shape (M, k_z), or None (``z2 = z``)
    theta_s : float
        Signal variance ``θ_S``.
    theta : ndarray, shape (k_z,)
        ARD weights ``θ_j`` (inverse squared lengthscales).

    Returns
    -------
    ndarray, shape (N, M)
    """
    return theta_s * np.exp(-0.5 * _sq_weighted(z, z if z2 is None else z2,
                                                np.asarray(theta, float)))


class GPLVMHyper(NamedTuple):
    """The hyperparameters ``ξ = (σ, θ_S, θ, β)``, all positive.

    Attributes
    ----------
    sigma : ndarray, shape (k_x,)
        Input-kernel ARD weights ``σ_l``.
    theta_s : float
        Output-kernel signal variance ``θ_S``.
    theta : ndarray, shape (k_z,)
        Output-kernel ARD weights ``θ_j``.
    beta : float
        Output noise precision ``β``.
    """

    sigma: np.ndarray
    theta_s: float
    theta: np.ndarray
    beta: float

    @property
    def k_x(self) -> int:
        """Input dimension."""
        return int(np.size(self.sigma))

    @property
    def k_z(self) -> int:
        """Latent dimension."""
        return int(np.size(self.theta))

    def names(self) -> list[str]:
        """Names of :meth:`to_vector`'s entries, in order.

        ``β`` is ``noise_precision``: a run's ``posterior.beta`` is the regression
        coefficients' name throughout the library (its summaries read it as such).
        """
        return ([f"sigma_{i + 1}" for i in range(self.k_x)] + ["theta_s"]
                + [f"theta_{j + 1}" for j in range(self.k_z)] + ["noise_precision"])

    def to_vector(self) -> np.ndarray:
        """``(σ, θ_S, θ, β)`` flattened, shape (k_x + k_z + 2,)."""
        return np.concatenate([np.ravel(self.sigma), [self.theta_s], np.ravel(self.theta),
                               [self.beta]]).astype(float)

    @classmethod
    def from_vector(cls, v: np.ndarray, k_x: int, k_z: int) -> GPLVMHyper:
        """Inverse of :meth:`to_vector`; checks every entry is finite and positive."""
        v = np.asarray(v, dtype=float)
        if v.shape != (k_x + k_z + 2,):
            raise InvalidParameterError(
                f"a hyperparameter vector of shape {v.shape} does not hold k_x = {k_x} input "
                f"weights, θ_S, k_z = {k_z} latent weights and β: it needs shape "
                f"({k_x + k_z + 2},).")
        h = cls(v[:k_x].copy(), float(v[k_x]), v[k_x + 1:k_x + 1 + k_z].copy(), float(v[-1]))
        h.check()
        return h

    def to_log(self) -> np.ndarray:
        """``η = log ξ`` (Algorithm 2's transformation to the real line)."""
        return np.log(self.to_vector())

    @classmethod
    def from_log(cls, eta: np.ndarray, k_x: int, k_z: int) -> GPLVMHyper:
        """``ξ = exp(η)``."""
        return cls.from_vector(np.exp(np.asarray(eta, dtype=float)), k_x, k_z)

    def log_jacobian(self) -> float:
        """``log |∂ξ/∂η| = Σ log ξ``: the density of ``η`` is ``p(ξ) · Π ξ``."""
        return float(np.sum(self.to_log()))

    def check(self) -> None:
        """Raise :class:`InvalidParameterError` naming the first non-positive entry."""
        for name, val in zip(self.names(), self.to_vector(), strict=True):
            if not (np.isfinite(val) and val > 0):
                raise InvalidParameterError(
                    f"hyperparameter {name}={val!r} must be finite and > 0 (inverse squared "
                    "lengthscales, signal variance and noise precision are all positive).")


def validate_data(y: np.ndarray, x: np.ndarray, hyper: GPLVMHyper) -> tuple[np.ndarray,
                                                                              np.ndarray]:
    """Check ``y`` (N, k_y), ``x`` (N, k_x) and ``hyper`` against each other; return float arrays.

    Raises
    ------
    ShapeMismatchError
        Wrong number of axes, unequal N, or ``hyper``'s k_x not x's.
    InvalidDataError
        Non-finite entries (the first is named).
    InvalidParameterError
        ``k_z`` > k_y or > N − 1, or a hyperparameter not finite and positive.
    """
    if not isinstance(hyper, GPLVMHyper):
        raise InvalidParameterError(f"hyper is a {type(hyper).__name__}; pass a GPLVMHyper.")
    y, x = np.asarray(y, dtype=float), np.asarray(x, dtype=float)
    for name, arr in (("y", y), ("x", x)):
        if arr.ndim != 2:
            raise ShapeMismatchError(f"{name} has shape {arr.shape}; it needs (N, k_{name[0]}), "
                                     f"a row per data point (reshape a vector: {name}[:, None]).")
        bad = ~np.isfinite(arr)
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            raise InvalidDataError(f"{name} has a non-finite value {arr[idx]!r} at {idx}; "
                                   "remove or impute the row.")
    if y.shape[0] != x.shape[0]:
        raise ShapeMismatchError(f"y has {y.shape[0]} rows but x has {x.shape[0]}; pass one "
                                 "input row per output row.")
    if hyper.k_x != x.shape[1]:
        raise ShapeMismatchError(f"hyper.sigma has {hyper.k_x} entries but x has "
                                 f"{x.shape[1]} columns; pass one ARD weight per input column.")
    hyper.check()
    n, ky = y.shape
    if hyper.k_z > ky:
        raise InvalidParameterError(
            f"the latent dimension k_z={hyper.k_z} (len(hyper.theta)) exceeds the output "
            f"dimension k_y={ky}: PCA of Y (Algorithm 1, step 1) gives at most k_y components; "
            f"use at most {ky} latent dimensions.")
    if hyper.k_z > n - 1:
        raise InvalidParameterError(
            f"the latent dimension k_z={hyper.k_z} (len(hyper.theta)) exceeds N − 1 = {n - 1}: "
            f"{n} centred data points span at most {n - 1} PCA directions; use at most "
            f"{max(n - 1, 0)} latent dimensions or more data.")
    return y, x
