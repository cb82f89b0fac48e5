"""Murray–Adams hyperparameter moves: exact posteriors by quadrature, prior invariance, errors.

Statistical tests (marker ``statistical``) use independent chains: each chain starts at an exact
draw of the target and is run for a few sweeps; an invariant sampler leaves the final draws
distributed as the target, and the chains are independent, so a KS test is exact up to the
quadrature grid.  Each KS test uses level ``ALPHA = 1e-4``; with the 2 tests per case over the
cases below (≤ 40 tests) the family-wise false-failure rate is ≤ 4e-3 per run of this file.
Seeds are fixed and were not tuned.  The "broken" tests monkeypatch a defect into a sampler and
assert that the same test then fails (p < ALPHA), showing that the tests can fail.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from lattice_lgm.covariance import SquaredExponential
from lattice_lgm.errors import (
    InvalidParameterError,
    ParameterOutOfBoundsError,
    SamplerError,
    ShapeMismatchError,
)
from lattice_lgm.hyperpriors import LogNormal, Normal, PCPriorRange
from lattice_lgm.likelihoods import Gaussian, Poisson
from lattice_lgm.models import LatentGaussianModel
from lattice_lgm.priors import DensePrior
from lattice_lgm.samplers import (
    EllipticalSlice,
    Gibbs,
    HyperMove,
    _hyper_reps,
    chain_rngs,
    hyper,
    init_state,
    representations_for,
    state_from_fields,
)

from .cases import (
    BACKENDS,
    HAS_CHOLMOD,
    Grid2D,
    N,
    cases,
    conditional_draws,
    gaussian_model,
    make_prior,
    needs_cholmod,
    prior_start,
    state_cov,
)

#: family-wise false-failure rate of this module per run (module docstring); summed by conftest.py
FALSE_FAILURE_RATE = 4e-3

ALPHA = 1e-4
N_CHAINS = 120
N_SWEEPS = 3

_DATA = np.random.default_rng(20261122).normal(size=N)
_GRIDS: dict[str, Grid2D] = {}


def _grid(backend: str, model) -> Grid2D:
    if backend not in _GRIDS:
        _GRIDS[backend] = Grid2D(model, 80)
    return _GRIDS[backend]


def _skip_if_no_cholmod(backend: str, rep: str) -> None:
    if needs_cholmod(backend, rep) and not HAS_CHOLMOD:
        pytest.skip("GMRF site-specific surrogates factor Q + Π with CHOLMOD (scikit-sparse)")


def _posterior_run(backend: str, move_kw: dict, seed: int, n_sweeps: int = N_SWEEPS,
                   n_chains: int = N_CHAINS):
    """Start at exact posterior draws, run sweeps, return the final (sd, range) and KS p-values."""
    model = gaussian_model(backend, _DATA, noise_sd=0.5)
    grid = _grid(backend, model)
    rng = np.random.default_rng(seed)
    thetas = grid.sample(rng, n_chains)
    f = np.concatenate([conditional_draws(model, dict(t, mean=0.0), rng, 1) for t in thetas])
    rngs = chain_rngs(seed, n_chains)
    state = state_from_fields(model, f, thetas, rngs)
    sweep = Gibbs(HyperMove(model, **move_kw), EllipticalSlice(model), n_latent=2)
    for _ in range(n_sweeps):
        state, info = sweep.step(state, rngs)
    p = [stats.kstest(state.theta[k], grid.cdf(k)).pvalue for k in ("sd", "range")]
    return p, info


@pytest.mark.statistical
@pytest.mark.parametrize(("backend", "rep"), cases())
def test_hyperparameter_posterior_matches_quadrature(backend, rep):
    """Each representation on each backend leaves p(sd, range | y) (by quadrature) invariant."""
    _skip_if_no_cholmod(backend, rep)
    p, info = _posterior_run(backend, {"representation": rep}, seed=11)
    assert min(p) > ALPHA, f"{backend}/{rep}: KS p-values {p}"
    assert info["n_cov"].sum() > 0 and info["n_loglik"].sum() > 0


@pytest.mark.statistical
@pytest.mark.parametrize("move_kw", [
    {"representation": "surr-site", "scheme": "joint"},
    {"representation": "surr-site", "parameterisation": "ridge"},
    {"representation": "prior-white", "method": "mh", "proposal_sd": 0.5},
    {"representation": "surr-site", "method": "mh", "proposal_sd": 0.5},
    {"representation": "fixed", "method": "mh", "proposal_sd": 0.5},
    {"representation": "post-taylor", "step_out": False, "width": 0.5},
], ids=["joint-slice", "ridge", "alg2-mh", "alg3-mh", "alg1-mh", "no-stepout"])
def test_algorithm_variants_match_quadrature(move_kw):
    """Algorithms 1–3 (M–H), the hyperrectangle slice and the ridge parameterisation."""
    p, _ = _posterior_run("dense", move_kw, seed=12)
    assert min(p) > ALPHA, f"{move_kw}: KS p-values {p}"


@pytest.mark.slow
@pytest.mark.statistical
def test_broken_post_jacobian_is_detected(monkeypatch):
    """A wrong Jacobian in eq. 14 (the N(ĝ; f, S) term with the wrong sign) makes the
    quadrature test fail.  Dropping the term altogether shifts this small Gaussian problem's
    posterior too little to resolve with 300 chains (measured p ≈ 0.02): that defect is caught
    by the Geweke test of the surrogate marginal instead (test_geweke.py)."""
    original = _hyper_reps._log_normal_sites
    monkeypatch.setattr(_hyper_reps, "_log_normal_sites", lambda g, f, prec: -original(g, f, prec))
    p, _ = _posterior_run("dense", {"representation": "post-taylor"}, seed=13, n_sweeps=12,
                          n_chains=300)
    assert min(p) < ALPHA, f"the broken sampler passed: p-values {p}"


@pytest.mark.statistical
def test_broken_surrogate_marginal_is_detected(monkeypatch):
    """Surrogate-data slice sampling without the N(g; 0, K_θ + S_θ) factor of eq. 11 (keeping
    only L(f)) fails the quadrature test (measured p < 1e-20)."""

    def init(self, ctx, ch, kind, rng, _orig=_hyper_reps._Surrogate.__init__):
        _orig(self, ctx, ch, kind, rng)
        self.logp0 = ch.loglik

    def evaluate(self, theta, prior):
        ctx, ch = self.ctx, self.ch
        prec, _ = ctx.site_fit(self.kind, theta, prior, ch.beta)
        sc = prior.surrogate(self.g, ctx.state_array(prior, prec)[0])
        f = sc.colorize(self.eta) + sc.mean
        ll = ctx.loglik(f, ch.beta, theta)
        return ll, _hyper_reps._Proposal(theta, prior, f, None, ll)

    monkeypatch.setattr(_hyper_reps._Surrogate, "__init__", init)
    monkeypatch.setattr(_hyper_reps._Surrogate, "evaluate", evaluate)
    p, _ = _posterior_run("dense", {"representation": "surr-site"}, seed=15, n_sweeps=6)
    assert min(p) < ALPHA, f"the broken sampler passed: p-values {p}"


@pytest.mark.slow
@pytest.mark.statistical
def test_broken_hyperprior_jacobian_is_detected(monkeypatch):
    """Using the natural-scale hyperprior density in log coordinates makes the test fail."""

    def log_h_term(self, name, value):
        return self.model.hyperpriors[name].logpdf(value)

    monkeypatch.setattr(HyperMove, "_log_h_term", log_h_term)
    p, _ = _posterior_run("dense", {"representation": "prior-white"}, seed=14, n_sweeps=15,
                          n_chains=300)
    assert min(p) < ALPHA, f"the broken sampler passed: p-values {p}"


# -- prior invariance: a (nearly) flat likelihood keeps θ ~ p_h and f | θ ~ N(0, K_θ) --------------
@pytest.mark.statistical
@pytest.mark.parametrize(("backend", "rep"), cases())
def test_prior_invariance(backend, rep):
    """With noise sd 1e4 the posterior is the prior to ~1e-8; started at exact prior draws,
    θ stays distributed as its hyperprior and whiten(f) stays N(0, I) (χ² of its norm)."""
    _skip_if_no_cholmod(backend, rep)
    model, state, rngs = prior_start(backend, _DATA, N_CHAINS, seed=21, stream_seed=22)
    prior = model.prior
    sweep = Gibbs(HyperMove(model, rep), EllipticalSlice(model), n_latent=1)
    for _ in range(2):
        state, _ = sweep.step(state, rngs)
    p_sd = stats.kstest(state.theta["sd"], model.hyperpriors["sd"].cdf).pvalue
    p_r = stats.kstest(state.theta["range"], model.hyperpriors["range"].cdf).pvalue
    chi = [float(np.sum(state.priors[c].whiten(state.f[c:c + 1]) ** 2)) for c in range(N_CHAINS)]
    p_chi = stats.kstest(chi, stats.chi2(prior.state_size).cdf).pvalue
    assert min(p_sd, p_r, p_chi) > ALPHA, (p_sd, p_r, p_chi)


# -- exact identities -----------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_white_vector_stays_in_step_with_the_field(backend):
    """After hyper moves and ESS, f = W(θ) white holds for every chain (to round-off)."""
    rep = "prior-white"
    model = gaussian_model(backend, _DATA, noise_sd=0.5)
    rngs = chain_rngs(3, 4)
    state = init_state(model, rngs)
    for r in representations_for(model.prior):
        if needs_cholmod(backend, r) and not HAS_CHOLMOD:
            continue
        state, _ = Gibbs(HyperMove(model, r), EllipticalSlice(model), n_latent=2).step(
            state, rngs)
        ops = hyper.white_ops(model.prior)
        for c in range(4):
            f = ops.colorize(state.priors[c], state.white[c:c + 1])
            np.testing.assert_allclose(f, state.f[c:c + 1], atol=1e-9, err_msg=f"{rep} {c}")
        assert state.priors[0].params["sd"] == pytest.approx(state.theta["sd"][0])


def test_cached_loglik_matches_a_fresh_evaluation():
    """The state's cached log-likelihood equals the likelihood at its field (every move)."""
    model = gaussian_model("dense", _DATA, noise_sd=0.5, names=("sd", "range", "mean"))
    rngs = chain_rngs(4, 3)
    state = init_state(model, rngs)
    for r in representations_for(model.prior):
        state, _ = Gibbs(HyperMove(model, r), EllipticalSlice(model), n_latent=1).step(
            state, rngs)
        eta = state.f + state.theta["mean"][:, None]
        np.testing.assert_allclose(state.loglik, model.likelihood.loglik(eta), rtol=1e-10)


