"""The paper's tables, written as CSV, Markdown (GitHub pipe tables) and LaTeX (booktabs).

Every table is first built as a :class:`Table`: a caption, optional column groups (e.g.
"cs, CoT"), the display cells, footnotes and a machine-readable frame. The three renderers then
write the same content three ways:

- ``<name>.csv``: tidy-ish numbers with separate ``_ci_low``/``_ci_high``/``_alpha_gated``
  columns, for re-analysis;
- ``<name>.md``: a bold caption line, a GitHub pipe table (a grouped header is written as
  ``group<br>column``), footnotes; :func:`read_markdown_table` reads it back for the HTML report;
- ``<name>.tex``: a ``table`` environment with booktabs rules (needs ``\\usepackage{booktabs}``),
  special characters escaped.

Values carry their confidence interval where the table has room ("90.40 [88.1, 92.3]"); a value
fed by a judging criterion that failed the α gate is marked with a dagger and a footnote.

Table files (see :func:`table_file_names`):

====================================  =========================================================
``table1_datasets``                   items per Bloom level and knowledge-unit count (Table 1)
``table4_quality``                    unique / readable / answerable per model × cell (Table 4)
``table5_usability``                  usability / CatCons / KnowCov (Table 5)
``table6_cognitive_shift``            CogReg / CogDrift / CogLeap (Table 6)
``table7_quality_by_dataset``         Table 4 per dataset, CoT vs FGP side by side (Table 7)
``table8_shift_by_dataset``           Table 6 per dataset, CoT vs FGP side by side (Table 8)
``table_auxiliary``                   CogShift, classification and knowledge-identification
``table_reliability``                 Krippendorff's α per criterion and cell, gate state
``table_judges``                      each judge's agreement with the majority and parse failures
``table_parse_failures``              generation parse-failure rate per model × cell
``table_paired``                      paired CoT-vs-FGP tests (a note only when none is given)
``table9_human_agreement``            agreement with human experts (only when given; Table 9)
====================================  =========================================================

:data:`TABLE_FILES` lists the files every run writes; :data:`HUMAN_TABLE_FILES` the optional one.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from bloomqg.atomic import write_text_atomic
from bloomqg.metrics import METRIC_LABELS
from bloomqg.bloom import BLOOM_LEVELS, normalize_level
from bloomqg.schemas import METRICS

log = logging.getLogger(__name__)

#: How strategies are written in tables and figures.
STRATEGY_LABEL: dict[str, str] = {"cot": "CoT", "fgp": "FGP"}

#: Display names of the metrics of :mod:`bloomqg.metrics`, without the "|Δ|" of the shift
#: totals and means (kept ASCII so the LaTeX tables compile with pdflatex).
METRIC_LABEL: dict[str, str] = {
    metric: label.replace(" |Δ|", "") for metric, label in METRIC_LABELS.items()
}

CRITERION_LABEL: dict[str, str] = {
    "unique": "Unique",
    "readable": "Readable",
    "answerable": "Answerable",
    "bloom_level": "Bloom level",
    "knowledge_units": "Knowledge units",
}

QUALITY_METRICS = ("unique", "readable", "answerable")
USABILITY_METRICS = ("usability", "catcons", "knowcov")
SHIFT_METRICS = ("cogreg", "cogdrift", "cogleap")
AUXILIARY_METRICS = ("cogshift", "classification_acc", "knowledge_id_acc", "n_generated", "n_useful")

#: Metrics written without decimals and without a CI (counts).
COUNT_METRICS = frozenset({"n_generated", "n_useful"})
#: Metrics that are raw scores, not percentages (two decimals for the CI too).
SCORE_METRICS = frozenset({"cogshift", "cogreg_mean", "cogdrift_mean", "cogleap_mean"})

MISSING = "–"  # en dash: no value (no data, or every item of the cell was excluded)
DAGGER = "†"
GATED_NOTE = (
    f"{DAGGER} a judging criterion feeding this value failed the reliability gate "
    "(Krippendorff's α below the threshold; see table_reliability)."
)
CI_NOTE = "Values are percentages with bootstrap 95% confidence intervals in brackets unless noted."

NO_CI_NOTE = (
    "Values are percentages unless noted; 95% confidence intervals are in the CSV file and in the "
    "per-dataset tables (too wide here)."
)
#: Wider tables leave intervals out of the Markdown/LaTeX cells (they stay in the CSV).
MAX_COLUMNS_WITH_CI = 6
#: Wider LaTeX tables use ``table*`` (spanning both columns of a two-column paper).
MAX_COLUMNS_SINGLE_WIDTH = 7

_SAFE_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


class TableInputError(ValueError):
    """An input frame lacks a column or holds a value the tables cannot place."""


@dataclass(frozen=True)
class Cell:
    """One display cell; ``gated`` adds the dagger (in each format's own notation)."""

    text: str
    gated: bool = False


@dataclass
class Table:
    """A table ready to render: stub (row label) columns, data columns and optional groups.

    ``groups`` spans the data columns left to right as (label, number of columns); an empty
    label leaves those columns ungrouped.
    """

    name: str
    caption: str
    stub_columns: list[str]
    columns: list[str]
    rows: list[list[Cell]]
    data: pd.DataFrame
    groups: list[tuple[str, int]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        width = len(self.stub_columns) + len(self.columns)
        for index, row in enumerate(self.rows):
            if len(row) != width:
                raise ValueError(f"table {self.name}: row {index} has {len(row)} cells, expected {width}")
        if self.groups and sum(span for _, span in self.groups) != len(self.columns):
            raise ValueError(f"table {self.name}: column groups do not span the {len(self.columns)} data columns")

    @property
    def has_gated(self) -> bool:
        return any(cell.gated for row in self.rows for cell in row)


# --------------------------------------------------------------------------- input checks


def require_columns(frame: pd.DataFrame, columns: Iterable[str], where: str) -> None:
    """Raise :class:`TableInputError` naming ``where`` and the missing columns."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise TableInputError(f"{where}: missing column(s) {missing}; has {list(frame.columns)}")


def check_metrics(all_metrics: pd.DataFrame, where: str = "all_metrics") -> pd.DataFrame:
    """Validate the tidy METRICS frame: columns present, one row per (model, dataset, strategy, metric)."""
    require_columns(all_metrics, METRICS.names, where)
    keys = ["model", "dataset", "strategy", "metric"]
    duplicated = all_metrics.duplicated(keys, keep=False)
    if duplicated.any():
        first = all_metrics.loc[duplicated, keys].iloc[0].tolist()
        raise TableInputError(f"{where}: duplicate rows for (model, dataset, strategy, metric) = {first}")
    return all_metrics


def _is_missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def strategy_label(strategy: str) -> str:
    return STRATEGY_LABEL.get(strategy, strategy.upper())


def cell_label(dataset: str, strategy: str) -> str:
    """The column-group label of a (dataset, strategy) cell, e.g. ``cs, CoT``."""
    return f"{dataset}, {strategy_label(strategy)}"


def ordered_unique(values: Iterable) -> list:
    """Distinct values in order of first appearance (the config's order survives the pipeline)."""
    return list(dict.fromkeys(v for v in values if not _is_missing(v)))


def ordered_cells(all_metrics: pd.DataFrame, dataset_order: Sequence[str] = ()) -> list[tuple[str, str]]:
    """(dataset, strategy) cells: datasets in ``dataset_order`` then first appearance; CoT before FGP."""
    datasets = list(dataset_order) + [d for d in ordered_unique(all_metrics["dataset"]) if d not in dataset_order]
    strategy_rank = {"cot": 0, "fgp": 1}
    cells = []
    for dataset in datasets:
        strategies = ordered_unique(all_metrics.loc[all_metrics["dataset"] == dataset, "strategy"])
        for strategy in sorted(strategies, key=lambda s: (strategy_rank.get(s, 2), s)):
            cells.append((dataset, strategy))
    return cells


# --------------------------------------------------------------------------- formatting


def format_number(value: object, decimals: int = 2) -> str:
    """A number with fixed decimals, or the missing-value dash."""
    if _is_missing(value):
        return MISSING
    return f"{float(value):.{decimals}f}"


def format_value(
    value: object,
    ci_low: object = None,
    ci_high: object = None,
    *,
    decimals: int = 2,
    ci_decimals: int = 1,
) -> str:
    """``"90.40 [88.1, 92.3]"``; the interval is left out when either bound is missing."""
    if _is_missing(value):
        return MISSING
    text = f"{float(value):.{decimals}f}"
    if not _is_missing(ci_low) and not _is_missing(ci_high):
        text += f" [{float(ci_low):.{ci_decimals}f}, {float(ci_high):.{ci_decimals}f}]"
    return text


def metric_cell(row: pd.Series | None, metric: str, *, with_ci: bool = True) -> Cell:
    """The display cell of one METRICS row (None: no such row)."""
    if row is None:
        return Cell(MISSING)
    if metric in COUNT_METRICS:
        return Cell(format_number(row["value"], 0), bool(row["alpha_gated"]))
    ci_decimals = 2 if metric in SCORE_METRICS else 1
    low, high = (row["ci_low"], row["ci_high"]) if with_ci else (None, None)
    text = format_value(row["value"], low, high, decimals=2, ci_decimals=ci_decimals)
    return Cell(text, bool(row["alpha_gated"]) and text != MISSING)


# --------------------------------------------------------------------------- table builders


def _metric_index(all_metrics: pd.DataFrame) -> dict[tuple[str, str, str, str], pd.Series]:
    return {
        (r["model"], r["dataset"], r["strategy"], r["metric"]): r
        for _, r in all_metrics.iterrows()
    }


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
) -> Table:
    """Models as rows, (dataset, strategy) cells as column groups, ``metrics`` inside each group.

    ``by_dataset=True`` gives the paper's Table 7/8 layout for every dataset at once: rows are
    (dataset, model), column groups are strategies. ``with_ci=None`` shows intervals only when the
    table has room (at most :data:`MAX_COLUMNS_WITH_CI` data columns); the CSV always has them.

    The CSV frame has one row per (dataset, strategy, model) with ``<metric>``,
    ``<metric>_ci_low``, ``<metric>_ci_high``, ``<metric>_n`` and ``<metric>_alpha_gated``.
    """
    check_metrics(all_metrics)
    cells = list(cells) if cells is not None else ordered_cells(all_metrics)
    models = ordered_unique(all_metrics["model"])
    index = _metric_index(all_metrics)
    if by_dataset:
        datasets = ordered_unique(d for d, _ in cells)
        strategies = ordered_unique(s for _, s in sorted(cells, key=lambda c: ({"cot": 0, "fgp": 1}.get(c[1], 2), c[1])))
        row_specs = [([dataset, model], model, dataset) for dataset in datasets for model in models]
        column_specs = [(strategy_label(s), None, s) for s in strategies]
        stub = ["Dataset", "Model"]
    else:
        row_specs = [([model], model, None) for model in models]
        column_specs = [(cell_label(d, s), d, s) for d, s in cells]
        stub = ["Model"]
    if with_ci is None:
        with_ci = len(column_specs) * len(metrics) <= MAX_COLUMNS_WITH_CI
    rows: list[list[Cell]] = []
    for labels, model, row_dataset in row_specs:
        row = [Cell(label) for label in labels]
        for _, column_dataset, strategy in column_specs:
            dataset = row_dataset or column_dataset
            for metric in metrics:
                row.append(metric_cell(index.get((model, dataset, strategy, metric)), metric, with_ci=with_ci))
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
    columns = [METRIC_LABEL.get(m, m) for m in metrics] * len(column_specs)
    groups = [(label, len(metrics)) for label, _, _ in column_specs]
    table_notes = [CI_NOTE if with_ci else NO_CI_NOTE, *notes]
    if not rows or not column_specs:
        table_notes.append("No metrics were available for this table.")
    table = Table(name, caption, stub, columns, rows, pd.DataFrame(records), groups, table_notes)
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
        + [Cell(str(r[level]) if r[level] else MISSING) for level in BLOOM_LEVELS]
        + [Cell(str(r["uncategorized"])), Cell(str(r["knowledge_units"]))]
        for r in records
    ]
    groups = [("", 1), ("Bloom's levels", len(BLOOM_LEVELS)), ("", 2)]
    data = pd.DataFrame(records, columns=["dataset", "total", *BLOOM_LEVELS, "uncategorized", "knowledge_units"])
    return Table(
        "table1_datasets",
        "Table 1. Distribution of items by Bloom level and number of knowledge units per dataset.",
        ["Dataset"], columns, rows, data, groups,
        ["Total counts every item; Uncategorized items have no Bloom level (the verb list matched none)."],
    )


def reliability_table(reliability: pd.DataFrame) -> Table:
    """Krippendorff's α per criterion (columns) and cell (rows), with CI; † = gate failed."""
    where = "reliability"
    require_columns(reliability, ["dataset", "strategy", "model", "criterion", "judge", "alpha",
                                  "alpha_ci_low", "alpha_ci_high", "gate_threshold", "gate_action",
                                  "gate_passed", "n_items", "n_judges"], where)
    panel = reliability[reliability["judge"].isna()]
    criteria = [c for c in CRITERION_LABEL if c in set(panel["criterion"])]
    criteria += [c for c in ordered_unique(panel["criterion"]) if c not in criteria]
    keys = ["model", "dataset", "strategy"]
    rows, failed = [], []
    for (model, dataset, strategy), frame in panel.groupby(keys, sort=False):
        by_criterion = {r["criterion"]: r for _, r in frame.iterrows()}
        row = [Cell(model), Cell(dataset), Cell(strategy_label(strategy))]
        for criterion in criteria:
            r = by_criterion.get(criterion)
            if r is None:
                row.append(Cell(MISSING))
                continue
            passed = r["gate_passed"]
            gated = not _is_missing(passed) and not bool(passed)
            text = format_value(r["alpha"], r["alpha_ci_low"], r["alpha_ci_high"], decimals=2, ci_decimals=2)
            if text == MISSING:
                text = "n/a"  # α undefined, e.g. no variation in the votes
            row.append(Cell(text, gated))
            if gated:
                failed.append(f"{model} / {cell_label(dataset, strategy)} / {criterion}")
        rows.append(row)
    thresholds = ordered_unique(panel["gate_threshold"])
    actions = ordered_unique(panel["gate_action"])
    notes = ["Krippendorff's α over the judge panel with bootstrap 95% CI; n/a: α undefined (no variation)."]
    if thresholds:
        notes.append(
            f"Gate: α ≥ {', '.join(f'{t:g}' for t in thresholds)} (action: {', '.join(map(str, actions)) or 'n/a'})."
        )
    if failed:
        notes.append(f"{DAGGER} failed the gate: " + "; ".join(failed) + ".")
    data = panel.drop(columns=["judge", "agreement_with_majority", "parse_failure_rate"], errors="ignore")
    return Table(
        "table_reliability",
        "Judge reliability: Krippendorff's α per criterion for every model × dataset × strategy cell.",
        ["Model", "Dataset", "Strategy"], [CRITERION_LABEL.get(c, c) for c in criteria], rows,
        data.reset_index(drop=True), [], notes,
    )


def judges_table(reliability: pd.DataFrame) -> Table:
    """Per judge (pooled over cells): agreement with the majority and parse-failure rate per criterion."""
    require_columns(reliability, ["judge", "criterion", "agreement_with_majority", "parse_failure_rate"],
                    "reliability")
    judge_rows = reliability[reliability["judge"].notna()]
    criteria = [c for c in CRITERION_LABEL if c in set(judge_rows["criterion"])]
    summary = (
        judge_rows.groupby(["judge", "criterion"], sort=False)[["agreement_with_majority", "parse_failure_rate"]]
        .mean()
        .reset_index()
    )
    lookup = {(r["judge"], r["criterion"]): r for _, r in summary.iterrows()}
    rows = []
    for judge in ordered_unique(judge_rows["judge"]):
        row = [Cell(judge)]
        for criterion in criteria:
            r = lookup.get((judge, criterion))
            for column in ("agreement_with_majority", "parse_failure_rate"):
                value = None if r is None or _is_missing(r[column]) else 100 * float(r[column])
                row.append(Cell(format_number(value, 1)))
        rows.append(row)
    columns = ["Agree %", "Parse fail %"] * len(criteria)
    groups = [(CRITERION_LABEL.get(c, c), 2) for c in criteria]
    return Table(
        "table_judges",
        "Judge diagnostics: agreement with the panel majority and parse-failure rate (%), averaged over cells.",
        ["Judge"], columns, rows, summary, groups,
        ["Agree %: share of a judge's valid votes equal to the majority vote."],
    )


def parse_failure_table(all_metrics: pd.DataFrame, cells: Sequence[tuple[str, str]]) -> Table:
    """Generation parse-failure rate per model (rows) and cell (columns), with the number generated."""
    check_metrics(all_metrics)
    index = _metric_index(all_metrics)
    models = ordered_unique(all_metrics["model"])
    rows, records = [], []
    for model in models:
        row = [Cell(model)]
        for dataset, strategy in cells:
            rate = index.get((model, dataset, strategy, "parse_failure_rate"))
            generated = index.get((model, dataset, strategy, "n_generated"))
            cell = metric_cell(rate, "parse_failure_rate")
            if generated is not None and cell.text != MISSING:
                cell = Cell(f"{cell.text} (n={format_number(generated['value'], 0)})", cell.gated)
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
        ["Model"], [cell_label(d, s) for d, s in cells], rows, pd.DataFrame(records), [],
        ["Percent of generated answers with no parsable question; n = answers generated."],
    )


