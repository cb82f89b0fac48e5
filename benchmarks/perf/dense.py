"""Dense-path benchmark: kernel matrices and a hyperparameter sweep on Ionosphere.

The dense path reproduces Murray & Adams (2010); its Ionosphere experiment (200 cases, 34 ARD
lengthscales and the signal sd) builds a 200 × 200 covariance for every hyperparameter
proposal, about a hundred per chain and sweep.  Two figures, each a ratio measured in the same
process against the expression it replaced, in interleaved pairs (the median of the per-pair
ratios, so load on a shared machine cancels):

* ``kernel`` — ``SquaredExponential(x)`` (the Numba distance kernel, ``Covariance.__call__``)
  against ``from_lags(x[:, None] - x[None])`` (the ``(n, n, ndim)`` lag array it replaced), at
  (n, ndim) = (200, 34), (200, 10), (811, 1), (625, 2).  Both give the same bits (tested in
  ``tests/test_covariance.py``).
* ``surrogate`` — ``DensePrior.surrogate`` (``A = I + WᵀW`` by one ``dlauum``, ``W = Π^½ L``
  lower triangular, and one Cholesky of ``A``, the marginal from the same factor) against the
  expressions it replaced (a ``gemm`` for ``Lᵀ Π L`` and a second Cholesky of
  ``B = I + Π^½ K_OO Π^½`` for the marginal), one chain, every site observed, at n = 200 and 625
  (the Ionosphere and redwoods sizes).  The surr-/post- representations call it once per
  hyperparameter proposal.  The step that forms ``WᵀW`` is also timed alone against the
  ``dsyrk`` it replaced (``syrk_over_lauum``).
* ``sweep`` — one Gibbs sweep of one chain on Ionosphere (univariate slice over 35
  hyperparameters, then 10 elliptical slice updates) per representation, seconds per sweep,
  interleaved with a copy of the chain whose ``with_params`` children compute their distances
  afresh instead of reusing their parent's (``Covariance._self_distances``): the ratio, and
  whether the two copies stayed bitwise equal.  ``fixed`` is also run with the old kernel
  matrix, the old hyperprior sum and no distance reuse patched back in, for the ratio of the
  speed-ups together.

Usage::

    python benchmarks/perf/dense.py            # ~2 min; writes benchmarks/results/dense.json
    python benchmarks/perf/dense.py --quick    # ~30 s (run by a test), smaller repeats
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for _p in (str(ROOT), str(ROOT / "benchmarks" / "papers")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import _one_blas_thread  # noqa: E402, F401  (before numpy: one BLAS thread, as the paper runs)
import numpy as np  # noqa: E402

from lattice_lgm.covariance import Covariance, SquaredExponential  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "dense.json"
KERNEL_CASES = ((200, 34), (200, 10), (811, 1), (625, 2))
SWEEP_METHODS = ("fixed", "prior-white", "surr-site", "post-site")
SURROGATE_SIZES = (200, 625)


def _median_ratio(slow, fast, pairs: int) -> tuple[float, float, float]:
    """Interleaved (slow, fast) timings: median slow s, median fast s, median per-pair ratio."""
    slow(), fast()  # warm (Numba compilation, caches)
    ts, tf = [], []
    for _ in range(pairs):
        t0 = time.perf_counter()
        slow()
        t1 = time.perf_counter()
        fast()
        t2 = time.perf_counter()
        ts.append(t1 - t0)
        tf.append(t2 - t1)
    r = np.array(ts) / np.array(tf)
    return float(np.median(ts)), float(np.median(tf)), float(np.median(r))


def bench_kernel(pairs: int) -> list[dict]:
    """The kernel matrix against the lag-array expression, per (n, ndim)."""
    rows = []
    rng = np.random.default_rng(0)
    for n, nd in KERNEL_CASES:
        x = rng.uniform(-1, 1, (n, nd))
        k = SquaredExponential(sd=1.3, lengthscale=rng.uniform(0.5, 3.0, nd))
        same = bool(np.array_equal(k(x), k.from_lags(x[:, None, :] - x[None, :, :])))
        old, new, ratio = _median_ratio(lambda k=k, x=x: k.from_lags(x[:, None, :] - x[None]),
                                        lambda k=k, x=x: k(x), pairs)
        rows.append({"n": n, "ndim": nd, "lag_array_s": old, "kernel_s": new,
                     "speedup": ratio, "bitwise_equal": same})
        print(f"  kernel {n}x{n}x{nd}: lag array {old * 1e3:8.2f} ms, kernel "
              f"{new * 1e3:7.2f} ms, x{ratio:.2f}, bitwise equal {same}", flush=True)
    return rows


def _surrogate_two_factors(prior, g: np.ndarray, pi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The replaced surrogate algebra: ``A`` by ``gemm``, the marginal through ``chol(B)``."""
    from scipy import linalg

    from lattice_lgm.priors.base import LOG_2PI

    n, lmat = len(pi), prior.chol
    a = np.eye(n) + (lmat.T * pi) @ lmat
    la = linalg.cholesky(a, lower=True, check_finite=False)
    rhs = (g * pi) @ lmat
    mean = linalg.cho_solve((la, True), rhs.T, check_finite=False).T @ lmat.T
    sq = np.sqrt(pi)
    b = np.eye(n) + sq[:, None] * (prior.cov + prior.jitter * np.eye(n)) * sq[None, :]
    lb = linalg.cholesky(b, lower=True, check_finite=False)
    v = linalg.solve_triangular(lb, (g * sq).T, lower=True, check_finite=False)
    logm = (-0.5 * np.sum(v * v, axis=0) - np.sum(np.log(np.diag(lb)))
            + 0.5 * np.sum(np.log(pi)) - 0.5 * n * LOG_2PI)
    return mean, logm


