"""Import a published run in the paper's release format (GitHub ``wmm228/LLM-Eval``).

A run is two files: an ``.xlsx`` with one row per original question and the model's new
question, and a ``.jsonl`` with one line per judged new question (three judges' votes and their
majority). A manifest names them, because the release names files irregularly::

    release_root: ../shared/data/llm-eval-release   # optional; default: the manifest's folder
    pins: llm-eval-release.yaml                      # optional: the files' pinned sha256
    runs:
      - {model: glm-4-9b, dataset: cs, strategy: cot,
         generations: generated/glm/glm_generated_questions.xlsx,
         votes: generated/glm/glm_gen_voted.jsonl}

Relative ``release_root`` resolves against the manifest's folder, relative run paths against
``release_root``; ``release_root: "{release_dir}"`` takes the config's ``release_dir`` (how
``configs/llm-eval-release-manifest.yaml`` lists all 18 published runs). ``pins`` names a pin
file (:func:`bloomqg.release.download.load_pins`) that gives each run file's sha256: a file
that differs is refused on import (:func:`verify_run_files`), and the imported frames' provenance
names the release's repository, commit and every file's hash.

How the join works: a votes file is the run's generated questions in the xlsx's order, one
line per question, less the few that were never judged (and, in some runs, a line no original
wrote). So the xlsx's rows are aligned with the jsonl's lines *by position*: the two sequences
of texts are matched in order (:func:`lines_of_rows`), and each row takes the votes of its own
line. A text that a model wrote for several originals is judged once per original, often with
other votes, and each original keeps its line's. Joining on the text instead gave every
occurrence one line's votes (InternLM3-8B's 104 ``<new_question>`` rows all (1, 1, 1), their
lines 25 × (1, 0, 0), 19 × (1, 1, 0), 18 × (0, 0, 0), ...), and α, AC1, the per-judge
diagnostics, Dawid–Skene and the robustness rows were computed on those copies. Rows with no
new question, or whose question was never judged, stay in the frame with null votes (their
reasons say so), so the auxiliary accuracies use every original. A question written in the
template's slot brackets (``<How can ...?>``) is kept, and joined, without them
(:func:`bloomqg.inputs.parsing.unbracketed`); a placeholder (``<new_question>``) is no question, and
its row a parse failure. Every line that gives its votes to no row is listed with its reason by
:func:`unjoined_lines`, the import report.

Table 4 is the exception to the join: its unique / readable / answerable are the means of the
published majority columns over *every line* of the votes file, a text judged on several lines
counting on each (:func:`published_vote_lines`; :func:`bloomqg.metrics.cell.score_cell`'s
``published_lines``). That is what reproduces the printed Table 4 for all six models; over the
joined rows it differs where rows lack a line (a question never judged, a placeholder that is
no question: :func:`bloomqg.inputs.parsing.placeholder_reason`).

The released majority ``topic`` is kept as the voted knowledge unit even where the three unit
votes all differ (the release then takes the first judge's unit); its agreement column shows
1/3 there. ``New Category`` is the judged level; ``Uncategorized`` there becomes a null level
with reason :data:`bloomqg.metrics.rows.JUDGED_UNCATEGORIZED`. The release has no per-judge level
votes, so ``bloom_level_votes``/``bloom_level_agreement`` are null.
"""

from __future__ import annotations

import json
import logging
import math
import re
from dataclasses import dataclass
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from bloomqg.inputs.bloom import UnknownBloomLevel, normalize_level
from bloomqg.inputs.specs import input_limits
from bloomqg.metrics.rows import JUDGED_UNCATEGORIZED
from bloomqg.inputs.parsing import placeholder_reason, unbracketed
from bloomqg.release.records import CriterionVote, GenerationRecord, VoteRecord, frame_of
from bloomqg.store.frames import GENERATIONS, IMPORTED, PUBLISHED_VOTE_LINES, UNJOINED_LINES, VOTES
from bloomqg.store.sheet_extent import SheetTooLarge, SheetUnreadable, read_first_sheet

logger = logging.getLogger(__name__)

DATASETS: tuple[str, ...] = ("cs", "math")
STRATEGIES: tuple[str, ...] = ("cot", "fgp")
_MANIFEST_KEYS = frozenset({"release_root", "pins", "runs"})
RELEASE_DIR_PLACEHOLDER = "{release_dir}"
_RUN_KEYS = ("model", "dataset", "strategy", "generations", "votes")

