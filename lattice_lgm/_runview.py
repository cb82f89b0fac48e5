"""What :func:`lattice_lgm.runs.sample` needs to know about a model, for every kind of model.

A *view* gives the run its field dims and coordinates, the per-draw record (hyperparameters,
coefficients, the field on the window and the values the online summaries accumulate), the data
groups and the hash that identifies the data on resume.  ``LGCPView`` serves
:class:`~lattice_lgm.LGCP` (intensity and relative-risk summaries, counts and exposure);
``LatentView`` serves any :class:`~lattice_lgm.models.LatentGaussianModel` — GP regression and
classification on the dense path among them — with the field's running mean and variance as its
summaries and the likelihood's data as ``observed_data["data"]``.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from .errors import InvalidParameterError
from .models import LGCP, LatentGaussianModel
from .models.lgcp_start import analysis_record, initial_state
from .samplers import (
    EllipticalSlice,
    Gibbs,
    HyperMove,
    default_method_for,
    default_sweep,
    init_state,
)
from .store.base import hash_arrays


@runtime_checkable
class RunView(Protocol):
    """What :func:`lattice_lgm.runs.sample`, the store and ``resume`` use of a model.

    A model family plugs into runs by implementing this protocol itself (then ``sample()``
    takes the model as it is), or through an adapter (``LGCPView``, ``LatentView`` below).

    Attributes
    ----------
    dims : tuple of str
        The field's dims in the store (e.g. ``("y", "x")``, ``("x",)``).
    shape : tuple of int
        The field's shape on those dims.
    field_coords : dict of str to ndarray
        Coordinates of ``dims``.
    coef_names : list of str
        Names of ``posterior.beta``'s ``covariate`` coordinate (empty: no ``beta``).
    inside : ndarray of bool, shape ``shape``
        Cells where the online summaries are defined (NaN elsewhere).
    units : str
        Coordinate units (recorded).
    summary_names : tuple of str
        Record entries under ``"summary"`` accumulated as running mean and variance.
    exceed_on : str or None
        The summary whose exceedance counts of the run's thresholds are kept.
    lgm : LatentGaussianModel
        The latent Gaussian model the sampler runs on (checkpoints restore its state).

    Notes
    -----
    Optional: ``analysis_attrs()`` returning a JSON-ready dict (``rows``, ``cross_check``,
    ``bounds``, ``cells``; see :func:`lattice_lgm.models.lgcp_start.analysis_record`) that the
    run records as ``attrs["analysis"]`` for :func:`lattice_lgm.analysis.summary_of`.
    """

    dims: tuple[str, ...]
    shape: tuple[int, ...]
    field_coords: dict[str, np.ndarray]
    coef_names: list[str]
    inside: np.ndarray
    units: str
    summary_names: tuple[str, ...]
    exceed_on: str | None
    lgm: Any

    def init_state(self, rngs: Any, chains: Any, initvals: Any = None,
                   warm: bool = True) -> Any:
        """The chains' starting state (``warm=False``: cheap, for a store's layout only)."""

    def default_representation(self) -> str:
        """The default sampler's name (``representation="auto"``)."""

    def default_sweep(self, representation: str, n_latent: int, tune: int = 0) -> Any:
        """The sweep (a ``Gibbs``-like object with ``step`` and ``settings``) to run."""

    def record(self, state: Any) -> dict[str, Any]:
        """One draw of every chain of ``state``.

        ``scalars`` (name -> (chains,)), ``beta`` (chains, p) or None, ``f`` (chains, *shape)
        float32, ``summary`` (name -> (chains, *shape)); optionally ``fields`` (name ->
        (chains, *shape), any dtype): further per-draw lattice arrays, stored beside ``f``
        with its thinning (``thin_fields``) and dims.
        """

    def data_groups(self) -> dict[str, dict[str, tuple[tuple[str, ...], np.ndarray]]]:
        """``observed_data`` / ``constant_data`` variables: group -> name -> (dims, array)."""

    def extra_coords(self) -> dict[str, np.ndarray]:
        """Coordinates of the data groups' dims beyond ``dims``."""

    def data_hash(self) -> str:
        """A digest of the data (a resume with other data is refused)."""

    def priors_text(self) -> dict[str, str]:
        """The hyperpriors as stated, by name (recorded)."""


