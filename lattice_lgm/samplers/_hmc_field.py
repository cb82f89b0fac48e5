"""The whitened field of joint HMC per transform, and the spectrum table of the log range.

:class:`_TorusOps` (a circulant prior: the unitary half-spectrum, FFTs) and :class:`_DCTOps`
(a spectral Matérn-SPDE GMRF with Neumann boundaries: the orthonormal DCT-II, through
:class:`_DCTWorkspace`) give :class:`~lattice_lgm.samplers.hmc.JointHMC` one algebra for
both; :func:`_field_ops` picks them by the prior's ``Capabilities.white_transform``.
:class:`_SpectrumTable` holds the unit-sd spectra on a fixed grid of ``log range``, between
which the gradient interpolates (the module docstring of :mod:`lattice_lgm.samplers.hmc`).
"""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np
import scipy.fft

from ..errors import InvalidParameterError, ParameterOutOfBoundsError
from ..priors import CirculantPrior, GMRFPrior
from ._hmc_kernels import _interpolate


class _TorusOps:
    """The circulant prior's whitened field: the unitary half-spectrum ``ζ`` of white noise.

    ``f = F_u⁻¹(√λ ⊙ ζ)`` on the torus; bins weigh 1 or 2 in the full spectrum
    (:attr:`CirculantPrior.half_weights`); the FFTs run through per-thread workspaces, the
    gradient's pruned to the window (:class:`~lattice_lgm.priors._fft.WindowRealFFT`).
    """

    real = False

    @staticmethod
    def sigma(prior: CirculantPrior) -> np.ndarray:
        """``√λ`` over the half-spectrum (the field's standard deviation per bin)."""
        return np.sqrt(prior.eigenvalues)

    @staticmethod
    def weights(prior: CirculantPrior) -> np.ndarray:
        return prior.half_weights

    @staticmethod
    def draw(prior: CirculantPrior, rng: np.random.Generator) -> np.ndarray:
        return prior.draw_spectrum(rng)

    @staticmethod
    def colorize(prior: CirculantPrior, zeta: np.ndarray, ws: Any) -> np.ndarray:
        return prior.colorize_into(zeta, ws)

    @staticmethod
    def workspace(prior: CirculantPrior, threads: int | None, window: bool) -> Any:
        return prior.workspace(threads=threads, window=window)

    @staticmethod
    def key(prior: CirculantPrior) -> tuple[int, ...]:
        return tuple(prior.embedding_shape)


class _DCTWorkspace:
    """The orthonormal DCT-II of one padded lattice, with :class:`SplitRealFFT`'s interface.

    ``bwd_in`` → :meth:`backward` is the inverse transform ``Uᵀ`` (coefficients to field),
    ``fwd_in`` → :meth:`forward` the forward one ``U`` (field to coefficients); ``size = 1``
    because both are already orthonormal (the circulant workspace's unnormalised FFTs carry
    ``√M``).  scipy's pocketfft with one worker: thread-safe, no plans.
    """

    size = 1

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.bwd_in = np.zeros(shape)
        self.fwd_in = np.zeros(shape)

    def backward(self) -> np.ndarray:
        return scipy.fft.idctn(self.bwd_in, type=2, norm="ortho", workers=1)

    def forward(self) -> np.ndarray:
        return scipy.fft.dctn(self.fwd_in, type=2, norm="ortho", workers=1)


