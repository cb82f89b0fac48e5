"""The separable space-time covariance :class:`SpaceTime` (time on axis 0, then space).

``sd² rho_t(|u| / l_t) rho_s(|s| / l_s)``: a temporal and a spatial correlation, each with its
own range in its own units.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._validation import positive_float
from ..errors import InvalidParameterError, ShapeMismatchError
from .base import RANGE_PER_LENGTHSCALE, Covariance, resolve_range


class SpaceTime(Covariance):
    """Separable space-time covariance ``C(u, s) = sd² rho_t(|u| / l_t) rho_s(|s| / l_s)``.

    The usual covariance of space-time log-Gaussian Cox processes (Brix & Diggle 2001, JRSS B
    63(4), §2; Diggle, Moraga, Rowlingson & Taylor 2013, J. Stat. Softw. 52(4), §3): a temporal
    correlation of the time lag ``u`` times an isotropic spatial correlation of the spatial lag
    ``s``, each with its own range in its own units (days and metres never mix, unlike an
    isotropic kernel over ``(t, y, x)``).  It is stationary on the lattice, so circulant
    embedding applies unchanged.  On a lattice its covariance matrix is ``sd² K_t ⊗ K_s``
    (C order, time slowest) and its torus spectrum the outer product ``sd² λ_t ⊗ λ_s`` of the
    temporal (1-D) and spatial embedding spectra — the multidimensional DFT of a product of
    functions of disjoint axes factorises — so the embedding is PSD exactly when both factors
    are PSD on their own tori.

    Axes: time is axis 0, the other ``ndim - 1`` axes are space (lattice dims
    ``("t", "y", "x")`` for the default ``ndim=3``, ``("t", "x")`` for ``ndim=2``).  Lags and
    points are given in this axis order.

    Parameters
    ----------
    space : Covariance
        The spatial correlation: a kernel with one range and ``sd = 1``, e.g.
        ``Matern(1.5, range=…)``.  Its type and shape parameter (``nu``, ``alpha``) give
        ``rho_s``; its range is the default of ``range``.
    time : Covariance
        The temporal correlation, one range and ``sd = 1``, e.g. ``Exponential(range=…)`` (the
        lgcp package's choice).  Its range is the default of ``range_t``.
    sd : float
        Marginal standard deviation of the field — the only sd.  Components with ``sd != 1``
        are refused (not silently ignored): give the sd here.
    range : float or tuple of float, optional
        Spatial range in coordinate units (``range = 2 lengthscale``, the module's convention),
        or the per-axis tuple ``(range_t, range, …, range)`` of length ``ndim`` — the form
        :class:`~lattice_lgm.priors.CirculantPrior` passes to :meth:`with_params`.  The spatial
        entries of such a tuple must be equal: geometric anisotropy in space is not part of this
        kernel.  Default: ``space``'s range.
    range_t : float, optional
        Temporal range in time units (``range_t = 2 lengthscale_t``).  Default: ``time``'s range.
    lengthscale, lengthscale_t : float or tuple of float, optional
        Aliases ``range / 2`` and ``range_t / 2``; give a range or its lengthscale, not both.
    ndim : int
        Number of axes, ≥ 2 (default 3).

    Attributes
    ----------
    range : tuple of float
        Per-axis ranges ``(range_t, range_s, …, range_s)``, length ``ndim`` (what the circulant
        prior sizes its torus and checks ``max_range`` with).
    range_t, range_s : float
        Temporal and spatial range.
    space, time : Covariance
        The components, with ``sd = 1`` and ranges ``range_s`` and ``range_t``.
    ndim : int

    Notes
    -----
    :attr:`params` is ``{"sd", "range", "range_t"}`` with ``range`` the *spatial* range (a
    number), plus the components' shape parameters: spatial ones under their own names (``nu``,
    ``alpha``), temporal ones with a ``_t`` suffix (``nu_t``, ``alpha_t``).  :meth:`with_params`
    takes any of these, ``lengthscale``/``lengthscale_t``, and a per-axis ``range`` tuple.

    Examples
    --------
    >>> k = SpaceTime(Matern(1.5, range=1.0), Exponential(range=1.0), sd=1.3, range=0.2,
    ...               range_t=5.0)
    >>> k.range
    (5.0, 0.2, 0.2)
    >>> k.with_params(range=(7.0, 0.3, 0.3)).params
    {'sd': 1.3, 'range': 0.3, 'range_t': 7.0, 'nu': 1.5}
    """

    space: Covariance
    time: Covariance
    range_t: float
    range_s: float
    ndim: int

    def __init__(
        self,
        space: Covariance,
        time: Covariance,
        *,
        sd: float = 1.0,
        range: float | Sequence[float] | None = None,
        range_t: float | None = None,
        lengthscale: float | Sequence[float] | None = None,
        lengthscale_t: float | None = None,
        ndim: int = 3,
    ) -> None:
        for name, comp, example in (("space", space, "Matern(1.5, range=1.0)"),
                                    ("time", time, "Exponential(range=1.0)")):
            if not isinstance(comp, Covariance) or isinstance(comp, SpaceTime):
                raise InvalidParameterError(
                    f"{name}={comp!r} must be a one-range lattice_lgm Covariance, e.g. "
                    f"{example}: the {name} correlation of the separable kernel."
                )
            if len(comp.range) != 1:
                raise InvalidParameterError(
                    f"{name}={comp!r} has per-axis ranges {comp.range}; SpaceTime's components "
                    "have one range each: build the component with one range (the temporal "
                    "range is range_t=, the spatial one range=)."
                )
            if comp.sd != 1.0:
                raise InvalidParameterError(
                    f"{name}={comp!r} has sd={comp.sd!r}; SpaceTime has one marginal sd: build "
                    f"the component with sd=1 and give SpaceTime(..., sd={comp.sd!r})."
                )
        if isinstance(ndim, bool) or not isinstance(ndim, int | np.integer) or ndim < 2:
            raise InvalidParameterError(
                f"ndim={ndim!r} must be an integer >= 2: time (axis 0) and at least one spatial "
                "axis, e.g. ndim=3 for ('t', 'y', 'x')."
            )
        ndim = int(ndim)
        rs, rt = _space_time_ranges(space, time, range, lengthscale, range_t, lengthscale_t,
                                    ndim)
        object.__setattr__(self, "sd", positive_float("sd", sd, "sd is a standard deviation > 0"))
        object.__setattr__(self, "ndim", ndim)
        object.__setattr__(self, "range_s", rs)
        object.__setattr__(self, "range_t", rt)
        object.__setattr__(self, "range", (rt, *([rs] * (ndim - 1))))
        object.__setattr__(self, "space",
                           space if space.range == (rs,) else space.with_params(range=rs))
        object.__setattr__(self, "time",
                           time if time.range == (rt,) else time.with_params(range=rt))

    # -- hyperparameters --------------------------------------------------------------------------
    @staticmethod
    def _shape_params(comp: Covariance, suffix: str) -> dict[str, Any]:
        return {k + suffix: v for k, v in comp.params.items() if k not in ("sd", "range")}

    @property
    def params(self) -> dict[str, Any]:
        """``sd``, spatial ``range``, ``range_t`` and the components' shape parameters."""
        return {"sd": self.sd, "range": self.range_s, "range_t": self.range_t,
                **self._shape_params(self.space, ""), **self._shape_params(self.time, "_t")}

    def with_params(self, **params: Any) -> SpaceTime:
        """The same kernel with some hyperparameters replaced.

        Parameters
        ----------
        **params
            Any of :attr:`params` (``sd``, ``range``, ``range_t``, ``nu``, ``nu_t``, …) and the
            aliases ``lengthscale``, ``lengthscale_t``.  ``range`` is the spatial range (a
            number) or the per-axis tuple ``(range_t, range, …, range)`` of length ``ndim``
            (then ``range_t`` must not be given too); ``nu``/``alpha`` change the spatial
            component, ``nu_t``/``alpha_t`` the temporal one.

        Returns
        -------
        SpaceTime

        Raises
        ------
        InvalidParameterError
            Unknown names, a range given twice, or a per-axis tuple with unequal spatial entries.
        ShapeMismatchError
            A per-axis tuple whose length is neither 1 nor ``ndim``.
        """
        space_shape = {k: k for k in self._shape_params(self.space, "")}
        time_shape = {k + "_t": k for k in self._shape_params(self.time, "")}
        allowed = {"sd", "range", "range_t", "lengthscale", "lengthscale_t",
                   *space_shape, *time_shape}
        unknown = sorted(set(params) - allowed)
        if unknown:
            raise InvalidParameterError(
                f"SpaceTime has no hyperparameter(s) {unknown}; it has {sorted(allowed)}."
            )
        for a, b in (("range", "lengthscale"), ("range_t", "lengthscale_t")):
            if a in params and b in params:
                raise InvalidParameterError(f"give {a}= or {b}=, not both.")
        space, time = self.space, self.time
        s_kw = {space_shape[k]: v for k, v in params.items() if k in space_shape}
        t_kw = {time_shape[k]: v for k, v in params.items() if k in time_shape}
        if s_kw:
            space = space.with_params(**s_kw)
        if t_kw:
            time = time.with_params(**t_kw)
        kw: dict[str, Any] = {"sd": params.get("sd", self.sd), "ndim": self.ndim}
        spatial = {k: params[k] for k in ("range", "lengthscale") if k in params}
        temporal = {k: params[k] for k in ("range_t", "lengthscale_t") if k in params}
        per_axis = any(np.size(v) > 1 for v in spatial.values())
        kw.update(spatial or {"range": self.range_s})
        # a per-axis tuple carries the temporal range; otherwise keep the current one
        kw.update(temporal or ({} if per_axis else {"range_t": self.range_t}))
        return SpaceTime(space, time, **kw)

    def lengthscales_for(self, ndim: int) -> np.ndarray:
        """Per-axis lengthscales ``(l_t, l_s, …, l_s)``, shape ``(ndim,)``; ``ndim`` must match."""
        self._check_axes(ndim, "the inputs")
        return np.asarray(self.lengthscale, dtype=float)

    @property
    def smooth(self) -> bool:  # type: ignore[override]
        """Whether either factor is smooth (its spectrum, and so the product's, hits round-off)."""
        return bool(self.space.smooth or self.time.smooth)

    def _check_axes(self, n: int, what: str) -> None:
        if n == self.ndim:
            return
        remedy = ("a space-time kernel needs a time axis (axis 0) and at least one spatial axis"
                  if n < 2 else f"build SpaceTime(..., ndim={n}) for {n}-axis inputs")
        raise ShapeMismatchError(
            f"{what} have {n} axes but this SpaceTime has ndim={self.ndim} (time on axis 0, "
            f"then {self.ndim - 1} spatial axes); {remedy}."
        )

    # -- the kernel -----------------------------------------------------------------------------
    def correlation(self, u: np.ndarray) -> np.ndarray:
        """Correlation ``rho_t(u_t) rho_s(u_s)`` at pairs of distances in lengthscales.

        A separable kernel is not a function of one distance, so a scalar ``u`` (or a last axis
        other than 2) is refused.

        Parameters
        ----------
        u : ndarray, shape (..., 2)
            ``u[..., 0] = |time lag| / lengthscale_t`` and
            ``u[..., 1] = |spatial lag| / lengthscale_s``.

        Returns
        -------
        ndarray, shape (...)
        """
        u = np.asarray(u, dtype=float)
        if u.ndim == 0 or u.shape[-1] != 2:
            raise ShapeMismatchError(
                f"SpaceTime.correlation takes (u_t, u_s) pairs of shape (..., 2), got shape "
                f"{u.shape}: a separable space-time kernel is not a function of one distance. "
                "Use from_lags with lags in (t, y, x) order, or the components' correlation."
            )
        return self.time.correlation(u[..., 0]) * self.space.correlation(u[..., 1])

    def from_lags(self, lags: np.ndarray) -> np.ndarray:
        """Covariance ``sd² rho_t(|u| / l_t) rho_s(|s| / l_s)`` at lag vectors.

        Parameters
        ----------
        lags : ndarray, shape (..., ndim)
            Lags in axis order: the time lag first, then the spatial lags.

        Returns
        -------
        ndarray, shape (...)
        """
        lags = np.asarray(lags, dtype=float)
        self._check_axes(lags.shape[-1] if lags.ndim else 0, "lags")
        # the components have sd = 1: their from_lags are the correlations rho_t and rho_s
        return self.variance * (self.time.from_lags(lags[..., :1])
                                * self.space.from_lags(lags[..., 1:]))

    def from_axis_lags(self, axis_lags: Sequence[np.ndarray]) -> np.ndarray:
        """Covariance on the outer grid of per-axis lags, as ``sd² rho_t ⊗ rho_s``.

        Memory-light: the temporal factor ``(m_0,)`` and the spatial factor
        ``(m_1, …, m_{d-1})`` are computed separately and multiplied by broadcasting.

        Parameters
        ----------
        axis_lags : sequence of ndarray, each shape (m_i,)
            Time lags first.

        Returns
        -------
        ndarray, shape (m_0, …, m_{d-1})
        """
        self._check_axes(len(axis_lags), "axis_lags")
        ct = self.time.from_axis_lags([axis_lags[0]])
        cs = self.space.from_axis_lags(list(axis_lags[1:]))
        return self.variance * (ct.reshape((-1,) + (1,) * (self.ndim - 1)) * cs)

    # -- identity -------------------------------------------------------------------------------
    def __repr__(self) -> str:
        nd = "" if self.ndim == 3 else f", ndim={self.ndim}"
        return (f"SpaceTime({self.space!r}, {self.time!r}, sd={self.sd!r}, "
                f"range={self.range_s!r}, range_t={self.range_t!r}{nd})")

    def _key(self) -> tuple:
        return (type(self.space), type(self.time), self.ndim)

    def __eq__(self, other: object) -> bool:
        return (type(self) is type(other) and self._key() == other._key()  # type: ignore[attr-defined]
                and self.params == other.params)  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, type(self.space).__name__, type(self.time).__name__,
                     self.ndim, tuple(sorted(map(str, self.params.items())))))


