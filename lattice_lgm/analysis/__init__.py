"""Post-hoc analysis of LGCP draws with xarray: intensity, relative risk, exceedance, totals.

The draws are an ArviZ-layout ``posterior`` :class:`xarray.Dataset` with dims ``(chain, draw)``
first: ``f`` on the lattice (``chain, draw, *lattice.dims``), the hyperparameters ``sd``,
``range`` and ``intercept``, and ``beta`` (``chain, draw, covariate``) when the model has
covariates — the intercept and coefficients on the covariates' original scale, whatever the
sampler's parametrisation (standardised columns, intercept as hyperparameter or in the
block).  :func:`posterior_dataset` builds it from sampler states; a run's store holds the
same layout.

Conventions (DESIGN §9):

- **intensity** ``λ(s) = exp(intercept + X(s)β + f(s) + offset)`` in points per unit area of the
  lattice's coordinate units (per m² for metres); ``per="ha"``/``"km2"``/``"m2"`` converts when
  the units are known.  Cells outside the window are NaN (λ is not defined there).
- **relative risk** ``RR(s) = exp(f(s) − sd²/2)``: the field's multiplicative effect, with prior
  mean 1 at every cell (``E exp(f) = exp(sd²/2)``); the baseline is named in the attrs.
- **exceedance** ``P(RR(s) > c | data)`` for thresholds ``c`` (default 1.5, 2, 3).
- **expected counts** ``Λ(B) = Σ_c λ_c |c ∩ B|`` for any region ``B`` (default the window),
  per draw, compared with the observed number of points.
- A **resolution check** warns when the posterior range is under :data:`MIN_CELLS_PER_RANGE`
  cells: the field varies within cells and the lattice is too coarse.
- **Model criticism**: prior and posterior predictive point patterns
  (:func:`predictive_patterns`), the pair-correlation function or ``L(r) − r`` of the data
  against a global envelope of predictive patterns with the LGCP's analytic ``exp(C_θ(r))`` per
  posterior draw (:func:`second_order_check`), and smoothed residual maps
  (:func:`residual_map`).

Modules: ``_core`` (the posterior Dataset, intensity, relative risk, exceedance, counts,
resolution), ``criticism`` (predictive patterns, second-order check, residuals),
``diagnostics`` (the posterior table and convergence notes).  For the lattice GPDS the layer
offers its predictive density at a user's points from a store
(:func:`~lattice_lgm.gpds.stored.predictive_density_from_store`).
"""

from __future__ import annotations

from ..gpds.stored import predictive_density_from_store
from ..settings import DEFAULT_THRESHOLDS
from ._core import (
    MIN_CELLS_PER_RANGE,
    exceedance,
    expected_counts,
    intensity,
    log_intensity,
    measure_unit,
    posterior_dataset,
    relative_risk,
    resolution_check,
    summarize,
)
from .criticism import predictive_patterns, prior_dataset, residual_map, second_order_check
from .diagnostics import ESS_MIN, RHAT_MAX, diagnostics_table, summary, summary_of
from .stored import StoredLGCP

__all__ = [
    "DEFAULT_THRESHOLDS",
    "ESS_MIN",
    "MIN_CELLS_PER_RANGE",
    "RHAT_MAX",
    "StoredLGCP",
    "diagnostics_table",
    "exceedance",
    "expected_counts",
    "intensity",
    "log_intensity",
    "measure_unit",
    "posterior_dataset",
    "predictive_density_from_store",
    "predictive_patterns",
    "prior_dataset",
    "relative_risk",
    "residual_map",
    "resolution_check",
    "second_order_check",
    "summarize",
    "summary",
    "summary_of",
]

