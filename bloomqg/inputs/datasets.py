"""Dataset loaders: raw question files -> one normalised frame per dataset (schema ``DATASET``).

:func:`load_dataset` dispatches on ``spec["loader"]``:

``embedded``
    This project's format (``data/*/questions.csv`` or ``.jsonl``): ``question``,
    ``knowledge_units`` (several separated by ``;``; a JSON list in ``.jsonl``) and an optional
    ``bloom_level`` label. See :func:`load_embedded`.
``release_cs``
    The paper release's ``Data_Structure.csv``, labelled with a verb list. See
    :func:`load_release_cs`.
``release_math``
    The paper release's K-12 math item bank (xlsx, Chinese headers), all at level Apply. See
    :func:`load_release_math`.

Every loader keeps the file's row order and numbers items by their 1-based data row
(``source_row``, header excluded), so ``item_id = f"{name}-{source_row:04d}"`` stays the same
when rows elsewhere are skipped or excluded. Problems in the data raise :class:`DatasetError`
naming the file, the row and the column, because the workflow calls this at parse time to stop
bad data before any job runs.
"""

from __future__ import annotations

import html
import json
import logging
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from bloomqg.inputs.bloom import BLOOM_LEVELS, UnknownBloomLevel, normalize_level
from bloomqg.inputs.specs import input_limits
from bloomqg.store.archives import ArchiveUnreadable, extent
from bloomqg.store.frames import DATASET
from bloomqg.store.sheet_extent import SheetTooLarge, SheetUnreadable, read_first_sheet
from bloomqg.inputs.verbs import VerbAnnotator, VerbListError, load_verb_list

logger = logging.getLogger(__name__)

#: Separator of several knowledge units in one CSV cell.
UNIT_SEPARATOR = ";"


class DatasetError(ValueError):
    """Bad dataset input; the message names the file, the 1-based data row and the column."""


def _where(path: Path, row: int | None = None, column: str | None = None) -> str:
    parts = [str(path)]
    if row is not None:
        parts.append(f"row {row}")
    if column is not None:
        parts.append(f"column {column!r}")
    return ", ".join(parts)


# --------------------------------------------------------------------------------------------
# Shared helpers


def split_units(value: object, *, path: Path, row: int, column: str) -> list[str]:
    """Knowledge units of one cell: a ``;``-separated string or a list of strings.

    Units are stripped, internal whitespace collapsed, and repeats dropped (order kept). An
    empty cell, an empty piece (``"A;;B"``, a trailing ``;``) or a non-string entry is an error.
    """
    if isinstance(value, str):
        pieces: Sequence[object] = value.split(UNIT_SEPARATOR)
    elif isinstance(value, (list, tuple)):
        pieces = value
    elif value is None or (isinstance(value, float) and value != value):
        pieces = []
    else:
        raise DatasetError(
            f"{_where(path, row, column)}: expected text or a list of units, "
            f"got {type(value).__name__} {value!r}"
        )
    units: list[str] = []
    for piece in pieces:
        if not isinstance(piece, str):
            raise DatasetError(f"{_where(path, row, column)}: knowledge unit {piece!r} is not text")
        unit = " ".join(piece.split())
        if not unit:
            raise DatasetError(f"{_where(path, row, column)}: empty knowledge unit in {value!r}")
        if unit not in units:
            units.append(unit)
    if not units:
        raise DatasetError(f"{_where(path, row, column)}: empty knowledge unit (need at least one)")
    return units


def _label(value: object, *, path: Path, row: int, column: str) -> str | None:
    """A Bloom label cell -> canonical level, None when empty/Uncategorized; typos are errors."""
    try:
        return normalize_level(value)
    except UnknownBloomLevel as error:
        raise DatasetError(
            f"{_where(path, row, column)}: unknown Bloom level {value!r}; "
            f"expected one of {', '.join(BLOOM_LEVELS)} (or empty)"
        ) from error


