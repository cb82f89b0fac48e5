"""One suite for every sink of the run loop: the in-memory reference and the zarr store.

Each sink gets the same writes (blocks of draws in two chains' slices, the summaries of a
block of chains, commits, a checkpoint) and must read back exactly what was written and hold
the same arrays as the reference at the end.  The end-to-end agreement of whole runs
(memory against store, every array) is ``test_runs.test_memory_and_store_runs_agree...``.
"""

from __future__ import annotations

import numpy as np
import pytest

from lattice_lgm.runs.sinks import MemorySink, Sink, StoreSink
from lattice_lgm.store import RunStore, VarSpec, open_store

CHAINS, DRAWS, X = 3, 6, 4


def _specs():
    return [VarSpec("posterior", "sd", ("chain", "draw"), (CHAINS, DRAWS), "f8", 3),
            VarSpec("posterior", "f", ("chain", "draw", "x"), (CHAINS, DRAWS, X), "f4", 3),
            VarSpec("summaries", "f_mean", ("chain", "x"), (CHAINS, X), "f8")]


def _coords():
    c = {"chain": np.arange(CHAINS), "draw": np.arange(DRAWS)}
    return {"posterior": {**c, "x": np.arange(X)}, "summaries": {"chain": c["chain"],
                                                                 "x": np.arange(X)}}


@pytest.fixture(params=["memory", "store"])
def sink(request, tmp_path):
    if request.param == "memory":
        return MemorySink(_specs(), _coords(), {"created_by": "test"})
    st = RunStore.create(tmp_path / "s.zarr", _specs(), _coords(), {"created_by": "test"})
    return StoreSink(st)


def _writes(sink: Sink, rng: np.random.Generator) -> dict:
    """The same writes for every sink; returns what each array must hold."""
    want = {"sd": np.full((CHAINS, DRAWS), np.nan), "f": np.full((CHAINS, DRAWS, X), np.nan),
            "f_mean": np.full((CHAINS, X), np.nan)}
    for chains in (slice(0, 2), slice(2, 3)):
        for draws in (slice(0, 3), slice(3, 6)):
            n = chains.stop - chains.start
            sd = rng.normal(size=(n, 3))
            f = rng.normal(size=(n, 3, X)).astype(np.float32)
            sink.write("posterior", "sd", chains, draws, sd)
            sink.write("posterior", "f", chains, draws, f)
            want["sd"][chains, draws], want["f"][chains, draws] = sd, f
            np.testing.assert_array_equal(sink.read("posterior", "sd", chains, draws), sd)
            np.testing.assert_array_equal(sink.read("posterior", "f", chains, draws), f)
        m = rng.normal(size=(chains.stop - chains.start, X))
        sink.put("summaries", "f_mean", chains, m)
        want["f_mean"][chains] = m
        sink.commit("posterior", {c: DRAWS for c in range(chains.start, chains.stop)})
    sink.save_checkpoint({"phase": "posterior", "i": DRAWS}, {"x": np.arange(3.0)})
    return want


def test_every_sink_implements_the_protocol(sink):
    assert isinstance(sink, Sink)


def test_every_sink_holds_what_was_written_like_the_reference(sink, tmp_path):
    want = _writes(sink, np.random.default_rng(0))
    ref = MemorySink(_specs(), _coords(), {"created_by": "test"})
    _writes(ref, np.random.default_rng(0))
    if isinstance(sink, MemorySink):
        got = {n: sink.arrays[(g, n)] for g, n in
               (("posterior", "sd"), ("posterior", "f"), ("summaries", "f_mean"))}
        assert sink.done == {"posterior": {0: DRAWS, 1: DRAWS, 2: DRAWS}}
        assert sink.checkpoint[0]["i"] == DRAWS
    else:
        tree = open_store(sink.store.path)
        got = {"sd": tree["posterior"]["sd"].values, "f": tree["posterior"]["f"].values,
               "f_mean": tree["summaries"]["f_mean"].values}
        assert sink.store.committed("posterior") == {0: DRAWS, 1: DRAWS, 2: DRAWS}
        meta, arrays = sink.store.load_checkpoint()
        assert meta["i"] == DRAWS and np.array_equal(arrays["x"], np.arange(3.0))
    for n, w in want.items():
        np.testing.assert_array_equal(got[n], w, err_msg=n)
        np.testing.assert_array_equal(got[n], ref.arrays[("summaries" if n == "f_mean"
                                                          else "posterior", n)], err_msg=n)
