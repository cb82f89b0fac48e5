"""The store being written: :class:`RunStore`.

It creates and grows the layout, locks chains, writes and commits blocks of draws, and saves
and loads checkpoints.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .base import (
    CHECKPOINT_DIR,
    COMMIT_DIR,
    DATA_MANIFEST,
    FORMAT_VERSION,
    KEEP_GENERATIONS,
    LOCK_DIR,
    CheckpointError,
    StoreExistsError,
    StoreIntegrityError,
    StoreLockedError,
    VarSpec,
    _atomic_json,
    _json,
    _quiet,
    hash_arrays,
)
from .integrity import (
    _chain_arrays,
    _chain_chunk_files,
    _damaged_markers,
    _data_chunk_files,
    _digest,
    _new_commit_dir,
    _read_commits,
    _read_manifest,
    check_store,
    describe_problem,
    restore_metadata,
    store_problem,
)


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
                held = self.root[spec.group].array_keys() if spec.group in self.root else ()
                if spec.name not in held:
                    # a store written by an older version lacks the arrays added since (a
                    # sweep's own stats, a view's newer per-draw arrays): the run writes only
                    # what the store holds, so the extension keeps without them too
                    continue
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

def _write_coord(group: Any, dim: str, values: Any, overwrite: bool = False) -> None:
    """An index coordinate array ``dim`` of ``group`` (strings stored as ``str``)."""
    v = np.asarray(values)
    if v.dtype.kind in "UO":
        v = v.astype(str)
    arr = group.create_array(dim, shape=v.shape, dtype=str if v.dtype.kind == "U" else v.dtype,
                             dimension_names=(dim,), overwrite=overwrite)
    arr[...] = v
