"""The DensePrior 'auto' jitter ladder as an oracle that holds on every CPU.

Whether LAPACK factors a numerically singular ``K`` (a smooth kernel on close inputs) is decided
by round-off, so by which BLAS kernel OpenBLAS picks for the CPU (Haswell, SkylakeX, …): a test
must not expect a particular level for such a ``K``.  It can expect what the policy promises
whatever the kernel: the level kept is the smallest rung at which *this process's* Cholesky
succeeds, and the factor reproduces ``K + jitter·I``.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

#: the ladder of lattice_lgm.priors.dense, written out (relative to mean diag K)
LADDER = (0.0, 1e-10, 1e-9, 1e-8, 1e-7, 1e-6)


def smallest_level(k: np.ndarray, start: float = 0.0) -> float | None:
    """The first rung ``ε ≥ start`` at which ``K + ε·mean(diag K)·I`` factors here, or None."""
    scale = float(np.mean(np.diag(k)))
    for eps in (start, *(e for e in LADDER if e > start)):
        try:
            linalg.cholesky(k + eps * scale * np.eye(len(k)) if eps else k, lower=True,
                            check_finite=False)
        except linalg.LinAlgError:
            continue
        return eps
    return None


def assert_jitter_is_the_ladders(prior, family_level: float | None = None) -> None:
    """``prior`` added the smallest rung at which ``K`` factors on this CPU, times mean diag K,
    and its factor reproduces ``K + jitter·I``.

    A root (``family_level=None``) climbs from 0 and records that rung as its family's level;
    a ``with_params`` child climbs from its family's level and records that level unchanged.
    """
    k = prior.cov
    n = len(k)
    eps = smallest_level(k, family_level or 0.0)
    assert eps is not None, "no rung of the ladder factors K here"
    assert prior.jitter == eps * float(np.mean(np.diag(k)))
    assert prior.jitter_level == (eps if family_level is None else family_level)
    # a Cholesky factor's backward error is below (n + 1)·u·max diag in any order of summation
    np.testing.assert_allclose(prior.chol @ prior.chol.T, k + prior.jitter * np.eye(n), rtol=0,
                               atol=n * 1e-14 * np.abs(np.diag(k)).max())
