"""Majority votes over a judge panel, per-item agreement, and Krippendorff's α with its gate.

Decisions (the paper says "majority voting across models" and "discard low-agreement cases
(Krippendorff's alpha < 0.7)"; this module pins the details down):

**Votes.** A judge's vote on a criterion is valid when its judgment row has status ``ok``;
parse failures, call errors, abstentions ("not judged by this backend") and missing questions
are no vote. A value wins when it has *more than half of the valid votes* and there are at least
``min_valid_votes`` (2) valid votes: with three judges and one parse failure, two agreeing votes
of two make a majority, a 1-1 split is a ``"tie"``, one lone vote is ``"fewer than 2 valid
votes"``. Bloom levels are voted as names (no averaging of ordinal weights). Knowledge units are
sets: a unit is in the voted set when more than half of the valid votes include it; an empty
result is null with ``"no unit has a majority"``. Agreement of an item = share of valid votes
equal to the voted value (for units: the same set).

**Useful** = unique ∧ readable ∧ answerable with three-valued logic: all three True -> True;
any definite False -> False (the paper's definition needs all three "yes", so one definite "no"
settles it even when another criterion is undecided); otherwise null.

**Krippendorff's α** per criterion over the cell (``krippendorff`` package; reliability data =
judges × items with a generated question, a missing vote is NaN): nominal for unique, readable,
answerable; ordinal for Bloom level over the value domain Remember..Create (weights 1..6, all
six levels in the domain whether observed or not); for knowledge units the sets are coded as
labels and compared with the Jaccard distance 1 − |A∩B|/|A∪B| (a custom distance, as in
Passonneau's set-valued α and NLTK's ``AnnotationTask``): one judge's {Stacks} against another's
{Stacks, Recursion} is half a disagreement, not a whole one. Its ``level_of_measurement`` is
recorded as ``"jaccard"``. The confidence interval is a percentile bootstrap over items.

α is NaN in two situations, told apart by ``n_items`` (the items with at least two valid votes):
``n_items == 0`` — no item has two votes, so there is no evidence of agreement, and the gate
*fails*; ``n_items > 0`` but every pairable vote has the same value — observed disagreement is
zero and α is 0/0; the gate *passes*, since nothing disagrees (gating perfect agreement away
would be absurd).

**Gate.** A criterion passes when α ≥ ``gate_alpha`` (or in the zero-variation case above).
When any criterion fails, every vote row of the cell gets ``alpha_gated`` True; with
``gate_action="drop"`` the failing criteria's votes (and agreement) also become null with
reason ``"alpha gate"`` and ``useful`` is recomputed; ``"flag"`` keeps them.

The reliability table has one panel row per criterion (``judge`` null: α, CI, gate) and one row
per judge and criterion: ``agreement_with_majority`` (share of the items with a majority and a
valid vote from the judge where the judge voted with the majority) and ``parse_failure_rate``
(share of the judge's rows for items with a question whose status is ``parse_failed``; call
errors and abstentions are not parse failures); their ``n_items`` counts the items with a
question, their α columns and ``gate_passed`` are null.
"""

from __future__ import annotations

import json
import logging
import math
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from bloomqg.bloom import BLOOM_LEVELS, LEVEL_WEIGHT, normalize_level
from bloomqg.schemas import (
    BINARY_CRITERIA,
    CRITERIA,
    GENERATIONS,
    JUDGMENTS,
    RELIABILITY,
    VOTES,
)

logger = logging.getLogger(__name__)

GATE_ACTIONS: tuple[str, ...] = ("flag", "drop")
#: Level of measurement of each criterion in the reliability table.
CRITERION_LEVEL: dict[str, str] = {
    "unique": "nominal",
    "readable": "nominal",
    "answerable": "nominal",
    "bloom_level": "ordinal",
    "knowledge_units": "jaccard",
}
_GENERATION_COLUMNS = (
    "prompt_id", "item_id", "dataset", "strategy", "model", "original_question",
    "original_bloom_level", "original_knowledge_units", "new_question", "identified_bloom_level",
    "identified_knowledge_units", "parse_status",
)

# -- encoding votes as strings (the *_votes columns) -------------------------------------------


