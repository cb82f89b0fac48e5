"""Second-order summaries, minimum-contrast LGCP fits, a Poisson GLM and global envelopes.

A frequentist cross-check of the Bayesian LGCP fits and a source of starting values, in the
spirit of spatstat's ``kppm(..., clusters="LGCP")``:

* :func:`pcf`, :func:`kfunction`, :func:`lfunction` — kernel pair-correlation and Ripley's K
  with the translation edge correction, for rectangles (exact) and polygons (set covariance by
  FFT, with a rigorous error bound); with ``intensity=`` (ρ at the points, a callable or a
  lattice DataArray) their inhomogeneous versions (Baddeley, Møller & Waagepetersen 2000);
* :func:`lgcp_pcf`, :func:`lgcp_k` — the model's ``g(r) = exp(C(r))`` and
  ``K(r) = 2π ∫₀ʳ s g(s) ds`` (Møller, Syversveen & Waagepetersen 1998);
* :func:`min_contrast_lgcp` — minimum-contrast fit of (sd, range) of a Matérn field
  (Diggle 2003; Møller & Waagepetersen 2004, §10), with covariates through the inhomogeneous
  pcf/K given a first-order intensity (Waagepetersen 2007); :func:`min_contrast_fit` fits a
  curve computed elsewhere;
* :func:`poisson_glm` — log-linear Poisson regression on lattice cells by IRLS;
* :func:`global_envelope` — global envelope tests (MAD and extreme rank length) with exact
  rank-based p-values (Myllymäki et al. 2017);
* simulation in a window: :mod:`lattice_lgm.simulate` (``simulate_lgcp``,
  ``simulate_poisson``).

Windows
-------
A window is a shapely (Multi)Polygon, a 4-tuple ``(xmin, xmax, ymin, ymax)`` or any object with a
``to_shapely()`` method.  Points are ``(n, 2)`` arrays in ``(x, y)`` order and must lie in the
closed window (points on the edge count as inside, DESIGN §9).

Notation
--------
``λ̂ = n/|W|`` is the intensity estimate, ``γ_W(h) = |W ∩ (W + h)|`` the set covariance of the
window, ``d_ij = |x_i − x_j|``, ``k_h`` the Epanechnikov kernel of half-width ``h``.

Modules: ``_geometry`` (windows, set covariance, pairs), ``summaries`` (pcf, K, L),
``mincontrast`` (the LGCP's g and K, minimum contrast), ``glm``, ``envelopes``.
"""

from __future__ import annotations

from ._geometry import STOYAN_COEFFICIENT
from .envelopes import Envelope, global_envelope
from .glm import GLMFit, poisson_glm
from .mincontrast import (
    MinContrastFit,
    MinContrastWarning,
    lgcp_k,
    lgcp_pcf,
    min_contrast_fit,
    min_contrast_lgcp,
)
from .summaries import kfunction, lfunction, pcf

__all__ = [
    "STOYAN_COEFFICIENT",
    "Envelope",
    "GLMFit",
    "MinContrastFit",
    "MinContrastWarning",
    "global_envelope",
    "kfunction",
    "lfunction",
    "lgcp_k",
    "lgcp_pcf",
    "min_contrast_fit",
    "min_contrast_lgcp",
    "pcf",
    "poisson_glm",
]
