"""The explorer's item table: one row per generated question (a VOTES row), with what the
researcher filters on and what the detail pane shows.

Membership in a metric is not re-derived here: each cell's rows go through
:func:`bloomqg.metrics.cell.row_terms`, the very terms :func:`~bloomqg.metrics.cell.score_cell`
sums, so the items a table cell links to are, by construction, the ``n`` questions its value was
computed over (:data:`METRIC_COLUMN_PREFIX` columns hold each item's numerator term, null when
the item is outside the denominator).

An imported release computes Table 4 (unique, readable, answerable) over every line of each
run's published votes file instead (:func:`bloomqg.metrics.quality.line_rates`). Its explorer
therefore holds a second kind of row (column ``row``: :data:`QUESTION_ROW` or :data:`LINE_ROW`):
one per published line, with its text, votes and majorities, the questions the join gives its
votes to, and the Table 4 terms of :func:`bloomqg.metrics.quality.line_terms`; the question rows
of those cells then carry no Table 4 term. Every metric's denominator is thus rows of one kind.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from bloomqg.inputs.bloom import LEVEL_WEIGHT, UNCATEGORIZED
from bloomqg.metrics.cell import row_terms
from bloomqg.metrics.quality import line_terms
from bloomqg.metrics.registry import METRIC_SPECS
from bloomqg.metrics.rows import JUDGED_UNCATEGORIZED, RowTerms
from bloomqg.inputs.parsing import placeholder_reason
from bloomqg.judges.verdict import FAILED_VOTES, MissingVote, missing_vote
from bloomqg.reporting.display import CRITERION_LABEL, StrategyLabels, is_missing, ordered_unique, strategy_label
from bloomqg.reporting.construction import constructed_values
from bloomqg.reporting.examples import panel_judges as judges_by_cell
from bloomqg.reporting.tables.model import gated_cells
from bloomqg.voting.construction import ConstructionFlag, construction_flags
from bloomqg.store.cells import cell_name
from bloomqg.store.frames import BINARY_CRITERIA, CRITERIA, PUBLISHED_VOTE_LINES, VOTES

ColumnKind = Literal["cat", "multi", "text", "num"]
#: Shown for a missing value (no verdict, no level, not applicable).
NONE = "—"
METRIC_COLUMN_PREFIX = "m."
#: Counts have no row terms of their own: the rows they count (``n``) and the rows they add up.
COUNT_TERMS: dict[str, str | None] = {"n_generated": None, "n_useful": "usability"}
#: The ``row`` column of a release's explorer: a generated question, or a line of a run's
#: published votes file (the rows its Table 4 counts).
QUESTION_ROW = "question"
LINE_ROW = "published vote line"
#: The ``joined`` column of a line row: the join gives its votes to the original whose own line
#: it is; a line of a text judged more often than written counts in Table 4 only, and a text no
#: original wrote likewise, and a line judging a template placeholder, which is no question.
JOINED = "joined"
REPEATED = "repeated text"
NO_ORIGINAL = "no original"
PLACEHOLDER_LINE = "placeholder"


#: The explorer's legends, in words a teacher new to the study follows.
SHIFT_HELP = (
    "match: judged at the target level · drift: one level off · regression: two or more levels below · "
    "leap: two or more levels above · —: no judged level. Counts every question with a judged level, useful or "
    "not; the report's shift figures (Figure 3, Table 6) count useful questions only."
)
GATE_HELP = (
    "Whether the judges agree with each other enough on a criterion, by the report's gate (Krippendorff's α at or "
    "above the study's threshold, or Gwet's AC1 where one answer holds most votes; not measured where at most "
    "one judge's votes vary): passed, or the criteria it flagged (unreliable, or agreement not measured), as the "
    "report's Judge reliability section counts them. The votes are kept; the report marks the "
    "numbers that rest on them with †."
)
FINISH_HELP = (
    "finished: the model ended its answer itself · ran out of tokens: it used up its token budget before "
    "finishing, so its answer may be cut off."
)
PROMPT_ID_HELP = "The dataset item's ID, then the strategy it was asked with: cs-0001:cot is item cs-0001 under CoT."
#: The recorded finish reasons, as the explorer shows them (:data:`FINISH_HELP`); others as recorded.
FINISH_REASON_TEXT: dict[str, str] = {"stop": "finished", "length": "ran out of tokens"}

_RULES_UNIQUE = re.compile(
    r"token_jaccard=(?P<words>[\d.]+) \(max (?P<words_max>[\d.]+)\), char_ratio=(?P<chars>[\d.]+) \(max (?P<chars_max>[\d.]+)\)"
)
_COSINE_UNIQUE = re.compile(r"cosine to original (?P<cosine>[\d.]+) \(threshold (?P<threshold>[\d.]+)\)")


def _percent(share: str) -> str:
    return f"{round(100 * float(share))}%"


def plain_reason(reason: str) -> str:
    """A judge's recorded reason in words (the uniqueness measures of the rules and embedding
    judges), the recorded text kept after it; any other reason as recorded."""
    if match := _RULES_UNIQUE.fullmatch(reason):
        words, chars = match["words"], match["chars"]
        return (f"shares {_percent(words)} of its words with the original (a copy at {_percent(match['words_max'])} "
                f"or more); its characters match the original's by {_percent(chars)} (a copy at "
                f"{_percent(match['chars_max'])} or more)\n(recorded: {reason})")
    if match := _COSINE_UNIQUE.fullmatch(reason):
        return (f"similarity of meaning to the original {float(match['cosine']):.2f} (1 = the same meaning; "
                f"a copy at {float(match['threshold']):.2f} or more)\n(recorded: {reason})")
    return reason


@dataclass(frozen=True)
class Column:
    """One column of the item table: how it is encoded, labelled and grouped in the filters.

    ``cat``: one value per row (a filter lists the values); ``multi``: a list per row (a row
    matches a value it contains); ``text``: free text, searched, not faceted; ``num``: a number
    or null (the metric terms).
    """

    key: str
    label: str
    kind: ColumnKind
    group: str
    #: In the table's default columns (else only in the filters and the detail pane).
    shown: bool = False
    #: What the column means, in a line a reader new to the study follows (the page shows it
    #: under the filter's title and as the column header's tooltip); empty where the label says it.
    help: str = ""


@dataclass
class ItemTable:
    """Columns and their per-row values, plus per-cell provenance and metric values."""

    columns: list[Column]
    values: dict[str, list[Any]]
    #: "dataset/strategy/model" -> provenance of the files the cell's items came from.
    cells: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: "dataset/strategy/model" -> metric -> [value, n, ci_low, ci_high, gated] from the metrics frame.
    metrics: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    #: metric -> {label, kind, scale, decimals}: what the banner needs to show a metric.
    metric_specs: dict[str, dict[str, Any]] = field(default_factory=dict)
    judges: list[str] = field(default_factory=list)
    #: strategy name -> the label the ``strategy`` column shows (the page's cell keys carry names).
    strategy_labels: dict[str, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(next(iter(self.values.values()), []))


def _as_list(value: object) -> list[str]:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return []
    return [str(v) for v in value]  # type: ignore[union-attr]


#: The Usable column of an answer the workflow could not read a question from.
NO_QUESTION = "no (no question)"


def _yes_no(value: object) -> str:
    if is_missing(value):
        return NONE
    return "yes" if bool(value) else "no"


def _level(value: object, null_reason: object = None) -> str:
    """A judged or target level; a judged Uncategorized is a level, any other null says why."""
    if not is_missing(value):
        return str(value)
    if null_reason == JUDGED_UNCATEGORIZED:
        return UNCATEGORIZED
    if null_reason == "tie":  # the report's words ("no majority"), with the kind of no majority
        return f"{NONE} no majority (tie)"
    return f"{NONE} {null_reason}" if isinstance(null_reason, str) and null_reason else NONE


def transition(target: object, judged: object, judged_null_reason: object) -> str:
    """match / regression (Δ ≤ −2) / drift (|Δ| = 1) / leap (Δ ≥ 2), as Table 6 counts them;
    ``uncategorized`` when exactly one side is Uncategorized, — without a judged level."""
    judged_uncategorized = is_missing(judged) and judged_null_reason == JUDGED_UNCATEGORIZED
    if is_missing(judged) and not judged_uncategorized:
        return NONE
    if is_missing(target) or judged_uncategorized:
        return "match" if is_missing(target) and judged_uncategorized else "uncategorized"
    delta = LEVEL_WEIGHT[str(judged)] - LEVEL_WEIGHT[str(target)]
    if delta == 0:
        return "match"
    if abs(delta) == 1:
        return "drift"
    return "regression" if delta < 0 else "leap"


@functools.lru_cache(maxsize=65536)  # votes repeat: a few distinct strings per criterion
def _vote_text(criterion: str, vote: object) -> str | None:
    """A judge's vote string (``1``/``0``, a level, a JSON unit list) as read in the table."""
    if vote is None:
        return None
    if criterion in ("unique", "readable", "answerable"):
        return {"1": "yes", "0": "no"}.get(str(vote), str(vote))
    if criterion == "knowledge_units":
        try:
            return "; ".join(str(u) for u in json.loads(str(vote)))
        except (json.JSONDecodeError, TypeError):
            return str(vote)
    return str(vote)


