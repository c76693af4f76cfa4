"""The study's answer: one verdict per planned comparison × headline metric × model × dataset,
decided in an order that puts the instrument before the test (``results/metrics/answer.parquet``).

A significance test on votes the judges cannot give reliably is not evidence of "no difference",
and a test on six pairs cannot show one: an evaluation says so before it says anything else (the
GRADE practice of rating the certainty of evidence before its direction). For each row of the
paired table (:mod:`bloomqg.metrics.paired`):

1. **Can the panel measure it here?** The criteria behind the metric (:func:`measured_criteria`:
   Bloom level for CatCons, knowledge units for KnowCov, unique / readable / answerable for
   Usability) must be rated reliably in *both* cells of the pair, by the gate's rule
   (:func:`bloomqg.voting.agreement.gate_decision`: α, or AC1 where one category holds ≥ 90% of the
   votes). One unreliable criterion → ``cannot_tell``, reason ``judges_disagree``. Then a
   criterion whose agreement the study's own votes could not measure (every vote the same, one
   judge's votes varying, agreement beyond chance not shown, no question with two votes) →
   ``cannot_tell``, reason ``agreement_not_measured``: a panel that cannot show it tells
   questions apart cannot show that two strategies differ, nor that they do not. An imported
   release that publishes no per-judge votes (the paper's Bloom levels, :data:`NO_JUDGE_VOTES`)
   is the one exception: its verdict rests on its publisher's panel, and the row says so.
2. **Is there enough data?** The study plan's minimum detectable difference (``mdd``, at the
   plan's power after Holm) above :attr:`AnswerSpec.max_detectable` points, or no pair at all →
   ``cannot_tell``, reason ``too_few_pairs``, with the items per cell that would detect the
   plan's difference (config ``plan.difference``: the study plan's ``n_needed``).
3. **Only then the test**: Holm-adjusted p below :attr:`AnswerSpec.significance` → ``higher`` or
   ``lower`` (strategy b against a); an interval that excludes 0 while Holm's p does not reach the
   level → ``cannot_tell``, reason ``borderline`` (the two disagree only through the family
   adjustment); otherwise ``no_difference``, bounded by the interval's far end, where that bound
   is within :attr:`AnswerSpec.max_detectable` (a wider interval rules nothing out: ``too_few_pairs``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from bloomqg.metrics.paired import DEFAULT_PAIRED_METRICS, SIGNIFICANCE
from bloomqg.metrics.plan import items_needed
from bloomqg.metrics.registry import metric_spec
from bloomqg.metrics.rows import USEFUL_CRITERIA
from bloomqg.voting.agreement import NO_JUDGE_VOTES, NOT_MEASURED, RELIABLE, UNRELIABLE, recorded_decision

HIGHER, LOWER, NO_DIFFERENCE, CANNOT_TELL = "higher", "lower", "no_difference", "cannot_tell"
#: The verdicts, in the order a summary counts them.
VERDICTS: tuple[str, ...] = (HIGHER, LOWER, NO_DIFFERENCE, CANNOT_TELL)
#: Why a verdict is what it is.
REASONS: tuple[str, ...] = ("judges_disagree", "agreement_not_measured", "too_few_pairs", "borderline", "significant", "no_difference")
#: The reasons that stop a verdict at the panel, before the power and the test (its numbers rest on votes the gate flagged).
PANEL_REASONS: tuple[str, ...] = REASONS[:2]

ANSWER_COLUMNS: tuple[str, ...] = (
    "model", "dataset", "metric", "strategy_a", "strategy_b", "verdict", "reason", "value_a", "value_b", "diff",
    "ci_low", "ci_high",
    "n_pairs", "p_value", "p_adjusted", "family_size", "significance", "planned", "mdd", "max_detectable", "target_difference", "n_needed_target",
    "n_needed_verdict", "n_items", "no_difference_bound",
    "criteria", "reliability_status", "reliability_coefficient", "reliability_value", "reliability_threshold",
    "reliability_cell", "reliability_why", "reliability_unmeasured", "reliability_unreliable",
)


@dataclass(frozen=True)
class AnswerSpec:
    """Config ``answer:``: when a comparison has too few pairs to answer, and the test's level.
    (The difference whose items per cell a ``too_few_pairs`` verdict names is the study plan's,
    ``plan.difference``: one setting for what a study should be able to detect.)"""

    #: A comparison whose minimum detectable difference exceeds this (points) cannot tell.
    max_detectable: float = 20.0
    #: Holm-adjusted p below this is a difference.
    significance: float = SIGNIFICANCE

    @classmethod
    def from_config(cls, answer: dict | None) -> AnswerSpec:
        answer = answer or {}
        return cls(max_detectable=float(answer.get("max_detectable_difference", cls.max_detectable)),
                   significance=float(answer.get("significance", cls.significance)))


def measured_criteria(metric: str) -> tuple[str, ...]:
    """The judging criteria a metric measures: its own beyond the usefulness filter where it has
    any (CatCons: Bloom level; KnowCov: knowledge units), else the usefulness criteria (Usability)."""
    criteria = metric_spec(metric).criteria
    own = criteria - USEFUL_CRITERIA
    return tuple(sorted(own or criteria))


def _panel(reliability: pd.DataFrame | None) -> pd.DataFrame:
    if reliability is None or reliability.empty:
        return pd.DataFrame(columns=["model", "dataset", "strategy", "criterion"])
    return reliability[reliability["judge"].isna()]


def reliability_behind(panel: pd.DataFrame, model: str, dataset: str, strategies: Sequence[str],
                       criteria: Sequence[str]) -> dict[str, Any]:
    """The reliability a comparison rests on: the worst of its criteria over both cells
    (unreliable, not measured by the study's votes, not given judge by judge
    (:data:`NO_JUDGE_VOTES`), reliable; the lowest value within a status), and
    ``reliability_unmeasured`` and ``reliability_unreliable``, the cells (``strategy|criterion``)
    whose criterion was not measured, or found unreliable (comma-joined, in ``criteria``'s order)."""
    rank = {UNRELIABLE: 0, NOT_MEASURED: 1, RELIABLE: 3}
    found = []
    for strategy in strategies:
        for criterion in criteria:
            rows = panel[(panel["model"] == model) & (panel["dataset"] == dataset) & (panel["strategy"] == strategy)
                         & (panel["criterion"] == criterion)]
            if rows.empty:
                row = {"reliability_status": NOT_MEASURED, "reliability_coefficient": None,
                       "reliability_value": math.nan, "reliability_threshold": math.nan,
                       "reliability_why": "no reliability row"}
            else:
                d = recorded_decision(rows.iloc[0].to_dict())
                row = {"reliability_status": d.status, "reliability_coefficient": d.coefficient,
                       "reliability_value": d.value, "reliability_threshold": d.threshold, "reliability_why": d.why}
            found.append({**row, "reliability_cell": f"{strategy}|{criterion}"})

    def severity(row: dict[str, Any]) -> tuple[int, float]:
        value, status = row["reliability_value"], row["reliability_status"]
        # votes published without the judges' own stop nothing, so they rank after the study's unmeasured
        return rank[status] + _published_only(row), math.inf if math.isnan(value) else value

    def having(status: str) -> str:
        return ",".join(row["reliability_cell"] for criterion in criteria for row in found
                        if row["reliability_status"] == status and row["reliability_cell"].endswith(f"|{criterion}"))

    # every criterion unreliable, or not measured, in either cell, not only the worst: a verdict
    # resting on two such criteria must not read as resting on one
    # (the worst is the first of equals, as strategies and criteria are listed)
    return {**min(found, key=severity), "reliability_unmeasured": having(NOT_MEASURED),
            "reliability_unreliable": having(UNRELIABLE)}


def _published_only(reliability: dict[str, Any]) -> bool:
    """Not measured because the votes were published without the judges' own (an imported
    release): the one unmeasured agreement that does not stop a verdict."""
    return reliability["reliability_status"] == NOT_MEASURED and reliability["reliability_why"] == NO_JUDGE_VOTES


def _plan_figure(plan_row: dict[str, Any] | None, column: str) -> float:
    """A number of the comparison's study-plan row (``difference``, ``n_needed``); NaN without a
    plan row, or where the plan has none (beyond what it searches, or no pair to price)."""
    value = None if plan_row is None else plan_row.get(column)
    return math.nan if value is None or pd.isna(value) else float(value)


def _items_for(plan_row: dict[str, Any] | None, difference: float) -> float:
    """Items per cell the comparison needs to detect ``difference`` points, by the plan's rules
    (:func:`bloomqg.metrics.plan.items_needed`); NaN without a plan row or beyond its search."""
    needed = None if plan_row is None else items_needed(plan_row, difference)
    return math.nan if needed is None else float(needed)


def _plan_row(plan: pd.DataFrame | None, key: dict[str, str]) -> dict[str, Any] | None:
    if plan is None or plan.empty:
        return None
    rows = plan[(plan["model"] == key["model"]) & (plan["dataset"] == key["dataset"]) & (plan["metric"] == key["metric"])
                & (plan["strategy_a"] == key["strategy_a"]) & (plan["strategy_b"] == key["strategy_b"])]
    return None if rows.empty else rows.iloc[0].to_dict()


def _missing(value: Any) -> bool:
    return value is None or pd.isna(value)


def decide(paired_row: dict[str, Any], plan_row: dict[str, Any] | None, reliability: dict[str, Any],
           spec: AnswerSpec) -> tuple[str, str, float]:
    """(verdict, reason, no-difference bound) of one comparison, in the module's order."""
    if reliability["reliability_status"] == UNRELIABLE:
        return CANNOT_TELL, "judges_disagree", math.nan
    if reliability["reliability_status"] == NOT_MEASURED and not _published_only(reliability):
        return CANNOT_TELL, "agreement_not_measured", math.nan
    mdd = math.nan if plan_row is None else plan_row.get("mdd")
    n_pairs = int(paired_row.get("n_pairs") or 0)
    if n_pairs == 0 or _missing(paired_row.get("diff")) or (
            plan_row is not None and (_missing(mdd) or float(mdd) > spec.max_detectable)):
        return CANNOT_TELL, "too_few_pairs", math.nan
    p = paired_row.get("p_adjusted")
    low, high = paired_row.get("ci_low"), paired_row.get("ci_high")
    if not _missing(p) and float(p) < spec.significance:
        return (HIGHER if float(paired_row["diff"]) > 0 else LOWER), "significant", math.nan
    if not _missing(low) and not _missing(high) and (float(low) > 0 or float(high) < 0):
        return CANNOT_TELL, "borderline", math.nan
    bound = max(abs(float(low)), abs(float(high))) if not _missing(low) and not _missing(high) else math.nan
    if math.isnan(bound) or bound > spec.max_detectable:  # "no difference larger than 54 points" says nothing
        return CANNOT_TELL, "too_few_pairs", math.nan
    return NO_DIFFERENCE, "no_difference", bound


def answer_table(
    paired: pd.DataFrame,
    plan: pd.DataFrame | None,
    reliability: pd.DataFrame | None,
    spec: AnswerSpec = AnswerSpec(),
    *,
    metrics: Sequence[str] = DEFAULT_PAIRED_METRICS,
) -> pd.DataFrame:
    """One row (columns :data:`ANSWER_COLUMNS`) per paired-table row of ``metrics``: the verdict,
    why, the figures it rests on."""
    panel = _panel(reliability)
    records = []
    if paired is not None and len(paired):
        for metric in metrics:
            for row in paired[paired["metric"] == metric].to_dict("records"):
                key = {k: row[k] for k in ("model", "dataset", "metric", "strategy_a", "strategy_b")}
                plan_row = _plan_row(plan, key)
                criteria = measured_criteria(metric)
                behind = reliability_behind(panel, row["model"], row["dataset"],
                                            (row["strategy_a"], row["strategy_b"]), criteria)
                verdict, reason, bound = decide(row, plan_row, behind, spec)
                records.append({
                    **key, "verdict": verdict, "reason": reason, "value_a": row.get("value_a"),
                    "value_b": row.get("value_b"), "diff": row.get("diff"),
                    "ci_low": row.get("ci_low"), "ci_high": row.get("ci_high"), "n_pairs": int(row.get("n_pairs") or 0),
                    "p_value": row.get("p_value"), "p_adjusted": row.get("p_adjusted"), "family_size": row.get("family_size"),
                    "significance": spec.significance, "planned": plan_row is not None, "mdd": math.nan if plan_row is None else plan_row.get("mdd"),
                    "max_detectable": spec.max_detectable, "target_difference": _plan_figure(plan_row, "difference"),
                    "n_needed_target": _plan_figure(plan_row, "n_needed"),
                    # what would settle it, at the bound a verdict needs (not the plan's own target)
                    "n_needed_verdict": _items_for(plan_row, spec.max_detectable),
                    # the originals this run asked both arms about: what n_needed_verdict is set against
                    "n_items": _plan_figure(plan_row, "n_items"),
                    "no_difference_bound": bound, "criteria": ",".join(criteria), **behind,
                })
    frame = pd.DataFrame.from_records(records, columns=list(ANSWER_COLUMNS))
    for column in ("value_a", "value_b", "diff", "ci_low", "ci_high", "p_value", "p_adjusted", "mdd", "max_detectable", "target_difference", "n_needed_target",
                   "n_needed_verdict", "n_items", "no_difference_bound", "reliability_value", "reliability_threshold", "family_size", "significance"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype(float)
    frame["n_pairs"] = frame["n_pairs"].astype(int)
    frame["planned"] = frame["planned"].astype(bool)
    return frame