def vote_string(criterion: str, value: Any) -> str:
    """A vote as stored in the ``*_votes`` columns: "1"/"0", a level name, or a JSON unit list."""
    if criterion in BINARY_CRITERIA:
        return "1" if bool(value) else "0"
    if criterion == "bloom_level":
        return str(value)
    return json.dumps(sorted(str(unit) for unit in value), ensure_ascii=False)


def _vote_value(criterion: str, vote: str) -> Any:
    """The inverse of :func:`vote_string` (units as a frozenset)."""
    if criterion in BINARY_CRITERIA:
        return vote == "1"
    if criterion == "bloom_level":
        return vote
    return frozenset(json.loads(vote))


# -- majorities ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Majority:
    """The voted value of one item on one criterion (``value`` None with a ``null_reason``)."""

    value: Any
    agreement: float | None
    null_reason: str | None


def majority(criterion: str, votes: Sequence[str | None], *, min_valid_votes: int = 2) -> Majority:
    """Strict majority of the valid (non-None) vote strings of one item on one criterion."""
    valid = [vote for vote in votes if vote is not None]
    if len(valid) < min_valid_votes:
        return Majority(None, None, f"fewer than {min_valid_votes} valid votes")
    if criterion == "knowledge_units":
        sets = [_vote_value(criterion, vote) for vote in valid]
        counts = Counter(unit for units in sets for unit in units)
        chosen = frozenset(unit for unit, count in counts.items() if count * 2 > len(valid))
        if not chosen:
            return Majority(None, None, "no unit has a majority")
        agreement = sum(units == chosen for units in sets) / len(valid)
        return Majority(sorted(chosen), agreement, None)
    counts = Counter(valid).most_common()
    top_vote, top_count = counts[0]
    if top_count * 2 > len(valid):
        return Majority(_vote_value(criterion, top_vote), top_count / len(valid), None)
    if len(counts) > 1 and counts[1][1] == top_count:
        return Majority(None, None, "tie")
    return Majority(None, None, "no value has a majority")


def useful_from(unique: bool | None, readable: bool | None, answerable: bool | None) -> bool | None:
    """Three-valued AND: False if any is False, True if all are True, else None."""
    values = (unique, readable, answerable)
    if any(value is False for value in values):
        return False
    if all(value is True for value in values):
        return True
    return None


# -- Krippendorff's alpha -----------------------------------------------------------------------


@dataclass(frozen=True)
class CodedVotes:
    """Votes as a judges × items matrix of codes (NaN = no vote) with their value domain."""

    codes: np.ndarray
    domain: np.ndarray
    level: str
    metric: str | Callable[..., np.ndarray]


def _pad(votes_lists: Sequence[Sequence[Any]]) -> list[list[Any]]:
    width = max((len(row) for row in votes_lists), default=0)
    return [list(row) + [None] * (width - len(row)) for row in votes_lists]


def _is_missing(vote: Any) -> bool:
    return vote is None or (isinstance(vote, float) and math.isnan(vote))


def encode_votes(votes_lists: Sequence[Sequence[Any]], level: str) -> CodedVotes:
    """Code items × judges votes for :mod:`krippendorff`.

    ``level``: ``"nominal"`` (any labels, compared as strings), ``"ordinal"`` (Bloom level names
    or 1..6, domain Remember..Create) or ``"jaccard"`` (JSON lists of units, Python sequences, or
    a plain unit name such as the release's ``topic_votes``, read as a one-unit set).
    """
    rows = _pad(votes_lists)
    n_items, n_judges = len(rows), (len(rows[0]) if rows else 0)
    codes = np.full((n_judges, n_items), np.nan)
    if level == "ordinal":
        for i, row in enumerate(rows):
            for j, vote in enumerate(row):
                if not _is_missing(vote):
                    name = normalize_level(vote, allow_uncategorized=False)
                    codes[j, i] = LEVEL_WEIGHT[name]
        return CodedVotes(codes, np.arange(1, len(BLOOM_LEVELS) + 1, dtype=float), level, "ordinal")
    if level == "nominal":
        labels = sorted({str(v) for row in rows for v in row if not _is_missing(v)})
        index = {label: k for k, label in enumerate(labels)}
        for i, row in enumerate(rows):
            for j, vote in enumerate(row):
                if not _is_missing(vote):
                    codes[j, i] = index[str(vote)]
        return CodedVotes(codes, np.arange(len(labels), dtype=float), level, "nominal")
    if level == "jaccard":
        def as_set(vote: Any) -> frozenset[str]:
            """A JSON list (our *_votes format), a sequence, or a plain unit name (one unit)."""
            units: Any = vote
            if isinstance(vote, str):
                try:
                    units = json.loads(vote)
                except json.JSONDecodeError:
                    units = [vote]
            if not isinstance(units, (list, tuple, set, frozenset)):
                units = [vote]
            return frozenset(str(unit) for unit in units)

        sets = sorted({as_set(v) for row in rows for v in row if not _is_missing(v)}, key=sorted)
        index = {units: k for k, units in enumerate(sets)}
        for i, row in enumerate(rows):
            for j, vote in enumerate(row):
                if not _is_missing(vote):
                    codes[j, i] = index[as_set(vote)]
        distance = np.array(
            [[1.0 - len(a & b) / len(a | b) if (a | b) else 0.0 for b in sets] for a in sets]
        )

        def jaccard_metric(v1, v2, i1, i2, n_v, dtype=np.float64):  # krippendorff's DistanceMetric
            return distance[i1, i2].astype(dtype)

        return CodedVotes(codes, np.arange(len(sets), dtype=float), level, jaccard_metric)
    raise ValueError(f"unknown level of measurement {level!r}; expected nominal, ordinal or jaccard")


