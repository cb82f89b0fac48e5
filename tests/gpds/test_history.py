"""The GPDS latent history's moves leave the posterior invariant (§4.1; the values by ESS).

A successive-conditional (Geweke 2004) check: a run of Algorithm 1 to its N-th acceptance is a
draw of the data *and* their latent history from the joint; moves that leave p(history | data)
invariant keep it one, so the number of rejections after T moves has the distribution it had
before (paired differences ``M_T − M_0`` and of ``M²`` have mean 0), and so has the function
at the data after elliptical slice updates.  Each check is shown to fail on a deliberate bug.
"""

from __future__ import annotations

import numpy as np
import pytest

from lattice_lgm.covariance import SquaredExponential
from lattice_lgm.errors import InvalidParameterError
from lattice_lgm.gpds import (
    LatentHistory,
    UniformBase,
    change_rejections,
    log_count_ratio,
    sample_prior,
)

#: family-wise false-failure rate of this module per run, summed by conftest.py: at most
#: eleven two-sided 4-SE checks (6.3e-5 each; six in the default tier)
FALSE_FAILURE_RATE = 7.0e-4

KERNEL = SquaredExponential(sd=1.5, lengthscale=0.3)
BASE = UniformBase.create([0.0], [1.0])
N, R, T = 3, 1500, 30
#: replicates of the count move's check: a quick one by default, the issue's full Geweke
#: test (R) in the slow tier
COUNT_REPLICATES = [300, pytest.param(R, marks=pytest.mark.slow)]


def _paired(move, seed=3, r=R):
    rng = np.random.default_rng(seed)
    m0, mt, acc = [], [], 0
    for _ in range(r):
        s = LatentHistory.from_prior(sample_prior(KERNEL, BASE, N, rng))
        m0.append(s.n_rejections)
        for _ in range(T):
            s, a = move(s, rng)
            acc += a
        mt.append(s.n_rejections)
    return np.array(m0, float), np.array(mt, float), acc / (r * T)


@pytest.mark.parametrize("r", COUNT_REPLICATES)
def test_the_number_of_rejections_keeps_its_prior_distribution(r):
    m0, mt, rate = _paired(lambda s, rng: change_rejections(s, rng, KERNEL, BASE), r=r)
    assert 0.2 < rate < 0.9  # the move moves
    for stat in (lambda m: m, lambda m: m**2):
        d = stat(mt) - stat(m0)
        assert abs(d.mean()) < 4 * d.std(ddof=1) / np.sqrt(r), (stat(m0).mean(),
                                                                 stat(mt).mean())


@pytest.mark.parametrize("r", COUNT_REPLICATES)
def test_the_check_sees_a_wrong_orderings_factor(monkeypatch, r):
    """Without eq. 4's M!(M̂+N−1)!/(M̂!(M+N−1)!) the rejections drift: the check fails."""
    import lattice_lgm.gpds.history as H

    monkeypatch.setattr(H, "log_count_ratio", lambda m, m_new, n: 0.0)
    m0, mt, _ = _paired(lambda s, rng: H.change_rejections(s, rng, KERNEL, BASE), r=r)
    d = mt - m0
    assert abs(d.mean()) > 4 * d.std(ddof=1) / np.sqrt(r)


def test_the_orderings_factor_is_the_paper_s():
    # C(M̂+N−1, M̂−M) placements of the inserted against C(M̂, M̂−M) choices back
    from math import comb

    for m, m_new, n in ((0, 2, 3), (4, 1, 2), (5, 7, 1)):
        lo, hi = min(m, m_new), max(m, m_new)
        ratio = comb(hi + n - 1, hi - lo) / comb(hi, hi - lo)
        want = ratio if m_new > m else 1 / ratio
        assert np.exp(log_count_ratio(m, m_new, n)) == pytest.approx(want, rel=1e-12)


def test_bad_step_refused():
    s = LatentHistory.from_prior(sample_prior(KERNEL, BASE, 2, np.random.default_rng(0)))
    with pytest.raises(InvalidParameterError, match="max_step"):
        change_rejections(s, np.random.default_rng(0), KERNEL, BASE, max_step=0)


