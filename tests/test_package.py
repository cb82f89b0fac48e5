"""The package surface: one version, the curated API, one error hierarchy."""

from __future__ import annotations

import inspect
import tomllib
from importlib.metadata import version
from pathlib import Path

import lattice_lgm
from lattice_lgm import errors

ROOT = Path(__file__).resolve().parents[1]


def test_version_has_one_source():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert lattice_lgm.__version__ == version("lattice-lgm") == declared


def test_public_api_imports():
    from lattice_lgm import Lattice, LatticeLGMError  # noqa: F401
    from lattice_lgm.covariance import (  # noqa: F401
        Exponential,
        Matern,
        RationalQuadratic,
        SquaredExponential,
    )
    from lattice_lgm.priors import CirculantPrior, DensePrior, GaussianPrior, GMRFPrior

    for cls in (CirculantPrior, DensePrior, GMRFPrior):
        assert issubclass(cls, GaussianPrior)
        assert cls.__doc__ and "exact" in (inspect.getmodule(cls).__doc__ or "").lower()


def test_every_error_is_a_lattice_lgm_error():
    classes = [getattr(errors, n) for n in errors.__all__]
    assert errors.LatticeLGMError in classes
    for cls in classes:
        assert issubclass(cls, errors.LatticeLGMError)
    # specific subclasses exist for each bad-input family the engine reports
    for name in ("InvalidParameterError", "ShapeMismatchError", "GeographicCoordinatesError",
                 "EmbeddingNotPSDError", "NotPositiveDefiniteError", "InvalidCovarianceError",
                 "IntrinsicPriorError", "ParameterOutOfBoundsError", "BackendUnavailableError"):
        assert name in errors.__all__


def test_only_cholmod_module_imports_scikit_sparse():
    hits = [p.relative_to(ROOT).as_posix() for p in (ROOT / "lattice_lgm").rglob("*.py")
            if "sksparse" in p.read_text()]
    assert hits == ["lattice_lgm/priors/_cholmod.py"]
