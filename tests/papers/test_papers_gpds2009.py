"""The GPDS reproductions (benchmarks/papers/gpds2009.py) on their quick setting."""

from __future__ import annotations

import json

from tests.papers._paper_scripts import load

G = load("gpds2009")


def test_quick_figure1_writes_four_prior_densities(tmp_path):
    assert G.main(["--quick", "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "gpds2009.json").read_text())
    panels = res["figure1"]
    assert [(p["lx"], p["ly"], p["alpha"]) for p in panels] == list(G.PANELS)
    for p in panels:
        # every history ends on its 40th acceptance, after at least 40 proposals
        assert p["n_proposals"] == res["n_samples"] + p["n_rejections"] >= res["n_samples"]
    assert (tmp_path / "gpds2009_figure1.png").stat().st_size > 10_000
