"""The run configuration (config.py): schema validation, suggestions, overrides, paths, template.

Expected values are written by hand from the schema's documentation (defaults, the window-scaled
default priors L/10 and L/2, absolute paths built with pathlib), never by re-running the
resolver on the same input.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lattice_lgm import config
from lattice_lgm.config import ConfigError, RunConfig, load_config, template
from lattice_lgm.errors import InvalidParameterError, LatticeLGMError
from lattice_lgm.hyperpriors import Normal, PCPriorRange, PCPriorSD
from lattice_lgm.settings import DEFAULT_THRESHOLDS

REPO_DATA = Path(__file__).resolve().parents[1] / "data"
N_POINTS = 200


def _points(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.uniform(0, 100, size=(N_POINTS, 2))


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """Points in the square [0, 100]² (columns x, y) and a long covariate table z = x + 2y."""
    d = tmp_path / "data"
    d.mkdir()
    xy = _points()
    pd.DataFrame({"x": xy[:, 0], "y": xy[:, 1]}).to_csv(d / "pts.csv", index=False)
    c = np.arange(0.0, 101.0, 5.0)
    pd.DataFrame([(x, y, x + 2 * y) for y in c for x in c],
                 columns=["x", "y", "z"]).to_csv(d / "z.csv", index=False)
    return d


BASE = """
[data]
points = "../data/pts.csv"
window = [0, 100, 0, 100]
cell_size = 10.0
units = "m"
covariates = { z = "../data/z.csv" }
"""


def _write(tmp_path: Path, body: str, name: str = "run.toml") -> Path:
    sub = tmp_path / "cfg"
    sub.mkdir(exist_ok=True)
    p = sub / name
    p.write_text(body, encoding="utf-8")
    return p


def test_config_error_is_in_the_hierarchy():
    assert issubclass(ConfigError, InvalidParameterError)
    assert issubclass(ConfigError, LatticeLGMError)


def test_resolved_paths_defaults_and_order(tmp_path, data_dir, monkeypatch):
    p = _write(tmp_path, BASE)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # relative paths follow the config file, not the cwd
    cfg = load_config(p)
    r = cfg.resolved
    assert list(r) == ["data", "model", "sampling", "store", "output"]
    assert list(r["model"]["priors"]) == ["range", "sd", "intercept"]
    assert r["data"]["points"] == str(data_dir / "pts.csv")
    assert r["data"]["covariates"] == {"z": str(data_dir / "z.csv")}
    assert r["data"]["window"] == [0.0, 100.0, 0.0, 100.0]
    assert r["data"]["shape"] is None and r["data"]["outside"] == "raise"
    # LGCP's documented defaults and the sampling defaults of the schema
    assert r["model"] == {"family": "lgcp", "options": {}, "backend": "circulant", "nu": 1.5,
                          "nu_t": 0.5, "alpha": None,
                          "coefficients": "block", "intercept": "hyper", "beta_sd": 1.0,
                          "priors": {"range": None, "sd": None, "intercept": None}}
    assert r["sampling"] == {"draws": 1000, "tune": 1000, "discard_tuned_samples": True,
                             "chains": 4, "seed": None,
                             "thin": 1, "thin_fields": 1, "checkpoint_every": None,
                             # "auto" resolves to the backend's measured default (issue 25)
                             "representation": "hmc", "n_latent": 10,
                             "chains_per_task": 1}
    assert r["store"]["path"] == str(tmp_path / "cfg" / "run.zarr")
    assert r["output"]["maps"] == str(tmp_path / "cfg" / "run_maps")
    assert cfg.store_path == tmp_path / "cfg" / "run.zarr"
    assert cfg.maps_dir == tmp_path / "cfg" / "run_maps"
    assert cfg.thresholds == tuple(DEFAULT_THRESHOLDS)
    # JSON-serialisable, a copy, and rebuilt unchanged from the stored form
    stored = json.loads(json.dumps(r))
    assert RunConfig.from_resolved(stored).resolved == r
    r["sampling"]["draws"] = 5
    assert cfg.resolved["sampling"]["draws"] == 1000


def test_store_and_maps_paths_relative_to_the_config(tmp_path, data_dir):
    p = _write(tmp_path, BASE + '[store]\npath = "out/a.zarr"\n[output]\nmaps = "figs"\n')
    r = load_config(p).resolved
    assert r["store"]["path"] == str(tmp_path / "cfg" / "out" / "a.zarr")
    assert r["output"]["maps"] == str(tmp_path / "cfg" / "figs")
    p2 = _write(tmp_path, BASE + '[store]\npath = "/abs/b.zarr"\n', "two.toml")
    r2 = load_config(p2).resolved
    assert r2["store"]["path"] == "/abs/b.zarr"
    assert r2["output"]["maps"] == "/abs/b_maps"


@pytest.mark.parametrize("body, override, message", [
    ("", "sampling.draw=10", "unknown key 'sampling.draw'; did you mean 'sampling.draws'?"),
    ("[samplng]\ndraws = 10\n", None, "unknown section 'samplng'; did you mean 'sampling'?"),
    ("[sampling]\nunits = 'm'\n", None, "unknown key 'sampling.units'; did you mean "
                                        "'data.units'?"),
    ("[model.priors]\nrnage = { rho0 = 1.0, alpha = 0.1 }\n", None,
     "unknown key 'model.priors.rnage'; did you mean 'model.priors.range'?"),
    ("[model.priors.range]\nrho = 1.0\nalpha = 0.1\n", None,
     "unknown key 'model.priors.range.rho'; did you mean 'model.priors.range.rho0'?"),
    ("", "sampling.xyz=1", "unknown key 'sampling.xyz'; valid here: 'sampling.chains'"),
])
def test_unknown_names_are_refused_with_a_suggestion(tmp_path, data_dir, body, override,
                                                     message):
    p = _write(tmp_path, BASE + body)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(p, [override] if override else [])


@pytest.mark.parametrize("section, line, pieces", [
    ("sampling", 'draws = "ten"', ["sampling.draws = 'ten'", "a string", "an integer >= 1"]),
    ("sampling", "draws = true", ["sampling.draws = True", "a boolean", "an integer >= 1"]),
    ("sampling", "draws = 10.0", ["sampling.draws = 10.0", "a float", "an integer >= 1"]),
    ("sampling", "tune = -1", ["sampling.tune = -1", "an integer >= 0"]),
    ("sampling", "seed = 1.5", ["sampling.seed = 1.5", "an integer >= 0"]),
    ("model", 'backend = "fft"', ["model.backend = 'fft'", "'circulant', 'gmrf', 'dense'"]),
    ("model", "nu = 0", ["model.nu = 0", "> 0"]),
    ("model.priors.range", "rho0 = 1.0\nalpha = 1.5", ["model.priors.range.alpha = 1.5",
                                                      "a probability in (0, 1)"]),
    ("output", "thresholds = []", ["output.thresholds = []", "a non-empty list"]),
    ("output", "thresholds = [1.5, -2.0]", ["output.thresholds = [1.5, -2.0]", "> 0"]),
    ("store", "max_disk_gb = 'lots'", ["store.max_disk_gb = 'lots'", "a finite number > 0"]),
])
def test_types_are_checked(tmp_path, data_dir, section, line, pieces):
    p = _write(tmp_path, BASE + f"[{section}]\n{line}\n")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    for s in pieces:
        assert s in str(e.value), (s, str(e.value))


@pytest.mark.parametrize("window, reason", [
    ("[0, 100, 0]", "[xmin, xmax, ymin, ymax]"),
    ("[0, -1, 0, 100]", "need xmin < xmax and ymin < ymax"),
    ("3", "[xmin, xmax, ymin, ymax]"),
])
def test_window_values_are_checked(tmp_path, data_dir, window, reason):
    p = _write(tmp_path, BASE.replace("[0, 100, 0, 100]", window))
    with pytest.raises(ConfigError, match=re.escape(reason)):
        load_config(p)


def test_a_float_key_accepts_an_integer(tmp_path, data_dir):
    p = _write(tmp_path, BASE + "[model]\nnu = 2\n")
    nu = load_config(p).resolved["model"]["nu"]
    assert nu == 2.0 and isinstance(nu, float)


def test_overrides_parse_toml_values_and_fall_back_to_strings(tmp_path, data_dir):
    p = _write(tmp_path, BASE)
    r = load_config(p, ["sampling.draws=200", "data.units=ft", 'data.formula="~ z"',
                        "model.priors.range={ rho0 = 5.0, alpha = 0.05, upper = 40.0 }",
                        "output.thresholds=[2, 4]", "sampling.seed = 7"]).resolved
    assert r["sampling"]["draws"] == 200 and isinstance(r["sampling"]["draws"], int)
    assert r["sampling"]["seed"] == 7
    assert r["data"]["units"] == "ft"
    assert r["data"]["formula"] == "~ z"
    assert r["model"]["priors"]["range"] == {"rho0": 5.0, "alpha": 0.05, "upper": 40.0}
    assert r["output"]["thresholds"] == [2.0, 4.0]
    # an override's value is type-checked like the file's
    with pytest.raises(ConfigError, match=re.escape("sampling.draws = 'ten'")):
        load_config(p, ["sampling.draws=ten"])


def test_override_paths_resolve_against_the_current_directory(tmp_path, data_dir,
                                                              monkeypatch):
    p = _write(tmp_path, BASE)
    (data_dir / "pts2.csv").write_text((data_dir / "pts.csv").read_text())
    monkeypatch.chdir(data_dir)
    r = load_config(p, ["data.points=pts2.csv", "store.path=here.zarr"]).resolved
    assert r["data"]["points"] == str(data_dir / "pts2.csv")
    assert r["store"]["path"] == str(data_dir / "here.zarr")
    assert r["data"]["covariates"]["z"] == str(data_dir / "z.csv")  # from the file: config dir


@pytest.mark.parametrize("override, message", [
    ("sampling.draws", "is not 'section.key=value'"),
    ("=3", "is not 'section.key=value'"),
    ("sampling..draws=3", "is not 'section.key=value'"),
    ("sampling.draws.x=1", "sampling.draws is an integer, not a table"),
])
def test_malformed_overrides(tmp_path, data_dir, override, message):
    p = _write(tmp_path, BASE + "[sampling]\ndraws = 5\n")
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(p, [override])


@pytest.mark.parametrize("extra, message", [
    # BASE ends inside [data], so plain lines extend it
    ("shape = [5, 5]\n", "exactly one of data.cell_size and data.shape (got both)"),
    ("regrid = { q = 'area' }\n", "data.regrid names ['q']"),
    ("time = [0, 4]\n", "needs both data.time = [t0, t1] and data.time_step"),
    ("time_units = 'day'\n", "data.time_units = 'day' is for space-time models"),
    ("[sampling]\nrepresentation = 'surr-site'\n",
     "sampling.representation = 'surr-site' is not available with model.backend = "
     "'circulant'"),
    ("[sampling]\nrepresentation = 'rmhmc'\n",
     "sampling.representation = 'rmhmc' is a sampler of model.family = \"gpc\""),
    ("[model]\nnu_t = 1.5\n", "model.nu_t = 1.5 is for space-time models"),
    ("[model]\nbackend = 'gmrf'\nnu = 1.5\n",
     "model.nu = 1.5 is the Matérn smoothness of the circulant and dense backends; "
     "model.backend = 'gmrf' takes model.alpha"),
    ("[model]\nalpha = 2\n",
     "model.alpha = 2 is the SPDE order of the gmrf backend; model.backend = 'circulant' "
     "takes model.nu"),
    ("[model.priors.range]\nrho0 = 5.0\n",
     "model.priors.range.alpha is required when [model.priors.range] is given"),
])
def test_cross_checks(tmp_path, data_dir, extra, message):
    p = _write(tmp_path, BASE + extra)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(p)


def test_covariate_files_need_a_known_suffix(tmp_path, data_dir):
    (data_dir / "z.txt").write_text("x,y,w\n")
    p = _write(tmp_path, BASE.replace("z.csv", "z.txt"))
    with pytest.raises(ConfigError, match=re.escape("data.covariates.z = ")) as e:
        load_config(p)
    assert "suffix '.txt'" in str(e.value)


def test_neither_cell_size_nor_shape(tmp_path, data_dir):
    p = _write(tmp_path, BASE.replace("cell_size = 10.0\n", ""))
    with pytest.raises(ConfigError, match=re.escape("(got neither)")):
        load_config(p)


def test_missing_files_and_required_keys(tmp_path, data_dir):
    p = _write(tmp_path, BASE.replace("pts.csv", "nope.csv"))
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert "data.points" in str(e.value) and str(data_dir / "nope.csv") in str(e.value)
    p = _write(tmp_path, BASE.replace('points = "../data/pts.csv"\n', ""))
    with pytest.raises(ConfigError, match=re.escape("data.points is required")):
        load_config(p)
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "absent.toml")
    bad = _write(tmp_path, "[data\npoints = 1\n", "bad.toml")
    with pytest.raises(ConfigError, match="is not valid TOML"):
        load_config(bad)


def test_time_column_and_space_time_keys_go_together(tmp_path, data_dir):
    xy = _points()
    t = np.linspace(0.0, 4.0, N_POINTS)
    pd.DataFrame({"x": xy[:, 0], "y": xy[:, 1], "t": t}).to_csv(data_dir / "pts_t.csv",
                                                                 index=False)
    spatial = _write(tmp_path, BASE.replace("pts.csv", "pts_t.csv"))
    with pytest.raises(ConfigError, match="has a 't' column"):
        load_config(spatial)
    st = BASE.replace("pts.csv", "pts_t.csv") + "time = [0, 4]\ntime_step = 1.0\n"
    st = st.replace('covariates = { z = "../data/z.csv" }\n', "")
    model = load_config(_write(tmp_path, st, "st.toml")).build_model()
    assert model.lattice.shape == (4, 10, 10)
    assert model.lattice.dims == ("t", "y", "x")
    assert model.lattice.spacing == (1.0, 10.0, 10.0)
    assert model.n_points == N_POINTS
    no_t = BASE + "time = [0, 4]\ntime_step = 1.0\n"
    with pytest.raises(ConfigError, match="has no 't' column"):
        load_config(_write(tmp_path, no_t, "no_t.toml"))


def test_seed_is_required_for_sampling(tmp_path, data_dir):
    cfg = load_config(_write(tmp_path, BASE))  # loading and model building need no seed
    with pytest.raises(ConfigError, match=r"sampling\.seed is not set.*reproduced"):
        cfg.sample_kwargs()
    cfg = load_config(_write(tmp_path, BASE), ["sampling.seed=11", "sampling.chains=3",
                                               "store.max_disk_gb=2"])
    kw = cfg.sample_kwargs()
    assert kw == {"draws": 1000, "tune": 1000, "chains": 3, "random_seed": 11, "thin": 1,
                  "thin_fields": 1, "checkpoint_every": None, "representation": "hmc",
                  "n_latent": 10, "thresholds": [1.5, 2.0, 3.0],
                  "discard_tuned_samples": True, "chains_per_task": 1,
                  "store": str(tmp_path / "cfg" / "run.zarr"),
                  "max_disk_gb": 2.0, "max_memory_gb": None, "config": cfg.resolved}


def test_build_model_with_default_priors(tmp_path, data_dir):
    model = load_config(_write(tmp_path, BASE)).build_model()
    assert model.lattice.shape == (10, 10) and model.lattice.spacing == (10.0, 10.0)
    assert model.lattice.units == "m"
    assert model.n_points == N_POINTS
    assert list(model.design.names) == ["z"]
    # LGCP's window-scaled defaults, L = 100: P(range < 10) = 0.05 truncated at 50
    rp = model.prior_spec["range"]
    assert isinstance(rp, PCPriorRange)
    assert (rp.rho0, rp.alpha, rp.ndim, rp.upper) == (10.0, 0.05, 2, 50.0)
    assert model.prior_spec["mean"].mean == pytest.approx(math.log(N_POINTS / 1e4))


def test_build_model_with_given_priors_and_settings(tmp_path, data_dir):
    body = BASE.replace("cell_size = 10.0", "shape = [5, 4]") + """
