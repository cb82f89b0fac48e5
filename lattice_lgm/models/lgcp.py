"""Log-Gaussian Cox processes on a lattice: from a point pattern in a window to a model.

::

    log λ(s) = intercept + X(s) β + f(s),     f ~ N(0, K_θ),     θ = (sd, range),
    y_c | λ ~ Poisson(|c ∩ W| · λ_c)          for every cell c with |c ∩ W| > 0

(Møller, Syversveen & Waagepetersen 1998; Diggle, Moraga, Rowlingson & Taylor 2013).  The
intensity λ is per unit area of the lattice's coordinate units (points per m² when the
coordinates are in metres), because the exposure ``|c ∩ W|`` is an area in those units.

Dimensions come from the lattice: ``("x",)`` in 1-D (intensity per unit length), ``("y", "x")``
in 2-D and ``("t", "y", "x")`` for space-time.  A space-time LGCP observes a 2-D window over the
lattice's time extent (exposure = area × time step) and uses the *separable* covariance
``sd² ρ_s(|s|/ℓ_s) ρ_t(|u|/ℓ_t)`` (:class:`~lattice_lgm.covariance.SpaceTime`; Brix & Diggle
2001, Diggle et al. 2013 §3): a Matérn(ν) in space and, by default, an exponential (Matérn ½,
the continuous-time AR(1)) in time, with its own range ``range_t`` and PC prior
``P(range_t < T/10) = 0.05`` truncated at ``T/2`` (``T`` the time extent).

:class:`LGCP` does the glue a spatial statistician expects (DESIGN §9): it bins the points with
the exposure of every cell (:mod:`lattice_lgm.window`), regrids, checks and standardises the
covariates (:mod:`lattice_lgm.covariates`), states the priors the INLA way — penalised-complexity
priors ``P(range < ρ₀) = α`` and ``P(sd > σ₀) = α`` (Fuglstad, Simpson, Lindgren & Rue 2019)
with defaults scaled to the window — sizes the field prior for the range prior's upper bound, and
computes a frequentist cross-check (minimum contrast for ``(sd, range)``, a Poisson GLM for the
intercept and coefficients, :mod:`lattice_lgm.spatialstats`) used for starting values and
printed beside the posterior.

Default priors (all overridable; printed by :meth:`LGCP.describe` and kept in
:attr:`LGCP.prior_spec`), with ``L`` the shorter side of the window's bounding box:

- range: PC prior with ``P(range < L/10) = 0.05``, truncated at ``L/2`` (the circulant torus is
  sized for that bound; a posterior pressing on it is reported by the analysis);
- sd: PC prior with ``P(sd > 2) = 0.05`` (a field multiplying the intensity by ``e^{±4}`` is a
  priori unlikely);
- intercept (the ``mean`` hyperparameter): ``Normal(log(n/|W|), 5)`` — centred on the observed
  log intensity so that the prior does not depend on the coordinate units;
- coefficients of standardised covariates: ``Normal(0, 1)`` (a change of one covariate SD
  multiplies the intensity by ``e^β``), inside the Gaussian block by default or as
  hyperparameters ``beta_<name>`` (``coefficients="hyper"``), reported on the original scale.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._validation import positive_float
from ..covariance import Covariance, Matern, SpaceTime
from ..covariates import build_design
from ..errors import (
    InvalidParameterError,
    ResourceLimitError,
    UnsupportedOperationError,
)
from ..hyperpriors import Hyperprior, Normal, PCPriorRange, PCPriorSD
from ..lattice import Lattice
from ..likelihoods import Poisson
from ..priors import BACKENDS as PRIOR_BACKENDS
from ..priors import CirculantPrior, DensePrior, GaussianPrior, GMRFPrior
from ..priors._gmrf_structures import _alpha
from ..threads import MEMORY_FRACTION, available_memory
from ..window import Window, bin_points, lattice_for_window, read_points
from .latent import BETA_PREFIX, LatentGaussianModel
from .reporting import LGCPReporting

__all__ = ["LGCP", "GeographicCoordinatesWarning"]

#: default PC prior on the range: P(range < RANGE_FRACTION · L) = RANGE_ALPHA, truncated at
#: RANGE_UPPER_FRACTION · L (L = shorter side of the window's bounding box)
RANGE_FRACTION, RANGE_ALPHA, RANGE_UPPER_FRACTION = 0.1, 0.05, 0.5
#: default PC prior on the sd: P(sd > SD0) = SD_ALPHA
SD0, SD_ALPHA = 2.0, 0.05
#: prior sd of the intercept around log(n/|W|), and of standardised coefficients
INTERCEPT_SD, BETA_SD = 5.0, 1.0
#: dense priors above this many cells need allow_dense=True (an O(N³) Cholesky per proposal)
DENSE_MAX_CELLS = 4096
#: the field prior's backends (:data:`lattice_lgm.priors.BACKENDS`, one vocabulary)
BACKENDS = tuple(PRIOR_BACKENDS)
#: Matérn smoothness of the circulant and dense backends when ``nu`` is not given
DEFAULT_NU = 1.5
#: SPDE order of the gmrf backend when ``alpha`` is not given (ν = α − d/2: 1 in 2-D)
DEFAULT_ALPHA = 2
#: name of the intercept's coefficient when it sits in the Gaussian block
INTERCEPT = "(intercept)"


#: peak memory of a model build per lattice cell, measured on bei (circulant backend, two
#: covariates, 2-core machine): 632 B at 1.25 m (0.32 M cells), 411 B at 0.625 m (1.28 M
#: cells); the circulant torus dominates, so the figure falls towards its asymptote as cells
#: get finer: the finest measurement is taken
BUILD_BYTES_PER_CELL = 411
#: and its time per cell (3.4 s for 1.28 M cells, the same run)
BUILD_SECONDS_PER_CELL = 2.7e-6


def _check_build_resources(lattice: Lattice, backend: str) -> None:
    """Refuse a lattice whose model build would not fit in memory, before building anything.

    Issue 27: bei at 0.01 m died in a raw ``MemoryError`` for 37 GiB while binning, and at
    0.1 m in a traceback from the GLM after 65 s.  The projection is the measured
    :data:`BUILD_BYTES_PER_CELL` (the dense backend adds its ``N²`` matrices), refused above
    half the memory available (:data:`lattice_lgm.threads.MEMORY_FRACTION`: the sampler needs
    the rest).
    """
    cells = float(lattice.size)
    need = cells * BUILD_BYTES_PER_CELL + (3 * 8 * cells**2 if backend == "dense" else 0.0)
    avail = available_memory()
    if need <= MEMORY_FRACTION * avail:
        return
    shrink = math.sqrt(need / (MEMORY_FRACTION * avail)) if backend != "dense" else (
        need / (MEMORY_FRACTION * avail)) ** 0.25
    coarser = " × ".join(f"{h * shrink:.3g}" for h in lattice.spacing[-2:])
    raise ResourceLimitError(
        f"a lattice of {' × '.join(map(str, lattice.shape))} = {cells:.3g} cells needs "
        f"≈ {need / 2**30:.3g} GiB to build the model ({BUILD_BYTES_PER_CELL} B per cell, "
        "measured" + (", plus the dense covariance" if backend == "dense" else "")
        + f"; ≈ {cells * BUILD_SECONDS_PER_CELL / 60:.3g} min), over half the "
        f"{avail / 2**30:.3g} GiB available. Use a coarser cell_size (≥ {coarser} per cell "
        "would fit), a smaller window, or a machine with more memory.")


class GeographicCoordinatesWarning(UserWarning):
    """Coordinates without a CRS or units that look like longitude and latitude in degrees."""


def _warn_if_lonlat(xy: np.ndarray, bounds: Any) -> None:
    """Warn when points and window without CRS or units fit in [−180, 180] × [−90, 90].

    Degrees are not a length: a cell size, a range and an intensity per square degree mean
    different things at different latitudes (issue 27: such data were accepted silently).
    """
    if len(bounds) != 2:
        return
    (x0, x1), (y0, y1) = bounds  # Window.bounds: ((xmin, xmax), (ymin, ymax))
    inside = (len(xy) > 0 and np.all(np.abs(xy[:, 0]) <= 180.0)
              and np.all(np.abs(xy[:, 1]) <= 90.0) and -180.0 <= x0 and x1 <= 180.0
              and -90.0 <= y0 and y1 <= 90.0)
    if inside:
        warnings.warn(
            f"the points and the window (x {x0:g}…{x1:g}, y {y0:g}…{y1:g}) have no CRS and no "
            "units, and every coordinate fits in longitude/latitude ranges: if these are "
            "degrees, project them to a metric CRS (e.g. UTM) and pass crs=, since cell sizes, "
            "ranges and intensities in degrees change with latitude; if they are planar, pass "
            "units= (e.g. units='m') to say so.", GeographicCoordinatesWarning, stacklevel=3)


class LGCP(LGCPReporting):
    """A log-Gaussian Cox process fitted on a lattice over an observation window.

    Parameters
    ----------
    points : array_like (n, 2) in (x, y) order, DataFrame, GeoDataFrame, dict or CSV path
        The point pattern (see :func:`lattice_lgm.window.read_points`).  1-D: ``(n,)``.
    window : Window, shapely geometry, GeoDataFrame, ``(xmin, xmax, ymin, ymax)``, ``(a, b)``
        The observation window (:meth:`lattice_lgm.window.Window.coerce`).
    cell_size, shape : optional
        The lattice from the window (exactly one of ``cell_size``, ``shape``, ``lattice``):
        see :func:`lattice_lgm.window.lattice_for_window`.
    lattice : Lattice, optional
        An explicit lattice covering the window.
    units, crs : str, optional
        Coordinate units (e.g. ``"m"``) and projected CRS of the lattice built from the window.
    formula : str, optional
        Covariate terms, e.g. ``"~ elev + grad"`` (:func:`lattice_lgm.covariates.parse_formula`);
        default: every covariate given, in order.
    covariates : mapping of str to xarray.DataArray or path, optional
        Covariates on their own grids, regridded explicitly to the lattice.
    regrid : mapping of str to str, optional
        Regridding method per covariate (``"area"`` default, ``"nearest"``, ``"majority"``).
    center, scale : bool
        Standardise covariate columns over the window (exposure-weighted); coefficients are
        reported on the original scale (:meth:`reported_coefficients`).
    backend : {"circulant", "gmrf", "dense"}
        Field prior: circulant embedding (Matérn ``nu``), Matérn-SPDE GMRF (``ν = α − d/2``,
        ``alpha``), or dense (the oracle; refused above 4096 cells unless ``allow_dense``).
    nu : float, optional
        Matérn smoothness of the circulant and dense priors (in space, for space-time);
        default :data:`DEFAULT_NU` (1.5).  An error with ``backend="gmrf"``, whose smoothness
        is set by ``alpha``.
    nu_t : float
        Space-time only: Matérn smoothness in time (default 0.5, exponential).
    range_t_prior : Hyperprior, optional
        Space-time only: prior of the temporal range (default: module docstring).
    time_units : str, optional
        Space-time only: units of the time axis (e.g. ``"day"``), for reported intensities.
    alpha : int, optional
        SPDE order of the GMRF prior, ``ν = α − d/2``; default :data:`DEFAULT_ALPHA` (2: ν = 1
        in 2-D).  An error with the other backends, whose smoothness is ``nu``.
    range_prior, sd_prior, intercept_prior : Hyperprior, optional
        Override the default priors (module docstring).  ``range_prior`` must have a finite
        ``upper`` bound for the circulant backend.
    beta_sd : float
        Prior sd of the standardised coefficients.
    coefficients : {"block", "hyper"}
        ``"block"`` (default): the coefficients sit in the Gaussian block and elliptical slice
        sampling rotates them jointly with the field (DESIGN §4).  ``"hyper"``: each is a
        hyperparameter ``beta_<name>`` with prior ``Normal(0, beta_sd)``, moved by the
        hyperparameter slice sampler like the intercept (one univariate slice each per sweep).
    intercept : {"hyper", "block"}
        ``"hyper"`` (default, Murray & Adams' way): the intercept is the ``mean``
        hyperparameter, moved by the hyperparameter slice sampler.  ``"block"``: it sits in the
        Gaussian block with the coefficients (DESIGN §4), as ``offset log(n/|W|)`` plus a
        coefficient ``~ N(0, s²)`` on a constant column, where ``Normal(log(n/|W|), s)`` is the
        (Normal) ``intercept_prior``; elliptical slice sampling then rotates it jointly with the
        field, which decorrelates it from the field's low frequencies.
    offset : ndarray, shape lattice.shape, optional
        A fixed offset added to ``log λ`` (e.g. a log-baseline).
    outside : {"raise", "drop"}
        Points outside the window: an error naming them, or dropped with a warning.
    cross_check : bool
        Whether runs start their chains around the frequentist cross-check (minimum contrast
        and a Poisson GLM, fitted by :func:`lattice_lgm.models.lgcp_start.prepare` when a run
        or a summary needs them) rather than the priors' medians.

    Attributes
    ----------
    window, lattice, binned, counts, exposure, inside, design, prior, likelihood
    lgm : LatentGaussianModel
        What the samplers run on (``model`` before issue 28: deprecated).
    prior_spec : dict of str to Hyperprior
        The priors in force (``sd``, ``range``, ``mean``).
    cross_check : bool

    Notes
    -----
    The model is a description: building it fits nothing and draws nothing.  Its field prior
    is built at the priors' medians (for the GMRF backend with a range prior that has no upper
    bound, the lattice is padded for twice the median range).  The steps of a run — the
    cross-check, the chains' starting values, the warm-started field — are in
    :mod:`lattice_lgm.models.lgcp_start`; the default sweep is
    :func:`lattice_lgm.samplers.default_sweep`.

    Examples
    --------
    >>> m = LGCP(xy, (0, 1000, 0, 500), cell_size=5.0, units="m",        # doctest: +SKIP
    ...          covariates={"elev": elev, "grad": grad}, formula="~ elev + grad")
    >>> print(m.describe())                                              # doctest: +SKIP
    """

    def __init__(
        self,
        points: Any,
        window: Any,
        *,
        cell_size: float | tuple[float, ...] | None = None,
        shape: int | tuple[int, ...] | None = None,
        lattice: Lattice | None = None,
        units: str | None = None,
        crs: str | None = None,
        formula: str | None = None,
        covariates: Mapping[str, Any] | None = None,
        regrid: Mapping[str, str] | None = None,
        center: bool = True,
        scale: bool = True,
        backend: str = "circulant",
        nu: float | None = None,
        nu_t: float = 0.5,
        alpha: int | None = None,
        range_prior: Hyperprior | None = None,
        sd_prior: Hyperprior | None = None,
        intercept_prior: Hyperprior | None = None,
        range_t_prior: Hyperprior | None = None,
        time_units: str | None = None,
        beta_sd: float = BETA_SD,
        coefficients: str = "block",
        intercept: str = "hyper",
        offset: np.ndarray | None = None,
        outside: str = "raise",
        allow_dense: bool = False,
        cross_check: bool = True,
    ) -> None:
        if coefficients not in ("block", "hyper"):
            raise InvalidParameterError(
                f"coefficients={coefficients!r} must be 'block' (in the Gaussian block with the "
                "field) or 'hyper' (hyperparameters beta_<name>, moved by the slice sampler).")
        if intercept not in ("hyper", "block"):
            raise InvalidParameterError(
                f"intercept={intercept!r} must be 'hyper' (the mean hyperparameter) or 'block' "
                "(in the Gaussian block with the coefficients).")
        if backend not in BACKENDS:
            raise InvalidParameterError(
                f"backend={backend!r} is not one of {BACKENDS}; 'circulant' is the default for "
                "stationary Matérn fields on regular grids."
            )
        given = [k for k, v in (("cell_size", cell_size), ("shape", shape),
                                ("lattice", lattice)) if v is not None]
        if len(given) != 1:
            raise InvalidParameterError(
                f"give exactly one of cell_size, shape, lattice (got {given or 'none'}); e.g. "
                "cell_size=5.0 for 5-unit cells over the window's bounding box."
            )
        self.window = Window.coerce(window, lattice)
        if lattice is None:
            lattice = lattice_for_window(self.window, cell_size=cell_size, shape=shape,
                                         units=units, crs=crs)
        elif not isinstance(lattice, Lattice):
            raise InvalidParameterError(f"lattice={lattice!r} must be a lattice_lgm.Lattice.")
        if lattice.ndim == 3 and backend == "gmrf":
            raise UnsupportedOperationError(
                "backend='gmrf' has no separable space-time precision yet (its SPDE would be an "
                "isotropic 3-D field mixing time and space units); use backend='circulant' for "
                "space-time LGCPs.")
        if lattice.ndim != 3 and (range_t_prior is not None or time_units is not None):
            raise InvalidParameterError(
                "range_t_prior and time_units are for space-time LGCPs (a 3-D lattice with dims "
                f"('t', 'y', 'x')); this lattice is {lattice.ndim}-D.")
        _check_build_resources(lattice, backend)  # before any array of the lattice's size
        if all(n == 1 for n in lattice.shape[-2:]) or lattice.size < 2:
            raise InvalidParameterError(
                f"the lattice has shape {lattice.shape}: one cell cannot carry a spatial field "
                "(its range and sd are not identified). Use a smaller cell_size, or a larger "
                "shape.")
        self.lattice = lattice
        self.time_units = time_units
        self.binned = bin_points(points, lattice, self.window, outside=outside)
        xy = read_points(points) if not isinstance(points, np.ndarray) else (
            np.asarray(points, dtype=np.float64).reshape(len(points), lattice.ndim))
        #: the points kept (inside the window), (n, ndim) in (x, y) order
        self.points = np.delete(xy, self.binned.dropped_index, axis=0)
        if lattice.crs is None and lattice.units is None and lattice.ndim >= 2:
            _warn_if_lonlat(self.points[:, :2], self.window.bounds)
        self.counts = self.binned.counts
        self.exposure = self.binned.exposure
        self.inside = self.exposure > 0
        self.n_points = int(self.binned.n_points)
        if self.n_points == 0:
            raise InvalidParameterError(
                "points: no point falls in the window; an LGCP needs at least one point (check "
                "the coordinates' units and order: (x, y))."
            )
        self.area = float(self.exposure.sum())
        self.beta_sd = positive_float("beta_sd", beta_sd, "a prior sd > 0, e.g. 1.0")
        self.design = self._build_design(formula, covariates, regrid, center, scale)
        self.intercept, self.coefficients = intercept, coefficients
        self.nu_t = positive_float("nu_t", nu_t, "a Matérn smoothness > 0, e.g. 0.5")
        self.prior_spec = self._priors(range_prior, sd_prior, intercept_prior, range_t_prior)
        self.backend = backend
        #: the field's Matérn smoothness (for the gmrf backend the one its SPDE order implies)
        #: and the gmrf backend's SPDE order (None for the others)
        self.nu, self.alpha = _smoothness(backend, nu, alpha, lattice.ndim)
        #: whether runs start from the frequentist cross-check (:mod:`.lgcp_start`)
        self.cross_check = bool(cross_check)
        self.prior = self._field_prior(allow_dense)
        self.likelihood = Poisson(self.counts, exposure=np.where(self.inside, self.exposure, 1.0),
                                  mask=self.inside)
        self.offset = self._offset(offset)
        cols = [] if self.design is None else list(np.nan_to_num(self.design.columns, nan=0.0))
        names = [] if self.design is None else list(self.design.names)
        #: every coefficient, in the order of ``beta`` in the posterior (the block intercept
        #: first when ``intercept="block"``, then the covariates)
        self.coef_names = list(names)
        #: coefficient name -> its hyperparameter name, for ``coefficients="hyper"``
        self.hyper_coefficients: dict[str, str] = {}
        hyper = dict(self.prior_spec)
        # the model's own hyperparameter values are the priors' medians (a run starts its
        # chains elsewhere: lgcp_start); coefficients as hyperparameters at 0, their median
        mean0 = float(self.prior_spec["mean"].ppf(0.5))
        hyper_cov: dict[str, np.ndarray] = {}
        if coefficients == "hyper":
            hyper_cov = dict(zip(names, cols, strict=True))
            self.hyper_coefficients = {n: BETA_PREFIX + n for n in names}
            cols = []
        sds = [self.beta_sd] * len(cols)
        if intercept == "block":
            ip = hyper.pop("mean")
            cols.insert(0, np.ones(lattice.shape))
            sds.insert(0, ip.sd)
            self.coef_names.insert(0, INTERCEPT)
            mean0 = 0.0
        #: the latent Gaussian model the samplers run on (prior, likelihood, hyperpriors)
        self.lgm = LatentGaussianModel(
            self.prior, self.likelihood, hyperpriors=hyper, mean=mean0,
            offset=self.offset, covariates=np.array(cols) if cols else None,
            beta_sd=np.array(sds) if sds else 1.0, hyper_covariates=hyper_cov,
            hyper_init={BETA_PREFIX + n: 0.0 for n in hyper_cov},
        )

    # -- construction steps -------------------------------------------------------------------
    @property
    def window_scale(self) -> float:
        """``L``: the shorter side of the window's bounding box (the length interval in 1-D)."""
        return float(min(hi - lo for lo, hi in self.window.bounds))

    @property
    def time_extent(self) -> float:
        """``T``: the time extent of a space-time lattice (``shape[0] · spacing[0]``)."""
        if self.lattice.ndim != 3:
            raise InvalidParameterError("time_extent is defined for space-time (3-D) LGCPs only.")
        return float(self.lattice.shape[0] * self.lattice.spacing[0])

    @property
    def spatial_ndim(self) -> int:
        """Number of spatial axes (the time axis of a space-time lattice excluded)."""
        return 2 if self.lattice.ndim == 3 else self.lattice.ndim

    def _build_design(self, formula, covariates, regrid, center, scale):
        if not covariates:
            if formula is not None and formula.replace(" ", "") not in ("~1", "~"):
                raise InvalidParameterError(
                    f"formula={formula!r} names covariates but covariates=None; pass "
                    "covariates={name: DataArray or path, ...}."
                )
            return None
        if not isinstance(covariates, Mapping) or not all(isinstance(k, str)
                                                          for k in covariates):
            raise InvalidParameterError(
                f"covariates is a {type(covariates).__name__}; pass a mapping of names to "
                "covariates, e.g. covariates={'elev': DataArray or path}, named as in the "
                "formula.")
        if formula is None:
            formula = "~ " + " + ".join(covariates)
        return build_design(formula, dict(covariates), self.lattice, inside=self.inside,
                            methods=regrid, center=center, scale=scale, weights=self.exposure)

    def _offset(self, offset: np.ndarray | None) -> np.ndarray | None:
        """The full fixed offset of ``log λ`` (None when there is none).

        The user's offset, plus the intercept's prior centre when the intercept sits in the
        Gaussian block (its coefficient has prior mean 0).
        """
        out = None
        if offset is not None:
            out = np.asarray(offset, dtype=np.float64)
            if out.shape != self.lattice.shape:
                raise InvalidParameterError(
                    f"offset has shape {out.shape}; it must be the lattice's {self.lattice.shape}.")
        if self.intercept == "block":
            centre = self.prior_spec["mean"].mean
            out = centre + (0.0 if out is None else out) + np.zeros(self.lattice.shape)
        return out

    def _priors(self, range_prior, sd_prior, intercept_prior,
                range_t_prior=None) -> dict[str, Hyperprior]:
        L = self.window_scale
        ndim = self.spatial_ndim
        if self.lattice.ndim == 3 and range_t_prior is None:
            T = self.time_extent
            range_t_prior = PCPriorRange(RANGE_FRACTION * T, RANGE_ALPHA, 1,
                                         upper=RANGE_UPPER_FRACTION * T)
        if range_prior is None:
            range_prior = PCPriorRange(RANGE_FRACTION * L, RANGE_ALPHA, ndim,
                                       upper=RANGE_UPPER_FRACTION * L)
        if sd_prior is None:
            sd_prior = PCPriorSD(SD0, SD_ALPHA)
        if intercept_prior is None:
            intercept_prior = Normal(math.log(self.n_points / self.area), INTERCEPT_SD)
        named = [("range_prior", range_prior), ("sd_prior", sd_prior),
                 ("intercept_prior", intercept_prior)]
        if range_t_prior is not None:
            named.append(("range_t_prior", range_t_prior))
        for name, hp in named:
            if not isinstance(hp, Hyperprior):
                raise InvalidParameterError(
                    f"{name}={hp!r} must be a lattice_lgm.hyperpriors.Hyperprior, e.g. "
                    "PCPriorRange(rho0, alpha, ndim, upper=...)."
                )
        if self.intercept == "block" and not isinstance(intercept_prior, Normal):
            raise InvalidParameterError(
                f"intercept='block' needs a Normal intercept_prior (got {intercept_prior!r}): "
                "the Gaussian block holds Gaussian coefficients only.")
        cell = float(min(self.lattice.spacing[-ndim:]))
        bound = float(getattr(range_prior, "upper", math.inf))
        if bound < cell:
            # a field whose range is below one cell is white noise on this lattice: refused
            # before sampling rather than noted after it (issue 27)
            raise InvalidParameterError(
                f"range_prior's upper bound {bound!r} is below the cell "
                f"size {cell!r}: every range it allows makes the field white noise on this "
                "lattice. Raise the bound (ranges of several cells), or use a smaller "
                "cell_size.")
        spec = {"sd": sd_prior, "range": range_prior, "mean": intercept_prior}
        if range_t_prior is not None:
            spec["range_t"] = range_t_prior
        if self.coefficients == "hyper" and self.design is not None:
            spec.update({BETA_PREFIX + n: Normal(0.0, self.beta_sd) for n in self.design.names})
        return spec

    def kernel(self, sd: float, range: float, range_t: float | None = None) -> Covariance:
        """The field's covariance at the given hyperparameters (circulant and dense backends).

        Matérn(ν) in 1-D and 2-D; in space-time the separable Matérn(ν) × Matérn(ν_t).
        """
        if self.lattice.ndim == 3:
            rt = float(self.prior_spec["range_t"].ppf(0.5)) if range_t is None else range_t
            return SpaceTime(Matern(self.nu, range=range), Matern(self.nu_t, range=rt),
                             sd=sd, range=range, range_t=rt)
        return Matern(self.nu, sd=sd, range=range)

    def _field_prior(self, allow_dense: bool) -> GaussianPrior:
        lat, spec = self.lattice, self.prior_spec
        # built at the priors' medians (a description; the chains set their own values)
        st = {"sd": float(spec["sd"].ppf(0.5)), "range": float(spec["range"].ppf(0.5))}
        upper = spec["range"].upper
        kernel = self.kernel(st["sd"], st["range"])
        if self.backend == "circulant":
            bounds = {"range": upper}
            if lat.ndim == 3:
                bounds["range_t"] = self.prior_spec["range_t"].upper
            for k, b in bounds.items():
                if not math.isfinite(b):
                    raise InvalidParameterError(
                        "the circulant backend sizes its torus for the range priors' upper "
                        f"bounds, but {k}_prior={self.prior_spec[k]!r} has none; pass upper=...")
            max_range = ((bounds["range_t"], upper, upper) if lat.ndim == 3 else upper)
            return CirculantPrior(lat, kernel, max_range=max_range)
        if self.backend == "gmrf":
            pad_range = upper if math.isfinite(upper) else 2 * st["range"]
            return GMRFPrior.matern(lat, sd=st["sd"], range=pad_range,
                                    alpha=self.alpha).with_params(range=st["range"])
        if lat.size > DENSE_MAX_CELLS and not allow_dense:
            raise InvalidParameterError(
                f"backend='dense' on {lat.size} cells builds and factors a {lat.size}² matrix "
                f"per proposal; use 'circulant' or 'gmrf', or pass allow_dense=True.")
        return DensePrior.from_lattice(lat, kernel)

    @property
    def model(self) -> LatentGaussianModel:
        """Deprecated: :attr:`lgm` (``model.model`` read as a riddle; issue 28)."""
        warnings.warn("LGCP.model is now LGCP.lgm (the latent Gaussian model); the old name "
                      "goes in a later release.", DeprecationWarning, stacklevel=2)
        return self.lgm

    def __repr__(self) -> str:
        return (f"LGCP({self.n_points} points, lattice {self.lattice.shape}, backend "
                f"{self.backend!r})")


def _smoothness(backend: str, nu: Any, alpha: Any, ndim: int) -> tuple[float, int | None]:
    """``(ν, α)`` of the field prior; a smoothness key the backend would ignore is an error."""
    if backend == "gmrf":
        if nu is not None:
            raise InvalidParameterError(
                f"nu={nu!r} sets the Matérn smoothness of the circulant and dense backends; "
                "the gmrf backend's follows from its SPDE order, nu = alpha - d/2 (alpha="
                f"{DEFAULT_ALPHA}: nu = {DEFAULT_ALPHA - ndim / 2:g} in {ndim}-D). Remove nu, "
                "or choose backend='circulant'.")
        a = _alpha(DEFAULT_ALPHA if alpha is None else alpha, ndim)
        return a - ndim / 2.0, a
    if alpha is not None:
        raise InvalidParameterError(
            f"alpha={alpha!r} is the SPDE order of backend='gmrf'; backend={backend!r} takes the "
            f"Matérn smoothness nu instead (default {DEFAULT_NU}). Remove alpha, or choose "
            "backend='gmrf'.")
    return positive_float("nu", DEFAULT_NU if nu is None else nu,
                          "a Matérn smoothness > 0, e.g. 1.5"), None