PAIRED_COLUMNS = ("model", "dataset", "metric", "n_pairs", "cot", "fgp", "diff", "ci_low", "ci_high",
                  "test", "p_value", "effect_size", "effect_size_name")


def paired_table(paired: pd.DataFrame | None) -> Table:
    """Paired CoT-vs-FGP comparison per model, dataset and metric (a note when there is none)."""
    columns_in = list(PAIRED_COLUMNS)
    notes = ["p values are unadjusted; the effect size's name follows it in brackets."]
    if paired is None or paired.empty:
        paired = pd.DataFrame(columns=columns_in)
        notes.append("No paired comparison: no dataset was run under both CoT and FGP, or none was computed.")
    require_columns(paired, columns_in, "paired")
    rows = []
    for _, r in paired.iterrows():
        rows.append([
            Cell(str(r["model"])), Cell(str(r["dataset"])), Cell(METRIC_LABEL.get(r["metric"], str(r["metric"]))),
            Cell(format_number(r["n_pairs"], 0)), Cell(format_number(r["cot"])), Cell(format_number(r["fgp"])),
            Cell(format_value(r["diff"], r["ci_low"], r["ci_high"], decimals=2, ci_decimals=1)),
            Cell(str(r["test"]) if not _is_missing(r["test"]) else MISSING),
            Cell(format_p(r["p_value"])),
            Cell(MISSING if _is_missing(r["effect_size"]) else f"{float(r['effect_size']):.2f} ({r['effect_size_name']})"),
        ])
    return Table(
        "table_paired",
        "Paired comparison of FGP against CoT on the same items (difference = FGP − CoT, percentage points).",
        ["Model", "Dataset", "Metric"],
        ["Pairs", "CoT", "FGP", "Diff. [95% CI]", "Test", "p", "Effect size"],
        rows, paired[columns_in].reset_index(drop=True), [], notes,
    )


