"""One cell's votes and reliability tables: collect the panel's votes, take majorities, measure
α per criterion and apply the gate, then build the ``VOTES`` and ``RELIABILITY`` columns.

The rules are in :mod:`bloomqg.voting`; majorities in :mod:`~bloomqg.voting.majority`, α in
:mod:`~bloomqg.voting.alpha`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from bloomqg.schemas import CRITERIA, GENERATION_COST_COLUMNS, GENERATIONS, JUDGMENTS, RELIABILITY, VOTES
from bloomqg.voting.alpha import CRITERION_LEVEL, AlphaResult, alpha_with_ci, encode_votes
from bloomqg.voting.majority import Majority, majority, useful_from, vote_string, vote_value

logger = logging.getLogger(__name__)

GATE_ACTIONS: tuple[str, ...] = ("flag", "drop")
_GENERATION_COLUMNS = (
    "prompt_id", "item_id", "dataset", "strategy", "model", "original_question",
    "original_bloom_level", "original_knowledge_units", "new_question", "identified_bloom_level",
    "identified_knowledge_units", "parse_status",
)
#: A judge's table: (prompt_id, criterion) -> (vote string or None, status).
JudgeVotes = dict[tuple[str, str], tuple[str | None, str]]

# -- checking and reading the panel --------------------------------------------------------------


def check_inputs(generations: pd.DataFrame, judgments: Sequence[pd.DataFrame]) -> list[str]:
    """The panel's judge names, in order, after checking that every judge covers every question
    once per criterion (a ValueError names the judge and what is wrong)."""
    missing = [c for c in GENERATIONS.names if c not in generations.columns and c not in GENERATION_COST_COLUMNS]
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
        missing = [c for c in JUDGMENTS.names if c not in frame.columns and c != "cache_key"]
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


def judge_votes(frame: pd.DataFrame) -> JudgeVotes:
    """One judge's JUDGMENTS rows as (prompt_id, criterion) -> (vote string or None, status)."""
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


# -- majorities per criterion -------------------------------------------------------------------


@dataclass(frozen=True)
class CriterionVotes:
    """One criterion's votes over the cell's items (item order), judges in panel order.

    ``judged[i]``: some judge was asked about item ``i`` (it has a generated question); those
    items make the reliability data.
    """

    criterion: str
    votes: list[list[str | None]]
    statuses: list[list[str]]
    judged: list[bool]
    majorities: list[Majority]

    def judged_votes(self) -> list[list[str | None]]:
        return [votes for votes, judged in zip(self.votes, self.judged) if judged]


def collect_votes(
    criterion: str, prompt_ids: Sequence[str], per_judge: Sequence[JudgeVotes], *, min_valid_votes: int
) -> CriterionVotes:
    """Every judge's vote on ``criterion`` for each item, and the item's majority."""
    votes, statuses, judged, majorities = [], [], [], []
    for prompt_id in prompt_ids:
        entries = [table[(prompt_id, criterion)] for table in per_judge]
        item_votes = [vote for vote, _ in entries]
        item_statuses = [status for _, status in entries]
        asked = any(status != "no_question" for status in item_statuses)
        result = majority(criterion, item_votes, min_valid_votes=min_valid_votes)
        votes.append(item_votes)
        statuses.append(item_statuses)
        judged.append(asked)
        majorities.append(result if asked else Majority(None, None, "no question"))
    return CriterionVotes(criterion, votes, statuses, judged, majorities)


# -- reliability and the gate -------------------------------------------------------------------


def criterion_alpha(
    collected: CriterionVotes, *, n_resamples: int, confidence: float, seed: int
) -> AlphaResult:
    """α of one criterion over the judged items (NaN with ``n_items`` 0 when none is judged)."""
    judged_votes = collected.judged_votes()
    coded = encode_votes(judged_votes, CRITERION_LEVEL[collected.criterion]) if judged_votes else None
    if coded is None or not coded.codes.size:
        return AlphaResult(float("nan"), float("nan"), float("nan"), 0)
    return alpha_with_ci(coded, n_resamples=n_resamples, confidence=confidence, seed=seed)


def gate_passes(result: AlphaResult, gate_alpha: float) -> bool:
    """α at or above the gate, or no variation at all among pairable votes."""
    return result.no_variation or (not math.isnan(result.alpha) and result.alpha >= gate_alpha)


@dataclass(frozen=True)
class JudgeReliability:
    """How one judge relates to the panel on one criterion (the RELIABILITY per-judge row)."""

    n_items: int
    agreement_with_majority: float | None
    parse_failure_rate: float | None


