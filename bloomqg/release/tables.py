"""The paper's result tables from a tidy metrics frame, and the paper's own figures to compare.

:func:`release_tables` writes, one row per run (model × dataset × strategy), percentages with two
decimals and an empty cell where a metric does not apply:

- ``table4``: unique, readable, answerable (the paper's Tables 4 and 7)
- ``table5``: usability, catcons, knowcov (Table 5)
- ``table6``: cogreg, cogdrift, cogleap (Tables 6 and 8)
- ``aux_tasks``: classification_acc, knowledge_id_acc (Figures 4–6)

each as ``.csv`` and ``.md``. :data:`PAPER_TABLES` holds the published figures of Tables 4–8 for
all six models; :func:`compare_with_paper` lines a written table up against them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bloomqg.atomic import write_text_atomic
from bloomqg.metrics import METRIC_LABELS

KEY_COLUMNS: tuple[str, ...] = ("model", "dataset", "strategy")

#: Output table name -> its metric columns.
TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    "table4": ("unique", "readable", "answerable"),
    "table5": ("usability", "catcons", "knowcov"),
    "table6": ("cogreg", "cogdrift", "cogleap"),
    "aux_tasks": ("classification_acc", "knowledge_id_acc"),
}

#: The files :func:`release_tables` writes, relative to its ``out_dir``.
RELEASE_TABLE_FILES: tuple[str, ...] = tuple(
    f"{table}.{suffix}" for table in TABLE_COLUMNS for suffix in ("csv", "md")
)


@dataclass(frozen=True)
class PaperFigure:
    """One number the paper publishes: a metric of one model in one setting, in percent."""

    table: str
    model: str
    dataset: str
    strategy: str
    metric: str
    value: float


#: The paper's model names, as its tables spell them most often.
PAPER_MODELS: tuple[str, ...] = (
    "GLM-4-9B",
    "Qwen2.5-7B",
    "Baichuan2-7B",
    "Meta-Llama-3-8B",
    "InternLM3-8B",
    "Spark3.5-Max",
)

# Layout of each published table: (dataset, strategy, metrics) blocks, left to right, and its
# rows in PAPER_MODELS order, copied from the paper's text.
_U_R_A = ("unique", "readable", "answerable")
_SHIFTS = ("cogreg", "cogdrift", "cogleap")
_PAPER_LAYOUT: dict[str, tuple[tuple[str, str, tuple[str, ...]], ...]] = {
    "table4": (("cs", "cot", _U_R_A), ("cs", "fgp", _U_R_A), ("math", "fgp", _U_R_A)),
    "table5": (
        ("cs", "cot", ("usability", "catcons", "knowcov")),
        ("cs", "fgp", ("usability", "catcons", "knowcov")),
        ("math", "fgp", ("usability", "knowcov")),
    ),
    "table6": (("cs", "cot", _SHIFTS), ("cs", "fgp", _SHIFTS)),
    "table7": (("social", "cot", _U_R_A), ("social", "fgp", _U_R_A)),
    "table8": (("social", "cot", _SHIFTS), ("social", "fgp", _SHIFTS)),
}
_PAPER_ROWS: dict[str, tuple[tuple[float, ...], ...]] = {
    "table4": (
        (90.77, 100, 99.86, 99.50, 100, 99.93, 97.71, 100, 100),
        (74.56, 99.93, 99.93, 99.01, 99.86, 99.93, 96.79, 100, 100),
        (85.31, 99.15, 96.68, 88.89, 99.74, 99.47, 97.03, 100, 98.63),
        (97.20, 99.14, 98.20, 98.02, 99.36, 98.87, 96.57, 100, 97.94),
        (94.81, 99.86, 99.79, 98.94, 100, 99.93, 97.07, 100, 99.76),
        (96.96, 100, 99.93, 94.70, 100, 99.79, 97.48, 100, 100),
    ),
    "table5": (
        (90.40, 37.17, 85.45, 99.43, 51.42, 92.82, 97.71, 85.13),
        (74.56, 40.09, 83.98, 98.94, 58.29, 92.14, 96.79, 81.88),
        (88.45, 36.69, 75.97, 82.91, 35.86, 90.20, 95.66, 81.51),
        (96.05, 32.31, 70.46, 97.10, 44.24, 91.84, 94.51, 83.52),
        (91.33, 32.53, 76.26, 99.08, 42.89, 89.56, 96.83, 56.10),
        (96.89, 36.57, 78.03, 94.48, 47.46, 90.42, 97.48, 82.15),
    ),
    "table6": (
        (18.54, 33.42, 48.05, 9.55, 31.49, 58.96),
        (12.38, 35.21, 52.41, 2.27, 39.79, 57.94),
        (22.24, 33.12, 44.64, 19.54, 27.49, 52.96),
        (17.75, 27.38, 54.87, 11.95, 30.28, 57.77),
        (15.99, 31.39, 53.63, 5.68, 29.16, 65.16),
        (28.59, 33.26, 38.16, 14.41, 32.75, 52.84),
    ),
    "table7": (
        (98.00, 100.00, 100.00, 100.00, 100.00, 99.00),
        (99.00, 100.00, 96.00, 100.00, 100.00, 99.00),
        (100.00, 100.00, 95.00, 100.00, 100.00, 100.00),
        (85.00, 100.00, 97.00, 91.00, 99.00, 93.00),
        (100.00, 100.00, 100.00, 100.00, 100.00, 100.00),
        (100.00, 100.00, 99.00, 100.00, 100.00, 98.00),
    ),
    "table8": (
        (8.47, 54.24, 37.29, 3.23, 48.39, 48.39),
        (39.13, 36.96, 23.91, 0.00, 69.57, 30.43),
        (18.42, 44.74, 36.84, 16.18, 35.29, 48.53),
        (37.04, 29.63, 33.33, 33.96, 30.19, 35.85),
        (18.18, 41.56, 40.26, 0.00, 50.00, 50.00),
        (2.50, 55.00, 42.50, 0.00, 33.33, 66.67),
    ),
}


def _paper_figures() -> dict[str, tuple[PaperFigure, ...]]:
    tables: dict[str, tuple[PaperFigure, ...]] = {}
    for table, layout in _PAPER_LAYOUT.items():
        columns = [(dataset, strategy, metric) for dataset, strategy, metrics in layout for metric in metrics]
        figures = []
        for model, values in zip(PAPER_MODELS, _PAPER_ROWS[table], strict=True):
            for (dataset, strategy, metric), value in zip(columns, values, strict=True):
                figures.append(PaperFigure(table, model, dataset, strategy, metric, float(value)))
        tables[table] = tuple(figures)
    return tables


#: The paper's published figures: table name ("table4".."table8") -> its numbers.
PAPER_TABLES: dict[str, tuple[PaperFigure, ...]] = _paper_figures()

#: The written table whose columns a paper table compares against.
_WRITTEN_FOR_PAPER = {"table4": "table4", "table5": "table5", "table6": "table6", "table7": "table4", "table8": "table6"}

# Substrings of a lower-cased alphanumeric model name -> the paper's model.
_MODEL_FAMILIES: tuple[tuple[str, str], ...] = (
    ("glm", "GLM-4-9B"),
    ("qwen", "Qwen2.5-7B"),
    ("baichuan", "Baichuan2-7B"),
    ("baichaun", "Baichuan2-7B"),  # the release's folder spelling
    ("llama", "Meta-Llama-3-8B"),
    ("internlm", "InternLM3-8B"),
    ("spark", "Spark3.5-Max"),
)


def paper_model_name(model: str) -> str | None:
    """The paper's name for a model name like ``glm-4-9b-chat`` or ``llama3``; None if none fits."""
    key = re.sub(r"[^a-z0-9]", "", model.lower())
    for family, name in _MODEL_FAMILIES:
        if family in key:
            return name
    return None