@pytest.mark.parametrize("name", ["logistic", "probit"])
def test_log_link_is_log_phi_and_finite_in_the_tails(name):
    from lattice_lgm.gpds.base import link, log_link

    g = np.linspace(-8.0, 8.0, 33)
    np.testing.assert_allclose(log_link(name)(g), np.log(link(name)(g)), rtol=1e-9,
                               atol=1e-12)  # log Φ → 0 where Φ rounds to 1
    far = log_link(name)(-np.array([40.0, 200.0]))  # log(1 − Φ(g)) at g = 40, 200
    assert np.all(np.isfinite(far)) and np.all(np.diff(far) < 0)


def test_deleting_a_rejection_where_phi_is_one_is_finite():
    """A rejection at g = 60 has 1 − Φ(g) ≈ 1e-26: its deletion must be accepted (log a
    large and finite), not evaluated as ``log1p(−1) = −inf`` with a warning."""
    import warnings

    s = LatentHistory(np.array([[0.5]]), np.array([[0.2]]), np.array([0.0, 60.0]))
    accepted = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for seed in range(20):
            t, a = change_rejections(s, np.random.default_rng(seed), KERNEL, BASE, max_step=1)
            accepted += a and t.n_rejections == 0
    assert accepted > 0  # every proposed deletion (about half the proposals) is accepted


def _paired_values(seed=4, n_rep=800):
    """Sum of G over the data and mean of G over the rejections, before and after ESS."""
    import lattice_lgm.gpds.history as H

    rng = np.random.default_rng(seed)
    before, after = [], []
    for _ in range(n_rep):
        s = LatentHistory.from_prior(sample_prior(KERNEL, BASE, N, rng))
        t = H.update_values(s, rng, KERNEL, n_updates=3)
        np.testing.assert_array_equal(t.rejections, s.rejections)
        before.append(s.g[:N].mean())
        after.append(t.g[:N].mean())
    return np.array(before), np.array(after)


def test_the_values_update_keeps_the_joint():
    """ESS on GP × Π Φ(g_n) Π (1 − Φ(g_m)): the function at the data keeps its distribution."""
    b, a = _paired_values()
    d = a - b
    assert np.abs(d).max() > 0  # it moves
    assert abs(d.mean()) < 4 * d.std(ddof=1) / np.sqrt(len(d)), (b.mean(), a.mean())


def test_the_values_check_sees_wrong_labels(monkeypatch):
    """Rejections labelled as acceptances pull the function up: the check fails."""
    import lattice_lgm.gpds.state as S

    monkeypatch.setattr(S, "labels", lambda n, m: np.ones(n + m))
    b, a = _paired_values()
    d = a - b
    assert abs(d.mean()) > 4 * d.std(ddof=1) / np.sqrt(len(d))


def _paired_moves(seed=5, n_rep=1500):
    """The function at the data and at the rejections, before and after 10 §4.2 moves."""
    import lattice_lgm.gpds.history as H

    rng = np.random.default_rng(seed)
    out = {"G_N": ([], []), "G_M": ([], [])}
    acc = 0
    for _ in range(n_rep):
        s = LatentHistory.from_prior(sample_prior(KERNEL, BASE, N, rng))
        t = s
        for _ in range(10):
            t, a = H.move_rejections(t, rng, KERNEL, BASE, step=0.2, relax=0.5)
            acc += a
        out["G_N"][0].append(s.g[:N].mean())
        out["G_N"][1].append(t.g[:N].mean())
        if s.n_rejections:
            out["G_M"][0].append(s.g[N:].mean())
            out["G_M"][1].append(t.g[N:].mean())
    return out, acc / (10 * n_rep)


def _z(before, after):
    d = np.asarray(after) - np.asarray(before)
    return d.mean() / (d.std(ddof=1) / np.sqrt(len(d)))