def test_state_inputs_are_not_modified():
    """Steps return new states; the input state is untouched (immutable state)."""
    model = gaussian_model("circulant", _DATA, noise_sd=0.5)
    rngs = chain_rngs(5, 2)
    state = init_state(model, rngs)
    f0, w0, t0 = state.f.copy(), state.white.copy(), {k: v.copy() for k, v in state.theta.items()}
    Gibbs(HyperMove(model, "surr-scalar"), EllipticalSlice(model), n_latent=2).step(state, rngs)
    np.testing.assert_array_equal(state.f, f0)
    np.testing.assert_array_equal(state.white, w0)
    for k in t0:
        np.testing.assert_array_equal(state.theta[k], t0[k])


def test_mean_offset_moves_with_every_representation():
    """The mean offset m (the paper's way) is sampled, and the counters say no covariance
    is built when only m moves."""
    model = gaussian_model("dense", _DATA + 2.0, noise_sd=0.5, names=("mean",))
    rngs = chain_rngs(6, 3)
    state = init_state(model, rngs)
    for r in representations_for(model.prior):
        new, info = HyperMove(model, r).step(state, rngs)
        assert not np.array_equal(new.theta["mean"], state.theta["mean"]), r
        assert info["n_cov"].sum() == 0, r
        assert (info["n_loglik"] > 0).all(), r


