"""The likelihood protocol: factorised log-likelihoods with per-site Gaussian approximations.

A :class:`Likelihood` holds the observed cells of a data array (``mask`` True), flattened in C
order: ``obs_index`` (ascending flat indices), ``y_obs`` (data) and ``aux_obs`` (a per-site
parameter).  For a linear predictor ``eta`` of shape ``(n_chains, *shape)``::

    loglik(eta)[c] == constant + Σ_i site_logpdf(eta[c].flat[obs_index[i]], y_obs[i], aux_obs[i])

Site approximations fit a Gaussian to the site posterior ``L_i(η) N(η; m_i, v_i)`` (Murray &
Adams 2010, eq. 12) or Taylor-expand ``log L_i`` at its maximum (eq. 13), and return it as a
Gaussian pseudo-likelihood ``N(c_i; η_i, 1/Π_i)``; a site with no information has ``Π_i = 0``
(never a "large variance").  See :mod:`._kernels` for the numerics and docs/likelihoods.md.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .._validation import chain_array
from ..errors import InvalidDataError, InvalidParameterError, ShapeMismatchError
from . import _kernels

__all__ = ["SITE_METHODS", "Likelihood", "SiteApproximation"]

#: methods accepted by :meth:`Likelihood.site_approximation`
SITE_METHODS = ("laplace", "moments")


@dataclass(frozen=True)
class SiteApproximation:
    """A Gaussian pseudo-likelihood ``N(center; η, 1/precision)`` per observed site.

    Attributes
    ----------
    precision : numpy.ndarray
        ``(n_chains, n_obs)`` or ``(n_obs,)``, float64, ≥ 0; 0 means "no information".
    center : numpy.ndarray
        Same shape, on the η (linear predictor) scale; equal to the prior mean (site fits) or 0
        (Taylor) where ``precision`` is 0.
    method : str
        ``"laplace"``, ``"moments"`` or ``"taylor"``.
    """

    precision: np.ndarray
    center: np.ndarray
    method: str


def raise_first(
    bad: np.ndarray,
    values: np.ndarray,
    message: Callable[[object, tuple[int, ...]], str],
    error: type[Exception] = InvalidDataError,
) -> None:
    """Raise ``error(message(value, index))`` at the first True cell of ``bad`` (C order)."""
    if bad.any():
        idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), bad.shape))
        raise error(message(values[idx].item(), idx))


def as_data(name: str, data: object) -> np.ndarray:
    """Return ``data`` as a float64 array of at least one dimension, or raise."""
    arr = np.asarray(data)
    if arr.dtype.kind not in "biuf":
        raise InvalidDataError(
            f"{name} has dtype {arr.dtype}; pass real numbers (a numeric array)."
        )
    if arr.ndim == 0 or arr.size == 0:
        raise ShapeMismatchError(
            f"{name} has shape {arr.shape}; pass a non-empty array with the window's shape "
            f"(at least one axis)."
        )
    return arr.astype(np.float64)


def as_mask(mask: object, shape: tuple[int, ...], data_name: str) -> np.ndarray:
    """Return a boolean mask of ``shape`` (all True for None), with at least one True cell."""
    if mask is None:
        return np.ones(shape, dtype=bool)
    arr = np.asarray(mask)
    if arr.dtype != np.bool_:
        raise InvalidParameterError(
            f"mask has dtype {arr.dtype}; it must be boolean (True = observed); pass e.g. "
            f"mask=np.isfinite({data_name}) or mask=(m != 0)."
        )
    if arr.shape != shape:
        raise ShapeMismatchError(
            f"mask has shape {arr.shape} but {data_name} has shape {shape}; pass one boolean "
            f"per cell."
        )
    if not arr.any():
        raise InvalidDataError(
            "mask has no observed cell (all False); a likelihood needs at least one "
            "observation — set mask True where data were observed."
        )
    return arr.copy()


def check_finite_data(name: str, data: np.ndarray, mask: np.ndarray) -> None:
    """Raise naming the first unmasked non-finite cell of ``data``."""
    raise_first(
        mask & ~np.isfinite(data),
        data,
        lambda val, idx: (
            f"{name} has a non-finite value {val!r} at index {idx}; a missing cell is not "
            f"guessed — mask it explicitly (mask[{idx}] = False)."
        ),
    )


def per_site_array(
    name: str, value: object, shape: tuple[int, ...], data_name: str
) -> np.ndarray:
    """Broadcast a scalar or an array of the data shape to a float64 array of ``shape``."""
    arr = np.asarray(value)
    if arr.dtype.kind not in "biuf":
        raise InvalidParameterError(f"{name} has dtype {arr.dtype}; pass real numbers.")
    if arr.ndim != 0 and arr.shape != shape:
        raise ShapeMismatchError(
            f"{name} has shape {arr.shape} but {data_name} has shape {shape}; pass a scalar or "
            f"an array of the data's shape."
        )
    return np.broadcast_to(arr.astype(np.float64), shape)


def prior_moment(name: str, value: object, n_obs: int) -> np.ndarray:
    """Return ``value`` as float64 broadcastable to ``(n_chains, n_obs)``, finite, or raise."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidParameterError(
            f"{name}={value!r} is not numeric; pass finite site prior moments."
        ) from None
    try:
        out_shape = np.broadcast_shapes(arr.shape, (n_obs,))
    except ValueError:
        out_shape = None
    if out_shape is None or len(out_shape) > 2:
        raise ShapeMismatchError(
            f"{name} has shape {arr.shape}; expected a shape broadcastable to "
            f"(n_chains, n_obs={n_obs}) — one value per observed site (in obs_index order)."
        )
    raise_first(
        ~np.isfinite(arr),
        arr,
        lambda val, idx: f"{name} has a non-finite value {val!r} at index {idx}; pass finite "
        f"site prior moments.",
        InvalidParameterError,
    )
    return arr


