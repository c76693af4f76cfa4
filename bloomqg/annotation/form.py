"""What annotators receive: a blank CSV sheet and a self-contained HTML form, both without any
judge's verdict, the model or the strategy.

The form (``bloomqg/report_templates/annotation_form.html.j2``) is one file: the items travel as
JSON inside it, its script and styles are inline, it loads nothing and sends nothing. It asks
for the annotator's id (changeable later: "Change id"; the CSV's ``annotator`` column holds the
id at download time), keeps every answer in the browser's local storage (keyed by the form's
content hash, so a new sample never inherits an old one's answers), resumes after a reload at
the first incomplete item, and writes a CSV with :data:`SHEET_COLUMNS` through its "Download
CSV" button — the same columns as the blank sheet, so a spreadsheet user and a form user hand
back the same file. Only complete items go into the downloaded CSV (the button waits for the
first one); the form says how many are left out. The units offered are each item's
``unit_choices``: the dataset's whole list, as the judges had it
(:func:`bloomqg.annotation.sample.judges_unit_lists`). Both the blank sheet and the download
write a cell that a spreadsheet would run as a formula behind a ``'`` (:func:`sheet_cell`).
"""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import pandas as pd

from bloomqg.store.atomic import write_text_atomic
from bloomqg.inputs.bloom import BLOOM_LEVELS
from bloomqg.store.html_json import script_json

TEMPLATE_DIR = Path(__file__).resolve().parent.parent / "report_templates"
FORM_TEMPLATE = "annotation_form.html.j2"

#: What an annotator judges, in the form's order (the paper's rubric, Table 3).
ANSWER_COLUMNS: tuple[str, ...] = ("unique", "readable", "answerable", "bloom_level", "knowledge_units")
#: The item as shown to the annotator.
ITEM_COLUMNS: tuple[str, ...] = (
    "annotation_id", "dataset", "original_question", "original_knowledge_units", "target_bloom_level",
    "new_question",
)
#: Columns of the blank sheet, of the form's download, and of a filled sheet.
SHEET_COLUMNS: tuple[str, ...] = ITEM_COLUMNS + ("annotator",) + ANSWER_COLUMNS + ("notes",)
#: Separator of several knowledge units in a sheet cell.
UNIT_SEPARATOR = "; "
YES, NO = "yes", "no"
#: First characters that make a spreadsheet read a cell as a formula (or eat the first character):
#: such a cell is written with a leading ``'`` so it shows as text; ``'`` itself is on the list so
#: that :func:`sheet_text` can tell the mark from a text that began with one.
FORMULA_STARTS = "=+-@\t\r'"
FORMULA_MARK = "'"


def sheet_cell(text: object) -> object:
    """``text`` as a sheet cell: marked with ``'`` when it begins with one of :data:`FORMULA_STARTS`
    (a generated ``=HYPERLINK(...)`` must not run in the annotator's spreadsheet); other values
    unchanged. The form's download applies the same rule (its ``sheetCell``)."""
    if isinstance(text, str) and text[:1] and text[0] in FORMULA_STARTS:
        return FORMULA_MARK + text
    return text


def sheet_text(cell: str) -> str:
    """The text of a sheet cell written by :func:`sheet_cell`: one leading ``'`` is dropped only
    when a character of :data:`FORMULA_STARTS` follows it, so every text reads back as it was."""
    if cell[:1] == FORMULA_MARK and cell[1:2] and cell[1] in FORMULA_STARTS:
        return cell[1:]
    return cell


def blank_sheet(items: pd.DataFrame) -> pd.DataFrame:
    """The sheet annotators fill: the items' display columns, empty answer columns."""
    sheet = pd.DataFrame({
        "annotation_id": items["annotation_id"],
        "dataset": items["dataset"],
        "original_question": items["original_question"],
        "original_knowledge_units": [UNIT_SEPARATOR.join(units) for units in items["original_knowledge_units"]],
        "target_bloom_level": items["original_bloom_level"].fillna("Uncategorized"),
        "new_question": items["new_question"],
    })
    for column in ("annotator",) + ANSWER_COLUMNS + ("notes",):
        sheet[column] = ""
    return sheet[list(SHEET_COLUMNS)]


def write_blank_sheet(items: pd.DataFrame, path: str | Path) -> None:
    """The blank sheet as UTF-8 CSV with a byte-order mark (so spreadsheets read Chinese text)."""
    # Every cell quoted, as in the form's download: a bare CR inside a text would end the row.
    text = blank_sheet(items).map(sheet_cell).to_csv(index=False, lineterminator="\n", quoting=csv.QUOTE_ALL)
    write_text_atomic(Path(path), "\ufeff" + text)


def form_items(items: pd.DataFrame) -> tuple[list[dict[str, object]], dict[str, list[str]]]:
    """(items as the form shows them, each dataset's unit choices) — no verdicts in either."""
    shown = []
    units: dict[str, list[str]] = {}
    for row in items.itertuples(index=False):
        units.setdefault(row.dataset, list(row.unit_choices))
        shown.append({
            "id": row.annotation_id,
            "dataset": row.dataset,
            "original": row.original_question,
            "original_units": list(row.original_knowledge_units),
            "target_level": row.original_bloom_level or "Uncategorized",
            "question": row.new_question,
        })
    return shown, units


def render_form(items: pd.DataFrame, *, title: str) -> str:
    """The self-contained annotation form for the annotation key ``items``."""
    import jinja2

    shown, units = form_items(items)
    payload = {"items": shown, "units": units}
    form_id = hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]
    meta = {
        "form_id": form_id,
        "title": title,
        "levels": list(BLOOM_LEVELS),
        "columns": list(SHEET_COLUMNS),
        "unit_separator": UNIT_SEPARATOR,
        "yes": YES,
        "no": NO,
        "formula_starts": FORMULA_STARTS,
        "formula_mark": FORMULA_MARK,
    }
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATE_DIR),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html", "j2"), default=True),
        undefined=jinja2.StrictUndefined,
    )
    return environment.get_template(FORM_TEMPLATE).render(
        title=title, n_items=len(shown), items_json=script_json(payload), meta_json=script_json(meta),
    )


def write_form(items: pd.DataFrame, path: str | Path, *, title: str) -> None:
    write_text_atomic(Path(path), render_form(items, title=title))