def _status_text(missing: MissingVote | None) -> str:
    """A verdict cell without a vote: why, in words (a judge that abstains is no error)."""
    return NONE if missing is None else f"{NONE} {missing}"


def panel_judges(reliability: pd.DataFrame | None, votes: pd.DataFrame) -> dict[str, list[str]]:
    """cell key -> the panel's judge names in vote order (``judge 1``… where none is recorded)."""
    named = {cell_name(dataset, strategy, model): judges
             for (model, dataset, strategy), judges in judges_by_cell(reliability).items()}
    out: dict[str, list[str]] = {}
    for (dataset, strategy, model), frame in votes.groupby(["dataset", "strategy", "model"], sort=False):
        key = cell_name(dataset, strategy, model)
        width = int(frame["n_judges"].max()) if len(frame) else 0
        names = named.get(key, [])
        out[key] = names if len(names) >= width else names + [f"judge {i + 1}" for i in range(len(names), width)]
    return out


def _gate_failures(reliability: pd.DataFrame | None) -> dict[str, list[str]]:
    """cell key -> criteria whose panel α failed the gate."""
    failed: dict[str, list[str]] = {}
    if reliability is None or reliability.empty:
        return failed
    panel = reliability[reliability["judge"].isna()]
    for row in panel.itertuples(index=False):
        if row.gate_passed is False or row.gate_passed is np.False_:
            failed.setdefault(cell_name(row.dataset, row.strategy, row.model), []).append(
                CRITERION_LABEL.get(row.criterion, row.criterion)
            )
    return failed


