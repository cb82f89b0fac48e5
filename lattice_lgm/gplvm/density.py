r"""The supervised GPLVM's densities, batched over draws of ``Z`` (Gadd et al., §2).

* :func:`log_p_y_given_z` — eq. 1, ``log p(Y | Z, θ, β) = Σ_i log N(y_:,i | 0, K_f + β⁻¹ I_N)``;
* :func:`log_p_z_given_x` — eq. 2, ``log p(Z | X, σ) = Σ_j log N(z_:,j | 0, K_z)``;
* :class:`GaussianQ` / :func:`log_q` — a Gaussian importance distribution with the form of the
  paper's variational posterior (§3), ``q(Z) = Π_j N(z_:,j | μ_j, S_j)`` with full ``S_j``.

Every function takes ``z`` of shape ``(n, N, k_z)`` (``n`` draws) or ``(N, k_z)`` (one draw,
treated as ``n = 1``) and returns shape ``(n,)``.  Shapes and finiteness are checked here, before
any factorisation; a covariance that is not numerically positive definite raises
:class:`~lattice_lgm.errors.NotPositiveDefiniteError` naming the hyperparameters to change.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import solve_triangular

from .._validation import finite_array, is_number
from ..errors import InvalidParameterError, NotPositiveDefiniteError, ShapeMismatchError
from .kernels import GPLVMHyper, k_f, k_z

__all__ = ["GaussianQ", "as_draws", "log_p_y_given_z", "log_p_z_given_x", "log_q"]

_LOG_2PI = float(np.log(2.0 * np.pi))


def as_draws(z: np.ndarray, n_points: int, k_latent: int, name: str = "z") -> np.ndarray:
    """``z`` as float64 of shape ``(n, N, k_z)``; a single ``(N, k_z)`` draw gets ``n = 1``.

    Raises
    ------
    ShapeMismatchError
        Unless ``z`` is ``(N, k_z)`` or ``(n, N, k_z)`` for the given ``N`` and ``k_z``.
    InvalidParameterError
        If an entry is NaN or infinite.
    """
    z = given = np.asarray(z, dtype=np.float64)
    if z.ndim == 2:
        z = z[None]
    if z.ndim != 3 or z.shape[1:] != (n_points, k_latent):
        raise ShapeMismatchError(
            f"{name} has shape {given.shape}; expected (N, k_z) = ({n_points}, {k_latent}) or "
            f"(n_draws, {n_points}, {k_latent}) — one row per data point, one column per "
            "latent dimension (k_z = len(hyper.theta)).")
    finite_array(name, z, "latent draws must be finite")
    return z


def check_y(y: np.ndarray) -> np.ndarray:
    y = np.asarray(y, dtype=np.float64)
    if y.ndim != 2 or y.shape[0] < 1 or y.shape[1] < 1:
        raise ShapeMismatchError(
            f"y has shape {y.shape}; expected (N, k_y) with one row per data point "
            "(reshape a single feature with y[:, None]).")
    finite_array("y", y, "remove or impute missing outputs before fitting")
    return y


def check_hyper(hyper: GPLVMHyper) -> None:
    if not isinstance(hyper, GPLVMHyper):
        raise InvalidParameterError(
            f"hyper={hyper!r} is a {type(hyper).__name__}, not a GPLVMHyper; build one with "
            "GPLVMHyper(sigma, theta_s, theta, beta) or GPLVMHyper.from_log(eta, k_x, k_z).")
    hyper.check()


def _sq_dist_batched(z: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``Σ_j w_j (z_anj − z_amj)²`` for every draw ``a``: shape (n, N, N)."""
    zw = z * np.sqrt(w)
    sq = np.einsum("anj,anj->an", zw, zw)
    d = sq[:, :, None] + sq[:, None, :] - 2.0 * np.einsum("anj,amj->anm", zw, zw)
    return np.maximum(d, 0.0)


