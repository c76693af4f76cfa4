"""Small xlsx workbooks that inflate to huge tables (issue 42, point 4), written directly as zip
members so that building them costs nothing: the tests and benchmarks/hostile_inputs.py use them."""

from __future__ import annotations

import zipfile
from pathlib import Path

_CONTENT_TYPES = (
    '<?xml version="1.0" encoding="UTF-8"?>'
    '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    '<Default Extension="xml" ContentType="application/xml"/>'
    '<Override PartName="/xl/workbook.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
    '<Override PartName="/xl/worksheets/sheet1.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>'
    "</Types>"
)
_RELS = (
    '<?xml version="1.0" encoding="UTF-8"?>'
    '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
    'officeDocument" Target="xl/workbook.xml"/></Relationships>'
)
_WORKBOOK = (
    '<?xml version="1.0" encoding="UTF-8"?>'
    '<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" '
    'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">'
    '<sheets><sheet name="Sheet1" sheetId="1" r:id="rId1"/></sheets></workbook>'
)
_WORKBOOK_RELS = (
    '<?xml version="1.0" encoding="UTF-8"?>'
    '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
    'worksheet" Target="worksheets/sheet1.xml"/></Relationships>'
)
_SHEET_HEAD = ('<?xml version="1.0" encoding="UTF-8"?>'
               '<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">')


def _write(path: Path, sheet_parts) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("[Content_Types].xml", _CONTENT_TYPES)
        archive.writestr("_rels/.rels", _RELS)
        archive.writestr("xl/workbook.xml", _WORKBOOK)
        archive.writestr("xl/_rels/workbook.xml.rels", _WORKBOOK_RELS)
        with archive.open("xl/worksheets/sheet1.xml", "w", force_zip64=True) as sheet:
            for part in sheet_parts:
                sheet.write(part.encode())
    return path


def one_far_cell(path: Path, ref: str = "XFD20000", *, declare: bool = True) -> Path:
    """A header row and one inline-string cell at ``ref``; ``declare``: a ``<dimension>`` saying so."""
    row = int("".join(filter(str.isdigit, ref)))
    dimension = f'<dimension ref="A1:{ref}"/>' if declare else ""
    return _write(path, [
        _SHEET_HEAD, dimension, "<sheetData>",
        '<row r="1"><c r="A1" t="inlineStr"><is><t>question</t></is></c></row>',
        f'<row r="{row}"><c r="{ref}" t="inlineStr"><is><t>x</t></is></c></row>',
        "</sheetData></worksheet>",
    ])


def empty_cells(path: Path, megabytes: int = 60, *, cells_per_row: int = 100) -> Path:
    """``megabytes`` of styled empty cells (``<c s="1"/>``, no position: each follows the last)
    under a ``<dimension>`` that claims one cell."""
    row = "<row>" + '<c s="1"/>' * cells_per_row + "</row>"
    rows = megabytes * 1_000_000 // len(row)

    def parts():
        yield _SHEET_HEAD + '<dimension ref="A1"/><sheetData>'
        block = row * 1000
        for _ in range(rows // 1000):
            yield block
        yield row * (rows % 1000)
        yield "</sheetData></worksheet>"

    return _write(path, parts())
