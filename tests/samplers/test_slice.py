"""Tests of lattice_lgm.samplers.slice: exact invariants, stationarity, error paths, power.

Exact checks replay the documented order of random draws from a copy of the generator and
re-derive every step (level, bracket, step-out, shrinkage) with the target evaluated
independently, so the brackets, counts and accepted point must agree bit for bit.

False-failure budget (whole file, one run)
------------------------------------------
Stationarity is checked on long chains.  Each chain gives z-scores of sample moments whose
standard errors come from the integrated autocorrelation time ``tau`` (Sokal's automatic
window, c = 5), two-sided at ``Z = 5`` (P(|N(0,1)| > 5) = 5.7e-7), and a KS test at
``KS_ALPHA = 1e-5`` on draws thinned by ``thin`` (fixed per target, at least 5 × tau, checked),
so they are nearly independent:

* univariate: 5 chains × (mean, variance) = 10 z-checks and 5 KS tests;
* hyperrectangle: (2 means, 2 variances, 1 covariance) = 5 z-checks and 3 KS tests
  (two marginals and the Mahalanobis distance against χ²₂).

15 × 5.7e-7 + 8 × 1e-5 ≈ 9e-5 per run (union bound; nominal, as tau is estimated — the wide
Z leaves room for that).  Seeds are fixed and were never tuned.  The power tests run a
deliberately broken sampler through the same check and require it to fail; its KS p-value is
essentially 0, so they fail spuriously with probability ≈ 0.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
from scipy import special, stats

import lattice_lgm.samplers.slice as slice_mod
from lattice_lgm.errors import InvalidParameterError, SamplerError, ShapeMismatchError
from lattice_lgm.samplers.slice import SliceResult, slice_hyperrect, slice_univariate

#: family-wise false-failure rate of this module per run (module docstring); summed by conftest.py
FALSE_FAILURE_RATE = 9e-5

Z = 5.0
KS_ALPHA = 1e-5
N_UNI = 40_000
N_RECT = 20_000


# --------------------------------------------------------------------------------------------
# targets (log densities up to a constant, plain floats) and a counting wrapper
# --------------------------------------------------------------------------------------------
def normal(x: float) -> float:
    return -0.5 * x * x


def gamma3_log(u: float) -> float:
    """log X for X ~ Gamma(3, 1): density ∝ exp(3u − e^u)."""
    return 3.0 * u - math.exp(u) if u < 700.0 else -math.inf


def flat(x: float) -> float:
    """Uniform on [0, 1] when the bounds are passed (it is never called outside them)."""
    return 0.0


def bimodal(x: float) -> float:
    return float(np.logaddexp(-0.5 * ((x + 3.0) / 0.5) ** 2, -0.5 * ((x - 3.0) / 0.5) ** 2))


def exponential(x: float) -> float:
    return -x


class Counting:
    """``logp`` for the samplers: value from ``target``, payload tags the point; logs calls."""

    def __init__(self, target: Callable, lower=-np.inf, upper=np.inf) -> None:
        self.target, self.lower, self.upper = target, lower, upper
        self.calls: list = []

    def __call__(self, x):
        if isinstance(x, np.ndarray):
            assert np.all((self.lower <= x) & (x <= self.upper)), f"outside the support: {x!r}"
            x = x.copy()
        else:
            assert self.lower <= x <= self.upper, f"logp evaluated outside the support at {x!r}"
        self.calls.append(x)
        return self.target(x), ("payload", x)


# --------------------------------------------------------------------------------------------
# exact invariants, by replaying the documented draws
# --------------------------------------------------------------------------------------------
def checked_univariate(target, x0, width, rng, *, step_out=False, max_stepout=50,
                       lower=-np.inf, upper=np.inf) -> tuple[SliceResult, bool]:
    """One transition with every invariant asserted; returns (result, step-out was capped)."""
    lp0 = target(x0)
    replay = copy.deepcopy(rng)
    f = Counting(target, lower, upper)
    res = slice_univariate(f, x0, lp0, width, rng, step_out=step_out, max_stepout=max_stepout,
                           lower=lower, upper=upper)
    n_needed = 0  # evaluations the algorithm needs: in-support points only

    def above(x: float, count: bool = True) -> bool:
        nonlocal n_needed
        if not lower <= x <= upper:
            return False
        n_needed += count
        return target(x) > log_y

    # 1. level, 2. randomly positioned bracket (Alg. 4 steps 3–5)
    log_y = lp0 + math.log(replay.random())
    lo = x0 - width * replay.random()
    hi = lo + width
    assert lo <= x0 <= hi
    # 3. stepping out (Neal Fig. 3)
    capped = False
    if step_out:
        j = math.floor(max_stepout * replay.random())
        k = max_stepout - 1 - j
        n_out = 0
        while j > 0 and above(lo):
            lo, j, n_out = lo - width, j - 1, n_out + 1
        while k > 0 and above(hi):
            hi, k, n_out = hi + width, k - 1, n_out + 1
        assert res.n_stepout == n_out
        # the edges are off the slice (logp <= log y, or outside the support) unless capped
        capped = (j == 0 and above(lo, False)) or (k == 0 and above(hi, False))
        if j > 0:
            assert not above(lo, False)
        if k > 0:
            assert not above(hi, False)
    else:
        assert res.n_stepout == 0
    assert res.bracket == (lo, hi)
    assert res.bracket[0] <= x0 <= res.bracket[1]
    # 4. shrinkage (Neal Fig. 5): every rejected point is off the slice, x0 stays inside
    n_prop = 0
    while True:
        assert lo <= x0 <= hi
        x1 = lo + replay.random() * (hi - lo)
        n_prop += 1
        if above(x1):
            break
        if x1 < x0:
            lo = x1
        else:
            hi = x1
    assert res.x == x1
    assert res.n_shrink == n_prop - 1
    assert res.logp == target(res.x) > log_y
    assert lower <= res.x <= upper
    assert res.payload == ("payload", res.x)
    assert res.n_evals == len(f.calls) == n_needed
    assert f.calls[-1] == res.x
    assert x0 not in f.calls  # the current value is cached, never re-evaluated
    assert replay.random() == rng.random()  # exactly the documented draws were used
    return res, capped


UNI_CASES = {
    "normal-no-stepout": (normal, 0.3, 2.0, {}),
    "normal-stepout": (normal, 0.3, 0.3, {"step_out": True}),
    "normal-stepout-capped": (normal, 0.3, 0.05, {"step_out": True, "max_stepout": 4}),
    "bimodal-stepout-capped": (bimodal, -3.0, 0.2, {"step_out": True, "max_stepout": 3}),
    "gamma-log-stepout": (gamma3_log, 1.0, 0.5, {"step_out": True}),
    "flat-bounded-stepout": (flat, 0.5, 0.3, {"step_out": True, "lower": 0.0, "upper": 1.0}),
    "flat-bounded-wide": (flat, 0.5, 5.0, {"lower": 0.0, "upper": 1.0}),
    "exponential-lower-stepout": (exponential, 1.0, 0.7, {"step_out": True, "lower": 0.0}),
}


@pytest.mark.parametrize("case", list(UNI_CASES))
def test_univariate_invariants_every_call(case):
    target, x, width, kw = UNI_CASES[case]
    rng = np.random.default_rng(11)
    n_capped = 0
    for _ in range(300):
        res, capped = checked_univariate(target, x, width, rng, **kw)
        n_capped += capped
        x = res.x
    if case.endswith("capped"):
        assert n_capped > 0  # the "unless capped" branch was exercised


def checked_hyperrect(target, x0, widths, rng, *, lower=None, upper=None) -> SliceResult:
    lp0 = target(x0)
    replay = copy.deepcopy(rng)
    lo_b = np.full(x0.size, -np.inf) if lower is None else np.broadcast_to(lower, x0.shape)
    hi_b = np.full(x0.size, np.inf) if upper is None else np.broadcast_to(upper, x0.shape)
    f = Counting(target, lo_b, hi_b)
    res = slice_hyperrect(f, x0, lp0, widths, rng, lower=lower, upper=upper)
    log_y = lp0 + math.log(replay.random())
    lo = x0 - widths * replay.random(x0.size)
    hi = lo + widths
    np.testing.assert_array_equal(res.bracket[0], lo)
    np.testing.assert_array_equal(res.bracket[1], hi)
    n_prop = n_needed = 0
    while True:
        assert np.all((lo <= x0) & (x0 <= hi))
        x1 = lo + replay.random(x0.size) * (hi - lo)
        n_prop += 1
        if np.all((lo_b <= x1) & (x1 <= hi_b)):
            n_needed += 1
            if target(x1) > log_y:
                break
        below = x1 < x0
        lo, hi = np.where(below, x1, lo), np.where(below, hi, x1)
    np.testing.assert_array_equal(res.x, x1)
    assert res.n_shrink == n_prop - 1 and res.n_stepout == 0
    assert res.logp == target(res.x) > log_y
    assert res.n_evals == len(f.calls) == n_needed
    assert res.payload[0] == "payload"
    np.testing.assert_array_equal(res.payload[1], res.x)
    assert replay.random() == rng.random()
    return res


COV2 = np.array([[1.0, 1.6], [1.6, 4.0]])  # sds 1 and 2, correlation 0.8
PREC2 = np.linalg.inv(COV2)


def gauss2(x: np.ndarray) -> float:
    return float(-0.5 * x @ PREC2 @ x)


def flat_box(x: np.ndarray) -> float:
    return 0.0


@pytest.mark.parametrize(
    ("target", "widths", "bounds"),
    [(gauss2, np.array([3.0, 6.0]), {}),
     (gauss2, np.array([0.5, 0.5]), {}),
     (flat_box, np.array([2.0, 0.5]), {"lower": 0.0, "upper": np.array([1.0, 3.0])})],
    ids=["gauss2", "gauss2-narrow", "flat-box-bounded"],
)
def test_hyperrect_invariants_every_call(target, widths, bounds):
    rng = np.random.default_rng(12)
    x = np.array([0.5, 0.5])
    for _ in range(300):
        x = checked_hyperrect(target, x, widths, rng, **bounds).x


def test_out_of_support_proposals_are_shrinks_not_evals():
    rng = np.random.default_rng(3)
    f = Counting(flat, 0.0, 1.0)
    total_shrink = 0
    for _ in range(50):
        res = slice_univariate(f, 0.5, 0.0, 1000.0, rng, lower=0.0, upper=1.0)
        # flat target: the first in-support proposal is accepted, so exactly one evaluation
        assert res.n_evals == 1
        total_shrink += res.n_shrink
    assert total_shrink > 0
    assert len(f.calls) == 50


# --------------------------------------------------------------------------------------------
# stationarity (long chains, MCSE from the integrated autocorrelation time)
# --------------------------------------------------------------------------------------------
def iat(x: np.ndarray, c: float = 5.0) -> float:
    """Integrated autocorrelation time with Sokal's automatic window (smallest M >= c·tau(M))."""
    x = np.asarray(x, dtype=float) - np.mean(x)
    n = len(x)
    spec = np.fft.rfft(x, 2 * n)
    acf = np.fft.irfft(spec * np.conj(spec))[:n]
    acf = acf / acf[0]
    taus = 2.0 * np.cumsum(acf) - 1.0
    ok = np.arange(n) >= c * taus
    return float(taus[np.argmax(ok)] if ok.any() else taus[-1])


