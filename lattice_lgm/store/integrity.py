"""The store's integrity: commit markers, chunk digests and manifests, and verification.

Also what keeps a directory from being a usable store (:func:`store_problem`) and the repair
of lost node metadata (:func:`restore_metadata`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InvalidParameterError
from .base import (
    CHECKPOINT_DIR,
    COMMIT_DIR,
    DATA_MANIFEST,
    FORMAT_VERSION,
    PHASE_GROUPS,
    StoreIntegrityError,
    _atomic_json,
)


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