def _cell_terms(votes: pd.DataFrame) -> dict[str, np.ndarray]:
    """metric -> per row: the numerator term where the row is in the denominator, else NaN."""
    out = {spec.name: np.full(len(votes), np.nan) for spec in METRIC_SPECS}
    for _, frame in votes.groupby(["dataset", "strategy", "model"], sort=False):
        positions = frame.index.to_numpy()
        local = frame.reset_index(drop=True)
        terms: RowTerms = row_terms(local, str(local["strategy"].iloc[0]))
        for spec in METRIC_SPECS:
            if spec.name in terms:
                numerator, member = terms[spec.name]
            elif spec.name in COUNT_TERMS:
                source = COUNT_TERMS[spec.name]
                if source is None:
                    numerator = member = np.ones(len(local), dtype=bool)
                else:
                    numerator, member = terms[source]
            else:
                continue
            values = np.where(member.astype(bool), numerator.astype(np.float64), np.nan)
            out[spec.name][positions] = values
    return out


JudgmentIndex = dict[tuple[str, str, str], tuple[str, str | None, str | None]]


def index_judgments(judgments: Iterable[pd.DataFrame]) -> JudgmentIndex:
    """(prompt_id-with-cell, judge, criterion) -> (status, reason, raw answer)."""
    index: JudgmentIndex = {}
    for frame in judgments:
        if frame.empty:
            continue
        keys = (frame["dataset"] + "/" + frame["strategy"] + "/" + frame["model"] + "/" + frame["prompt_id"]).tolist()
        for key, judge, criterion, status, reason, raw in zip(
            keys, frame["judge"].tolist(), frame["criterion"].tolist(), frame["status"].tolist(),
            frame["reason"].tolist(), frame["raw_text"].tolist(),
        ):
            index[(key, str(judge), str(criterion))] = (
                str(status), None if is_missing(reason) else str(reason), None if is_missing(raw) else str(raw)
            )
    return index


