"""The paper's result tables from a tidy metrics frame, and the comparison with the paper.

:func:`release_tables` writes, one row per run (model × dataset × strategy), percentages with two
decimals and an empty cell where a metric does not apply:

- ``table4``: unique, readable, answerable (the paper's Tables 4 and 7)
- ``table5``: usability, catcons, knowcov (Table 5)
- ``table6``: cogreg, cogdrift, cogleap (Tables 6 and 8)
- ``aux_tasks``: classification_acc, knowledge_id_acc (Figures 4–6)
- ``paper_comparison``: every cell of Tables 4–6 the paper prints for these runs, reproduced
  beside published, with the difference and the notes of :mod:`bloomqg.release.paper`, and the
  count per reason of the vote lines that give their votes to no generated question (the import
  report, :func:`bloomqg.release.runs.unjoined_lines`)

each as ``.csv``, ``.md`` and ``.json`` (the Markdown and the view the report reads back are
:mod:`bloomqg.reporting.tables`'s).
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from bloomqg.store.atomic import write_text_atomic
from bloomqg.metrics.registry import metric_spec, paper_table_metrics
from bloomqg.release.paper import (
    REPRODUCED_WITHIN,
    PaperFigures,
    compare_with_paper,
    paper_figures,
    paper_model_name,
    reproduced_counts,
)
from bloomqg.reporting.tables.markdown import render_markdown
from bloomqg.reporting.display import metric_index
from bloomqg.reporting.tables.model import GATED_NOTE, N_NOTE, Cell, Table, interval_note, metric_cell
from bloomqg.reporting.tables.view import render_view

KEY_COLUMNS: tuple[str, ...] = ("model", "dataset", "strategy")

#: Output table name -> its metric columns.
TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    "table4": paper_table_metrics("table4"),
    "table5": paper_table_metrics("table5"),
    "table6": paper_table_metrics("table6"),
    # the auxiliary tasks' accuracies, without CogShift and the counts
    "aux_tasks": tuple(name for name in paper_table_metrics("auxiliary") if metric_spec(name).percent),
}

_CAPTIONS = {
    "table4": "Table 4 from the release. Unique, readable and answerable questions (%), over every line of each run's votes file as published.",
    "table5": "Table 5 from the release. Usability, Bloom-level consistency (CatCons) and knowledge coverage (KnowCov) (%).",
    "table6": "Table 6 from the release. Cognitive shift among useful questions whose judged level differs from the original's (%).",
    "aux_tasks": "Auxiliary tasks under CoT from the release: question classification and knowledge identification accuracy (%).",
}
#: The paper's tables the comparison covers (Tables 7 and 8 are of a subset not in the release).
COMPARED_TABLES: tuple[str, ...] = ("table4", "table5", "table6")
COMPARISON = "paper_comparison"
#: The import report beside the tables: every vote line that joins no generated question.
IMPORT_REPORT = "import_report.parquet"

#: The files :func:`release_tables` writes, relative to its ``out_dir``.
RELEASE_TABLE_FILES: tuple[str, ...] = tuple(
    f"{table}.{suffix}" for table in (*TABLE_COLUMNS, COMPARISON) for suffix in ("csv", "md", "json")
)


# --------------------------------------------------------------------------------------------
# Writing


def _format(value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return f"{float(value):.2f}"  # type: ignore[arg-type]


def _run_order(frame: pd.DataFrame, figures: PaperFigures) -> pd.DataFrame:
    """Runs in the paper's model order (others after, by name), then dataset and strategy."""
    rank = {name: i for i, name in enumerate(figures.models)}
    key = frame["model"].map(lambda m: rank.get(paper_model_name(str(m)) or "", len(rank)))
    return frame.assign(_rank=key).sort_values(["_rank", *KEY_COLUMNS], kind="stable").drop(columns="_rank")


def _row_cells(row: tuple, metrics: tuple[str, ...], index: dict) -> list[Cell]:
    """A run's cells: each value with its 95% interval, its n (of the run's prompts) and the
    dagger when a criterion feeding it failed the α gate, as the study's tables show them
    (:func:`~bloomqg.reporting.tables.model.metric_cell`); each names its (model, dataset,
    strategy, metric) for the report's links to the item explorer. A metric that does not apply
    stays empty."""
    model, dataset, strategy = (str(value) for value in row[:3])
    prompts = index.get((model, dataset, strategy, "n_generated"))
    cells = [Cell(model), Cell(dataset), Cell(strategy)]
    for metric in metrics:
        source = index.get((model, dataset, strategy, metric))
        if source is None or pd.isna(source["value"]):
            cells.append(Cell(""))
            continue
        cells.append(metric_cell(source.reindex(["model", "dataset", "strategy", "value", "ci_low", "ci_high", "n",
                                                 "alpha_gated"]).fillna({"alpha_gated": False}),
                                 metric, of=None if prompts is None else prompts["value"]))
    return cells


def _display_columns(all_metrics: pd.DataFrame, values: pd.DataFrame, metrics: tuple[str, ...]) -> pd.DataFrame:
    """The CSV's columns beside each value: its interval, n and α-gate flag."""
    frame = values.copy()
    for suffix in ("ci_low", "ci_high", "n", "alpha_gated"):
        if suffix not in all_metrics.columns:
            continue
        wide = all_metrics.pivot(index=list(KEY_COLUMNS), columns="metric", values=suffix)
        wide = wide.reindex(columns=list(metrics)).add_suffix(f"_{suffix}").reset_index()
        frame = frame.merge(wide, on=list(KEY_COLUMNS), how="left")
    return frame


