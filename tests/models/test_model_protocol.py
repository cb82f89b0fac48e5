"""A new model family plugs into runs through the RunView protocol alone (issue 28).

``tests/models/toy_gp.py`` is one module outside the package; these tests run it through
``sample()`` into a store, ``open_store``, an interrupted run's ``resume`` (byte for byte),
``analysis.summary`` and the command line (``run``, ``summary``, ``extend``, ``verify``,
``resume``) from a configuration naming it — with no edit to the package for it.
"""

from __future__ import annotations

import numpy as np
import pytest

from lattice_lgm import analysis
from lattice_lgm._runview import RunView, view_of
from lattice_lgm.errors import InvalidParameterError
from lattice_lgm.runs import sample
from lattice_lgm.store import open_store
from tests.models.toy_gp import ToyGP, toy_data
from tests.runs.test_runs import _assert_same_store, _crash_after_checkpoint

RUN = dict(draws=6, tune=2, chains=2, random_seed=3, checkpoint_every=2, n_latent=2,
           progressbar=False)


@pytest.fixture(scope="module")
def toy():
    return ToyGP(toy_data())


def test_the_toy_is_a_run_view_and_is_used_as_it_is(toy):
    assert isinstance(toy, RunView)
    assert view_of(toy) is toy
    with pytest.raises(InvalidParameterError, match="RunView"):
        view_of(object())


def test_the_toy_samples_into_a_store_and_summarises(toy, tmp_path):
    tree = sample(toy, store=tmp_path / "toy.zarr", **RUN)
    post = tree["posterior"]
    assert post["f"].dims == ("chain", "draw", "x") and post["f"].shape == (2, 6, 40)
    assert set(post.data_vars) == {"sd", "range", "mean", "f"}
    assert tree.attrs["model"] == "ToyGP"
    np.testing.assert_array_equal(tree["observed_data"]["obs"].values, toy.y)
    again = open_store(tmp_path / "toy.zarr")
    np.testing.assert_array_equal(again["posterior"]["sd"].values, post["sd"].values)
    table = analysis.summary(toy, again["posterior"].to_dataset(),
                             loglik=again["sample_stats"]["loglik"].values)
    assert set(table.index) == {"sd", "range", "mean", "log_likelihood"}
    np.testing.assert_allclose(table.loc["sd", "mean"], post["sd"].values.mean())
    assert "converged" in table.attrs and isinstance(table.attrs["notes"], list)


def test_an_interrupted_toy_run_resumes_byte_for_byte(toy, tmp_path, monkeypatch):
    ref = tmp_path / "ref.zarr"
    sample(toy, store=ref, **RUN)
    p = tmp_path / "cut.zarr"
    _crash_after_checkpoint(toy, p, monkeypatch, n=2, run=RUN)
    sample(toy, store=p, resume=True, **RUN)
    _assert_same_store(ref, p)


def test_the_toy_runs_from_a_config_through_the_command_line(tmp_path, capsys, monkeypatch):
    from lattice_lgm import cli

    (tmp_path / "obs.csv").write_text("y\n" + "\n".join(f"{v:.6f}" for v in toy_data()))
    (tmp_path / "toy.toml").write_text(
        '[data]\npoints = "obs.csv"\ncell_size = 1.0\n\n'
        '[model]\nfamily = "tests.models.toy_gp:ToyGP"\n'
        'options = { spacing = 1.0, noise_sd = 0.3 }\n\n'
        '[sampling]\nseed = 3\nchains = 2\ntune = 2\ndraws = 6\nn_latent = 2\n'
        'checkpoint_every = 2\n')
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "toy.toml", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ToyGP: 40 observations") and "posterior: 2 chains × 6 draws" in out
    assert not (tmp_path / "toy_maps").exists()  # the maps are the LGCP's
    store = str(tmp_path / "toy.zarr")
    assert cli.main(["summary", store]) == 0
    assert "posterior: 2 chains × 6 draws" in capsys.readouterr().out
    assert cli.main(["extend", store, "--draws", "2", "--no-progress"]) == 0
    assert cli.main(["verify", store]) == 0
    assert cli.main(["summary", store]) == 0
    assert "posterior: 2 chains × 8 draws" in capsys.readouterr().out
    assert cli.main(["plot", store]) == 2
    assert "the maps are the LGCP's" in capsys.readouterr().err


def test_a_family_that_cannot_be_imported_is_named(tmp_path, capsys):
    from lattice_lgm.config import ConfigError, load_config

    (tmp_path / "obs.csv").write_text("y\n1.0\n2.0\n")
    (tmp_path / "bad.toml").write_text(
        '[data]\npoints = "obs.csv"\ncell_size = 1.0\n\n[model]\nfamily = "nowhere.mod:X"\n'
        '\n[sampling]\nseed = 1\n')
    cfg = load_config(tmp_path / "bad.toml")
    with pytest.raises(ConfigError, match=r"model.family = 'nowhere.mod:X' cannot be imported"):
        cfg.build_model()
    (tmp_path / "bad2.toml").write_text(
        '[data]\npoints = "obs.csv"\ncell_size = 1.0\n\n[model]\nfamily = "not a path"\n'
        '\n[sampling]\nseed = 1\n')
    with pytest.raises(ConfigError, match=r"model\.family"):
        load_config(tmp_path / "bad2.toml")
