"""How the reports name and order things: strategy and criterion labels, cell order, missing values.

Shared by the tables, the figures and the HTML report, so a label is written one way everywhere;
metric labels are the metrics' own (:mod:`bloomqg.metrics.registry`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import pandas as pd


#: How strategies are written in tables and figures.
STRATEGY_LABEL: dict[str, str] = {"cot": "CoT", "fgp": "FGP"}

CRITERION_LABEL: dict[str, str] = {
    "unique": "Unique",
    "readable": "Readable",
    "answerable": "Answerable",
    "bloom_level": "Bloom level",
    "knowledge_units": "Knowledge units",
}

MISSING = "–"  # en dash: no value (no data, or every item of the cell was excluded)


def is_missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def strategy_label(strategy: str) -> str:
    return STRATEGY_LABEL.get(strategy, strategy.upper())


def cell_label(dataset: str, strategy: str) -> str:
    """The column-group label of a (dataset, strategy) cell, e.g. ``cs, CoT``."""
    return f"{dataset}, {strategy_label(strategy)}"


def ordered_unique(values: Iterable) -> list:
    """Distinct values in order of first appearance (the config's order survives the pipeline)."""
    return list(dict.fromkeys(v for v in values if not is_missing(v)))


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


def metric_index(all_metrics: pd.DataFrame) -> dict[tuple[str, str, str, str], pd.Series]:
    return {
        (r["model"], r["dataset"], r["strategy"], r["metric"]): r
        for _, r in all_metrics.iterrows()
    }
