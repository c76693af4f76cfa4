"""A copy of the workflow as it stands in the working tree, for tests that change one of its files.

The files git tracks and the new ones it does not ignore, so never the environments (``.venv``,
and ``.venv-vllm`` with its 3.5 GB in some 100,000 files: copying it took most of a minute per
test), run outputs or caches. Outside a git checkout, a tree copy without those.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.conftest import REPO

#: What a copy leaves out where git cannot say: version control, environments, outputs, caches.
NOT_COPIED = shutil.ignore_patterns(
    ".git", ".venv*", ".whl", ".gl", "results", "logs", ".snakemake", ".cache", "resources", "__pycache__",
    ".pytest_cache", ".import_linter_cache",
)


def copy_workflow(destination: Path) -> Path:
    """Copy the workflow into ``destination`` (created); returns it."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                                cwd=REPO, capture_output=True, check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        shutil.copytree(REPO, destination, ignore=NOT_COPIED)
        return destination
    destination.mkdir(parents=True, exist_ok=True)
    for name in filter(None, listed.split(b"\0")):
        relative = os.fsdecode(name)
        source = REPO / relative
        if not source.is_file():  # deleted in the working tree, not yet in the index
            continue
        target = destination / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    return destination