# --------------------------------------------------------------------------------------------
# Writing


def _format(value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return f"{float(value):.2f}"  # type: ignore[arg-type]


def _markdown(frame: pd.DataFrame, metrics: tuple[str, ...]) -> str:
    headers = ["Model", "Dataset", "Strategy"] + [f"{METRIC_LABELS[name]} (%)" for name in metrics]
    lines = [
        "| " + " | ".join(headers) + " |",
        "| " + " | ".join(["---"] * len(KEY_COLUMNS) + ["---:"] * len(metrics)) + " |",
    ]
    for row in frame.itertuples(index=False):
        cells = [str(cell).replace("|", r"\|") for cell in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def release_tables(all_metrics: pd.DataFrame, out_dir: Path) -> list[Path]:
    """Write table4/table5/table6/aux_tasks as ``.csv`` and ``.md`` into ``out_dir``.

    ``all_metrics`` has the columns of :data:`bloomqg.schemas.METRICS` (at least model,
    dataset, strategy, metric, value). Returns the written paths, csv before md per table.
    """
    missing = [name for name in (*KEY_COLUMNS, "metric", "value") if name not in all_metrics.columns]
    if missing:
        raise ValueError(f"all_metrics: missing columns {missing}")
    repeated = all_metrics.duplicated([*KEY_COLUMNS, "metric"])
    if repeated.any():
        first = all_metrics.loc[repeated, [*KEY_COLUMNS, "metric"]].iloc[0].tolist()
        raise ValueError(f"all_metrics: more than one value for (model, dataset, strategy, metric) {first}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    wide = all_metrics.pivot(index=list(KEY_COLUMNS), columns="metric", values="value").sort_index()

    written: list[Path] = []
    for table, metrics in TABLE_COLUMNS.items():
        # A metric absent from all_metrics is an empty column, like a metric that does not apply.
        frame = wide.reindex(columns=list(metrics)).map(_format).reset_index()
        frame.columns = [*KEY_COLUMNS, *metrics]
        csv_path, md_path = out_dir / f"{table}.csv", out_dir / f"{table}.md"
        write_text_atomic(csv_path, frame.to_csv(index=False, lineterminator="\n"))
        write_text_atomic(md_path, _markdown(frame, metrics))
        written += [csv_path, md_path]
    return written


# --------------------------------------------------------------------------------------------
# Comparing


def compare_with_paper(
    table_csv_frame: pd.DataFrame,
    table_name: str,
    model_names: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Our figures next to the paper's for ``table_name`` ("table4".."table8").

    ``table_csv_frame`` is a table as :func:`release_tables` writes it (Tables 7 and 8 read the
    social-science rows of ``table4``/``table6``). Models map to the paper's by
    ``model_names`` (ours -> paper's) or else by :func:`paper_model_name`. Returns one row per
    run of ours in a setting the paper's table covers and per metric it reports there:
    model, paper_model, dataset, strategy, metric, ours, paper, difference (ours − paper);
    ``paper`` is NaN for a model the paper does not have.
    """
    if table_name not in PAPER_TABLES:
        raise ValueError(f"unknown paper table {table_name!r}; known: {sorted(PAPER_TABLES)}")
    missing = [name for name in KEY_COLUMNS if name not in table_csv_frame.columns]
    if missing:
        raise ValueError(f"{table_name}: missing columns {missing}")
    published = {
        (figure.model, figure.dataset, figure.strategy, figure.metric): figure.value
        for figure in PAPER_TABLES[table_name]
    }
    records = []
    for row in table_csv_frame.to_dict("records"):
        model = str(row["model"])
        paper_model = (model_names or {}).get(model) or paper_model_name(model)
        for dataset, strategy, metrics in _PAPER_LAYOUT[table_name]:
            if (row["dataset"], row["strategy"]) != (dataset, strategy):
                continue
            for metric in metrics:
                if metric not in row:
                    raise ValueError(
                        f"{table_name}: column {metric!r} missing (expected the columns of "
                        f"{_WRITTEN_FOR_PAPER[table_name]}.csv)"
                    )
                ours = pd.to_numeric(pd.Series([row[metric]]), errors="coerce").iloc[0]
                paper = published.get((paper_model, dataset, strategy, metric), math.nan)
                records.append(
                    {
                        "model": model,
                        "paper_model": paper_model,
                        "dataset": dataset,
                        "strategy": strategy,
                        "metric": metric,
                        "ours": float(ours),
                        "paper": float(paper),
                        "difference": float(ours) - float(paper),
                    }
                )
    columns = ["model", "paper_model", "dataset", "strategy", "metric", "ours", "paper", "difference"]
    return pd.DataFrame.from_records(records, columns=columns)
