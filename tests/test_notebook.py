"""The post-hoc notebook runs top to bottom on a store written by the command line (slow tier).

Every code cell of ``notebooks/bei_posthoc.ipynb`` is executed in order in one namespace (as a
kernel would), against a small bei run written by ``lattice-lgm run`` into a temporary store.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "bei_posthoc.ipynb"

SMALL_RUN = """
[data]
points = "{root}/data/bei.csv"
window = [0.0, 1000.0, 0.0, 500.0]
cell_size = 25.0
units = "m"
covariates = {{ elev = "{root}/data/bei_covariates.csv", grad = "{root}/data/bei_covariates.csv" }}
formula = "~ elev + grad"

[sampling]
seed = 5
chains = 2
tune = 20
draws = 20
n_latent = 2
checkpoint_every = 10
"""


@pytest.mark.slow
def test_posthoc_notebook_runs_on_a_cli_store(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    from lattice_lgm.cli import main

    cfg = tmp_path / "small.toml"
    cfg.write_text(SMALL_RUN.format(root=ROOT))
    assert main(["run", str(cfg), "--no-progress"]) == 0
    store = tmp_path / "small.zarr"
    assert (store / "zarr.json").exists()
    monkeypatch.setenv("LATTICE_LGM_STORE", str(store))
    monkeypatch.setenv("LATTICE_LGM_NSIM", "19")
    monkeypatch.chdir(NOTEBOOK.parent)
    nb = json.loads(NOTEBOOK.read_text())
    ns: dict = {}
    n = 0
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            exec(compile("".join(cell["source"]), f"{NOTEBOOK.name}[{n}]", "exec"), ns)
            n += 1
    assert n >= 8
    # the analysis the notebook promises was really computed
    assert ns["table"].index.tolist()[:3] == ["sd", "range", "intercept"]
    assert ns["exc"].sizes["threshold"] == 2
    assert float(ns["online"].max()) > 0 and ns["check"]["envelope"].nsim == 19
