"""Stan's windowed adaptation of joint HMC, carried in the chain state.

Dual averaging of the step size (Hoffman & Gelman 2014, Alg. 5, from a first step size by
their Alg. 4), the inverse mass of ``(u, b)`` set to the regularised variance (or covariance)
of each slow window (:func:`adaptation_windows`), and the field's per-frequency mass and
non-centring for ``field="scalar"`` / ``"pncp"``: per chain, in ``LatentState.extras`` under
:data:`PREFIX`, so that a checkpoint carries it and a resume reproduces the same draws.
:class:`_Adaptation` is a mixin of :class:`~lattice_lgm.samplers.hmc.JointHMC`, whose
attributes (``n_tune``, ``target_accept``, ``windows``, ``metric``, ``n_h``, ``field``, ...)
and Hamiltonian (:class:`~lattice_lgm.samplers._hmc_dynamics._Dynamics`) it uses.

The arithmetic itself — the dual-averaging state (:func:`adaptation_extras`), one warm-up
iteration (:func:`adapt_step`) and the first step size (:func:`initial_step_size`) — is in
module-level functions over a chain's ``extras`` under any prefix, so that other HMC moves
(the GP classifier's HMC and RMHMC sweeps, :mod:`lattice_lgm.gpc.sweeps`) adapt with the
same code, each under its own prefix.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from ..priors import CirculantPrior
from .state import LatentState

#: dual-averaging constants (Hoffman & Gelman 2014, §3.2.1; Stan's defaults)
DA_GAMMA, DA_T0, DA_KAPPA = 0.05, 10.0, 0.75
#: Stan's windowed adaptation: initial fast buffer, first slow window, terminal fast buffer
INIT_BUFFER, BASE_WINDOW, TERM_BUFFER = 75, 25, 50
#: initial inverse mass of (u, b), until the first slow window ends: posterior sds of log sd,
#: log range, the intercept and standardised coefficients on bei (5-20 m) are 0.07-0.19, and a
#: unit mass there made the first 100 warm-up iterations cost 256-step trajectories
INIT_INV_MASS = 0.01
#: the shortest warm-up with a slow window (below it, the mass could not adapt)
MIN_TUNE = 20
#: prefix of this move's entries in ``LatentState.extras``
PREFIX = "hmc/"


def adaptation_windows(n_tune: int) -> list[tuple[int, int]]:
    """The slow windows ``(start, end]`` (1-based iterations); the mass is set at each end.

    Stan's schedule: a fast buffer, slow windows doubling from 25, a terminal buffer; for
    ``n_tune < 150`` the buffers are 15 % and 10 % of the warm-up and one window fills the rest;
    below 20 iterations only the step size adapts (no window).

    Parameters
    ----------
    n_tune : int

    Returns
    -------
    list of (int, int)
    """
    if n_tune < MIN_TUNE:
        return []
    init, term, base = INIT_BUFFER, TERM_BUFFER, BASE_WINDOW
    if init + term + base > n_tune:
        init, term = int(0.15 * n_tune), int(0.1 * n_tune)
        base = n_tune - init - term
    ends = []
    start, size = init, base
    last = n_tune - term
    while start < last:
        end = start + size
        if end + 2 * size > last:  # the next window would not fit: stretch this one
            end = last
        ends.append((start, end))
        start, size = end, 2 * size
    return ends


def adaptation_extras(n: int, step_size: float, inv_mass: float, n_h: int,
                      metric: str = "diag", prefix: str = PREFIX) -> dict[str, np.ndarray]:
    """Fresh dual-averaging and mass-window state of ``n`` chains, keys under ``prefix``.

    Parameters
    ----------
    n : int
        Chains.
    step_size : float
        The first step size (dual averaging's ``μ = log(10 ε₀)``).
    inv_mass : float
        Initial inverse mass of each of the ``n_h`` coordinates.
    n_h : int
        Coordinates whose mass adapts (0: the step size only).
    metric : {"diag", "dense"}
    prefix : str

    Returns
    -------
    dict of str to ndarray
        ``iter``, ``log_eps``, ``log_eps_bar``, ``h_bar``, ``mu``, ``da_m`` (n,), ``inv_mass``
        (n, n_h) or (n, n_h, n_h), ``win_n`` (n,), ``win_mean`` (n, n_h), ``win_m2``.
    """
    le = math.log(step_size)
    diag = metric == "diag"
    return {prefix + "iter": np.zeros(n, np.int64),
            prefix + "log_eps": np.full(n, le), prefix + "log_eps_bar": np.zeros(n),
            prefix + "h_bar": np.zeros(n), prefix + "mu": np.full(n, math.log(10) + le),
            prefix + "da_m": np.zeros(n, np.int64),
            prefix + "inv_mass": (np.full((n, n_h), inv_mass) if diag else
                                  np.tile(inv_mass * np.eye(n_h), (n, 1, 1))),
            prefix + "win_n": np.zeros(n, np.int64),
            prefix + "win_mean": np.zeros((n, n_h)),
            prefix + "win_m2": np.zeros((n, n_h) if diag else (n, n_h, n_h))}


def dual_average(ex: dict[str, np.ndarray], prefix: str, c: int, target_accept: float,
                 accept_prob: float) -> float:
    """One dual-averaging update of chain ``c``'s log step size; returns the new ``log ε``.

    Hoffman & Gelman (2014), Algorithm 5, lines 9-11 (adaptation iterations m = 1, 2, …), on
    the entries ``da_m``, ``h_bar``, ``mu``, ``log_eps`` and ``log_eps_bar`` under ``prefix``
    of ``ex`` (shared by joint HMC, :class:`~lattice_lgm.samplers.manifold.ManifoldMALA`
    and the GP classifier's sweeps through :func:`adapt_step`).
    """
    m = int(ex[prefix + "da_m"][c]) + 1
    ex[prefix + "da_m"][c] = m
    hb = ((1.0 - 1.0 / (m + DA_T0)) * ex[prefix + "h_bar"][c]
          + (target_accept - accept_prob) / (m + DA_T0))
    ex[prefix + "h_bar"][c] = hb
    le = ex[prefix + "mu"][c] - math.sqrt(m) / DA_GAMMA * hb
    ex[prefix + "log_eps"][c] = le
    eta = m ** (-DA_KAPPA)
    ex[prefix + "log_eps_bar"][c] = eta * le + (1.0 - eta) * ex[prefix + "log_eps_bar"][c]
    return float(le)


def initial_step_size(log_accept: Callable[[float], float], eps: float) -> float:
    """A first step size by Hoffman & Gelman (2014), Algorithm 4.

    Double or halve ``eps`` until one leapfrog step's acceptance probability
    (``exp(log_accept(eps))``) crosses 1/2 (at most 40 times).
    """
    la = log_accept(eps)
    direction = 1.0 if la > math.log(0.5) else -1.0
    for _ in range(40):
        if direction * la <= -direction * math.log(2.0):
            break
        eps *= 2.0 ** direction
        la = log_accept(eps)
    return eps


def adapt_step(ex: dict[str, np.ndarray], c: int, accept_prob: float, x: np.ndarray, *,
               n_tune: int, target_accept: float, windows: Sequence[tuple[int, int]],
               metric: str = "diag", prefix: str = PREFIX) -> bool:
    """One warm-up iteration of chain ``c``: dual averaging of ε, the windowed mass.

    Hoffman & Gelman (2014), Algorithm 5 (lines 9-11) on ``log ε``, and Stan's slow windows:
    Welford's running variance of ``x`` (the position after the transition) inside each
    window, the inverse mass set to its regularised value at the window's end and dual
    averaging restarted there; at the last warm-up iteration ``log ε`` becomes its average
    ``log ε̄``.  Edits ``ex`` (made by :func:`adaptation_extras`) in place; counts every call
    in ``iter`` and adapts only while ``iter <= n_tune``.

    Returns
    -------
    bool
        Whether a slow window ended (the inverse mass changed).
    """
    it = int(ex[prefix + "iter"][c]) + 1
    ex[prefix + "iter"][c] = it
    if it > n_tune:
        return False
    ended = False
    le = dual_average(ex, prefix, c, target_accept, accept_prob)
    # slow windows: Welford's running variance of x inside the window
    win = next((se for se in windows if se[0] < it <= se[1]), None)
    if win is not None:
        k = int(ex[prefix + "win_n"][c]) + 1
        ex[prefix + "win_n"][c] = k
        d = x - ex[prefix + "win_mean"][c]
        ex[prefix + "win_mean"][c] += d / k
        d2 = x - ex[prefix + "win_mean"][c]
        ex[prefix + "win_m2"][c] += d * d2 if metric == "diag" else np.outer(d, d2)
        if it == win[1]:
            ended = True
            var = ex[prefix + "win_m2"][c] / max(k - 1, 1)   # variances or covariance
            if metric == "dense":  # symmetric exactly (Welford's outer products
                var = 0.5 * (var + var.T)  # are not, to round-off)
            # Stan's regularisation towards 1e-3 (n/(n+5) var + 1e-3 · 5/(n+5))
            reg = 1e-3 * (5.0 / (k + 5.0))
            ex[prefix + "inv_mass"][c] = (k / (k + 5.0)) * var + (
                reg if metric == "diag" else reg * np.eye(len(x)))
            ex[prefix + "win_n"][c] = 0
            ex[prefix + "win_mean"][c] = 0.0
            ex[prefix + "win_m2"][c] = 0.0
            # restart dual averaging at the current step size
            ex[prefix + "mu"][c] = math.log(10.0) + le
            ex[prefix + "da_m"][c] = 0
            ex[prefix + "h_bar"][c] = 0.0
            ex[prefix + "log_eps_bar"][c] = 0.0
    if it == n_tune:
        ex[prefix + "log_eps"][c] = ex[prefix + "log_eps_bar"][c]
    return ended


class _Adaptation:
    """The adaptation state of :class:`~lattice_lgm.samplers.hmc.JointHMC` and its updates."""

    def init_extras(self, n: int) -> dict[str, np.ndarray]:
        """Fresh adaptation state for ``n`` chains."""
        ex = adaptation_extras(n, self.step_size, self.inv_mass, self.n_h, self.metric)
        ex.update({PREFIX + "mass_p": np.zeros(n),
                   PREFIX + "mass_u": np.zeros((n, len(self.names))),
                   PREFIX + "centred": np.zeros(n, np.int64)})
        return ex

    def _extras(self, state: LatentState) -> dict[str, np.ndarray]:
        ex = dict(state.extras or {})
        if PREFIX + "iter" not in ex:
            ex.update(self.init_extras(state.n_chains))
        return {k: np.array(v, copy=True) for k, v in ex.items()}

    def _field_params(self, c: int, ex: dict[str, np.ndarray], theta0: dict[str, float],
                      prior0: CirculantPrior) -> tuple[np.ndarray, np.ndarray]:
        """Per-frequency non-centring weight ``w_k`` and mass ``m_k`` of the field.

        The partially non-centred field ``x_k = f̂_k / σ_k^{w_k}`` (Papaspiliopoulos, Roberts
        & Sköld 2003) with their optimal weight for a Gaussian with data precision ``p̄``,
        ``w_k = 1 / (1 + p̄ λ_k(θ*))``: prior-dominated frequencies stay whitened (``w ≈ 1``),
        data-dominated ones become centred (``w ≈ 0``), so moving ``θ`` no longer drags
        them.  ``p̄`` (the site curvatures' torus mean, the ``surr-scalar`` approximation of
        DESIGN §4) and ``θ*`` are the chain's adaptation state; the mass is the conditional
        precision of ``x_k`` in that approximation, ``σ_k^{2(w_k−1)} / w_k`` (Neal 2011, §4.1).
        The zero frequency (the field's mean, confounded with the intercept along a ridge of
        prior width) stays whitened with unit mass.  Both are fixed after warm-up.
        """
        pbar = float(ex[PREFIX + "mass_p"][c])
        key = (pbar, tuple(ex[PREFIX + "mass_u"][c]), int(ex[PREFIX + "centred"][c]))
        cached = self._mass_cache.get(c)
        if cached is not None and cached[0] == key:
            return cached[1], cached[2]
        shape = self._ops.sigma(prior0).shape
        if pbar == 0.0 or self.field == "white":
            wk, m = np.ones(shape), np.ones(shape)
        else:
            th = self._theta_of(ex[PREFIX + "mass_u"][c], theta0)
            lam = self._ops.sigma(self.model.prior_for(th, prior0)) ** 2
            if ex[PREFIX + "centred"][c] and self.field == "pncp":
                wk = 1.0 / (1.0 + pbar * lam)
                wk[pbar * lam < 1e-8] = 1.0  # effectively whitened (incl. clipped bins)
                wk.flat[0] = 1.0
                m = self._pow(np.sqrt(lam), 2.0 * (wk - 1.0)) / wk
            else:
                # before the first slow window: whitened field, per-frequency mass only
                # (non-centring at an overdispersed start's θ* opened a funnel on bei: a chain
                # at sd 2.5 slid to the range bound)
                wk = np.ones(shape)
                m = 1.0 + pbar * lam
            m.flat[0] = 1.0
        self._mass_cache[c] = (key, wk, m)
        return wk, m

    def _set_field_mass(self, c: int, ex: dict[str, np.ndarray], theta: dict[str, float],
                        f: np.ndarray, beta: np.ndarray, state_size: int,
                        u: np.ndarray) -> None:
        """``p̄`` (mean site curvature over the torus) and ``θ*`` from one chain's field."""
        model = self.model
        lik = model.likelihood
        eta = np.zeros((1, *lik.shape))
        eta.reshape(-1)[lik.obs_index] = (
            model.base_obs(theta) + f.reshape(-1)[model.state_index]
            + (beta @ model.covariates_obs if model.n_beta else 0.0))
        d = -lik.hess_diag(eta).reshape(-1)[lik.obs_index]
        ex[PREFIX + "mass_p"][c] = max(float(np.sum(d)) / state_size, 0.0)
        ex[PREFIX + "mass_u"][c] = u
        ex[PREFIX + "centred"][c] = int(ex[PREFIX + "iter"][c] > 0)

    def _initial_step(self, c, ex, u0, b0, z0, rho_h, rho_z, grad0, inv_m, m_z, wk, theta0,
                      prior0, h0, kinetic) -> tuple[int, int]:
        """A first step size by Hoffman & Gelman (2014), Algorithm 4.

        Double or halve ε until one leapfrog step's acceptance probability crosses 1/2; the
        dual averaging then starts from it.
        """
        eps = math.exp(ex[PREFIX + "log_eps"][c])
        n_grad = n_cov = 0

        def log_a(e):
            nonlocal n_grad, n_cov
            u, b, z, rh, rz, k, nc, ok = self._leapfrog(u0, b0, z0, rho_h, rho_z, grad0, e, 1,
                                                        inv_m, m_z, wk, theta0, prior0)
            n_grad += k
            n_cov += nc + 1
            e1, new = self._energy(u, b, z, theta0, prior0, wk) if ok else (math.inf, None)
            return -math.inf if new is None else h0 - (e1 + kinetic(rh, rz))

        eps = initial_step_size(log_a, eps)
        le = math.log(eps)
        ex[PREFIX + "log_eps"][c] = le
        ex[PREFIX + "mu"][c] = math.log(10.0) + le
        return n_grad, n_cov

    def _adapt(self, c: int, ex: dict[str, np.ndarray], accept_prob: float,
               x: np.ndarray) -> bool:
        """Dual averaging of ε and the windowed variance of ``(u, b)`` (warm-up only).

        Returns whether a slow window ended (the caller then re-centres the field's mass).
        """
        return adapt_step(ex, c, accept_prob, x, n_tune=self.n_tune,
                          target_accept=self.target_accept, windows=self.windows,
                          metric=self.metric)
