"""Numba kernels of joint HMC (:class:`~lattice_lgm.samplers.hmc.JointHMC`).

The spectrum table's interpolation; the gradient's passes over the half-spectrum
(:func:`_white_pass`, :func:`_color_pass`, :func:`_white_chord`) and over the observed sites
(:func:`_chord_sites`); the integrators' kicks, rotations and drifts of the field; and the
whole trajectory of the default configuration (:func:`_chord_gradient`,
:func:`_trajectory_chord`), which executes the gradient's FFTW plans itself
(:mod:`lattice_lgm.priors._fftw`), so no Python runs between leapfrog steps.  Every kernel is
module-level and cached on disk (decision 98).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ..likelihoods._kernels import site_deriv
from ..priors import _fftw


@numba.njit(cache=True, nogil=True)
def _interpolate(a0, a1, t, inv_step, scale):  # pragma: no cover - compiled
    """``(scale (a0 + t (a1 − a0)), scale (a1 − a0) / step)``: the table's chord and slope."""
    a = np.empty_like(a0)
    da = np.empty_like(a0)
    af, df, f0, f1 = a.ravel(), da.ravel(), a0.ravel(), a1.ravel()
    for i in range(af.size):
        d = f1[i] - f0[i]
        af[i] = scale * (f0[i] + t * d)
        df[i] = scale * (d * inv_step)
    return a, da


@numba.njit(cache=True, nogil=True)
def _white_pass(x, gk_raw, scale, sq, dsq, c, prior_term):  # pragma: no cover - compiled
    """``(x − σĝ, Σ c σ Re(ĝ* x), Σ c ∂σ Re(ĝ* x))`` over the half-spectrum, in index order.

    ``ĝ = scale · gk_raw`` (the unnormalised forward FFT times ``1/√M``); without
    ``prior_term`` the first is ``−σĝ`` (the split integrator's kick, the prior's ``x`` being
    integrated exactly).
    """
    xf, gr, sf, df, cf = x.ravel(), gk_raw.ravel(), sq.ravel(), dsq.ravel(), c.ravel()
    out = np.empty_like(xf)
    s1 = 0.0
    s2 = 0.0
    for i in range(xf.size):
        g = gr[i] * scale
        re = g.real * xf[i].real + g.imag * xf[i].imag
        out[i] = xf[i] - sf[i] * g if prior_term else -(sf[i] * g)
        s1 += cf[i] * sf[i] * re
        s2 += cf[i] * df[i] * re
    return out.reshape(x.shape), s1, s2


@numba.njit(cache=True, nogil=True)
def _color_pass(x, a0, a1, t, scale, root_m, out):  # pragma: no cover - compiled
    """``out = x · (σ / √M)``: the c2r's input for ``f = F_u⁻¹(σ x)`` (the 1/√M of F_u⁻¹).

    ``σ = scale (a0 + t (a1 − a0))``: the table's chord, formed bin by bin exactly as
    :func:`_interpolate` forms it and never stored; ``a1 = a0``, ``t = 0``, ``scale = 1``
    give ``σ = a0`` exactly.
    """
    xf, f0, f1, of = x.ravel(), a0.ravel(), a1.ravel(), out.ravel()
    for i in range(xf.size):
        s = scale * (f0[i] + t * (f1[i] - f0[i]))
        of[i] = xf[i] * (s / root_m)


