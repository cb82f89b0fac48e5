"""The GPDS at lattice scale: ``g`` on a lattice, the latent history drawn exactly given ``g``.

The paper's sampler (§4) carries ``g`` only where it has been looked at — the data and the
rejections — so each move refactors an ``(N + M)``-point covariance, ``O((N + M)³)``.  Here
``g`` is a field on a regular lattice over the base measure's effective support with a
structured prior (circulant embedding or a GMRF: the library's priors), and is *constant on
each cell*: ``g(x) = g_c`` for ``x`` in cell ``c`` (a lookup).  The model is the GPDS of
eq. 1 with that piecewise-constant ``g`` and ``π`` restricted to the lattice's box:

    ``f(x | g) = π(x) Φ(g_{c(x)}) / Z[g]``,   ``Z[g] = Σ_c π_c Φ(g_c)``,

where ``π_c`` is π's mass in cell ``c`` (normalised over the box) — so ``Z[g]``, intractable
for the paper, is a finite sum here.  That opens an *exact* update of the whole latent history
given ``g`` in place of the paper's §4.1–4.2 Metropolis–Hastings moves: Algorithm 1 run to its
``N``th acceptance makes ``M`` rejections with ``M | g ~ NegativeBinomial(N, Z[g])`` (failures
before the ``N``th success of trials with success probability ``Z[g]``; the orderings factor of
eq. 4 is its binomial coefficient), and each rejection falls in cell ``c`` with probability
``π_c (1 − Φ(g_c)) / (1 − Z[g])``, independently — multinomial counts ``b_c``.  Given the
counts, the field's target is the paper's ``GP(g) Π_n Φ(g(x_n)) Π_m (1 − Φ(g(x_m)))`` =
``GP(g) Π_c Φ(g_c)^{a_c} (1 − Φ(g_c))^{b_c}`` (``a_c`` data in the cell): a binomial
likelihood per cell, updated by elliptical slice sampling (Murray, Adams & MacKay 2010) and the
covariance hyperparameters by the Murray & Adams (2010) moves — the library's samplers,
unchanged.  An iteration costs ``O(cells · log cells)`` (circulant) whatever ``N + M``.

The same posterior has a second augmentation, with one scalar in place of the ``M``
rejections (the sigmoidal Gaussian Cox process of Adams, Murray & MacKay, ICML 2009): if the
counts per cell were Poisson with rates ``λ π_c Φ(g_c)`` and ``p(λ) ∝ 1/λ``, integrating
``λ`` out leaves ``Γ(N) Π_c (π_c Φ(g_c))^{a_c} / Z[g]^N`` — the lattice GPDS's likelihood.
So ``λ | g ~ Gamma(N, Z[g])`` exactly, and given ``λ`` the field sees Poisson sites
``a_c log Φ(g_c) − λ π_c Φ(g_c)`` (:class:`~lattice_lgm.likelihoods.SigmoidPoisson`): the
``N`` data's information, not the ``N + M`` of the history's binomial sites
(``LatticeSweep(augmentation="scale")``).

Within-cell error (against the continuous-``g`` GPDS): ``g(x) − g_c`` is Gaussian with
variance ``2 sd² (1 − ρ(h))`` for ``x`` at distance ``h`` from the centre ``c``, at most the
half diagonal ``h*``; as ``Φ′ ≤ 1/4`` (logistic) or ``1/√(2π)`` (probit), the root mean
square error of ``Φ(g(x))`` is at most ``Φ′_max · sd · √(2 (1 − ρ(h*)))``
(:meth:`LatticeGPDS.interpolation_bound`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy import special

from .._validation import positive_int
from ..covariance import Covariance, SquaredExponential
from ..errors import InvalidDataError, InvalidParameterError
from ..hyperpriors import Hyperprior, LogNormal
from ..lattice import Lattice
from ..likelihoods import Binomial, SigmoidPoisson
from ..models.latent import LatentGaussianModel
from ..priors import CirculantPrior
from ..samplers import init_state
from ..samplers.state import LatentState
from ..store.base import hash_arrays
from .base import GaussianBase, UniformBase, link, log_link
from .lattice_sweep import AUGMENTATIONS, DEFAULT_AUGMENTATION, REJECTIONS, LatticeSweep
from .predict import PredictiveDensity, batch_means_se

__all__ = ["AUGMENTATIONS", "DEFAULT_AUGMENTATION", "REJECTIONS", "SUPPORT_SD", "LatticeGPDS",
           "LatticeSweep"]

#: a Gaussian base measure's lattice spans ``mean ± SUPPORT_SD · sd`` on each axis (the mass
#: outside is 2 Φ(−4) = 6.3e-5 per axis; recorded as :attr:`LatticeGPDS.lost_mass`)
SUPPORT_SD = 4.0
#: the hyperparameter move's representation by default (decision 106)
DEFAULT_REPRESENTATION = "prior-white"
#: the Bernoulli/binomial likelihood's link for each squashing function Φ
_LINK = {"logistic": "logit", "probit": "probit"}
#: the largest slope of each Φ (for the within-cell error bound)
_MAX_SLOPE = {"logistic": 0.25, "probit": 1.0 / math.sqrt(2.0 * math.pi)}


def _one_minus(link_name: str, eta: np.ndarray) -> np.ndarray:
    """``1 − Φ(η)`` without cancellation (``Φ(−η)`` for both links)."""
    return special.expit(-eta) if link_name == "logistic" else special.ndtr(-eta)


class _RunViewMixin:
    """What :func:`lattice_lgm.runs.sample`, the store, ``resume`` and the CLI need (RunView).

    Per draw: θ, ``M`` (``n_rejections``) and ``Z[g]`` (``normaliser``) as scalars, ``g`` on
    the lattice as the field, and the latent history — the variable-size rejection set — as
    its counts per cell (``rejection_counts``, int32, the field's dims and thinning): on the
    lattice ``g`` is constant per cell, so a rejection's cell is all the posterior says of
    it (its place in the cell follows ``π`` there; :meth:`LatticeGPDS.history_points`
    places them).  Running means of the density per cell (``density``) and of the
    rejections per cell (``rejections``) are summaries.  The counts also live in the chain
    state (checkpointed, so a resume is exact).
    """

    summary_names = ("density", "rejections")
    exceed_on: str | None = None

    @property
    def coef_names(self) -> list[str]:
        """No coefficients: ``posterior.beta`` is not stored."""
        return []

    def _view_init(self) -> None:
        lat = self.lattice
        self.dims, self.shape = tuple(lat.dims), tuple(lat.shape)
        self.field_coords = {k: np.asarray(v) for k, v in lat.coords().items()}
        self.inside = np.ones(lat.shape, dtype=bool)
        self.units = lat.units or ""

    def default_representation(self) -> str:
        """The hyperparameter move's representation (decision 106: measured)."""
        return DEFAULT_REPRESENTATION

    def default_sweep(self, representation: str, n_latent: int, tune: int = 0) -> LatticeSweep:
        """:class:`LatticeSweep` with ``n_latent`` elliptical slice updates per sweep."""
        return LatticeSweep(self, representation, n_latent=n_latent, tune=tune,
                            augmentation=DEFAULT_AUGMENTATION)

    def record(self, state: LatentState) -> dict[str, Any]:
        """One draw of every chain (scalars, ``g`` on the lattice, the summaries' values)."""
        n = state.n_chains
        etas = np.stack([self.eta(state, c) for c in range(n)])
        rej = np.asarray(state.extras[REJECTIONS], dtype=float).reshape(n, *self.shape)
        scalars = {k: np.array(v, dtype=float) for k, v in state.theta.items()}
        scalars["n_rejections"] = rej.reshape(n, -1).sum(axis=1)
        scalars["normaliser"] = np.array([self.normaliser(e) for e in etas])
        dens = np.stack([self.cell_density(e) for e in etas]).reshape(n, *self.shape)
        counts = np.asarray(state.extras[REJECTIONS]).reshape(n, *self.shape)
        if counts.size and int(counts.max()) > np.iinfo(np.int32).max:
            raise OverflowError(f"a cell holds {int(counts.max())} rejections, more than the "
                                "store's int32 rejection_counts can hold.")
        return {"scalars": scalars, "beta": None,
                "f": etas.reshape(n, *self.shape).astype(np.float32),
                "fields": {"rejection_counts": counts.astype(np.int32)},
                "summary": {"density": dens, "rejections": rej}}

    def data_groups(self) -> dict[str, dict[str, tuple[tuple[str, ...], np.ndarray]]]:
        """The points and their counts per cell (``observed_data``)."""
        return {"observed_data": {"points": (("point", "coord"), self.data),
                                  "counts": (self.dims, self.data_counts)}}

    def extra_coords(self) -> dict[str, np.ndarray]:
        """Coordinates of the points' dims."""
        return {"point": np.arange(len(self.data)),
                "coord": np.array(["x", "y"][: self.data.shape[1]])}

    def data_hash(self) -> str:
        """A digest of the data and the lattice (a resume with other data is refused)."""
        return hash_arrays({"data": self.data, "masses": self.masses})

    def priors_text(self) -> dict[str, str]:
        """The hyperpriors as stated."""
        return {k: hp.describe(k) for k, hp in self.hyperpriors.items()}

    def describe(self) -> str:
        """One line for ``lattice-lgm run``."""
        base = type(self.base).__name__
        return (f"GPDS (lattice): {len(self.data)} points, {self.lattice.shape} cells over the "
                f"support of a {base}, {self.link} Φ, {type(self.prior.kernel).__name__} "
                f"kernel; hyperpriors {self.priors_text() or 'none (θ fixed)'}")


class LatticeGPDS(_RunViewMixin):
    """A GPDS whose ``g`` is a field on a lattice over the base measure's support.

    Parameters
    ----------
    data : array_like, shape (N, d)
        Observed points, ``d`` = 1 or 2 (axis order ``(x,)`` or ``(x, y)``: the data's own
        columns; the lattice stores them in array order ``(y, x)``).
    base : UniformBase or GaussianBase
        ``π``.  A Gaussian needs a diagonal covariance (its cell masses are products of
        normal CDF differences); it is restricted to ``mean ± SUPPORT_SD · sd``.
    cells : int or tuple of int
        Cells per axis (in the data's column order).
    kernel : Covariance, optional
        The GP's covariance at the start (default: squared exponential with ``sd = 1`` and
        a lengthscale of a tenth of the box's shortest side).
    hyperpriors : mapping of str to Hyperprior, optional
        Priors of the kernel's hyperparameters to sample (``sd``, ``range``); a ``range``
        prior needs a finite upper bound (the torus is sized for it).
    link_name : {"logistic", "probit"}
        The squashing function ``Φ``.
    mean : float
        The GP's constant mean.

    Attributes
    ----------
    lattice : Lattice
    prior : CirculantPrior
    masses : ndarray, shape lattice.shape
        ``π_c``: the base measure's mass per cell, normalised over the box.
    data_counts : ndarray of int, shape lattice.shape
        ``a_c``: data per cell.
    lost_mass : float
        The base measure's mass outside the box (0 for a uniform base).
    lgm : LatentGaussianModel
        The field's model with no rejections (hyperparameter names, initial values).
    """

    def __init__(self, data: Any, base: UniformBase | GaussianBase, *,
                 cells: int | Sequence[int] = 64, kernel: Covariance | None = None,
                 hyperpriors: Mapping[str, Hyperprior] | None = None,
                 link_name: str = "logistic", mean: float = 0.0) -> None:
        link(link_name)  # a clear error for an unknown Φ
        if not isinstance(base, (UniformBase, GaussianBase)):
            raise InvalidParameterError(
                f"base={base!r} must be a gpds.UniformBase or gpds.GaussianBase.")
        d = base.ndim
        if d not in (1, 2):
            raise InvalidParameterError(
                f"the base measure has {d} dimensions; the lattice path takes 1 or 2 (use the "
                "dense sampler, lattice_lgm.gpds.history, in more).")
        pts = np.asarray(data, dtype=float)
        pts = pts.reshape(-1, 1) if (pts.ndim == 1 and d == 1) else pts
        if pts.ndim != 2 or pts.shape[1] != d or len(pts) == 0:
            raise InvalidDataError(
                f"data has shape {np.shape(data)}; give N >= 1 points of shape (N, {d}).")
        if not np.all(np.isfinite(pts)):
            i = int(np.argmax(~np.all(np.isfinite(pts), axis=1)))
            raise InvalidDataError(
                f"data[{i}]={pts[i].tolist()} is not finite; drop or repair the point.")
        n_cells = (cells,) * d if isinstance(cells, (int, np.integer)) else tuple(cells)
        if len(n_cells) != d:
            raise InvalidParameterError(f"cells={cells!r}: give one count per axis ({d}).")
        for c in n_cells:
            positive_int("cells", int(c), "cells per axis, e.g. 64")
        lo, hi, self.lost_mass = self._box(base)
        outside = ~(np.all((pts >= lo) & (pts <= hi), axis=1) & base.contains(pts))
        if np.any(outside):
            i = int(np.argmax(outside))
            raise InvalidDataError(
                f"data[{i}]={pts[i].tolist()} is outside the lattice's box {lo.tolist()}–"
                f"{hi.tolist()} over the base measure's support: the model gives it no mass; "
                "widen the base measure (its sd or box) or drop the point.")
        spacing = (hi - lo) / np.asarray(n_cells)
        # array order is reversed column order in 2-D ((y, x)), as everywhere in the library
        self.lattice = Lattice(tuple(int(c) for c in n_cells[::-1]),
                               spacing=tuple(float(s) for s in spacing[::-1]),
                               origin=tuple(float(v) for v in lo[::-1]))
        self.data, self.base, self.link, self.mean = pts, base, link_name, float(mean)
        self._lo, self._hi = lo, hi
        self.masses = self._cell_masses(base, lo, hi, np.asarray(n_cells))
        self.data_cells = self.cell_of(pts)
        self.data_counts = np.bincount(self.data_cells, minlength=self.lattice.size).reshape(
            self.lattice.shape)
        if kernel is None:
            kernel = SquaredExponential(sd=1.0, lengthscale=float(np.min(hi - lo)) / 10.0)
        hp = dict(hyperpriors or {})
        max_range = None
        if "range" in hp:
            upper = float(getattr(hp["range"], "upper", math.inf))
            k_range = float(np.max(kernel.range))
            if not math.isfinite(upper):
                raise InvalidParameterError(
                    f"hyperpriors['range']={hp['range']!r} has no upper bound; the lattice's "
                    "torus is sized for the largest range, so give one, e.g. LogNormal(mu, "
                    "sigma, upper=<the box's side>).")
            if k_range > upper:
                raise InvalidParameterError(
                    f"the kernel's range {k_range:g} exceeds the range prior's upper bound "
                    f"{upper:g}; start the kernel inside the prior's support.")
            max_range = upper
        self.prior = CirculantPrior(self.lattice, kernel, max_range=max_range)
        self.hyperpriors = hp
        self.lgm = self.model_for(np.zeros(self.lattice.shape, dtype=np.int64))
        self._view_init()

    @classmethod
    def from_config(cls, config: Any) -> LatticeGPDS:
        """The model of a run configuration with ``model.family = "gpds"``.

        ``data.points``: a CSV with columns ``x`` (and ``y``).  ``model.options`` (all
        optional): ``cells`` (64 per axis); ``lower``/``upper`` for a uniform base measure on
        that box (default: the data's bounding box widened by 5 % per side) or ``base_mean``
        and ``base_sd`` (per-axis lists) for a Gaussian one; ``link`` ("logistic"); ``mean``
        (0); ``sd`` (1) and ``range`` (a fifth of the box's shortest side): the kernel's start
        and the medians of the log-normal priors of the squared-exponential kernel's ``sd``
        and ``range``, with log-scale sds ``sd_sigma`` and ``range_sigma`` (0.5) and the
        range's upper bound ``range_upper`` (the box's longest side; the torus is sized for
        it).
        """
        import pandas as pd

        r = config.resolved
        opts = dict(r["model"]["options"])
        known = {"cells", "lower", "upper", "base_mean", "base_sd", "link", "mean", "sd",
                 "range", "sd_sigma", "range_sigma", "range_upper"}
        unknown = sorted(set(opts) - known)
        if unknown:
            raise InvalidParameterError(
                f"model.options has unknown keys {unknown} for the GPDS; known: "
                f"{sorted(known)}.")
        table = pd.read_csv(r["data"]["points"])
        cols = [c for c in ("x", "y") if c in table.columns]
        if not cols or cols[0] != "x":
            raise InvalidDataError(
                f"{r['data']['points']} has columns {list(table.columns)}; the GPDS reads "
                "'x' (and 'y').")
        pts = table[cols].to_numpy(dtype=float)
        if "base_mean" in opts or "base_sd" in opts:
            base: Any = GaussianBase.create(opts.get("base_mean", pts.mean(axis=0)),
                                            np.square(opts.get("base_sd", pts.std(axis=0))))
            lo = base.mean - SUPPORT_SD * np.diag(base.chol)
            hi = base.mean + SUPPORT_SD * np.diag(base.chol)
        else:
            finite = pts[np.all(np.isfinite(pts), axis=1)]
            span = np.ptp(finite, axis=0) if len(finite) else np.ones(len(cols))
            span = np.where(span > 0, span, 1.0)
            lo = np.asarray(opts.get("lower", finite.min(axis=0) - 0.05 * span), dtype=float)
            hi = np.asarray(opts.get("upper", finite.max(axis=0) + 0.05 * span), dtype=float)
            base = UniformBase.create(lo, hi)
        side = np.asarray(hi, dtype=float) - np.asarray(lo, dtype=float)
        sd = float(opts.get("sd", 1.0))
        rng_ = float(opts.get("range", float(side.min()) / 5.0))
        upper = float(opts.get("range_upper", float(side.max())))
        hyper = {"sd": LogNormal(math.log(sd), float(opts.get("sd_sigma", 0.5))),
                 "range": LogNormal(math.log(rng_), float(opts.get("range_sigma", 0.5)),
                                    upper=upper)}
        return cls(pts, base, cells=opts.get("cells", 64),
                   kernel=SquaredExponential(sd=sd, lengthscale=rng_ / 2.0),
                   hyperpriors=hyper, link_name=opts.get("link", "logistic"),
                   mean=float(opts.get("mean", 0.0)))

    # -- geometry -------------------------------------------------------------------------------
    @staticmethod
    def _box(base: Any) -> tuple[np.ndarray, np.ndarray, float]:
        if isinstance(base, UniformBase):
            return base.lower.copy(), base.upper.copy(), 0.0
        chol = base.chol
        if not np.allclose(chol, np.diag(np.diag(chol))):
            raise InvalidParameterError(
                "the lattice path needs a Gaussian base measure with a diagonal covariance "
                "(cell masses are products of normal CDFs); whiten or rotate the data first.")
        sd = np.diag(chol)
        lo, hi = base.mean - SUPPORT_SD * sd, base.mean + SUPPORT_SD * sd
        inside = float(np.prod(special.ndtr(SUPPORT_SD) - special.ndtr(-SUPPORT_SD)))
        return lo, hi, 1.0 - inside

    def _cell_masses(self, base: Any, lo: np.ndarray, hi: np.ndarray,
                     n_cells: np.ndarray) -> np.ndarray:
        per_axis = []
        for a in range(len(lo)):
            edges = np.linspace(lo[a], hi[a], int(n_cells[a]) + 1)
            if isinstance(base, UniformBase):
                m = np.diff(edges)
            else:
                z = (edges - base.mean[a]) / base.chol[a, a]
                m = np.diff(special.ndtr(z))
            per_axis.append(m / m.sum())
        out = per_axis[0]
        for m in per_axis[1:]:
            out = np.multiply.outer(m, out)  # array order (y, x): the later column first
        return out

    def cell_of(self, x: Any) -> np.ndarray:
        """Flat cell index (C order of :attr:`lattice`) of each point ``x`` (n, d)."""
        pts = np.asarray(x, dtype=float).reshape(-1, len(self._lo))
        n_cells = np.asarray(self.lattice.shape[::-1])
        idx = np.floor((pts - self._lo) / (self._hi - self._lo) * n_cells).astype(np.int64)
        idx = np.clip(idx, 0, n_cells - 1)  # the box's upper faces belong to the last cells
        flat = idx[:, 0]
        if idx.shape[1] == 2:
            flat = idx[:, 1] * n_cells[0] + idx[:, 0]
        return flat

    def interpolation_bound(self, kernel: Covariance | None = None) -> float:
        """RMS bound on ``|Φ(g(x)) − Φ(g_{c(x)})|`` against a continuous ``g`` (module doc)."""
        k = kernel or self.prior.kernel
        return _MAX_SLOPE[self.link] * math.sqrt(2.0 * self.within_cell_variance(k))

    def within_cell_variance(self, kernel: Covariance) -> float:
        """``sd² (1 − ρ(h*))``, ``h*`` a cell's half diagonal (module doc).

        Half the largest variance of ``g(x) − g_c`` within a cell.
        """
        half = 0.5 * (self._hi - self._lo) / np.asarray(self.lattice.shape[::-1])
        rho = float(kernel(np.zeros((1, len(half))), half[None])[0, 0]) / kernel.variance
        return kernel.variance * max(1.0 - rho, 0.0)

    # -- the model given the latent history ----------------------------------------------------
    def model_for(self, rejections: np.ndarray) -> LatentGaussianModel:
        """The field's model given rejection counts per cell (binomial sites)."""
        a = self.data_counts
        return LatentGaussianModel(
            self.prior, Binomial(a, a + np.asarray(rejections), link=_LINK[self.link]),
            hyperpriors=self.hyperpriors, mean=self.mean)

    def model_for_scale(self, scale: float) -> LatentGaussianModel:
        """The field's model given the scale ``λ``: Poisson counts with rate ``λ π_c Φ(g_c)``."""
        return LatentGaussianModel(
            self.prior, SigmoidPoisson(self.data_counts, scale * self.masses,
                                       link=_LINK[self.link]),
            hyperpriors=self.hyperpriors, mean=self.mean)

    def eta(self, state: LatentState, c: int) -> np.ndarray:
        """``g`` on the lattice's cells (flat, C order) of chain ``c``."""
        f = np.asarray(state.f[c]).reshape(-1)
        return f[self.lgm.state_index] + self.lgm.base_obs(state.theta_of(c))

    def normaliser(self, eta: np.ndarray) -> float:
        """``Z[g] = Σ_c π_c Φ(g_c)``."""
        return float(np.sum(self.masses.reshape(-1) * link(self.link)(eta)))

    def draw_history(self, eta: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The latent history given ``g``, exactly: rejection counts per cell (module doc).

        Returns
        -------
        ndarray of int64, shape lattice.shape
        """
        m = self.masses.reshape(-1)
        p_rej = m * _one_minus(self.link, eta)
        total = float(p_rej.sum())  # 1 − Z[g], without cancellation
        z = 1.0 - total
        if not z > 0.0:
            raise InvalidParameterError(
                "Z[g] = 0: the field accepts nowhere; the chain has left the support.")
        n_rej = int(rng.negative_binomial(len(self.data), z))
        counts = rng.multinomial(n_rej, p_rej / total) if n_rej else np.zeros(len(m), np.int64)
        return counts.reshape(self.lattice.shape).astype(np.int64)

    # -- chains ---------------------------------------------------------------------------------
    def init_state(self, rngs: Sequence[np.random.Generator],
                   chains: Sequence[int] | None = None, initvals: Any = None,
                   warm: bool = True) -> LatentState:
        """Chains at a prior draw of the field, no rejections yet (the first sweep draws them).

        ``initvals``: starting hyperparameters (one mapping per chain, or one for all);
        ``warm`` is accepted for the run protocol (there is no warm start to skip).
        """
        theta = (None if initvals is None else dict(initvals) if isinstance(initvals, Mapping)
                 else [dict(t) for t in initvals])
        st = init_state(self.lgm, rngs, chains=chains, theta=theta)
        rej = np.zeros((st.n_chains, *self.lattice.shape), dtype=np.int64)
        return st._replace(extras={**(st.extras or {}), REJECTIONS: rej})

    def cell_density(self, eta: np.ndarray) -> np.ndarray:
        """The density's mean over each cell, ``π_c Φ(g_c) / (Z[g] · cell volume)``, flat."""
        m = self.masses.reshape(-1) * link(self.link)(eta)
        return m / (m.sum() * self.lattice.cell_volume)

    def sample_points(self, eta: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` exact draws from ``f(· | g)`` (§4.4's predictive samples, from one state).

        Algorithm 1 on the lattice model accepts a proposal in cell ``c`` with probability
        ``Φ(g_c)``, so an accepted point's cell is drawn ``∝ π_c Φ(g_c)`` and its position
        from ``π`` restricted to the cell (per axis: uniform, or a normal's inverse CDF
        between the cell's edges).

        Returns
        -------
        ndarray, shape (n, d)
        """
        p = self.masses.reshape(-1) * link(self.link)(eta)
        cell = rng.choice(len(p), size=positive_int("n", n, "points wanted, e.g. 100"),
                          p=p / p.sum())
        return self.positions_in(cell, rng)

    def history_points(self, counts: Any, rng: np.random.Generator) -> np.ndarray:
        """The rejections' locations of one latent history given its counts per cell.

        On the lattice ``g`` is constant per cell, so given its cell a rejection's position
        follows ``π`` restricted to the cell (Algorithm 1's proposal, rejected with the
        cell's probability ``1 − Φ(g_c)`` whatever the position): a draw of the continuous
        history the counts summarise.

        Parameters
        ----------
        counts : array_like of int, shape (n_cells,) or the lattice's shape
            Rejections per cell (a draw of the store's ``rejection_counts``).
        rng : numpy.random.Generator

        Returns
        -------
        ndarray, shape (counts.sum(), d)
            Ordered by cell.
        """
        c = np.asarray(counts)
        if c.size != self.masses.size or not np.issubdtype(c.dtype, np.integer) \
                or (c.size and c.min() < 0):
            raise InvalidParameterError(
                f"counts (shape {c.shape}, dtype {c.dtype}) must be non-negative integers, "
                f"one per cell ({self.lattice.shape}), e.g. a draw of rejection_counts.")
        return self.positions_in(np.repeat(np.arange(c.size), c.reshape(-1)), rng)

    def positions_in(self, cells: Any, rng: np.random.Generator) -> np.ndarray:
        """One point per entry of ``cells`` (flat indices) from ``π`` within the cell.

        Per axis: uniform between the cell's edges, or a normal's inverse CDF between them —
        where a proposal of Algorithm 1 falls given its cell (its acceptance depends on the
        cell alone), data and rejections alike (:mod:`.warm`).

        Returns
        -------
        ndarray, shape (len(cells), d)
        """
        cell = np.asarray(cells, dtype=np.int64).reshape(-1)
        n_cells = np.asarray(self.lattice.shape[::-1])
        idx = np.column_stack(np.unravel_index(cell, self.lattice.shape)[::-1])
        width = (self._hi - self._lo) / n_cells
        lo = self._lo + idx * width
        u = rng.random(idx.shape)
        if isinstance(self.base, UniformBase):
            return lo + u * width
        mu, sd = self.base.mean, np.diag(self.base.chol)
        a, b = special.ndtr((lo - mu) / sd), special.ndtr((lo + width - mu) / sd)
        return mu + sd * special.ndtri(a + u * (b - a))

    def log_density(self, state: LatentState, c: int, x: Any) -> np.ndarray:
        """``log f(x | g)`` of chain ``c`` at points ``x`` (n, d); ``−inf`` off the box."""
        eta = self.eta(state, c)
        return self.log_density_given(eta, self.normaliser(eta), x)

    def log_density_given(self, eta: Any, normaliser: Any, x: Any) -> np.ndarray:
        """``log f(x | g)`` for fields ``eta`` (..., cells) with their ``Z[g]`` (...).

        ``log π(x) − log(1 − lost) + log Φ(g_{c(x)}) − log Z[g]``; ``−inf`` off the box.

        Returns
        -------
        ndarray, shape (..., n)
        """
        pts = np.asarray(x, dtype=float).reshape(-1, len(self._lo))
        inside = np.all((pts >= self._lo) & (pts <= self._hi), axis=1)
        log_pi = self.base.logpdf(pts) - math.log1p(-self.lost_mass)
        eta = np.asarray(eta, dtype=float)
        lphi = log_link(self.link)(eta[..., self.cell_of(pts)])
        out = log_pi + lphi - np.log(np.asarray(normaliser, dtype=float))[..., None]
        return np.where(inside, out, -np.inf)


def predictive_density(model: LatticeGPDS, states: Sequence[LatentState], x: Any, *,
                       chain: int = 0) -> PredictiveDensity:
    """``p(x | D) = E[f(x | g) | D]`` from successive states of one chain (Rao–Blackwellised).

    ``Z[g]`` is a finite sum on the lattice, so each state gives the density itself (no
    estimator of ``1/Z`` needed); batch-means errors as :func:`~.predict.batch_means_se`.
    """
    vals = np.exp(np.stack([model.log_density(s, chain, x) for s in states]))
    dens = vals.mean(axis=0)
    se = batch_means_se(vals)
    return PredictiveDensity(dens, se, np.log(dens), se / dens)
