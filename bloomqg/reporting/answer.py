"""The report's "Answer" section: what the study found, in sentences built from its statistics.

One sentence per planned strategy pair (config ``comparisons:``) and headline metric, from the
paired table's rows (the frame the paired table is drawn from): per model × dataset the
difference ``b − a`` with its interval, the Holm-adjusted p, the number of pairs, whether it
survives leaving out each judge (:mod:`bloomqg.metrics.robustness`), and, where it is not
significant, the smallest difference this study could have detected (``mdd`` of the study plan,
``metrics/study_plan.parquet``; without a plan the sentence says it was not computed, never a
number). A model × dataset that ran only one strategy of a pair is a difference of design, not of
strategy: it is never pooled into the comparison, and the section says which were left out.
A last line says how far the judges can be trusted: the gate and the α / AC1 ranges.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from bloomqg.metrics.paired import DEFAULT_PAIRED_METRICS, ordered_strategies
from bloomqg.metrics.registry import metric_spec, table_label
from bloomqg.metrics.robustness import NOT_ASSESSABLE, NOT_COMPARED, STRATEGY_COMPARISON
from bloomqg.reporting.display import StrategyLabels, is_missing, ordered_unique, strategy_label
from bloomqg.reporting.tables.model import format_p, paired_difference
from bloomqg.strategies import ComparisonSpec

#: Significance level of the Answer's verdicts (Holm-adjusted p).
SIGNIFICANCE = 0.05
#: What the Answer says where no study plan gives the minimum detectable difference.
NO_PLAN = "minimum detectable difference: not computed (no study plan)"


def _points(metric: str) -> str:
    return "points" if metric_spec(metric).percent else metric_spec(metric).unit or "units"


def _difference(row: Any, metric: str) -> str:
    """The difference as the paired table writes it (:func:`paired_difference`) and its unit."""
    text = paired_difference(row.diff, row.ci_low, row.ci_high, row.n_pairs)
    value, _, rest = text.partition(" ")
    return f"{value} {_points(metric)}{' ' + rest if rest else ''}"


def _survival(robustness: pd.DataFrame | None, key: dict[str, str]) -> str:
    if robustness is None or robustness.empty:
        return "survival without each judge not computed"
    rows = robustness[(robustness["comparison"] == STRATEGY_COMPARISON) & (robustness["model"] == key["model"])
                      & (robustness["dataset"] == key["dataset"]) & (robustness["strategy"] == key["strategy_a"])
                      & (robustness["strategy_b"] == key["strategy_b"]) & (robustness["metric"] == key["metric"])]
    if rows.empty:
        return "survival without each judge not computed"
    verdict = str(rows["verdict"].iloc[0])
    if verdict == "holds":
        return "the same with any one judge left out"
    if verdict in (NOT_COMPARED, NOT_ASSESSABLE):
        return f"without each judge: {verdict}"
    return f"changes without a judge ({verdict})"


def _detectable(plan: pd.DataFrame | None, key: dict[str, str]) -> str:
    """What a non-significant comparison could have detected (the study plan's ``mdd``)."""
    if plan is None:
        return ""  # said once for the whole block: NO_PLAN
    rows = plan[(plan["model"] == key["model"]) & (plan["dataset"] == key["dataset"]) & (plan["metric"] == key["metric"])
                & (plan["strategy_a"] == key["strategy_a"]) & (plan["strategy_b"] == key["strategy_b"])]
    if rows.empty:
        return " (minimum detectable difference: not computed, the study plan has no row for it)"
    row = rows.iloc[0]
    target = f"{float(row['difference']):g} {_points(key['metric'])} would need {_needed(row)}"
    if is_missing(row["mdd"]):  # the plan searched every size: none reaches its power at this n
        return (f"; with {int(row['n_pairs'])} pairs this study could not detect a difference of any size "
                f"(power {float(row['power']):.0%}); {target}")
    return (f"; this study could detect ≥ {float(row['mdd']):.1f} {_points(key['metric'])} "
            f"(power {float(row['power']):.0%}); {target}")


def _needed(row: pd.Series) -> str:
    """The study plan's items per cell for its difference, or that no number of them reaches it."""
    if is_missing(row["n_needed"]):
        return "more items than the plan searches"
    return f"{int(row['n_needed'])} items per cell"


def left_out(all_metrics: pd.DataFrame, pair: tuple[str, str], strategy_labels: StrategyLabels | None) -> list[str]:
    """Model × dataset groups that ran one strategy of ``pair`` only: never pooled into it."""
    out = []
    for (model, dataset), group in all_metrics.groupby(["model", "dataset"], sort=False):
        ran = set(group["strategy"])
        only = [s for s in pair if s in ran]
        if len(only) == 1:
            out.append(f"{dataset} ({model}: ran {strategy_label(only[0], strategy_labels)} only)")
    return out


def answer_context(
    paired: pd.DataFrame | None,
    all_metrics: pd.DataFrame,
    *,
    robustness: pd.DataFrame | None = None,
    study_plan: pd.DataFrame | None = None,
    gate: dict[str, Any] | None = None,
    reliability: pd.DataFrame | None = None,
    strategy_labels: StrategyLabels | None = None,
    comparison: ComparisonSpec = ComparisonSpec(),
    strategy_order: Sequence[str] = (),
    metrics: Sequence[str] = DEFAULT_PAIRED_METRICS,
) -> dict[str, Any]:
    """The template's ``answer``: a headline per strategy pair, one sentence per pair × metric,
    what was left out and the trust line."""
    paired = paired if paired is not None else pd.DataFrame()
    strategies = ordered_strategies(ordered_unique(all_metrics["strategy"]), strategy_order)
    pairs = comparison.pairs(strategies)
    several_models = all_metrics["model"].nunique() > 1
    blocks = []
    for a, b in pairs:
        name_a, name_b = strategy_label(a, strategy_labels), strategy_label(b, strategy_labels)
        mine = paired[(paired["strategy_a"] == a) & (paired["strategy_b"] == b)] if len(paired) else paired
        sentences, n_tests, n_significant = [], 0, 0
        for metric in metrics:
            rows = mine[mine["metric"] == metric] if len(mine) else mine
            if rows.empty:
                continue
            clauses = []
            for r in rows.itertuples(index=False):
                where = f"{r.model} · {r.dataset}" if several_models else str(r.dataset)
                key = {"model": r.model, "dataset": r.dataset, "metric": metric, "strategy_a": a, "strategy_b": b}
                if int(r.n_pairs) == 0 or is_missing(r.diff):
                    clauses.append(f"{where}: not compared (n = {int(r.n_pairs)} pairs with a value)")
                    continue
                n_tests += 1
                significant = not is_missing(r.p_adjusted) and float(r.p_adjusted) < SIGNIFICANCE
                n_significant += significant
                p = format_p(r.p_adjusted)
                excludes_zero = (not is_missing(r.ci_low) and not is_missing(r.ci_high)
                                 and (float(r.ci_low) > 0 or float(r.ci_high) < 0))
                # the interval is per comparison, Holm's p is over the family: say which one decides
                family = (f"its interval excludes 0 but is not adjusted for the {int(r.family_size)} "
                          f"{metric_spec(metric).label} comparisons, and after Holm's adjustment it is not "
                          "significant; " if excludes_zero and not significant else "")
                verdict = (f"significant, {name_b} {'higher' if float(r.diff) > 0 else 'lower'}" if significant
                           else f"{family}no detectable difference{_detectable(study_plan, key)}")
                clauses.append(f"{where}: {_difference(r, metric)}, Holm p = {p}, n = {int(r.n_pairs)} pairs, "
                               f"{_survival(robustness, key)}; {verdict}")
            sentences.append({"metric": table_label(metric), "text": "; ".join(clauses) + "."})
        if not sentences:
            headline = f"{name_b} against {name_a}: no paired test could be computed (no original answered under both)."
        elif n_significant == 0:
            headline = (f"{name_b} against {name_a}: none of {n_tests} paired comparisons is significant after Holm "
                        f"(p < {SIGNIFICANCE:g}): no reliable difference in this run.")
        else:
            headline = (f"{name_b} against {name_a}: {n_significant} of {n_tests} paired comparisons significant "
                        f"after Holm (p < {SIGNIFICANCE:g}).")
        if sentences and study_plan is None and n_significant < n_tests:
            headline += f" {NO_PLAN[0].upper()}{NO_PLAN[1:]}: how large a difference this study could have seen is unknown."
        blocks.append({"pair": f"{name_b} − {name_a}", "headline": headline, "sentences": sentences,
                       "left_out": left_out(all_metrics, (a, b), strategy_labels)})
    return {"blocks": blocks, "trust": trust_line(gate, reliability), "has_plan": study_plan is not None}


def _range(values: pd.Series) -> str:
    defined = values.dropna().astype(float)
    if defined.empty:
        return "undefined everywhere"
    low, high = defined.min(), defined.max()
    text = f"{low:.2f}" if round(low, 2) == round(high, 2) else f"{low:.2f} to {high:.2f}"
    text = text.replace("-", "−")
    missing = int(values.isna().sum())
    return text + (f" ({missing} undefined)" if missing else "")


def trust_line(gate: dict[str, Any] | None, reliability: pd.DataFrame | None) -> str:
    """"Trust: 12 of 30 panel α values failed the gate …; α 0.10 to 0.90 (3 undefined), AC1 …"."""
    if gate is None or reliability is None:
        return "Trust: no reliability was computed."
    panel = reliability[reliability["judge"].isna()]
    ranges = f"α {_range(panel['alpha'])}"
    if "ac1" in panel:
        ranges += f", Gwet's AC1 {_range(panel['ac1'])}"
    failed = len(gate["failures"])
    return (f"Trust: {failed} of {gate['n_panel']} criterion × cell agreements failed the gate "
            f"(which asks {gate['coefficient']} ≥ {', '.join(f'{t:g}' for t in gate['thresholds']) or 'n/a'}; "
            f"listed under Judge reliability); {ranges} over the panel's criteria and cells.")