def _judge_note(reason: str | None, raw: str | None) -> str | None:
    reason = plain_reason(reason) if reason else reason
    if reason and raw:
        return f"{reason}\n\n{raw}"
    return reason or raw


def _columns(judges: Sequence[str], with_lines: bool = False) -> list[Column]:
    columns = [
        Column("row", "Row", "cat", "Row"),
        Column("joined", "Line joined to a question", "cat", "Row"),
    ] if with_lines else []
    columns += [
        Column("dataset", "Dataset", "cat", "Cell", shown=True),
        Column("model", "Model", "cat", "Cell", shown=True),
        Column("strategy", "Strategy", "cat", "Cell", shown=True),
        Column("item_id", "Item", "cat", "Cell"),
        *([Column("line", "Votes file line", "text", "Cell")] if with_lines else []),
        Column("target_level", "Target level", "cat", "Bloom level", shown=True),
        Column("judged_level", "Judged level", "cat", "Bloom level", shown=True),
        Column("transition", "Level shift (judged vs target)", "cat", "Bloom level", shown=True, help=SHIFT_HELP),
        Column("identified_level", "Model's level of original (CoT)", "cat", "Bloom level"),
        Column("target_units", "Target units", "multi", "Knowledge units"),
        Column("judged_units", "Judged units", "multi", "Knowledge units"),
        Column("identified_units", "Model's units of original (CoT)", "multi", "Knowledge units"),
        Column("useful", "Usable", "cat", "Votes", shown=True),
        Column("unique", "Unique", "cat", "Votes"),
        Column("readable", "Readable", "cat", "Votes"),
        Column("answerable", "Answerable", "cat", "Votes"),
        Column("gate", "The gate: passed, or the criteria it flagged", "multi", "Diagnostics", help=GATE_HELP),
        Column("parse", "Generation parse", "cat", "Diagnostics",
               help="ok: a question was read from the model's answer; otherwise why none was"),
        Column("judge_issues", "Judge failures (parse or call)", "multi", "Diagnostics"),
        Column("judge_abstentions", "Judges not voting (abstain, by design)", "multi", "Diagnostics"),
        Column("finish_reason", "Why the model stopped writing", "cat", "Diagnostics", help=FINISH_HELP),
    ]
    for criterion in CRITERIA:
        for judge in judges:
            columns.append(Column(f"v.{judge}.{criterion}", f"{judge}: {CRITERION_LABEL[criterion]}", "cat",
                                  f"Judges: {CRITERION_LABEL[criterion]}"))
    for criterion in CRITERIA:
        columns.append(Column(f"agree.{criterion}", f"Agreement: {CRITERION_LABEL[criterion]}", "cat", "Agreement"))
    columns += [
        Column("original_question", "Original question", "text", "Text", shown=True),
        Column("new_question", "Generated question", "text", "Text", shown=True),
        Column("prompt_id", "Question ID (item:strategy)", "text", "Text", help=PROMPT_ID_HELP),
        Column("cell", "Cell (dataset/strategy/model)", "text", "Text"),
        Column("prompt_hash", "Prompt hash", "text", "Text"),
        Column("parse_error", "Parse note", "text", "Text"),
        Column("generation_raw", "Generation (raw, when not parsed)", "text", "Text"),
    ]
    columns += [
        Column(f"r.{judge}.{criterion}", f"{judge}: {CRITERION_LABEL[criterion]} (reason / answer)", "text", "Reasons")
        for judge in judges for criterion in CRITERIA
    ]
    columns += [Column(METRIC_COLUMN_PREFIX + spec.name, spec.label, "num", "Metrics") for spec in METRIC_SPECS]
    return columns