class LGCPView:
    """An :class:`~lattice_lgm.LGCP` as a run sees it."""

    #: online summaries: running mean/variance of these, exceedance counts of ``exceed_on``
    summary_names = ("intensity", "rr")
    exceed_on: str | None = "rr"

    def __init__(self, model: Any) -> None:
        self.model = model
        self.lgm = model.lgm
        lat = model.lattice
        self.dims, self.shape = tuple(lat.dims), tuple(lat.shape)
        self.field_coords = {k: np.asarray(v) for k, v in lat.coords().items()}
        self.coef_names = list(model.covariate_names)
        self.inside = np.asarray(model.inside, dtype=bool)
        self.units = getattr(lat, "units", None) or ""
        # the lattice's cells in the prior's state, once (every record reads them)
        self._window = model.prior.window_index()

    #: what the last :meth:`init_state` did (the warm start's report), or None
    last_start_report: Any = None

    def init_state(self, rngs, chains, initvals=None, warm: bool = True):
        """Overdispersed starts (or ``initvals``), the field warm-started from the data.

        ``warm=False`` draws the field from the prior (for a store's layout only).
        """
        theta = None if initvals is None else [dict(t) for t in initvals]
        state, self.last_start_report = initial_state(self.model, rngs, chains, theta=theta,
                                                      warm=warm)
        return state

    def analysis_attrs(self) -> dict[str, Any]:
        """What the summary needs beyond the draws, recorded as ``attrs["analysis"]``.

        :func:`lattice_lgm.models.lgcp_start.analysis_record`.
        """
        return analysis_record(self.model)

    def default_representation(self) -> str:
        """The measured default method of the model's backend."""
        return default_method_for(self.model.backend)

    def default_sweep(self, representation: str, n_latent: int, tune: int = 0):
        """The sweep for ``representation`` (``tune``: warm-up of adaptive moves)."""
        return default_sweep(self.lgm, representation, n_latent=n_latent, tune=tune)

    def record(self, state) -> dict[str, Any]:
        """Hyperparameters, coefficients, the window field and the summary values of a state."""
        m, n = self.model, state.n_chains
        # NumPy throughout (no Dataset per draw): the model's own mappings, which the
        # posterior Datasets of analysis use as well
        f = state.f.reshape(n, -1)[:, self._window].reshape(n, *self.shape)
        f = np.asarray(f, dtype=float)
        rep = m.reported_draws(state.theta, m.coefficient_draws(state))
        beta = rep.pop("beta", None)
        rec: dict[str, Any] = {"scalars": rep, "beta": beta, "f": f.astype(np.float32)}
        lam = np.exp(m.log_intensity_values(f, rep["intercept"], beta))
        sd = rep["sd"].reshape(-1, *([1] * len(self.shape))) if "sd" in rep else 0.0
        rr = np.where(self.inside, np.exp(f - 0.5 * sd**2), np.nan)
        rec["summary"] = {"intensity": lam, "rr": rr}
        return rec

    def data_groups(self) -> dict[str, dict[str, tuple[tuple[str, ...], np.ndarray]]]:
        """``observed_data`` and ``constant_data``: name -> (dims, array)."""
        m = self.model
        const = {"exposure": (self.dims, np.asarray(m.exposure, dtype=float)),
                 "inside": (self.dims, np.asarray(m.inside, dtype=np.int8))}
        if getattr(m, "offset", None) is not None:
            const["offset"] = (self.dims, np.asarray(m.offset, dtype=float))
        if getattr(m, "design", None) is not None:
            const["covariates"] = (("covariate", *self.dims),
                                   np.asarray(m.design.columns, dtype=float))
        # the point pattern itself (inside the window), in (x, y[, t]) order: what model
        # criticism compares simulations with (analysis.StoredLGCP)
        observed = {"counts": (self.dims, np.asarray(m.counts, dtype=np.int64)),
                    "points": (("point", "coord"), np.asarray(m.points, dtype=float))}
        return {"observed_data": observed, "constant_data": const}

    def extra_coords(self) -> dict[str, np.ndarray]:
        """Coordinates of the data groups' non-field dims: point, coord, covariate."""
        m = self.model
        out = {"point": np.arange(len(m.points)),
               "coord": np.asarray(self.dims[::-1], dtype=str)}
        design = getattr(m, "design", None)
        if design is not None:
            out["covariate"] = np.asarray(design.names, dtype=str)
        return out

    def data_hash(self) -> str:
        """SHA-256 of the data (counts, exposure, offset, covariates)."""
        m = self.model
        arrays = {"counts": m.counts, "exposure": m.exposure,
                  "offset": np.zeros(0) if getattr(m, "offset", None) is None else m.offset}
        if getattr(m, "design", None) is not None:
            arrays["covariates"] = np.nan_to_num(m.design.columns, nan=0.0)
        return hash_arrays(arrays)

    def priors_text(self) -> dict[str, str]:
        """The priors as stated (``describe()``), by name."""
        return {k: hp.describe() for k, hp in self.model.prior_spec.items()}


