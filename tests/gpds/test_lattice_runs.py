"""The lattice GPDS runs like any model: sample() into a store, exact resume, the CLI.

``LatticeGPDS`` implements the run protocol (``lattice_lgm._runview.RunView``) itself, and the
configuration names it ``model.family = "gpds"``.
"""

from __future__ import annotations

import numpy as np
import pytest

from lattice_lgm._runview import RunView, view_of
from lattice_lgm.covariance import SquaredExponential
from lattice_lgm.errors import InvalidParameterError
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


def _stop_at_draw(model, path, run, monkeypatch, n):
    """Run ``run`` into ``path`` and stop it as Ctrl-C does (the SIGINT handler's flag) at
    posterior draw ``n``: a checkpoint there, between chunk boundaries, then the interrupt.
    (Warm-up draws are discarded, so only posterior draws are recorded.)"""
    from lattice_lgm.runs.loop import _Runner

    orig, calls = _Runner.record, {"n": 0}

    def stopping(self, *a, **k):
        calls["n"] += 1
        if calls["n"] == n:
            self.stop = True
        return orig(self, *a, **k)

    monkeypatch.setattr(_Runner, "record", stopping)
    with pytest.raises(KeyboardInterrupt):
        sample(model, store=path, **run)
    monkeypatch.setattr(_Runner, "record", orig)


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


def test_each_draws_rejection_set_is_stored(model, tmp_path):
    """The latent history of every draw: counts per cell, summing to that draw's M."""
    post = sample(model, store=tmp_path / "g.zarr", **RUN)["posterior"]
    counts = post["rejection_counts"]
    assert counts.dims == ("chain", "draw", "y", "x") and counts.dtype == np.int32
    np.testing.assert_array_equal(counts.sum(("y", "x")).values, post["n_rejections"].values)
    assert len(np.unique(counts.values.reshape(12, -1), axis=0)) > 1  # drawn afresh per draw
    # with thinned fields the counts are thinned with g
    thin = sample(model, store=tmp_path / "t.zarr", thin_fields=2,
                  **RUN)["posterior_fields"]
    assert thin["rejection_counts"].shape == thin["f"].shape == (2, 3, 12, 12)
    np.testing.assert_array_equal(
        thin["rejection_counts"].sum(("y", "x")).values,
        post["n_rejections"].values[:, ::2])


def test_a_run_stopped_between_checkpoints_resumes_byte_for_byte(model, tmp_path, monkeypatch):
    """A stop between checkpoint boundaries (as Ctrl-C does) leaves a part-written chunk; the
    resume reads its draws back — the field and the rejection counts, thinned — and ends with
    the uninterrupted run's bytes."""
    run = dict(RUN, draws=8, checkpoint_every=4, thin_fields=2)
    ref = tmp_path / "ref.zarr"
    sample(model, store=ref, **run)
    p = tmp_path / "cut.zarr"
    _stop_at_draw(model, p, run, monkeypatch, 3)
    assert open_store(p)["posterior"].sizes["draw"] == 3
    sample(model, store=p, resume=True, **run)
    _assert_same_store(ref, p)


@pytest.mark.parametrize("thin_fields", [1, 2])
def test_a_store_without_the_rejection_counts_is_written_without_them(model, tmp_path,
                                                                     monkeypatch, thin_fields):
    """A store laid out before the counts were stored (a resume of an older run) lacks their
    array: the loop writes, and on a resume inside a chunk reads back, what the store holds."""
    from lattice_lgm.runs import plan as plan_mod

    specs = plan_mod._Plan.specs

    def older(self, record):
        s, c = specs(self, record)
        return [v for v in s if v.name != "rejection_counts"], c

    monkeypatch.setattr(plan_mod._Plan, "specs", older)
    run = dict(RUN, draws=8, checkpoint_every=4, thin_fields=thin_fields)
    ref = sample(model, store=tmp_path / "ref.zarr", **run)
    group = "posterior" if thin_fields == 1 else "posterior_fields"
    assert "rejection_counts" not in ref[group].data_vars and "f" in ref[group].data_vars
    _stop_at_draw(model, tmp_path / "cut.zarr", run, monkeypatch, 3)
    sample(model, store=tmp_path / "cut.zarr", resume=True, **run)
    _assert_same_store(tmp_path / "ref.zarr", tmp_path / "cut.zarr")
    # and this version extends it, still without them
    monkeypatch.setattr(plan_mod._Plan, "specs", specs)
    longer = sample(model, store=tmp_path / "cut.zarr", extend=2, **run)
    assert longer["posterior"].sizes["draw"] == 10
    assert "rejection_counts" not in longer[group].data_vars
    assert not np.isnan(longer["posterior"]["range"].values).any()


def test_history_points_lie_in_their_cells(model):
    rng = np.random.default_rng(0)
    counts = rng.poisson(0.5, model.lattice.shape)
    pts = model.history_points(counts, rng)
    assert pts.shape == (counts.sum(), 2)
    np.testing.assert_array_equal(model.cell_of(pts),
                                  np.repeat(np.arange(counts.size), counts.reshape(-1)))
    with pytest.raises(InvalidParameterError, match="counts"):
        model.history_points(np.ones(5, int), rng)
    with pytest.raises(InvalidParameterError, match="non-negative integers"):
        model.history_points(-np.ones(model.lattice.shape, int), rng)


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


def test_the_predictive_density_at_points_from_the_store(model, tmp_path):
    """At the cells' centres it is the stored posterior mean density per cell (a uniform base:
    the density is constant on each cell); off the box it is 0; thinned fields work too."""
    from lattice_lgm.gpds.plots import posterior_density
    from lattice_lgm.gpds.stored import predictive_density_from_store

    tree = sample(model, store=tmp_path / "g.zarr", **RUN)
    c = model.lattice.coords()
    xx, yy = np.meshgrid(c["x"], c["y"])
    centres = np.column_stack([xx.ravel(), yy.ravel()])
    out = predictive_density_from_store(model, tree, np.vstack([centres, [[1.5, 0.5]]]))
    np.testing.assert_allclose(out["density"].values[:-1],
                               posterior_density(tree).values.ravel(), rtol=1e-5)
    assert out["density"].values[-1] == 0 and out["mcse"].values[-1] == 0
    assert np.all(out["mcse"].values[:-1] > 0) and out.attrs["n_draws"] == 12
    # the mean log density's error by the delta method sees the points' shared draws: five
    # copies of one point have the error of one (not 1/√5 of it, as independent errors would)
    same = predictive_density_from_store(model, tree, np.repeat(centres[:1], 5, axis=0))
    assert same.attrs["mean_log_density"] == pytest.approx(float(same["log_density"][0]))
    assert same.attrs["mean_log_density_mcse"] == pytest.approx(
        float(same["mcse"][0] / same["density"][0]), rel=1e-6)
    assert np.isnan(out.attrs["mean_log_density_mcse"])  # a point off the box: log p̂ = −inf
    assert out.attrs["mean_log_density"] == -np.inf
    thin = sample(model, store=tmp_path / "t.zarr", **dict(RUN, thin_fields=2))
    assert predictive_density_from_store(model, thin, centres).attrs["n_draws"] == 6
    with pytest.raises(InvalidParameterError, match="shape"):
        predictive_density_from_store(model, tree, np.ones((3, 3)))
    other = LatticeGPDS(_points(seed=1), UniformBase.create([0.0, 0.0], [1.0, 1.0]), cells=12)
    with pytest.raises(InvalidParameterError, match="data_sha256"):
        predictive_density_from_store(other, tree, centres)