def _agreement(value: object) -> str:
    return NONE if is_missing(value) else f"{round(100 * float(value))}%"


@dataclass(frozen=True)
class GenerationNote:
    """What the generations add to an item: finish reason, parse note, raw answer (when not
    parsed) and the prompt's hash."""

    finish_reason: str | None = None
    parse_error: str | None = None
    raw_when_unparsed: str | None = None
    prompt_hash: str | None = None


def index_generations(generations: pd.DataFrame | None) -> dict[str, GenerationNote]:
    """"dataset/strategy/model/prompt_id" -> :class:`GenerationNote`."""
    if generations is None or generations.empty:
        return {}

    def text(value: object) -> str | None:
        return None if is_missing(value) else str(value)

    keys = generations["dataset"] + "/" + generations["strategy"] + "/" + generations["model"] + "/" + generations["prompt_id"]
    return {
        key: GenerationNote(text(finish), text(note), None if status == "ok" else text(raw), text(prompt_hash))
        for key, finish, note, status, raw, prompt_hash in zip(
            keys, generations["finish_reason"], generations["parse_error"], generations["parse_status"],
            generations["raw_text"], generations["prompt_hash"],
        )
    }


def _verdict_cells(
    row: Mapping[str, Any], item_key: str, panel: Sequence[str], judges: Sequence[str], judged: JudgmentIndex
) -> tuple[dict[str, Any], list[str]]:
    """Per judge and criterion, the verdict shown and the reason or raw answer; and this item's
    judge failures and abstentions, each "judge · criterion: why" (:func:`judge_issue`)."""
    out: dict[str, Any] = {}
    failures: set[str] = set()
    abstentions: set[str] = set()
    for criterion in CRITERIA:
        listed = row[f"{criterion}_votes"]
        cast = [] if listed is None or isinstance(listed, float) else list(listed)  # None: that judge cast no vote
        out[f"agree.{criterion}"] = _agreement(row[f"{criterion}_agreement"])
        for judge in judges:
            note = None
            if judge in panel:
                position = panel.index(judge)
                vote = cast[position] if position < len(cast) else None
                status, reason, answer = judged.get((item_key, judge, criterion), (None, None, None))
                note = _judge_note(reason, answer)
                missing = None if status is None else missing_vote(status, reason)
                text = _vote_text(criterion, vote) or _status_text(missing)
                if missing in FAILED_VOTES:
                    failures.add(judge_issue(judge, criterion, missing))
                elif missing in ("does not rate this", "abstains"):
                    abstentions.add(judge_issue(judge, criterion, missing))
            else:
                text = f"{NONE} not on this panel"
            out[f"v.{judge}.{criterion}"] = text
            out[f"r.{judge}.{criterion}"] = note
    out["judge_abstentions"] = sorted(abstentions) or ["none"]
    return out, sorted(failures) or ["none"]


def judge_issue(judge: str, criterion: str, missing: MissingVote) -> str:
    """A value of the ``judge_issues`` (failures) or ``judge_abstentions`` column: per judge and
    criterion, so that a facet's count of parse failures is the report's parse-failure rate
    times the questions asked."""
    return f"{judge} · {CRITERION_LABEL[criterion]}: {missing}"


