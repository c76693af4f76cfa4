"""The report's "Calibrated" tables: judges / humans / PPI++ side by side per cell and metric,
Bloom-level agreement at six and at three levels, the paired differences, and the sampling plan."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from bloomqg.annotation.calibration import METRICS_BY_NAME, OUTCOMES
from bloomqg.reporting.display import MISSING, StrategyLabels, strategy_label
from bloomqg.reporting.readings import catcons_plan_clause
from bloomqg.reporting.tables.model import Cell, Table

CALIBRATED_NAME = "calibrated_estimates"
PAIRED_NAME = "calibrated_paired"
PLAN_NAME = "annotation_plan"
PANEL_NAME = "panel_sample_estimates"
PANEL_PAIRED_NAME = "panel_sample_paired"


def _interval(value: float, low: float, high: float) -> str:
    if value is None or math.isnan(value):
        return MISSING
    return f"{value:.1f} [{low:.1f}, {high:.1f}]"


def _cell_label(row: pd.Series, strategy_labels: StrategyLabels | None = None) -> str:
    return f"{row['model']} · {row['dataset']} · {strategy_label(row['strategy'], strategy_labels)}"


@dataclass(frozen=True)
class Gold:
    """Who the labels PPI++ corrects with come from, as the tables name it: people (calibrate)
    or the panel's sample (panel_calibrate)."""
    predictions: str  # the column of the judged values over every question
    gold_only: str  # the column of the labelled sample alone
    labelled: str  # the n / N column's first word
    name: str
    paired_name: str
    caption: str
    paired_caption: str


PEOPLE = Gold(
    predictions="Judges", gold_only="Humans only", labelled="n labelled", name=CALIBRATED_NAME,
    paired_name=PAIRED_NAME,
    caption="Calibrated: each metric as the judges say, as the humans alone say, and corrected by PPI++",
    paired_caption="Calibrated paired differences between strategies (percentage points, same items)",
)
PANEL = Gold(
    predictions="Local judges", gold_only="Panel sample only", labelled="n panel-judged",
    name=PANEL_NAME, paired_name=PANEL_PAIRED_NAME,
    caption="Paid for a sample: each metric as the local judges say, as the panel's sample alone says, and "
            "corrected by PPI++ with the panel as gold",
    paired_caption="Paid for a sample: paired differences between strategies, corrected by the panel's sample "
                   "(percentage points, same items)",
)


def _estimate_cells(row: pd.Series) -> list[Cell]:
    return [Cell(_interval(row[k], row[f"{k}_low"], row[f"{k}_high"])) for k in ("judges", "humans", "ppi")] + [
        Cell(f"{int(row['n'])} / {int(row['big_n'])}")]


def calibrated_table(estimates: pd.DataFrame, agreement: pd.DataFrame | None, *, n_annotators: int,
                     rounds: list[str], pseudo_disagreements: int, strategy_labels: StrategyLabels | None = None,
                     gold: Gold = PEOPLE, sample_note: str | None = None) -> Table:
    """One row per (cell, metric): the judges' (predictions'), the gold sample's and PPI++'s
    estimate with its interval, n / N."""
    order = {metric.name: position for position, metric in enumerate(OUTCOMES)}
    frame = estimates.assign(_order=estimates["metric"].map(order)).sort_values(
        ["model", "dataset", "strategy", "_order"], kind="stable")
    rows = []
    for _, row in frame.iterrows():
        metric = METRICS_BY_NAME[row["metric"]]
        rows.append([Cell(_cell_label(row, strategy_labels)), Cell(metric.label), Cell(metric.granularity),
                     *_estimate_cells(row)])
    confidence = float(estimates["confidence"].iloc[0]) if len(estimates) else 0.95
    data = frame.drop(columns="_order").reset_index(drop=True)
    table = Table(
        name=gold.name,
        caption=f"{gold.caption} (percent of generated questions, {confidence:.0%} intervals)",
        stub_columns=["Cell", "Metric", "Levels"],
        columns=[gold.predictions, gold.gold_only, "PPI++ (calibrated)", f"{gold.labelled} / N judged"],
        rows=rows, data=data,
    )
    table.notes.append(
        (sample_note or "Labelled items are the export's random within-cell sample (results/annotation/items.parquet); "
         f"items chosen any other way are refused. {n_annotators} annotator(s), rounds: {', '.join(rounds)}.")
        + " Each metric here is a share of all the cell's generated questions (CatCons over "
        f"every question, not only the useful ones), the mean PPI corrects. PPI++ adds {pseudo_disagreements} "
        "pseudo-labelled error(s) of each kind (docs/judge-reliability.md). The two own intervals are exact "
        "(Clopper–Pearson); PPI++'s is the normal interval ppi-python computes, clipped to 0–100."
    )
    pooled = agreement[agreement["model"] == "all"].set_index("granularity") if agreement is not None and len(agreement) else None
    if pooled is not None and len(pooled) and int(pooled["n"].iloc[0]):
        six, three = (pooled.loc[g, "percent_agreement"] for g in ("six levels", "three levels"))
        table.notes.append(
            f"Judge-human agreement on the Bloom level: {six:.1f}% at six levels, {three:.1f}% at three (lower: "
            f"Remember, Understand; middle: Apply, Analyze; higher: Evaluate, Create), over {int(pooled['n'].iloc[0])} "
            "(item, annotator) pairs; per cell: results/calibration/agreement.parquet."
        )
    return table


