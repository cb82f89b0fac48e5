"""A model family written outside the package: a Gaussian-likelihood GP on a 1-D lattice.

It plugs into ``sample()``, the store, ``resume`` and ``analysis.summary`` by implementing
:class:`lattice_lgm._runview.RunView`, and into the configuration file and the command line
by ``from_config`` and ``describe`` (``model.family = "tests.models.toy_gp:ToyGP"``) — no
edit to the package (issue 28's test of the model protocol,
``tests/models/test_model_protocol.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lattice_lgm import Lattice
from lattice_lgm.covariance import Matern
from lattice_lgm.hyperpriors import LogNormal
from lattice_lgm.likelihoods import Gaussian
from lattice_lgm.models import LatentGaussianModel
from lattice_lgm.priors import CirculantPrior
from lattice_lgm.samplers import EllipticalSlice, Gibbs, HyperMove, init_state
from lattice_lgm.store import hash_arrays


class ToyGP:
    """``y_i = f(x_i) + ε_i`` on a regular 1-D lattice, ``f ~ GP(0, Matérn 3/2)``.

    Parameters
    ----------
    y : ndarray, shape (n,)
        Observations at the cells ``x_i = (i + ½) · spacing``.
    spacing : float
    noise_sd : float
    """

    summary_names = ("f",)
    exceed_on: str | None = None

    def __init__(self, y: np.ndarray, spacing: float = 1.0, noise_sd: float = 0.3) -> None:
        self.y = np.asarray(y, dtype=float)
        n = self.y.size
        lat = Lattice((n,), spacing=spacing, dims=("x",), units="m")
        prior = CirculantPrior(lat, Matern(1.5, sd=1.0, range=5 * spacing),
                               max_range=10 * spacing)
        self.lgm = LatentGaussianModel(
            prior, Gaussian(self.y, noise_sd=noise_sd),
            hyperpriors={"sd": LogNormal(0.0, 0.5),
                         "range": LogNormal(np.log(5 * spacing), 0.3, upper=10 * spacing)})
        self.dims, self.shape = ("x",), (n,)
        self.field_coords = {k: np.asarray(v) for k, v in lat.coords().items()}
        self.coef_names: list[str] = []
        self.inside = np.ones(n, dtype=bool)
        self.units = "m"

    @classmethod
    def from_config(cls, config: Any) -> ToyGP:
        """From a run configuration: ``data.points`` a CSV with a column ``y`` (the
        observations in cell order), ``model.options`` ``spacing`` and ``noise_sd``."""
        import pandas as pd

        r = config.resolved
        y = pd.read_csv(r["data"]["points"])["y"].to_numpy(dtype=float)
        return cls(y, **dict(r["model"]["options"]))

    def describe(self) -> str:
        """One line for ``lattice-lgm run``."""
        return (f"ToyGP: {self.y.size} observations on a 1-D lattice, Gaussian noise, "
                f"GP prior (Matérn 3/2); hyperpriors {self.priors_text()}")

    # -- lattice_lgm._runview.RunView ---------------------------------------------------------
    def init_state(self, rngs: Any, chains: Any, initvals: Any = None, warm: bool = True) -> Any:
        theta = None if initvals is None else [dict(t) for t in initvals]
        return init_state(self.lgm, rngs, chains=chains, theta=theta)

    def default_representation(self) -> str:
        return "prior-white"

    def default_sweep(self, representation: str, n_latent: int, tune: int = 0) -> Any:
        return Gibbs(HyperMove(self.lgm, representation), EllipticalSlice(self.lgm),
                     n_latent=n_latent)

    def record(self, state: Any) -> dict[str, Any]:
        # the state lives on the circulant torus: the lattice is its window
        f = np.asarray(state.f, dtype=float).reshape(state.n_chains, -1)
        f = f[:, self.lgm.prior.window_index()]
        return {"scalars": {k: np.array(v, dtype=float) for k, v in state.theta.items()},
                "beta": None, "f": f.astype(np.float32), "summary": {"f": f}}

    def data_groups(self) -> dict[str, dict[str, tuple[tuple[str, ...], np.ndarray]]]:
        return {"observed_data": {"obs": (self.dims, self.y)}}

    def extra_coords(self) -> dict[str, np.ndarray]:
        return {}

    def data_hash(self) -> str:
        return hash_arrays({"y": self.y})

    def priors_text(self) -> dict[str, str]:
        return {k: hp.describe() for k, hp in self.lgm.hyperpriors.items()}


def toy_data(n: int = 40, seed: int = 0) -> np.ndarray:
    """Noisy observations of a smooth curve on ``n`` cells."""
    rng = np.random.default_rng(seed)
    x = np.arange(n) + 0.5
    return np.sin(x / 6.0) + 0.3 * rng.standard_normal(n)
