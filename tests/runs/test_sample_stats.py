"""A sweep's own sample stats (ArviZ's names) in memory and in the store (decision 99)."""

from __future__ import annotations

import numpy as np
import pytest

from lattice_lgm.errors import InvalidParameterError
from lattice_lgm.runs import sample
from lattice_lgm.runs.plan import STATS
from lattice_lgm.samplers import default_sweep
from lattice_lgm.store import open_store
from tests.models.toy_gp import ToyGP, toy_data


class _Labelled:
    """The toy's sweep, reporting two stats of its own from each step's ``info``."""

    sample_stats = (("acceptance_rate", "acc", "f8"), ("diverging", "div", "bool"))

    def __init__(self, model):
        self.inner = model.default_sweep("prior-white", 2)

    def settings(self):
        return {"labelled": self.inner.settings()}

    def step(self, state, rngs):
        new, info = self.inner.step(state, rngs)
        # values per chain and draw that the test can predict from the stored log-likelihood
        return new, {**info, "acc": np.tanh(np.abs(new.loglik)), "div": np.isfinite(new.loglik)}


RUN = dict(draws=6, tune=2, chains=2, random_seed=3, progressbar=False)


def test_a_sweeps_own_stats_are_stored_with_their_names_and_dtypes(tmp_path):
    model = ToyGP(toy_data())
    mem = sample(model, step=_Labelled(model), **RUN)
    sample(model, step=_Labelled(model), store=tmp_path / "s.zarr", **RUN)
    disk = open_store(tmp_path / "s.zarr")
    for tree in (mem, disk):
        st = tree["sample_stats"]
        assert {n for n, _ in STATS} | {"acceptance_rate", "diverging"} == set(st.data_vars)
        assert st["diverging"].dtype == bool and st["acceptance_rate"].dtype == np.float64
        np.testing.assert_allclose(st["acceptance_rate"].values,
                                   np.tanh(np.abs(st["loglik"].values)))
        assert st["diverging"].values.all()
    for v in ("acceptance_rate", "diverging"):
        np.testing.assert_array_equal(mem["sample_stats"][v].values,
                                      disk["sample_stats"][v].values)


def test_the_default_sweeps_say_what_they_add():
    """Gibbs adds none; joint HMC ArviZ's acceptance_rate, step_size, n_steps, diverging."""
    from tests.runs.test_runs import build_model

    m = build_model(n=60)
    assert getattr(default_sweep(m.lgm, "prior-white"), "sample_stats", ()) == ()
    names = [n for n, _, _ in default_sweep(m.lgm, "hmc", tune=20).sample_stats]
    assert names == ["acceptance_rate", "step_size", "n_steps", "diverging"]


@pytest.mark.parametrize("bad", [("loglik", "acc", "f8"), ("x", "acc", "U3"), ("x", "acc"),
                                 ("x", "acc", "no such dtype")])
def test_bad_declarations_are_refused_by_name(bad):
    model = ToyGP(toy_data())
    sweep = _Labelled(model)
    sweep.sample_stats = (bad,)
    with pytest.raises(InvalidParameterError, match=r"_Labelled\.sample_stats"):
        sample(model, step=sweep, **RUN)


def test_a_store_without_the_sweeps_stats_is_written_without_them(monkeypatch):
    """A store written before a sweep reported its own stats (a resume) lacks their arrays:
    the loop writes what the store holds (here: the layout made without them)."""
    from lattice_lgm.runs import plan as plan_mod

    specs = plan_mod._Plan.specs

    def older(self, record):
        s, c = specs(self, record)
        return [v for v in s if v.name != "acceptance_rate"], c

    monkeypatch.setattr(plan_mod._Plan, "specs", older)
    model = ToyGP(toy_data())
    tree = sample(model, step=_Labelled(model), **RUN)
    assert "acceptance_rate" not in tree["sample_stats"].data_vars
    assert tree["sample_stats"]["diverging"].values.all()


def test_a_stat_from_a_key_the_step_does_not_return_is_named():
    model = ToyGP(toy_data())
    sweep = _Labelled(model)
    sweep.sample_stats = (("energy", "energy", "f8"),)
    with pytest.raises(InvalidParameterError, match=r"info\['energy'\].*did not return"):
        sample(model, step=sweep, **RUN)
