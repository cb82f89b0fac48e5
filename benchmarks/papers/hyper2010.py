r"""Reproduction of Murray & Adams (2010), slice sampling covariance hyperparameters, Figure 3.

The paper: Murray & Adams (2010), *Slice sampling covariance hyperparameters of latent Gaussian
models*, NIPS 23, §5 and Figure 3.

What is compared
----------------
The paper's six representations for slice sampling the covariance hyperparameters θ jointly with
the latent field ``f`` (§2–4; :class:`lattice_lgm.samplers.HyperMove`, ``method="slice"``), each
followed by ten elliptical slice updates of ``f`` (:class:`lattice_lgm.samplers.Gibbs`,
``n_latent=10``).  The paper's method names map one to one onto ours:

=============  ===================  =========================================================
paper          ours                 what θ moves with
=============  ===================  =========================================================
fixed          ``fixed``            ``f`` held (Algorithm 1's target, eq. 4)
prior-white    ``prior-white``      ``ν = L_θ⁻¹ f`` held (eq. 5–6)
surr-site      ``surr-site``        surrogate data, ``S_θ`` from site fits (eq. 11–12)
surr-taylor    ``surr-taylor``      surrogate data, ``S_θ`` from the Taylor fit (eq. 13)
post-site      ``post-site``        fixed reparameterisation ``ω`` (eq. 14), site fits
post-taylor    ``post-taylor``      fixed reparameterisation ``ω`` (eq. 14), Taylor fit
=============  ===================  =========================================================

Site fits are Laplace for Poisson and moment matching for the logistic likelihood (as §5).  For
the Gaussian likelihood ``-site`` and ``-taylor`` coincide (``S_θ = 0.09 I``), so the regression
runs ``surr-site`` and ``post-site`` only, as the paper's "surr-site/surr-taylor" bars.
The ``-taylor`` methods do not apply to the logistic likelihood (§5).

The four experiments (§5)
-------------------------
* ``ionosphere``: logistic GP classification, 200 training cases drawn at random from UCI
  Ionosphere (351 × 34), 34 lengthscales and the signal sd.
* ``synthetic``: Gaussian regression, 200 inputs uniform in ``[0, 1]^10``, zero mean, unit signal
  variance, lengthscales ``ℓ_d ~ U(0, √10)``, noise variance 0.09 (fixed, known); 10
  lengthscales and the signal sd sampled.
* ``mining``: log-Gaussian Cox process on the coal-mining disasters, 191 events in 112 bins of
  365 days; signal sd, lengthscale and the mean offset of the log-rate sampled.
* ``redwoods``: the same on Strauss's 195 redwoods (unit square) in 25 × 25 bins, exposure the
  cell area; signal sd, one lengthscale per axis (eq. 2 is ARD) and the mean offset sampled.

Every kernel is the squared exponential of eq. 2.  lattice_lgm states lengths as ``range = 2ℓ``
(:mod:`lattice_lgm.covariance`); the hyperpriors below are stated on ``range``.

Hyperpriors.  The paper's text states none except the law the synthetic lengthscales were drawn
from.  We use that law as the regression's prior (``ℓ_d ~ U(0, √10)``, i.e. ``range_d ~
U(1e-3, 2√10)``, the lower end moved off 0 because a zero range is not a kernel), and wide
log-uniform priors elsewhere (flat in the log of each scale, bounded; the usual vague choice):
see :func:`hyperpriors`.  These are our choices, not the paper's.

Protocol (§5): ten chains per (data set, method), 1000 burn-in and 5000 sampling sweeps (20,000
for mining); a *sweep* is one hyperparameter update (one univariate slice update, Algorithm 4,
per hyperparameter in turn, bracket width 3 on the unconstrained scale, no stepping out) then
ten elliptical slice updates.

Metric (Figure 3)
-----------------
The effective number of samples of the *complete-data log-likelihood*
``log p(y | f, θ) + log N(f; 0, K_θ)`` (with ``θ`` including the mean offset, and ``K_θ`` the
dense covariance the sampler uses, jitter included) over the sampling sweeps of each chain, by
coda's spectral-AR estimator (:func:`ess2010.ess_spectral_ar`, the R-CODA method the paper used),
divided by the chain's costs over the same sweeps: likelihood evaluations (``n_loglik``: every
``L(f)`` the hyperparameter move and the ten ESS updates computed), covariance constructions
(``n_cov``: every θ whose covariance and Cholesky factor the hyperparameter move built; the
paper's "hyperparameter settings considered") and seconds (the wall time of the sweeps, divided
equally among the chains, which are updated in the same process).  Means and standard errors
over chains; as in Figure 3 each group is rescaled by the surr-site value, which is printed
beneath the group beside the paper's.

The runner's store keeps the log-likelihood but not ``log N(f; 0, K_θ)``, so the sweep is wrapped
(:class:`TracedSweep`) to compute it after every sweep (an ``O(n²)`` solve with the current
Cholesky factor) into a memory-mapped ``.npy`` beside the store, indexed by sweep, so that a
resumed run continues it; its log-likelihood column is checked against the store's.

Usage::

    python benchmarks/papers/hyper2010.py --quick        # < 1 min; results/quick/ (git-ignored)
    python benchmarks/papers/hyper2010.py                # the paper's protocol: days, resumable
    python benchmarks/papers/hyper2010.py --datasets mining redwoods \
        --methods prior-white surr-site post-taylor --chains 4 --iterations 500 --burn-in 100 \
        --out /tmp/hyper_medium
    # the paper's burn-in on the cheaper sets, beside shorter runs of the costly ones
    python benchmarks/papers/hyper2010.py --chains 4 --burn-in 1000 --iterations 1000 \
        --mining-iterations 2000 --protocol redwoods=3,50,250 --protocol ionosphere=3,50,250
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for p in (str(ROOT), str(HERE)):
    if p not in sys.path:  # run as a script from a checkout; ess2010 is the sister script
        sys.path.insert(0, p)

import _one_blas_thread  # noqa: E402, F401  (before numpy: see its docstring)
import numpy as np  # noqa: E402
from ess2010 import (  # noqa: E402
    _machine,
    _mean_sd,
    _seed,
    coal_counts,
    ess_bulk,
    ess_spectral_ar,
    ionosphere_data,
    write_outputs,
)

from lattice_lgm import Lattice  # noqa: E402
from lattice_lgm.covariance import SquaredExponential  # noqa: E402
from lattice_lgm.errors import InvalidDataError, InvalidParameterError  # noqa: E402
from lattice_lgm.hyperpriors import Hyperprior, LogUniform, Normal, Uniform  # noqa: E402
from lattice_lgm.likelihoods import Bernoulli, Gaussian, Poisson  # noqa: E402
from lattice_lgm.models.latent import LatentGaussianModel  # noqa: E402
from lattice_lgm.priors.dense import DensePrior  # noqa: E402

DATA = ROOT / "data"
RESULTS = HERE / "results"
QUICK_OUT = RESULTS / "quick"
STEM = "hyper2010"

DATASETS = ("ionosphere", "synthetic", "mining", "redwoods")
METHODS = ("fixed", "prior-white", "surr-site", "post-site", "surr-taylor", "post-taylor")
#: the methods the paper ran per data set (§5): -taylor is undefined for the logistic
#: likelihood, and equals -site for the Gaussian one
APPLICABLE = {
    "ionosphere": ("fixed", "prior-white", "surr-site", "post-site"),
    "synthetic": ("fixed", "prior-white", "surr-site", "post-site"),
    "mining": METHODS,
    "redwoods": METHODS,
}
METRICS = ("per_loglik", "per_cov", "per_second")
METRIC_LABEL = {"per_loglik": "per likelihood evaluation", "per_cov": "per covariance "
                "construction", "per_second": "per second"}

#: §5 settings
IONO_N = 200
REG_N, REG_D, REG_NOISE_VAR, REG_ELL_MAX = 200, 10, 0.09, math.sqrt(10.0)
MINING_BIN_DAYS, MINING_N_BINS, MINING_EVENTS = 365, 112, 191
REDWOOD_BINS, REDWOOD_N = 25, 195
N_CHAINS, N_BURN, N_ITER, N_ITER_MINING, N_LATENT = 10, 1000, 5000, 20_000, 10
#: slice bracket width on the unconstrained scale (Algorithm 4's σ; not tuned)
WIDTH = 3.0
#: the fewest chains (R-hat compares chains) and sampling sweeps a run may ask for
MIN_CHAINS, MIN_SWEEPS = 2, 10
#: sweeps between checkpoints of a new run store (a killed run resumes from the last one)
CHECKPOINT_SWEEPS = 100
DATA_SEED = 2010


def paper_protocol(name: str) -> dict[str, int]:
    """The paper's chains, burn-in and sampling sweeps for data set ``name`` (§5)."""
    return {"n_chains": N_CHAINS, "n_burn": N_BURN,
            "n_iter": N_ITER_MINING if name == "mining" else N_ITER}


def not_at_paper_protocol(protocols: Mapping[str, Mapping[str, int]]) -> list[str]:
    """The data sets whose chains, burn-in or sampling sweeps differ from the paper's.

    Parameters
    ----------
    protocols : mapping of data set to {"n_chains", "n_burn", "n_iter"}
    """
    return [n for n, p in protocols.items()
            if {k: p[k] for k in paper_protocol(n)} != paper_protocol(n)]


