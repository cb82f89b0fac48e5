r"""The papers' Cox-process models on the structured backends: agreement, speed, and scale.

The dense LAPACK path reproduces Murray & Adams (2010) §5 (``hyper2010.py``).  This script puts
the same models on the structured backends and asks three questions.

1. **Agreement (like with like).**  Same data, same kernel, same bounded hyperpriors, same
   sampler (``prior-white`` slice moves of ``sd``, ``range`` and the mean, then ten elliptical
   slice updates per sweep):

   * ``mining``: the coal-mining disasters in 112 bins of 365 days, squared-exponential kernel,
     :class:`~lattice_lgm.priors.CirculantPrior` against :class:`~lattice_lgm.priors.DensePrior`;
   * ``redwoods``: the 195 redwoods in 25 × 25 cells, the same pair;
   * ``gmrf``: the redwoods with a Matérn-SPDE :class:`~lattice_lgm.priors.GMRFPrior`
     (``α = 2``, i.e. ν = 1) against a dense prior whose covariance is the window block of that
     GMRF's own ``Q_θ⁻¹`` at every θ (:class:`GMRFCovarianceOracle`).

   The circulant prior is exact on the window (the embedding's marginal is the kernel), and the
   oracle is the GMRF's marginal on the window, so each pair targets *one* posterior; they
   must agree within Monte Carlo error.  The test statistics are
   ``z = (m_A − m_B) / √(mcse_A² + mcse_B²)`` for the posterior mean and the 5 %, 50 % and
   95 % quantiles of ``log sd``, ``log range`` and ``mean`` (ArviZ's ``mcse``), and for the
   posterior mean of the log-intensity ``η = mean + f`` of every cell.  A pair *agrees* when
   no hyperparameter statistic exceeds the Bonferroni bound at family-wise level 1 % over the
   12 hyperparameter statistics, and no cell exceeds it over the cells (a stated false-failure
   rate of at most 2 % per pair when the MCSEs are right; short, poorly mixing chains
   understate them, which is why the chains' bulk ESS is printed beside the verdict).

   Speed per effective sample: the minimum bulk ESS over the three hyperparameters, and the
   median bulk ESS of the cells' ``η``, each per second of sampling sweeps (burn-in excluded,
   all chains in one process, one Numba thread, one BLAS thread), as a ratio structured /
   dense measured in the same run.

2. **Where the dense path cannot go.**  ``redwoods128``: the same model and prior on 128 × 128
   cells (16,384 cells: one dense covariance is 2.1 GB and one Cholesky ~ 10¹² flops per θ), on
   the circulant backend.  Its posterior of ``sd`` and ``range`` is set beside the 25 × 25 run:
   cells much coarser than the range average the field and bias ``sd`` down (DESIGN §4).
   ``bei``: the LGCP of ``make demo`` (``~ elev + grad``, Matérn 3/2, PC priors scaled to the
   window) at the covariates' own 5 m grid (20,000 cells) and at 20 m, the same comparison.

3. **Sensitivity, not agreement.**  ``sensitivity``: the redwoods at 128 × 128 with the
   Matérn-SPDE GMRF (ν = 1) beside the squared-exponential circulant run: a different prior,
   so the posteriors may differ; the script reports how much (hyperparameters, the correlation
   of the posterior mean maps, and the mean absolute difference of ``η`` in posterior sds).

Hyperpriors (our choices, stated in the output): ``sd ~ LogUniform(0.01, 10)``,
``mean ~ N(0, 10²)`` around the homogeneous log-rate, and a *bounded* ``range``:
``LogUniform(2 bins, span)`` on mining, ``LogUniform(0.02, 1)`` on the unit square.  The bound
is what sizes the circulant torus (a circulant prior cannot represent ranges beyond the one it
was sized for) and the GMRF padding; the dense prior is given the same bound so that the
posteriors are the same.

Usage::

    python benchmarks/papers/structured.py --quick    # ~2 min; results/quick/ (git-ignored)
    python benchmarks/papers/structured.py            # full mode: ~2.5 h on 2 cores, resumable
    python benchmarks/papers/structured.py --experiments mining redwoods --chains 4 \
        --draws 500 --tune 100 --out /tmp/structured
    python benchmarks/papers/structured.py --experiments bei --bei-length 1000,5000 \
        --out results/structured_bei    # the longer bei runs (27 min of sampling here)

Every run is a :func:`lattice_lgm.runs.sample` zarr store under ``--work`` with checkpoints; a
rerun resumes unfinished stores and reads finished ones.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for _p in (str(ROOT), str(HERE)):
    if _p not in sys.path:  # run as a script from a checkout, or loaded by a test
        sys.path.insert(0, _p)

import _one_blas_thread  # noqa: E402, F401  (before numpy: see its docstring)
import numpy as np  # noqa: E402
from ess2010 import _g, _machine, _seed, write_outputs  # noqa: E402
from hyper2010 import (  # noqa: E402
    MINING_BIN_DAYS,
    mining_counts,
    redwood_counts,
    sample_traced,
)

from lattice_lgm import Lattice  # noqa: E402
from lattice_lgm.covariance import SquaredExponential  # noqa: E402
from lattice_lgm.errors import InvalidParameterError  # noqa: E402
from lattice_lgm.hyperpriors import Hyperprior, LogUniform, Normal  # noqa: E402
from lattice_lgm.likelihoods import Poisson  # noqa: E402
from lattice_lgm.models.latent import LatentGaussianModel  # noqa: E402
from lattice_lgm.priors import CirculantPrior, DensePrior, GMRFPrior  # noqa: E402
from lattice_lgm.samplers import default_sweep  # noqa: E402

RESULTS = HERE / "results"
QUICK_OUT = RESULTS / "quick"
STEM = "structured"

EXPERIMENTS = ("mining", "redwoods", "gmrf", "redwoods128", "sensitivity", "bei")
#: the family-wise level of each agreement family (hyperparameters; cells)
ALPHA = 0.01
QUANTILES = (0.05, 0.5, 0.95)
#: the R-hat (of log sd, log range, mean) under which a disagreement counts as one
RHAT_OK = 1.05
REPRESENTATION = "prior-white"
N_LATENT = 10
#: the bounded range priors (see module doc)
RANGE_MINING = (2.0 * MINING_BIN_DAYS, 112 * MINING_BIN_DAYS)
RANGE_UNIT = (0.02, 1.0)
#: GMRF padding on the unit square, in cells per side at 25 × 25 (the oracle's Q⁻¹ is on the
#: padded lattice, so the pad sets its cost; any pad gives a valid model and its own oracle)
GMRF_PAD_25 = 6


@dataclass
class Settings:
    """Chains and lengths of one mode (full, quick or custom)."""

    chains: int = 4
    tune: int = 200
    draws: int = 1000
    # the paper's mining length (Murray & Adams 2010 §5: 20,000 iterations); 112 cells cost
    # 0.04 s per sweep of four chains, and at 2000 sweeps neither backend had mixed (R-hat 1.2)
    mining_draws: int = 20000
    # (burn-in, sampling sweeps) of the 25 × 25 redwoods runs (the circulant/dense pair and the
    # coarse side of redwoods128): at 200 + 1000 the dense chains had not forgotten their
    # starts in the range (R-hat 1.72); the paper's 1000 burn-in sweeps, and 3000 after them
    redwoods: tuple[int, int] = (1000, 3000)
    bins: int = 25
    fine_bins: int = 128
    bei_cells: tuple[float, ...] = (5.0, 20.0)
    bei_chains: int = 4
    bei_tune: int = 200
    bei_draws: int = 600
    fine_thin_fields: int = 5
    timing_sweeps: int = 40
    timing_rounds: int = 3


QUICK = Settings(chains=2, tune=10, draws=40, mining_draws=60, redwoods=(10, 40), bins=10,
                 fine_bins=32, bei_cells=(50.0,), bei_chains=2, bei_tune=5, bei_draws=15,
                 fine_thin_fields=2, timing_sweeps=3, timing_rounds=1)


# -- priors and models -----------------------------------------------------------------------------
class GMRFCovarianceOracle(DensePrior):
    """A dense prior whose covariance is the window block of a GMRF's ``Q_θ⁻¹``, at every θ.

    The oracle of the ``gmrf`` agreement pair: :meth:`with_params` moves the GMRF and forms
    ``K_θ = (Q_θ⁻¹)_{WW}`` on the window cells ``W`` (:func:`window_covariance`), then factors
    it by LAPACK like any :class:`DensePrior`.  A change of ``sd`` alone rescales the cached
    ``K`` by ``(sd'/sd)²`` (the SPDE's τ scales ``Q`` by ``1/sd²``; tested) instead of
    inverting again.

    Parameters
    ----------
    gmrf : GMRFPrior
        A proper GMRF (``matern`` or ``car``).
    jitter : "auto" or float
        As :class:`DensePrior`.
    """

    def __init__(self, gmrf: GMRFPrior, *, jitter: float | str = "auto",
                 _cov: np.ndarray | None = None) -> None:
        if not isinstance(gmrf, GMRFPrior) or gmrf.intrinsic:
            raise InvalidParameterError(
                f"gmrf={gmrf!r} must be a proper GMRFPrior (matern or car); an intrinsic one "
                "has no covariance.")
        self.gmrf = gmrf
        self.lattice = gmrf.lattice
        self.x = gmrf.lattice.cell_centers()
        self.kernel = None
        self.shape = gmrf.lattice.shape
        self.exact_on = "lattice"
        self._init_matrix(window_covariance(gmrf) if _cov is None else _cov, jitter)

    @property
    def params(self) -> dict[str, Any]:  # noqa: D102
        return self.gmrf.params

    def _with_params(self, **params: Any) -> GMRFCovarianceOracle:
        g = self.gmrf.with_params(**params)
        cov = None
        if self.gmrf.model == "matern" and set(params) <= {"sd"}:
            cov = self.cov * (float(g.params["sd"]) / float(self.gmrf.params["sd"])) ** 2
        return type(self)(g, jitter=self._jitter_arg, _cov=cov)


def window_covariance(gmrf: GMRFPrior) -> np.ndarray:
    """``(Q⁻¹)_{WW}`` of a proper GMRF on its window cells, shape ``(n_window, n_window)``.

    By the Schur complement over the padding cells ``P``:
    ``(Q⁻¹)_{WW} = (Q_WW − Q_WP Q_PP⁻¹ Q_PW)⁻¹`` (Rue & Held 2005, §2.1.5, the marginal
    precision).  ``Q_PW`` is non-zero only on the window cells next to the padding, so the
    sparse solve has that many right-hand sides, not ``|W|``; the ``|W| × |W|`` marginal
    precision is then inverted through its Cholesky factor.  Window cells in C order of
    ``gmrf.shape``; symmetrised.
    """
    from scipy import sparse
    from scipy.linalg import cho_factor, lapack
    from scipy.sparse.linalg import splu

    q = sparse.csr_matrix(gmrf.precision_matrix())
    w = np.asarray(gmrf.window_index()).ravel()
    pad = np.setdiff1d(np.arange(q.shape[0]), w)
    prec = q[w][:, w].toarray()
    if len(pad):
        qwp = q[w][:, pad].tocsr()
        edge = np.unique(qwp.nonzero()[0])  # window cells with a neighbour in the padding
        if len(edge):
            x = splu(sparse.csc_matrix(q[pad][:, pad])).solve(qwp[edge].T.toarray())
            prec[np.ix_(edge, edge)] -= qwp[edge] @ x
    c, _ = cho_factor(prec, lower=True)
    inv, info = lapack.dpotri(c, lower=1)  # P⁻¹ from its factor: a third of a full solve
    if info != 0:
        raise InvalidParameterError(f"the marginal precision is singular (dpotri info {info}).")
    lower = np.tril(inv)
    return lower + np.tril(inv, -1).T


def _hyperpriors(range_bounds: tuple[float, float]) -> dict[str, Hyperprior]:
    return {"sd": LogUniform(0.01, 10.0), "range": LogUniform(*range_bounds),
            "mean": Normal(0.0, 10.0)}


@dataclass
class Problem:
    """A Poisson count model on a lattice, on one backend."""

    name: str
    backend: str
    model: LatentGaussianModel
    lattice: Lattice
    info: dict[str, Any] = field(default_factory=dict)


def mining_problem(backend: str) -> Problem:
    """Mining in 112 bins of 365 days, squared exponential, on ``dense`` or ``circulant``.

    Exposure 1 per bin (the rate is per bin), ``mean`` around ``log(191/112)``.
    """
    counts, _ = mining_counts()
    lat = Lattice((len(counts),), spacing=float(MINING_BIN_DAYS), units="d")
    kern = SquaredExponential(sd=1.0, range=10.0 * MINING_BIN_DAYS)
    prior = _prior(backend, lat, kern, RANGE_MINING[1])
    m0 = math.log(counts.sum() / len(counts))
    model = LatentGaussianModel(prior, Poisson(counts, exposure=1.0),
                                hyperpriors=_hyperpriors(RANGE_MINING), mean=m0)
    return Problem("mining", backend, model, lat, _info(prior, counts, lat))


def redwoods_problem(backend: str, bins: int, *, pad: int | None = None) -> Problem:
    """The redwoods in ``bins × bins`` cells of the unit square, exposure the cell area.

    ``backend``: ``dense``, ``circulant`` (squared exponential), ``gmrf`` (Matérn-SPDE, α = 2,
    Neumann, ``pad`` cells per side) or ``gmrf-oracle`` (that GMRF's window covariance, dense).
    """
    counts, lat, area = redwood_counts(n_bins=bins)
    if backend in ("gmrf", "gmrf-oracle"):
        g = GMRFPrior.matern(lat, sd=1.0, range=0.2, alpha=2, pad=pad)
        prior = g if backend == "gmrf" else GMRFCovarianceOracle(g)
    else:
        prior = _prior(backend, lat, SquaredExponential(sd=1.0, range=0.2), RANGE_UNIT[1])
    model = LatentGaussianModel(prior, Poisson(counts, exposure=area),
                                hyperpriors=_hyperpriors(RANGE_UNIT),
                                mean=math.log(counts.sum()))
    return Problem("redwoods", backend, model, lat, _info(prior, counts, lat))


def _prior(backend: str, lat: Lattice, kern: Any, max_range: float) -> Any:
    if backend == "dense":
        return DensePrior.from_lattice(lat, kern)
    if backend == "circulant":
        return CirculantPrior(lat, kern, max_range=max_range)
    raise InvalidParameterError(f"backend={backend!r}; use 'dense' or 'circulant'.")


def _info(prior: Any, counts: np.ndarray, lat: Lattice) -> dict[str, Any]:
    out: dict[str, Any] = {"cells": int(counts.size), "events": int(counts.sum()),
                           "shape": list(lat.shape), "spacing": list(lat.spacing),
                           "prior": type(prior).__name__}
    if isinstance(prior, CirculantPrior):
        out["torus"] = list(prior.embedding_shape)
    if isinstance(prior, GMRFPrior):
        out["state"] = list(prior.state_shape)
        out["padding"] = list(prior.padding)
    if isinstance(prior, DensePrior):
        out["jitter"] = float(prior.jitter)
    if isinstance(prior, GMRFCovarianceOracle):
        out["state"] = list(prior.gmrf.state_shape)
        out["padding"] = list(prior.gmrf.padding)
    return out


# -- running ---------------------------------------------------------------------------------------
def run(prob: Problem, *, chains: int, tune: int, draws: int, seed: int, work: Path,
        thin_fields: int = 1, lgcp: Any = None) -> dict[str, Any]:
    """Sample one problem (or resume it) into a store under ``work``; its draws and timing.

    Returns
    -------
    dict
        ``theta`` (name → array (chain, draw)), ``eta`` (chain, draw, cells) of the kept
        fields, ``seconds`` (the sampling sweeps, all chains), ``timing_complete`` (false when
        a resume inside the sampling sweeps put a compilation into them), ``store``.
    """
    tag = f"{prob.name}_{prob.backend}_{'x'.join(map(str, prob.lattice.shape))}"
    store = work / f"{tag}_c{chains}_t{tune}_d{draws}_f{thin_fields}.zarr"
    model = lgcp if lgcp is not None else prob.model
    sweep = (default_sweep(lgcp.lgm, REPRESENTATION, n_latent=N_LATENT)
             if lgcp is not None else _sweep(prob.model))
    tree, post, start = sample_traced(model, sweep, n_chains=chains, n_iter=draws,
                                        n_burn=tune, seed=seed, store=store, prior_term=False,
                                        thin_fields=thin_fields)
    pos = tree["posterior"].ds
    names = [n for n in ("sd", "range", "mean", "intercept") if n in pos]
    theta = {n: np.asarray(pos[n].values, dtype=float) for n in names}
    fields = tree["posterior_fields"].ds if thin_fields > 1 else pos
    f = np.asarray(fields["f"].values, dtype=float)
    f = f.reshape(f.shape[0], f.shape[1], -1)
    shift = 0.0
    if "mean" in theta:  # the kept fields' draws, by the fields group's own draw coordinate
        idx = np.searchsorted(np.asarray(pos["draw"].values), np.asarray(fields["draw"].values))
        shift = theta["mean"][:, idx, None]
    return {"tag": tag, "store": str(store), "theta": theta, "eta": f + shift,
            "seconds": float(post[:, 0, 2].sum()), "tune": tune, "draws": draws,
            "info": prob.info,
            "timing_complete": not tune < start < tune + draws}


def _sweep(model: LatentGaussianModel) -> Any:
    from lattice_lgm.samplers import EllipticalSlice, Gibbs, HyperMove

    return Gibbs(HyperMove(model, REPRESENTATION), EllipticalSlice(model), n_latent=N_LATENT)


# -- statistics ------------------------------------------------------------------------------------
def _scalar(name: str, x: np.ndarray) -> np.ndarray:
    return np.log(x) if name in ("sd", "range") else x


def _label(name: str) -> str:
    return f"log {name}" if name in ("sd", "range") else name


def bonferroni(m: int, alpha: float = ALPHA) -> float:
    """The two-sided ``z`` bound at family-wise level ``alpha`` over ``m`` statistics."""
    from scipy.stats import norm

    return float(norm.isf(alpha / (2.0 * m)))


def _per_cell(fn: Any, x: np.ndarray, **kw: Any) -> np.ndarray:
    """An ArviZ diagnostic of every cell of ``x`` (chain, draw, cell), shape (cell,)."""
    import xarray as xr

    ds = xr.Dataset({"eta": (("chain", "draw", "cell"), x)})
    return np.asarray(fn(ds, **kw)["eta"].values, dtype=float)


def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Agreement statistics of two runs of one posterior (see the module doc).

    Returns
    -------
    dict
        ``hyper``: per hyperparameter, the means / quantiles, their MCSEs and ``z``;
        ``cells``: max |z|, the count over the Bonferroni bound and the share over 2;
        ``z_bound_hyper``, ``z_bound_cells``, ``agree``; ``ess`` and ``speed`` (see
        :func:`speed`).
    """
    import arviz as az

    hyper: dict[str, Any] = {}
    zs = []
    for n in ("sd", "range", "mean"):
        xa, xb = _scalar(n, a["theta"][n]), _scalar(n, b["theta"][n])
        row: dict[str, Any] = {}
        stats = [("mean", None)] + [(f"q{int(100 * q):02d}", q) for q in QUANTILES]
        for key, q in stats:
            if q is None:
                va, vb = float(xa.mean()), float(xb.mean())
                sa = np.asarray(az.mcse(xa, method="mean")).item()
                sb = np.asarray(az.mcse(xb, method="mean")).item()
            else:
                va, vb = float(np.quantile(xa, q)), float(np.quantile(xb, q))
                sa = np.asarray(az.mcse(xa, method="quantile", prob=q)).item()
                sb = np.asarray(az.mcse(xb, method="quantile", prob=q)).item()
            z = (va - vb) / math.hypot(sa, sb)
            zs.append(z)
            row[key] = {"a": va, "b": vb, "mcse_a": sa, "mcse_b": sb, "z": z}
        hyper[_label(n)] = row
    ea, eb = a["eta"], b["eta"]
    ma, mb = ea.mean(axis=(0, 1)), eb.mean(axis=(0, 1))
    sa, sb = _per_cell(az.mcse, ea, method="mean"), _per_cell(az.mcse, eb, method="mean")
    zc = (ma - mb) / np.hypot(sa, sb)
    zb_h, zb_c = bonferroni(len(zs)), bonferroni(zc.size)
    over = int((np.abs(zc) > zb_c).sum())
    out = {
        "hyper": hyper, "z_bound_hyper": zb_h, "z_bound_cells": zb_c,
        "max_abs_z_hyper": float(np.max(np.abs(zs))),
        "cells": {"n": int(zc.size), "max_abs_z": float(np.max(np.abs(zc))),
                  "over_bound": over, "share_over_2": float(np.mean(np.abs(zc) > 2.0)),
                  "expected_share_over_2": 0.0455,
                  "max_abs_diff_eta": float(np.max(np.abs(ma - mb))),
                  "median_mcse_eta": float(np.median(np.hypot(sa, sb)))},
    }
    out["agree"] = bool(out["max_abs_z_hyper"] <= zb_h and over == 0)
    out["speed"] = sp = speed(a, b)
    rhat = max(max(sp["a"]["rhat"].values()), max(sp["b"]["rhat"].values()))
    # MCSEs are only trustworthy for chains that have mixed: a difference between unconverged
    # runs is "inconclusive", not evidence against the backend
    out["verdict"] = verdict(out["agree"], rhat)
    return out


def verdict(agree: bool, rhat: float) -> str:
    """The pair's verdict: MCSE tests of unmixed chains (R-hat > :data:`RHAT_OK`) are weak.

    Their MCSEs are too small, so a disagreement is "inconclusive" rather than evidence
    against a backend, and an agreement is marked "weak".
    """
    if rhat <= RHAT_OK:
        return "agree" if agree else "differ"
    unmixed = f"R-hat {rhat:.2f} > {RHAT_OK}"
    return f"agree ({unmixed}: weak)" if agree else f"inconclusive ({unmixed})"


def ess_summary(r: dict[str, Any]) -> dict[str, Any]:
    """Bulk ESS: the minimum over ``log sd``, ``log range``, ``mean``; the median over cells."""
    import arviz as az

    hyper = {_label(n): np.asarray(az.ess(_scalar(n, r["theta"][n]), method="bulk")).item()
             for n in ("sd", "range", "mean") if n in r["theta"]}
    eta = _per_cell(az.ess, r["eta"], method="bulk")
    rhat = {_label(n): np.asarray(az.rhat(_scalar(n, r["theta"][n]))).item()
            for n in ("sd", "range", "mean") if n in r["theta"]}
    s = r["seconds"]
    return {"hyper": hyper, "min_hyper": min(hyper.values()), "median_cells": float(
        np.median(eta)), "rhat": rhat, "seconds": s, "tune": r["tune"], "draws": r["draws"],
            "seconds_per_sweep": s / r["draws"], "timing_complete": r["timing_complete"],
            "min_hyper_per_s": min(hyper.values()) / s, "median_cells_per_s": float(
        np.median(eta)) / s}


def speed(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """ESS per second of both runs and the ratios ``a / b`` (structured / dense)."""
    ea, eb = ess_summary(a), ess_summary(b)
    return {"a": ea, "b": eb,
            "ratio_min_hyper_per_s": ea["min_hyper_per_s"] / eb["min_hyper_per_s"],
            "ratio_median_cells_per_s": ea["median_cells_per_s"] / eb["median_cells_per_s"],
            "ratio_seconds_per_sweep": ea["seconds"] / eb["seconds"]}


def interleaved_timing(pairs: dict[str, tuple[Any, dict[str, Any]]], *, sweeps: int,
                       rounds: int, seed: int) -> dict[str, float]:
    """Median seconds per sweep of each model, timed in alternation under the same load.

    The traced times of the long runs come from whatever else the machine was doing at the
    time; here every model runs ``sweeps`` sweeps in turn, ``rounds`` times (after one
    warm-up round that compiles), each started from the last draws of its long run.

    Parameters
    ----------
    pairs : dict of str to (model, run)
        The models to time and the runs (from :func:`run`) whose final θ start them.

    Returns
    -------
    dict of str to float
        Median seconds per sweep (all chains) per key.
    """
    from lattice_lgm.runs import sample

    times: dict[str, list[float]] = {k: [] for k in pairs}
    for r in range(rounds + 1):
        for k, (model, run_) in pairs.items():
            th = run_["theta"]
            chains = next(iter(th.values())).shape[0]
            init = [{n: float(v[c, -1]) for n, v in th.items()} for c in range(chains)]
            t0 = time.perf_counter()
            sample(model, draws=sweeps, tune=0, chains=chains, random_seed=seed + r,
                   initvals=init, thin_fields=0, progressbar=False,
                   representation=REPRESENTATION, n_latent=N_LATENT)
            if r:  # round 0 compiles
                times[k].append((time.perf_counter() - t0) / sweeps)
    return {k: float(np.median(v)) for k, v in times.items()}


def posterior_summary(r: dict[str, Any]) -> dict[str, Any]:
    """Median and 90 % interval of each hyperparameter, R-hat, and the bulk ESS.

    Also the median over all chains of the first and of the last fifth of the sampling
    sweeps (``median_first_fifth``, ``median_last_fifth``): chains still drifting from their
    starts show it there, whatever R-hat says about why.
    """
    import arviz as az

    out: dict[str, Any] = {}
    for n, x in r["theta"].items():
        q = np.quantile(x, (0.05, 0.5, 0.95))
        k = max(1, x.shape[1] // 5)
        out[n] = {"q05": float(q[0]), "median": float(q[1]), "q95": float(q[2]),
                  "rhat": np.asarray(az.rhat(_scalar(n, x))).item(),
                  "ess_bulk": np.asarray(az.ess(_scalar(n, x), method="bulk")).item(),
                  "median_first_fifth": float(np.median(x[:, :k])),
                  "median_last_fifth": float(np.median(x[:, -k:]))}
    return out


def sensitivity(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """How far two posteriors under different priors are apart (not a test)."""
    ma, mb = a["eta"].mean(axis=(0, 1)), b["eta"].mean(axis=(0, 1))
    sd = np.sqrt(0.5 * (a["eta"].var(axis=(0, 1)) + b["eta"].var(axis=(0, 1))))
    return {"corr_mean_eta": float(np.corrcoef(ma, mb)[0, 1]),
            "mean_abs_diff_eta_in_post_sd": float(np.mean(np.abs(ma - mb) / sd)),
            "max_abs_diff_eta_in_post_sd": float(np.max(np.abs(ma - mb) / sd)),
            "a": posterior_summary(a), "b": posterior_summary(b)}


# -- the experiments -------------------------------------------------------------------------------
def bei_lgcp(cell: float) -> Any:
    """The ``make demo`` LGCP (examples/bei_demo.toml) at cell size ``cell`` metres."""
    from lattice_lgm.config import load_config

    cfg = load_config(ROOT / "examples" / "bei_demo.toml", [f"data.cell_size={cell:g}"])
    return cfg.build_model()


def run_all(names: Sequence[str], st: Settings, work: Path) -> dict[str, Any]:
    """Run the experiments ``names`` (shared runs are made once); their results."""
    runs: dict[str, dict[str, Any]] = {}
    res: dict[str, Any] = {}
    models: dict[str, Any] = {}

    def get(key: str, build: Any, draws: int, thin: int = 1, tune: int | None = None
            ) -> dict[str, Any]:
        if key not in runs:
            prob = build()
            models[key] = prob.model
            print(f"[structured] {key}: {prob.info}", flush=True)
            runs[key] = run(prob, chains=st.chains,
                            tune=st.tune if tune is None else tune, draws=draws,
                            seed=_seed("structured", prob.name, 0),
                            work=work, thin_fields=thin)
            s = runs[key]["seconds"]
            print(f"[structured]   {s:.1f} s of sampling sweeps ({s / draws:.3f} s/sweep)",
                  flush=True)
        return runs[key]

    b, fb = st.bins, st.fine_bins
    pad = max(1, round(GMRF_PAD_25 * b / 25))
    def timed(key_a: str, key_b: str, out: dict[str, Any]) -> dict[str, Any]:
        """Add the interleaved timing and the speed ratios it gives to a pair's result."""
        t = interleaved_timing({"a": (models[key_a], runs[key_a]),
                                "b": (models[key_b], runs[key_b])},
                               sweeps=st.timing_sweeps, rounds=st.timing_rounds,
                               seed=_seed("structured", "timing", key_a))
        sp = out["speed"]
        # ESS per sweep from the long runs (same length), seconds per sweep from the timing
        per_s = t["b"] / t["a"]
        sp["interleaved"] = {
            "seconds_per_sweep_a": t["a"], "seconds_per_sweep_b": t["b"],
            "sweeps": st.timing_sweeps, "rounds": st.timing_rounds,
            "ratio_min_hyper_per_s": sp["a"]["min_hyper"] / sp["b"]["min_hyper"] * per_s,
            "ratio_median_cells_per_s": (sp["a"]["median_cells"] / sp["b"]["median_cells"]
                                         * per_s)}
        return out

    if "mining" in names:
        d = get("mining/dense", lambda: mining_problem("dense"), st.mining_draws)
        c = get("mining/circulant", lambda: mining_problem("circulant"), st.mining_draws)
        res["mining"] = timed("mining/circulant", "mining/dense", {
            "pair": ["circulant", "dense"], "a": c["info"], "b": d["info"], **compare(c, d)})
    if "redwoods" in names or "redwoods128" in names:
        c25 = get("redwoods/circulant", lambda: redwoods_problem("circulant", b),
                  st.redwoods[1], tune=st.redwoods[0])
    if "redwoods" in names:
        d25 = get("redwoods/dense", lambda: redwoods_problem("dense", b), st.redwoods[1],
                  tune=st.redwoods[0])
        res["redwoods"] = timed("redwoods/circulant", "redwoods/dense", {
            "pair": ["circulant", "dense"], "a": c25["info"], "b": d25["info"],
            **compare(c25, d25)})
    if "gmrf" in names:
        g = get("gmrf/gmrf", lambda: redwoods_problem("gmrf", b, pad=pad), st.draws)
        o = get("gmrf/oracle", lambda: redwoods_problem("gmrf-oracle", b, pad=pad), st.draws)
        res["gmrf"] = timed("gmrf/gmrf", "gmrf/oracle", {
            "pair": ["gmrf", "dense Q⁻¹"], "a": g["info"], "b": o["info"], **compare(g, o)})
    if "redwoods128" in names or "sensitivity" in names:
        c128 = get("redwoods128/circulant", lambda: redwoods_problem("circulant", fb),
                   st.draws, st.fine_thin_fields)
    if "redwoods128" in names:
        res["redwoods128"] = {
            "fine": {"info": c128["info"], "posterior": posterior_summary(c128),
                     "ess": ess_summary(c128)},
            "coarse": {"info": c25["info"], "posterior": posterior_summary(c25),
                       "ess": ess_summary(c25)},
            "dense_cost_at_fine": _dense_cost(fb * fb),
        }
    if "sensitivity" in names:
        g128 = get("sensitivity/gmrf", lambda: redwoods_problem("gmrf", fb), st.draws,
                   st.fine_thin_fields)
        res["sensitivity"] = {"pair": ["squared exponential (circulant)",
                                       "Matérn-SPDE ν = 1 (GMRF)"],
                              "a": c128["info"], "b": g128["info"], **sensitivity(c128, g128)}
    if "bei" in names:
        out = {}
        for cell in st.bei_cells:
            key = f"bei/{cell:g}m"
            if key not in runs:
                lgcp = bei_lgcp(cell)
                prob = Problem("bei", "circulant", lgcp.lgm, lgcp.lattice,
                               {"cells": int(lgcp.lattice.size), "cell_m": cell,
                                "shape": list(lgcp.lattice.shape),
                                "torus": list(lgcp.lgm.prior.state_shape)})
                print(f"[structured] {key}: {prob.info}", flush=True)
                runs[key] = run(prob, chains=st.bei_chains, tune=st.bei_tune,
                                draws=st.bei_draws, seed=_seed("structured", "bei", cell),
                                work=work, thin_fields=max(1, st.bei_draws // 20), lgcp=lgcp)
            r = runs[key]
            out[f"{cell:g}m"] = {"info": r["info"], "posterior": posterior_summary(r),
                                 "seconds": r["seconds"],
                                 "seconds_per_sweep": r["seconds"] / st.bei_draws,
                                 "dense_cost": _dense_cost(r["info"]["cells"])}
        res["bei"] = out
    res["_runs"] = runs
    return res


def _dense_cost(n: int) -> dict[str, float]:
    """Memory of one dense covariance and flops of one Cholesky at ``n`` cells."""
    return {"cells": n, "covariance_gb": 8.0 * n * n / 1e9, "cholesky_flops": n**3 / 3.0}


# -- reporting -------------------------------------------------------------------------------------
def markdown(res: dict[str, Any]) -> str:
    """The results as a markdown report (tables and verdicts)."""
    s = res["settings"]
    src = ("Produced by `benchmarks/papers/structured.py`; what is compared and how is in its "
           "docstring.")
    done = f"Total {res['seconds_total'] / 60:.1f} min. {src}"
    if set(res["experiments"]) == {"bei"}:  # the papers' models' settings do not apply
        # the sampling time, not this process's (which only reads finished stores on a rerun)
        sweeps = sum(e["seconds"] for e in res["experiments"]["bei"].values())
        return "\n".join([
            "# The papers' Cox-process models on the structured backends: bei only", "",
            f"Mode **{res['mode']}**: `{REPRESENTATION}` slice moves of sd, range and the "
            f"intercept, then {N_LATENT} elliptical slice updates per sweep; one Numba and "
            f"one BLAS thread. Sampling sweeps {sweeps / 60:.1f} min in all. {src}", "",
            *_bei_lines(res)])
    lines = [
        "# The papers' Cox-process models on the structured backends",
        "",
        f"Mode **{res['mode']}**: {s['chains']} chains × ({s['tune']} burn-in + {s['draws']} "
        f"sweeps; mining {s['tune']} + {s['mining_draws']}, redwoods {s['bins']} × {s['bins']} "
        f"{s['redwoods'][0]} + {s['redwoods'][1]}), `{REPRESENTATION}` slice moves of sd, "
        "range and "
        f"the mean, then {N_LATENT} elliptical slice updates per sweep; one Numba and one BLAS "
        f"thread. {done}",
        "",
        "Hyperpriors: sd ~ LogUniform(0.01, 10); mean ~ N(0, 10²) around the homogeneous "
        f"log-rate; range ~ LogUniform{RANGE_MINING} days (mining), LogUniform{RANGE_UNIT} "
        "(redwoods, unit square). Bounded, so the circulant torus and GMRF padding cover "
        "them and the dense prior states the same model.",
        "",
    ]
    pairs = [k for k in ("mining", "redwoods", "gmrf") if k in res["experiments"]]
    if pairs:
        lines += ["## 1. Agreement: structured against dense, same posterior", "",
                  "z = (structured − dense) / √(mcse² + mcse²) for the posterior mean and the "
                  "5/50/95 % quantiles; Bonferroni bounds at family-wise 1 % per family.", "",
                  "| pair | statistic | structured | dense | z |", "|---|---|---|---|---|"]
        for k in pairs:
            e = res["experiments"][k]
            for hn, row in e["hyper"].items():
                for stat, v in row.items():
                    lines.append(f"| {k}: {e['pair'][0]} vs {e['pair'][1]} | {hn} {stat} | "
                                 f"{v['a']:.4g} ± {v['mcse_a']:.2g} | {v['b']:.4g} ± "
                                 f"{v['mcse_b']:.2g} | {v['z']:+.2f} |")
        lines += ["", "| pair | max \\|z\\| hyper (bound) | cells: max \\|z\\| (bound) | "
                  "cells over bound | share \\|z\\| > 2 (4.6 % expected) | max \\|Δη\\| | "
                  "verdict |",
                  "|---|---|---|---|---|---|---|"]
        for k in pairs:
            e = res["experiments"][k]
            c = e["cells"]
            lines.append(
                f"| {k} | {e['max_abs_z_hyper']:.2f} ({e['z_bound_hyper']:.2f}) | "
                f"{c['max_abs_z']:.2f} ({e['z_bound_cells']:.2f}) | {c['over_bound']} of "
                f"{c['n']} | {100 * c['share_over_2']:.1f} % | {c['max_abs_diff_eta']:.3f} | "
                f"{e['verdict'] if e['agree'] else '**' + e['verdict'] + '**'} |")
        lines += ["", "### Speed per effective sample", "",
                  "Bulk ESS of the long runs (minimum over log sd, log range, mean; median over "
                  "the cells' η) per second, as the ratio structured / dense. Seconds per sweep "
                  "(all chains) twice: *traced* over the long runs, which shared the machine "
                  "with other jobs, and *interleaved*: both backends timed in turn from their "
                  "runs' final draws, the fair comparison.", "",
                  "| pair | s/sweep traced: structured, dense | s/sweep interleaved: structured,"
                  " dense | min ESS hyper: structured, dense | ratio per s (interleaved) | "
                  "median ESS cells: structured, dense | ratio per s (interleaved) | "
                  "R-hat max: structured, dense |", "|---|---|---|---|---|---|---|---|"]
        for k in pairs:
            sp = res["experiments"][k]["speed"]
            a, b, il = sp["a"], sp["b"], sp.get("interleaved", {})
            lines.append(
                f"| {k} | {a['seconds_per_sweep']:.4f}, {b['seconds_per_sweep']:.4f} | "
                f"{_g(il.get('seconds_per_sweep_a'))}, {_g(il.get('seconds_per_sweep_b'))} | "
                f"{a['min_hyper']:.0f}, {b['min_hyper']:.0f} | "
                f"{_g(il.get('ratio_min_hyper_per_s'))} | {a['median_cells']:.0f}, "
                f"{b['median_cells']:.0f} | {_g(il.get('ratio_median_cells_per_s'))} | "
                f"{max(a['rhat'].values()):.3f}, {max(b['rhat'].values()):.3f} |")
        lines.append("")
    if "redwoods128" in res["experiments"]:
        e = res["experiments"]["redwoods128"]
        dc = e["dense_cost_at_fine"]
        lines += ["## 2. Where the dense path cannot go", "",
                  f"Redwoods on {e['fine']['info']['shape']} cells (circulant torus "
                  f"{e['fine']['info'].get('torus')}): a dense covariance would take "
                  f"{dc['covariance_gb']:.1f} GB and {dc['cholesky_flops']:.1e} flops per θ. "
                  "Same kernel and prior as the 25 × 25 run:", "",
                  "| grid | sd: median [5 %, 95 %] | range: median [5 %, 95 %] | mean: median |"
                  " R-hat max | s/sweep |", "|---|---|---|---|---|---|"]
        for key in ("coarse", "fine"):
            p, info = e[key]["posterior"], e[key]["info"]
            lines.append(
                f"| {info['shape']} | {p['sd']['median']:.3g} [{p['sd']['q05']:.3g}, "
                f"{p['sd']['q95']:.3g}] | {p['range']['median']:.3g} [{p['range']['q05']:.3g}, "
                f"{p['range']['q95']:.3g}] | {p['mean']['median']:.3g} | "
                f"{max(v['rhat'] for v in p.values()):.3f} | "
                f"{e[key]['ess']['seconds_per_sweep']:.4f} |")
        lines.append("")
    lines += _bei_lines(res)
    if "sensitivity" in res["experiments"]:
        e = res["experiments"]["sensitivity"]
        lines += ["## 3. Sensitivity: squared exponential against Matérn-SPDE (not a test)", "",
                  f"Correlation of the posterior mean log-intensity maps "
                  f"{e['corr_mean_eta']:.3f}; mean |Δη| {e['mean_abs_diff_eta_in_post_sd']:.2f} "
                  f"posterior sds (max {e['max_abs_diff_eta_in_post_sd']:.2f}).", "",
                  "| prior | sd: median [5 %, 95 %] | range: median [5 %, 95 %] | R-hat max |",
                  "|---|---|---|---|"]
        for key, lab in zip(("a", "b"), e["pair"], strict=True):
            p = e[key]
            lines.append(
                f"| {lab} | {p['sd']['median']:.3g} [{p['sd']['q05']:.3g}, "
                f"{p['sd']['q95']:.3g}] | {p['range']['median']:.3g} [{p['range']['q05']:.3g}, "
                f"{p['range']['q95']:.3g}] | {max(v['rhat'] for v in p.values()):.3f} |")
        lines.append("")
    return "\n".join(lines)


def _bei_lines(res: dict[str, Any]) -> list[str]:
    """The bei section of the report (empty without the bei experiment)."""
    if "bei" not in res["experiments"]:
        return []
    s = res["settings"]
    lines = ["### bei (the demo's LGCP, `~ elev + grad`, Matérn 3/2, PC priors)", "",
              f"{s['bei_chains']} chains × ({s['bei_tune']} burn-in + {s['bei_draws']} "
              "sweeps) per grid. The smallest bulk ESS is over sd, range and the intercept "
              "(all chains pooled). Drift: the median range over all chains in the first "
              "and in the last fifth of the sampling sweeps; chains that have forgotten "
              "their starts give the same value twice, within Monte Carlo error.", "",
              "| cells | grid | sd: median [5 %, 95 %] | range m: median [5 %, 95 %] | "
              "range m: first → last fifth | R-hat max | smallest bulk ESS | "
              "s/sweep (all chains) | dense covariance |",
              "|---|---|---|---|---|---|---|---|---|"]
    for key, e in res["experiments"]["bei"].items():
        p = e["posterior"]
        low = min(p, key=lambda n: p[n]["ess_bulk"])
        lines.append(
            f"| {key} | {e['info']['shape']} | {p['sd']['median']:.3g} "
            f"[{p['sd']['q05']:.3g}, {p['sd']['q95']:.3g}] | {p['range']['median']:.3g} "
            f"[{p['range']['q05']:.3g}, {p['range']['q95']:.3g}] | "
            f"{_g(p['range'].get('median_first_fifth'))} → "
            f"{_g(p['range'].get('median_last_fifth'))} | "
            f"{max(v['rhat'] for v in p.values()):.2f} | "
            f"{p[low]['ess_bulk']:.0f} ({low}) | {e['seconds_per_sweep']:.3f} | "
            f"{e['dense_cost']['covariance_gb']:.2g} GB |")
    lines.append("")
    return lines


def figure(res: dict[str, Any], runs: dict[str, dict[str, Any]], path: Path) -> None:
    """The figure: agreement histograms, mean log-intensity maps and the bei range traces.

    Rows: the log-range posterior of each agreement pair, the mean log-intensity maps, and the
    bei runs' range by chain (drift from the starts shows there).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pairs = [(k, f"{k}/{'gmrf' if k == 'gmrf' else 'circulant'}",
              f"{k}/{'oracle' if k == 'gmrf' else 'dense'}")
             for k in ("mining", "redwoods", "gmrf") if k in res]
    maps = [(k, lab) for k, lab in (("redwoods/circulant", "SE, coarse grid"),
                                    ("redwoods128/circulant", "SE, fine grid, circulant"),
                                    ("sensitivity/gmrf", "Matérn-SPDE, fine grid, GMRF"))
            if k in runs]
    bei = sorted((k for k in runs if k.startswith("bei/")), key=lambda k: float(k[4:-1]))
    ncol = max(len(pairs), len(maps), len(bei), 1)
    used = [name for name, items in (("pairs", pairs), ("maps", maps), ("bei", bei)) if items]
    row = {name: i for i, name in enumerate(used)}
    fig, axes = plt.subplots(max(1, len(used)), ncol, figsize=(4.2 * max(ncol, 2),
                                                                 3.75 * max(1, len(used))),
                             squeeze=False)
    for j, (k, ka, kb) in enumerate(pairs):
        ax = axes[row["pairs"], j]
        for key, lab, col in ((ka, res[k]["pair"][0], "C0"), (kb, res[k]["pair"][1], "C1")):
            x = np.log(runs[key]["theta"]["range"]).ravel()
            ax.hist(x, bins=40, density=True, histtype="step", color=col, label=lab)
        ax.set_title(f"{k}: log range ({res[k]['verdict'].split(' (')[0]})")
        ax.legend(fontsize=8)
    for j, (k, lab) in enumerate(maps):
        ax = axes[row["maps"], j]
        r = runs[k]
        shape = r["info"]["shape"]
        m = r["eta"].mean(axis=(0, 1)).reshape(shape)
        im = ax.imshow(m, origin="lower", extent=(0, 1, 0, 1), cmap="viridis")
        ax.set_title(lab)
        fig.colorbar(im, ax=ax, shrink=0.8, label="posterior mean η (log points per unit²)")
    for j, k in enumerate(bei):
        ax = axes[row["bei"], j]
        x = runs[k]["theta"]["range"]
        for c in range(x.shape[0]):
            ax.plot(np.arange(x.shape[1]), x[c], lw=0.6, label=f"chain {c}")
        ax.set_title(f"bei at {k[4:]}: range by chain")
        ax.set_xlabel("sampling sweep (after burn-in)")
        ax.set_ylabel("range (m)")
        ax.legend(fontsize=7)
    for ax in axes.ravel():
        if not ax.has_data():
            ax.set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# -- entry point ----------------------------------------------------------------------------------
def parse_length(text: str, flag: str = "--redwoods-length") -> tuple[int, int]:
    """``flag``'s value ``BURN_IN,SWEEPS`` as two whole numbers (sweeps at least 10).

    Raises
    ------
    InvalidParameterError
        For anything else.
    """
    parts = text.split(",")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise InvalidParameterError(
            f"{flag} {text!r} is not BURN_IN,SWEEPS with whole numbers; e.g. "
            f"{flag} 1000,3000.")
    tune, draws = (int(p) for p in parts)
    if draws < 10:
        raise InvalidParameterError(f"{flag} {text!r}: give at least 10 sampling sweeps.")
    return tune, draws


def main(argv: Sequence[str] | None = None) -> int:
    """Run the comparison (``--quick`` for the pipeline at tiny sizes); see the module doc."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="tiny sizes (2 chains, 10² and 32² grids, bei at 50 m) in ~2 min")
    ap.add_argument("--out", type=Path, default=None,
                    help="results dir (default results/quick/ with --quick, else results/)")
    ap.add_argument("--work", type=Path, default=None, help="run stores (default <out>/work)")
    ap.add_argument("--experiments", nargs="+", choices=EXPERIMENTS, default=None)
    ap.add_argument("--chains", type=int, default=None)
    ap.add_argument("--tune", type=int, default=None)
    ap.add_argument("--draws", type=int, default=None,
                    help="sampling sweeps (mining gets 2x this unless --mining-draws)")
    ap.add_argument("--mining-draws", type=int, default=None,
                    help=f"sampling sweeps of the mining pair (full mode: "
                         f"{Settings.mining_draws})")
    ap.add_argument("--redwoods-length", default=None, metavar="BURN_IN,SWEEPS",
                    help="burn-in and sampling sweeps of the 25 x 25 redwoods runs (full mode: "
                         f"{','.join(map(str, Settings.redwoods))}; else --tune,--draws)")
    ap.add_argument("--bei-length", default=None, metavar="BURN_IN,SWEEPS",
                    help="burn-in and sampling sweeps of the bei runs (full mode: "
                         f"{Settings.bei_tune},{Settings.bei_draws})")
    ap.add_argument("--threads", type=int, default=1, help="Numba threads (default 1)")
    args = ap.parse_args(argv)
    import numba

    numba.set_num_threads(args.threads)
    st = dataclasses.replace(QUICK if args.quick else Settings())  # never mutate QUICK
    custom = {k: v for k, v in (("chains", args.chains), ("tune", args.tune),
                                ("draws", args.draws), ("mining_draws", args.mining_draws))
              if v is not None}
    for k, v in custom.items():
        lo = 2 if k == "chains" else 0 if k == "tune" else 10
        if v < lo:
            flag = k.replace("_", "-")
            raise InvalidParameterError(f"--{flag}={v} is too small; give at least {lo}.")
        setattr(st, k, v)
    if "draws" in custom and "mining_draws" not in custom:
        st.mining_draws = 2 * custom["draws"]
    if ("tune" in custom or "draws" in custom) and args.redwoods_length is None:
        st.redwoods = (st.tune, st.draws)  # a custom length applies to every pair but mining
    if args.redwoods_length is not None:
        st.redwoods = parse_length(args.redwoods_length)
    if args.bei_length is not None:
        st.bei_tune, st.bei_draws = parse_length(args.bei_length, "--bei-length")
    mode = ("quick" if args.quick else "custom" if custom or args.experiments
            or args.redwoods_length is not None or args.bei_length is not None else "full")
    out = args.out or (QUICK_OUT if args.quick else RESULTS)
    work = args.work or out / "work"
    out.mkdir(parents=True, exist_ok=True)
    if args.quick and out == QUICK_OUT:
        (out / ".gitignore").write_text("*\n")  # results/quick/ is never committed
    work.mkdir(parents=True, exist_ok=True)
    names = list(args.experiments or EXPERIMENTS)
    t0 = time.perf_counter()
    exps = run_all(names, st, work)
    runs = exps.pop("_runs")
    res = {"mode": mode, "machine": _machine(), "representation": REPRESENTATION,
           "settings": {"chains": st.chains, "tune": st.tune, "draws": st.draws,
                        "mining_draws": st.mining_draws, "redwoods": list(st.redwoods),
                        "bins": st.bins,
                        "fine_bins": st.fine_bins, "bei_cells": list(st.bei_cells),
                        "bei_chains": st.bei_chains, "bei_tune": st.bei_tune,
                        "bei_draws": st.bei_draws, "alpha": ALPHA, "numba_threads":
                            args.threads, "work": str(work)},
           "experiments": exps, "seconds_total": time.perf_counter() - t0}
    write_outputs(out, STEM, res, markdown(res), lambda path: figure(exps, runs, path))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
