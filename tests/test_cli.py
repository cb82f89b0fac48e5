"""The `lattice-lgm` command (cli.py): parsing, errors, and run/resume/summary/plot end to end.

``runs.sample``/``runs.resume`` and the store readers are replaced by fakes that record their
arguments and return a small DataTree built with ``analysis.posterior_dataset`` from a few real
sampler sweeps of the model the test config describes, so the printing of the summary and the
writing of the maps are exercised for real.
"""

from __future__ import annotations

import importlib
import inspect
import io
import os
import re
import sys
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import lattice_lgm
from lattice_lgm import __version__, analysis, cli, config, reports
from lattice_lgm.config import load_config, template
from lattice_lgm.errors import InvalidParameterError
from lattice_lgm.models.lgcp_start import initial_state
from lattice_lgm.samplers import chain_rngs, default_sweep

# R-hat of 4-draw chains divides by a zero within-chain variance inside ArviZ; these tests check
# what the command prints and writes, not the diagnostics' values.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning:arviz.*")

PNG = b"\x89PNG\r\n\x1a\n"
N_POINTS, SEED, CHAINS = 200, 3, 2
REPO_DATA = Path(__file__).resolve().parents[1] / "data"

CONFIG = f"""
[data]
points = "pts.csv"
window = [0, 100, 0, 100]
cell_size = 10.0
units = "m"
covariates = {{ z = "z.csv" }}
[sampling]
seed = {SEED}
chains = {CHAINS}
draws = 4
tune = 0
[output]
thresholds = [1.5, 2.0]
"""


def _write_project(d: Path, body: str = CONFIG) -> Path:
    rng = np.random.default_rng(0)
    xy = rng.uniform(0, 100, size=(3 * N_POINTS, 2))
    xy = xy[rng.random(3 * N_POINTS) < (xy[:, 0] + xy[:, 1]) / 200][:N_POINTS]
    pd.DataFrame({"x": xy[:, 0], "y": xy[:, 1]}).to_csv(d / "pts.csv", index=False)
    c = np.arange(0.0, 101.0, 5.0)
    pd.DataFrame([(x, y, x + 2 * y) for y in c for x in c],
                 columns=["x", "y", "z"]).to_csv(d / "z.csv", index=False)
    p = d / "run.toml"
    p.write_text(body, encoding="utf-8")
    return p


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """The config, its model and a DataTree from 4 real sweeps of 2 chains (built once)."""
    d = tmp_path_factory.mktemp("proj")
    path = _write_project(d)
    model = load_config(path).build_model()
    rngs = chain_rngs(SEED, CHAINS)
    state, sweep = initial_state(model, rngs)[0], default_sweep(model.lgm, n_latent=2)
    states = []
    for _ in range(4):
        state, _ = sweep.step(state, rngs)
        states.append(state)
    post = analysis.posterior_dataset(model, states)
    tree = xr.DataTree.from_dict({"posterior": post})
    return types.SimpleNamespace(dir=d, path=path, model=model, post=post, tree=tree)


def _module(name: str, monkeypatch) -> types.ModuleType:
    """lattice_lgm.<name>, or an empty stand-in while it is not written yet."""
    full = f"lattice_lgm.{name}"
    try:
        return importlib.import_module(full)
    except ModuleNotFoundError:
        mod = types.ModuleType(full)
        monkeypatch.setitem(sys.modules, full, mod)
        return mod


@pytest.fixture
def fake_runs(project, monkeypatch):
    """runs.sample / runs.resume replaced by recorders returning the project's tree."""
    calls: list[tuple[str, tuple, dict]] = []
    mod = _module("runs", monkeypatch)

    def sample(model, **kw):
        calls.append(("sample", (model,), kw))
        return project.tree

    def resume(store_path, **kw):
        calls.append(("resume", (store_path,), kw))
        return project.tree

    monkeypatch.setattr(mod, "sample", sample, raising=False)
    monkeypatch.setattr(mod, "resume", resume, raising=False)
    return calls


@pytest.fixture
def fake_store(project, monkeypatch, tmp_path):
    """A directory that looks like a store; open_store/read_config return the project's."""
    mod = _module("store", monkeypatch)
    opened = []
    resolved = load_config(project.path).resolved
    path = tmp_path / "somewhere.zarr"
    path.mkdir()
    (path / "zarr.json").write_text("{}")
    (path / ".commits").mkdir()  # a created store (store.store_problem)

    def open_store(p):
        opened.append(p)
        return project.tree

    monkeypatch.setattr(mod, "open_store", open_store, raising=False)
    monkeypatch.setattr(mod, "read_config", lambda p: resolved, raising=False)
    return types.SimpleNamespace(opened=opened, path=str(path))


