"""sample(), the zarr store, checkpoints and exact resume (lattice_lgm.runs, lattice_lgm.store)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from lattice_lgm.errors import InvalidParameterError, LatticeLGMError
from lattice_lgm.models.lgcp_start import prepare
from lattice_lgm.runs import ResourceLimitError, sample
from lattice_lgm.store import (
    CHECKPOINT_DIR,
    LOCK_DIR,
    ResumeMismatchError,
    RunStore,
    StoreExistsError,
    open_store,
)

ROOT = Path(__file__).resolve().parents[2]

# the model of every test here (also built by the subprocess of the kill test)
MODEL_SRC = """
import numpy as np
import xarray as xr
from lattice_lgm import LGCP

def build_model(n=250, seed=0, backend="circulant"):
    rng = np.random.default_rng(seed)
    xy = rng.uniform(0, 100, size=(3 * n, 2))
    keep = rng.random(3 * n) < (xy[:, 0] + xy[:, 1]) / 200.0
    c = (np.arange(40) + 0.5) * 2.5
    z = xr.DataArray(np.add.outer(c, 2 * c), dims=("y", "x"), coords={"y": c, "x": c})
    return LGCP(xy[keep][:n], (0, 100, 0, 100), cell_size=6.25, units="m",
                covariates={"z": z}, formula="~ z", backend=backend)