@dataclass(frozen=True)
class Check:
    z: dict[str, float]        # z-scores of sample moments against the truth
    ks: dict[str, float]       # KS p-values on thinned draws
    tau: float                 # largest estimated autocorrelation time
    thin: int


def z_score(series: np.ndarray, expected: float) -> tuple[float, float]:
    tau = iat(series)
    se = series.std(ddof=1) * math.sqrt(max(tau, 1.0) / len(series))
    return (series.mean() - expected) / se, tau


def check_univariate(draws, mean, var, cdf, thin) -> Check:
    z_m, tau_m = z_score(draws, mean)
    z_v, tau_v = z_score((draws - mean) ** 2, var)
    ks = stats.kstest(draws[::thin], cdf).pvalue
    return Check({"mean": z_m, "var": z_v}, {"draws": ks}, max(tau_m, tau_v), thin)


def assert_check(check: Check) -> None:
    assert check.tau <= check.thin / 5, f"thinning {check.thin} not generous for tau={check.tau}"
    for name, z in check.z.items():
        assert abs(z) < Z, f"{name}: z = {z:.2f}"
    for name, p in check.ks.items():
        assert p > KS_ALPHA, f"{name}: KS p = {p:.3g}"


def run_univariate(target, x0, n, seed, width, **kw) -> np.ndarray:
    rng = np.random.default_rng(seed)
    f = Counting(target, kw.get("lower", -np.inf), kw.get("upper", np.inf))
    x, lp = x0, target(x0)
    out = np.empty(n)
    for i in range(n):
        res = slice_univariate(f, x, lp, width, rng, **kw)
        x, lp = res.x, res.logp
        out[i] = x
    return out


