"""The paper's published figures (``configs/paper-figures.yaml``) and a reproduction beside them.

The data file holds Tables 4–8 as printed, each citing the paper's caption, plus two kinds of
annotation a reader should see rather than have hidden:

- ``slips``: the printed table disagrees with the release by a slip of the pen. Either a row
  pair printed swapped (Baichuan2-7B's computer-science CoT and FGP rows of Table 4) or one
  misprinted cell (InternLM3-8B's CoT CogLeap in Table 6, printed 53.63, reads 52.63). The
  comparison keeps the printed value and adds the value it stands for.
- ``unreproduced``: cells no rule found over the release reproduces; shown with their note.

:func:`compare_with_paper` lines a reproduced table up against them, cell by cell.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pandas as pd

from bloomqg.store.provenance import REPO_ROOT

PAPER_FIGURES_PATH = REPO_ROOT / "configs" / "paper-figures.yaml"

#: A reproduced cell within this many percentage points of the paper counts as reproduced (the
#: paper prints two decimals).
REPRODUCED_WITHIN = 0.05

#: The note of a cell that misses and that configs/paper-figures.yaml does not explain.
UNEXPLAINED_NOTE = ("Not reproduced and not yet explained: no rule found over this run's release files gives the "
                    "printed value (configs/paper-figures.yaml lists no slip or caveat for this cell).")

COMPARISON_COLUMNS: tuple[str, ...] = (
    "table", "model", "paper_model", "dataset", "strategy", "metric",
    "ours", "paper", "paper_reads", "difference", "note",
)


class PaperFiguresError(ValueError):
    """The published-figures file is malformed; the message names the file and key."""


@dataclass(frozen=True)
class PaperFigure:
    """One number the paper publishes: a metric of one model in one setting, in percent."""

    table: str
    model: str
    dataset: str
    strategy: str
    metric: str
    value: float


@dataclass(frozen=True)
class Annotation:
    """A cell's slip or caveat: what the printed value stands for (``reads``) and why."""

    reads: float | None
    note: str


@dataclass(frozen=True)
class PaperFigures:
    """The data file, loaded: figures per table, each table's citation, and the annotations."""

    path: Path
    tables: dict[str, tuple[PaperFigure, ...]]
    cites: dict[str, str]
    models: tuple[str, ...]
    #: (table, model, dataset, strategy, metric) -> annotation; model None = every model
    annotations: dict[tuple[str, str | None, str, str, str], Annotation]

    def value(self, table: str, model: str, dataset: str, strategy: str, metric: str) -> float:
        for figure in self.tables.get(table, ()):
            if (figure.model, figure.dataset, figure.strategy, figure.metric) == (model, dataset, strategy, metric):
                return figure.value
        return math.nan

    def annotation(self, table: str, model: str, dataset: str, strategy: str, metric: str) -> Annotation | None:
        return self.annotations.get((table, model, dataset, strategy, metric)) or self.annotations.get(
            (table, None, dataset, strategy, metric)
        )


def _cell(text: object, where: str) -> tuple[str, str, str]:
    parts = str(text).split("/")
    if len(parts) != 3 or not all(parts):
        raise PaperFiguresError(f"{where}: expected 'dataset/strategy/metric', got {text!r}")
    return parts[0], parts[1], parts[2]


def load_paper_figures(path: str | Path = PAPER_FIGURES_PATH) -> PaperFigures:
    """Read and check the published-figures file; :class:`PaperFiguresError` names what is wrong."""
    import yaml

    path = Path(path)
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as error:
        raise PaperFiguresError(f"{path}: cannot read: {error}") from error
    if not isinstance(document, dict) or not isinstance(document.get("tables"), dict):
        raise PaperFiguresError(f"{path}: expected a mapping with key 'tables'")
    tables: dict[str, tuple[PaperFigure, ...]] = {}
    cites: dict[str, str] = {}
    models: list[str] = []
    for table, spec in document["tables"].items():
        where = f"{path}: tables.{table}"
        if not isinstance(spec, dict) or not {"cites", "columns", "rows"} <= set(spec):
            raise PaperFiguresError(f"{where}: needs keys 'cites', 'columns' and 'rows'")
        columns = [_cell(column, f"{where}.columns[{i}]") for i, column in enumerate(spec["columns"])]
        figures = []
        for model, values in spec["rows"].items():
            if not isinstance(values, list) or len(values) != len(columns):
                raise PaperFiguresError(f"{where}.rows.{model}: expected {len(columns)} numbers, got {values!r}")
            for (dataset, strategy, metric), value in zip(columns, values):
                if not isinstance(value, (int, float)) or isinstance(value, bool):
                    raise PaperFiguresError(f"{where}.rows.{model}: {value!r} is not a number")
                figures.append(PaperFigure(table, model, dataset, strategy, metric, float(value)))
            if model not in models:
                models.append(model)
        tables[table] = tuple(figures)
        cites[table] = str(spec["cites"])
    figures_so_far = PaperFigures(path, tables, cites, tuple(models), {})

    annotations: dict[tuple[str, str | None, str, str, str], Annotation] = {}
    for index, slip in enumerate(document.get("slips") or []):
        where = f"{path}: slips[{index}]"
        table, model, note = slip.get("table"), slip.get("model"), slip.get("note")
        if table not in tables or model not in models or not note:
            raise PaperFiguresError(f"{where}: needs a known 'table' and 'model' and a 'note'")
        if "swapped_strategies" in slip:
            first, second = slip["swapped_strategies"]
            for figure in tables[table]:
                if figure.model != model or figure.dataset != slip.get("dataset"):
                    continue
                other = {first: second, second: first}.get(figure.strategy)
                if other is None:
                    continue
                reads = figures_so_far.value(table, model, figure.dataset, other, figure.metric)
                annotations[(table, model, figure.dataset, figure.strategy, figure.metric)] = Annotation(reads, note)
        elif {"cell", "printed", "reads"} <= set(slip):
            dataset, strategy, metric = _cell(slip["cell"], f"{where}.cell")
            printed = figures_so_far.value(table, model, dataset, strategy, metric)
            if printed != float(slip["printed"]):
                raise PaperFiguresError(f"{where}: 'printed' {slip['printed']} is not the table's {printed}")
            annotations[(table, model, dataset, strategy, metric)] = Annotation(float(slip["reads"]), note)
        else:
            raise PaperFiguresError(f"{where}: needs 'swapped_strategies' and 'dataset', or 'cell', 'printed' and 'reads'")
    for index, caveat in enumerate(document.get("unreproduced") or []):
        where = f"{path}: unreproduced[{index}]"
        if caveat.get("table") not in tables or not caveat.get("note"):
            raise PaperFiguresError(f"{where}: needs a known 'table' and a 'note'")
        dataset, strategy, metric = _cell(caveat.get("cell"), f"{where}.cell")
        annotations[(caveat["table"], caveat.get("model"), dataset, strategy, metric)] = Annotation(None, caveat["note"])
    return PaperFigures(path, tables, cites, tuple(models), annotations)


