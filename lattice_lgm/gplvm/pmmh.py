r"""Pseudo-marginal adaptive Metropolis-within-Gibbs (Gadd et al., Algorithm 2).

The chain moves ``η = t(ξ) = log ξ`` block by block.  For block ``r`` at iteration ``g``:

3. propose ``η'_r = η_r + ε``, ``ε ~ N(0, Σ_r^{(g−1)})`` (other blocks fixed);
4. estimate ``p̃(Y | X, ξ')`` — a *fresh* unbiased estimate at the proposal only;
5. accept with probability ``min{1, p̃(ξ') p(ξ') J(η') / (p̃(ξ) p(ξ) J(η))}`` where ``p̃(ξ)`` is
   the estimate *carried* from when the current state was accepted (never recomputed: that is
   what makes the chain target the exact posterior, Andrieu & Roberts 2009) and
   ``J(η) = |∂ξ/∂η| = Π ξ`` is the Jacobian of the log transform (the paper's ratio
   ``|∂t/∂ξ(ξ)| / |∂t/∂ξ(ξ')|`` = ``ξ'/ξ``);
6–7. after ``g₀`` iterations, Haario, Saksman & Tamminen (2001):
   ``Σ_r^{(g)} = s_d · cov(η_r^{(1..g)}) + s_d ε I`` with ``s_d = 2.38²/d_r``, the sample
   covariance of the block's whole history (kept as Welford running moments: the same
   quantity as step 7's sums, without their cancellation);
10. the draws ``g > n₀`` are the output.

Generic: the model supplies ``log_estimate(η, rng) -> log p̃`` and ``log_prior(η)``, and an
optional ``hook(η, block, accepted)`` called after every block update — where the paper
re-optimises its variational importance distribution ("after each full conditional sample").

**Caveat on exactness.**  The pseudo-marginal argument needs the estimate at ``ξ'`` to be drawn
from a distribution that depends on ``ξ'`` only.  If the importance distribution ``q`` is
re-fitted at the *current* state (the paper's VB re-optimisation), the estimate at ``ξ'`` depends
on the chain's past and the textbook guarantee does not hold as stated; the estimate stays
unbiased for each fixed ``q``, and the error vanishes as ``q`` stops changing, but nothing here
proves it.  This class does not decide when to refit — the hook does.

**Correlated pseudo-marginal** (Deligiannidis, Doucet & Pitt 2018, "The correlated
pseudo-marginal method", *JRSS B* 80, 839–870).  With ``aux_shape`` the estimate is a
deterministic function ``log p̃(η, u)`` of standard normals ``u`` that the chain carries, and step
3 also proposes ``u' = ρ u + √(1 − ρ²) ε``, ``ε ~ N(0, I)`` (Crank–Nicolson, reversible for
``N(0, I)``).  The chain is then a Metropolis–Hastings chain on ``(η, u)`` targeting
``p(η) p̃(η, u) N(u | 0, I)``, whose ``η``-marginal is the exact posterior because ``p̃`` is unbiased
for every ``η``; step 5's ratio is unchanged.  With ``ρ = 0`` it *is* Algorithm 2 (a fresh
estimate at each proposal); with ``ρ`` near 1 the estimates at ``ξ`` and ``ξ'`` share most of
their randomness, so the log of their ratio has a small variance even when ``log p̃`` itself has
a large one, and a lucky overestimate no longer freezes the chain: ``u`` drifts away from it.

**State.**  :meth:`AdaptivePMMH.initial_state` and :meth:`AdaptivePMMH.run` work on a plain dict
(arrays, lists of arrays, numbers and the bit generator's state dict); pickling it and resuming
gives bit-for-bit the draws of an uninterrupted run (the hook's own state is the caller's to
checkpoint).  Same seed, same draws.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any, Literal, NamedTuple

import numpy as np

from .._validation import finite_array, positive_float, positive_int
from ..errors import InvalidParameterError, SamplerError, ShapeMismatchError

__all__ = ["AdaptivePMMH", "PMMHTrace", "check_correlation"]

#: Haario et al.'s (2001) scale ``s_d = 2.38²/d`` (Gelman, Roberts & Gilks 1996)
HAARIO_SCALE = 2.38**2

State = dict[str, Any]


class PMMHTrace(NamedTuple):
    """What one :meth:`AdaptivePMMH.run` call produced, one row per Gibbs cycle ``g``.

    Attributes
    ----------
    iteration : ndarray of int, shape (n_iter,)
        ``g`` (counted from the start of the chain, across resumed runs).
    eta : ndarray, shape (n_iter, d)
        ``η^{(g)}`` after the cycle.
    log_p_hat : ndarray, shape (n_iter,)
        The carried ``log p̃`` of ``η^{(g)}``.
    accepted : ndarray of bool, shape (n_iter, R)
        Whether block ``r``'s proposal was accepted in cycle ``g``.
    n0 : int
        Algorithm 2's ``n₀``: :attr:`draws` keeps ``g > n₀`` (step 10).
    """

    iteration: np.ndarray
    eta: np.ndarray
    log_p_hat: np.ndarray
    accepted: np.ndarray
    n0: int

    @property
    def draws(self) -> np.ndarray:
        """Step 10's output: the rows with ``g > n₀``, shape (n_kept, d)."""
        return self.eta[self.iteration > self.n0]


