"""GMRF cases for the conformance suite, with dense oracles built independently of gmrf.py.

The oracles assemble the precision matrices with dense loops over cells and neighbours (not the
backend's sparse Kronecker assembly or its spectra) and invert them with LAPACK:

* Matérn-SPDE: ``Q ∝ (κ² I − Δ_h)^α`` (isotropic form with ``κ = √(8ν)/range``; per-axis ranges
  use the documented operator ``8ν I − Σ_i range_i² Δ_i``), scaled so that the dense
  ``inv(Q)`` has ``sd²`` at the calibration cell (the centre ``n_i // 2`` for Neumann, any cell
  on the torus);
* CAR: ``τ (D − ρ W)`` from the neighbour lists;
* ICAR / RW1 / RW2: the pseudo-inverse of ``Q`` (their covariance on the constrained subspace),
  marked not ``invertible``.

Cases that need CHOLMOD (``solver="cholmod"``, CAR, site-specific surrogate precision) carry
``extra={"needs_cholmod": True}``: the conformance suite reports them as skipped when
scikit-sparse is missing (the pip-only route), never drops them silently.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from lattice_lgm import Lattice
from lattice_lgm.priors import GMRFPrior, _cholmod

from .cases import Case

HAVE_CHOLMOD = _cholmod.available()


# -- independent dense assembly -----------------------------------------------------------------
def _cells(shape):
    return list(itertools.product(*[range(n) for n in shape]))


def dense_axis_laplacians(shape, spacing, boundary):
    """One dense ``-Δ`` per axis on the C-ordered cells of ``shape`` (loops over neighbours)."""
    cells = _cells(shape)
    index = {c: i for i, c in enumerate(cells)}
    n = len(cells)
    mats = []
    for ax, (m, h) in enumerate(zip(shape, spacing, strict=True)):
        lap = np.zeros((n, n))
        for c in cells:
            i = index[c]
            for step in (-1, 1):
                j_ax = c[ax] + step
                if boundary == "periodic":
                    j_ax %= m
                elif not 0 <= j_ax < m:
                    continue  # reflecting (Neumann) edge: no neighbour, no diagonal term
                nb = list(c)
                nb[ax] = j_ax
                lap[i, i] += 1.0 / h**2
                lap[i, index[tuple(nb)]] -= 1.0 / h**2
        mats.append(lap)
    return mats


def dense_matern_precision(lattice, padding, sd, ranges, alpha, boundary):
    """Dense calibrated SPDE precision on the padded state lattice."""
    state = lattice.padded(padding) if any(padding) else lattice
    d = lattice.ndim
    nu = alpha - d / 2
    ranges = tuple(np.broadcast_to(np.asarray(ranges, float), (d,)))
    laps = dense_axis_laplacians(state.shape, state.spacing, boundary)
    n = state.size
    if len(set(ranges)) == 1:
        kappa = math.sqrt(8 * nu) / ranges[0]
        op = kappa**2 * np.eye(n) + sum(laps)
    else:
        op = 8 * nu * np.eye(n) + sum(r * r * lap for r, lap in zip(ranges, laps, strict=True))
    q0 = np.linalg.matrix_power(op, alpha)
    k0 = np.linalg.inv(q0)
    centre = (np.ravel_multi_index(tuple(m // 2 for m in state.shape), state.shape)
              if boundary == "neumann" else 0)
    return q0 * k0[centre, centre] / sd**2


def dense_graph(shape):
    """Degrees ``D`` and adjacency ``W`` of the nearest-neighbour lattice graph (dense)."""
    lap = sum(dense_axis_laplacians(shape, (1.0,) * len(shape), "neumann"))
    d = np.diag(np.diag(lap))
    return d, d - lap


def dense_rw_precision(n, k):
    dmat = np.diff(np.eye(n), n=k, axis=0)
    return dmat.T @ dmat


def window_indices(lattice, padding):
    state = lattice.padded(padding) if any(padding) else lattice
    grids = np.meshgrid(*[np.arange(p, p + m) for p, m in zip(padding, lattice.shape,
                                                               strict=True)], indexing="ij")
    return np.ravel_multi_index(tuple(g.ravel() for g in grids), state.shape)


# -- cases --------------------------------------------------------------------------------------
def _matern_case(shape, spacing, kw, new, *, pad, boundary="neumann", solver="spectral",
                 alpha=2, precision=2.0):
    lat = Lattice(shape, spacing=spacing)
    padding = tuple(np.broadcast_to(pad, (lat.ndim,)).tolist())

    def build(**p):
        return GMRFPrior.matern(lat, **{**kw, **p}, alpha=alpha, boundary=boundary, pad=pad,
                                solver=solver)

    def state_cov(prior):
        p = prior.params
        q = dense_matern_precision(lat, padding, p["sd"], p["range"], alpha, boundary)
        return np.linalg.inv(q)

    idx = window_indices(lat, padding)

    def window_cov(prior):
        return state_cov(prior)[np.ix_(idx, idx)]

    site = "site" if np.ndim(precision) else "scalar"
    return Case(f"gmrf-matern{alpha}-{solver}-{boundary}-{'x'.join(map(str, shape))}-{site}",
                build, dict(kw), new, state_cov, window_cov, precision=precision)


def _car_case(shape, precision):
    lat = Lattice(shape)
    d, w = dense_graph(shape)

    def build(**p):
        return GMRFPrior.car(lat, **{"rho": 0.8, "tau": 2.0, **p})

    def cov(prior):
        p = prior.params
        return np.linalg.inv(p["tau"] * (d - p["rho"] * w))

    return Case(f"gmrf-car-{'x'.join(map(str, shape))}", build, {"rho": 0.8, "tau": 2.0},
                {"rho": 0.5, "tau": 1.5}, cov, cov, precision=precision)


def _intrinsic_case(model, shape):
    lat = Lattice(shape)

    def build(**p):
        return getattr(GMRFPrior, model)(lat, **{"sd": 1.4, **p})

    def cov(prior):
        if model == "icar":
            d, w = dense_graph(shape)
            q = d - w
        else:
            q = dense_rw_precision(shape[0], int(model[-1]))
        k = np.linalg.pinv(q)
        # Sørbye & Rue (2014): geometric mean of the constrained variances is sd².
        c = np.exp(np.mean(np.log(np.diag(k))))
        return k / c * prior.params["sd"] ** 2

    return Case(f"gmrf-{model}-{'x'.join(map(str, shape))}", build, {"sd": 1.4},
                {"sd": 0.7}, cov, cov, invertible=False)


_pi_66 = np.linspace(0.0, 3.0, 36).reshape(6, 6)  # padded 4×4 state; includes precision 0
_pi_44 = np.where(np.arange(16).reshape(4, 4) % 3 == 0, 0.0, 1.5)
_M = {"sd": 1.3, "range": 1.2}

GMRF_CASES: list[Case] = [
    _matern_case((4, 4), 0.5, _M, {"range": 0.9, "sd": 1.1}, pad=1),
    _matern_case((5, 3), (0.5, 0.7), {"sd": 0.8, "range": (1.5, 2.0)}, {"range": 2.0},
                 pad=(1, 0), boundary="periodic"),
    _matern_case((17,), 0.25, _M, {"sd": 0.7}, pad=2, alpha=1),
    _intrinsic_case("icar", (4, 5)),
    _intrinsic_case("rw1", (17,)),
    _intrinsic_case("rw2", (17,)),
]
_CHOLMOD_CASES: list[Case] = [
    _matern_case((4, 4), 0.5, _M, {"range": 0.9, "sd": 1.1}, pad=1, precision=_pi_66),
    _matern_case((5, 3), (0.5, 0.7), {"sd": 0.8, "range": 1.5}, {"range": 2.0}, pad=1,
                 solver="cholmod", precision=np.linspace(0, 2, 35).reshape(7, 5)),
    _matern_case((4, 4), 0.5, _M, {"sd": 0.7}, pad=0, boundary="periodic",
                 solver="cholmod"),
    _matern_case((17,), 0.25, _M, {"range": 2.0}, pad=2, alpha=2, solver="cholmod"),
    _car_case((4, 4), _pi_44),
]
for _c in _CHOLMOD_CASES:
    _c.extra["needs_cholmod"] = True
GMRF_CASES += _CHOLMOD_CASES