def test_poisson_lgcp_runs_on_every_backend_and_representation():
    """A Poisson model with sd, range and mean sampled runs every representation."""
    rng = np.random.default_rng(7)
    counts = rng.poisson(np.exp(0.5 + rng.normal(size=N) * 0.5))
    for backend in BACKENDS:
        prior = make_prior(backend)
        model = LatentGaussianModel(prior, Poisson(counts), hyperpriors={
            "sd": LogNormal(0.0, 0.5), "range": LogNormal(np.log(3.0), 0.3, upper=8.0),
            "mean": Normal(0.0, 2.0)})
        rngs = chain_rngs(8, 2)
        state = init_state(model, rngs)
        for r in representations_for(prior):
            if needs_cholmod(backend, r) and not HAS_CHOLMOD:
                continue
            state, info = Gibbs(HyperMove(model, r), EllipticalSlice(model)).step(state, rngs)
            assert np.isfinite(state.loglik).all(), (backend, r)
            assert (info["n_loglik"] >= 10).all()


# -- errors ---------------------------------------------------------------------------------------
def test_bad_configurations_raise_named_errors():
    model = gaussian_model("circulant", _DATA, noise_sd=0.5)
    with pytest.raises(InvalidParameterError, match="representation='surr-site' is not avail"):
        HyperMove(model, "surr-site")
    with pytest.raises(InvalidParameterError, match="unknown"):
        HyperMove(model, "surr-magic")
    with pytest.raises(InvalidParameterError, match="does not sample"):
        HyperMove(model, "prior-white", params=["mean"])
    with pytest.raises(InvalidParameterError, match="method"):
        HyperMove(model, "prior-white", method="hmc")
    with pytest.raises(InvalidParameterError, match="ridge"):
        HyperMove(model, "prior-white", params=["sd"], parameterisation="ridge")
    with pytest.raises(InvalidParameterError, match="width"):
        HyperMove(model, "prior-white", width=0.0)


