"""One sentence per figure and table of the report, read from the data it shows.

Pure functions of the frames (:func:`figure_readings`, :func:`table_readings`), so they can be
tested and reused, e.g. in a paper's text.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from bloomqg.bloom import BLOOM_LEVELS, LEVEL_WEIGHT
from bloomqg.metrics.cognitive import SHIFT_TYPES
from bloomqg.metrics.correlations import FIGURE5_PAIRS
from bloomqg.metrics.registry import metric_spec, table_label
from bloomqg.metrics.transitions import per_level_accuracy, transition_counts
from bloomqg.reporting.display import CRITERION_LABEL, cell_label, is_missing, ordered_unique, strategy_label
from bloomqg.reporting.figures.correlations import MIN_POINTS_FOR_CORRELATION
from bloomqg.reporting.tables.model import require_columns


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _values(all_metrics: pd.DataFrame, metric: str) -> pd.DataFrame:
    frame = all_metrics[(all_metrics["metric"] == metric) & all_metrics["value"].notna()]
    return frame.assign(value=frame["value"].astype(float))


def strategy_effect(all_metrics: pd.DataFrame, metric: str) -> str | None:
    """"On cs, FGP raised CatCons for 3 of 4 models and lowered it for 1; the largest change was X (+Y pp)."

    One sentence per dataset run under both CoT and FGP (same model in both); None when there is none.
    """
    frame = _values(all_metrics, metric)
    label = table_label(metric)
    unit = " pp" if metric_spec(metric).percent else ""  # a difference of percentages
    sentences = []
    for dataset in ordered_unique(frame["dataset"]):
        wide = frame[frame["dataset"] == dataset].pivot_table(index="model", columns="strategy", values="value")
        if not {"cot", "fgp"} <= set(wide.columns):
            continue
        diff = (wide["fgp"] - wide["cot"]).dropna().round(6)
        if diff.empty:
            continue
        n = _plural(len(diff), "model")
        raised, lowered = int((diff > 0).sum()), int((diff < 0).sum())
        if raised == lowered == 0:
            sentences.append(f"On {dataset}, FGP left {label} unchanged for all {n}.")
            continue
        largest = diff.abs().idxmax()
        sentences.append(
            f"On {dataset}, FGP raised {label} for {raised} of {n} and lowered it for {lowered}; "
            f"the largest change was {largest} ({diff[largest]:+.2f}{unit})."
        )
    return " ".join(sentences) if sentences else None


def metric_range(all_metrics: pd.DataFrame, metric: str) -> str | None:
    """"Knowledge-ID acc. ranged from 58.0% (m, cs) to 87.6% (m2, social)." or None."""
    frame = _values(all_metrics, metric)
    if frame.empty:
        return None
    label = table_label(metric)
    spec = metric_spec(metric)
    unit = "%" if spec.percent else f" {spec.unit}"
    low = frame.loc[frame["value"].idxmin()]
    high = frame.loc[frame["value"].idxmax()]

    def where(row: pd.Series) -> str:
        return f"{row['model']}, {cell_label(row['dataset'], row['strategy'])}"

    if len(frame) == 1:
        return f"{label} was {low['value']:.1f}{unit} ({where(low)})."
    return (
        f"{label} ranged from {low['value']:.1f}{unit} ({where(low)}) "
        f"to {high['value']:.1f}{unit} ({where(high)})."
    )


def transition_summary(votes: pd.DataFrame) -> str:
    """Share of useful judged questions that kept, raised or lowered the original's level."""
    parts = []
    totals = {}
    for strategy in ordered_unique(votes["strategy"]):
        counts = transition_counts(votes[votes["strategy"] == strategy], kind="judged")
        known = counts[counts["original_level"].isin(BLOOM_LEVELS) & counts["other_level"].isin(BLOOM_LEVELS)]
        if known.empty:
            continue
        delta = known["other_level"].map(LEVEL_WEIGHT) - known["original_level"].map(LEVEL_WEIGHT)
        n = int(known["count"].sum())
        same = int(known.loc[delta == 0, "count"].sum())
        up = int(known.loc[delta > 0, "count"].sum())
        down = int(known.loc[delta < 0, "count"].sum())
        totals[strategy] = (n, same, up, down)
        parts.append(
            f"under {strategy_label(strategy)}, {100 * same / n:.0f}% of {n} useful questions kept the original's "
            f"level, {100 * up / n:.0f}% moved up and {100 * down / n:.0f}% moved down"
        )
    if not parts:
        return "No useful question with both levels known was judged, so there is no transition to show."
    sentence = "; ".join(parts)
    return sentence[0].upper() + sentence[1:] + "."


def classification_summary(votes: pd.DataFrame) -> str:
    """Per-level accuracy of the models' own classification under CoT, pooled over models."""
    cot = votes[votes["strategy"] == "cot"]
    accuracy = per_level_accuracy(cot, kind="classified") if len(cot) else pd.DataFrame()
    accuracy = accuracy[accuracy["n"] > 0] if len(accuracy) else accuracy
    if accuracy.empty:
        return "No model classified the original questions (the task runs under CoT only)."
    best = accuracy.loc[accuracy["accuracy"].idxmax()]
    worst = accuracy.loc[accuracy["accuracy"].idxmin()]
    return (
        f"Pooled over models, classification of the originals was most accurate for {best['original_level']} "
        f"({best['accuracy']:.0f}% of {int(best['n'])}) and least for {worst['original_level']} "
        f"({worst['accuracy']:.0f}% of {int(worst['n'])})."
    )