def paired_table(paired: pd.DataFrame, strategy_labels: StrategyLabels | None = None, *,
                 gold: Gold = PEOPLE) -> Table:
    """The calibrated paired differences b − a, one row per (model, dataset, pair, metric)."""
    rows = []
    for _, row in paired.iterrows():
        rows.append([
            Cell(f"{row['model']} · {row['dataset']}"),
            Cell(f"{strategy_label(row['strategy_b'], strategy_labels)} − {strategy_label(row['strategy_a'], strategy_labels)}"),
            Cell(METRICS_BY_NAME[row["metric"]].label),
            *_estimate_cells(row),
        ])
    table = Table(
        name=gold.paired_name,
        caption=gold.paired_caption,
        stub_columns=["Model · dataset", "Difference", "Metric"],
        columns=[gold.predictions, gold.gold_only, "PPI++ (calibrated)", f"{gold.labelled} in both / N pairs"],
        rows=rows, data=paired.reset_index(drop=True),
    )
    table.notes.append(
        "PPI++ on the per-item difference of outcomes. Each cell's sample is drawn on its own, so n counts the items "
        "that happen to be in both cells' samples (a random sample of the pairs, but a small one)."
    )
    return table


def catcons_plan_sentence(catcons: pd.DataFrame, width: float) -> str:
    """The plan's note on CatCons when no annotation was imported: labels that bound it (and how
    to collect them), or the half-width labelling every question would reach where no number
    of labels bounds it (:func:`bloomqg.reporting.readings.catcons_plan_clause`)."""
    steps = (" (set annotation.items_per_cell to it, export_annotation, have the sheets filled, then calibrate)"
             if catcons["reachable"].astype(bool).all() else "")
    return f"No annotation was imported: {catcons_plan_clause(catcons, width)}{steps}."


def plan_table(plan: pd.DataFrame, *, annotated: bool, strategy_labels: StrategyLabels | None = None) -> Table:
    """The sampling plan: labels per cell and headline metric for the target half-width."""
    rows = []
    for _, row in plan.iterrows():
        metric = METRICS_BY_NAME[row["metric"]]
        needed = f"{int(row['n_needed'])}" if row["reachable"] else f"not reachable with all {int(row['n_needed'])}"
        rows.append([
            Cell(_cell_label(row, strategy_labels)), Cell(metric.label),
            # its own n: the questions with a verdict, fewer than the questions judged (the last column)
            Cell(MISSING if pd.isna(row["judges"]) else f"{row['judges']:.1f}" + (
                "" if pd.isna(row.get("judges_n")) else f" (n={int(row['judges_n'])})")),
            # "assumed" is the paper's panel's agreement with people, not this panel's: named so
            # the frame names the criteria and their outcomes; the cell stays narrow (the note says why)
            Cell("none: labels alone (gate)" if pd.isna(row["disagreement"]) else
                 f"{100 * row['disagreement']:.1f}% "
                 f"({'paper’s panel' if row['agreement_source'] == 'assumed' else row['agreement_source']})"),
            Cell(needed), Cell(f"± {row['half_width_at_n']:.1f}"), Cell(str(int(row["big_n"]))),
        ])
    width = float(plan["half_width"].iloc[0]) if len(plan) else 5.0
    table = Table(
        name=PLAN_NAME,
        caption=(f"How many labels? People's labels per cell for PPI++ (which corrects the judges' numbers with them) to "
                 f"bound each cell's value to ± {width:g} points (not a difference: that is the Answer's Detectable)"),
        stub_columns=["Cell", "Metric"],
        # "of all judged": not CatCons' or Usability's base (useful questions; every reply), said in the header
        columns=["Judges' share, all judged (%)", "Judge-human disagreement", "Labels needed", "Predicted half-width",
                 "Questions judged"],
        rows=rows, data=plan.reset_index(drop=True),
    )
    catcons = plan[plan["metric"] == "catcons_level"]
    if not annotated and len(catcons):
        table.notes.append(catcons_plan_sentence(catcons, width))
    table.notes.append(
        "Judges' share, all judged: the judges' majority over every judged question of the cell with a verdict on it, useful or "
        "not (CatCons counts useful questions only; Usability also counts a reply with no readable question, as "
        "not usable; so their values differ). Disagreement: "
        "the share of questions on which judges and a person would differ, at most: measured on human labels "
        "imported earlier, or (\"paper’s panel\") assumed from how often the panel of the paper this study follows (From Memorization "
        "to Creation) agreed with people on the criterion (its Table 9, a default unless the config sets annotation_plan.assumed_agreement): that panel, not this one, "
        "so it is assumed only where this panel rates the criterion reliably in the cell (the gate). Where it does "
        "not (\"none: labels alone (gate)\": a criterion of the metric failed the gate in the cell, or its agreement "
        "was not measured; Judge reliability says which), nothing is assumed of the judges and the plan is for "
        "people's labels alone, at the worst case of a 50% share. Predicted half-width: half the width of the interval the labels "
        "would give. The plan takes whichever needs fewer labels: correcting the judges with the labels (PPI++) "
        "or the labels alone."
    )
    return table
