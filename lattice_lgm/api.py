"""The package's entry points that span layers (the top of ``docs/architecture.md``'s stack).

:func:`resume` rebuilds the model of a run started from a configuration before continuing it;
the runner below (:func:`lattice_lgm.runs.resume`) takes the model and knows nothing of
configuration files.
"""

from __future__ import annotations

import os
from typing import Any

from . import runs
from .config import RunConfig
from .errors import InvalidParameterError
from .store.reading import read_config


def resume(store: str | os.PathLike, model: Any = None, **kwargs: Any) -> Any:
    """Continue (or, with ``extend=``, extend) the run in ``store``.

    Parameters
    ----------
    store : path
        The run's store.
    model : LGCP, optional
        The model; default: rebuilt from the configuration stored with the run (runs started
        from the command line or with ``config=``).
    **kwargs
        As :func:`lattice_lgm.runs.resume` (``step``, ``chain_ids``, ``threads``, ``extend``,
        ``progressbar``, Dask options).

    Returns
    -------
    xarray.DataTree
    """
    if model is None:
        cfg = read_config(store)
        if not cfg:
            raise InvalidParameterError(
                f"{store} was written from Python without a config; pass the model: "
                "resume(store, model).")
        model = RunConfig.from_resolved(cfg).build_model()
    return runs.resume(store, model, **kwargs)
