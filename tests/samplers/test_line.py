"""Slice sampling along a straight line (Murray, Adams & MacKay 2010, §3.1; Neal 2003).

Statistical tests (marker ``statistical``) run many independent chains from exact draws of the
target and test their final states, as ``test_ess.py`` does: KS at ``ALPHA = 1e-4``, per-site
z and variance tests Bonferroni-corrected to ``ALPHA`` per test function.  With 6 statistical
test functions the false-failure rate of this file is ≤ 6e-4 per run.  Seeds are fixed and were
not tuned.  The "broken" test removes the prior's density along the line and shows the
conjugate test then fails.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from lattice_lgm.errors import InvalidParameterError, SamplerError
from lattice_lgm.likelihoods import Gaussian
from lattice_lgm.models import LatentGaussianModel
from lattice_lgm.samplers import LineSlice, chain_rngs, init_state
from lattice_lgm.samplers import line as line_module

from .cases import N, make_prior
from .test_ess import _coefficient_recovery, _conjugate_invariance, _poisson_model, _run

#: family-wise false-failure rate of this module per run (module docstring); summed by conftest.py
FALSE_FAILURE_RATE = 6e-4

ALPHA = 1e-4
REAL_BACKENDS = ("dense", "gmrf")  # real white vectors; circulant ones are refused


@pytest.mark.statistical
@pytest.mark.parametrize("backend", REAL_BACKENDS)
def test_prior_invariance(backend):
    """Flat likelihood: from exact prior draws the chains stay N(0, K) (χ² of the whitened
    state's squared norm)."""
    prior = make_prior(backend)
    model = LatentGaussianModel(prior, Gaussian(np.zeros(N), noise_sd=1e4))
    n = 300
    rngs = chain_rngs(5, n)
    state = _run(LineSlice(model), init_state(model, rngs), rngs, 5)
    chi = np.sum(prior.whiten(state.f).reshape(n, -1) ** 2, axis=1)
    assert stats.kstest(chi, stats.chi2(prior.state_size).cdf).pvalue > ALPHA


def _conjugate(backend: str, width: float = 1.0) -> None:
    _conjugate_invariance(backend, lambda model: LineSlice(model, width=width))


@pytest.mark.statistical
@pytest.mark.parametrize("backend", REAL_BACKENDS)
@pytest.mark.parametrize("width", [1.0, 0.05])
def test_conjugate_posterior_is_invariant(backend, width):
    """Gaussian data on a 6×5 lattice: chains started at exact posterior draws are still exact
    posterior draws after 40 updates; a small width exercises stepping out."""
    _conjugate(backend, width=width)


@pytest.mark.statistical
def test_conjugate_recovery_with_coefficients_in_the_gaussian_block():
    """In-block coefficients move along the line with the field: (f, β) recover their exact
    posterior from prior draws."""
    _coefficient_recovery("dense", LineSlice)


@pytest.mark.statistical
def test_forgotten_prior_along_the_line_is_detected(monkeypatch):
    """Slicing the likelihood alone along the line (no prior term) breaks the conjugate test."""
    real = line_module._line_quadratic

    def broken(model, state, wn, beta_nu):
        qa, qb, qc = real(model, state, wn, beta_nu)
        return np.zeros_like(qa), np.zeros_like(qb), qc  # keeps the width, drops q(ε)

    monkeypatch.setattr(line_module, "_line_quadratic", broken)
    with pytest.raises((AssertionError, SamplerError)):
        _conjugate("dense")


def test_a_chain_is_the_same_alone_or_beside_others():
    """Chain 2 of a three-chain step is bitwise chain 2 stepped alone (DESIGN §5)."""
    model = _poisson_model("dense")
    rngs = chain_rngs(3, [0, 1, 2])
    state = init_state(model, rngs)
    alone_rngs = chain_rngs(3, [2])
    alone = init_state(model, alone_rngs, chains=[2])
    for _ in range(5):
        state, info = LineSlice(model).step(state, rngs)
        alone, info1 = LineSlice(model).step(alone, alone_rngs)
    assert np.array_equal(state.f[2], alone.f[0]) and state.loglik[2] == alone.loglik[0]
    assert info["n_loglik"][2] == info1["n_loglik"][0] >= 1
    lo, hi = info["interval"].T
    assert np.all((lo <= info["step"]) & (info["step"] <= hi) & (lo < 0) & (hi > 0))


def test_refusals_name_the_argument():
    model = _poisson_model("dense")
    with pytest.raises(InvalidParameterError, match="width"):
        LineSlice(model, width=0.0)
    with pytest.raises(InvalidParameterError, match="max_steps_out"):
        LineSlice(model, max_steps_out=0)
    with pytest.raises(InvalidParameterError, match="complex half spectrum"):
        LineSlice(_poisson_model("circulant"))
    with pytest.raises(InvalidParameterError, match="LatentGaussianModel"):
        LineSlice("model")
    rngs = chain_rngs(1, 2)
    state = init_state(model, rngs)
    with pytest.raises(SamplerError, match="finite likelihood"):
        LineSlice(model).step(state._replace(loglik=np.array([0.0, -np.inf])), rngs)


def test_shrink_cap_is_an_error_with_the_state():
    """A cached log-likelihood above the truth puts the current state off the slice: the
    interval shrinks onto it without acceptance and the cap raises."""
    model = _poisson_model("dense")
    rngs = chain_rngs(2, 2)
    state = init_state(model, rngs)
    with pytest.raises(SamplerError, match="cap of 30") as err:
        LineSlice(model, max_shrink=30).step(state._replace(loglik=state.loglik + 1e3), rngs)
    assert err.value.state["n_evals"] >= 30 and "interval" in err.value.state
