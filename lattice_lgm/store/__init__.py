"""The run store: a zarr (v3) group in ArviZ layout, written in aligned blocks, with checkpoints.

Layout (DESIGN §6).  One group per ArviZ group, each array with ``dimension_names`` so that
``xarray.open_datatree(path, engine="zarr")`` and ArviZ read it with no converter::

    <path>/                      root attrs: config, priors, library versions, data hash
      posterior/                 hyperparameters (chain, draw), intercept (chain, draw) and
                                 beta (chain, draw, covariate) on the covariates' original scale,
                                 f (chain, draw, *model dims) float32 when fields are kept
                                 every draw
      posterior_fields/          f (chain, draw, *dims) when thin_fields > 1; its ``draw``
                                 coordinate names the posterior draws it belongs to
      sample_stats/              loglik, n_loglik, n_cov, accepted (chain, draw), and the
                                 sweep's own under ArviZ's names (joint HMC: acceptance_rate,
                                 step_size, n_steps, diverging)
      summaries/                 online (Welford) means/variances of intensity and relative
                                 risk and exceedance counts, per chain, over every stored draw
      observed_data/             counts on the lattice
      constant_data/             exposure, inside, offset, covariate columns
      warmup_posterior/, warmup_sample_stats/   when tuned draws are kept
      .commits/chain-<i>.json    draws committed per phase, one file per chain
      .commits/chunks-<i>.json   a digest of every chunk file of chain i at its last commit
      .locks/chain-<i>.lock      held (flock) by the process writing chain i; names it
      .checkpoint/               ckpt-<generation>.npz (newest two kept), written atomically

Arrays are pre-allocated for the whole run and filled with NaN (integers with -1); chunks are
whole blocks of draws of one chain, so a block write touches its own chunk files only and
chains written by different processes (``--chains 4-7``) never share a chunk.  The metadata
(consolidated) is written once, at creation, and never changes, so processes writing chain
blocks into one store never race on it.  *Commit* is the chain's marker file
``.commits/chain-<i>.json`` replaced atomically after the block's data are on disk:
:func:`open_store` shows committed draws only, so a reader never sees a half-written block.
Nothing wall-clock is stored in the zarr hierarchy, so a run resumed after a crash produces
the same bytes as an uninterrupted one.

Integrity (issue 27): zarr's zstd chunks carry no checksum, and a deleted chunk reads back as
its fill value (NaN), so a damaged store would look like a run with missing draws.  Before each
commit marker, the chain's *manifest* ``.commits/chunks-<i>.json`` records a BLAKE2b digest of
every chunk file of that chain (files changed since the last commit are hashed again; a file
the manifest holds that has disappeared stops the run with :class:`StoreIntegrityError`).
:func:`verify_store` checks every digest (``lattice-lgm verify``); :func:`open_store` checks
that every recorded file exists and warns (:class:`StoreIntegrityWarning`) otherwise; resuming
verifies the chains it continues and refuses a damaged store, naming the files.

Checkpoints hold everything needed to continue exactly (DESIGN §5–6): every chain's bit
generator state, the sampler state (hyperparameters, field, white vector, coefficients, cached
log-likelihood), the online-summary accumulators, FFTW wisdom, and the hashes and versions that
:func:`check_compatible` compares on resume.  They are written to a temporary file, flushed and
renamed (atomic on POSIX), and the previous generation is kept, so a corrupt newest checkpoint
falls back to the one before.

Modules: ``base`` (file names, format version, errors, :class:`VarSpec`, JSON and hash
helpers), ``writer`` (:class:`RunStore`), ``integrity`` (commit markers, digests and
manifests, :func:`store_problem`, :func:`verify_store`, :func:`restore_metadata`) and
``reading`` (:func:`open_store`, :func:`read_config`, :func:`upgrade_config`,
:func:`check_compatible`).
"""

from __future__ import annotations

from .base import (
    BIT_LIBRARIES,
    CHECKPOINT_DIR,
    COMMIT_DIR,
    DATA_MANIFEST,
    FORMAT_VERSION,
    KEEP_GENERATIONS,
    LOCK_DIR,
    PHASE_GROUPS,
    CheckpointError,
    ResumeMismatchError,
    StoreExistsError,
    StoreIntegrityError,
    StoreIntegrityWarning,
    StoreLockedError,
    VarSpec,
    hash_arrays,
    library_versions,
)
from .integrity import (
    VerifyReport,
    check_store,
    describe_problem,
    restore_metadata,
    store_problem,
    verify_store,
)
from .reading import (
    check_compatible,
    open_store,
    read_config,
    upgrade_config,
)
from .writer import RunStore

__all__ = [
    "BIT_LIBRARIES",
    "CHECKPOINT_DIR",
    "COMMIT_DIR",
    "DATA_MANIFEST",
    "FORMAT_VERSION",
    "KEEP_GENERATIONS",
    "LOCK_DIR",
    "PHASE_GROUPS",
    "CheckpointError",
    "ResumeMismatchError",
    "RunStore",
    "StoreExistsError",
    "StoreIntegrityError",
    "StoreIntegrityWarning",
    "StoreLockedError",
    "VarSpec",
    "VerifyReport",
    "check_compatible",
    "check_store",
    "describe_problem",
    "hash_arrays",
    "library_versions",
    "open_store",
    "read_config",
    "restore_metadata",
    "store_problem",
    "upgrade_config",
    "verify_store",
]