def log_p_y_given_z(y: np.ndarray, z: np.ndarray, hyper: GPLVMHyper) -> np.ndarray:
    r"""Eq. 1: ``log p(Y | Z, θ, β) = Σ_{i=1}^{k_y} log N(y_:,i | 0, K_f(Z) + β⁻¹ I_N)``.

    One Cholesky factor per draw (batched); the only diagonal term is the noise ``β⁻¹`` of the
    model — no extra jitter, so the value is the model's density.

    Parameters
    ----------
    y : ndarray, shape (N, k_y)
    z : ndarray, shape (n, N, k_z) or (N, k_z)
    hyper : GPLVMHyper
        Uses ``θ_S``, ``θ`` (k_z,) and ``β``.

    Returns
    -------
    ndarray, shape (n,)

    Raises
    ------
    NotPositiveDefiniteError
        If ``K_f + β⁻¹ I`` cannot be factorised in floating point (``β`` huge against ``θ_S``).
    """
    check_hyper(hyper)
    y = check_y(y)
    n_pts, k_y = y.shape
    z = as_draws(z, n_pts, hyper.k_z)
    cov = hyper.theta_s * np.exp(-0.5 * _sq_dist_batched(z, np.asarray(hyper.theta, float)))
    cov[:, np.arange(n_pts), np.arange(n_pts)] += 1.0 / hyper.beta
    try:
        chol = np.linalg.cholesky(cov)
    except np.linalg.LinAlgError as exc:
        raise NotPositiveDefiniteError(
            f"K_f + β⁻¹I is not numerically positive definite at theta_s={hyper.theta_s!r}, "
            f"beta={hyper.beta!r}; the noise variance 1/β must not vanish against θ_S — "
            "use a prior on β that keeps θ_S·β below ~1e12.") from exc
    # ‖L⁻¹ y_:,i‖² summed over the features i is every column's quadratic form at once; one
    # batched LAPACK solve for all draws (a Python loop of triangular solves costs ~20 µs a draw)
    w = np.linalg.solve(chol, np.broadcast_to(y, (z.shape[0], n_pts, k_y)))
    logdet = 2.0 * np.log(np.diagonal(chol, axis1=1, axis2=2)).sum(axis=1)
    return -0.5 * (np.einsum("anm,anm->a", w, w) + k_y * (logdet + n_pts * _LOG_2PI))


def kz_factor(x: np.ndarray, hyper: GPLVMHyper, jitter: float) -> np.ndarray:
    """Lower Cholesky factor of ``K_z(X, X) + ε I`` (eq. 2), with a named error if it fails."""
    return cholesky_or_raise(
        k_z(x, None, hyper.sigma, jitter),
        f"K_z(X, X) + εI is not numerically positive definite with jitter={jitter!r} "
        f"and sigma={np.asarray(hyper.sigma).tolist()!r} (repeated or very close inputs "
        "make K_z singular); pass a larger jitter, e.g. 1e-6.")


def kf_noise_factor(z: np.ndarray, hyper: GPLVMHyper) -> np.ndarray:
    """Lower Cholesky factor of ``K_f(Z) + β⁻¹ I`` (eq. 1) for one ``Z`` (N, k_z).

    Raises
    ------
    NotPositiveDefiniteError
        Naming ``θ_S`` and ``β`` when the factorisation fails.
    """
    cov = k_f(z, None, hyper.theta_s, hyper.theta)
    cov[np.diag_indices_from(cov)] += 1.0 / hyper.beta
    return cholesky_or_raise(
        cov, f"K_f + β⁻¹I is not numerically positive definite at theta_s={hyper.theta_s!r}, "
        f"beta={hyper.beta!r}; the noise variance 1/β must not vanish against θ_S — "
        "use a prior on β that keeps θ_S·β below ~1e12.")


def cholesky_or_raise(a: np.ndarray, message: str) -> np.ndarray:
    """Lower Cholesky factor(s) of ``a`` (…, n, n).

    Raises
    ------
    NotPositiveDefiniteError
        Carrying ``message``, which names the matrix and the remedy.
    """
    try:
        return np.linalg.cholesky(a)
    except np.linalg.LinAlgError as exc:
        raise NotPositiveDefiniteError(message) from exc


