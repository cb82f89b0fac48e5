r"""A Laplace-type importance distribution for ``Z`` given ``ξ`` (decision 129).

**Why.**  The variational ``q`` of §3 factorises over the latent columns (``q(Z) = Π_j
N(μ_j, S_j)``) and, as mean-field fits do, is narrower than the posterior ``p(Z | Y, X, ξ)``:
on §6.1's case 1 a Gaussian with the posterior's curvature has more than twice ``q``'s variance
in 7 of 60 directions and the typical ``log p̃`` of eq. 6 is ≈ 14 nats higher with it
(orbit mixtures of both; docs/gplvm.md).  The estimate with the narrow ``q`` is unbiased but
its rare large weights lie out in ``q``'s tails; a correlated pseudo-marginal chain's normals
climb towards them (``benchmarks/papers/gplvm_tails.py``), so ``log p̃`` drifts for thousands
of iterations and the chains disagree (R-hat of ``log p̃`` 1.5–1.9).

**What.**  ``q_L(Z) = N(vec Z | m, P⁻¹)`` on all ``N k_z`` latent coordinates at once
(``vec`` stacks the columns of ``Z``: index ``j N + n``), with

* ``P = I_{k_z} ⊗ K_z⁻¹ + F(m)``: the prior's precision (eq. 2) plus the **Fisher
  information** of eq. 1 about ``Z``,
  ``F_{(a,j),(b,l)} = (k_y/2) tr(C⁻¹ ∂_{aj}C C⁻¹ ∂_{bl}C)``, ``C = K_f(Z) + β⁻¹ I``
  (the expected, not the observed, negative Hessian: positive semi-definite everywhere, so
  ``P`` is positive definite without eigenvalue clipping even where the observed Hessian is
  not — at the VB mean it is indefinite along the orbit of :mod:`.orbit`);
* ``m`` the conditional mode of ``log p(Y, Z | X, ξ)`` by damped Fisher scoring from the
  variational mean (Newton's method with ``P`` for the Hessian, halving the step until the
  joint density rises; :data:`MODE_STEPS` steps at most).

Everything is a deterministic function of ``ξ`` and the variational mean it starts from, so
with ``refit="proposal"`` the estimate stays exact (:mod:`.sweep`); a better ``q`` only lowers
the estimator's variance.

**Fisher information by hand.**  ``∂_{aj} C`` (``a`` a point, ``j`` a latent column) is
``e_a v_{aj}ᵀ + v_{aj} e_aᵀ`` with ``v_{aj}[m] = −θ_j (z_{aj} − z_{mj}) K_f[a, m]``: rank 2.
With ``U = C⁻¹ V`` (``V`` the N × N k_z matrix of the ``v``),

.. math::

    \tfrac12 \operatorname{tr}(C^{-1}\partial_{aj}C\, C^{-1}\partial_{bl}C)
      = U_{a,(b,l)}\, U_{b,(a,j)} + C^{-1}_{ab}\, (V^T U)_{(a,j),(b,l)},

two matrix products of ``O(N³ k_z²)``; the gradient of eq. 1 is
``2 Σ_m G_{am} v_{aj}[m]`` with ``G = ½(C⁻¹YYᵀC⁻¹ − k_y C⁻¹)`` (Rasmussen & Williams 2006,
eq. 5.9).  Fisher information as the metric of a Gaussian model: Girolami & Calderhead (2011,
"Riemann manifold Langevin and Hamiltonian Monte Carlo methods", *JRSS B* 73, 123–214, §5).

**Tails.**  ``q_L`` is still Gaussian; the orbit mixture (:mod:`.orbit`) and its defensive
half are built around it exactly as around the variational ``q``.  ``curvature="widened"``
lowers ``P`` to the observed information wherever that is smaller (:func:`widened_precision`,
decision 131): at N = 351 the Fisher information overstates the curvature up to 13× in a few
directions.  It did not close the estimator's upper tail there, so it is not the default.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.linalg import cho_solve, solve_triangular

from .._validation import positive_int
from ..errors import InvalidParameterError, ShapeMismatchError
from .density import (
    as_draws,
    check_hyper,
    check_x,
    check_y,
    cholesky_or_raise,
    kf_noise_factor,
    kz_factor,
    log_p_y_given_z,
    log_p_z_given_x,
)
from .kernels import GPLVMHyper

__all__ = ["CURVATURES", "MODE_STEPS", "Curvature", "FullGaussianQ", "joint_curvature", "laplace_q",
           "widened_precision"]

#: Fisher-scoring steps of the mode search at most.  On §6.1's case 1 at the reference's
#: median ξ (Q = 64, orbit K = 1024) the typical log p̃ was 159.14 ± 0.79 with q_L at the VB
#: mean and 159.34 ± 0.67 at the mode; the joint density rose 5.4 nats in 2 steps and 0.02 in
#: the next 8 (docs/gplvm.md)
MODE_STEPS = 5
#: a step is kept when it raises log p(Y, Z | ξ) by at least this (nats); halvings at most
MODE_TOL, MODE_HALVINGS = 1e-3, 12
#: the precisions q_L can have (:func:`laplace_q`); the first is the default
CURVATURES = ("fisher", "widened")
#: smallest eigenvalue of the widened precision in the Fisher metric (:func:`widened_precision`)
WIDEN_FLOOR = 0.01
_LOG_2PI = float(np.log(2.0 * np.pi))


class Curvature(NamedTuple):
    """``log p(Y, Z | X, ξ)`` at one ``Z``, its gradient and the precision ``P`` of ``q_L``.

    Attributes
    ----------
    value : float
        ``log p(Y | Z, ξ) + log p(Z | X, σ)`` (eqs. 1 and 2).
    grad : ndarray, shape (N, k_z)
    precision : ndarray, shape (N k_z, N k_z)
        ``I ⊗ K_z⁻¹ + F(Z)`` in ``vec`` order (columns of ``Z`` stacked).
    """

    value: float
    grad: np.ndarray
    precision: np.ndarray
    #: ``I ⊗ K_z⁻¹`` plus the observed information ``−∇² log p(Y | Z, ξ)`` (the full negative
    #: Hessian of the joint density), when asked for; None otherwise
    observed: np.ndarray | None = None


def joint_curvature(y: np.ndarray, x: np.ndarray, hyper: GPLVMHyper, z: np.ndarray,
                    jitter: float, kz_chol: np.ndarray | None = None,
                    observed: bool = False) -> Curvature:
    """Value, gradient and Fisher precision of ``log p(Y, Z | X, ξ)`` (module docstring).

    Parameters
    ----------
    y : ndarray, shape (N, k_y)
    x : ndarray, shape (N, k_x)
    hyper : GPLVMHyper
    z : ndarray, shape (N, k_z)
    jitter : float
        ``ε`` of ``K_z``.
    kz_chol : ndarray, shape (N, N), optional
        Lower Cholesky factor of ``K_z + εI`` if already computed.
    observed : bool
        Also compute the observed information (:attr:`Curvature.observed`).

    Returns
    -------
    Curvature
    """
    check_hyper(hyper)
    y = check_y(y)
    x = check_x(x, y.shape[0], hyper)
    z = as_draws(z, y.shape[0], hyper.k_z)[0]
    l_z = kz_factor(x, hyper, jitter) if kz_chol is None else kz_chol
    return _curvature(y, hyper, z, cho_solve((l_z, True), np.eye(y.shape[0])),
                      _log_joint(y, x, hyper, z, jitter), observed)


def _curvature(y: np.ndarray, hyper: GPLVMHyper, z: np.ndarray, kz_inv: np.ndarray,
               value: float, observed: bool = False) -> Curvature:
    """:func:`joint_curvature`'s work at a checked ``z`` (N, k_z).

    ``K_z⁻¹`` and the joint density at ``z`` are passed in: the mode search has both.
    """
    n_pts, k_y = y.shape
    k_lat = z.shape[1]
    theta = np.asarray(hyper.theta, dtype=float)
    diff = z[:, None, :] - z[None, :, :]                       # (a, m, j): z_aj − z_mj
    k_f = hyper.theta_s * np.exp(-0.5 * np.einsum("amj,j->am", diff * diff, theta))
    l_c = kf_noise_factor(z, hyper)
    c_inv = cho_solve((l_c, True), np.eye(n_pts))
    alpha = c_inv @ y
    g_mat = 0.5 * (alpha @ alpha.T - k_y * c_inv)             # ∂ log p(Y|Z) / ∂K_f
    v = -(diff * theta) * k_f[:, :, None]                      # v[a, m, j] = v_aj[m]
    grad = 2.0 * np.einsum("am,amj->aj", g_mat, v) - kz_inv @ z
    # V as an N × (k_z N) matrix in vec order: column (j, a) is v_aj
    v_mat = v.transpose(1, 2, 0).reshape(n_pts, k_lat * n_pts)
    u_mat = c_inv @ v_mat                                      # U[m, (j, a)] = (C⁻¹ v_aj)[m]
    vpv = v_mat.T @ u_mat                                      # (j,a),(l,b)
    u3 = u_mat.reshape(n_pts, k_lat, n_pts)                    # U[m, j, a]
    # F = k_y (U[a,(l,b)] U[b,(j,a)] + C⁻¹_ab (VᵀU)_(j,a),(l,b)) (module docstring)
    c_tile = np.tile(c_inv, (k_lat, k_lat))                   # C⁻¹_ab at ((j,a),(l,b))
    fisher = np.einsum("alb,bja->jalb", u3, u3).reshape(vpv.shape)
    fisher += c_tile * vpv
    fisher *= k_y
    obs = None
    if observed:
        obs = _observed_info(alpha, c_tile, g_mat, k_f, diff, theta, v_mat, u_mat, vpv) - fisher
    prec = fisher
    for j in range(k_lat):
        block = slice(j * n_pts, (j + 1) * n_pts)
        prec[block, block] += kz_inv
        if obs is not None:
            obs[block, block] += kz_inv
    return Curvature(value, grad, 0.5 * (prec + prec.T),
                     None if obs is None else 0.5 * (obs + obs.T))


def _observed_info(alpha: np.ndarray, c_tile: np.ndarray, g_mat: np.ndarray, k_f: np.ndarray,
                   diff: np.ndarray, theta: np.ndarray, v_mat: np.ndarray, u_mat: np.ndarray,
                   vpv: np.ndarray) -> np.ndarray:
    r"""``−∇² log p(Y | Z, ξ) + F``: the observed information plus ``F`` (the caller subtracts it).

    With ``∂_i`` for ``∂/∂z_{aj}`` and ``G`` of the gradient,
    ``∂_i∂_k log p(Y|Z) = −tr(C⁻¹ ∂_k C αα^T ∂_i C) + F_ik + tr(G ∂_i∂_k C)``
    (differentiate ``tr(G ∂_i C)``; ``E[ααᵀ] = k_y C⁻¹`` gives back ``−F``).  The first term,
    with ``∂C`` rank 2 as in the module docstring (``v = v_aj``, ``w = v_bl``), is
    ``(C⁻¹v)_b (ααᵀw)_a + C⁻¹_ab wᵀααᵀv + (ααᵀ)_ab vᵀC⁻¹w + (C⁻¹w)_a (ααᵀv)_b``;
    ``ααᵀ`` has rank ``k_y``, so its products are cheap.  ``∂_{aj}∂_{bl} C`` (``a ≠ b``) is
    ``s_ab^{jl} (e_a e_bᵀ + e_b e_aᵀ)`` with ``s_ab^{jl} = K_f[a,b] (θ_j δ_jl − θ_j θ_l
    d_j d_l)``, ``d = z_a − z_b``, and ``∂_{aj}∂_{al} C`` is ``−s_am^{jl}`` along row and
    column ``a`` (``m ≠ a``); hence ``tr(G ∂²C)``'s block ``(j, l)`` is
    ``M − diag(M 1)`` with ``M = 2 G ∘ s^{jl}`` off its diagonal.  ``c_tile`` is ``C⁻¹``
    tiled ``k_z × k_z`` (the Fisher term's, shared).
    """
    n_pts = g_mat.shape[0]
    k_lat = diff.shape[2]
    atv = alpha.T @ v_mat                                      # (k_y, k_z N)
    ub3 = (alpha @ atv).reshape(n_pts, k_lat, n_pts)           # (ααᵀ v_aj)[m] at [m, j, a]
    ua3 = u_mat.reshape(n_pts, k_lat, n_pts)                   # (C⁻¹ v_aj)[m]
    first = (np.einsum("bja,alb->jalb", ua3, ub3)
             + np.einsum("alb,bja->jalb", ua3, ub3)).reshape(vpv.shape)
    first += c_tile * (atv.T @ atv)
    first += np.tile(alpha @ alpha.T, (k_lat, k_lat)) * vpv
    for j in range(k_lat):
        for m in range(k_lat):
            s = k_f * ((theta[j] if j == m else 0.0)
                       - theta[j] * theta[m] * diff[:, :, j] * diff[:, :, m])
            mm = 2.0 * g_mat * s
            np.fill_diagonal(mm, 0.0)
            first[j * n_pts:(j + 1) * n_pts, m * n_pts:(m + 1) * n_pts] -= \
                mm - np.diag(mm.sum(axis=1))
    # −∇² = first − F − tr(G ∂²C); the caller subtracts F
    return first


def _log_joint(y: np.ndarray, x: np.ndarray, hyper: GPLVMHyper, z: np.ndarray,
               jitter: float) -> float:
    """``log p(Y | Z, ξ) + log p(Z | X, σ)`` at one ``Z`` (eqs. 1 and 2)."""
    return float(log_p_y_given_z(y, z, hyper)[0] + log_p_z_given_x(z, x, hyper, jitter)[0])


class FullGaussianQ:
    r"""``N(vec Z | vec μ, P⁻¹)`` on all ``N k_z`` latent coordinates (module docstring).

    Parameters
    ----------
    mu : ndarray, shape (N, k_z)
    precision : ndarray, shape (N k_z, N k_z)
        Symmetric positive definite, in ``vec`` order (column ``j`` of ``Z`` at
        ``j N … (j+1) N − 1``).

    Notes
    -----
    With ``P = L Lᵀ`` (lower ``L``) a draw is ``vec Z = vec μ + L⁻ᵀ ε`` for standard normals
    ``ε`` of shape (k_z, N), the layout of :class:`~.density.GaussianQ`'s normals, so a
    correlated chain carries the same ``u`` whichever ``q`` it uses; ``log q = −½‖Lᵀ(vec Z −
    vec μ)‖² + log|L| − (N k_z/2) log 2π``.
    """

    def __init__(self, mu: np.ndarray, precision: np.ndarray) -> None:
        mu = np.asarray(mu, dtype=np.float64)
        if mu.ndim != 2:
            raise ShapeMismatchError(f"mu has shape {mu.shape}; expected (N, k_z).")
        dim = mu.size
        precision = np.asarray(precision, dtype=np.float64)
        if precision.shape != (dim, dim):
            raise ShapeMismatchError(
                f"precision has shape {precision.shape}; with mu of shape {mu.shape} it must "
                f"be (N k_z, N k_z) = ({dim}, {dim}).")
        self._chol = cholesky_or_raise(
            precision, "the Laplace importance distribution's precision has no Cholesky "
            "factor; it must be positive definite.")
        self.mu = mu
        self._vec_mu = mu.T.reshape(-1)
        self._log_det_l = float(np.log(np.diag(self._chol)).sum())

    @property
    def shape(self) -> tuple[int, int]:
        """``(N, k_z)``."""
        return self.mu.shape  # type: ignore[return-value]

    @property
    def chol_precision(self) -> np.ndarray:
        """Lower Cholesky factor ``L`` of the precision ``P = L Lᵀ`` (D, D)."""
        return self._chol

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` draws, shape (n, N, k_z), from ``rng.standard_normal((n, k_z, N))``."""
        n = positive_int("n", n, "ask for at least one draw")
        return self.from_normals(rng.standard_normal((n, *self.mu.shape[::-1])))

    def from_normals(self, eps: np.ndarray) -> np.ndarray:
        """The draws ``vec Z = vec μ + L⁻ᵀ ε`` of standard normals ``eps`` (n, k_z, N).

        Returns
        -------
        ndarray, shape (n, N, k_z)
        """
        eps = np.asarray(eps, dtype=np.float64)
        n_pts, k_lat = self.mu.shape
        if eps.ndim != 3 or eps.shape[1:] != (k_lat, n_pts):
            raise ShapeMismatchError(
                f"eps has shape {eps.shape}; the normals of q's draws have shape (n, k_z, N) "
                f"= (n, {k_lat}, {n_pts}).")
        flat = solve_triangular(self._chol.T, eps.reshape(eps.shape[0], -1).T, lower=False,
                                check_finite=False)
        return (self._vec_mu[:, None] + flat).T.reshape(-1, k_lat, n_pts).transpose(0, 2, 1)

    def whitener(self) -> tuple[np.ndarray, float]:
        """``(W, c)`` with ``log q(Z) = c − ½‖W (vec Z − vec μ)‖²``: ``W = Lᵀ`` (D, D)."""
        return self._chol.T, self._log_det_l - 0.5 * self.mu.size * _LOG_2PI

    def log_density(self, z: np.ndarray) -> np.ndarray:
        """``log q_L(Z)`` per draw, shape (n,), for ``z`` (n, N, k_z) or (N, k_z)."""
        n_pts, k_lat = self.mu.shape
        z = as_draws(z, n_pts, k_lat)
        w, c = self.whitener()
        r = w @ (z.transpose(0, 2, 1).reshape(z.shape[0], -1) - self._vec_mu).T
        return c - 0.5 * (r * r).sum(axis=0)


def laplace_q(y: np.ndarray, x: np.ndarray, hyper: GPLVMHyper, start: np.ndarray,
              jitter: float, mode_steps: int = MODE_STEPS,
              curvature: str = CURVATURES[0]) -> FullGaussianQ:
    """``q_L`` at ``ξ``: Fisher scoring from ``start`` towards the mode, then ``P`` there.

    Parameters
    ----------
    y : ndarray, shape (N, k_y)
    x : ndarray, shape (N, k_x)
    hyper : GPLVMHyper
    start : ndarray, shape (N, k_z)
        Where the mode search begins: the variational mean at ``ξ``.
    jitter : float
        ``ε`` of ``K_z``.
    mode_steps : int
        Fisher-scoring steps at most (0: ``q_L`` at ``start``).  Each step is
        ``Δ = P⁻¹ ∇ log p(Y, Z)``, halved up to :data:`MODE_HALVINGS` times until the joint
        density rises by :data:`MODE_TOL`; the search stops at the first step that does not.
    curvature : {"fisher", "widened"}
        The precision at the last point: ``"fisher"`` (default) ``P``; ``"widened"`` ``P``
        lowered to the observed information wherever that is smaller
        (:func:`widened_precision`).

    Returns
    -------
    FullGaussianQ
        Mean the last accepted point, precision as ``curvature`` says there.
    """
    if isinstance(mode_steps, bool) or not isinstance(mode_steps, int | np.integer) \
            or mode_steps < 0:
        raise InvalidParameterError(
            f"mode_steps={mode_steps!r} must be an integer >= 0 (Fisher-scoring steps; 0 "
            f"builds q_L at the start), e.g. {MODE_STEPS}.")
    if curvature not in CURVATURES:
        raise InvalidParameterError(
            f"curvature={curvature!r} must be one of {list(CURVATURES)} (the precision of "
            "q_L: the Fisher information, or the Fisher widened by the observed one).")
    check_hyper(hyper)
    y = check_y(y)
    x = check_x(x, y.shape[0], hyper)
    z = as_draws(start, y.shape[0], hyper.k_z)[0].copy()
    # K_z⁻¹ once for every step; each accepted step's joint density is the line search's
    kz_inv = cho_solve((kz_factor(x, hyper, jitter), True), np.eye(y.shape[0]))
    cur = _curvature(y, hyper, z, kz_inv, _log_joint(y, x, hyper, z, jitter))
    q = FullGaussianQ(z, cur.precision)
    for _ in range(int(mode_steps)):
        # Δ = P⁻¹ g through q's factor of P (the same factor the draws use)
        g = cur.grad.T.reshape(-1)
        step = cho_solve((q.chol_precision, True), g).reshape(z.shape[::-1]).T
        t, moved = 1.0, False
        for _ in range(MODE_HALVINGS):
            cand = z + t * step
            val = _log_joint(y, x, hyper, cand, jitter)
            if val > cur.value + MODE_TOL:
                moved = True
                break
            t *= 0.5
        if not moved:
            break
        z = cand
        cur = _curvature(y, hyper, z, kz_inv, val)
        q = FullGaussianQ(z, cur.precision)
    if curvature == "fisher":
        return q
    obs = _curvature(y, hyper, z, kz_inv, cur.value, observed=True).observed
    return FullGaussianQ(z, widened_precision(q.chol_precision, obs))


def widened_precision(chol: np.ndarray, observed: np.ndarray,
                      floor: float = WIDEN_FLOOR) -> np.ndarray:
    r"""The Fisher precision ``P = L Lᵀ`` lowered to the observed information ``H`` where smaller.

    With ``L⁻¹ H L⁻ᵀ = V Λ Vᵀ`` the result is ``(L V) min(max(Λ, floor), 1) (L V)ᵀ``: equal to
    ``P`` where ``H ≥ P`` and to ``H`` where ``H < P``, direction by direction in ``P``'s
    metric, so it is below both ``P`` and ``H`` (in the Loewner order) and the Gaussian is
    at least as wide as both Laplace approximations: where the posterior is flatter than its
    Fisher curvature says, ``q`` is too (decision 131).  ``floor`` bounds the widening where
    ``H`` is indefinite or nearly so (a point short of the mode).

    Parameters
    ----------
    chol : ndarray, shape (D, D)
        Lower Cholesky factor of the Fisher precision.
    observed : ndarray, shape (D, D)
        The observed information (symmetric).
    floor : float
        Smallest eigenvalue of ``L⁻¹ P' L⁻ᵀ``, in ``(0, 1]``.

    Returns
    -------
    ndarray, shape (D, D)
    """
    if not 0.0 < floor <= 1.0:
        raise InvalidParameterError(f"floor={floor!r} must be in (0, 1], e.g. {WIDEN_FLOOR}.")
    half = solve_triangular(chol, observed, lower=True, check_finite=False)       # L⁻¹ H
    whitened = solve_triangular(chol, half.T, lower=True, check_finite=False)     # L⁻¹ H L⁻ᵀ
    lam, vec = np.linalg.eigh(0.5 * (whitened + whitened.T))
    b = chol @ vec
    out = (b * np.clip(lam, floor, 1.0)) @ b.T
    return 0.5 * (out + out.T)