#: Separator of several knowledge units in one cell, as in :mod:`bloomqg.inputs.datasets`. Not "、"
#: or "-": they occur inside the K-12 math unit names ("正数、负数--表示相对标准量").
UNIT_SEPARATOR = ";"
#: A model's free-text identification lists several units with commas as well.
_IDENTIFIED_SEPARATORS = re.compile(r"[,，;；\n]")

#: xlsx columns per dataset: original question, original unit(s), new question.
_XLSX_COLUMNS: dict[str, dict[str, str]] = {
    "cs": {"question": "Questions", "units": "Topic", "new": "New Question", "level": "Category",
           "judged_level": "New Category"},
    "math": {"question": "题目内容", "units": "知识点名称", "new": "新问题"},
}
_COT_COLUMNS = {"identified_units": "COT_Topic", "identified_level": "COT_Bloom"}
#: jsonl fields: release name -> criterion. ``non_repeatable`` 1 means unique.
_VOTE_FIELDS = {"non_repeatable": "unique", "readable": "readable", "answerable": "answerable"}
#: Every K-12 math item in the paper is at Bloom level Apply.
MATH_BLOOM_LEVEL = "Apply"

NO_QUESTION = "release has no generated question for this row"
NOT_JUDGED = "generated question not among the release's judged questions"
LEVEL_NOT_JUDGED = "release holds no judged Bloom level for this dataset"


class ReleaseError(ValueError):
    """A malformed manifest or release file; the message names the file, key, row or column."""


@dataclass(frozen=True)
class ReleaseRun:
    """One published run: which model/dataset/strategy, and its two files (absolute paths)."""

    model: str
    dataset: str
    strategy: str
    generations: Path
    votes: Path
    manifest: Path | None = None
    #: from the manifest's pins: {"repository", "commit", "generations", "votes"} (sha256 of each)
    pinned: Mapping[str, str] | None = None

    def files(self) -> dict[str, Path]:
        return {"generations": self.generations, "votes": self.votes}


