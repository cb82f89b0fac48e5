"""Stores that cannot silently lose data (issue 27): chunk digests, verify, refusals.

Before digests, a committed chunk deleted from a store read back as NaN (``summary`` printed an
all-NaN row with exit 0; ``resume`` finished with thousands of NaNs), and a flipped byte in a
zstd chunk went unnoticed.  Each test below damages a real store the way a user or a machine
would and checks that the damage is named, never read as a posterior.
"""

from __future__ import annotations

import json
import os
import shutil
import warnings

import numpy as np
import pytest

from lattice_lgm import cli
from lattice_lgm import store as store_mod
from lattice_lgm.errors import InvalidParameterError
from lattice_lgm.runs import sample
from lattice_lgm.store import (
    COMMIT_DIR,
    DATA_MANIFEST,
    RunStore,
    StoreIntegrityError,
    StoreIntegrityWarning,
    open_store,
    verify_store,
)
from tests.runs import test_runs
from tests.runs.test_runs import RUN, _crash_after_checkpoint

# test_runs' fixtures, shared: its model and the finished run of RUN it stores
model = test_runs.model
reference = test_runs.reference


def _copy(src, tmp_path, name="copy.zarr"):
    dst = tmp_path / name
    shutil.copytree(src, dst)
    return dst


def _a_committed_chunk(path, group="posterior", name="f", chain=1):
    files = sorted((path / group / name / "c" / str(chain)).rglob("*"))
    files = [f for f in files if f.is_file()]
    assert files, f"no chunk of {group}/{name} chain {chain}"
    return files[len(files) // 2]


def test_every_committed_chunk_has_a_digest_and_an_intact_store_verifies(reference):
    report = verify_store(reference)
    assert report.ok and not report.unverifiable
    recorded = set()
    for name in [DATA_MANIFEST] + [f"chunks-{c}.json" for c in range(RUN["chains"])]:
        manifest = json.loads((reference / COMMIT_DIR / name).read_text())
        assert not recorded & set(manifest)
        recorded |= set(manifest)
    on_disk = {f.relative_to(reference).as_posix() for f in reference.glob("*/*/c/**/*")
               if f.is_file()}
    assert recorded == on_disk  # every chunk file, data and draws, each once
    assert report.checked == len(on_disk)
    with warnings.catch_warnings():
        warnings.simplefilter("error", StoreIntegrityWarning)
        open_store(reference)  # no warning on an intact store


def test_a_deleted_chunk_is_named_by_verify_open_store_and_summary(reference, tmp_path, capsys):
    p = _copy(reference, tmp_path)
    victim = _a_committed_chunk(p)
    victim.unlink()
    key = victim.relative_to(p).as_posix()
    report = verify_store(p)
    assert report.missing == [key] and not report.corrupt and not report.ok
    assert verify_store(p, digests=False).missing == [key]
    with pytest.warns(StoreIntegrityWarning, match="1 committed chunk file"):
        open_store(p)
    assert cli.main(["verify", str(p)]) == 1
    out = capsys.readouterr().out
    assert f"missing: {key}" in out and "1 missing, 0 corrupt" in out


def test_a_flipped_byte_is_corruption(reference, tmp_path, capsys):
    p = _copy(reference, tmp_path)
    victim = _a_committed_chunk(p, "sample_stats", "loglik", chain=0)
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0x01
    st = victim.stat()
    victim.write_bytes(bytes(data))
    os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns))  # bit rot: no write time
    report = verify_store(p)
    assert report.corrupt == [victim.relative_to(p).as_posix()] and not report.missing
    assert verify_store(p, digests=False).ok  # presence alone cannot see it
    assert cli.main(["verify", str(p)]) == 1
    assert "corrupt:" in capsys.readouterr().out
    assert cli.main(["verify", str(p), "--quick"]) == 0


def test_resume_refuses_a_store_with_lost_committed_draws(model, tmp_path, monkeypatch):
    p = tmp_path / "r.zarr"
    _crash_after_checkpoint(model, p, monkeypatch)
    victim = _a_committed_chunk(p, "posterior", "sd", chain=0)
    victim.unlink()
    before = sorted(f.relative_to(p).as_posix() for f in p.rglob("*") if f.is_file())
    with pytest.raises(StoreIntegrityError, match=r"cannot resume .*1 missing.*new store"):
        sample(model, store=p, resume=True, **RUN)
    after = sorted(f.relative_to(p).as_posix() for f in p.rglob("*") if f.is_file())
    assert after == before  # refused before anything was written


