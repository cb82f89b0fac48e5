"""The compiled blocks of elliptical slice sampling: many updates of all chains in one call.

:meth:`EllipticalSlice.steps <lattice_lgm.samplers.ess.EllipticalSlice.steps>` runs
``n_steps`` updates in one Numba call where the chains share one dense factor
(:func:`_dense_steps`) or hold circulant priors on one torus (:func:`_spectral_steps`; their
transforms are FFTW plans executed from compiled code, :mod:`lattice_lgm.priors._fftw`),
Python touched once per block (issue 26).  Each block draws from each chain's own Generator
exactly what :meth:`~lattice_lgm.samplers.ess.EllipticalSlice.step` draws, in the same order,
through the same site kernels (:mod:`._kernels`), so the draws are the same bit for bit.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ..priors import _fftw
from ..priors.dense import _lower_matvecs
from . import _kernels

TWO_PI = 2.0 * math.pi


@numba.njit(nogil=True, cache=True)
def _cos_sin(t, ct, st):  # pragma: no cover - numba
    for c in range(t.shape[0]):
        ct[c] = math.cos(t[c])
        st[c] = math.sin(t[c])


@numba.njit(nogil=True, cache=True)
def _slice_update(kind, gens, it, f, nu, white, wn, loglik, sidx, base, y, aux, const,
                  bracket, block, max_evals, trace, n_evals, last_t, err, fs, ints,
                  uniforms, xa):  # pragma: no cover - numba
    """Steps 2–10 of one update of every chain and the rotation, after step 1 (``wn``, ``nu``).

    Murray, Adams & MacKay (2010), Figure 2, drawing from each chain's own Generator exactly
    what :meth:`EllipticalSlice.step` draws after the white noise, in the same order (per
    chain the threshold's and the bracket's uniforms, then blocks of ``block`` shrink
    uniforms for the chains still shrinking), through the same kernels.  ``fs`` (7, m) and
    ``ints`` (2, m) are scratch, ``xa`` (m, 0) the absent coefficients' term (allocated
    once per block, not per update).  Returns False at an error (``err``: kind 1 NaN, 2 shrink
    cap; chain; update ``it``).
    """
    m = f.shape[0]
    log_y, lo, hi, t, ct, st, out_ll = fs[0], fs[1], fs[2], fs[3], fs[4], fs[5], fs[6]
    status, ne = ints[0], ints[1]
    for c in range(m):  # steps 2-3: threshold, initial bracket
        log_y[c] = loglik[c] - const + math.log(gens[c].random())
        if bracket >= TWO_PI:
            tt = gens[c].random() * TWO_PI
            lo[c] = tt - TWO_PI
            hi[c] = tt
            t[c] = tt
        else:
            a = -bracket * gens[c].random()
            lo[c] = a
            hi[c] = a + bracket
            t[c] = a + gens[c].random() * (hi[c] - a)
        status[c] = _kernels.ESS_EVALUATE
        ne[c] = 0
    while True:  # steps 4-10
        for c in range(m):
            if status[c] != _kernels.ESS_DONE:
                u = gens[c].random(block)
                for j in range(block):
                    uniforms[c, j] = u[j]
            else:
                for j in range(block):
                    uniforms[c, j] = 0.0
        _kernels._ess(kind, f, nu, sidx, xa, xa, base, y, aux, log_y, lo, hi, t, uniforms,
                      ne, out_ll, status, max_evals)
        done = True
        for c in range(m):
            if status[c] == _kernels.ESS_NAN:
                err[0], err[1], err[2] = 1, c, it
                last_t[c] = t[c]
                return False
            if status[c] == _kernels.ESS_NEED_UNIFORMS and ne[c] >= max_evals:
                err[0], err[1], err[2] = 2, c, it
                return False
            if status[c] != _kernels.ESS_DONE:
                done = False
        if done:
            break
    _cos_sin(t, ct, st)
    _kernels._rotate(f, nu, ct, st, f)
    _kernels._rotate(white, wn, ct, st, white)
    for c in range(m):
        loglik[c] = out_ll[c] + const
        trace[it, c] = loglik[c]
        n_evals[c] += ne[c]
        last_t[c] = t[c]
    return True


@numba.njit(nogil=True, cache=True)
def _dense_steps(kind, gens, n_steps, low, f, white, loglik, sidx, base, y, aux, const,
                 bracket, block, max_evals, trace, n_evals, last_t, err):  # pragma: no cover
    """``n_steps`` elliptical slice updates of chains sharing one dense factor, in place.

    Step 1 per update: every chain's white noise from its own Generator (as
    ``WhiteOps.draw``), coloured by the factor in one pass (``priors.dense._lower_matvecs``,
    as ``DensePrior.colorize``); then :func:`_slice_update`.  Returns the updates done.
    """
    m, n = white.shape
    wn = np.empty((m, n))
    nu = np.empty((m, n))
    fs = np.empty((7, m))
    ints = np.empty((2, m), dtype=np.int64)
    uniforms = np.zeros((m, block))
    xa = np.zeros((m, 0))
    for it in range(n_steps):
        for c in range(m):  # step 1: ν ~ N(0, K) through the factor
            wn[c, :] = gens[c].standard_normal(n)
        _lower_matvecs(low, wn, nu)
        if not _slice_update(kind, gens, it, f, nu, white, wn, loglik, sidx, base, y, aux,
                             const, bracket, block, max_evals, trace, n_evals, last_t, err,
                             fs, ints, uniforms, xa):
            return it
    return n_steps


@numba.njit(parallel=True, nogil=True, cache=True)
def _spectral_colour(mults, rev, planes, n_last, c2r_in, c2r_out, plans, execute, wn,
                     nu):  # pragma: no cover - numba
    """Step 1 after the normals, for every chain of :func:`_spectral_steps`, in parallel.

    Per chain, as ``CirculantPrior.draw_spectrum`` then ``colorize_spectrum`` compute it,
    operation for operation: the bins of the self-paired last-axis ``planes`` of the white
    half-spectrum ``wn[c]`` paired with their reflections (``rev``: a plane's flat
    reversal; DESIGN §4, the Hermitian fix), ``(u_k + conj u_{−k})/√2``; the whole spectrum
    times ``1/√2``; times the chain's colour multiplier (``mults[c]``, ``√λ·√M/M`` of its
    θ) into its own c2r input; the chain's own compiled plan (executed at ``execute``) into
    ``nu[c]``.  A chain touches only its own buffers and plan: the numbers do not depend on
    the thread count.  (The Generators stay outside: Numba unpacks a tuple passed into a
    parallel region, one compilation per chain count and none above 100 chains.)
    """
    h = wn.shape[1]
    n = nu.shape[1]
    s = 1.0 / math.sqrt(2.0)
    for c in numba.prange(wn.shape[0]):
        w = wn[c]
        for j in planes:
            for p in range(rev.shape[0]):
                r = rev[p]
                if r < p:
                    continue
                a = w[p * n_last + j]
                b = w[r * n_last + j]
                w[p * n_last + j] = (a + b.conjugate()) * s
                if r != p:
                    w[r * n_last + j] = (b + a.conjugate()) * s
        mc = mults[c]
        buf = c2r_in[c]
        for k in range(h):
            w[k] = w[k] * s
            buf[k] = w[k] * mc[k]
        _fftw.execute_at(execute, plans[c])
        out = c2r_out[c]
        for k in range(n):
            nu[c, k] = out[k]


@numba.njit(nogil=True, cache=True)
def _spectral_steps(kind, gens, n_steps, mults, rev, planes, n_last, c2r_in, c2r_out, plans,
                    execute, wn, wn_re, f, white, loglik, sidx, base, y, aux, const, bracket,
                    block, max_evals, trace, n_evals, last_t, err):  # pragma: no cover - numba
    """``n_steps`` elliptical slice updates of chains with circulant priors on one torus.

    Step 1 per update: each chain's complex normals from its Generator into its white
    half-spectrum (``wn`` (m, H) complex, written through its float view ``wn_re``, as
    ``draw_spectrum`` draws them), then :func:`_spectral_colour`; then
    :func:`_slice_update`.  Returns the updates done.
    """
    m = white.shape[0]
    nu = np.empty((m, f.shape[1]))
    fs = np.empty((7, m))
    ints = np.empty((2, m), dtype=np.int64)
    uniforms = np.zeros((m, block))
    xa = np.zeros((m, 0))
    for it in range(n_steps):
        for c in range(m):
            wn_re[c, :] = gens[c].standard_normal(wn_re.shape[1])
        _spectral_colour(mults, rev, planes, n_last, c2r_in, c2r_out, plans, execute, wn, nu)
        if not _slice_update(kind, gens, it, f, nu, white, wn, loglik, sidx, base, y, aux,
                             const, bracket, block, max_evals, trace, n_evals, last_t, err,
                             fs, ints, uniforms, xa):
            return it
    return n_steps
