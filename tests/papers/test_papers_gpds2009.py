"""The GPDS reproductions (benchmarks/papers/gpds2009.py) on their quick setting."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.papers._paper_scripts import load

G = load("gpds2009")


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpds2009")
    assert G.main(["--quick", "--out", str(out)]) == 0
    return out


def test_quick_figure1_writes_four_prior_densities(quick):
    tmp_path = quick
    res = json.loads((tmp_path / "gpds2009.json").read_text())
    panels = res["figure1"]
    assert [(p["lx"], p["ly"], p["alpha"]) for p in panels] == list(G.PANELS)
    for p in panels:
        # every history ends on its 40th acceptance, after at least 40 proposals
        assert p["n_proposals"] == res["n_samples"] + p["n_rejections"] >= res["n_samples"]
    assert (tmp_path / "gpds2009_figure1.png").stat().st_size > 10_000


def test_the_ring_and_its_parzen_baseline(quick):
    train, test = G.ring(0)
    assert train.shape == (100, 2) and test.shape == (50, 2)
    r = np.hypot(*np.concatenate([train, test]).T)
    assert abs(r.mean() - 1.5) < 0.1 and 0.1 < r.std() < 0.3  # radius 1.5, noise sd 0.2
    np.testing.assert_array_equal(G.ring(0)[0], train)  # seeded
    # the kernel density estimate is a density: it integrates to 1
    ax = np.linspace(-4.0, 4.0, 401)
    gx, gy = np.meshgrid(ax, ax)
    pts = np.column_stack([gx.ravel(), gy.ravel()])
    mass = np.exp(G.parzen_logpdf(train, pts, 0.2)).sum() * (ax[1] - ax[0]) ** 2
    assert abs(mass - 1.0) < 1e-3
    h = G.parzen_bandwidth(train)
    assert G.BANDWIDTHS[0] < h < G.BANDWIDTHS[-1]  # an interior optimum, not a grid edge
    res = json.loads((quick / "gpds2009.json").read_text())["ring_parzen"]
    assert len(res["per_seed"]) == 2 and -4.0 < res["mean"] < -1.5


def test_every_method_on_the_ring_and_the_pines(quick):
    res = json.loads((quick / "gpds2009.json").read_text())
    ring, pines = res["ring_methods"], res["pines_methods"]
    assert set(ring) == {"dense", "dense, warm", "lattice", "dpgmm", "parzen", "true density"}
    assert set(pines) == {"dense", "lattice", "dpgmm", "parzen"}
    for r in (*ring.values(), *pines.values()):
        assert len(r["per_seed"]) == 1 and np.isfinite(r["mean"])
    # the per-seed results are cached: a second run reads them (a resumable experiment)
    assert (quick / "ring" / "dense_0.json").is_file()
    # the warm-started dense chain began at a lattice state's history, the cold one at none
    warm = json.loads((quick / "ring" / "dense_warm_0.json").read_text())
    cold = json.loads((quick / "ring" / "dense_0.json").read_text())
    assert warm["start_rejections"] > 0 and cold["start_rejections"] == 0
    assert (quick / "gpds2009_figure5.png").stat().st_size > 10_000
    # the lattice rows: several chains through sample(), the multi-chain error and R-hat
    lat = json.loads((quick / "ring" / "lattice_32_2x40_0.json").read_text())
    assert lat["chains"] == 2 and lat["augmentation"] == "scale"
    assert lat["log_se"] > 0 and set(lat["r_hat"]) == {"sd", "range", "n_rejections"}
    assert lat["mean_test_logp"] == pytest.approx(ring["lattice"]["mean"])


def test_the_true_ring_density_is_a_density():
    # 201² points × 512 angles (165 MB; 301² × the default 2048 took 37 s and 3 GB)
    ax = np.linspace(-3.0, 3.0, 201)
    gx, gy = np.meshgrid(ax, ax)
    pts = np.column_stack([gx.ravel(), gy.ravel()])
    mass = np.exp(G.ring_logpdf(pts, n_angles=512)).sum() * (ax[1] - ax[0]) ** 2
    assert abs(mass - 1.0) < 1e-3
    # and it is the data's: its test log probability beats a wrong radius by far
    _, test = G.ring(0)
    assert G.ring_logpdf(test).mean() > G.ring_logpdf(test * 1.3).mean() + 0.5