@numba.njit(cache=True, nogil=True)
def _white_chord(x, gk_raw, fscale, a0, a1, t, inv_step, scale, c, prior_term,
                 out):  # pragma: no cover - compiled
    """:func:`_white_pass` with ``σ`` and ``∂σ/∂u`` from the table's chord (never stored).

    The field's gradient goes into ``out`` (shaped like ``x``), the two sums are returned.

    In real arithmetic on the arrays' float views (complex ones interleave their parts; a
    real field, the GMRF's DCT coefficients, has none), with the sums split over even and
    odd bins: the two dependency chains of one running sum were half this loop's time.
    """
    f0, f1, cf = a0.ravel(), a1.ravel(), c.ravel()
    xv, gv, ov = _floats(x), _floats(gk_raw), _floats(out)
    n = f0.size
    k = xv.size // n                         # 2: complex bins, 1: real ones
    s1e = s1o = s2e = s2o = 0.0
    for i in range(n):
        d = f1[i] - f0[i]
        sf = scale * (f0[i] + t * d)
        df = scale * (d * inv_step)
        if k == 2:
            gre = gv[2 * i] * fscale
            gim = gv[2 * i + 1] * fscale
            xre = xv[2 * i]
            xim = xv[2 * i + 1]
            re = gre * xre + gim * xim
            ov[2 * i] = xre - sf * gre if prior_term else -(sf * gre)
            ov[2 * i + 1] = xim - sf * gim if prior_term else -(sf * gim)
        else:
            gre = gv[i] * fscale
            re = gre * xv[i]
            ov[i] = xv[i] - sf * gre if prior_term else -(sf * gre)
        if i & 1:
            s1o += cf[i] * sf * re
            s2o += cf[i] * df * re
        else:
            s1e += cf[i] * sf * re
            s2e += cf[i] * df * re
    return s1e + s1o, s2e + s2o


@numba.njit(cache=True, nogil=True, inline="always")
def _floats(a):  # pragma: no cover - compiled
    """A contiguous array's elements as float64s (a complex one's parts interleaved)."""
    return a.ravel().view(np.float64)


@numba.njit(cache=True, nogil=True)
def _chord_sites(f, idx, proj, zt, base, u, b, obs_u, beta_sd, forms, lo, hi, kind, y, aux,
                 out):  # pragma: no cover - compiled
    """Everything of ∇U between the two transforms, for :meth:`JointHMC._gradient_chord`.

    From the field ``f`` and the effective ``(u, b)``: the physical fixed effects ``c = c_eff
    − P f_obs`` (the shear; ``proj`` has no rows without it), ``η = base + Zc + f_obs``
    (``Zᵀ = zt``), the site gradient ``g``, ``Zᵀg``, and ``out[idx] = g − Pᵀ(Zᵀg + ∇_c log
    p)`` for the forward transform.  Returns ``(ok, ∇U)`` with ∇U complete except the
    spectral sums of ``sd`` and the range (their hyperpriors' terms are in); ``ok`` is False
    outside the support or at a non-finite gradient.  The hyperpriors' derivatives are
    ``a + b u + c e^{du}`` (:meth:`Hyperprior.derivative_form`, rows of ``forms``).
    """
    n = idx.size
    n_u = obs_u.size
    nb = b.size
    nh = u.size
    q = n_u + nb
    grad = np.zeros(nh + nb)
    ff = f.ravel()
    f_obs = np.empty(n)
    for i in range(n):
        f_obs[i] = ff[idx[i]]
    shift = np.zeros(q)
    _rows_dot(proj, f_obs, shift)
    up = u.copy()
    c_phys = np.empty(q)
    for j in range(n_u):
        k = obs_u[j]
        v = u[k] - shift[j]
        if not (lo[k] <= v <= hi[k]):
            return False, grad
        up[k] = v
        c_phys[j] = v
    bp = np.empty(nb)
    for j in range(nb):
        bp[j] = b[j] - shift[n_u + j] / beta_sd[j]
        c_phys[n_u + j] = beta_sd[j] * bp[j]
    dlh = np.empty(nh)
    for k in range(nh):
        v = forms[k, 0] + forms[k, 1] * up[k]
        if forms[k, 2] != 0.0:
            v += forms[k, 2] * math.exp(forms[k, 3] * up[k])
        dlh[k] = v
    grad_c = np.empty(q)
    for j in range(n_u):
        grad_c[j] = dlh[obs_u[j]]
    for j in range(nb):
        grad_c[n_u + j] = -c_phys[n_u + j] / beta_sd[j] ** 2
    g = np.empty(n)
    ok = True
    for i in range(n):
        e = base[i] + f_obs[i]
        for j in range(q):
            e += c_phys[j] * zt[j, i]
        gi = site_deriv(kind, 1, e, y[i], aux[i])
        if not (math.isfinite(gi) and math.isfinite(f_obs[i])):
            ok = False
        g[i] = gi
    zg = np.zeros(q)
    _rows_dot(zt, g, zg)
    of = out.ravel()
    for i in range(n):
        v = g[i]
        for j in range(proj.shape[0]):
            v -= proj[j, i] * (zg[j] + grad_c[j])
        of[idx[i]] = v
    for k in range(nh):
        grad[k] = -dlh[k]
    for j in range(n_u):
        grad[obs_u[j]] -= zg[j]
    for j in range(nb):
        grad[nh + j] = bp[j] - beta_sd[j] * zg[n_u + j]
    return ok and math.isfinite(grad.sum()), grad