def _pngs(d: Path) -> list[str]:
    names = sorted(p.name for p in d.glob("*.png"))
    for n in names:
        assert (d / n).read_bytes()[:8] == PNG, n
    return names


MAPS = ["exceedance_rr_gt_1.5.png", "exceedance_rr_gt_2.png", "intensity_mean.png"]


# -- parsing ------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [[], ["run"], ["resume"], ["summary"], ["plot"], ["init"]])
def test_help_everywhere(argv, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main([*argv, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "examples:" in out and "lattice-lgm run run.toml" in out


def test_run_help_documents_every_config_key(capsys):
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    out = capsys.readouterr().out
    for sec in config.SCHEMA:
        assert f"[{sec.name}]" in out
        for key in sec.keys:
            assert re.search(rf"^  {key.name} +\S", out, re.M), (sec.name, key.name)


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"lattice-lgm {__version__}"


def test_no_command_prints_help_and_fails(capsys):
    assert cli.main([]) == 2
    assert "COMMAND" in capsys.readouterr().err


@pytest.mark.parametrize("text, n, expected", [
    ("4-7", 8, range(4, 8)), ("5", 8, range(5, 6)), (" 0-0 ", 1, range(0, 1)),
    ("0-3", 4, range(0, 4)),
])
def test_parse_chains(text, n, expected):
    assert cli.parse_chains(text, n) == expected


@pytest.mark.parametrize("text, n, message", [
    ("7-4", 8, "is empty (7 > 4)"), ("4-8", 8, "outside the run's chains 0..7"),
    ("8", 8, "outside the run's chains 0..7"), ("-1", 8, "not a chain range"),
    ("a-b", 8, "not a chain range"), ("", 8, "not a chain range"), ("3-", 8, "not a chain"),
    ("1-2-3", 8, "not a chain range"),
])
def test_parse_chains_refusals(text, n, message):
    with pytest.raises(InvalidParameterError, match=re.escape(message)):
        cli.parse_chains(text, n)


# -- run ----------------------------------------------------------------------------------------
def test_run_end_to_end(project, fake_runs, capsys):
    rc = cli.main(["run", str(project.path), "--set", "sampling.draws=7", "--chains", "0-1",
                   "--no-progress"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    (name, (model, ), kw), = fake_runs
    assert name == "sample"
    assert model.lattice.shape == (10, 10) and model.n_points == N_POINTS
    expected_config = load_config(project.path, ["sampling.draws=7"]).resolved
    assert kw == {
        "draws": 7, "tune": 0, "chains": CHAINS, "random_seed": SEED, "thin": 1,
        "thin_fields": 1, "checkpoint_every": None, "representation": "hmc",
        "n_latent": 10, "thresholds": [1.5, 2.0], "discard_tuned_samples": True,
        "chains_per_task": 1, "store": str(project.dir / "run.zarr"),
        "max_disk_gb": None, "max_memory_gb": None, "config": expected_config,
        "chain_ids": range(0, 2), "progressbar": False}
    # the model's description first, then the table and every note of analysis.summary
    assert out.startswith(f"LGCP: {N_POINTS} points")
    table = analysis.summary(project.model, project.post)
    for row in ("sd", "range", "intercept", "z"):
        assert re.search(rf"^{row} ", out, re.M), row
    assert f"posterior: {CHAINS} chains × 4 draws" in out
    for note in table.attrs["notes"]:
        assert f"note: {note}" in out
    if not table.attrs["notes"]:
        assert "notes: none" in out
    assert _pngs(project.dir / "run_maps") == MAPS


def test_run_progress_and_dask_options_are_passed_only_when_given(project, fake_runs):
    assert cli.main(["run", str(project.path), "--workers", "2"]) == 0
    assert cli.main(["run", str(project.path), "--scheduler", "tcp://h:8786"]) == 0
    assert cli.main(["run", str(project.path)]) == 0
    kws = [kw for _, _, kw in fake_runs]
    assert kws[0]["dask_workers"] == 2 and "dask_scheduler" not in kws[0]
    assert kws[1]["dask_scheduler"] == "tcp://h:8786" and "dask_workers" not in kws[1]
    assert not {"dask_workers", "dask_scheduler"} & set(kws[2])
    assert kws[2]["progressbar"] is True and kws[2]["chain_ids"] is None


def test_threads_option_is_passed_to_sample_and_resume(project, fake_runs, fake_store):
    assert cli.main(["run", str(project.path), "--threads", "1"]) == 0
    assert cli.main(["resume", fake_store.path, "--threads", "2"]) == 0
    assert cli.main(["run", str(project.path)]) == 0
    (_, _, run_kw), (name, _, resume_kw), (_, _, plain_kw) = fake_runs
    assert run_kw["threads"] == 1 and name == "resume" and resume_kw["threads"] == 2
    assert "threads" not in plain_kw  # the library's default budget


def test_ctrl_c_during_run_names_the_store_to_resume(project, monkeypatch, capsys):
    mod = _module("runs", monkeypatch)

    def interrupted(model, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(mod, "sample", interrupted, raising=False)
    assert cli.main(["run", str(project.path)]) == 130
    err = capsys.readouterr().err
    store = load_config(project.path).store_path
    assert f"lattice-lgm resume {store}`" in err and "the run's store" not in err


def test_workers_and_scheduler_are_exclusive(project, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["run", str(project.path), "--workers", "2", "--scheduler", "x"])
    assert e.value.code == 2


def test_run_refuses_dask_options_that_sample_does_not_take(project, monkeypatch, capsys):
    mod = _module("runs", monkeypatch)
    called = []

    def sample(model, draws=1000, *, chain_ids=None, progressbar=True):  # no **kwargs
        called.append(1)

    monkeypatch.setattr(mod, "sample", sample, raising=False)
    assert cli.main(["run", str(project.path), "--workers", "2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --workers: lattice_lgm.runs.sample does not accept "
                          "['dask_workers']")
    assert not called


@pytest.mark.parametrize("args, message", [
    (["--chains", "1-2"], "error: --chains '1-2' is outside the run's chains 0..1"),
    (["--set", "sampling.draw=3"], "error: unknown key 'sampling.draw'; did you mean "
                                   "'sampling.draws'?"),
    (["--set", "sampling.draws=ten"], "error: sampling.draws = 'ten' (a string)"),
])
def test_run_input_errors_exit_2_before_sampling(project, fake_runs, capsys, args, message):
    assert cli.main(["run", str(project.path), *args]) == 2
    assert capsys.readouterr().err.startswith(message)
    assert not fake_runs


def test_run_refuses_a_missing_seed(tmp_path, fake_runs, capsys):
    path = _write_project(tmp_path, CONFIG.replace(f"seed = {SEED}\n", ""))
    assert cli.main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: sampling.seed is not set") and "reproduced" in err
    assert not fake_runs


def test_a_missing_config_file_exits_2(tmp_path, capsys):
    assert cli.main(["run", str(tmp_path / "nope.toml")]) == 2
    assert "error: config file" in capsys.readouterr().err


# -- maps ---------------------------------------------------------------------------------------
def _spy_maps(monkeypatch) -> dict:
    """Record every map ``plot_map`` draws, by title (and still draw it)."""
    import lattice_lgm.plotting as plotting

    drawn: dict = {}
    real = plotting.plot_map

    def spy(da, model, **kw):
        drawn[kw["title"]] = da
        return real(da, model, **kw)

    monkeypatch.setattr(plotting, "plot_map", spy)
    return drawn


def test_maps_values_and_units(project, tmp_path, monkeypatch):
    """The intensity map is per ha for metres (×1e4 of per m²); exceedance = mean(RR > c)."""
    drawn = _spy_maps(monkeypatch)
    files = cli.write_maps(project.model, project.post, tmp_path / "m", (1.5, 2.0),
                           file=io.StringIO())
    assert [f.name for f in files] == ["intensity_mean.png", "exceedance_rr_gt_1.5.png",
                                       "exceedance_rr_gt_2.png"]
    lam = drawn["posterior mean intensity"]
    assert lam.attrs["units"] == "points per ha"
    post, m = project.post, project.model
    eta = post["f"].values + post["intercept"].values[..., None, None]
    x = m.design.center + m.design.scale * np.nan_to_num(m.design.X, nan=0.0)  # (y, x, p)
    eta = eta + np.einsum("cdp,yxp->cdyx", post["beta"].values, x)
    per_m2 = np.exp(eta).mean(axis=(0, 1))
    np.testing.assert_allclose(lam.transpose("y", "x").values, per_m2 * 1e4, rtol=1e-12)
    rr = np.exp(post["f"].values - post["sd"].values[..., None, None] ** 2 / 2)
    exc = drawn["P(relative risk > 2 | data)"]
    np.testing.assert_array_equal(exc.transpose("y", "x").values, (rr > 2.0).mean(axis=(0, 1)))


def test_intensity_per_ha_only_for_metres():
    assert reports._intensity_per("m") == "ha"
    assert reports._intensity_per("metres") == "ha"
    assert reports._intensity_per("ft") is None
    assert reports._intensity_per("km") is None
    assert reports._intensity_per(None) is None


def test_maps_from_online_summaries_when_no_fields_were_kept(project, tmp_path, monkeypatch):
    """thin_fields = 0: pooled per-chain means Σ n_c m_c / Σ n_c and counts Σ k_c / Σ n_c."""
    drawn = _spy_maps(monkeypatch)
    shape = project.model.lattice.shape
    means = np.stack([np.full(shape, 1e-3), np.full(shape, 4e-3)])  # points per m², 2 chains
    counts = np.zeros((2, 1, *shape))
    counts[0, 0, 0, 0], counts[1, 0, 0, 0] = 3, 6
    summ = xr.Dataset({
        "intensity_mean": (("chain", "y", "x"), means),
        "exceedance_count": (("chain", "threshold", "y", "x"), counts),
        "n_draws": (("chain",), np.array([10, 20])),
    }, coords={"threshold": [2.0]})
    post = project.post.drop_vars("f")
    cli.write_maps(project.model, post, tmp_path, (1.5,), file=io.StringIO(), summaries=summ)
    lam = drawn["posterior mean intensity"].values
    # (10·1e-3 + 20·4e-3) / 30 = 3e-3 per m² = 30 per ha
    np.testing.assert_allclose(lam, 30.0, rtol=1e-12)
    exc = drawn["P(relative risk > 2 | data)"].values
    assert exc[0, 0] == pytest.approx(9 / 30) and exc[1, 1] == 0.0
    assert _pngs(tmp_path) == ["exceedance_rr_gt_2.png", "intensity_mean.png"]
    # no fields and no summaries: a clear error, and no summary table
    with pytest.raises(InvalidParameterError, match="thin_fields = 0"):
        cli.write_maps(project.model, post, tmp_path, (1.5,), file=io.StringIO())
    buf = io.StringIO()  # the table and the convergence note do not need the fields
    table = cli.print_summary(project.model, post, file=buf)
    out = buf.getvalue()
    assert "no field draws kept" in out and {"sd", "range", "intercept"} <= set(table.index)
    assert re.search(r"^sd ", out, re.M) and ("converged:" in out or "note:" in out)


# -- store commands -----------------------------------------------------------------------------
def test_summary_from_a_store(project, fake_store, capsys):
    assert cli.main(["summary", fake_store.path]) == 0
    out = capsys.readouterr().out
    assert fake_store.opened == [fake_store.path]
    for row in ("sd", "range", "intercept", "z"):
        assert re.search(rf"^{row} ", out, re.M), row
    assert "LGCP:" not in out  # the table, not the model description


def test_plot_from_a_store(project, fake_store, tmp_path, capsys):
    out_dir = tmp_path / "figs"
    assert cli.main(["plot", fake_store.path, "--out", str(out_dir)]) == 0
    assert _pngs(out_dir) == MAPS
    assert f"maps: 3 PNG files in {out_dir}" in capsys.readouterr().out


def test_resume(project, fake_runs, fake_store, capsys):
    assert cli.main(["resume", fake_store.path, "--no-progress", "--chains", "1"]) == 0
    (name, (path, ), kw), = fake_runs
    assert name == "resume" and path == fake_store.path
    assert kw["progressbar"] is False and kw["chain_ids"] == range(1, 2)
    out = capsys.readouterr().out
    assert re.search(r"^range ", out, re.M)
    assert _pngs(project.dir / "run_maps") == MAPS


def test_summary_of_a_run_without_config(project, fake_store, monkeypatch, capsys):
    mod = _module("store", monkeypatch)
    monkeypatch.setattr(mod, "read_config", lambda path: {}, raising=False)
    assert cli.main(["summary", fake_store.path]) == 2
    assert "without config=" in capsys.readouterr().err


def test_store_without_draws(project, fake_store, monkeypatch, capsys):
    empty = xr.DataTree.from_dict({"posterior": project.post.isel(draw=slice(0, 0))})
    mod = _module("store", monkeypatch)
    monkeypatch.setattr(mod, "open_store", lambda path: empty, raising=False)
    assert cli.main(["summary", fake_store.path]) == 2
    assert "no committed draws yet" in capsys.readouterr().err


def test_a_half_created_store_is_named_before_its_config_is_read(tmp_path, capsys):
    """Killed while laying out the arrays: no config, no draws. Not "run without config="."""
    p = tmp_path / "half.zarr"
    p.mkdir()
    (p / "zarr.json").write_text("{}")
    for cmd in ("summary", "plot", "resume"):
        assert cli.main([cmd, str(p)]) == 2
        err = capsys.readouterr().err
        assert "never fully created" in err and "without config=" not in err


def test_a_path_that_is_not_a_store(tmp_path, capsys):
    for cmd in ("summary", "plot", "resume"):
        assert cli.main([cmd, str(tmp_path / "nope.zarr")]) == 2
        assert "is not a run store (no zarr.json there)" in capsys.readouterr().err


# -- init ---------------------------------------------------------------------------------------
def test_init_writes_the_template_and_refuses_to_overwrite(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["init"]) == 0
    written = tmp_path / cli.DEFAULT_CONFIG
    rel = Path(os.path.relpath(REPO_DATA, tmp_path)).as_posix() if (
        REPO_DATA / "bei.csv").is_file() else "data"
    assert written.read_text() == template(rel)
    if (REPO_DATA / "bei.csv").is_file():
        assert load_config(written).resolved["data"]["points"] == str(REPO_DATA / "bei.csv")
    capsys.readouterr()
    written.write_text("mine")
    assert cli.main(["init", str(written)]) == 2
    assert "exists; pass --force" in capsys.readouterr().err
    assert written.read_text() == "mine"
    assert cli.main(["init", str(written), "--force"]) == 0
    assert written.read_text() == template(rel)
    assert cli.main(["init", str(tmp_path / "no" / "dir.toml")]) == 2


def test_main_is_the_module_entry_point():
    assert inspect.signature(cli.main).parameters["argv"].default is None


def test_summaries_are_preferred_when_they_counted_the_thresholds(project, tmp_path,
                                                                  monkeypatch):
    drawn = _spy_maps(monkeypatch)
    shape = project.model.lattice.shape
    summ = xr.Dataset({
        "intensity_mean": (("chain", "y", "x"), np.full((2, *shape), 2e-3)),
        "exceedance_count": (("chain", "threshold", "y", "x"), np.ones((2, 1, *shape))),
        "n_draws": (("chain",), np.array([4, 4])),
    }, coords={"threshold": [2.0]})
    cli.write_maps(project.model, project.post, tmp_path, (2.0,), file=io.StringIO(),
                   summaries=summ)
    np.testing.assert_allclose(drawn["posterior mean intensity"].values, 20.0)  # 2e-3 /m²
    np.testing.assert_allclose(drawn["P(relative risk > 2 | data)"].values, 2 / 8)
    drawn.clear()
    # a threshold the run did not count: the field draws are used
    cli.write_maps(project.model, project.post, tmp_path, (1.5,), file=io.StringIO(),
                   summaries=summ)
    rr = np.exp(project.post["f"].values - project.post["sd"].values[..., None, None] ** 2 / 2)
    np.testing.assert_array_equal(drawn["P(relative risk > 1.5 | data)"].values,
                                  (rr > 1.5).mean(axis=(0, 1)))


def test_run_summary_plot_with_the_real_runner_and_store(project, tmp_path, capsys):
    """Integration: runs.sample writes a store; summary and plot read it back."""
    from lattice_lgm import store
    body = project.path.read_text().replace(
        'points = "pts.csv"', f'points = "{project.dir / "pts.csv"}"').replace(
        'covariates = { z = "z.csv" }', f'covariates = {{ z = "{project.dir / "z.csv"}" }}')
    cfg_path = tmp_path / "real.toml"
    cfg_path.write_text(body + "[store]\npath = \"real.zarr\"\n")
    assert cli.main(["run", str(cfg_path), "--no-progress"]) == 0
    zarr_path = tmp_path / "real.zarr"
    assert (zarr_path / "zarr.json").is_file()
    assert _pngs(tmp_path / "real_maps") == MAPS
    # the resolved config survives the store's attrs unchanged
    stored = store.read_config(zarr_path)
    assert config.RunConfig.from_resolved(stored).resolved == load_config(cfg_path).resolved
    capsys.readouterr()
    assert cli.main(["summary", str(zarr_path)]) == 0
    out = capsys.readouterr().out
    assert f"posterior: {CHAINS} chains × 4 draws" in out and re.search(r"^range ", out, re.M)
    assert cli.main(["plot", str(zarr_path), "--out", str(tmp_path / "p")]) == 0
    assert _pngs(tmp_path / "p") == MAPS
    # "run longer": extend the finished run, then its summary has the extra draws, and the
    # stored config says so (a later resume or extend checks against it)
    assert cli.main(["verify", str(zarr_path)]) == 0
    assert cli.main(["extend", str(zarr_path), "--draws", "3", "--no-progress"]) == 0
    capsys.readouterr()
    assert cli.main(["summary", str(zarr_path)]) == 0
    assert f"posterior: {CHAINS} chains × 7 draws" in capsys.readouterr().out
    assert store.read_config(zarr_path)["sampling"]["draws"] == 7
    assert cli.main(["verify", str(zarr_path)]) == 0


def test_summary_from_the_store_alone_after_the_data_moved(project, tmp_path, capsys):
    """A run's summary needs its store only (decision 101): the data files may be gone."""
    d = tmp_path / "moving"
    d.mkdir()
    path = _write_project(d, project.path.read_text() + '[store]\npath = "m.zarr"\n')
    assert cli.main(["run", str(path), "--no-progress"]) == 0
    capsys.readouterr()
    model = load_config(path).build_model()
    for f in ("pts.csv", "z.csv"):
        (d / f).unlink()
    assert cli.main(["summary", str(d / "m.zarr")]) == 0
    out = capsys.readouterr().out
    tree = lattice_lgm.open_store(d / "m.zarr")
    table = analysis.summary(model, tree["posterior"].to_dataset(),
                             loglik=tree["sample_stats"]["loglik"].values)
    assert table.to_string(float_format=lambda v: f"{v:.4g}") in out
    # and its maps (analysis.StoredLGCP: the lattice and covariates as the store holds them)
    assert cli.main(["plot", str(d / "m.zarr"), "--out", str(tmp_path / "p")]) == 0
    assert _pngs(tmp_path / "p") == MAPS
    # a config that now points nowhere still fails where the data are needed, naming the file
    assert cli.main(["resume", str(d / "m.zarr"), "--no-progress"]) == 2
    assert "pts.csv" in capsys.readouterr().err


def test_chain_blocks_run_and_extend_as_job_array_tasks(project, tmp_path, capsys):
    """Job-array tasks: `run --chains`, then `extend --chains` per block; the first extension
    grows the store, the second finds it grown; the summary then has every chain's draws."""
    body = project.path.read_text().replace(
        'points = "pts.csv"', f'points = "{project.dir / "pts.csv"}"').replace(
        'covariates = { z = "z.csv" }', f'covariates = {{ z = "{project.dir / "z.csv"}" }}')
    cfg_path = tmp_path / "blocks.toml"
    cfg_path.write_text(body + "[store]\npath = \"blocks.zarr\"\n")
    zarr_path = tmp_path / "blocks.zarr"
    for c in range(CHAINS):
        capsys.readouterr()
        assert cli.main(["run", str(cfg_path), "--chains", str(c), "--no-progress"]) == 0
        out = capsys.readouterr().out
        # a block whose siblings are unfinished says so (exit 0), the last one reports
        assert ("have not (yet)" in out) == (c < CHAINS - 1)
    for c in reversed(range(CHAINS)):
        assert cli.main(["extend", str(zarr_path), "--draws", "2", "--chains", str(c),
                         "--no-progress"]) == 0
    capsys.readouterr()
    assert cli.main(["summary", str(zarr_path)]) == 0
    assert f"posterior: {CHAINS} chains × 6 draws" in capsys.readouterr().out
    assert cli.main(["verify", str(zarr_path)]) == 0
