"""The :class:`GaussianPrior` protocol: a zero-mean Gaussian N(0, K) over a lattice as an operator.

Vocabulary follows :class:`scipy.stats.Covariance`: ``colorize(z) = W z`` with ``K = W Wᵀ`` and
``whiten`` its inverse.  Every array carries a leading chain axis ``(n_chains, *shape)``.

Three shapes describe a backend (DESIGN §3–4):

``shape``
    One field on the user's variables: the lattice (or ``(n,)`` for a dense prior on points).
    :meth:`GaussianPrior.sample` returns ``(n_chains, *shape)``.
``state_shape``
    The variables on which ``solve``, ``log_det``, ``quad_form``, ``logpdf``, ``whiten`` and the
    surrogate operations are *exact*: the lattice itself (dense), the embedding torus (circulant),
    the padded lattice (GMRF).  Cells of the state outside the window are latent variables with
    no likelihood, so a posterior computed on the state is exact for the window.
    :meth:`GaussianPrior.to_window` restricts a state to ``shape``.
``white_shape``
    The shape of ``z`` in ``colorize(z)``; ``z ~ N(0, I)`` gives a state ``~ N(0, K_state)``.

Backends implement private hooks (``_colorize``, ``_whiten``, ``_solve``, ``_log_det``,
``_surrogate``, ``_with_params``) on validated float64 arrays; the public methods here check
shapes and values once.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, cast

import numpy as np

from .._validation import chain_array, finite_array
from ..errors import InvalidParameterError, ShapeMismatchError, UnsupportedOperationError

__all__ = ["Capabilities", "FourierPrior", "GaussianPrior", "SurrogateConditional", "as_rng",
           "fourier"]

LOG_2PI = math.log(2.0 * math.pi)


def as_rng(rng: np.random.Generator | int | None) -> np.random.Generator:
    """Accept a :class:`numpy.random.Generator` or an integer seed (never a global RNG)."""
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return np.random.default_rng(int(rng))
    raise InvalidParameterError(
        f"rng={rng!r} must be a numpy.random.Generator or an int seed, e.g. "
        "np.random.default_rng(1); legacy RandomState and None are not accepted."
    )


@dataclass(frozen=True)
class SurrogateConditional:
    """The surrogate-data quantities of Murray & Adams (2010, §3) for ``g ~ N(f, S)``.

    With site precisions ``Π = S⁻¹`` (0 where a site carries no information),
    ``f | g ~ N(mean, R)``, ``R = (K⁻¹ + Π)⁻¹``, and ``R = L_R L_Rᵀ`` for the square root used by
    :attr:`colorize`.  All arrays are on the prior's state, shape ``(n_chains, *state_shape)``.

    Attributes
    ----------
    mean : ndarray, shape (n_chains, *state_shape)
        ``E[f | g] = R Π g``.
    logmarginal : ndarray, shape (n_chains,)
        ``log N(g_O; 0, K_OO + S_O)`` over the sites ``O`` with ``Π > 0``.
    colorize : callable
        ``eta -> L_R eta`` (shape preserving).
    whiten : callable
        ``x -> L_R⁻¹ x``, the inverse of ``colorize``.
    """

    mean: np.ndarray
    logmarginal: np.ndarray
    colorize: Callable[[np.ndarray], np.ndarray]
    whiten: Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Capabilities:
    """What a prior backend does exactly, beyond the :class:`GaussianPrior` protocol.

    The samplers ask a prior for its capabilities (``prior.capabilities``), never for its
    class: a new backend states what it can do and gets every sampler path that needs only
    that (issue 28, decision 97).

    Attributes
    ----------
    backend : str
        The name of the backend family: the vocabulary of
        :data:`lattice_lgm.samplers.REPRESENTATIONS` and of configs (``"dense"``,
        ``"circulant"``, ``"gmrf"``).  A new backend that states nothing is ``"generic"``:
        the moves that need only the protocol (``fixed``, ``prior-white``, elliptical slice
        sampling) and no cost projection.
    fourier : bool
        Diagonal in the discrete Fourier basis of its (torus) state: the operations of
        :class:`FourierPrior` exist — white half-spectra, per-frequency surrogates
        (``surr-scalar``), FFT-preconditioned mode finding.
    white_transform : {"fft", "dct"} or None
        The fast orthonormal transform of the whitened field that joint HMC differentiates
        through (its θ-gradient needs the eigenvalues in a known basis); None: no joint HMC.
    dense_factor : bool
        Holds the Cholesky factor ``chol`` and covariance ``cov`` of the whole state: exact
        marginal variances and the fused dense elliptical-slice kernel.
    """

    backend: str = "generic"
    fourier: bool = False
    white_transform: str | None = None
    dense_factor: bool = False


class FourierPrior(Protocol):
    """The operations of a prior with ``capabilities.fourier`` (circulant embedding).

    Unitary real half-spectra of the torus state: ``spectrum(f) = f̂/√M``; ``ζ`` white with
    ``f̂ = √λ ζ``.  Get one with :func:`fourier`.
    """

    embedding_shape: tuple[int, ...]
    sized_for_range: tuple[float, ...]
    state_shape: tuple[int, ...]
    state_size: int

    @property
    def half_shape(self) -> tuple[int, ...]: ...  # noqa: D102

    @property
    def half_weights(self) -> np.ndarray: ...  # noqa: D102

    @property
    def eigenvalues(self) -> np.ndarray: ...  # noqa: D102

    @property
    def planner_effort(self) -> str: ...  # noqa: D102

    def spectrum(self, x: np.ndarray) -> np.ndarray: ...  # noqa: D102

    def draw_spectrum(self, rng: np.random.Generator,  # noqa: D102
                      out: np.ndarray | None = None) -> np.ndarray: ...

    def colorize_spectrum(self, zeta: np.ndarray, out: np.ndarray | None = None, *,  # noqa: D102
                          own_thread: bool = False) -> np.ndarray: ...

    def colorize_with(self, zeta: np.ndarray,  # noqa: D102
                      sqrt_eigenvalues: np.ndarray) -> np.ndarray: ...

    def apply_spectral(self, x: np.ndarray,  # noqa: D102
                       multiplier: np.ndarray) -> np.ndarray: ...

    def surrogate_spectral(self, g: np.ndarray,  # noqa: D102
                           precision_k: np.ndarray) -> SurrogateConditional: ...


def fourier(prior: GaussianPrior) -> FourierPrior:
    """``prior``'s Fourier operations (:class:`FourierPrior`), typed.

    Raises
    ------
    UnsupportedOperationError
        ``prior.capabilities.fourier`` is false.
    """
    if not prior.capabilities.fourier:
        raise UnsupportedOperationError(
            f"{type(prior).__name__} ({prior.capabilities.backend} backend) is not diagonal in "
            "a Fourier basis; this operation needs a circulant (torus) prior.")
    return cast(FourierPrior, prior)


class GaussianPrior(ABC):
    """A zero-mean Gaussian prior N(0, K) over a lattice, exposed as an operator.

    Subclasses set :attr:`shape`, :attr:`state_shape`, :attr:`white_shape` and :attr:`exact_on`
    and implement the private hooks.  See the module docstring for the meaning of each shape.
    """

    #: what the exact operations act on: "lattice", "inputs", "torus" or "padded lattice".
    exact_on: str = "lattice"
    #: whether :meth:`colorize` of a batch gives each row bitwise what it gives that row alone
    #: (then samplers colour the chains that share this prior in one call; issue 26)
    colorize_batch_exact: bool = False
    shape: tuple[int, ...]
    state_shape: tuple[int, ...]
    white_shape: tuple[int, ...]
    #: the upper bounds on the ranges (one per axis) the state was sized for, when it was (a
    #: torus: a larger range would wrap around it, so it is refused); None: no such bound
    sized_for_range: tuple[float, ...] | None = None

    @property
    def capabilities(self) -> Capabilities:
        """What this backend does exactly beyond the protocol (:class:`Capabilities`)."""
        return Capabilities()

    # -- hooks ----------------------------------------------------------------------------------
    @abstractmethod
    def _colorize(self, z: np.ndarray) -> np.ndarray: ...

    @abstractmethod
    def _whiten(self, x: np.ndarray) -> np.ndarray: ...

    @abstractmethod
    def _solve(self, b: np.ndarray) -> np.ndarray: ...

    @abstractmethod
    def _log_det(self) -> float: ...

    @abstractmethod
    def _surrogate(self, g: np.ndarray, precision: np.ndarray) -> SurrogateConditional: ...

    @abstractmethod
    def _with_params(self, **params: Any) -> GaussianPrior: ...

    @property
    @abstractmethod
    def params(self) -> dict[str, Any]:
        """The hyperparameters this prior was built with."""

    def _sample_state(self, rng: np.random.Generator, n_chains: int) -> np.ndarray:
        z = rng.standard_normal((n_chains, *self.white_shape))
        return self._colorize(z)

    def _to_window(self, x: np.ndarray) -> np.ndarray:
        return x

    def _quad_form(self, x: np.ndarray) -> np.ndarray:
        z = self._whiten(x)
        return np.einsum("ij,ij->i", z.reshape(len(z), -1), z.reshape(len(z), -1))

    # -- public, validated API ------------------------------------------------------------------
    @property
    def state_size(self) -> int:
        """Number of state variables, ``prod(state_shape)``."""
        return int(np.prod(self.state_shape))

    def colorize(self, z: np.ndarray) -> np.ndarray:
        """Map white noise to a prior state: ``x = W z`` with ``W Wᵀ = K_state``.

        Parameters
        ----------
        z : ndarray, shape (n_chains, *white_shape)

        Returns
        -------
        ndarray, shape (n_chains, *state_shape)
        """
        return self._colorize(chain_array("z", z, self.white_shape))

    def whiten(self, x: np.ndarray) -> np.ndarray:
        """Inverse of :meth:`colorize`: ``z = W⁻¹ x``.

        Parameters
        ----------
        x : ndarray, shape (n_chains, *state_shape)

        Returns
        -------
        ndarray, shape (n_chains, *white_shape)
        """
        return self._whiten(chain_array("x", x, self.state_shape))

    def solve(self, b: np.ndarray) -> np.ndarray:
        """``K_state⁻¹ b`` per chain.

        Parameters
        ----------
        b : ndarray, shape (n_chains, *state_shape)

        Returns
        -------
        ndarray, shape (n_chains, *state_shape)
        """
        return self._solve(chain_array("b", b, self.state_shape))

    def log_det(self) -> float:
        """``log |K_state|`` (a generalised determinant for intrinsic GMRFs, see the backend)."""
        return float(self._log_det())

    def quad_form(self, x: np.ndarray) -> np.ndarray:
        """``xᵀ K_state⁻¹ x`` per chain.

        Parameters
        ----------
        x : ndarray, shape (n_chains, *state_shape)

        Returns
        -------
        ndarray, shape (n_chains,)
        """
        return self._quad_form(chain_array("x", x, self.state_shape))

    def logpdf(self, x: np.ndarray) -> np.ndarray:
        """Log density of N(0, K_state) at each chain's state.

        Parameters
        ----------
        x : ndarray, shape (n_chains, *state_shape)

        Returns
        -------
        ndarray, shape (n_chains,)
        """
        q = self.quad_form(x)
        return -0.5 * (q + self.log_det() + self.rank * LOG_2PI)

    @property
    def rank(self) -> int:
        """Dimension of the support of N(0, K_state) (below the state size for intrinsic priors)."""
        return self.state_size

    def sample_state(self, rng: np.random.Generator | int, n_chains: int = 1) -> np.ndarray:
        """Draw prior states.

        Returns
        -------
        ndarray, shape (n_chains, *state_shape)
        """
        return self._sample_state(as_rng(rng), _n_chains(n_chains))

    def sample(self, rng: np.random.Generator | int, n_chains: int = 1) -> np.ndarray:
        """Draw prior fields on the user's variables (the window).

        Parameters
        ----------
        rng : numpy.random.Generator or int
        n_chains : int

        Returns
        -------
        ndarray, shape (n_chains, *shape)
        """
        return self._to_window(self.sample_state(rng, n_chains))

    def to_window(self, x: np.ndarray) -> np.ndarray:
        """Restrict states ``(n_chains, *state_shape)`` to the window ``(n_chains, *shape)``."""
        return self._to_window(chain_array("x", x, self.state_shape))

    def window_index(self) -> np.ndarray:
        """Flat (C-order) index into the state of every window cell, in window C order.

        ``x.reshape(n, -1)[:, prior.window_index()]`` equals ``to_window(x).reshape(n, -1)``; the
        samplers use it to read the likelihood's cells straight from the state without copying
        the window out (DESIGN §4: torus and padding cells are latent variables without data).

        Returns
        -------
        ndarray of int64, shape (prod(shape),)
        """
        probe = np.arange(self.state_size, dtype=np.float64).reshape(1, *self.state_shape)
        return self._to_window(probe).reshape(-1).astype(np.int64)

    def with_params(self, **params: Any) -> GaussianPrior:
        """The same structure with new hyperparameters (reusing FFT plans / symbolic analyses)."""
        return self._with_params(**params)

    def surrogate(self, g: np.ndarray, precision: float | np.ndarray) -> SurrogateConditional:
        """Surrogate-data quantities for ``g ~ N(f, S)`` given in precision form ``Π = S⁻¹``.

        Parameters
        ----------
        g : ndarray, shape (n_chains, *state_shape)
            Surrogate data; ignored where ``precision == 0``.
        precision : float or ndarray broadcastable to state_shape
            Site precisions ``≥ 0`` (0 = no information), shared by all chains: ``S`` may depend
            on θ and the data only, never on the current ``f`` (Murray & Adams 2010, §3).

        Returns
        -------
        SurrogateConditional
        """
        g = chain_array("g", g, self.state_shape)
        finite_array("g", g)
        prec = np.asarray(precision, dtype=np.float64)
        try:
            prec = np.broadcast_to(prec, self.state_shape)
        except ValueError:
            raise ShapeMismatchError(
                f"precision has shape {prec.shape}; it must broadcast to the state shape "
                f"{self.state_shape} (one precision per state cell, shared by the chains)."
            ) from None
        finite_array("precision", prec, "site precisions are finite; use 0 for no information")
        if np.any(prec < 0):
            idx = tuple(int(i) for i in np.argwhere(prec < 0)[0])
            raise InvalidParameterError(
                f"precision has a negative value {prec[idx].item()!r} at index {idx}; precisions "
                "are >= 0 (0 = no information)."
            )
        return self._surrogate(g, prec)

    def describe(self) -> str:
        """One line saying what the backend is exact on."""
        return f"{type(self).__name__}: exact on the {self.exact_on}, state {self.state_shape}"


def _n_chains(n_chains: int) -> int:
    if not isinstance(n_chains, (int, np.integer)) or isinstance(n_chains, bool) or n_chains < 1:
        raise InvalidParameterError(f"n_chains={n_chains!r} must be a positive integer.")
    return int(n_chains)