def format_p(value: object) -> str:
    """A p value: three decimals, or ``< 0.001``."""
    if _is_missing(value):
        return MISSING
    return "< 0.001" if float(value) < 0.001 else f"{float(value):.3f}"


#: Columns of the per-item human annotations accepted by :func:`human_agreement`.
HUMAN_ANNOTATION_COLUMNS = ("prompt_id", "model", "dataset", "strategy", "criterion", "value")
HUMAN_CRITERIA = ("bloom_level", "unique", "readable", "answerable")


def human_agreement(votes: pd.DataFrame, annotations: pd.DataFrame) -> pd.DataFrame:
    """Agreement (%) of the majority votes with expert labels, per model × dataset × strategy × criterion.

    ``annotations`` has one row per (prompt_id, model, dataset, strategy, criterion) with the
    expert's ``value``: ``"1"``/``"0"`` (or true/false/yes/no) for unique, readable and answerable;
    a Bloom level name for ``bloom_level``. Items whose vote is null (tie, gated, no question) are
    left out of the denominator. Returns columns model, dataset, strategy, criterion, agreement, n.
    """
    require_columns(annotations, HUMAN_ANNOTATION_COLUMNS, "human annotations")
    require_columns(votes, ["prompt_id", "model", "dataset", "strategy", *HUMAN_CRITERIA], "votes")
    keys = ["prompt_id", "model", "dataset", "strategy", "criterion"]
    duplicated = annotations.duplicated(keys, keep=False)
    if duplicated.any():
        raise TableInputError(
            f"human annotations: duplicate labels for {annotations.loc[duplicated, keys].iloc[0].tolist()}"
        )
    unknown = sorted(set(annotations["criterion"]) - set(HUMAN_CRITERIA))
    if unknown:
        raise TableInputError(f"human annotations: unknown criterion {unknown}; expected {list(HUMAN_CRITERIA)}")
    vote_index = votes.set_index(["prompt_id", "model", "dataset", "strategy"])
    matches = []
    for position, r in enumerate(annotations.itertuples(index=False)):
        key = (r.prompt_id, r.model, r.dataset, r.strategy)
        if key not in vote_index.index:
            raise TableInputError(f"human annotations row {position}: no vote for {key}")
        voted = vote_index.at[key, r.criterion]
        if _is_missing(voted):
            continue
        human = _human_value(r.criterion, r.value, position)
        matches.append({"model": r.model, "dataset": r.dataset, "strategy": r.strategy,
                        "criterion": r.criterion, "match": human == (voted if r.criterion == "bloom_level" else bool(voted))})
    frame = pd.DataFrame(matches, columns=["model", "dataset", "strategy", "criterion", "match"])
    grouped = frame.groupby(["model", "dataset", "strategy", "criterion"], sort=False)["match"]
    result = grouped.agg(agreement=lambda m: 100.0 * float(m.mean()), n="size").reset_index()
    return result