def test_resume_of_an_intact_interrupted_store_still_works(model, reference, tmp_path,
                                                            monkeypatch):
    p = tmp_path / "r.zarr"
    _crash_after_checkpoint(model, p, monkeypatch)
    assert verify_store(p).ok
    sample(model, store=p, resume=True, **RUN)
    assert verify_store(p).ok
    for c in range(RUN["chains"]):  # the manifests equal the uninterrupted run's
        name = f"{COMMIT_DIR}/chunks-{c}.json"
        assert (p / name).read_bytes() == (reference / name).read_bytes()


def test_a_chunk_that_vanishes_mid_run_stops_the_commit(reference, tmp_path):
    p = _copy(reference, tmp_path)
    st = RunStore(p)
    _a_committed_chunk(p, "posterior", "sd", chain=0).unlink()
    marker = (p / COMMIT_DIR / "chain-0.json").read_bytes()
    with pytest.raises(StoreIntegrityError, match="disappeared"):
        st.commit("posterior", {0: RUN["draws"]})
    assert (p / COMMIT_DIR / "chain-0.json").read_bytes() == marker  # nothing committed


def test_damaged_data_are_found_too(reference, tmp_path):
    p = _copy(reference, tmp_path)
    victim = next(iter(sorted((p / "observed_data").rglob("c/*"))))
    victim = victim if victim.is_file() else next(f for f in victim.rglob("*") if f.is_file())
    victim.write_bytes(victim.read_bytes()[:-1])  # truncated
    assert verify_store(p).corrupt == [victim.relative_to(p).as_posix()]


def test_a_store_written_before_digests_is_reported_unverifiable(reference, tmp_path):
    p = _copy(reference, tmp_path)
    for f in (p / COMMIT_DIR).glob("chunks-*.json"):
        f.unlink()
    report = verify_store(p)
    assert report.ok and report.unverifiable == list(range(RUN["chains"]))
    assert "written before chunk digests" in report.describe()


def test_summary_and_plot_refuse_a_damaged_store_instead_of_printing_nan(reference, tmp_path):
    p = _copy(reference, tmp_path)
    _a_committed_chunk(p, "posterior", "sd", chain=1).unlink()
    with pytest.warns(StoreIntegrityWarning):
        tree = open_store(p)
    assert np.isnan(tree["posterior"]["sd"].values).any()  # what a reader would have seen
    # the guard `summary` and `plot` run after rebuilding the model from the stored config
    # (a Python-API store has none; the config-backed path is in test_cli)
    with pytest.raises(StoreIntegrityError, match=r"is damaged, so its posterior would be wrong"):
        cli._intact(store_mod, str(p))
    cli._intact(store_mod, str(reference))  # an intact store passes


def test_lost_commit_markers_are_rebuilt_from_the_checkpoint(model, reference, tmp_path):
    """``.commits/`` gone (a copy that skipped dot-directories) with every draw and the
    checkpoints there: never "delete it"; resume rebuilds the markers, the same bytes."""
    from tests.runs.test_runs import _assert_same_store

    p = _copy(reference, tmp_path)
    shutil.rmtree(p / COMMIT_DIR)
    with pytest.raises(StoreIntegrityError, match=r"lost its commit markers.*Do not delete"):
        open_store(p)
    with pytest.raises(StoreIntegrityError, match="lattice-lgm resume"):
        RunStore(p)
    sample(model, store=p, resume=True, **RUN)
    _assert_same_store(reference, p)
    assert verify_store(p).ok


def test_lost_markers_without_checkpoints_are_not_rebuilt(reference, tmp_path):
    p = _copy(reference, tmp_path)
    shutil.rmtree(p / COMMIT_DIR)
    shutil.rmtree(p / ".checkpoint")
    with pytest.raises(StoreIntegrityError, match=r"copy \.commits/ and \.checkpoint/"):
        RunStore(p, rebuild_markers=True)
    assert not (p / COMMIT_DIR).exists()


def test_resuming_some_chains_of_a_whole_run_says_so(model, tmp_path, monkeypatch):
    """Not "no checkpoint was ever written": the checkpoints are the whole run's."""
    from lattice_lgm.errors import InvalidParameterError

    p = tmp_path / "r.zarr"
    _crash_after_checkpoint(model, p, monkeypatch)
    with pytest.raises(InvalidParameterError, match=r"one run of every chain.*resume it whole"):
        sample(model, store=p, resume=True, chain_ids=[1], **RUN)


