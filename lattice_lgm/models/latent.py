"""The generic latent Gaussian model the samplers run on (Murray & Adams 2010, eq. 1–3).

::

    θ ~ hyperpriors,   f ~ N(0, K_θ) on the prior's state,   β ~ N(0, β_sd² I) (optional),
    η = mean + offset + X β + f   on the window,   y | η ~ likelihood.

``θ`` holds the covariance hyperparameters (``sd``, ``range`` or per-axis ``range_<dim>``, and
``range_t`` for a separable space-time kernel) and the mean offset ``mean`` (the paper's way of
handling a constant, moved by the hyperparameter moves).  Covariate coefficients ``β`` either sit
*inside the Gaussian block* (DESIGN §4; a Gaussian prior): they are rotated with ``f`` by elliptical
slice sampling, which decorrelates them from the field's low frequencies; or they are
*hyperparameters* ``beta_<name>`` (any prior), moved like ``mean`` by the hyperparameter moves.
``mean`` and the ``beta_<name>`` form :attr:`LatentGaussianModel.obs_params`: they shift ``η``
and leave the covariance alone.  Model glue for specific data (LGCPs on windows, GP regression and
classification) builds on this class in later modules.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .._validation import finite_array, positive_float
from ..errors import InvalidParameterError, ParameterOutOfBoundsError, ShapeMismatchError
from ..hyperpriors import Hyperprior
from ..likelihoods import Likelihood
from ..priors import GaussianPrior

__all__ = ["LatentGaussianModel"]

#: name of the mean-offset hyperparameter
MEAN = "mean"
#: prefix of coefficients sampled as hyperparameters (``beta_<name>``)
BETA_PREFIX = "beta_"
#: covariance parameters the hyperparameter moves may sample, when the prior has them
KERNEL_PARAMS = ("sd", "range", "range_t", "tau", "rho")


class LatentGaussianModel:
    """A prior operator, a likelihood on its window, and hyperpriors for what is sampled.

    Parameters
    ----------
    prior : GaussianPrior
        The field prior at the initial hyperparameters; its ``shape`` must equal the
        likelihood's.  Its ``with_params`` builds the covariance for every proposed θ.
    likelihood : Likelihood
        Data on the window (``likelihood.shape == prior.shape``).
    hyperpriors : mapping of str to Hyperprior, optional
        What is sampled: ``"sd"``, ``"range"`` (isotropic) or ``"range_<dim>"`` per lattice axis
        (``"range_0"`` … ``"range_<d-1>"`` per input column of a prior on ``d ≥ 2``-dimensional
        points that are not a lattice, e.g. ``DensePrior(x, kernel)``), and ``"mean"``.
        Parameters not named stay at the prior's values (and ``mean``).  A range hyperprior
        on a :class:`~lattice_lgm.priors.CirculantPrior` needs a finite upper bound no larger
        than the torus' ``sized_for_range`` (DESIGN §4: the embedding is sized for the range
        prior's upper bound).
    mean : float
        Initial (or fixed) mean offset of ``η``.
    offset : ndarray, shape likelihood.shape, optional
        A fixed offset added to ``η`` (e.g. a log-baseline).
    covariates : ndarray, shape (p, *likelihood.shape), optional
        Covariates whose coefficients ``β ~ N(0, beta_sd²)`` sit in the Gaussian block.
    beta_sd : float or sequence of float
        Prior sd of each coefficient (scale the covariates accordingly).
    hyper_covariates : mapping of str to ndarray (likelihood.shape), optional
        Covariates whose coefficients are hyperparameters: ``name`` is sampled as
        ``beta_<name>`` and needs a hyperprior under that key in ``hyperpriors``.
    hyper_init : mapping of str to float, optional
        Initial values of those coefficients, keyed ``beta_<name>`` (default 0).

    Attributes
    ----------
    hyper_names : tuple of str
        The sampled hyperparameters, in update order.
    state_index : ndarray of int64, shape (n_obs,)
        Flat index in the prior's state of every observed site.
    obs_params : tuple of str
        Hyperparameters that shift ``η`` only (``mean`` and the ``beta_<name>``); moving them
        needs a likelihood evaluation but no new covariance.
    """

    def __init__(
        self,
        prior: GaussianPrior,
        likelihood: Likelihood,
        *,
        hyperpriors: Mapping[str, Hyperprior] | None = None,
        mean: float = 0.0,
        offset: np.ndarray | None = None,
        covariates: np.ndarray | None = None,
        beta_sd: float | np.ndarray = 1.0,
        hyper_covariates: Mapping[str, np.ndarray] | None = None,
        hyper_init: Mapping[str, float] | None = None,
    ) -> None:
        if not isinstance(prior, GaussianPrior):
            raise InvalidParameterError(f"prior={prior!r} must be a lattice_lgm GaussianPrior.")
        if not isinstance(likelihood, Likelihood):
            raise InvalidParameterError(
                f"likelihood={likelihood!r} must be a lattice_lgm Likelihood."
            )
        if tuple(likelihood.shape) != tuple(prior.shape):
            raise ShapeMismatchError(
                f"likelihood.shape={likelihood.shape} differs from prior.shape={prior.shape}; "
                "build both on the same lattice."
            )
        self.prior = prior
        self.likelihood = likelihood
        self.mean = float(mean)
        finite_array("mean", np.asarray(self.mean))
        self.hyperpriors: dict[str, Hyperprior] = dict(hyperpriors or {})
        self._axis_names = self._range_axis_names(prior)
        self.state_index = prior.window_index()[likelihood.obs_index]
        n_obs = likelihood.n_obs
        self._hyper_cov, self._hyper_init = self._hyper_coefficients(
            hyper_covariates, hyper_init, likelihood)
        self.obs_params = (MEAN, *self._hyper_cov)
        self._check_hyperpriors()
        self.hyper_names = tuple(self.hyperpriors)
        off = np.zeros(n_obs)
        if offset is not None:
            o = np.asarray(offset, dtype=np.float64)
            if o.shape != tuple(prior.shape):
                raise ShapeMismatchError(
                    f"offset has shape {o.shape}; it must match the window {prior.shape}."
                )
            off = o.reshape(-1)[likelihood.obs_index]
            finite_array("offset", off, "offsets must be finite at observed cells")
        self.offset_obs = off
        if covariates is None:
            self.covariates_obs = np.zeros((0, n_obs))
            self.beta_sd = np.zeros(0)
        else:
            x = np.asarray(covariates, dtype=np.float64)
            if x.ndim != len(prior.shape) + 1 or x.shape[1:] != tuple(prior.shape):
                raise ShapeMismatchError(
                    f"covariates has shape {x.shape}; expected (p, *{prior.shape})."
                )
            xo = x.reshape(len(x), -1)[:, likelihood.obs_index]
            finite_array("covariates", xo, "covariates must be finite at observed cells")
            self.covariates_obs = np.ascontiguousarray(xo)
            sd = np.broadcast_to(np.asarray(beta_sd, dtype=np.float64), (len(x),))
            for i, s in enumerate(sd):
                positive_float(f"beta_sd[{i}]", s, "prior sds of coefficients are > 0")
            self.beta_sd = np.array(sd)

    # -- hyperparameters ------------------------------------------------------------------------
    @staticmethod
    def _range_axis_names(prior: GaussianPrior) -> tuple[str, ...]:
        if "range_t" in prior.params:
            # a separable space-time kernel: its own range_t, one isotropic spatial range
            return ()
        lat = getattr(prior, "lattice", None)
        if lat is not None:
            return tuple(f"range_{d}" for d in lat.dims)
        # inputs that are not a lattice (a DensePrior on points, e.g. the ARD kernels of Murray &
        # Adams 2010, eq. 2): one range per input column, named by the column index
        x = getattr(prior, "x", None)
        ndim = np.shape(x)[1] if x is not None and np.ndim(x) == 2 else 0
        return tuple(f"range_{i}" for i in range(ndim)) if ndim > 1 else ()

    def _hyper_coefficients(self, covariates, init, likelihood) -> tuple[dict, dict]:
        cov: dict[str, np.ndarray] = {}
        for name, x in dict(covariates or {}).items():
            key = BETA_PREFIX + str(name)
            a = np.asarray(x, dtype=np.float64)
            if a.shape != tuple(likelihood.shape):
                raise ShapeMismatchError(
                    f"hyper_covariates[{name!r}] has shape {a.shape}; it must match the window "
                    f"{tuple(likelihood.shape)}.")
            xo = np.ascontiguousarray(a.reshape(-1)[likelihood.obs_index])
            finite_array(f"hyper_covariates[{name!r}]", xo,
                         "covariates must be finite at observed cells")
            if key not in self.hyperpriors:
                raise InvalidParameterError(
                    f"hyper_covariates has {name!r} but hyperpriors has no {key!r}; give its "
                    f"prior, e.g. hyperpriors={{{key!r}: Normal(0, 1)}}, or put the covariate in "
                    "the Gaussian block (covariates=...).")
            cov[key] = xo
        vals = {k: float(v) for k, v in dict(init or {}).items()}
        unknown = sorted(set(vals) - set(cov))
        if unknown:
            raise InvalidParameterError(
                f"hyper_init has {unknown}, which are not hyper coefficients {sorted(cov)}.")
        for k, v in vals.items():
            finite_array(f"hyper_init[{k!r}]", np.asarray(v))
        return cov, {k: vals.get(k, 0.0) for k in cov}

    @property
    def n_beta(self) -> int:
        """Number of in-block coefficients ``p``."""
        return len(self.beta_sd)

    def _check_hyperpriors(self) -> None:
        params = self.prior.params
        allowed = {*self.obs_params, *(k for k in params if k in KERNEL_PARAMS)}
        if "range" in params:
            allowed.update(self._axis_names)
        for name, hp in self.hyperpriors.items():
            if not isinstance(hp, Hyperprior):
                raise InvalidParameterError(
                    f"hyperpriors[{name!r}]={hp!r} must be a lattice_lgm.hyperpriors.Hyperprior."
                )
            if name not in allowed:
                raise InvalidParameterError(
                    f"hyperpriors has an unknown parameter {name!r}; this prior can sample "
                    f"{sorted(allowed)}."
                )
        names = set(self.hyperpriors)
        if "range" in names and names & set(self._axis_names):
            raise InvalidParameterError(
                "give either an isotropic 'range' hyperprior or per-axis "
                f"{list(self._axis_names)}, not both."
            )
        theta0 = self.initial_theta()
        if "range" in names and "range" not in theta0:
            raise InvalidParameterError(
                f"the prior has per-axis ranges {self.prior.params['range']}; give per-axis "
                f"hyperpriors {list(self._axis_names)} or build the prior with one range."
            )
        for name, hp in self.hyperpriors.items():
            if not np.isfinite(hp.logpdf(theta0[name])):
                raise ParameterOutOfBoundsError(
                    f"the initial {name}={theta0[name]!r} has zero density under its hyperprior "
                    f"{hp.describe()}; start inside the support."
                )
        if self.prior.sized_for_range is not None:
            sized = np.asarray(self.prior.sized_for_range)
            for name, hp in self.hyperpriors.items():
                if not name.startswith("range"):
                    continue
                if name == "range_t":  # separable space-time: time is axis 0
                    axes = [0]
                elif name == "range":
                    axes = range(1 if "range_t" in params else 0, len(sized))
                else:
                    axes = [self._axis_names.index(name)]
                for ax in axes:
                    if not np.isfinite(hp.upper) or hp.upper > sized[ax] * (1 + 1e-12):
                        raise ParameterOutOfBoundsError(
                            f"hyperpriors[{name!r}] has upper bound {hp.upper!r} but the "
                            f"circulant torus was sized for range {tuple(sized)}; give the range "
                            "prior a finite upper bound (e.g. PCPriorRange(..., upper=...)) and "
                            "build CirculantPrior(..., max_range=upper) (DESIGN §4)."
                        )

    def initial_theta(self) -> dict[str, float]:
        """The hyperparameters of ``prior`` (per-axis ranges split) and ``mean``, as floats."""
        out: dict[str, float] = {}
        per_axis = any(n in self.hyperpriors for n in self._axis_names)
        for k, v in self.prior.params.items():
            if k == "range":
                r = np.atleast_1d(np.asarray(v, dtype=np.float64))
                if self._axis_names:
                    r = np.broadcast_to(r, (len(self._axis_names),))
                if per_axis or not np.all(r == r[0]):
                    out.update({d: float(rv) for d, rv in zip(self._axis_names, r, strict=True)})
                else:
                    out["range"] = float(r[0])
            elif k in KERNEL_PARAMS:
                out[k] = float(v)
        out[MEAN] = self.mean
        out.update(self._hyper_init)
        return out

    def kernel_params(self, theta: Mapping[str, float]) -> dict[str, Any]:
        """The ``with_params`` keywords for hyperparameters ``theta`` (only what changes)."""
        kw: dict[str, Any] = {}
        for k in KERNEL_PARAMS:
            if k != "range" and k in theta and k in self.hyperpriors:
                kw[k] = float(theta[k])
        if "range" in self.hyperpriors:
            kw["range"] = float(theta["range"])
        elif any(n in self.hyperpriors for n in self._axis_names):
            kw["range"] = tuple(float(theta[n]) for n in self._axis_names)
        return kw

    def prior_for(self, theta: Mapping[str, float], current: GaussianPrior) -> GaussianPrior:
        """The prior at ``theta``, built from ``current`` (sharing plans and analyses)."""
        kw = self.kernel_params(theta)
        return current.with_params(**kw) if kw else current

    def base_obs(self, theta: Mapping[str, float]) -> np.ndarray:
        """The part of ``η`` at observed sites that ``f`` and the block's ``β`` do not carry.

        ``offset + mean + Σ_k beta_k x_k`` over the hyperparameter coefficients, shape (n_obs,).
        """
        out = self.offset_obs + float(theta.get(MEAN, self.mean))
        for k, x in self._hyper_cov.items():
            out = out + float(theta.get(k, self._hyper_init[k])) * x
        return out

    def hyper_covariate(self, name: str) -> np.ndarray:
        """The covariate of coefficient ``name`` (``beta_<x>``) at the observed sites, (n_obs,)."""
        if name not in self._hyper_cov:
            raise InvalidParameterError(
                f"{name!r} is not a hyperparameter coefficient; they are "
                f"{sorted(self._hyper_cov)}.")
        return self._hyper_cov[name]

    def log_hyperprior(self, theta: Mapping[str, float]) -> float:
        """``Σ log p_h(θ_k)`` on the natural scale over the sampled hyperparameters."""
        return float(sum(hp.logpdf(theta[k]) for k, hp in self.hyperpriors.items()))

    def describe(self) -> str:
        """A few lines: prior, likelihood, sampled hyperparameters and their priors."""
        lines = [self.prior.describe(), f"likelihood: {self.likelihood.name}, "
                 f"{self.likelihood.n_obs} observed sites"]
        for k, hp in self.hyperpriors.items():
            lines.append(f"  {k}: {hp.describe()}")
        if self.n_beta:
            lines.append(f"  {self.n_beta} coefficients in the Gaussian block, sd {self.beta_sd}")
        return "\n".join(lines)