def _human_value(criterion: str, value: object, position: int) -> object:
    text = str(value).strip().lower()
    if criterion == "bloom_level":
        try:
            return normalize_level(value, allow_uncategorized=False)
        except ValueError as error:
            raise TableInputError(f"human annotations row {position}: {error}") from error
    if text in {"1", "true", "yes", "y"}:
        return True
    if text in {"0", "false", "no", "n"}:
        return False
    raise TableInputError(f"human annotations row {position}: {value!r} is not a yes/no label for {criterion}")


def human_agreement_table(agreement: pd.DataFrame) -> Table:
    """Table 9: rows model × prompt, columns Bloom / Unique / Readable / Answerable, plus the mean."""
    require_columns(agreement, ["model", "dataset", "strategy", "criterion", "agreement", "n"], "human agreement")
    lookup = {(r["model"], r["dataset"], r["strategy"], r["criterion"]): r for _, r in agreement.iterrows()}
    rows = []
    order = agreement[["model", "dataset", "strategy"]].drop_duplicates()
    order = order.assign(_rank=order["strategy"].map({"cot": 0, "fgp": 1}).fillna(2))
    order = order.sort_values(["dataset", "_rank"], kind="stable")
    for _, key in order.iterrows():
        row = [Cell(key["model"]), Cell(key["dataset"]), Cell(strategy_label(key["strategy"]))]
        for criterion in HUMAN_CRITERIA:
            r = lookup.get((key["model"], key["dataset"], key["strategy"], criterion))
            row.append(Cell(MISSING if r is None else f"{float(r['agreement']):.2f}"))
        rows.append(row)
    means = agreement.groupby("criterion")["agreement"].mean()
    rows.append([Cell("Average"), Cell(MISSING), Cell(MISSING)]
                + [Cell(format_number(means.get(c))) for c in HUMAN_CRITERIA])
    return Table(
        "table9_human_agreement",
        "Table 9. Agreement (%) between the judges' majority votes and human annotations.",
        ["Model", "Dataset", "Prompt"], [CRITERION_LABEL[c] if c != "bloom_level" else "Bloom" for c in HUMAN_CRITERIA],
        rows, agreement.reset_index(drop=True), [],
        ["Percent of annotated items whose majority vote equals the expert's label; items with no majority are left out."],
    )


