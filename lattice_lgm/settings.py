"""The defaults of a run's settings.

One table, read by ``sample()``, the configuration file and the command line.  The
keywords follow PyMC's ``pm.sample`` where users expect them (``draws``, ``tune``,
``chains``, ``discard_tuned_samples``); the rest are lattice_lgm's own.  Below both the runner
and the configuration in the layers (``docs/architecture.md``): neither reads the other's
signature for its defaults.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class RunDefaults:
    """Default values of :func:`lattice_lgm.runs.sample`'s settings.

    Attributes
    ----------
    draws, tune, chains : int
        Stored draws per chain, warm-up sweeps per chain, number of chains.
    thin, thin_fields : int
        Sweeps per stored draw; stored draws per stored field (0: no fields).
    n_latent : int
        Elliptical slice updates of the field per sweep (Murray–Adams sweeps).
    representation : str
        ``"auto"``: the model's measured default method.
    discard_tuned_samples : bool
        Drop the warm-up draws from the store.
    chains_per_task : int
        Chains per Dask task.
    """

    draws: int = 1000
    tune: int = 1000
    chains: int = 4
    thin: int = 1
    thin_fields: int = 1
    n_latent: int = 10
    representation: str = "auto"
    discard_tuned_samples: bool = True
    chains_per_task: int = 1

    def as_dict(self) -> dict[str, Any]:
        """The defaults by name."""
        return asdict(self)


#: the defaults every entry point uses
RUN_DEFAULTS = RunDefaults()
#: relative-risk levels of the exceedance summaries and maps, ``P(RR > c | data)``
DEFAULT_THRESHOLDS = (1.5, 2.0, 3.0)
