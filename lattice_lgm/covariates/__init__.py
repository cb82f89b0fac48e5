"""Covariates on the lattice: explicit regridding, checks, centring/scaling and a formula spec.

Covariates arrive on their own grids (an :class:`xarray.DataArray`, a GeoTIFF/NetCDF file or a
long-format table) and are put on the model :class:`~lattice_lgm.Lattice` by :func:`regrid` with
the method recorded in the output's attributes (DESIGN §9).  :func:`build_design` turns a
formula such as ``"~ elev + grad + elev:grad + C(soil)"`` into a centred and scaled
:class:`DesignMatrix` whose coefficients can be mapped back to the original scale.

Conventions
-----------
* Source grids are rectilinear and regular: 1-D coordinates named like the lattice dims, equally
  spaced, giving cell *centres*; source cell ``k`` on an axis covers ``centre_k ± spacing / 2``.
  Descending coordinates (rasters stored north to south) are flipped to ascending and the flip
  is recorded; the orientation is read from the coordinates, never guessed from the values.
* NaN in a source means "no data": such cells carry no weight.  Every target cell that needs a
  value (``inside``) must be fully covered by non-NaN source cells, or :func:`regrid` raises.
  The output is NaN outside ``inside`` and never NaN inside it.
* All tuples in the output attributes are in ``lattice.dims`` order and netCDF-safe (flat).

Notation: for one axis, ``W[i, k] = |target cell i ∩ source cell k|`` (a length), ``A`` the
source values with NaN set to 0 and ``M`` the indicator of non-NaN source cells.

Modules: ``_source`` (source grids, CRS), ``regridding``, ``io`` (readers), ``formula``,
``design``.
"""

from __future__ import annotations

from ._source import METHODS
from .design import DesignMatrix, build_design
from .formula import Factor, Term, parse_formula
from .io import from_table, read_raster
from .regridding import regrid

__all__ = [
    "METHODS",
    "DesignMatrix",
    "Factor",
    "Term",
    "build_design",
    "from_table",
    "parse_formula",
    "read_raster",
    "regrid",
]
