"""NumPyro's NUTS on the same LGCP as lattice_lgm's joint HMC: issue 25's side-by-side anchor.

The peer's model is written here, in JAX, from the model's definition (not from lattice_lgm's
code): Poisson counts per cell with mean ``|cell| exp(η)``, ``η = intercept + β·x + f`` with
``f = F⁻¹(√λ_θ ⊙ F z)`` on the same circulant torus (Matérn 3/2 at wrapped lags,
``range = √(8ν)/κ``), real white noise ``z ~ N(0, I)`` on the torus (the non-centred
parameterisation), PC priors on sd (exponential, ``P(sd > σ₀) = α``) and range (Fuglstad et
al. 2019, ``P(range < ρ₀) = α``, truncated to the prior's upper bound and renormalised), the
intercept's normal prior and ``β ~ N(0, s²)``.

It is proved to be the same posterior before any timing: lattice_lgm's log density
(``loglik_at`` + ``log_hyperprior`` + the white-noise and coefficient priors, on the natural
scale) and NumPyro's ``log_density`` (no Jacobians) are evaluated at random points; their
difference must be one constant (normalisers) to 1e-8 relative.

jax and numpyro are never dependencies of lattice_lgm: they live in a throw-away virtual
environment (``benchmarks/.peer-venv``, git-ignored) that ``setup`` creates.  Steps::

    python benchmarks/perf/peer_numpyro.py setup     # the peer's venv (pip: jax, numpyro)
    python benchmarks/perf/peer_numpyro.py export    # project env: data + check points
    benchmarks/.peer-venv/bin/python benchmarks/perf/peer_numpyro.py run --cpu 0 &
    python benchmarks/perf/peer_numpyro.py ours --cpu 1   # lattice_lgm's joint HMC, same budget
    python benchmarks/perf/peer_numpyro.py report    # → benchmarks/results/peer_numpyro.json

or, for medians over interleaved repeats on one quiet core (the two sides one after the other,
alternating which goes first; seeds ``seed + r``)::

    python benchmarks/perf/peer_numpyro.py interleave --repeats 3 --cpu 1
    python benchmarks/perf/peer_numpyro.py report

One thread budget: both sides run on one core (``--cpu`` pins the process; XLA's CPU backend
with Eigen's multi-threading off and one intra-op thread; lattice_lgm with every pool at 1,
its chains and warm start then in one thread), 4 chains one after the other; run the two
sides at once on the two cores of this machine (side by side, under the same load, which is
recorded).  ESS (bulk, rank-normalised, ArviZ) of each
hyperparameter and coefficient is computed the same way for both, in the project env, from the
saved draws; the headline is the smallest one per second of the whole run (compilation,
warm-up or warm start included), as in the issue's anchor.
"""

from __future__ import annotations

import os

