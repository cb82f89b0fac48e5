"""The sampler benchmark runs end to end in quick mode and writes well-formed JSON."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lattice_lgm.threads import available_cores

ROOT = Path(__file__).resolve().parents[2]


def _positive(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


@pytest.mark.slow  # ~50 s in a fresh interpreter: the default tier measured 16:01 with it
def test_sampling_benchmark_quick_writes_json(tmp_path):
    dest = tmp_path / "sampling.json"
    proc = subprocess.run(
        [sys.executable, "benchmarks/perf/sampling.py", "--quick", "--out", str(dest)],
        capture_output=True, text=True, cwd=ROOT, env=os.environ.copy(), timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    res = json.loads(dest.read_text())
    assert res["errors"] == [], res["errors"]
    assert {"mixing", "equal", "equal_ratio", "ess_speed", "threads", "dense_ratio", "targets",
            "machine"} <= set(res)

    ran = [r for r in res["mixing"] if "ess" in r]
    assert {r["backend"] for r in ran} == {"circulant", "gmrf", "dense"}
    assert {"prior-white", "surr-scalar", "post-scalar"} <= {
        r["representation"] for r in ran if r["backend"] == "circulant"}
    for r in ran:
        assert r["kept"] >= 4 and _positive(r["kept_s"]) and _positive(r["draws_per_s"])
        for k in ("sd", "range", "mean", "loglik"):
            assert _positive(r["ess"][k]), (r["backend"], r["representation"], k)
            assert _positive(r["ess_per_s"][k]) and _positive(r["ess_per_loglik"][k])
        assert r["n_cov"] > 0 and r["n_loglik"] > 0
    assert any(r["backend"] == "circulant" and _positive(r["padding"][0]) for r in ran)

    eq = [r for r in res["equal"] if "ess" in r]
    assert {r["backend"] for r in eq} == {"circulant", "dense"}
    assert len({r["sweeps"] for r in eq}) == 1  # exactly the same number of sweeps each
    for r in eq:
        assert all(_positive(r["ess_per_sweep"][k]) for k in ("sd", "range", "mean"))
        assert all(len(r["ess_chain"][k]) == r["chains"] for k in ("sd", "range", "mean"))
    assert res["equal_ratio"] and all(
        _positive(v) for e in res["equal_ratio"] for v in e["ratio"].values())

    assert res["dense_ratio"]
    for d in res["dense_ratio"]:
        assert all(_positive(v) for v in d["lower_bound"].values())
        assert _positive(d["cost_ratio"]) and d["basis"]
    assert any(d["min_estimate"] is not None for d in res["dense_ratio"]
               if d["backend"] == "circulant" and d["representation"] == "prior-white")

    speed = res["ess_speed"]
    assert {r["backend"] for r in speed} == {"circulant", "dense"}
    for r in speed + res["threads"]:
        for k in ("step_s", "floor_s", "noise_s", "colorize_s", "loglik_1chain_s",
                  "iter_per_s", "step_over_floor"):
            assert _positive(r[k]), (r["backend"], r["n"], k)
    if available_cores() >= 2:
        assert {r["threads"] for r in res["threads"]} == {1, 2}
    floor_t, threads_t, dense_t = res["targets"].values()
    assert _positive(floor_t["value"])
    if available_cores() >= 2:
        assert _positive(threads_t["value"])
    assert dense_t and all(_positive(v["min_lower_bound"]) for v in dense_t.values())