def check_x(x: np.ndarray, n_points: int | None, hyper: GPLVMHyper, name: str = "x") -> np.ndarray:
    """``x`` as float64 (M, k_x), finite, with ``k_x = len(hyper.sigma)`` (and ``M = N``)."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != hyper.k_x or (n_points is not None
                                                  and x.shape[0] != n_points):
        want = f"({n_points if n_points is not None else 'M'}, {hyper.k_x})"
        raise ShapeMismatchError(
            f"{name} has shape {x.shape}; expected {want}: one row per point and one column "
            "per input dimension (k_x = len(hyper.sigma)).")
    finite_array(name, x, "inputs must be finite")
    return x


def check_jitter(jitter: float) -> float:
    """``ε ≥ 0`` as a float, or :class:`InvalidParameterError`."""
    j = float(jitter) if is_number(jitter) else np.nan
    if not (np.isfinite(j) and j >= 0.0):
        raise InvalidParameterError(
            f"jitter={jitter!r} must be a finite number >= 0 (the white noise ε of k_z, "
            "Gadd et al. §6.1); pass e.g. 1e-6.")
    return j


def log_p_z_given_x(z: np.ndarray, x: np.ndarray, hyper: GPLVMHyper,
                    jitter: float = 1e-6) -> np.ndarray:
    r"""Eq. 2: ``log p(Z | X, σ) = Σ_{j=1}^{k_z} log N(z_:,j | 0, K_z(X, X) + ε I)``.

    Parameters
    ----------
    z : ndarray, shape (n, N, k_z) or (N, k_z)
    x : ndarray, shape (N, k_x)
    hyper : GPLVMHyper
        Uses ``σ`` (k_x,) and fixes ``k_z = len(θ)``.
    jitter : float
        ``ε`` (§6.1), on the diagonal of ``K_z``.

    Returns
    -------
    ndarray, shape (n,)
    """
    check_hyper(hyper)
    jitter = check_jitter(jitter)
    x = check_x(x, None, hyper)
    n_pts = x.shape[0]
    z = as_draws(z, n_pts, hyper.k_z)
    chol = kz_factor(x, hyper, jitter)
    # one triangular solve for every column of every draw: (N, n·k_z)
    flat = np.moveaxis(z, 1, 0).reshape(n_pts, -1)
    w = solve_triangular(chol, flat, lower=True, check_finite=False)
    quad = (w * w).reshape(n_pts, z.shape[0], hyper.k_z).sum(axis=(0, 2))
    logdet = 2.0 * np.log(np.diagonal(chol)).sum()
    return -0.5 * (quad + hyper.k_z * (logdet + n_pts * _LOG_2PI))


class GaussianQ:
    r"""``q(Z) = Π_j N(z_:,j | μ_j, S_j)``, the form of the paper's variational posterior (§3).

    Parameters
    ----------
    mu : ndarray, shape (N, k_z)
        Column ``j`` is ``μ_j``.
    S : ndarray, shape (k_z, N, N)
        Full covariances ``S_j``, symmetric positive definite.

    Raises
    ------
    ShapeMismatchError, InvalidParameterError, NotPositiveDefiniteError
        On inconsistent shapes, non-finite entries or an ``S_j`` that has no Cholesky factor.
    """

    def __init__(self, mu: np.ndarray, S: np.ndarray) -> None:
        mu = np.asarray(mu, dtype=np.float64)
        S = np.asarray(S, dtype=np.float64)
        if mu.ndim != 2:
            raise ShapeMismatchError(f"mu has shape {mu.shape}; expected (N, k_z).")
        n_pts, k_lat = mu.shape
        if S.shape != (k_lat, n_pts, n_pts):
            raise ShapeMismatchError(
                f"S has shape {S.shape}; with mu of shape {mu.shape} it must be "
                f"(k_z, N, N) = ({k_lat}, {n_pts}, {n_pts}): one full covariance per column.")
        finite_array("mu", mu, "the importance mean must be finite")
        finite_array("S", S, "the importance covariances must be finite")
        if not np.allclose(S, np.swapaxes(S, 1, 2), rtol=1e-10, atol=1e-12):
            raise InvalidParameterError("S must be symmetric in its last two axes; pass "
                                        "0.5 * (S + S.transpose(0, 2, 1)).")
        self._chol = cholesky_or_raise(
            S, "an importance covariance S_j has no Cholesky factor; S must be positive "
            "definite (add a small multiple of the identity).")
        self.mu, self.S = mu, S
        self._logdet = 2.0 * np.log(np.diagonal(self._chol, axis1=1, axis2=2)).sum()

    @property
    def chol_S(self) -> np.ndarray:
        """Lower Cholesky factors ``L_j`` of the ``S_j``, shape (k_z, N, N)."""
        return self._chol

    @property
    def shape(self) -> tuple[int, int]:
        """``(N, k_z)``."""
        return self.mu.shape  # type: ignore[return-value]

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` draws ``Z = μ + L_j ε`` column by column, shape (n, N, k_z).

        The standard normals are drawn as one (n, k_z, N) array, so the stream used is fixed
        by ``n`` and the shapes only.
        """
        return gaussian_draws(self.mu, self._chol,
                              rng.standard_normal((n, self.mu.shape[1], self.mu.shape[0])))

    def from_normals(self, eps: np.ndarray) -> np.ndarray:
        """The draws ``z_:,j = μ_j + L_j ε_j`` of given standard normals ``eps`` (n, k_z, N).

        :meth:`sample` is ``from_normals(rng.standard_normal((n, k_z, N)))``; a correlated
        pseudo-marginal chain (:mod:`.pmmh`) passes the normals it carries.
        """
        return gaussian_draws(self.mu, self._chol, eps)

    def log_density(self, z: np.ndarray) -> np.ndarray:
        """``log q(Z)`` per draw, shape (n,), for ``z`` (n, N, k_z) or (N, k_z)."""
        n_pts, k_lat = self.mu.shape
        z = as_draws(z, n_pts, k_lat)
        quad = np.zeros(z.shape[0])
        for j in range(k_lat):
            w = solve_triangular(self._chol[j], (z[:, :, j] - self.mu[:, j]).T, lower=True,
                                 check_finite=False)
            quad += (w * w).sum(axis=0)
        return -0.5 * (quad + self._logdet + k_lat * n_pts * _LOG_2PI)


