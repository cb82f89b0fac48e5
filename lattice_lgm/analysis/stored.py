"""An LGCP as its run's store holds it: what the intensity and the maps need, without data files.

A run records its lattice exactly and the standardisation of its covariate columns
(``attrs["analysis"]``, :func:`lattice_lgm.models.lgcp_start.analysis_record`) beside the
exposure, the cells inside the window, the offset and the standardised columns
(``constant_data``) and the counts (``observed_data``).  :class:`StoredLGCP` rebuilds from them
the part of :class:`~lattice_lgm.LGCP` that :func:`~lattice_lgm.analysis.intensity`,
:func:`~lattice_lgm.analysis.relative_risk`, :func:`~lattice_lgm.analysis.exceedance` and the
CLI's maps read, so a store is mapped on another machine, or after its data moved (decision
101).  With the point pattern (``observed_data.points``) and the window's geometry it also
serves :func:`~lattice_lgm.analysis.expected_counts` over a region, the posterior predictive
patterns, the second-order check and the residual maps.  The prior predictive
(:func:`~lattice_lgm.analysis.prior_dataset`) simulates from the priors: it takes the model.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import shapely

from ..covariates import DesignMatrix
from ..errors import InvalidParameterError
from ..lattice import Lattice
from ..models.reporting import LGCPReporting
from ..window import Window

__all__ = ["StoredLGCP"]


class _StoredWindow:
    """The window as its maps draw it: the boundary rings."""

    def __init__(self, rings: list) -> None:
        self._rings = [np.asarray(r, dtype=float) for r in rings]

    def outline(self) -> list[np.ndarray]:
        """Boundary rings, each ``(k, 2)`` (as :meth:`lattice_lgm.window.Window.outline`)."""
        return [r.copy() for r in self._rings]


class StoredLGCP(LGCPReporting):
    """The LGCP of a run, rebuilt from its store (no data files needed).

    Parameters
    ----------
    tree : xarray.DataTree
        The run (:func:`lattice_lgm.open_store`, or ``sample()``'s result).

    Attributes
    ----------
    lattice : Lattice
    time_units : str or None
    counts, exposure : ndarray, shape lattice.shape
    inside : ndarray of bool, shape lattice.shape
    offset : ndarray or None
    points : ndarray (n, ndim) or None
        The point pattern in (x, y[, t]) order (runs before decision 101's record: None).
    window : Window (its recorded geometry) or, for older runs, the outline rings only
    nu : float or None
    design : DesignMatrix or None
        The stored standardised columns with their centres and scales.

    Raises
    ------
    InvalidParameterError
        ``tree`` is not an LGCP run, or was written before runs recorded their lattice.
    """

    def __init__(self, tree: Any) -> None:
        attrs = dict(tree.attrs)
        rec = attrs.get("analysis") or {}
        if attrs.get("model") != "LGCP" or "lattice" not in rec:
            raise InvalidParameterError(
                f"tree holds {'an LGCP run' if attrs.get('model') == 'LGCP' else 'no LGCP run'}"
                " without the lattice recorded for its analysis (attrs['analysis']); rebuild "
                "the model from the stored config instead (lattice_lgm.resume or "
                "RunConfig.from_resolved(read_config(path)).build_model()).")
        lat = rec["lattice"]
        self.lattice = Lattice(tuple(lat["shape"]), spacing=tuple(lat["spacing"]),
                               origin=tuple(lat["origin"]), dims=tuple(lat["dims"]),
                               units=lat["units"], crs=lat["crs"])
        self.time_units = rec.get("time_units")
        #: the window: its geometry where the run recorded it (WKB, exact), else its outline
        wkb = rec.get("window_wkb")
        self.window = (Window.from_geometry(shapely.from_wkb(bytes.fromhex(wkb)),
                                            crs=self.lattice.crs)
                       if wkb else _StoredWindow(rec.get("outline", [])))
        #: the field's Matérn smoothness (the analytic pcf of the second-order check)
        self.nu = rec.get("nu")
        const = tree["constant_data"].to_dataset()
        self.exposure = const["exposure"].values.astype(float)
        self.inside = const["inside"].values.astype(bool)
        self.offset = const["offset"].values.astype(float) if "offset" in const else None
        observed = tree["observed_data"].to_dataset()
        self.counts = observed["counts"].values
        #: the point pattern, (n, ndim) in (x, y[, t]) order, where the run stored it
        self.points = observed["points"].values if "points" in observed else None
        self.design = None
        if "covariates" in const:
            names = [str(n) for n in const["covariate"].values]
            # the design as stored: standardised columns (covariate first) and their scaling,
            # so that X_original is DesignMatrix's own
            self.design = DesignMatrix(
                X=np.moveaxis(np.asarray(const["covariates"].values, dtype=float), 0, -1),
                names=tuple(names), center=np.asarray(rec["center"], dtype=float),
                scale=np.asarray(rec["scale"], dtype=float), methods={},
                formula="~ " + " + ".join(names), lattice=self.lattice, inside=self.inside)

    @property
    def area(self) -> float:
        """The window's exposure: area (× time step in space-time) in the lattice's units."""
        return float(self.exposure.sum())

    def __repr__(self) -> str:
        return f"StoredLGCP(lattice {self.lattice.shape}, units {self.lattice.units!r})"
