"""Operations on a run's store around the loop: writability, extension, re-commits, integrity."""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import InvalidParameterError, LatticeLGMError, ResourceLimitError
from ..store.base import StoreIntegrityError
from ..store.integrity import verify_store
from ..store.writer import RunStore
from .plan import PHASES

_STORE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM)


def _check_writable(path: Path) -> None:
    """Refuse a store path in a location this process cannot write, before any work."""
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise InvalidParameterError(
            f"store={str(path)!r} cannot be written: {str(ancestor)!r} is read-only for this "
            "process. Choose a writable location (store.path in the config).")


def _store_write_error(path: Path, exc: OSError) -> LatticeLGMError:
    """A clear error for a write the filesystem refused; the store stays resumable."""
    full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
    what = "the disk is full" if full else f"the filesystem refused a write ({exc.strerror})"
    cls = ResourceLimitError if full else InvalidParameterError
    return cls(
        f"writing {str(path)!r} failed: {what} at {exc.filename or 'a store file'}. Every "
        "committed draw is safe (commit markers are written after their data, checkpoints by "
        "rename): " + ("free space" if full else "fix the permissions")
        + f", then `lattice-lgm resume {path}` (or sample(..., resume=True)) continues exactly.")


def _config_with_draws(config: Mapping[str, Any] | None, draws: int) -> Any:
    """A resolved configuration (a copy) whose ``sampling.draws`` is ``draws``."""
    import json

    if not config:
        return config
    out = json.loads(json.dumps(config, default=str))
    if isinstance(out.get("sampling"), dict) and "draws" in out["sampling"]:
        out["sampling"]["draws"] = int(draws)
    return out


def _with_draws(attrs: Mapping[str, Any], draws: int) -> dict[str, Any]:
    """A run's attrs as they read with ``draws`` posterior draws (run_config and config)."""
    import json

    out = json.loads(json.dumps(attrs, default=str))
    out["run_config"]["draws"] = int(draws)
    if out.get("config"):
        out["config"] = _config_with_draws(out["config"], draws)
    return out


def _block_draws(path: Path, chain_ids: Sequence[int]) -> int:
    """The committed posterior draws of a block of chains (all alike), for its extension."""
    done = RunStore(path).committed("posterior")
    have = {int(c): done.get(int(c), 0) for c in chain_ids}
    if len(set(have.values())) != 1:
        raise InvalidParameterError(
            f"chains {sorted(have)} of {path} have different numbers of committed draws "
            f"({have}); resume them first, then extend them.")
    return next(iter(have.values()))


def _grow_under_lock(st: Any, plan: Any, old_draws: int, state: Any,
                     attrs: Mapping[str, Any]) -> None:
    """Grow the store from ``old_draws`` to ``plan.draws`` once, whichever block comes first.

    Under the store's layout lock the stored length is read afresh: still ``old_draws`` —
    every chain must have finished it, then this process grows the store; already
    ``plan.draws`` — another chain block extended it for the same request, and only the
    handles are opened again (writes beyond the shape they knew would be clipped); anything
    else — an extension by another amount, refused.
    """
    with st.layout_lock():
        now = RunStore(st.path)
        stored = int(dict(now.attrs.get("run_config", {})).get("draws", -1))
        if stored == old_draws:
            chains = int(dict(now.attrs.get("run_config", {})).get("chains", 0))
            done = now.committed("posterior")
            short = [c for c in range(chains) if done.get(c, 0) != old_draws]
            if short:
                raise InvalidParameterError(
                    f"{st.path} cannot grow to {plan.draws} draws while chains {short} have not "
                    f"finished its {old_draws} (resume their blocks first, then extend).")
            st.grow(*plan.specs(plan.view.record(state)), attrs)
        elif stored == plan.draws:
            st.reopen()
        else:
            raise _extended_elsewhere(st.path, stored, old_draws, plan.draws)


def _extended_elsewhere(path: Path, stored: int, old: int, draws: int) -> InvalidParameterError:
    return InvalidParameterError(
        f"{path} has been extended to {stored} draws by another chain block, not to {draws}; "
        f"extend this block by {stored - old} (--draws {stored - old}) to finish it alike.")


def _require_finished(st: Any, plan: Any, draws: int) -> None:
    """Refuse to extend a run whose chains have not all committed their ``draws``."""
    done = st.committed("posterior")
    short = [c for c in plan.chain_ids if done.get(c, 0) < draws]
    if short:
        raise InvalidParameterError(
            f"{st.path} is not finished (chains {short} have fewer than {draws} committed "
            "draws); resume it first, then extend it.")


def _recommit(st: Any, plan: Any, meta: Mapping[str, Any]) -> None:
    """Commit what a checkpoint covers, for a store whose markers were lost.

    A checkpoint at ``(phase, i)`` is written right after the commit of draw ``i`` of that
    phase (:meth:`_Runner.run`), so the markers it implies are: every stored phase before
    it in full, and ``i`` draws of its own.  The chunk digests are taken from the files as
    they are (nothing older is left to compare them with).
    """
    phase, i = str(meta["phase"]), int(meta["i"])
    for ph in PHASES[: PHASES.index(phase) + 1]:
        if plan.lens[ph] > 0:
            n = i if ph == phase else (plan.tune if ph == "warmup" else plan.draws)
            st.commit(ph, {c: n for c in plan.chain_ids})
    print(f"rebuilt the commit markers of {st.path} from its checkpoint ({phase} draw {i})",
          file=sys.stderr)


def _require_intact(path: str | os.PathLike, chains: Sequence[int]) -> None:
    """Refuse to continue ``chains`` of a store whose committed chunk files are damaged.

    Raises
    ------
    StoreIntegrityError
        Naming the missing and corrupt files.  Lost draws cannot be rebuilt from the
        checkpoints (they hold the newest state only).
    """
    report = verify_store(path, chains=chains)
    if not report.ok:
        raise StoreIntegrityError(
            f"cannot resume {str(path)!r}: committed draws are damaged; "
            + report.describe(limit=5).replace("\n", ";")
            + ". The checkpoints hold the newest state only, so these draws cannot be "
            "rebuilt in place: run again into a new store (the same seed and settings give "
            "the same draws), or restore the store from a copy.")