def bench_surrogate(pairs: int) -> list[dict]:
    """``DensePrior.surrogate`` against the two-factor algebra it replaced, per size."""
    from scipy.linalg import blas, lapack

    from lattice_lgm.priors import DensePrior

    rows = []
    rng = np.random.default_rng(1)
    for n in SURROGATE_SIZES:
        x = rng.uniform(0, 1, (n, 2))
        prior = DensePrior(x, SquaredExponential(sd=1.2, lengthscale=0.2))
        pi = rng.uniform(0.1, 5.0, n)  # every site observed, as the redwoods' Poisson cells
        g = rng.standard_normal((1, n))
        new = prior.surrogate(g, pi)
        mean, logm = _surrogate_two_factors(prior, g, pi)
        diff_logm = float(np.max(np.abs(new.logmarginal - logm)))
        diff_mean = float(np.max(np.abs(new.mean - mean)))
        old, fast, ratio = _median_ratio(
            lambda p=prior, g=g, pi=pi: _surrogate_two_factors(p, g, pi),
            lambda p=prior, g=g, pi=pi: p.surrogate(g, pi), pairs)
        w = np.multiply(np.sqrt(pi)[:, None], prior.chol, order="F")
        t_syrk, t_lauum, r_step = _median_ratio(
            lambda w=w: blas.dsyrk(1.0, w, trans=1, lower=1),
            lambda w=w: lapack.dlauum(w, lower=1), pairs)
        rows.append({"n": n, "two_factors_s": old, "surrogate_s": fast, "speedup": ratio,
                     "max_abs_diff_logmarginal": diff_logm, "max_abs_diff_mean": diff_mean,
                     "wtw_dsyrk_s": t_syrk, "wtw_dlauum_s": t_lauum, "syrk_over_lauum": r_step})
        print(f"  surrogate n={n}: two factors {old * 1e3:7.2f} ms, one factor {fast * 1e3:7.2f}"
              f" ms, x{ratio:.2f} (|Δ log m| {diff_logm:.1e}, |Δ mean| {diff_mean:.1e}); "
              f"WᵀW by dsyrk {t_syrk * 1e3:.2f} ms, by dlauum {t_lauum * 1e3:.2f} ms, "
              f"x{r_step:.2f}", flush=True)
    return rows


@contextlib.contextmanager
def _no_distance_reuse():
    """Make every ``DensePrior.with_params`` child compute its distances afresh.

    As before a child reused its parent's (``Covariance._self_distances``).
    """
    reuse = Covariance._self_distances
    Covariance._self_distances = lambda self, x, previous=None: None
    try:
        yield
    finally:
        Covariance._self_distances = reuse


def _old_paths():
    """Context manager patching back the pre-kernel matrix and the full hyperprior sum."""
    import contextlib

    from lattice_lgm.samplers import hyper

    @contextlib.contextmanager
    def patched():
        call, logp_fn = Covariance.__call__, hyper.HyperMove._logp_fn

        def old_call(self, x1, x2=None):
            x1 = np.atleast_2d(np.asarray(x1, dtype=float))
            x2 = x1 if x2 is None else np.atleast_2d(np.asarray(x2, dtype=float))
            return self.from_lags(x1[:, None, :] - x2[None, :, :])

        def old_logp_fn(self, ctx, prep, ch, u_full, k, terms=None):
            # k=None takes the uncached path: every term of _log_h at every proposal (the
            # chain's terms carried between coordinates, a later saving, stay in)
            inner = logp_fn(self, ctx, prep, ch, u_full, None)

            def logp(x):
                u = np.array(u_full, dtype=float)
                if k is not None:
                    u[k] = x
                return inner(u)

            return logp

        Covariance.__call__ = old_call
        hyper.HyperMove._logp_fn = old_logp_fn
        try:
            with _no_distance_reuse():
                yield
        finally:
            Covariance.__call__ = call
            hyper.HyperMove._logp_fn = logp_fn

    return patched


