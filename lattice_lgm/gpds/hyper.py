"""The GPDS's hyperparameters given the latent history (Adams, Murray & MacKay 2009, §4.3).

Given the latent history (``M``, the rejections ``{x_m}`` and the function values), the
hyperparameters have simple conditionals: the kernel's θ enters only the GP term of eq. 3,
the base measure's φ only the ``π`` terms.  Three moves:

- :func:`update_kernel`: §4.3's Metropolis–Hastings for θ, ratio
  ``p(θ̂) N({G_M, G_N} | M, D, θ̂) / p(θ) N({G_M, G_N} | M, D, θ)`` (the values held fixed);
- :func:`update_kernel_surrogate`: θ *jointly with the values* by Murray & Adams (2010)'s
  surrogate-data slice sampling (their Alg. 3–4; the library's
  :class:`~lattice_lgm.samplers.HyperMove`, representation ``"surr-site"``, method
  ``"slice"``), which §4.3 names as the stronger alternative;
- :func:`update_base`: §4.3's Metropolis–Hastings for φ, ratio
  ``p(φ̂)/p(φ) · Π_m π(x_m | φ̂)/π(x_m | φ) · Π_n π(x_n | φ̂)/π(x_n | φ)``.

The random walks are symmetric on each hyperprior's unconstrained scale (``log`` for positive
parameters, the identity for real ones); the Jacobian is in
:meth:`~lattice_lgm.hyperpriors.Hyperprior.logpdf_unconstrained`.

Names.  The kernel's θ: ``sd``, ``range`` and its alias ``lengthscale`` (``range = 2 ·
lengthscale``; the surrogate move samples the range, a lengthscale prior is carried over by
the change of variable).  A :class:`~lattice_lgm.gpds.GaussianBase`'s φ: ``mean_<i>`` and
``sd_<i>`` per axis (:attr:`GaussianBase.params`).  A :class:`~lattice_lgm.gpds.UniformBase`
has no φ.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np
from scipy.linalg import solve_triangular

from ..covariance import Covariance
from ..covariance.base import RANGE_PER_LENGTHSCALE
from ..errors import InvalidParameterError
from ..hyperpriors import Hyperprior
from ..samplers import HyperMove, state_from_fields
from .base import GaussianBase, link
from .prior import JITTER
from .state import LatentHistory, values_model

__all__ = ["KERNEL_NAMES", "gp_logpdf", "log_base", "update_base", "update_kernel",
           "update_kernel_surrogate"]

#: the kernel hyperparameters the moves of θ take
KERNEL_NAMES = ("sd", "range", "lengthscale")


def _check_step(step: float) -> None:
    if isinstance(step, bool) or not (isinstance(step, (int, float)) and step > 0
                                      and math.isfinite(step)):
        raise InvalidParameterError(
            f"step={step!r} must be a finite number > 0 (the random walk's sd on the "
            "unconstrained scale, e.g. 0.3).")


def _check_hyperpriors(hyperpriors: Mapping[str, Hyperprior], allowed: tuple[str, ...] | list,
                       what: str) -> None:
    for name, hp in hyperpriors.items():
        if name not in allowed:
            raise InvalidParameterError(
                f"hyperpriors has {name!r}, which is not a parameter of the {what}; give "
                f"some of {list(allowed)}.")
        if not isinstance(hp, Hyperprior):
            raise InvalidParameterError(
                f"hyperpriors[{name!r}]={hp!r} must be a lattice_lgm.hyperpriors.Hyperprior.")


def gp_logpdf(kernel: Covariance, points: np.ndarray, g: np.ndarray, mean: float,
              nugget: float) -> float:
    """``log N(g; μ, K(points) + nugget I)`` (the GP term of §4.3's ratio).

    Parameters
    ----------
    kernel : Covariance
    points : ndarray, shape (n, d)
    g : ndarray, shape (n,)
    mean : float
    nugget : float

    Returns
    -------
    float
        ``-inf`` where the covariance does not factor.
    """
    K = kernel(points) + nugget * np.eye(len(points))
    try:
        L = np.linalg.cholesky(K)
    except np.linalg.LinAlgError:
        return -math.inf  # a θ whose covariance does not factor has no density here
    z = solve_triangular(L, g - mean, lower=True, check_finite=False)
    return float(-0.5 * z @ z - np.sum(np.log(np.diag(L))) - 0.5 * len(g) * math.log(2 * math.pi))


def update_kernel(state: LatentHistory, rng: np.random.Generator, kernel: Covariance,
                  hyperpriors: Mapping[str, Hyperprior], *, step: float = 0.3,
                  mean: float = 0.0, jitter: float = JITTER) -> tuple[Covariance, int]:
    """§4.3: Metropolis–Hastings for the kernel's hyperparameters θ given the latent history.

    One univariate random-walk proposal per named hyperparameter, on its unconstrained scale
    (``log`` for positive ones): ``û = u + step · ε``, accepted with
    ``p(θ̂) N({G_M, G_N} | M, D, θ̂) / p(θ) N({G_M, G_N} | M, D, θ)`` (the base measure's
    terms cancel: φ does not move here; the proposal is symmetric in ``u``, the Jacobian is
    in :meth:`~lattice_lgm.hyperpriors.Hyperprior.logpdf_unconstrained`).

    Parameters
    ----------
    state : LatentHistory
    rng : numpy.random.Generator
    kernel : Covariance
        The current θ.
    hyperpriors : mapping of str to Hyperprior
        The kernel's hyperparameters to move (:data:`KERNEL_NAMES`) and their priors.
    step : float
        Random-walk scale on the unconstrained scale.
    mean : float
    jitter : float

    Returns
    -------
    kernel : Covariance
        The new θ.
    accepted : int
        How many of the proposals were accepted.
    """
    _check_step(step)
    _check_hyperpriors(hyperpriors, KERNEL_NAMES, "kernel")
    pts, accepted = state.points, 0
    current = gp_logpdf(kernel, pts, state.g, mean, float(jitter) * kernel.sd**2)
    for name, hp in hyperpriors.items():
        value = getattr(kernel, name)
        x = float(value[0] if isinstance(value, tuple) else value)
        u = float(hp.to_unconstrained(x))
        u_new = u + step * rng.standard_normal()
        x_new = float(hp.from_unconstrained(u_new))
        lp_new = float(hp.logpdf_unconstrained(u_new))
        if not math.isfinite(lp_new):
            continue
        proposal = kernel.with_params(**{name: x_new})
        ll_new = gp_logpdf(proposal, pts, state.g, mean, float(jitter) * proposal.sd**2)
        log_a = lp_new + ll_new - float(hp.logpdf_unconstrained(u)) - current
        if math.log(rng.random()) < log_a:
            kernel, current, accepted = proposal, ll_new, accepted + 1
    return kernel, accepted


def log_base(base: Any, state: LatentHistory) -> float:
    """``Σ_n log π(x_n | φ) + Σ_m log π(x_m | φ)``: the φ-terms of eq. 3.

    Every point of the history, data and rejections alike; ``-inf`` when one is outside the
    support.
    """
    return float(np.sum(base.logpdf(state.points)))


def update_base(state: LatentHistory, rng: np.random.Generator, base: Any,
                hyperpriors: Mapping[str, Hyperprior], *,
                step: float = 0.3) -> tuple[GaussianBase, int]:
    """§4.3: Metropolis–Hastings for the base measure's parameters φ given the latent history.

    One univariate random-walk proposal per named parameter, on its hyperprior's unconstrained
    scale, accepted with ``p(φ̂)/p(φ) · Π_m π(x_m | φ̂)/π(x_m | φ) · Π_n π(x_n | φ̂)/π(x_n | φ)``
    (the GP terms and Φ do not involve φ; the proposal is symmetric in ``u``, the Jacobian is
    in :meth:`~lattice_lgm.hyperpriors.Hyperprior.logpdf_unconstrained`).  A proposal that
    puts a point of the history outside ``π``'s support has zero mass: rejected.

    Parameters
    ----------
    state : LatentHistory
    rng : numpy.random.Generator
    base : GaussianBase
        The current φ (:attr:`GaussianBase.params`: ``mean_<i>``, ``sd_<i>``).
    hyperpriors : mapping of str to Hyperprior
        The parameters to move and their priors, e.g. ``{"mean_0": Normal(0, 1),
        "sd_0": LogNormal(0, 0.5)}``.
    step : float
        Random-walk scale on the unconstrained scale.

    Returns
    -------
    base : GaussianBase
        The new φ.
    accepted : int
        How many of the proposals were accepted.
    """
    _check_step(step)
    if not isinstance(base, GaussianBase):
        raise InvalidParameterError(
            f"base={type(base).__name__} has no parameters φ to move (§4.3's φ is the base "
            "measure's; a UniformBase's box is fixed); give base_hyperpriors=None, or use a "
            "GaussianBase.")
    _check_hyperpriors(hyperpriors, sorted(base.params), "GaussianBase")
    accepted = 0
    current = log_base(base, state)
    for name, hp in hyperpriors.items():
        u = float(hp.to_unconstrained(base.params[name]))
        u_new = u + step * rng.standard_normal()
        lp_new = float(hp.logpdf_unconstrained(u_new))
        if not math.isfinite(lp_new):
            continue
        proposal = base.with_params(**{name: float(hp.from_unconstrained(u_new))})
        ll_new = log_base(proposal, state)
        if not math.isfinite(ll_new):
            continue  # a point outside π's support: no mass
        log_a = lp_new + ll_new - float(hp.logpdf_unconstrained(u)) - current
        if math.log(rng.random()) < log_a:
            base, current, accepted = proposal, ll_new, accepted + 1
    return base, accepted


class _Scaled(Hyperprior):
    """The prior of ``c · x`` for ``x ~ prior`` (``c > 0``): a lengthscale's prior as the range's.

    ``log p(c x) = log p_x(x) − log c``; on the log scale a shift by ``log c``, so the
    unconstrained densities agree: ``logpdf_unconstrained(u) = prior.logpdf_unconstrained(u −
    log c)``.
    """

    def __init__(self, prior: Hyperprior, c: float) -> None:
        self.prior, self.c = prior, float(c)
        self.lower, self.upper = self.c * prior.lower, self.c * prior.upper
        self.transform = prior.transform

    def _logpdf_in(self, x: np.ndarray) -> np.ndarray:
        return self.prior._logpdf_in(x / self.c) - math.log(self.c)

    def _cdf_in(self, x: np.ndarray) -> np.ndarray:
        return self.prior._cdf_in(x / self.c)

    def _ppf_in(self, p: np.ndarray) -> np.ndarray:
        return self.c * self.prior._ppf_in(p)

    def _statement(self, name: str) -> str:
        return f"{name} = {self.c:g} × x with {self.prior._statement('x')}"

    def _params_repr(self) -> str:
        return f"prior={self.prior!r}, c={self.c!r}"


def update_kernel_surrogate(state: LatentHistory, rng: np.random.Generator, kernel: Covariance,
                            hyperpriors: Mapping[str, Hyperprior], *,
                            link_name: str = "logistic", mean: float = 0.0,
                            jitter: float = JITTER, width: float = 2.0,
                            step_out: bool = True) -> tuple[Covariance, LatentHistory, int]:
    """θ and the function values jointly, by surrogate-data slice sampling (Murray & Adams 2010).

    The locations fixed, ``(θ, G)`` has the target ``p(θ) GP(G | θ) Π_n Φ(g_n) Π_m (1 −
    Φ(g_m))``: the latent Gaussian model of :func:`~lattice_lgm.gpds.state.values_model` (the
    one the values' elliptical slice sampling runs on) with these hyperpriors.  One step of
    :class:`~lattice_lgm.samplers.HyperMove` (``"surr-site"``, ``"slice"``: Alg. 3–4 of Murray
    & Adams 2010, one coordinate at a time on the log scale, site fits by moments for the
    Bernoulli sites) moves θ and, with it, ``G`` (at fixed surrogate data and whitened
    residual ``η``), so the new values are returned with the new θ.

    The nugget is ``jitter · sd²`` at the current sd for the whole move (the library's dense
    prior keeps an absolute nugget over its family): exact for moves of the range, an
    ``O(jitter)`` change of the target while ``sd`` moves.

    Parameters
    ----------
    state : LatentHistory
    rng : numpy.random.Generator
    kernel : Covariance
        The current θ.
    hyperpriors : mapping of str to Hyperprior
        ``sd``, and ``range`` or ``lengthscale`` (not both).
    link_name : {"logistic", "probit"}
    mean : float
        The GP's constant mean (fixed).
    jitter : float
        Relative nugget (× sd²).
    width : float
        Initial slice bracket on the log scale.
    step_out : bool
        Neal's stepping out.

    Returns
    -------
    kernel : Covariance
        The new θ.
    state : LatentHistory
        The same locations with the new values.
    accepted : int
        Coordinates moved (a slice sampler always moves; 0 only when a proposal cannot be made).
    """
    _check_hyperpriors(hyperpriors, KERNEL_NAMES, "kernel")
    if not hyperpriors:
        raise InvalidParameterError(
            "hyperpriors is empty: the surrogate move needs at least one of "
            f"{list(KERNEL_NAMES)} to move.")
    if "range" in hyperpriors and "lengthscale" in hyperpriors:
        raise InvalidParameterError(
            "hyperpriors has both 'range' and 'lengthscale' (range = 2 · lengthscale); give one.")
    if len(kernel.range) != 1:
        raise InvalidParameterError(
            f"kernel has per-axis ranges {kernel.range}; the GPDS moves take one isotropic "
            "range.")
    link(link_name)
    hp = {("range" if k == "lengthscale" else k):
          (_Scaled(v, RANGE_PER_LENGTHSCALE) if k == "lengthscale" else v)
          for k, v in hyperpriors.items()}
    model = values_model(state, kernel, link_name=link_name, mean=mean, jitter=jitter,
                         hyperpriors=hp)
    move = HyperMove(model, "surr-site", method="slice", width=width, step_out=step_out)
    st = state_from_fields(model, (state.g - mean)[None], [{}], [rng])
    st, info = move.step(st, [rng])
    new_kernel = st.priors[0].kernel
    return new_kernel, replace(state, g=st.f[0] + mean), int(info["accepted"][0])
