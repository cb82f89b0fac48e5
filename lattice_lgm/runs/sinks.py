"""Where the draws go: an in-memory DataTree or a zarr store."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..store import (
    RunStore,
    VarSpec,
    _json,
)


# -- sinks ---------------------------------------------------------------------------------------
class _MemorySink:
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

    def write(self, group, name, chains, draws, data):
        self.arrays[(group, name)][chains, draws, ...] = data

    def read(self, group, name, chains, draws):
        return self.arrays[(group, name)][chains, draws, ...].copy()

    def commit(self, phase, counts):
        self.done.setdefault(phase, {}).update(counts)

    def tree(self) -> Any:
        import xarray as xr

        groups: dict[str, dict[str, Any]] = {}
        for (g, name), a in self.arrays.items():
            groups.setdefault(g, {})[name] = (self.specs[(g, name)].dims, a,
                                              self.specs[(g, name)].attrs)
        out = {"/": xr.Dataset(attrs=_plain(self._attrs))}
        for g, data in groups.items():
            out[g] = xr.Dataset(data, coords=self.coords.get(g, {}))
        return xr.DataTree.from_dict(out)


def _plain(d: dict) -> dict:
    import json


    return json.loads(_json(d))


class _StoreSink:
    def __init__(self, store: RunStore) -> None:
        self.store = store

    def write(self, group, name, chains, draws, data):
        self.store.write(group, name, chains, draws, data)

    def read(self, group, name, chains, draws):
        return self.store.read(group, name, chains, draws)

    def commit(self, phase, counts):
        self.store.commit(phase, counts)


