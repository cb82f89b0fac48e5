"""Observation windows, exposure and point binning for log-Gaussian Cox processes.

An LGCP observed in a window ``W`` and discretised on a lattice has, per cell ``c``, a Poisson
count with mean ``|c ∩ W| · exp(f_c)`` (Møller, Syversveen & Waagepetersen 1998, *Scand. J.
Statist.* 25, 451-482, where the likelihood is approximated on a grid; Diggle, Moraga,
Rowlingson & Taylor 2013, *Statist. Sci.* 28, 542-563).  This module supplies the two
data ingredients of that likelihood:

- the **exposure** ``|c ∩ W|`` of every cell (area in 2-D, length in 1-D, area × time spacing in
  space-time), computed exactly — analytically for rectangles and intervals, by polygon clipping
  for shapely windows, as covered fraction × cell area for raster masks;
- the observed **counts**, by binning a point pattern with explicit rules for every edge case
  (points on the window edge, on cell edges, on the lattice's upper edge, outside the window,
  duplicates, points that round-off puts in a cell of zero exposure).

Conventions (DESIGN §9)
-----------------------
- Point coordinates are given in the usual ``(x, y)`` order, i.e. the *reverse* of the lattice's
  axis order: ``(x,)`` in 1-D, ``(x, y)`` in 2-D, ``(x, y, t)`` in 3-D.  Arrays on a lattice are
  in the lattice's axis order (``(y, x)`` or ``(t, y, x)``).  In 2-D and 3-D the last lattice axis
  is taken as x and the one before it as y, whatever their names.
- Windows are **closed**: points on the boundary are inside.
- Cells are half-open ``[lo, hi)`` on every axis, except that the last cell on each axis is closed
  at the top, so a point on the lattice's upper edge lands in the last cell.  Cell edges are
  ``origin + k * spacing`` (the same numbers are used for exposure and for binning, so the two
  always agree on which cell a point is in).

Notation: ``h`` is a cell spacing, ``o`` the lattice origin, ``n`` the cells on an axis.

Modules: ``geometry`` (:class:`Window`: construction, geometry, membership, exposure),
``lattices`` (:func:`lattice_for_window`), ``points`` (:func:`read_points`), ``binning``
(:class:`BinnedPoints`, :func:`bin_points`), ``_cells`` (cell edges and indices, exact
overlaps of cells with intervals and polygons) and ``_inputs`` (checks of coordinates,
lattices, CRSs, GeoDataFrames, polygons and raster masks).
"""

from __future__ import annotations

from .binning import BinnedPoints, bin_points
from .geometry import Window
from .geometry import _rebuild_window as _rebuild_window  # windows pickled before the split
from .lattices import lattice_for_window
from .points import read_points

__all__ = ["BinnedPoints", "Window", "bin_points", "lattice_for_window", "read_points"]