for _k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS",
           "LATTICE_LGM_FFT_THREADS"):
    os.environ.setdefault(_k, "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                      "intra_op_parallelism_threads=1")
os.environ.setdefault("JAX_ENABLE_X64", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from statistics import NormalDist  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
WORK = RESULTS / "peer_numpyro"        # for CELL = 20 m; other cells: peer_numpyro_<cell>m
VENV = ROOT / "benchmarks" / ".peer-venv"
PEER_PACKAGES = ("jax[cpu]==0.4.38", "numpyro==0.16.1", "blackjax==1.2.5")  # + ess_vs_peers.py
CELL = 20.0
N_CHECK = 12
NAMES = ("sd", "range", "mean", "beta_elev", "beta_grad")
QUANTILES = (0.05, 0.5, 0.95)


# -- project environment -------------------------------------------------------------------------
def _set_cell(cell: float) -> None:
    """Point the module at bei with ``cell``-metre cells (its own work folder and results)."""
    global CELL, WORK
    if cell != CELL:
        CELL, WORK = cell, RESULTS / f"peer_numpyro_{cell:g}m"


def setup() -> None:
    """Create the peer's throw-away venv with jax and numpyro (package registries only)."""
    if not (VENV / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", "numpy", "scipy",
                    *PEER_PACKAGES], check=True)


def _bei():
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks" / "perf"))
    from mixing_lgcp import bei

    return bei(CELL)


def export() -> None:
    """The model's data and lattice_lgm's log density at random points, for the peer."""
    from lattice_lgm.samplers._latent import loglik_at

    m = _bei()
    lm = m.lgm
    hp = lm.hyperpriors
    assert tuple(lm.hyper_names) == ("sd", "range", "mean"), lm.hyper_names
    prior = m.prior
    rng = np.random.default_rng(2026)
    pts, logp = [], []
    for _ in range(N_CHECK):
        theta = {"sd": float(rng.uniform(0.5, 2.5)), "range": float(rng.uniform(30.0, 240.0)),
                 "mean": float(rng.normal(-5.7, 0.5))}
        beta = rng.normal(0.0, 0.5, size=lm.n_beta)
        z = rng.standard_normal(prior.embedding_shape)
        p = lm.prior_for(theta, prior)
        f = p.colorize_spectrum(p.spectrum(z[None]))          # K^½ z on the torus
        ll = float(loglik_at(lm, f, beta[None], [theta])[0])
        lp = (ll + lm.log_hyperprior(theta) - 0.5 * float(z.ravel() @ z.ravel())
              - 0.5 * float(np.sum((beta / lm.beta_sd) ** 2)))
        pts.append((theta, beta, z))
        logp.append(lp)
    WORK.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        WORK / "model.npz",
        y=lm.likelihood.y_obs, idx=lm.state_index, x=lm.covariates_obs,
        torus=np.array(prior.embedding_shape), spacing=np.array(m.lattice.spacing),
        nu=m.prior.kernel.nu, sd_prior=[hp["sd"].sigma0, hp["sd"].alpha],
        range_prior=[hp["range"].rho0, hp["range"].alpha, hp["range"].ndim, hp["range"].upper],
        mean_prior=[hp["mean"].mean, hp["mean"].sd], beta_sd=lm.beta_sd,
        offset=lm.offset_obs, log_exposure=lm.likelihood.aux_obs,
        check_theta=np.array([[t["sd"], t["range"], t["mean"]] for t, _, _ in pts]),
        check_beta=np.array([b for _, b, _ in pts]), check_z=np.array([z for _, _, z in pts]),
        check_logp=np.array(logp))
    print(f"wrote {WORK / 'model.npz'} (torus {prior.embedding_shape}, {lm.likelihood.n_obs} "
          f"cells, {N_CHECK} check points)")


def ours(tune: int, draws: int, seed: int, tag: str = "", label: str = "ours") -> None:
    """lattice_lgm's default (joint HMC, warm start) on the same model, one thread."""
    from lattice_lgm.models.lgcp_start import initial_state
    from lattice_lgm.samplers import chain_rngs, default_sweep

    m = _bei()
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    rngs = chain_rngs(seed, 4)
    state = initial_state(m, rngs)[0]
    t_warm = time.perf_counter() - t0
    sweep = default_sweep(m.lgm, "hmc", tune=tune)
    out = {k: [] for k in NAMES}
    steps = []
    for i in range(tune + draws):
        state, info = sweep.step(state, rngs)
        steps.append(float(np.mean(info["n_steps"])))
        if i >= tune:
            for k in ("sd", "range", "mean"):
                out[k].append(np.asarray(state.theta[k], float).copy())
            cd = m.coefficient_draws(state)
            for j, k in enumerate(m.coef_names):
                out["beta_" + k].append(cd[:, j].copy())
    wall = time.perf_counter() - t0
    np.savez(WORK / f"{label}_draws{tag}.npz", **{k: np.stack(v, 1) for k, v in out.items() if v})
    meta = {"wall_seconds": wall, "warm_start_seconds": t_warm, "tune": tune, "draws": draws,
            "cores": sorted(os.sched_getaffinity(0)),
            "steps_per_iteration": float(np.mean(steps[tune:])), "load": [load0,
                                                                          os.getloadavg()[0]]}
    meta["seed"] = seed
    (WORK / f"{label}_meta{tag}.json").write_text(json.dumps(meta, indent=1))
    print(json.dumps(meta))