def _resolve(value: object, base_dir: Path, key: str, name: str) -> Path:
    if not isinstance(value, (str, Path)) or not str(value).strip():
        raise DatasetError(f"dataset {name!r}: key {key!r} must be a non-empty path, got {value!r}")
    path = Path(value).expanduser()
    return path if path.is_absolute() else base_dir / path


def _annotator(verb_list: Path | None, name: str) -> VerbAnnotator | None:
    if verb_list is None:
        return None
    try:
        return VerbAnnotator(load_verb_list(verb_list))
    except VerbListError as error:
        raise DatasetError(f"dataset {name!r}: {error}") from error


def _require_file(path: Path, what: str) -> None:
    if not path.is_file():
        raise DatasetError(
            f"{path}: {what} not found" + (" (it is a directory)" if path.is_dir() else "")
        )


def _require_columns(frame: pd.DataFrame, required: Sequence[str], path: Path) -> None:
    missing = [column for column in required if column not in frame.columns]
    if missing:
        raise DatasetError(
            f"{path}: missing required column(s) {', '.join(map(repr, missing))}; "
            f"found {', '.join(map(repr, frame.columns))}"
        )


def _frame(name: str, records: list[dict[str, Any]]) -> pd.DataFrame:
    """The ``DATASET`` frame for ``records`` (dicts with source_row, question, level, ...)."""
    frame = pd.DataFrame.from_records(
        [
            {
                "item_id": f"{name}-{r['source_row']:04d}",
                "dataset": name,
                "source_row": r["source_row"],
                "question": r["question"],
                "bloom_level": r["bloom_level"],
                "bloom_source": r["bloom_source"],
                "knowledge_units": r["knowledge_units"],
            }
            for r in records
        ],
        columns=DATASET.names,
    )
    frame["source_row"] = frame["source_row"].astype("int64")
    frame["bloom_level"] = (
        frame["bloom_level"].astype(object).where(frame["bloom_level"].notna(), None)
    )
    return frame


def _read_csv(path: Path) -> pd.DataFrame:
    """All cells as text, empty cells as "", blank lines kept so row numbers stay honest."""
    try:
        frame = pd.read_csv(
            path,
            dtype=str,
            keep_default_na=False,
            skip_blank_lines=False,
            encoding="utf-8-sig",
        )
    except UnicodeDecodeError as error:
        raise DatasetError(f"{path}: not UTF-8 text ({error})") from error
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as error:
        raise DatasetError(f"{path}: cannot be read as CSV ({error})") from error
    frame.columns = [str(column).strip() for column in frame.columns]
    return frame


# --------------------------------------------------------------------------------------------
# Loaders


def load_embedded(path: Path, *, annotator: VerbAnnotator | None = None) -> list[dict[str, Any]]:
    """Records of this project's CSV/JSONL format.

    Columns (CSV) or keys (JSONL, one object per line): ``question`` (required),
    ``knowledge_units`` (required; ``;``-separated, or a JSON list in JSONL) and ``bloom_level``
    (optional; a Bloom level name, empty for none). Other columns are ignored. An empty label is
    annotated with ``annotator`` when given (bloom_source ``verb_list``), else left
    Uncategorized (bloom_source ``label``, level null). Blank rows are skipped and logged;
    numbering counts them, so ``source_row`` is the row in the file.
    """
    if path.suffix.lower() == ".jsonl":
        rows = _jsonl_rows(path)
    else:
        frame = _read_csv(path)
        _require_columns(frame, ("question", "knowledge_units"), path)
        rows = [
            (number, {k: v for k, v in zip(frame.columns, values, strict=True)})
            for number, values in enumerate(frame.itertuples(index=False, name=None), start=1)
        ]
    records: list[dict[str, Any]] = []
    blank: list[int] = []
    for number, row in rows:
        if all(_is_empty(value) for value in row.values()):
            blank.append(number)
            continue
        question = row.get("question")
        if not isinstance(question, str) or not question.strip():
            raise DatasetError(f"{_where(path, number, 'question')}: empty or non-text question")
        question = question.strip()
        units = split_units(
            row.get("knowledge_units"), path=path, row=number, column="knowledge_units"
        )
        level = _label(row.get("bloom_level"), path=path, row=number, column="bloom_level")
        source = "label"
        if level is None and annotator is not None:
            level, source = annotator.annotate(question), "verb_list"
        records.append(
            {
                "source_row": number,
                "question": question,
                "bloom_level": level,
                "bloom_source": source,
                "knowledge_units": units,
            }
        )
    if blank:
        logger.info("%s: skipped %d blank row(s): %s", path, len(blank), blank)
    return records