[model]
nu = 0.5
coefficients = "hyper"
beta_sd = 2.0
[model.priors]
range = { rho0 = 5.0, alpha = 0.1, upper = 40.0 }
sd = { sd0 = 1.0, alpha = 0.01 }
intercept = { mean = -3.0, sd = 2.0 }
"""
    model = load_config(_write(tmp_path, body)).build_model()
    assert model.lattice.shape == (5, 4) and model.lattice.spacing == (20.0, 25.0)
    assert model.nu == 0.5 and model.coefficients == "hyper" and model.beta_sd == 2.0
    rp, sp, ip = (model.prior_spec[k] for k in ("range", "sd", "mean"))
    assert isinstance(rp, PCPriorRange)
    assert (rp.rho0, rp.alpha, rp.ndim, rp.upper) == (5.0, 0.1, 2, 40.0)
    assert isinstance(sp, PCPriorSD) and (sp.sigma0, sp.alpha) == (1.0, 0.01)
    assert isinstance(ip, Normal) and (ip.mean, ip.sd) == (-3.0, 2.0)


def test_window_from_a_vector_file(tmp_path, data_dir):
    gpd = pytest.importorskip("geopandas")
    from shapely.geometry import Polygon

    square = [(0, 0), (100, 0), (100, 100), (0, 100)]
    hole = [(40, 40), (60, 40), (60, 60), (40, 60)]
    gpd.GeoDataFrame(geometry=[Polygon(square, holes=[hole])],
                     crs="EPSG:32617").to_file(data_dir / "win.gpkg")
    body = BASE.replace("[0, 100, 0, 100]", '"../data/win.gpkg"') + 'outside = "drop"\n'
    with pytest.warns(UserWarning, match="dropped"):
        model = load_config(_write(tmp_path, body)).build_model()
    xy = _points()
    in_hole = int(np.all((xy > 40) & (xy < 60), axis=1).sum())
    assert model.window.kind == "polygon"
    assert model.window.area == pytest.approx(100 * 100 - 20 * 20)
    assert model.n_points == N_POINTS - in_hole
    assert model.lattice.crs == "EPSG:32617"


def test_smoothness_is_resolved_per_backend_and_old_stored_configs_still_load(tmp_path,
                                                                                data_dir):
    p = _write(tmp_path, BASE)
    circ = load_config(p).resolved
    gmrf = load_config(p, ["model.backend=gmrf"]).resolved
    assert (circ["model"]["nu"], circ["model"]["alpha"]) == (1.5, None)
    assert (gmrf["model"]["nu"], gmrf["model"]["alpha"]) == (None, 2)
    # configs stored before stop 24 always recorded both keys; the backend used only its own
    for r in (circ, gmrf):
        old = json.loads(json.dumps(r))
        old["model"].update(nu=1.5, alpha=2)
        assert RunConfig.from_resolved(old).resolved == r


def test_from_resolved_refuses_an_empty_config():
    with pytest.raises(ConfigError, match="without config="):
        RunConfig.from_resolved({})


def test_describe_schema_documents_every_key():
    text = config.describe_schema()
    for sec in config.SCHEMA:
        assert f"[{sec.name}]" in text
        for key in sec.keys:
            assert re.search(rf"^  {key.name} +\S", text, re.M), key.name


def _bei_template(tmp_path: Path) -> Path:
    p = tmp_path / "bei.toml"
    rel = Path(__import__("os").path.relpath(REPO_DATA, tmp_path)).as_posix()
    p.write_text(template(rel), encoding="utf-8")
    return p


def test_template_round_trips_and_shows_every_key(tmp_path):
    if not (REPO_DATA / "bei.csv").is_file():
        pytest.skip("the bei demo data are not in this checkout")
    p = _bei_template(tmp_path)
    text = p.read_text()
    for sec in config.SCHEMA:
        if sec.optional:  # an inline table under [model.priors]
            leaf = sec.name.rsplit(".", 1)[-1]
            assert re.search(rf"^# {leaf} = \{{", text, re.M), sec.name
            continue
        assert f"[{sec.name}]" in text
        for key in sec.keys:
            assert re.search(rf"^(# )?{key.name} = ", text, re.M), f"{sec.name}.{key.name}"
    r = load_config(p).resolved
    assert r["data"]["points"] == str(REPO_DATA / "bei.csv")
    assert r["data"]["covariates"] == {"elev": str(REPO_DATA / "bei_covariates.csv"),
                                       "grad": str(REPO_DATA / "bei_covariates.csv")}
    assert r["data"]["cell_size"] == 10.0 and r["data"]["formula"] == "~ elev + grad"
    assert r["sampling"]["seed"] == 1
    assert r["store"]["path"] == str(tmp_path / "bei.zarr")

    # Uncommenting every commented key (but the alternatives shape and the gmrf backend's
    # alpha, and the space-time keys) still parses, and the keys that have a default show
    # exactly that default.
    skip = {"shape", "alpha", "time", "time_step", "time_units"}
    lines = [ln[2:] if (m := re.match(r"^# (\w+) = ", ln)) and m.group(1) not in skip else ln
             for ln in text.splitlines()]
    q = tmp_path / "all.toml"
    q.write_text("\n".join(lines), encoding="utf-8")
    full = load_config(q).resolved
    for sec in config.SCHEMA:
        if sec.optional:
            continue
        for key in sec.keys:
            if key.default not in (None, {}) and key.default is not config.REQUIRED:
                got = full
                for part in f"{sec.name}.{key.name}".split("."):
                    got = got[part]
                if (sec.name, key.name) == ("sampling", "representation"):
                    # "auto" resolves to the backend's default (issue 25)
                    assert key.default == "auto" and got == "hmc", got
                    continue
                assert got == key.default, (sec.name, key.name)
    assert full["model"]["priors"]["range"] == {"rho0": 50.0, "alpha": 0.05, "upper": 250.0}
    assert full["model"]["priors"]["sd"] == {"sd0": 2.0, "alpha": 0.05}
    assert full["sampling"]["checkpoint_every"] == 100
    assert full["store"]["path"] == str(tmp_path / "run.zarr")


def test_sampling_defaults_agree_with_runs_sample():
    import inspect

    from lattice_lgm import runs

    params = inspect.signature(runs.sample).parameters
    names = {"draws": "draws", "tune": "tune", "chains": "chains", "thin": "thin",
             "thin_fields": "thin_fields", "checkpoint_every": "checkpoint_every",
             "representation": "representation", "n_latent": "n_latent",
             "discard_tuned_samples": "discard_tuned_samples",
             "chains_per_task": "chains_per_task"}
    sampling = next(s for s in config.SCHEMA if s.name == "sampling")
    for key, arg in names.items():
        assert sampling.key(key).default == params[arg].default, key


@pytest.mark.parametrize("name", sorted(p.name for p in (
    Path(__file__).resolve().parents[1] / "examples").glob("*.toml")))
def test_every_example_config_loads_and_builds_its_model(name):
    """The shipped examples validate, find their data, and resolve the backend's default
    sampler (joint HMC on the circulant and GMRF examples)."""
    cfg = load_config(Path(__file__).resolve().parents[1] / "examples" / name)
    res = cfg.resolved
    assert res["sampling"]["representation"] == "hmc"
    model = cfg.build_model()
    assert model.backend == res["model"]["backend"]
    assert model.n_points == 3604  # every example is bei (data/README.md)