def _value_counts(coded: CodedVotes) -> np.ndarray:
    """items × values: how many judges gave each value to each item."""
    return (coded.codes.T[..., None] == coded.domain[None, None, :]).sum(axis=1)


def _alpha_from_counts(counts: np.ndarray, coded: CodedVotes) -> float:
    """α from value counts; NaN when no item is pairable or when pairable votes never vary."""
    import krippendorff

    pairable = counts[counts.sum(axis=1) >= 2]
    if len(pairable) == 0 or len(coded.domain) < 2 or np.count_nonzero(pairable.sum(axis=0)) < 2:
        return float("nan")
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        value = krippendorff.alpha(
            value_counts=pairable, value_domain=coded.domain, level_of_measurement=coded.metric
        )
    return float(value)


@dataclass(frozen=True)
class AlphaResult:
    """α with its bootstrap interval; ``n_items`` counts the items with two or more votes."""

    alpha: float
    ci_low: float
    ci_high: float
    n_items: int

    @property
    def no_variation(self) -> bool:
        """α undefined although items are pairable: every pairable vote has the same value."""
        return math.isnan(self.alpha) and self.n_items > 0


def alpha_with_ci(
    coded: CodedVotes, *, n_resamples: int = 1000, confidence: float = 0.95, seed: int = 0
) -> AlphaResult:
    """Krippendorff's α and a percentile bootstrap CI from resampling items with replacement."""
    counts = _value_counts(coded)
    n_pairable = int((counts.sum(axis=1) >= 2).sum())
    point = _alpha_from_counts(counts, coded)
    if math.isnan(point) or n_resamples <= 0:
        return AlphaResult(point, float("nan"), float("nan"), n_pairable)
    rng = np.random.default_rng(seed)
    n_items = counts.shape[0]
    samples = np.array(
        [_alpha_from_counts(counts[rng.integers(0, n_items, n_items)], coded) for _ in range(n_resamples)]
    )
    samples = samples[~np.isnan(samples)]
    if samples.size == 0:
        return AlphaResult(point, float("nan"), float("nan"), n_pairable)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(samples, [tail, 100 - tail])
    return AlphaResult(point, float(low), float(high), n_pairable)


def alpha_from_votes(votes_lists: Sequence[Sequence[str | None]], level: str) -> float:
    """Krippendorff's α of items × judges votes (e.g. the release's ``*_votes`` lists).

    ``level`` is ``"nominal"``, ``"ordinal"`` (Bloom levels) or ``"jaccard"`` (unit lists); None
    (or NaN) is a missing vote. Returns NaN when α is undefined (no item with two votes, or no
    variation at all).
    """
    coded = encode_votes(votes_lists, level)
    return _alpha_from_counts(_value_counts(coded), coded)


# -- the cell -----------------------------------------------------------------------------------


