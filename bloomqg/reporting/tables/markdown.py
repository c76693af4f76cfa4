"""A :class:`~bloomqg.reporting.tables.model.Table` as Markdown: a bold caption line, a GitHub pipe
table (a grouped header is written as ``group<br>column``), footnotes.
"""

from __future__ import annotations

from bloomqg.reporting.tables.model import DAGGER, Table


def _md_escape(text: str) -> str:
    """A label or cell as Markdown text: a pipe cannot end its cell, and HTML in it (a strategy
    label ``<img src=x onerror=...>``) is shown, not run, by any renderer that passes HTML through,
    as the HTML and LaTeX tables escape it."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
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
