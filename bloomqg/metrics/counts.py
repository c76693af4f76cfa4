"""Question counts of a cell: ``n_generated`` (rows) and ``n_useful`` (useful rows); no interval."""

from __future__ import annotations

import numpy as np

from bloomqg.metrics.rows import USEFUL_CRITERIA, RowTerms
from bloomqg.metrics.spec import MetricSpec

COUNT_SPECS: tuple[MetricSpec, ...] = (
    # every prompt of the cell, answered or not: "Generated" read as questions the parser found
    MetricSpec("n_generated", "Prompts", "count", None, "questions", decimals=0, ci_decimals=0,
               paper_table="auxiliary", outcome_range=None),
    MetricSpec("n_useful", "Useful", "count", None, "questions", criteria=USEFUL_CRITERIA, decimals=0,
               ci_decimals=0, paper_table="auxiliary", outcome_range=None),
)


def count_results(n_rows: int, rows: RowTerms) -> dict[str, tuple[float, float, float, int]]:
    """(value, CI low, CI high, n) of both counts; ``n`` of ``n_useful`` counts non-null votes."""
    useful, judged = rows["usability"]
    return {
        "n_generated": (float(n_rows), np.nan, np.nan, n_rows),
        "n_useful": (float(int(useful.sum())), np.nan, np.nan, int(judged.sum())),
    }