def _check_blocks(blocks: Sequence[Sequence[int]], dim: int | None) -> list[np.ndarray]:
    out = [np.asarray(b, dtype=int).ravel() for b in blocks]
    if not out or any(b.size == 0 for b in out):
        raise InvalidParameterError(
            f"blocks={blocks!r} must be a non-empty list of non-empty index lists, e.g. "
            "[[0, 2], [1, 3]] (the paper's ξ₁ = (σ, θ), ξ₂ = (θ_S, β)).")
    flat = np.concatenate(out)
    total = int(flat.max()) + 1 if dim is None else dim
    if sorted(flat.tolist()) != list(range(total)):
        raise InvalidParameterError(
            f"blocks={[b.tolist() for b in out]!r} must split the indices 0..{total - 1} of η "
            "into disjoint blocks, each index exactly once (an index in no block never moves).")
    return out


def _check_correlated(aux_shape: Sequence[int] | None,
                      correlation: float) -> tuple[tuple[int, ...] | None, float]:
    if aux_shape is None:
        if correlation != 0.0:
            raise InvalidParameterError(
                f"correlation={correlation!r} needs aux_shape (the shape of the estimator's "
                "normals u); without it each estimate draws from rng and nothing is carried.")
        return None, 0.0
    shape = tuple(np.atleast_1d(np.asarray(aux_shape)).tolist())
    if not shape or any(not isinstance(k, int) or k < 1 for k in shape):
        raise InvalidParameterError(
            f"aux_shape={aux_shape!r} must be a tuple of positive ints, e.g. (Q, k_z, N).")
    return shape, check_correlation(correlation)


def check_correlation(correlation: float) -> float:
    """``ρ`` of the correlated move as a float in ``[0, 1)``, or a named error."""
    if (isinstance(correlation, bool) or not isinstance(correlation, float | int)
            or not 0.0 <= correlation < 1.0):
        raise InvalidParameterError(
            f"correlation={correlation!r} must be a number in [0, 1), e.g. 0.99 (ρ of "
            "u' = ρu + √(1−ρ²)ε; 0 is a fresh estimate per proposal, as the paper's).")
    return float(correlation)


