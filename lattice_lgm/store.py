"""The run store: a zarr (v3) group in ArviZ layout, written in aligned blocks, with checkpoints.

Layout (DESIGN §6).  One group per ArviZ group, each array with ``dimension_names`` so that
``xarray.open_datatree(path, engine="zarr")`` and ArviZ read it with no converter::

    <path>/                      root attrs: config, priors, library versions, data hash
      posterior/                 hyperparameters (chain, draw), intercept (chain, draw) and
                                 beta (chain, draw, covariate) on the covariates' original scale,
                                 f (chain, draw, *model dims) float32 when fields are kept
                                 every draw
      posterior_fields/          f (chain, draw, *dims) when thin_fields > 1; its ``draw``
                                 coordinate names the posterior draws it belongs to
      sample_stats/              loglik, n_loglik, n_cov, accepted (chain, draw), and the
                                 sweep's own under ArviZ's names (joint HMC: acceptance_rate,
                                 step_size, n_steps, diverging)
      summaries/                 online (Welford) means/variances of intensity and relative
                                 risk and exceedance counts, per chain, over every stored draw
      observed_data/             counts on the lattice
      constant_data/             exposure, inside, offset, covariate columns
      warmup_posterior/, warmup_sample_stats/   when tuned draws are kept
      .commits/chain-<i>.json    draws committed per phase, one file per chain
      .commits/chunks-<i>.json   a digest of every chunk file of chain i at its last commit
      .locks/chain-<i>.lock      held (flock) by the process writing chain i; names it
      .checkpoint/               ckpt-<generation>.npz (newest two kept), written atomically

Arrays are pre-allocated for the whole run and filled with NaN (integers with -1); chunks are
whole blocks of draws of one chain, so a block write touches its own chunk files only and
chains written by different processes (``--chains 4-7``) never share a chunk.  The metadata
(consolidated) is written once, at creation, and never changes, so processes writing chain
blocks into one store never race on it.  *Commit* is the chain's marker file
``.commits/chain-<i>.json`` replaced atomically after the block's data are on disk:
:func:`open_store` shows committed draws only, so a reader never sees a half-written block.
Nothing wall-clock is stored in the zarr hierarchy, so a run resumed after a crash produces
the same bytes as an uninterrupted one.

Integrity (issue 27): zarr's zstd chunks carry no checksum, and a deleted chunk reads back as
its fill value (NaN), so a damaged store would look like a run with missing draws.  Before each
commit marker, the chain's *manifest* ``.commits/chunks-<i>.json`` records a BLAKE2b digest of
every chunk file of that chain (files changed since the last commit are hashed again; a file
the manifest holds that has disappeared stops the run with :class:`StoreIntegrityError`).
:func:`verify_store` checks every digest (``lattice-lgm verify``); :func:`open_store` checks
that every recorded file exists and warns (:class:`StoreIntegrityWarning`) otherwise; resuming
verifies the chains it continues and refuses a damaged store, naming the files.

Checkpoints hold everything needed to continue exactly (DESIGN §5–6): every chain's bit
generator state, the sampler state (hyperparameters, field, white vector, coefficients, cached
log-likelihood), the online-summary accumulators, FFTW wisdom, and the hashes and versions that
:func:`check_compatible` compares on resume.  They are written to a temporary file, flushed and
renamed (atomic on POSIX), and the previous generation is kept, so a corrupt newest checkpoint
falls back to the one before.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import sys
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import InvalidParameterError, LatticeLGMError

__all__ = [
    "CheckpointError",
    "ResumeMismatchError",
    "RunStore",
    "StoreExistsError",
    "StoreIntegrityError",
    "StoreIntegrityWarning",
    "StoreLockedError",
    "VarSpec",
    "VerifyReport",
    "check_store",
    "describe_problem",
    "library_versions",
    "open_store",
    "read_config",
    "store_problem",
    "verify_store",
]

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


class RunStore:
    """A zarr run store being written (create, write blocks, commit, checkpoint).

    Parameters
    ----------
    path : str or Path
        The store directory.
    rebuild_markers : bool
        For a store whose ``.commits/`` was lost (:func:`store_problem` ``"markers lost"``):
        make a new one (with the data's digests) instead of refusing; the caller re-commits
        what its checkpoint covers (``resume`` does).

    Raises
    ------
    InvalidParameterError
        Not a store, or one whose creation never finished (it holds no draws).
    StoreIntegrityError
        Its commit markers are missing while draws or checkpoints are there.
    """

    def __init__(self, path: str | os.PathLike, *, rebuild_markers: bool = False) -> None:
        import zarr

        self.path = Path(path)
        self._locks: list[Any] = []
        #: whether this instance made a new .commits/ for a store that had lost it
        #: (``rebuild_markers=True``: the caller then commits what its checkpoint covers)
        self.markers_rebuilt = False
        rebuildable = rebuild_markers and any((self.path / CHECKPOINT_DIR).glob("ckpt*.npz"))
        if check_store(self.path, accept=("markers lost",) if rebuildable else ()):
            _new_commit_dir(self.path)
            self.markers_rebuilt = True
        if rebuildable and (bad := _damaged_markers(self.path)):
            # damaged markers are set aside (kept for a post-mortem) and rebuilt like lost ones
            for f in bad:
                os.replace(f, f.with_name(f.name + ".damaged"))
            self.markers_rebuilt = True
        if rebuild_markers and (restored := restore_metadata(self.path)):
            print(f"restored the metadata of {', '.join(restored)} in {self.path} from the "
                  "consolidated copy", file=sys.stderr)
        with _quiet():
            self.root = zarr.open_group(str(self.path), mode="r+")
        #: per chain: chunk key -> (inode, size, mtime_ns, digest) as last hashed here
        self._hashed: dict[int, dict[str, tuple[int, int, int, str]]] = {}

    # -- creation -------------------------------------------------------------------------------
    @classmethod
    def create(cls, path: str | os.PathLike, specs: Sequence[VarSpec],
               coords: Mapping[str, Mapping[str, np.ndarray]],
               attrs: Mapping[str, Any], *, overwrite: bool = False) -> RunStore:
        """Lay out every array of the run (NaN-filled) and the coordinates; commit 0 draws.

        Parameters
        ----------
        specs : sequence of VarSpec
        coords : mapping group -> {dim: values}
            Index coordinates written per group (``chain``, ``draw``, lattice axes, …).
        attrs : mapping
            Root attributes (JSON-serialisable after :func:`_jsonable`).
        """
        import zarr

        p = Path(path)
        if p.exists() and not overwrite:
            problem = store_problem(p)
            if problem in ("half-created", "markers lost"):
                raise StoreExistsError(describe_problem(p, problem))
            raise StoreExistsError(
                f"store={str(p)!r} already exists; resume it (lattice-lgm resume {p}, or "
                "sample(..., store=path, resume=True)), choose another path, or delete it.")
        with _quiet():
            root = zarr.open_group(str(p), mode="w")
            groups: dict[str, Any] = {}
            for spec in specs:
                g = groups.get(spec.group)
                if g is None:
                    g = groups[spec.group] = root.create_group(spec.group)
                arr = g.create_array(spec.name, shape=spec.shape, chunks=spec.chunks(),
                                     dtype=spec.dtype, dimension_names=spec.dims,
                                     fill_value=spec.fill())
                if spec.attrs:
                    arr.attrs.update(json.loads(_json(spec.attrs)))
                if spec.data is not None:
                    arr[...] = spec.data
            for gname, cmap in coords.items():
                g = groups.get(gname) or root.create_group(gname)
                groups[gname] = g
                for dim, values in cmap.items():
                    _write_coord(g, dim, values)
            root.attrs.update(json.loads(_json({**attrs,
                                                "lattice_lgm_format": FORMAT_VERSION})))
            zarr.consolidate_metadata(str(p))
        (p / CHECKPOINT_DIR).mkdir(exist_ok=True)
        _new_commit_dir(p)
        return cls(p)

    # -- growing (extend) -------------------------------------------------------------------------
    def grow(self, specs: Sequence[VarSpec], coords: Mapping[str, Mapping[str, np.ndarray]],
             attrs: Mapping[str, Any]) -> None:
        """Give the store a longer run's layout: array shapes, coordinates, root attributes.

        For ``sample(..., extend=n)``: the arrays grow along ``draw`` (their chunks stay; the
        new region reads as the fill value until written), the ``draw`` coordinates and the
        attributes become those a run of the new length would have written at creation, the
        metadata is consolidated again and the data's digests are taken anew.  Call it under
        :meth:`layout_lock`: chain blocks in other processes may be extending the same store.
        """
        import zarr

        with _quiet():
            for spec in specs:
                arr = self.root[spec.group][spec.name]
                if tuple(arr.shape) != tuple(spec.shape):
                    arr.resize(tuple(spec.shape))
            for gname, cmap in coords.items():
                for dim, values in cmap.items():
                    if tuple(self.root[gname][dim].shape) != np.shape(values):
                        # made anew as create() makes it (its chunking follows its length)
                        _write_coord(self.root[gname], dim, values, overwrite=True)
            self.root.attrs.update(json.loads(_json({**attrs,
                                                     "lattice_lgm_format": FORMAT_VERSION})))
            zarr.consolidate_metadata(str(self.path))
        # the handles read the consolidated metadata at opening: open again, or writes beyond
        # the old shape would be clipped away without a word
        self.reopen()
        _atomic_json(self.path / COMMIT_DIR / DATA_MANIFEST,
                     {k: _digest(f) for k, f in sorted(_data_chunk_files(self.path).items())})

    # -- locks ----------------------------------------------------------------------------------
    def lock_chains(self, chains: Sequence[int]) -> None:
        """Take this process's exclusive lock on each of ``chains`` (before writing them).

        One ``flock`` per chain file in ``.locks/``, so that chain blocks written by separate
        processes (``--chains 4-7``) run side by side while two writers of one chain (two
        ``resume`` of one store) cannot: the second is refused, naming the holder.  The
        kernel drops a lock when its process dies, SIGKILL included: no stale locks.  Held
        until :meth:`unlock` (or the process's end).  No-op where ``fcntl`` is missing.

        Raises
        ------
        StoreLockedError
            A chain is locked by another process (nothing is locked by this call then).
        """
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            return
        import socket

        d = self.path / LOCK_DIR
        d.mkdir(exist_ok=True)
        for c in chains:
            fh = open(d / f"chain-{int(c)}.lock", "a+")  # held open: the lock lives with it
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fh.seek(0)
                holder = fh.read().strip() or "another process"
                fh.close()
                self.unlock()
                raise StoreLockedError(
                    f"chain {int(c)} of {self.path} is being written by {holder}; two writers "
                    "of one chain are refused. Wait for that run to finish (or stop it), then "
                    "resume.") from None
            fh.seek(0)
            fh.truncate()
            fh.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
            fh.flush()
            self._locks.append(fh)

    @contextlib.contextmanager
    def layout_lock(self) -> Iterator[None]:
        """Hold the store-wide lock on its layout (arrays' shapes, root attributes) meanwhile.

        Chain blocks extended by separate processes (``lattice-lgm extend --chains A-B``) grow
        the store once: the first to take this lock grows it, the others find it grown.
        Blocking (a grow takes seconds); dropped by the kernel if the holder dies.
        """
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            yield
            return
        d = self.path / LOCK_DIR
        d.mkdir(exist_ok=True)
        with open(d / "layout.lock", "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def reopen(self) -> None:
        """Open the zarr handles again: another process may have changed the layout (grown it)."""
        import zarr

        with _quiet():
            self.root = zarr.open_group(str(self.path), mode="r+")

    def unlock(self) -> None:
        """Release every chain lock this instance holds (the files are left empty)."""
        for fh in self._locks:
            with contextlib.suppress(OSError):
                fh.seek(0)
                fh.truncate()
                fh.close()
        self._locks = []

    # -- writing --------------------------------------------------------------------------------
    def write(self, group: str, name: str, chains: slice, draws: slice,
              data: np.ndarray) -> None:
        """Write ``data`` into ``[chains, draws, ...]`` of ``group/name``."""
        self.root[group][name][chains, draws, ...] = data

    def commit(self, phase: str, n_draws: Mapping[int, int]) -> None:
        """Record that draws ``[0, n)`` of ``phase`` are on disk for each chain.

        One marker file per chain, replaced atomically after the data are written: the commit
        point readers rely on.  Before it, the chain's manifest (digests of its chunk files)
        is brought up to date.

        Raises
        ------
        StoreIntegrityError
            A chunk file the manifest records has disappeared since (nothing is committed).
        """
        for c, n in n_draws.items():
            self._update_manifest(int(c))
            _atomic_json(self.path / COMMIT_DIR / f"chain-{int(c)}.json",
                         {**_read_commits(self.path).get(int(c), {}), phase: int(n)})

    def _update_manifest(self, chain: int) -> None:
        """Digest every chunk file of ``chain`` changed since it was last hashed here."""
        old = _read_manifest(self.path, chain)
        files = _chain_chunk_files(self.path, chain)
        gone = sorted(set(old) - set(files))
        if gone:
            raise StoreIntegrityError(
                f"store={str(self.path)!r}: {len(gone)} committed chunk file(s) of chain "
                f"{chain} disappeared while the run was writing it ({', '.join(gone[:5])}"
                f"{', …' if len(gone) > 5 else ''}); nothing more is committed. Check what "
                "else touches the store; `lattice-lgm verify` lists the damage.")
        seen = self._hashed.setdefault(chain, {})
        out = {}
        for key, path in files.items():
            st = path.stat()
            stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
            prev = seen.get(key)
            if prev is not None and prev[:3] == stamp:
                out[key] = prev[3]
                continue
            digest = _digest(path)
            seen[key] = (*stamp, digest)
            out[key] = digest
        if out != old:
            _atomic_json(self.path / COMMIT_DIR / f"chunks-{chain}.json", dict(sorted(out.items())))

    def committed(self, phase: str) -> dict[int, int]:
        """Draws committed per chain in ``phase`` (chains without draws omitted)."""
        return {c: d[phase] for c, d in _read_commits(self.path).items() if d.get(phase)}

    def read(self, group: str, name: str, chains: slice, draws: slice) -> np.ndarray:
        """Read back ``[chains, draws, ...]`` (to refill a partly written block on resume)."""
        return np.asarray(self.root[group][name][chains, draws, ...])

    @property
    def attrs(self) -> dict[str, Any]:
        """The root attributes."""
        return dict(self.root.attrs)

    def remove_orphans(self, chains: Sequence[int], tag: str = "") -> list[Path]:
        """Delete the temporary files a killed writer of ``chains`` left behind; before resuming.

        A process killed mid-write leaves zarr's atomic-write temporaries
        (``<chunk>.<uuid>.partial``) beside the chunks it was replacing, a half-written commit
        marker (``.commits/.tmp-<pid>-chain-<i>.json``) and a half-written checkpoint
        (``.checkpoint/.tmp<tag>-<gen>.npz``).  None of them is ever read, but they would stay in
        the store for good and make a resumed run's files differ from an uninterrupted one's.
        Only files of these chains (and of this checkpoint ``tag``) are touched: another chain
        block writing into the same store at the same time keeps its own temporaries.

        Parameters
        ----------
        chains : sequence of int
            The chains the resuming process writes.
        tag : str
            Its checkpoint tag (``""`` for a run that writes every chain).

        Returns
        -------
        list of Path
            The files removed.
        """
        mine = {str(int(c)) for c in chains}
        gone: list[Path] = []
        # arrays without a chain axis are written once, at creation
        for arr in _chain_arrays(self.path):
            chunk_dir = self.path / arr / "c"
            for f in (chunk_dir.rglob("*.partial") if chunk_dir.is_dir() else ()):
                # c/<chain>/<draw block>/... with chain chunks of one chain each
                first = f.relative_to(chunk_dir).parts[0].split(".", 1)[0]
                if first in mine:
                    gone.append(f)
        gone += [f for c in mine for stem in ("chain", "chunks")
                 for f in (self.path / COMMIT_DIR).glob(f".tmp-*-{stem}-{c}.json")]
        pre = f".tmp{tag}-"
        gone += [f for f in (self.path / CHECKPOINT_DIR).glob(f"{pre}*.npz")
                 if f.name[len(pre):-4].isdigit()]  # ".tmp-" alone would match tagged blocks
        for f in gone:
            f.unlink(missing_ok=True)
        return gone

    # -- checkpoints ----------------------------------------------------------------------------
    def save_checkpoint(self, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray],
                        tag: str = "") -> Path:
        """Write a checkpoint generation atomically and drop generations beyond the newest two.

        ``tag`` separates the checkpoints of chain groups written into one store by separate
        processes (``--chains 4-7``).
        """
        d = self.path / CHECKPOINT_DIR
        d.mkdir(exist_ok=True)
        gens = self._generations(tag)
        gen = (gens[-1] + 1) if gens else 0
        meta = dict(meta, generation=gen)
        body = {f"a/{k}": np.asarray(v) for k, v in arrays.items()}
        payload_hash = hash_arrays(body)
        body["meta"] = np.frombuffer(_json({**meta, "payload_sha256": payload_hash}).encode(),
                                     dtype=np.uint8)
        buf = io.BytesIO()
        np.savez(buf, **body)
        final = d / f"ckpt{tag}-{gen:08d}.npz"
        tmp = d / f".tmp{tag}-{gen:08d}.npz"
        with open(tmp, "wb") as fh:
            fh.write(buf.getvalue())
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, final)
        dfd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
        for old in gens[:-(KEEP_GENERATIONS - 1)] if KEEP_GENERATIONS > 1 else gens:
            (d / f"ckpt{tag}-{old:08d}.npz").unlink(missing_ok=True)
        return final

    def _generations(self, tag: str = "") -> list[int]:
        d = self.path / CHECKPOINT_DIR
        if not d.exists():
            return []
        out = []
        prefix = f"ckpt{tag}-"
        for f in d.iterdir():
            rest = f.name[len(prefix):-4] if f.name.startswith(prefix) else ""
            if f.suffix == ".npz" and rest.isdigit():
                out.append(int(rest))
        return sorted(out)

    def load_checkpoint(self, tag: str = "") -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The newest readable checkpoint (falling back to older generations if corrupt).

        Raises
        ------
        CheckpointError
            No generation can be read (each failure is named).
        """
        errors = []
        for gen in reversed(self._generations(tag)):
            f = self.path / CHECKPOINT_DIR / f"ckpt{tag}-{gen:08d}.npz"
            try:
                with np.load(f, allow_pickle=False) as z:
                    meta = json.loads(bytes(z["meta"]).decode())
                    arrays = {k[2:]: z[k] for k in z.files if k.startswith("a/")}
                if hash_arrays({f"a/{k}": v for k, v in arrays.items()}) != meta.get(
                        "payload_sha256"):
                    raise ValueError("payload checksum mismatch")
            except Exception as exc:  # a truncated or corrupt file: try the previous one
                errors.append(f"{f.name}: {type(exc).__name__}: {exc}")
                continue
            if errors:
                warnings.warn(
                    "checkpoint: newest generation unreadable, resuming from generation "
                    f"{gen} ({'; '.join(errors)})", stacklevel=2)
            return meta, arrays
        raise CheckpointError(
            f"no readable checkpoint in {self.path / CHECKPOINT_DIR}"
            + (f": {'; '.join(errors)}" if errors else " (none written yet: the run stopped "
               "before its first checkpoint; start it again)"))


def _atomic_json(path: Path, obj: Any) -> None:
    tmp = path.with_name(f".tmp-{os.getpid()}-{path.name}")
    with open(tmp, "w") as fh:
        fh.write(_json(obj))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _parse_marker(f: Path) -> dict[str, int] | None:
    """A commit marker's ``phase -> draws``, or None if it is not such a JSON object."""
    try:
        data = json.loads(f.read_text())
    except ValueError:
        return None
    ok = isinstance(data, dict) and all(type(v) is int for v in data.values())  # bools refused
    return dict(data) if ok else None


def _read_commits(path: Path) -> dict[int, dict[str, int]]:
    d = Path(path) / COMMIT_DIR
    out: dict[int, dict[str, int]] = {}
    if d.exists():
        for f in d.glob("chain-*.json"):
            marker = _parse_marker(f)
            if marker is None:
                raise StoreIntegrityError(
                    f"store={str(path)!r}: the commit marker {COMMIT_DIR}/{f.name} is damaged (not "
                    "a JSON object of draw counts). `lattice-lgm resume` (resume=True) rebuilds "
                    "it from the newest checkpoint.")
            out[int(f.stem.split("-")[1])] = marker
    return out


def _damaged_markers(path: Path) -> list[Path]:  # markers resume sets aside and rebuilds
    return [f for f in sorted((Path(path) / COMMIT_DIR).glob("chain-*.json"))
            if _parse_marker(f) is None]


def _write_coord(group: Any, dim: str, values: Any, overwrite: bool = False) -> None:
    """An index coordinate array ``dim`` of ``group`` (strings stored as ``str``)."""
    v = np.asarray(values)
    if v.dtype.kind in "UO":
        v = v.astype(str)
    arr = group.create_array(dim, shape=v.shape, dtype=str if v.dtype.kind == "U" else v.dtype,
                             dimension_names=(dim,), overwrite=overwrite)
    arr[...] = v


def _new_commit_dir(path: Path) -> None:
    """Make ``.commits/`` holding the data's digests, atomically (renamed into place).

    Its presence is what makes a directory a created store (:func:`store_problem`), so it
    appears complete or not at all.
    """
    final = Path(path) / COMMIT_DIR
    tmp = Path(path) / f".tmp-{os.getpid()}{COMMIT_DIR}"
    if tmp.exists():
        for f in tmp.iterdir():
            f.unlink()
    tmp.mkdir(exist_ok=True)
    _atomic_json(tmp / DATA_MANIFEST,
                 {k: _digest(f) for k, f in sorted(_data_chunk_files(path).items())})
    os.replace(tmp, final)


def store_problem(path: str | os.PathLike) -> str | None:
    """What keeps a directory from being a usable run store, or None.

    Returns
    -------
    str or None
        ``"not a store"`` (no ``zarr.json``); ``"half-created"`` (the arrays' layout began
        but ``.commits/`` was never made: no draw can have been written); ``"markers lost"``
        (no ``.commits/``, yet draws or checkpoints are there: e.g. copied by a tool that
        skips dot-directories); ``"other format"`` (written by a version of lattice_lgm whose
        layout differs from :data:`FORMAT_VERSION`).
    """
    p = Path(path)
    if not (p / "zarr.json").is_file():
        return "not a store"
    if _format_of(p) not in (None, FORMAT_VERSION):
        return "other format"
    if (p / COMMIT_DIR).is_dir():
        return None
    ckpts = list((p / CHECKPOINT_DIR).glob("ckpt*.npz")) if (p / CHECKPOINT_DIR).is_dir() else []
    drawn = any(f for a in _chain_arrays(p) for f in (p / a / "c").glob("*"))
    return "markers lost" if ckpts or drawn else "half-created"


def check_store(path: str | os.PathLike, *, accept: Sequence[str] = ()) -> str | None:
    """Raise for a :func:`store_problem` of ``path`` unless it is one of ``accept``.

    Returns
    -------
    str or None
        The accepted problem, or None for a usable store.

    Raises
    ------
    InvalidParameterError
        Not a store, or half-created (nothing to keep).
    StoreIntegrityError
        Its commit markers are lost while draws or checkpoints are there.
    """
    problem = store_problem(path)
    if problem is None or problem in accept:
        return problem
    cls = StoreIntegrityError if problem == "markers lost" else InvalidParameterError
    raise cls(describe_problem(path, problem))


def describe_problem(path: str | os.PathLike, problem: str) -> str:
    """The message for a :func:`store_problem`, with what to do."""
    p = str(path)
    if problem == "not a store":
        return (f"store={p!r} is not a run store (no zarr.json); give the directory that "
                "sample(..., store=...) or `lattice-lgm run` wrote.")
    if problem == "other format":
        return (f"store={p!r} has layout version {_format_of(Path(path))}; this lattice_lgm "
                f"reads and writes version {FORMAT_VERSION} (version 2 stores the intercept "
                "as posterior.intercept and beta on the covariates' original scale, where "
                "version 1 had posterior.mean and standardised beta). Read it with the "
                "lattice_lgm that wrote it (its version is in the store's attrs), or run the "
                "model again into a new store.")
    if problem == "half-created":
        return (f"store={p!r} was never fully created (no {COMMIT_DIR}/): the process making it "
                "stopped while it laid out the arrays, before any draw was written, so it "
                "holds nothing to keep. Delete the directory and start the run again "
                "(`lattice-lgm run` with the same config).")
    n = len(list((Path(path) / CHECKPOINT_DIR).glob("ckpt*.npz")))
    return (f"store={p!r} has lost its commit markers ({COMMIT_DIR}/ is missing: copied by a "
            "tool that skips dot-directories?) while its draws"
            + (f" and {n} checkpoint(s)" if n else "") + " are there. Do not delete it: "
            + ("`lattice-lgm resume` (or sample(..., resume=True)) rebuilds the markers from "
               "the newest checkpoint and finishes the run." if n else
               f"copy {COMMIT_DIR}/ and {CHECKPOINT_DIR}/ over from the original, if it "
               "still exists; without them the draws cannot be told from placeholders."))


def _format_of(path: Path) -> int | None:
    """The ``lattice_lgm_format`` of a store's root attributes (None before they are written).

    Raises
    ------
    StoreIntegrityError
        The root ``zarr.json`` is damaged.
    """
    meta = _root_meta(path)
    fmt = (meta.get("attributes") or {}).get("lattice_lgm_format")
    return None if fmt is None else int(fmt)


def _digest(path: Path) -> str:
    """BLAKE2b-128 of a file's bytes, hex."""
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def _chain_arrays(path: Path) -> list[str]:
    """``group/array`` of the arrays chunked one chain at a time (first dimension ``chain``).

    The ``chain`` coordinates themselves (one chunk for all chains) are data.
    """
    out = []
    for meta in sorted(Path(path).glob("*/*/zarr.json")):
        try:
            m = json.loads(meta.read_text())
            dims = m.get("dimension_names") or ()
            per_chain = m["chunk_grid"]["configuration"]["chunk_shape"][0] == 1
        except (OSError, ValueError, KeyError, IndexError, TypeError):
            continue
        if m.get("node_type") == "array" and dims and dims[0] == "chain" and per_chain:
            out.append(meta.parent.relative_to(path).as_posix())
    return out


def _chain_chunk_files(path: Path, chain: int) -> dict[str, Path]:
    """Chunk files of ``chain``: ``group/array/c/<chain>`` (1-D) or ``…/c/<chain>/…``."""
    out = {}
    for arr in _chain_arrays(path):
        d = Path(path) / arr / "c" / str(int(chain))
        for f in (d.rglob("*") if d.is_dir() else [d]):
            if f.is_file() and not f.name.endswith(".partial"):
                out[f.relative_to(path).as_posix()] = f
    return out


def _data_chunk_files(path: Path) -> dict[str, Path]:
    """Chunk files of the arrays without a chain axis (data, coordinates: written once)."""
    chained = set(_chain_arrays(path))
    out = {}
    for d in sorted(Path(path).glob("*/*/c")):
        if d.parent.relative_to(path).as_posix() in chained:
            continue
        for f in d.rglob("*"):
            if f.is_file() and not f.name.endswith(".partial"):
                out[f.relative_to(path).as_posix()] = f
    return out


def _read_manifest(path: Path, chain: int | str) -> dict[str, str]:
    """The digests of chain ``chain``'s chunks, or of the data's with ``chain="data"``."""
    f = Path(path) / COMMIT_DIR / f"chunks-{chain}.json"
    try:
        return dict(json.loads(f.read_text()))
    except FileNotFoundError:
        return {}
    except ValueError as exc:
        raise StoreIntegrityError(
            f"store={str(path)!r}: the chunk manifest {f.name} is unreadable ({exc}); "
            f"the chunks it covers ({chain}) cannot be checked without it.") from exc


@dataclass
class VerifyReport:
    """What :func:`verify_store` found.

    Attributes
    ----------
    checked : int
        Chunk files whose digest was compared (or, with ``digests=False``, whose presence).
    missing : list of str
        Recorded chunk files that are not there (their draws read as NaN).
    corrupt : list of str
        Chunk files whose bytes differ from their recorded digest: any that holds committed
        draws only (it is never written again), and others not written since the commit that
        recorded them.
    changed : list of str
        Chunk files rewritten after their chain's last commit: a run was stopped between
        writing a block (or the online summaries) and committing it.  Not damage: ``resume``
        rewrites them; until then a reader sees the committed draws, which they do not
        change (only partly written blocks and the summaries are rewritten in place).
    unverifiable : list of int
        Chains with committed draws but no manifest (stores written before digests; their
        data and coordinates have none either).
    """

    checked: int = 0
    missing: list[str] = field(default_factory=list)
    corrupt: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unverifiable: list[int] = field(default_factory=list)
    #: nodes whose own zarr.json is missing (readers use the consolidated copy; a writer
    #: restores it, :func:`restore_metadata`): not damage to the draws
    metadata_missing: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No missing or corrupt file."""
        return not self.missing and not self.corrupt

    def describe(self, limit: int = 10) -> str:
        """A few lines for a person: counts, then the first ``limit`` files of each kind."""
        lines = [f"{self.checked} chunk file(s) checked: {len(self.missing)} missing, "
                 f"{len(self.corrupt)} corrupt"]
        for what, names in (("missing", self.missing), ("corrupt", self.corrupt)):
            for n in names[:limit]:
                lines.append(f"  {what}: {n}")
            if len(names) > limit:
                lines.append(f"  … and {len(names) - limit} more {what}")
        if self.changed:
            lines.append(f"  {len(self.changed)} file(s) rewritten after the last commit (a "
                         "run was stopped mid-block; resume rewrites them): "
                         + ", ".join(self.changed[:3]) + (", …" if len(self.changed) > 3
                                                          else ""))
        if self.unverifiable:
            lines.append(f"  chains {self.unverifiable} were written before chunk digests: "
                         "their files cannot be checked")
        if self.metadata_missing:
            lines.append(f"  {len(self.metadata_missing)} node(s) lost their zarr.json ("
                         + ", ".join(self.metadata_missing[:3]) + "): readers use the "
                         "consolidated copy; resume or extend writes them back")
        return "\n".join(lines)


def verify_store(path: str | os.PathLike, *, chains: Sequence[int] | None = None,
                 digests: bool = True) -> VerifyReport:
    """Check a store's committed chunk files against the digests recorded at each commit.

    Parameters
    ----------
    path : str or Path
    chains : sequence of int, optional
        Only these chains (default: every chain with a commit marker).
    digests : bool
        Compare every file's digest (reads the whole store); False checks presence only.

    Returns
    -------
    VerifyReport
    """
    p = Path(path)
    check_store(p, accept=("half-created", "markers lost"))  # they are reported, not checked
    commits = _read_commits(p)
    report = VerifyReport()
    # each manifest with the time of the commit that recorded it: a file written since is
    # an interrupted writer's, not damage (VerifyReport.changed)
    # (the data are written once, before their manifest: any difference there is damage)
    todo: list[tuple[dict[str, str], int | float]] = [(_read_manifest(p, "data"), math.inf)]
    for c in sorted(commits) if chains is None else sorted(int(c) for c in chains):
        manifest = _read_manifest(p, c)
        if not manifest:
            if any(commits.get(c, {}).values()):
                report.unverifiable.append(c)
            continue
        todo.append((manifest, _mtime(p / COMMIT_DIR / f"chain-{c}.json")))
    meta = _root_meta(p)
    final = _final_chunks(meta, commits)
    for manifest, committed_at in todo:
        for key, want in sorted(manifest.items()):
            f = p / key
            report.checked += 1
            if not f.is_file():
                report.missing.append(key)
            elif digests and _digest(f) != want:
                # a chunk holding committed draws only is never written again: any change is
                # damage, whenever it happened; others (the summaries, a block's partly
                # written chunk) may be an interrupted writer's
                late = _mtime(f) >= committed_at and not final(key)
                (report.changed if late else report.corrupt).append(key)
    report.metadata_missing = _missing_metadata(p, meta)
    return report


def _consolidated(meta: Mapping[str, Any]) -> dict[str, Any]:
    """The consolidated metadata of every node below the root (from :func:`_root_meta`)."""
    return dict((meta.get("consolidated_metadata") or {}).get("metadata") or {})


def _root_meta(path: Path) -> dict[str, Any]:
    """The root ``zarr.json``, parsed (:class:`StoreIntegrityError` if it is not valid JSON)."""
    f = Path(path) / "zarr.json"
    try:
        return dict(json.loads(f.read_text()))
    except ValueError as exc:
        raise StoreIntegrityError(
            f"store={str(path)!r}: its root metadata zarr.json is damaged ({exc}); it holds the "
            "run's settings, library versions and the layout of every array, so nothing can "
            "be read or resumed without it. Restore zarr.json from a copy of the store (the "
            "draws themselves are in the chunk files).") from None


def _missing_metadata(path: Path, meta: Mapping[str, Any]) -> list[str]:
    """Nodes (groups, arrays) whose own ``zarr.json`` is gone but consolidated metadata has."""
    return sorted(k for k in _consolidated(meta) if not (Path(path) / k / "zarr.json").is_file())


def restore_metadata(path: str | os.PathLike) -> list[str]:
    """Write back every node's ``zarr.json`` that is missing, from the consolidated metadata.

    Readers use the consolidated copy in the root ``zarr.json`` and never notice a missing
    node file; a writer (resume, extend) opens the hierarchy node by node and would find the
    array gone.  The copy is the same metadata, written when the store was made or grown.

    Returns
    -------
    list of str
        The nodes restored.
    """
    p = Path(path)
    cons = _consolidated(meta := _root_meta(p))
    done = []
    for key in _missing_metadata(p, meta):
        (p / key).mkdir(parents=True, exist_ok=True)
        _atomic_json(p / key / "zarr.json", cons[key])
        done.append(key)
    return done


def _final_chunks(meta: Mapping[str, Any], commits: Mapping[int, Mapping[str, int]]) -> Any:
    """A predicate: whether chunk ``key`` holds committed draws only.

    ``key`` is ``group/name/c/<chain>/<k>/...``.  Such a chunk is complete before its
    commit and never written again.
    """
    cons = _consolidated(meta)
    rc = dict((meta.get("attributes") or {}).get("run_config") or {})
    thin = int(rc.get("thin_fields") or 1)
    phase_of = {g: ph for ph, gs in PHASE_GROUPS.items() for g in gs}

    def final(key: str) -> bool:
        parts = key.split("/")
        if len(parts) < 5 or parts[0] not in phase_of or parts[2] != "c":
            return False
        meta = cons.get(f"{parts[0]}/{parts[1]}") or {}
        try:
            length = int(meta["chunk_grid"]["configuration"]["chunk_shape"][1])
            chain, k = int(parts[3]), int(parts[4])
        except (KeyError, IndexError, TypeError, ValueError):
            return False
        n = int(commits.get(chain, {}).get(phase_of[parts[0]], 0))
        if parts[0].endswith("_fields"):
            n = -(-n // thin)  # field draws 0, thin, 2·thin, … below n
        return (k + 1) * length <= n

    return final


def _mtime(path: Path) -> int:
    """Modification time in ns (0 for a missing file: everything counts as written since)."""
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


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


# -- reading --------------------------------------------------------------------------------------
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


#: the drawn groups of each phase
PHASE_GROUPS = {
    "posterior": ("posterior", "posterior_fields", "sample_stats"),
    "warmup": ("warmup_posterior", "warmup_posterior_fields", "warmup_sample_stats"),
}


def read_config(path: str | os.PathLike) -> dict[str, Any]:
    """The resolved configuration stored with a run (``{}`` for Python-API runs without one)."""
    import zarr

    with _quiet():
        root = zarr.open_group(str(path), mode="r")
    return dict(root.attrs.get("config") or {})
