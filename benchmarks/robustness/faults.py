"""Faults a machine or a user inflicts on a run's store, tried one by one (issue 27).

A small LGCP run is written twice: finished (the reference) and interrupted after a checkpoint.
Each fault damages a fresh copy of one of them; then the store is read (``open_store``,
``verify_store``) and the run is resumed.  The outcome is classified, and the counts written
to ``benchmarks/results/faults.json``:

* ``survived``: the resumed (or untouched) store holds exactly the reference's draws;
* ``refused``: a lattice_lgm error names the damage before anything is read as a posterior
  (and the draws that were there are still there);
* ``raw``: another exception (a traceback for a CLI user);
* ``lost``: the run finished or was read without a word, but its draws differ from the
  reference (NaN where a chunk was, or wrong values): data lost.  Must be 0.

Separately, ``--kills N`` SIGKILLs a child process running the interrupted run N times at
random moments, resuming after each, and compares the final store with the reference.

Usage::

    python benchmarks/robustness/faults.py              # every fault and 10 kills, JSON
    python benchmarks/robustness/faults.py --quick      # faults only, no JSON
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(ROOT))

MODEL_SRC = """
import numpy as np
import xarray as xr
from lattice_lgm import LGCP

def build_model():
    rng = np.random.default_rng(0)
    xy = rng.uniform(0, 100, size=(750, 2))
    keep = rng.random(750) < (xy[:, 0] + xy[:, 1]) / 200.0
    c = (np.arange(40) + 0.5) * 2.5
    z = xr.DataArray(np.add.outer(c, 2 * c), dims=("y", "x"), coords={"y": c, "x": c})
    return LGCP(xy[keep][:250], (0, 100, 0, 100), cell_size=6.25, units="m",
                covariates={"z": z}, formula="~ z")
