"""Bad inputs a user gives, tried against the public API and the command line (issue 27).

Each case is a call that must be refused before any heavy work with a lattice_lgm error
(``LatticeLGMError``: the argument, the value and the remedy in its message) — never a raw
exception from numpy, xarray or zarr, and never silently accepted.  The outcome of every case
is classified and the counts written to ``benchmarks/results/bad_inputs.json``:

* ``refused``: a ``LatticeLGMError`` whose message names the argument;
* ``unnamed``: a ``LatticeLGMError`` that does not name it;
* ``raw``: any other exception (a traceback for a CLI user);
* ``accepted``: no exception at all.

Usage::

    python benchmarks/robustness/bad_inputs.py           # every case, writes the JSON
    python benchmarks/robustness/bad_inputs.py --quick   # no JSON (a test runs it)
"""

from __future__ import annotations

import argparse
import io
import json
import math
import sys
import tempfile
import warnings
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(ROOT))


def _points(n: int = 60, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0, 100, size=(n, 2))


def _covariate(**kw):
    import xarray as xr

    c = (np.arange(20) + 0.5) * 5.0
    z = np.add.outer(c, c)
    return xr.DataArray(z, dims=("y", "x"), coords={"y": c, "x": c}, **kw)


def cases(tmp: Path) -> list[tuple[str, str, Callable[[], object]]]:
    """(name, the argument the message must name, the call)."""
    from lattice_lgm import LGCP
    from lattice_lgm.hyperpriors import PCPriorRange
    from lattice_lgm.runs import sample

    W = (0, 100, 0, 100)

    def lgcp(**kw):
        args = dict(points=_points(), window=W, cell_size=10.0, units="m", cross_check=False)
        args.update(kw)
        return LGCP(args.pop("points"), args.pop("window"), **args)

    model = lgcp()

    def run(**kw):
        args = dict(draws=4, tune=0, chains=2, random_seed=1, progressbar=False,
                    representation="prior-white", n_latent=1)
        args.update(kw)
        return sample(model, **args)

    nan_pts = _points()
    nan_pts[3, 0] = np.nan
    bad_cov = _covariate()
    bad_cov[2:5, 2:5] = np.nan
    out: list[tuple[str, str, Callable[[], object]]] = [
        ("points with a NaN coordinate", "points", lambda: lgcp(points=nan_pts)),
        ("points of shape (n, 3)", "points", lambda: lgcp(points=np.ones((10, 3)))),
        ("points 1-D", "points", lambda: lgcp(points=np.ones(10))),
        ("no points", "points", lambda: lgcp(points=np.zeros((0, 2)))),
        ("points as strings", "points", lambda: lgcp(points=[["a", "b"]])),
        ("window reversed", "window", lambda: lgcp(window=(100, 0, 0, 100))),
        ("window of zero width", "window", lambda: lgcp(window=(0, 0, 0, 100))),
        ("window with NaN", "window", lambda: lgcp(window=(0, math.nan, 0, 100))),
        ("window of three numbers", "window", lambda: lgcp(window=(0, 100, 0))),
        ("cell_size 0", "cell_size", lambda: lgcp(cell_size=0.0)),
        ("cell_size negative", "cell_size", lambda: lgcp(cell_size=-5.0)),
        ("cell_size NaN", "cell_size", lambda: lgcp(cell_size=math.nan)),
        ("cell_size inf", "cell_size", lambda: lgcp(cell_size=math.inf)),
        ("cell_size a string", "cell_size", lambda: lgcp(cell_size="10")),
        ("cell_size larger than the window", "cell_size", lambda: lgcp(cell_size=500.0)),
        ("backend unknown", "backend", lambda: lgcp(backend="fft")),
        ("nu negative", "nu", lambda: lgcp(nu=-1.0)),
        ("nu with the gmrf backend", "nu", lambda: lgcp(backend="gmrf", nu=1.5)),
        ("alpha unsupported", "alpha", lambda: lgcp(backend="gmrf", alpha=7)),
        ("range_prior a number", "range_prior", lambda: lgcp(range_prior=30.0)),
        ("sd_prior a string", "sd_prior", lambda: lgcp(sd_prior="pc")),
        ("range bound below the cell", "range", lambda: lgcp(
            range_prior=PCPriorRange(1.0, 0.05, ndim=2, upper=4.0))),
        ("formula naming a missing covariate", "formula",
         lambda: lgcp(covariates={"z": _covariate()}, formula="~ elev")),
        ("formula with a syntax error", "formula",
         lambda: lgcp(covariates={"z": _covariate()}, formula="~ z +")),
        ("covariate NaN inside the window", "z",
         lambda: lgcp(covariates={"z": bad_cov}, formula="~ z")),
        ("covariate not covering the window", "z",
         lambda: lgcp(covariates={"z": _covariate().isel(x=slice(0, 10))}, formula="~ z")),
        ("covariates a list", "covariates", lambda: lgcp(covariates=[_covariate()])),
        ("offset of the wrong shape", "offset", lambda: lgcp(offset=np.zeros((3, 3)))),
        ("offset with NaN inside", "offset", lambda: lgcp(offset=np.full((10, 10), np.nan))),
        ("regrid method unknown", "regrid", lambda: lgcp(covariates={"z": _covariate()},
                                                         formula="~ z", regrid={"z": "cubic"})),
        ("intercept placement unknown", "intercept", lambda: lgcp(intercept="free")),
        ("beta_sd 0", "beta_sd", lambda: lgcp(beta_sd=0.0)),
        ("draws 0", "draws", lambda: run(draws=0)),
        ("draws a float", "draws", lambda: run(draws=2.5)),
        ("draws True", "draws", lambda: run(draws=True)),
        ("draws a string", "draws", lambda: run(draws="4")),
        ("tune negative", "tune", lambda: run(tune=-1)),
        ("chains 0", "chains", lambda: run(chains=0)),
        ("random_seed negative", "random_seed", lambda: run(random_seed=-1)),
        ("random_seed a float", "random_seed", lambda: run(random_seed=1.5)),
        ("thin 0", "thin", lambda: run(thin=0)),
        ("thin_fields negative", "thin_fields", lambda: run(thin_fields=-1)),
        ("checkpoint_every 0", "checkpoint_every",
         lambda: run(store=tmp / "c0.zarr", checkpoint_every=0)),
        ("threads 0", "threads", lambda: run(threads=0)),
        ("threads negative", "threads", lambda: run(threads=-2)),
        ("representation unknown", "representation", lambda: run(representation="gibbs")),
        ("n_latent 0", "n_latent", lambda: run(n_latent=0)),
        ("thresholds empty", "thresholds", lambda: run(thresholds=[])),
        ("thresholds with NaN", "thresholds", lambda: run(thresholds=[1.5, math.nan])),
        ("thresholds negative", "thresholds", lambda: run(thresholds=[-1.0])),
        ("max_disk_gb negative", "max_disk_gb",
         lambda: run(store=tmp / "d.zarr", max_disk_gb=-1.0)),
        ("max_memory_gb 0", "max_memory_gb", lambda: run(max_memory_gb=0.0)),
        ("chain_ids out of range", "chain_ids", lambda: run(chain_ids=[7])),
        ("chain_ids repeated", "chain_ids", lambda: run(chain_ids=[0, 0])),
        ("store is a file", "store", lambda: run(store=_a_file(tmp))),
        ("initvals a dict", "initvals", lambda: run(initvals={"sd": 1.0})),
        ("initvals unknown name", "initvals", lambda: run(initvals=[{"rnage": 5.0}] * 2)),
        ("resume of a store that does not exist", "store",
         lambda: run(store=tmp / "none.zarr", resume=True)),
        ("extend of a run not in a store", "extend", lambda: run(extend=3)),
        ("extend negative", "extend", lambda: run(store=tmp / "e.zarr", extend=-3)),
        ("points path missing", "nothere.csv", lambda: lgcp(points=tmp / "nothere.csv")),
        ("points CSV without x", "x", lambda: lgcp(points=_csv(tmp, "a,b\n1,2\n3,4\n"))),
        ("points CSV with text in x", "x",
         lambda: lgcp(points=_csv(tmp, "x,y\n1,2\nthree,4\n"))),
        ("window path missing", "nowindow.geojson",
         lambda: lgcp(window=tmp / "nowindow.geojson")),
        ("cell_size and shape both", "shape", lambda: lgcp(shape=(10, 10))),
        ("a geographic crs", "crs", lambda: lgcp(crs="EPSG:4326", units=None)),
        ("chains a float", "chains", lambda: run(chains=1.5)),
        ("thresholds a string", "thresholds", lambda: run(thresholds="2")),
        ("store an empty path", "store", lambda: run(store="")),
        ("thin a float", "thin", lambda: run(thin=0.5)),
        ("initvals of the wrong length", "initvals", lambda: run(initvals=[{"sd": 1.0}])),
        ("max_disk_gb NaN", "max_disk_gb", lambda: run(store=tmp / "n.zarr",
                                                       max_disk_gb=math.nan)),
        ("discard_tuned_samples a string", "discard_tuned_samples",
         lambda: run(discard_tuned_samples="no")),
        ("progressbar a string", "progressbar", lambda: run(progressbar="yes")),
    ]
    return out