def split_knowledge_units(value: object, separators: str | re.Pattern[str] = UNIT_SEPARATOR) -> list[str]:
    """Knowledge units in one cell, split the way :func:`bloomqg.inputs.datasets.split_units` does:
    on ``;``, whitespace collapsed (so the no-break space in "圆柱--体积的计算\\xa0" goes),
    repeats dropped, order kept. Null or blank gives an empty list; the caller decides whether
    that is an error. ``separators`` may be a compiled pattern to split on several."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return []
    if isinstance(separators, str):
        pieces = str(value).split(separators)
    else:
        pieces = separators.split(str(value))
    units: list[str] = []
    for piece in pieces:
        unit = " ".join(piece.split())
        if unit and unit not in units:
            units.append(unit)
    return units


# --------------------------------------------------------------------------------------------
# Manifest


def load_manifest(path: str | Path, *, release_dir: str | Path | None = None, check_files: bool = True) -> list[ReleaseRun]:
    """Read and check a release manifest; raise :class:`ReleaseError` naming what is wrong.

    ``release_dir`` replaces ``{release_dir}`` in ``release_root``. With ``check_files`` every
    run file must exist (all missing ones are named at once); without, the files may still be on
    their way (a download) or be reported later by :func:`missing_runs`.
    """
    import yaml

    path = Path(path).resolve()
    if not path.is_file():
        raise ReleaseError(f"{path}: manifest not found")
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise ReleaseError(f"{path}: not valid YAML: {error}") from error
    if not isinstance(document, dict):
        raise ReleaseError(f"{path}: expected a mapping with keys 'runs' and optional 'release_root'")
    unknown = sorted(set(document) - _MANIFEST_KEYS)
    if unknown:
        raise ReleaseError(f"{path}: unknown keys {unknown}; allowed: {sorted(_MANIFEST_KEYS)}")
    root_value = document.get("release_root")
    if root_value is None:
        root = path.parent
    elif isinstance(root_value, str) and root_value.strip():
        if RELEASE_DIR_PLACEHOLDER in root_value:
            if not release_dir:
                raise ReleaseError(
                    f"{path}: release_root {root_value!r} needs release_dir (pass --config release_dir=PATH)"
                )
            root_value = root_value.replace(RELEASE_DIR_PLACEHOLDER, str(release_dir))
        root = (path.parent / root_value).resolve()
    else:
        raise ReleaseError(f"{path}: key 'release_root' must be a non-empty path string")
    if check_files and not root.is_dir():
        raise ReleaseError(f"{path}: release_root {root} is not a directory")
    pins = _manifest_pins(path, document.get("pins"))
    runs_value = document.get("runs")
    if not isinstance(runs_value, list) or not runs_value:
        raise ReleaseError(f"{path}: key 'runs' must be a non-empty list")

    runs: list[ReleaseRun] = []
    missing: list[str] = []
    seen: dict[tuple[str, str, str], int] = {}
    for index, entry in enumerate(runs_value):
        where = f"{path}: runs[{index}]"
        if not isinstance(entry, dict):
            raise ReleaseError(f"{where}: expected a mapping with keys {list(_RUN_KEYS)}")
        unknown = sorted(set(entry) - set(_RUN_KEYS))
        if unknown:
            raise ReleaseError(f"{where}: unknown keys {unknown}; allowed: {list(_RUN_KEYS)}")
        for key in _RUN_KEYS:
            value = entry.get(key)
            if not isinstance(value, str) or not value.strip():
                raise ReleaseError(f"{where}: key {key!r} must be a non-empty string, got {value!r}")
        if entry["dataset"] not in DATASETS:
            raise ReleaseError(f"{where}: dataset {entry['dataset']!r} is not one of {list(DATASETS)}")
        if entry["strategy"] not in STRATEGIES:
            raise ReleaseError(f"{where}: strategy {entry['strategy']!r} is not one of {list(STRATEGIES)}")
        cell = (entry["model"], entry["dataset"], entry["strategy"])
        if cell in seen:
            raise ReleaseError(f"{where}: run {cell} repeats runs[{seen[cell]}]")
        seen[cell] = index
        files = {}
        pinned: dict[str, str] | None = None if pins is None else {
            "repository": str(pins.get("repository", "")), "commit": str(pins["commit"])}
        for key, suffix in (("generations", ".xlsx"), ("votes", ".jsonl")):
            file = (root / entry[key]).resolve()
            if file.suffix.lower() != suffix:
                raise ReleaseError(f"{where}: key {key!r} must name a {suffix} file, got {entry[key]!r}")
            if check_files and not file.is_file():
                missing.append(f"{where}: key {key!r}: file {file} not found")
            if pinned is not None:
                pin = pins["files"].get(entry[key])
                if pin is None:
                    raise ReleaseError(f"{where}: key {key!r}: {entry[key]!r} is not among the pinned files of {pins['_path']}")
                pinned[key] = str(pin["sha256"])
            files[key] = file
        runs.append(ReleaseRun(*cell, files["generations"], files["votes"], manifest=path, pinned=pinned))
    if missing:
        raise ReleaseError("; ".join(missing))
    return runs


def _manifest_pins(manifest: Path, value: object) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ReleaseError(f"{manifest}: key 'pins' must be the path of a pin file")
    from bloomqg.release.download import ReleaseDownloadError, load_pins

    pin_path = (manifest.parent / value).resolve()
    try:
        pins = load_pins(pin_path)
    except (OSError, ReleaseDownloadError) as error:
        raise ReleaseError(f"{manifest}: key 'pins': {error}") from error
    return {**pins, "_path": pin_path}


def missing_runs(runs: list[ReleaseRun]) -> list[tuple[ReleaseRun, list[Path]]]:
    """The runs whose files are not (all) there, each with the missing files."""
    found = []
    for run in runs:
        absent = [file for file in run.files().values() if not file.is_file()]
        if absent:
            found.append((run, absent))
    return found


def verify_run_files(run: ReleaseRun) -> dict[str, str]:
    """sha256 of the run's two files by key; :class:`ReleaseError` naming the file when one
    differs from its pin (the manifest's ``pins``)."""
    from bloomqg.store.provenance import sha256_file
    from bloomqg.release.download import pin_mismatch_message

    hashes = {key: sha256_file(file) for key, file in run.files().items()}
    for key, actual in hashes.items():
        expected = (run.pinned or {}).get(key)
        if expected is not None and actual != expected:
            raise ReleaseError(pin_mismatch_message(run.files()[key], actual, expected, run.pinned or {}, run.manifest,
                                                    "or import it through a manifest without pins"))
    return hashes


# --------------------------------------------------------------------------------------------
# Reading the two files


def _read_generations(run: ReleaseRun) -> pd.DataFrame:
    limits = input_limits({})  # the release is read within the schema's default limits
    try:  # the check and the read are one
        header, rows = read_first_sheet(
            run.generations, max_cells=limits["max_sheet_cells"], max_cell_chars=limits["max_field_chars"],
            max_text_chars=limits["max_file_mb"] * 1_000_000)
    except (SheetTooLarge, SheetUnreadable) as error:
        raise ReleaseError(str(error)) from None
    frame = pd.DataFrame(rows, columns=header, dtype=object)
    needed = [name for name in _XLSX_COLUMNS[run.dataset].values()]
    if run.strategy == "cot":
        needed += list(_COT_COLUMNS.values())
    missing = [name for name in needed if name not in frame.columns]
    if missing:
        raise ReleaseError(
            f"{run.generations}: missing columns {missing} for a {run.dataset}/{run.strategy} run "
            f"(found {list(frame.columns)})"
        )
    return frame.where(frame.notna(), None)


def _check_votes(values: Any, line: int, field: str, run: ReleaseRun) -> list[int]:
    if not isinstance(values, list) or not values or any(v not in (0, 1) or isinstance(v, bool) for v in values):
        raise ReleaseError(f"{run.votes}: line {line}: {field!r} must be a non-empty list of 0/1, got {values!r}")
    return values


@dataclass(frozen=True)
class JudgedLine:
    """One checked line of a votes file: the judged text, the majority and the judges' votes of
    each binary field (release names, :data:`_VOTE_FIELDS`), and the knowledge-unit votes."""

    line: int
    question: str  # stripped: the join key
    majority: Mapping[str, int]
    votes: Mapping[str, list[int]]
    topic: Any
    topic_votes: list[Any]


_REQUIRED_VOTE_KEYS = ["question", "topic", "topic_votes", *(k for f in _VOTE_FIELDS for k in (f, f"{f}_votes"))]


def _judged_line(record: Any, line: int, run: ReleaseRun) -> JudgedLine:
    """A parsed jsonl line, checked; :class:`ReleaseError` naming the line and key otherwise."""
    if not isinstance(record, dict):
        raise ReleaseError(f"{run.votes}: line {line}: expected a JSON object")
    missing = [key for key in _REQUIRED_VOTE_KEYS if key not in record]
    if missing:
        raise ReleaseError(f"{run.votes}: line {line}: missing keys {missing}")
    if not isinstance(record["question"], str) or not record["question"].strip():
        raise ReleaseError(f"{run.votes}: line {line}: 'question' must be a non-empty string")
    for field in _VOTE_FIELDS:
        _check_votes(record[f"{field}_votes"], line, f"{field}_votes", run)
        if record[field] not in (0, 1) or isinstance(record[field], bool):
            raise ReleaseError(f"{run.votes}: line {line}: {field!r} must be 0 or 1")
    if not isinstance(record["topic_votes"], list) or not record["topic_votes"]:
        raise ReleaseError(f"{run.votes}: line {line}: 'topic_votes' must be a non-empty list")
    return JudgedLine(
        line=line,
        question=record["question"].strip(),
        majority={field: record[field] for field in _VOTE_FIELDS},
        votes={field: record[f"{field}_votes"] for field in _VOTE_FIELDS},
        topic=record["topic"],
        topic_votes=record["topic_votes"],
    )


def _read_votes(run: ReleaseRun) -> list[JudgedLine]:
    """The jsonl lines, checked, in file order."""
    lines = []
    with open(run.votes, encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (ValueError, RecursionError) as error:  # a huge number or deep nesting too
                raise ReleaseError(f"{run.votes}: line {line_number}: not valid JSON: "
                                   f"{type(error).__name__}: {str(error)[:200]}") from None
            lines.append(_judged_line(record, line_number, run))
    if not lines:
        raise ReleaseError(f"{run.votes}: no judged questions")
    return lines


# --------------------------------------------------------------------------------------------
# Building the rows


def _text(value: object) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    text = str(value).strip()
    return text or None


def _identified_level(value: object, row: int, unrecognised: dict[int, object]) -> str | None:
    """The model's level for the original; a value naming no level is null (noted in
    ``unrecognised`` by sheet row), never a guess: "Compare/Contrast (Analyze)" stays null."""
    try:
        return normalize_level(value)
    except UnknownBloomLevel:
        unrecognised[row] = value
        return None


def _binary_votes(judged: JudgedLine | None, reason: str) -> dict[str, CriterionVote]:
    """unique / readable / answerable of a judged line (all null with ``reason`` without one)."""
    out: dict[str, CriterionVote] = {}
    for field, criterion in _VOTE_FIELDS.items():
        if judged is None:
            out[criterion] = CriterionVote.missing(reason)
            continue
        votes, majority = judged.votes[field], judged.majority[field]
        agreement = sum(vote == majority for vote in votes) / len(votes)
        out[criterion] = CriterionVote(bool(majority), [str(vote) for vote in votes], agreement, None)
    return out


def _unit_vote(judged: JudgedLine | None, reason: str) -> CriterionVote:
    """The released majority topic as the voted units, each judge's topic as a JSON list."""
    if judged is None:
        return CriterionVote.missing(reason)
    voted = split_knowledge_units(judged.topic)
    ballots = [split_knowledge_units(vote) for vote in judged.topic_votes]
    return CriterionVote(
        voted or None,
        [json.dumps(ballot, ensure_ascii=False) for ballot in ballots],
        sum(ballot == voted for ballot in ballots) / len(ballots),
        None if voted else "release's majority topic is empty",
    )


def _original_level(run: ReleaseRun, row: Mapping[str, Any], sheet_row: int) -> str | None:
    """The original's labelled level (computer science) or :data:`MATH_BLOOM_LEVEL`."""
    if run.dataset != "cs":
        return MATH_BLOOM_LEVEL
    column = _XLSX_COLUMNS[run.dataset]["level"]
    try:
        return normalize_level(row[column])
    except UnknownBloomLevel as error:
        raise ReleaseError(f"{run.generations}: row {sheet_row}: column {column!r}: {error}") from error


def _generation_record(
    run: ReleaseRun, position: int, row: Mapping[str, Any], unrecognised_levels: dict[int, object]
) -> GenerationRecord:
    """The GENERATIONS row of the sheet's ``position``-th data row (sheet row ``position + 1``)."""
    columns = _XLSX_COLUMNS[run.dataset]
    sheet_row = position + 1
    item_id = f"{run.dataset}-{position:04d}"
    original = _text(row[columns["question"]])
    if original is None:
        raise ReleaseError(f"{run.generations}: row {sheet_row}: column {columns['question']!r} is empty")
    units = split_knowledge_units(row[columns["units"]])
    if not units:
        raise ReleaseError(f"{run.generations}: row {sheet_row}: column {columns['units']!r} is empty")
    original_level = _original_level(run, row, sheet_row)
    new_question = _text(row[columns["new"]])
    identified_level, identified_units = None, None
    if run.strategy == "cot":
        identified_level = _identified_level(row[_COT_COLUMNS["identified_level"]], sheet_row, unrecognised_levels)
        identified_units = (
            split_knowledge_units(row[_COT_COLUMNS["identified_units"]], _IDENTIFIED_SEPARATORS) or None
        )
    # The release keeps only the extracted question; one that is the template's placeholder
    # ("<new_question>") is no question, and one written in the slot's brackets ("<How can
    # ...?>") is kept without them, as bloomqg.inputs.parsing rules for our own generations.
    raw_text = new_question
    parse_error = NO_QUESTION if new_question is None else placeholder_reason(new_question)
    new_question = None if parse_error is not None or new_question is None else unbracketed(new_question)
    return GenerationRecord(
        prompt_id=f"{item_id}:{run.strategy}",
        item_id=item_id,
        dataset=run.dataset,
        strategy=run.strategy,
        model=run.model,
        original_question=original,
        original_bloom_level=original_level,
        original_knowledge_units=units,
        raw_text=raw_text,
        new_question=new_question,
        identified_bloom_level=identified_level,
        identified_knowledge_units=identified_units,
        parse_status="ok" if new_question else "failed",
        parse_error=parse_error,
        finish_reason=IMPORTED,
    )


def _vote_record(
    run: ReleaseRun, generation: GenerationRecord, judged: JudgedLine | None, row: Mapping[str, Any], sheet_row: int
) -> VoteRecord:
    """The VOTES row of one generation, from its judged line (None: not judged or no question)."""
    reason = (generation.parse_error or NO_QUESTION) if generation.new_question is None else NOT_JUDGED
    criteria = {
        **_binary_votes(judged, reason),
        "bloom_level": _judged_level(row, run, sheet_row, generation.new_question, reason),
        "knowledge_units": _unit_vote(judged, reason),
    }
    n_judges = 0 if judged is None else len(judged.votes["non_repeatable"])
    return VoteRecord(generation, n_judges, criteria)


def _join_key(text: str) -> str:
    """A row's question and a line's text are compared as the row keeps its question: stripped
    and without the brackets of the template's slot (``<How can ...?>``:
    :func:`bloomqg.inputs.parsing.unbracketed`), which the votes file keeps."""
    return unbracketed(text.strip())


def lines_of_rows(texts: Sequence[str | None], judged: Sequence[JudgedLine]) -> list[JudgedLine | None]:
    """Each sheet row's own judged line (None: no question, or never judged), by position.

    The lines are the rows' questions in order with some left out, so the two sequences of
    texts are aligned in order (:class:`difflib.SequenceMatcher`, which matches the longest runs
    first); a row and a line pair only where their texts are equal, and each line pairs with at
    most one row. A row the alignment leaves over takes the next unpaired line of its text, in
    order, if there is one (a line judged out of place); never the line of another row."""
    # A row without a question must match nothing: a key no line has.
    row_keys: list[object] = [_join_key(text) if text is not None else ("no question", i) for i, text in enumerate(texts)]
    line_texts = [_join_key(line.question) for line in judged]
    paired: list[JudgedLine | None] = [None] * len(texts)
    taken = [False] * len(judged)
    matcher = SequenceMatcher(None, row_keys, line_texts, autojunk=False)
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            paired[block.a + k] = judged[block.b + k]
            taken[block.b + k] = True
    left: dict[str, list[JudgedLine]] = {}
    for line, text, used in zip(judged, line_texts, taken):
        if not used:
            left.setdefault(text, []).append(line)
    for row, key in enumerate(row_keys):
        if paired[row] is None and isinstance(key, str) and left.get(key):
            paired[row] = left[key].pop(0)
    return paired


def _log_repeats(run: ReleaseRun, judged: Sequence[JudgedLine]) -> None:
    """Say how many lines repeat an earlier line's text with other votes (each row keeps its own)."""
    first: dict[str, JudgedLine] = {}
    conflicting = 0
    for line in judged:
        earlier = first.setdefault(line.question, line)
        if earlier is not line and (line.majority != earlier.majority or line.topic != earlier.topic):
            conflicting += 1
    if conflicting:
        logger.info(
            "%s: %d judged lines repeat an earlier question's text with other votes; each original "
            "keeps the votes of its own line", run.votes, conflicting,
        )


def import_run(run: ReleaseRun) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(generations, votes) frames of one published run, with the columns of
    :data:`bloomqg.store.frames.GENERATIONS` and :data:`bloomqg.store.frames.VOTES`.

    One row per row of the run's xlsx. ``item_id`` is ``"<dataset>-<row>"`` with the 1-based
    data row of the xlsx, ``prompt_id`` is ``"<item_id>:<strategy>"``. For computer science the
    xlsx keeps the order of ``Data_Structure.csv``, so the ids equal :mod:`bloomqg.inputs.datasets`'
    ones; for K-12 math they number the run's 438 items, not the workbook's 465 rows.
    """
    sheet = _read_generations(run)
    judged = _read_votes(run)
    _log_repeats(run, judged)

    rows = sheet.to_dict("records")
    unrecognised_levels: dict[int, object] = {}
    generations = [_generation_record(run, position, row, unrecognised_levels)
                   for position, row in enumerate(rows, start=1)]
    own_lines = lines_of_rows([generation.new_question for generation in generations], judged)
    votes = [_vote_record(run, generation, line, row, position + 1)
             for position, (generation, line, row) in enumerate(zip(generations, own_lines, rows), start=1)]

    _log_import(run, judged, own_lines, votes, unrecognised_levels)
    return frame_of(generations, GENERATIONS), frame_of(votes, VOTES)


def _log_import(
    run: ReleaseRun, judged: Sequence[JudgedLine], own_lines: Sequence[JudgedLine | None],
    votes: Sequence[VoteRecord], unrecognised_levels: dict[int, object],
) -> None:
    """Warn about judged lines no row took and unrecognised levels; sum the import up."""
    taken = {line.line for line in own_lines if line is not None}
    unmatched = [line.line for line in judged if line.line not in taken]
    if unmatched:
        # Kept as a warning: the votes of a line no original wrote cannot enter any metric but
        # Table 4, and one mangled line should not block the import of a whole run.
        logger.warning(
            "%s: %d lines (first: %s) give their votes to no question of %s (a template placeholder, a "
            "text judged more often than written, or one no original wrote: the import report, "
            "unjoined_lines, says which); they are left out of every metric but Table 4",
            run.votes, len(unmatched), unmatched[:10], run.generations,
        )
    if unrecognised_levels:
        logger.warning(
            "%s: %d %s values name no Bloom level and are recorded as null (sheet row: value): %s",
            run.generations, len(unrecognised_levels), _COT_COLUMNS["identified_level"],
            unrecognised_levels,
        )
    not_judged = sum(1 for vote in votes if vote.criteria["unique"].null_reason == NOT_JUDGED)
    logger.info(
        "%s/%s/%s: %d originals, %d judged lines, %d new questions never judged, %d rows without one",
        run.model, run.dataset, run.strategy, len(votes), len(judged), not_judged,
        sum(1 for vote in votes if vote.generation.new_question is None),
    )


def published_vote_lines(run: ReleaseRun, votes: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every line of the run's votes file as published, with the columns of
    :data:`bloomqg.store.frames.PUBLISHED_VOTE_LINES`: the rows Table 4 is computed over, each with its
    majorities, its judges' votes and their agreement.

    ``votes`` (the run's VOTES frame from :func:`import_run`) fills ``joined``: the prompt_id
    of the original whose own line it is (:func:`lines_of_rows`; empty: a line no row took, a
    text no original wrote or one judged more often than written). Without it, ``joined`` is
    null."""
    judged = _read_votes(run)
    takers: dict[int, list[str]] | None = None
    if votes is not None:
        texts = [None if n_judges == 0 or not isinstance(text, str) else text
                 for text, n_judges in zip(votes["new_question"], votes["n_judges"])]
        takers = {}
        for prompt_id, line in zip(votes["prompt_id"], lines_of_rows(texts, judged)):
            if line is not None:
                takers.setdefault(line.line, []).append(str(prompt_id))
    records = []
    for line in judged:
        binary, units = _binary_votes(line, ""), _unit_vote(line, "")
        records.append({
            "dataset": run.dataset, "strategy": run.strategy, "model": run.model,
            "line": line.line, "question": line.question,
            **{criterion: bool(line.majority[field]) for field, criterion in _VOTE_FIELDS.items()},
            "knowledge_units": units.value,
            **{f"{criterion}_votes": vote.votes for criterion, vote in [*binary.items(), ("knowledge_units", units)]},
            **{f"{criterion}_agreement": vote.agreement
               for criterion, vote in [*binary.items(), ("knowledge_units", units)]},
            "joined": None if takers is None else takers.get(line.line, []),
        })
    return pd.DataFrame.from_records(records, columns=PUBLISHED_VOTE_LINES.names)


def _judged_level(
    row: Mapping[str, Any], run: ReleaseRun, sheet_row: int, new_question: str | None, no_question: str
) -> CriterionVote:
    """``bloom_level`` from ``New Category``; Uncategorized -> null with the judged reason, no
    question -> null with ``no_question``. The release has no per-judge level votes: votes and
    agreement are null."""
    column = _XLSX_COLUMNS[run.dataset].get("judged_level")
    if column is None:
        return CriterionVote.missing(LEVEL_NOT_JUDGED)
    if new_question is None:
        return CriterionVote.missing(no_question)
    raw = _text(row[column])
    if raw is None:
        return CriterionVote.missing(f"no {column!r} in the release")
    try:
        level = normalize_level(raw)
    except UnknownBloomLevel as error:
        raise ReleaseError(f"{run.generations}: row {sheet_row}: column {column!r}: {error}") from error
    return CriterionVote(level, None, None, None if level else JUDGED_UNCATEGORIZED)


# --------------------------------------------------------------------------------------------
# The import report: every line that gives its votes to no generated question, and why

#: ``reason`` of an unjoined line (:data:`bloomqg.store.frames.UNJOINED_LINES`): it judges a template
#: placeholder, whose row is a parse failure (no question to give votes to) ...
PLACEHOLDER_LINE = "placeholder"
#: ... it judges a text again that every row writing it already has its own line for ...
JUDGED_AGAIN = "judged_again"
#: ... or no row of the run's generations wrote its text.
NO_ROW = "no_row"
UNJOINED_REASONS: tuple[str, ...] = (PLACEHOLDER_LINE, JUDGED_AGAIN, NO_ROW)


def unjoined_lines(generations: pd.DataFrame, lines: pd.DataFrame) -> pd.DataFrame:
    """The published vote lines of one imported run that give their votes to no generated
    question, each with its reason (columns of :data:`bloomqg.store.frames.UNJOINED_LINES`), in line
    order; empty when every line is some original's own.

    ``generations``: the run's GENERATIONS frame (:func:`import_run`); ``lines``: its
    :func:`published_vote_lines` with ``joined`` filled. ``rows`` names the originals a line
    concerns: the placeholder row it judges (the k-th line judging ``<new_question>`` is the k-th
    row that wrote it and failed to parse, as the votes follow the rows' order), or the rows
    that wrote a text judged again. Such lines still count in Table 4, which is over every line."""
    require = ["prompt_id", "raw_text", "new_question", "parse_status", "dataset", "strategy", "model"]
    missing = [name for name in require if name not in generations.columns]
    missing += [f"lines.{name}" for name in ("line", "question", "joined") if name not in lines.columns]
    if missing:
        raise ValueError(f"unjoined_lines: missing columns {missing}")
    if lines["joined"].isna().any():
        raise ValueError("unjoined_lines: lines without their join (published_vote_lines(run, votes) fills it)")
    cells = {tuple(cell) for cell in generations[["dataset", "strategy", "model"]].drop_duplicates().itertuples(index=False)}
    cells |= {tuple(cell) for cell in lines[["dataset", "strategy", "model"]].drop_duplicates().itertuples(index=False)}
    if len(cells) != 1:
        raise ValueError(f"unjoined_lines: generations and lines must be of one run, got {sorted(cells)}")
    dataset, strategy, model = cells.pop()
    placeholder_rows: dict[str, list[str]] = {}  # a placeholder's text -> the rows that wrote it
    writers: dict[str, list[str]] = {}  # a question's join key -> the rows that wrote it
    for prompt_id, raw, question, status in zip(
        generations["prompt_id"], generations["raw_text"], generations["new_question"], generations["parse_status"]
    ):
        if isinstance(question, str):
            writers.setdefault(_join_key(question), []).append(str(prompt_id))
        elif status == "failed" and isinstance(raw, str) and placeholder_reason(raw):
            placeholder_rows.setdefault(" ".join(raw.split()), []).append(str(prompt_id))
    records = []
    for line, text, joined in zip(lines["line"], lines["question"], lines["joined"]):
        if len(joined):
            continue
        if placeholder_reason(text):
            left = placeholder_rows.get(" ".join(text.split()), [])
            rows = [left.pop(0)] if left else []
            reason = PLACEHOLDER_LINE
            detail = (f"judges the template's placeholder {text!r}, which is no question: "
                      + (f"row {rows[0]} wrote it and is a parse failure, generated and not useful" if rows
                         else "no row that wrote it is left"))
        elif _join_key(text) in writers:
            rows = writers[_join_key(text)]
            reason = JUDGED_AGAIN
            detail = f"judges again a text that {len(rows)} row(s) wrote, each judged on a line of its own"
        else:
            rows, reason, detail = [], NO_ROW, "no row of the run's generations wrote this text"
        records.append({"dataset": dataset, "strategy": strategy, "model": model, "line": int(line),
                        "question": str(text), "reason": reason, "rows": rows, "detail": detail})
    return pd.DataFrame.from_records(records, columns=UNJOINED_LINES.names)
