"""The LGCP model glue (models/lgcp.py) and the post-hoc analysis (analysis.py)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import xarray as xr

from lattice_lgm import LGCP, Lattice, analysis
from lattice_lgm.errors import InvalidParameterError, ShapeMismatchError, UnsupportedOperationError
from lattice_lgm.hyperpriors import LogNormal, PCPriorRange
from lattice_lgm.models import lgcp_start
from lattice_lgm.models.lgcp_start import chain_starts, initial_state, prepare
from lattice_lgm.reports import describe_run
from lattice_lgm.samplers import chain_rngs, default_sweep

#: family-wise false-failure rate of this module per run, summed by conftest.py
#: (two 4-SE checks at 6e-5 (predictive totals, the prior's P(sd > 2)))
FALSE_FAILURE_RATE = 1.2e-4


def _pattern(n=300, seed=0, side=100.0):
    """Points clustered towards the upper right of a square (x, y order)."""
    rng = np.random.default_rng(seed)
    xy = rng.uniform(0, side, size=(3 * n, 2))
    keep = rng.random(3 * n) < (xy[:, 0] + xy[:, 1]) / (2 * side)
    return xy[keep][:n]


def _covariate(side=100.0, n=40):
    c = (np.arange(n) + 0.5) * side / n
    return xr.DataArray(np.add.outer(c, 2 * c), dims=("y", "x"), coords={"y": c, "x": c})


@pytest.fixture(scope="module")
def model():
    return LGCP(_pattern(), (0, 100, 0, 100), cell_size=6.25, units="m",
                covariates={"z": _covariate()}, formula="~ z")


def test_binning_exposure_and_default_priors(model):
    assert model.lattice.shape == (16, 16)
    assert model.counts.sum() == model.n_points == 300
    assert model.exposure.sum() == pytest.approx(100 * 100)
    rp, sp, ip = (model.prior_spec[k] for k in ("range", "sd", "mean"))
    # INLA statements: P(range < L/10) = 0.05 truncated at L/2; P(sd > 2) = 0.05
    assert rp.upper == pytest.approx(50.0)
    # the truncation renormalises by the untruncated mass below 50, exp(-λ/50), λ = -log(0.05)·10
    lam = -math.log(0.05) * 10.0
    assert float(rp.cdf(10.0)) == pytest.approx(0.05 / math.exp(-lam / 50.0), rel=1e-12)
    assert float(sp.cdf(2.0)) == pytest.approx(0.95)
    assert ip.mean == pytest.approx(math.log(300 / 1e4))
    assert model.prior.sized_for_range == (50.0, 50.0)
    text = model.describe()
    for s in ("P(range < 10) = 0.05 before truncation to range ≤ 50 (0.0910282 after)",
              "P(sd > 2) = 0.05", "m²"):
        assert s in text, s
    # the model is a description: the cross-check is a step of a run (lgcp_start), described
    # beside it by the CLI
    assert "Minimum-contrast" not in text and "start:" not in text
    run = describe_run(model)
    for s in ("Minimum-contrast", "Poisson GLM", "start: sd"):
        assert s in run, s


def test_start_values_come_from_the_cross_check(model):
    prep = prepare(model)
    check, st = prep.check, prep.start.theta
    assert check.min_contrast is not None and check.glm is not None
    assert st["mean"] == pytest.approx(check.glm.intercept - st["sd"] ** 2 / 2)
    np.testing.assert_array_equal(prep.start.beta, check.glm.coef)
    assert st["sd"] == check.min_contrast.sd
    if st["range"] != check.min_contrast.range:  # moved inside the prior's support, said so
        assert "outside the range prior's support" in prep.start.notes[0]
    lo, hi = model.prior_spec["range"].lower, model.prior_spec["range"].upper
    assert lo < st["range"] < hi
    # fitted once per model: the run, its description and the summary share it
    assert prepare(model) is prep
    # with covariates, minimum contrast fits the inhomogeneous pcf with the GLM's trend
    mc = check.min_contrast
    assert mc.inhomogeneous and "Poisson GLM" in mc.intensity_source
    plain = LGCP(_pattern(), (0, 100, 0, 100), cell_size=6.25, units="m")
    assert not prepare(plain).check.min_contrast.inhomogeneous


def test_the_old_name_of_the_latent_model_warns():
    m = LGCP(_pattern(), (0, 100, 0, 100), cell_size=25.0, cross_check=False)
    with pytest.warns(DeprecationWarning, match="LGCP.lgm"):
        assert m.model is m.lgm


def test_the_model_is_a_description():
    """Building an LGCP fits nothing: its own hyperparameters are the priors' medians."""
    m = LGCP(_pattern(), (0, 100, 0, 100), cell_size=12.5)
    spec = m.prior_spec
    theta0 = m.lgm.initial_theta()
    assert theta0["sd"] == pytest.approx(float(spec["sd"].ppf(0.5)))
    assert theta0["range"] == pytest.approx(float(spec["range"].ppf(0.5)))
    assert theta0["mean"] == pytest.approx(float(spec["mean"].ppf(0.5)))
    assert m not in lgcp_start._PREPARED  # no fit until a step asks for one
    # without the cross-check the chains' centre is the priors' medians and log(n/|W|)
    off = prepare(LGCP(_pattern(), (0, 100, 0, 100), cell_size=12.5, cross_check=False))
    assert off.check is None
    assert off.start.theta["sd"] == pytest.approx(float(spec["sd"].ppf(0.5)))
    assert off.start.theta["mean"] == pytest.approx(
        math.log(300 / 1e4) - off.start.theta["sd"] ** 2 / 2)


