"""The resolved configuration, :class:`RunConfig`, and :func:`load_config`."""

from __future__ import annotations

import copy
import os
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..covariates import from_table, read_raster
from ..errors import BackendUnavailableError
from ..hyperpriors import Normal, PCPriorRange, PCPriorSD
from ..lattice import Lattice
from ..models.lgcp import (
    LGCP,
)
from ..store.reading import upgrade_config
from ..window.geometry import Window
from ..window.lattices import lattice_for_window
from .kinds import FAMILIES, ConfigError
from .resolve import _apply_overrides, _resolve


# -- the resolved configuration ---------------------------------------------------------------
class RunConfig:
    """A validated run configuration.

    Build it with :func:`load_config` (from a TOML file) or :meth:`from_resolved` (from the
    dict a run stored).

    Attributes
    ----------
    path : Path or None
        The config file (None when rebuilt from a stored dict).
    """

    def __init__(self, resolved: dict[str, Any], path: Path | None = None) -> None:
        self._resolved = resolved
        self.path = path

    @classmethod
    def from_resolved(cls, d: Mapping[str, Any]) -> RunConfig:
        """Rebuild from :attr:`resolved` (e.g. ``lattice_lgm.store.read_config(path)``).

        The dict is validated again; its paths are absolute, so the current directory does not
        matter.

        Raises
        ------
        ConfigError
            An empty dict (a run started from Python without ``config=``) or an invalid one.
        """
        if not d:
            raise ConfigError(
                "the stored configuration is empty: the run was started from Python without "
                "config=; rebuild its model in Python instead.")
        resolved = _resolve(upgrade_config(d), base=Path.cwd(), stem=None)
        return cls(resolved)

    @property
    def resolved(self) -> dict[str, Any]:
        """The fully resolved configuration: a fresh JSON-serialisable dict.

        Sections and keys in schema order; absolute paths; every default filled (priors left
        out are ``None``: LGCP's window-scaled defaults); the value stored with a run.
        """
        return copy.deepcopy(self._resolved)

    @property
    def store_path(self) -> Path:
        """The run's zarr store."""
        return Path(self._resolved["store"]["path"])

    @property
    def maps_dir(self) -> Path:
        """Directory of the PNG maps."""
        return Path(self._resolved["output"]["maps"])

    @property
    def thresholds(self) -> tuple[float, ...]:
        """Relative-risk levels of the exceedance maps."""
        return tuple(self._resolved["output"]["thresholds"])

    def sample_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``lattice_lgm.runs.sample`` (everything but the model).

        Returns
        -------
        dict
            ``draws, tune, chains, random_seed, thin, thin_fields, checkpoint_every,
            representation, n_latent, thresholds, discard_tuned_samples, chains_per_task,
            store, max_disk_gb, max_memory_gb, config``
            (``thresholds``: the exceedance levels the runner counts online).

        Raises
        ------
        ConfigError
            ``sampling.seed`` is not set: a run from a config must be reproducible.
        """
        s, st = self._resolved["sampling"], self._resolved["store"]
        if s["seed"] is None:
            where = f" in {self.path}" if self.path else ""
            raise ConfigError(
                f"sampling.seed is not set{where}; a run needs a seed so that it can be "
                "reproduced: add seed = <integer> under [sampling], or pass "
                "--set sampling.seed=1.")
        return {
            "draws": s["draws"], "tune": s["tune"], "chains": s["chains"],
            "random_seed": s["seed"], "thin": s["thin"], "thin_fields": s["thin_fields"],
            "checkpoint_every": s["checkpoint_every"], "representation": s["representation"],
            "n_latent": s["n_latent"], "thresholds": list(self.thresholds),
            "discard_tuned_samples": s["discard_tuned_samples"],
            "chains_per_task": s["chains_per_task"],
            "store": st["path"], "max_disk_gb": st["max_disk_gb"],
            "max_memory_gb": st["max_memory_gb"], "config": self.resolved,
        }

    def build_model(self) -> Any:
        """The model this configuration describes.

        For ``model.family = "lgcp"`` the :class:`~lattice_lgm.models.lgcp.LGCP`: reads the
        points, the window (geopandas for a vector file) and the covariates
        (``covariates.from_table`` for ``.csv``, ``covariates.read_raster`` for rasters).  For
        another family, ``Class.from_config(self)``.

        Returns
        -------
        LGCP, or the family's model
        """
        family = self._resolved["model"]["family"]
        if family != "lgcp":
            return _family_class(family).from_config(self)
        d, m = self._resolved["data"], self._resolved["model"]
        window = self._window()
        kw: dict[str, Any] = {
            "units": d["units"], "crs": d["crs"], "formula": d["formula"],
            "outside": d["outside"], "backend": m["backend"], "nu": m["nu"],
            "alpha": m["alpha"], "coefficients": m["coefficients"],
            "intercept": m["intercept"], "beta_sd": m["beta_sd"],
        }
        if d["covariates"]:
            kw["covariates"] = {
                name: (from_table(p, name) if p.lower().endswith(".csv")
                       else read_raster(p, name=name))
                for name, p in d["covariates"].items()}
        if d["regrid"]:
            kw["regrid"] = dict(d["regrid"])
        pri = m["priors"]
        # the spatial dimension of the range prior: windows here are planar
        if pri["range"] is not None:
            r = pri["range"]
            kw["range_prior"] = PCPriorRange(r["rho0"], r["alpha"], 2, upper=r["upper"])
        if pri["sd"] is not None:
            kw["sd_prior"] = PCPriorSD(pri["sd"]["sd0"], pri["sd"]["alpha"])
        if pri["intercept"] is not None:
            kw["intercept_prior"] = Normal(pri["intercept"]["mean"], pri["intercept"]["sd"])
        if d["time"] is not None:
            kw["lattice"] = self._spacetime_lattice(window)
            kw["nu_t"], kw["time_units"] = m["nu_t"], d["time_units"]
        elif d["cell_size"] is not None:
            kw["cell_size"] = _as_axes(d["cell_size"])
        else:
            kw["shape"] = _as_axes(d["shape"])
        return LGCP(d["points"], window, **kw)

    def _window(self) -> Any:
        w = self._resolved["data"]["window"]
        if not isinstance(w, str):
            return tuple(w)
        try:
            import geopandas
        except ImportError:  # pragma: no cover - geopandas is in the dev/geo extras
            raise BackendUnavailableError(
                f"data.window = {w!r} is a vector file, which needs geopandas: pip install "
                "'lattice-lgm[geo]', or give the window as [xmin, xmax, ymin, ymax].") from None
        return geopandas.read_file(w)

    def _spacetime_lattice(self, window: Any) -> Any:
        """(t, y, x) lattice: the window's planar lattice times ``time`` cut by ``time_step``."""
        d = self._resolved["data"]
        size = {"cell_size": _as_axes(d["cell_size"])} if d["cell_size"] is not None else {
            "shape": _as_axes(d["shape"])}
        plane = lattice_for_window(Window.coerce(window), units=d["units"], crs=d["crs"],
                                   **size)
        t0, t1 = d["time"]
        axis = lattice_for_window(Window.interval(t0, t1), cell_size=d["time_step"])
        return Lattice(shape=(axis.shape[0], *plane.shape),
                       spacing=(axis.spacing[0], *plane.spacing),
                       origin=(t0, *plane.origin), dims=("t", "y", "x"),
                       units=plane.units, crs=plane.crs)

    def __repr__(self) -> str:
        src = f"{str(self.path)!r}" if self.path else "stored"
        return f"RunConfig({src}, store={str(self.store_path)!r})"