def _write(out_dir: Path, name: str, table: Table, csv_frame: pd.DataFrame) -> list[Path]:
    csv_path, md_path, view_path = (out_dir / f"{name}.{suffix}" for suffix in ("csv", "md", "json"))
    write_text_atomic(csv_path, csv_frame.to_csv(index=False, lineterminator="\n"))
    write_text_atomic(md_path, render_markdown(table))
    write_text_atomic(view_path, render_view(table))
    return [csv_path, md_path, view_path]


def unjoined_note(unjoined: pd.DataFrame) -> str:
    """One sentence on the import report: the vote lines that give their votes to no generated
    question, counted per reason and, within it, per run."""
    if unjoined.empty:
        return ("Every line of the imported votes files gives its votes to its own generated question "
                f"({IMPORT_REPORT} lists none).")
    parts = []
    for reason, rows in unjoined.groupby("reason", sort=True):
        runs = rows.groupby(list(KEY_COLUMNS), sort=False).size()
        per_run = ", ".join(f"{model} {dataset}/{strategy} {count}" for (model, dataset, strategy), count in runs.items())
        parts.append(f"{reason} {len(rows)} ({per_run})")
    return (f"Vote lines that give their votes to no generated question: {len(unjoined)}, by reason: "
            + "; ".join(parts) + f". Each is listed with its reason in {IMPORT_REPORT}; they count in Table 4 only.")


def comparison_table(comparison: pd.DataFrame, figures: PaperFigures, unjoined: pd.DataFrame | None = None) -> Table:
    """The side-by-side table of reproduced vs published cells, a count per table in its notes
    (and, given the import report ``unjoined``, its lines counted per reason)."""
    rows = []
    for record in comparison.to_dict("records"):
        reads = "" if record["paper_reads"] == record["paper"] else _format(record["paper_reads"])
        difference = "" if math.isnan(record["difference"]) else f"{record['difference']:+.2f}"
        rows.append([Cell(text) for text in (
            record["table"].replace("table", "Table "), str(record["model"]), record["dataset"], record["strategy"],
            metric_spec(record["metric"]).label, _format(record["ours"]), _format(record["paper"]),
            reads, difference, record["note"] if isinstance(record["note"], str) else "",
        )])
    counts = reproduced_counts(comparison)
    notes = [
        "Reproduced within " + f"{REPRODUCED_WITHIN} points of what the paper's figure reads: "
        + "; ".join(f"{table.replace('table', 'Table ')} {close} of {total} cells" for table, (close, total) in counts.items())
        + ".",
        "Published: as printed; reads as: what a printed slip stands for (empty where there is none); "
        "difference: reproduced − what it reads as.",
        *(f"Cited: {figures.cites[table]}" for table in counts),
        *([] if unjoined is None else [unjoined_note(unjoined)]),
    ]
    return Table(
        COMPARISON,
        "The paper's Tables 4–6 reproduced from its release, beside the published figures.",
        ["Table", "Model", "Dataset", "Strategy", "Metric"],
        ["Reproduced", "Published", "Reads as", "Difference", "Note"],
        rows, comparison, notes=notes,
    )


def release_tables(
    all_metrics: pd.DataFrame, out_dir: Path, figures: PaperFigures | None = None, unjoined: pd.DataFrame | None = None,
) -> list[Path]:
    """Write table4/table5/table6/aux_tasks and paper_comparison as ``.csv``, ``.md`` and ``.json`` into
    ``out_dir``, comparing with ``figures`` (default: ``configs/paper-figures.yaml``); the
    comparison's notes count the import report's lines per reason when ``unjoined`` (columns of
    :data:`bloomqg.store.frames.UNJOINED_LINES`, every imported run's) is given.

    ``all_metrics`` has the columns of :data:`bloomqg.store.frames.METRICS` (at least model,
    dataset, strategy, metric, value). Returns the written paths, csv, md and json per table.
    """
    figures = figures or paper_figures()
    missing = [name for name in (*KEY_COLUMNS, "metric", "value") if name not in all_metrics.columns]
    if missing:
        raise ValueError(f"all_metrics: missing columns {missing}")
    repeated = all_metrics.duplicated([*KEY_COLUMNS, "metric"])
    if repeated.any():
        first = all_metrics.loc[repeated, [*KEY_COLUMNS, "metric"]].iloc[0].tolist()
        raise ValueError(f"all_metrics: more than one value for (model, dataset, strategy, metric) {first}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    wide = all_metrics.pivot(index=list(KEY_COLUMNS), columns="metric", values="value")
    index = metric_index(all_metrics)

    written: list[Path] = []
    comparisons = []
    for table, metrics in TABLE_COLUMNS.items():
        # A metric absent from all_metrics is an empty column, like a metric that does not apply.
        values = _run_order(wide.reindex(columns=list(metrics)).reset_index(), figures)
        values.columns = [*KEY_COLUMNS, *metrics]
        if table in COMPARED_TABLES:  # as printed here: two decimals
            comparisons.append(compare_with_paper(values.round(2), table, figures=figures))
        frame = values.copy()
        frame[list(metrics)] = frame[list(metrics)].map(_format)
        rendered = Table(
            table, _CAPTIONS[table], ["Model", "Dataset", "Strategy"],
            [f"{metric_spec(name).label} (%)" for name in metrics],
            [_row_cells(row, metrics, index) for row in frame.itertuples(index=False)], frame,
            notes=[interval_note(all_metrics.loc[all_metrics["metric"].isin(list(metrics)), "ci_method"]), N_NOTE],
        )
        if rendered.has_gated:
            rendered.notes.append(GATED_NOTE)
        written += _write(out_dir, table, rendered, _display_columns(all_metrics, frame, metrics))
    comparison = pd.concat(comparisons, ignore_index=True)
    written += _write(out_dir, COMPARISON, comparison_table(comparison, figures, unjoined), comparison)
    return written
