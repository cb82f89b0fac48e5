"""Slice sampling along a straight line: the third method of Murray, Adams & MacKay (2010).

The paper (§3.1) names "a univariate update along a random line traced out by varying ε in
(13)", ``f' = f + ε ν`` with ``ν ~ N(0, Σ)``, and reports in §4.2 that elliptical slice sampling
takes less time than it and usually performs better.  Each step, per chain ``c``:

1. the direction: ``ν ~ N(0, K_θc)`` (and ``β_ν ~ N(0, diag(β_sd²))`` for in-block
   coefficients), drawn exactly as elliptical slice sampling draws its ellipse, from the chain's
   own stream;
2. the target along the line, up to a constant,
   ``g(ε) = log L(f + ε ν) − ½ q(ε)``, where ``q(ε) = ‖w + ε z‖² + ‖(β + ε β_ν)/β_sd‖²`` is the
   prior's quadratic form in white coordinates (``f = W w``, ``ν = W z``): a quadratic
   ``a + 2bε + cε²``, so the extra "prior evaluations" the paper mentions cost three dot
   products per step;
3. the slice level ``log y = g(0) + log u`` (Neal 2003, §4);
4. stepping out (Neal 2003, Fig. 3) from an interval of width ``width / √c`` placed at random
   around ``ε = 0``, at most ``max_steps_out`` widths in all, split at random between the two
   sides;
5. shrinkage (Neal 2003, Fig. 5): ``ε ~ U(L, R)``, accepted on the slice, else the side away
   from 0 moves in to ``ε``.

The direction is drawn independently of the state and the univariate target along it is the
posterior restricted to the line (the parametrisation is linear, so its Jacobian is constant),
so each step leaves the posterior invariant (the random-direction argument of hit-and-run).  The
interval width depends only on the direction, never on the state, which keeps Neal's stepping
out valid.  ``width`` is in units of the prior's own standard deviation along the line,
``1/√c``; the likelihood can only narrow the slice below that.

Likelihood evaluations run for all chains still searching at once, through the same Numba site
kernel as elliptical slice sampling.  Every uniform comes from the chain's own stream in a fixed
order, so the result does not depend on the thread count or on the other chains (DESIGN §5).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._validation import positive_float, positive_int
from ..errors import InvalidParameterError, SamplerError
from ..models.latent import LatentGaussianModel
from . import _kernels
from ._latent import base, flat, xbeta
from .ess import _Aux, _draw_aux, _new_state, _require_finite
from .state import LatentState, white_ops

__all__ = ["LineSlice"]


def _line_quadratic(model: LatentGaussianModel, state: LatentState, wn: np.ndarray,
                    beta_nu: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The prior's quadratic form on the line, ``q(ε) = a + 2bε + cε²``.

    Returns ``(a, b, c)``, each shape (n_chains,), over the white field and the coefficients
    scaled by their prior sds.
    """
    w, z = flat(state.white), flat(wn)
    qa = np.einsum("ij,ij->i", w, w)
    qb = np.einsum("ij,ij->i", w, z)
    qc = np.einsum("ij,ij->i", z, z)
    if model.n_beta:
        bw, bz = state.beta / model.beta_sd, beta_nu / model.beta_sd
        qa += np.einsum("ij,ij->i", bw, bw)
        qb += np.einsum("ij,ij->i", bw, bz)
        qc += np.einsum("ij,ij->i", bz, bz)
    return qa, qb, qc