def test_a_second_writer_of_a_chain_is_refused_naming_the_holder(model, tmp_path,
                                                                 monkeypatch):
    """Two resumes of one store: the second is refused before it touches a file."""
    import os
    import subprocess
    import sys
    import textwrap

    from lattice_lgm.store import LOCK_DIR, StoreLockedError

    p = tmp_path / "r.zarr"
    _crash_after_checkpoint(model, p, monkeypatch)
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from lattice_lgm.store import RunStore
        st = RunStore({str(p)!r})
        st.lock_chains([1])
        print("locked", flush=True)
        time.sleep(60)
        """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        before = {f.relative_to(p).as_posix(): f.read_bytes() for f in p.rglob("*")
                  if f.is_file() and LOCK_DIR not in f.parts}
        with pytest.raises(StoreLockedError, match=rf"chain 1 .* pid {holder.pid} on"):
            sample(model, store=p, resume=True, **RUN)
        after = {f.relative_to(p).as_posix(): f.read_bytes() for f in p.rglob("*")
                 if f.is_file() and LOCK_DIR not in f.parts}
        assert after == before
        # the lock dies with its process, even by SIGKILL: then the resume goes through
        holder.kill()
        holder.wait()
        sample(model, store=p, resume=True, **RUN)
        assert verify_store(p).ok
        assert all(f.read_text() == "" for f in (p / LOCK_DIR).iterdir())  # released
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait()
    assert os.path.isdir(p / LOCK_DIR)


def test_a_chunk_rewritten_after_the_last_commit_is_not_damage(model, reference, tmp_path):
    """A run stopped between writing a block's summaries and committing it leaves files newer
    than its commit: verify says so (not corrupt), resume goes through and rewrites them."""
    import time

    p = _copy(reference, tmp_path)
    victim = p / "summaries" / "n_draws" / "c" / "1"
    time.sleep(0.01)
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))  # as the next block would (a newer file)
    report = verify_store(p)
    assert report.ok and report.changed == ["summaries/n_draws/c/1"] and not report.corrupt
    assert "rewritten after the last commit" in report.describe()


def test_a_full_disk_is_a_clear_error_and_the_store_resumes_exactly(model, reference, tmp_path,
                                                                    monkeypatch):
    import errno

    from lattice_lgm.errors import ResourceLimitError
    from tests.runs.test_runs import _assert_same_store

    p = tmp_path / "full.zarr"
    orig = RunStore.write
    calls = {"n": 0}

    def filling(self, group, name, chains, draws, data):
        calls["n"] += 1
        if calls["n"] == 25:  # a few blocks in
            raise OSError(errno.ENOSPC, "No space left on device", str(p / group / name))
        return orig(self, group, name, chains, draws, data)

    monkeypatch.setattr(RunStore, "write", filling)
    with pytest.raises(ResourceLimitError, match=r"disk is full .*lattice-lgm resume"):
        sample(model, store=p, **RUN)
    monkeypatch.setattr(RunStore, "write", orig)
    assert verify_store(p).ok
    sample(model, store=p, resume=True, **RUN)
    _assert_same_store(reference, p)


def test_a_read_only_location_is_refused_before_any_work(model, tmp_path, monkeypatch):
    import os

    from lattice_lgm.errors import InvalidParameterError
    from lattice_lgm.runs.loop import _Runner

    started = []
    monkeypatch.setattr(os, "access", lambda path, mode: False)  # (root can write all)
    monkeypatch.setattr(_Runner, "run", lambda *a, **k: started.append(1))
    with pytest.raises(InvalidParameterError, match=r"cannot be written: .* read-only"):
        sample(model, store=tmp_path / "ro" / "run.zarr", **RUN)
    assert not (tmp_path / "ro").exists() and not started


@pytest.mark.parametrize("more, every", [(6, 3), (5, 4)])
def test_extending_a_finished_run_equals_asking_for_the_draws_at_the_start(model, tmp_path,
                                                                           more, every):
    """The summary says "run longer": extend continues every chain into the same store."""
    from tests.runs.test_runs import _assert_same_store

    run = {**RUN, "checkpoint_every": every}
    ref = tmp_path / "ref.zarr"
    sample(model, store=ref, **{**run, "draws": run["draws"] + more})
    p = tmp_path / "ext.zarr"
    sample(model, store=p, **run)
    sample(model, store=p, extend=more, **run)
    _assert_same_store(ref, p)
    assert verify_store(p).ok
    assert open_store(p)["posterior"].sizes["draw"] == run["draws"] + more


def test_extend_refuses_an_unfinished_run_and_bad_arguments(model, tmp_path, monkeypatch):
    from lattice_lgm.errors import InvalidParameterError

    p = tmp_path / "r.zarr"
    _crash_after_checkpoint(model, p, monkeypatch)
    with pytest.raises(InvalidParameterError, match=r"not finished .*resume it first"):
        sample(model, store=p, extend=5, **RUN)
    with pytest.raises(InvalidParameterError, match="extend=0"):
        sample(model, store=p, extend=0, **RUN)
    with pytest.raises(InvalidParameterError, match="not with resume=True"):
        sample(model, store=p, extend=5, resume=True, **RUN)


def test_chains_whose_working_memory_does_not_fit_are_refused_before_the_warm_start(
        model, tmp_path, monkeypatch, capsys):
    import lattice_lgm.runs as runs
    import lattice_lgm.threads as T
    from lattice_lgm.errors import ResourceLimitError

    cost = runs.SAMPLER_COST["circulant"]
    n = float(np.prod(model.prior.state_shape))
    one, two = cost.peak_bytes(n, 1), cost.peak_bytes(n, 2)
    assert one < two < 2 * one  # most of the peak is shared by the chains
    monkeypatch.setattr(T, "available_memory", lambda: (one + two) / 2)  # room for one chain
    with pytest.raises(ResourceLimitError, match=r"2 chain\(s\) on a .* circulant state .*"
                                                 r"at most 1 chain"):
        sample(model, store=tmp_path / "r.zarr", **RUN)
    assert not (tmp_path / "r.zarr").exists()  # nothing was written
    with pytest.raises(ResourceLimitError, match=r"max_memory_gb\. Use a coarser cell_size, a "):
        sample(model, **{**RUN, "max_memory_gb": one / 2 / 2**30})  # not even one chain
    monkeypatch.setattr(T, "available_memory", lambda: 1.01 * two)
    capsys.readouterr()
    sample(model, store=tmp_path / "ok.zarr", **{**RUN, "progressbar": True})  # two fit
    err = capsys.readouterr().err
    assert f"projected: ≈ {two / 2**20:.4g} MiB and ≈ " in err and "2 chain(s) × 13" in err


def test_a_store_of_another_layout_version_is_refused_by_name(model, reference, tmp_path,
                                                              monkeypatch):
    """A format-1 store (intercept as ``posterior.mean``, standardised ``beta``) is named as
    such by every reader and by resume, never read with today's meaning."""
    p = _copy(reference, tmp_path)
    meta = json.loads((p / "zarr.json").read_text())
    assert meta["attributes"]["lattice_lgm_format"] == store_mod.FORMAT_VERSION
    meta["attributes"]["lattice_lgm_format"] = 1
    (p / "zarr.json").write_text(json.dumps(meta))
    match = r"layout version 1; this lattice_lgm reads and writes version 2"
    with pytest.raises(InvalidParameterError, match=match):
        open_store(p)
    with pytest.raises(InvalidParameterError, match=match):
        verify_store(p)
    with pytest.raises(InvalidParameterError, match=match):
        sample(model, store=p, resume=True, progressbar=False)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["summary", str(p)]) != 0