# (target, x0, width, kwargs, mean, variance, cdf, thin); thin ≈ 10 × the measured tau
STAT_CASES = {
    "normal-no-stepout": (normal, 0.0, 2.0, {}, 0.0, 1.0, stats.norm.cdf, 100),
    "normal-stepout": (normal, 0.0, 0.5, {"step_out": True}, 0.0, 1.0, stats.norm.cdf, 20),
    "gamma3-log-stepout": (gamma3_log, 1.0, 0.5, {"step_out": True}, float(special.digamma(3)),
                           float(special.polygamma(1, 3)),
                           lambda u: stats.gamma(3).cdf(np.exp(u)), 20),
    "uniform-bounded-wide": (flat, 0.5, 3.0, {"lower": 0.0, "upper": 1.0}, 0.5, 1 / 12,
                             stats.uniform.cdf, 20),
    "uniform-bounded-stepout": (flat, 0.5, 0.3, {"lower": 0.0, "upper": 1.0, "step_out": True},
                                0.5, 1 / 12, stats.uniform.cdf, 20),
}


@pytest.mark.statistical
@pytest.mark.parametrize("case", list(STAT_CASES))
def test_univariate_stationary(case):
    target, x0, width, kw, mean, var, cdf, thin = STAT_CASES[case]
    draws = run_univariate(target, x0, N_UNI, 100 + list(STAT_CASES).index(case), width, **kw)
    assert_check(check_univariate(draws, mean, var, cdf, thin))