def _same_bits_along_rows(a: np.ndarray) -> bool:
    """Whether every row of the 2-D float array ``a`` holds one value, bit for bit."""
    bits = a.view(np.int64)
    return bool((bits == bits[:, :1]).all())


class Likelihood(ABC):
    """A factorised likelihood over the observed cells of a window of shape ``shape``.

    Subclasses set ``site_logpdf`` (a Numba scalar function ``(eta, y, aux) -> float``, as a
    ``staticmethod`` or per instance), its NumPy twin ``_site_logpdf_np`` and the kernel code
    ``_kind``, and fill the attributes below in their constructor (all validation happens
    there, before any compilation).

    Attributes
    ----------
    shape : tuple of int
        Shape of the data window (any number of axes ≥ 1).
    mask : numpy.ndarray
        Boolean, ``shape``; True where a cell is observed.
    obs_index : numpy.ndarray
        int64, ``(n_obs,)``: ascending flat (C order) indices of the observed cells.
    y_obs : numpy.ndarray
        float64, ``(n_obs,)``: the data at the observed cells.
    aux_obs : numpy.ndarray
        float64, ``(n_obs,)``: the per-site parameter (see the subclass).
    constant : float
        Sum over observed sites of the terms ``site_logpdf`` leaves out.
    name : str
        ``"poisson"``, ``"gaussian"``, ``"bernoulli-<link>"``, ``"binomial-<link>"`` or
        ``"sigmoid-poisson-<link>"`` (link ``logit`` or ``probit``).
    site_logpdf : numba dispatcher
        ``site_logpdf(eta, y, aux) -> float``, the per-site log-likelihood without constants; a
        plain ``@njit`` function that other njit code may call.
    """

    # set per class (staticmethod) or per instance (Bernoulli, by link)
    site_logpdf: Callable[[float, float, float], float]
    _site_logpdf_np: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
    _kind: int

    shape: tuple[int, ...]
    mask: np.ndarray
    obs_index: np.ndarray
    y_obs: np.ndarray
    aux_obs: np.ndarray
    constant: float
    name: str

    def _set_sites(self, data: np.ndarray, mask: np.ndarray, aux: np.ndarray) -> None:
        """Store the observed sites of ``data``/``aux`` (arrays of ``mask.shape``)."""
        self.shape = tuple(int(n) for n in mask.shape)
        self.mask = mask
        self.mask.flags.writeable = False
        self.obs_index = np.flatnonzero(mask).astype(np.int64)
        self.y_obs = np.ascontiguousarray(data.reshape(-1)[self.obs_index], dtype=np.float64)
        self.aux_obs = np.ascontiguousarray(aux.reshape(-1)[self.obs_index], dtype=np.float64)
        for arr in (self.obs_index, self.y_obs, self.aux_obs):
            arr.flags.writeable = False
        self._classes: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def _site_first(self) -> np.ndarray:
        return self._site_classes()[0]

    @property
    def _site_class(self) -> np.ndarray:
        return self._site_classes()[1]

    def _site_classes(self) -> tuple[np.ndarray, np.ndarray]:
        """The first site of each distinct (y, aux) pair and each site's pair, on first use.

        Sites with the same (y, aux) bits: where the site priors are the same too (a
        stationary prior with a constant mean) their fits are the same, computed once each.
        Lazy: the sort costs ~15 ms on 128² sites, and a likelihood built per sweep (the GPDS's
        scale augmentation, one per chain per sweep) never fits its sites.
        """
        if self._classes is None:
            keys = np.stack([self.y_obs.view(np.int64), self.aux_obs.view(np.int64)], axis=1)
            _, first, cls = np.unique(keys, axis=0, return_index=True, return_inverse=True)
            self._classes = (first, cls.reshape(-1))
        return self._classes

    @property
    def n_obs(self) -> int:
        """Number of observed cells."""
        return int(self.obs_index.shape[0])

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, shape={self.shape}, n_obs={self.n_obs})"

    # -- log-likelihood and derivatives ------------------------------------------------------

    def _flat(self, eta: np.ndarray) -> np.ndarray:
        eta = chain_array("eta", eta, self.shape)
        flat = np.ascontiguousarray(eta).reshape(eta.shape[0], -1)
        # one array type for the kernels (a read-only input would compile a second version)
        return flat if flat.flags.writeable else flat.copy()

    def loglik(self, eta: np.ndarray) -> np.ndarray:
        """Log-likelihood per chain (Numba, parallel over chains).

        Parameters
        ----------
        eta : numpy.ndarray
            ``(n_chains, *shape)`` linear predictor; unobserved cells are ignored.

        Returns
        -------
        numpy.ndarray
            ``(n_chains,)`` float64.  Each chain's sum runs sequentially in ``obs_index`` order,
            so it is bitwise independent of the thread count and of the other chains.
        """
        flat = self._flat(eta)
        return _kernels.loglik_kernel(
            self._kind, flat, self.obs_index, self.y_obs, self.aux_obs, float(self.constant)
        )

    def loglik_reference(self, eta: np.ndarray) -> np.ndarray:
        """Plain NumPy twin of :meth:`loglik` (agrees to ~1e-13 relative; see ``_kernels``).

        Parameters
        ----------
        eta : numpy.ndarray
            ``(n_chains, *shape)`` linear predictor.

        Returns
        -------
        numpy.ndarray
            ``(n_chains,)`` float64.
        """
        flat = self._flat(eta)
        sites = self._site_logpdf_np(flat[:, self.obs_index], self.y_obs, self.aux_obs)
        return self.constant + np.sum(sites, axis=1)

    def _derivative(self, eta: np.ndarray, order: int) -> np.ndarray:
        flat = self._flat(eta)
        out = _kernels.deriv_kernel(
            self._kind, order, flat, self.obs_index, self.y_obs, self.aux_obs
        )
        return out.reshape((flat.shape[0], *self.shape))

    def grad_obs(self, eta_obs: np.ndarray) -> np.ndarray:
        """Gradient ``∂ loglik/∂η`` at the observed sites of one chain.

        :meth:`grad` for a predictor given at the observed sites only (no scatter onto the
        lattice), in compiled code that releases the GIL.

        Parameters
        ----------
        eta_obs : numpy.ndarray
            ``(n_obs,)`` float64, in :attr:`obs_index` order.

        Returns
        -------
        numpy.ndarray
            ``(n_obs,)`` float64.
        """
        return self.obs_derivative(eta_obs, 1)

    def obs_derivative(self, eta_obs: np.ndarray, order: int) -> np.ndarray:
        """The ``order``-th derivative (1, 2 or 3) at the observed sites of one chain.

        As :meth:`grad`, :meth:`hess_diag` and :meth:`third_diag` for a predictor given at
        the observed sites only, serial and without the GIL: for one chain's small vectors
        (RMHMC's metric on a few hundred sites) the parallel kernels' thread launches cost
        more than the arithmetic (3× a whole transition at n = 10).

        Parameters
        ----------
        eta_obs : numpy.ndarray
            ``(n_obs,)`` float64, in :attr:`obs_index` order.
        order : {1, 2, 3}

        Returns
        -------
        numpy.ndarray
            ``(n_obs,)`` float64.
        """
        if order not in (1, 2, 3):
            raise InvalidParameterError(f"order={order!r} must be 1, 2 or 3.")
        return _kernels.obs_deriv_kernel(self._kind, order, np.ascontiguousarray(
            eta_obs, dtype=np.float64), self.y_obs, self.aux_obs)

    def grad(self, eta: np.ndarray) -> np.ndarray:
        """Gradient ``∂ loglik/∂η`` per cell.

        Parameters
        ----------
        eta : numpy.ndarray
            ``(n_chains, *shape)``.

        Returns
        -------
        numpy.ndarray
            ``(n_chains, *shape)`` float64, 0 at unobserved cells.
        """
        return self._derivative(eta, 1)

    def hess_diag(self, eta: np.ndarray) -> np.ndarray:
        """Second derivative ``∂² loglik/∂η_i²`` per cell (the Hessian is diagonal).

        Parameters
        ----------
        eta : numpy.ndarray
            ``(n_chains, *shape)``.

        Returns
        -------
        numpy.ndarray
            ``(n_chains, *shape)`` float64, ≤ 0, 0 at unobserved cells.
        """
        return self._derivative(eta, 2)

    def third_diag(self, eta: np.ndarray) -> np.ndarray:
        """Third derivative ``∂³ loglik/∂η_i³`` per cell.

        Parameters
        ----------
        eta : numpy.ndarray
            ``(n_chains, *shape)``.

        Returns
        -------
        numpy.ndarray
            ``(n_chains, *shape)`` float64, 0 at unobserved cells.
        """
        return self._derivative(eta, 3)

    # -- site approximations -----------------------------------------------------------------

    def site_approximation(
        self, method: str, prior_mean: np.ndarray | float, prior_var: np.ndarray | float
    ) -> SiteApproximation:
        """Gaussian fit to each site posterior ``L_i(η) N(η; m_i, v_i)`` as a pseudo-likelihood.

        Parameters
        ----------
        method : {"laplace", "moments"}
            ``"laplace"``: mode and curvature of the site posterior; ``"moments"``: its mean and
            variance (quadrature; closed form for probit; exact for Gaussian).
        prior_mean, prior_var : array_like
            Site prior moments ``m_i``, ``v_i`` (e.g. the prior's marginal mean and variance at
            ``obs_index``), broadcastable to ``(n_chains, n_obs)``; finite, ``prior_var > 0``.

        Returns
        -------
        SiteApproximation
            Shape ``np.broadcast_shapes(prior_mean.shape, prior_var.shape, (n_obs,))``.
            ``precision = 1/σ_i² − 1/v_i`` thresholded at 0, and ``center =
            (μ_i/σ_i² − m_i/v_i)/precision`` (``= m_i`` where precision is 0), so that
            ``N(center; η, 1/precision) N(η; m_i, v_i) ∝ N(η; μ_i, σ_i²)``.

        Raises
        ------
        InvalidParameterError
            Unknown ``method``; non-finite moments; ``prior_var ≤ 0``.
        ShapeMismatchError
            Moments not broadcastable to ``(n_chains, n_obs)``.
        """
        if method not in SITE_METHODS:
            raise InvalidParameterError(
                f"method={method!r} is not a site approximation; valid methods are "
                f"{', '.join(repr(m) for m in SITE_METHODS)} (or call taylor())."
            )
        m = prior_moment("prior_mean", prior_mean, self.n_obs)
        v = prior_moment("prior_var", prior_var, self.n_obs)
        raise_first(
            v <= 0.0,
            v,
            lambda val, idx: f"prior_var has a non-positive value {val!r} at index {idx}; site "
            f"prior variances must be > 0.",
            InvalidParameterError,
        )
        out_shape = np.broadcast_shapes(m.shape, v.shape, (self.n_obs,))
        exact = self._exact_site_approximation(out_shape, method)
        if exact is not None:
            return exact
        # fresh writable C arrays: one array type for the kernel whatever the inputs were
        m2 = np.empty(out_shape)
        m2[...] = m
        v2 = np.empty(out_shape)
        v2[...] = v
        m2 = m2.reshape(-1, self.n_obs)
        v2 = v2.reshape(-1, self.n_obs)
        nodes, weights = _kernels.gauss_legendre()
        code = _kernels.LAPLACE if method == "laplace" else _kernels.MOMENTS
        first = self._site_first
        if len(first) < self.n_obs and _same_bits_along_rows(m2) and _same_bits_along_rows(v2):
            # Every site of a row has the same prior moments, so a site's fit is a function
            # of its (y, aux) alone: fit each distinct pair once and scatter (bitwise the
            # per-site result; Ionosphere has 2 distinct of 200, redwoods 5 of 625).
            p1, c1 = _kernels.site_approx_kernel(
                self._kind, code, self.y_obs[first], self.aux_obs[first],
                np.ascontiguousarray(m2[:, first]), np.ascontiguousarray(v2[:, first]),
                nodes, weights,
            )
            precision, center = p1[:, self._site_class], c1[:, self._site_class]
        else:
            precision, center = _kernels.site_approx_kernel(
                self._kind, code, self.y_obs, self.aux_obs, m2, v2, nodes, weights
            )
        return SiteApproximation(
            precision=precision.reshape(out_shape), center=center.reshape(out_shape),
            method=method,
        )

    def _exact_site_approximation(
        self, out_shape: tuple[int, ...], method: str
    ) -> SiteApproximation | None:
        """Hook: a closed form independent of the prior (Gaussian), or None."""
        return None

    def taylor(self) -> SiteApproximation:
        """Second-order expansion of each ``log L_i`` at its maximum (Murray & Adams eq. 13).

        Returns
        -------
        SiteApproximation
            ``(n_obs,)`` arrays: ``center = argmax_η L_i(η)`` and ``precision = −ℓ_i''`` there.
            Sites whose maximum is at ±∞ or whose curvature there is 0 (Poisson ``y = 0``,
            every Bernoulli site, binomial ``y = 0``, ``y = n`` or ``n = 0``, sigmoidal Poisson
            ``y = 0``, ``y ≥ e`` or ``e = 0``) get precision 0 and center 0.
        """
        precision, center = self._taylor()
        return SiteApproximation(precision=precision, center=center, method="taylor")

    @abstractmethod
    def _taylor(self) -> tuple[np.ndarray, np.ndarray]:
        """``(precision, center)`` of the Taylor approximation, ``(n_obs,)`` each."""
