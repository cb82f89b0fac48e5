"""The jitter-policy measurement (benchmarks/papers/jitter_jumps.py) on its quick setting."""

from __future__ import annotations

import json
import math

from tests._paper_scripts import load

J = load("jitter_jumps")


def test_quick_measures_the_mining_policy_change(tmp_path):
    assert J.main(["--quick", "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "jitter_jumps.json").read_text())
    boxes = res["problems"]["mining"]
    assert set(boxes) == {"prior", "posterior"} and res["n_theta"] == 20
    for r in boxes.values():
        # the family keeps its root's level (1e-10 here) at every θ, never less
        assert r["levels_new"] == {"1e-10": 20}
        assert sum(r["levels_old"].values()) == 20
        assert r["n_differ"] == r["levels_old"].get("0", 0)
        assert (r["df_over_sd"]["max"] is None) == (r["n_differ"] == 0)
    # in the posterior box of the committed structured.py runs the old ladder picked the same
    # level, so the factors (and the targets) are bitwise the same there
    assert boxes["posterior"]["n_differ"] == 0
    # over the hyperprior's support it did not: some θ factored at 0
    assert boxes["prior"]["n_differ"] > 0 and boxes["prior"]["df_over_sd"]["max"] > 0
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