def build_tables(
    all_metrics: pd.DataFrame,
    datasets: Mapping[str, pd.DataFrame],
    reliability: pd.DataFrame,
    *,
    paired: pd.DataFrame | None = None,
    human: pd.DataFrame | None = None,
) -> list[Table]:
    """Every table of :func:`write_tables`, in report order, without writing anything."""
    check_metrics(all_metrics)
    for name in datasets:
        if not _SAFE_NAME.match(str(name)):
            raise TableInputError(f"dataset name {name!r} cannot be part of a file name")
    cells = ordered_cells(all_metrics, list(datasets))
    tables = [dataset_table(datasets)]
    tables.append(metric_table(
        all_metrics, QUALITY_METRICS, name="table4_quality", cells=cells,
        caption="Table 4. Uniqueness, readability and answerability of the generated questions (%).",
    ))
    tables.append(metric_table(
        all_metrics, USABILITY_METRICS, name="table5_usability", cells=cells,
        caption="Table 5. Usability, Bloom-level consistency (CatCons) and knowledge coverage (KnowCov) (%).",
        notes=[("Usability: share of judged questions voted unique, readable and answerable; "
                "CatCons and KnowCov over useful questions.")],
    ))
    tables.append(metric_table(
        all_metrics, SHIFT_METRICS, name="table6_cognitive_shift", cells=cells,
        caption="Table 6. Cognitive shift: regression, drift and leap among useful questions whose judged level differs from the original's (%).",
        notes=["CogReg: Δ ≤ −2; CogDrift: |Δ| = 1; CogLeap: Δ ≥ 2 Bloom levels (judged − original)."],
    ))
    tables.append(metric_table(
        all_metrics, QUALITY_METRICS, name="table7_quality_by_dataset", cells=cells, by_dataset=True,
        caption="Table 7. Uniqueness, readability and answerability per dataset under each strategy (%).",
    ))
    tables.append(metric_table(
        all_metrics, SHIFT_METRICS, name="table8_shift_by_dataset", cells=cells, by_dataset=True,
        caption="Table 8. Cognitive shift per dataset under each strategy (% of useful questions whose judged level differs from the original's).",
    ))
    tables.append(metric_table(
        all_metrics, AUXILIARY_METRICS, name="table_auxiliary", cells=cells,
        caption="CogShift score, auxiliary tasks under CoT (question classification, knowledge identification) and question counts.",
        notes=["CogShift is a raw score (mean (1 − δ)·|Δ|); Generated/Useful are counts; the auxiliary tasks exist only under CoT."],
    ))
    tables.append(reliability_table(reliability))
    tables.append(judges_table(reliability))
    tables.append(parse_failure_table(all_metrics, cells))
    tables.append(paired_table(paired))
    if human is not None:
        tables.append(human_agreement_table(human))
    return tables


