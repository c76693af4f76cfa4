"""Table 9 (human agreement), its figure, and the judge-validation summary, as files.

Table 9 reuses :func:`bloomqg.reporting.tables.human.human_agreement_table` and the project's renderers, so it
reads like every other table in the report; without annotations it is written anyway, empty,
with a note saying plainly that none were found and where to put them, and the figure says the
same, so the report never implies a validation that did not happen.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from bloomqg.annotation.panel_agreement import ALL, HUMAN_MAJORITY, table9_rows
from bloomqg.store.atomic import write_text_atomic
from bloomqg.inputs.bloom import BLOOM_LEVELS
from bloomqg.reporting.display import CRITERION_LABEL, StrategyLabels, strategy_label
from bloomqg.reporting.tables.human import human_agreement_table
from bloomqg.reporting.tables.latex import render_latex
from bloomqg.reporting.tables.markdown import render_markdown
from bloomqg.reporting.tables.model import Cell, Table, format_value
from bloomqg.reporting.tables.view import render_view

TABLE9_STEM = "table9_human_agreement"
ALT_TEST_STEM = "alt_test"


def table9(agreement: pd.DataFrame, *, annotations_dir: str, n_sheets: int, n_annotators: int,
           calibrated: bool = False) -> Table:
    """Table 9 from :func:`bloomqg.annotation.panel_agreement.human_panel_agreement` rows;
    ``calibrated``: the study calibrates from these labels, and the notes point to it."""
    table = human_agreement_table(table9_rows(agreement))
    if calibrated:
        table.notes.append(
            "The numbers these labels correct: the Calibrated table (judges, humans only and PPI++ side by side, "
            "results/calibration/calibrated_estimates.md; docs/judge-reliability.md)."
        )
    if not n_sheets:
        table.notes.append(
            f"No annotations yet: no filled sheet (*.csv) in {annotations_dir}. Open "
            "results/annotation/form.html (or fill results/annotation/sheet.csv), save each "
            "annotator's CSV there and rerun."
        )
    else:
        table.notes.append(
            f"{n_annotators} annotator(s), {n_sheets} sheet(s) from {annotations_dir}; human majority = "
            "strict majority of the annotators who rated an item. Bootstrap CIs, Cohen's κ per "
            "annotator and Krippendorff's α: results/annotation/agreement.parquet."
        )
    return table


def write_table(table: Table, paths: Sequence[str | Path]) -> None:
    """Write ``table`` to each of ``paths`` by suffix (.md, .csv, .tex, .json)."""
    for path in map(Path, paths):
        text = {
            ".md": lambda: render_markdown(table),
            ".csv": lambda: table.data.to_csv(index=False, lineterminator="\n"),
            ".tex": lambda: render_latex(table),
            ".json": lambda: render_view(table),
        }[path.suffix]()
        write_text_atomic(path, text)


def plot_human_agreement(agreement: pd.DataFrame, path: str | Path, *, annotations_dir: str,
                         strategy_labels: StrategyLabels | None = None) -> None:
    """Percent agreement of the human majority with the panel per criterion, one bar per cell,
    with Clopper–Pearson intervals and each bar's n; a criterion of a cell without items (no human or no
    panel majority) is marked "no items", never drawn as a 0% bar. Without annotations, a figure
    that says so. ``strategy_labels`` name the strategies ({name: label})."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = agreement[(agreement["statistic"] == "percent_agreement") & (agreement["rater"] == HUMAN_MAJORITY)
                     & (agreement["model"] != ALL)] if len(agreement) else agreement
    fig, ax = plt.subplots(figsize=(8, 3.6))
    if rows is None or len(rows) == 0 or not (rows["n"] > 0).any():
        ax.axis("off")
        ax.text(0.5, 0.5, f"No annotations yet\n(no filled sheet in {annotations_dir})",
                ha="center", va="center", fontsize=13)
    else:
        criteria = ["bloom_level", "unique", "readable", "answerable", "knowledge_units"]
        cells = rows[["model", "dataset", "strategy"]].drop_duplicates().values.tolist()
        width = 0.8 / max(len(cells), 1)
        for k, (model, dataset, strategy) in enumerate(cells):
            part = rows[(rows["model"] == model) & (rows["dataset"] == dataset) & (rows["strategy"] == strategy)]
            part = part.set_index("criterion").reindex(criteria)
            has_items = part["n"].fillna(0).gt(0) & part["value"].notna()
            x = [i + k * width for i in range(len(criteria))]
            low = (part["value"] - part["ci_low"]).clip(lower=0).fillna(0)
            high = (part["ci_high"] - part["value"]).clip(lower=0).fillna(0)
            shown = [position for position, ok in enumerate(has_items) if ok]
            color = f"C{k % 10}"
            ax.bar([x[i] for i in shown], part["value"].iloc[shown], width, color=color,
                   yerr=[low.iloc[shown], high.iloc[shown]], capsize=2,
                   label=f"{model} · {dataset} · {strategy_label(strategy, strategy_labels)}")
            for i in shown:
                ax.text(x[i], 1, f"n={int(part['n'].iloc[i])}", ha="center", va="bottom", fontsize=6,
                        color="white", rotation=90)
            for i, ok in enumerate(has_items):
                if not ok:
                    ax.text(x[i], 2, "no items", ha="center", va="bottom", fontsize=6, rotation=90, color=color)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(criteria))])
        ax.set_xticklabels([CRITERION_LABEL.get(c, c) if c != "bloom_level" else "Bloom" for c in criteria])
        ax.set_ylim(0, 122)  # room above the 100% bars for the legend
        ax.set_yticks(range(0, 101, 20))
        ax.set_ylabel("Agreement with the panel (%)")
        ax.legend(fontsize=7, loc="upper center", ncol=3, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None}, facecolor="white")
    plt.close(fig)