def interleave(repeats: int, cpu: int | None, warmup: int, draws: int, seed: int,
               short: int) -> None:
    """Both sides ``repeats`` times, one after the other on the same core, alternating order.

    Each repeat also runs lattice_lgm with a ``short`` warm-up (label ``ours_short``; 0: not),
    the demo's setting.  Earlier runs' files are removed first, so :func:`report` sees this
    set only.
    """
    if not (VENV / "bin" / "python").exists():
        raise SystemExit(f"no peer environment at {VENV}: run `{Path(__file__).name} setup`")
    if not (WORK / "model.npz").exists():
        export()
    for old in [*WORK.glob("*_draws*.npz"), *WORK.glob("*_meta*.json")]:
        old.unlink()
    me = Path(__file__).resolve()
    pin = [] if cpu is None else ["--cpu", str(cpu)]
    for r in range(repeats):
        order = [("run", warmup, "numpyro"), ("ours", warmup, "ours")]
        if short:
            order.append(("ours", short, "ours_short"))
        for step, w, label in (order if r % 2 == 0 else order[::-1]):
            py = str(VENV / "bin" / "python") if step == "run" else sys.executable
            args = [py, str(me), step, "--cell", str(CELL), "--warmup", str(w),
                    "--draws", str(draws),
                    "--seed", str(seed + r), "--tag", f"_r{r}", "--label", label, *pin]
            print(f"repeat {r}: {label} (load {os.getloadavg()[0]:.2f})", flush=True)
            subprocess.run(args, check=True)


def _side_stats(side: str, tag: str) -> dict:
    """R-hat, bulk and tail ESS (ArviZ), quantiles and their MCSEs of one run's draws."""
    import arviz as az

    meta = json.loads((WORK / f"{side}_meta{tag}.json").read_text())
    draws = np.load(WORK / f"{side}_draws{tag}.npz")
    stats = {}
    for k in NAMES:
        a = np.asarray(draws[k], float)
        stats[k] = {"rhat": float(az.rhat(a)), "ess_bulk": float(az.ess(a)),
                    "ess_tail": float(az.ess(a, method="tail")),
                    "q05_50_95": [float(q) for q in np.quantile(a, QUANTILES)],
                    "mcse_q05_50_95": [float(az.mcse(a, method="quantile", prob=q))
                                       for q in QUANTILES]}
    min_bulk = min(s["ess_bulk"] for s in stats.values())
    return {**meta, "stats": stats, "min_bulk_ess": min_bulk,
            "min_bulk_ess_per_second": min_bulk / meta["wall_seconds"],
            "max_rhat": max(s["rhat"] for s in stats.values())}


def report() -> None:
    """R-hat, bulk and tail ESS of every run, medians over repeats, agreement z-tests."""
    tags = sorted({p.name[len("ours_meta"):-len(".json")] for p in WORK.glob("ours_meta*.json")}
                  & {p.name[len("numpyro_meta"):-len(".json")]
                     for p in WORK.glob("numpyro_meta*.json")})
    if not tags:
        raise SystemExit(f"no pair of runs in {WORK}: run `interleave` (or `run` and `ours`)")
    runs = {side: [_side_stats(side, t) for t in tags] for side in ("numpyro", "ours")}
    if all((WORK / f"ours_short_meta{t}.json").exists() for t in tags):
        runs["ours_short"] = [_side_stats("ours_short", t) for t in tags]
    # agreement: z-tests of the 5/50/95 % quantiles with both MCSEs, pair by pair (repeat r
    # of each side), Bonferroni over every parameter, quantile and pair at family-wise 1 %
    agree = {}
    for r, tag in enumerate(tags):
        for k in NAMES:
            a, b = runs["numpyro"][r]["stats"][k], runs["ours"][r]["stats"][k]
            agree[f"{k}{tag}"] = [(qa - qb) / math.hypot(ma, mb) for qa, qb, ma, mb in zip(
                a["q05_50_95"], b["q05_50_95"], a["mcse_q05_50_95"], b["mcse_q05_50_95"],
                strict=True)]
    n_tests = sum(len(v) for v in agree.values())
    crit = NormalDist().inv_cdf(1 - 0.01 / (2 * n_tests))
    med = {side: {"wall_seconds": float(np.median([x["wall_seconds"] for x in rs])),
                  "min_bulk_ess": float(np.median([x["min_bulk_ess"] for x in rs])),
                  "min_bulk_ess_per_second": float(np.median(
                      [x["min_bulk_ess_per_second"] for x in rs])),
                  "max_rhat": float(max(x["max_rhat"] for x in rs))}
           for side, rs in runs.items()}
    out = {"problem": f"bei at {CELL:g} m", "cell": CELL, "repeats": len(tags), "medians": med,
           "runs": runs, "quantile_z": agree, "z_critical_bonferroni_1pct": crit,
           "agree": bool(all(abs(z) <= crit for zs in agree.values() for z in zs)),
           "speedup_min_bulk_ess_per_second": (med["ours"]["min_bulk_ess_per_second"]
                                               / med["numpyro"]["min_bulk_ess_per_second"]),
           "speedup_per_repeat": [o["min_bulk_ess_per_second"] / n["min_bulk_ess_per_second"]
                                  for o, n in zip(runs["ours"], runs["numpyro"], strict=True)]}
    if "ours_short" in med:
        out["speedup_short_warmup"] = (med["ours_short"]["min_bulk_ess_per_second"]
                                       / med["numpyro"]["min_bulk_ess_per_second"])
    (RESULTS / f"{WORK.name}.json").write_text(json.dumps(out, indent=1))
    for side, rs in runs.items():
        for tag, r in zip(tags, rs, strict=True):
            print(f"{side:8s}{tag:4s} wall {r['wall_seconds']:7.1f} s  max R-hat "
                  f"{r['max_rhat']:.3f}  min bulk ESS {r['min_bulk_ess']:7.1f}  per s "
                  f"{r['min_bulk_ess_per_second']:.3f}  steps {r['steps_per_iteration']:.1f}  "
                  f"load {r['load'][0]:.2f}-{r['load'][1]:.2f}")
    worst = max(abs(z) for zs in agree.values() for z in zs)
    print(f"quantile z: largest |z| {worst:.2f} of {n_tests} tests, critical {crit:.2f}: "
          + ("agree" if out["agree"] else "DISAGREE"))
    print(f"speed-up (ours / numpyro, median min bulk ESS per second over {len(tags)} "
          f"repeats): {out['speedup_min_bulk_ess_per_second']:.2f}; per repeat "
          + ", ".join(f"{x:.2f}" for x in out["speedup_per_repeat"]))
    if "speedup_short_warmup" in out:
        print(f"with lattice_lgm's short warm-up ({runs['ours_short'][0]['tune']} iterations): "
              f"{out['speedup_short_warmup']:.2f}")


