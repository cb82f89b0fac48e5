"""A lattice GPDS state as the paper's latent history: a warm start for the dense sampler.

The dense sampler's §4.1 move changes ``M`` by at most a few rejections per proposal, and
``M`` is tied to θ (a larger sd, a sharper density, a smaller ``Z[g]`` and more rejections),
so from the paper's cold start (no rejections, θ at the priors' medians) the chain can take
thousands of sweeps to reach the posterior (measured on the ring: ``benchmarks/papers``,
GPDS section).  The lattice path draws ``M`` exactly given ``g`` and reaches it in tens of
sweeps.  A lattice state is turned into a latent history of the dense model here; MCMC from
that start targets the dense posterior unchanged (the start is not part of the target), and
the chain's own moves carry it from the lattice's piecewise-constant ``g`` to a continuous
one.

From one lattice state: θ (the state's prior's kernel); ``M`` and the rejections' cells from
the lattice model's history given ``g`` (:meth:`~.lattice.LatticeGPDS.draw_history`: ``M ~
NegBin(N, Z[g])``, cells ``∝ π_c (1 − Φ(g_c))``), each rejection placed by ``π`` within its
cell (:meth:`~.lattice.LatticeGPDS.positions_in`, eq. 1's proposal given the cell); the values
at the data and the rejections drawn from the GP given the cell values read as noisy
observations of ``g`` (noise variance the within-cell variance ``sd² (1 − ρ(h*))``, ``h*`` the
half diagonal), then elliptical slice updates against eq. 3's ``Π Φ(g_n) Π (1 − Φ(g_m))``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import positive_int
from ..covariance import Covariance
from ..errors import InvalidParameterError
from .history import update_values
from .lattice import LatticeGPDS
from .prior import JITTER
from .state import LatentHistory

__all__ = ["lattice_history"]


def lattice_history(model: LatticeGPDS, state: Any, rng: np.random.Generator, *,
                    chain: int = 0, n_values: int = 20,
                    jitter: float = JITTER) -> tuple[LatentHistory, Covariance]:
    """The latent history (and θ) of the dense sampler from one lattice state (module doc).

    Parameters
    ----------
    model : LatticeGPDS
    state : LatentState
        A state of ``model``'s chains (e.g. from :class:`~.lattice.LatticeSweep`).
    rng : numpy.random.Generator
    chain : int
        Which of the state's chains.
    n_values : int
        Elliptical slice updates of the values after their draw.
    jitter : float
        Relative nugget (× sd²), as the dense sampler's.

    Returns
    -------
    history : LatentHistory
        ``model.data`` with the rejections and the values at both.
    kernel : Covariance
        θ of the state (the kernel of its prior).
    """
    if not isinstance(model, LatticeGPDS):
        raise InvalidParameterError(f"model={model!r} must be a LatticeGPDS.")
    positive_int("n_values", n_values, "elliptical slice updates, e.g. 20")
    kernel = state.priors[chain].kernel
    eta = model.eta(state, chain)
    rej = model.history_points(model.draw_history(eta, rng), rng)
    pts = np.concatenate([model.data, rej])
    # the cell values as g(x) plus noise of the within-cell variance sd² (1 − ρ(h*))
    noise = max(model.within_cell_variance(kernel), 1e-6 * kernel.variance)
    eye = np.eye(len(pts))
    K = kernel(pts) + float(jitter) * kernel.variance * eye
    A = np.linalg.solve(K + noise * eye, K)  # (K + s² I)⁻¹ K
    mu = A.T @ (eta[model.cell_of(pts)] - model.mean)
    C = K - K @ A  # K − K (K + s² I)⁻¹ K: the GP's covariance given the noisy values
    L = np.linalg.cholesky(0.5 * (C + C.T) + float(jitter) * kernel.variance * eye)
    g = model.mean + mu + L @ rng.standard_normal(len(pts))
    hist = LatentHistory(model.data, rej, g)
    return update_values(hist, rng, kernel, link_name=model.link, mean=model.mean,
                         n_updates=n_values, jitter=jitter), kernel