class LineSlice:
    """Slice sampling of the latent field along a random prior direction ``f + ε ν``.

    Parameters
    ----------
    model : LatentGaussianModel
        On a dense or proper GMRF prior (real white vectors).  Circulant priors carry complex
        half-spectrum white vectors, whose quadratic form this sampler does not implement.
    width : float
        Initial interval width in units of the prior standard deviation along the line
        (``1/√c``, see the module docstring); default 1.
    max_steps_out : int
        Neal's (2003) ``m``: at most this many widths in the stepped-out interval.
    max_shrink : int
        Cap on likelihood evaluations per chain and step (an error, never a silent stay).

    Examples
    --------
    >>> line = LineSlice(model)                            # doctest: +SKIP
    >>> state, info = line.step(state, rngs)               # doctest: +SKIP
    """

    name = "line_slice"

    def __init__(self, model: LatentGaussianModel, *, width: float = 1.0,
                 max_steps_out: int = 50, max_shrink: int = 200) -> None:
        if not isinstance(model, LatentGaussianModel):
            raise InvalidParameterError(f"model={model!r} must be a LatentGaussianModel.")
        if white_ops(model.prior).dtype != np.float64:
            raise InvalidParameterError(
                f"LineSlice needs real white vectors; the {type(model.prior).__name__} carries "
                "a complex half spectrum. Use EllipticalSlice, or a DensePrior/GMRFPrior.")
        if getattr(model.prior, "intrinsic", False):
            raise InvalidParameterError(
                "LineSlice needs a proper prior (its density along the line); this GMRF is "
                "intrinsic. Use EllipticalSlice, or a proper GMRF (matern or car).")
        self.width = positive_float("width", width,
                                    "the interval width in prior sds along the line, e.g. 1")
        self.max_steps_out = positive_int("max_steps_out", max_steps_out,
                                          "Neal's limit on stepping out, e.g. 50")
        self.max_shrink = positive_int("max_shrink", max_shrink,
                                       "a cap on evaluations per step, e.g. 200")
        self.model = model
        self._kern = _kernels.site_kernels(model.likelihood)
        self._scratch = _Aux()

    def settings(self) -> dict[str, Any]:
        """Every setting that changes this update's draws, JSON-ready."""
        return {"move": self.name, "width": self.width, "max_steps_out": self.max_steps_out,
                "max_shrink": self.max_shrink}

    def step(self, state: LatentState, rngs: Sequence[np.random.Generator], *,
             in_place: bool = False) -> tuple[LatentState, dict[str, Any]]:
        """One straight-line slice update of every chain.

        Parameters
        ----------
        state : LatentState
        rngs : sequence of Generator, one per chain
        in_place : bool
            As :meth:`EllipticalSlice.step`.

        Returns
        -------
        state : LatentState
            New state (the input is not modified unless ``in_place``).
        info : dict
            ``step`` (n_chains,) the accepted ``ε``; ``interval`` (n_chains, 2) the final
            interval; ``n_loglik`` (n_chains,) likelihood evaluations; ``n_cov`` zeros.
        """
        state.check_rngs(rngs)
        _require_finite(state, "straight-line slice sampling")
        model, kern, n = self.model, self._kern, state.n_chains
        lik = model.likelihood
        # step 1: the direction (the same draws, in the same order, as elliptical slice)
        wn, nu, beta_nu = _draw_aux(model, state, rngs, self._scratch)
        # step 2: q(ε) = a + 2bε + cε² in white coordinates
        qa, qb, qc = _line_quadratic(model, state, wn, beta_nu)
        # steps 3-4: slice level, interval placement, split of the step-out budget, per chain
        m = self.max_steps_out
        width = self.width / np.sqrt(qc)
        log_y, lo, hi = np.empty(n), np.empty(n), np.empty(n)
        left, right = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
        for c, r in enumerate(rngs):
            log_y[c] = state.loglik[c] - 0.5 * qa[c] + math.log(r.random())
            lo[c] = -width[c] * r.random()
            hi[c] = lo[c] + width[c]
            left[c] = math.floor(m * r.random())
            right[c] = m - 1 - left[c]

        f2, nu2 = flat(state.f), flat(nu)
        xa, xb = xbeta(model, state.beta), xbeta(model, beta_nu)
        bs = base(model, [state.theta_of(c) for c in range(n)],
                  out=self._scratch.get("base", (n, lik.n_obs), np.float64))
        n_evals = np.zeros(n, dtype=np.int64)

        def target(idx: np.ndarray, eps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            """``(g(ε), log L(f + εν))`` for chains ``idx`` at ``eps``."""
            ll = np.empty(len(idx))
            kern.rotated_loglik(f2[idx], nu2[idx], model.state_index, xa[idx], xb[idx],
                                bs[idx], np.ones(len(idx)), eps, lik.y_obs, lik.aux_obs, ll)
            ll += lik.constant
            n_evals[idx] += 1
            if np.isnan(ll).any():
                c = int(idx[np.flatnonzero(np.isnan(ll))[0]])
                raise SamplerError(
                    f"chain {state.chains[c]}: the log-likelihood is NaN at ε = "
                    f"{eps[np.flatnonzero(idx == c)[0]]!r}; check the data and the likelihood.",
                    {"chain": state.chains[c]})
            return ll - 0.5 * (qa[idx] + eps * (2.0 * qb[idx] + eps * qc[idx])), ll

        # step 4: stepping out, left then right (Neal 2003, Fig. 3)
        for end, budget, sign in ((lo, left, -1.0), (hi, right, 1.0)):
            active = np.flatnonzero(budget > 0)
            while len(active):
                g, _ = target(active, end[active])
                out = active[g > log_y[active]]
                end[out] += sign * width[out]
                budget[out] -= 1
                active = out[budget[out] > 0]
        # step 5: shrinkage (Neal 2003, Fig. 5); ε = 0 is on the slice, so it terminates
        eps = np.zeros(n)
        new_ll = state.loglik.astype(np.float64, copy=True)
        active = np.arange(n)
        while len(active):
            over = active[n_evals[active] >= self.max_shrink]
            if len(over):
                c = int(over[0])
                raise SamplerError(
                    f"chain {state.chains[c]}: straight-line slice sampling hit the cap of "
                    f"{self.max_shrink} evaluations with interval [{lo[c]!r}, {hi[c]!r}] "
                    "around the current state, which should always be on the slice: the "
                    "likelihood is not reproducible at it.",
                    {"chain": state.chains[c], "interval": (float(lo[c]), float(hi[c])),
                     "n_evals": int(n_evals[c])})
            e = np.array([lo[c] + rngs[c].random() * (hi[c] - lo[c]) for c in active])
            g, ll = target(active, e)
            ok = g > log_y[active]
            eps[active[ok]] = e[ok]
            new_ll[active[ok]] = ll[ok]
            rej, er = active[~ok], e[~ok]
            neg = er < 0.0
            lo[rej[neg]] = er[neg]
            hi[rej[~neg]] = er[~neg]
            active = rej
        new = _new_state(kern, state, wn, nu, beta_nu, np.ones(n), eps, new_ll, in_place,
                         model.n_beta)
        return new, {"step": eps, "interval": np.stack([lo, hi], axis=1), "n_loglik": n_evals,
                     "n_cov": np.zeros(n, dtype=np.int64)}
