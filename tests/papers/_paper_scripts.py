"""Load a paper-reproduction script of benchmarks/papers/ as a module, for its tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

PAPERS = Path(__file__).resolve().parents[2] / "benchmarks" / "papers"


def load(name: str) -> ModuleType:
    """``benchmarks/papers/<name>.py`` as module ``name`` (its sister scripts importable)."""
    if str(PAPERS) not in sys.path:
        sys.path.insert(0, str(PAPERS))  # the scripts import each other
    spec = importlib.util.spec_from_file_location(name, PAPERS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod
