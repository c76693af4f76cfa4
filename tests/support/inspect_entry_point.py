"""The ``inspect_ai`` entry point that pyproject.toml declares, made visible without reinstalling.

Inspect finds a package's registered tasks and scorers through ``importlib.metadata`` entry
points of group ``inspect_ai``. The shared virtualenv's editable install of bloomqg may predate
the declaration, and reinstalling it would repoint the venv; so a test writes a minimal
distribution (``METADATA`` and ``entry_points.txt``) whose entry points are exactly pyproject's,
and puts its folder on ``PYTHONPATH`` of the ``inspect`` command it runs. What is tested is
Inspect's own discovery of the declared entry point, not a shortcut around it.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from tests.conftest import REPO


def declared_entry_points() -> dict[str, str]:
    """pyproject.toml's ``[project.entry-points.inspect_ai]``."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return dict(project["entry-points"]["inspect_ai"])


def entry_point_dir(folder: Path) -> Path:
    """A folder holding a distribution that declares pyproject's ``inspect_ai`` entry points."""
    info = folder / "bloomqg_inspect_entry_points-0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bloomqg-inspect-entry-points\nVersion: 0\n")
    lines = "".join(f"{name} = {target}\n" for name, target in declared_entry_points().items())
    (info / "entry_points.txt").write_text(f"[inspect_ai]\n{lines}")
    return folder


def inspect_env(folder: Path, **extra: str) -> dict[str, str]:
    """The environment of an ``inspect`` command that imports this checkout's bloomqg and sees
    its entry point."""
    path = os.pathsep.join([str(REPO), str(entry_point_dir(folder)), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, **extra}
