"""What a table shows, cell by cell, as plain text: the form the HTML report renders.

Every table is also written as ``<name>.json`` holding its :class:`TableView`, beside the CSV,
Markdown and LaTeX, so the report reads a table back as data instead of parsing its Markdown.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from bloomqg.reporting.display import EMPTY
from bloomqg.reporting.tables.model import DAGGER, Table, TableInputError


@dataclass(frozen=True)
class TableView:
    """One table's caption, header, rows and footnotes as the reader sees them.

    ``groups`` spans every column, stub columns included, as (label, number of columns) with
    adjacent equal labels merged (an empty label: ungrouped); a gated cell's text ends in the
    dagger; ``align`` is ``"left"`` for stub columns and ``"right"`` for data columns;
    ``sources`` (same shape as ``rows``) holds each cell's [model, dataset, strategy, metric], or
    null, for the report's links to the item explorer (a view written without it reads as all
    null); ``group_title`` names what the groups are (:attr:`Table.group_title`).
    """

    name: str
    caption: str
    groups: list[tuple[str, int]]
    header: list[str]
    rows: list[list[str]]
    notes: list[str]
    align: list[str]
    sources: list[list[list[str] | None]] | None = None
    group_title: str = ""


def _line(text: str) -> str:
    return text.replace("\n", " ")  # a caption, header, cell or note is one line


def table_view(table: Table) -> TableView:
    """The view of ``table``."""
    group_of = [""] * len(table.stub_columns)
    for label, span in table.groups or [("", len(table.columns))]:
        group_of += [_line(label).strip()] * span
    groups: list[tuple[str, int]] = []
    for label in group_of:
        if groups and groups[-1][0] == label:
            groups[-1] = (label, groups[-1][1] + 1)
        else:
            groups.append((label, 1))
    return TableView(
        name=table.name,
        caption=_line(table.caption).strip(),
        groups=groups,
        header=[_line(column).strip() for column in (*table.stub_columns, *table.columns)],
        rows=[[_line(cell.text + (DAGGER if cell.gated else "")).strip() for cell in row] for row in table.rows],
        notes=[_line(note) for note in table.notes if _line(note).strip()],
        align=["left"] * len(table.stub_columns) + ["right"] * len(table.columns),
        sources=[[list(cell.source) if cell.source else None for cell in row] for row in table.rows],
        group_title=table.group_title,
    )


def render_view(table: Table) -> str:
    """The JSON text of :func:`table_view`."""
    return json.dumps(asdict(table_view(table)), ensure_ascii=False, indent=1) + "\n"


def read_view(path: Path) -> TableView:
    """Read a file written by :func:`render_view`; a malformed one raises, naming file and key."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise TableInputError(f"{path}: not a table view (invalid JSON: {error})") from error
    expected = [field.name for field in fields(TableView)]
    optional = {"sources", "group_title"}  # views written before links (and group titles) lack them
    required = [name for name in expected if name not in optional]
    if not isinstance(data, dict) or sorted(set(data) - optional) != sorted(required) or not set(data) <= set(expected):
        found = sorted(data) if isinstance(data, dict) else type(data).__name__
        raise TableInputError(f"{path}: a table view has the keys {expected}, found {found}")
    data["groups"] = [(str(label), int(span)) for label, span in data["groups"]]
    data.setdefault("sources", None)
    if not isinstance(data.setdefault("group_title", ""), str):
        raise TableInputError(f"{path}: 'group_title' must be a string")
    view = TableView(**data)
    width = len(view.header)
    if len(view.align) != width or sum(span for _, span in view.groups) != width:
        raise TableInputError(f"{path}: 'groups' and 'align' must span the {width} header columns")
    for index, row in enumerate(view.rows):
        if len(row) != width:
            raise TableInputError(f"{path}: 'rows'[{index}] has {len(row)} cells, the header {width}")
    if view.sources is not None and [len(row) for row in view.sources] != [len(row) for row in view.rows]:
        raise TableInputError(f"{path}: 'sources' must have the shape of 'rows'")
    return view


def long_form(view: TableView) -> TableView:
    """``view`` with each column group turned into rows, where every group repeats the same columns
    (the paper's Tables 4–8 put a cell's metrics side by side per cell, fifteen and more columns
    that no page shows at once): one row per original row and group, the group's label in a
    column named :attr:`TableView.group_title` after the stub columns, the shared columns after
    it. A row whose group is all :data:`EMPTY` (not run) is left out. Any other view is returned
    as it is."""
    stub = sum(1 for side in view.align if side == "left")
    data_groups = view.groups[1:] if view.groups and not view.groups[0][0] else view.groups
    if (not view.group_title or len(data_groups) < 2 or sum(span for _, span in view.groups[:len(view.groups) - len(data_groups)]) != stub):
        return view
    spans = {span for _, span in data_groups}
    if len(spans) != 1:
        return view
    width = spans.pop()
    columns = [view.header[stub + g * width: stub + (g + 1) * width] for g in range(len(data_groups))]
    if any(c != columns[0] for c in columns) or not all(label for label, _ in data_groups):
        return view
    rows, sources = [], []
    for index, row in enumerate(view.rows):
        for g, (label, _) in enumerate(data_groups):
            cells = row[stub + g * width: stub + (g + 1) * width]
            if all(cell == EMPTY for cell in cells):
                continue
            rows.append([*row[:stub], label, *cells])
            if view.sources is not None:
                source = view.sources[index]
                sources.append([*source[:stub], None, *source[stub + g * width: stub + (g + 1) * width]])
    return TableView(
        name=view.name, caption=view.caption, groups=[("", stub + 1 + width)],
        header=[*view.header[:stub], view.group_title, *columns[0]], rows=rows, notes=view.notes,
        align=["left"] * (stub + 1) + ["right"] * width, sources=sources if view.sources is not None else None,
        group_title="",
    )
