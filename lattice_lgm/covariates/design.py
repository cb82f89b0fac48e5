"""The centred and scaled design matrix built from a formula and covariates."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from ..errors import (
    InvalidDataError,
    InvalidParameterError,
    ShapeMismatchError,
)
from ..lattice import Lattice
from ._source import _NETCDF_SUFFIXES, _RASTER_SUFFIXES, METHODS, _validate_mask
from .formula import Factor, parse_formula
from .io import from_table, read_raster
from .regridding import regrid


# ---------------------------------------------------------------------------------------------
# design matrix
# ---------------------------------------------------------------------------------------------
def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.array(a, dtype=np.float64 if a.dtype != np.bool_ else np.bool_)
    a.flags.writeable = False
    return a


@dataclass(frozen=True, eq=False)
class DesignMatrix:
    """Centred and scaled covariate columns on a lattice, from :func:`build_design`.

    Attributes
    ----------
    X : ndarray, shape (*lattice.shape, p), float64, read-only
        Standardised columns ``(x - center) / scale``; NaN exactly outside ``inside``.
    names : tuple of str, length p
        Column names: ``elev``, ``elev:grad``, ``C(soil)[T.b]``, ``elev:C(soil)[T.b]``.
    center, scale : ndarray, shape (p,)
        What was subtracted and divided by (0 and 1 for pure dummy columns or when centring /
        scaling was switched off).
    methods : dict of str to str
        Regrid method per factor label (``"elev"``, ``"C(soil)"``).
    formula : str
        The formula as given.
    lattice : Lattice
        The lattice the columns live on.
    inside : ndarray of bool, shape lattice.shape
        Cells with values (the mask used for regridding and for the centring weights).
    levels : dict of str to tuple of str
        Levels per categorical factor label, reference (first, smallest) level first.
    column_factors : tuple of tuple of str, length p
        The factor labels each column is built from (``("elev", "C(soil)")``).
    """

    X: np.ndarray
    names: tuple[str, ...]
    center: np.ndarray
    scale: np.ndarray
    methods: dict[str, str]
    formula: str
    lattice: Lattice
    inside: np.ndarray
    levels: dict[str, tuple[str, ...]] = field(default_factory=dict)
    column_factors: tuple[tuple[str, ...], ...] = ()

    @property
    def p(self) -> int:
        """Number of columns."""
        return len(self.names)

    @property
    def columns(self) -> np.ndarray:
        """``X`` with the column axis first, shape ``(p, *lattice.shape)``.

        This is the layout :class:`~lattice_lgm.models.latent.LatentGaussianModel` takes as
        ``covariates``.
        """
        return np.moveaxis(self.X, -1, 0)

    @functools.cached_property
    def X_original(self) -> np.ndarray:
        """The columns on their original scale, ``center + scale · X``, shape ``X.shape``.

        Cells outside ``inside`` (NaN in ``X``) hold the centre: they are never read there.
        Computed once: the intensity of every stored draw uses it.
        """
        x = self.center + self.scale * np.nan_to_num(self.X, nan=0.0)
        x.setflags(write=False)
        return x

    def to_original(
        self, coef: np.ndarray, intercept: float | np.ndarray = 0.0
    ) -> tuple[np.ndarray, np.ndarray | float]:
        """Map coefficients on the standardised columns back to the original covariates.

        With ``z_j = (x_j - c_j) / s_j``, ``a + Σ β_j z_j = (a - Σ β_j c_j / s_j) + Σ (β_j / s_j)
        x_j``, so ``β_orig = β / s`` and ``intercept_orig = intercept - Σ β c / s``.

        Parameters
        ----------
        coef : array_like, shape (..., p)
            Coefficients, optionally with leading sample axes (e.g. ``(n_draws, p)``).
        intercept : float or array_like, shape (...)
            Intercept(s) on the standardised scale, broadcast against ``coef[..., 0]``.

        Returns
        -------
        coef_orig : ndarray, shape (..., p)
        intercept_orig : float or ndarray, shape (...)

        Raises
        ------
        ShapeMismatchError
            ``coef``'s last axis is not ``p`` or ``intercept`` does not broadcast.
        """
        b = np.asarray(coef, dtype=np.float64)
        if b.ndim == 0 or b.shape[-1] != self.p:
            raise ShapeMismatchError(
                f"coef has shape {b.shape}; expected (..., {self.p}) for the columns "
                f"{list(self.names)}."
            )
        a = np.asarray(intercept, dtype=np.float64)
        try:
            np.broadcast_shapes(a.shape, b.shape[:-1])
        except ValueError:
            raise ShapeMismatchError(
                f"intercept has shape {a.shape}, which does not broadcast with coef's leading "
                f"shape {b.shape[:-1]}; pass one intercept per draw."
            ) from None
        b_orig = b / self.scale
        a_orig = a - np.sum(b_orig * self.center, axis=-1)
        return b_orig, (float(a_orig) if np.ndim(a_orig) == 0 else a_orig)

    def as_dataset(self) -> xr.Dataset:
        """The standardised columns as an :class:`xarray.Dataset` on the lattice.

        Returns
        -------
        xarray.Dataset
            One variable per column (named as in ``names``), dims ``lattice.dims``; each carries
            ``center``, ``scale`` and ``regrid_method`` attrs; the dataset carries ``formula``.
        """
        coords = self.lattice.coords()
        data = {}
        for k, name in enumerate(self.names):
            data[name] = xr.DataArray(
                self.X[..., k], dims=self.lattice.dims, coords=coords,
                attrs={"center": float(self.center[k]), "scale": float(self.scale[k]),
                       "regrid_method": self._column_method(k)},
            )
        return xr.Dataset(data, coords=coords, attrs={"formula": self.formula})

    def describe(self) -> str:
        """A plain-text table: column, regrid method(s), centre, scale, range inside the mask."""
        lines = [f"DesignMatrix {self.formula!r}: {self.p} columns on {self.lattice!r}, "
                 f"{int(self.inside.sum())} of {self.lattice.size} cells inside"]
        width = max([len(n) for n in self.names] + [6])
        lines.append(f"  {'column':<{width}}  {'method':<14}{'center':>12}{'scale':>12}"
                     f"{'min(z)':>10}{'max(z)':>10}")
        for k, name in enumerate(self.names):
            z = self.X[..., k][self.inside]
            meth = self._column_method(k)
            lo, hi = (float(z.min()), float(z.max())) if z.size else (math.nan, math.nan)
            lines.append(f"  {name:<{width}}  {meth:<14}{self.center[k]:>12.5g}"
                         f"{self.scale[k]:>12.5g}{lo:>10.3g}{hi:>10.3g}")
        if self.levels:
            for lab, lev in self.levels.items():
                lines.append(f"  {lab} levels: {', '.join(lev)} (reference {lev[0]})")
        return "\n".join(lines)

    def _column_method(self, k: int) -> str:
        return ",".join(sorted({self.methods[f] for f in self.column_factors[k]}))

    def __repr__(self) -> str:
        return (f"DesignMatrix(formula={self.formula!r}, names={self.names}, "
                f"shape={self.X.shape})")


def _load(source: Any, name: str) -> xr.DataArray:
    """A covariate from the mapping: a DataArray, or a GeoTIFF/NetCDF/CSV path."""
    if isinstance(source, xr.DataArray):
        return source
    if isinstance(source, str | PathLike):
        suffix = Path(source).suffix.lower()
        if suffix == ".csv":
            return from_table(source, name)
        if suffix in _RASTER_SUFFIXES | _NETCDF_SUFFIXES:
            return read_raster(source, name=name)
        raise InvalidParameterError(
            f"covariates[{name!r}]={str(source)!r} has suffix {suffix!r}; pass a DataArray, a "
            "GeoTIFF, a NetCDF file or a long-format CSV."
        )
    raise InvalidParameterError(
        f"covariates[{name!r}] is a {type(source).__name__}; pass an xarray.DataArray or a "
        "path to a GeoTIFF, NetCDF or CSV file."
    )


def _level_labels(levels: np.ndarray, attrs: Mapping[str, Any]) -> list[str]:
    """Names of category codes: CF ``flag_values``/``flag_meanings`` if given, else the code."""
    names: dict[float, str] = {}
    fv, fm = attrs.get("flag_values"), attrs.get("flag_meanings")
    if fv is not None and fm is not None:
        meanings = fm.split() if isinstance(fm, str) else list(fm)
        names = {float(v): str(m) for v, m in zip(np.atleast_1d(fv), meanings, strict=False)}
    out = []
    for v in levels:
        v = float(v)
        out.append(names.get(v, str(int(v)) if v.is_integer() else repr(v)))
    return out


def build_design(
    formula: str,
    covariates: Mapping[str, xr.DataArray | str | PathLike],
    lattice: Lattice,
    *,
    inside: np.ndarray | None = None,
    methods: Mapping[str, str] | None = None,
    center: bool = True,
    scale: bool = True,
    weights: np.ndarray | None = None,
) -> DesignMatrix:
    """Regrid the covariates a formula names and build centred, scaled design columns.

    Parameters
    ----------
    formula : str
        See :func:`parse_formula`, e.g. ``"~ elev + grad + elev:grad + C(soil)"``.
    covariates : mapping of str to DataArray or path
        Sources by name; paths are read with :func:`read_raster` (GeoTIFF, NetCDF; ``name`` is
        the key) or :func:`from_table` (``.csv``; the column named like the key).  Names not in
        the formula are ignored.
    lattice : Lattice
        The model lattice.
    inside : ndarray of bool, shape lattice.shape, optional
        Cells that need values (positive exposure).  Default: ``weights > 0`` if ``weights`` is
        given, else every cell.  ``X`` is NaN outside.
    methods : mapping of str to str, optional
        Regrid method per covariate name (see :func:`regrid`).  Default ``"area"`` for plain
        names and ``"majority"`` for ``C(name)``; categorical factors refuse ``"area"``.
    center, scale : bool
        Subtract the mean / divide by the standard deviation of each non-dummy column.
    weights : ndarray, shape lattice.shape, optional
        Non-negative cell weights (the exposure) for the mean and SD; default equal weights.

    Returns
    -------
    DesignMatrix
        ``X`` of shape ``(*lattice.shape, p)``.

    Notes
    -----
    * Categorical factors are dummy (treatment) coded: levels are the sorted distinct values
      found inside the mask, the first is the reference and gets no column (Chambers & Hastie
      1992, *Statistical Models in S*, §2.3.2).  A term's columns are the products of its
      factors' columns in the order written; reduced (treatment) coding is used for every
      categorical factor of every term, whether or not its marginal terms are present.
    * Interactions are products of the *unscaled* regridded covariates (and dummies); the
      product column is then centred and scaled like any other column, so ``elev:grad`` means
      ``(elev·grad - mean) / sd``, not the product of standardised columns.
    * Centre and scale are the weighted mean and weighted population SD (divide by ``Σ w``)
      over ``inside``: ``m = Σ w x / Σ w``, ``s² = Σ w (x - m)² / Σ w``.  Pure dummy columns
      (categorical factors only) are neither centred nor scaled (centre 0, scale 1) so that
      their coefficients stay contrasts with the reference level; columns involving a
      continuous factor are treated as continuous.
    * A column that is constant inside the mask is refused: it is confounded with the
      intercept.

    Raises
    ------
    InvalidParameterError
        A covariate missing from ``covariates``, a ``methods`` key not in the formula, an
        unknown method, ``"area"`` for a categorical factor, bad ``weights``; and every error of
        :func:`parse_formula`.
    InvalidDataError
        A constant column, a categorical factor with a single level inside the mask, zero total
        weight; and every error of :func:`regrid`.
    ShapeMismatchError
        ``inside`` or ``weights`` not of ``lattice.shape``.
    """
    terms = parse_formula(formula)
    if not isinstance(lattice, Lattice):
        raise InvalidParameterError(
            f"lattice is a {type(lattice).__name__}; pass a lattice_lgm.Lattice."
        )
    if not isinstance(covariates, Mapping):
        raise InvalidParameterError(
            f"covariates is a {type(covariates).__name__}; pass a mapping name -> DataArray "
            "or path."
        )
    w = None
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != lattice.shape:
            raise ShapeMismatchError(
                f"weights has shape {w.shape}; expected the lattice shape {lattice.shape}."
            )
        bad = ~np.isfinite(w) | (w < 0)
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            raise InvalidParameterError(
                f"weights has the value {w[idx].item()!r} at index {idx}; weights (exposures) "
                "must be finite and >= 0."
            )
    mask = _validate_mask(inside if inside is not None or w is None else w > 0, lattice)
    wts = np.where(mask, 1.0 if w is None else w, 0.0)
    if not wts.sum() > 0:
        raise InvalidDataError(
            "no cell inside the mask has positive weight; pass inside= / weights= that select "
            "at least one cell."
        )

    factors = list(dict.fromkeys(f for t in terms for f in t.factors))
    used = {f.name for f in factors}
    methods = dict(methods or {})
    unknown = sorted(set(methods) - used)
    if unknown:
        raise InvalidParameterError(
            f"methods names {unknown}, which the formula {formula!r} does not use (it uses "
            f"{sorted(used)}); check the spelling."
        )
    missing = [n for n in dict.fromkeys(f.name for f in factors) if n not in covariates]
    if missing:
        raise InvalidParameterError(
            f"covariates lacks {missing} named in the formula {formula!r}; it has "
            f"{sorted(covariates)}."
        )

    # Regrid each factor once: continuous → one column, categorical → dummy columns.
    cols_of: dict[Factor, list[tuple[str, np.ndarray]]] = {}
    used_methods: dict[str, str] = {}
    levels: dict[str, tuple[str, ...]] = {}
    for f in factors:
        meth = methods.get(f.name, "majority" if f.categorical else "area")
        if meth not in METHODS:
            raise InvalidParameterError(
                f"regrid method for {f.name!r}: methods[{f.name!r}]={meth!r} is not one of "
                f"{METHODS}."
            )
        if f.categorical and meth == "area":
            raise InvalidParameterError(
                f"methods[{f.name!r}]='area' would average category codes of {f.label}; use "
                "'majority' (default) or 'nearest'."
            )
        da = _load(covariates[f.name], f.name)
        try:
            vals = regrid(da, lattice, method=meth, inside=mask).values
        except InvalidDataError as e:  # say which covariate failed
            raise type(e)(f"covariates[{f.name!r}]: {e}") from None
        used_methods[f.label] = meth
        if not f.categorical:
            cols_of[f] = [(f.label, vals)]
            continue
        lev = np.unique(vals[mask])
        if lev.size < 2:
            raise InvalidDataError(
                f"{f.label} has {lev.size} level(s) inside the mask ({lev.tolist()}); a single "
                "level is confounded with the intercept. Drop the term."
            )
        labels = _level_labels(lev, da.attrs)
        levels[f.label] = tuple(labels)
        cols_of[f] = [(f"{f.label}[T.{lab}]", np.where(mask, vals == v, np.nan))
                      for v, lab in zip(lev[1:], labels[1:], strict=True)]

    names: list[str] = []
    raw: list[np.ndarray] = []
    dummy: list[bool] = []
    col_factors: list[tuple[str, ...]] = []
    for t in terms:
        combos: list[tuple[list[str], np.ndarray]] = [([], np.ones(lattice.shape))]
        for f in t.factors:
            combos = [([*n, cn], v * cv) for n, v in combos for cn, cv in cols_of[f]]
        for n, v in combos:
            names.append(":".join(n))
            raw.append(np.where(mask, v, np.nan))
            dummy.append(all(f.categorical for f in t.factors))
            col_factors.append(tuple(f.label for f in t.factors))

    p = len(names)
    ctr = np.zeros(p)
    scl = np.ones(p)
    X = np.full((*lattice.shape, p), np.nan)
    wsum = wts.sum()
    for k, v in enumerate(raw):
        vin = v[mask]
        # Constant inside the window (relative to the column's size): confounded with the
        # intercept.  The tolerance absorbs the last-bit differences area averaging leaves.
        active = vin[wts[mask] > 0]
        if np.ptp(active) <= 1e-10 * max(np.abs(active).max(), np.finfo(float).tiny):
            raise InvalidDataError(
                f"column {names[k]!r} is constant ({active[0]:.6g}) over the cells inside the "
                "mask, so it is confounded with the intercept; drop it from the formula."
            )
        if not dummy[k]:
            m = float(np.sum(wts * np.where(mask, v, 0.0)) / wsum)
            sd = float(np.sqrt(np.sum(wts * np.where(mask, (v - m) ** 2, 0.0)) / wsum))
            ctr[k] = m if center else 0.0
            scl[k] = sd if scale else 1.0
        X[..., k] = np.where(mask, (v - ctr[k]) / scl[k], np.nan)

    return DesignMatrix(
        X=_readonly(X), names=tuple(names), center=_readonly(ctr), scale=_readonly(scl),
        methods=used_methods, formula=formula, lattice=lattice, inside=_readonly(mask),
        levels=levels, column_factors=tuple(col_factors),
    )