def correlation_summary(all_metrics: pd.DataFrame, correlations: pd.DataFrame | None) -> str:
    """The Figure 5 correlations in words, from the correlations frame."""
    n_models = all_metrics.loc[all_metrics["strategy"] == "cot", "model"].nunique()
    if n_models < MIN_POINTS_FOR_CORRELATION:
        return (f"Not estimated: the run has {_plural(n_models, 'model')} under CoT and a correlation across "
                f"models needs at least {MIN_POINTS_FOR_CORRELATION}.")
    if correlations is None or correlations.empty:
        return "No correlations were computed for this run."
    parts = []
    for x_metric, y_metric in FIGURE5_PAIRS:
        rows = correlations[(correlations["x_metric"] == x_metric) & (correlations["y_metric"] == y_metric)
                            & (correlations["strategy"] == "cot")]
        methods = rows["method"] if "method" in rows else pd.Series("pearson", index=rows.index)
        for dataset in ordered_unique(rows["dataset"]):
            estimates = {m: r for m, r in zip(methods[rows["dataset"] == dataset], rows[rows["dataset"] == dataset].itertuples(index=False))}
            pearson, spearman = estimates.get("pearson"), estimates.get("spearman")
            if pearson is None or is_missing(pearson.r):
                continue
            text = (f"r({table_label(x_metric)}, {table_label(y_metric)}) = {pearson.r:+.2f} on {dataset} "
                    f"(p = {pearson.p_value:.2g}, n = {pearson.n}")
            if spearman is not None and not is_missing(spearman.r):
                text += f"; Spearman ρ = {spearman.r:+.2f}"
            parts.append(text + ")")
    return ("Across models under CoT: " + "; ".join(parts) + ".") if parts else \
        "The correlations frame has no CoT rows for these metric pairs."


def gate_summary(reliability: pd.DataFrame) -> dict[str, Any]:
    """The α gate's settings, the cells and criteria that failed it, and its effect in words."""
    require_columns(reliability, ["judge", "criterion", "alpha", "gate_threshold", "gate_action", "gate_passed",
                                  "model", "dataset", "strategy"], "reliability")
    panel = reliability[reliability["judge"].isna()]
    failed = panel[panel["gate_passed"].notna() & ~panel["gate_passed"].fillna(True).astype(bool)]
    undefined = panel[panel["alpha"].isna()]
    thresholds = [float(t) for t in ordered_unique(panel["gate_threshold"])]
    actions = [str(a) for a in ordered_unique(panel["gate_action"])]
    coefficients = [c for c in ordered_unique(panel.get("gate_coefficient", pd.Series(dtype=object))) if isinstance(c, str)]
    use_ac1 = coefficients == ["ac1"]
    coefficient = "Gwet's AC1" if use_ac1 else "Krippendorff's α"
    failures = [
        {"model": r.model, "dataset": r.dataset, "strategy": strategy_label(r.strategy),
         "criterion": CRITERION_LABEL.get(r.criterion, r.criterion), "alpha": r.ac1 if use_ac1 else r.alpha,
         "threshold": r.gate_threshold, "action": r.gate_action}
        for r in failed.itertuples(index=False)
    ]
    threshold_text = ", ".join(f"{t:g}" for t in thresholds) or "n/a"
    if not len(panel):
        effect = "No reliability was computed (no panel-level rows)."
    elif not failures:
        effect = f"All {len(panel)} panel α values passed the gate (α ≥ {threshold_text}); nothing was flagged or dropped."
    else:
        cells = failed[["model", "dataset", "strategy"]].drop_duplicates()
        if set(actions) == {"drop"}:
            consequence = ("the failing criteria's majority votes were set to null in those cells, so their "
                           "metrics leave those votes out")
        else:
            consequence = "the metrics those criteria feed are marked † in the tables; no vote was removed"
        effect = (
            f"{len(failures)} of {len(panel)} panel α values fell below the gate (α ≥ {threshold_text}) in "
            f"{_plural(len(cells), 'cell')}; action '{'/'.join(actions)}': {consequence}."
        )
    if len(undefined):
        effect += f" α was undefined (no variation in the votes) for {len(undefined)} criterion × cell pairs."
    if use_ac1:
        effect = effect.replace("panel α values", "panel AC1 values").replace("(α ≥", "(AC1 ≥")
    return {"thresholds": thresholds, "actions": actions, "failures": failures, "effect": effect,
            "n_panel": len(panel), "coefficient": coefficient}