def _csv(tmp: Path, text: str) -> Path:
    p = tmp / f"pts{abs(hash(text))}.csv"
    p.write_text(text)
    return p


def _a_file(tmp: Path) -> Path:
    p = tmp / "a_file.zarr"
    p.write_text("not a store")
    return p


def cli_cases(tmp: Path) -> list[tuple[str, str, list[str]]]:
    """(name, what the message must name, argv) for the command line."""
    good = (ROOT / "examples" / "bei_demo.toml").read_text()
    bad_toml = tmp / "bad.toml"
    bad_toml.write_text("[data\npoints = 1\n")
    wrong_type = tmp / "wrong_type.toml"
    wrong_type.write_text(good.replace("draws = ", "draws = \"many\" #"))
    missing = tmp / "missing.toml"
    missing.write_text(good.replace("data/bei.csv", "data/nothere.csv"))
    a_dir = tmp / "plain_dir"
    a_dir.mkdir(exist_ok=True)
    return [
        ("config with a TOML syntax error", "bad.toml", ["run", str(bad_toml)]),
        ("config value of the wrong type", "draws", ["run", str(wrong_type)]),
        ("config naming a missing data file", "nothere.csv", ["run", str(missing)]),
        ("config that does not exist", "nope.toml", ["run", str(tmp / "nope.toml")]),
        ("summary of a missing store", "missing.zarr", ["summary", str(tmp / "missing.zarr")]),
        ("summary of a plain directory", "plain_dir", ["summary", str(a_dir)]),
        ("resume of a plain directory", "plain_dir", ["resume", str(a_dir)]),
        ("verify of a missing store", "missing.zarr", ["verify", str(tmp / "missing.zarr")]),
        ("extend by zero", "draws", ["extend", str(a_dir), "--draws", "0"]),
        ("run --chains reversed", "--chains",
         ["run", str(ROOT / "examples" / "bei_demo.toml"), "--chains", "3-1"]),
        ("run --threads 0", "threads",
         ["run", str(ROOT / "examples" / "bei_demo.toml"), "--threads", "0"]),
        ("run --set of an unknown key", "sampling.drawz",
         ["run", str(ROOT / "examples" / "bei_demo.toml"), "--set", "sampling.drawz=3"]),
        ("run --set chains negative", "chains",
         ["run", str(ROOT / "examples" / "bei_demo.toml"), "--set", "sampling.chains=-2"]),
        ("run --set thin_fields a string", "thin_fields",
         ["run", str(ROOT / "examples" / "bei_demo.toml"), "--set",
          "sampling.thin_fields=\"all\""]),
        ("run --set a cell size of 0", "cell_size",
         ["run", str(ROOT / "examples" / "bei_demo.toml"), "--set", "data.cell_size=0"]),
        ("run --set a store path that is a file", "store",
         ["run", str(ROOT / "examples" / "bei_demo.toml"), "--set",
          f"store.path=\"{ROOT / 'README.md'}\""]),
        ("init into an existing file", "README.md", ["init", str(ROOT / "README.md")]),
    ]


