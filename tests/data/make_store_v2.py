"""Write ``tests/data/store_v2.zarr``: a small interrupted run in store format 2, committed.

Issue 28 restructures the layers above the store and promises that "a store written before the
change still opens, resumes and summarises"; ``tests/test_store_compat.py`` holds every later
version to that on this store.  It is the run ``tests/runs/test_runs.RUN`` of
``tests/runs/test_runs.build_model()`` stopped after its fourth checkpoint (an exception, as a
crash leaves it).  Run from the repository root::

    python tests/data/make_store_v2.py
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from lattice_lgm.runs import sample  # noqa: E402

try:  # the run loop's home since issue 28
    from lattice_lgm.runs.loop import _Runner
except ImportError:  # before: one module (how the committed store was written)
    from lattice_lgm.runs import _Runner
from tests.runs.test_runs import RUN, build_model  # noqa: E402

OUT = Path(__file__).resolve().parent / "store_v2.zarr"


def main() -> None:
    if OUT.exists():
        shutil.rmtree(OUT)
    orig, calls = _Runner._checkpoint, {"n": 0}

    def dying(self, *a, **k):
        orig(self, *a, **k)
        calls["n"] += 1
        if calls["n"] == 4:
            raise RuntimeError("stopped after the fourth checkpoint")

    _Runner._checkpoint = dying
    try:
        sample(build_model(), store=OUT, **RUN)
    except RuntimeError:
        pass
    finally:
        _Runner._checkpoint = orig
    for lock in (OUT / ".locks").glob("*"):
        lock.unlink()
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
