"""A script of the repository that is not a package module (benchmarks/, .ci/), loaded by path."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def load_script(relative: str) -> ModuleType:
    """The module of ``REPO/relative``, executed once per call (its ``__main__`` block not run)."""
    path = REPO / relative
    spec = importlib.util.spec_from_file_location(path.stem.replace("-", "_"), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
