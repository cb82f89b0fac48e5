"""RMHMC for probit GP classification: metric, Hamiltonian and gradient against finite
differences, the generalised leapfrog's reversibility, volume preservation and O(ε²) energy
error, and the posterior of a two-point problem against quadrature (a planted bug fails).

False-failure rate: four two-sided 4-SE checks (6.3e-5 each) in the posterior test (slow
tier: two 3000-step chains, ~35 s on a quiet machine): 2.5e-4.
"""

from __future__ import annotations

import numpy as np
import pytest

from lattice_lgm.errors import InvalidParameterError
from lattice_lgm.samplers.ep import expectation_propagation
from lattice_lgm.samplers.rmhmc import RiemannGPC, leapfrog, rmhmc_step
from tests.samplers.test_ep import _quadrature

FALSE_FAILURE_RATE = 2.5e-4

K3 = np.array([[2.0, 1.2, 0.5], [1.2, 2.0, 1.2], [0.5, 1.2, 2.0]])
Y3 = [1, 0, 1]


@pytest.fixture(autouse=True)
def _one_thread():
    """On 2 × 2 and 3 × 3 matrices BLAS and Numba threads only wait for each other (20×
    slower on a busy machine)."""
    from lattice_lgm import threads

    with threads.using(threads.thread_budget(1, threads=1)):
        yield


def _targets():
    ep = expectation_propagation(K3, Y3)
    return [RiemannGPC(K3, Y3), RiemannGPC(K3, Y3, 0.6, ep.mean, ep.tau_site)]


def _fd(fun, x, h=1e-6):
    out = []
    for j in range(len(x)):
        e = np.zeros(len(x))
        e[j] = h
        out.append((fun(x + e) - fun(x - e)) / (2 * h))
    return np.array(out)


@pytest.mark.parametrize("k", [0, 1])
def test_metric_hamiltonian_and_gradients_against_finite_differences(k):
    t = _targets()[k]
    rng = np.random.default_rng(k)
    f, p = rng.normal(0, 1.2, 3), rng.normal(0, 1, 3)
    # the target's gradient; the metric is its negative Hessian (§4.2)
    np.testing.assert_allclose(t.log_target(f)[1], _fd(lambda x: t.log_target(x)[0], f),
                               rtol=1e-6, atol=1e-8)
    d, dd = t.metric_diag(f)
    hess = np.array([_fd(lambda x, j=j: t.log_target(x)[1][j], f) for j in range(3)])
    np.testing.assert_allclose(np.linalg.inv(K3) + np.diag(d), -hess, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dd, np.diag(np.array([_fd(lambda x, j=j: t.metric_diag(x)[0][j], f)
                                                     for j in range(3)])), rtol=1e-5,
                               atol=1e-7)
    ginv, log_det = t.inverse_metric(d)
    g = np.linalg.inv(K3) + np.diag(d)
    np.testing.assert_allclose(ginv, np.linalg.inv(g), rtol=1e-10, atol=1e-12)
    assert log_det == pytest.approx(np.linalg.slogdet(g)[1], rel=1e-10)
    # ∂H/∂f with the metric's derivative (eq. 12)
    np.testing.assert_allclose(t.grad_h(f, p), _fd(lambda x: t.hamiltonian(x, p), f),
                               rtol=1e-5, atol=1e-7)


def test_the_momentum_has_the_metric_as_covariance():
    t = _targets()[1]
    f = np.array([0.3, -0.2, 0.5])
    rng = np.random.default_rng(3)
    p = np.array([t.draw_momentum(f, rng) for _ in range(20000)])
    g = np.linalg.inv(K3) + np.diag(t.metric_diag(f)[0])
    np.testing.assert_allclose(np.cov(p.T), g, atol=0.06 * np.abs(g).max())