class AdaptivePMMH:
    r"""Algorithm 2 of Gadd et al.: pseudo-marginal adaptive Metropolis within Gibbs on ``η``.

    Parameters
    ----------
    log_estimate : callable
        ``(eta (d,), rng) -> float``: ``log p̃(Y | X, ξ(η))``, an unbiased estimate of the
        likelihood (not of its log) drawn with ``rng`` (e.g.
        :func:`~lattice_lgm.gplvm.estimator.log_marginal_estimate`'s ``log_p_hat``); ``−inf``
        rejects, NaN is an error.  With ``aux_shape``: ``(eta (d,), u) -> float``, the estimate
        as a function of the normals ``u``.
    log_prior : callable
        ``eta (d,) -> float``.  With ``prior_on="xi"`` it is ``log p(ξ)`` at ``ξ = exp(η)`` and
        the sampler adds the log-Jacobian ``Σ η`` (so the chain targets the density of ``η``);
        with ``prior_on="eta"`` it already is the log density of ``η`` and nothing is added.
    blocks : sequence of index sequences
        The Gibbs blocks ``ξ_r``: a partition of ``0..d−1``.
    prior_on : {"xi", "eta"}
    g0 : int
        Adaptation starts after ``g₀`` cycles (steps 6–7).
    n0 : int
        Draws ``g ≤ n₀`` are burn-in (step 10).
    epsilon : float
        Step 7's ``ε`` (the regulariser ``s_d ε I``).
    initial_cov : float or sequence of arrays
        ``Σ_r^{(0)}``: a variance (times ``I``) for every block, or one (d_r, d_r) matrix each.
    hook : callable, optional
        ``(eta (d,), block, accepted) -> None`` after each block update (see module docstring).
    aux_shape : tuple of int, optional
        The shape of the standard normals ``u`` of a correlated estimator; ``log_estimate`` is
        then ``(eta (d,), u) -> float``, a deterministic function of ``u`` (module docstring).
    correlation : float
        ``ρ ∈ [0, 1)`` of the correlated proposal ``u' = ρu + √(1 − ρ²) ε`` (needs
        ``aux_shape``; 0 draws a fresh ``u`` per proposal, i.e. plain Algorithm 2).

    Examples
    --------
    >>> pm = AdaptivePMMH(lambda e, r: est(e, r), log_prior, [[0, 1], [2, 3]])  # doctest: +SKIP
    >>> state = pm.initial_state(eta0, np.random.default_rng(1))             # doctest: +SKIP
    >>> state, trace = pm.run(state, 1000)                                   # doctest: +SKIP
    """

    def __init__(self, log_estimate: Callable[[np.ndarray, np.random.Generator], float],
                 log_prior: Callable[[np.ndarray], float], blocks: Sequence[Sequence[int]], *,
                 prior_on: Literal["xi", "eta"] = "xi", g0: int = 200, n0: int = 500,
                 epsilon: float = 1e-6, initial_cov: float | Sequence[np.ndarray] = 0.01,
                 hook: Callable[[np.ndarray, int, bool], None] | None = None,
                 aux_shape: Sequence[int] | None = None, correlation: float = 0.0) -> None:
        for name, f in (("log_estimate", log_estimate), ("log_prior", log_prior)):
            if not callable(f):
                raise InvalidParameterError(f"{name}={f!r} is not callable; pass a function.")
        if hook is not None and not callable(hook):
            raise InvalidParameterError(f"hook={hook!r} is not callable; pass a function or None.")
        if prior_on not in ("xi", "eta"):
            raise InvalidParameterError(
                f"prior_on={prior_on!r} must be 'xi' (log_prior is log p(ξ); the sampler adds "
                "the Jacobian Σ η) or 'eta' (log_prior is already the density of η = log ξ).")
        self.blocks = _check_blocks(blocks, None)
        self.dim = sum(b.size for b in self.blocks)
        self.log_estimate, self.log_prior_fn, self.hook = log_estimate, log_prior, hook
        self.prior_on = prior_on
        self.g0 = positive_int("g0", g0, "adaptation starts after g0 >= 1 cycles (paper: 200)")
        if isinstance(n0, bool) or not isinstance(n0, int | np.integer) or n0 < 0:
            raise InvalidParameterError(f"n0={n0!r} must be an integer >= 0 (paper: 500).")
        self.n0 = int(n0)
        self.epsilon = positive_float("epsilon", epsilon, "pass a small value such as 1e-6")
        self.initial_cov = self._initial_covs(initial_cov)
        self.aux_shape, self.correlation = _check_correlated(aux_shape, correlation)

    # -- set-up ---------------------------------------------------------------------------------
    def _initial_covs(self, initial_cov: float | Sequence[np.ndarray]) -> list[np.ndarray]:
        if np.isscalar(initial_cov) or getattr(initial_cov, "ndim", None) == 0:  # a variance
            v = positive_float("initial_cov", initial_cov, "pass a proposal variance, e.g. 0.01")
            return [v * np.eye(b.size) for b in self.blocks]
        covs = [np.asarray(c, dtype=float) for c in initial_cov]  # type: ignore[union-attr]
        if len(covs) != len(self.blocks):
            raise ShapeMismatchError(
                f"initial_cov has {len(covs)} matrices for {len(self.blocks)} blocks; pass one "
                "(d_r, d_r) matrix per block or a single variance.")
        for r, (c, b) in enumerate(zip(covs, self.blocks, strict=True)):
            if c.shape != (b.size, b.size):
                raise ShapeMismatchError(
                    f"initial_cov[{r}] has shape {c.shape}; block {r} has {b.size} entries.")
            finite_array(f"initial_cov[{r}]", c, "pass a finite covariance")
            try:
                np.linalg.cholesky(c)
            except np.linalg.LinAlgError as exc:
                raise InvalidParameterError(
                    f"initial_cov[{r}] is not positive definite; pass e.g. 0.01 * I.") from exc
        return covs

    def log_prior(self, eta: np.ndarray) -> float:
        """The log density of ``η``: ``log p(ξ) + Σ η`` (``prior_on="xi"``) or ``log_prior(η)``."""
        lp = float(self.log_prior_fn(eta))
        if np.isnan(lp):
            raise SamplerError(f"log_prior returned NaN at eta={eta.tolist()!r}.",
                               {"eta": eta.tolist()})
        # the log transform's Jacobian log|∂ξ/∂η| = Σ η (the paper's |∂t/∂ξ| ratio in α̃)
        return lp + float(eta.sum()) if self.prior_on == "xi" else lp

    def _estimate(self, eta: np.ndarray, rng_or_u: np.random.Generator | np.ndarray) -> float:
        val = float(self.log_estimate(eta.copy(), rng_or_u))
        if np.isnan(val) or val == np.inf:
            raise SamplerError(
                f"log_estimate returned {val!r} at eta={eta.tolist()!r}; it must be a finite "
                "log-likelihood estimate or -inf (reject).", {"eta": eta.tolist()})
        return val

    def initial_state(self, eta0: np.ndarray, rng: np.random.Generator | int) -> State:
        """The chain's state at ``g = 0``.

        ``η⁰``, its estimate ``log p̃(η⁰)`` (drawn here), ``Σ_r^{(0)}`` and empty Haario moments.

        Parameters
        ----------
        eta0 : ndarray, shape (d,)
        rng : numpy.random.Generator or int seed
            The chain's only stream; its state is stored in the returned dict.

        Returns
        -------
        dict
            Plain data: ``eta``, ``log_p_hat``, ``log_prior``, ``iteration``, ``cov``, ``mean``,
            ``m2`` (lists, one entry per block), ``accepted``, ``proposed`` (R,), ``rng``; and
            ``u`` (``aux_shape``, drawn here) for a correlated estimator.
        """
        eta0 = np.asarray(eta0, dtype=float)
        if eta0.shape != (self.dim,):
            raise ShapeMismatchError(
                f"eta0 has shape {eta0.shape}; the blocks cover {self.dim} entries of η.")
        finite_array("eta0", eta0, "start the chain at finite log-hyperparameters")
        if isinstance(rng, int | np.integer) and not isinstance(rng, bool):
            rng = np.random.default_rng(int(rng))
        if not isinstance(rng, np.random.Generator):
            raise InvalidParameterError(
                f"rng={rng!r} must be a numpy.random.Generator or an integer seed.")
        lp = self.log_prior(eta0)
        u = None if self.aux_shape is None else rng.standard_normal(self.aux_shape)
        lhat = self._estimate(eta0, rng if u is None else u)
        if not (np.isfinite(lp) and np.isfinite(lhat)):
            raise SamplerError(
                f"the chain cannot start at eta0={eta0.tolist()!r}: log prior {lp!r}, log "
                f"p̃ {lhat!r}; start where both are finite.", {"eta0": eta0.tolist()})
        nb = len(self.blocks)
        return {
            "eta": eta0.copy(), "log_p_hat": lhat, "log_prior": lp, "iteration": 0,
            "cov": [c.copy() for c in self.initial_cov],
            "mean": [np.zeros(b.size) for b in self.blocks],
            "m2": [np.zeros((b.size, b.size)) for b in self.blocks],
            "accepted": np.zeros(nb, dtype=np.int64), "proposed": np.zeros(nb, dtype=np.int64),
            "rng": copy.deepcopy(rng.bit_generator.state),
        } | ({} if u is None else {"u": u})

    # -- Algorithm 2 ----------------------------------------------------------------------------
    @staticmethod
    def _rng(state: State) -> np.random.Generator:
        st = state["rng"]
        bitgen = getattr(np.random, st["bit_generator"])()
        bitgen.state = copy.deepcopy(st)
        return np.random.Generator(bitgen)

    def _block_update(self, s: State, r: int, rng: np.random.Generator) -> bool:
        """Steps 3–7 for block ``r`` in cycle ``g = s['iteration']`` (already incremented)."""
        idx, g = self.blocks[r], s["iteration"]
        # 3: random walk on η_r with the previous cycle's Σ_r^(g−1)
        chol = np.linalg.cholesky(s["cov"][r])
        prop = s["eta"].copy()
        prop[idx] += chol @ rng.standard_normal(idx.size)
        u_prop = None
        if self.aux_shape is not None:
            # the correlated move of the estimator's normals (Deligiannidis et al. 2018):
            # u' = ρu + √(1−ρ²)ε leaves N(0, I) invariant, so the ratio below needs no term
            rho = self.correlation
            u_prop = rho * s["u"] + np.sqrt(1.0 - rho * rho) * rng.standard_normal(
                self.aux_shape)
        s["proposed"][r] += 1
        accepted = False
        lp_prop = self.log_prior(prop)
        if np.isfinite(lp_prop):          # outside the prior's support: reject unestimated
            # 4: a fresh unbiased estimate at ξ' only
            lhat_prop = self._estimate(prop, rng if u_prop is None else u_prop)
            # 5: α̃ with the CARRIED p̃(ξ) of the current state (never re-estimated here)
            log_alpha = (lhat_prop + lp_prop) - (s["log_p_hat"] + s["log_prior"])
            if np.log(rng.uniform()) < log_alpha:
                s["eta"], s["log_p_hat"], s["log_prior"] = prop, lhat_prop, lp_prop
                if u_prop is not None:
                    s["u"] = u_prop
                s["accepted"][r] += 1
                accepted = True
        # 6–7 (Haario et al. 2001): the history η_r^(1..g) in Welford's running mean and
        # comoment m2 = Σ_m (η_m − η̄)(η_m − η̄)ᵀ = Σ η ηᵀ − g η̄ η̄ᵀ, step 7's bracket
        x = s["eta"][idx]
        delta = x - s["mean"][r]
        s["mean"][r] = s["mean"][r] + delta / g
        s["m2"][r] = s["m2"][r] + np.outer(delta, x - s["mean"][r])
        if g > self.g0:
            s_d = HAARIO_SCALE / idx.size
            m2 = 0.5 * (s["m2"][r] + s["m2"][r].T)
            s["cov"][r] = s_d / (g - 1) * m2 + s_d * self.epsilon * np.eye(idx.size)
        return accepted

    def run(self, state: State, n_iter: int) -> tuple[State, PMMHTrace]:
        """``n_iter`` Gibbs cycles of Algorithm 2 from ``state`` (which is not modified).

        Parameters
        ----------
        state : dict
            From :meth:`initial_state` or an earlier :meth:`run`.
        n_iter : int

        Returns
        -------
        state : dict
            The new state (resume from it).
        trace : PMMHTrace
        """
        n_iter = positive_int("n_iter", n_iter, "run at least one cycle")
        s = copy.deepcopy(state)
        if np.shape(s.get("eta")) != (self.dim,) or len(s.get("cov", ())) != len(self.blocks):
            raise ShapeMismatchError(
                "state does not belong to this sampler (its η or its blocks differ); start "
                "from initial_state().")
        rng = self._rng(s)
        nb = len(self.blocks)
        its = np.empty(n_iter, dtype=np.int64)
        etas = np.empty((n_iter, self.dim))
        lhats = np.empty(n_iter)
        acc = np.zeros((n_iter, nb), dtype=bool)
        for t in range(n_iter):
            acc[t] = self.cycle(s, rng)
            its[t], etas[t], lhats[t] = s["iteration"], s["eta"], s["log_p_hat"]
        s["rng"] = copy.deepcopy(rng.bit_generator.state)
        return s, PMMHTrace(its, etas, lhats, acc, self.n0)

    def cycle(self, s: State, rng: np.random.Generator) -> np.ndarray:
        """One Gibbs cycle (steps 1–9) of ``s`` in place, drawing from ``rng``.

        For a caller that owns the chain's stream (a run's per-chain generator); ``s["rng"]``
        is neither read nor written.  Returns whether each block's proposal was accepted, (R,).
        """
        acc = np.zeros(len(self.blocks), dtype=bool)
        # 1: cycle g
        s["iteration"] += 1
        # 2: each block ξ_r in turn
        for r in range(len(self.blocks)):
            acc[r] = self._block_update(s, r, rng)
            if self.hook is not None:
                # the paper re-optimises q here, "after each full conditional sample"
                self.hook(s["eta"].copy(), r, bool(acc[r]))
        return acc

    @staticmethod
    def acceptance_rates(state: State) -> np.ndarray:
        """Per-block acceptance rate over the whole chain so far, shape (R,)."""
        prop = np.maximum(np.asarray(state["proposed"]), 1)
        return np.asarray(state["accepted"]) / prop