def test_fixed_is_refused_for_smooth_kernels_on_the_torus():
    from lattice_lgm import Lattice
    from lattice_lgm.covariance import SquaredExponential
    from lattice_lgm.priors import CirculantPrior

    prior = CirculantPrior(Lattice((N,), spacing=1.0), SquaredExponential(range=2.0),
                           max_range=4.0)
    model = LatentGaussianModel(prior, Gaussian(_DATA, noise_sd=0.5),
                                hyperpriors={"range": LogNormal(0.5, 0.3, upper=4.0)})
    assert "fixed" not in representations_for(prior)
    with pytest.raises(InvalidParameterError, match="smooth kernel"):
        HyperMove(model, "fixed")


def test_circulant_range_prior_must_fit_the_torus():
    prior = make_prior("circulant")
    with pytest.raises(ParameterOutOfBoundsError, match="max_range"):
        LatentGaussianModel(prior, Gaussian(_DATA, noise_sd=0.5),
                            hyperpriors={"range": LogNormal(1.0, 0.5)})
    with pytest.raises(ParameterOutOfBoundsError, match="sized for range"):
        LatentGaussianModel(prior, Gaussian(_DATA, noise_sd=0.5),
                            hyperpriors={"range": PCPriorRange(1.0, 0.05, 1, upper=50.0)})