def _item_cells(row: Mapping[str, Any], key: str, generation: GenerationNote, gate: Sequence[str],
                strategy_labels: StrategyLabels | None = None) -> dict[str, Any]:
    """Everything of one item but the judges' verdicts."""
    return {
        "cell": key, "dataset": str(row["dataset"]), "model": str(row["model"]), "item_id": str(row["item_id"]),
        "prompt_id": str(row["prompt_id"]), "strategy": strategy_label(str(row["strategy"]), strategy_labels),
        "target_level": _level(row["original_bloom_level"]),
        "judged_level": _level(row["bloom_level"], row["bloom_level_null_reason"]),
        "transition": transition(row["original_bloom_level"], row["bloom_level"], row["bloom_level_null_reason"]),
        "identified_level": _level(row["identified_bloom_level"]),
        "target_units": _as_list(row["original_knowledge_units"]),
        "judged_units": _as_list(row["knowledge_units"]) or [NONE],
        "identified_units": _as_list(row["identified_knowledge_units"]) or [NONE],
        # Usability counts an answer that holds no question as not usable: say so, not "—"
        "useful": (NO_QUESTION if is_missing(row["useful"]) and bool(row.get("answered"))
                   and row["parse_status"] == "failed" else _yes_no(row["useful"])),
        **{criterion: _yes_no(row[criterion]) for criterion in ("unique", "readable", "answerable")},
        "gate": list(gate) or ["passed"], "parse": str(row["parse_status"]),
        "finish_reason": FINISH_REASON_TEXT.get(generation.finish_reason or "", generation.finish_reason or NONE), "parse_error": generation.parse_error,
        "generation_raw": generation.raw_when_unparsed, "prompt_hash": generation.prompt_hash,
        "original_question": str(row["original_question"]),
        "new_question": None if is_missing(row["new_question"]) else str(row["new_question"]),
    }


def _line_cells(
    lines: pd.DataFrame, question_texts: Mapping[str, set[str]], panels: Mapping[str, Sequence[str]],
    judges: Sequence[str], gate: Mapping[str, Sequence[str]], columns: Sequence[Column],
    strategy_labels: StrategyLabels | None = None,
) -> list[dict[str, Any]]:
    """The rows of published vote lines (:data:`LINE_ROW`), in order; ``question_texts``: cell
    key -> the generated questions of its originals; ``panels`` and ``gate`` by cell key."""
    empty = {column.key: [] if column.kind == "multi" else None for column in columns}
    out = []
    for row in lines.to_dict("records"):
        key = cell_name(row["dataset"], row["strategy"], row["model"])
        joined = list(row["joined"])
        voted = {f"{criterion}_{part}": row.get(f"{criterion}_{part}") for criterion in CRITERIA
                 for part in ("votes", "agreement")}
        verdicts, _ = _verdict_cells(voted, "", panels[key], judges, {})
        out.append({
            **empty, **verdicts, "row": LINE_ROW, "cell": key, "dataset": str(row["dataset"]),
            "model": str(row["model"]), "strategy": strategy_label(str(row["strategy"]), strategy_labels), "line": str(row["line"]),
            "joined": _line_kind(joined, str(row["question"]), question_texts.get(key, set())),
            **{criterion: _yes_no(row[criterion]) for criterion in BINARY_CRITERIA},
            "judged_units": _as_list(row["knowledge_units"]) or [NONE],
            "gate": list(gate.get(key, [])) or ["passed"], "new_question": str(row["question"]),
        })
    return out


def _line_kind(joined: Sequence[str], text: str, question_texts: set[str]) -> str:
    """The ``joined`` value of a published line (:data:`JOINED` and the others)."""
    if joined:
        return JOINED
    if placeholder_reason(text):
        return PLACEHOLDER_LINE
    return REPEATED if text in question_texts else NO_ORIGINAL