def run_hyperrect(n, seed, widths) -> np.ndarray:
    rng = np.random.default_rng(seed)
    f = Counting(gauss2)
    x = np.zeros(2)
    lp = gauss2(x)
    out = np.empty((n, 2))
    for i in range(n):
        res = slice_hyperrect(f, x, lp, widths, rng)
        x, lp = res.x, res.logp
        out[i] = x
    return out


def check_hyperrect(draws: np.ndarray, thin: int = 100) -> Check:
    z, taus = {}, []
    series = {
        "mean0": (draws[:, 0], 0.0), "mean1": (draws[:, 1], 0.0),
        "var0": (draws[:, 0] ** 2, COV2[0, 0]), "var1": (draws[:, 1] ** 2, COV2[1, 1]),
        "cov01": (draws[:, 0] * draws[:, 1], COV2[0, 1]),
    }
    for name, (s, expected) in series.items():
        z[name], tau = z_score(s, expected)
        taus.append(tau)
    q = np.einsum("ni,ij,nj->n", draws, PREC2, draws)
    thinned = slice(None, None, thin)
    ks = {
        "marginal0": stats.kstest(draws[thinned, 0], stats.norm(0, 1).cdf).pvalue,
        "marginal1": stats.kstest(draws[thinned, 1], stats.norm(0, 2).cdf).pvalue,
        "mahalanobis": stats.kstest(q[thinned], stats.chi2(2).cdf).pvalue,
    }
    return Check(z, ks, max(taus), thin)