def test_chain_starts_are_overdispersed_inside_the_supports_and_reproducible(model):
    start = prepare(model).start
    a = chain_starts(model, start, chain_rngs(5, 8))
    b = chain_starts(model, start, chain_rngs(5, 8))
    assert a == b
    for name in ("sd", "range", "mean"):
        vals = np.array([t[name] for t in a])
        hp = model.prior_spec[name]
        assert np.all((vals > hp.lower) & (vals < hp.upper))
        assert np.ptp(vals) > 0  # chains start apart
    zero = chain_starts(model, start, chain_rngs(5, 2), spread=0.0)
    assert zero[0]["sd"] == start.theta["sd"] and zero[1]["range"] == start.theta["range"]


def test_refusals():
    xy = _pattern(50)
    with pytest.raises(InvalidParameterError, match="exactly one of cell_size"):
        LGCP(xy, (0, 100, 0, 100))
    with pytest.raises(InvalidParameterError, match="exactly one of cell_size"):
        LGCP(xy, (0, 100, 0, 100), cell_size=10.0, shape=(10, 10))
    with pytest.raises(InvalidParameterError, match="backend"):
        LGCP(xy, (0, 100, 0, 100), cell_size=10.0, backend="fft")
    with pytest.raises(InvalidParameterError, match="names covariates"):
        LGCP(xy, (0, 100, 0, 100), cell_size=10.0, formula="~ z")
    with pytest.raises(InvalidParameterError, match="allow_dense"):
        LGCP(xy, (0, 100, 0, 100), cell_size=1.0, backend="dense", cross_check=False)
    with pytest.raises(InvalidParameterError, match="upper"):
        LGCP(xy, (0, 100, 0, 100), cell_size=10.0,
             range_prior=PCPriorRange(10.0, 0.05, 2), cross_check=False)
    with pytest.raises(InvalidParameterError, match="Hyperprior"):
        LGCP(xy, (0, 100, 0, 100), cell_size=10.0, sd_prior=1.0)
    with pytest.raises(UnsupportedOperationError, match="space-time"):
        LGCP(np.c_[xy, np.zeros(len(xy))], (0, 100, 0, 100), backend="gmrf",
             lattice=Lattice((2, 10, 10), spacing=(1.0, 10.0, 10.0)))