def _is_empty(value: object) -> bool:
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, (list, tuple)):
        return len(value) == 0
    return False


def _jsonl_rows(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` per line; blank lines come back as empty objects."""
    rows: list[tuple[int, dict[str, Any]]] = []
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except UnicodeDecodeError as error:
        raise DatasetError(f"{path}: not UTF-8 text ({error})") from error
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            rows.append((number, {}))
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as error:
            raise DatasetError(f"{_where(path, number)}: invalid JSON ({error.msg})") from error
        except (ValueError, RecursionError) as error:  # a number past int()'s limit, deep nesting
            raise DatasetError(f"{_where(path, number)}: invalid JSON ({type(error).__name__})") from None
        if not isinstance(value, dict):
            raise DatasetError(f"{_where(path, number)}: expected a JSON object per line")
        rows.append((number, value))
    for column in ("question", "knowledge_units"):
        if rows and not any(column in row for _, row in rows):
            raise DatasetError(f"{path}: missing required column {column!r} (no line has it)")
    return rows


def load_release_cs(path: Path, *, annotator: VerbAnnotator) -> list[dict[str, Any]]:
    """Records of the release's ``dataset/computer/Data_Structure.csv``.

    Columns ``Topic`` (the knowledge unit, one per row), ``Score`` (ignored) and ``Questions``;
    the file starts with a UTF-8 BOM. It carries no Bloom labels: each question is labelled with
    ``annotator`` (bloom_source ``verb_list``). The released file has no blank rows; any blank
    question row would be skipped, logged and still counted in the numbering. Four questions
    (rows 642, 643, 1077, 1132) contain mojibake in the release; they are kept as released.
    """
    frame = _read_csv(path)
    _require_columns(frame, ("Topic", "Questions"), path)
    records: list[dict[str, Any]] = []
    skipped: list[int] = []
    for number, (topic, question) in enumerate(
        zip(frame["Topic"], frame["Questions"], strict=True), start=1
    ):
        if not question.strip():
            skipped.append(number)
            continue
        units = split_units(topic, path=path, row=number, column="Topic")
        records.append(
            {
                "source_row": number,
                "question": question.strip(),
                "bloom_level": annotator.annotate(question),
                "bloom_source": "verb_list",
                "knowledge_units": units,
            }
        )
    if skipped:
        logger.warning("%s: skipped %d row(s) without a question: %s", path, len(skipped), skipped)
    return records


#: Column names of the release's K-12 math workbook.
MATH_QUESTION_COLUMN = "题目内容"
MATH_UNIT_COLUMN = "知识点名称"

# fmt: off
#: Data rows (1-based) of the K-12 math workbook (``dataset/K-12 math/多知识点题目示例.xlsx``) that the paper's 438-item math
#: set leaves out; found by matching the GLM run's ``glm_math_fine.xlsx`` against the workbook
#: (see :func:`load_release_math`). Pass them as ``exclude_rows`` to study the paper's subset.
PAPER_MATH_EXCLUDED_ROWS: tuple[int, ...] = (
    4, 12, 33, 126, 140, 260, 262, 269, 290, 339, 340, 345, 348, 349,
    352, 354, 356, 357, 359, 360, 361, 362, 388, 389, 395, 398, 400,
)
# fmt: on

# Bulletin-board markup of the item bank. Images go with their URL (the text cannot carry
# them); block tags become line breaks; inline tags ([i]g[/i], [color=..]) vanish. The
# look-behind keeps LaTeX display math \[ ... \] intact. Each tag's body stops at the next
# opening bracket ([^[\]] rather than [^\]], [^\[]* rather than .*?): from every one of 40,000
# unclosed "[img]" the old patterns searched to the end of the text, quadratic time.
_IMAGE = re.compile(r"\[img(?:=[^\[\]]*)?\][^\[]*\[/img\]|<img\b[^<>]*>", re.IGNORECASE)
_BLOCK_TAG = re.compile(r"(?<!\\)\[/?(?:p|br|div)\]|</?(?:p|br|div)\b[^<>]*>", re.IGNORECASE)
_INLINE_TAG = re.compile(
    r"(?<!\\)\[/?(?:align|color|font|size|i|b|u|s|sub|sup|span|center|url|table|tr|td)"
    r"(?:=[^\[\]]*)?\]|</?(?:span|font|i|b|u|em|strong|sub|sup|table|tr|td)\b[^<>]*>",
    re.IGNORECASE,
)


def clean_markup(text: str) -> tuple[str, int]:
    """Clean text of an item-bank question and the number of images removed from it.

    Strips ``[p]…[/p]``-style bulletin-board tags and HTML tags (images removed with their
    URLs), decodes HTML entities (the workbook double-encodes some: ``&amp;lt;``), turns
    non-breaking and ideographic spaces into plain spaces, collapses runs of spaces and drops
    empty lines. LaTeX (``\\(…\\)``, ``\\[…\\]``, ``$…$``) is kept as written.
    """
    text, n_images = _IMAGE.subn("", text)
    text = _BLOCK_TAG.sub("\n", text)
    text = _INLINE_TAG.sub("", text)
    for _ in range(3):  # entities may be encoded twice
        decoded = html.unescape(text)
        if decoded == text:
            break
        text = decoded
    text = text.replace("\u00a0", " ").replace("\u3000", " ")
    lines = (" ".join(line.split()) for line in text.splitlines())
    return "\n".join(line for line in lines if line), n_images


def load_release_math(path: Path, limits: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Records of the release's K-12 math workbook ``dataset/K-12 math/多知识点题目示例.xlsx``
    (``dataset/k12-math/multi_knowledge_point_examples.xlsx`` in copies that renamed it to ASCII).

    What the file holds (checked against the release, commit 7635ce2):

    - 465 rows, 20 knowledge units in ``知识点名称``, one unit per row. Names contain "、" and
      "--" as part of the name ("正数、负数--表示相对标准量"), so the cell is not split; one
      name carries a trailing no-break space ("圆柱--体积的计算\\xa0"), removed here. The 20
      names are the 20 of the paper's Table 10 (its text says 19).
    - ``题目内容`` is bulletin-board/HTML markup with LaTeX; see :func:`clean_markup`. Sixteen
      questions embed images (rows 4, 12, 25, 33, 99, 126, 127, 134-137, 140, 141, 290, 343,
      354), removed with their URLs and logged: those items may refer to a figure the text
      cannot carry.
    - Once cleaned, four rows repeat an earlier row's text (first/repeat: 37/39, 356/360,
      352/361, 352/362) under distinct item ids (``题目序号``) in the bank: different bank items
      with the same stem (the multiple-choice ones lost their options in the export). All rows
      are kept and the repeats logged; the paper's subset leaves out every row of the last
      three.
    - The paper's 438 items are this file minus 27 rows: matching the GLM run's
      ``glm_math_fine.xlsx`` to the workbook on (unit, Chinese characters of the question)
      pairs off 438 rows exactly and leaves :data:`PAPER_MATH_EXCLUDED_ROWS`. They are items
      that depend on a figure (images, "看图", "下图") and multiple-choice stems printed without
      their options ("下列说法正确的是（ ）"). No simple rule selects exactly these (other
      option-less stems were kept), so this loader keeps all 465 rows; a config reproduces the
      paper's set with ``exclude_rows``.

    Every item is level Apply (bloom_source ``fixed``; :func:`load_dataset` applies it).

    The sheet is read within ``limits`` (``input_limits``; the schema's default for an absent
    key, :func:`bloomqg.inputs.specs.input_limits`) by :func:`bloomqg.store.sheet_extent.read_first_sheet`: a cell longer than
    ``max_field_chars`` is refused as it is read, before any markup is cleaned.
    """
    limits = input_limits(limits)
    try:
        header, rows = read_first_sheet(
            path, max_cells=limits["max_sheet_cells"], max_cell_chars=limits["max_field_chars"],
            max_text_chars=int(limits["max_file_mb"] * 1_000_000))
    except (SheetTooLarge, SheetUnreadable) as error:
        raise DatasetError(str(error)) from None
    frame = pd.DataFrame(rows, columns=[column.strip() for column in header], dtype=object)
    _require_columns(frame, (MATH_UNIT_COLUMN, MATH_QUESTION_COLUMN), path)
    records: list[dict[str, Any]] = []
    skipped: list[int] = []
    with_images: list[int] = []
    first_row_of: dict[str, int] = {}
    repeats: list[tuple[int, int]] = []
    for number, (unit, raw) in enumerate(
        zip(frame[MATH_UNIT_COLUMN], frame[MATH_QUESTION_COLUMN], strict=True), start=1
    ):
        if _is_empty(raw) or (isinstance(raw, float) and raw != raw):
            if _is_empty(unit) or (isinstance(unit, float) and unit != unit):
                skipped.append(number)
                continue
            raise DatasetError(f"{_where(path, number, MATH_QUESTION_COLUMN)}: empty question")
        question, n_images = clean_markup(str(raw))
        if n_images:
            with_images.append(number)
        if not question:
            raise DatasetError(
                f"{_where(path, number, MATH_QUESTION_COLUMN)}: question is empty once markup "
                f"is removed ({str(raw)[:80]!r})"
            )
        if not isinstance(unit, str):
            unit = "" if unit is None or unit != unit else str(unit)
        units = split_units(unit, path=path, row=number, column=MATH_UNIT_COLUMN)
        if len(units) != 1:
            raise DatasetError(
                f"{_where(path, number, MATH_UNIT_COLUMN)}: expected one unit per row, got {units}"
            )
        if question in first_row_of:
            repeats.append((first_row_of[question], number))
        else:
            first_row_of[question] = number
        records.append(
            {
                "source_row": number,
                "question": question,
                "bloom_level": None,
                "bloom_source": "fixed",
                "knowledge_units": units,
            }
        )
    if skipped:
        logger.warning("%s: skipped %d empty row(s): %s", path, len(skipped), skipped)
    if with_images:
        logger.info(
            "%s: removed images from %d question(s) (rows %s); their text may refer to a figure",
            path,
            len(with_images),
            with_images,
        )
    if repeats:
        logger.info(
            "%s: %d question text(s) repeat an earlier row (first, repeat): %s; all kept",
            path,
            len(repeats),
            repeats,
        )
    return records


# --------------------------------------------------------------------------------------------
# Entry points


def load_dataset(
    name: str,
    spec: Mapping[str, Any],
    *,
    base_dir: str | Path,
    limits: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """Load dataset ``name`` described by ``spec`` as a frame with the columns of ``DATASET``.

    Args:
        name: the dataset's name; it prefixes item ids (``f"{name}-{source_row:04d}"``).
        spec: the dataset's config entry. Keys used here: ``loader`` (``embedded`` |
            ``release_cs`` | ``release_math``), ``path``, optional ``verb_list`` (a verb-list
            CSV: labels unlabelled embedded items; for ``release_cs`` defaults to
            ``Blooms_Taxonomy.csv`` beside the data), optional ``bloom_level`` (one level for
            every item, bloom_source ``fixed``; ``release_math`` defaults to Apply) and optional
            ``exclude_rows`` (1-based data rows to leave out, e.g.
            :data:`PAPER_MATH_EXCLUDED_ROWS`). Other keys are ignored.
        base_dir: directory that relative paths in ``spec`` are resolved against.
        limits: the config's ``input_limits`` (``max_file_mb``: uncompressed size of the data
            file, for an xlsx the sum of its zip members; ``max_field_chars``: length of one
            question or knowledge-unit cell; ``max_sheet_cells``: rows × columns of an xlsx sheet's
            extent, checked on its streamed XML before pandas reads it); absent keys take the schema's
            defaults (:func:`bloomqg.inputs.specs.input_limits`).

    Raises:
        DatasetError: a missing file, key or column, an unknown loader or Bloom level, an empty
            question or knowledge unit, a fixed level contradicting a label; the message
            names the file, row and column.
    """
    if not isinstance(name, str) or not name.strip():
        raise DatasetError(f"dataset name must be non-empty text, got {name!r}")
    if not isinstance(spec, Mapping):
        raise DatasetError(f"dataset {name!r}: spec must be a mapping, got {type(spec).__name__}")
    base_dir = Path(base_dir)
    for key in ("loader", "path"):
        if key not in spec or spec[key] in (None, ""):
            raise DatasetError(f"dataset {name!r}: missing required key {key!r}")
    loader = spec["loader"]
    if loader not in LOADERS:
        raise DatasetError(
            f"dataset {name!r}: unknown loader {loader!r}; expected one of {', '.join(LOADERS)}"
        )
    path = _resolve(spec["path"], base_dir, "path", name)
    _require_file(path, f"data file of dataset {name!r}")

    verb_list = (
        _resolve(spec["verb_list"], base_dir, "verb_list", name) if spec.get("verb_list") else None
    )
    if loader == "release_cs" and verb_list is None:
        verb_list = path.parent / "Blooms_Taxonomy.csv"
    if verb_list is not None:
        _require_file(verb_list, f"verb list of dataset {name!r}")

    fixed_level = spec.get("bloom_level")
    if fixed_level is None and loader == "release_math":
        fixed_level = "Apply"  # the paper maps every item of the math bank to Apply
    if fixed_level is not None:
        try:
            fixed_level = normalize_level(fixed_level, allow_uncategorized=False)
        except UnknownBloomLevel as error:
            raise DatasetError(f"dataset {name!r}: key 'bloom_level': {error}") from error

    if fixed_level is not None and verb_list is not None:
        logger.warning(
            "dataset %s: verb list %s is not used: every item has the fixed level %s",
            name,
            verb_list,
            fixed_level,
        )
    limits = input_limits(limits)
    _check_file_size(path, limits["max_file_mb"])
    records = LOADERS[loader](path, _annotator(verb_list, name), limits)
    _canonical_text(records)
    _check_field_lengths(records, path, loader, limits["max_field_chars"])
    if fixed_level is not None:
        for record in records:
            if record["bloom_source"] == "label" and record["bloom_level"] not in (
                None,
                fixed_level,
            ):
                raise DatasetError(
                    f"{_where(path, record['source_row'], 'bloom_level')}: label "
                    f"{record['bloom_level']!r} contradicts the dataset's fixed level "
                    f"{fixed_level!r}"
                )
            record["bloom_level"], record["bloom_source"] = fixed_level, "fixed"

    records = _exclude(records, spec.get("exclude_rows"), path, name)
    if not records:
        raise DatasetError(f"{path}: dataset {name!r} has no questions")
    frame = _frame(name, records)
    counts = frame["bloom_level"].fillna("Uncategorized").value_counts().to_dict()
    logger.info("dataset %s: %d items from %s; levels %s", name, len(frame), path, counts)
    return frame


def _exclude(
    records: list[dict[str, Any]], rows: object, path: Path, name: str
) -> list[dict[str, Any]]:
    if rows is None:
        return records
    if (
        isinstance(rows, (str, bytes))
        or not isinstance(rows, Sequence)
        or not all(isinstance(r, int) and not isinstance(r, bool) for r in rows)
    ):
        raise DatasetError(f"dataset {name!r}: key 'exclude_rows' must be a list of row numbers")
    present = {record["source_row"] for record in records}
    unknown = sorted(set(rows) - present)
    if unknown:
        raise DatasetError(
            f"{path}: exclude_rows of dataset {name!r} names row(s) {unknown} that hold no item"
        )
    kept = [record for record in records if record["source_row"] not in set(rows)]
    logger.info("%s: excluded %d row(s) listed in exclude_rows", path, len(records) - len(kept))
    return kept


def dataset_knowledge_units(frame: pd.DataFrame) -> list[str]:
    """Sorted unique knowledge units of a dataset frame (the list judges choose from)."""
    if "knowledge_units" not in frame.columns:
        raise DatasetError("frame has no column 'knowledge_units'")
    return sorted({unit for units in frame["knowledge_units"] for unit in units})


def _embedded(path: Path, annotator: VerbAnnotator | None, _limits: Mapping[str, Any]) -> list[dict[str, Any]]:
    return load_embedded(path, annotator=annotator)


def _release_cs(path: Path, annotator: VerbAnnotator | None, _limits: Mapping[str, Any]) -> list[dict[str, Any]]:
    if annotator is None:  # load_dataset always supplies one; guard direct misuse
        raise DatasetError(f"{path}: the release_cs loader needs a verb list")
    return load_release_cs(path, annotator=annotator)


def _release_math(path: Path, _annotator: VerbAnnotator | None, limits: Mapping[str, Any]) -> list[dict[str, Any]]:
    return load_release_math(path, limits)  # every item has the fixed level; no verb rule


#: Per loader, the file's column of the question and of the knowledge units, for error messages.
_FIELD_COLUMNS: dict[str, dict[str, str]] = {
    "embedded": {"question": "question", "knowledge_units": "knowledge_units"},
    "release_cs": {"question": "Questions", "knowledge_units": "Topic"},
    "release_math": {"question": MATH_QUESTION_COLUMN, "knowledge_units": MATH_UNIT_COLUMN},
}


def _uncompressed_bytes(path: Path) -> int:
    """The file's size; for a zip container (xlsx) the sum of its members' uncompressed sizes."""
    try:
        return extent(path).total_bytes
    except ArchiveUnreadable as error:
        raise DatasetError(f"{path}: cannot be read as an xlsx workbook ({error})") from error


def _check_file_size(path: Path, max_mb: float) -> None:
    # Checked before parsing: an xlsx that inflates to hundreds of MB was parsed at plan time.
    size = _uncompressed_bytes(path)
    if size > max_mb * 1_000_000:
        raise DatasetError(
            f"{path}: {size:,} bytes uncompressed ({size / 1_000_000:.1f} MB), above"
            f" input_limits.max_file_mb = {max_mb:g}; raise the limit if the file is trusted"
        )


def _canonical_text(records: Sequence[dict[str, Any]]) -> None:
    """Each question and knowledge unit in NFC, one spelling per character: a unit written with a
    combining accent in one row and precomposed in another is one unit, and a field's length is
    counted in the characters a reader sees."""
    for record in records:
        record["question"] = unicodedata.normalize("NFC", record["question"])
        record["knowledge_units"] = list(dict.fromkeys(
            unicodedata.normalize("NFC", unit) for unit in record["knowledge_units"]))


def _check_field_lengths(
    records: Sequence[Mapping[str, Any]], path: Path, loader: str, max_chars: int
) -> None:
    # A huge cell would otherwise be sent to every model and judge as one huge prompt.
    for record in records:
        texts = {"question": [record["question"]], "knowledge_units": record["knowledge_units"]}
        for field, values in texts.items():
            longest = max((len(value) for value in values), default=0)
            if longest > max_chars:
                column = _FIELD_COLUMNS[loader][field]
                raise DatasetError(
                    f"{_where(path, record['source_row'], column)}: {longest:,} characters, above"
                    f" input_limits.max_field_chars = {max_chars:,}"
                )


#: Loader name -> function(path, verb annotator or None, input limits) -> records.
LOADERS: dict[str, Callable[[Path, VerbAnnotator | None, Mapping[str, Any]], list[dict[str, Any]]]] = {
    "embedded": _embedded,
    "release_cs": _release_cs,
    "release_math": _release_math,
}