# -- peer environment ----------------------------------------------------------------------------
def run(warmup: int, draws: int, seed: int, tag: str = "") -> None:
    """NumPyro NUTS, 4 chains one after the other (the peer's env)."""
    import jax
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from jax.scipy.special import gammaln
    from numpyro.infer import MCMC, NUTS
    from numpyro.infer.util import log_density

    d = np.load(WORK / "model.npz")
    y, idx, x = jnp.asarray(d["y"]), jnp.asarray(d["idx"]), jnp.asarray(d["x"])
    offset = jnp.asarray(d["offset"]) + jnp.asarray(d["log_exposure"])  # log cell area
    shape = tuple(int(m) for m in d["torus"])
    h = [float(s) for s in d["spacing"]]
    lags = [hh * np.minimum(np.arange(m), m - np.arange(m)) for m, hh in zip(shape, h, strict=True)]
    dist2 = jnp.asarray(lags[0][:, None] ** 2 + lags[1][None, :] ** 2)
    assert float(d["nu"]) == 1.5
    sigma0, a_sd = d["sd_prior"]
    rho0, a_r, ndim, upper = d["range_prior"]
    lam_sd = -math.log(a_sd) / sigma0
    lam_r = -math.log(a_r) * rho0 ** (ndim / 2)
    mu0, s0 = d["mean_prior"]
    bsd = jnp.asarray(d["beta_sd"])
    lgy = jnp.sum(gammaln(y + 1.0))

    def field(sd, rng_, z):
        r = jnp.sqrt(12.0 * dist2) / rng_                      # √(2ν)·d/ℓ, ℓ = range/2
        row = sd ** 2 * (1.0 + r) * jnp.exp(-r)                 # Matérn 3/2 at wrapped lags
        lam = jnp.maximum(jnp.fft.rfft2(row).real, 0.0)
        return jnp.fft.irfft2(jnp.sqrt(lam) * jnp.fft.rfft2(z), s=shape)

    def model():
        sd = numpyro.sample("sd", dist.Exponential(lam_sd))
        rng_ = numpyro.sample("range", dist.ImproperUniform(
            dist.constraints.interval(0.0, upper), (), ()))
        numpyro.factor("range_prior", jnp.log(ndim / 2) + jnp.log(lam_r)
                       - (1 + ndim / 2) * jnp.log(rng_) - lam_r * rng_ ** (-ndim / 2)
                       + lam_r * upper ** (-ndim / 2))
        mean = numpyro.sample("mean", dist.Normal(mu0, s0))
        beta = numpyro.sample("beta", dist.Normal(0.0, bsd))
        z = numpyro.sample("z", dist.Normal(0.0, 1.0).expand(shape).to_event(2))
        eta = offset + mean + beta @ x + field(sd, rng_, z).ravel()[idx]
        numpyro.factor("lik", jnp.sum(y * eta - jnp.exp(eta)) - lgy)

    # the same posterior: log densities at the check points differ by one constant
    diffs = []
    for th, b, z, lp in zip(d["check_theta"], d["check_beta"], d["check_z"], d["check_logp"],
                            strict=True):
        params = {"sd": th[0], "range": th[1], "mean": th[2], "beta": jnp.asarray(b),
                  "z": jnp.asarray(z)}
        peer = float(log_density(model, (), {}, params)[0])
        diffs.append(peer - float(lp))
    diffs = np.array(diffs)
    spread = float(np.max(np.abs(diffs - diffs.mean())))
    scale = float(np.max(np.abs(d["check_logp"])))
    print(f"log-density check: difference {diffs.mean():.6f} ± {spread:.2e} over "
          f"{len(diffs)} points (|log p| up to {scale:.0f})")
    if spread > 1e-8 * scale:
        raise SystemExit("the peer's model is not lattice_lgm's: log densities differ by "
                         f"more than a constant ({spread:.3g})")
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    mcmc = MCMC(NUTS(model, target_accept_prob=0.8), num_warmup=warmup, num_samples=draws,
                num_chains=4, chain_method="sequential", progress_bar=False)
    mcmc.run(jax.random.PRNGKey(seed), extra_fields=("num_steps",))
    wall = time.perf_counter() - t0
    s = mcmc.get_samples(group_by_chain=True)
    steps = np.asarray(mcmc.get_extra_fields(group_by_chain=True)["num_steps"])
    np.savez(WORK / f"numpyro_draws{tag}.npz", sd=np.asarray(s["sd"]), range=np.asarray(s["range"]),
             mean=np.asarray(s["mean"]), beta_elev=np.asarray(s["beta"][..., 0]),
             beta_grad=np.asarray(s["beta"][..., 1]))
    meta = {"wall_seconds": wall, "warmup": warmup, "draws": draws,
            "steps_per_iteration": float(steps.mean()), "load": [load0, os.getloadavg()[0]],
            "log_density_offset": float(diffs.mean()), "log_density_spread": spread,
            "cores": sorted(os.sched_getaffinity(0)),
            "versions": {"jax": jax.__version__, "numpyro": numpyro.__version__},
            "xla_flags": os.environ.get("XLA_FLAGS", ""), "seed": seed}
    (WORK / f"numpyro_meta{tag}.json").write_text(json.dumps(meta, indent=1))
    print(json.dumps(meta))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("step", choices=("setup", "export", "run", "ours", "interleave", "report"))
    ap.add_argument("--tag", default="", help="suffix of this run's files (interleave sets it)")
    ap.add_argument("--repeats", type=int, default=3, help="interleave: repeats per side")
    ap.add_argument("--short", type=int, default=0,
                    help="interleave: also run lattice_lgm with this warm-up (0: not)")
    ap.add_argument("--label", default="ours", help="ours: the files' prefix")
    ap.add_argument("--cell", type=float, default=CELL,
                    help="bei's cell size in metres (20: the issue's anchor; files and results "
                         "of other cells go to peer_numpyro_<cell>m)")
    ap.add_argument("--warmup", type=int, default=1000)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=25)
    ap.add_argument("--cpu", type=int, default=None,
                    help="pin this process to one core (both sides get one core each)")
    a = ap.parse_args(argv)
    _set_cell(a.cell)
    if a.cpu is not None:
        os.sched_setaffinity(0, {a.cpu})
    if a.step == "setup":
        setup()
    elif a.step == "export":
        export()
    elif a.step == "run":
        run(a.warmup, a.draws, a.seed, a.tag)
    elif a.step == "ours":
        ours(a.warmup, a.draws, a.seed, a.tag, a.label)
    elif a.step == "interleave":
        interleave(a.repeats, a.cpu, a.warmup, a.draws, a.seed, a.short)
    else:
        report()


if __name__ == "__main__":
    main()