def _checked_lines(lines: pd.DataFrame, keys: Sequence[str]) -> tuple[pd.DataFrame, list[str]]:
    """The published lines (index reset) and each one's cell key; a ValueError names what the
    explorer cannot show."""
    missing = [c for c in PUBLISHED_VOTE_LINES.names if c not in lines.columns]
    if missing:
        raise ValueError(f"explorer: the published lines lack columns {missing}")
    if lines["joined"].isna().any():
        raise ValueError("explorer: published lines without their join (published_vote_lines(run, votes) fills it)")
    lines = lines.reset_index(drop=True)
    line_keys = (lines["dataset"] + "/" + lines["strategy"] + "/" + lines["model"]).tolist()
    strays = sorted(set(line_keys) - set(keys))
    if strays:
        raise ValueError(f"explorer: published lines of cells without votes: {strays}")
    return lines, line_keys


def _line_of_question(lines: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(cell key, prompt_id) -> the published line whose votes the join gave the question."""
    return {
        (cell_name(dataset, strategy, model), str(prompt_id)): str(line)
        for dataset, strategy, model, line, joined in zip(
            lines["dataset"], lines["strategy"], lines["model"], lines["line"], lines["joined"]
        )
        for prompt_id in joined
    }


def _with_line_terms(
    terms_of: Mapping[str, np.ndarray], keys: Sequence[str], lines: pd.DataFrame, line_keys: Sequence[str]
) -> dict[str, np.ndarray]:
    """Every metric's terms over the questions then the lines: Table 4 of the cells that have
    lines counts those (:func:`bloomqg.metrics.quality.line_terms`), not their questions; no
    other metric counts a line."""
    on_lines = line_terms(lines)
    scored_on_lines = np.isin(np.asarray(keys, dtype=object), list(set(line_keys)))
    out = {}
    for name, terms in terms_of.items():
        if name in on_lines:
            numerator, member = on_lines[name]
            out[name] = np.concatenate([np.where(scored_on_lines, np.nan, terms),
                                        np.where(member, numerator.astype(np.float64), np.nan)])
        else:
            out[name] = np.concatenate([terms, np.full(len(lines), np.nan)])
    return out


def build_items(
    votes: pd.DataFrame,
    *,
    generations: pd.DataFrame | None = None,
    judgments: Sequence[pd.DataFrame] = (),
    reliability: pd.DataFrame | None = None,
    metrics: pd.DataFrame | None = None,
    cells: Mapping[str, Mapping[str, Any]] | None = None,
    lines: pd.DataFrame | None = None,
    strategy_labels: StrategyLabels | None = None,
) -> ItemTable:
    """The item table of a run's votes (``schemas.VOTES`` columns, any number of cells).

    ``generations`` adds the finish reason, the parse note, the prompt's hash and, for a
    question that was not parsed, the raw answer; ``judgments`` (one JUDGMENTS frame per judge
    and cell) each judge's status, reason and raw answer; ``reliability`` the judges' names and
    the α gate; ``metrics`` the values and ``n`` the explorer shows beside its own count;
    ``cells`` each cell's provenance. ``lines`` (an imported release's published vote lines,
    ``frames.PUBLISHED_VOTE_LINES``, gated as scored) adds a row per line after the questions,
    and the column ``row`` that tells the two kinds apart: Table 4's terms of those cells lie on
    the lines. ``strategy_labels`` ({name: label}) name the strategies in the ``strategy``
    column, as the report's links to the explorer do (:func:`~bloomqg.reporting.explorer.links.cell_filters`).
    """
    missing = [c for c in VOTES.names if c not in votes.columns]
    if missing:
        raise ValueError(f"explorer: the votes lack columns {missing}")
    if votes.empty:
        raise ValueError("explorer: the votes hold no generated question")
    votes = votes.reset_index(drop=True)
    keys = (votes["dataset"] + "/" + votes["strategy"] + "/" + votes["model"]).tolist()
    if pd.Series(list(zip(keys, votes["prompt_id"]))).duplicated().any():
        raise ValueError("explorer: the votes repeat a (cell, prompt_id)")
    judges_of = panel_judges(reliability, votes)
    judges = ordered_unique(name for names in judges_of.values() for name in names)
    gate = _gate_failures(reliability)
    judged = index_judgments(judgments)
    generation_of = index_generations(generations)

    if lines is not None:
        lines, line_keys = _checked_lines(lines, keys)
        line_of = _line_of_question(lines)

    columns = _columns(judges, with_lines=lines is not None)
    values: dict[str, list[Any]] = {column.key: [] for column in columns}
    # Plain per-column lists (DataFrame.to_dict("records") boxes every cell: 10x slower).
    lists = {name: votes[name].tolist() for name in VOTES.names}
    for position, key in enumerate(keys):
        row = {name: lists[name][position] for name in VOTES.names}
        item_key = f"{key}/{row['prompt_id']}"
        item = _item_cells(row, key, generation_of.get(item_key, GenerationNote()), gate.get(key, []), strategy_labels)
        verdicts, item["judge_issues"] = _verdict_cells(row, item_key, judges_of[key], judges, judged)
        if lines is not None:
            item.update(row=QUESTION_ROW, joined=None, line=line_of.get((key, str(row["prompt_id"]))))
        for name, value in {**item, **verdicts}.items():
            values[name].append(value)
    terms_of = _cell_terms(votes)
    if lines is not None:
        texts: dict[str, set[str]] = {}
        for key, text in zip(keys, lists["new_question"]):
            if not is_missing(text):
                texts.setdefault(key, set()).add(str(text))
        for item in _line_cells(lines, texts, judges_of, judges, gate, columns, strategy_labels):
            for name in values:
                values[name].append(item.get(name))
        terms_of = _with_line_terms(terms_of, keys, lines, line_keys)
    for name, terms in terms_of.items():
        values[METRIC_COLUMN_PREFIX + name] = [None if math.isnan(v) else float(v) for v in terms.tolist()]
    table = ItemTable(columns, values, judges=judges)
    table.cells = {key: dict(value) for key, value in (cells or {}).items()}
    table.strategy_labels = {name: strategy_label(name, strategy_labels) for name in ordered_unique(votes["strategy"])}
    flags = construction_flags(votes, judges_by_cell(reliability))
    table.metrics = metric_values(metrics, flags) if metrics is not None else {}
    table.metric_specs = {
        spec.name: {"label": spec.label, "kind": spec.kind, "scale": spec.scale, "decimals": spec.decimals,
                    "graded": spec.paired_outcome == "graded"}  # KnowCov: a mean of fractions, never "counted"
        for spec in METRIC_SPECS
    }
    return table


def metric_values(metrics: pd.DataFrame, flags: Sequence[ConstructionFlag] = ()) -> dict[str, dict[str, list[Any]]]:
    """cell key -> metric -> [value, n, ci_low, ci_high, gated, constructed] (null for NaN; gated:
    the value rests on a criterion the gate flagged in its cell, which the report marks †;
    constructed: ``flags`` fix the value by how the panel is built, which the report marks ‡)."""

    def plain(value: object) -> float | None:
        return None if is_missing(value) else float(value)  # type: ignore[arg-type]

    keys = [(str(row.model), str(row.dataset), str(row.strategy), str(row.metric))
            for row in metrics.itertuples(index=False)]
    gated = gated_cells(metrics)  # the values the report's tables mark †
    constructed = constructed_values(keys, flags)  # and ‡
    out: dict[str, dict[str, list[Any]]] = {}
    for key, row in zip(keys, metrics.itertuples(index=False)):
        out.setdefault(cell_name(row.dataset, row.strategy, row.model), {})[row.metric] = [
            plain(row.value), int(row.n), plain(row.ci_low), plain(row.ci_high), key in gated, key in constructed,
        ]
    return out