def test_oracle_state_covariance_matches_the_backend():
    """The test oracle itself: K_state from colorize equals the prior's logpdf quadratic form."""
    for backend in BACKENDS:
        prior = make_prior(backend)
        k = state_cov(prior)
        x = prior.sample_state(np.random.default_rng(0), 1)
        q = float(x.reshape(-1) @ np.linalg.solve(k, x.reshape(-1)))
        assert q == pytest.approx(float(prior.quad_form(x)[0]), rel=1e-6)


# -- coefficients as hyperparameters (beta_<name>, moved like the mean) ---------------------------
_X = np.linspace(-1.5, 1.5, N)


def _coef_model(backend: str) -> LatentGaussianModel:
    """Fixed kernel; mean and one coefficient sampled: y = m + b x + f + ε."""
    return LatentGaussianModel(make_prior(backend), Gaussian(_DATA + 1.0 + 0.8 * _X, noise_sd=0.5),
                               hyperpriors={"mean": Normal(0.0, 1.0), "beta_x": Normal(0.0, 1.0)},
                               hyper_covariates={"x": _X})


def _coef_posterior(model):
    """Exact Gaussian posterior of (m, b): y ~ N(A (m, b), K_ss + σ² I), prior N(0, I)."""
    s = model.state_index
    k = state_cov(model.prior)[np.ix_(s, s)] + np.diag(1.0 / model.likelihood.aux_obs)
    a = np.stack([np.ones(N), _X], axis=1)
    ci_a = np.linalg.solve(k, a)
    prec = np.eye(2) + a.T @ ci_a
    cov = np.linalg.inv(prec)
    return cov @ (ci_a.T @ model.likelihood.y_obs), cov


def _coef_run(backend: str, rep: str, seed: int, n_chains: int = N_CHAINS, tamper=None):
    model = _coef_model(backend)
    if tamper is not None:
        tamper(model)
    mu, cov = _coef_posterior(model)
    rng = np.random.default_rng(seed)
    mb = rng.multivariate_normal(mu, cov, size=n_chains)
    thetas = [{"mean": float(m), "beta_x": float(b)} for m, b in mb]
    f = np.concatenate([conditional_draws(model, t, rng, 1) for t in thetas])
    rngs = chain_rngs(seed, n_chains)
    state = state_from_fields(model, f, thetas, rngs)
    sweep = Gibbs(HyperMove(model, rep), EllipticalSlice(model), n_latent=2)
    for _ in range(N_SWEEPS):
        state, info = sweep.step(state, rngs)
    sds = np.sqrt(np.diag(cov))
    return [stats.kstest(state.theta[k], stats.norm(mu[i], sds[i]).cdf).pvalue
            for i, k in enumerate(("mean", "beta_x"))], info


@pytest.mark.statistical
@pytest.mark.parametrize(("backend", "rep"), cases())
def test_coefficient_hyperparameters_match_the_exact_posterior(backend, rep):
    """mean and beta_x as hyperparameters leave their exact Gaussian posterior invariant, and
    moving them builds no covariance (they only shift η)."""
    _skip_if_no_cholmod(backend, rep)
    p, info = _coef_run(backend, rep, seed=31)
    assert min(p) > ALPHA, f"{backend}/{rep}: KS p-values {p}"
    assert info["n_cov"].sum() == 0


def test_forgotten_coefficient_likelihood_is_detected():
    """If the ``fixed`` representation forgot that beta_x shifts η (so it dropped the likelihood
    term from its move, as it legitimately does for kernel parameters), the test above fails."""
    def forget(model):
        model.obs_params = ()

    try:
        p, _ = _coef_run("dense", "fixed", seed=31, n_chains=300, tamper=forget)
    except SamplerError:  # the stale cached likelihood can also make the latent move fail
        return
    assert min(p) < ALPHA, f"the broken sampler passed: p-values {p}"