def _file_names(stems: Iterable[str]) -> tuple[str, ...]:
    return tuple(f"{stem}.{ext}" for stem in stems for ext in ("csv", "md", "tex"))


#: Tables written on every run, in report order (the workflow declares these as outputs).
TABLE_STEMS: tuple[str, ...] = (
    "table1_datasets",
    "table4_quality",
    "table5_usability",
    "table6_cognitive_shift",
    "table7_quality_by_dataset",
    "table8_shift_by_dataset",
    "table_auxiliary",
    "table_reliability",
    "table_judges",
    "table_parse_failures",
    "table_paired",
)
TABLE_FILES: tuple[str, ...] = _file_names(TABLE_STEMS)
#: Written only when human agreement is given to :func:`write_tables`.
HUMAN_TABLE_FILES: tuple[str, ...] = _file_names(("table9_human_agreement",))


def write_tables(
    all_metrics: pd.DataFrame,
    datasets: Mapping[str, pd.DataFrame],
    reliability: pd.DataFrame,
    out_dir: Path,
    *,
    paired: pd.DataFrame | None = None,
    human: pd.DataFrame | None = None,
) -> list[Path]:
    """Write every table as CSV, Markdown and LaTeX into ``out_dir``; return the paths written.

    Always writes :data:`TABLE_FILES`; ``human`` is the output of :func:`human_agreement`
    (model, dataset, strategy, criterion, agreement, n) and adds :data:`HUMAN_TABLE_FILES`.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    for table in build_tables(all_metrics, datasets, reliability, paired=paired, human=human):
        for suffix, text in (
            ("csv", table.data.to_csv(index=False, lineterminator="\n")),
            ("md", render_markdown(table)),
            ("tex", render_latex(table)),
        ):
            path = out_dir / f"{table.name}.{suffix}"
            write_text_atomic(path, text)
            paths.append(path)
    log.info("wrote %d table files to %s", len(paths), out_dir)
    return paths


# --------------------------------------------------------------------------- Markdown


def _md_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def render_markdown(table: Table) -> str:
    """Caption in bold, a GitHub pipe table (grouped headers as ``group<br>column``), footnotes."""
    header = [_md_escape(c) for c in table.stub_columns]
    group_of = []
    for label, span in table.groups or [("", len(table.columns))]:
        group_of += [label] * span
    for column, group in zip(table.columns, group_of):
        header.append(f"{_md_escape(group)}<br>{_md_escape(column)}" if group else _md_escape(column))
    align = [":---"] * len(table.stub_columns) + ["---:"] * len(table.columns)
    lines = [f"<!-- bloomqg table: {table.name} -->", f"**{_md_escape(table.caption)}**", ""]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("| " + " | ".join(align) + " |")
    for row in table.rows:
        lines.append("| " + " | ".join(_md_escape(c.text) + (DAGGER if c.gated else "") for c in row) + " |")
    for note in table.notes:  # one paragraph per footnote
        lines += ["", _md_escape(note)]
    return "\n".join(lines) + "\n"


@dataclass
class ParsedTable:
    """A table read back from its Markdown file (for the HTML report)."""

    name: str
    caption: str
    groups: list[tuple[str, int]]
    header: list[str]
    rows: list[list[str]]
    notes: list[str]
    align: list[str] = field(default_factory=list)  # "left" | "right" per column


def _md_split(line: str) -> list[str]:
    cells, current, escaped = [], "", False
    for char in line.strip()[1:-1] if line.strip().endswith("|") else line.strip()[1:]:
        if escaped:
            current += char
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "|":
            cells.append(current.strip())
            current = ""
        else:
            current += char
    cells.append(current.strip())
    return cells


def read_markdown_table(path: Path) -> ParsedTable:
    """Read a table written by :func:`render_markdown` back into caption, header, rows and notes."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    match = re.match(r"<!-- bloomqg table: (\S+) -->", lines[0]) if lines else None
    if not match:
        raise TableInputError(f"{path}: not a bloomqg Markdown table (first line must name the table)")
    caption = lines[1].strip().removeprefix("**").removesuffix("**").replace("\\|", "|").replace("\\\\", "\\")
    table_lines = [line for line in lines if line.startswith("|")]
    if len(table_lines) < 2:
        raise TableInputError(f"{path}: no pipe table found")
    raw_header = _md_split(table_lines[0])
    groups: list[tuple[str, int]] = []
    header = []
    for cell in raw_header:
        group, _, column = cell.rpartition("<br>")
        header.append(column)
        if groups and groups[-1][0] == group:
            groups[-1] = (group, groups[-1][1] + 1)
        else:
            groups.append((group, 1))
    align = ["right" if cell.endswith(":") and not cell.startswith(":") else "left"
             for cell in _md_split(table_lines[1])]
    rows = [_md_split(line) for line in table_lines[2:]]
    last_table_line = max(i for i, line in enumerate(lines) if line.startswith("|"))
    notes = [line.replace("\\|", "|").replace("\\\\", "\\") for line in lines[last_table_line + 1:] if line.strip()]
    return ParsedTable(match.group(1), caption, groups, header, rows, notes, align)