class _DCTOps:
    """A Matérn-SPDE GMRF's whitened field (spectral engine, Neumann boundaries).

    ``Q = Uᵀ diag(q) U`` with ``U`` the orthonormal DCT-II of the padded lattice
    (:class:`~lattice_lgm.priors.GMRFPrior`), so the state's white vector ``ζ = q^½ ⊙ U f`` is
    real, one coefficient per cell, each of weight 1, and ``f = Uᵀ(σ ⊙ ζ)`` with
    ``σ = q^{-½}`` proportional to ``sd``: the same algebra as the torus with a real
    orthonormal transform in place of the unitary FFT (the gradient in ``ζ`` is
    ``ζ − σ ⊙ U Sᵀg``).  The transforms are not pruned (the padding is about one range).
    """

    real = True

    @staticmethod
    def sigma(prior: GMRFPrior) -> np.ndarray:
        return prior.coefficient_sd

    @staticmethod
    def weights(prior: GMRFPrior) -> np.ndarray:
        return np.ones(prior.white_shape)

    @staticmethod
    def draw(prior: GMRFPrior, rng: np.random.Generator) -> np.ndarray:
        return rng.standard_normal(prior.white_shape)

    @staticmethod
    def colorize(prior: GMRFPrior, zeta: np.ndarray, ws: _DCTWorkspace) -> np.ndarray:
        np.multiply(zeta, prior.coefficient_sd, out=ws.bwd_in)
        return ws.backward()

    @staticmethod
    def workspace(prior: GMRFPrior, threads: int | None, window: bool) -> _DCTWorkspace:
        return _DCTWorkspace(prior.white_shape)

    @staticmethod
    def key(prior: GMRFPrior) -> tuple[int, ...]:
        return tuple(prior.white_shape)


def _field_ops(prior: Any) -> type[_TorusOps] | type[_DCTOps]:
    """The whitened field's operations for ``prior``, or an error naming what to use instead."""
    # the backend says which transform diagonalises its whitened field (Capabilities)
    ops = _FIELD_OPS.get(prior.capabilities.white_transform)
    if ops is not None:
        return ops
    what = type(prior).__name__
    if prior.capabilities.backend == "gmrf":
        what = f"GMRFPrior.{prior.model} with solver={prior.solver!r}" + (
            f", boundary={prior.boundary!r}" if prior.boundary is not None else "")
    raise InvalidParameterError(
        f"JointHMC needs a prior whose whitened field has a fast orthonormal transform: a "
        f"CirculantPrior (FFT) or GMRFPrior.matern with solver='spectral' and "
        f"boundary='neumann' (DCT); the model's prior is {what}. Use one of those (LGCP's "
        "backends 'circulant' and 'gmrf' are), or the Murray–Adams moves "
        "(default_sweep(model, 'prior-white')) or the interweaving sweep ('asis') on this "
        "one.")


#: the whitened field's operations per ``Capabilities.white_transform``
_FIELD_OPS: dict[str | None, type[_TorusOps] | type[_DCTOps]] = {"fft": _TorusOps,
                                                                  "dct": _DCTOps}


