"""The RMHMC/AIS experiment (benchmarks/papers/rmhmc.py): its exact log Z and its quick run."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from tests.papers._paper_scripts import load
from tests.samplers.test_ep import _quadrature

R = load("rmhmc")


def test_the_exact_log_z_is_the_probit_marginal_likelihood():
    """The orthant identity against closed form (one case) and tensor quadrature (two)."""
    K1 = np.array([[2.5]])
    for y in (0, 1):  # P(s(f + ε) > 0) = Φ(0) for one case
        assert R.exact_log_z(K1, [y]) == pytest.approx(math.log(0.5), abs=1e-9)
    K2 = np.array([[3.0, 2.4], [2.4, 3.0]])
    for y in ([1, 0], [1, 1]):
        assert R.exact_log_z(K2, y) == pytest.approx(_quadrature(K2, y)[0], abs=1e-6)
    # a wrong sign convention (labels flipped on one case) is far off
    assert abs(R.exact_log_z(K2, [1, 1]) - _quadrature(K2, [1, 0])[0]) > 0.5


def test_the_pilot_takes_the_largest_step_reaching_the_target():
    acc = {0.8: 0.2, 0.4: 0.5, 0.2: 0.75, 0.1: 0.9}
    got = R.pilot_step(lambda e: acc[e], grid=(0.1, 0.2, 0.4, 0.8))
    assert got["chosen"] == 0.2 and list(got["acceptance"]) == ["0.8", "0.4", "0.2"]
    assert R.pilot_step(lambda e: 0.0, grid=(0.1, 0.2))["chosen"] == 0.1


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("rmhmc")
    assert R.main(["--quick", "--out", str(out)]) == 0
    return out


def test_quick_run_writes_every_row(quick):
    res = json.loads((quick / "rmhmc.json").read_text())
    assert res["mode"] == "quick" and set(res["datasets"]) == {"synthetic", "ionosphere"}
    for name, r in res["datasets"].items():
        rows = {(a["row"], a["temps"]) for a in r["ais"]}
        assert {row for row, _ in rows} == set(R.AIS_ROWS), name
        assert all(math.isfinite(a["log_z"]) and a["seconds"] > 0 for a in r["ais"])
        assert [m["method"] for m in r["mixing"]] == ["RMHMC", "HMC (EP mass)",
                                                       "HMC (prior mass)", "ESS"]
        assert all(m["ess_min"] > 0 and m["seconds"] > 0 for m in r["mixing"])
    syn = res["datasets"]["synthetic"]
    # EP is close to the exact value on this small set (its error is ~0.03 here)
    assert abs(syn["ep_log_z"] - syn["exact_log_z"]) < 0.1
    assert (quick / "rmhmc.png").stat().st_size > 0 and "RMHMC*" in (
        quick / "rmhmc.md").read_text()


def test_a_rerun_reads_the_cached_rows(quick):
    """Every row is cached: a second run reproduces the first's numbers without sampling."""
    before = json.loads((quick / "rmhmc.json").read_text())
    assert R.main(["--quick", "--out", str(quick), "--only", "synthetic"]) == 0
    after = json.loads((quick / "rmhmc.json").read_text())
    assert after["datasets"]["synthetic"]["ais"] == before["datasets"]["synthetic"]["ais"]
    assert after["datasets"]["synthetic"]["mixing"] == before["datasets"]["synthetic"]["mixing"]
