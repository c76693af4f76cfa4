"""Every table of a run, in report order, written as CSV, Markdown, LaTeX and its view (JSON)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

from bloomqg.store.atomic import write_text_atomic
from bloomqg.metrics.registry import paper_table_metrics
from bloomqg.reporting.display import StrategyLabels, ordered_cells
from bloomqg.reporting.tables.builders import (
    dataset_table,
    judges_table,
    metric_table,
    paired_table,
    parse_failure_table,
    reliability_table,
)
from bloomqg.reporting.tables.human import human_agreement_table
from bloomqg.reporting.tables.latex import render_latex
from bloomqg.reporting.tables.markdown import render_markdown
from bloomqg.reporting.tables.model import Table, TableInputError, check_metrics, gated_cells
from bloomqg.reporting.tables.view import render_view


log = logging.getLogger(__name__)

_SAFE_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


def build_tables(
    all_metrics: pd.DataFrame,
    datasets: Mapping[str, pd.DataFrame],
    reliability: pd.DataFrame,
    *,
    paired: pd.DataFrame | None = None,
    human: pd.DataFrame | None = None,
    strategy_labels: StrategyLabels | None = None,
) -> list[Table]:
    """Every table of :func:`write_tables`, in report order, without writing anything;
    strategies named and ordered by ``strategy_labels`` ({name: label}, defined order)."""
    check_metrics(all_metrics)
    for name in datasets:
        if not _SAFE_NAME.match(str(name)):
            raise TableInputError(f"dataset name {name!r} cannot be part of a file name")
    cells = ordered_cells(all_metrics, list(datasets), strategy_labels)
    named = {"strategy_labels": strategy_labels}
    tables = [dataset_table(datasets)]
    tables.append(metric_table(
        all_metrics, paper_table_metrics("table4"), name="table4_quality", cells=cells, **named,
        caption="Table 4. Uniqueness, readability and answerability of the generated questions (%).",
    ))
    tables.append(metric_table(
        all_metrics, paper_table_metrics("table5"), name="table5_usability", cells=cells, **named,
        caption="Table 5. Usability, Bloom-level consistency (CatCons) and knowledge coverage (KnowCov) (%).",
        notes=[("Usability: share of generated questions voted unique, readable and answerable (a generation "
                "without a parsable question counts as not usable); CatCons and KnowCov over useful questions.")],
    ))
    tables.append(metric_table(
        all_metrics, paper_table_metrics("table6"), name="table6_cognitive_shift", cells=cells, **named,
        caption="Table 6. Cognitive shift: regression, drift and leap of useful questions off their original's level (%).",
        notes=["CogReg: Δ ≤ −2; CogDrift: |Δ| = 1; CogLeap: Δ ≥ 2 Bloom levels (judged − original)."],
    ))
    tables.append(metric_table(
        all_metrics, paper_table_metrics("table4"), name="table7_quality_by_dataset", cells=cells, by_dataset=True, **named,
        caption="Table 7. Uniqueness, readability and answerability per dataset under each strategy (%).",
    ))
    tables.append(metric_table(
        all_metrics, paper_table_metrics("table6"), name="table8_shift_by_dataset", cells=cells, by_dataset=True, **named,
        caption="Table 8. Cognitive shift per dataset and strategy (% of useful questions off their original's level).",
    ))
    tables.append(metric_table(
        all_metrics, paper_table_metrics("auxiliary"), name="table_auxiliary", cells=cells, **named,
        caption="CogShift score, auxiliary tasks (question classification, knowledge identification) and question counts.",
        notes=["CogShift is a raw score: the mean over useful questions of |Δ|, the number of Bloom levels between the "
               "judged and the original level (0 where they match); Prompts (every prompt of the cell, whether or not its reply held a question) and Useful are counts (Useful of the replies whose usefulness the votes decide, Usability's n); the auxiliary tasks exist only "
               "under strategies whose answers identify the original's level and units (CoT's), – elsewhere; "
               "both count, over every original, one the model did not classify (or named no unit for) as wrong, so "
               "a 0.00 can be mostly silence: the readings of Figures 4 and 6 say how many it classified or named."],
    ))
    tables.append(reliability_table(reliability, strategy_labels))
    tables.append(judges_table(reliability))
    tables.append(parse_failure_table(all_metrics, cells, strategy_labels))
    tables.append(paired_table(paired, strategy_labels, gated_cells(all_metrics)))
    if human is not None:
        tables.append(human_agreement_table(human, strategy_labels))
    return tables


def _file_names(stems: Iterable[str]) -> tuple[str, ...]:
    return tuple(f"{stem}.{ext}" for stem in stems for ext in ("csv", "md", "tex", "json"))


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
    strategy_labels: StrategyLabels | None = None,
) -> list[Path]:
    """Write every table as CSV, Markdown, LaTeX and JSON view into ``out_dir``; return the paths written.

    Always writes :data:`TABLE_FILES`; ``human`` is the output of :func:`human_agreement`
    (model, dataset, strategy, criterion, agreement, n) and adds :data:`HUMAN_TABLE_FILES`.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    for table in build_tables(all_metrics, datasets, reliability, paired=paired, human=human,
                              strategy_labels=strategy_labels):
        for suffix, text in (
            ("csv", table.data.to_csv(index=False, lineterminator="\n")),
            ("md", render_markdown(table)),
            ("tex", render_latex(table)),
            ("json", render_view(table)),
        ):
            path = out_dir / f"{table.name}.{suffix}"
            write_text_atomic(path, text)
            paths.append(path)
    log.info("wrote %d table files to %s", len(paths), out_dir)
    return paths
