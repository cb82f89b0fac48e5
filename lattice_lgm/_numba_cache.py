"""Keep Numba's on-disk cache of this package's kernels consistent with the sources.

Numba invalidates a cached function when *its own* file changes, not when a function it calls
in another file does: a kernel in ``samplers/ess.py`` that calls ``priors/dense.py``'s
``_lower_matvecs`` keeps the old callee compiled into it after ``dense.py`` is edited (found in
issue 26: an edit that made the callee parallel left the cached caller serial; numba issue
#9938 is a relative).  In an installed package every file changes together; in a source tree
(an editable install, a ``git checkout``) single files change.  So at import, a stamp of every
``.py`` file of the package (path, size, modification time) is compared with the one the cache
was built under, and on any difference every cache file of the package is removed before a
kernel is loaded: the next use recompiles (seconds), never runs stale code.  A tree that cannot
be written (a read-only install) is left alone.
"""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent
#: where, under a package root, the stamp of the sources its cache was compiled from lives
STAMP_NAME = "__pycache__/numba-sources.stamp"


def source_stamp(root: Path = ROOT) -> str:
    """A digest of every ``.py`` file's relative path, size and mtime under ``root``."""
    h = hashlib.blake2b(digest_size=16)
    for p in sorted(root.rglob("*.py")):
        st = p.stat()
        h.update(f"{p.relative_to(root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def refresh(root: Path = ROOT) -> bool:
    """Remove ``root``'s Numba cache files if its sources changed since they were made.

    Returns
    -------
    bool
        True when cache files were removed (or there was no stamp yet).
    """
    stamp_file = root / STAMP_NAME
    now = source_stamp(root)
    with contextlib.suppress(OSError):
        if stamp_file.read_text() == now:
            return False
    try:
        for pattern in ("*.nbi", "*.nbc"):
            for f in root.rglob(f"__pycache__/{pattern}"):
                f.unlink(missing_ok=True)
        stamp_file.parent.mkdir(exist_ok=True)
        tmp = stamp_file.with_suffix(f".{hashlib.blake2b(now.encode()).hexdigest()[:8]}.tmp")
        tmp.write_text(now)
        tmp.replace(stamp_file)
    except OSError:  # a read-only tree: nothing can be stale there that was not shipped so
        return False
    return True


refresh()  # at the package's import (lattice_lgm/__init__.py), before any kernel is loaded
