"""One cell's votes and reliability tables: collect the panel's votes, take majorities, measure
α per criterion and apply the gate, then build the ``VOTES`` and ``RELIABILITY`` columns.

The rules are in :mod:`bloomqg.voting`; majorities in :mod:`~bloomqg.voting.majority`, α in
:mod:`~bloomqg.voting.alpha`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from bloomqg.inputs.parsing import answered
from bloomqg.store.frames import (BINARY_CRITERIA, CRITERIA, GENERATION_COST_COLUMNS, GENERATIONS, JUDGMENTS,
                                  POSTERIOR_CRITERIA, RELIABILITY, STATUS_NO_QUESTION, VOTES)
from bloomqg.voting.agreement import GATE_COEFFICIENTS, AgreementResult, GateDecision, agreement_with_ci, gate_decision, nominal_rows
from bloomqg.voting.alpha import CRITERION_LEVEL, AlphaResult, alpha_with_ci, encode_votes
from bloomqg.voting.dawid_skene import DawidSkeneFit, fit_dawid_skene
from bloomqg.voting.diagnostics import JUDGE_DIAGNOSTIC_COLUMNS, effective_judges, judge_diagnostics, varying_positions
from bloomqg.voting.majority import Majority, majority, useful_from, vote_string, vote_value

logger = logging.getLogger(__name__)

GATE_ACTIONS: tuple[str, ...] = ("flag", "drop")
AGGREGATIONS: tuple[str, ...] = ("majority", "dawid_skene")
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
        missing = [c for c in JUDGMENTS.names if c not in frame.columns and c not in ("cache_key", "choice_probs")]
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
        asked = any(status != STATUS_NO_QUESTION for status in item_statuses)
        result = majority(criterion, item_votes, min_valid_votes=min_valid_votes)
        votes.append(item_votes)
        statuses.append(item_statuses)
        judged.append(asked)
        majorities.append(result if asked else Majority(None, None, "no question"))
    return CriterionVotes(criterion, votes, statuses, judged, majorities)


# -- reliability and the gate -------------------------------------------------------------------


@dataclass(frozen=True)
class CriterionReliability:
    """Everything measured on one criterion's votes: α, agreement and AC1, the gate, the
    Dawid–Skene fit, the effective number of judges and the per-judge diagnostics."""

    alpha: AlphaResult
    agreement: AgreementResult
    decision: GateDecision
    fit: DawidSkeneFit | None
    n_effective_judges: float | None
    judges: list[dict[str, Any]]
    n_varying_judges: int

    @property
    def passed(self) -> bool:
        return self.decision.passed

    def panel_columns(self, aggregation: str) -> dict[str, Any]:
        """The panel row's agreement columns; ``gate_coefficient`` is the one the gate compared
        (AC1 where the prevalence rule took it), ``gate_status`` its outcome, ``gate_reason`` why it
        was not measured."""
        a = self.agreement
        return {
            "gate_coefficient": self.decision.coefficient, "gate_status": self.decision.status,
            "gate_reason": self.decision.why or None,
            "percent_agreement": a.percent_agreement,
            "percent_agreement_ci_low": a.percent_agreement_ci_low,
            "percent_agreement_ci_high": a.percent_agreement_ci_high,
            "unanimous_share": a.unanimous_share, "prevalence": a.prevalence,
            "majority_category": a.majority_category, "ac1": a.ac1, "ac1_ci_low": a.ac1_ci_low,
            "ac1_ci_high": a.ac1_ci_high, "n_effective_judges": self.n_effective_judges,
            "n_varying_judges": self.n_varying_judges, "n_items_rare_agreed": a.n_items_rare_agreed,
            "aggregation": aggregation,
        }


def measure_criterion(
    criterion: str,
    votes_lists: Sequence[Sequence[str | None]],
    judge_names: Sequence[str],
    *,
    gate_coefficient: str = "alpha",
    gate_threshold: float = 0.7,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> CriterionReliability:
    """α, agreement, AC1, the gate, Dawid–Skene and per-judge diagnostics of one criterion's
    items × judges vote strings (the judged items only; None = no vote)."""
    level = CRITERION_LEVEL[criterion]
    if votes_lists and any(v is not None for row in votes_lists for v in row):
        coded = encode_votes(votes_lists, level)
        alpha = alpha_with_ci(coded, n_resamples=n_resamples, confidence=confidence, seed=seed)
    else:
        alpha = AlphaResult(float("nan"), float("nan"), float("nan"), 0)
    agreement = agreement_with_ci(
        votes_lists, criterion, level, n_resamples=n_resamples, confidence=confidence, seed=seed
    )
    binary = criterion in BINARY_CRITERIA
    votes_lists = nominal_rows(votes_lists, criterion, level)  # "1"/"0", level names, "a|b" unit sets
    varying = varying_positions(votes_lists, len(judge_names))
    decision = gate_decision(gate_coefficient, alpha.alpha, agreement.ac1, agreement.prevalence, gate_threshold,
                             n_items=alpha.n_items, n_varying_judges=len(varying),
                             n_items_rare_agreed=agreement.n_items_rare_agreed, alpha_ci_low=alpha.ci_low,
                             alpha_ci_high=alpha.ci_high)
    fit = None
    if alpha.n_items:
        fit = fit_dawid_skene(votes_lists, labels=["0", "1"] if binary else None)
    judges = [
        judge_diagnostics(votes_lists, position, fit, binary=binary, judge_names=judge_names,
                          confidence=confidence).columns()
        for position in range(len(judge_names))
    ]
    return CriterionReliability(alpha, agreement, decision, fit, effective_judges(votes_lists, fit, varying), judges,
                                len(varying))


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
    measured: CriterionReliability,
    judge_names: Sequence[str],
    common: dict[str, Any],
) -> list[dict[str, Any]]:
    """RELIABILITY rows of one criterion: the panel row (α, AC1, agreement, gate), then one per
    judge (agreement with the majority, parse failures, diagnostics)."""
    result = measured.alpha
    empty_judge = dict.fromkeys(JUDGE_DIAGNOSTIC_COLUMNS)
    panel_extra = measured.panel_columns(common["aggregation"])
    rows = [{
        **common, **panel_extra, **empty_judge, "judge": None, "alpha": result.alpha,
        "alpha_ci_low": result.ci_low, "alpha_ci_high": result.ci_high, "n_items": result.n_items,
        "gate_passed": measured.passed, "agreement_with_majority": None, "parse_failure_rate": None,
    }]
    for position, name in enumerate(judge_names):
        judge = judge_reliability(collected, position)
        rows.append({
            **common, **dict.fromkeys(panel_extra), **measured.judges[position],
            "gate_coefficient": common["gate_coefficient"], "aggregation": common["aggregation"],
            "judge": name, "alpha": None, "alpha_ci_low": None, "alpha_ci_high": None,
            "n_items": judge.n_items, "gate_passed": None,
            "agreement_with_majority": judge.agreement_with_majority,
            "parse_failure_rate": judge.parse_failure_rate,
        })
    return rows


def dawid_skene_majorities(collected: CriterionVotes, fit: DawidSkeneFit | None, *, min_valid_votes: int) -> tuple[list[Majority], list[float | None]]:
    """The criterion's voted values under Dawid–Skene: each judged item with enough valid votes
    takes its most probable label, with the share of valid votes agreeing and the posterior."""
    majorities, posteriors = [], []
    judged_index = 0
    for votes, judged, voted in zip(collected.votes, collected.judged, collected.majorities):
        if not judged:
            majorities.append(voted)
            posteriors.append(None)
            continue
        label, probability = fit.label_of(judged_index) if fit is not None else (None, None)
        judged_index += 1
        valid = [vote for vote in votes if vote is not None]
        if label is None or len(valid) < min_valid_votes:
            majorities.append(voted)
            posteriors.append(None)
            continue
        majorities.append(Majority(vote_value(collected.criterion, label), sum(v == label for v in valid) / len(valid), None))
        posteriors.append(probability)
    return majorities, posteriors


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


def vote_options(gate: Mapping[str, Any], vote: Mapping[str, Any], bootstrap: Mapping[str, Any],
                 seed: int) -> dict[str, Any]:
    """:func:`vote_cell`'s keyword arguments from the config's ``gate``, ``vote`` and
    ``bootstrap`` sections and its seed (the rule scripts that vote pass them on)."""
    return {"gate_alpha": gate["threshold"], "gate_action": gate["action"], "gate_coefficient": gate["coefficient"],
            "aggregation": vote["aggregation"], "n_resamples": bootstrap["n_resamples"],
            "confidence": bootstrap["confidence"], "seed": seed}


def vote_cell(
    generations: pd.DataFrame,
    judgments: Sequence[pd.DataFrame],
    *,
    gate_alpha: float = 0.7,
    gate_action: str = "flag",
    gate_coefficient: str = "alpha",
    aggregation: str = "majority",
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    min_valid_votes: int = 2,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Votes (``schemas.VOTES`` columns) and reliability (``schemas.RELIABILITY``) of one cell.

    ``judgments`` holds one JUDGMENTS frame per judge; their order is the order of the votes in
    the ``*_votes`` columns. ``gate_alpha`` is the gate's threshold on ``gate_coefficient``
    (``"alpha"`` or ``"ac1"``); ``aggregation`` is ``"majority"`` or ``"dawid_skene"``. See
    :mod:`bloomqg.voting` for the rules.
    """
    if gate_action not in GATE_ACTIONS:
        raise ValueError(f"vote_cell: gate_action {gate_action!r} is not one of {list(GATE_ACTIONS)}")
    if gate_coefficient not in GATE_COEFFICIENTS:
        raise ValueError(f"vote_cell: gate coefficient {gate_coefficient!r} is not one of {list(GATE_COEFFICIENTS)}")
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"vote_cell: aggregation {aggregation!r} is not one of {list(AGGREGATIONS)}")
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
    posteriors: dict[str, list[float | None]] = {}
    for criterion in CRITERIA:
        level = CRITERION_LEVEL[criterion]
        measured = measure_criterion(
            criterion, collected[criterion].judged_votes(), judge_names, gate_coefficient=gate_coefficient,
            gate_threshold=gate_alpha, n_resamples=n_resamples, confidence=confidence, seed=seed,
        )
        result = measured.alpha
        if not measured.passed:
            gate_failed.append(criterion)
        logger.info(
            "%s: alpha=%.3f [%.3f, %.3f], AC1=%.3f, agreement=%.3f, prevalence=%.3f over %d pairable items (%s)%s",
            criterion, result.alpha, result.ci_low, result.ci_high, measured.agreement.ac1,
            measured.agreement.percent_agreement, measured.agreement.prevalence, result.n_items, level,
            "" if measured.passed else f" -> gate: {measured.decision.status} ({measured.decision.coefficient}"
            f"{', ' + measured.decision.why if measured.decision.why else ''}), action {gate_action}",
        )
        if aggregation == "dawid_skene" and criterion in POSTERIOR_CRITERIA:
            voted, posteriors[criterion] = dawid_skene_majorities(
                collected[criterion], measured.fit, min_valid_votes=min_valid_votes
            )
            collected[criterion] = CriterionVotes(
                criterion, collected[criterion].votes, collected[criterion].statuses,
                collected[criterion].judged, voted,
            )
        common = {**cell, "criterion": criterion, "level_of_measurement": level,
                  "n_judges": len(judge_names), "gate_threshold": float(gate_alpha),
                  "gate_action": gate_action, "gate_coefficient": gate_coefficient,
                  "aggregation": aggregation if criterion in POSTERIOR_CRITERIA else "majority"}
        rows += reliability_rows(collected[criterion], measured, judge_names, common)

    votes = generations[list(_GENERATION_COLUMNS)].copy()
    votes["answered"] = [answered(text) for text in generations["raw_text"]]
    votes["n_judges"] = len(judge_names)
    for criterion in CRITERIA:
        add_vote_columns(votes, collected[criterion], dropped=gate_action == "drop" and criterion in gate_failed)
    add_useful_column(votes)
    votes["alpha_gated"] = bool(gate_failed)
    votes["aggregation"] = aggregation
    for criterion in POSTERIOR_CRITERIA:
        dropped = gate_action == "drop" and criterion in gate_failed
        values = posteriors.get(criterion, [None] * len(votes))
        votes[f"{criterion}_posterior"] = _column([None if dropped else v for v in values], votes.index)
    votes = votes[VOTES.names].reset_index(drop=True)
    reliability = pd.DataFrame.from_records(rows, columns=RELIABILITY.names)
    return votes, reliability