def _as_axes(v: Any) -> Any:
    return tuple(v) if isinstance(v, list) else v


def load_config(path: str | os.PathLike, overrides: Sequence[str] = ()) -> RunConfig:
    """Read, validate and resolve a TOML run configuration.

    Parameters
    ----------
    path : str or path-like
        The TOML file.
    overrides : sequence of str
        ``"section.key=value"`` strings (``"sampling.draws=200"``, ``"model.priors.range.rho0=
        50"``), applied on top of the file; the value is parsed as a TOML value, or taken as
        a bare string when it is not one.

    Returns
    -------
    RunConfig

    Raises
    ------
    ConfigError
        A missing file, invalid TOML, an unknown section or key (with the nearest valid
        name), a value of the wrong type (naming key, value and expected type), a missing
        required key or data file.
    """
    p = Path(path).expanduser()
    if not p.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist; write one with "
                          "`lattice-lgm init`.")
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p} is not valid TOML: {exc}.") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p} is not UTF-8 text: {exc}.") from None
    cli_keys = _apply_overrides(raw, overrides)
    resolved = _resolve(raw, base=p.resolve().parent, stem=p.stem,
                        cli_keys=frozenset(cli_keys))
    return RunConfig(resolved, path=p.resolve())




def _family_class(family: str) -> Any:
    """The class ``"package.module:Class"`` names (``model.family``)."""
    import importlib

    mod, _, name = FAMILIES.get(family, family).partition(":")
    try:
        cls = getattr(importlib.import_module(mod), name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(
            f"model.family = {family!r} cannot be imported ({exc}); give \"package.module:"
            "Class\" of an importable module (installed, or on PYTHONPATH).") from None
    if not callable(getattr(cls, "from_config", None)):
        raise ConfigError(
            f"model.family = {family!r} has no from_config(config); a model family builds its "
            "model from the resolved configuration.")
    return cls