def parse_failure_summary(all_metrics: pd.DataFrame, reliability: pd.DataFrame) -> str:
    """Mean and worst generation parse-failure rate, and the judges' mean."""
    frame = _values(all_metrics, "parse_failure_rate")
    parts = []
    if not frame.empty:
        worst = frame.loc[frame["value"].idxmax()]
        parts.append(
            f"Generation parse failures averaged {frame['value'].mean():.1f}% over {_plural(len(frame), 'cell')}; "
            f"the highest was {worst['model']} ({cell_label(worst['dataset'], worst['strategy'])}: {worst['value']:.1f}%)."
        )
    judges = reliability[reliability["judge"].notna() & reliability["parse_failure_rate"].notna()] \
        if "parse_failure_rate" in reliability else reliability.iloc[0:0]
    if len(judges):
        per_judge = judges.groupby("judge")["parse_failure_rate"].mean() * 100
        worst_judge = per_judge.idxmax()
        parts.append(f"Among judges, {worst_judge} failed to give a parsable answer most often ({per_judge.max():.1f}%).")
    return " ".join(parts) if parts else "No parse-failure rates were recorded."


def shift_score_summary(all_metrics: pd.DataFrame) -> str:
    """Mean shift scores per type and the largest single value."""
    frames = {m: _values(all_metrics, f"{m}_mean") for m in SHIFT_TYPES}
    present = {m: f for m, f in frames.items() if not f.empty}
    if not present:
        return "No mean shift scores were computed."
    means = ", ".join(f"{table_label(m)} {f['value'].mean():.2f}" for m, f in present.items())
    stacked = pd.concat([f.assign(kind=m) for m, f in present.items()])
    top = stacked.loc[stacked["value"].idxmax()]
    return (f"Averaged over cells the mean shift scores were {means}; the largest was {table_label(top['kind'])} "
            f"for {top['model']} ({cell_label(top['dataset'], top['strategy'])}: {top['value']:.2f} levels).")


def figure_readings(
    all_metrics: pd.DataFrame,
    votes: pd.DataFrame,
    reliability: pd.DataFrame,
    correlations: pd.DataFrame | None,
) -> dict[str, str]:
    """One sentence per figure stem, computed from the data the figure shows."""
    return {
        "fig2_transitions": transition_summary(votes),
        "fig3_shift_scores": shift_score_summary(all_metrics),
        "fig4_knowledge_id": metric_range(all_metrics, "knowledge_id_acc")
        or "No knowledge-identification accuracy was computed (the task runs under CoT only).",
        "fig5_correlations": correlation_summary(all_metrics, correlations),
        "fig6_confusion": classification_summary(votes),
        "reliability": gate_summary(reliability)["effect"],
        "parse_failures": parse_failure_summary(all_metrics, reliability),
    }


def table_readings(
    all_metrics: pd.DataFrame,
    reliability: pd.DataFrame,
    paired: pd.DataFrame | None,
    table1: pd.DataFrame | None = None,
) -> dict[str, str]:
    """One sentence per table stem (only where the data says something)."""
    readings: dict[str, str | None] = {
        "table4_quality": strategy_effect(all_metrics, "unique") or metric_range(all_metrics, "unique"),
        "table5_usability": strategy_effect(all_metrics, "catcons") or metric_range(all_metrics, "catcons"),
        "table6_cognitive_shift": strategy_effect(all_metrics, "cogreg")
        or metric_range(all_metrics, "cogleap"),
        "table7_quality_by_dataset": strategy_effect(all_metrics, "answerable") or metric_range(all_metrics, "answerable"),
        "table8_shift_by_dataset": strategy_effect(all_metrics, "cogleap") or metric_range(all_metrics, "cogleap"),
        "table_auxiliary": metric_range(all_metrics, "classification_acc"),
        "table_reliability": gate_summary(reliability)["effect"],
        "table_parse_failures": parse_failure_summary(all_metrics, reliability),
        "table_judges": _judge_reading(reliability),
        "table_paired": _paired_reading(paired),
    }
    if table1 is not None and len(table1):
        readings["table1_datasets"] = " ".join(
            f"{row['dataset']}: {int(row['total'])} items over "
            f"{_plural(sum(1 for level in BLOOM_LEVELS if row.get(level, 0)), 'Bloom level')} and "
            f"{_plural(int(row['knowledge_units']), 'knowledge unit')}."
            for _, row in table1.iterrows()
        )
    return {stem: text for stem, text in readings.items() if text}


def _judge_reading(reliability: pd.DataFrame) -> str | None:
    judges = reliability[reliability["judge"].notna() & reliability["agreement_with_majority"].notna()]
    if judges.empty:
        return None
    agreement = judges.groupby("judge")["agreement_with_majority"].mean() * 100
    return (f"{agreement.idxmax()} agreed with the panel majority most often ({agreement.max():.1f}%), "
            f"{agreement.idxmin()} least often ({agreement.min():.1f}%).")


def _paired_reading(paired: pd.DataFrame | None) -> str | None:
    if paired is None or paired.empty:
        return None
    tested = paired[paired["p_value"].notna()]
    if tested.empty:
        return "No paired test could be computed."
    significant = tested[tested["p_value"] < 0.05]
    favour = int((significant["diff"] > 0).sum())
    return (f"{len(significant)} of {len(tested)} paired comparisons had p < 0.05 (unadjusted); "
            f"{favour} of them favour FGP.")
