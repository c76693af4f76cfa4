"""A table ready to render (:class:`Table` of :class:`Cell`), input checks and number formatting.

Values carry their confidence interval where the table has room ("90.40 [88.1, 92.3]"); a value
fed by a judging criterion that failed the α gate is marked with a dagger and a footnote. Decimals
come from each metric's :class:`~bloomqg.metrics.spec.MetricSpec`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import pandas as pd

from bloomqg.metrics.registry import metric_spec
from bloomqg.reporting.display import MISSING, is_missing
from bloomqg.frames import METRICS


class TableInputError(ValueError):
    """An input frame lacks a column or holds a value the tables cannot place."""


@dataclass(frozen=True)
class Cell:
    """One display cell; ``gated`` adds the dagger (in each format's own notation).

    ``source``: the (model, dataset, strategy, metric) the value is, so the HTML report can link
    the cell to the items behind it (None: not one metric value).
    """

    text: str
    gated: bool = False
    source: tuple[str, str, str, str] | None = None


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


DAGGER = "†"
GATED_NOTE = (
    f"{DAGGER} a judging criterion feeding this value failed the reliability gate "
    "(its agreement coefficient, Krippendorff's α or Gwet's AC1 as gate.coefficient says, below the "
    "threshold; see table_reliability)."
)
CI_NOTE = "Values are percentages with bootstrap 95% confidence intervals in brackets unless noted."

NO_CI_NOTE = (
    "Values are percentages unless noted; 95% confidence intervals are in the CSV file and in the "
    "per-dataset tables (too wide here)."
)
#: Wider tables leave intervals out of the Markdown/LaTeX cells (they stay in the CSV).
MAX_COLUMNS_WITH_CI = 6


def format_number(value: object, decimals: int = 2) -> str:
    """A number with fixed decimals, or the missing-value dash."""
    if is_missing(value):
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
    if is_missing(value):
        return MISSING
    text = f"{float(value):.{decimals}f}"
    if not is_missing(ci_low) and not is_missing(ci_high):
        text += f" [{float(ci_low):.{ci_decimals}f}, {float(ci_high):.{ci_decimals}f}]"
    return text


def format_p(value: object) -> str:
    """A p value: three decimals, or ``< 0.001``."""
    if is_missing(value):
        return MISSING
    return "< 0.001" if float(value) < 0.001 else f"{float(value):.3f}"


def metric_cell(row: pd.Series | None, metric: str, *, with_ci: bool = True) -> Cell:
    """The display cell of one METRICS row (None: no such row), with the metric's own decimals."""
    if row is None:
        return Cell(MISSING)
    spec = metric_spec(metric)
    source = (str(row["model"]), str(row["dataset"]), str(row["strategy"]), metric)
    if spec.is_count:  # no interval
        return Cell(format_number(row["value"], spec.decimals), bool(row["alpha_gated"]), source)
    low, high = (row["ci_low"], row["ci_high"]) if with_ci else (None, None)
    text = format_value(row["value"], low, high, decimals=spec.decimals, ci_decimals=spec.ci_decimals)
    return Cell(text, bool(row["alpha_gated"]) and text != MISSING, source if text != MISSING else None)
