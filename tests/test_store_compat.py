"""A store written before the issue-28 restructuring still opens, resumes and summarises.

``tests/data/store_v2.zarr`` was written by lattice_lgm before the layers above the store were
restructured (``tests/data/make_store_v2.py``, store format 2): the run ``test_runs.RUN``,
stopped after its fourth checkpoint (6 posterior draws committed).  A resumed run's later
draws depend on the last bits of this machine's FFT and BLAS (DESIGN §5 promises
bit-identity on one CPU family only), so the resume is checked for what holds everywhere: it
finishes, keeps every committed draw byte for byte, verifies, and the summary reads the
result.  Where this environment's library versions
differ from the recorded ones, the resume must instead be refused, naming them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from lattice_lgm import analysis
from lattice_lgm.errors import InvalidParameterError
from lattice_lgm.runs import sample
from lattice_lgm.store import (
    FORMAT_VERSION,
    ResumeMismatchError,
    RunStore,
    library_versions,
    open_store,
    verify_store,
)
from tests.runs.test_runs import RUN, build_model

STORE = Path(__file__).resolve().parent / "data" / "store_v2.zarr"


@pytest.fixture()
def old(tmp_path):
    p = tmp_path / "old.zarr"
    shutil.copytree(STORE, p)
    return p


def test_the_committed_store_is_format_2_and_opens(old):
    assert RunStore(old).attrs["lattice_lgm_format"] == FORMAT_VERSION == 2
    assert verify_store(old).ok
    tree = open_store(old)
    done = RunStore(old).committed("posterior")
    assert tree["posterior"].sizes["draw"] == min(done.values()) > 0
    table = analysis.summary(build_model(), tree["posterior"].to_dataset())
    assert {"sd", "range", "intercept", "z"} <= set(table.index)
    # it predates the recorded analysis: the store-only summary says what to do instead
    with pytest.raises(InvalidParameterError, match="rebuilt from the stored config"):
        analysis.summary_of(tree)


def test_the_committed_store_resumes_keeping_its_draws(old):
    before = open_store(old)
    n = before["posterior"].sizes["draw"]
    kept = {v: before["posterior"][v].values.copy() for v in before["posterior"].data_vars}
    stored = dict(RunStore(old).attrs["versions"])
    now = library_versions()
    differ = {k for k in stored if k in now and stored[k] != now[k]}
    if differ:
        with pytest.raises(ResumeMismatchError, match="|".join(sorted(differ))):
            sample(build_model(), store=old, resume=True, **RUN)
        return
    sample(build_model(), store=old, resume=True, **RUN)
    after = open_store(old)
    assert after["posterior"].sizes["draw"] == RUN["draws"]
    for v, x in kept.items():
        np.testing.assert_array_equal(after["posterior"][v].values[:, :n], x, err_msg=v)
    assert verify_store(old).ok
    table = analysis.summary(build_model(), after["posterior"].to_dataset())
    assert np.isfinite(table["mean"]).all()