def test_the_joint_location_move_keeps_the_joint():
    """§4.2 as the paper states it: random-walk locations, the function there given the
    state, underrelaxation at the data and the new locations; the function at the data and
    at the rejections keep their distributions."""
    out, rate = _paired_moves()
    assert 0.05 < rate < 0.9
    for name, (b, a) in out.items():
        assert abs(_z(b, a)) < 4, name


@pytest.mark.slow  # the check's power against a planted bug (34 s of the default tier)
def test_the_location_check_sees_a_wrong_acceptance_ratio(monkeypatch):
    """With Φ shifted in the ratio (a target that is not the posterior) the function drifts."""
    from scipy import special

    import lattice_lgm.gpds.history as H

    monkeypatch.setattr(H, "log_link",
                        lambda name: lambda z: special.log_expit(np.asarray(z) - 1.5))
    out, _ = _paired_moves()
    assert abs(_z(*out["G_N"])) > 4


PRED_KERNEL = SquaredExponential(sd=2.0, lengthscale=0.1)  # a bumpy density: points cluster


def _distances(predict, n_rep=8000, seed=8):
    """|x_{N+1} − x_1| from one prior run of N + 1, and from ``predict`` after a run of N."""
    rng = np.random.default_rng(seed)
    ref, got = [], []
    for _ in range(n_rep):
        s = sample_prior(PRED_KERNEL, BASE, N + 1, rng).samples
        ref.append(abs(s[N, 0] - s[0, 0]))
        st = LatentHistory.from_prior(sample_prior(PRED_KERNEL, BASE, N, rng))
        got.append(abs(predict(st, rng)[0, 0] - st.data[0, 0]))
    ref, got = np.array(ref), np.array(got)
    return (got.mean() - ref.mean()) / np.sqrt(ref.var() / n_rep + got.var() / n_rep)


def test_predictive_samples_continue_the_history():
    """§4.4: run on from the latent history, the next point is Algorithm 1's (N+1)-th: its
    distance to the data has the distribution it has in one run (two-sample, 4 SE)."""
    from lattice_lgm.gpds import predictive_samples

    z = _distances(lambda st, rng: predictive_samples(st, rng, PRED_KERNEL, BASE, 1))
    assert abs(z) < 4, z


@pytest.mark.slow  # the check's power against a planted bug (34 s of the default tier)
def test_the_predictive_check_sees_a_fresh_density():
    """Drawing the next point from a fresh density (the history ignored) is caught."""
    z = _distances(lambda st, rng: sample_prior(PRED_KERNEL, BASE, 1, rng).samples)
    assert abs(z) > 4, z


@pytest.mark.slow  # 33 s; each move it composes is checked in the default tier above
def test_a_whole_sweep_keeps_the_joint():
    """The composition (M, locations, values by ESS, θ by §4.3's M–H) from a joint draw: M,
    the function at the data and log θ keep their distributions."""
    import math

    from lattice_lgm.gpds import sweep
    from lattice_lgm.hyperpriors import LogNormal

    hp = LogNormal(math.log(0.3), 0.5)
    rng = np.random.default_rng(10)
    stats = {"M": ([], []), "G_N": ([], []), "log_ell": ([], [])}
    for _ in range(1000):
        ell = float(hp.sample(rng))
        k = SquaredExponential(sd=1.5, lengthscale=ell)
        s0 = s = LatentHistory.from_prior(sample_prior(k, BASE, N, rng))
        for _ in range(4):
            s, k, _, _ = sweep(s, rng, k, BASE, hyperpriors={"lengthscale": hp},
                               kernel_method="mh", step=0.2, relax=0.5, hyper_step=0.5)
        for key, (b, a) in stats.items():
            b.append({"M": s0.n_rejections, "G_N": s0.g[:N].mean(), "log_ell": math.log(ell)}[key])
            a.append({"M": s.n_rejections, "G_N": s.g[:N].mean(),
                      "log_ell": math.log(k.lengthscale[0])}[key])
    for key, (b, a) in stats.items():
        assert abs(_z(b, a)) < 4, key
