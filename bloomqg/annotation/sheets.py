"""Reading filled annotation sheets back, with checks that name the file, row and column.

A filled sheet is a CSV with :data:`bloomqg.annotation.form.SHEET_COLUMNS` (the blank sheet, or
the form's download). A row whose five answers are all empty is an item the annotator skipped and
is left out; a row with some answers but not all is an error (``missing fields``), as is an
unknown ``annotation_id``, a value outside the rubric (yes/no; one of the six Bloom levels;
knowledge units from the item's dataset's list), two rows for one item, two annotator ids in one
file, or one annotator in two files. Nothing is guessed: the first problem stops the import.

A cell that begins with ``'`` followed by a formula's first character (``=``, ``+``, ``-``, ``@``,
tab, CR or ``'``) is read without that ``'``: the mark the blank sheet and the form's download put
there so that a spreadsheet shows the text instead of running it
(:func:`bloomqg.annotation.form.sheet_cell`).

Rows are numbered as a spreadsheet shows them: the header is row 1, the first item row 2.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bloomqg.annotation.form import ANSWER_COLUMNS, NO, SHEET_COLUMNS, UNIT_SEPARATOR, YES, sheet_text
from bloomqg.inputs.bloom import UnknownBloomLevel, normalize_level

_YES = {YES, "y", "1", "true"}
_NO = {NO, "n", "0", "false"}
ANNOTATOR_PATTERN = r"^[A-Za-z0-9_.-]+$"

#: Columns of the long frame :func:`read_sheets` returns.
RATING_COLUMNS: tuple[str, ...] = ("annotation_id", "annotator", "criterion", "value", "notes", "file", "row")


class AnnotationError(ValueError):
    """A filled sheet breaks the rules; the message names the file, the row and the column."""

    #: First line of the failed job's log (bloomqg.store.logs).
    what_to_do = ("a filled annotation sheet is not valid: correct the file, row and column named below "
                  "(or have its annotator fix it in the form and download it again), then run the workflow again.")


@dataclass(frozen=True)
class _Where:
    path: Path
    row: int

    def __call__(self, column: str | None = None) -> str:
        return f"{self.path}: row {self.row}" + (f", column {column!r}" if column else "")


def _parse_answer(criterion: str, text: str, choices: Sequence[str], where: _Where) -> object:
    if criterion in ("unique", "readable", "answerable"):
        lowered = text.lower()
        if lowered in _YES:
            return True
        if lowered in _NO:
            return False
        raise AnnotationError(f"{where(criterion)}: {text!r} is not yes or no")
    if criterion == "bloom_level":
        try:
            level = normalize_level(text, allow_uncategorized=False)
        except (UnknownBloomLevel, ValueError) as error:
            raise AnnotationError(f"{where(criterion)}: {error}") from None
        return level
    units = [" ".join(part.split()) for part in text.split(UNIT_SEPARATOR.strip())]
    units = [unit for unit in units if unit]
    outside = [unit for unit in units if unit not in choices]
    if outside:
        raise AnnotationError(
            f"{where(criterion)}: {outside} not among the dataset's knowledge units {list(choices)}"
        )
    if not units:
        raise AnnotationError(f"{where(criterion)}: no knowledge unit given")
    return frozenset(units)


#: Largest filled sheet read, in bytes: a sheet holds one short row per item of its sample.
MAX_SHEET_BYTES = 64_000_000
#: Rows a sheet may hold beyond one per item of the sample (blank lines, notes).
SPARE_SHEET_ROWS = 1000


def _read_rows(path: Path, max_rows: int) -> list[dict[str, str]]:
    """The rows of a filled sheet, read as a stream: a file over :data:`MAX_SHEET_BYTES`, or
    holding more than ``max_rows`` rows, is refused before it is read whole."""
    size = path.stat().st_size
    if size > MAX_SHEET_BYTES:
        raise AnnotationError(f"{path}: {size:,} bytes, above the {MAX_SHEET_BYTES:,} a filled sheet may hold")
    with open(path, encoding="utf-8-sig", newline="") as handle:
        try:
            return _sheet_rows(path, handle, max_rows)
        except UnicodeDecodeError as error:
            raise AnnotationError(f"{path}: not UTF-8 text ({error})") from None


def _sheet_rows(path: Path, handle: io.TextIOBase, max_rows: int) -> list[dict[str, str]]:
    reader = csv.DictReader(handle)
    header = reader.fieldnames or []
    missing = [column for column in ("annotation_id", "annotator", *ANSWER_COLUMNS) if column not in header]
    if missing:
        raise AnnotationError(f"{path}: row 1: missing columns {missing} (expected {list(SHEET_COLUMNS)})")
    unknown = [column for column in header if column not in SHEET_COLUMNS]
    if unknown:
        raise AnnotationError(f"{path}: row 1: unknown columns {unknown} (expected {list(SHEET_COLUMNS)})")
    rows: list[dict[str, str]] = []
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as error:  # e.g. a cell over the csv module's field size limit
            raise AnnotationError(
                f"{path}: row {len(rows) + 2}: cannot be read as CSV ({error}; a cell may hold at"
                f" most {csv.field_size_limit()} characters)"
            ) from None
        if None in row:  # more cells than header columns
            raise AnnotationError(f"{path}: row {reader.line_num}: more cells than columns")
        if len(rows) >= max_rows:
            raise AnnotationError(f"{path}: more than {max_rows:,} rows, for a sample of"
                                  f" {max_rows - SPARE_SHEET_ROWS:,} items; refused")
        rows.append({key: sheet_text((value or "").strip()) for key, value in row.items()})
    return rows


def read_sheets(paths: Sequence[str | Path], items: pd.DataFrame) -> pd.DataFrame:
    """Every rating of the filled sheets ``paths`` against the annotation key ``items``: a long
    frame with :data:`RATING_COLUMNS`, one row per (item, annotator, criterion); ``value`` is a
    bool, a Bloom level name or a frozenset of units."""
    choices = {row.annotation_id: list(row.unit_choices) for row in items.itertuples(index=False)}
    records = []
    owner: dict[str, Path] = {}
    for path in sorted(Path(p) for p in paths):
        annotator_of_file: str | None = None
        seen: dict[str, int] = {}
        for position, row in enumerate(_read_rows(path, len(items) + SPARE_SHEET_ROWS), start=2):
            where = _Where(path, position)
            answers = {criterion: row.get(criterion, "") for criterion in ANSWER_COLUMNS}
            item_id = row.get("annotation_id", "")
            if not item_id:
                if any(answers.values()):
                    raise AnnotationError(f"{where('annotation_id')}: empty, but the row holds answers")
                continue
            if item_id not in choices:
                raise AnnotationError(f"{where('annotation_id')}: unknown item id {item_id!r} (not in this sample)")
            if not any(answers.values()):
                continue  # an item the annotator skipped
            blank = [criterion for criterion, value in answers.items() if not value]
            if blank:
                raise AnnotationError(f"{where()}: missing fields {blank} for item {item_id}")
            annotator = row.get("annotator", "")
            if not annotator:
                raise AnnotationError(f"{where('annotator')}: empty")
            if not re.match(ANNOTATOR_PATTERN, annotator):
                raise AnnotationError(f"{where('annotator')}: {annotator!r} may hold only letters, digits, '.', '_', '-'")
            if annotator_of_file is None:
                annotator_of_file = annotator
                if annotator in owner:
                    raise AnnotationError(
                        f"{where('annotator')}: annotator {annotator!r} already has a sheet, {owner[annotator]}"
                        " (one file per annotator)"
                    )
                owner[annotator] = path
            elif annotator != annotator_of_file:
                raise AnnotationError(
                    f"{where('annotator')}: {annotator!r}, but this file belongs to {annotator_of_file!r} "
                    "(one annotator per file)"
                )
            if item_id in seen:
                raise AnnotationError(f"{where('annotation_id')}: item {item_id} already annotated in row {seen[item_id]}")
            seen[item_id] = position
            for criterion, text in answers.items():
                records.append({
                    "annotation_id": item_id, "annotator": annotator, "criterion": criterion,
                    "value": _parse_answer(criterion, text, choices[item_id], where),
                    "notes": row.get("notes") or None, "file": str(path), "row": position,
                })
    return pd.DataFrame.from_records(records, columns=list(RATING_COLUMNS))