def bench_sweep(n_sweeps: int) -> list[dict]:
    """Seconds per one-chain Gibbs sweep on Ionosphere, per representation (and fixed, old)."""
    import hyper2010 as H

    from lattice_lgm.samplers import chain_rngs, init_state

    prob = H.build_problem("ionosphere")
    rows = []

    def run(method: str) -> float:
        sweep = H._build_sweep(prob.model, method)
        rngs = chain_rngs(1, [0])
        st = init_state(prob.model, rngs)
        st, _ = sweep.step(st, rngs)  # warm
        ts = []
        for _ in range(n_sweeps):
            t0 = time.perf_counter()
            st, _ = sweep.step(st, rngs)
            ts.append(time.perf_counter() - t0)
        return float(np.median(ts))

    def run_pairs(method: str) -> tuple[float, float, float, bool]:
        """Interleaved sweeps of two copies of one chain, distances reused or built afresh.

        Returns the median seconds of each, the median per-pair ratio (both copies do the same
        work in a pair, so load and the sweep's own cost cancel) and whether every state stayed
        bitwise equal.
        """
        sweep = H._build_sweep(prob.model, method)
        fresh_rngs, reuse_rngs = chain_rngs(1, [0]), chain_rngs(1, [0])
        fresh, reuse = init_state(prob.model, fresh_rngs), init_state(prob.model, reuse_rngs)
        t_fresh, t_reuse, same = [], [], True
        for i in range(n_sweeps + 1):  # the first pair warms (compilation, caches)
            with _no_distance_reuse():
                t0 = time.perf_counter()
                fresh, _ = sweep.step(fresh, fresh_rngs)
                t1 = time.perf_counter()
            reuse, _ = sweep.step(reuse, reuse_rngs)
            t2 = time.perf_counter()
            same &= bool(np.array_equal(fresh.f, reuse.f)
                         and all(np.array_equal(fresh.theta[k], reuse.theta[k])
                                 for k in fresh.theta))
            if i:
                t_fresh.append(t1 - t0)
                t_reuse.append(t2 - t1)
        ratio = float(np.median(np.array(t_fresh) / np.array(t_reuse)))
        return float(np.median(t_fresh)), float(np.median(t_reuse)), ratio, same

    for method in SWEEP_METHODS:
        s_fresh, s, ratio, same = run_pairs(method)
        rows.append({"method": method, "seconds_per_sweep": s,
                     "seconds_per_sweep_distances_afresh": s_fresh,
                     "speedup_of_distance_reuse": ratio, "same_draws": same})
        print(f"  sweep {method:>11}: {s:.3f} s per chain ({s_fresh:.3f} s with distances "
              f"afresh; per-pair ratio x{ratio:.2f}; same draws {same})", flush=True)
    with _old_paths()():
        s_old = run("fixed")
    new = rows[0]["seconds_per_sweep"]
    rows.append({"method": "fixed (old matrix and hyperprior sum)", "seconds_per_sweep": s_old,
                 "speedup_of_new": s_old / new})
    print(f"  sweep fixed, old paths: {s_old:.3f} s per chain (x{s_old / new:.2f})", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats (~30 s)")
    ap.add_argument("--out", type=Path, default=None, help=f"JSON path (default {OUT})")
    args = ap.parse_args(argv)
    import numba

    numba.set_num_threads(1)
    pairs, sweeps = (5, 2) if args.quick else (21, 15)
    print("[dense] kernel matrices (interleaved pairs, one thread)", flush=True)
    kern = bench_kernel(pairs)
    print("[dense] surrogate-data algebra (interleaved pairs, one thread)", flush=True)
    surr = bench_surrogate(pairs)
    print("[dense] Ionosphere sweeps (one chain)", flush=True)
    sweep = bench_sweep(sweeps)
    out = args.out or OUT
    out.parent.mkdir(parents=True, exist_ok=True)
    res = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "quick": args.quick,
           "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                       "python": platform.python_version(),
                       "load_1min": os.getloadavg()[0]},
           "settings": {"pairs": pairs, "sweeps": sweeps, "numba_threads": 1,
                        "blas_threads": 1},
           "kernel": kern, "surrogate": surr, "sweep": sweep}
    out.write_text(json.dumps(res, indent=1))
    print(f"[dense] wrote {out}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