def test_coefficient_hyperparameters_refusals():
    prior = make_prior("dense")
    lik = Gaussian(_DATA, noise_sd=0.5)
    with pytest.raises(InvalidParameterError, match="beta_x"):
        LatentGaussianModel(prior, lik, hyper_covariates={"x": _X})
    with pytest.raises(InvalidParameterError, match="hyper_init"):
        LatentGaussianModel(prior, lik, hyperpriors={"beta_x": Normal(0.0, 1.0)},
                            hyper_covariates={"x": _X}, hyper_init={"beta_z": 1.0})
    with pytest.raises(ShapeMismatchError, match="hyper_covariates"):
        LatentGaussianModel(prior, lik, hyperpriors={"beta_x": Normal(0.0, 1.0)},
                            hyper_covariates={"x": _X[:-1]})
    m = LatentGaussianModel(prior, lik, hyperpriors={"beta_x": Normal(0.0, 1.0)},
                            hyper_covariates={"x": _X}, hyper_init={"beta_x": 0.5})
    assert m.obs_params == ("mean", "beta_x")
    assert m.initial_theta()["beta_x"] == 0.5
    np.testing.assert_allclose(m.base_obs({"beta_x": 2.0}), 2.0 * _X)


def test_univariate_target_caches_the_other_hyperprior_terms():
    """The univariate slice target recomputes only the moved coordinate's hyperprior term; its
    value is bitwise the full target, _log_h over every coordinate plus the evaluation."""
    model = gaussian_model("dense", _DATA, noise_sd=0.5, names=("sd", "range", "mean"))
    rngs = chain_rngs(8, 2)
    state = init_state(model, rngs)
    for r in ("fixed", "prior-white", "surr-site", "post-site"):
        move = HyperMove(model, r)
        ctx = _hyper_reps._Context(model, move.site_method, move._taylor_fit)
        ch = _hyper_reps._Chain(state.theta_of(0), state.priors[0], state.f[:1], state.white[:1],
                          state.beta[0], float(state.loglik[0]))
        u0 = move._to_u(ch.theta)
        for k in range(len(move.params)):
            prep = move._prepare(ctx, ch, rngs[0])
            logp = move._logp_fn(ctx, prep, ch, u0, k)
            for x in u0[k] + np.array([-0.3, 0.05, 0.4]):
                theta = dict(ch.theta)  # the others exactly the chain's (see the next test)
                name = move.params[k]
                theta[name] = float(model.hyperpriors[name].from_unconstrained(x))
                prior = model.prior_for(theta, ch.prior)
                want = prep.evaluate(theta, prior)[0] + move._log_h(theta)
                assert logp(x)[0] == want, (r, k, x)


def test_sweep_carries_the_chain_hyperprior_terms(monkeypatch):
    """One sweep computes each coordinate's hyperprior term once for the chain, then only at
    proposals and acceptances; the terms it carries into every coordinate's move are bitwise
    those of the chain's θ at that moment (a stale term after an accepted move fails here)."""
    model = gaussian_model("dense", _DATA, noise_sd=0.5, names=("sd", "range", "mean"))
    rngs = chain_rngs(10, 2)
    state = init_state(model, rngs)
    seen = {"checked": 0, "calls": 0}
    real_logp_fn, real_term = HyperMove._logp_fn, HyperMove._log_h_term

    def logp_fn(self, ctx, prep, ch, u_full, k, terms=None):
        assert terms is not None and terms == self._log_h_terms(ch.theta), (k, terms)
        seen["checked"] += 1
        seen["calls"] -= len(self.params)  # the check's own calls
        return real_logp_fn(self, ctx, prep, ch, u_full, k, terms)

    def term(self, name, value):
        seen["calls"] += 1
        return real_term(self, name, value)

    monkeypatch.setattr(HyperMove, "_logp_fn", logp_fn)
    monkeypatch.setattr(HyperMove, "_log_h_term", term)
    for r in ("fixed", "prior-white", "surr-site", "post-site"):
        move = HyperMove(model, r)
        seen.update(checked=0, calls=0)
        state, info = move.step(state, rngs)
        n_par = len(move.params)
        assert seen["checked"] == n_par * state.n_chains, r
        # per chain: the initial terms, one per proposal (an evaluation or a support miss) and
        # one per accepted coordinate. Before the cache it was 2 × n_par per coordinate besides
        # the proposals, 2 × 9 per chain here, which this bound leaves no room for.
        assert info["accepted"].sum() > 0, r
        most = state.n_chains * n_par + info["n_loglik"].sum() + 2 * info["accepted"].sum()
        assert seen["calls"] <= most, (r, seen["calls"], most)


