"""The blackjax comparison's project side: the peer's inputs, our runs and the analysis.

The peer itself needs its own environment (jax, blackjax: ``benchmarks/.peer-venv``), which a
fresh clone does not have; what is tested here is everything the comparison rests on in this
environment: the exported model is ours (counts, exposure, mean, covariance), the peer's
log-likelihood formula gives lattice_lgm's values, and the ESS/agreement analysis.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("ess_vs_peers",
                                              ROOT / "benchmarks/perf/ess_vs_peers.py")
E = importlib.util.module_from_spec(spec)
spec.loader.exec_module(E)


def _peer_loglik(d, f):  # the formula of the peer script (E.PEER), in NumPy
    from scipy.special import gammaln

    eta = np.log(d["exposure"]) + d["mean"] + f
    return np.sum(d["counts"] * eta - np.exp(eta) - gammaln(d["counts"] + 1.0))


@pytest.mark.parametrize("case", ["mining", "redwood-circulant"])
def test_exported_model_is_ours_and_the_peer_loglik_matches(case, tmp_path):
    path = tmp_path / f"{case}.npz"
    E.export(case, path)
    d = np.load(path)
    model = E.build(case)
    n = d["counts"].size
    assert d["cov"].shape == (n, n) and np.allclose(d["cov"], d["cov"].T)
    assert "def loglik(f):" in E.PEER and "y * eta - jnp.exp(eta) + const" in E.PEER
    rng = np.random.default_rng(1)
    for _ in range(3):
        f = 0.3 * rng.standard_normal(n)
        field = f.reshape(model.likelihood.shape)
        ours = float(model.likelihood.loglik(model.mean + field[None])[0])
        assert math.isclose(_peer_loglik(d, f), ours, rel_tol=1e-12, abs_tol=1e-9)


def test_our_side_runs_and_the_analysis_compares_two_runs():
    a = E.analyse({**E.run_ours("mining", 40, 10, seed=3), "case": "mining"})
    b = E.analyse({**E.run_ours("mining", 40, 10, seed=4), "case": "mining"})
    for r in (a, b):
        assert r["iterations"] == 40 and r["ess_bulk"] > 0 and r["seconds"] > 0
        assert r["threads"]["chains"] >= 1
    a.update(case="mining")
    b.update(case="mining", side="blackjax")
    s = E.summary([a, b])
    assert len(s) == 1 and s[0]["agree"] in (True, False)
    assert s[0]["ratio_median"] == pytest.approx(a["ess_per_second"] / b["ess_per_second"])
