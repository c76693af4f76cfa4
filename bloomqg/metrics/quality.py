"""Unique, readable, answerable (Table 4) and usability (Table 5).

Unique, readable, answerable: shares of judged questions, over the questions with a non-null
majority vote for the criterion. For an imported published run, :func:`line_rates` takes them
over every line of its votes file as published instead (the paper's Table 4 rule; see
:func:`bloomqg.metrics.cell.score_cell`).

Usability is the paper's useful / generated: the questions voted useful over the questions with
a usefulness verdict (non-null ``useful``) **and the generated outputs that hold no question**:
an answer with text (``answered``) whose parse failed, a template placeholder such as
``<new_question>``, the prompt's own example or prose without a question, counts as generated
and not useful (:func:`generated_unusable`). A row without an output (an empty answer, a failed
call, a release row with no generated question) generated nothing and stays out, as does a
question whose verdict is undecided (a tie, too few votes, never judged). The same rule holds
for the workflow's own generations and for imported runs. On the paper's release it gives
InternLM3-8B's computer-science CoT usability (91.33: its 104 placeholder outputs count), and
the paper leaves rows without an output out as well; its four other runs with placeholder
outputs follow other rules (docs/reproducing-the-paper.md).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bloomqg.metrics.intervals import (
    IntervalSpec,
    interval_method,
    percentile_interval,
    rate_interval,
    resample_counts,
)
from bloomqg.metrics.rows import USEFUL_CRITERIA, RowTerms, not_null, require_columns, true
from bloomqg.store.cells import cell_of
from bloomqg.metrics.spec import MetricSpec
from bloomqg.store.frames import BINARY_CRITERIA

QUALITY_SPECS: tuple[MetricSpec, ...] = (
    MetricSpec("unique", "Unique", "percent", True, "%", criteria=frozenset({"unique"}),
               paper_table="table4", paired_outcome="binary",
               definition="share of judged questions the judges' majority calls unique: not a near-copy of the "
               "original question it was written for (a rewording or reordering counts as a copy, as in the paper; "
               "a copy of another question of the dataset is not checked); the judges can miss a copy, most "
               "where their agreement on it is not shown (†): read such a cell's questions"),
    MetricSpec("readable", "Readable", "percent", True, "%", criteria=frozenset({"readable"}),
               paper_table="table4", paired_outcome="binary",
               definition="share of judged questions the judges' majority calls readable (clear, grammatical)"),
    MetricSpec("answerable", "Answerable", "percent", True, "%", criteria=frozenset({"answerable"}),
               paper_table="table4", paired_outcome="binary",
               definition="share of judged questions the judges' majority calls answerable (a student could answer it)"),
    MetricSpec("usability", "Usability", "percent", True, "%", criteria=USEFUL_CRITERIA,
               paper_table="table5", paired_outcome="binary",
               definition="share of replies that give a useful question: unique, readable and answerable by the "
               "judges' majority, over the replies whose usefulness the votes decide (a reply the workflow could not "
               "read a question from counts as not useful; one without a majority on a criterion, and no 'no' on "
               "another, is left out)"),
)


def generated_unusable(votes: pd.DataFrame) -> np.ndarray:
    """Rows whose model wrote an answer that holds no question (``answered`` and parse
    ``failed``): generated, and not useful."""
    return true(votes["answered"]) & (votes["parse_status"] == "failed").to_numpy(dtype=bool)


def quality_rows(votes: pd.DataFrame) -> RowTerms:
    """Per-row terms of the three criteria and of usability (useful / generated)."""
    rows: RowTerms = {}
    for criterion in BINARY_CRITERIA:
        rows[criterion] = (true(votes[criterion]), not_null(votes[criterion]))
    rows["usability"] = (true(votes["useful"]), not_null(votes["useful"]) | generated_unusable(votes))
    return rows


def line_terms(lines: pd.DataFrame) -> RowTerms:
    """Per published line: the terms of unique, readable and answerable (Table 4 of an imported
    run); what :func:`line_rates` sums and the explorer shows per line."""
    require_columns(lines, BINARY_CRITERIA, "published_lines")
    return {criterion: (true(lines[criterion]), not_null(lines[criterion])) for criterion in BINARY_CRITERIA}


def line_rates(
    lines: pd.DataFrame, cell: tuple[str, str, str], intervals: IntervalSpec, seed: int
) -> dict[str, tuple[float, float, float, int, str | None]]:
    """Table 4's unique / readable / answerable over every published line: (value, CI, n, method).

    The lines are the unit (a text repeated on two lines counts twice, as the paper counts it),
    so a score interval takes them as independent; ``percentile_bootstrap`` resamples them."""
    require_columns(lines, ("model", "dataset", "strategy", *BINARY_CRITERIA), "published_lines")
    if lines.empty:
        raise ValueError(f"published_lines of {cell}: no lines")
    if (lines_cell := cell_of(lines, "published_lines")) != cell:
        raise ValueError(f"published_lines are of cell {lines_cell.name()}, votes of {cell.name()}")
    terms = line_terms(lines)
    numerators = np.column_stack([terms[c][0] for c in BINARY_CRITERIA]).astype(np.float64)
    members = np.column_stack([terms[c][1] for c in BINARY_CRITERIA]).astype(np.float64)

    def rate(num: np.ndarray, den: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan) * 100.0

    sizes = members.sum(axis=0)
    successes = numerators.sum(axis=0)
    values = rate(successes, sizes)
    if intervals.bootstrap:
        rng = np.random.default_rng(seed)
        estimates = np.concatenate(
            [rate(counts @ numerators, counts @ members)
             for counts in resample_counts(rng, len(lines), intervals.n_resamples)]
        )
        low, high = percentile_interval(estimates, intervals.confidence)
    else:
        low, high = (100.0 * bound for bound in rate_interval(successes, sizes, intervals.method,
                                                               intervals.confidence))
    return {
        name: (float(values[i]), float(low[i]), float(high[i]), int(sizes[i]),
               interval_method(intervals.method, graded=False) if sizes[i] else None)
        for i, name in enumerate(BINARY_CRITERIA)
    }