@lru_cache(maxsize=1)
def paper_figures() -> PaperFigures:
    """The figures of :data:`PAPER_FIGURES_PATH`, read once."""
    return load_paper_figures()


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


def compare_with_paper(
    table_frame: pd.DataFrame,
    table_name: str,
    model_names: Mapping[str, str] | None = None,
    figures: PaperFigures | None = None,
    metric_columns: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Our figures next to the paper's for ``table_name`` ("table4".."table8").

    ``table_frame`` has one row per run (model, dataset, strategy) and a column per metric, as
    :func:`bloomqg.release.tables.release_tables` writes it. Models map to the paper's by
    ``model_names`` (ours -> paper's) or else by :func:`paper_model_name`. One row per run of
    ours in a setting the paper's table covers and per metric it reports there, with the
    columns of :data:`COMPARISON_COLUMNS`: ``paper`` as printed, ``paper_reads`` what it stands
    for after a known slip (else the printed value), ``difference`` = ours − paper_reads, and
    ``note`` the slip's or caveat's note. ``paper`` is NaN for a model the paper does not have.
    """
    figures = figures or paper_figures()
    if table_name not in figures.tables:
        raise ValueError(f"unknown paper table {table_name!r}; known: {sorted(figures.tables)}")
    missing = [name for name in ("model", "dataset", "strategy") if name not in table_frame.columns]
    if missing:
        raise ValueError(f"{table_name}: missing columns {missing}")
    settings: dict[tuple[str, str], list[str]] = {}
    for figure in figures.tables[table_name]:
        metrics = settings.setdefault((figure.dataset, figure.strategy), [])
        if figure.metric not in metrics:
            metrics.append(figure.metric)
    records = []
    for row in table_frame.to_dict("records"):
        model = str(row["model"])
        paper_model = (model_names or {}).get(model) or paper_model_name(model)
        for metric in settings.get((row["dataset"], row["strategy"]), []):
            if metric not in row:
                raise ValueError(f"{table_name}: column {metric!r} missing for {model}/{row['dataset']}/{row['strategy']}")
            ours = float(pd.to_numeric(pd.Series([row[metric]]), errors="coerce").iloc[0])
            cell = (table_name, paper_model or "", row["dataset"], row["strategy"], metric)
            paper = figures.value(*cell)
            annotation = figures.annotation(*cell)
            reads = paper if annotation is None or annotation.reads is None else annotation.reads
            note = None if annotation is None else annotation.note
            if note is None and abs(ours - reads) > REPRODUCED_WITHIN + 1e-9:  # no miss is silent
                note = UNEXPLAINED_NOTE
            records.append({
                "table": table_name, "model": model, "paper_model": paper_model,
                "dataset": row["dataset"], "strategy": row["strategy"], "metric": metric,
                "ours": ours, "paper": paper, "paper_reads": reads, "difference": ours - reads,
                "note": note,
            })
    return pd.DataFrame.from_records(records, columns=list(COMPARISON_COLUMNS))


def reproduced_counts(comparison: pd.DataFrame, within: float = REPRODUCED_WITHIN) -> dict[str, tuple[int, int]]:
    """Per table: (cells within ``within`` points of what the paper's figure reads, cells compared)."""
    counts = {}
    for table, rows in comparison.groupby("table", sort=False):
        compared = rows[rows["paper_reads"].notna()]
        close = int((compared["difference"].abs() <= within + 1e-9).sum())
        counts[str(table)] = (close, len(compared))
    return counts
