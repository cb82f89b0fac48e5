"""The jitter-policy measurement (benchmarks/papers/jitter_jumps.py) on its quick setting."""

from __future__ import annotations

import json
import math

from tests._jitter import assert_jitter_is_the_ladders
from tests.papers._paper_scripts import load

J = load("jitter_jumps")


def test_quick_measures_the_mining_policy_change(tmp_path):
    assert J.main(["--quick", "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "jitter_jumps.json").read_text())
    boxes = res["problems"]["mining"]
    assert set(boxes) == {"prior", "posterior"} and res["n_theta"] == 20
    # the family's level: what the mining prior's K needs on this CPU.  It is 1e-10 where the
    # committed results were made, but K is numerically singular (λ_min ≈ −2e-15·sd²), so whether
    # it factors at 0 is round-off, decided by the BLAS kernel (tests/_jitter.py)
    root = J.problems(["mining"])["mining"].model.prior
    assert_jitter_is_the_ladders(root)
    level = root.jitter_level
    for r in boxes.values():
        assert sum(r["levels_old"].values()) == 20
        # the family keeps its root's level at every θ, never less; K_θ + ε·sd²·I has
        # λ_min ≥ 1e-10·sd² there, far above round-off, so it never climbs.  At level 0 the
        # family's policy is the old per-θ ladder.
        assert r["levels_new"] == ({f"{level:g}": 20} if level else r["levels_old"])
        assert r["n_differ"] == (20 - r["levels_old"].get(f"{level:g}", 0) if level else 0)
        assert (r["df_over_sd"]["max"] is None) == (r["n_differ"] == 0)
    # in the posterior box the old ladder picked the family's level where the committed runs were
    # made (jitter_jumps.md: the factors, and the targets, were the same); there λ_min(K_θ) is
    # −3e-15…−2e-14·sd², so whether it does on this CPU is round-off, not asserted.
    # Over the hyperprior's support it factored at 0 on every CPU (ranges under 1500 days:
    # λ_min(K_θ) ≥ 4e-8·sd²), so the policies differ there wherever the family's level is not 0
    assert boxes["prior"]["levels_old"].get("0", 0) > 0
    assert (boxes["prior"]["n_differ"] > 0) == (level > 0)
    if level > 0:
        assert boxes["prior"]["df_over_sd"]["max"] > 0
    md = (tmp_path / "jitter_jumps.md").read_text()
    assert "| mining | posterior: " in md and "| mining | prior: " in md


def test_boxes_take_the_hyperprior_support_and_the_posterior_quantiles():
    structured = {"experiments": {"redwoods": {"hyper": {
        "log sd": {"q05": {"a": -0.1, "b": -0.2}, "q95": {"a": 0.3, "b": 0.2}},
        "log range": {"q05": {"a": -3.0, "b": -2.9}, "q95": {"a": -2.4, "b": -2.5}}}}}}
    b = J.boxes("redwoods", structured)
    assert b["prior"] == [[0.01, 10.0], list(J.S.RANGE_UNIT)]
    assert b["posterior"] == [[math.exp(-0.2), math.exp(0.3)], [math.exp(-3.0), math.exp(-2.4)]]
    assert set(J.boxes("redwoods", None)) == {"prior"}