"""
RUN = dict(draws=30, tune=4, chains=2, random_seed=11, checkpoint_every=3, n_latent=2,
           representation="prior-white", progressbar=False)
CHILD = """
import sys, json
sys.path.insert(0, {root!r})
{model_src}
from lattice_lgm.runs import sample
sample(build_model(), store=sys.argv[1], resume=sys.argv[2] == "resume", **json.loads(sys.argv[3]))
"""


def _ns() -> dict:
    ns: dict = {}
    exec(MODEL_SRC, ns)
    return ns


def _draws(path: Path) -> dict[str, np.ndarray]:
    """Every drawn array of a store, read directly (no trimming, no checks)."""
    import zarr

    root = zarr.open_group(str(path), mode="r")
    out = {}
    for g in ("posterior", "sample_stats", "summaries"):
        if g in root:
            for name, arr in root[g].arrays():
                out[f"{g}/{name}"] = np.asarray(arr[...])
    return out


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(
        np.array_equal(a[k], b[k], equal_nan=True) for k in a)


def _chunks(path: Path, group: str = "posterior", name: str = "sd") -> list[Path]:
    return sorted(f for f in (path / group / name / "c").rglob("*") if f.is_file())


def _flip(f: Path) -> None:
    b = bytearray(f.read_bytes())
    b[len(b) // 2] ^= 0xFF
    f.write_bytes(bytes(b))


def _truncate(f: Path, n: int = 0) -> None:
    f.write_bytes(f.read_bytes()[:n])


def faults() -> list[tuple[str, str, Callable[[Path], None]]]:
    """(name, which store it damages: 'finished' or 'interrupted', the damage)."""
    def ckpts(p: Path) -> list[Path]:
        return sorted((p / ".checkpoint").glob("ckpt*.npz"))

    def other_chain_chunk(p: Path) -> None:
        a = sorted((p / "posterior" / "sd" / "c" / "0").rglob("*"))
        b = sorted((p / "posterior" / "sd" / "c" / "1").rglob("*"))
        a, b = [f for f in a if f.is_file()], [f for f in b if f.is_file()]
        a[0].write_bytes(b[0].read_bytes())

    def junk(p: Path) -> None:
        (p / "notes.txt").write_text("a user's notes")
        (p / "posterior" / ".DS_Store").write_bytes(b"\0\1")

    def orphans(p: Path) -> None:
        f = _chunks(p)[0]
        (f.parent / (f.name + ".0123abcd.partial")).write_bytes(b"half")
        (p / ".commits" / ".tmp-999-chain-0.json").write_text("{")

    def stale_lock(p: Path) -> None:
        (p / ".locks").mkdir(exist_ok=True)
        (p / ".locks" / "chain-0.lock").write_text("pid 1 on elsewhere\n")

    out: list[tuple[str, str, Callable[[Path], None]]] = []
    for kind in ("finished", "interrupted"):
        out += [
            (f"{kind}: a committed chunk deleted", kind, lambda p: _chunks(p)[0].unlink()),
            (f"{kind}: a byte flipped in a chunk", kind, lambda p: _flip(_chunks(p)[0])),
            (f"{kind}: a chunk truncated to 0 bytes", kind, lambda p: _truncate(_chunks(p)[0])),
            (f"{kind}: a field chunk truncated half", kind, lambda p: _truncate(
                _chunks(p, "posterior", "f")[0], len(_chunks(p, "posterior", "f")[0]
                                                     .read_bytes()) // 2)),
            (f"{kind}: another chain's chunk copied over", kind, other_chain_chunk),
            (f"{kind}: .commits/ lost", kind, lambda p: shutil.rmtree(p / ".commits")),
            (f"{kind}: a commit marker truncated", kind,
             lambda p: _truncate(sorted((p / ".commits").glob("chain-*.json"))[0], 5)),
            (f"{kind}: the digest manifests deleted", kind,
             lambda p: [f.unlink() for f in (p / ".commits").glob("chunks-*.json")]),
            (f"{kind}: the newest checkpoint corrupted", kind, lambda p: _flip(ckpts(p)[-1])),
            (f"{kind}: every checkpoint corrupted", kind,
             lambda p: [_flip(f) for f in ckpts(p)]),
            (f"{kind}: .checkpoint/ deleted", kind,
             lambda p: shutil.rmtree(p / ".checkpoint")),
            (f"{kind}: the root zarr.json truncated", kind,
             lambda p: _truncate(p / "zarr.json", 40)),
            (f"{kind}: the posterior group's zarr.json deleted", kind,
             lambda p: (p / "posterior" / "zarr.json").unlink()),
            (f"{kind}: an array's zarr.json deleted", kind,
             lambda p: (p / "posterior" / "sd" / "zarr.json").unlink()),
            (f"{kind}: junk files added", kind, junk),
            (f"{kind}: orphaned temporaries", kind, orphans),
            (f"{kind}: a stale lock file", kind, stale_lock),
            (f"{kind}: the store moved", kind, lambda p: None),  # handled in run_fault
        ]
    return out


def run_fault(name: str, src: Path, damage: Callable[[Path], None], ref: dict, tmp: Path,
              model, kind: str) -> dict:
    from lattice_lgm.errors import LatticeLGMError
    from lattice_lgm.runs import sample
    from lattice_lgm.store import open_store, verify_store

    p = tmp / "case.zarr"
    if p.exists():
        shutil.rmtree(p)
    shutil.copytree(src, p)
    if name.endswith("the store moved"):
        q = tmp / "moved" / "elsewhere.zarr"
        if q.parent.exists():
            shutil.rmtree(q.parent)
        q.parent.mkdir()
        shutil.move(str(p), str(q))
        p = q
    damage(p)
    before = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            before = _draws(p)
        except Exception:
            before = None
    steps = []
    outcome = None
    for what, call in (("verify", lambda: verify_store(p)),
                       ("open", lambda: open_store(p)),
                       ("resume", lambda: sample(model, store=p, resume=True, **RUN))):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                r = call()
                if what == "verify" and not r.ok:
                    steps.append(f"verify: names {r.describe(limit=2)!r}")
                    outcome = "refused"
                    continue
                steps.append(f"{what}: ok")
            except LatticeLGMError as e:
                steps.append(f"{what}: {type(e).__name__}: {str(e)[:200]}")
                outcome = outcome or "refused"
            except Exception as e:
                steps.append(f"{what}: RAW {type(e).__name__}: {str(e)[:200]}")
                return {"fault": name, "outcome": "raw", "steps": steps}
    try:
        after = _draws(p)
    except Exception:
        after = None
    if after is not None and _same(after, ref):
        outcome = "survived"
    elif outcome == "refused":
        # refused: nothing that was readable before may have been lost by what we ran
        if before is not None and after is not None and not _same(before, after):
            outcome = "lost"
    else:
        outcome = "lost"
    return {"fault": name, "outcome": outcome, "steps": steps}


#: the killed run: long enough (≈ 50 s) that every kill lands while it samples
KILL_RUN = {**RUN, "draws": 3000}


def kills(n: int, tmp: Path, model, seed: int = 0) -> dict:
    """SIGKILL the run at random moments n times, resuming each time.

    The final store is compared with the same run uninterrupted.
    """
    from lattice_lgm.runs import sample
    from lattice_lgm.store import store_problem

    rng = np.random.default_rng(seed)
    sample(model, store=tmp / "kill_ref.zarr", **KILL_RUN)
    ref = _draws(tmp / "kill_ref.zarr")
    p = tmp / "killed.zarr"
    script = tmp / "child.py"
    script.write_text(CHILD.format(root=str(ROOT), model_src=MODEL_SRC))
    args = json.dumps(KILL_RUN)
    mode, restarts = "new", 0
    landed: list[int | None] = []  # committed draws (min over chains) after each kill
    for _ in range(n):
        proc = subprocess.Popen([sys.executable, str(script), str(p), mode, args],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(float(rng.uniform(3.0, 12.0)))  # start-up (imports, model) ≈ 4 s
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait()
        landed.append(_committed(p))
        mode = "resume" if p.exists() else "new"
        if p.exists() and store_problem(p) == "half-created":
            # killed while laying out the arrays: what the message tells a user to do
            shutil.rmtree(p)
            restarts += 1
            mode = "new"
    proc = subprocess.run([sys.executable, str(script), str(p), mode, args],
                          capture_output=True, text=True)
    ok = proc.returncode == 0 and _same(_draws(p), ref)
    return {"kills": n, "committed_after_each_kill": landed,
            "restarts_of_half_created": restarts, "final_rc": proc.returncode,
            "identical_to_reference": bool(ok),
            "stderr": proc.stderr[-500:]}


def _committed(p: Path) -> int | None:
    """Posterior draws committed by every chain (None: no usable store yet)."""
    from lattice_lgm.errors import LatticeLGMError
    from lattice_lgm.store import RunStore, store_problem

    try:
        if store_problem(p) is not None:
            return None
        done = RunStore(p).committed("posterior")
    except (LatticeLGMError, OSError):
        return None
    return min((done.get(c, 0) for c in range(KILL_RUN["chains"])), default=0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="faults only, no JSON")
    ap.add_argument("--kills", type=int, default=10)
    args = ap.parse_args(argv)
    from lattice_lgm.runs import sample
    from lattice_lgm.runs.loop import _Runner

    model = _ns()["build_model"]()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        fin = tmp / "finished.zarr"
        sample(model, store=fin, **RUN)
        ref = _draws(fin)
        # interrupted: stopped by an exception after its 4th checkpoint (a dead process's store)
        cut = tmp / "interrupted.zarr"
        orig, calls = _Runner._checkpoint, {"n": 0}

        def dying(self, *a, **k):
            orig(self, *a, **k)
            calls["n"] += 1
            if calls["n"] == 4:
                raise KeyboardInterrupt  # what Ctrl-C leaves; SIGKILLs are tried below
        _Runner._checkpoint = dying
        try:
            sample(model, store=cut, **RUN)
        except KeyboardInterrupt:
            pass
        finally:
            _Runner._checkpoint = orig
        for name, kind, damage in faults():
            src = fin if kind == "finished" else cut
            rows.append(run_fault(name, src, damage, ref, tmp, model, kind))
            r = rows[-1]
            print(f"{r['outcome']:9s} {r['fault']}" + ("" if r["outcome"] in
                  ("survived", "refused") else f": {r['steps']}"), flush=True)
        killed = None if args.quick else kills(args.kills, tmp, model)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    print(f"{len(rows)} faults: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if killed is not None:
        print(f"{killed['kills']} SIGKILLs (committed draws after each: "
              f"{killed['committed_after_each_kill']}) then resume: identical to the "
              f"reference: {killed['identical_to_reference']}")
    if not args.quick:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "faults.json").write_text(json.dumps(
            {"counts": counts, "faults": rows, "kills": killed}, indent=1))
    bad = counts.get("raw", 0) + counts.get("lost", 0)
    return 0 if bad == 0 and (killed is None or killed["identical_to_reference"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
