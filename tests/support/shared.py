"""Things built once per test session and shared by every pytest-xdist worker.

``make test`` runs the suite in several worker processes (``pytest -n``). A session-scoped
fixture is per *process*, so without help each worker would build its own copy of an expensive
thing (a converted model, a finished study). :func:`build_once` builds it in the session's
shared temporary folder under a file lock: the first worker to ask builds it, the others wait
for the lock and then read the same folder. Without xdist it is an ordinary build in the
session's temporary folder.

Only tests that *read* the result may share it; a test that edits it must take its own copy
(``shutil.copytree``) or build its own.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock

#: Written last into a finished build; a folder without it is a build that died midway.
COMPLETE = ".built"


def session_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The temporary folder all workers of this test session share.

    Each xdist worker's base folder is ``<session>/popen-gwN``; the session's is its parent.
    """
    base = tmp_path_factory.getbasetemp()
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    # The name check: a pytest started from inside a worker inherits the variable, not the folder.
    return base.parent if worker and base.name == f"popen-{worker}" else base


def build_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], object]) -> Path:
    """``<session>/shared/<name>``, filled by ``build(folder)`` once for the whole session.

    ``build`` gets an empty folder. If it raises, the half-built folder is removed and the next
    worker to ask tries again (and fails the same way, with its own traceback).
    """
    shared = session_root(tmp_path_factory) / "shared"
    shared.mkdir(exist_ok=True)
    folder = shared / name
    with FileLock(str(shared / f"{name}.lock")):
        if not (folder / COMPLETE).is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            try:
                build(folder)
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            (folder / COMPLETE).write_text(name)
    return folder


def link_tree(source: Path, target: Path) -> Path:
    """A copy of the folder ``source`` at ``target`` made of hard links (instant, no disk).

    For read-only inputs only: a file written in place through a link changes the source too.
    (Snakemake deletes an output before its job rewrites it, which leaves the source alone.)
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, target, copy_function=os.link)
    return target
