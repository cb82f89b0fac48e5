"""Run configuration: one TOML schema shared by Python and the ``lattice-lgm`` command.

A run is described by a TOML file with the sections ``[data]``, ``[model]`` (with
``[model.priors]``), ``[sampling]``, ``[store]`` and ``[output]``.  :data:`SCHEMA` is the single
source of truth: every key's type, default and help text is written once there and reused by
validation (:func:`load_config`), the commented template (:func:`template`) and the command
line's ``--help`` (:func:`describe_schema`).

::

    cfg = load_config("run.toml", ["sampling.draws=200"])   # validated, paths resolved
    model = cfg.build_model()                                # an LGCP
    tree = lattice_lgm.runs.sample(model, **cfg.sample_kwargs())

Rules:

- Unknown sections or keys are errors that name the key and suggest the nearest valid one
  (``unknown key 'sampling.draw'; did you mean 'sampling.draws'?``); values are type-checked
  (TOML distinguishes ``10`` from ``10.0`` and ``"10"``: an integer key refuses the other two,
  a float key accepts an integer).
- Relative paths in the file resolve against the file's directory; paths given as overrides
  (``--set data.points=x.csv``) resolve against the current directory, like any other
  command-line path.
- Model settings left out take :class:`~lattice_lgm.models.lgcp.LGCP`'s own defaults (read from
  its signature, never copied); priors left out are LGCP's window-scaled defaults (``null`` in
  :attr:`RunConfig.resolved`, stated by ``LGCP.describe()``).
- :attr:`RunConfig.resolved` is the fully resolved configuration (absolute paths, defaults
  filled, stable key order, JSON-serialisable) that a run stores with its draws;
  :meth:`RunConfig.from_resolved` rebuilds the configuration (and so the model) from it.

Modules: ``kinds`` (value kinds), ``schema`` (sections and keys), ``resolve`` (checking and
resolving a file), ``runconfig`` (``RunConfig``, ``load_config``), ``template`` (``--help``
and ``lattice-lgm init``).
"""

from __future__ import annotations

from .kinds import ConfigError
from .runconfig import RunConfig, load_config
from .schema import REQUIRED, SCHEMA, Key, Section
from .template import describe_schema, template

__all__ = [
    "REQUIRED",
    "SCHEMA",
    "ConfigError",
    "Key",
    "RunConfig",
    "Section",
    "describe_schema",
    "load_config",
    "template",
]
