"""The Hamiltonian of joint HMC: its potential, gradient and integrators.

The maps between the coordinates (the hyperparameters' unconstrained scale, the shear's
effective fixed effects), the exact potential ``U`` (:meth:`_Dynamics._energy`, the M–H
step's), its gradient (:meth:`_Dynamics._gradient`; compiled for the default configuration,
:meth:`_Dynamics._gradient_chord`), the calling thread's transforms, and the integrators
(:meth:`_Dynamics._leapfrog`: leapfrog or the split integrator; a whole trajectory in one
compiled call, :meth:`_Dynamics._leapfrog_compiled`) with the mass's products
(:func:`_inv_mass_times`, :func:`_momentum`).  The formulas are in the module docstring of
:mod:`lattice_lgm.samplers.hmc`.  :class:`_Dynamics` is a mixin of
:class:`~lattice_lgm.samplers.hmc.JointHMC`, whose attributes it reads.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg

from ..errors import InvalidParameterError, ParameterOutOfBoundsError
from ..priors import CirculantPrior, _fftw
from ..priors._fft import SplitRealFFT, WindowRealFFT
from ._hmc_field import _SpectrumTable
from ._hmc_kernels import (
    _DIVERGED,
    _DONE,
    _NEED_NODES,
    _chord_sites,
    _color_pass,
    _drift,
    _drift_real,
    _kick,
    _kick_rotate,
    _trajectory_chord,
    _white_chord,
    _white_pass,
)
from ._latent import loglik_at

#: step of the central difference of √λ in an unconstrained covariance parameter
FD_STEP = 1e-5
#: the largest argument of exp that stays finite (an unbounded log sd past it has diverged)
_LOG_MAX = math.log(np.finfo(np.float64).max)
#: a trajectory whose log range spreads over more than max(SPAN_MIN, SPAN_SD × its scale in
#: the mass) ends as a divergence (:meth:`JointHMC._span_limit`)
SPAN_MIN = 1.0
SPAN_SD = 12.0


class _Dynamics:
    """The potential, gradient and integrators of :class:`~lattice_lgm.samplers.hmc.JointHMC`."""

    # -- coordinates -----------------------------------------------------------------------------
    def _u_of(self, theta: dict[str, float]) -> np.ndarray:
        return np.array([float(h.to_unconstrained(theta[n]))
                         for n, h in zip(self.names, self._hp, strict=True)])

    def _theta_of(self, u: np.ndarray, theta0: dict[str, float]) -> dict[str, float]:
        out = dict(theta0)
        for n, h, v in zip(self.names, self._hp, u, strict=True):
            out[n] = float(h.from_unconstrained(v))
        return out

    def _shift(self, f_obs: np.ndarray) -> np.ndarray:
        """``P f``: the field's least-squares projection on the fixed effects' columns."""
        return self._proj @ f_obs

    def _physical(self, u: np.ndarray, b: np.ndarray, f_obs: np.ndarray, sign: float = -1.0):
        """Effective ``(u, b)`` → physical, ``c = c_eff − P f`` (``sign=+1``: the inverse).

        The identity without the shear.
        """
        if self._proj is None:
            return u, b
        d = sign * self._shift(f_obs)
        u2, b2 = u.copy(), b.copy()
        n = len(self._obs_u)
        u2[self._obs_u] += d[:n]
        if len(b):
            b2 += d[n:] / self.model.beta_sd
        return u2, b2

    def _effective(self, u: np.ndarray, b: np.ndarray, f_obs: np.ndarray):
        """Physical ``(u, b)`` → effective (the inverse of :meth:`_physical`)."""
        return self._physical(u, b, f_obs, sign=1.0)

    def _in_support(self, u: np.ndarray) -> bool:
        """Every coordinate of ``u`` inside its hyperprior's support (False for NaN)."""
        for v, lo, hi in zip(u.tolist(), self._lo, self._hi, strict=True):
            if not lo <= v <= hi:
                return False
        return True

    @staticmethod
    def _pow(sig: np.ndarray, e: np.ndarray) -> np.ndarray:
        """``σ^e`` with ``0^0 = 1`` (clipped bins have ``e = 0``: they stay whitened)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.where(e == 0.0, 1.0, np.power(sig, e))
        return out

    @staticmethod
    def _log_jacobian(sig: np.ndarray, wk: np.ndarray, weights: np.ndarray) -> float:
        """``−log|∂ζ/∂x| = Σ_k (1 − w_k) log σ_k`` over the full spectrum (``ζ = σ^{w−1} x``)."""
        pos = wk != 1.0
        return float(np.sum((weights * (1.0 - wk) * np.log(np.where(pos, sig, 1.0)))[pos]))

    def _energy(self, u, b, x, theta0, prior0, wk):
        """The exact potential ``U`` at ``(u, b, x)`` and the pieces a chain keeps (or inf, None).

        ``x`` is the partially non-centred field (``f̂ = σ^w x``, ``ζ = σ^{w−1} x``), so ``U``
        has the Jacobian ``Σ_k (1 − w_k) log σ_k`` of ``x → ζ`` (over the full spectrum).
        """
        model = self.model
        if not self._in_support(u):
            return math.inf, None
        theta = self._theta_of(u, theta0)
        try:
            prior = model.prior_for(theta, prior0)
        except (InvalidParameterError, ParameterOutOfBoundsError):
            return math.inf, None
        sig = self._ops.sigma(prior)
        if self.field == "white":
            zeta, jac = x, 0.0      # w = 1: ζ = x, no Jacobian (what the general lines give)
        else:
            if np.any((sig == 0.0) & (wk != 1.0)):
                return math.inf, None  # a bin the map needs vanished (never in the torus' sizing)
            zeta = self._pow(sig, wk - 1.0) * x
            jac = None
        f = self._ops.colorize(prior, zeta, self._workspace(prior)).copy()[None]
        u, b = self._physical(u, b, f.reshape(-1)[model.state_index])
        if not self._in_support(u):
            return math.inf, None
        theta = self._theta_of(u, theta0)
        beta = model.beta_sd * b
        ll = float(loglik_at(model, f, beta[None], [theta])[0])
        lh = [float(h.logpdf_unconstrained(v)) for h, v in zip(self._hp, u, strict=True)]
        w = self._ops.weights(prior)
        if jac is None:
            jac = self._log_jacobian(sig, wk, w)
        energy = (-ll - sum(lh) + 0.5 * float(np.sum(w * (zeta.real ** 2 + zeta.imag ** 2)))
                  + jac + 0.5 * float(b @ b))
        if not math.isfinite(energy):
            return math.inf, None
        return energy, {"theta": theta, "prior": prior, "f": f, "beta": beta, "loglik": ll,
                        "zeta": zeta}

    def _sqrt_spectrum(self, u: np.ndarray, theta: dict[str, float], prior0: CirculantPrior):
        """``√λ_θ`` and ``∂√λ/∂u_k`` for the covariance parameters other than ``sd``.

        With one such parameter (an isotropic range) both come from :class:`_SpectrumTable`
        (linear interpolation in ``u`` between exact spectra on a fixed grid, computed once per
        node); otherwise from exact spectra and central differences.  Either is a
        deterministic function of the position, which is all the leapfrog needs (the
        acceptance step uses the exact spectrum).
        """
        model = self.model
        sd = float(theta.get("sd", prior0.params.get("sd", 1.0)))
        if self._table is not None:
            k = self._table_index
            val = self._table.at(float(u[k]), prior0, self._ops, sd)
            if val is not None:
                a, da = val
                return a, {k: da}, 0
        prior = model.prior_for(theta, prior0)
        sq = self._ops.sigma(prior)
        out, n_cov = {}, 1
        for k in self._fd_params:
            # central difference (one-sided at a bound of the support)
            lo = max(u[k] - FD_STEP, self._bounds[k, 0])
            hi = min(u[k] + FD_STEP, self._bounds[k, 1])
            ends = []
            for v in (lo, hi):
                if v == u[k]:
                    ends.append(sq)
                    continue
                u2 = u.copy()
                u2[k] = v
                ends.append(self._ops.sigma(model.prior_for(self._theta_of(u2, theta), prior)))
                n_cov += 1
            out[k] = (ends[1] - ends[0]) / (hi - lo)
        return sq, out, n_cov

    def _gradient_chord(self, u, b, x, theta0, prior0):
        """:meth:`_gradient` for the whitened field with the range from the table, compiled.

        The same formulas in three compiled passes around the two transforms: the field's
        spectrum on the table's chord (:func:`_color_pass`); the sites (:func:`_chord_sites`:
        gather, the shear's shift to the physical fixed effects, the hyperpriors' derivatives
        in their closed form, the likelihood's gradient, ``Zᵀg`` and the shear's correction);
        the spectral sums (:func:`_white_chord`).  Python is left with the bounds, the table's
        lookup and the two transforms' calls: on bei at 20 m a whole transition takes
        ≈ 100 µs per gradient against 235 µs for the general path (docs/convergence.md §2).
        Returns ``False`` where the general path must answer (a chord past the range's upper
        bound).
        """
        if not self._in_support(u):
            return None
        ul = u.tolist()
        try:
            ch = self._table.chord(ul[self._table_index], prior0, self._ops)
        except (InvalidParameterError, ParameterOutOfBoundsError):
            return None  # a range no covariance can take (e.g. exp(u) = 0): diverged
        if ch is None:
            return False
        a0, a1, t = ch
        k_sd = self._k_sd
        if k_sd >= 0 and ul[k_sd] > _LOG_MAX:
            return None  # an sd that overflows: a trajectory that ran away (divergence)
        scale = (math.exp(ul[k_sd]) if k_sd >= 0
                 else float(theta0.get("sd", prior0.params.get("sd", 1.0))))
        _, ws, c, root_m = self._chord_context(prior0)
        _color_pass(x, a0, a1, t, scale, root_m, ws.bwd_in)
        idx, proj, zt, base, obs_u, beta_sd, forms, lo, hi, kind, y, aux = self._site
        ok, grad = _chord_sites(ws.backward(), idx, proj, zt, base, u, b, obs_u, beta_sd, forms,
                                lo, hi, kind, y, aux, ws.fwd_in)
        if not ok:
            return None
        grad_x = np.empty_like(x)
        s_sd, s_cov = _white_chord(x, ws.forward(), 1.0 / root_m, a0, a1, t,
                                   1.0 / _SpectrumTable.STEP, scale, c, not self._split, grad_x)
        if k_sd >= 0:
            grad[k_sd] -= s_sd
        grad[self._table_index] -= s_cov
        return grad, grad_x, 0

    def _chord_context(self, prior0):
        """``(prior0, workspace, half-spectrum weights, √M)`` of the calling thread.

        The compiled gradient's transforms and constants, cached per prior.
        """
        ctx = getattr(self._local, "chord", None)
        if ctx is None or ctx[0] is not prior0:
            ws = self._workspace(prior0, window=True)
            ctx = self._local.chord = (prior0, ws, self._ops.weights(prior0),
                                       math.sqrt(ws.size))
        return ctx

    def _gradient(self, u, b, x, theta0, prior0, wk):
        """``∇U`` in ``(u, b)`` and in ``x`` (module docstring), or None outside the support.

        With ``σ = √λ``, ``ĝ = F_u(Sᵀ ∂log L/∂η)`` and ``ℓ′_k = ∂log σ_k/∂u``:
        ``∂U/∂x = σ^{2(w−1)} x − σ^w ĝ`` and, per covariance parameter,
        ``∂U/∂u = Σ_k c_k ℓ′_k [(w_k − 1)(σ_k^{2(w_k−1)}|x_k|² − 1) − w_k Re(ĝ_k* σ_k^{w_k} x_k)]``
        (``c_k`` the half-spectrum weights; ``ℓ′ = 1`` for ``log sd``).
        """
        if self.field == "white" and self._table is not None and self._forms is not None:
            # the compiled path of the default configuration
            res = self._gradient_chord(u, b, x, theta0, prior0)
            if res is not False:
                return res
        model = self.model
        if not self._in_support(u):
            return None
        theta = self._theta_of(u, theta0)
        try:
            sq, dsq, n_cov = self._sqrt_spectrum(u, theta, prior0)
        except (InvalidParameterError, ParameterOutOfBoundsError):
            return None  # a parameter no covariance can take (e.g. a range of 0): diverged
        s = model.beta_sd
        # FFTs pruned to the window: the field is needed at the observed sites only, and the
        # likelihood's derivative is zero off them
        ws = self._workspace(prior0, window=True)
        scale = 1.0 / math.sqrt(ws.size)            # the unitary transforms' 1/√M
        white = self.field == "white" or not np.any(wk != 1.0)
        if white:  # w = 1: f = F⁻¹(σ x), no powers needed
            sw = sq
            _color_pass(x, sq, sq, 0.0, 1.0, math.sqrt(ws.size), ws.bwd_in)
        else:
            sw = self._pow(sq, wk)                  # σ^w
            s2 = self._pow(sq, 2.0 * (wk - 1.0))    # σ^{2(w−1)}
            fx = sw * x
            one = np.ones_like(sq)
            _color_pass(fx, one, one, 0.0, 1.0, math.sqrt(ws.size), ws.bwd_in)
        f = ws.backward()
        lik = model.likelihood
        idx = model.state_index
        f_obs = f.reshape(-1)[idx]
        u, b = self._physical(u, b, f_obs)          # physical intercept and coefficients
        if not self._in_support(u):
            return None
        theta = self._theta_of(u, theta)
        beta = s * b
        eta_obs = (model.base_obs(theta) + f_obs
                   + (beta @ model.covariates_obs if model.n_beta else 0.0))
        g = lik.grad_obs(eta_obs)                  # ∂log L/∂η at the observed sites
        if not np.all(np.isfinite(g)) or not np.all(np.isfinite(f_obs)):
            return None
        # ∂log p/∂c of the fixed effects at their physical values (hyperpriors by central
        # differences; the block coefficients' N(0, s²) exactly)
        dlh_all = np.array([self._dlogprior(k, u) for k in range(len(self.names))])
        if self._proj is not None:
            grad_c = np.concatenate([dlh_all[self._obs_u], -beta / s ** 2])
            zg = np.concatenate([[g.sum() if self.names[k] == "mean"
                                  else g @ model.hyper_covariate(self.names[k])
                                  for k in self._obs_u], model.covariates_obs @ g])
            h_c = zg + grad_c                       # −∂U/∂c_eff
            g_field = g - self._proj.T @ h_c        # −∂U/∂f at the sites: (I − ZP)ᵀg − Pᵀ∇log p
        else:
            g_field = g
        # the workspace's forward input is zero off the observed sites, and only they are
        # ever written (the same sites every time)
        ws.fwd_in.reshape(-1)[idx] = g_field
        gk_raw = ws.forward()
        c = self._ops.weights(prior0)
        if white and len(dsq) <= 1:
            # one fused pass: ∂U/∂x = x − σĝ and the sums Σ c σ Re(ĝ* x), Σ c ∂σ Re(ĝ* x)
            k_cov = next(iter(dsq), -1)
            grad_x, s_sd, s_cov = _white_pass(x, gk_raw, scale, sq,
                                              dsq[k_cov] if k_cov >= 0 else sq, c,
                                              not self._split)
            sums = {k_cov: -s_cov} if k_cov >= 0 else {}
            sum_sd = -s_sd
            return self._grad_hyper(u, b, g, beta, dlh_all, sum_sd, sums), grad_x, n_cov
        gk = gk_raw * scale
        if white:
            grad_x = -(sq * gk) if self._split else x - sq * gk
            re = c * (np.conj(gk) * x).real
            sum_sd = -float(np.sum(sq * re))
            sums = {k: -float(np.sum(d * re)) for k, d in dsq.items()}
        else:
            grad_x = s2 * x - sw * gk
            # the bracket of ∂U/∂u, shared by every covariance parameter
            common = c * ((wk - 1.0) * (s2 * (x.real ** 2 + x.imag ** 2) - 1.0)
                          - wk * (np.conj(gk) * fx).real)
            pos = sq > 0
            sum_sd = float(np.sum(common[pos]))
            sums = {k: float(np.sum(common * np.where(pos, d / np.where(pos, sq, 1.0), 0.0)))
                    for k, d in dsq.items()}
        return self._grad_hyper(u, b, g, beta, dlh_all, sum_sd, sums), grad_x, n_cov

    def _grad_hyper(self, u, b, g, beta, dlh_all, sum_sd, sums) -> np.ndarray:
        """``∇U`` in ``(u, b)`` from the likelihood's site gradient ``g`` and the spectral sums."""
        model = self.model
        s = model.beta_sd
        grad_u = np.empty(len(self.names))
        for k, (n, h) in enumerate(zip(self.names, self._hp, strict=True)):
            dlh = dlh_all[k]
            if n == "mean":
                du = -float(g.sum())
            elif n in model.obs_params:  # beta_<name>: η += value · x
                du = -float(g @ model.hyper_covariate(n))
            elif n == "sd" and h.transform == "log":
                du = sum_sd                                   # ℓ′ = 1: σ ∝ sd
            else:
                du = sums[k]
            grad_u[k] = du - dlh
        grad_b = b - s * (model.covariates_obs @ g) if model.n_beta else np.zeros(0)
        return np.concatenate([grad_u, grad_b])

    def _workspace(self, prior0: CirculantPrior,
                   window: bool = False) -> SplitRealFFT | WindowRealFFT:
        """The calling thread's FFT workspace of ``prior0``'s torus (made on first use).

        FFTW plans and their buffers are not shared between threads (chains may run in
        threads, :meth:`step`); the forward input stays zero off the observed sites.
        ``window``: transforms pruned to the window (gradients), else full (the state's
        field).
        """
        cache = getattr(self._local, "ws", None)
        if cache is None:
            cache = self._local.ws = {}
        key = (self._ops.key(prior0), window)
        ws = cache.get(key)
        if ws is None:
            ws = cache[key] = self._ops.workspace(
                prior0, 1 if getattr(self._local, "in_pool", False) else None, window)
        return ws

    def _dlogprior(self, k: int, u: np.ndarray) -> float:
        """``∂log p_h/∂u_k`` (Jacobian in): analytic for the usual priors, else differences."""
        return self._hp[k].dlogpdf_unconstrained(u[k])

    def _leapfrog(self, u0, b0, z0, rho_h, rho_z, grad0, eps, n_steps, inv_m, m_z, wk, theta0,
                  prior0):
        """``n_steps`` leapfrog steps from ``(u0, b0, z0)`` with momenta ``(ρ_h, ρ_ζ)``.

        Neal (2011), eq. 5.18–5.20 with mass ``M``: half step of the momenta, full step
        ``x += ε M⁻¹ ρ`` of the position, half step of the momenta.  A position outside a
        hyperprior's support (or a non-finite gradient) ends the trajectory: ``ok=False``, and
        the transition rejects (the reversed trajectory meets the same point, so the rule is
        symmetric).

        Returns
        -------
        u, b, z, ρ_h, ρ_ζ, n_grad, n_cov, ok
        """
        if self._compiled and inv_m.ndim == 1:
            ctx = self._chord_context(prior0)
            if getattr(ctx[1], "plans", None) is not None:   # (a 1-D torus has none)
                return self._leapfrog_compiled(u0, b0, z0, rho_h, rho_z, grad0, eps, n_steps,
                                               inv_m, wk, theta0, prior0, ctx)
        nt = len(self.names)
        hb = np.concatenate([u0, b0])      # (u, b) in one vector: u and b are views of it
        u, b, z = hb[:nt], hb[nt:], z0.copy()
        rh, rz = rho_h.copy(), rho_z.copy()
        gh, gz, _ = grad0
        n_grad = n_cov = 0
        c, s = math.cos(eps), math.sin(eps)
        h = 0.5 * eps        # the first half kick; between steps the two half kicks are one
        kt = self._table_index
        if self._table is not None:
            limit, lowest, highest = self._span_limit(inv_m), float(u[kt]), float(u[kt])
        for _ in range(n_steps):
            if not math.isfinite(float(hb.sum())):
                return u, b, z, rh, rz, n_grad, n_cov, False
            rh -= h * gh
            hb += eps * _inv_mass_times(inv_m, rh)
            if self._table is not None:
                lowest, highest = min(lowest, float(u[kt])), max(highest, float(u[kt]))
                if highest - lowest > limit:
                    return u, b, z, rh, rz, n_grad, n_cov, False
            # the field: its kick, then its exact rotation (split) or drift (leapfrog)
            if self._split:
                _kick_rotate(z, rz, gz, h, c, s)
            else:
                _kick(rz, gz, h)
                (_drift_real if self._ops.real else _drift)(z, rz, eps, m_z)
            res = self._gradient(u, b, z, theta0, prior0, wk)
            n_grad += 1
            if res is None:
                return u, b, z, rh, rz, n_grad, n_cov, False
            gh, gz, nc = res
            n_cov += nc
            h = eps
        rh -= 0.5 * eps * gh
        _kick(rz, gz, 0.5 * eps)
        return u, b, z, rh, rz, n_grad, n_cov, True

    def _span_limit(self, inv_m: np.ndarray) -> float:
        """How far the log range may spread along one trajectory before it ends as divergent.

        ``max(SPAN_MIN, SPAN_SD · s)`` with ``s`` the log range's scale in the mass
        (``√M⁻¹``, the adapted posterior sd): 1 (a factor 2.7 in range, 14 posterior sds) on
        bei, where the posterior sd is 0.07; within it the table keeps its nodes
        (:attr:`_SpectrumTable.FAR` = 100 nodes = 1.0).  A trajectory that does spread so far
        is an early warm-up's, running away with too long a step (measured on bei at 20 m: to
        ``range = e^{-9}`` and beyond, 13–40 steps each, every step's spectra outside the
        table: ≈ 4 s of a 37 s run).  Exact: the rule depends only on the set of positions
        visited, which the reversed trajectory visits too, so a move and its reverse are
        rejected alike and detailed balance holds (as for the support's bounds; tested with
        the rule made active).  Only with the spectrum table
        (where far positions are costly); the limit is fixed once warm-up ends.
        """
        kt = self._table_index
        var = inv_m[kt] if inv_m.ndim == 1 else inv_m[kt, kt]
        return max(SPAN_MIN, SPAN_SD * math.sqrt(float(var)))

    def _leapfrog_compiled(self, u0, b0, z0, rho_h, rho_z, grad0, eps, n_steps, inv_m, wk,
                           theta0, prior0, ctx):
        """:meth:`_leapfrog` as one compiled call (:func:`_trajectory_chord`).

        The default configuration's: the same steps, the same numbers to round-off (tested).
        Python only steps in where the kernel cannot go on: to extend the spectrum table
        (the chord's nodes are not made yet) and, for a gradient whose chord crosses the
        range's bound or lies far from the trajectory's start
        (:meth:`_SpectrumTable.is_far`), to take that one gradient on the general path.
        """
        nt = len(self.names)
        hb = np.concatenate([u0, b0])
        z, rh, rz = z0.copy(), rho_h.copy(), rho_z.copy()
        gh = np.array(grad0[0], dtype=np.float64)
        gz = np.array(grad0[1])
        _, ws, c, root_m = ctx
        fft = (_fftw.EXECUTE_ADDRESS, ws.plans, ws.bwd_in, ws.bwd_out, ws.fwd_in, ws.fwd_out)
        k_sd, table, step = self._k_sd, self._table, _SpectrumTable.STEP
        sd_fixed = (1.0 if k_sd >= 0
                    else float(theta0.get("sd", prior0.params.get("sd", 1.0))))
        s, pending, n_grad, n_cov, ok = 0, False, 0, 0, False
        u_t = float(hb[self._table_index])
        span = np.array([self._span_limit(inv_m), u_t, u_t])
        while True:
            j0, nodes = table.block or (0, np.zeros((0, *z.shape)))
            tab = (nodes, j0, step, table.u_max, self._table_index, k_sd, sd_fixed, c, root_m,
                   _LOG_MAX, True)
            st, s, k = _trajectory_chord(hb, z, rh, rz, gh, gz, inv_m, eps, n_steps, s,
                                         pending, tab, fft, self._site, span)
            n_grad += k
            if st == _DONE or st == _DIVERGED:
                ok = st == _DONE
                break
            j = math.floor(float(hb[self._table_index]) / step)
            if st == _NEED_NODES and not table.is_far(j):
                try:
                    table.cover(j, j + 1, prior0, self._ops)
                except (InvalidParameterError, ParameterOutOfBoundsError):
                    n_grad += 1     # a range no covariance can take: diverged
                    break
                pending = True
                continue
            # _PAST_TABLE, or a chord far from the trajectory's start (it runs away,
            # :meth:`_SpectrumTable.is_far`): this step's gradient on the general path
            res = self._gradient(hb[:nt], hb[nt:], z, theta0, prior0, wk)
            n_grad += 1
            if res is None:
                break
            gh[:] = res[0]
            gz[...] = res[1]
            n_cov += res[2]
            s, pending = s + 1, False
        return hb[:nt], hb[nt:], z, rh, rz, n_grad, n_cov, ok


def _inv_mass_times(inv_m: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """``M⁻¹ ρ`` for a diagonal (1-D ``inv_m``) or dense (2-D) inverse mass."""
    return inv_m * rho if inv_m.ndim == 1 else inv_m @ rho


def _momentum(inv_m: np.ndarray, z: np.ndarray) -> np.ndarray:
    """``ρ ~ N(0, M)`` from standard normals ``z``.

    ``z / √(M⁻¹)`` for a diagonal mass; ``L⁻ᵀ z`` with ``M⁻¹ = L Lᵀ`` for a dense one (its
    covariance is ``L⁻ᵀ L⁻¹ = M``).
    """
    if inv_m.ndim == 1:
        return z / np.sqrt(inv_m)
    return scipy.linalg.solve_triangular(np.linalg.cholesky(inv_m).T, z, lower=False)
