"""An xlsx workbook's sheets measured before anything parses them: refused when too large.

A workbook's file size says little about the table pandas builds from it: one cell at ``XFD20000``
makes a 1,672-byte file that pandas pads to 20,000 rows × 16,384 columns (5 GB), one at row
1,048,576 a file that needs about 137 GB, and 60 MB of empty cells compress to 83 KB.
:func:`check_workbook_extent` reads each worksheet's XML as a stream (expat callbacks, no tree
kept, the zip member inflated piece by piece) and stops at the first sign that a sheet spans more
than ``max_cells`` (rows × columns of its extent): its declared ``<dimension ref=…>``, the
position of any cell, or the number of cells written. Memory stays bounded and a bomb is refused
within the first megabytes it inflates to.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from xml.parsers import expat

_REF = re.compile(r"^\$?([A-Za-z]{1,3})\$?(\d{1,7})$")
_CHUNK = 1 << 16


class SheetTooLarge(ValueError):
    """A worksheet spans more cells than allowed; the message names file, sheet and extent."""


class SheetUnreadable(ValueError):
    """A worksheet's XML is broken; the message names file and sheet."""


def column_number(letters: str) -> int:
    """``A`` -> 1, ``XFD`` -> 16384."""
    number = 0
    for letter in letters.upper():
        number = number * 26 + ord(letter) - ord("A") + 1
    return number


def _cell(ref: str) -> tuple[int, int] | None:
    """(row, column) of a cell reference such as ``XFD20000``; None when it is not one."""
    match = _REF.match(ref.strip())
    return (int(match.group(2)), column_number(match.group(1))) if match else None


class _Extent:
    """What a worksheet's stream has shown so far; raises as soon as it is too large."""

    def __init__(self, path: Path, sheet: str, max_cells: int) -> None:
        self.where = f"{path}: sheet {sheet}"
        self.max_cells = max_cells
        self.rows = self.columns = self.cells = 0
        self.row = self.column = 0

    def _refuse(self, what: str, rows: int, columns: int) -> None:
        raise SheetTooLarge(
            f"{self.where} {what} {rows:,} rows × {columns:,} columns ({rows * columns:,} cells), above"
            f" input_limits.max_sheet_cells = {self.max_cells:,}; refused before parsing it"
            " (raise the limit if the file is trusted)"
        )

    def start(self, name: str, attributes: dict[str, str]) -> None:
        tag = name.rpartition(":")[2]
        if tag == "c":
            position = _cell(attributes.get("r", ""))
            if position:  # a cell's own reference wins over the row it sits in
                self.row, self.column = max(self.row, position[0]), position[1]
            else:
                self.column += 1
            self.cells += 1
            self._grow(self.row, self.column)
            if self.cells > self.max_cells:
                self._refuse(f"holds more than {self.max_cells:,} cells, spanning at least",
                             self.rows, self.columns)
        elif tag == "row":
            number = attributes.get("r", "")
            self.row = int(number) if number.isdigit() else self.row + 1
            self.column = 0
            self._grow(self.row, 0)
        elif tag == "dimension":
            ref = attributes.get("ref", "")
            corners = [_cell(part) for part in ref.split(":")]
            if corners and all(corners):
                rows = max(c[0] for c in corners) - min(c[0] for c in corners) + 1  # type: ignore[index]
                columns = max(c[1] for c in corners) - min(c[1] for c in corners) + 1  # type: ignore[index]
                if rows * columns > self.max_cells:
                    self._refuse(f"declares ({ref})", rows, columns)

    def _grow(self, row: int, column: int) -> None:
        self.rows, self.columns = max(self.rows, row), max(self.columns, column)
        if self.rows * self.columns > self.max_cells:
            self._refuse(f"reaches row {self.rows:,}, column {self.columns:,}: at least",
                         self.rows, self.columns)


def check_workbook_extent(path: str | Path, max_cells: int) -> None:
    """Refuse (:class:`SheetTooLarge`) an xlsx workbook any of whose worksheets spans more than
    ``max_cells`` cells (declared or actual extent, or cells written), streaming its XML; a
    broken sheet is :class:`SheetUnreadable`. Not a zip file: nothing to check."""
    path = Path(path)
    if not zipfile.is_zipfile(path):
        return
    with zipfile.ZipFile(path) as archive:
        sheets = [name for name in archive.namelist()
                  if name.startswith("xl/worksheets/") and name.endswith(".xml")]
        for sheet in sheets:
            extent = _Extent(path, sheet.removeprefix("xl/worksheets/"), max_cells)
            parser = expat.ParserCreate()
            parser.StartElementHandler = extent.start
            try:
                with archive.open(sheet) as stream:
                    while chunk := stream.read(_CHUNK):
                        parser.Parse(chunk, False)
                parser.Parse(b"", True)
            except expat.ExpatError as error:
                raise SheetUnreadable(f"{path}: sheet {sheet}: not well-formed XML ({error})") from None
            except (zipfile.BadZipFile, EOFError, OSError) as error:
                raise SheetUnreadable(f"{path}: sheet {sheet}: cannot be inflated ({error})") from None