def classify(exc: BaseException | None, name: str) -> str:
    from lattice_lgm.errors import LatticeLGMError

    if exc is None:
        return "accepted"
    if isinstance(exc, LatticeLGMError):
        return "refused" if name.lower() in str(exc).lower() else "unnamed"
    return "raw"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="print, write no JSON")
    args = ap.parse_args(argv)
    from lattice_lgm import cli

    rows = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for name, arg, call in cases(tmp):
            exc: BaseException | None = None
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    call()
                except Exception as e:
                    exc = e
            outcome = classify(exc, arg)
            rows.append({"case": name, "names": arg, "outcome": outcome,
                         "error": None if exc is None else f"{type(exc).__name__}: {exc}"[:300]})
        for name, arg, argv_ in cli_cases(tmp):
            err = io.StringIO()
            exc = None
            with redirect_stdout(io.StringIO()), redirect_stderr(err):
                try:
                    rc = cli.main(argv_)
                except SystemExit as e:  # argparse
                    rc = e.code
                except Exception as e:
                    exc, rc = e, None
            text = err.getvalue()
            if exc is not None:
                outcome = "raw"
            elif rc == 0:
                outcome = "accepted"
            elif "Traceback" in text:
                outcome = "raw"
            else:
                outcome = "refused" if arg.lower() in text.lower() else "unnamed"
            rows.append({"case": "CLI: " + name, "names": arg, "outcome": outcome,
                         "error": (repr(exc) if exc else text.strip())[-300:]})
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
        if r["outcome"] != "refused":
            print(f"{r['outcome']:9s} {r['case']}: {r['error']}")
    print(f"{len(rows)} bad inputs: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if not args.quick:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "bad_inputs.json").write_text(
            json.dumps({"counts": counts, "cases": rows}, indent=1))
    return 0 if counts.get("refused", 0) == len(rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
