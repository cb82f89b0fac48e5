"""The configuration's schema: every section and key, with its kind, default and help."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..covariates import METHODS as REGRID_METHODS
from ..gpc.model import METHODS as GPC_METHODS
from ..models.lgcp import (
    BACKENDS,
    DEFAULT_ALPHA,
    DEFAULT_NU,
    LGCP,
)
from ..samplers.defaults import METHODS as SAMPLER_METHODS
from ..samplers.hyper import REPRESENTATIONS
from ..settings import DEFAULT_THRESHOLDS, RUN_DEFAULTS
from .kinds import (
    Kind,
    _bool,
    _choice,
    _family,
    _float,
    _free_table,
    _int,
    _number_list,
    _positive_or_list,
    _str,
    _table,
    _window,
)


# -- the schema -------------------------------------------------------------------------------
class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


#: marks a key without default
REQUIRED: Any = _Required()


@dataclass(frozen=True)
class Key:
    """One configuration key.

    Parameters
    ----------
    name : str
        The key inside its section.
    kind : Kind
        Its type.
    default : Any
        The value when the key is left out (:data:`REQUIRED`: it must be given; ``None``:
        unset, with the meaning stated in ``help``).
    help : str
        One-sentence documentation, reused by the template and ``--help``.
    example : Any, optional
        A value shown (commented out) in the template when the default is ``None``.
    path : bool
        The value is a path (or holds paths) resolved against the config's directory.
    """

    name: str
    kind: Kind
    default: Any
    help: str
    example: Any = None
    path: bool = False


@dataclass(frozen=True)
class Section:
    """A TOML table of the schema.

    Parameters
    ----------
    name : str
        Dotted name, e.g. ``"model.priors.range"``.
    help : str
    keys : tuple of Key
    optional : bool
        The whole table may be left out (its resolved value is then ``None``); when given, its
        required keys must all be there.
    """

    name: str
    help: str
    keys: tuple[Key, ...]
    optional: bool = False

    def key(self, name: str) -> Key | None:
        """The key called ``name``, or None."""
        return next((k for k in self.keys if k.name == name), None)


def _signature_defaults(fn: Callable) -> dict[str, Any]:
    return {k: p.default for k, p in inspect.signature(fn).parameters.items()
            if p.default is not inspect.Parameter.empty}


# LGCP's own defaults, read from its signature so that they are never copied here
_LGCP = _signature_defaults(LGCP.__init__)
_RUN = RUN_DEFAULTS.as_dict()
_PROB = _float(0.0, 1.0, what="a probability in (0, 1)")

SCHEMA: tuple[Section, ...] = (
    Section("data", "the point pattern, its window, the lattice and the covariates", (
        Key("points", _str(), REQUIRED,
            "CSV file of the points, one header row, columns x, y (and t for space-time), in "
            "projected coordinates", path=True),
        Key("window", _window(), REQUIRED,
            "observation window: [xmin, xmax, ymin, ymax], or a path to a vector file of "
            "polygons (read with geopandas)", path=True),
        Key("cell_size", _positive_or_list(_float(0.0), "h_y, h_x"), None,
            "cell side in coordinate units, one number or [h_y, h_x] in lattice axis order "
            "(give cell_size or shape)", example=10.0),
        Key("shape", _positive_or_list(_int(1), "n_y, n_x"), None,
            "cells per axis, one integer or [n_y, n_x] (instead of cell_size)",
            example=[50, 100]),
        Key("units", _str(), _LGCP["units"],
            "coordinate units, e.g. \"m\" (intensity maps are then per ha)", example="m"),
        Key("crs", _str(), _LGCP["crs"], "projected CRS of the coordinates, e.g. \"EPSG:32617\"",
            example="EPSG:32617"),
        Key("covariates", _table(_str()), {},
            "covariates, name = path: a long CSV table (columns x, y, <name>) or a GeoTIFF / "
            "NetCDF raster", path=True),
        Key("regrid", _table(_choice(REGRID_METHODS)), {},
            "regridding method per covariate, name = \"area\" (default), \"nearest\" or "
            "\"majority\"", example={"elev": "area"}),
        Key("formula", _str(), _LGCP["formula"],
            "covariate terms, e.g. \"~ elev + grad\" (default: every covariate, in order)",
            example="~ elev + grad"),
        Key("outside", _choice(("raise", "drop")), _LGCP["outside"],
            "points outside the window: \"raise\" an error naming them, or \"drop\" them with "
            "a warning"),
        Key("time", _number_list(2, _float(what="a number"), increasing=True), None,
            "space-time only: [t0, t1], the time extent of the points' t column",
            example=[0.0, 10.0]),
        Key("time_step", _float(0.0), None, "space-time only: the lattice's time step",
            example=1.0),
        Key("time_units", _str(), _LGCP["time_units"], "space-time only: units of t",
            example="day"),
    )),
    Section("model", "the model: the log-Gaussian Cox process (lattice_lgm.LGCP) by default", (
        Key("family", _family(), "lgcp",
            "\"lgcp\", \"gpds\" (the Gaussian process density sampler on a lattice, "
            "lattice_lgm.gpds.lattice.LatticeGPDS), \"gpc\" (probit GP classification, "
            "lattice_lgm.gpc.GPClassification: data.points a CSV of features and a 0/1 label "
            "column; model.options label, features, sd, lengthscale, jitter, standardise, "
            "sampler), or \"package.module:Class\" of another "
            "model family: a class whose "
            "from_config(config) builds a model implementing lattice_lgm._runview.RunView "
            "(the keys below are the LGCP's; a family reads data.* and model.options)"),
        Key("options", _free_table(), {},
            "settings of a model family other than lgcp, passed to its from_config as they are",
            example={}),
        Key("backend", _choice(BACKENDS), _LGCP["backend"],
            "field prior: circulant embedding, Matérn-SPDE GMRF, or dense (the oracle, small "
            "lattices)"),
        Key("nu", _float(0.0), _LGCP["nu"],
            f"Matérn smoothness of the circulant and dense backends (unset: {DEFAULT_NU}; the "
            "gmrf backend's is alpha - d/2)", example=DEFAULT_NU),
        Key("nu_t", _float(0.0), _LGCP["nu_t"],
            "space-time only: Matérn smoothness in time (0.5: exponential)"),
        Key("alpha", _int(1), _LGCP["alpha"],
            f"SPDE order of the gmrf backend (unset: {DEFAULT_ALPHA}, i.e. nu = 1 in 2-D)",
            example=DEFAULT_ALPHA),
        Key("coefficients", _choice(("block", "hyper")), _LGCP["coefficients"],
            "covariate coefficients in the Gaussian \"block\" with the field, or as \"hyper\" "
            "parameters moved by slice sampling"),
        Key("intercept", _choice(("hyper", "block")), _LGCP["intercept"],
            "the intercept as a \"hyper\" parameter, or in the Gaussian \"block\""),
        Key("beta_sd", _float(0.0), _LGCP["beta_sd"],
            "prior sd of the standardised coefficients"),
    )),
    Section("model.priors.range",
            "PC prior on the range, P(range < rho0) = alpha, truncated at upper (default: "
            "P(range < L/10) = 0.05 truncated at L/2, L the window's shorter side)", (
                Key("rho0", _float(0.0), REQUIRED, "a small range, in coordinate units"),
                Key("alpha", _PROB, REQUIRED, "P(range < rho0)"),
                Key("upper", _float(0.0), None,
                    "truncation point (the circulant torus is sized for it; required by the "
                    "circulant backend)"),
            ), optional=True),
    Section("model.priors.sd", "PC prior on the field's sd, P(sd > sd0) = alpha (default: "
            "P(sd > 2) = 0.05)", (
                Key("sd0", _float(0.0), REQUIRED, "a large sd"),
                Key("alpha", _PROB, REQUIRED, "P(sd > sd0)"),
            ), optional=True),
    Section("model.priors.intercept", "Normal prior on the intercept (log points per unit "
            "area; default: Normal(log(n/|W|), 5))", (
                Key("mean", _float(what="a finite number"), REQUIRED, "prior mean"),
                Key("sd", _float(0.0), REQUIRED, "prior sd"),
            ), optional=True),
    Section("sampling", "the chains (lattice_lgm.runs.sample)", (
        Key("draws", _int(1), _RUN["draws"], "stored draws per chain after warm-up, each thin "
            "sweeps apart"),
        Key("tune", _int(0), _RUN["tune"], "warm-up sweeps per chain"),
        Key("discard_tuned_samples", _bool(), _RUN["discard_tuned_samples"],
            "drop the warm-up draws (false: keep them in warmup_posterior)"),
        Key("chains", _int(1), _RUN["chains"], "number of chains"),
        Key("seed", _int(0), None,
            "the run's seed; required by `lattice-lgm run`, so that the run can be reproduced",
            example=1),
        Key("thin", _int(1), _RUN["thin"], "sweeps per stored draw"),
        Key("thin_fields", _int(0), _RUN["thin_fields"],
            "keep the field of every thin_fields-th stored draw (fields are the big arrays); "
            "0 keeps none: hyperparameters and the online summary maps only"),
        Key("checkpoint_every", _int(1), None,
            "stored draws per chunk and between checkpoints (unset: the runner's default)",
            example=100),
        Key("representation", _choice(tuple(dict.fromkeys(
            ("auto", *SAMPLER_METHODS, *REPRESENTATIONS, *GPC_METHODS)))),
            _RUN["representation"],
            "the sampler: 'auto' (the backend's measured default: 'hmc' on circulant and "
            "gmrf, 'prior-white' on dense), 'hmc' (joint HMC, circulant and gmrf), 'asis' "
            "(interweaving; gmrf, dense, and circulant kernels with a fixed-f move), or a "
            "Murray–Adams representation of the hyperparameter move; with model.family = "
            "\"gpc\": 'auto' (ess), 'rmhmc', 'hmc' (plain HMC on f) or 'ess'"),
        Key("n_latent", _int(1), _RUN["n_latent"],
            "elliptical slice updates of the field per sweep"),
        Key("chains_per_task", _int(1), _RUN["chains_per_task"],
            "chains per Dask task with --workers/--scheduler (each block checkpoints itself)"),
    )),
    Section("store", "where the draws go", (
        Key("path", _str(), None,
            "zarr store of the run (default: <config stem>.zarr next to the config)",
            example="run.zarr", path=True),
        Key("max_disk_gb", _float(0.0), None, "refuse a run whose store would exceed this",
            example=20.0),
        Key("max_memory_gb", _float(0.0), None, "refuse a run that would need more memory",
            example=8.0),
    )),
    Section("output", "maps written after the run", (
        Key("maps", _str(), None,
            "directory of the PNG maps (default: the store's path without .zarr, plus _maps)",
            example="run_maps", path=True),
        Key("thresholds", _number_list(None, _float(0.0)), list(DEFAULT_THRESHOLDS),
            "relative-risk levels c of the exceedance maps P(RR > c | data)"),
    )),
)

_SECTIONS = {s.name: s for s in SCHEMA}
#: tables that only hold other tables (``model.priors``)
_CONTAINERS = {p for s in SCHEMA for p in (".".join(s.name.split(".")[:i])
                                           for i in range(1, s.name.count(".") + 1))
               } - set(_SECTIONS)