@numba.njit(cache=True, nogil=True, inline="always")
def _rows_dot(a, x, out):  # pragma: no cover - compiled
    """``out[j] = Σ_i a[j, i] x[i]``, each sum in index order from 0.0 (as a plain loop).

    The first four rows in one pass with their sums in registers: a row at a time, each sum
    waits on the previous addition (four cycles), which made these products a third of the
    sites' pass on bei at 20 m; four independent sums fill that wait.
    """
    m, n = a.shape
    r4 = min(m, 4)
    s0 = s1 = s2 = s3 = 0.0
    for i in range(n):
        v = x[i]
        if r4 > 0:
            s0 += a[0, i] * v
        if r4 > 1:
            s1 += a[1, i] * v
        if r4 > 2:
            s2 += a[2, i] * v
        if r4 > 3:
            s3 += a[3, i] * v
    for j, sj in enumerate((s0, s1, s2, s3)):
        if j < r4:
            out[j] = sj
    for j in range(4, m):
        acc = 0.0
        for i in range(n):
            acc += a[j, i] * x[i]
        out[j] = acc


@numba.njit(cache=True, nogil=True)
def _kick(r, g, h):  # pragma: no cover - compiled
    """``r −= h g`` in place (a half step of the field's momenta)."""
    rf, gf = _floats(r), _floats(g)
    for i in range(rf.size):
        rf[i] = rf[i] - h * gf[i]


@numba.njit(cache=True, nogil=True)
def _kick_rotate(z, r, g, h, c, s):  # pragma: no cover - compiled
    """``r −= h g``, then ``(z, r) ← (z cos ε + r sin ε, r cos ε − z sin ε)``, in one pass.

    The rotation is the exact flow of ``½|z|² + ½|r|²`` for time ε (the split integrator).
    """
    zf, rf, gf = _floats(z), _floats(r), _floats(g)   # real and imaginary parts alike
    for i in range(zf.size):
        zi = zf[i]
        ri = rf[i] - h * gf[i]
        zf[i] = zi * c + ri * s
        rf[i] = ri * c - zi * s


@numba.njit(cache=True, nogil=True)
def _drift(z, r, eps, m):  # pragma: no cover - compiled
    """``z += ε r / m`` in place (a full step of the field's position)."""
    zf, rf, mf = z.ravel(), r.ravel(), m.ravel()
    for i in range(zf.size):
        # r / m part by part: numpy's complex ÷ real, without a complex division
        zf[i] = zf[i] + eps * complex(rf[i].real / mf[i], rf[i].imag / mf[i])


@numba.njit(cache=True, nogil=True)
def _drift_real(z, r, eps, m):  # pragma: no cover - compiled
    """``z += ε r / m`` in place for a real field (the DCT coefficients of a GMRF)."""
    zf, rf, mf = z.ravel(), r.ravel(), m.ravel()
    for i in range(zf.size):
        zf[i] = zf[i] + eps * (rf[i] / mf[i])


# -- the whole trajectory, compiled (the default configuration) ---------------------------------
#: statuses of :func:`_trajectory_chord`
_DONE, _DIVERGED, _NEED_NODES, _PAST_TABLE = 0, 1, 2, 3