class LatentView:
    """A :class:`~lattice_lgm.models.LatentGaussianModel` (GP regression, classification, …)."""

    summary_names = ("f",)
    exceed_on: str | None = None

    def __init__(self, lgm: Any) -> None:
        self.model = self.lgm = lgm
        lat = getattr(lgm.prior, "lattice", None)
        shape = tuple(lgm.likelihood.shape)
        if lat is not None and tuple(lat.shape) == shape:
            self.dims = tuple(lat.dims)
            self.field_coords = {k: np.asarray(v) for k, v in lat.coords().items()}
            self.units = getattr(lat, "units", None) or ""
        else:  # inputs that are not a lattice (dense GP regression/classification)
            self.dims = ("obs",) if len(shape) == 1 else tuple(f"dim_{i}" for i in
                                                               range(len(shape)))
            self.field_coords = {d: np.arange(n) for d, n in zip(self.dims, shape, strict=True)}
            self.units = ""
        self.shape = shape
        self.coef_names = [f"x{i}" for i in range(lgm.n_beta)]
        mask = np.zeros(int(np.prod(shape)), dtype=bool)
        mask[lgm.likelihood.obs_index] = True
        self.inside = np.ones(shape, dtype=bool)
        self._observed = mask.reshape(shape)
        self._window = lgm.prior.window_index()

    def init_state(self, rngs, chains, initvals=None, warm: bool = True):
        """An exact prior draw at the model's initial hyperparameters (or ``initvals``)."""
        theta = None if initvals is None else [dict(t) for t in initvals]
        return init_state(self.lgm, rngs, chains=chains, theta=theta)

    def default_representation(self) -> str:
        """``prior-white`` (the Murray–Adams default on every backend)."""
        return "prior-white"

    def default_sweep(self, representation: str, n_latent: int, tune: int = 0):
        """Hyperparameter moves (if any are sampled), then ``n_latent`` ESS updates."""
        hyper = HyperMove(self.lgm, representation) if self.lgm.hyper_names else None
        return Gibbs(hyper, EllipticalSlice(self.lgm), n_latent=n_latent)

    def record(self, state) -> dict[str, Any]:
        """Hyperparameters, coefficients and the field on the likelihood's grid."""
        n = state.n_chains
        f = state.f.reshape(n, -1)[:, self._window].reshape(n, *self.shape)
        return {"scalars": {k: np.asarray(v, dtype=float) for k, v in state.theta.items()},
                "beta": np.asarray(state.beta, dtype=float) if self.coef_names else None,
                "f": f.astype(np.float32), "summary": {"f": f}}

    def data_groups(self) -> dict[str, dict[str, tuple[tuple[str, ...], np.ndarray]]]:
        """``observed_data["data"]`` (NaN where unobserved), ``constant_data["observed"]``.

        Named ``data``, not ``y``: a lattice prior's dims are often ``("y", "x")``, and a
        variable may not share its name with a dimension coordinate.
        """
        lik = self.lgm.likelihood
        y = np.full(int(np.prod(self.shape)), np.nan)
        y[lik.obs_index] = lik.y_obs
        return {"observed_data": {"data": (self.dims, y.reshape(self.shape))},
                "constant_data": {"observed": (self.dims, self._observed.astype(np.int8))}}

    def extra_coords(self) -> dict[str, np.ndarray]:
        """No non-field dims."""
        return {}

    def data_hash(self) -> str:
        """SHA-256 of the likelihood's data, offsets and in-block covariates."""
        lik = self.lgm.likelihood
        return hash_arrays({"y": lik.y_obs, "aux": lik.aux_obs, "index": lik.obs_index,
                            "offset": self.lgm.offset_obs, "x": self.lgm.covariates_obs})

    def priors_text(self) -> dict[str, str]:
        """The hyperpriors as stated, by name."""
        return {k: hp.describe() for k, hp in self.lgm.hyperpriors.items()}


def view_of(model: Any) -> RunView:
    """The run's view of ``model``.

    The model itself if it implements :class:`RunView`, else the adapter of an LGCP or a
    LatentGaussianModel.
    """
    if isinstance(model, RunView):
        return model
    if isinstance(model, LGCP):
        return LGCPView(model)
    if isinstance(model, LatentGaussianModel):
        return LatentView(model)
    raise InvalidParameterError(
        f"model={type(model).__name__} is not a lattice_lgm model; pass an LGCP, a "
        "LatentGaussianModel (GP regression and classification build one on a DensePrior), or "
        "a model implementing lattice_lgm._runview.RunView.")