def test_the_generalised_leapfrog_is_reversible_and_preserves_volume():
    t = _targets()[0]
    f, p = np.array([0.5, -0.3, 1.0]), np.array([0.4, 0.2, -0.6])
    f1, p1 = leapfrog(t, f, p, 0.3, 4, n_fixed=30)
    f2, p2 = leapfrog(t, f1, -p1, 0.3, 4, n_fixed=30)
    np.testing.assert_allclose(f2, f, atol=1e-9)
    np.testing.assert_allclose(-p2, p, atol=1e-9)

    def flow(x):
        a, b = leapfrog(t, x[:3], x[3:], 0.3, 2, n_fixed=30)
        return np.concatenate([a, b])

    x = np.concatenate([f, p])
    jac = np.array([_fd(lambda v, j=j: flow(v)[j], x, h=1e-5) for j in range(6)])
    assert abs(np.linalg.det(jac)) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("k", [0, 1])
def test_the_energy_error_is_second_order(k):
    """Over a trajectory of fixed length, halving ε quarters the error in H."""
    t = _targets()[k]
    f, p = np.array([0.5, -0.3, 1.0]), np.array([0.4, 0.2, -0.6])
    h0 = t.hamiltonian(f, p)
    errs = []
    for eps in (0.2, 0.1, 0.05):
        a, b = leapfrog(t, f, p, eps, round(0.8 / eps), n_fixed=40)
        errs.append(abs(t.hamiltonian(a, b) - h0))
    assert 3.0 < errs[0] / errs[1] < 5.3 and 3.0 < errs[1] / errs[2] < 5.3, errs


def _chain(target, n, seed):
    rng = np.random.default_rng(seed)
    f, out, acc = np.zeros(2), [], 0
    for _ in range(n):
        f, info = rmhmc_step(target, f, rng, step_size=0.7, n_leapfrog=3)
        out.append(f)
        acc += info.accepted
    return np.array(out), acc / n


def _check_posterior(draws):
    import arviz as az

    _, mean, cov = _quadrature(np.array([[3.0, 2.4], [2.4, 3.0]]), [1, 0])
    bad = []
    for j in range(2):
        for stat, want in ((draws[:, j], mean[j]), ((draws[:, j] - mean[j]) ** 2, cov[j, j])):
            se = float(np.asarray(az.mcse(stat[None], method="mean")).reshape(-1)[0])
            if abs(stat.mean() - want) > 4 * se:
                bad.append((j, stat.mean(), want, se))
    return bad


@pytest.mark.slow
def test_rmhmc_recovers_a_two_point_posterior():
    t = RiemannGPC(np.array([[3.0, 2.4], [2.4, 3.0]]), [1, 0])
    draws, rate = _chain(t, 3000, 5)
    assert 0.6 < rate <= 1.0
    assert _check_posterior(draws) == []


@pytest.mark.slow
def test_the_posterior_check_sees_a_missing_log_determinant(monkeypatch):
    """Without ½ log |G(f)| in H (eq. 11) the chain targets another density."""
    import lattice_lgm.samplers.rmhmc as R

    t = RiemannGPC(np.array([[3.0, 2.4], [2.4, 3.0]]), [1, 0])
    monkeypatch.setattr(R.RiemannGPC, "log_det_metric", lambda self, chol: 0.0)
    draws, _ = _chain(t, 3000, 5)
    assert _check_posterior(draws) != []


def test_bad_inputs_are_refused():
    t = _targets()[0]
    rng = np.random.default_rng(0)
    with pytest.raises(InvalidParameterError, match="step_size"):
        rmhmc_step(t, np.zeros(3), rng, step_size=0.0, n_leapfrog=3)
    with pytest.raises(InvalidParameterError, match="n_leapfrog"):
        rmhmc_step(t, np.zeros(3), rng, step_size=0.1, n_leapfrog=0)
    with pytest.raises(InvalidParameterError, match="shape"):
        rmhmc_step(t, np.zeros(2), rng, step_size=0.1, n_leapfrog=3)
    with pytest.raises(InvalidParameterError, match="beta"):
        RiemannGPC(K3, Y3, beta=1.5)
    with pytest.raises(InvalidParameterError, match="both q_mean and q_tau"):
        RiemannGPC(K3, Y3, q_mean=np.zeros(3))