@numba.njit(cache=True, nogil=True)
def _chord_gradient(hb, z, gh, gz, tab, fft, site):  # pragma: no cover - compiled
    """:meth:`JointHMC._gradient_chord` without Python: ``∇U`` at ``(hb, z)`` into ``gh, gz``.

    ``tab = (nodes, j0, step, u_max, k_tab, k_sd, sd_fixed, c, root_m, log_max, split)``,
    ``fft = (execute, plans, bwd_in, bwd_out, fwd_in, fwd_out)``, ``site`` the arguments of
    :func:`_chord_sites` after ``f``.  Returns a status: ``_DONE``; ``_DIVERGED`` (outside the
    support, a range no covariance takes, an sd that overflows, a non-finite gradient — the
    Python path's ``None``); ``_NEED_NODES`` (the table's block lacks the chord's nodes: the
    caller extends it and asks again); ``_PAST_TABLE`` (the chord crosses the range's bound:
    the caller takes this gradient on the general path).
    """
    nodes, j0, step, u_max, k_tab, k_sd, sd_fixed, c, root_m, log_max, split = tab
    execute, plans, bwd_in, bwd_out, fwd_in, fwd_out = fft
    idx, proj, zt, base, obs_u, beta_sd, forms, lo, hi, kind, y, aux = site
    nt = lo.size
    u = hb[:nt]
    b = hb[nt:]
    for k in range(nt):
        if not (lo[k] <= u[k] <= hi[k]):
            return _DIVERGED
    ut = u[k_tab]
    j = math.floor(ut / step)
    if (j + 1) * step > u_max:
        return _PAST_TABLE
    if j < j0 or j + 1 - j0 >= nodes.shape[0]:
        return _NEED_NODES
    t = ut / step - j
    a0 = nodes[j - j0]
    a1 = nodes[j + 1 - j0]
    if k_sd >= 0:
        if u[k_sd] > log_max:
            return _DIVERGED
        scale = math.exp(u[k_sd])
    else:
        scale = sd_fixed
    _color_pass(z, a0, a1, t, scale, root_m, bwd_in)
    _fftw.execute_at(execute, plans[2])
    _fftw.execute_at(execute, plans[3])
    ok, grad = _chord_sites(bwd_out, idx, proj, zt, base, u, b, obs_u, beta_sd, forms, lo, hi,
                            kind, y, aux, fwd_in)
    if not ok:
        return _DIVERGED
    _fftw.execute_at(execute, plans[0])
    _fftw.execute_at(execute, plans[1])
    s_sd, s_cov = _white_chord(z, fwd_out, 1.0 / root_m, a0, a1, t, 1.0 / step, scale, c,
                               not split, gz)
    if k_sd >= 0:
        grad[k_sd] -= s_sd
    grad[k_tab] -= s_cov
    gh[:] = grad
    return _DONE


@numba.njit(cache=True, nogil=True)
def _trajectory_chord(hb, z, rh, rz, gh, gz, inv_m, eps, n_steps, s, pending, tab, fft, site,
                      span):  # pragma: no cover - compiled
    """Steps ``s … n_steps − 1`` of :meth:`JointHMC._leapfrog`, in place.

    The split integrator with a diagonal mass and the gradient of :func:`_chord_gradient`;
    the final half kick after the last step.

    ``pending``: step ``s`` has moved the position but its gradient is still to take (a
    resumed call).  ``span = [limit, lowest, highest]``: the log range's extremes along the
    trajectory so far (updated); a trajectory whose log range spans more than ``limit`` ends
    as a divergence (:meth:`JointHMC._span_limit`).  Returns ``(status, s, n_grad)``: the
    status of :func:`_chord_gradient` (``_DONE`` at the end), the step it stopped in and the
    gradients taken.
    """
    k_tab = tab[4]
    c = math.cos(eps)
    sn = math.sin(eps)
    n_grad = 0
    while s < n_steps:
        if not pending:
            for k in range(hb.size):
                if not math.isfinite(hb[k]):
                    return _DIVERGED, s, n_grad
            h = 0.5 * eps if s == 0 else eps   # the first half kick; later two halves in one
            for k in range(hb.size):
                rh[k] = rh[k] - h * gh[k]
            for k in range(hb.size):
                hb[k] = hb[k] + eps * (inv_m[k] * rh[k])
            v = hb[k_tab]
            span[1] = min(span[1], v)
            span[2] = max(span[2], v)
            if span[2] - span[1] > span[0]:
                return _DIVERGED, s, n_grad
            _kick_rotate(z, rz, gz, h, c, sn)
        st = _chord_gradient(hb, z, gh, gz, tab, fft, site)
        if st == _NEED_NODES or st == _PAST_TABLE:
            return st, s, n_grad
        n_grad += 1
        if st != _DONE:
            return st, s, n_grad
        pending = False
        s += 1
    for k in range(hb.size):
        rh[k] = rh[k] - 0.5 * eps * gh[k]
    _kick(rz, gz, 0.5 * eps)
    return _DONE, s, n_grad