def _space_time_ranges(
    space: Covariance,
    time: Covariance,
    range: float | Sequence[float] | None,
    lengthscale: float | Sequence[float] | None,
    range_t: float | None,
    lengthscale_t: float | None,
    ndim: int,
) -> tuple[float, float]:
    """``(range_s, range_t)`` of a :class:`SpaceTime` from its arguments (see its docstring)."""
    if range_t is not None and lengthscale_t is not None:
        raise InvalidParameterError(
            f"give range_t={range_t!r} or lengthscale_t={lengthscale_t!r}, not both "
            f"(range_t = {RANGE_PER_LENGTHSCALE:g} * lengthscale_t)."
        )
    rt: float | None = None
    if range_t is not None:
        rt = positive_float("range_t", range_t, "the temporal range is a duration > 0")
    elif lengthscale_t is not None:
        rt = RANGE_PER_LENGTHSCALE * positive_float(
            "lengthscale_t", lengthscale_t, "the temporal lengthscale is a duration > 0")
    if range is None and lengthscale is None:
        return space.range[0], time.range[0] if rt is None else rt
    r = resolve_range(range, lengthscale)
    name, value = ("range", range) if range is not None else ("lengthscale", lengthscale)
    if len(r) == 1:
        return r[0], time.range[0] if rt is None else rt
    if len(r) != ndim:
        raise ShapeMismatchError(
            f"{name}={value!r} has {len(r)} entries; give the spatial {name} as one number or "
            f"the per-axis tuple ({name}_t, {name}, ...) of ndim={ndim} entries."
        )
    if rt is not None:
        given = "range_t" if range_t is not None else "lengthscale_t"
        raise InvalidParameterError(
            f"{name}={value!r} is a per-axis tuple whose first entry is the temporal {name}, and "
            f"{given}={range_t if range_t is not None else lengthscale_t!r} was given too; give "
            "the temporal range once."
        )
    spatial = r[1:]
    if any(v != spatial[0] for v in spatial):
        raise InvalidParameterError(
            f"{name}={value!r} has spatial entries {spatial} that differ; SpaceTime is isotropic "
            f"in space (no geometric anisotropy): give equal spatial entries, e.g. "
            f"CirculantPrior(..., max_range=(range_t_max, r_max, r_max))."
        )
    return spatial[0], r[0]