def _check_inputs(generations: pd.DataFrame, judgments: Sequence[pd.DataFrame]) -> list[str]:
    missing = [c for c in GENERATIONS.names if c not in generations.columns]
    if missing:
        raise ValueError(f"vote_cell: generations frame lacks columns {missing}")
    if generations.empty:
        raise ValueError("vote_cell: the generations frame is empty (nothing to vote on)")
    if generations["prompt_id"].duplicated().any():
        raise ValueError("vote_cell: generations repeat a prompt_id")
    if not judgments:
        raise ValueError("vote_cell: no judgments given (the panel is empty)")
    names: list[str] = []
    expected = set(generations["prompt_id"])
    for position, frame in enumerate(judgments):
        missing = [c for c in JUDGMENTS.names if c not in frame.columns]
        if missing:
            raise ValueError(f"vote_cell: judgments #{position} lack columns {missing}")
        judge_names = frame["judge"].unique().tolist()
        if len(judge_names) != 1:
            raise ValueError(f"vote_cell: judgments #{position} hold judges {judge_names}; expected one")
        name = str(judge_names[0])
        if name in names:
            raise ValueError(f"vote_cell: judge {name!r} appears twice in the panel")
        names.append(name)
        keys = frame[["prompt_id", "criterion"]]
        if keys.duplicated().any():
            raise ValueError(f"vote_cell: judge {name!r} has repeated (prompt_id, criterion) rows")
        bad = sorted(set(frame["criterion"]) - set(CRITERIA))
        if bad:
            raise ValueError(f"vote_cell: judge {name!r} has unknown criteria {bad}")
        have = set(frame["prompt_id"])
        if have != expected or len(frame) != len(CRITERIA) * len(expected):
            raise ValueError(
                f"vote_cell: judge {name!r} does not cover the generations: "
                f"missing {sorted(expected - have)[:5]}, extra {sorted(have - expected)[:5]}, "
                f"{len(frame)} rows for {len(expected)} questions x {len(CRITERIA)} criteria"
            )
    return names


def _judge_votes(frame: pd.DataFrame) -> dict[tuple[str, str], tuple[str | None, str]]:
    """(prompt_id, criterion) -> (vote string or None, status)."""
    out: dict[tuple[str, str], tuple[str | None, str]] = {}
    for row in frame.itertuples(index=False):
        vote = None
        if row.status == "ok":
            value = {"bloom_level": row.value_level, "knowledge_units": row.value_units}.get(
                row.criterion, row.value_bool
            )
            if value is None or (isinstance(value, float) and math.isnan(value)):
                raise ValueError(
                    f"judge {row.judge!r}, {row.prompt_id} / {row.criterion}: status ok without a value"
                )
            vote = vote_string(row.criterion, value)
        out[(row.prompt_id, row.criterion)] = (vote, row.status)
    return out


def _column(values: list[Any], index: pd.Index) -> pd.Series:
    """An object column that keeps None and list cells as they are."""
    return pd.Series(values, index=index, dtype=object)