def test_univariate_target_keeps_the_other_coordinates_exact():
    """A univariate move sets only its coordinate: the others are the chain's θ bitwise, so a
    move of the mean builds no covariance even where from_unconstrained(to_unconstrained(sd))
    is not sd (it rebuilt θ from u, one ulp of sd built a covariance per proposal; decision 60)."""
    model = gaussian_model("dense", _DATA, noise_sd=0.5, names=("sd", "range", "mean"))
    rngs = chain_rngs(9, 1)
    state = init_state(model, rngs)
    h_sd = model.hyperpriors["sd"]
    # an sd whose round trip is one ulp off.  Which ones are depends on the CPU (numpy picks its
    # float64 exp and log loops at run time, AVX-512 ones where the CPU has it, libm's otherwise;
    # none is correctly rounded): the redwoods value 0.48687849104216857 is off on some CPUs and
    # exact on this AVX2 one, where one sd in twenty of this grid is off.  Take the first here.
    sd = next((s for s in np.linspace(0.3, 0.7, 1001).tolist()
               if float(h_sd.from_unconstrained(h_sd.to_unconstrained(s))) != s), None)
    assert sd is not None, "no sd in [0.3, 0.7] whose exp(log(sd)) is not sd on this CPU"
    theta = dict(state.theta_of(0), sd=sd)
    prior = model.prior_for(theta, state.priors[0])
    for r in ("fixed", "prior-white", "surr-site", "post-site"):
        move = HyperMove(model, r)
        ctx = _hyper_reps._Context(model, move.site_method, move._taylor_fit)
        ch = _hyper_reps._Chain(theta, prior, state.f[:1], state.white[:1], state.beta[0],
                          float(state.loglik[0]))
        k = move.params.index("mean")
        u0 = move._to_u(ch.theta)
        logp = move._logp_fn(ctx, move._prepare(ctx, ch, rngs[0]), ch, u0, k)
        for x in u0[k] + np.array([-0.3, 0.05, 0.4]):
            prop = logp(x)[1]
            assert prop.theta["sd"] == sd and prop.theta["range"] == theta["range"], r
            assert prop.prior is prior, r
        assert ctx.n_cov == 0, r


def test_a_gibbs_sweep_leaves_the_callers_state_alone():
    """The hyper move's state shares nothing the latent block then rotates in place: with
    coefficients in the Gaussian block, the input state's β, f and white are unchanged
    (the move once returned the input's β, which elliptical slice sampling rotated)."""
    prior = DensePrior(np.linspace(0, 5, 12)[:, None], SquaredExponential(sd=1.0,
                                                                          lengthscale=1.5))
    rng = np.random.default_rng(3)
    x = np.stack([np.ones(12), rng.normal(size=12)])
    y = 1.0 + 0.5 * x[1] + rng.normal(size=12)
    model = LatentGaussianModel(prior, Gaussian(y, noise_sd=1.0), covariates=x,
                                hyperpriors={"sd": LogNormal(0.0, 0.5)})
    rngs = chain_rngs(4, 3)
    state = init_state(model, rngs)
    before = {k: np.array(getattr(state, k)) for k in ("beta", "f", "white")}
    sweep = Gibbs(HyperMove(model, "prior-white"), EllipticalSlice(model), n_latent=3)
    new, _ = sweep.step(state, rngs)
    for k, v in before.items():
        np.testing.assert_array_equal(getattr(state, k), v, err_msg=k)
    assert not np.array_equal(new.beta, before["beta"])
