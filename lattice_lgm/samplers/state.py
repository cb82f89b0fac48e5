"""Chain state, per-chain random streams and the white representation of each prior backend.

A :class:`LatentState` holds a batch of chains with a leading chain axis.  It is never edited in
place: every step returns a new one (STYLE: small immutable state).  Each chain has its own
:class:`numpy.random.Generator` from ``SeedSequence(seed, spawn_key=(chain,))`` keyed by the
*global* chain index (DESIGN §5), so chain 5 draws the same numbers whether it runs alone, with
chains 0–7, or on another machine.

The white representation ``white`` is kept beside the field ``f`` with ``f = W(θ) white``: real
white noise for dense and GMRF priors (``prior.colorize``), and for circulant priors the unitary
half-spectrum ``ζ`` of real white noise on the torus (``prior.colorize_spectrum``), which lets the
hyperparameter moves run as per-frequency rotations with no division by eigenvalues (DESIGN §4).
Elliptical slice sampling rotates ``f`` and ``white`` by the same angle, so they stay in step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from ..errors import InvalidParameterError, ShapeMismatchError
from ..priors import GaussianPrior, fourier

__all__ = ["LatentState", "WhiteOps", "chain_rngs", "white_ops"]


def chain_rngs(seed: int, chains: int | Sequence[int]) -> list[np.random.Generator]:
    """One independent Generator per chain, keyed by the global chain index (DESIGN §5).

    Parameters
    ----------
    seed : int
        The run's seed (>= 0).
    chains : int or sequence of int
        Number of chains (indices ``0 … n−1``) or the global indices of the chains to run here.

    Returns
    -------
    list of numpy.random.Generator
        ``Generator(PCG64(SeedSequence(seed, spawn_key=(i,))))`` for each chain index ``i`` —
        the same streams as ``SeedSequence(seed).spawn(n)[i]``.
    """
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise InvalidParameterError(f"seed={seed!r} must be an int >= 0.")
    ids = range(int(chains)) if isinstance(chains, (int, np.integer)) else chains
    out = []
    for i in ids:
        if not isinstance(i, (int, np.integer)) or i < 0:
            raise InvalidParameterError(f"chain index {i!r} must be an int >= 0.")
        out.append(np.random.Generator(
            np.random.PCG64(np.random.SeedSequence(int(seed), spawn_key=(int(i),)))))
    if not out:
        raise InvalidParameterError("chains is empty; run at least one chain.")
    return out


class WhiteOps:
    """White representation for dense and GMRF priors: real white noise, ``f = prior.colorize``."""

    dtype = np.float64
    #: whether :meth:`colorize` may run for different chains in different threads at once
    thread_safe_colorize = False

    def shape(self, prior: GaussianPrior) -> tuple[int, ...]:
        """Shape of one chain's white vector."""
        return tuple(prior.white_shape)

    def draw(self, prior: GaussianPrior, rng: np.random.Generator,
             out: np.ndarray | None = None) -> np.ndarray:
        """One chain's ``N(0, I)`` white vector (into ``out`` when given)."""
        if out is None:
            return rng.standard_normal(self.shape(prior))
        rng.standard_normal(out=out)
        return out

    def colorize(self, prior: GaussianPrior, w: np.ndarray,
                 out: np.ndarray | None = None, *, own_thread: bool = False) -> np.ndarray:
        """``(n, *white) -> (n, *state)``: fields ``W(θ) w`` (into ``out`` when given).

        ``own_thread`` is accepted for a uniform signature; only representations with
        ``thread_safe_colorize`` may be called from several threads at once.
        """
        f = prior.colorize(w)
        if out is None:
            return f
        out[...] = f
        return out

    def whiten(self, prior: GaussianPrior, f: np.ndarray,
               rng: np.random.Generator | None = None) -> np.ndarray:
        """``(n, *state) -> (n, *white)``: ``W(θ)⁻¹ f`` (exact for proper priors)."""
        return prior.whiten(f)


