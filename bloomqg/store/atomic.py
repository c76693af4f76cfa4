"""Atomic file writes: a killed job never leaves a half-written output behind.

Outputs get the modes the user's umask asks for (``0666 & ~umask`` for files, ``0777 & ~umask``
for folders), as ``open`` would give them: ``tempfile.mkstemp`` would make them private (0600),
and the rename keeps the temporary file's mode, so a group could not read the results.
"""

from __future__ import annotations

import os
import secrets
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

#: Modes before the umask, as ``open()`` and ``mkdir()`` use them.
FILE_MODE = 0o666
DIRECTORY_MODE = 0o777


def current_umask() -> int:
    """This process's umask (read from ``/proc`` where it can be, so no thread sees it changed)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def shared_file_mode() -> int:
    """The mode a new output file gets: ``0666`` less the umask."""
    return FILE_MODE & ~current_umask()


def shared_directory_mode() -> int:
    """The mode a new output folder gets: ``0777`` less the umask."""
    return DIRECTORY_MODE & ~current_umask()


def _create_temporary(path: Path) -> Path:
    """A new empty file beside ``path``, created with mode 0666 so the kernel applies the umask."""
    while True:
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        except FileExistsError:
            continue
        os.close(fd)
        return tmp


@contextmanager
def atomic_target(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it replaces ``path`` in one rename,
    on any error it is removed and ``path`` is left as it was. The file ends with the umask's mode."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _create_temporary(path)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8, ``\\n`` line ends) to ``path`` atomically."""
    with atomic_target(path) as tmp:
        tmp.write_text(text, encoding="utf-8", newline="\n")