def validation_summary(agreement: pd.DataFrame, confusion: pd.DataFrame, throughput: pd.DataFrame,
                       strategy_labels: StrategyLabels | None = None) -> str:
    """Markdown: per judge, agreement with the panel pooled over the runs (value [95% CI], n),
    per run, the Bloom confusion matrix and time and cost per 1,000 questions."""
    parts = ["# Judges against the release's panel", ""]
    for judge in agreement["rater"].drop_duplicates():
        mine = agreement[agreement["rater"] == judge]
        rows = []
        for (dataset, strategy, model), group in mine.groupby(["dataset", "strategy", "model"], sort=False):
            label = "all runs" if model == ALL else f"{model} · {dataset} · {strategy_label(strategy, strategy_labels)}"
            for criterion in group["criterion"].drop_duplicates():
                get = group[group["criterion"] == criterion].set_index("statistic")
                pa, kappa = get.loc["percent_agreement"], get.loc["cohen_kappa"]
                rows.append([Cell(label), Cell(CRITERION_LABEL.get(criterion, criterion)),
                             Cell(format_value(pa["value"], pa["ci_low"], pa["ci_high"])),
                             Cell(format_value(kappa["value"], kappa["ci_low"], kappa["ci_high"], decimals=3, ci_decimals=2)),
                             Cell(str(int(pa["n"])))])
        parts.append(render_markdown(Table(
            f"judge_validation_{judge}", f"Judge {judge}: agreement with the paper's panel (majority of three).",
            ["Run", "Criterion"], ["Agreement % [95% CI]", "Cohen's κ [95% CI]", "n"], rows, mine,
            notes=["n = questions where both the judge and the panel gave a value; the K-12 math release has no judged Bloom level."],
        )))
        pooled = confusion[(confusion["judge"] == judge) & (confusion["model"] == ALL)]
        grid = pooled.pivot(index="panel_level", columns="judge_level", values="count").reindex(
            index=list(BLOOM_LEVELS), columns=list(BLOOM_LEVELS)).fillna(0).astype(int)
        parts.append(render_markdown(Table(
            f"judge_validation_{judge}_confusion", f"Judge {judge}: Bloom level, panel (rows) × judge (columns), all runs.",
            ["Panel"], list(BLOOM_LEVELS), [[Cell(level)] + [Cell(str(v)) for v in grid.loc[level]] for level in BLOOM_LEVELS],
            grid.reset_index(),
        )))
    rows = [[Cell(r.judge), Cell("all runs" if r.model == ALL else f"{r.model} · {r.dataset} · {strategy_label(r.strategy, strategy_labels)}"),
             Cell(str(r.n_questions)), Cell(f"{r.seconds_per_1000:.1f}"), Cell(f"{r.cost_per_1000_usd:.4f}")]
            for r in throughput.itertuples(index=False)]
    parts.append(render_markdown(Table(
        "judge_validation_throughput", "Time and cost per 1,000 questions (job wall time, model loading included).",
        ["Judge", "Run"], ["Questions", "Seconds / 1,000", "USD / 1,000"], rows, throughput,
        notes=["Each job's fixed cost (loading a model; the embedding judge also embeds the dataset's "
               "originals) is spread over its sample, so small samples overstate the cost per question."],
    )))
    return "\n".join(parts)


def alt_test_table(summary: pd.DataFrame, *, n_annotators: int, epsilon: float, q: float, min_items: int) -> Table:
    """The alt-test verdicts (beside Table 9): per rater and criterion, ω, ρ and the verdict."""
    from bloomqg.annotation.alt_test import MIN_ANNOTATORS

    rows = [[Cell(r.rater), Cell(CRITERION_LABEL.get(r.criterion, r.criterion)),
             Cell(format_value(r.winning_rate, decimals=2)), Cell(f"{r.n_won}/{r.n_annotators}"),
             Cell(format_value(r.advantage_probability, decimals=2)),
             Cell({True: "can replace", False: "cannot replace"}.get(r.passed, "not tested"))]
            for r in summary.itertuples(index=False)]
    table = Table(
        ALT_TEST_STEM, f"Alternative annotator test (Calderon et al. 2025): can the rater replace an annotator? ε = {epsilon:g}.",
        ["Rater", "Criterion"], ["ω", "Annotators won", "ρ", "Verdict at ε"], rows, summary,
    )
    if n_annotators < MIN_ANNOTATORS:
        table.notes.append(f"Not run: {n_annotators} annotator(s); the test needs at least {MIN_ANNOTATORS} "
                           "who rated the same items.")
    else:
        table.notes.append(
            "Leave one annotator out; a one-sided paired t-test per annotator that the rater aligns with the "
            f"others at least as often as the left-out annotator, minus ε; Benjamini–Yekutieli at q = {q:g} "
            f"across annotators; ω = share of annotators beaten, ω ≥ 0.5 passes; ρ = advantage probability. "
            f"Annotators need {min_items} items to be tested. Per-annotator p-values: results/annotation/alt_test_annotators.parquet."
        )
    return table