class SpectralWhiteOps(WhiteOps):
    """White representation for circulant priors: the unitary half-spectrum ``ζ`` (complex)."""

    dtype = np.complex128
    thread_safe_colorize = True  # with own_thread=True: per-thread single-threaded FFT plans

    def shape(self, prior: GaussianPrior) -> tuple[int, ...]:
        return fourier(prior).half_shape

    def draw(self, prior: GaussianPrior, rng: np.random.Generator,
             out: np.ndarray | None = None) -> np.ndarray:
        return fourier(prior).draw_spectrum(rng, out=out)

    def colorize(self, prior: GaussianPrior, w: np.ndarray,
                 out: np.ndarray | None = None, *, own_thread: bool = False) -> np.ndarray:
        return fourier(prior).colorize_spectrum(w, out=out, own_thread=own_thread)

    def whiten(self, prior: GaussianPrior, f: np.ndarray,
               rng: np.random.Generator | None = None) -> np.ndarray:
        """``ζ = f̂/√λ`` where ``λ > 0``.

        Bins with ``λ = 0`` do not affect ``f``; they are drawn from their prior (their exact
        conditional given ``f``) from ``rng``, or set to 0 without one.
        """
        torus = fourier(prior)
        lam = torus.eigenvalues
        pos = lam > 0
        zeta = torus.spectrum(f) * np.where(pos, 1.0 / np.sqrt(np.where(pos, lam, 1.0)), 0.0)
        if rng is not None and not pos.all():
            for i in range(len(zeta)):
                fresh = torus.draw_spectrum(rng)
                zeta[i][~pos] = fresh[~pos]
        return zeta


def white_ops(prior: GaussianPrior) -> WhiteOps:
    """The white representation the samplers use for ``prior``'s backend."""
    return SpectralWhiteOps() if prior.capabilities.fourier else WhiteOps()


class LatentState(NamedTuple):
    """A batch of chains of a :class:`~lattice_lgm.models.LatentGaussianModel` (immutable).

    Attributes
    ----------
    theta : dict of str to ndarray, each shape (n_chains,)
        Hyperparameters on the natural scale (sampled and fixed ones, incl. ``mean``).
    priors : tuple of GaussianPrior, length n_chains
        Each chain's prior at its ``theta`` (sharing FFT plans / symbolic analyses).
    f : ndarray, shape (n_chains, *prior.state_shape)
        The latent field on the prior's state.
    white : ndarray, shape (n_chains, *white)
        ``f = W(θ) white`` (see the module docstring), real or complex.
    beta : ndarray, shape (n_chains, p)
        In-block coefficients (``p = 0`` without covariates).
    loglik : ndarray, shape (n_chains,)
        The log-likelihood at the current state, cached (Murray, Adams & MacKay 2010, §2.2).
    chains : tuple of int
        Global chain indices (the key of each chain's random stream).
    extras : dict of str to ndarray, each with a leading chain axis, optional
        Per-chain state of adaptive moves (e.g. an HMC step size and mass matrix), so that it
        is checkpointed with the chain and a subset of chains carries its own rows.
    """

    theta: dict[str, np.ndarray]
    priors: tuple[GaussianPrior, ...]
    f: np.ndarray
    white: np.ndarray
    beta: np.ndarray
    loglik: np.ndarray
    chains: tuple[int, ...]
    extras: dict[str, np.ndarray] | None = None

    @property
    def n_chains(self) -> int:
        """Number of chains in the batch."""
        return len(self.f)

    def theta_of(self, c: int) -> dict[str, float]:
        """Chain ``c``'s hyperparameters as a dict of floats."""
        return {k: float(v[c]) for k, v in self.theta.items()}

    def check_rngs(self, rngs: Sequence[np.random.Generator]) -> None:
        """Raise unless there is one Generator per chain."""
        if len(rngs) != self.n_chains or not all(
            isinstance(r, np.random.Generator) for r in rngs
        ):
            raise InvalidParameterError(
                f"rngs must be {self.n_chains} numpy Generators, one per chain "
                "(lattice_lgm.samplers.chain_rngs(seed, chains))."
            )

    def subset(self, idx: Sequence[int]) -> LatentState:
        """The chains at positions ``idx`` (a new state)."""
        idx = list(idx)
        return LatentState(
            {k: v[idx].copy() for k, v in self.theta.items()},
            tuple(self.priors[i] for i in idx), self.f[idx].copy(), self.white[idx].copy(),
            self.beta[idx].copy(), self.loglik[idx].copy(), tuple(self.chains[i] for i in idx),
            None if self.extras is None else {k: np.array(v)[idx].copy()
                                              for k, v in self.extras.items()},
        )


def stack_theta(thetas: Sequence[Mapping[str, float]]) -> dict[str, np.ndarray]:
    """``[{name: value}, …]`` per chain → ``{name: (n_chains,) array}``."""
    keys = list(thetas[0])
    for t in thetas:
        if list(t) != keys:
            raise ShapeMismatchError("every chain needs the same hyperparameter names.")
    return {k: np.array([float(t[k]) for t in thetas]) for k in keys}


def as_dict(theta: Mapping[str, Any]) -> dict[str, float]:
    """A plain ``{name: float}`` copy."""
    return {k: float(v) for k, v in theta.items()}
