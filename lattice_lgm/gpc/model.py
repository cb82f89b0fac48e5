r"""Probit GP classification as a run model: ``sample()``, the store, ``resume`` and the CLI.

The model (Rasmussen & Williams 2006, §3.4; Fraccaro, Paquet & Winther's eq. 3 at ``β = 1``):

    f ~ N(0, K),   K = k(x, x) + jitter · I,   p(y_i = 1 | f_i) = Φ(f_i),

with a fixed kernel (default squared exponential with the given ``sd`` and ``lengthscale``):
sampling the kernel's hyperparameters is outside the report's scope and not offered here.
:class:`GPClassification` builds ``K`` and its Cholesky factor once and implements the run
protocol (:class:`lattice_lgm._runview.RunView`) itself, as the lattice GPDS does, so that
``sample(GPClassification(x, y))``, ``resume``, ``extend`` and ``lattice-lgm run`` with
``model.family = "gpc"`` take it as it is.  Its sweeps (``representation``):

* ``"rmhmc"`` — :class:`~lattice_lgm.gpc.sweeps.RMHMCSweep`, the report's sampler;
* ``"hmc"`` — :class:`~lattice_lgm.gpc.sweeps.HMCSweep`, HMC in EP's coordinates (EP's
  precision as the mass matrix; or the prior-whitened ones, or ``f`` with a diagonal mass);
* ``"ess"`` — ``n_latent`` elliptical slice updates (Murray, Adams & MacKay 2010) on the
  equivalent :class:`~lattice_lgm.models.LatentGaussianModel` (``lgm``), the library's
  ``Gibbs(None, EllipticalSlice(lgm))``.

The default, :data:`DEFAULT_METHOD` (``"hmc"``), is the one that converged on the hard
posterior measured (Ionosphere; decision 116, docs/gpc_model.md): elliptical slice sampling
is faster on smooth problems and one keyword away.  Chains start from a draw of expectation
propagation's ``q`` (R&W Algorithm 3.5, :func:`~lattice_lgm.samplers.ep.expectation_propagation`):
a draw from each chain's own stream, so deterministic given the run's seed and the chain's index.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy import linalg, special

from .._validation import check_bools, positive_float
from ..covariance import Covariance, SquaredExponential
from ..errors import ConvergenceError, InvalidDataError, InvalidParameterError
from ..likelihoods import Bernoulli
from ..models.latent import LatentGaussianModel
from ..priors import DensePrior
from ..samplers import EllipticalSlice, Gibbs
from ..samplers._latent import loglik_at
from ..samplers.ep import EPResult, expectation_propagation
from ..samplers.rmhmc import RiemannGPC
from ..samplers.state import LatentState, stack_theta
from ..store.base import hash_arrays
from .sweeps import HMCSweep, RMHMCSweep

__all__ = ["DEFAULT_METHOD", "METHODS", "GPClassification"]

#: the sweeps a GP classifier runs (``sample(representation=...)``)
METHODS = ("rmhmc", "hmc", "ess")
#: the default (``representation="auto"``), chosen for convergence first (decision 116;
#: benchmarks/perf/gpc_samplers.py, 2 chains × (150 + 400) sweeps, load 2–3): on a smooth
#: n = 30 problem ess had the most bulk ESS of f per second (min 1522/s against hmc's 31/s,
#: both R-hat ≤ 1.05), but on Ionosphere (n = 351, σ_f = e^3.5) ess did not converge (R-hat
#: 2.38, min ESS 2.5) nor did rmhmc (2.32), while hmc in EP's coordinates with 20 leapfrog
#: steps did (R-hat 1.02, min ESS 114, 10/s)
DEFAULT_METHOD = "hmc"
#: defaults of the kernel and the jitter
DEFAULT_SD, DEFAULT_LENGTHSCALE, DEFAULT_JITTER = 1.0, 1.0, 1e-6
#: the sweeps' settings a model takes (``sampler=``, ``model.options.sampler``)
SAMPLER_KEYS = ("step_size", "n_leapfrog", "target_accept", "coords")
#: ``model.options`` keys of ``from_config``
OPTION_KEYS = ("label", "features", "sd", "lengthscale", "jitter", "standardise", "sampler")


def _labels(y: Any, n: int) -> np.ndarray:
    """Labels as 0/1 floats: {0, 1} (or booleans) as they are, {−1, +1} mapped by (y + 1)/2."""
    lab = np.asarray(y)
    if lab.ndim != 1:
        raise InvalidDataError(f"y has shape {lab.shape}; give one label per input, shape (n,).")
    if len(lab) != n:
        raise InvalidDataError(
            f"y has {len(lab)} labels but x has {n} rows; give one label per input.")
    if lab.dtype.kind not in "biuf":
        raise InvalidDataError(
            f"y has dtype {lab.dtype}; give numeric labels in {{0, 1}} (or {{-1, +1}}).")
    v = lab.astype(float)
    finite = np.isfinite(v)
    pm = finite.all() and np.isin(v, (-1.0, 1.0)).all() and (v == -1.0).any()
    if pm:
        return (v + 1.0) / 2.0
    bad = ~np.isin(v, (0.0, 1.0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InvalidDataError(
            f"y[{i}]={lab[i].item()!r} is not a class label; give labels in {{0, 1}} (or all in "
            "{-1, +1}), one per input.")
    return v


class GPClassification:
    """Binary GP classification with the probit link and a fixed kernel (module docstring).

    Parameters
    ----------
    x : array_like, shape (n, d) or (n,)
        Inputs (finite).
    y : array_like, shape (n,)
        Labels in {0, 1} (booleans too), or all in {−1, +1} (mapped to {0, 1}).
    kernel : Covariance, optional
        The prior covariance function; default ``SquaredExponential(sd, lengthscale)``.
    sd, lengthscale : float
        The default kernel's hyperparameters (ignored with ``kernel``); ``lengthscale`` may be
        one per input dimension.
    jitter : float
        Added to ``K``'s diagonal (> 0; exact: every computation is of ``K + jitter · I``).
    standardise : bool
        Centre and scale each input column to unit sd before the kernel (a constant column
        is centred only).
    sampler : mapping, optional
        Settings of the ``"rmhmc"`` and ``"hmc"`` sweeps: ``step_size``, ``n_leapfrog``,
        ``target_accept`` (their defaults otherwise); ``coords`` of the ``"hmc"`` sweep
        (:class:`~lattice_lgm.gpc.sweeps.HMCSweep`).

    Attributes
    ----------
    x : ndarray, shape (n, d)
        The inputs as given.
    x_used : ndarray, shape (n, d)
        What the kernel sees (standardised when asked).
    y : ndarray, shape (n,)
        Labels in {0, 1}.
    K : ndarray, shape (n, n)
        ``k(x_used, x_used) + jitter · I``.
    chol : ndarray, shape (n, n)
        Its lower Cholesky factor (the prior's: ``white = chol⁻¹ f``).
    target : RiemannGPC
        The posterior (``β = 1``) with its metric, for RMHMC and HMC.
    lgm : LatentGaussianModel
        ``DensePrior`` + ``Bernoulli(link="probit")``: the same posterior, for elliptical
        slice sampling and the run's bookkeeping.
    """

    #: online summaries: the latent value and the class probability Φ(f) per input
    summary_names = ("f", "prob")
    exceed_on: str | None = None
    family = "gpc"

    def __init__(self, x: Any, y: Any, *, kernel: Covariance | None = None,
                 sd: float = DEFAULT_SD, lengthscale: float | Sequence[float] = DEFAULT_LENGTHSCALE,
                 jitter: float = DEFAULT_JITTER, standardise: bool = False,
                 sampler: Mapping[str, Any] | None = None) -> None:
        xa = np.asarray(x)
        if xa.dtype.kind not in "biuf":
            raise InvalidDataError(f"x has dtype {xa.dtype}; give numeric inputs, shape (n, d).")
        xa = xa.astype(float)
        xa = xa[:, None] if xa.ndim == 1 else xa
        if xa.ndim != 2 or len(xa) == 0 or xa.shape[1] == 0:
            raise InvalidDataError(f"x has shape {np.shape(x)}; give n >= 1 inputs, shape (n, d).")
        bad = ~np.all(np.isfinite(xa), axis=1)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InvalidDataError(
                f"x[{i}]={xa[i].tolist()} is not finite; drop or impute that input.")
        self.y = _labels(y, len(xa))
        check_bools(standardise=standardise)
        self.jitter = positive_float("jitter", jitter, "a small variance added to K's "
                                     "diagonal, e.g. 1e-6")
        if kernel is None:
            sd = positive_float("sd", sd, "the latent function's prior sd, e.g. 1.0")
            ls = np.atleast_1d(np.asarray(lengthscale, dtype=float))
            if ls.ndim != 1 or len(ls) not in (1, xa.shape[1]) or not np.all(
                    np.isfinite(ls) & (ls > 0)):
                raise InvalidParameterError(
                    f"lengthscale={lengthscale!r} must be finite and > 0: one value or one per "
                    f"input dimension ({xa.shape[1]}).")
            kernel = SquaredExponential(sd=sd, lengthscale=float(ls[0]) if len(ls) == 1
                                        else tuple(float(v) for v in ls))
        elif not isinstance(kernel, Covariance):
            raise InvalidParameterError(
                f"kernel={kernel!r} must be a lattice_lgm Covariance, e.g. "
                "SquaredExponential(sd=1.0, lengthscale=1.0).")
        self.sampler = self._sampler_settings(sampler)
        self.x, self.kernel, self.standardise = xa, kernel, bool(standardise)
        self.x_mean = xa.mean(axis=0) if standardise else np.zeros(xa.shape[1])
        scale = xa.std(axis=0) if standardise else np.ones(xa.shape[1])
        self.x_scale = np.where(scale > 0, scale, 1.0)
        self.x_used = (xa - self.x_mean) / self.x_scale
        # the heavy work, once: K + jitter·I, its factor, the target (after every check)
        prior = DensePrior(self.x_used, kernel, jitter=self.jitter)
        self.K = prior.cov + prior.jitter * np.eye(len(xa))
        self.chol = prior.chol
        self.lgm = LatentGaussianModel(prior, Bernoulli(self.y, link="probit"))
        self.target = RiemannGPC(self.K, self.y)
        self.n = len(xa)
        self.dims, self.shape = ("obs",), (self.n,)
        self.field_coords = {"obs": np.arange(self.n)}
        self.coef_names: list[str] = []
        self.inside = np.ones(self.n, dtype=bool)
        self.units = ""
        self.feature_names = [f"x{j}" for j in range(xa.shape[1])]
        self._ep: EPResult | None = None
        #: how the last :meth:`init_state` started the chains ("ep", "prior" or "initvals")
        self.last_start_report: str | None = None

    @staticmethod
    def _sampler_settings(sampler: Mapping[str, Any] | None) -> dict[str, Any]:
        opts = dict(sampler or {})
        unknown = sorted(set(opts) - set(SAMPLER_KEYS))
        if unknown:
            raise InvalidParameterError(
                f"sampler has unknown keys {unknown}; known: {list(SAMPLER_KEYS)}.")
        return opts

    # -- the configuration file ------------------------------------------------------------
    @classmethod
    def from_config(cls, config: Any) -> GPClassification:
        """The model of a run configuration with ``model.family = "gpc"``.

        ``data.points``: a CSV with a header row.  ``model.options`` (all optional):
        ``label`` (the label column, default ``"y"``), ``features`` (the input columns,
        default every other column), ``sd`` (1.0), ``lengthscale`` (1.0, or one per feature),
        ``jitter`` (1e-6), ``standardise`` (false), ``sampler`` (a table of ``step_size``,
        ``n_leapfrog``, ``target_accept`` for the rmhmc and hmc sweeps, ``coords`` for hmc).
        """
        import pandas as pd

        r = config.resolved
        opts = dict(r["model"]["options"])
        unknown = sorted(set(opts) - set(OPTION_KEYS))
        if unknown:
            raise InvalidParameterError(
                f"model.options has unknown keys {unknown} for GP classification; known: "
                f"{list(OPTION_KEYS)}.")
        path = r["data"]["points"]
        table = pd.read_csv(path)
        label = opts.get("label", "y")
        if label not in table.columns:
            raise InvalidDataError(
                f"{path} has no label column {label!r} (columns {list(table.columns)}); set "
                "model.options.label to the column of 0/1 labels.")
        features = opts.get("features", [c for c in table.columns if c != label])
        if isinstance(features, str):
            features = [features]
        missing = [c for c in features if c not in table.columns or c == label]
        if missing or not features:
            raise InvalidDataError(
                f"model.options.features={features!r}: {missing or 'none'} not among the "
                f"input columns of {path} ({[c for c in table.columns if c != label]}).")
        non_numeric = [c for c in features if table[c].dtype.kind not in "biuf"]
        if non_numeric:
            raise InvalidDataError(
                f"feature columns {non_numeric} of {path} are not numeric; encode them or "
                "leave them out of model.options.features.")
        model = cls(table[features].to_numpy(dtype=float), table[label].to_numpy(),
                    sd=opts.get("sd", DEFAULT_SD),
                    lengthscale=opts.get("lengthscale", DEFAULT_LENGTHSCALE),
                    jitter=opts.get("jitter", DEFAULT_JITTER),
                    standardise=opts.get("standardise", False), sampler=opts.get("sampler"))
        model.feature_names = [str(c) for c in features]
        return model

    def describe(self) -> str:
        """One line for ``lattice-lgm run``."""
        n_pos = int(self.y.sum())
        std = ", standardised inputs" if self.standardise else ""
        return (f"GP classification: {self.n} inputs in {self.x.shape[1]} dimensions "
                f"({n_pos} of class 1), probit link, {self.priors_text()['f']}{std}")

    # -- EP's q: where the chains start -------------------------------------------------------
    @property
    def ep(self) -> EPResult:
        """Expectation propagation's ``q`` (computed once, on first use)."""
        if self._ep is None:
            self._ep = expectation_propagation(self.K, self.y)
        return self._ep

    # -- prediction ----------------------------------------------------------------------------
    def predict_proba(self, f: Any, x_new: Any) -> np.ndarray:
        """``p(y* = 1 | y)`` at new inputs from posterior draws of ``f`` (R&W §3.4.2, eq. 3.25).

        Given a draw ``f``, ``f* | f ~ N(K*ᵀ K⁻¹ f, k** − K*ᵀ K⁻¹ K*)``, and the probit
        integrates in closed form: ``E[Φ(f*) | f] = Φ(μ* / √(1 + σ*²))`` (R&W eq. 3.82 with
        the conditional for the Gaussian).  The result averages that over the draws, so it is
        the posterior predictive probability up to Monte Carlo error.

        Parameters
        ----------
        f : array_like, shape (..., n)
            Posterior draws of the latent values, e.g. ``tree["posterior"]["f"].values``
            (chain, draw, obs).
        x_new : array_like, shape (m, d) or (m,) for one feature
            New inputs, on the scale of ``x`` (standardised as ``x`` was).

        Returns
        -------
        ndarray, shape (m,)
        """
        draws = np.asarray(f, dtype=float)
        if draws.ndim < 1 or draws.shape[-1] != self.n or not np.all(np.isfinite(draws)):
            raise InvalidParameterError(
                f"f has shape {draws.shape}; give finite posterior draws of shape (..., "
                f"{self.n}), e.g. tree['posterior']['f'].values.")
        xn = np.asarray(x_new, dtype=float)
        xn = xn[:, None] if xn.ndim == 1 and self.x.shape[1] == 1 else xn
        if xn.ndim != 2 or xn.shape[1] != self.x.shape[1] or not np.all(np.isfinite(xn)):
            raise InvalidDataError(
                f"x_new has shape {np.shape(x_new)}; give finite inputs of shape (m, "
                f"{self.x.shape[1]}).")
        z = (xn - self.x_mean) / self.x_scale
        k_star = self.kernel(self.x_used, z)                              # (n, m)
        a = linalg.cho_solve((self.chol, True), k_star)                  # K⁻¹ K*
        var = np.maximum(np.diag(self.kernel(z, z)) - np.sum(k_star * a, axis=0), 0.0)
        mean = draws.reshape(-1, self.n) @ a                              # (draws, m)
        return special.ndtr(mean / np.sqrt(1.0 + var)).mean(axis=0)

    # -- lattice_lgm._runview.RunView -----------------------------------------------------------
    def init_state(self, rngs: Sequence[np.random.Generator],
                   chains: Sequence[int] | None = None, initvals: Any = None,
                   warm: bool = True) -> LatentState:
        """Chains at a draw of EP's ``q`` each, from the chain's own stream.

        ``warm=False`` (a store's layout only) or EP failing to converge: a prior draw.
        ``initvals``: a mapping (or one per chain) with ``"f"``, the starting values (n,).
        """
        n = len(rngs)
        chains = tuple(range(n)) if chains is None else tuple(int(c) for c in chains)
        f = self._starts(rngs, initvals, warm)
        thetas = [self.lgm.initial_theta() for _ in range(n)]
        beta = np.zeros((n, 0))
        white = self.lgm.prior.whiten(f)
        ll = loglik_at(self.lgm, f, beta, thetas)
        return LatentState(stack_theta(thetas), (self.lgm.prior,) * n, f, white, beta, ll,
                           chains, None)

    def _starts(self, rngs: Sequence[np.random.Generator], initvals: Any,
                warm: bool) -> np.ndarray:
        n = len(rngs)
        if initvals is not None:
            per = [initvals] * n if isinstance(initvals, Mapping) else list(initvals)
            if len(per) != n or any(set(p) != {"f"} for p in per):
                raise InvalidParameterError(
                    f"initvals={initvals!r}: give {{'f': array of shape ({self.n},)}} for all "
                    "chains or one such mapping per chain (no hyperparameters are sampled).")
            f = np.stack([np.asarray(p["f"], dtype=float).reshape(-1) for p in per])
            if f.shape != (n, self.n) or not np.all(np.isfinite(f)):
                raise InvalidParameterError(
                    f"initvals' f has shape {f.shape[1:]} or non-finite values; give finite "
                    f"values of shape ({self.n},).")
            self.last_start_report = "initvals"
            return f
        z = np.stack([r.standard_normal(self.n) for r in rngs])
        if warm:
            try:
                q = self.ep
            except ConvergenceError:
                q = None
            if q is not None:
                self.last_start_report = "ep"
                return q.mean + z @ np.linalg.cholesky(q.cov).T
        self.last_start_report = "prior"
        return z @ self.chol.T

    def default_representation(self) -> str:
        """The measured default sweep (:data:`DEFAULT_METHOD`)."""
        return DEFAULT_METHOD

    def default_sweep(self, representation: str, n_latent: int,
                      tune: int = 0) -> RMHMCSweep | HMCSweep | Gibbs:
        """The sweep of ``representation`` (:data:`METHODS`; ``"auto"``: the default).

        ``n_latent`` counts the elliptical slice updates per sweep of ``"ess"``; ``tune`` is
        the warm-up over which the HMC sweeps adapt.
        """
        rep = DEFAULT_METHOD if representation == "auto" else representation
        common = {k: v for k, v in self.sampler.items() if k != "coords"}
        if rep == "rmhmc":
            return RMHMCSweep(self, tune=tune, **common)
        if rep == "hmc":
            return HMCSweep(self, tune=tune, **self.sampler)
        if rep == "ess":
            return Gibbs(None, EllipticalSlice(self.lgm), n_latent=n_latent)
        raise InvalidParameterError(
            f"representation={representation!r} is not a GP classification sampler; choose "
            f"one of {['auto', *METHODS]}.")

    def record(self, state: LatentState) -> dict[str, Any]:
        """``f`` per input, its running summaries and those of ``Φ(f)``."""
        f = np.asarray(state.f, dtype=float).reshape(state.n_chains, self.n)
        return {"scalars": {}, "beta": None, "f": f.astype(np.float32),
                "summary": {"f": f, "prob": special.ndtr(f)}}

    def data_groups(self) -> dict[str, dict[str, tuple[tuple[str, ...], np.ndarray]]]:
        """The labels (``observed_data.y``, 0/1) and the inputs (``constant_data.x``)."""
        return {"observed_data": {"y": (("obs",), self.y.astype(np.int8))},
                "constant_data": {"x": (("obs", "feature"), self.x)}}

    def extra_coords(self) -> dict[str, np.ndarray]:
        """The inputs' feature names."""
        return {"feature": np.asarray(self.feature_names, dtype=str)}

    def data_hash(self) -> str:
        """A digest of the data and the fixed prior (a resume with either changed is refused).

        The kernel is fixed, so it is part of the model's identity: ``x``, ``y``, ``K``.
        """
        return hash_arrays({"x": self.x, "y": self.y, "K": self.K})

    def priors_text(self) -> dict[str, str]:
        """The prior as stated (the kernel is fixed: no hyperpriors)."""
        k = self.kernel
        ls = ", ".join(f"{v:g}" for v in k.lengthscale)
        return {"f": f"GP(0, {type(k).__name__}(sd={k.sd:g}, lengthscale={ls})) + "
                     f"{self.jitter:g}·I, fixed hyperparameters"}