# --------------------------------------------------------------------------- LaTeX

_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "–": "--",
    "−": "$-$",
    "≤": r"$\leq$",
    "≥": r"$\geq$",
    "Δ": r"$\Delta$",
    "δ": r"$\delta$",
    "α": r"$\alpha$",
    "·": r"$\cdot$",
    "†": r"$^{\dagger}$",
}
_LATEX_PATTERN = re.compile("|".join(re.escape(k) for k in _LATEX_SPECIAL))


def latex_escape(text: str) -> str:
    """Escape LaTeX's special characters and map the few non-ASCII symbols the tables use."""
    return _LATEX_PATTERN.sub(lambda m: _LATEX_SPECIAL[m.group(0)], text)


def render_latex(table: Table) -> str:
    """A booktabs ``table`` environment; grouped columns get ``\\multicolumn`` and ``\\cmidrule``."""
    n_stub = len(table.stub_columns)
    spec = "l" * n_stub + "r" * len(table.columns)
    environment = "table*" if len(table.columns) > MAX_COLUMNS_SINGLE_WIDTH else "table"
    lines = [
        f"% bloomqg table: {table.name} (requires \\usepackage{{booktabs}})",
        f"\\begin{{{environment}}}[htbp]",
        r"\centering",
        r"\small",
        f"\\caption{{{latex_escape(table.caption)}}}",
        f"\\label{{tab:{table.name}}}",
        f"\\begin{{tabular}}{{{spec}}}",
        r"\toprule",
    ]
    if table.groups and any(label for label, _ in table.groups):
        parts, rules, column = ["" for _ in range(n_stub)], [], n_stub + 1
        for label, span in table.groups:
            if label:
                parts.append(f"\\multicolumn{{{span}}}{{c}}{{{latex_escape(label)}}}")
                rules.append(f"\\cmidrule(lr){{{column}-{column + span - 1}}}")
            else:
                parts += [""] * span
            column += span
        lines.append(" & ".join(parts) + r" \\")
        lines.append(" ".join(rules))
    lines.append(" & ".join(latex_escape(c) for c in [*table.stub_columns, *table.columns]) + r" \\")
    lines.append(r"\midrule")
    for row in table.rows:
        lines.append(" & ".join(latex_escape(c.text) + (r"$^{\dagger}$" if c.gated else "") for c in row) + r" \\")
    lines.append(r"\bottomrule")
    lines.append(r"\end{tabular}")
    for note in table.notes:
        lines.append(r"\par\smallskip{\footnotesize " + latex_escape(note) + "}")
    lines.append(f"\\end{{{environment}}}")
    return "\n".join(lines) + "\n"
