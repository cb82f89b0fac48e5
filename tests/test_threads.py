"""The run's thread budget (lattice_lgm.threads): resolution, application, restoration, records."""

from __future__ import annotations

import io

import numba
import numpy as np
import pytest
from threadpoolctl import threadpool_info

from lattice_lgm import threads as T
from lattice_lgm.errors import InvalidParameterError
from lattice_lgm.priors._fft import default_threads
from lattice_lgm.runs import sample
from tests.runs.test_runs import build_model

CORES = T.available_cores()
NUMBA_MAX = numba.config.NUMBA_NUM_THREADS


def _blas_threads() -> list[int]:
    return [d["num_threads"] for d in threadpool_info() if d["user_api"] == "blas"]


@pytest.fixture
def clean_env(monkeypatch):
    """No user thread settings in the environment (each test sets what it tests)."""
    for k in (T.THREADS_ENV, *T.BLAS_ENV, "LATTICE_LGM_FFT_THREADS"):
        monkeypatch.delenv(k, raising=False)
    return monkeypatch


# -- resolution ---------------------------------------------------------------------------------
@pytest.mark.parametrize("threads, n_chains, chains, inner", [
    (1, 4, 1, 1), (2, 4, 2, 1), (4, 4, 4, 1), (4, 1, 1, 4), (4, 2, 2, 2), (5, 2, 2, 2),
    (3, 8, 3, 1),
])
def test_chains_first_then_inner_threads(clean_env, threads, n_chains, chains, inner):
    """Parallelism over chains when there are several; the cores they leave go inside one."""
    b = T.thread_budget(n_chains, threads)
    assert b.threads == threads and b.source == "argument"
    assert b.chains == min(chains, NUMBA_MAX) and b.inner == max(1, threads // b.chains)
    assert b.blas == b.inner
    if NUMBA_MAX >= chains:
        assert (b.chains, b.inner) == (chains, inner)


def test_where_threads_come_from(clean_env):
    clean_env.setenv(T.THREADS_ENV, "3")
    assert T.thread_budget(8).threads == 3 and T.thread_budget(8).source == T.THREADS_ENV
    assert T.thread_budget(8, threads=1).threads == 1  # the argument wins over the variable
    clean_env.delenv(T.THREADS_ENV)
    clean_env.setattr(T, "busy_cores", lambda: 0.0)  # a quiet machine
    b = T.thread_budget(8)
    assert b.source == "numba" and b.threads == min(numba.get_num_threads(), CORES)
    assert b.busy == 0.0
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)  # the user's own Numba setting is a choice too
        assert T.thread_budget(8).threads == 1
    finally:
        numba.set_num_threads(before)


@pytest.mark.parametrize("busy, cores, numba_threads, expect", [
    (0.0, 2, 2, 2), (1.0, 2, 2, 1), (2.0, 2, 2, 1), (0.4, 2, 2, 2), (0.6, 2, 2, 1),
    (3.0, 16, 16, 13), (20.0, 16, 16, 1), (1.0, 16, 4, 4)])
def test_the_default_leaves_the_cores_other_processes_keep_busy(clean_env, busy, cores,
                                                                 numba_threads, expect):
    clean_env.setattr(T, "busy_cores", lambda: busy)
    clean_env.setattr(T, "available_cores", lambda: cores)
    clean_env.setattr(numba, "get_num_threads", lambda: numba_threads)
    b = T.thread_budget(64)
    assert b.threads == expect and b.busy == busy and b.source == "numba"
    assert (f"{busy:.0f} core(s) busy" in b.describe()) == (busy >= 0.5)
    assert T.thread_budget(64, threads=cores).threads == cores  # a choice is never reduced
    assert T.thread_budget(64, threads=cores).busy is None