@pytest.mark.statistical
def test_hyperrect_stationary_correlated_gaussian():
    draws = run_hyperrect(N_RECT, 200, np.array([3.0, 6.0]))
    assert_check(check_hyperrect(draws))


# --------------------------------------------------------------------------------------------
# power: a deliberately broken bracket (excludes x0) fails the same checks
# --------------------------------------------------------------------------------------------
def test_broken_bracket_is_detected(monkeypatch):
    def bracket_excluding_x0(x0, width, rng):
        rng.random()  # same draws as the real bracket
        lo = x0 + 1e-9 * width
        return lo, lo + width

    monkeypatch.setattr(slice_mod, "_initial_bracket", bracket_excluding_x0)
    target, x0, width, kw, mean, var, cdf, thin = STAT_CASES["normal-no-stepout"]
    draws = run_univariate(target, x0, N_UNI, 100, width, **kw)
    check = check_univariate(draws, mean, var, cdf, thin)
    assert check.ks["draws"] < KS_ALPHA  # the KS test itself catches it
    with pytest.raises(AssertionError):
        assert_check(check)


def test_broken_box_is_detected(monkeypatch):
    def box_excluding_x0(x0, widths, rng):
        rng.random(x0.size)
        lo = x0 + 1e-9 * widths
        return lo, lo + widths

    monkeypatch.setattr(slice_mod, "_initial_box", box_excluding_x0)
    # a quarter of the chain is plenty (and the drifting chain needs ever more shrinks)
    check = check_hyperrect(run_hyperrect(N_RECT // 4, 200, np.array([3.0, 6.0])))
    assert max(check.ks.values()) < KS_ALPHA
    with pytest.raises(AssertionError):
        assert_check(check)


# --------------------------------------------------------------------------------------------
# error paths
# --------------------------------------------------------------------------------------------
def spike(x) -> float:
    """-inf everywhere except exactly at the current point 0.25."""
    return 0.0 if np.all(np.asarray(x) == 0.25) else -math.inf


@pytest.mark.parametrize("step_out", [False, True])
def test_shrink_cap_raises_with_state(step_out):
    rng = np.random.default_rng(5)
    replay = copy.deepcopy(rng)
    f = Counting(spike)
    with pytest.raises(SamplerError, match="max_shrink=30") as info:
        slice_univariate(f, 0.25, 0.0, 1.0, rng, max_shrink=30, step_out=step_out)
    st = info.value.state
    assert {"x0", "logp0", "log_y", "bracket", "current_bracket", "last_proposal",
            "n_evals", "n_shrink", "n_stepout"} <= set(st)
    assert st["x0"] == 0.25 and st["logp0"] == 0.0 and st["log_y"] < 0.0
    assert st["n_shrink"] == 30 and st["n_stepout"] == 0
    n_edge = 0
    if step_out:  # each edge is evaluated once iff Neal's budget on its side is > 0
        replay.random(), replay.random()
        j = math.floor(50 * replay.random())
        n_edge = (j > 0) + (49 - j > 0)
    assert st["n_evals"] == len(f.calls) == 30 + n_edge
    lo, hi = st["current_bracket"]
    assert lo <= 0.25 <= hi and st["last_proposal"] in (lo, hi)
    assert st["bracket"][0] <= 0.25 <= st["bracket"][1]


def test_shrink_cap_hyperrect():
    rng = np.random.default_rng(6)
    f = Counting(spike)
    with pytest.raises(SamplerError, match="max_shrink=20") as info:
        slice_hyperrect(f, np.array([0.25, 0.25]), 0.0, 1.0, rng, max_shrink=20)
    st = info.value.state
    assert st["n_shrink"] == 20 == st["n_evals"] == len(f.calls)
    lo, hi = st["current_bracket"]
    assert np.all(lo <= 0.25) and np.all(hi >= 0.25)
    assert {"x0", "logp0", "log_y", "bracket", "last_proposal"} <= set(st)


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_nan_or_plus_inf_logp_raises_naming_x(bad):
    rng = np.random.default_rng(7)
    replay = copy.deepcopy(rng)
    with pytest.raises(SamplerError) as info:
        slice_univariate(lambda x: (bad, None), 0.0, 0.0, 1.0, rng)
    x = info.value.state["x"]
    replay.random()
    lo = 0.0 - replay.random()
    assert x == lo + replay.random() * 1.0  # the first proposal
    assert f"x={x!r}" in str(info.value) and repr(bad) in str(info.value)


def test_nan_during_step_out_raises():
    rng = np.random.default_rng(8)
    replay = copy.deepcopy(rng)
    with pytest.raises(SamplerError, match="nan") as info:
        slice_univariate(lambda x: (0.0 if x == 0.0 else math.nan, None), 0.0, 0.0, 1.0, rng,
                         step_out=True)
    replay.random()
    lo = 0.0 - replay.random()
    # J + K = m - 1 = 49 > 0, so a bracket edge is the first point evaluated
    assert info.value.state["x"] in (lo, lo + 1.0)


def test_nan_hyperrect_raises():
    with pytest.raises(SamplerError, match="x="):
        slice_hyperrect(lambda x: (math.nan, None), np.zeros(2), 0.0, 1.0,
                        np.random.default_rng(9))


def test_minus_inf_logp_is_fine():
    # -inf away from the mode is a valid value (rejected and shrunk on), not an error
    res = slice_univariate(lambda x: (0.0 if abs(x) < 0.1 else -math.inf, None), 0.0, 0.0, 10.0,
                           np.random.default_rng(10))
    assert abs(res.x) < 0.1


def test_logp_must_return_a_pair_with_a_float():
    with pytest.raises(InvalidParameterError, match="pair"):
        slice_univariate(lambda x: -0.5 * x * x, 0.0, 0.0, 1.0, np.random.default_rng(1))
    with pytest.raises(InvalidParameterError, match="must be a float"):
        slice_univariate(lambda x: (None, None), 0.0, 0.0, 1.0, np.random.default_rng(1))


BAD_UNI = [
    ({"logp0": math.nan}, "logp0=nan"),
    ({"logp0": math.inf}, "logp0=inf"),
    ({"logp0": -math.inf}, "logp0=-inf"),
    ({"logp0": "a"}, "logp0='a'"),
    ({"width": 0.0}, "width=0.0"),
    ({"width": -1.0}, "width=-1.0"),
    ({"width": math.nan}, "width=nan"),
    ({"width": math.inf}, "width=inf"),
    ({"x0": math.nan}, "x0=nan"),
    ({"x0": math.inf}, "x0=inf"),
    ({"x0": "a"}, "x0='a'"),
    ({"x0": 2.0, "lower": 0.0, "upper": 1.0}, "x0=2.0 is outside"),
    ({"x0": -1e-300, "lower": 0.0}, "is outside"),
    ({"lower": 1.0, "upper": 1.0, "x0": 1.0}, "lower=1.0, upper=1.0"),
    ({"lower": math.nan}, "lower=nan"),
    ({"upper": "b"}, "upper='b'"),
    ({"max_shrink": 0}, "max_shrink=0"),
    ({"max_shrink": 2.5}, "max_shrink=2.5"),
    ({"max_shrink": True}, "max_shrink=True"),
    ({"step_out": True, "max_stepout": 0}, "max_stepout=0"),
    ({"step_out": True, "max_stepout": 1.5}, "max_stepout=1.5"),
    ({"rng": np.random.RandomState(0)}, "rng="),
    ({"rng": None}, "rng=None"),
    ({"logp": 3.0}, "logp=3.0 is not callable"),
]


@pytest.mark.parametrize(("override", "text"), BAD_UNI, ids=[t for _, t in BAD_UNI])
def test_univariate_bad_input_before_any_draw(override, text):
    rng = np.random.default_rng(0)
    before = copy.deepcopy(rng.bit_generator.state)
    f = Counting(normal)
    kw = {"logp": f, "x0": 0.0, "logp0": 0.0, "width": 1.0, "rng": rng, **override}
    with pytest.raises(InvalidParameterError) as info:
        slice_univariate(kw.pop("logp"), kw.pop("x0"), kw.pop("logp0"), kw.pop("width"),
                         kw.pop("rng"), **kw)
    assert text in str(info.value)
    assert f.calls == []
    assert rng.bit_generator.state == before


BAD_RECT = [
    ({"x0": np.zeros((2, 2))}, ShapeMismatchError, "shape (2, 2)"),
    ({"x0": np.zeros(0)}, ShapeMismatchError, "shape (0,)"),
    ({"x0": 0.0}, ShapeMismatchError, "shape ()"),
    ({"x0": np.array([0.0, np.nan])}, InvalidParameterError, "must be finite"),
    ({"widths": np.ones(3)}, ShapeMismatchError, "3 entries"),
    ({"widths": np.array([1.0, -1.0])}, InvalidParameterError, "widths[1]=-1.0"),
    ({"widths": 0.0}, InvalidParameterError, "widths=0.0"),
    ({"lower": np.zeros(3)}, ShapeMismatchError, "lower="),
    ({"lower": np.array([0.0, np.nan])}, InvalidParameterError, "NaN"),
    ({"lower": 1.0, "upper": 1.0}, InvalidParameterError, "lower < upper"),
    ({"lower": np.array([-1.0, 0.5])}, InvalidParameterError, "is outside"),
    ({"logp0": math.nan}, InvalidParameterError, "logp0=nan"),
    ({"max_shrink": 0}, InvalidParameterError, "max_shrink=0"),
    ({"rng": None}, InvalidParameterError, "rng=None"),
]


@pytest.mark.parametrize(("override", "exc", "text"), BAD_RECT, ids=[t for *_, t in BAD_RECT])
def test_hyperrect_bad_input_before_any_draw(override, exc, text):
    rng = np.random.default_rng(0)
    before = copy.deepcopy(rng.bit_generator.state)
    f = Counting(gauss2)
    kw = {"logp": f, "x0": np.zeros(2), "logp0": 0.0, "widths": 1.0, "rng": rng, **override}
    with pytest.raises(exc) as info:
        slice_hyperrect(kw.pop("logp"), kw.pop("x0"), kw.pop("logp0"), kw.pop("widths"),
                        kw.pop("rng"), **kw)
    assert text in str(info.value)
    assert f.calls == []
    assert rng.bit_generator.state == before


def test_result_types():
    res = slice_univariate(Counting(normal), np.float32(0.5), -0.125, 1.0,
                           np.random.default_rng(4))
    assert isinstance(res.x, float) and isinstance(res.logp, float)
    with pytest.raises(AttributeError):
        res.x = 0.0  # frozen
    res2 = slice_hyperrect(Counting(gauss2), [0.0, 0.0], 0.0, [1.0, 2.0],
                           np.random.default_rng(4))
    assert isinstance(res2.x, np.ndarray) and res2.x.shape == (2,)
