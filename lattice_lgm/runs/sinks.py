"""Where the draws go: the :class:`Sink` protocol, an in-memory reference and the zarr store.

The run loop writes through a sink only: blocks of draws (:meth:`Sink.write`), the online
summaries of its chains (:meth:`Sink.put`), commit markers and checkpoints; on resume it reads
a partly written block back.  :class:`MemorySink` is the reference implementation (plain
arrays with the store's layout); :class:`StoreSink` writes a :class:`~lattice_lgm.store.RunStore`.
``tests/runs/test_sinks.py`` runs one suite against both.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np
import xarray as xr

from ..store.base import VarSpec, _json
from ..store.writer import RunStore

__all__ = ["MemorySink", "Sink", "StoreSink"]


@runtime_checkable
class Sink(Protocol):
    """What the run loop needs of where its draws go.

    ``chains`` is a slice of the run's chain axis, ``draws`` a slice of the draw axis; arrays
    are laid out as the run's :class:`~lattice_lgm.store.VarSpec` say (chain first).
    """

    def write(self, group: str, name: str, chains: slice, draws: slice,
              data: np.ndarray) -> None:
        """Store ``data`` as ``[chains, draws, ...]`` of ``group/name``."""

    def read(self, group: str, name: str, chains: slice, draws: slice) -> np.ndarray:
        """A copy of ``[chains, draws, ...]`` of ``group/name``."""

    def put(self, group: str, name: str, chains: slice, data: np.ndarray) -> None:
        """Replace ``[chains, ...]`` of ``group/name`` (arrays without a draw axis)."""

    def commit(self, phase: str, counts: Mapping[int, int]) -> None:
        """Record that draws ``[0, counts[c])`` of ``phase`` are stored for each chain ``c``."""

    def save_checkpoint(self, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray],
                        tag: str = "") -> None:
        """Keep the state a resume starts from."""

    def names(self, group: str) -> frozenset[str]:
        """The arrays ``group`` holds (a store written by an older version may hold fewer)."""


class MemorySink:
    """In-memory arrays with the store's layout; :meth:`tree` builds the DataTree."""

    def __init__(self, specs: list[VarSpec], coords: dict, attrs: dict) -> None:
        self.specs = {(s.group, s.name): s for s in specs}
        self.arrays = {}
        for s in specs:
            a = np.full(s.shape, s.fill(), dtype=s.dtype)
            if s.data is not None:
                a[...] = s.data
            self.arrays[(s.group, s.name)] = a
        self.coords, self._attrs = coords, attrs
        self.done: dict[str, dict[int, int]] = {}
        #: the newest checkpoint kept (an in-memory run does not resume; kept for the protocol)
        self.checkpoint: tuple[dict, dict, str] | None = None

    def write(self, group, name, chains, draws, data):
        """:meth:`Sink.write` on the arrays."""
        self.arrays[(group, name)][chains, draws, ...] = data

    def read(self, group, name, chains, draws):
        """:meth:`Sink.read` on the arrays."""
        return self.arrays[(group, name)][chains, draws, ...].copy()

    def put(self, group, name, chains, data):
        """:meth:`Sink.put` on the arrays."""
        self.arrays[(group, name)][chains, ...] = data

    def commit(self, phase, counts):
        """:meth:`Sink.commit` on the arrays."""
        self.done.setdefault(phase, {}).update(counts)

    def save_checkpoint(self, meta, arrays, tag=""):
        """:meth:`Sink.save_checkpoint` on the arrays."""
        self.checkpoint = (dict(meta), {k: np.array(v) for k, v in arrays.items()}, tag)

    def names(self, group):
        """:meth:`Sink.names` of the arrays."""
        return frozenset(n for g, n in self.arrays if g == group)

    def tree(self) -> Any:
        """The draws as an ArviZ-layout :class:`xarray.DataTree` (as ``open_store`` reads)."""
        groups: dict[str, dict[str, Any]] = {}
        for (g, name), a in self.arrays.items():
            groups.setdefault(g, {})[name] = (self.specs[(g, name)].dims, a,
                                              self.specs[(g, name)].attrs)
        out = {"/": xr.Dataset(attrs=json.loads(_json(self._attrs)))}
        for g, data in groups.items():
            out[g] = xr.Dataset(data, coords=self.coords.get(g, {}))
        return xr.DataTree.from_dict(out)


class StoreSink:
    """A :class:`~lattice_lgm.store.RunStore` as a sink."""

    def __init__(self, store: RunStore) -> None:
        self.store = store

    def write(self, group, name, chains, draws, data):
        """:meth:`Sink.write` on the store."""
        self.store.write(group, name, chains, draws, data)

    def read(self, group, name, chains, draws):
        """:meth:`Sink.read` on the store."""
        return self.store.read(group, name, chains, draws)

    def put(self, group, name, chains, data):
        """:meth:`Sink.put` on the store."""
        self.store.root[group][name][chains, ...] = data

    def commit(self, phase, counts):
        """:meth:`Sink.commit` on the store."""
        self.store.commit(phase, counts)

    def save_checkpoint(self, meta, arrays, tag=""):
        """:meth:`Sink.save_checkpoint` on the store."""
        self.store.save_checkpoint(meta, arrays, tag=tag)

    def names(self, group):
        """:meth:`Sink.names` of the store."""
        return frozenset(self.store.root[group].array_keys())
