r"""An importance distribution that covers the latent posterior's symmetry orbit (decision 128).

**Why.**  ``p(Z | X, σ)`` is the same GP prior on every column of ``Z`` and the SE-ARD
likelihood depends on ``Z`` through distances scaled by ``θ_j``: both are unchanged by a
reflection of any column, and when the ``θ_j`` are close, by any rotation ``Z ↦ Z Mᵀ`` with
``M`` orthogonal.  The posterior of ``Z`` given ``ξ`` is then spread over an orbit (a ring when
``k_z = 2``) while the variational ``q`` of §3 sits at one point of it.  The estimate of
eq. 6 with that ``q`` stays unbiased, but the mass away from ``q`` is reached only by
astronomically rare draws: on §6.1's case 1 the typical ``log p̃`` falls ≈ 6 nats short of
the orbit-covering estimate's, and a correlated pseudo-marginal chain, whose normals ``u``
perform a slow random walk on the tilted target ``N(u) p̃(ξ, u)``, climbs towards such draws
(``log p̃`` rising by 5–18 nats over a run, R-hat of ``log p̃`` 1.5) while its ``ξ`` looked
converged — and its ``log β`` sat 6 Monte Carlo errors below an independent reference (2.1
with this mixture).  The mixture covers the orbit only: ``q`` is still too light-tailed in
other directions, and the normals still climb (``benchmarks/papers/gplvm_tails.py``).

**What.**  A *defensive* (Hesterberg 1995, "Weighted average importance sampling and
defensive mixture distributions", *Technometrics* 37, 185–194), *deterministic* (Owen & Zhou
2000, "Safe and effective importance sampling", *JASA* 95, 135–143) mixture

.. math::

    q_{mix}(Z) = a\, q(Z) + \frac{1-a}{K} \sum_{k=1}^{K} q(Z M_k),
    \qquad a = n_0 / n,

of ``q`` with its images under ``K`` fixed orthogonal ``M_k`` (:func:`orbit_transforms`).  Of
the ``n`` draws of one estimate the first ``n₀ = round(defensive · n)`` come from ``q`` and draw
``n₀ + i`` from component ``k = ⌊(i + Φ(v_i)) K / (n − n₀)⌋`` (stratified over the orbit; ``v``
a standard normal).  Each component then has probability ``1/K`` on average over the strata,
so ``Σ_i g_i = n q_mix`` for the draws' densities ``g_i`` and ``(1/n) Σ p(Y, Z_i)/q_mix(Z_i)``
is unbiased for ``p(Y | X, ξ)``.  The weights are bounded by ``p/(a q)``, so the defensive
half keeps the estimator no worse than ``q`` alone (within ``log 2`` and a variance factor 2)
when the posterior is *not* symmetric.

**Normals.**  A correlated chain carries all randomness as standard normals: ``(n, k_z, N +
1)``, columns ``:N`` those of ``q``'s draws and ``[.., 0, N]`` the ``v_i`` (the other entries of
the last column are unused).

**Cost.**  ``log q(Z M_k)`` for all ``k`` at once, for any Gaussian ``q`` with
``log q(Z) = c − ½‖W(vec Z − vec μ)‖²`` (:func:`whitener`): ``W vec(Z M) = Σ_{i,l} M_{il}
W_l z_{:,i}`` (``W_l`` the columns of ``W`` that act on latent column ``l``), so with
``B_{il} = W_l z_{:,i}`` and ``b = W vec μ``, ``‖W vec(Z M) − b‖² = Σ M_{il} M_{i'l'} ⟨B_{il},
B_{i'l'}⟩ − 2 Σ M_{il} ⟨B_{il}, b⟩ + ‖b‖²``: ``k_z²`` products with ``W`` per draw, then
``O(K k_z⁴)`` work.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.linalg import solve_triangular
from scipy.special import logsumexp, ndtr

from .._validation import positive_int
from ..errors import InvalidParameterError, ShapeMismatchError

__all__ = ["DEFENSIVE", "OrbitMixture", "orbit_transforms", "whitener"]

#: the share of an estimate's draws taken from ``q`` itself (the defensive component)
DEFENSIVE = 0.5
#: seed of the fixed orthogonal matrices when ``k_z ≥ 3`` (a constant: the same model gives
#: the same estimator on every machine and resume)
_HAAR_SEED = 20101128
_LOG_2PI = float(np.log(2.0 * np.pi))


def orbit_transforms(k_z: int, n_components: int) -> np.ndarray:
    """The orthogonal ``M_k`` of the mixture, shape (K, k_z, k_z).

    * ``k_z = 1``: the reflection group ``{1, −1}`` (``K = 2`` whatever ``n_components``);
    * ``k_z = 2``: ``n_components / 2`` rotations by ``2πm / (n_components/2)`` and as many
      reflections (each rotation times ``diag(1, −1)``) — a grid on ``O(2)``;
    * ``k_z ≥ 3``: the identity and ``n_components − 1`` Haar-distributed orthogonal matrices
      from a fixed seed.  ``O(k_z)`` has dimension ``k_z(k_z − 1)/2``, so a grid of practical
      size covers it only coarsely; measured only for ``k_z ≤ 2`` (docs/gplvm.md).

    Parameters
    ----------
    k_z : int
    n_components : int
        ``K`` requested (even, ≥ 2).

    Returns
    -------
    ndarray, shape (K, k_z, k_z)
    """
    k_z = positive_int("k_z", k_z, "the latent dimension is at least 1")
    n_components = positive_int("n_components", n_components,
                                "the orbit mixture needs at least two components, e.g. 4096")
    if n_components < 2 or n_components % 2:
        raise InvalidParameterError(
            f"n_components={n_components!r} must be an even number >= 2 (half rotations, half "
            "reflections when k_z = 2), e.g. 4096; 0 turns the mixture off in the model.")
    if k_z == 1:
        return np.array([[[1.0]], [[-1.0]]])
    if k_z == 2:
        a = 2.0 * np.pi * np.arange(n_components // 2) / (n_components // 2)
        c, s = np.cos(a), np.sin(a)
        rot = np.stack([np.stack([c, -s], -1), np.stack([s, c], -1)], 1)
        return np.concatenate([rot, rot * np.array([1.0, -1.0])])  # R, R diag(1, −1)
    rng = np.random.default_rng(_HAAR_SEED)
    g = rng.standard_normal((n_components - 1, k_z, k_z))
    qm, r = np.linalg.qr(g)
    # sign fix of the QR factor: Haar measure (Mezzadri 2007, "How to generate random
    # matrices from the classical compact groups", Notices AMS 54, 592–604)
    qm = qm * np.sign(np.diagonal(r, axis1=1, axis2=2))[:, None, :]
    return np.concatenate([np.eye(k_z)[None], qm])


class OrbitMixture:
    """``q_mix`` of the module docstring around a Gaussian ``q``.

    Parameters
    ----------
    q : VBPosterior, GaussianQ or FullGaussianQ
        Has ``mu`` (N, k_z), ``from_normals(eps (n, k_z, N))`` and either ``whitener()`` (a
        :class:`~.laplace.FullGaussianQ`) or ``chol_S`` (k_z, N, N), lower Cholesky factors of
        column covariances (:func:`whitener`).
    transforms : ndarray, shape (K, k_z, k_z)
        Orthogonal matrices (:func:`orbit_transforms`).
    n_draws : int
        The draws per estimate ``n`` (the design's strata depend on it).
    defensive : float
        Share of the draws from ``q`` itself, in ``[0, 1)``; :data:`DEFENSIVE`.
    """

    def __init__(self, q: Any, transforms: np.ndarray, n_draws: int,
                 defensive: float = DEFENSIVE) -> None:
        mu = np.asarray(q.mu, dtype=np.float64)
        k_lat = mu.shape[1]
        transforms = np.asarray(transforms, dtype=np.float64)
        if transforms.ndim != 3 or transforms.shape[1:] != (k_lat, k_lat):
            raise ShapeMismatchError(
                f"transforms has shape {transforms.shape}; with k_z = {k_lat} it must be "
                f"(K, {k_lat}, {k_lat}) (orbit_transforms(k_z, K)).")
        if not 0.0 <= defensive < 1.0:
            raise InvalidParameterError(
                f"defensive={defensive!r} must be in [0, 1) (the share of draws from q), "
                f"e.g. {DEFENSIVE}.")
        self.n_draws = positive_int("n_draws", n_draws, "an estimate has at least one draw")
        self.n_def = round(defensive * self.n_draws)
        if self.n_def == self.n_draws:  # e.g. Q = 1: keep one orbit draw
            self.n_def = self.n_draws - 1
        self.q, self.mu, self.transforms = q, mu, transforms
        self._w, self._const = whitener(q)
        self._b = self._w @ mu.T.reshape(-1)  # W vec μ, (D,)

    @property
    def normals_shape(self) -> tuple[int, int, int]:
        """Shape of one estimate's standard normals: ``(n, k_z, N + 1)``."""
        n_pts, k_lat = self.mu.shape
        return (self.n_draws, k_lat, n_pts + 1)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` (= ``n_draws``) draws of the stratified design, shape (n, N, k_z)."""
        return self.from_normals(rng.standard_normal((n, *self.normals_shape[1:])))

    def from_normals(self, eps: np.ndarray) -> np.ndarray:
        """The design's draws from standard normals ``eps`` (n_draws, k_z, N + 1).

        Returns
        -------
        ndarray, shape (n_draws, N, k_z)
        """
        eps = np.asarray(eps, dtype=np.float64)
        if eps.shape != self.normals_shape:
            raise ShapeMismatchError(
                f"eps has shape {eps.shape}; the orbit mixture's normals have shape "
                f"{self.normals_shape} (n, k_z, N + 1): q's normals and one component choice "
                "per draw.  A correlated chain started without the mixture carries (n, k_z, N):"
                " resume it with orbit=0.")
        n_pts = self.mu.shape[0]
        z = np.array(self.q.from_normals(eps[:, :, :n_pts]), dtype=np.float64)
        m = self.n_draws - self.n_def
        k = self._strata(eps[self.n_def:, 0, n_pts], m)
        z[self.n_def:] = np.einsum("anj,aij->ani", z[self.n_def:], self.transforms[k])
        return z

    def _strata(self, v: np.ndarray, m: int) -> np.ndarray:
        """Component of each orbit draw: ``⌊(i + Φ(v_i)) K / m⌋`` (module docstring)."""
        n_comp = self.transforms.shape[0]
        k = np.floor((np.arange(m) + ndtr(v)) * n_comp / m).astype(np.int64)
        return np.minimum(k, n_comp - 1)  # Φ(v) = 1.0 in floating point for v > 8.3

    def log_density(self, z: np.ndarray) -> np.ndarray:
        """``log q_mix(Z)`` per draw, shape (n,), for ``z`` (n, N, k_z) or (N, k_z)."""
        z = np.asarray(z, dtype=np.float64)
        if z.ndim == 2:
            z = z[None]
        n_pts, k_lat = self.mu.shape
        if z.ndim != 3 or z.shape[1:] != (n_pts, k_lat):
            raise ShapeMismatchError(f"z has shape {z.shape}; log_density needs (n, {n_pts}, "
                                     f"{k_lat}) (draws × N × k_z).")
        # B[a, i, l] = W_l z_:,i (W_l: the columns of W acting on latent column l), so that
        # W vec(Z M) = Σ_{i,l} M_il B[a, i, l] for every M: the module docstring's Gram form
        w3 = self._w.reshape(-1, k_lat, n_pts)
        # (optimize: a BLAS contraction, 8 ms against 0.4 s for N = 351, Q = 64)
        b_il = np.einsum("dln,ani->aild", w3, z, optimize=True).reshape(
            z.shape[0], k_lat * k_lat, -1)
        gram = np.einsum("apd,aqd->apq", b_il, b_il)
        cross = b_il @ self._b                                # (n, k_z²)
        m_vec = self.transforms.reshape(self.transforms.shape[0], -1)   # vec(M_k) as (i, l)
        quad = (np.einsum("pk,apk->ak", m_vec.T, gram @ m_vec.T) - 2.0 * cross @ m_vec.T
                + float(self._b @ self._b))
        lq_orbit = self._const - 0.5 * quad                   # (n, K)
        resid = b_il[:, ::k_lat + 1].sum(axis=1) - self._b    # W vec Z − W vec μ
        lq_self = self._const - 0.5 * (resid * resid).sum(axis=1)
        a_share = self.n_def / self.n_draws
        mix = logsumexp(lq_orbit, axis=1) - np.log(self.transforms.shape[0])
        if self.n_def == 0:
            return mix
        return np.logaddexp(np.log(a_share) + lq_self, np.log1p(-a_share) + mix)


def whitener(q: Any) -> tuple[np.ndarray, float]:
    """``(W, c)`` of a Gaussian ``q``: ``log q(Z) = c − ½‖W (vec Z − vec μ)‖²``.

    ``vec`` stacks the columns of ``Z`` (index ``j N + n``).  ``q.whitener()`` if ``q`` has one
    (:class:`~.laplace.FullGaussianQ`); else from ``q.chol_S`` (k_z, N, N) of a ``q`` that
    factorises over the columns (:class:`~.density.GaussianQ`, a ``VBPosterior``):
    ``W = blockdiag(L_j⁻¹)``.

    Returns
    -------
    W : ndarray, shape (N k_z, N k_z)
    c : float
    """
    if callable(getattr(q, "whitener", None)):
        return q.whitener()
    chol = np.asarray(q.chol_S, dtype=np.float64)
    k_lat, n_pts = chol.shape[0], chol.shape[1]
    w = np.zeros((k_lat * n_pts, k_lat * n_pts))
    eye = np.eye(n_pts)
    for j in range(k_lat):
        w[j * n_pts:(j + 1) * n_pts, j * n_pts:(j + 1) * n_pts] = solve_triangular(
            chol[j], eye, lower=True, check_finite=False)
    const = -0.5 * (k_lat * n_pts * _LOG_2PI) - float(
        np.log(np.diagonal(chol, axis1=1, axis2=2)).sum())
    return w, const
