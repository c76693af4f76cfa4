"""Small xlsx workbooks that inflate to huge tables (issue 42, point 4; issue 52, point 3), written
directly as zip members so that building them costs nothing: the tests and
benchmarks/hostile_inputs.py use them. The sheet may sit wherever the workbook's relationships
say (``xl/sheets/a.xml``, ``sheet1.XML``): openpyxl, and so pandas, opens it there."""

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
    'worksheet" Target="{target}"/>{shared}</Relationships>'
)
_SHARED_REL = ('<Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
               'relationships/sharedStrings" Target="sharedStrings.xml"/>')
_SHARED_TYPE = ('<Override PartName="/xl/sharedStrings.xml" ContentType="application/'
                'vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/>')
#: Where a test may put the sheet: the usual path, and two the old check did not look at.
SHEET_PATHS = ("worksheets/sheet1.xml", "sheets/a.xml", "worksheets/sheet1.XML")
_SHEET_HEAD = ('<?xml version="1.0" encoding="UTF-8"?>'
               '<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">')


def _write(path: Path, sheet_parts, *, sheet_path: str = SHEET_PATHS[0], shared_parts=None) -> Path:
    """The workbook, its one sheet at ``xl/<sheet_path>`` (as the relationships name it), and a
    shared strings table from ``shared_parts`` when given."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        types = _CONTENT_TYPES.replace("/xl/worksheets/sheet1.xml", f"/xl/{sheet_path}")
        if shared_parts is not None:
            types = types.replace("</Types>", _SHARED_TYPE + "</Types>")
        archive.writestr("[Content_Types].xml", types)
        archive.writestr("_rels/.rels", _RELS)
        archive.writestr("xl/workbook.xml", _WORKBOOK)
        archive.writestr("xl/_rels/workbook.xml.rels", _WORKBOOK_RELS.format(
            target=sheet_path, shared=_SHARED_REL if shared_parts is not None else ""))
        for member, parts in ((f"xl/{sheet_path}", sheet_parts), ("xl/sharedStrings.xml", shared_parts)):
            if parts is None:
                continue
            with archive.open(member, "w", force_zip64=True) as stream:
                for part in parts:
                    stream.write(part.encode())
    return path


def one_far_cell(path: Path, ref: str = "XFD20000", *, declare: bool = True, sheet_path: str = SHEET_PATHS[0]) -> Path:
    """A header row and one inline-string cell at ``ref`` (``XFD00020000``: leading zeros too);
    ``declare``: a ``<dimension>`` saying so."""
    row = int("".join(filter(str.isdigit, ref)))
    dimension = f'<dimension ref="A1:{ref}"/>' if declare else ""
    return _write(path, [
        _SHEET_HEAD, dimension, "<sheetData>",
        '<row r="1"><c r="A1" t="inlineStr"><is><t>question</t></is></c></row>',
        f'<row r="{row}"><c r="{ref}" t="inlineStr"><is><t>x</t></is></c></row>',
        "</sheetData></worksheet>",
    ], sheet_path=sheet_path)


def one_huge_shared_string(path: Path, megabytes: int = 60, uses: int = 200) -> Path:
    """A math-bank sheet whose ``uses`` question cells all name one shared string of ``megabytes``
    MB (the file stays small: the string is one repeated character)."""
    header = ('<row r="1"><c r="A1" t="inlineStr"><is><t>知识点名称</t></is></c>'
              '<c r="B1" t="inlineStr"><is><t>题目内容</t></is></c></row>')
    rows = "".join(f'<row r="{n}"><c r="A{n}" t="inlineStr"><is><t>u</t></is></c><c r="B{n}" t="s"><v>0</v></c></row>'
                   for n in range(2, uses + 2))

    def shared():
        yield ('<?xml version="1.0" encoding="UTF-8"?><sst xmlns="http://schemas.openxmlformats.org/'
               'spreadsheetml/2006/main" count="1" uniqueCount="1"><si><t>')
        block = "x" * 1_000_000
        for _ in range(megabytes):
            yield block
        yield "</t></si></sst>"

    return _write(path, [_SHEET_HEAD, "<sheetData>", header, rows, "</sheetData></worksheet>"], shared_parts=shared())


def markup_cell(path: Path, text: str) -> Path:
    """A math-bank sheet of one row whose question cell holds ``text`` (e.g. ``"[img]" * 40_000``)."""
    from xml.sax.saxutils import escape

    return _write(path, [
        _SHEET_HEAD, "<sheetData>",
        '<row r="1"><c r="A1" t="inlineStr"><is><t>知识点名称</t></is></c>'
        '<c r="B1" t="inlineStr"><is><t>题目内容</t></is></c></row>',
        f'<row r="2"><c r="A2" t="inlineStr"><is><t>u</t></is></c><c r="B2" t="inlineStr"><is><t>{escape(text)}</t></is></c></row>',
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