"""
_ns: dict = {}
exec(MODEL_SRC, _ns)
build_model = _ns["build_model"]

# the storage tests run the Murray–Adams Gibbs sweep (cheap, no adaptation); HMC's adaptation
# state in checkpoints has its own tests below
PW = {"representation": "prior-white"}
RUN = dict(draws=9, tune=4, chains=2, random_seed=11, checkpoint_every=3, n_latent=2,
           representation="prior-white",
           progressbar=False)


@pytest.fixture(scope="module")
def model():
    return build_model()


@pytest.fixture(scope="module")
def reference(model, tmp_path_factory):
    path = tmp_path_factory.mktemp("ref") / "run.zarr"
    sample(model, store=path, **RUN)
    return path


def _store_bytes(path: Path) -> dict[str, bytes]:
    """Every file of the zarr hierarchy (checkpoints and the empty lock files excluded).

    The root attrs' ``thread_budget`` is the one record of *how* the creating process ran
    (its cores and environment, lattice_lgm.threads), not of what it drew: it is taken out
    of the root ``zarr.json`` before comparing; every other byte must agree.
    """
    out = {}
    for f in sorted(path.rglob("*")):
        rel = f.relative_to(path)
        if f.is_file() and rel.parts[0] not in (CHECKPOINT_DIR, LOCK_DIR):
            data = f.read_bytes()
            if str(rel) == "zarr.json":
                meta = json.loads(data)
                assert "thread_budget" in meta["attributes"], "the run's budget is not recorded"
                meta["attributes"].pop("thread_budget")
                data = json.dumps(meta, sort_keys=True).encode()
            out[str(rel)] = data
    return out


def _assert_same_store(a: Path, b: Path) -> None:
    ba, bb = _store_bytes(a), _store_bytes(b)
    assert sorted(ba) == sorted(bb), set(ba) ^ set(bb)
    diff = [k for k in ba if ba[k] != bb[k]]
    assert not diff, f"files differ: {diff[:10]}"


# -- layout and round trips -----------------------------------------------------------------------
def test_memory_and_store_runs_agree_and_have_the_arviz_layout(model, reference):
    mem = sample(model, **RUN)
    disk = xr.open_datatree(reference, engine="zarr")  # no converter
    for g in ("posterior", "sample_stats", "summaries", "observed_data", "constant_data"):
        a, b = mem[g].to_dataset(), disk[g].to_dataset()
        assert set(a.data_vars) == set(b.data_vars), g
        for v in a.data_vars:
            assert a[v].dims == b[v].dims, (g, v)
            assert a[v].dtype == b[v].dtype, (g, v)
            np.testing.assert_array_equal(a[v].values, b[v].values, err_msg=f"{g}/{v}")
    post = disk["posterior"]
    assert post["f"].dims == ("chain", "draw", "y", "x") and post["f"].dtype == np.float32
    assert post["f"].shape == (2, 9, 16, 16)
    assert set(post.data_vars) == {"sd", "range", "intercept", "beta", "f"}
    assert list(post["beta"]["covariate"].values) == ["z"]
    attrs = disk.attrs
    assert attrs["run_config"]["seed"] == 11 and attrs["run_config"]["draws"] == 9
    assert "P(range <" in attrs["priors"]["range"] and "numpy" in attrs["versions"]
    assert attrs["embedding_shape"] == list(model.prior.embedding_shape)
    np.testing.assert_array_equal(disk["observed_data"]["counts"].values, model.counts)
    # ArviZ reads the tree as is
    import arviz as az

    summ = az.summary(disk["posterior"].to_dataset()[["sd", "range", "intercept"]])
    assert list(summ.index) == ["sd", "range", "intercept"]


def test_online_summaries_match_the_stored_draws(model, reference):
    """Welford means/variances of intensity and RR, and exceedance counts, over all draws."""
    from lattice_lgm import analysis

    tree = open_store(reference)
    post = tree["posterior"].to_dataset()
    s = tree["summaries"].to_dataset()
    # the summaries see float64 fields, the store float32: relative error ~1e-7
    lam = analysis.intensity(model, post.assign(f=post["f"].astype(float)))
    np.testing.assert_allclose(s["intensity_mean"].values, lam.mean("draw").values, rtol=1e-5)
    np.testing.assert_allclose(s["intensity_var"].values, lam.var("draw", ddof=1).values,
                               rtol=1e-3)
    rr = analysis.relative_risk(post.assign(f=post["f"].astype(float)))
    np.testing.assert_allclose(s["rr_mean"].values, rr.mean("draw").values, rtol=1e-5)
    th = s["threshold"].values
    want = (rr.values[:, :, None] > th[None, None, :, None, None]).sum(1)
    np.testing.assert_array_equal(s["exceedance_count"].values, want)
    np.testing.assert_array_equal(s["n_draws"].values, [9, 9])


def test_thinning_of_draws_and_fields(model, tmp_path):
    t = sample(model, **PW, draws=6, tune=0, chains=1, random_seed=2, thin=2, thin_fields=3,
               checkpoint_every=6, n_latent=1, progressbar=False, store=tmp_path / "a.zarr")
    assert "f" not in t["posterior"] and t["posterior"]["sd"].shape == (1, 6)
    assert list(t["posterior_fields"]["draw"].values) == [0, 3]
    full = sample(model, **PW, draws=12, tune=0, chains=1, random_seed=2, thin=1, thin_fields=1,
                  checkpoint_every=6, n_latent=1, progressbar=False)
    # thin=2 keeps every second sweep of the same chain
    np.testing.assert_array_equal(t["posterior"]["sd"].values[0],
                                  full["posterior"]["sd"].values[0, 1::2])
    np.testing.assert_array_equal(t["posterior_fields"]["f"].values[0, 1],
                                  full["posterior"]["f"].values[0, 7])
    none = sample(model, **PW, draws=3, tune=0, chains=1, random_seed=2, thin_fields=0,
                  checkpoint_every=3, n_latent=1, progressbar=False)
    assert "f" not in none["posterior"] and "posterior_fields" not in none.children
    assert int(none["summaries"]["n_draws"].values[0]) == 3
    kept = sample(model, **PW, draws=3, tune=2, chains=1, random_seed=2, checkpoint_every=3,
                  n_latent=1, progressbar=False, discard_tuned_samples=False)
    assert kept["warmup_posterior"]["sd"].shape == (1, 2)


# -- refusals -------------------------------------------------------------------------------------
def test_refusals_happen_before_any_store_write(model, tmp_path, reference):
    p = tmp_path / "x.zarr"
    bad = [dict(draws=0), dict(tune=-1), dict(thin_fields=-2), dict(chain_ids=[5]),
           dict(chain_ids=[0, 0]), dict(random_seed=-3), dict(thin_fields=2, checkpoint_every=3),
           dict(thresholds=[0.0])]
    for kw in bad:
        with pytest.raises(InvalidParameterError):
            sample(model, **{**RUN, "store": p, **kw})
        assert not p.exists(), kw
    with pytest.raises(ResourceLimitError, match="max_disk_gb"):
        sample(model, **{**RUN, "store": p, "max_disk_gb": 1e-6})
    assert not p.exists()
    with pytest.raises(ResourceLimitError, match="max_memory_gb"):
        sample(model, **{**RUN, "max_memory_gb": 1e-6})
    with pytest.raises(StoreExistsError, match="resume"):
        sample(model, store=reference, **RUN)
    with pytest.raises(InvalidParameterError, match="store=path"):
        sample(model, resume=True, **RUN)


def test_resume_refuses_other_data_settings_or_versions(model, reference, tmp_path):
    other = build_model(seed=1)
    with pytest.raises(ResumeMismatchError, match="data"):
        sample(other, store=reference, resume=True, **RUN)
    with pytest.raises(ResumeMismatchError, match="run setting thin"):
        sample(model, store=reference, resume=True, **{**RUN, "thin": 2})
    copy = tmp_path / "copy.zarr"
    import shutil

    shutil.copytree(reference, copy)
    st = RunStore(copy)
    v = dict(st.root.attrs["versions"])
    v["numpy"] = "0.0"
    st.root.attrs["versions"] = v
    with pytest.raises(ResumeMismatchError, match="library numpy"):
        sample(model, store=copy, resume=True, **RUN)


def test_a_config_stored_before_decision_64_still_matches_on_resume():
    from lattice_lgm.store import check_compatible

    def attrs(**model):
        return {"data_sha256": "x", "run_config": {}, "versions": {},
                "config": {"model": {"backend": "circulant", "nu": 1.5, "alpha": None, **model}}}

    # old stores recorded alpha = 2 beside a circulant backend's nu; the run ignored it
    check_compatible(attrs(alpha=2), attrs())
    with pytest.raises(ResumeMismatchError, match="configuration differs"):
        check_compatible(attrs(alpha=2), attrs(nu=2.5))


def _crash_after_checkpoint(model, path, monkeypatch, n=3, run=None):
    """Run RUN into ``path`` and raise after its n-th checkpoint (the store is left as a dead
    process would leave it: that checkpoint and the draws it covers on disk)."""
    run = RUN if run is None else run
    from lattice_lgm.runs.loop import _Runner

    calls = {"n": 0}
    orig = _Runner._checkpoint

    def dying(self, *a, **k):
        orig(self, *a, **k)
        calls["n"] += 1
        if calls["n"] == n:
            raise RuntimeError("simulated crash")

    monkeypatch.setattr(_Runner, "_checkpoint", dying)
    with pytest.raises(RuntimeError, match="simulated crash"):
        sample(model, store=path, **run)
    monkeypatch.setattr(_Runner, "_checkpoint", orig)


# -- exact resume ---------------------------------------------------------------------------------
def test_resume_after_a_stop_is_byte_identical(model, reference, tmp_path, monkeypatch):
    """A run stopped after its third checkpoint (warm-up, then posterior draws 3 and 6… it
    dies after writing draw 3's) resumes to the same bytes as the uninterrupted run."""
    p = tmp_path / "r.zarr"
    _crash_after_checkpoint(model, p, monkeypatch)
    mid = open_store(p)
    assert mid["posterior"].sizes["draw"] == 3  # committed draws only
    assert not np.isnan(mid["posterior"]["sd"].values).any()
    sample(model, store=p, resume=True, **RUN)
    _assert_same_store(reference, p)


@pytest.mark.parametrize("backend", ["circulant", "gmrf"])
def test_hmc_resume_in_warm_up_and_after_is_byte_identical(backend, model, tmp_path,
                                                           monkeypatch):
    """Joint HMC (the circulant and GMRF default) carries its adaptation (step size, masses,
    the field's non-centring) in the chain state: a run stopped inside the warm-up, and one
    stopped after it, resume to the bytes of the uninterrupted run."""
    if backend != "circulant":
        model = build_model(backend=backend)
    run = dict(RUN, representation="auto", tune=20, draws=6, checkpoint_every=3,
               discard_tuned_samples=False)
    ref = tmp_path / "ref.zarr"
    t = sample(model, store=ref, **run)
    assert t.attrs["run_config"]["representation"] == "hmc"
    for n in (3, 8):  # warm-up draw 9 of 20; posterior draw 3 of 6
        p = tmp_path / f"h{n}.zarr"
        _crash_after_checkpoint(model, p, monkeypatch, n=n, run=run)
        sample(model, store=p, resume=True, **run)
        _assert_same_store(ref, p)


def test_a_tune_too_short_for_hmc_is_refused_before_any_work(model, tmp_path):
    p = tmp_path / "short.zarr"
    with pytest.raises(InvalidParameterError, match="too short for HMC"):
        sample(model, store=p, **dict(RUN, representation="auto", tune=5))
    assert not p.exists()


def test_corrupt_newest_checkpoint_falls_back_to_the_previous(model, reference, tmp_path,
                                                              monkeypatch):
    p = tmp_path / "c.zarr"
    _crash_after_checkpoint(model, p, monkeypatch)
    ckpts = sorted((p / CHECKPOINT_DIR).glob("ckpt-*.npz"))
    assert len(ckpts) == 2  # the newest and its predecessor
    data = bytearray(ckpts[-1].read_bytes())
    data[len(data) // 2] ^= 0xFF
    ckpts[-1].write_bytes(bytes(data))
    with pytest.warns(UserWarning, match="newest generation unreadable"):
        sample(model, store=p, resume=True, **RUN)
    _assert_same_store(reference, p)


def test_chain_blocks_written_by_separate_calls_merge_into_one_store(model, reference,
                                                                       tmp_path):
    p = tmp_path / "split.zarr"
    sample(model, store=p, chain_ids=[0], **RUN)
    part = open_store(p)
    assert part["posterior"].sizes["draw"] == 0  # chain 1 has nothing yet: none complete
    sample(model, store=p, chain_ids=[1], **RUN)
    with pytest.raises(StoreExistsError, match="already have draws"):
        sample(model, store=p, chain_ids=[1], **RUN)
    a, b = open_store(reference), open_store(p)
    for g in ("posterior", "sample_stats", "summaries"):
        for v in a[g].data_vars:
            np.testing.assert_array_equal(a[g][v].values, b[g][v].values, err_msg=f"{g}/{v}")


def test_a_block_killed_before_its_first_checkpoint_restarts_beside_finished_ones(
        model, reference, tmp_path, monkeypatch):
    """Block [0] finished, block [1] killed before its first checkpoint (a Dask run stopped
    early): resuming block [1] starts it afresh, and the store is the two-block run's."""
    from lattice_lgm.runs.loop import _Runner

    p = tmp_path / "blocks.zarr"
    sample(model, store=p, chain_ids=[0], **RUN)

    def dying(self, *a, **k):
        raise RuntimeError("simulated crash")

    monkeypatch.setattr(_Runner, "_checkpoint", dying)
    with pytest.raises(RuntimeError, match="simulated crash"):
        sample(model, store=p, chain_ids=[1], **RUN)
    monkeypatch.undo()
    sample(model, store=p, resume=True, chain_ids=[1], **RUN)
    a, b = open_store(reference), open_store(p)
    for g in ("posterior", "sample_stats", "summaries"):
        for v in a[g].data_vars:
            np.testing.assert_array_equal(a[g][v].values, b[g][v].values, err_msg=f"{g}/{v}")


KILL_SCRIPT = """
import sys
sys.path.insert(0, {root!r})
{model_src}
from lattice_lgm.runs import sample
run = json.loads(sys.argv[2])
sample(build_model(), store=sys.argv[1], resume=sys.argv[3] == "resume", **run)
"""


def _subprocess_run(model, tmp_path):
    """A longer run, its uninterrupted reference store, and a script running it in a child."""
    # long enough that a kill 0-1.5 s after a checkpoint lands mid-run: 40 draws took 0.6 s
    # once elliptical slice updates ran in compiled blocks (issue 26), 600 take ≈ 4 s
    kill_run = {**RUN, "draws": 600, "checkpoint_every": 10}
    ref = tmp_path / "ref.zarr"
    sample(model, store=ref, **kill_run)
    script = tmp_path / "run.py"
    script.write_text("import json\n" + textwrap.dedent(KILL_SCRIPT).format(
        root=str(ROOT), model_src=MODEL_SRC))
    return kill_run, ref, script


@pytest.mark.slow
def test_sigkill_at_random_moments_then_resume_is_byte_identical(model, tmp_path):
    """A subprocess killed with SIGKILL at random moments while it samples (after its first
    checkpoint exists), resumed each time with another thread count, ends with the same bytes
    as an uninterrupted run; every kill is checked to have interrupted a running sampler."""
    kill_run, ref, script = _subprocess_run(model, tmp_path)
    p = tmp_path / "k.zarr"
    rng = np.random.default_rng(2026)
    run = json.dumps(kill_run)
    mode, kills = "new", 0
    for attempt in range(4):
        env = dict(os.environ, NUMBA_NUM_THREADS=str(1 + attempt % 2))
        proc = subprocess.Popen([sys.executable, str(script), str(p), run, mode], env=env)
        t0, wall0 = time.monotonic(), time.time()
        while proc.poll() is None and time.monotonic() - t0 < 120:
            # wait for a checkpoint written by *this* process: it is sampling now
            gens = sorted((p / CHECKPOINT_DIR).glob("ckpt-*.npz")) if p.exists() else []
            if gens and gens[-1].stat().st_mtime > wall0:
                break
            time.sleep(0.05)
        time.sleep(float(rng.uniform(0.0, 1.5)))
        if proc.poll() is not None:
            assert proc.returncode == 0, proc.returncode
            break
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += 1
        mode = "resume"
    else:
        env = dict(os.environ, NUMBA_NUM_THREADS="2")
        subprocess.run([sys.executable, str(script), str(p), run, mode], env=env, check=True)
    assert kills >= 2, f"only {kills} kills happened mid-run; the test did not test resume"
    _assert_same_store(ref, p)


def test_dask_local_cluster_runs_chain_blocks_into_one_store(model, reference, tmp_path):
    """Two worker processes, one chain each, write the same draws as the in-process run."""
    pytest.importorskip("dask.distributed")
    p = tmp_path / "dask.zarr"
    env = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    sample(model, store=p, dask_workers=2, **RUN)
    # distributed's nanny sets these for its workers; the run puts this process's back
    assert {k: os.environ.get(k) for k in env} == env
    a, b = open_store(reference), open_store(p)
    for g in ("posterior", "sample_stats", "summaries"):
        for v in a[g].data_vars:
            np.testing.assert_array_equal(a[g][v].values, b[g][v].values, err_msg=f"{g}/{v}")
    assert RunStore(p).attrs["chain_blocks"] == [[0], [1]]
    # resuming a finished block run does nothing and changes nothing
    before = _store_bytes(p)
    from lattice_lgm.runs import resume

    resume(p, model, progressbar=False)
    assert _store_bytes(p) == before
    with pytest.raises(InvalidParameterError, match="not both"):
        sample(model, store=tmp_path / "x.zarr", dask_workers=2, dask_scheduler="tcp://x:1",
               **RUN)
    with pytest.raises(InvalidParameterError, match="store=path"):
        sample(model, dask_workers=2, **RUN)


def test_block_runs_resume_per_block(model, tmp_path):
    """A store written by chain blocks (job arrays) is resumed block by block."""
    p = tmp_path / "blocks.zarr"
    sample(model, store=p, chain_ids=[0], **RUN)
    with pytest.raises(InvalidParameterError, match="chain blocks"):
        sample(model, store=p, resume=True, **RUN)
    sample(model, store=p, resume=True, chain_ids=[0], **RUN)  # finished: nothing to do


def _plant(path: Path, chain: int, tag: str = "") -> list[Path]:
    """The temporaries a writer of ``chain`` killed mid-write leaves (zarr chunk, commit,
    checkpoint), beside real files so that their names have the store's own form."""
    chunk = next(f for f in sorted((path / "posterior" / "sd" / "c" / str(chain)).rglob("*"))
                 if f.is_file())
    out = [chunk.with_suffix(".0123456789abcdef.partial"),
           path / ".commits" / f".tmp-4242-chain-{chain}.json",
           path / CHECKPOINT_DIR / f".tmp{tag}-00000009.npz"]
    for f in out:
        f.write_bytes(b"half")
    return out


def test_resume_of_a_store_whose_creation_was_interrupted_says_so(model, tmp_path,
                                                                  monkeypatch):
    """A store whose creating process died before laying out every array (no ``.commits/``,
    made last) is refused by name, with the remedy, instead of sampling into missing arrays;
    starting the run again says the same (not "already exists; resume it")."""
    import lattice_lgm.store.writer as store_mod  # where RunStore.create finds it
    from lattice_lgm.runs import resume

    def killed(path):
        raise RuntimeError("killed while creating")

    p = tmp_path / "run.zarr"
    monkeypatch.setattr(store_mod, "_new_commit_dir", killed)
    with pytest.raises(RuntimeError, match="killed while creating"):
        sample(model, store=p, **RUN)
    monkeypatch.undo()
    assert (p / "zarr.json").exists() and not (p / ".commits").exists()
    for call in (lambda: resume(p, model, progressbar=False),
                 lambda: sample(model, store=p, resume=True, **RUN),
                 lambda: sample(model, store=p, **RUN)):  # StoreExistsError for this one
        with pytest.raises(LatticeLGMError, match=r"never fully created.*Delete"):
            call()


def test_resume_removes_what_a_killed_writer_left_half_written(model, reference, tmp_path):
    """zarr's ``*.partial`` chunk temporaries, a half-written commit marker and checkpoint of
    the run's chains are deleted on resume (the store then has the reference's bytes); those of
    another chain block writing into the same store are kept."""
    from lattice_lgm.runs import resume

    p = tmp_path / "run.zarr"
    sample(model, store=p, **RUN)
    planted = _plant(p, 0) + _plant(p, 1)
    other = p / CHECKPOINT_DIR / ".tmp-c4-7-00000001.npz"  # a block's, not this run's
    other.write_bytes(b"half")
    resume(p, model, progressbar=False)
    assert not [f for f in planted if f.exists()]
    assert other.exists()
    _assert_same_store(reference, p)

    b = tmp_path / "blocks.zarr"
    for c in (0, 1):
        sample(model, store=b, chain_ids=[c], **RUN)
    mine, theirs = _plant(b, 0, "-c0-0"), _plant(b, 1, "-c1-1")
    sample(model, store=b, resume=True, chain_ids=[0], **RUN)
    assert not [f for f in mine if f.exists()]
    assert all(f.exists() for f in theirs), "a resume removed another block's files"


# -- models other than the LGCP: GP regression and classification on the dense path --------------
def _gp_models():
    from lattice_lgm.covariance import Matern
    from lattice_lgm.hyperpriors import LogNormal
    from lattice_lgm.likelihoods import Bernoulli, Gaussian
    from lattice_lgm.models import LatentGaussianModel
    from lattice_lgm.priors import DensePrior

    rng = np.random.default_rng(4)
    x = rng.uniform(0, 1, size=(30, 2))
    prior = DensePrior(x, Matern(1.5, sd=1.0, range=0.5))
    f = np.sin(4 * x[:, 0]) + x[:, 1]
    hp = {"sd": LogNormal(0.0, 0.5), "range": LogNormal(np.log(0.5), 0.5)}
    reg = LatentGaussianModel(prior, Gaussian(f + 0.3 * rng.standard_normal(30), noise_sd=0.3),
                              hyperpriors=hp)
    cls = LatentGaussianModel(prior, Bernoulli((f > 0.8).astype(float)), hyperpriors=hp)
    return reg, cls


def test_gp_regression_and_classification_go_through_sample(tmp_path):
    from lattice_lgm.samplers import EllipticalSlice, Gibbs, HyperMove, chain_rngs, init_state

    reg, cls = _gp_models()
    run = dict(draws=4, tune=2, chains=2, random_seed=9, checkpoint_every=2, n_latent=2,
               representation="prior-white",
               progressbar=False)
    tree = sample(reg, store=tmp_path / "gp.zarr", **run)
    post = tree["posterior"]
    assert post["f"].dims == ("chain", "draw", "obs") and post["f"].shape == (2, 4, 30)
    assert set(post.data_vars) == {"sd", "range", "mean", "f"}
    assert tree.attrs["model"] == "LatentGaussianModel"
    np.testing.assert_array_equal(tree["observed_data"]["data"].values, reg.likelihood.y_obs)
    assert "f_mean" in tree["summaries"] and "exceedance_count" not in tree["summaries"]
    # the run is exactly the sampler: the same sweeps by hand give the same draws
    rngs = chain_rngs(9, 2)
    state = init_state(reg, rngs, chains=[0, 1])
    sweep = Gibbs(HyperMove(reg, "prior-white"), EllipticalSlice(reg), n_latent=2)
    for _ in range(2 + 4):
        state, _ = sweep.step(state, rngs)
    np.testing.assert_array_equal(post["sd"].values[:, -1], state.theta["sd"])
    np.testing.assert_array_equal(post["f"].values[:, -1], state.f.astype(np.float32))
    s = tree["summaries"]
    np.testing.assert_allclose(s["f_mean"].values, post["f"].values.astype(float).mean(1),
                               rtol=1e-5, atol=1e-6)
    # classification (Bernoulli, the dense path) runs through it too
    c = sample(cls, **run)
    assert c["posterior"]["f"].shape == (2, 4, 30)
    # a latent model on a lattice with dims (y, x) stores into a zarr store too
    from lattice_lgm import Lattice
    from lattice_lgm.covariance import Matern
    from lattice_lgm.likelihoods import Poisson
    from lattice_lgm.models import LatentGaussianModel
    from lattice_lgm.priors import CirculantPrior

    lat = Lattice((6, 5))
    grid = LatentGaussianModel(CirculantPrior(lat, Matern(1.5, range=2.0)),
                               Poisson(np.arange(30).reshape(6, 5) % 3))
    g = sample(grid, store=tmp_path / "grid.zarr", **run)
    assert g["posterior"]["f"].dims == ("chain", "draw", "y", "x")
    np.testing.assert_array_equal(g["observed_data"]["data"].values,
                                  np.arange(30).reshape(6, 5) % 3)


@pytest.mark.slow
def test_ctrl_c_stops_after_a_checkpoint_and_a_reader_sees_committed_draws(model, tmp_path):
    """While a subprocess samples, another process (this one) opening the store sees only
    committed draws (no NaN placeholders) and can summarise them; SIGINT then stops the run
    cleanly after a checkpoint, and resume ends with the uninterrupted run's bytes."""
    from lattice_lgm import analysis

    kill_run, ref, script = _subprocess_run(model, tmp_path)
    p = tmp_path / "i.zarr"
    proc = subprocess.Popen([sys.executable, str(script), str(p), json.dumps(kill_run), "new"])
    t0 = time.monotonic()
    seen = 0
    while proc.poll() is None and time.monotonic() - t0 < 180:
        if p.exists() and (p / "zarr.json").exists():
            try:
                tree = open_store(p)
            except Exception:  # the metadata is being created: try again
                time.sleep(0.05)
                continue
            n = tree["posterior"].sizes["draw"]
            if n > 0:
                post = tree["posterior"].to_dataset()
                assert not np.isnan(post["sd"].values).any()
                assert not np.isnan(post["f"].values).any()
                assert n % kill_run["checkpoint_every"] == 0
                table = analysis.summary(model, post)  # summary on a running store
                assert "sd" in table.index
                seen = n
                break
        time.sleep(0.05)
    assert seen > 0, "never saw committed draws while the run went"
    proc.send_signal(signal.SIGINT)
    rc = proc.wait(timeout=120)
    assert rc != 0, "the run finished before the interrupt; the test did not test Ctrl-C"
    sample(model, store=p, resume=True, **kill_run)
    _assert_same_store(ref, p)


def test_a_custom_sweep_is_recorded_and_a_resume_with_another_is_refused(tmp_path):
    """A run with ``step=`` records that sweep's settings (not the unused default's
    representation), and resuming it with another sweep, or with none, is refused."""
    from lattice_lgm.runs import resume
    from lattice_lgm.samplers import EllipticalSlice, Gibbs, HyperMove

    reg, _ = _gp_models()
    fixed = Gibbs(HyperMove(reg, "fixed", width=3.0), EllipticalSlice(reg), n_latent=2)
    run = dict(draws=2, tune=2, chains=2, random_seed=5, checkpoint_every=2, progressbar=False,
               representation="prior-white")
    path = tmp_path / "custom.zarr"
    tree = sample(reg, store=path, step=fixed, **run)
    rc = tree.attrs["run_config"]
    assert rc["representation"] is None and rc["n_latent"] is None
    assert rc["step"]["hyper"][0]["representation"] == "fixed"
    assert rc["step"]["hyper"][0]["width"] == 3.0 and rc["step"]["n_latent"] == 2
    other = Gibbs(HyperMove(reg, "prior-white", width=3.0), EllipticalSlice(reg), n_latent=2)
    with pytest.raises(ResumeMismatchError, match="run setting step"):
        sample(reg, store=path, step=other, resume=True, **run)
    wider = Gibbs(HyperMove(reg, "fixed", width=2.0), EllipticalSlice(reg), n_latent=2)
    with pytest.raises(ResumeMismatchError, match="run setting step"):
        sample(reg, store=path, step=wider, resume=True, **run)
    with pytest.raises(ResumeMismatchError, match="run setting step"):
        sample(reg, store=path, resume=True, **run)  # the default sweep
    with pytest.raises(InvalidParameterError, match="custom sweep"):
        resume(path, reg, progressbar=False)
    same = Gibbs(HyperMove(reg, "fixed", width=3.0), EllipticalSlice(reg), n_latent=2)
    back = resume(path, reg, step=same, progressbar=False)
    np.testing.assert_array_equal(back["posterior"]["sd"].values, tree["posterior"]["sd"].values)
    # a default-sweep run records no step, and refuses one on resume
    plain = tmp_path / "plain.zarr"
    t2 = sample(reg, store=plain, n_latent=2, **run)
    assert "step" not in t2.attrs["run_config"]
    assert t2.attrs["run_config"]["representation"] == "prior-white"
    with pytest.raises(InvalidParameterError, match="default sweep"):
        resume(plain, reg, step=same, progressbar=False)


def test_sweep_settings_of_objects_without_settings_name_the_class():
    from lattice_lgm.samplers import sweep_settings

    class MySweep:
        def step(self, state, rngs):
            return state, {}

    assert sweep_settings(MySweep()) == {
        "sweep": f"{__name__}.test_sweep_settings_of_objects_without_settings_name_the_class"
                 ".<locals>.MySweep"}

    class BadSweep(MySweep):
        def settings(self):
            return "fixed"

    with pytest.raises(InvalidParameterError, match="must return a dict"):
        sweep_settings(BadSweep())
    # every latent update's settings are JSON-ready and name what changes draws
    from lattice_lgm.samplers import Gibbs, LineSlice, NealMH

    reg, _ = _gp_models()
    for latent, key, val in ((NealMH(reg, 0.2), "step_size", 0.2),
                             (LineSlice(reg, width=1.5), "width", 1.5)):
        got = json.loads(json.dumps(Gibbs(None, latent, n_latent=3).settings()))
        assert got["latent"][key] == val and got["hyper"] == [] and got["n_latent"] == 3



def test_initvals_start_the_chains_where_asked(model):
    """initvals replace the overdispersed starts: with the hyperparameter move left out
    (a latent-only sweep), the hyperparameters stay exactly at the given values."""
    from lattice_lgm.samplers import EllipticalSlice, Gibbs

    starts = [{"sd": 0.5, "range": 30.0, "intercept": -3.6},
              {"sd": 0.9, "range": 45.0, "intercept": -3.4}]
    step = Gibbs(None, EllipticalSlice(model.lgm), n_latent=1)
    t = sample(model, **PW, draws=2, tune=0, chains=2, random_seed=1, checkpoint_every=2,
               progressbar=False, initvals=starts, step=step)
    post, d = t["posterior"], model.design
    # the intercept is named and scaled as the posterior reports it: on the covariate's
    # original scale at the starting (GLM) coefficient; the block's coefficient then moves,
    # the sampler's own intercept parameter stays
    b0 = prepare(model).start.theta["beta_z"] / d.scale[0]
    own = post["intercept"].values + post["beta"].values[..., 0] * d.center[0]
    for c, st in enumerate(starts):
        for k in ("sd", "range"):
            np.testing.assert_array_equal(post[k].values[c], [st[k], st[k]])
        np.testing.assert_allclose(own[c], st["intercept"] + b0 * d.center[0], rtol=1e-12)
    with pytest.raises(InvalidParameterError, match="initvals"):
        sample(model, **PW, draws=2, tune=0, chains=2, random_seed=1, progressbar=False,
               initvals=starts[:1])
    for bad, match in (({"mean": -3.6}, r"initvals\[0\] names \['mean'\].*'intercept'"),
                       ({"sd": -1.0}, r"initvals\[0\]\['sd'\]=-1.0 is outside"),
                       ({"range": float("nan")}, r"initvals\[0\]\['range'\]=nan"),
                       ({"intercept": float("inf")}, r"'intercept'\]=inf")):
        with pytest.raises(InvalidParameterError, match=match):
            sample(model, **PW, draws=2, tune=0, chains=2, random_seed=1, progressbar=False,
                   initvals=[bad, bad])


def test_library_versions_match_the_modules_without_importing_them():
    """The versions recorded for resume checks are the modules' own, read without importing
    ArviZ (an import of ~2 s, with Numba compilations, at every run's start)."""
    code = textwrap.dedent("""
        import sys
        from lattice_lgm.store import library_versions
        v = library_versions()
        assert "arviz" not in sys.modules, "library_versions imported arviz"
        import arviz, numba, numpy, pyfftw, scipy, xarray, zarr
        for m in (arviz, numba, numpy, pyfftw, scipy, xarray, zarr):
            assert v[m.__name__] == m.__version__, (m.__name__, v[m.__name__], m.__version__)
        import lattice_lgm
        assert v["lattice_lgm"] == lattice_lgm.__version__
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=os.environ.copy(), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_the_store_alone_gives_the_summary_the_model_gives(model, reference):
    """analysis.summary_of reads what the run recorded (decision 101): no model, no data."""
    from lattice_lgm import analysis

    tree = open_store(reference)
    rec = tree.attrs["analysis"]
    assert rec["rows"] == ["sd", "range", "intercept", "z"]
    assert rec["bounds"] == {"range": model.prior_spec["range"].upper}
    assert set(rec["cross_check"]) == {"sd", "range", "z", "log_mean_intensity"}
    alone = analysis.summary_of(tree)
    with_model = analysis.summary(model, tree["posterior"].to_dataset(),
                                  loglik=tree["sample_stats"]["loglik"].values)
    assert list(alone.index) == ["sd", "range", "intercept", "z", "log_likelihood"]
    pd.testing.assert_frame_equal(alone, with_model)
    assert alone.attrs == with_model.attrs
    # the cross-check's intercept is the GLM's log mean intensity less sd²/2
    cc = rec["cross_check"]
    assert alone.loc["intercept", "cross_check"] == pytest.approx(
        cc["log_mean_intensity"] - cc["sd"] ** 2 / 2)


def test_the_store_alone_gives_the_intensity_the_model_gives(model, reference):
    """analysis.StoredLGCP: the lattice, covariates and offsets as the store holds them."""
    from lattice_lgm import analysis

    tree = open_store(reference)
    stored = analysis.StoredLGCP(tree)
    assert stored.lattice == model.lattice and stored.covariate_names == model.covariate_names
    np.testing.assert_array_equal(stored.inside, model.inside)
    post = tree["posterior"].to_dataset()
    for per in (None, "ha"):
        a = analysis.intensity(stored, post, per=per)
        b = analysis.intensity(model, post, per=per)
        xr.testing.assert_identical(a, b)
    with pytest.raises(InvalidParameterError, match="rebuild the model"):
        analysis.StoredLGCP(xr.DataTree.from_dict({"posterior": post}))
    # model criticism from the store: the point pattern and the window's geometry it holds
    np.testing.assert_array_equal(stored.points, model.points)
    assert stored.window.to_shapely().equals(model.window.to_shapely())
    box = (10.0, 60.0, 20.0, 70.0)
    xr.testing.assert_identical(analysis.expected_counts(stored, post, box),
                                analysis.expected_counts(model, post, box))
    xr.testing.assert_identical(analysis.residual_map(stored, post, bandwidth=10.0),
                                analysis.residual_map(model, post, bandwidth=10.0))
    a = analysis.predictive_patterns(stored, post, 3, np.random.default_rng(5))
    b = analysis.predictive_patterns(model, post, 3, np.random.default_rng(5))
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    a = analysis.second_order_check(stored, post, nsim=19, rng=np.random.default_rng(6))
    b = analysis.second_order_check(model, post, nsim=19, rng=np.random.default_rng(6))
    xr.testing.assert_identical(a["observed"], b["observed"])
    xr.testing.assert_identical(a["theory"], b["theory"])
