r"""Variational Bayes for the supervised GPLVM (Gadd et al. §3, Algorithm 1).

The bound (Gadd et al. eq. 3) is ``F̃(q) − Σ_j KL(q(z_:,j) || N(0, K_z))`` with
``q(Z) = Π_j N(z_:,j | μ_j, S_j)``, full N × N ``S_j``, and ``F̃`` the collapsed sparse bound of
Titsias & Lawrence (2010, eq. 14; Gadd et al. eqs. 4–5 and the display after them) with ``M``
inducing inputs ``Z_u`` shared by the k_y outputs:

    F̃ = −(N k_y/2) log 2π + (N k_y/2) log β − (k_y/2) log|I + β K_u^{-½} ψ2 K_u^{-½}|
         − (β/2) ‖Y‖² + (β²/2) ‖(K_u + βψ2)^{-½} ψ1ᵀ Y‖² − (β k_y/2) ψ0
         + (β k_y/2) tr(K_u⁻¹ ψ2),

with the ψ statistics of :mod:`.psi`.  ``K_u = k_f(Z_u, Z_u) + δ θ_S I`` carries a relative
jitter ``δ`` (:data:`INDUCING_JITTER`); this keeps the bound a bound, since ``u = f(Z_u) +``
(independent noise) is as valid an auxiliary variable for Titsias's argument as ``f(Z_u)``.

Parameterisation of q (why).  ``F̃`` sees ``S_j`` only through its diagonal ``s_j``, so at any
stationary point ``∂/∂S_j`` of the bound is ``diag(∂F̃/∂s_j) − ½(K_z⁻¹ − S_j⁻¹) = 0``, i.e.
``S_j = (K_z⁻¹ + Λ_j)⁻¹`` with ``Λ_j = −2 diag(∂F̃/∂s_j)`` diagonal (Opper & Archambeau 2009).
We take that form with ``Λ_j = diag(exp ρ_j)``: N parameters per latent dimension instead of
N(N+1)/2, every ``S_j`` positive definite, and no loss at the optimum as long as the optimal
``Λ_j`` is positive (it is whenever the expected fit worsens with latent variance, the usual
case; a negative entry would be clipped to ~0).  The mean is whitened, ``μ_j = L_z a_j`` with
``L_z L_zᵀ = K_z``: then the KL's mean term is ``½‖a_j‖²`` and its Hessian the identity, whereas
``μ_j = K_z ν_j`` (Opper & Archambeau's own choice) gives the optimiser a Hessian ``K_z + …`` whose
condition number is ``N/ε`` for the jittered smooth kernel.  Everything is computed through
``C_j = I + L_zᵀ Λ_j L_z = R_j R_jᵀ`` (the same eigenvalues as Rasmussen & Williams' ``B``, all
≥ 1): ``S_j = A_j A_jᵀ`` with ``A_j = L_z R_j^{-ᵀ}`` (no cancellation), ``KL_j = ½(tr C_j⁻¹ +
‖a_j‖² − N + log|C_j|)``.
Gradients (by hand, notes in :func:`_forward`) are in ``a``, ``ρ``, ``Z_u`` and ``log ξ`` (the
last for type-II maximum likelihood, the paper's "Maximum Likelihood" comparison).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from scipy.linalg import cho_solve, solve_triangular
from scipy.optimize import brentq, minimize

from .._validation import check_bools, is_number, positive_float, positive_int
from ..errors import (
    ConvergenceError,
    InvalidParameterError,
    NotPositiveDefiniteError,
    ShapeMismatchError,
)
from .density import cholesky_or_raise, gaussian_draws
from .kernels import GPLVMHyper, k_f, k_z, validate_data
from .psi import psi_statistics_vjp

__all__ = ["DEFAULT_JITTER", "INDUCING_JITTER", "ElboGrad", "VBParams", "VBPosterior", "elbo",
           "elbo_and_grad", "fit_vb", "posterior_of"]

#: the input kernel's white noise ε (Gadd et al. §6.1, "for numerical stability")
DEFAULT_JITTER = 1e-6
#: K_u's jitter, relative to θ_S (see the module docstring: the bound stays a bound)
INDUCING_JITTER = 1e-6
#: L-BFGS-B box on ρ = log λ and on log ξ: λ, ξ in [e^-30, e^30] keeps exp finite
_LOG_BOX = 30.0
_LOG2PI = np.log(2.0 * np.pi)
#: L-BFGS-B restarts with a refreshed preconditioner (see _stage)
_MAX_STAGES = 4


class VBParams(NamedTuple):
    """The free variational parameters.

    ``mean_white`` (N, k_z): whitened means ``a``, ``μ = L_z a``; ``log_lambda`` (k_z, N):
    ``ρ_j = log λ_j``, ``S_j = (K_z⁻¹ + diag(exp ρ_j))⁻¹``; ``z_u`` (M, k_z): inducing inputs.
    """

    mean_white: np.ndarray
    log_lambda: np.ndarray
    z_u: np.ndarray

    def to_vector(self) -> np.ndarray:
        """``(a, ρ, Z_u)`` flattened (row-major), shape (2 N k_z + M k_z,)."""
        return np.concatenate([np.ravel(self.mean_white), np.ravel(self.log_lambda),
                               np.ravel(self.z_u)]).astype(float)

    @classmethod
    def from_vector(cls, v: np.ndarray, n: int, k_z: int, m: int) -> VBParams:
        """Inverse of :meth:`to_vector`."""
        a, r = n * k_z, 2 * n * k_z
        return cls(v[:a].reshape(n, k_z), v[a:r].reshape(k_z, n), v[r:r + m * k_z].reshape(m, k_z))


class ElboGrad(NamedTuple):
    """The bound's gradient: per :class:`VBParams` field, and ``log_hyper``.

    ``log_hyper`` (k_x + k_z + 2,): in ``log ξ`` (to_vector's order) at fixed ``(a, ρ, Z_u)``.
    """

    mean_white: np.ndarray
    log_lambda: np.ndarray
    z_u: np.ndarray
    log_hyper: np.ndarray


@dataclass(frozen=True, eq=False)
class VBPosterior:
    """The fitted q(Z) (Gadd et al. §3), also the importance distribution of their eq. 6.

    Attributes
    ----------
    mu : ndarray, shape (N, k_z)
    S : ndarray, shape (k_z, N, N)
        Full covariances ``S_j``.
    z_u : ndarray, shape (M, k_z)
    bound : float
        The variational lower bound on ``log p(Y | X, ξ)`` at this q and ``hyper``.
    n_iter : int
    converged : bool
    hyper : GPLVMHyper or None
        The hyperparameters the bound was evaluated at (optimised ones when ``fit_vb`` was
        called with ``optimise_hyper=True``).
    mean_white, log_lambda : ndarray or None
        The free parameters (:class:`VBParams`), kept for warm starts.
    jitter : float
        The ε of ``K_z`` used.
    trace : tuple of float
        The bound after each optimiser iteration (first entry: the start).
    chol_S : ndarray, shape (k_z, N, N)
        Lower Cholesky factors of ``S_j``; computed from ``S`` when not given.
    """

    mu: np.ndarray
    S: np.ndarray
    z_u: np.ndarray
    bound: float
    n_iter: int
    converged: bool
    hyper: GPLVMHyper | None = None
    mean_white: np.ndarray | None = None
    log_lambda: np.ndarray | None = None
    jitter: float = DEFAULT_JITTER
    trace: tuple[float, ...] = ()
    chol_S: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        n, kz = np.shape(self.mu)
        if np.shape(self.S) != (kz, n, n):
            raise ShapeMismatchError(
                f"VBPosterior: S has shape {np.shape(self.S)} but mu {np.shape(self.mu)} needs "
                f"({kz}, {n}, {n}), one full covariance per latent dimension.")
        if self.chol_S is None:
            try:
                chol = np.linalg.cholesky(np.asarray(self.S, float))
            except np.linalg.LinAlgError as err:
                raise NotPositiveDefiniteError(
                    "VBPosterior: some S_j is not positive definite; pass chol_S or a "
                    "covariance from fit_vb.") from err
            object.__setattr__(self, "chol_S", chol)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` independent draws of Z from q, shape (n, N, k_z): ``z_:,j = μ_j + L_j ε``."""
        n = positive_int("n", n, "ask for at least one draw")
        return self.from_normals(rng.standard_normal((n, *self.mu.shape[::-1])))

    def from_normals(self, eps: np.ndarray) -> np.ndarray:
        """The draws of given standard normals ``eps`` (n, k_z, N), shape (n, N, k_z)."""
        return gaussian_draws(self.mu, self.chol_S, eps)

    def log_density(self, z: np.ndarray) -> np.ndarray:
        """``log q(Z)`` for draws ``z`` of shape (n, N, k_z) (or one (N, k_z)); returns (n,)."""
        z = np.asarray(z, dtype=float)
        if z.ndim == 2:
            z = z[None]
        if z.shape[1:] != self.mu.shape:
            raise ShapeMismatchError(f"z has shape {z.shape}; log_density needs (n, "
                                     f"{', '.join(map(str, self.mu.shape))}) (draws × N × k_z).")
        out = np.full(z.shape[0], -0.5 * self.mu.size * _LOG2PI)
        for j in range(self.mu.shape[1]):
            lj = self.chol_S[j]
            w = solve_triangular(lj, (z[:, :, j] - self.mu[:, j]).T, lower=True)
            out -= 0.5 * (w * w).sum(0) + np.log(np.diag(lj)).sum()
        return out


def _chol(a: np.ndarray, what: str) -> np.ndarray:
    return cholesky_or_raise(
        a, f"{what} is not numerically positive definite; increase jitter (the kernel's "
        "white noise ε) or check for duplicated inputs.")


def _collapsed(y, mu, s, z_u, theta_s, theta, beta, need_grad):
    """Titsias & Lawrence's ``F̃`` (module docstring) and, if asked, its gradient.

    Returns ``(F, (g_mu, g_s, g_zu, g_theta_s, g_theta, g_beta))``.  With ``Σ = (K_u + βψ2)⁻¹``,
    ``P = ψ1ᵀY``, ``T = ΣPPᵀΣ``: ``∂F/∂ψ0 = −βk_y/2``, ``∂F/∂ψ1 = β² Y PᵀΣ``,
    ``∂F/∂ψ2 = −(k_yβ/2)Σ − (β³/2)T + (βk_y/2)K_u⁻¹``,
    ``∂F/∂K_u = (k_y/2)(K_u⁻¹ − Σ) − (β²/2)T − (βk_y/2)K_u⁻¹ψ2K_u⁻¹``.
    """
    n, ky = y.shape
    m = z_u.shape[0]
    (psi0, psi1, psi2), vjp = psi_statistics_vjp(mu, s, z_u, theta_s, theta)
    e_u = k_f(z_u, None, 1.0, theta)
    k_u = theta_s * (e_u + INDUCING_JITTER * np.eye(m))
    l_u = _chol(k_u, "K_u, the inducing inputs' covariance")
    li_u = solve_triangular(l_u, np.eye(m), lower=True)
    a2 = li_u @ psi2 @ li_u.T
    l_b = _chol(np.eye(m) + beta * a2, "I + β K_u^-½ ψ2 K_u^-½")
    p = psi1.T @ y
    c = solve_triangular(l_b, li_u @ p, lower=True)
    yy, cc, tr_a2 = float((y * y).sum()), float((c * c).sum()), float(np.trace(a2))
    f = (0.5 * n * ky * (np.log(beta) - _LOG2PI) - ky * np.log(np.diag(l_b)).sum()
         - 0.5 * beta * yy + 0.5 * beta**2 * cc - 0.5 * beta * ky * psi0
         + 0.5 * beta * ky * tr_a2)
    if not need_grad:
        return f, None
    sig = li_u.T @ cho_solve((l_b, True), li_u)
    ep = sig @ p
    t = ep @ ep.T
    k_inv = li_u.T @ li_u
    g1 = beta**2 * y @ ep.T
    g2 = -0.5 * ky * beta * sig - 0.5 * beta**3 * t + 0.5 * beta * ky * k_inv
    g_ku = (0.5 * ky * (k_inv - sig) - 0.5 * beta**2 * t
            - 0.5 * beta * ky * k_inv @ psi2 @ k_inv)
    g_ku = 0.5 * (g_ku + g_ku.T)
    g_beta = (0.5 * n * ky / beta - 0.5 * ky * float((sig * psi2).sum()) - 0.5 * yy
              + beta * cc - 0.5 * beta**2 * float((t * psi2).sum()) - 0.5 * ky * psi0
              + 0.5 * ky * tr_a2)
    pg = vjp(-0.5 * beta * ky, g1, g2)
    # K_u = θ_S (E + δI), E = exp(−½ Σ_j θ_j Δ_j²): chain ∂F/∂K_u to Z_u, θ_S and θ
    delta = z_u[:, None, :] - z_u[None, :, :]
    w = (g_ku * theta_s * e_u)[..., None]
    g_zu = pg.z_u - 2.0 * (w * theta * delta).sum(1)
    g_theta = pg.theta - 0.5 * (w * delta**2).sum((0, 1))
    g_ts = pg.theta_s + float((g_ku * k_u).sum()) / theta_s
    return f, (pg.mu, pg.s_diag, g_zu, g_ts, g_theta, g_beta)


def _q_factors(l_z: np.ndarray, log_lambda: np.ndarray):
    """Per latent dimension: ``R_j`` (chol of C_j), ``A_j`` (S_j = A_j A_jᵀ), and tr C_j⁻¹."""
    n = l_z.shape[0]
    out = []
    for rho in log_lambda:
        lam = np.exp(rho)
        r = _chol(np.eye(n) + (l_z * lam[:, None]).T @ l_z, "C = I + L_zᵀ Λ L_z")
        r_inv = solve_triangular(r, np.eye(n), lower=True)
        out.append((lam, r, l_z @ r_inv.T, float((r_inv * r_inv).sum())))
    return out


def _forward(y, x, hyper: GPLVMHyper, params: VBParams, jitter: float, need_grad: bool):
    """The bound (and its :class:`ElboGrad`); inputs already validated.

    Gradient notes.  ``∂/∂a_j = L_zᵀ ∂F̃/∂μ_j − a_j``.  ``dS = −S dΛ S`` gives
    ``∂F̃/∂λ_k = −((S∘S) ∂F̃/∂s)_k`` and ``∂KL/∂λ_k = ½((S∘S) λ)_k``.  For ``log σ``, with
    ``K⁻¹S = I − ΛS``: through ``s``, ``∂F̃/∂K_z = (I − ΛS) diag(∂F̃/∂s) (I − SΛ)``; through the
    KL at fixed (a, λ), ``∂KL/∂K_z = ½Λ(S − SΛS)Λ``; through ``μ = L_z a`` the Cholesky
    derivative (Murray 2016) ``sym(L⁻ᵀ Φ(Lᵀ L̄) L⁻¹)``, ``L̄ = Σ_j ∂F̃/∂μ_j a_jᵀ`` and ``Φ`` the
    lower triangle with half the diagonal.
    """
    n = y.shape[0]
    a, rho, z_u = params
    k_mat = k_z(x, None, hyper.sigma, jitter)
    l_z = _chol(k_mat, f"K_z(X) with jitter={jitter:g}")
    mu = l_z @ a
    qf = _q_factors(l_z, rho)
    s = np.stack([(aj * aj).sum(1) for _, _, aj, _ in qf], axis=1)
    kl = sum(0.5 * (tr + float(a[:, j] @ a[:, j]) - n + 2.0 * np.log(np.diag(r)).sum())
             for j, (_, r, _, tr) in enumerate(qf))
    f, g = _collapsed(y, mu, s, z_u, hyper.theta_s, np.asarray(hyper.theta, float), hyper.beta,
                      need_grad)
    bound = f - kl
    if not need_grad:
        return bound, None
    g_mu, g_s, g_zu, g_ts, g_th, g_beta = g
    g_a = l_z.T @ g_mu - a
    g_rho = np.empty_like(rho)
    eye = np.eye(n)
    l_bar = g_mu @ a.T
    li_z = solve_triangular(l_z, eye, lower=True)
    phi = np.tril(l_z.T @ l_bar)
    phi[np.diag_indices(n)] *= 0.5
    k_bar = li_z.T @ phi @ li_z
    k_bar = 0.5 * (k_bar + k_bar.T)
    for j, (lam, _, aj, _) in enumerate(qf):
        s_full = aj @ aj.T
        g_rho[j] = -lam * ((s_full * s_full) @ (g_s[:, j] + 0.5 * lam))
        i_ls = eye - lam[:, None] * s_full                    # K⁻¹S = I − ΛS
        k_bar += (i_ls * g_s[:, j]) @ i_ls.T
        k_bar -= 0.5 * lam[:, None] * (s_full - (s_full * lam) @ s_full) * lam
    sigma = np.asarray(hyper.sigma, float)
    e_x = k_mat - jitter * eye
    d2 = (x[:, None, :] - x[None, :, :]) ** 2
    g_ls = -0.5 * sigma * ((k_bar * e_x)[..., None] * d2).sum((0, 1))
    theta = np.asarray(hyper.theta, float)
    g_log = np.concatenate([g_ls, [hyper.theta_s * g_ts], theta * g_th, [hyper.beta * g_beta]])
    return bound, ElboGrad(g_a, g_rho, g_zu, g_log)


def _checked_forward(y, x, hyper, params, jitter, need_grad):
    y, x = validate_data(y, x, hyper)
    n, k_z = y.shape[0], hyper.k_z
    a, rho, z_u = (np.asarray(p, dtype=float) for p in params)
    for name, arr, shape in (("mean_white", a, (n, k_z)), ("log_lambda", rho, (k_z, n))):
        if arr.shape != shape:
            raise ShapeMismatchError(f"params.{name} has shape {arr.shape}; it needs {shape} "
                                     f"for N = {n} data points and k_z = {k_z}.")
    if z_u.ndim != 2 or z_u.shape[1] != k_z:
        raise ShapeMismatchError(f"params.z_u has shape {z_u.shape}; it needs (M, {k_z}).")
    for name, arr in (("mean_white", a), ("log_lambda", rho), ("z_u", z_u)):
        if not np.all(np.isfinite(arr)):
            raise InvalidParameterError(f"params.{name} has non-finite entries; pass finite "
                                        "values (e.g. from a VBPosterior or fit_vb's start).")
    return _forward(y, x, hyper, VBParams(a, rho, z_u), _jitter(jitter), need_grad)


def elbo(y: np.ndarray, x: np.ndarray, hyper: GPLVMHyper, params: VBParams,
         jitter: float = DEFAULT_JITTER) -> float:
    """The variational lower bound on ``log p(Y | X, ξ)`` (Gadd et al. eq. 3 with F̃ collapsed).

    Parameters
    ----------
    y : ndarray, shape (N, k_y)
    x : ndarray, shape (N, k_x)
    hyper : GPLVMHyper
    params : VBParams
        ``mean_white`` (N, k_z), ``log_lambda`` (k_z, N), ``z_u`` (M, k_z).
    jitter : float
        ε of ``K_z``.

    Returns
    -------
    float
    """
    return float(_checked_forward(y, x, hyper, params, jitter, False)[0])


def elbo_and_grad(y: np.ndarray, x: np.ndarray, hyper: GPLVMHyper, params: VBParams,
                  jitter: float = DEFAULT_JITTER) -> tuple[float, ElboGrad]:
    """The bound of :func:`elbo` and its gradient (:class:`ElboGrad`).

    The gradient is with respect to ``a`` (N, k_z), ``ρ`` (k_z, N), ``Z_u`` (M, k_z) and
    ``log ξ`` (k_x + k_z + 2,), each at the others fixed.
    """
    b, g = _checked_forward(y, x, hyper, params, jitter, True)
    return float(b), g


def _jitter(jitter: float) -> float:
    if not is_number(jitter) or not np.isfinite(jitter) or jitter < 0:
        raise InvalidParameterError(f"jitter={jitter!r} must be a finite number >= 0 (the "
                                    f"input kernel's white noise ε; e.g. {DEFAULT_JITTER}).")
    return float(jitter)


def _pca_means(y: np.ndarray, k: int) -> np.ndarray:
    """Step 1 of Algorithm 1: the first k principal-component scores of Y.

    Scaled to unit variance (the prior p(z_:,j | X) has unit marginal variance), signs fixed
    (largest score positive) for determinism.
    """
    yc = y - y.mean(0)
    u, sv, _ = np.linalg.svd(yc, full_matrices=False)
    scores = u[:, :k] * sv[:k]
    scores *= np.where(scores[np.argmax(np.abs(scores), 0), range(k)] < 0, -1.0, 1.0)
    sd = scores.std(0)
    return scores / np.where(sd > 0, sd, 1.0)


def _initial_log_lambda(k_mat: np.ndarray, k: int, target: float = 0.5) -> np.ndarray:
    """Step 1's "variances to 0.5" in this parameterisation, as ``ρ`` (k, N).

    ``Λ_j = c I`` with ``c`` such that the average of diag((K_z⁻¹ + cI)⁻¹) is 0.5 (exactly 0.5
    everywhere would need a non-constant Λ because the prior correlates neighbours), found
    from K_z's eigenvalues κ: mean_i κ_i / (1 + c κ_i) = 0.5.
    """
    kap = np.clip(np.linalg.eigvalsh(k_mat), 0.0, None)
    mean_var = kap.mean()
    if mean_var <= target:             # prior already tighter than 0.5: Λ ≈ 0
        return np.full((k, k_mat.shape[0]), -_LOG_BOX)

    def excess(log_c: float) -> float:
        return float(np.mean(kap / (1.0 + np.exp(log_c) * kap))) - target

    log_c = brentq(excess, -_LOG_BOX, _LOG_BOX, xtol=1e-10)
    return np.full((k, k_mat.shape[0]), log_c)


def posterior_of(y, x, hyper, params, jitter, n_iter=0, converged=True, trace=()) -> VBPosterior:
    """The :class:`VBPosterior` of ``params`` (:class:`VBParams`) at ``hyper`` (no optimising)."""
    bound = float(_forward(y, x, hyper, params, jitter, False)[0])
    if not np.isfinite(bound):
        raise ConvergenceError(f"the variational bound ended non-finite ({bound}); try a "
                               "larger jitter, other initial values or fewer inducing inputs.")
    l_z = np.linalg.cholesky(k_z(x, None, hyper.sigma, jitter))
    s_list, chol = [], []
    for _, _, aj, _ in _q_factors(l_z, params.log_lambda):
        s_list.append(aj @ aj.T)
        # chol of S = A Aᵀ from the QR of Aᵀ: exact, never forms or re-factors S
        r = np.linalg.qr(aj.T, mode="r")
        chol.append(r.T * np.sign(np.diag(r)))
    return VBPosterior(l_z @ params.mean_white, np.stack(s_list), params.z_u.copy(), bound,
                       int(n_iter), bool(converged), hyper, params.mean_white.copy(),
                       params.log_lambda.copy(), jitter, tuple(trace), np.stack(chol))


def _stage(y, x, hyper, params, jitter, optimise_hyper, max_iter, tol, trace, prior_sd=None):
    """One L-BFGS-B run over ``(b, ρ, Z_u[, log ξ])`` with ``a_j = R_j^{-ᵀ} b_j``.

    With ``prior_sd`` the objective over ``log ξ`` adds ``Σ log N(log ξ | 0, prior_sd²)``.

    ``R_j`` (chol of ``C_j = I + L_zᵀ Λ_j L_z``) is frozen at the stage's start.  Why: the
    Hessian in ``a_j`` is ``I + L_zᵀ H_j L_z``, ``H_j`` the curvature of ``−F̃`` in ``μ_j``, and
    ``H_j ≈ Λ_j`` (``∂²⟨f⟩/∂μ² = 2 ∂⟨f⟩/∂s`` under a Gaussian, ``Λ_j = −2 ∂F̃/∂s_j`` at the
    optimum): on the §6.1 data the mean block's condition number fell from ~5000 to ~100.
    """
    n, kz = params.mean_white.shape
    kx, m = hyper.k_x, params.z_u.shape[0]
    l_z = _chol(k_z(x, None, hyper.sigma, jitter), f"K_z(X) with jitter={jitter:g}")
    r0 = [r for _, r, _, _ in _q_factors(l_z, params.log_lambda)]
    b0 = np.stack([r.T @ params.mean_white[:, j] for j, r in enumerate(r0)], axis=1)
    n_var = 2 * n * kz + m * kz
    bounds = ([(None, None)] * (n * kz) + [(-_LOG_BOX, _LOG_BOX)] * (n * kz)
              + [(None, None)] * (m * kz))
    v0 = VBParams(b0, params.log_lambda, params.z_u).to_vector()
    if optimise_hyper:
        v0 = np.concatenate([v0, np.clip(hyper.to_log(), -_LOG_BOX, _LOG_BOX)])
        bounds += [(-_LOG_BOX, _LOG_BOX)] * (kx + kz + 2)

    def unpack(v: np.ndarray) -> tuple[VBParams, GPLVMHyper]:
        h = GPLVMHyper.from_log(v[n_var:], kx, kz) if optimise_hyper else hyper
        b, rho, z_u = VBParams.from_vector(v, n, kz, m)
        a = np.stack([solve_triangular(r, b[:, j], lower=True, trans="T")
                      for j, r in enumerate(r0)], axis=1)
        return VBParams(a, rho, z_u), h

    def objective(v: np.ndarray) -> tuple[float, np.ndarray]:
        p, h = unpack(v)
        bound, g = _forward(y, x, h, p, jitter, True)
        g_b = np.stack([solve_triangular(r, g.mean_white[:, j], lower=True)
                        for j, r in enumerate(r0)], axis=1)
        g_h = [g.log_hyper] if optimise_hyper else []
        if optimise_hyper and prior_sd is not None:  # MAP-II: the log-ξ priors and gradient
            eta = v[n_var:]
            bound -= 0.5 * float(eta @ eta) / prior_sd**2
            g_h = [g_h[0] - eta / prior_sd**2]
        grad = np.concatenate([g_b.ravel(), g.log_lambda.ravel(), g.z_u.ravel(), *g_h])
        return -bound, -grad

    if not trace:
        trace.append(-objective(v0)[0])

    def record(intermediate_result) -> None:
        trace.append(-float(intermediate_result.fun))

    res = minimize(objective, v0, jac=True, method="L-BFGS-B", bounds=bounds, callback=record,
                   options={"maxiter": max(max_iter, 1), "ftol": tol, "gtol": 1e-6,
                            "maxcor": 20})
    p, h = unpack(res.x)
    return p, h, res


def fit_vb(y: np.ndarray, x: np.ndarray, hyper: GPLVMHyper, *, n_inducing: int | None = None,
           init: VBPosterior | None = None, optimise_hyper: bool = False,
           max_iter: int = 2000, tol: float = 1e-7, jitter: float = DEFAULT_JITTER,
           rng: np.random.Generator | None = None,
           prior_sd: float | None = None) -> VBPosterior:
    """Algorithm 1 of Gadd et al.: maximise the variational bound over (μ, S, Z_u) [and log ξ].

    Parameters
    ----------
    y : ndarray, shape (N, k_y)
    x : ndarray, shape (N, k_x)
    hyper : GPLVMHyper
        Fixed hyperparameters, or the starting point when ``optimise_hyper``.  Its ``theta``
        sets k_z.
    n_inducing : int, optional
        M in [1, N]; default ``min(N, 15)``.  Ignored when ``init`` is given (its ``z_u``).
    init : VBPosterior, optional
        Warm start (e.g. the previous fit after a hyperparameter move, Gadd et al. §6.1): its
        ``mean_white``, ``log_lambda`` and ``z_u`` are the starting point.
    optimise_hyper : bool
        Also maximise over ``log ξ`` (type-II maximum likelihood, the paper's "ML").
    prior_sd : float, optional
        With ``optimise_hyper``: maximise the bound plus independent ``N(0, prior_sd²)``
        log-priors on ``log ξ`` instead (type-II maximum a posteriori; ``trace`` then holds
        that sum, ``bound`` the bound alone).
    max_iter : int
        L-BFGS-B iterations at most.
    tol : float
        L-BFGS-B's ``ftol``: stop when the relative change of the bound is below it.
    jitter : float
        ε of ``K_z``.
    rng : numpy Generator, optional
        Picks the inducing inputs among the initial means; ``None`` means ``default_rng(0)``.

    Returns
    -------
    VBPosterior
        With ``hyper`` the (possibly optimised) hyperparameters.

    Notes
    -----
    The paper optimises with scaled conjugate gradients, which scipy lacks; L-BFGS-B (also a
    quasi-Newton gradient method) is used instead, with a box |ρ|, |log ξ| ≤ 30 that only keeps
    ``exp`` finite.  ``converged`` is scipy's ``success``.
    """
    y, x = validate_data(y, x, hyper)
    jitter = _jitter(jitter)
    check_bools(optimise_hyper=optimise_hyper)
    max_iter = positive_int("max_iter", max_iter, "pass e.g. 2000")
    tol = positive_float("tol", tol, "pass e.g. 1e-7")
    if prior_sd is not None:
        if not optimise_hyper:
            raise InvalidParameterError(f"prior_sd={prior_sd!r} applies to the hyperparameters; "
                                        "pass optimise_hyper=True, or prior_sd=None.")
        prior_sd = positive_float("prior_sd", prior_sd, "the sd of the log-ξ priors, e.g. 3")
    n, kz = y.shape[0], hyper.k_z
    if rng is not None and not isinstance(rng, np.random.Generator):
        raise InvalidParameterError(f"rng={rng!r} must be a numpy Generator "
                                    "(np.random.default_rng(seed)) or None.")
    if init is not None:
        if not isinstance(init, VBPosterior):
            raise InvalidParameterError(f"init is a {type(init).__name__}; pass the "
                                        "VBPosterior of a previous fit_vb or None.")
        if init.mu.shape != (n, kz):
            raise ShapeMismatchError(
                f"init has means of shape {init.mu.shape} but the data and hyper need "
                f"({n}, {kz}); warm-start only from a fit to the same y and latent dimension.")
    else:
        m = min(n, 15) if n_inducing is None else n_inducing
        if isinstance(m, bool) or not isinstance(m, int | np.integer) or not 1 <= m <= n:
            raise InvalidParameterError(f"n_inducing={n_inducing!r} must be an integer in "
                                        f"[1, N] = [1, {n}]; e.g. {min(n, 15)}.")
    k_mat = k_z(x, None, hyper.sigma, jitter)
    l_z = _chol(k_mat, f"K_z(X) with jitter={jitter:g}")
    if init is None:
        # step 1: means by PCA on Y, variances to 0.5 (see _initial_log_lambda), then the
        # inducing inputs: a random subset of the initial means (deterministic given rng)
        mu0 = _pca_means(y, kz)
        rng = np.random.default_rng(0) if rng is None else rng
        idx = np.sort(rng.choice(n, size=int(m), replace=False))
        # μ0 itself would need a = L_z⁻¹ μ0, ~1/√ε large for rough scores (a KL of ~10⁵ from
        # which the optimiser collapses μ to 0): take the prior's smoothing of the scores
        # read as observations with the initial variance 0.5, a = L_zᵀ (K_z + ½I)⁻¹ μ0
        a0 = l_z.T @ np.linalg.solve(k_mat + 0.5 * np.eye(n), mu0)
        params = VBParams(a0, _initial_log_lambda(k_mat, kz), (l_z @ a0)[idx])
    else:
        # a VBPosterior built by hand from (μ, S) has no free parameters: whiten μ, reset Λ
        a0 = solve_triangular(l_z, init.mu, lower=True) if init.mean_white is None \
            else init.mean_white
        rho0 = _initial_log_lambda(k_mat, kz) if init.log_lambda is None else init.log_lambda
        params = VBParams(np.array(a0, float), np.clip(rho0, -_LOG_BOX, _LOG_BOX),
                          np.array(init.z_u, float))
    # steps 2–6: while not at a local maximum, compute ψ (step 3), the bound (step 4) and move
    # the variational parameters along the gradient (step 5), by L-BFGS-B in place of SCG;
    # stages restart it with a preconditioner refreshed at the stage's start (_stage)
    # with optimise_hyper, q is first fitted at the given ξ: from the PCA start the KL is large
    # and a joint run drifts to the all-noise solution (θ_S → 0) before q has settled
    trace: list[float] = []
    n_iter, converged, h = 0, False, hyper
    for joint in (False, True) if optimise_hyper else (False,):
        for _ in range(_MAX_STAGES):
            params, h, res = _stage(y, x, h, params, jitter, joint, max_iter - n_iter, tol,
                                    trace, prior_sd)
            n_iter += res.nit
            converged = bool(res.success)
            if n_iter >= max_iter or res.nit <= 2:
                break
    return posterior_of(y, x, h, params, jitter, n_iter, converged, trace)