def judge_reliability(collected: CriterionVotes, position: int) -> JudgeReliability:
    """Agreement with the majority and parse-failure rate of the judge at ``position``, over
    the items with a question."""
    with_majority = agree = asked = failed = 0
    for item_votes, statuses, judged, voted in zip(
        collected.votes, collected.statuses, collected.judged, collected.majorities
    ):
        if not judged:
            continue
        asked += 1
        failed += statuses[position] == "parse_failed"
        vote = item_votes[position]
        if voted.null_reason is None and vote is not None:
            with_majority += 1
            expected = frozenset(voted.value) if collected.criterion == "knowledge_units" else voted.value
            agree += vote_value(collected.criterion, vote) == expected
    return JudgeReliability(
        asked,
        agree / with_majority if with_majority else None,
        failed / asked if asked else None,
    )


def reliability_rows(
    collected: CriterionVotes,
    result: AlphaResult,
    passed: bool,
    judge_names: Sequence[str],
    common: dict[str, Any],
) -> list[dict[str, Any]]:
    """RELIABILITY rows of one criterion: the panel row (α, CI, gate), then one per judge."""
    rows = [{
        **common, "judge": None, "alpha": result.alpha, "alpha_ci_low": result.ci_low,
        "alpha_ci_high": result.ci_high, "n_items": result.n_items, "gate_passed": passed,
        "agreement_with_majority": None, "parse_failure_rate": None,
    }]
    for position, name in enumerate(judge_names):
        judge = judge_reliability(collected, position)
        rows.append({
            **common, "judge": name, "alpha": None, "alpha_ci_low": None, "alpha_ci_high": None,
            "n_items": judge.n_items, "gate_passed": None,
            "agreement_with_majority": judge.agreement_with_majority,
            "parse_failure_rate": judge.parse_failure_rate,
        })
    return rows


# -- the VOTES columns --------------------------------------------------------------------------


def _column(values: list[Any], index: pd.Index) -> pd.Series:
    """An object column that keeps None and list cells as they are."""
    return pd.Series(values, index=index, dtype=object)


def add_vote_columns(votes: pd.DataFrame, collected: CriterionVotes, *, dropped: bool) -> None:
    """The criterion's voted value, votes, agreement and null reason (all null with reason
    ``"alpha gate"`` when the gate ``dropped`` it)."""
    criterion = collected.criterion
    results = collected.majorities
    if dropped:
        results = [Majority(None, None, "alpha gate") for _ in results]
    votes[criterion] = _column([r.value for r in results], votes.index)
    votes[f"{criterion}_votes"] = _column(collected.votes, votes.index)
    votes[f"{criterion}_agreement"] = _column([r.agreement for r in results], votes.index)
    votes[f"{criterion}_null_reason"] = _column([r.null_reason for r in results], votes.index)


def add_useful_column(votes: pd.DataFrame) -> None:
    """``useful`` from the voted unique, readable and answerable (three-valued AND)."""
    votes["useful"] = _column(
        [useful_from(u, r, a) for u, r, a in zip(votes["unique"], votes["readable"], votes["answerable"])],
        votes.index,
    )


# -- the cell -----------------------------------------------------------------------------------


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
    the ``*_votes`` columns. See :mod:`bloomqg.voting` for the rules.
    """
    if gate_action not in GATE_ACTIONS:
        raise ValueError(f"vote_cell: gate_action {gate_action!r} is not one of {list(GATE_ACTIONS)}")
    if not 0 < confidence < 1:
        raise ValueError(f"vote_cell: confidence must be in (0, 1), got {confidence}")
    judge_names = check_inputs(generations, judgments)
    per_judge = [judge_votes(frame) for frame in judgments]
    generations = generations.reset_index(drop=True)
    prompt_ids = generations["prompt_id"].tolist()
    collected = {
        criterion: collect_votes(criterion, prompt_ids, per_judge, min_valid_votes=min_valid_votes)
        for criterion in CRITERIA
    }

    cell = {key: generations[key].iloc[0] for key in ("dataset", "strategy", "model")}
    rows: list[dict[str, Any]] = []
    gate_failed: list[str] = []
    for criterion in CRITERIA:
        level = CRITERION_LEVEL[criterion]
        result = criterion_alpha(collected[criterion], n_resamples=n_resamples, confidence=confidence, seed=seed)
        passed = gate_passes(result, gate_alpha)
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
        rows += reliability_rows(collected[criterion], result, passed, judge_names, common)

    votes = generations[list(_GENERATION_COLUMNS)].copy()
    votes["n_judges"] = len(judge_names)
    for criterion in CRITERIA:
        add_vote_columns(votes, collected[criterion], dropped=gate_action == "drop" and criterion in gate_failed)
    add_useful_column(votes)
    votes["alpha_gated"] = bool(gate_failed)
    votes = votes[VOTES.names].reset_index(drop=True)
    reliability = pd.DataFrame.from_records(rows, columns=RELIABILITY.names)
    return votes, reliability