class _SpectrumTable:
    """``√λ₁`` (unit sd) of a circulant prior on a fixed grid of ``u = log range``, lazily.

    Nodes sit at ``u_j = j · STEP`` (the same grid whatever the chains, so the values do not
    depend on which chain asked first); between nodes ``√λ₁`` is linear in ``u``, and its
    derivative is the chord's slope.  Returns None when the interval crosses the range's upper
    bound (the caller then uses exact spectra).

    The nodes kept are one contiguous block, ``nodes[i]`` at ``j = j0 + i`` (what the
    compiled trajectory, :func:`_trajectory_chord`, reads); a node outside it extends the
    block (:meth:`cover`), unless it lies more than ``FAR`` nodes from the trajectory's start
    (:meth:`is_far`: made for the call, not kept).  Chains in threads share the table: it is
    extended under a lock, and a block once handed out is never written again.
    """

    STEP = 0.01
    MARGIN = 8
    FAR = 100

    def __init__(self, u_max: float) -> None:
        self.u_max = u_max
        #: ``(j0, nodes)``, nodes ``(n_nodes, *half_shape)``; one attribute, replaced whole
        self.block: tuple[int, np.ndarray] | None = None
        self._lock = threading.Lock()
        self._local = threading.local()          # each thread's anchor (:meth:`anchor`)

    def _make(self, j: int, prior: Any, ops: Any) -> np.ndarray:
        return ops.sigma(prior.with_params(sd=1.0, range=math.exp(j * self.STEP)))

    def cover(self, j_lo: int, j_hi: int, prior: Any, ops: Any) -> tuple[int, np.ndarray]:
        """``(j0, nodes)`` with nodes ``j_lo … j_hi`` in the block (made where missing).

        A block that must grow grows on that side by its own length (between ``MARGIN`` and
        ``FAR`` nodes, up to the range's bound), so a chain wandering over the table asks
        rarely and the block is copied a few times; nodes are made only for the new part.
        Raises what the prior raises for a needed node it cannot make (a range of 0); a node
        of the margin it cannot make ends the margin there.
        """
        with self._lock:
            old = self.block
            if old is not None:
                j0, nodes = old
                top = j0 + len(nodes) - 1
                if j0 <= j_lo and j_hi <= top:
                    return old
            j_max = math.floor(self.u_max / self.STEP)       # the last node inside the bound
            while j_max * self.STEP > self.u_max:
                j_max -= 1
            if old is None:
                lo, hi = j_lo - self.MARGIN, min(j_hi + self.MARGIN, j_max)
                have = range(0)
            else:
                grow = max(self.MARGIN, min(len(nodes), self.FAR))
                lo = j_lo - grow if j_lo < j0 else j0
                hi = min(j_hi + grow, j_max) if j_hi > top else top
                have = range(j0, top + 1)
            # the core (the request and any gap to the block) must be made: errors propagate
            c_lo = min(j_lo, have.start) if have else j_lo
            c_hi = max(j_hi, have.stop - 1) if have else j_hi
            new = {j: self._make(j, prior, ops) for j in range(c_lo, c_hi + 1) if j not in have}
            # the margin, outwards, up to a node the prior cannot make
            for step, start, end in ((-1, c_lo - 1, lo), (1, c_hi + 1, hi)):
                j = start
                while (j >= end) if step < 0 else (j <= end):
                    try:
                        new[j] = self._make(j, prior, ops)
                    except (InvalidParameterError, ParameterOutOfBoundsError):
                        break
                    j += step
            lo = min([*new, *have[:1]])
            hi = max([*new, *have[-1:]])
            block = np.empty((hi - lo + 1, *next(iter(new.values())).shape))
            for j in range(lo, hi + 1):
                block[j - lo] = new[j] if j in new else nodes[j - j0]
            self.block = (lo, block)
            return lo, block

    def chord(self, u: float, prior: Any,
              ops: Any) -> tuple[np.ndarray, np.ndarray, float] | None:
        """The nodes ``(√λ₁(u_j), √λ₁(u_{j+1}))`` around ``u`` and ``t = u/STEP − j``.

        None when the interval crosses the range's upper bound.
        """
        j = math.floor(u / self.STEP)
        if (j + 1) * self.STEP > self.u_max:
            return None
        blk = self.block
        if blk is None or not blk[0] <= j < blk[0] + len(blk[1]) - 1:
            if self.is_far(j):
                return self._make(j, prior, ops), self._make(j + 1, prior, ops), u / self.STEP - j
            blk = self.cover(j, j + 1, prior, ops)
        j0, nodes = blk
        return nodes[j - j0], nodes[j + 1 - j0], u / self.STEP - j

    def anchor(self, u: float) -> None:
        """Anchor the calling thread's trajectory at ``u`` (its starting point).

        Nodes are kept only within ``FAR`` nodes of the anchor (:meth:`is_far`).
        """
        self._local.j = math.floor(u / self.STEP) if math.isfinite(u) else None

    def is_far(self, j: int) -> bool:
        """Whether node ``j`` lies more than ``FAR`` nodes from the thread's anchor.

        Such a chord's two nodes are made for the call and not kept: a trajectory that runs
        away would otherwise extend the block to thousands of nodes (one running off to
        ``range = e^{-600}`` made a 63 000-node block, 19 s of one bei run, before this
        rule).  Without an anchor nothing is far.
        """
        a = getattr(self._local, "j", None)
        return a is not None and abs(j - a) > self.FAR

    def __getstate__(self) -> dict[str, Any]:
        # the lock and the anchors are process-local; the nodes are remade on use
        return {"u_max": self.u_max}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["u_max"])

    def at(self, u: float, prior: Any, ops: Any,
           scale: float = 1.0) -> tuple[np.ndarray, np.ndarray] | None:
        """``scale · √λ₁(u)`` and ``scale · ∂√λ₁/∂u`` (one fused pass), or None past the bound."""
        ch = self.chord(u, prior, ops)
        if ch is None:
            return None
        a0, a1, t = ch
        return _interpolate(a0, a1, t, 1.0 / self.STEP, scale)