def vote_cell(
    generations: pd.DataFrame,
    judgments: Sequence[pd.DataFrame],
    *,
    gate_alpha: float = 0.7,
    gate_action: str = "flag",
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    min_valid_votes: int = 2,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Votes (``schemas.VOTES`` columns) and reliability (``schemas.RELIABILITY``) of one cell.

    ``judgments`` holds one JUDGMENTS frame per judge; their order is the order of the votes in
    the ``*_votes`` columns. See the module docstring for the rules.
    """
    if gate_action not in GATE_ACTIONS:
        raise ValueError(f"vote_cell: gate_action {gate_action!r} is not one of {list(GATE_ACTIONS)}")
    if not 0 < confidence < 1:
        raise ValueError(f"vote_cell: confidence must be in (0, 1), got {confidence}")
    judge_names = _check_inputs(generations, judgments)
    per_judge = [_judge_votes(frame) for frame in judgments]
    generations = generations.reset_index(drop=True)
    prompt_ids = generations["prompt_id"].tolist()

    votes = generations[list(_GENERATION_COLUMNS)].copy()
    votes["n_judges"] = len(judge_names)
    majorities: dict[str, list[Majority]] = {}
    vote_strings: dict[str, list[list[str | None]]] = {}
    # Items with a generated question (some judge was asked): they make the reliability data.
    judged_items: dict[str, list[bool]] = {}
    for criterion in CRITERIA:
        rows_votes, rows_majority, rows_judged = [], [], []
        for prompt_id in prompt_ids:
            entries = [table[(prompt_id, criterion)] for table in per_judge]
            item_votes = [vote for vote, _ in entries]
            judged = any(status != "no_question" for _, status in entries)
            result = majority(criterion, item_votes, min_valid_votes=min_valid_votes)
            if not judged:
                result = Majority(None, None, "no question")
            rows_votes.append(item_votes)
            rows_majority.append(result)
            rows_judged.append(judged)
        majorities[criterion], vote_strings[criterion] = rows_majority, rows_votes
        judged_items[criterion] = rows_judged

    # Reliability: α per criterion over the judged items, then the gate.
    reliability_rows: list[dict[str, Any]] = []
    gate_failed: list[str] = []
    cell = {key: (generations[key].iloc[0] if len(generations) else None)
            for key in ("dataset", "strategy", "model")}
    for criterion in CRITERIA:
        level = CRITERION_LEVEL[criterion]
        judged_votes = [v for v, j in zip(vote_strings[criterion], judged_items[criterion]) if j]
        coded = encode_votes(judged_votes, level) if judged_votes else None
        result = (
            alpha_with_ci(coded, n_resamples=n_resamples, confidence=confidence, seed=seed)
            if coded is not None and coded.codes.size
            else AlphaResult(float("nan"), float("nan"), float("nan"), 0)
        )
        passed = result.no_variation or (not math.isnan(result.alpha) and result.alpha >= gate_alpha)
        if not passed:
            gate_failed.append(criterion)
        logger.info(
            "%s: alpha=%.3f [%.3f, %.3f] over %d pairable items (%s)%s",
            criterion, result.alpha, result.ci_low, result.ci_high, result.n_items, level,
            "" if passed else f" -> below gate {gate_alpha}, action {gate_action}",
        )
        common = {**cell, "criterion": criterion, "level_of_measurement": level,
                  "n_judges": len(judge_names), "gate_threshold": float(gate_alpha),
                  "gate_action": gate_action}
        reliability_rows.append({
            **common, "judge": None, "alpha": result.alpha, "alpha_ci_low": result.ci_low,
            "alpha_ci_high": result.ci_high, "n_items": result.n_items, "gate_passed": passed,
            "agreement_with_majority": None, "parse_failure_rate": None,
        })
        for position, name in enumerate(judge_names):
            with_majority = agree = asked = failed = 0
            for item, (item_votes, judged) in enumerate(zip(vote_strings[criterion], judged_items[criterion])):
                if not judged:
                    continue
                asked += 1
                failed += per_judge[position][(prompt_ids[item], criterion)][1] == "parse_failed"
                voted, vote = majorities[criterion][item], item_votes[position]
                if voted.null_reason is None and vote is not None:
                    with_majority += 1
                    agree += _vote_value(criterion, vote) == (
                        frozenset(voted.value) if criterion == "knowledge_units" else voted.value
                    )
            reliability_rows.append({
                **common, "judge": name, "alpha": None, "alpha_ci_low": None, "alpha_ci_high": None,
                "n_items": asked, "gate_passed": None,
                "agreement_with_majority": agree / with_majority if with_majority else None,
                "parse_failure_rate": failed / asked if asked else None,
            })

    for criterion in CRITERIA:
        results = majorities[criterion]
        if gate_action == "drop" and criterion in gate_failed:
            results = [Majority(None, None, "alpha gate") for _ in results]
        votes[criterion] = _column([r.value for r in results], votes.index)
        votes[f"{criterion}_votes"] = _column(vote_strings[criterion], votes.index)
        votes[f"{criterion}_agreement"] = _column([r.agreement for r in results], votes.index)
        votes[f"{criterion}_null_reason"] = _column([r.null_reason for r in results], votes.index)
    votes["useful"] = _column(
        [useful_from(u, r, a) for u, r, a in zip(votes["unique"], votes["readable"], votes["answerable"])],
        votes.index,
    )
    votes["alpha_gated"] = bool(gate_failed)
    votes = votes[VOTES.names].reset_index(drop=True)
    reliability = pd.DataFrame.from_records(reliability_rows, columns=RELIABILITY.names)
    return votes, reliability
