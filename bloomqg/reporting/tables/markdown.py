"""A :class:`~bloomqg.reporting.tables.model.Table` as Markdown: a bold caption line, a GitHub pipe
table (a grouped header is written as ``group<br>column``), footnotes.
"""

from __future__ import annotations

import re

from bloomqg.reporting.tables.model import DAGGER, Table


#: What a label or cell may not carry into a Markdown table as it is: HTML (as entities), the
#: backslash, the pipe that ends a cell, backticks (a code span) and line endings (a row is one line).
_MD_ESCAPES = str.maketrans({
    "&": "&amp;", "<": "&lt;", ">": "&gt;", "\\": "\\\\", "|": "\\|", "`": "\\`", "\n": " ", "\r": " ",
})
#: A closing bracket that would make a link or an image (``[x](javascript:…)``, ``[x][ref]``) or a
#: reference definition (``[x]: url``), and an opening one where a definition starts its line:
#: escaped, while an interval such as ``[88.1, 92.3] (n=100)`` is left as it reads.
_MD_LINK = re.compile(r"\](?=[(\[:])|^(?=\s*\[)\s*\[")


def _md_escape(text: str) -> str:
    """A label or cell as Markdown text: a pipe cannot end its cell, a line ending cannot end its
    row, and HTML, links, images and code spans in it (a strategy label ``<img src=x onerror=...>``
    or ``[x](javascript:alert(1))``) are shown as text by any renderer, as the HTML and LaTeX
    tables escape them."""
    return _MD_LINK.sub(lambda match: match.group()[:-1] + "\\" + match.group()[-1], text.translate(_MD_ESCAPES))


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
