"""``sample()``: run chains of a model into an ArviZ-layout DataTree, in memory or a zarr store.

One *draw* is one Gibbs sweep (``thin`` sweeps per stored draw after tuning); ``draws`` counts
stored draws.  Fields are stored as float32 (``thin_fields`` keeps every k-th draw's field;
0 keeps none, only the online summaries and the hyperparameters).  With ``store=path`` the draws
stream into a zarr store (:mod:`lattice_lgm.store`) in aligned blocks, with a checkpoint every
``checkpoint_every`` draws from which :func:`resume` continues exactly: the resumed store holds
the same bytes as an uninterrupted run with the same seed (DESIGN §5 scope: same library
versions and CPU family), having lost at most one checkpoint interval of work.

Randomness (DESIGN §5): chain ``i`` of a run with seed ``s`` draws from
``SeedSequence(s, spawn_key=(i,))`` (:func:`lattice_lgm.samplers.chain_rngs`), so a chain's
draws do not depend on the other chains, on ``chain_ids`` splits or on thread counts.

Modules: ``plan`` (settings, layout, attributes), ``loop`` (the run loop, online summaries,
checkpoints), ``sinks`` (memory, store), ``progress``, ``resources`` (projections and
refusals), ``storeops`` (writability, extension, re-commits, integrity), ``dask``, ``entry``
(``sample``, ``resume``).
"""

from __future__ import annotations

from ..errors import ResourceLimitError
from ..store.base import StoreExistsError
from .entry import resume, sample
from .resources import SAMPLER_COST, SamplerCost

__all__ = ["SAMPLER_COST", "ResourceLimitError", "SamplerCost", "StoreExistsError", "resume",
           "sample"]
