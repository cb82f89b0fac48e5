"""What an LGCP reports of its draws: the posterior's names and scales, the intensity, itself.

The sampler works on its own parametrisation (standardised covariate columns, the intercept
as a hyperparameter or in the Gaussian block); a run's posterior, its summary table and its
maps speak of one ``intercept`` and one ``beta`` on the covariates' original scale
(decision 85).  A mixin of :class:`~lattice_lgm.models.LGCP`, whose attributes it reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import InvalidParameterError, ShapeMismatchError
from ..lattice import measure_unit


class LGCPReporting:
    """The reporting half of :class:`~lattice_lgm.models.LGCP`."""

    # set by LGCP.__init__
    coef_names: list[str]
    hyper_coefficients: dict[str, str]
    design: Any
    intercept: str
    prior_spec: dict[str, Any]

    def reported_draws(self, theta: Mapping[str, np.ndarray], coef: np.ndarray,
                       ) -> dict[str, np.ndarray]:
        """The posterior's scalar variables (and ``beta``) from the sampler's parameters.

        The covariance hyperparameters keep their names; the intercept (a hyperparameter or
        the block's first coefficient) becomes ``intercept`` and the covariates' coefficients
        ``beta``, both on the covariates' original scale (:meth:`reported_coefficients`): the
        store, the summary table and the intensity use one name and one scale for each.

        Parameters
        ----------
        theta : mapping of str to ndarray, each shape (...)
            The sampler's hyperparameters (``state.theta``, or stacked over draws).
        coef : ndarray, shape (..., len(coef_names))
            :meth:`coefficient_draws` (stacked alike).

        Returns
        -------
        dict of str to ndarray
            Hyperparameters and ``intercept``, shape (...), in ``theta``'s order; ``beta``,
            shape (..., len(covariate_names)), when the model has covariates.
        """
        skip = {"mean", *self.hyper_coefficients.values()}
        # copies: a record must not change when the sampler updates its state in place
        out = {k: np.array(v, dtype=float) for k, v in theta.items() if k not in skip}
        icpt, beta = self.reported_coefficients(coef, theta.get("mean"))
        out["intercept"] = icpt
        if self.covariate_names:
            out["beta"] = beta
        return out

    def log_intensity_values(self, f: np.ndarray, intercept: np.ndarray,
                             beta: np.ndarray | None = None) -> np.ndarray:
        """``log λ = intercept + Xβ + f + offset`` on the lattice; NaN outside the window.

        Parameters
        ----------
        f : ndarray, shape (..., *lattice.shape)
        intercept : ndarray, shape (...)
        beta : ndarray, shape (..., len(covariate_names)), optional
            On the covariates' original scale (required when the model has covariates).

        Returns
        -------
        ndarray, shape (..., *lattice.shape)
        """
        f = np.asarray(f, dtype=float)
        nd = self.lattice.ndim
        icpt = np.asarray(intercept, dtype=float)
        eta = f + icpt.reshape(icpt.shape + (1,) * nd)
        if self.covariate_names:
            if beta is None:
                raise InvalidParameterError(
                    f"beta is None; this model has covariates {list(self.covariate_names)}.")
            # the original columns (``beta`` is on their scale); outside the window masked below
            eta = eta + np.tensordot(np.asarray(beta, dtype=float), self.design.X_original,
                                     axes=([-1], [-1]))
        if self.offset is not None:
            eta = eta + self.offset
        return np.where(self.inside, eta, np.nan)

    def coefficient_draws(self, state: Any) -> np.ndarray:
        """Every coefficient of a sampler state, in :attr:`coef_names` order.

        Block coefficients come from ``state.beta``, hyperparameter ones from ``state.theta``.

        Returns
        -------
        ndarray, shape (n_chains, len(coef_names))
        """
        n = len(state.chains)
        block = iter(np.asarray(state.beta, dtype=float).reshape(n, -1).T)
        cols = [np.asarray(state.theta[self.hyper_coefficients[c]], dtype=float)
                if c in self.hyper_coefficients else next(block) for c in self.coef_names]
        return np.stack(cols, axis=1) if cols else np.zeros((n, 0))

    # -- reporting ----------------------------------------------------------------------------
    @property
    def covariate_names(self) -> tuple[str, ...]:
        """The covariate columns' names: the ``covariate`` coordinate of ``posterior.beta``."""
        return () if self.design is None else tuple(self.design.names)

    def reported_coefficients(self, coef: np.ndarray, intercept: np.ndarray | float | None = None,
                              ) -> tuple[np.ndarray, np.ndarray]:
        """The intercept and the covariates' coefficients as reported: on the original scale.

        The sampler works on standardised columns, with the intercept either a
        hyperparameter (``theta["mean"]``) or the block's first coefficient (its prior centre
        subtracted); a run's posterior, its summary table and :func:`~lattice_lgm.analysis.
        log_intensity` all speak of one ``intercept`` and one ``beta`` on the covariates'
        original scale, which this maps to.

        Parameters
        ----------
        coef : ndarray, shape (..., len(coef_names))
            Coefficients on the sampler's scale, in :attr:`coef_names` order (e.g.
            :meth:`coefficient_draws` stacked over draws).
        intercept : float or ndarray, shape (...), optional
            The intercept hyperparameter (``theta["mean"]``); required unless
            ``intercept="block"``.

        Returns
        -------
        intercept : ndarray, shape (...)
            ``log λ`` at the covariates' zero, without the field (whose prior mean is
            ``sd²/2``).
        beta : ndarray, shape (..., len(covariate_names))
        """
        coef = np.asarray(coef, dtype=float)
        if coef.shape[-1:] != (len(self.coef_names),):
            raise ShapeMismatchError(
                f"coef has shape {coef.shape}; expected (..., {len(self.coef_names)}) for the "
                f"coefficients {self.coef_names}.")
        if self.intercept == "block":
            # the block's first coefficient is the intercept minus its prior centre
            intercept = coef[..., 0] + self.prior_spec["mean"].mean
            coef = coef[..., 1:]
        elif intercept is None:
            raise InvalidParameterError(
                "intercept is None; pass the intercept hyperparameter's draws (theta['mean']).")
        intercept = np.broadcast_to(np.asarray(intercept, dtype=float), coef.shape[:-1])
        if self.design is None:
            return intercept + 0.0, coef
        beta, icpt = self.design.to_original(coef, intercept)
        return np.asarray(icpt, dtype=float), beta

    def describe(self) -> str:
        """Data, lattice and priors (stated the INLA way).

        The cross-check and the chains' start are steps of a run, described by
        ``lattice_lgm.models.lgcp_start.prepare(model).describe(model)``.
        """
        lat, b = self.lattice, self.binned
        u = lat.units or "units"
        mu = measure_unit(lat, self.time_units)
        where = f"a {self.window.kind} window of area {self.area:.6g} {mu}"
        if lat.ndim == 3:
            tu = self.time_units or "time units"
            where = (f"a {self.window.kind} window of area {self.window.area:.6g} {u}² over "
                     f"{self.time_extent:.6g} {tu} (exposure {self.area:.6g} {mu})")
        lines = [
            f"LGCP: {self.n_points} points in {where}"
            + (f" ({b.n_dropped} outside dropped)" if b.n_dropped else "")
            + (f", {b.n_duplicates} duplicate locations kept" if b.n_duplicates else "")
            + (f", {b.n_moved} edge points assigned to the nearest open cell" if b.n_moved
               else ""),
            f"lattice {lat.shape} ({', '.join(lat.dims)}), cells "
            + (f"{lat.spacing[0]:g} {self.time_units or 'time units'} × " if lat.ndim == 3
               else "")
            + f"{' × '.join(f'{h:g}' for h in lat.spacing[lat.ndim == 3:])} {u}, "
            f"{int(self.inside.sum())} cells overlap the window",
            f"field prior: {self.prior.describe()}",
            "priors:",
            f"  range: {self.prior_spec['range'].describe()}",
            f"  sd:    {self.prior_spec['sd'].describe()}",
            *([f"  range_t ({self.time_units or 'time units'}): "
               f"{self.prior_spec['range_t'].describe()}"]
              if "range_t" in self.prior_spec else []),
            f"  intercept (log points per {mu}"
            + (", at the covariates' centres" if self.design is not None else "")
            + f"): {self.prior_spec['mean'].describe()}"
            + (" (in the Gaussian block)" if self.intercept == "block" else ""),
        ]
        if self.design is not None:
            where = ("as hyperparameters beta_<name>" if self.coefficients == "hyper"
                     else "in the Gaussian block")
            lines.append(f"  coefficients of {', '.join(self.design.names)} (standardised): "
                         f"Normal(0, {self.beta_sd:g}) {where}")
            lines.append("covariates: " + self.design.describe())
        return "\n".join(lines)
