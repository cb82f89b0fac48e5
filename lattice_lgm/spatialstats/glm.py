"""Log-linear Poisson regression on lattice cells by IRLS."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.fft
import scipy.linalg
import scipy.optimize

from .._validation import positive_float, positive_int
from ..errors import (
    ConvergenceError,
    InvalidDataError,
    InvalidParameterError,
    ShapeMismatchError,
)


# ------------------------------------------------------------------------------------------------
# Poisson GLM
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GLMFit:
    """A log-linear Poisson regression ``y ~ Poisson(E exp(β₀ + X β))`` fitted by IRLS.

    Attributes
    ----------
    intercept : float
        ``β₀``.
    coef : ndarray, shape (p,)
        ``β``, one per column of ``X``.
    se : ndarray, shape (p + 1,)
        Standard errors of ``(β₀, β)`` from the inverse Fisher information at the MLE.
    cov : ndarray, shape (p + 1, p + 1)
        ``(Xᵀ W X)⁻¹`` at the MLE (intercept first).
    deviance : float
        ``2 Σ [y log(y/μ) − (y − μ)]``.
    null_deviance : float
        Deviance of the intercept-only model.
    n_iter : int
        IRLS iterations.
    names : tuple of str, length p
        Column names of ``X``.
    n_cells : int
        Cells used (exposure > 0 and in the mask).
    """

    intercept: float
    coef: np.ndarray
    se: np.ndarray
    cov: np.ndarray = field(repr=False)
    deviance: float
    null_deviance: float
    n_iter: int
    names: tuple[str, ...]
    n_cells: int

    def describe(self) -> str:
        """A coefficient table (estimate, SE, z) and the deviances."""
        est = np.concatenate([[self.intercept], self.coef])
        rows = ["intercept", *self.names]
        width = max(12, *(len(s) for s in rows))
        lines = [f"Poisson GLM (log link, offset log exposure), {self.n_cells} cells, "
                 f"{self.n_iter} IRLS iterations",
                 f"{'':<{width}} {'estimate':>12} {'se':>12} {'z':>9}"]
        for name, b, s in zip(rows, est, self.se, strict=True):
            lines.append(f"{name:<{width}} {b:>12.6g} {s:>12.4g} {b / s:>9.3f}")
        lines.append(f"deviance {self.deviance:.6g} on {self.n_cells - len(est)} df "
                     f"(null {self.null_deviance:.6g})")
        return "\n".join(lines)


def _deviance(y: np.ndarray, mu: np.ndarray) -> float:
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(y > 0, y * np.log(y / mu), 0.0)
    return float(2.0 * np.sum(t - (y - mu)))


def _first_index(bad: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argwhere(bad)[0])


def poisson_glm(
    counts: np.ndarray,
    exposure: np.ndarray,
    X: np.ndarray | None = None,
    *,
    mask: np.ndarray | None = None,
    names: Sequence[str] | None = None,
    tol: float = 1e-10,
    max_iter: int = 100,
) -> GLMFit:
    """Log-linear Poisson regression with offset ``log(exposure)`` on lattice cells, by IRLS.

    ``y_c ~ Poisson(E_c exp(β₀ + x_cᵀβ))`` for every cell with ``E_c > 0`` in the mask.
    Iteratively reweighted least squares (McCullagh & Nelder 1989, §2.5): working response
    ``z = η − log E + (y − μ)/μ``, weights ``μ``, each step a weighted least-squares solve (QR,
    not normal equations), with step halving if the deviance is not finite or grows.  Start:
    ``β₀ = log(Σy/ΣE)``, ``β = 0``.  Convergence when
    ``|D_k − D_{k−1}| / (|D_k| + 0.1) < tol`` (the form of R's ``glm.control``), else
    :class:`~lattice_lgm.errors.ConvergenceError`.

    Before iterating, the design is checked for rank deficiency (pivoted QR on unit-norm
    columns) and the data for separation — an MLE at infinity, e.g. a category with no events
    — by a linear programme: the MLE is infinite iff some ``b ≠ 0`` has ``Xb = 0`` on cells
    with ``y > 0`` and ``Xb ≤ 0`` (not all 0) on cells with ``y = 0``.

    Parameters
    ----------
    counts : ndarray, shape S
        Non-negative integer counts per cell (any lattice shape ``S``, e.g. ``(ny, nx)``).
    exposure : ndarray, shape S
        Cell exposure (area of cell ∩ window, times any known offset); cells with 0 are left out.
    X : ndarray, shape (*S, p), optional
        Covariates per cell (no intercept column: it is always fitted).  ``None``: intercept
        only.
    mask : ndarray of bool, shape S, optional
        ``True`` for cells to use (default all); counts and covariates outside it may be NaN.
    names : sequence of str, length p, optional
        Column names (default ``x0, x1, …``).
    tol : float
        Relative deviance change for convergence (default 1e-10).
    max_iter : int
        Iteration cap (default 100).

    Returns
    -------
    GLMFit

    Raises
    ------
    InvalidDataError
        Negative, non-integer or non-finite counts (first index named), counts in cells with
        zero exposure, all counts zero, or separation (the column named).
    InvalidParameterError
        Negative or non-finite exposure, non-finite covariates, a rank-deficient design (the
        column named).
    ShapeMismatchError
        Shapes of counts, exposure, X, mask or names disagree.
    ConvergenceError
        IRLS did not converge in ``max_iter`` iterations.
    """
    y_all = np.asarray(counts, dtype=float)
    e_all = np.asarray(exposure, dtype=float)
    shape = y_all.shape
    if e_all.shape != shape:
        raise ShapeMismatchError(
            f"exposure has shape {e_all.shape} but counts has {shape}; both are per cell."
        )
    if mask is None:
        use = np.ones(shape, dtype=bool)
    else:
        use = np.asarray(mask)
        if use.shape != shape or use.dtype != bool:
            raise ShapeMismatchError(
                f"mask has shape {use.shape} and dtype {use.dtype}; pass a bool array of the "
                f"counts' shape {shape} (True = use the cell)."
            )
    tol = positive_float("tol", tol, "e.g. 1e-10")
    max_iter = positive_int("max_iter", max_iter, "e.g. 100")
    bad = use & ~(np.isfinite(e_all) & (e_all >= 0))
    if bad.any():
        i = _first_index(bad)
        raise InvalidParameterError(
            f"exposure[{i}] = {float(e_all[i]):g} must be finite and >= 0; mask the cell out or "
            "fix it."
        )
    bad = use & ~np.isfinite(y_all)
    if bad.any():
        i = _first_index(bad)
        raise InvalidDataError(
            f"counts[{i}] = {float(y_all[i]):g} is not finite; mark missing cells with mask=False."
        )
    bad = use & ((y_all < 0) | (y_all != np.round(y_all)))
    if bad.any():
        i = _first_index(bad)
        raise InvalidDataError(
            f"counts[{i}] = {float(y_all[i]):g}; counts must be non-negative integers."
        )
    bad = use & (e_all == 0) & (y_all > 0)
    if bad.any():
        i = _first_index(bad)
        raise InvalidDataError(
            f"counts[{i}] = {y_all[i]:g} in a cell with exposure 0 (outside the window); fix "
            "the binning or the exposure."
        )
    use = use & (e_all > 0)
    if X is None:
        p = 0
        x_used = np.zeros((int(use.sum()), 0))
    else:
        xa = np.asarray(X, dtype=float)
        if xa.ndim != len(shape) + 1 or xa.shape[:-1] != shape:
            raise ShapeMismatchError(
                f"X has shape {xa.shape}; expected (*counts.shape, p) = (*{shape}, p) — one "
                "row of covariates per cell, covariates on the last axis."
            )
        p = xa.shape[-1]
        bad = use[..., None] & ~np.isfinite(xa)
        if bad.any():
            i = _first_index(bad)
            raise InvalidParameterError(
                f"X[{i}] = {float(xa[i]):g} is not finite in a used cell; mask the cell out."
            )
        x_used = xa[use]
    if names is None:
        names = tuple(f"x{j}" for j in range(p))
    else:
        names = tuple(str(s) for s in names)
        if len(names) != p:
            raise ShapeMismatchError(f"names has {len(names)} entries but X has {p} columns.")
    y, ex = y_all[use], e_all[use]
    n = len(y)
    cols = ("intercept", *names)
    if n < p + 1:
        raise InvalidDataError(
            f"only {n} usable cells for {p + 1} coefficients; use fewer covariates or more cells."
        )
    if y.sum() == 0:
        raise InvalidDataError(
            "all used counts are 0: the intercept's MLE is −∞ (no events); nothing to fit."
        )
    D = np.column_stack([np.ones(n), x_used])
    _check_rank(D, cols)
    _check_separation(D, y, cols)
    off = np.log(ex)
    beta = np.zeros(p + 1)
    beta[0] = math.log(y.sum() / ex.sum())
    mu = np.exp(D @ beta + off)
    dev = _deviance(y, mu)
    null_dev = dev  # the start is the intercept-only MLE
    change = np.inf
    for it in range(1, max_iter + 1):
        eta = D @ beta
        z = eta + (y - mu) / mu
        sw = np.sqrt(mu)
        new, *_ = np.linalg.lstsq(D * sw[:, None], z * sw, rcond=None)
        step = new - beta
        for _ in range(30):  # step halving (as R's glm.fit) on a non-finite or growing deviance
            cand = beta + step
            with np.errstate(over="ignore"):
                mu_c = np.exp(D @ cand + off)
            dev_c = _deviance(y, mu_c) if np.all(np.isfinite(mu_c)) else np.inf
            if np.isfinite(dev_c) and dev_c <= dev * (1 + 1e-12) + 1e-12:
                break
            step = 0.5 * step
        else:
            raise ConvergenceError(
                f"poisson_glm: IRLS step {it} could not lower the deviance {dev:.6g} after 30 "
                "step halvings; centre and scale the covariates or check for near-separation."
            )
        beta, mu = cand, mu_c
        change = abs(dev_c - dev) / (abs(dev_c) + 0.1)
        dev = dev_c
        if change < tol:
            break
    else:
        raise ConvergenceError(
            f"poisson_glm: IRLS did not converge in max_iter={max_iter} iterations (last "
            f"relative deviance change {change:.3g} > tol={tol:g}); raise max_iter, centre and "
            "scale the covariates, or check for near-separation."
        )
    # inverse Fisher information (Xᵀ diag(μ) X)⁻¹ through the R factor of √μ X
    r_fac = np.linalg.qr(D * np.sqrt(mu)[:, None], mode="r")
    rinv = scipy.linalg.solve_triangular(r_fac, np.eye(p + 1))
    cov = rinv @ rinv.T
    return GLMFit(
        intercept=float(beta[0]), coef=beta[1:].copy(), se=np.sqrt(np.diag(cov)), cov=cov,
        deviance=dev, null_deviance=null_dev, n_iter=it, names=names, n_cells=n,
    )


def _check_rank(D: np.ndarray, cols: tuple[str, ...]) -> None:
    norms = np.linalg.norm(D, axis=0)
    zero = np.flatnonzero(norms == 0)
    if zero.size:
        raise InvalidParameterError(
            f"column {cols[zero[0]]!r} of X is 0 on every used cell; drop it."
        )
    _, r_fac, piv = scipy.linalg.qr(D / norms, mode="economic", pivoting=True)
    diag = np.abs(np.diag(r_fac))
    tol = max(D.shape) * np.finfo(float).eps * 1e3 * diag[0]
    dep = np.flatnonzero(diag <= tol)
    if dep.size:
        j = int(piv[dep[0]])
        others = [cols[int(k)] for k in piv[: dep[0]]]
        raise InvalidParameterError(
            f"X is rank deficient: column {cols[j]!r} is (numerically) a linear combination of "
            f"{others}; drop it (e.g. one dummy per category is dropped when an intercept is "
            "fitted)."
        )


def _check_separation(D: np.ndarray, y: np.ndarray, cols: tuple[str, ...]) -> None:
    pos, zero = y > 0, y == 0
    if not zero.any():
        return
    # b must satisfy D_pos b = 0: restrict to the null space of D_pos, found from the small
    # R factor (never an n × n SVD basis)
    r_small = np.linalg.qr(D[pos], mode="r")
    _, sv, vt = np.linalg.svd(r_small, full_matrices=True)
    rank = int(np.sum(sv > sv[0] * max(D.shape) * np.finfo(float).eps)) if sv.size else 0
    null = vt[rank:].T  # (p + 1, k)
    if null.shape[1] == 0:
        return
    # duplicate rows give duplicate constraints: keep each once, weighted in the normalisation
    a, mult = np.unique(D[zero] @ null, axis=0, return_counts=True)  # (n_unique, k)
    res = scipy.optimize.linprog(
        np.zeros(null.shape[1]), A_ub=a, b_ub=np.zeros(len(a)),
        A_eq=(mult @ a)[None, :], b_eq=[-1.0],
        bounds=[(None, None)] * null.shape[1], method="highs",
    )
    if res.status != 0:
        return  # infeasible: the MLE is finite
    # name columns whose events are all 0 (the usual case: a dummy for an empty category)
    ysum = np.abs(D[:, 1:]).T @ y
    empty = [cols[1 + j] for j in np.flatnonzero(ysum == 0)]
    b = null @ res.x
    involved = [cols[j] for j in np.flatnonzero(np.abs(b) > 1e-8 * np.abs(b).max())]
    what = (f"column(s) {empty} have no events on any cell where they are non-zero"
            if empty else f"the linear predictor can fall without bound along a direction in "
            f"columns {involved}")
    raise InvalidDataError(
        f"the MLE does not exist (separation): {what}, so the fitted rate there tends to 0 and "
        "a coefficient to −∞; merge or drop those categories/columns, or use a Bayesian model "
        "with a prior on the coefficients."
    )