def hyperpriors(name: str) -> dict[str, Hyperprior]:
    """The hyperpriors of one experiment, on lattice_lgm's ``range = 2ℓ`` (see module doc).

    Parameters
    ----------
    name : str
        One of :data:`DATASETS`.

    Returns
    -------
    dict of str to Hyperprior
        ``sd`` and ``range`` (or per-axis ``range_<i>`` / ``range_<dim>`` names for a shared
        prior; the caller expands them), and ``mean`` for the Cox processes.
    """
    if name == "ionosphere":  # ℓ_d in [0.01, 100] on inputs in [-1, 1]; σ_f in [0.01, 100]
        return {"sd": LogUniform(0.01, 100.0), "range": LogUniform(0.02, 200.0)}
    if name == "synthetic":  # the generating law ℓ_d ~ U(0, √10), lower end off 0
        return {"sd": LogUniform(0.01, 10.0), "range": Uniform(1e-3, 2.0 * REG_ELL_MAX)}
    if name == "mining":  # ℓ from one bin (365 d) to ten times the 112-year span
        return {"sd": LogUniform(0.01, 10.0),
                "range": LogUniform(2.0 * 365.0, 2.0 * 10 * MINING_N_BINS * 365.0),
                "mean": Normal(0.0, 10.0)}
    if name == "redwoods":  # ℓ in [0.01, 10] on the unit square
        return {"sd": LogUniform(0.01, 10.0), "range": LogUniform(0.02, 20.0),
                "mean": Normal(0.0, 10.0)}
    raise InvalidParameterError(f"dataset {name!r} is unknown; use one of {list(DATASETS)}.")


#: what the text copy of the paper gives for Figure 3.  The twelve numbers printed beneath the
#: groups ("x1.6e−04 …") survive in the text, in the order of the panels (left: per likelihood
#: evaluation, centre: per covariance construction, right: per second), each in the group order
#: ionosphere, synthetic, mining, redwoods.  That reading is the only one under which effective
#: samples per covariance construction exceed those per likelihood evaluation for every group,
#: which they must (a sweep evaluates the likelihood at least as often as it builds covariances,
#: ten ESS updates included).  The bar heights are graphics and are lost.
PAPER = {
    "source": "Murray & Adams (2010), NIPS, §5-6 and Figure 3 (text copy)",
    "protocol": "10 chains, 1000 burn-in + 5000 iterations (20,000 for mining), 10 ESS updates "
                "per hyperparameter update; R-CODA ESS of the complete-data likelihood; Matlab, "
                "one core of a 3 GHz Xeon",
    "surr_site_normalisers": {
        "per_loglik": {"ionosphere": 1.6e-4, "synthetic": 3.3e-4, "mining": 4.3e-5,
                       "redwoods": 4.8e-4},
        "per_cov": {"ionosphere": 2.9e-4, "synthetic": 1.1e-3, "mining": 7.4e-4,
                    "redwoods": 3.7e-3},
        "per_second": {"ionosphere": 7.7e-3, "synthetic": 5.4e-2, "mining": 1.2e-1,
                       "redwoods": 1.5e-2},
    },
    "findings": {
        "ionosphere": "both -site methods worked much better than the two baselines (fixed, "
                      "prior-white)",
        "synthetic": "post- and surr- perform very similarly (post- had been expected to be up "
                     "to 2-3x better); post- slightly faster in time",
        "mining": "Poisson likelihoods close to Gaussian: post-taylor works well, as do all the "
                  "new methods",
        "redwoods": "post-taylor performs similarly to prior-white; surr-taylor better; the best "
                    "results come from the -site methods",
        "all": "fixing f and updating θ can work exceedingly poorly; prior-white is much better "
               "where smoothness matters",
    },
}


# -- data ------------------------------------------------------------------------------------------
def mining_counts(path: str | Path = DATA / "coal_mining_disasters.csv"
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Coal-mining disasters in bins of 365 days from 1851-03-15 (the paper's 112 bins).

    Returns
    -------
    counts : ndarray of float, shape (112,)
        Events per bin (191 in all).
    centres : ndarray, shape (112,)
        Bin centres in days since 1851-03-15.
    """
    counts, centres = coal_counts(path, bin_days=MINING_BIN_DAYS)
    if len(counts) != MINING_N_BINS or int(counts.sum()) != MINING_EVENTS:
        raise InvalidDataError(
            f"{path}: {int(counts.sum())} events in {len(counts)} bins of {MINING_BIN_DAYS} days; "
            f"the paper has {MINING_EVENTS} in {MINING_N_BINS}. Use the project's copy.")
    return counts, centres


def redwood_counts(path: str | Path = DATA / "redwoodfull.csv", n_bins: int = REDWOOD_BINS
                   ) -> tuple[np.ndarray, Lattice, float]:
    """Strauss's redwoods on the unit square, counted in ``n_bins × n_bins`` cells.

    Parameters
    ----------
    path : path
        ``redwoodfull.csv`` (columns ``x``, ``y`` in [0, 1]).
    n_bins : int
        Cells per axis (the paper: 25).

    Returns
    -------
    counts : ndarray of float, shape (n_bins, n_bins)
        ``counts[i, j]``: cell with y-index ``i`` and x-index ``j`` (DESIGN §9).
    lattice : Lattice
        ``n_bins × n_bins`` cells of side ``1/n_bins`` on ``[0, 1]²``, dims ``("y", "x")``.
    cell_area : float
        ``1/n_bins²``, the exposure of every cell.
    """
    import pandas as pd

    from lattice_lgm.window import bin_points

    pts = pd.read_csv(path)[["x", "y"]]
    lat = Lattice((n_bins, n_bins), spacing=1.0 / n_bins)
    binned = bin_points(pts, lat)
    counts = np.asarray(binned.counts, dtype=float)
    if int(counts.sum()) != len(pts):
        raise InvalidDataError(f"{path}: {int(counts.sum())} of {len(pts)} points binned.")
    return counts, lat, 1.0 / n_bins**2


def regression_data(n: int = REG_N, d: int = REG_D, seed: int = DATA_SEED
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The synthetic regression set of §5: ``x ~ U[0,1]^d``, ``ℓ_d ~ U(0, √10)``, ``y = f + ε``.

    ``f ~ GP(0, k)`` with the squared exponential of eq. 2 (unit signal variance, lengthscales
    ``ℓ``) drawn on the dense prior the samplers use; ``ε ~ N(0, 0.09)``.

    Returns
    -------
    x : ndarray, shape (n, d)
    y : ndarray, shape (n,)
    ell : ndarray, shape (d,)
        The lengthscales drawn (``range = 2 ell``).
    """
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(n, d)))
    x = rng.random((n, d))
    ell = REG_ELL_MAX * (1.0 - rng.random(d))  # in (0, √10]: a zero lengthscale is no kernel
    prior = DensePrior(x, SquaredExponential(sd=1.0, lengthscale=tuple(ell)))
    f = prior.sample(rng, 1)[0]
    y = f + math.sqrt(REG_NOISE_VAR) * rng.standard_normal(n)
    return x, y, ell


# -- the experiments -------------------------------------------------------------------------------
@dataclass
class Problem:
    """One experiment: its model (with hyperpriors) and what describes it."""

    name: str
    model: LatentGaussianModel
    info: dict[str, Any] = field(default_factory=dict)


def _per_axis(hp: dict[str, Hyperprior], names: Sequence[str]) -> dict[str, Hyperprior]:
    out = {k: v for k, v in hp.items() if k != "range"}
    out.update({n: hp["range"] for n in names})
    return out