@pytest.mark.parametrize("readings, cpus, cores, expect", [
    (["1/300", "1/300"], 2, 2, 0.0),           # only the reading thread runs
    (["3/300", "3/300", "2/301"], 2, 2, 1.0),  # the minimum: one neighbour
    (["5/300", "9/300"], 2, 2, 4.0),
    (["33/900"], 64, 2, 1.0),                  # 32 busy on 64 CPUs: 1 on our 2 cores
])
def test_busy_cores_reads_the_runnable_tasks(clean_env, readings, cpus, cores, expect):
    lines = iter(readings)

    def fake_open(path, *a, **k):
        assert path == "/proc/loadavg"
        return io.StringIO(f"0.50 0.40 0.30 {next(lines)} 12345\n")

    clean_env.setattr(T, "open", fake_open, raising=False)
    clean_env.setattr(T, "_own_runnable_threads", lambda: 1)  # the reading thread
    clean_env.setattr(T.os, "cpu_count", lambda: cpus)
    clean_env.setattr(T, "available_cores", lambda: cores)
    assert T.busy_cores(samples=len(readings), interval=0.0) == pytest.approx(expect)


def test_this_processs_own_runnable_threads_are_not_neighbours(clean_env):
    # OpenBLAS's workers yield in a loop after a call: runnable, but ours
    clean_env.setattr(T, "_own_runnable_threads", lambda: 3)
    clean_env.setattr(T, "open", lambda path, *a, **k: io.StringIO("1 1 1 3/200 7\n"),
                      raising=False)
    assert T.busy_cores(samples=2, interval=0.0) == 0.0


def test_the_own_thread_count_reads_this_process():
    import threading
    n = T._own_runnable_threads()
    assert 1 <= n <= threading.active_count() + 64  # Numba's and BLAS's workers are threads too


def test_busy_cores_is_zero_where_the_count_cannot_be_read(clean_env):
    def refuse(path, *a, **k):
        raise FileNotFoundError(path)

    clean_env.setattr(T, "open", refuse, raising=False)
    assert T.busy_cores() == 0.0


def test_a_users_blas_setting_is_left_alone(clean_env):
    for k in T.BLAS_ENV:
        clean_env.setenv(k, "2")
        b = T.thread_budget(4, threads=2)
        assert b.blas is None and "the user's setting" in b.describe()
        clean_env.delenv(k)
    b = T.thread_budget(4, threads=2)
    assert b.blas == b.inner


@pytest.mark.parametrize("value", [0, -1, 1.5, "2", True])
def test_bad_threads_argument_is_refused(clean_env, value):
    with pytest.raises(InvalidParameterError, match=r"threads=.* must be an integer >= 1"):
        T.thread_budget(2, value)


@pytest.mark.parametrize("value", ["0", "two", "-3", "1.5"])
def test_bad_threads_variable_is_refused(clean_env, value):
    clean_env.setenv(T.THREADS_ENV, value)
    with pytest.raises(InvalidParameterError, match=rf"{T.THREADS_ENV}='{value}'"):
        T.thread_budget(2)


# -- application --------------------------------------------------------------------------------
def _changing_budget() -> T.ThreadBudget:
    """A budget that changes both pools from their state now (so applying it is visible)."""
    blas_now = _blas_threads()
    assert blas_now, "no BLAS library found by threadpoolctl: the BLAS limit is untested"
    return T.ThreadBudget(threads=1, chains=1, inner=1, source="argument",
                          blas=2 if blas_now[0] == 1 else 1)


def test_using_applies_the_budget_and_restores_every_pool(clean_env):
    numba.set_num_threads(NUMBA_MAX)  # the budget's 1 differs from it on any machine of >1 core
    numba_before, blas_before = numba.get_num_threads(), _blas_threads()
    b = _changing_budget()
    with T.using(b) as active:
        assert active is b and T.current() is b
        assert numba.get_num_threads() == b.chains
        assert _blas_threads() == [b.blas] * len(blas_before) != blas_before
        assert default_threads() == b.inner == T.inner_threads()
        assert default_threads(10) == 1  # small transforms stay on one thread
        assert T.chain_threads(8) == b.chains
        assert T.chain_threads(8, threads=3) == 3  # a sampler's own setting wins
        assert T.chain_threads(2, threads=3) == 2  # never more than the chains
    assert T.current() is None and T.inner_threads() is None
    assert numba.get_num_threads() == numba_before and _blas_threads() == blas_before
    assert default_threads() == CORES
    assert T.chain_threads(8) == min(8, CORES)


