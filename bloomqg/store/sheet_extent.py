"""An xlsx workbook's first sheet read within a budget: the check and the read are one.

A workbook's file size says little about the table built from it: one cell at ``XFD20000``
makes a 1,672-byte file that pandas pads to 20,000 rows × 16,384 columns (5 GB), one at row
1,048,576 a file that needs about 137 GB, and 60 MB of empty cells compress to 83 KB. A check of
its own that parses the XML differently from the reader misses what the reader sees: a sheet at
``xl/sheets/a.xml`` or ``sheet1.XML`` (the workbook's relationships name it, openpyxl opens it),
a reference written ``XFD00020000``, one shared string of 60 MB used in 200 cells.

So :func:`read_first_sheet` reads the sheet through openpyxl itself, in ``read_only`` mode (rows
streamed from the zip member, never a tree; XML through defusedxml, which openpyxl uses when it is
installed), and counts as it goes: every cell openpyxl yields, padding included (a row padded to
column XFD is 16,384 cells), against ``max_cells``; every text's length against
``max_cell_chars`` (a shared string counted at each use) and their sum against
``max_text_chars``. It stops at the first row past a budget, so a bomb costs what the budget
allows and no more.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any


class SheetTooLarge(ValueError):
    """A worksheet holds more cells or text than allowed; the message names file, sheet and where."""


class SheetUnreadable(ValueError):
    """A workbook that openpyxl cannot read; the message names the file."""


def column_letters(number: int) -> str:
    """1 -> ``A``, 16384 -> ``XFD``."""
    letters = ""
    while number:
        number, rest = divmod(number - 1, 26)
        letters = chr(ord("A") + rest) + letters
    return letters


def _cell_value(value: Any) -> Any:
    """A cell's value as pandas' openpyxl reader gives it: a whole float as an int, an empty text
    as None (pandas' other words for a missing value, such as ``NA``, stay text here)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if value == "":
        return None
    return value


def read_first_sheet(
    path: str | Path, *, max_cells: int, max_cell_chars: int, max_text_chars: int,
) -> tuple[list[str], list[list[Any]]]:
    """(header, data rows) of the workbook's first worksheet, as ``pandas.read_excel`` would give
    them (header cells as text, a missing one ``Unnamed: i``; empty cells None; trailing empty rows
    and columns dropped), read within the budgets of the module docstring.

    Raises:
        SheetTooLarge: more than ``max_cells`` cells (openpyxl's padding counted), a text cell
            longer than ``max_cell_chars`` or texts longer than ``max_text_chars`` in all,
            naming the file, sheet, row and column and the ``input_limits`` key to raise.
        SheetUnreadable: not a workbook openpyxl can open.
    """
    import openpyxl  # heavy: only the loaders of xlsx files need it

    path = Path(path)
    try:
        workbook = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except (OSError, KeyError, ValueError, TypeError, zipfile.BadZipFile) as error:
        raise SheetUnreadable(f"{path}: cannot be read as an xlsx workbook ({type(error).__name__}: "
                              f"{str(error)[:200]})") from None
    try:
        if not workbook.worksheets:
            raise SheetUnreadable(f"{path}: the workbook has no worksheet")
        sheet = workbook.worksheets[0]
        # as pandas does: a declared <dimension> is not trusted (a wrong "A1" would hide rows, a
        # huge one pads every row), each row is as wide as its own last cell
        sheet.reset_dimensions()
        where = f"{path}: sheet {sheet.title!r}"
        rows: list[list[Any]] = []
        seen = chars = width = 0
        try:
            for number, row in enumerate(sheet.iter_rows(values_only=True), start=1):
                # two counts: the cells openpyxl yields (its padding is work too) and the extent
                # the table will have, rows × its widest row (what pandas would allocate)
                seen += max(len(row), 1)
                width = max(width, next((i for i in range(len(row), 0, -1) if row[i - 1] not in (None, "")), 0))
                if seen > max_cells or number * width > max_cells:
                    raise SheetTooLarge(
                        f"{where} reaches row {number:,}, column {column_letters(max(width, len(row), 1))}: more than"
                        f" {max_cells:,} cells, above input_limits.max_sheet_cells = {max_cells:,};"
                        " refused while reading it (raise the limit if the file is trusted)")
                values = [_cell_value(value) for value in row]
                for column, value in enumerate(values, start=1):
                    if isinstance(value, str):
                        if len(value) > max_cell_chars:
                            raise SheetTooLarge(
                                f"{where} cell {column_letters(column)}{number}: {len(value):,} characters,"
                                f" above input_limits.max_field_chars = {max_cell_chars:,}")
                        chars += len(value)
                        if chars > max_text_chars:
                            raise SheetTooLarge(
                                f"{where}: more than {max_text_chars:,} characters of text by cell "
                                f"{column_letters(column)}{number} (a shared string counts at each use)")
                rows.append(values)
        except (KeyError, IndexError, ValueError, TypeError, zipfile.BadZipFile, EOFError) as error:
            if isinstance(error, SheetTooLarge):
                raise
            raise SheetUnreadable(f"{where}: cannot be read ({type(error).__name__}: {str(error)[:200]})") from None
    finally:
        workbook.close()
    return _table(rows)


def _table(rows: list[list[Any]]) -> tuple[list[str], list[list[Any]]]:
    """Header and data rows, trailing empty rows and columns dropped, every row as wide as the table."""
    def filled(value: Any) -> bool:
        return value is not None

    while rows and not any(filled(value) for value in rows[-1]):
        rows.pop()
    width = max((max((i + 1 for i, v in enumerate(row) if filled(v)), default=0) for row in rows), default=0)
    if not rows:
        return [], []
    header = [str(value) if filled(value) else f"Unnamed: {index}"
              for index, value in enumerate((list(rows[0]) + [None] * width)[:width])]
    data = [(list(row) + [None] * width)[:width] for row in rows[1:]]
    return header, data