def build_problem(name: str, *, iono_n: int = IONO_N, iono_d: int | None = None,
                  reg_n: int = REG_N, reg_d: int = REG_D,
                  redwood_bins: int = REDWOOD_BINS) -> Problem:
    """The model of one §5 experiment (sizes overridable for quick runs).

    Parameters
    ----------
    name : str
        One of :data:`DATASETS`.
    iono_n, iono_d : int
        Ionosphere training cases (drawn at random) and leading features kept (default all 34).
    reg_n, reg_d : int
        Synthetic regression inputs and dimensions.
    redwood_bins : int
        Cells per axis for the redwoods.

    Returns
    -------
    Problem
    """
    hp = hyperpriors(name)
    if name == "ionosphere":
        x, y = ionosphere_data(DATA / "ionosphere.csv", n_sub=iono_n, seed=DATA_SEED)
        if iono_d is not None:
            x = x[:, :iono_d]
        d = x.shape[1]
        # start: σ_f = 1, ℓ_d = 2 (inputs in [-1, 1])
        prior = DensePrior(x, SquaredExponential(sd=1.0, range=4.0))
        names = [f"range_{i}" for i in range(d)]
        model = LatentGaussianModel(prior, Bernoulli(y, link="logit"),
                                    hyperpriors=_per_axis(hp, names))
        info = {"N": len(y), "D": d, "likelihood": "bernoulli, logit",
                "subsample_seed": DATA_SEED}
    elif name == "synthetic":
        x, y, ell = regression_data(reg_n, reg_d)
        prior = DensePrior(x, SquaredExponential(sd=1.0, range=REG_ELL_MAX))
        names = [f"range_{i}" for i in range(reg_d)]
        model = LatentGaussianModel(prior, Gaussian(y, noise_sd=math.sqrt(REG_NOISE_VAR)),
                                    hyperpriors=_per_axis(hp, names))
        info = {"N": reg_n, "D": reg_d, "likelihood": "gaussian, noise variance 0.09",
                "true_lengthscales": [float(v) for v in ell], "data_seed": DATA_SEED}
    elif name == "mining":
        counts, centres = mining_counts()
        prior = DensePrior(centres[:, None], SquaredExponential(sd=1.0, lengthscale=3650.0))
        m0 = math.log(counts.sum() / len(counts))
        model = LatentGaussianModel(prior, Poisson(counts, exposure=1.0), hyperpriors=hp,
                                    mean=m0)
        info = {"N": len(counts), "events": int(counts.sum()), "bin_days": MINING_BIN_DAYS,
                "likelihood": "poisson, exposure 1 per bin", "lengths_in": "days"}
    elif name == "redwoods":
        counts, lat, area = redwood_counts(n_bins=redwood_bins)
        # on the cell centres as points (columns in axis order: range_0 is y, range_1 is x),
        # not DensePrior.from_lattice: the run store names a lattice's dims "y", "x", which
        # collides with LatentView's observed-data variable "y"
        prior = DensePrior(lat.cell_centers(), SquaredExponential(sd=1.0, range=0.2),
                           shape=lat.shape)
        m0 = math.log(counts.sum())  # log intensity per unit area of a homogeneous fit
        model = LatentGaussianModel(prior, Poisson(counts, exposure=area),
                                    hyperpriors=_per_axis(hp, ["range_0", "range_1"]), mean=m0)
        info = {"N": int(counts.size), "events": int(counts.sum()),
                "bins": [redwood_bins, redwood_bins], "empty_cells": int((counts == 0).sum()),
                "likelihood": "poisson, exposure = cell area",
                "ranges": "range_0 along y, range_1 along x"}
    else:
        raise InvalidParameterError(f"dataset {name!r} is unknown; use one of {list(DATASETS)}.")
    info["hyperpriors"] = [v.describe(k) for k, v in model.hyperpriors.items()
                           if not k.startswith("range_")]
    if any(k.startswith("range_") for k in model.hyperpriors):
        info["hyperpriors"].append(hp["range"].describe("range_i") + ", for every range_i")
    info["n_hyper"] = len(model.hyper_names)
    info["jitter_policy"] = jitter_policy(model.prior)
    return Problem(name, model, info)


def jitter_policy(prior: DensePrior) -> str:
    """What jitter the samplers' covariances carry, as the data set's description records it.

    The ``'auto'`` level of the initial prior is kept for every θ (:mod:`lattice_lgm.priors.dense`,
    decision 60).  At level 0 that is the same ladder as before the decision, so a description
    (and a ``--reuse`` match) changes only where the draws did.
    """
    level = prior.jitter_level
    if level == 0.0:
        return "DensePrior jitter='auto' (0, then 1e-10 … 1e-6 × mean diag)"
    return (f"DensePrior jitter='auto': {level:g} × mean diag K_θ at every θ (the initial "
            f"prior's level), then up to 1e-6 × mean diag")


def code_version() -> str | None:
    """The git commit the run was sampled at, or None outside a checkout.

    ``-dirty`` is appended when Python sources of the package or the paper scripts have
    uncommitted changes (documentation edits do not change draws).
    """
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--",
                                "lattice_lgm/*.py", "benchmarks/papers/*.py"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("-dirty" if dirty else "")


# -- the complete-data log-likelihood --------------------------------------------------------------
def complete_data_loglik(state: Any) -> np.ndarray:
    """``log p(y | f, θ) + log N(f; 0, K_θ)`` of every chain of a sampler state.

    ``state.loglik`` is the likelihood at ``η = mean + f`` (Murray & Adams 2010, eq. 3, the
    factor ``L(f)``); the prior term uses each chain's own prior (its Cholesky factor, jitter
    included), ``−½ fᵀK⁻¹f − ½ log|2πK|`` (eq. 1).

    Parameters
    ----------
    state : LatentState
        ``n_chains`` chains.

    Returns
    -------
    ndarray, shape (n_chains,)
    """
    lp = np.array([float(p.logpdf(state.f[c:c + 1])[0]) for c, p in enumerate(state.priors)])
    return np.asarray(state.loglik, dtype=float) + lp


class TracedSweep:
    """A Gibbs sweep that records its complete-data terms and wall time after every sweep.

    The log-likelihood, ``log N(f; 0, K_θ)`` (or 0 without ``prior_term``) and the sweep's
    seconds go into a memory-mapped array indexed by sweep.

    Parameters
    ----------
    sweep : Gibbs
        The sweep to run.
    trace : ndarray, shape (n_sweeps, n_chains, 3)
        Writable (a ``numpy.lib.format.open_memmap``); columns ``loglik``, ``logprior``,
        ``seconds``.
    start : int
        Index of the next sweep (the checkpoint's ``sweeps_done`` on resume).
    prior_term : bool
        Compute ``log N(f; 0, K_θ)`` (an ``O(n²)`` solve on a dense prior; on a circulant prior
        it would be the torus density, which is why ``structured.py`` turns it off).
    """

    def __init__(self, sweep: Any, trace: np.ndarray, start: int = 0, *,
                 prior_term: bool = True) -> None:
        self.sweep, self.trace, self.k = sweep, trace, int(start)
        self.prior_term = bool(prior_term)

    def settings(self) -> dict[str, Any]:
        """The wrapped sweep's settings (the record changes no draw), for the store's attrs."""
        return self.sweep.settings()

    def step(self, state: Any, rngs: Sequence[np.random.Generator]) -> tuple[Any, dict]:
        """One sweep of the wrapped sampler, then its record (see the class doc)."""
        t0 = time.perf_counter()
        state, info = self.sweep.step(state, rngs)
        dt = time.perf_counter() - t0
        if self.k >= len(self.trace):
            raise InvalidParameterError(
                f"sweep {self.k} is past the trace's {len(self.trace)} rows; the run's length "
                "changed: delete its store and trace and start again.")
        ll = np.asarray(state.loglik, dtype=float)
        self.trace[self.k, :, 0] = ll
        self.trace[self.k, :, 1] = complete_data_loglik(state) - ll if self.prior_term else 0.0
        self.trace[self.k, :, 2] = dt
        self.k += 1
        return state, info


def _build_sweep(model: LatentGaussianModel, method: str) -> Any:
    from lattice_lgm.samplers import EllipticalSlice, Gibbs, HyperMove

    move = HyperMove(model, method, method="slice", scheme="univariate", width=WIDTH,
                     step_out=False)
    return Gibbs(move, EllipticalSlice(model), n_latent=N_LATENT)


