"""The paper's tables built from the metrics, datasets, reliability and paired frames (nothing written)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set

import pandas as pd

from bloomqg.inputs.bloom import BLOOM_LEVELS, normalize_level
from bloomqg.metrics.paired import FEW_PAIRS, PAIRED_COLUMNS
from bloomqg.metrics.registry import table_label
from bloomqg.voting.agreement import GATE_RULE, recorded_decision
from bloomqg.reporting.facts import judge_means
from bloomqg.reporting.display import (
    CRITERION_LABEL,
    EMPTY,
    MISSING,
    StrategyLabels,
    cell_label,
    is_missing,
    metric_index,
    ordered_cells,
    ordered_unique,
    strategy_label,
    strategy_order,
)
from bloomqg.reporting.tables.model import (
    DAGGER,
    GATED_NOTE,
    MAX_COLUMNS_WITH_CI,
    NO_CI_NOTE,
    N_NOTE,
    Cell,
    Table,
    TableInputError,
    check_metrics,
    format_number,
    format_p,
    format_paired_difference,
    format_value,
    interval_note,
    interval_words,
    metric_cell,
    require_columns,
)


def metric_table(
    all_metrics: pd.DataFrame,
    metrics: Sequence[str],
    *,
    name: str,
    caption: str,
    cells: Sequence[tuple[str, str]] | None = None,
    notes: Sequence[str] = (),
    with_ci: bool | None = None,
    by_dataset: bool = False,
    strategy_labels: StrategyLabels | None = None,
) -> Table:
    """Models as rows, (dataset, strategy) cells as column groups, ``metrics`` inside each group.

    ``by_dataset=True`` gives the paper's Table 7/8 layout for every dataset at once: rows are
    (dataset, model), column groups are strategies. ``with_ci=None`` shows intervals only when the
    table has room (at most :data:`MAX_COLUMNS_WITH_CI` data columns); the CSV always has them.

    The CSV frame has one row per (dataset, strategy, model) with ``<metric>``,
    ``<metric>_ci_low``, ``<metric>_ci_high``, ``<metric>_n`` and ``<metric>_alpha_gated``.
    Strategies are named by ``strategy_labels`` and shown in their order; in the per-dataset
    layout a strategy a dataset does not run shows :data:`EMPTY` and a note says so.
    """
    check_metrics(all_metrics)
    cells = list(cells) if cells is not None else ordered_cells(all_metrics, strategy_labels=strategy_labels)
    models = ordered_unique(all_metrics["model"])
    index = metric_index(all_metrics)
    if by_dataset:
        datasets = ordered_unique(d for d, _ in cells)
        strategies = strategy_order((s for _, s in cells), strategy_labels)
        row_specs = [([dataset, model], model, dataset) for dataset in datasets for model in models]
        column_specs = [(strategy_label(s, strategy_labels), None, s) for s in strategies]
        stub = ["Dataset", "Model"]
    else:
        row_specs = [([model], model, None) for model in models]
        column_specs = [(cell_label(d, s, strategy_labels), d, s) for d, s in cells]
        stub = ["Model"]
    if with_ci is None:
        with_ci = len(column_specs) * len(metrics) <= MAX_COLUMNS_WITH_CI
    run = set(cells)
    not_run: list[str] = []
    rows: list[list[Cell]] = []
    for labels, model, row_dataset in row_specs:
        row = [Cell(label) for label in labels]
        for _, column_dataset, strategy in column_specs:
            dataset = row_dataset or column_dataset
            if (dataset, strategy) not in run:  # the dataset does not run this strategy at all
                row.extend(Cell(EMPTY) for _ in metrics)
                not_run.append(f"{dataset} does not run {strategy_label(strategy, strategy_labels)}")
                continue
            for metric in metrics:
                prompts = index.get((model, dataset, strategy, "n_generated"))
                row.append(metric_cell(index.get((model, dataset, strategy, metric)), metric, with_ci=with_ci,
                                       of=None if prompts is None else prompts["value"]))
        rows.append(row)
    records = []
    for dataset, strategy in cells:
        for model in models:
            record: dict[str, object] = {"dataset": dataset, "strategy": strategy, "model": model}
            for metric in metrics:
                source = index.get((model, dataset, strategy, metric))
                for suffix, column in (("", "value"), ("_ci_low", "ci_low"), ("_ci_high", "ci_high"),
                                       ("_n", "n"), ("_alpha_gated", "alpha_gated")):
                    record[metric + suffix] = None if source is None else source[column]
            records.append(record)
    columns = [table_label(m) for m in metrics] * len(column_specs)
    groups = [(label, len(metrics)) for label, _, _ in column_specs]
    shown = all_metrics[all_metrics["metric"].isin(list(metrics))]
    table_notes = [interval_note(shown["ci_method"]) if with_ci else NO_CI_NOTE, N_NOTE, *notes]
    if not_run:
        table_notes.append(f"{EMPTY} (long dash): not run ({'; '.join(ordered_unique(not_run))}); {MISSING} (short "
                           "dash): run, but no value (no question the metric counts).")
    if not rows or not column_specs:
        table_notes.append(f"{EMPTY} No metrics were available for this table: no cell was scored.")
    table = Table(name, caption, stub, columns, rows, pd.DataFrame(records), groups, table_notes,
                  group_title="Strategy" if by_dataset else "Dataset, strategy")
    if table.has_gated:
        table.notes.append(GATED_NOTE)
    return table


def dataset_table(datasets: Mapping[str, pd.DataFrame]) -> Table:
    """Table 1: items per Bloom level, uncategorized items and distinct knowledge units."""
    records = []
    for name, frame in datasets.items():
        where = f"datasets[{name!r}]"
        require_columns(frame, ["item_id", "bloom_level", "knowledge_units"], where)
        levels = []
        for row, value in zip(frame["item_id"], frame["bloom_level"]):
            try:
                levels.append(normalize_level(value))
            except ValueError as error:
                raise TableInputError(f"{where}: item {row}: {error}") from error
        counts = pd.Series(levels, dtype=object).value_counts(dropna=False)
        units = {u for us in frame["knowledge_units"] if us is not None for u in us}
        record: dict[str, object] = {"dataset": name, "total": len(frame)}
        for level in BLOOM_LEVELS:
            record[level] = int(counts.get(level, 0))
        record["uncategorized"] = int(sum(1 for level in levels if level is None))
        record["knowledge_units"] = len(units)
        records.append(record)
    columns = ["Total", *BLOOM_LEVELS, "Uncategorized", "Knowledge units"]
    rows = [
        [Cell(r["dataset"]), Cell(str(r["total"]))]
        + [Cell(str(r[level])) for level in BLOOM_LEVELS]  # a count of 0 is a count, not a missing value
        + [Cell(str(r["uncategorized"])), Cell(str(r["knowledge_units"]))]
        for r in records
    ]
    groups = [("", 1), ("Bloom's levels", len(BLOOM_LEVELS)), ("", 2)]
    data = pd.DataFrame(records, columns=["dataset", "total", *BLOOM_LEVELS, "uncategorized", "knowledge_units"])
    return Table(
        "table1_datasets",
        "Table 1. Distribution of items by Bloom level and number of knowledge units per dataset.",
        ["Dataset"], columns, rows, data, groups,
        ["Total counts every item; Uncategorized items have no Bloom level (none given, and the verb list matched none)."],
    )


def _agreement_text(r: pd.Series) -> str:
    """α with its CI, then Gwet's AC1 and the prevalence where the row has them: side by side,
    since α alone reads near zero whenever nearly every vote is the same (the prevalence paradox)."""
    text = format_value(r["alpha"], r["alpha_ci_low"], r["alpha_ci_high"], decimals=2, ci_decimals=2)
    if text == MISSING:
        text = "n/a"  # α undefined, e.g. no variation in the votes
    parts = [f"α {text}"]
    ac1 = r.get("ac1")
    if ac1 is not None and not is_missing(ac1):
        parts.append(f"AC1 {ac1:.2f}")
    prevalence = r.get("prevalence")
    if prevalence is not None and not is_missing(prevalence):
        # one decimal: a prevalence of 89.7% rounded to 90% would seem to meet the gate's ≥ 90% rule
        parts.append(f"prevalence {100 * prevalence:.1f}%")
    return " · ".join(parts) if len(parts) > 1 else text


#: The reliability table's column under each criterion.
AGREEMENT_COLUMN = "Gate: status · α [95% CI] · AC1 · prevalence"


def reliability_table(reliability: pd.DataFrame, strategy_labels: StrategyLabels | None = None) -> Table:
    """The gate's status (reliable, unreliable, not measured and why), Krippendorff's α (with CI),
    Gwet's AC1 and the prevalence per criterion (columns) and cell (rows); the status says which failed
    the gate (no †: the mark means "built on a flagged criterion", which a coefficient is not)."""
    where = "reliability"
    require_columns(reliability, ["dataset", "strategy", "model", "criterion", "judge", "alpha",
                                  "alpha_ci_low", "alpha_ci_high", "gate_threshold", "gate_action",
                                  "gate_passed", "n_items", "n_judges"], where)
    panel = reliability[reliability["judge"].isna()]
    criteria = [c for c in CRITERION_LABEL if c in set(panel["criterion"])]
    criteria += [c for c in ordered_unique(panel["criterion"]) if c not in criteria]
    keys = ["model", "dataset", "strategy"]
    rows = []
    failed: dict[str, list[str]] = {}  # cell → its flagged criteria: one short entry per cell, not per pair
    for (model, dataset, strategy), frame in panel.groupby(keys, sort=False):
        by_criterion = {r["criterion"]: r for _, r in frame.iterrows()}
        row = [Cell(model), Cell(dataset), Cell(strategy_label(strategy, strategy_labels))]
        for criterion in criteria:
            r = by_criterion.get(criterion)
            if r is None:
                row.append(Cell(MISSING))
                continue
            passed = r["gate_passed"]
            gated = not is_missing(passed) and not bool(passed)
            # the status first: a coefficient printed where agreement is not measured is no measure
            decision = recorded_decision(r.to_dict())
            status = decision.status.replace("_", " ") + (f" ({decision.brief_why})" if decision.why else "")
            # no †: the status says it, and a coefficient marked unreliable by itself reads as circular
            row.append(Cell(f"{status} · {_agreement_text(r)}"))
            if gated:
                failed.setdefault(f"{model} / {cell_label(dataset, strategy, strategy_labels)}", []).append(
                    CRITERION_LABEL.get(criterion, criterion))
        rows.append(row)
    thresholds = ordered_unique(panel["gate_threshold"])
    actions = ordered_unique(panel["gate_action"])
    notes = ["Krippendorff's α over the judge panel with bootstrap 95% CI (n/a: undefined, no variation), "
             "Gwet's AC1 and the prevalence (share of all votes in the majority category) side by side: "
             "at a high prevalence α reads near zero although the judges agree, which AC1 does not; "
             "their CIs, percent agreement and n are in the CSV and the report's section "
             "\"Can these judges be trusted?\"."]
    if thresholds:
        notes.append(
            f"Gate (threshold {', '.join(f'{t:g}' for t in thresholds)}; action: {', '.join(map(str, actions)) or 'n/a'}): "
            f"{GATE_RULE}."
        )
    if failed:
        notes.append("Failed the gate or not measured, per cell (marked † in the other tables' values built on them): "
                     + "; ".join(f"{cell}: {', '.join(criteria_)}" for cell, criteria_ in failed.items()) + ".")
    data = panel.drop(columns=["judge", "agreement_with_majority", "parse_failure_rate"], errors="ignore")
    return Table(
        "table_reliability",
        "Judge reliability per criterion and cell: Krippendorff's α, Gwet's AC1 and the prevalence.",
        # one column per criterion, grouped under its name: the report shows a row per criterion
        ["Model", "Dataset", "Strategy"], [AGREEMENT_COLUMN] * len(criteria), rows,
        data.reset_index(drop=True), [(CRITERION_LABEL.get(c, c), 1) for c in criteria], notes,
        group_title="Criterion",
    )


def judges_table(reliability: pd.DataFrame) -> Table:
    """Per judge (pooled over cells): how often it agrees with the other judges' majority (its own
    vote left out: with it in, a third of every majority of three is the judge itself) and its
    parse-failure rate, per criterion. One agreement figure, the one the setup and the trust
    section give."""
    require_columns(reliability, ["judge", "criterion", "agreement_with_others", "parse_failure_rate"],
                    "reliability")
    judge_rows = reliability[reliability["judge"].notna()]
    criteria = [c for c in CRITERION_LABEL if c in set(judge_rows["criterion"])]
    columns_read = ("agreement_with_others", "parse_failure_rate")
    # in percent, by the function the facts frame uses (bloomqg.reporting.facts)
    means = {column: judge_means(judge_rows, column, ("judge", "criterion")) for column in columns_read}
    summary = (pd.DataFrame(means) / 100).reset_index()
    rows = []
    for judge in ordered_unique(judge_rows["judge"]):
        row = [Cell(judge)]
        for criterion in criteria:
            for column in columns_read:
                value = means[column].get((judge, criterion))
                row.append(Cell(format_number(None if value is None or is_missing(value) else float(value), 1)))
        rows.append(row)
    columns = ["Agrees with the others %", "Parse fail %"] * len(criteria)
    groups = [(CRITERION_LABEL.get(c, c), 2) for c in criteria]
    return Table(
        "table_judges",
        "Judge diagnostics: each judge's agreement with the others and unreadable answers (%), mean over cells.",
        ["Judge"], columns, rows, summary, groups,
        ["Agrees with the others %: share of a judge's valid (parsed, not abstained) votes equal to the strict majority "
         "of the other judges, its own vote left out (– where the others reach no majority or the judge never votes); "
         "the same figure as in the setup and Can these judges be trusted?. On a yes/no criterion it mostly follows how "
         "often one answer is given (beside a judge that always says yes and one that abstains, a judge agrees whenever "
         "it says yes), so the table's reading ranks the judges on Bloom level and Knowledge units."],
        group_title="Criterion",
    )


def parse_failure_table(
    all_metrics: pd.DataFrame, cells: Sequence[tuple[str, str]], strategy_labels: StrategyLabels | None = None
) -> Table:
    """Generation parse-failure rate per model (rows) and cell (columns), with the number generated."""
    check_metrics(all_metrics)
    index = metric_index(all_metrics)
    models = ordered_unique(all_metrics["model"])
    rows, records = [], []
    for model in models:
        row = [Cell(model)]
        for dataset, strategy in cells:
            rate = index.get((model, dataset, strategy, "parse_failure_rate"))
            generated = index.get((model, dataset, strategy, "n_generated"))
            cell = metric_cell(rate, "parse_failure_rate")
            # the rate's own n (metric_cell) is the answers generated: said once, not "(n=8) (n=8)"
            if generated is not None and cell.text != MISSING and "(n=" not in cell.text:
                cell = Cell(f"{cell.text} (n={format_number(generated['value'], 0)})", cell.gated, cell.source)
            row.append(cell)
            records.append({
                "model": model, "dataset": dataset, "strategy": strategy,
                "parse_failure_rate": None if rate is None else rate["value"],
                "ci_low": None if rate is None else rate["ci_low"],
                "ci_high": None if rate is None else rate["ci_high"],
                "n_generated": None if generated is None else generated["value"],
            })
        rows.append(row)
    return Table(
        "table_parse_failures",
        "Share of generations whose answer could not be parsed into a question (%).",
        ["Model"], [cell_label(d, s, strategy_labels) for d, s in cells], rows, pd.DataFrame(records), [],
        ["Percent of generated answers with no parsable question; n = answers generated."],
    )


#: How the paired table names the frame's tests and effect sizes (the CSV keeps the identifiers).
TEST_NAMES = {"mcnemar": "McNemar", "wilcoxon": "Wilcoxon", "cohens_h": "Cohen's h", "rank_biserial": "rank-biserial r"}


def paired_table(paired: pd.DataFrame | None, strategy_labels: StrategyLabels | None = None,
                 gated: Set[tuple[str, str, str, str]] = frozenset()) -> Table:
    """Paired strategy-vs-strategy comparison per model, dataset, metric and pair (a note when
    there is none), with the raw p and the Holm-adjusted p side by side. ``gated``: the (model,
    dataset, strategy, metric) cells whose value a failed or unmeasured criterion feeds; a
    difference either of whose arms is one carries the dagger, as the cells' tables do."""
    columns_in = list(PAIRED_COLUMNS)
    methods = paired["ci_method"] if paired is not None and "ci_method" in paired.columns else []
    notes = [
        "Difference = B − A on the items both strategies answered (percentage points for percent metrics), "
        f"with its 95% interval ({interval_words(methods) or 'see the glossary'}). "
        "p: raw (McNemar for yes/no outcomes, Wilcoxon for graded ones); "
        "p (Holm): adjusted by Holm's method (see the glossary) over the family of every strategy pair × model × dataset row "
        "of that metric. A: the first strategy of the pair, "
        "B: the second. Effect size: how large the difference is on a scale that does not depend on the number of "
        "pairs (Cohen's h for yes/no outcomes, 0.2 small, 0.8 large; the rank-biserial r for graded ones, −1 to 1, "
        f"over the pairs that differ: one pair alone gives ±1; – where fewer than {FEW_PAIRS} pairs differ, where a few "
        "questions decide it and no test can be significant); its name follows it in brackets.",
    ]
    if paired is None or paired.empty:
        paired = pd.DataFrame(columns=columns_in)
        notes.append(f"{EMPTY} No paired comparison: no model × dataset was run under two of the compared "
                     "strategies (each against the baseline, or every pair, as comparisons: says), or none was computed.")
    require_columns(paired, columns_in, "paired")
    rows = []
    for _, r in paired.iterrows():
        label_a = strategy_label(str(r["strategy_a"]), strategy_labels)
        label_b = strategy_label(str(r["strategy_b"]), strategy_labels)
        flagged = any((str(r["model"]), str(r["dataset"]), str(r[arm]), str(r["metric"])) in gated
                      for arm in ("strategy_a", "strategy_b"))
        # fewer than FEW_PAIRS pairs that differ: a size reads large from a few questions, and no test there can be significant
        sized = not is_missing(r["effect_size"]) and int(r["n_differing"]) >= FEW_PAIRS
        rows.append([
            Cell(str(r["model"])), Cell(str(r["dataset"])), Cell(table_label(str(r["metric"]))),
            Cell(f"{label_b} − {label_a}"),
            Cell(format_number(r["n_pairs"], 0)), Cell(format_number(r["value_a"])), Cell(format_number(r["value_b"])),
            Cell(format_paired_difference(r["diff"], r["ci_low"], r["ci_high"], r["n_pairs"]), flagged),
            Cell(TEST_NAMES.get(str(r["test"]), str(r["test"])) if not is_missing(r["test"]) and r["n_pairs"]
                 else MISSING),
            Cell(format_p(r["p_value"])), Cell(format_p(r["p_adjusted"])),
            # a size on flagged votes is no more evidence than the difference it measures: the same †
            Cell(f"{float(r['effect_size']):.2f} ({TEST_NAMES.get(str(r['effect_size_name']), r['effect_size_name'])})"
                 if sized else MISSING, flagged and sized),
        ])
    table = Table(
        "table_paired",
        "Paired comparison of prompting strategies on the same items (B − A).",
        ["Model", "Dataset", "Metric"],
        ["B − A", "Pairs", "A", "B", "Diff. [95% CI]", "Test", "p", "p (Holm)", "Effect size"],
        rows, paired[columns_in].reset_index(drop=True), [], notes,
    )
    if table.has_gated:
        table.notes.append(GATED_NOTE)
    return table
