"""How much a file will hold once read: for a zip container (an xlsx workbook, an Inspect
``.eval`` log) its members' uncompressed sizes, read from the zip directory without inflating
anything; for any other file its size.

A zip's directory can declare any size, but Python's :mod:`zipfile` (which openpyxl and
inspect_ai read through) stops a member at its declared size, so the declared sizes bound what a
reader can be made to hold. A 400 KB ``.eval`` whose ``header.json`` inflates to 400 MB took
inspect_ai 20 s and 1.3 GB to refuse; read here it is refused from its directory in
milliseconds.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path


class ArchiveUnreadable(ValueError):
    """A file that says it is a zip and whose directory cannot be read; the message names it."""


@dataclass(frozen=True)
class Extent:
    """What a file holds uncompressed: every member together, and its largest member."""

    total_bytes: int
    largest_bytes: int
    #: the largest member's name in the archive (the file's own name for a plain file)
    largest_name: str


def extent(path: Path) -> Extent:
    """The uncompressed extent of ``path`` (see the module)."""
    path = Path(path)
    if not zipfile.is_zipfile(path):
        size = path.stat().st_size
        return Extent(size, size, path.name)
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as error:
        raise ArchiveUnreadable(f"{path}: cannot be read as a zip archive ({error})") from error
    largest = max(members, key=lambda member: member.file_size, default=None)
    return Extent(sum(member.file_size for member in members),
                  0 if largest is None else largest.file_size, "" if largest is None else largest.filename)