def sample_traced(model: Any, sweep: Any, *, n_chains: int, n_iter: int, n_burn: int,
                  seed: int, store: Path, prior_term: bool = True, thin_fields: int = 0,
                  progress: bool = False) -> tuple[Any, np.ndarray, int]:
    """Run (or resume) ``sweep`` on ``model`` into ``store``, tracing every sweep.

    The trace (see :class:`TracedSweep`) is a ``.trace.npy`` beside the store, continued on
    resume; its log-likelihood column is checked against the store's.  ``progress``: the
    runner's progress on stderr (sweeps done, rate, ETA; a line every 30 s when stderr is
    not a terminal), for runs of hours.

    Returns
    -------
    tree : xarray.DataTree
        What :func:`lattice_lgm.runs.sample` returns.
    post : ndarray, shape (n_iter, n_chains, 3)
        The trace of the sampling sweeps (burn-in dropped).
    start : int
        The first sweep this process ran: 0 for a new run, ``n_burn + n_iter`` for a store that
        was finished before.  The trace times every sweep whichever process ran it; a resume
        inside the sampling sweeps puts that process's Numba compilation into the sweep
        ``start``.
    """
    from numpy.lib.format import open_memmap

    from lattice_lgm.runs import sample
    from lattice_lgm.store import CheckpointError, RunStore

    side = store.with_suffix(".trace.npy")
    resumed = (store / "zarr.json").exists()
    start = 0
    # a store keeps the checkpoint interval it was made with (resume checks it); new ones
    # checkpoint often, so a killed run of the slow data sets loses minutes, not an hour
    every = CHECKPOINT_SWEEPS
    if thin_fields > 1:
        every = -(-every // thin_fields) * thin_fields
    every = min(n_iter, every)
    if resumed:
        st = RunStore(store)
        every = int(st.attrs["run_config"]["checkpoint_every"])
        try:
            meta, _ = st.load_checkpoint()
            start = int(meta["sweeps_done"])
        except CheckpointError:
            start = 0  # killed before the first checkpoint: the runner starts over
    shape = (n_burn + n_iter, n_chains, 3)
    if resumed and side.exists():
        trace = open_memmap(side, mode="r+")
        if trace.shape != shape:
            raise InvalidParameterError(
                f"{side} has shape {trace.shape}, this run needs {shape}; delete {store} and "
                f"{side} to start again.")
    else:
        store.parent.mkdir(parents=True, exist_ok=True)
        trace = open_memmap(side, mode="w+", dtype=np.float64, shape=shape)
    step = TracedSweep(sweep, trace, start, prior_term=prior_term)
    tree = sample(model, draws=n_iter, tune=n_burn, chains=n_chains, random_seed=seed,
                  store=store, resume=resumed, step=step, thin_fields=thin_fields,
                  checkpoint_every=every, progressbar=progress)
    trace.flush()
    ll_store = np.asarray(tree["sample_stats"]["loglik"].values, dtype=float)  # (chain, draw)
    post = np.asarray(trace[n_burn:])                                            # (draw, chain, 3)
    if not np.array_equal(post[:, :, 0].T, ll_store):
        raise InvalidDataError(
            f"{side}: its log-likelihood column differs from the store's; the trace is stale. "
            f"Delete {store} and {side} and run again.")
    return tree, post, start


def _hyper_draws(store: Path, names: Sequence[str]) -> dict[str, np.ndarray]:
    """The store's sampling draws of each named hyperparameter, each of shape ``(chain, draw)``."""
    import xarray as xr

    pos = xr.open_zarr(store, group="posterior")
    return {name: np.asarray(pos[name].values, dtype=float) for name in names}


def hyper_rhat(store: Path, names: Sequence[str]) -> dict[str, float | None]:
    """Rank-normalised split R-hat (ArviZ) of each hyperparameter over the sampling sweeps.

    Above ~1.05 the chains have not forgotten their starts (prior draws), and the effective
    samples of their complete-data trace measure that transient rather than the stationary
    mixing Figure 3 compares.

    Parameters
    ----------
    store : Path
        A run store of :func:`lattice_lgm.runs.sample`.
    names : sequence of str
        The model's hyperparameters (``LatentGaussianModel.hyper_names``); other scalar
        draws in the store (a fixed mean offset) are not sampled and have no R-hat.

    Returns
    -------
    dict
        name → R-hat over the store's chains, or ``None`` where it is not finite (a
        hyperparameter that never moved within its chains): report that as not mixed.
    """
    import arviz as az

    out: dict[str, float | None] = {}
    for name, draws in _hyper_draws(store, names).items():
        with np.errstate(divide="ignore", invalid="ignore"):
            r = float(az.rhat(draws))
        out[name] = r if math.isfinite(r) else None
    return out


def hyper_ess(store: Path, names: Sequence[str]) -> dict[str, float | None]:
    """Bulk ESS (ArviZ, rank-normalised, chains pooled) of each hyperparameter's draws.

    Figure 3's metric follows the complete-data log-likelihood, which mixes with the latent
    field as well as with θ; this is the hyperparameters' own mixing, the quantity the
    representations of §3–4 are designed to improve.  Same parameters as :func:`hyper_rhat`.

    Returns
    -------
    dict
        name → bulk ESS over all chains, or ``None`` for a hyperparameter that never moved
        within any chain (or an ESS that is not finite).
    """
    import arviz as az

    out: dict[str, float | None] = {}
    for name, draws in _hyper_draws(store, names).items():
        if not np.ptp(draws, axis=1).any():  # ArviZ calls constant draws fully independent
            out[name] = None
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            e = float(az.ess(draws, method="bulk"))
        out[name] = e if math.isfinite(e) else None
    return out


#: posterior quantiles of every hyperparameter recorded per run: the representations are
#: moves on one posterior, so runs that mixed must agree (a check of the samplers, not a cost)
HYPER_QUANTILES = (0.05, 0.5, 0.95)


def hyper_quantiles(store: Path, names: Sequence[str]) -> dict[str, list[float]]:
    """The 5 %, 50 % and 95 % posterior quantiles of each hyperparameter, chains pooled.

    Same parameters as :func:`hyper_rhat`.

    Returns
    -------
    dict
        name → ``[q05, q50, q95]`` (:data:`HYPER_QUANTILES`) over the sampling draws of every
        chain.
    """
    return {name: [float(q) for q in np.quantile(draws, HYPER_QUANTILES)]
            for name, draws in _hyper_draws(store, names).items()}


#: what each run's result records from its store, by key (a result written before a key existed
#: gets it from its store when that is still there)
STORE_STATS = {"rhat": hyper_rhat, "hyper_ess": hyper_ess, "hyper_q": hyper_quantiles}


def hyper_ess_summary(runs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per method: the smallest hyperparameter bulk ESS, whose it is, and it per evaluation.

    Returns
    -------
    dict
        method → ``min`` (ESS), ``name``, ``per_loglik`` (``min`` over the run's likelihood
        evaluations, all chains) and ``relative`` (``per_loglik`` over surr-site's, ``None``
        without surr-site); a method whose run has no ``hyper_ess`` is left out.
    """
    out: dict[str, dict[str, Any]] = {}
    for m, r in runs.items():
        ess = {k: v for k, v in (r.get("hyper_ess") or {}).items() if v is not None}
        if not ess:
            continue
        name = min(ess, key=ess.__getitem__)
        n_ll = sum(c["n_loglik"] for c in r["chains"])
        out[m] = {"min": ess[name], "name": name, "per_loglik": ess[name] / n_ll if n_ll else None}
    z = out.get("surr-site", {}).get("per_loglik")
    for v in out.values():
        v["relative"] = v["per_loglik"] / z if z and v["per_loglik"] is not None else None
    return out


def rhat_summary(rhat: dict[str, float | None] | None) -> dict[str, Any]:
    """The largest finite R-hat of a run and the hyperparameters whose R-hat is not finite."""
    if not rhat:
        return {"max": None, "stuck": []}
    finite = [v for v in rhat.values() if v is not None]
    return {"max": max(finite) if finite else None,
            "stuck": [k for k, v in rhat.items() if v is None]}


def run_one(prob: Problem, method: str, *, n_chains: int, n_iter: int, n_burn: int,
            seed: int, store: Path, progress: bool = False) -> dict[str, Any]:
    """All chains of one (data set, method) into (or resumed from) ``store``; their metrics.

    Skips the sampling when ``<store>.result.json`` exists (a finished run).

    Returns
    -------
    dict
        ``chains``: one dict per chain (``ess``, ``ess_bulk``, ``n_loglik``, ``n_cov``,
        ``seconds``, ``per_loglik``, ``per_cov``, ``per_second``, …) and the run's settings;
        ``code``: :func:`code_version` when this process started sampling.
    """
    done = store.with_suffix(".result.json")
    if done.exists():
        out = json.loads(done.read_text())
        # a result written before one of STORE_STATS was reported gets it from its store
        if (store / "zarr.json").exists() and any(k not in out for k in STORE_STATS):
            for k, fn in STORE_STATS.items():
                out.setdefault(k, fn(store, prob.model.hyper_names))
            done.write_text(json.dumps(out, indent=1))
        return out
    # the commit the draws come from: read before sampling, since the checkout may change
    # during a run of hours (a resumed run records the resuming process's commit)
    code = code_version()
    tree, post, start = sample_traced(
        prob.model, _build_sweep(prob.model, method), n_chains=n_chains, n_iter=n_iter,
        n_burn=n_burn, seed=seed, store=store, progress=progress)
    stats = tree["sample_stats"]
    n_ll = np.asarray(stats["n_loglik"].values, dtype=np.int64).sum(axis=1)
    n_cov = np.asarray(stats["n_cov"].values, dtype=np.int64).sum(axis=1)
    seconds = float(post[:, 0, 2].sum())
    chains = []
    for c in range(n_chains):
        cd = post[:, c, 0] + post[:, c, 1]
        ess, order = ess_spectral_ar(cd)
        bulk = ess_bulk(cd)
        sec = seconds / n_chains
        chains.append({
            "chain": c, "ess": ess, "ar_order": order,
            "ess_bulk": bulk if math.isfinite(bulk) else None,
            "n_loglik": int(n_ll[c]), "n_cov": int(n_cov[c]), "seconds": sec,
            "per_loglik": ess / n_ll[c] if n_ll[c] else None,
            "per_cov": ess / n_cov[c] if n_cov[c] else None,
            "per_second": ess / sec if sec > 0 else None,
            "complete_mean": float(cd.mean()), "complete_sd": float(cd.std(ddof=1)),
            "loglik_mean": float(post[:, c, 0].mean()),
        })
    out = {"method": method, "seed": seed, "n_chains": n_chains, "n_iter": n_iter,
           "n_burn": n_burn, "store": str(store), "resumed": start > 0,
           "code": code,
           "seconds_sampling": seconds,
           **{k: fn(store, prob.model.hyper_names) for k, fn in STORE_STATS.items()},
           "chains": chains}
    done.write_text(json.dumps(out, indent=1))
    return out


# -- summaries -------------------------------------------------------------------------------------
def _mean_se(v: Sequence[float | None]) -> dict[str, float | int | None]:
    """Mean and its standard error over chains (``_mean_sd`` of ess2010, sd / √n)."""
    m = _mean_sd(v)
    sd, n = m.pop("sd"), m["n"]
    m["se"] = None if sd is None else sd / math.sqrt(n)
    return m


def summarise(runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Means and standard errors over chains per method, and the surr-site-normalised bars.

    Returns
    -------
    dict
        ``raw[method][metric]`` (mean, se, n), ``normaliser[metric]`` (the surr-site mean, or
        ``None`` when surr-site did not run), ``normalised[method][metric]`` (mean and se divided
        by the normaliser), ``evals_per_cov[method]``, ``rhat[method]``
        (:func:`rhat_summary` of the run's hyperparameter R-hats) and ``hyper_ess[method]``
        (:func:`hyper_ess_summary`).
    """
    raw = {m: {k: _mean_se([c[k] for c in r["chains"]]) for k in (*METRICS, "ess", "n_loglik",
                                                                    "n_cov")}
           for m, r in runs.items()}
    norm = {k: (raw["surr-site"][k]["mean"] if "surr-site" in raw else None) for k in METRICS}
    normalised: dict[str, dict[str, Any]] = {}
    for m, s in raw.items():
        normalised[m] = {}
        for k in METRICS:
            z = norm[k]
            if z and s[k]["mean"] is not None:
                normalised[m][k] = {"mean": s[k]["mean"] / z, "se": s[k]["se"] / z}
            else:
                normalised[m][k] = {"mean": None, "se": None}
    epc = {m: (s["n_loglik"]["mean"] / s["n_cov"]["mean"] if s["n_cov"]["mean"] else None)
           for m, s in raw.items()}
    return {"raw": raw, "normaliser": norm, "normalised": normalised, "evals_per_cov": epc,
            "rhat": {m: rhat_summary(r.get("rhat")) for m, r in runs.items()},
            "hyper_ess": hyper_ess_summary(runs)}


# -- output ----------------------------------------------------------------------------------------
#: R-hat above which a run's chains are flagged as not mixed (Vehtari et al. 2021)
RHAT_OK = 1.05


def _g(x: float | None, digits: int = 2) -> str:
    return "–" if x is None else f"{x:.{digits}g}"


def _e(x: float | None) -> str:
    return "–" if x is None else f"{x:.1e}"


def _ratio(res: dict[str, Any], name: str, metric: str) -> str:
    """Our surr-site normaliser of ``metric`` on ``name`` over the paper's, as text."""
    ours = res["datasets"][name]["summary"]["normaliser"][metric]
    paper = PAPER["surr_site_normalisers"][metric].get(name)
    return "–" if ours is None or not paper else f"{ours / paper:.2g}×"


def _head(methods: Sequence[str], *extra: str) -> list[str]:
    """The header and rule of a markdown table with a row per data set, a column per method."""
    cols = ["data set", *methods, *extra]
    return ["| " + " | ".join(cols) + " |", "|---" * len(cols) + "|"]


def _unmixed(r: dict[str, Any]) -> bool:
    return bool(r["stuck"]) or (r["max"] is not None and r["max"] > RHAT_OK)


def _unmixed_note(summ: dict[str, Any]) -> str:
    """A sentence naming the runs whose R-hat says their chains had not mixed (or '')."""
    bad = [m for m, r in summ.get("rhat", {}).items() if _unmixed(r)]
    if not bad:
        return ""
    return (f" Not mixed (R-hat > {RHAT_OK}): {', '.join(bad)}; their effective sample sizes "
            "are unreliable (a walk from the start, or too few effective samples), so their "
            "places in this order are not the paper's comparison.")


def _posterior_table(res: dict[str, Any], names: Sequence[str], methods: Sequence[str]
                     ) -> list[str]:
    """Markdown lines: each hyperparameter's posterior median [5 %, 95 %] per method.

    Only data sets with a run that recorded ``hyper_q`` (runs of before it whose store is gone
    have none) are listed; no lines at all when none did.
    """
    rows = []
    for n in names:
        runs = res["datasets"][n]["runs"]
        rh = res["datasets"][n]["summary"].get("rhat", {})
        have = [m for m in methods if runs.get(m, {}).get("hyper_q")]
        if not have:
            continue
        hyper = list(runs[have[0]]["hyper_q"])
        for h in hyper:
            cells = []
            for m in methods:
                q = runs.get(m, {}).get("hyper_q", {}).get(h)
                cells.append("–" if q is None else f"{q[1]:.3g} [{q[0]:.3g}, {q[2]:.3g}]"
                             + (" ⚠" if m in rh and _unmixed(rh[m]) else ""))
            rows.append(f"| {n} | {h} | " + " | ".join(cells) + " |")
    if not rows:
        return []
    return ["", "## Posterior of the hyperparameters by method", "",
            "Every representation is a move on the same posterior, so runs that mixed must "
            "agree: a check of the samplers, not a cost. Median [5 %, 95 %] over the sampling "
            "draws of all chains (lengths are `range` = 2ℓ). ⚠: R-hat above "
            f"{RHAT_OK}. Runs recorded before these quantiles were kept, whose stores are gone, "
            "show –.", "",
            "| data set | hyperparameter | " + " | ".join(methods) + " |",
            "|---" * (len(methods) + 2) + "|", *rows]


def partial_line(missing: dict[str, list[str]], unfinished: list[str]) -> str:
    """The report's sentence for a ``--finished-only`` report that is not complete.

    Parameters
    ----------
    missing : dict
        Data set -> the applicable methods that have no finished run; data sets with none
        missing are not named.
    unfinished : list of str
        Data sets none of whose runs had finished.

    Returns
    -------
    str
        One markdown paragraph naming what was left out.
    """
    parts = ([f"{n}: {', '.join(v)}" for n, v in missing.items() if v]
             + [f"{n}: every run (none had finished)" for n in unfinished])
    return ("**Partial.** Assembled with `--finished-only` from the runs that had finished; "
            "left out: " + "; ".join(parts) + ".")


def markdown(res: dict[str, Any]) -> str:
    """The results as markdown: Figure 3's three panels as tables, the paper's numbers beside."""
    st = res["settings"]
    names = list(res["datasets"])
    methods = [m for m in METHODS if any(m in res["datasets"][n]["summary"]["raw"]
                                         for n in names)]
    protos = {n: res["datasets"][n]["protocol"] for n in names}
    lines = [
        "# Murray & Adams (2010): slice sampling covariance hyperparameters (Figure 3)", "",
        f"Mode **{res['mode']}**, with the chains and sweeps of each data set in the table "
        "below; each sweep is one univariate slice update per "
        f"hyperparameter (Algorithm 4, width {st['width']} on the unconstrained scale, no "
        f"stepping out) then {st['n_latent']} elliptical slice updates.", "",
        "| data set | chains | burn-in sweeps | sampling sweeps | paper: chains | "
        "paper: burn-in | paper: sampling |", "|---" * 7 + "|",
        *(f"| {n} | {p['n_chains']} | {p['n_burn']} | {p['n_iter']} | "
          f"{paper_protocol(n)['n_chains']} | {paper_protocol(n)['n_burn']} | "
          f"{paper_protocol(n)['n_iter']} |" for n, p in protos.items()), "",
        "**Metric.** Effective samples (coda's spectral-AR estimator, re-implemented in "
        "`ess2010.py`) of the complete-data log-likelihood "
        "`log p(y | f, θ) + log N(f; 0, K_θ)` over the sampling sweeps of each chain, divided by "
        "the chain's likelihood evaluations, covariance constructions (θ values whose covariance "
        "the hyperparameter move built) and seconds (sweep wall time shared equally among the "
        "chains of a run). Means ± standard errors over chains. As in Figure 3 every group is "
        "divided by its surr-site value, given beneath it with the paper's.", "",
        "Method names are the paper's (our `HyperMove` representations carry the same names). "
        "For the Gaussian likelihood -site and -taylor coincide; the paper's surr-site/surr-taylor "
        "and post-site/post-taylor bars are our surr-site and post-site.", "",
    ]
    for k in METRICS:
        lines += [f"## Effective samples {METRIC_LABEL[k]} (relative to surr-site)", "",
                  *_head(methods, "surr-site (ours)", "surr-site (paper)")]
        for n in names:
            d = res["datasets"][n]["summary"]
            cells = []
            for m in methods:
                v = d["normalised"].get(m, {}).get(k)
                cells.append("–" if not v or v["mean"] is None else
                             f"{v['mean']:.2f} ± {v['se']:.2f}")
            lines.append(f"| {n} | " + " | ".join(cells) + f" | {_e(d['normaliser'][k])} | "
                         f"{_e(PAPER['surr_site_normalisers'][k].get(n))} |")
        lines.append("")
    lines += ["## Likelihood evaluations per covariance construction", "",
              "A cost ratio that does not depend on the machine: for surr-site the paper's "
              "normalisers imply it as (ESS per covariance) / (ESS per evaluation).", "",
              *_head(methods, "surr-site, paper (implied)")]
    for n in names:
        d = res["datasets"][n]["summary"]
        pn = PAPER["surr_site_normalisers"]
        implied = pn["per_cov"].get(n, 0) / pn["per_loglik"].get(n, 1)
        lines.append(f"| {n} | " + " | ".join(_g(d["evals_per_cov"].get(m), 3)
                                               for m in methods) + f" | {implied:.3g} |")
    lines += ["", "## Raw effective samples of the complete-data log-likelihood per chain", "",
              *_head(methods)]
    for n in names:
        raw = res["datasets"][n]["summary"]["raw"]
        lines.append(f"| {n} | " + " | ".join(
            "–" if m not in raw else f"{raw[m]['ess']['mean']:.1f} ± {raw[m]['ess']['se']:.1f}"
            for m in methods) + " |")
    lines += ["", "## Convergence: the largest hyperparameter R-hat of each run", "",
              "Rank-normalised split R-hat (ArviZ) over the sampling sweeps of the chains, the "
              "largest over the hyperparameters. The chains start from prior draws. Above 1.05 "
              "the chains of a run disagree: they had not forgotten their starts, or they mix "
              "so slowly that the run holds only a few effective samples of some "
              "hyperparameter. Either way the run's effective sample sizes are unreliable "
              "(from few effective samples they tend to be too high), and only large gaps "
              "involving such a run mean much. A method still above 1.05 after the paper's "
              "1000 burn-in sweeps mixes slowly.", "",
              *_head(methods)]
    for n in names:
        rh = res["datasets"][n]["summary"].get("rhat", {})
        lines.append(f"| {n} | " + " | ".join(
            "–" if m not in rh or (rh[m]["max"] is None and not rh[m]["stuck"]) else
            ("" if rh[m]["max"] is None else f"{rh[m]['max']:.3f}")
            + (f" (never moved: {', '.join(rh[m]['stuck'])})" if rh[m]["stuck"] else "")
            + (" ⚠" if _unmixed(rh[m]) else "") for m in methods) + " |")
    lines += ["", "## Hyperparameter mixing: the smallest bulk ESS over the hyperparameters",
              "",
              "Figure 3 measures the complete-data log-likelihood, which also waits on the "
              "latent field. The hyperparameters' own bulk ESS (ArviZ, all chains pooled) "
              "isolates what the representations change. Each cell: the smallest over the "
              "hyperparameters, whose it is, and that ESS per likelihood evaluation relative to "
              "surr-site. ⚠ marks runs whose R-hat is above 1.05 (their ESS is unreliable).", "",
              *_head(methods)]
    for n in names:
        summ = res["datasets"][n]["summary"]
        he, rh = summ.get("hyper_ess", {}), summ.get("rhat", {})
        lines.append(f"| {n} | " + " | ".join(
            "–" if m not in he else
            f"{he[m]['min']:.0f} ({he[m]['name']}), {_g(he[m]['relative'])}×"
            + (" ⚠" if m in rh and _unmixed(rh[m]) else "") for m in methods) + " |")
    lines += _posterior_table(res, names, methods)
    lines += ["", "## The experiments", ""]
    for n in names:
        info = res["datasets"][n]["info"]
        lines.append(f"- **{n}**: " + "; ".join(
            f"{k} = {v}" for k, v in info.items() if k not in ("true_lengthscales",)))
    lines += ["", "## The paper's findings (§6) and ours", ""]
    for n in names:
        summ = res["datasets"][n]["summary"]
        rel = summ["normaliser"]["per_loglik"] is not None  # else raw values (no surr-site)
        d = summ["normalised"] if rel else summ["raw"]
        order = sorted((m for m in d if d[m]["per_loglik"]["mean"] is not None),
                       key=lambda m: -d[m]["per_loglik"]["mean"])
        lines.append(f"- **{n}**. Paper: {PAPER['findings'][n]}. Ours, ordered by ESS per "
                     "likelihood evaluation" + ("" if rel else " (raw: surr-site did not run)")
                     + ": " + " > ".join(
                         f"{m} ({d[m]['per_loglik']['mean']:.2{'f' if rel else 'e'}})"
                         for m in order) + "." + _unmixed_note(summ))
    lines += [
        "", "## Differences from the paper", "",
        "- Hyperpriors: the paper's text states none (except the law of the synthetic "
        "lengthscales, which we use as their prior); ours are stated above. The posterior, and "
        "with it every effective sample size, depends on them.",
        "- The ionosphere training set is 200 cases drawn at random (seed 2010) from the 351; "
        "the paper's 200 are not identified. The synthetic set is our own draw from the stated "
        "law.",
        "- Lengths: lattice_lgm's `range` is 2ℓ; hyperpriors and bounds are stated on `range`.",
        "- Costs: our covariance count is the number of θ values whose covariance the "
        "hyperparameter move built (moves of the mean offset build none); the paper counts "
        "\"hyperparameter settings considered\". Our likelihood count includes the ESS "
        "updates' evaluations. Seconds are Python on a shared 2-core VM, not Matlab on a Xeon: "
        "compare the ratios between methods, not the absolute rates.",
        "- ESS: our re-implementation of coda's spectral-AR estimator (R-CODA in the paper).",
        "- Dense priors carry the DensePrior 'auto' jitter (at most 1e-6 × mean diagonal), "
        "inside K_θ for the sampler and for the complete-data term alike.",
        "- Absolute levels: our surr-site normalisers over the paper's, per likelihood "
        "evaluation and per covariance construction: " + "; ".join(
            f"{n} {_ratio(res, n, 'per_loglik')} and {_ratio(res, n, 'per_cov')}"
            for n in names) + ". Machine-free costs, so these gaps are the models' and the "
        "samplers' (hyperpriors, data draws, the evaluation count), not the hardware's; the "
        "comparison is between methods within a data set.", ""]
    missing = {n: [m for m in APPLICABLE[n] if m not in res["datasets"][n]["runs"]]
               for n in names}
    unfinished = st.get("unfinished_datasets") or []
    if st.get("finished_only") and not any(missing.values()) and not unfinished:
        lines += ["Assembled with `--finished-only`: every applicable run of these data sets had "
                  "finished.", ""]
    elif st.get("finished_only"):
        lines += [partial_line(missing, unfinished), ""]
    reused = {n: [m for m, r in res["datasets"][n]["runs"].items() if r.get("reused_from")]
              for n in names}
    if any(reused.values()):
        lines += ["Reused (`--reuse`): these runs are read from an earlier results file "
                  "(the same data set, method, protocol, seed and sweep settings), not run again "
                  "for this report: " + "; ".join(
                      f"{n}: {', '.join(v)}" for n, v in reused.items() if v) + ".", ""]
    stale = {n: {m: r["stale"] for m, r in res["datasets"][n]["runs"].items() if r.get("stale")}
             for n in names}
    for n, per in stale.items():
        if not per:
            continue
        # the description is the data set's, so one run's record of the difference is all
        first = next(iter(per.values()))
        lines += [f"**Stale (`--stale-ok`): {n} {', '.join(per)}.** These runs were sampled "
                  "under an earlier description of the data set, so their draws are not the "
                  "ones this code makes; they stay in the report until they are run again. "
                  "What differs: " + "; ".join(
                      f"`{k}` then {v['then']!r}, now {v['now']!r}"
                      for k, v in sorted(first.items())) + ".", ""]
    by_code: dict[str, list[str]] = {}
    for n in names:
        for m, r in res["datasets"][n]["runs"].items():
            by_code.setdefault(r.get("code") or "not recorded", []).append(f"{n} {m}")
    lines += ["Code: the commit each run was sampled at (`code`; runs from before it was "
              "recorded say so): " + "; ".join(
                  f"{c}: {', '.join(v)}" for c, v in sorted(by_code.items())) + ".", ""]
    mixed = {n: len({r.get("code") for r in res["datasets"][n]["runs"].values()})
             for n in names}
    mixed = {n: k for n, k in mixed.items() if k > 1}
    if mixed:
        # draws are bitwise the same across these commits where the decisions say so, but
        # speed is not: a per-second ratio then also measures the code changes between runs
        lines += ["Per second across commits: " + ", ".join(
            f"the {n} runs come from {k} commits" for n, k in sorted(mixed.items()))
            + ", so their per-second ratios include any speed-up landed between those runs "
            "(docs/decisions.md says which paths each decision changed); the per-evaluation "
            "and per-construction ratios count work and do not depend on it.", ""]
    short = not_at_paper_protocol(protos)
    if res["mode"] == "quick" or short:
        lines += [f"Note: mode {res['mode']}; "
                  + ("" if res["mode"] == "quick" else
                     f"{', '.join(short)} not at the paper's protocol (the table above)"
                     + (f", {', '.join(n for n in names if n not in short)} at it" if
                        len(short) < len(names) else "") + "; ")
                  + "where a data set is not at the paper's protocol, its numbers check the "
                  "pipeline and, where the chains mixed (the R-hat table), the direction of "
                  "the differences, not the paper's values.", ""]
    return "\n".join(lines)


def figure(res: dict[str, Any], path: Path) -> None:
    """A Figure-3-style PNG: three panels of grouped bars (one group per data set)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(res["datasets"])
    methods = [m for m in METHODS if any(m in res["datasets"][n]["summary"]["raw"]
                                         for n in names)]
    colours = dict(zip(METHODS, ("#444444", "#999999", "#1f77b4", "#9ecae1", "#d62728",
                                 "#ff9896"), strict=True))
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    w = 0.8 / max(len(methods), 1)
    for ax, k in zip(axes, METRICS, strict=True):
        for j, m in enumerate(methods):
            xs, hs, es, hatch = [], [], [], []
            for i, n in enumerate(names):
                summ = res["datasets"][n]["summary"]
                v = summ["normalised"].get(m, {}).get(k)
                if v and v["mean"] is not None:
                    xs.append(i - 0.4 + (j + 0.5) * w)
                    hs.append(v["mean"])
                    # the lower error bar stops short of 0 on the log axis
                    es.append((min(v["se"], 0.9 * v["mean"]), v["se"]))
                    hatch.append("///" if _unmixed(summ["rhat"][m]) else "")
            bars = ax.bar(xs, hs, w, yerr=np.array(es).T.reshape(2, -1), color=colours[m],
                          label=m, capsize=2)
            for b, h in zip(bars, hatch, strict=True):
                b.set_hatch(h)
        ax.set_yscale("log")
        ax.set_xticks(range(len(names)))
        labels = []
        for n in names:
            z = res["datasets"][n]["summary"]["normaliser"][k]
            p = PAPER["surr_site_normalisers"][k].get(n)
            pr = res["datasets"][n]["protocol"]
            stale = any(r.get("stale") for r in res["datasets"][n]["runs"].values())
            labels.append(f"{n}{' (stale)' if stale else ''}\n"
                          f"{pr['n_chains']} chains,\n{pr['n_burn']}+{pr['n_iter']} sweeps\n"
                          f"x{_e(z)}\n(paper x{_e(p)})")
        ax.set_xticklabels(labels, fontsize=7.5)
        for i, n in enumerate(names):
            if res["datasets"][n]["summary"]["normaliser"][k] is None:
                # a partial report without surr-site has no bars here: say why, not a blank
                ax.text(i, 0.5, "surr-site has not run:\nnothing to divide by\n(raw ESS in "
                        "the report)", ha="center", va="center", fontsize=8, color="0.3",
                        transform=ax.get_xaxis_transform())  # x: data, y: axes fraction
        ax.set_ylabel(f"effective samples {METRIC_LABEL[k]}\n(relative to surr-site)",
                      fontsize=9)
        ax.axhline(1.0, color="k", lw=0.5, ls=":")
    from matplotlib.patches import Patch

    handles = [Patch(facecolor=colours[m], label=m) for m in methods]
    handles.append(Patch(facecolor="white", edgecolor="k", hatch="///",
                         label=f"R-hat > {RHAT_OK}"))
    # below the panels, where it can cover no bar
    fig.legend(handles=handles, fontsize=8, ncol=len(handles), loc="lower center")
    fig.suptitle(f"Murray & Adams (2010) Figure 3, reproduced ({res['mode']} mode): ESS of the "
                 f"complete-data log-likelihood per unit cost (log scale; hatched: R-hat > "
                 f"{RHAT_OK}, not mixed)", fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- entry point ----------------------------------------------------------------------------------
def parse_protocol(text: str) -> tuple[str, dict[str, int]]:
    """One ``--protocol`` value, ``DATASET=CHAINS,BURN_IN,SWEEPS``, as (name, protocol).

    Raises
    ------
    InvalidParameterError
        For an unknown data set, a malformed value, fewer than 2 chains or 10 sampling sweeps,
        or a negative burn-in.
    """
    name, sep, rest = text.partition("=")
    parts = rest.split(",")
    if not sep or len(parts) != 3 or not all(p.strip().isdigit() for p in parts):
        raise InvalidParameterError(
            f"--protocol {text!r} is not DATASET=CHAINS,BURN_IN,SWEEPS with whole numbers; "
            "e.g. --protocol redwoods=3,50,250.")
    if name not in DATASETS:
        raise InvalidParameterError(
            f"--protocol {text!r}: data set {name!r} is unknown; use one of {list(DATASETS)}.")
    c, b, i = (int(p) for p in parts)
    if c < MIN_CHAINS or i < MIN_SWEEPS:
        raise InvalidParameterError(
            f"--protocol {text!r}: give at least {MIN_CHAINS} chains (R-hat compares chains) "
            f"and {MIN_SWEEPS} sampling sweeps.")
    return name, {"n_chains": c, "n_burn": b, "n_iter": i}


#: the settings a reused run must share with this invocation, besides its own protocol and seed
REUSE_SETTINGS = ("n_latent", "width", "step_out", "sizes")


#: what :func:`_is_results` found missing, for the messages of its callers
NOT_RESULTS = "no Murray & Adams (2010) 'paper', 'settings' and 'datasets'"


def _is_results(obj: Any) -> bool:
    """Whether parsed JSON is a results file of this script (what :func:`main` writes)."""
    return (isinstance(obj, dict) and obj.get("paper", {}).get("source") == PAPER["source"]
            and isinstance(obj.get("datasets"), dict) and "settings" in obj)


def load_previous(path: Path) -> dict[str, Any]:
    """An earlier results file of this script, for ``--reuse``.

    Parameters
    ----------
    path : Path
        A ``hyper2010.json`` written by :func:`main` (e.g. the committed
        ``results/hyper2010.json``).

    Returns
    -------
    dict
        The file's contents, with ``path`` added.

    Raises
    ------
    InvalidParameterError
        If the file is missing, is not JSON, or is not a results file of this script.
    """
    if not path.is_file():
        raise InvalidParameterError(
            f"--reuse {path}: no such file; give a results JSON written by this script, e.g. "
            f"{RESULTS / (STEM + '.json')}.")
    try:
        prev = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InvalidParameterError(f"--reuse {path} is not JSON ({e}); give a results JSON "
                                    "written by this script.") from e
    if not _is_results(prev):
        raise InvalidParameterError(
            f"--reuse {path} is not a results file of hyper2010.py ({NOT_RESULTS}); give the "
            "hyper2010.json this script wrote.")
    prev["path"] = str(path)
    return prev


def dropped_runs(path: Path, kept: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """The runs recorded in the results file ``path`` that a new report of ``kept`` would lose.

    A report replaces its results file whole, so a run recorded there is lost when the new
    report has no run of its (data set, method): another ``--datasets`` or ``--methods``, or a
    run that ``--finished-only`` left out.  A run of the same (data set, method) under another
    protocol replaces it and is not counted: that is what ``--protocol`` asks for.

    Parameters
    ----------
    path : Path
        The ``hyper2010.json`` the new report would be written over (absent: nothing is lost).
    kept : mapping of str to sequence of str
        The methods, by data set, that the new report will hold.

    Returns
    -------
    dict of str to list of str
        The recorded methods, by data set, missing from ``kept`` (empty if none).

    Raises
    ------
    InvalidParameterError
        If ``path`` exists but is not a results file of this script: overwriting it might lose
        something this function cannot see.
    """
    if not path.exists():
        return {}
    try:
        old = json.loads(path.read_text())
        why = "" if _is_results(old) else NOT_RESULTS
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        why = f"not JSON: {e}"
    if why:
        raise InvalidParameterError(
            f"--out {path.parent} holds {path.name}, which is not a results file of this script "
            f"({why}); the report would overwrite it. Move it away, give another --out, or "
            "pass --replace to overwrite it.")
    recorded = {name: list(ds.get("runs", {})) for name, ds in old["datasets"].items()}
    lost = {name: [m for m in methods if m not in kept.get(name, ())]
            for name, methods in recorded.items()}
    return {name: methods for name, methods in lost.items() if methods}


def refuse_dropping(path: Path, kept: Mapping[str, Sequence[str]], *, when: str) -> None:
    """Raise if writing a report of ``kept`` over ``path`` would lose recorded runs.

    ``when`` says at which point the check ran, for the message (before sampling, or before a
    ``--finished-only`` report is written).  See :func:`dropped_runs`.
    """
    lost = dropped_runs(path, kept)
    if lost:
        named = "; ".join(f"{name}: {', '.join(ms)}" for name, ms in lost.items())
        raise InvalidParameterError(
            f"--out {path.parent}: its {path.name} records runs that this report would not hold "
            f"({named}), so writing it would lose them ({when}). To keep them, add --reuse "
            f"{path} (and their --datasets and --methods); to sample into a scratch report, "
            "give another --out; to discard them, pass --replace.")


def reusable_run(previous: Sequence[dict[str, Any]], name: str, method: str,
                 proto: dict[str, int], seed: int, info: dict[str, Any],
                 settings: dict[str, Any], *,
                 stale_ok: bool = False) -> tuple[dict[str, Any] | None, str]:
    """The first run of ``previous`` that is this (data set, method) run, already finished.

    A run stands in for sampling only when everything that decides its draws matches: the data
    set's description (``info``: sizes, likelihood, hyperpriors, jitter policy), the method,
    chains, burn-in and sampling sweeps, the seed, and :data:`REUSE_SETTINGS`.  The draws are
    then the ones this invocation would make (the runs are deterministic in their seed), so
    nothing is re-run that a committed results file already records, e.g. on a machine that
    lost its ``--work``.

    With ``stale_ok`` a run whose data-set description alone differs is taken too, marked
    ``stale`` with the differing description entries then and now (its draws are not the ones
    this code makes; the report says so).  For records whose re-run is out of reach, e.g.
    Ionosphere's four runs of ~2.3 h each, sampled before architecture decision 60.

    Returns
    -------
    run : dict or None
        A copy of the recorded run with ``reused_from`` (the file) added, or ``None``.
    why : str
        Why a recorded run of this (data set, method) was not taken ('' if none was recorded).
    """
    here = json.loads(json.dumps(info))  # as the file holds it (tuples become lists)
    why = ""
    for prev in previous:
        ds = prev["datasets"].get(name)
        if not ds or method not in ds.get("runs", {}):
            continue
        run = ds["runs"][method]
        got = {k: run.get(k) for k in proto}
        then = ds.get("info") or {}
        changed = sorted(k for k in set(then) | set(here) if then.get(k) != here.get(k))
        diffs = []
        if got != dict(proto):
            diffs.append(f"protocol {got} there, {dict(proto)} here")
        if run.get("seed") != seed:
            diffs.append(f"seed {run.get('seed')} there, {seed} here")
        diffs += [f"{k} {prev['settings'].get(k)!r} there, {settings[k]!r} here"
                  for k in REUSE_SETTINGS if prev["settings"].get(k) != settings[k]]
        if not diffs and (not changed or stale_ok):
            out = {**run, "reused_from": prev["path"]}
            if changed:
                out["stale"] = {k: {"then": then.get(k), "now": here.get(k)} for k in changed}
            return out, ""
        if changed:
            diffs.insert(0, f"the data set's description differs ({', '.join(changed)})")
        why = f"{prev['path']}: " + "; ".join(diffs)
    return None, why


def main(argv: Sequence[str] | None = None) -> int:
    """Run the reproduction (``--quick`` for the pipeline at tiny sizes); see the module doc."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="tiny sizes (2 chains, 25 sweeps after 5, subsampled data, "
                         "prior-white and surr-site) in < 1 min")
    ap.add_argument("--out", type=Path, default=None,
                    help="results dir (default results/quick/ with --quick, else results/)")
    ap.add_argument("--work", type=Path, default=None, help="run stores (default <out>/work)")
    ap.add_argument("--datasets", nargs="+", choices=DATASETS, default=None)
    ap.add_argument("--methods", nargs="+", choices=METHODS, default=None,
                    help="default: those the paper ran on each data set")
    ap.add_argument("--chains", type=int, default=None)
    ap.add_argument("--iterations", type=int, default=None,
                    help="sampling sweeps (mining gets 4x this unless --mining-iterations)")
    ap.add_argument("--mining-iterations", type=int, default=None)
    ap.add_argument("--burn-in", type=int, default=None)
    ap.add_argument("--protocol", action="append", default=[], metavar="DATASET=C,B,I",
                    help="chains C, burn-in B and sampling sweeps I for one data set, "
                         "overriding the other settings there (repeatable); e.g. "
                         "redwoods=3,50,250 assembles a shorter run of a costly data set beside "
                         "longer runs of the others")
    ap.add_argument("--threads", type=int, default=1, help="Numba threads (default 1)")
    ap.add_argument("--no-progress", action="store_true",
                    help="no progress lines while a run samples (sweeps done, rate, ETA on "
                         "stderr every 30 s; on by default except with --quick)")
    ap.add_argument("--finished-only", action="store_true",
                    help="sample nothing: report the (data set, method) runs of these settings "
                         "that have finished (a partial protocol, said so in the output)")
    ap.add_argument("--reuse", type=Path, action="append", default=[], metavar="RESULTS_JSON",
                    help="take finished runs from an earlier results file of this script (e.g. "
                         "results/hyper2010.json) instead of running them again, when their data "
                         "set, method, protocol, seed and sweep settings match (repeatable; the "
                         "first match wins); for a machine that has lost its --work")
    ap.add_argument("--stale-ok", action="append", default=[], choices=DATASETS,
                    metavar="DATASET",
                    help="with --reuse: also take this data set's recorded runs whose data-set "
                         "description alone differs (e.g. sampled under an earlier jitter "
                         "policy), marked stale in the report (repeatable)")
    ap.add_argument("--replace", action="store_true",
                    help="let the report drop runs that the results file in --out records but "
                         "this invocation neither samples, finds finished nor reuses (refused "
                         "otherwise, before anything is sampled)")
    args = ap.parse_args(argv)
    if args.stale_ok and not args.reuse:
        raise InvalidParameterError(
            f"--stale-ok {' '.join(args.stale_ok)} needs --reuse RESULTS_JSON (the runs to "
            "take); add it, or drop --stale-ok.")
    previous = [load_previous(p) for p in args.reuse]
    import numba

    numba.set_num_threads(args.threads)
    quick = args.quick
    out = args.out or (QUICK_OUT if quick else RESULTS)
    work = args.work or out / "work"
    names = list(args.datasets or DATASETS)
    n_chains = args.chains or (2 if quick else N_CHAINS)
    n_iter = args.iterations or (25 if quick else N_ITER)
    n_iter_mining = args.mining_iterations or (
        n_iter if quick else 4 * n_iter if args.iterations else N_ITER_MINING)
    n_burn = args.burn_in if args.burn_in is not None else (5 if quick else N_BURN)
    for nm, v in (("--chains", n_chains), ("--iterations", n_iter),
                  ("--mining-iterations", n_iter_mining)):
        lo = MIN_CHAINS if nm == "--chains" else MIN_SWEEPS
        if v < lo:
            raise InvalidParameterError(f"{nm}={v} is too small; give at least {lo}.")
    if n_burn < 0:
        raise InvalidParameterError(f"--burn-in={n_burn} must be >= 0.")
    overrides = dict(parse_protocol(t) for t in args.protocol)
    if len(overrides) < len(args.protocol):
        raise InvalidParameterError(
            f"--protocol names a data set twice ({args.protocol}); give each once.")
    for flag, named in (("--stale-ok", args.stale_ok), ("--protocol", overrides)):
        unused = sorted(set(named) - set(names))
        if unused:
            raise InvalidParameterError(
                f"{flag} names {unused}, which this run does not include (--datasets "
                f"{names}); add them to --datasets or drop their {flag}.")
    sizes = (dict(iono_n=40, iono_d=4, reg_n=40, reg_d=3, redwood_bins=10) if quick else {})
    full = not quick and not any(x is not None for x in (
        args.datasets, args.methods, args.chains, args.iterations, args.mining_iterations,
        args.burn_in)) and not overrides
    mode = "quick" if quick else "full" if full else "custom"
    planned = {name: [m for m in (args.methods or (("prior-white", "surr-site") if quick else
                                                   APPLICABLE[name])) if m in APPLICABLE[name]]
               for name in names}
    results_json = out / f"{STEM}.json"
    if not args.replace and not args.finished_only:
        # before hours of sampling: the runs of other data sets or methods in --out would go
        refuse_dropping(results_json, planned, when="checked before sampling")
    out.mkdir(parents=True, exist_ok=True)
    if quick and out == QUICK_OUT:
        (out / ".gitignore").write_text("*\n")  # results/quick/ is never committed
    work.mkdir(parents=True, exist_ok=True)

    t_start = time.perf_counter()
    res: dict[str, Any] = {
        "paper": PAPER, "mode": mode, "machine": _machine(),
        "settings": {"n_chains": n_chains, "n_iter": n_iter, "n_iter_mining": n_iter_mining,
                     "n_burn": n_burn, "protocol_overrides": overrides,
                     "n_latent": N_LATENT, "width": WIDTH,
                     "step_out": False, "sizes": sizes, "work": str(work),
                     "numba_threads": args.threads, "finished_only": args.finished_only,
                     "reuse": [p["path"] for p in previous],
                     "stale_ok": sorted(set(args.stale_ok)), "unfinished_datasets": [],
                     "method_map": {m: m for m in METHODS}},
        "datasets": {},
    }
    for name in names:
        prob = build_problem(name, **sizes)
        methods = planned[name]
        proto = overrides.get(name) or {
            "n_chains": n_chains, "n_burn": n_burn,
            "n_iter": n_iter_mining if name == "mining" else n_iter}
        print(f"[hyper2010] {name}: N = {prob.info['N']}, {prob.info['n_hyper']} "
              f"hyperparameters, methods {methods}, {proto['n_chains']} chains, "
              f"{proto['n_burn']} + {proto['n_iter']} sweeps", flush=True)
        runs = {}
        for m in methods:
            store = work / name / (f"{m}_c{proto['n_chains']}_it{proto['n_iter']}"
                                   f"_b{proto['n_burn']}.zarr")
            seed = _seed("hyper2010", name, m)
            finished = store.with_suffix(".result.json").exists()
            old, why = (None, "") if finished else reusable_run(
                previous, name, m, proto, seed, prob.info, res["settings"],
                stale_ok=name in args.stale_ok)
            if why:
                print(f"  {m}: not reused ({why})", flush=True)
            if old is not None:
                runs[m] = old
            elif args.finished_only and not finished:
                print(f"  {m}: not finished, left out (--finished-only)", flush=True)
                continue
            else:
                runs[m] = run_one(prob, m, n_chains=proto["n_chains"], n_iter=proto["n_iter"],
                                  n_burn=proto["n_burn"], seed=seed, store=store,
                                  progress=not (quick or args.no_progress))
            e = _mean_se([c["ess"] for c in runs[m]["chains"]])
            print(f"  {m}: ESS {e['mean']:.1f} ± {e['se']:.1f}, "
                  f"{runs[m]['seconds_sampling']:.1f} s"
                  + (f" (reused from {old['reused_from']})" if old else ""), flush=True)
        if not runs:  # --finished-only and none of its runs has finished
            res["settings"]["unfinished_datasets"].append(name)
            continue
        res["datasets"][name] = {"info": prob.info, "protocol": proto, "methods": list(runs),
                                 "runs": runs, "summary": summarise(runs)}
    if not res["datasets"]:  # before writing: an empty report would replace the results
        raise InvalidParameterError(
            f"--finished-only: no run of {names} with these settings has finished in --work "
            f"{work}" + (" or is in the --reuse files" if previous else "") + "; nothing to "
            "report. Check --work, --chains, --burn-in, --iterations and --protocol, or run "
            "without --finished-only to sample them.")
    if args.finished_only and not args.replace:  # it may have left out recorded runs
        refuse_dropping(results_json, {n: list(d["runs"]) for n, d in res["datasets"].items()},
                        when="nothing was written")
    res["seconds_total"] = time.perf_counter() - t_start
    write_outputs(out, STEM, res, markdown(res), lambda path: figure(res, path))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
