"""A :class:`~bloomqg.reporting.tables.model.Table` as Markdown: a bold caption line, a GitHub pipe
table (a grouped header is written as ``group<br>column``), footnotes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from bloomqg.reporting.tables.model import DAGGER, Table, TableInputError


def _md_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def render_markdown(table: Table) -> str:
    """Caption in bold, a GitHub pipe table (grouped headers as ``group<br>column``), footnotes."""
    header = [_md_escape(c) for c in table.stub_columns]
    group_of = []
    for label, span in table.groups or [("", len(table.columns))]:
        group_of += [label] * span
    for column, group in zip(table.columns, group_of):
        header.append(f"{_md_escape(group)}<br>{_md_escape(column)}" if group else _md_escape(column))
    align = [":---"] * len(table.stub_columns) + ["---:"] * len(table.columns)
    lines = [f"<!-- bloomqg table: {table.name} -->", f"**{_md_escape(table.caption)}**", ""]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("| " + " | ".join(align) + " |")
    for row in table.rows:
        lines.append("| " + " | ".join(_md_escape(c.text) + (DAGGER if c.gated else "") for c in row) + " |")
    for note in table.notes:  # one paragraph per footnote
        lines += ["", _md_escape(note)]
    return "\n".join(lines) + "\n"


@dataclass
class ParsedTable:
    """A table read back from its Markdown file (for the HTML report)."""

    name: str
    caption: str
    groups: list[tuple[str, int]]
    header: list[str]
    rows: list[list[str]]
    notes: list[str]
    align: list[str] = field(default_factory=list)  # "left" | "right" per column


def _md_split(line: str) -> list[str]:
    cells, current, escaped = [], "", False
    for char in line.strip()[1:-1] if line.strip().endswith("|") else line.strip()[1:]:
        if escaped:
            current += char
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "|":
            cells.append(current.strip())
            current = ""
        else:
            current += char
    cells.append(current.strip())
    return cells


def read_markdown_table(path: Path) -> ParsedTable:
    """Read a table written by :func:`render_markdown` back into caption, header, rows and notes."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    match = re.match(r"<!-- bloomqg table: (\S+) -->", lines[0]) if lines else None
    if not match:
        raise TableInputError(f"{path}: not a bloomqg Markdown table (first line must name the table)")
    caption = lines[1].strip().removeprefix("**").removesuffix("**").replace("\\|", "|").replace("\\\\", "\\")
    table_lines = [line for line in lines if line.startswith("|")]
    if len(table_lines) < 2:
        raise TableInputError(f"{path}: no pipe table found")
    raw_header = _md_split(table_lines[0])
    groups: list[tuple[str, int]] = []
    header = []
    for cell in raw_header:
        group, _, column = cell.rpartition("<br>")
        header.append(column)
        if groups and groups[-1][0] == group:
            groups[-1] = (group, groups[-1][1] + 1)
        else:
            groups.append((group, 1))
    align = ["right" if cell.endswith(":") and not cell.startswith(":") else "left"
             for cell in _md_split(table_lines[1])]
    rows = [_md_split(line) for line in table_lines[2:]]
    last_table_line = max(i for i, line in enumerate(lines) if line.startswith("|"))
    notes = [line.replace("\\|", "|").replace("\\\\", "\\") for line in lines[last_table_line + 1:] if line.strip()]
    return ParsedTable(match.group(1), caption, groups, header, rows, notes, align)
