r"""An independent reference for the GPLVM's hyperparameter posterior: data augmentation.

The pseudo-marginal chain (``benchmarks/papers/gplvm.py``) integrates ``Z`` out by importance
sampling.  This oracle does not: it runs an ordinary Gibbs chain on the joint ``(ξ, Z)``, whose
``ξ``-marginal is the same posterior ``p(ξ | Y, X)``, with none of the pseudo-marginal
machinery (no variational ``q``, no importance weights).  Each iteration:

1. ``Z | ξ``: one elliptical slice update (Algorithm 3, :func:`~lattice_lgm.gplvm.latent.
   sample_latent`);
2. ``η = log ξ | Z`` (centred): a Gaussian random walk on all of ``η`` against
   ``log p(Y | Z, θ, β) + log p(Z | X, σ) + log p(η)``;
3. ``log σ`` with the whitened ``W = L_z(σ)⁻¹ Z`` held fixed (non-centred; Papaspiliopoulos,
   Roberts & Sköld 2007): a random walk against ``log p(Y | L_z(σ) W, θ, β) + log p(η)`` —
   ``Z`` moves with ``σ``, which the centred step cannot do when ``Z`` pins ``σ`` down.

The random walks adapt during burn-in only (Robbins–Monro on the scale to acceptance 0.25 and
0.3; the centred covariance from the second half of the burn-in history, 2.38²/d, Haario et
al. 2001) and are fixed afterwards, so the kept draws are from a time-homogeneous chain.  It
is cheap (~2–6 ms an iteration at N = 30) but mixes slowly (ξ and Z are strongly coupled), so
it runs tens of thousands of iterations; its own R-hat and ESS are reported beside it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.linalg import solve_triangular

from lattice_lgm.gplvm.density import kz_factor, log_p_y_given_z, log_p_z_given_x
from lattice_lgm.gplvm.latent import sample_latent

#: Robbins–Monro targets of the two random walks (steps 2 and 3)
TARGET_CENTRED, TARGET_SIGMA = 0.25, 0.3


def augmented_chain(model: Any, seed: Any, n_iter: int, burn: int,
                    thin: int) -> tuple[np.ndarray, np.ndarray]:
    """One data-augmentation chain of ``model`` (a ``SupervisedGPLVM``), module docstring.

    Returns
    -------
    draws : ndarray, shape ((n_iter − burn) // thin, d)
        ``η = log ξ`` after burn-in, every ``thin``-th iteration.
    acceptance : ndarray, shape (2,)
        Of the centred and the non-centred random walks, over all iterations.
    """
    m = model
    rng = np.random.default_rng(seed)
    eta = m.start_etas([rng])[0]            # as the pseudo-marginal chains start
    z = m.start_fit().sample(rng, 1)[0]
    d, kx = eta.size, m.k_x

    def centred(e: np.ndarray, zz: np.ndarray) -> float:
        h = m.hyper_of(e)
        return float(log_p_y_given_z(m.y, zz, h)[0] + log_p_z_given_x(zz, m.x, h, m.jitter)[0]
                     + m.log_prior(e))

    def whitened(e: np.ndarray, w: np.ndarray) -> tuple[float, np.ndarray]:
        h = m.hyper_of(e)
        zz = kz_factor(m.x, h, m.jitter) @ w
        return float(log_p_y_given_z(m.y, zz, h)[0]) + m.log_prior(e), zz

    chol, scale, s_sig = 0.1 * np.eye(d), 1.0, 0.1
    hist, out, acc, ll = [], [], np.zeros(2), None
    for t in range(n_iter):
        dr = sample_latent(m.y, m.x, m.hyper_of(eta), z, rng, 1, jitter=m.jitter, loglik=ll)
        z, ll = dr.z, dr.loglik
        # 2: centred random walk on η given Z
        prop = eta + scale * chol @ rng.standard_normal(d)
        a = bool(np.log(rng.uniform()) < centred(prop, z) - centred(eta, z))
        if a:
            eta, ll = prop, None
        # 3: non-centred random walk on log σ with W fixed
        w = solve_triangular(kz_factor(m.x, m.hyper_of(eta), m.jitter), z, lower=True)
        prop = eta.copy()
        prop[:kx] += s_sig * rng.standard_normal(kx)
        (c0, _), (c1, z1) = whitened(eta, w), whitened(prop, w)
        a2 = bool(np.log(rng.uniform()) < c1 - c0)
        if a2:
            eta, z, ll = prop, z1, None
        acc += (a, a2)
        if t < burn:  # adaptation, burn-in only
            step = 0.5 / np.sqrt(t + 1.0)
            scale *= np.exp(step * (a - TARGET_CENTRED))
            s_sig *= np.exp(step * (a2 - TARGET_SIGMA))
            hist.append(eta.copy())
            if t > 500 and t % 200 == 0:
                c = np.cov(np.array(hist[len(hist) // 2:]).T) * 2.38**2 / d
                chol, scale = np.linalg.cholesky(c + 1e-8 * np.eye(d)), 1.0
        elif (t - burn) % thin == 0:
            out.append(eta.copy())
    return np.array(out), acc / n_iter