def test_smoothness_keys_belong_to_their_backend():
    xy = _pattern(50)
    kw = {"cell_size": 10.0, "cross_check": False}
    with pytest.raises(InvalidParameterError, match=r"nu=1\.5 sets .* nu = alpha - d/2"):
        LGCP(xy, (0, 100, 0, 100), backend="gmrf", nu=1.5, **kw)
    for backend in ("circulant", "dense"):
        with pytest.raises(InvalidParameterError, match="alpha=2 is the SPDE order"):
            LGCP(xy, (0, 100, 0, 100), backend=backend, alpha=2, **kw)
    # a fractional order is refused, never truncated to an integer
    with pytest.raises(InvalidParameterError, match=r"alpha=2\.5 is not supported"):
        LGCP(xy, (0, 100, 0, 100), backend="gmrf", alpha=2.5, **kw)
    with pytest.raises(InvalidParameterError, match="nu"):
        LGCP(xy, (0, 100, 0, 100), nu=-1.0, **kw)
    # the GMRF's smoothness is the one its SPDE order implies (what min contrast then uses)
    g = LGCP(xy, (0, 100, 0, 100), backend="gmrf", **kw)
    assert (g.nu, g.alpha) == (1.0, 2)
    c = LGCP(xy, (0, 100, 0, 100), nu=0.5, **kw)
    assert (c.nu, c.alpha) == (0.5, None) and c.kernel(1.0, 20.0).nu == 0.5


def test_other_backends_and_user_priors_build():
    xy = _pattern(80)
    g = LGCP(xy, (0, 100, 0, 100), cell_size=10.0, backend="gmrf", cross_check=False)
    assert g.prior.shape == (10, 10)
    d = LGCP(xy, (0, 100, 0, 100), cell_size=10.0, backend="dense",
             range_prior=LogNormal(math.log(20.0), 0.5, upper=60.0), cross_check=False)
    assert d.prior_spec["range"].upper == 60.0
    assert prepare(d).check is None


# -- analysis -------------------------------------------------------------------------------------
def _fake_posterior(model, seed=1, chains=2, draws=5):
    """A posterior Dataset with known values (no sampling), in the documented layout."""
    rng = np.random.default_rng(seed)
    lat = model.lattice
    f = rng.normal(0, 0.5, size=(chains, draws, *lat.shape))
    ds = xr.Dataset(
        {"f": (("chain", "draw", *lat.dims), f),
         "sd": (("chain", "draw"), rng.uniform(0.5, 1.5, (chains, draws))),
         "range": (("chain", "draw"), rng.uniform(40, 80, (chains, draws))),
         "intercept": (("chain", "draw"), rng.normal(-3.5, 0.1, (chains, draws))),
         "beta": (("chain", "draw", "covariate"), rng.normal(0, 0.3, (chains, draws, 1)))},
        coords={"chain": np.arange(chains), "draw": np.arange(draws), "covariate": ["z"],
                **lat.coords()})
    return ds


def test_intensity_units_and_formula(model):
    post = _fake_posterior(model)
    d = model.design  # beta is on the covariate's original scale
    X = d.center[0] + d.scale[0] * np.nan_to_num(d.X[..., 0])
    eta = (post["f"].values + post["intercept"].values[..., None, None]
           + post["beta"].values[..., 0][..., None, None] * X)
    lam = analysis.intensity(model, post)
    np.testing.assert_allclose(lam.values, np.exp(eta), rtol=1e-12)
    assert lam.attrs["units"] == "points per m²"
    ha = analysis.intensity(model, post, per="ha")
    np.testing.assert_allclose(ha.values, np.exp(eta) * 1e4, rtol=1e-12)
    km = analysis.intensity(model, post, per="km2")
    np.testing.assert_allclose(km.values, np.exp(eta) * 1e6, rtol=1e-12)
    with pytest.raises(InvalidParameterError, match="per="):
        analysis.intensity(model, post, per="acre")


def test_relative_risk_exceedance_and_totals(model):
    post = _fake_posterior(model)
    rr = analysis.relative_risk(post)
    expect = np.exp(post["f"].values - 0.5 * post["sd"].values[..., None, None] ** 2)
    np.testing.assert_allclose(rr.values, expect, rtol=1e-12)
    ex = analysis.exceedance(rr, thresholds=(1.0, 2.0))
    assert ex.dims == ("threshold", "y", "x")
    np.testing.assert_allclose(ex.sel(threshold=1.0).values, (expect > 1.0).mean(axis=(0, 1)))
    with pytest.raises(InvalidParameterError, match="thresholds"):
        analysis.exceedance(rr, thresholds=(-1.0,))
    lam = analysis.intensity(model, post).values
    tot = analysis.expected_counts(model, post)
    np.testing.assert_allclose(tot.values, (lam * model.exposure).sum(axis=(2, 3)), rtol=1e-12)
    # the left half of the window: exactly the left 8 columns of cells
    half = analysis.expected_counts(model, post, (0, 50, 0, 100))
    np.testing.assert_allclose(half.values, (lam[..., :8] * model.exposure[:, :8]).sum(
        axis=(2, 3)), rtol=1e-12)
    with pytest.warns(UserWarning, match="outside the window"):
        analysis.expected_counts(model, post, (50, 150, 0, 100))