def gaussian_draws(mu: np.ndarray, chol_s: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """``z_:,j = μ_j + L_j ε_j``: draws of ``Π_j N(μ_j, L_j L_jᵀ)`` from standard normals.

    Parameters
    ----------
    mu : ndarray, shape (N, k_z)
    chol_s : ndarray, shape (k_z, N, N)
        Lower Cholesky factors ``L_j`` of the ``S_j``.
    eps : ndarray, shape (n, k_z, N)

    Returns
    -------
    ndarray, shape (n, N, k_z)
    """
    eps = np.asarray(eps, dtype=np.float64)
    n_pts, k_lat = mu.shape
    if eps.ndim != 3 or eps.shape[1:] != (k_lat, n_pts):
        raise ShapeMismatchError(
            f"eps has shape {eps.shape}; the normals of q's draws have shape (n, k_z, N) = "
            f"(n, {k_lat}, {n_pts}).")
    return mu[None] + np.einsum("jnm,ajm->anj", chol_s, eps)


def log_q(z: np.ndarray, mu: np.ndarray, S: np.ndarray) -> np.ndarray:
    r"""``log q(Z) = Σ_j log N(z_:,j | μ_j, S_j)`` per draw.

    Parameters
    ----------
    z : ndarray, shape (n, N, k_z) or (N, k_z)
    mu : ndarray, shape (N, k_z)
    S : ndarray, shape (k_z, N, N)

    Returns
    -------
    ndarray, shape (n,)
    """
    return GaussianQ(mu, S).log_density(z)
