"""What every part of the run store shares.

Its file names and format version, its errors, the specification of its arrays, and the JSON
and hash helpers.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import LatticeLGMError

COMMIT_DIR = ".commits"
#: one lock file per chain, held (flock) by the process writing that chain
LOCK_DIR = ".locks"
#: digests of the chunks written once at creation (data, coordinates), in COMMIT_DIR
DATA_MANIFEST = "chunks-data.json"
CHECKPOINT_DIR = ".checkpoint"
#: checkpoint generations kept on disk (the newest and its predecessor)
KEEP_GENERATIONS = 2
#: libraries whose versions change the bits of a run (compared on resume)
BIT_LIBRARIES = ("lattice_lgm", "numpy", "scipy", "numba", "pyfftw")
#: the layout of a run store (see describe_problem for what changed between versions)
FORMAT_VERSION = 2
#: the drawn groups of each phase
PHASE_GROUPS = {
    "posterior": ("posterior", "posterior_fields", "sample_stats"),
    "warmup": ("warmup_posterior", "warmup_posterior_fields", "warmup_sample_stats"),
}


class StoreExistsError(LatticeLGMError, FileExistsError):
    """A store exists at the path and the run was not asked to resume it."""


class ResumeMismatchError(LatticeLGMError, ValueError):
    """A resume with different data, configuration or library versions."""


class StoreIntegrityError(LatticeLGMError, RuntimeError):
    """A store's committed chunk files are missing or do not match their recorded digests."""


class StoreLockedError(LatticeLGMError, RuntimeError):
    """Another process is writing chains this process was asked to write."""


class StoreIntegrityWarning(UserWarning):
    """A store opened for reading lacks committed chunk files (its draws read as NaN there)."""


class CheckpointError(LatticeLGMError, RuntimeError):
    """No readable checkpoint (every generation missing or corrupt)."""


def library_versions() -> dict[str, str]:
    """Versions of Python and the libraries that shape a run (stored in the attrs).

    A library already imported gives its ``__version__``; any other its installed
    distribution's version, without importing it (importing ArviZ only to read its version
    cost every run ~2 s of start-up, half of it compiling ArviZ's Numba ufuncs; issue 26).
    """
    import importlib.metadata
    import platform

    out = {"python": platform.python_version()}
    for name in (*BIT_LIBRARIES, "xarray", "zarr", "arviz"):
        mod = sys.modules.get(name)
        if mod is not None:
            out[name] = str(getattr(mod, "__version__", "unknown"))
            continue
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:  # pragma: no cover - dependencies
            out[name] = "missing"
    return out


def hash_arrays(arrays: Mapping[str, Any]) -> str:
    """SHA-256 over named arrays (name, dtype, shape and bytes) in key order."""
    h = hashlib.sha256()
    for k in sorted(arrays):
        a = np.ascontiguousarray(np.asarray(arrays[k]))
        h.update(k.encode())
        h.update(str(a.dtype).encode())
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, default=_jsonable)


def _jsonable(o: Any) -> Any:
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    return repr(o)


@dataclass(frozen=True)
class VarSpec:
    """One array of the store: group, name, dims, full shape, dtype and chunking.

    ``chunk_draws`` chunks the ``draw`` axis (whole blocks of draws of one chain); arrays without
    a draw axis are written once at creation (``data``).
    """

    group: str
    name: str
    dims: tuple[str, ...]
    shape: tuple[int, ...]
    dtype: str
    chunk_draws: int | None = None
    data: np.ndarray | None = None
    attrs: dict[str, Any] = field(default_factory=dict)

    def chunks(self) -> tuple[int, ...]:
        """Chunk shape: one chain, ``chunk_draws`` draws, whole lattice axes."""
        out = []
        for d, n in zip(self.dims, self.shape, strict=True):
            if d == "chain":
                out.append(1)
            elif d == "draw" and self.chunk_draws is not None:
                out.append(max(1, min(self.chunk_draws, n)))
            else:
                out.append(max(1, n))
        return tuple(out)

    def fill(self) -> Any:
        """Placeholder of unwritten entries: NaN (floats), -1 (integers) or False (bool)."""
        kind = np.dtype(self.dtype).kind
        return np.nan if kind == "f" else False if kind == "b" else -1


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence zarr's notes about consolidated metadata (ours) and our dot-directories."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*[Cc]onsolidated metadata.*")
        warnings.filterwarnings("ignore", message=".*not recognized as a component of a Zarr.*")
        yield


def _atomic_json(path: Path, obj: Any) -> None:
    tmp = path.with_name(f".tmp-{os.getpid()}-{path.name}")
    with open(tmp, "w") as fh:
        fh.write(_json(obj))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