def test_chain_blocks_extend_one_by_one_into_the_store_of_the_longer_run(model, tmp_path):
    """Blocks extended in turn (or side by side: the same branches, under the layout lock) grow
    the store once and give the bytes of blocks that asked for the draws from the start."""
    from tests.runs.test_runs import _assert_same_store

    more = 6
    ref = tmp_path / "ref.zarr"
    for b in ([0], [1]):
        sample(model, store=ref, chain_ids=b, **{**RUN, "draws": RUN["draws"] + more})
    p = tmp_path / "ext.zarr"
    for b in ([0], [1]):
        sample(model, store=p, chain_ids=b, **RUN)
    sample(model, store=p, chain_ids=[1], extend=more, **RUN)  # grows the store
    assert RunStore(p).committed("posterior") == {0: RUN["draws"], 1: RUN["draws"] + more}
    # the other block asks for another amount: refused, naming the one to give
    with pytest.raises(InvalidParameterError, match=rf"extended to {RUN['draws'] + more} draws "
                                                    rf"by another chain block.*--draws {more}"):
        sample(model, store=p, chain_ids=[0], extend=more + 1, **RUN)
    # the stored run now says draws + more; the block's own extension is measured from its
    # committed draws, whatever draws= the caller repeats
    sample(model, store=p, chain_ids=[0], extend=more, **RUN)
    _assert_same_store(ref, p)
    assert verify_store(p).ok


