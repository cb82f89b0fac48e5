"""The lattice GPDS runs like any model: sample() into a store, exact resume, the CLI.

``LatticeGPDS`` implements the run protocol (``lattice_lgm._runview.RunView``) itself, and the
configuration names it ``model.family = "gpds"``.
"""

from __future__ import annotations

import numpy as np
import pytest

from lattice_lgm._runview import RunView, view_of
from lattice_lgm.covariance import SquaredExponential
from lattice_lgm.gpds import UniformBase
from lattice_lgm.gpds.lattice import LatticeGPDS
from lattice_lgm.hyperpriors import LogNormal
from lattice_lgm.runs import sample
from lattice_lgm.store import open_store
from tests.runs.test_runs import _assert_same_store, _crash_after_checkpoint

RUN = dict(draws=6, tune=2, chains=2, random_seed=3, checkpoint_every=2, n_latent=2,
           progressbar=False)


def _points(n=60, seed=0):
    rng = np.random.default_rng(seed)
    return np.clip(0.5 + 0.15 * rng.standard_normal((n, 2)), 0.01, 0.99)


@pytest.fixture(scope="module")
def model():
    return LatticeGPDS(_points(), UniformBase.create([0.0, 0.0], [1.0, 1.0]), cells=12,
                       kernel=SquaredExponential(sd=1.0, lengthscale=0.1),
                       hyperpriors={"sd": LogNormal(0.0, 0.5),
                                    "range": LogNormal(np.log(0.2), 0.5, upper=0.6)})


def test_it_is_a_run_view(model):
    assert isinstance(model, RunView)
    assert view_of(model) is model


def test_it_samples_into_a_store(model, tmp_path):
    tree = sample(model, store=tmp_path / "g.zarr", **RUN)
    post = tree["posterior"]
    assert post["f"].dims == ("chain", "draw", "y", "x") and post["f"].shape == (2, 6, 12, 12)
    assert {"sd", "range", "n_rejections", "normaliser"} <= set(post.data_vars)
    assert np.all(post["n_rejections"].values >= 0)
    assert np.all((post["normaliser"].values > 0) & (post["normaliser"].values < 1))
    obs = tree["observed_data"]
    np.testing.assert_array_equal(obs["points"].values, model.data)
    assert int(obs["counts"].values.sum()) == len(model.data)
    again = open_store(tmp_path / "g.zarr")
    np.testing.assert_array_equal(again["posterior"]["range"].values, post["range"].values)


def test_an_interrupted_run_resumes_byte_for_byte(model, tmp_path, monkeypatch):
    ref = tmp_path / "ref.zarr"
    sample(model, store=ref, **RUN)
    p = tmp_path / "cut.zarr"
    _crash_after_checkpoint(model, p, monkeypatch, n=2, run=RUN)
    sample(model, store=p, resume=True, **RUN)
    _assert_same_store(ref, p)


def test_it_runs_from_a_config_through_the_command_line(tmp_path, capsys, monkeypatch):
    from lattice_lgm import cli

    pts = _points(40)
    (tmp_path / "pts.csv").write_text(
        "x,y\n" + "\n".join(f"{a:.6f},{b:.6f}" for a, b in pts))
    (tmp_path / "g.toml").write_text(
        '[data]\npoints = "pts.csv"\ncell_size = 1.0\n\n'
        '[model]\nfamily = "gpds"\n'
        'options = { cells = 10, lower = [0.0, 0.0], upper = [1.0, 1.0] }\n\n'
        '[sampling]\nseed = 3\nchains = 2\ntune = 2\ndraws = 4\nn_latent = 2\n'
        'checkpoint_every = 2\n')
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "g.toml", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("GPDS (lattice): 40 points") and "2 chains × 4 draws" in out
    assert cli.main(["summary", str(tmp_path / "g.zarr")]) == 0
    assert "range" in capsys.readouterr().out


def test_config_errors_name_the_option(tmp_path, capsys, monkeypatch):
    from lattice_lgm import cli

    (tmp_path / "pts.csv").write_text("x,y\n0.5,0.5\n")
    (tmp_path / "g.toml").write_text(
        '[data]\npoints = "pts.csv"\ncell_size = 1.0\n\n'
        '[model]\nfamily = "gpds"\noptions = { cels = 10 }\n\n[sampling]\nseed = 1\n')
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "g.toml", "--no-progress"]) != 0
    assert "model.options has unknown keys ['cels']" in capsys.readouterr().err


def test_the_density_map_from_the_store_alone(model, tmp_path, capsys):
    from lattice_lgm import cli
    from lattice_lgm.gpds.plots import posterior_density

    tree = sample(model, store=tmp_path / "g.zarr", **RUN)
    dens = posterior_density(tree)
    assert dens.dims == ("y", "x")
    cell = float(np.prod(model.lattice.spacing))
    assert np.isclose(float(dens.sum()) * cell, 1.0)  # a density over the box
    assert cli.main(["plot", str(tmp_path / "g.zarr"), "--out", str(tmp_path / "maps")]) == 0
    assert (tmp_path / "maps" / "density.png").stat().st_size > 5_000
