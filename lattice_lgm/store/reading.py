"""Reading a run store: its draws, its configuration, and whether a resume matches it.

The draws as an ``xarray.DataTree`` (committed draws only by default), the stored
configuration in the current schema, and the check that a resume continues the same run.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .base import (
    BIT_LIBRARIES,
    PHASE_GROUPS,
    ResumeMismatchError,
    StoreIntegrityWarning,
    _quiet,
)
from .integrity import _read_commits, check_store, verify_store


def open_store(path: str | os.PathLike, *, committed_only: bool = True) -> Any:
    """Open a run store as an ``xarray.DataTree`` (works while the run is going).

    Parameters
    ----------
    path : str or Path
    committed_only : bool
        Trim every drawn group to the draws committed by *all* the run's chains (the default);
        a reader then never sees NaN placeholders of draws not written yet.  (While chain
        blocks run in separate processes, a block not started yet holds this at 0: open with
        ``committed_only=False`` and select chains to look at the others.)

    Returns
    -------
    xarray.DataTree
        Lazily loaded; ``tree["posterior"].ds`` is the posterior in ArviZ layout.
    """
    import xarray as xr

    p = Path(path)
    check_store(p)
    with _quiet():
        tree = xr.open_datatree(str(p), engine="zarr")
    found = verify_store(p, digests=False)
    if not found.ok:
        warnings.warn(
            f"store {str(p)!r} is damaged: {len(found.missing)} committed chunk file(s) are "
            "missing and read as NaN (" + ", ".join(found.missing[:3])
            + (", …" if len(found.missing) > 3 else "") + "); `lattice-lgm verify "
            f"{p}` lists them. Do not read these draws as a posterior.",
            StoreIntegrityWarning, stacklevel=2)
    if not committed_only:
        return tree
    commits = _read_commits(p)
    chains = int(dict(tree.attrs.get("run_config", {})).get("chains", len(commits)))
    for phase, groups in PHASE_GROUPS.items():
        for g in groups:
            if g not in tree.children:
                continue
            ds = tree[g].to_dataset()
            if "draw" not in ds.dims:
                continue
            n = min((commits.get(c, {}).get(phase, 0) for c in range(chains)), default=0)
            if g.endswith("_fields"):
                n = int((ds["draw"].values < n).sum())
            tree[g] = xr.DataTree(ds.isel(draw=slice(0, n)))
    return tree

def read_config(path: str | os.PathLike) -> dict[str, Any]:
    """The resolved configuration stored with a run (``{}`` for Python-API runs without one)."""
    import zarr

    with _quiet():
        root = zarr.open_group(str(path), mode="r")
    return dict(root.attrs.get("config") or {})


def upgrade_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A stored run configuration in the current schema (a new JSON copy).

    Before decision 64 both ``model.nu`` and ``model.alpha`` were stored; the run used its
    backend's (``alpha`` for gmrf), so the other becomes ``None``.  Before model families
    (issue 28) every run was an LGCP: ``model.family = "lgcp"``, no ``model.options``.
    """
    d = json.loads(json.dumps(dict(config)))
    m = d.get("model")
    if isinstance(m, dict):
        if m.get("nu") is not None and m.get("alpha") is not None:
            m["nu" if m.get("backend") == "gmrf" else "alpha"] = None
        m.setdefault("family", "lgcp")
        m.setdefault("options", {})
    return d


def check_compatible(stored: Mapping[str, Any], current: Mapping[str, Any]) -> None:
    """Refuse a resume whose data, configuration or bit-relevant library versions differ.

    Raises
    ------
    ResumeMismatchError
        Naming every key that differs, with both values.
    """
    diffs = []
    if stored.get("data_sha256") != current.get("data_sha256"):
        diffs.append("the data (counts, exposure, covariates, offset) differ from the stored "
                     "run's")
    sc, cc = stored.get("run_config", {}), current.get("run_config", {})
    for k in sorted(set(sc) | set(cc)):
        if k == "sweep" and k not in sc:
            continue  # a store from before the default sweep's settings were recorded
        if sc.get(k) != cc.get(k):
            diffs.append(f"run setting {k}: stored {sc.get(k)!r}, now {cc.get(k)!r}")
    if upgrade_config(stored.get("config") or {}) != upgrade_config(current.get("config") or {}):
        diffs.append("the configuration differs from the stored one (see attrs['config'])")
    sv, cv = stored.get("versions", {}), current.get("versions", {})
    for k in BIT_LIBRARIES:
        if sv.get(k) != cv.get(k):
            diffs.append(f"library {k}: stored {sv.get(k)}, installed {cv.get(k)}")
    if diffs:
        raise ResumeMismatchError(
            "cannot resume: " + "; ".join(diffs) + ". Resume with the same data, settings and "
            "library versions (DESIGN §5), or start a new store.")
