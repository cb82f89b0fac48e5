"""A new model family plugs into runs through the RunView protocol alone (issue 28).

``tests/models/toy_gp.py`` is one module outside the package; these tests run it through
``sample()`` into a store, ``open_store``, an interrupted run's ``resume`` (byte for byte) and
``analysis.summary`` — with no edit to the package for it.
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