def test_resolution_check_warns_for_coarse_grids(model):
    post = _fake_posterior(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = analysis.resolution_check(model, post)  # ranges 40-80 m, cells 6.25 m: no warning
    assert out["h"] == 6.25
    coarse = post.assign(range=post["range"] * 0 + 20.0)
    with pytest.warns(UserWarning, match="too coarse"):
        analysis.resolution_check(model, coarse)


def test_a_short_run_gives_a_posterior_in_the_documented_layout(model):
    rngs = chain_rngs(3, 2)
    state = initial_state(model, rngs)[0]
    sweep = default_sweep(model.lgm, n_latent=2)
    states = []
    for _ in range(3):
        state, _ = sweep.step(state, rngs)
        states.append(state)
    post = analysis.posterior_dataset(model, states)
    assert post["f"].dims == ("chain", "draw", "y", "x")
    assert post["f"].shape == (2, 3, 16, 16)
    assert list(post["beta"]["covariate"].values) == ["z"]
    # the window field is the state's window cells
    idx = model.prior.window_index()
    np.testing.assert_array_equal(post["f"].values[:, -1].reshape(2, -1),
                                  state.f.reshape(2, -1)[:, idx])
    s = analysis.summarize(analysis.intensity(model, post))
    assert set(s.data_vars) == {"mean", "sd", "quantiles"}
    # intercept and beta are reported on the original scale: the log-intensity they give is
    # the sampler's own, on standardised columns
    own = (post["f"].values[:, -1] + state.theta["mean"][:, None, None]
           + model.coefficient_draws(state)[:, 0, None, None]
           * np.nan_to_num(model.design.X[..., 0]))
    np.testing.assert_allclose(analysis.log_intensity(model, post).values[:, -1], own,
                               rtol=1e-10, atol=1e-12)
    assert post["intercept"].shape == (2, 3) and "mean" not in post


# -- maps and export ------------------------------------------------------------------------------
def _map(model):
    lat = model.lattice
    vals = np.arange(lat.size, dtype=float).reshape(lat.shape)  # row i = y index i
    return xr.DataArray(vals, dims=lat.dims, coords=lat.coords(),
                        attrs={"long_name": "test map", "units": "points per m²"})


def test_plot_map_conventions(model):
    import matplotlib

    matplotlib.use("Agg")
    from lattice_lgm.plotting import plot_map

    da = _map(model)
    ax = plot_map(da, model, points=True)
    im = ax.get_images()[0]
    assert im.origin == "lower"
    assert tuple(im.get_extent()) == (0.0, 100.0, 0.0, 100.0)
    assert ax.get_aspect() == 1.0
    assert "points per m²" in ax.figure.axes[-1].get_ylabel()  # colour bar label with units
    signed = da - da.mean()
    ax2 = plot_map(signed, model)
    norm = ax2.get_images()[0].norm
    assert norm.vcenter == 0.0 and norm.vmin == -norm.vmax  # diverging, centred at 0
    with pytest.raises(Exception, match="reduce"):
        plot_map(da.expand_dims(draw=2), model)


def test_geotiff_and_netcdf_keep_orientation_and_crs(tmp_path):
    import rasterio

    from lattice_lgm.plotting import to_geotiff, to_netcdf

    m = LGCP(_pattern(60) * [1.0, 0.5], (0, 100, 0, 50), cell_size=10.0, units="m",
             crs="EPSG:32617", cross_check=False)
    da = _map(m)
    to_geotiff(da, tmp_path / "m.tif", m)
    with rasterio.open(tmp_path / "m.tif") as src:
        assert src.crs.to_epsg() == 32617
        band = src.read(1)
        # the north-east cell (largest y and x) is in the first raster row, last column
        row, col = src.index(95.0, 45.0)
        assert (row, col) == (0, 9)
        assert band[row, col] == da.values[-1, -1]
        np.testing.assert_array_equal(band[::-1], da.values.astype(np.float32))
    to_netcdf(da, tmp_path / "m.nc", m)
    back = xr.open_dataset(tmp_path / "m.nc", engine="h5netcdf")
    assert back.attrs["crs"] == "EPSG:32617" and "PROJCRS" in back.attrs["crs_wkt"]
    np.testing.assert_array_equal(back["value"].values if "value" in back else
                                  back[da.name].values, da.values)
    back.close()


# -- model criticism ------------------------------------------------------------------------------
def _fixed_posterior(model, *, log_lambda, sd, rng_range, f=None, draws=20, seed=0):
    """A posterior Dataset at fixed hyperparameters; f from the prior at (sd, range) or given."""
    lat = model.lattice
    if f is None:
        from lattice_lgm.covariance import Matern
        from lattice_lgm.priors import CirculantPrior

        prior = CirculantPrior(lat, Matern(model.nu, sd=sd, range=rng_range))
        f = prior.sample(np.random.default_rng(seed), draws)
    f = np.asarray(f)[None]
    n = f.shape[1]
    coords = {"chain": [0], "draw": np.arange(n), **lat.coords()}
    data = {"f": (("chain", "draw", *lat.dims), f),
            "sd": (("chain", "draw"), np.full((1, n), sd)),
            "range": (("chain", "draw"), np.full((1, n), rng_range)),
            "intercept": (("chain", "draw"), np.full((1, n), log_lambda))}
    return xr.Dataset(data, coords=coords)


def test_predictive_patterns_have_the_right_count_and_stay_in_the_window():
    from shapely.geometry import Polygon

    outer = [(0, 0), (100, 0), (100, 100), (0, 100)]
    hole = [(30, 30), (70, 30), (70, 70), (30, 70)]
    geom = Polygon(outer, [hole])
    xy = np.array([[10.0, 10.0], [90.0, 90.0], [10.0, 90.0], [90.0, 10.0], [50.0, 10.0]])
    m = LGCP(xy, geom, cell_size=12.5, cross_check=False)
    lam0 = 0.05  # points per unit², so E N = 0.05 · 8400 = 420
    post = _fixed_posterior(m, log_lambda=math.log(lam0), sd=1.0, rng_range=20.0,
                            f=np.zeros((1, *m.lattice.shape)))
    pats = analysis.predictive_patterns(m, post, 200, np.random.default_rng(1))
    counts = np.array([len(p) for p in pats])
    expect = lam0 * geom.area
    # Poisson total: 200 replicates, mean within 4 SE (false-failure rate 6e-5)
    assert abs(counts.mean() - expect) < 4 * math.sqrt(expect / 200)
    allpts = np.concatenate(pats)
    assert m.window.contains(allpts).all()
    in_hole = (allpts[:, 0] > 30) & (allpts[:, 0] < 70) & (allpts[:, 1] > 30) & (allpts[:, 1] < 70)
    assert not in_hole.any()
    # uniform within the window: the left half holds half the points (binomial, 4 SE)
    left = (allpts[:, 0] < 50).mean()
    assert abs(left - 0.5) < 4 * math.sqrt(0.25 / len(allpts))


def test_prior_dataset_draws_the_stated_priors(model):
    ds = analysis.prior_dataset(model, 400, np.random.default_rng(2))
    assert ds["f"].shape == (1, 400, 16, 16) and ds["beta"].shape == (1, 400, 1)
    # P(sd > 2) = 0.05: binomial with n = 400, 4 SE (false-failure rate 6e-5)
    frac = float((ds["sd"] > 2.0).mean())
    assert abs(frac - 0.05) < 4 * math.sqrt(0.05 * 0.95 / 400)
    assert float(ds["range"].max()) <= 50.0


def test_second_order_check_holds_its_level_and_has_power():
    """Data simulated by spatialstats.simulate_lgcp (an independent simulator) on the model's own
    lattice, checked against predictive patterns of the true model: the MAD envelope test
    rejects with probability ≤ α = 0.05 (exact Monte Carlo test), so over 16 data sets
    P(≥ 5 rejections) ≤ 7e-3 (binomial).  Against a Poisson model (f ≡ 0) it must reject often.
    """
    from lattice_lgm.covariance import Matern
    from lattice_lgm.simulate import simulate_lgcp

    sd, rng_range, mean, side, h = 1.0, 20.0, math.log(0.04) - 0.5, 100.0, 5.0
    rej_true = rej_poisson = 0
    for rep in range(16):
        rng = np.random.default_rng(100 + rep)
        pts, _, _ = simulate_lgcp((0, side, 0, side), kernel=Matern(1.5, sd=sd, range=rng_range),
                                  mean=mean, cell_size=h, rng=rng)
        m = LGCP(pts, (0, side, 0, side), cell_size=h, cross_check=False)
        true = _fixed_posterior(m, log_lambda=mean, sd=sd, rng_range=rng_range, draws=19,
                                seed=rep)
        out = analysis.second_order_check(m, true, nsim=19, rng=rng, n_theory=5)
        rej_true += out["envelope"].outside
        assert out["theory"].shape[0] == 5
        poisson = _fixed_posterior(m, log_lambda=math.log(len(pts) / side**2), sd=1e-9,
                                   rng_range=rng_range, f=np.zeros((19, *m.lattice.shape)))
        rej_poisson += analysis.second_order_check(m, poisson, nsim=19, rng=rng)[
            "envelope"].outside
    print(f"rejections: true model {rej_true}/16, Poisson {rej_poisson}/16")
    assert rej_true <= 4
    assert rej_poisson >= 12


def test_residual_map_limits(model):
    post = _fake_posterior(model)
    lam = analysis.intensity(model, post).mean(("chain", "draw")).values
    raw = (model.counts - lam * model.exposure) / model.exposure
    tiny = analysis.residual_map(model, post, bandwidth=1e-6)  # no smoothing: per-cell residual
    np.testing.assert_allclose(tiny.values, raw, rtol=1e-9, atol=1e-12)
    wide = analysis.residual_map(model, post, bandwidth=1e6)  # flat kernel: the global average
    glob = (model.counts - lam * model.exposure).sum() / model.exposure.sum()
    np.testing.assert_allclose(wide.values, glob, rtol=1e-3)
    with pytest.raises(InvalidParameterError, match="bandwidth"):
        analysis.residual_map(model, post, bandwidth=0.0)


def test_bei_builds_with_its_covariates():
    """The real data set: 3604 trees in 1000 m × 500 m, elevation and slope on 5 m pixels."""
    from pathlib import Path

    import pandas as pd

    from lattice_lgm.covariates import from_table

    data = Path(__file__).resolve().parents[2] / "data"
    pts = pd.read_csv(data / "bei.csv")
    cov = {k: from_table(data / "bei_covariates.csv", k) for k in ("elev", "grad")}
    m = LGCP(pts, (0, 1000, 0, 500), cell_size=10.0, units="m", covariates=cov,
             formula="~ elev + grad")
    assert m.n_points == 3604 and m.lattice.shape == (50, 100)
    assert m.exposure.sum() == pytest.approx(5e5)
    # the slope covariate raises intensity
    # (the known association; mean grad at trees 0.102 vs 0.082 over the plot, data/README.md)
    _, b = m.reported_coefficients(prepare(m).check.glm.coef, prepare(m).check.glm.intercept)
    assert b[1] > 0 and prepare(m).check.glm.coef[1] / prepare(m).check.glm.se[2] > 10
    text = m.describe()
    assert "3604 points" in text and "elev" in text and "grad" in text


def test_intercept_in_the_gaussian_block(model):
    m = LGCP(_pattern(), (0, 100, 0, 100), cell_size=6.25, units="m",
             covariates={"z": _covariate()}, formula="~ z", intercept="block")
    assert m.lgm.hyper_names == ("sd", "range")
    assert m.coef_names == ["(intercept)", "z"]
    centre = math.log(300 / 1e4)
    np.testing.assert_allclose(m.offset, centre)
    np.testing.assert_allclose(m.lgm.beta_sd, [5.0, 1.0])
    # the same reported intercept and coefficient as the hyper model when block intercept +
    # centre = the hyper model's intercept parameter
    rng = np.random.default_rng(3)
    mean, b_std = rng.normal(-3.5, 0.1, (2, 5)), rng.normal(0, 0.3, (2, 5))
    i, b = m.reported_coefficients(np.stack([mean - centre, b_std], axis=-1))
    i2, b2 = model.reported_coefficients(b_std[..., None], mean)
    np.testing.assert_allclose(b, b2, rtol=1e-12)
    np.testing.assert_allclose(i, i2, rtol=1e-12)
    d = model.design  # and they are the original scale's: a + b z = a' + b' x
    np.testing.assert_allclose(b[..., 0], b_std / d.scale[0], rtol=1e-12)
    np.testing.assert_allclose(i, mean - b_std * d.center[0] / d.scale[0], rtol=1e-12)
    with pytest.raises(ShapeMismatchError, match="coef"):
        m.reported_coefficients(b_std[..., None])
    rngs = chain_rngs(4, 2)
    state = initial_state(m, rngs)[0]
    state, _ = default_sweep(m.lgm, n_latent=2).step(state, rngs)
    assert state.beta.shape == (2, 2)
    with pytest.raises(InvalidParameterError, match="intercept"):
        LGCP(_pattern(), (0, 100, 0, 100), cell_size=10.0, intercept="free")
    with pytest.raises(InvalidParameterError, match="Normal intercept_prior"):
        LGCP(_pattern(), (0, 100, 0, 100), cell_size=10.0, intercept="block",
             intercept_prior=LogNormal(0.0, 1.0))


def test_a_user_offset_enters_the_intensity(model):
    off = np.full((16, 16), 0.7)
    m = LGCP(_pattern(), (0, 100, 0, 100), cell_size=6.25, units="m",
             covariates={"z": _covariate()}, formula="~ z", offset=off, cross_check=False)
    post = _fake_posterior(model)
    np.testing.assert_allclose(analysis.log_intensity(m, post).values,
                               analysis.log_intensity(model, post).values + 0.7, rtol=1e-12)


def test_summary_table_diagnostics_and_notes(model):
    # iid draws: with 4 × 1000 the rank R-hat of each row stays below 1.01 (its sampling sd is
    # ≈ 0.001 here), so a convergence note would be a false alarm
    post = _fake_posterior(model, chains=4, draws=1000)
    df = analysis.summary(model, post)
    assert list(df.index) == ["sd", "range", "intercept", "z"]
    np.testing.assert_allclose(df.loc["sd", "mean"], post["sd"].values.mean())
    np.testing.assert_allclose(df.loc["z", "mean"], post["beta"].values[..., 0].mean())
    np.testing.assert_allclose(df.loc["intercept", "97.5%"],
                               np.quantile(post["intercept"].values, 0.975))
    assert df.loc["sd", "cross_check"] == prepare(model).check.min_contrast.sd
    assert np.isfinite(df["r_hat"]).all() and (df["ess_bulk"] > 0).all()
    # independent draws: R-hat near 1, no convergence note; chains shifted apart: the note
    assert not any("not converged" in n for n in df.attrs["notes"])
    shifted = post.assign(sd=post["sd"] + xr.DataArray([0, 0, 0, 3.0], dims="chain"))
    assert any("not converged" in n and "sd" in n
               for n in analysis.summary(model, shifted).attrs["notes"])
    pressed = post.assign(range=post["range"] * 0 + 49.0)
    assert any("upper bound" in n for n in analysis.summary(model, pressed).attrs["notes"])
    # the convergence rule: R-hat ≤ 1.01 and bulk and tail ESS ≥ 400, the log-likelihood too
    assert df.attrs["converged"] and (df["ess_tail"] > 400).all()
    ll = np.random.default_rng(1).normal(size=(4, 1000))
    with_ll = analysis.summary(model, post, loglik=ll)
    assert list(with_ll.index)[-1] == "log_likelihood" and with_ll.attrs["converged"]
    stuck = analysis.summary(model, post, loglik=np.cumsum(ll, axis=1))   # a random walk
    assert not stuck.attrs["converged"]
    assert any("log_likelihood" in n for n in stuck.attrs["notes"])
    short = analysis.summary(model, post.isel(draw=slice(0, 60)))          # 240 draws
    assert not short.attrs["converged"]
    assert any("too few effective draws" in n for n in short.attrs["notes"])


def test_one_dimensional_lgcp_on_the_coal_mining_disasters():
    """Nothing hard-codes 2-D: 191 event times in 40549 days, 811 bins of 50 days (the ESS
    paper's binning), intensity per day."""
    from pathlib import Path

    import pandas as pd

    csv = Path(__file__).resolve().parents[1] / "data" / "coal_mining_disasters.csv"
    days = pd.read_csv(csv)["days_since_1851_03_15"].to_numpy(dtype=float)
    with pytest.warns(UserWarning, match="same coordinates"):  # two disasters on 1875-12-06
        m = LGCP(days, (0.0, 40549.0), lattice=Lattice((811,), spacing=50.0, units="d"))
    assert m.binned.n_duplicates == 1
    assert m.lattice.dims == ("x",) and m.n_points == 191
    assert m.exposure.sum() == pytest.approx(40549.0)  # the last bin is partly outside
    check = prepare(m).check
    assert check.min_contrast is None and check.glm is not None  # min contrast is 2-D only
    assert m.prior_spec["range"].ndim == 1
    rngs = chain_rngs(2, 2)
    state = initial_state(m, rngs)[0]
    state, _ = default_sweep(m.lgm, n_latent=2).step(state, rngs)
    post = analysis.posterior_dataset(m, [state])
    assert analysis.intensity(m, post).dims == ("chain", "draw", "x")
    assert analysis.intensity(m, post).attrs["units"] == "points per d"
    with pytest.raises(InvalidParameterError, match="1-D"):
        analysis.intensity(m, post, per="ha")


def test_coefficients_as_hyperparameters(model):
    """coefficients="hyper": beta_z is slice-moved like the intercept; the posterior layout,
    the log intensity and the original-scale coefficients are those of the block model."""
    m = LGCP(_pattern(), (0, 100, 0, 100), cell_size=6.25, units="m",
             covariates={"z": _covariate()}, formula="~ z", coefficients="hyper")
    assert m.lgm.hyper_names == ("sd", "range", "mean", "beta_z")
    assert m.lgm.n_beta == 0 and m.coef_names == ["z"]
    assert m.hyper_coefficients == {"z": "beta_z"}
    assert m.prior_spec["beta_z"].sd == 1.0
    assert prepare(m).start.theta["beta_z"] == pytest.approx(float(prepare(m).check.glm.coef[0]))
    assert "as hyperparameters" in m.describe()
    # η at the observed cells: mean + beta_z · z (standardised) + offset, exactly
    theta = {"sd": 1.0, "range": 20.0, "mean": -3.0, "beta_z": 0.4}
    col = np.nan_to_num(m.design.columns[0], nan=0.0).reshape(-1)[m.likelihood.obs_index]
    np.testing.assert_allclose(m.lgm.base_obs(theta), -3.0 + 0.4 * col, rtol=1e-14)
    # the same fake posterior gives the same log intensity under both parameterisations
    post = _fake_posterior(model)
    np.testing.assert_allclose(analysis.log_intensity(m, post).values,
                               analysis.log_intensity(model, post).values, rtol=1e-12)
    # a short run: beta_z moves, and lands in ``beta`` (covariate z), not as its own variable
    rngs = chain_rngs(8, 2)
    state = initial_state(m, rngs)[0]
    b0 = state.theta["beta_z"].copy()
    sweep = default_sweep(m.lgm, n_latent=2)
    states = []
    for _ in range(3):
        state, _ = sweep.step(state, rngs)
        states.append(state)
    assert not np.array_equal(state.theta["beta_z"], b0)
    post = analysis.posterior_dataset(m, states)
    assert "beta_z" not in post and list(post["beta"]["covariate"].values) == ["z"]
    # reported on the original scale, as in the block parameterisation
    i, b = m.reported_coefficients(state.theta["beta_z"][:, None], state.theta["mean"])
    np.testing.assert_array_equal(post["beta"].values[:, -1], b)
    np.testing.assert_array_equal(post["intercept"].values[:, -1], i)
    table = analysis.summary(m, post)
    assert "z" in table.index
    prior = analysis.prior_dataset(m, 50, np.random.default_rng(0))
    assert "beta_z" not in prior and prior["beta"].shape == (1, 50, 1)
    with pytest.raises(InvalidParameterError, match="coefficients"):
        LGCP(_pattern(), (0, 100, 0, 100), cell_size=10.0, coefficients="free")