def test_a_block_cannot_grow_the_store_while_another_is_unfinished(model, tmp_path,
                                                                    monkeypatch):
    p = tmp_path / "b.zarr"
    sample(model, store=p, chain_ids=[0], **RUN)
    _crash_after_checkpoint(model, p, monkeypatch, n=2, run={**RUN, "chain_ids": [1]})
    with pytest.raises(InvalidParameterError, match=r"chains \[1\] have not finished"):
        sample(model, store=p, chain_ids=[0], extend=4, **RUN)


def test_a_committed_chunk_changed_after_its_commit_is_corrupt_not_a_late_write(reference,
                                                                               tmp_path):
    """A chunk holding committed draws only is never written again: a change with a new
    modification time (a user's edit, a copy over it) is damage too, not an interrupted
    writer's late block (found by benchmarks/robustness/faults.py)."""
    p = _copy(reference, tmp_path)
    victim = sorted(f for f in (p / "posterior" / "sd" / "c" / "0").rglob("*") if f.is_file())[0]
    donor = sorted(f for f in (p / "posterior" / "sd" / "c" / "1").rglob("*") if f.is_file())[0]
    victim.write_bytes(donor.read_bytes())  # another chain's valid chunk, written now
    report = verify_store(p)
    assert report.corrupt == [victim.relative_to(p).as_posix()] and not report.changed
    # (a late write to the summaries, rewritten in place by every block, is not damage:
    # test_a_chunk_rewritten_after_the_last_commit_is_not_damage)


def test_a_damaged_commit_marker_is_named_and_rebuilt_by_resume(model, reference, tmp_path):
    p = _copy(reference, tmp_path)
    marker = p / COMMIT_DIR / "chain-0.json"
    marker.write_text('{"poster')
    with pytest.raises(StoreIntegrityError, match=r"commit marker \.commits/chain-0\.json is "
                                                  r"damaged.*rebuilds it"):
        verify_store(p)
    with pytest.raises(StoreIntegrityError, match=r"chain-0\.json is damaged"):
        open_store(p)
    sample(model, store=p, resume=True, **RUN)  # the checkpoint says where chain 0 stood
    from tests.runs.test_runs import _assert_same_store

    (p / COMMIT_DIR / "chain-0.json.damaged").unlink()  # kept for a post-mortem
    _assert_same_store(reference, p)
    assert verify_store(p).ok


def test_a_damaged_root_metadata_is_named_not_a_json_traceback(reference, tmp_path, capsys):
    p = _copy(reference, tmp_path)
    (p / "zarr.json").write_text((p / "zarr.json").read_text()[:40])
    for call in (lambda: open_store(p), lambda: verify_store(p), lambda: RunStore(p)):
        with pytest.raises(StoreIntegrityError, match=r"root metadata zarr\.json is damaged"):
            call()
    assert cli.main(["summary", str(p)]) == 2
    assert "Restore zarr.json from a copy" in capsys.readouterr().err


def test_an_arrays_lost_metadata_is_restored_from_the_consolidated_copy(model, reference,
                                                                         tmp_path,
                                                                         monkeypatch):
    p = tmp_path / "r.zarr"
    _crash_after_checkpoint(model, p, monkeypatch)
    (p / "posterior" / "sd" / "zarr.json").unlink()
    report = verify_store(p)
    assert report.ok and report.metadata_missing == ["posterior/sd"]
    assert "lost their zarr.json" in report.describe()
    sample(model, store=p, resume=True, **RUN)
    assert (p / "posterior" / "sd" / "zarr.json").is_file()
    a, b = open_store(reference), open_store(p)
    for g in ("posterior", "sample_stats", "summaries"):
        for v in a[g].data_vars:
            np.testing.assert_array_equal(a[g][v].values, b[g][v].values, err_msg=f"{g}/{v}")


@pytest.mark.parametrize("backend", ["gmrf", "dense"])
def test_gmrf_and_dense_samplers_are_projected_too(backend, tmp_path, monkeypatch):
    import lattice_lgm.runs as runs
    import lattice_lgm.threads as T
    from lattice_lgm.errors import ResourceLimitError

    m = test_runs.build_model(backend=backend)
    cost = runs.SAMPLER_COST[backend]
    need = cost.peak_bytes(float(np.prod(m.prior.state_shape)), RUN["chains"])
    monkeypatch.setattr(T, "available_memory", lambda: need / 3)
    with pytest.raises(ResourceLimitError, match=rf"on a .* {backend} state need"):
        sample(m, store=tmp_path / "r.zarr", **RUN)
    assert not (tmp_path / "r.zarr").exists()