def test_using_restores_after_an_error(clean_env):
    numba.set_num_threads(NUMBA_MAX)
    numba_before, blas_before = numba.get_num_threads(), _blas_threads()
    with pytest.raises(RuntimeError, match="boom"), T.using(_changing_budget()):
        raise RuntimeError("boom")
    assert numba.get_num_threads() == numba_before and _blas_threads() == blas_before
    assert T.current() is None


def test_using_leaves_a_users_blas_setting(clean_env):
    clean_env.setenv("OPENBLAS_NUM_THREADS", "1")
    blas_before = _blas_threads()
    with T.using(T.thread_budget(1, threads=CORES)):
        assert _blas_threads() == blas_before


def test_main_thread_fft_follows_the_budget(clean_env):
    """A chain's share below the shared plans' threads: the main thread's own 1-thread plans."""
    from lattice_lgm import Lattice
    from lattice_lgm.covariance import Matern
    from lattice_lgm.priors import CirculantPrior

    prior = CirculantPrior(Lattice((64, 64)), Matern(1.5, range=5.0), fft_threads=2)
    assert prior._fft() is prior._plans
    with T.using(T.thread_budget(2, threads=1)):
        plans = prior._fft()
        assert plans is not prior._plans and plans.threads == 1
    with T.using(T.thread_budget(1, threads=2)):  # one chain: the shared 2-thread plans
        assert prior._fft() is prior._plans


# -- runs ---------------------------------------------------------------------------------------
HMC = dict(draws=4, tune=20, chains=2, random_seed=5, progressbar=False, representation="hmc")


@pytest.fixture(scope="module")
def model():
    return build_model()


def test_sample_records_the_budget_and_draws_do_not_depend_on_it(clean_env, model):
    one = sample(model, threads=1, **HMC)
    two = sample(model, threads=2, **HMC)
    assert one.attrs["thread_budget"] == {"threads": 1, "chains": 1, "inner": 1,
                                          "source": "argument", "blas": 1, "busy": None}
    assert two.attrs["thread_budget"]["threads"] == 2
    assert two.attrs["thread_budget"]["chains"] == min(2, NUMBA_MAX)
    for v in ("sd", "range", "beta", "f"):
        np.testing.assert_array_equal(one["posterior"][v].values, two["posterior"][v].values)


def test_sample_refuses_bad_threads_before_writing(clean_env, model, tmp_path):
    store = tmp_path / "run.zarr"
    with pytest.raises(InvalidParameterError, match="threads=0"):
        sample(model, store=store, threads=0, **HMC)
    assert not store.exists()


def test_the_run_prints_its_budget(clean_env, model, capsys):
    sample(model, threads=1, **{**HMC, "progressbar": True, "draws": 1})
    assert "threads: 1 (from argument): 1 chain(s) side by side" in capsys.readouterr().err


def test_a_chains_own_thread_runs_single_threaded_transforms(clean_env):
    """Pool threads that advance one chain each (HMC, warm start, ESS noise) see 1 thread."""
    import threading

    seen = {}

    def worker():
        T.chain_thread_init()
        seen["inner"], seen["fft"] = T.inner_threads(), default_threads()
        seen["numba"] = numba.get_num_threads()

    with T.using(T.thread_budget(1, threads=CORES)):
        th = threading.Thread(target=worker)
        th.start()
        th.join()
        # the process's budget is visible in every thread; the flag only in the chain's
        assert T.inner_threads() == CORES and T.current().inner == CORES
    assert seen == {"inner": 1, "fft": 1, "numba": 1}
    assert T.inner_threads() is None


@pytest.mark.parametrize("shape", [(72, 100), (64, 64), (90, 45), (128,)])
def test_the_embedding_spectrum_has_the_same_bits_on_any_number_of_workers(shape):
    """pocketfft's workers follow the budget; the spectrum (and so every draw) may not."""
    from lattice_lgm import Lattice
    from lattice_lgm.covariance import Matern
    from lattice_lgm.priors.circulant import embedding_spectrum

    lat = Lattice(tuple(max(2, m // 2 - 3) for m in shape), spacing=(0.7,) * len(shape))
    kern = Matern(1.5, sd=1.2, range=3.0)
    one = embedding_spectrum(kern, lat, shape, workers=1)
    for w in (2, 3):
        np.testing.assert_array_equal(embedding_spectrum(kern, lat, shape, workers=w), one)
