"""Small models on every backend, and their exact (dense) posteriors, for the sampler tests.

The oracle is always dense linear algebra on the prior's *state* (the lattice for dense priors,
the torus for circulant ones, the padded lattice for GMRFs): ``K_state = Wᵀ W`` from ``colorize``
of the identity, which holds for any square root.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import scipy.linalg as sla

from lattice_lgm import Lattice
from lattice_lgm.covariance import Matern
from lattice_lgm.hyperpriors import LogNormal, Normal, PCPriorRange, PCPriorSD
from lattice_lgm.likelihoods import Gaussian
from lattice_lgm.models import LatentGaussianModel
from lattice_lgm.priors import CirculantPrior, DensePrior, GMRFPrior
from lattice_lgm.samplers import representations_for

HAS_CHOLMOD = importlib.util.find_spec("sksparse") is not None

BACKENDS = ("dense", "circulant", "gmrf")
RANGE_UPPER = 8.0
N = 12


def make_prior(backend: str, n: int = N, sd: float = 1.0, rng_: float = 3.0):
    """A 1-D Matérn prior (ν = 3/2) on ``n`` cells of unit spacing."""
    lat = Lattice((n,), spacing=1.0)
    if backend == "dense":
        return DensePrior.from_lattice(lat, Matern(1.5, sd=sd, range=rng_), jitter=0.0)
    if backend == "circulant":
        return CirculantPrior(lat, Matern(1.5, sd=sd, range=rng_), max_range=RANGE_UPPER)
    return GMRFPrior.matern(lat, sd=sd, range=rng_, alpha=2, pad=4)


def hyperpriors(names=("sd", "range")):
    """Proper hyperpriors with a bounded range (the circulant torus is sized for the bound)."""
    out = {}
    if "sd" in names:
        out["sd"] = PCPriorSD(2.0, 0.1)
    if "range" in names:
        out["range"] = LogNormal(np.log(3.0), 0.5, upper=RANGE_UPPER)
    if "mean" in names:
        out["mean"] = Normal(0.0, 1.0)
    return out


def gaussian_model(backend: str, y: np.ndarray, noise_sd: float, names=("sd", "range"),
                   mean: float = 0.0):
    """Gaussian-likelihood model on every observed window cell."""
    prior = make_prior(backend, n=len(y))
    return LatentGaussianModel(prior, Gaussian(y, noise_sd=noise_sd),
                               hyperpriors=hyperpriors(names), mean=mean)


def prior_start(backend: str, y: np.ndarray, n: int, seed: int, stream_seed: int):
    """A model whose likelihood is flat (noise sd 1e4: the posterior is the prior to ~1e-8)
    and ``n`` chains started at exact prior draws of (sd, range, f); (model, state, rngs)."""
    from lattice_lgm.samplers import chain_rngs, state_from_fields

    prior = make_prior(backend)
    model = LatentGaussianModel(prior, Gaussian(y, noise_sd=1e4),
                                hyperpriors={"sd": LogNormal(0.0, 0.5),
                                             "range": LogNormal(np.log(3.0), 0.3, upper=8.0)})
    rng = np.random.default_rng(seed)
    hp = model.hyperpriors
    sds, ranges = hp["sd"].sample(rng, n), hp["range"].sample(rng, n)
    thetas = [{"sd": float(s), "range": float(r)} for s, r in zip(sds, ranges, strict=True)]
    f = np.concatenate([model.prior_for(t, prior).sample_state(rng, 1) for t in thetas])
    rngs = chain_rngs(stream_seed, n)
    return model, state_from_fields(model, f, thetas, rngs), rngs


def needs_cholmod(backend: str, representation: str) -> bool:
    """GMRF surrogates with site-specific precisions factor Q + Π with CHOLMOD."""
    return backend == "gmrf" and representation.startswith(("surr-", "post-"))


def cases():
    """(backend, representation) for every representation each backend offers."""
    out = []
    for b in BACKENDS:
        for r in representations_for(make_prior(b)):
            out.append((b, r))
    return out


def state_cov(prior) -> np.ndarray:
    """Dense ``K_state`` from ``colorize`` of the identity."""
    m = prior.state_size
    w = prior.colorize(np.eye(m).reshape(m, *prior.white_shape)).reshape(m, -1)
    return w.T @ w


def log_marginal(model, theta: dict) -> float:
    """Exact ``log p(y | θ)`` of a Gaussian-likelihood model (dense oracle)."""
    prior = model.prior_for(theta, model.prior)
    k = state_cov(prior)
    s = model.state_index
    lik = model.likelihood
    c = k[np.ix_(s, s)] + np.diag(1.0 / lik.aux_obs)
    r = lik.y_obs - model.base_obs(theta)
    chol = sla.cho_factor(c, lower=True)
    return float(-0.5 * r @ sla.cho_solve(chol, r) - np.log(np.diag(chol[0])).sum()
                 - 0.5 * len(r) * np.log(2 * np.pi))


def conditional_draws(model, theta: dict, rng: np.random.Generator, n: int) -> np.ndarray:
    """Exact draws of ``f_state | y, θ`` (dense oracle), shape (n, *state_shape)."""
    prior = model.prior_for(theta, model.prior)
    k = state_cov(prior)
    s = model.state_index
    lik = model.likelihood
    c = k[np.ix_(s, s)] + np.diag(1.0 / lik.aux_obs)
    r = lik.y_obs - model.base_obs(theta)
    ks = k[:, s]
    gain = sla.solve(c, ks.T, assume_a="pos").T
    mean = gain @ r
    cov = k - gain @ ks.T
    cov = 0.5 * (cov + cov.T)
    vals, vecs = np.linalg.eigh(cov)
    root = vecs * np.sqrt(np.clip(vals, 0.0, None))
    z = rng.standard_normal((n, len(vals)))
    return (mean + z @ root.T).reshape(n, *prior.state_shape)


def _centres(lo: float, hi: float, n: int) -> np.ndarray:
    h = (hi - lo) / n
    return lo + h * (np.arange(n) + 0.5)


class Grid2D:
    """The exact marginal posterior of (sd, range) on a log grid, by quadrature."""

    def __init__(self, model, n_grid: int = 120) -> None:
        hp = model.hyperpriors
        # grids on the log scale wide enough to hold all the posterior mass
        # cell centres whose outer edges are the grid limits (the range grid ends at the bound)
        self.lsd = _centres(np.log(0.05), np.log(8.0), n_grid)
        self.lr = _centres(np.log(0.3), np.log(RANGE_UPPER), n_grid)
        lp = np.empty((n_grid, n_grid))
        for i, a in enumerate(self.lsd):
            for j, b in enumerate(self.lr):
                th = {"sd": np.exp(a), "range": np.exp(b)}
                lp[i, j] = (log_marginal(model, th) + hp["sd"].logpdf_unconstrained(a)
                            + hp["range"].logpdf_unconstrained(b))
        p = np.exp(lp - lp.max())
        self.p = p / p.sum()

    def cdf(self, which: str):
        """Marginal CDF (piecewise linear between cell centres) of ``sd`` or ``range``."""
        if which == "sd":
            grid, marg = self.lsd, self.p.sum(axis=1)
        else:
            grid, marg = self.lr, self.p.sum(axis=0)
        h = grid[1] - grid[0]
        edges = np.concatenate([[grid[0] - h / 2], grid + h / 2])
        cum = np.concatenate([[0.0], np.cumsum(marg)])
        return lambda x: np.interp(np.log(x), edges, cum)

    def sample(self, rng: np.random.Generator, n: int) -> list[dict]:
        """Draws from the gridded posterior (cell by mass, then uniform within the cell)."""
        flat = rng.choice(self.p.size, size=n, p=self.p.ravel())
        i, j = np.unravel_index(flat, self.p.shape)
        h1 = self.lsd[1] - self.lsd[0]
        h2 = self.lr[1] - self.lr[0]
        a = self.lsd[i] + (rng.random(n) - 0.5) * h1
        b = self.lr[j] + (rng.random(n) - 0.5) * h2
        return [{"sd": float(np.exp(x)), "range": float(np.exp(z))}
                for x, z in zip(a, b, strict=True)]


__all__ = ["BACKENDS", "HAS_CHOLMOD", "Grid2D", "PCPriorRange", "cases", "conditional_draws",
           "gaussian_model", "hyperpriors", "log_marginal", "make_prior", "needs_cholmod",
           "prior_start", "state_cov"]


def lgcp_draws(model, seed: int, tune: int, draws: int, names=("sd", "range"),
               method: str = "auto") -> dict[str, np.ndarray]:
    """Posterior draws ``(4 chains, draws)`` of ``names`` from an LGCP's ``method`` sweep.

    The model's warm start, then ``tune`` warm-up and ``draws`` kept iterations, chains
    seeded from ``seed`` (the slow tier's fits: coverage and agreement).
    """
    from lattice_lgm.models.lgcp_start import initial_state
    from lattice_lgm.samplers import chain_rngs, default_sweep

    rngs = chain_rngs(seed, 4)
    state = initial_state(model, rngs)[0]
    sweep = default_sweep(model.lgm, method, tune=tune)
    out: dict[str, list] = {k: [] for k in names}
    for i in range(tune + draws):
        state, _ = sweep.step(state, rngs)
        if i >= tune:
            for k in names:
                out[k].append(np.asarray(state.theta[k], dtype=float).copy())
    return {k: np.stack(v, axis=1) for k, v in out.items()}
