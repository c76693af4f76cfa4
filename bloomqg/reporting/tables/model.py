"""A table ready to render (:class:`Table` of :class:`Cell`), input checks and number formatting.

Values carry their confidence interval where the table has room ("90.40 [88.1, 92.3]"); a value
fed by a judging criterion that failed the α gate is marked with a dagger and a footnote. Decimals
come from each metric's :class:`~bloomqg.metrics.spec.MetricSpec`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import pandas as pd

from bloomqg.metrics.intervals import BETTING_MEAN, FEW_CLUSTERS, MIN_CLUSTERS
from bloomqg.metrics.paired import p_text
from bloomqg.metrics.registry import metric_spec
from bloomqg.reporting.display import MISSING, is_missing
from bloomqg.store.frames import METRICS


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
    label leaves those columns ungrouped. ``group_title`` names what the groups are.
    """

    name: str
    caption: str
    stub_columns: list[str]
    columns: list[str]
    rows: list[list[Cell]]
    data: pd.DataFrame
    groups: list[tuple[str, int]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: what the column groups are ("Dataset, strategy", "Criterion"): where the groups repeat the
    #: same columns, the report turns each group into rows under a column of this name
    group_title: str = ""

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


def gated_cells(all_metrics: pd.DataFrame) -> set[tuple[str, str, str, str]]:
    """(model, dataset, strategy, metric) of every value that rests on a criterion the gate flagged
    in its cell (``alpha_gated``): the values the tables mark †."""
    if "alpha_gated" not in all_metrics:
        return set()
    return {(str(r.model), str(r.dataset), str(r.strategy), str(r.metric))
            for r in all_metrics.itertuples(index=False) if pd.notna(r.alpha_gated) and bool(r.alpha_gated)}


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
    f"{DAGGER} a judging criterion feeding this value failed the reliability gate, or its agreement could not "
    "be measured (the gate's rule: see the glossary's \"The gate\" and the Judge reliability section)."
)
CI_NOTE = "Values are percentages with 95% confidence intervals in brackets unless noted."

NO_CI_NOTE = (
    "Values are percentages unless noted; 95% confidence intervals are in the CSV file (and, for Tables 4 and 6, "
    "in Tables 7 and 8, per dataset)."
)
#: Wider tables leave intervals out of the Markdown/LaTeX cells (they stay in the CSV).
MAX_COLUMNS_WITH_CI = 6

#: How each ``ci_method`` of :mod:`bloomqg.metrics.intervals` reads in a table's note.
CI_METHOD_WORDS = {
    "clopper_pearson": "exact (Clopper–Pearson) intervals of shares",
    "wilson": "Wilson score intervals of shares",
    "jeffreys": "Jeffreys intervals of shares",
    "percentile_bootstrap": "percentile bootstrap intervals over questions",
    "tango_paired_score": "for yes/no outcomes an interval made for two answers per original (Tango's score interval)",
    "mover_paired_score": ("for KnowCov one that combines the two strategies' own intervals allowing for their "
                           "correlation (MOVER)"),
    "betting": ("for means of Bloom levels an exact interval built from fair bets against each candidate mean, "
                "narrower where most questions are a level or two off (a betting interval)"),
    "betting_paired": ("for CogShift the same exact betting interval, of the paired differences"),
}


def interval_words(methods: Iterable[object]) -> str | None:
    """The interval methods of the rows shown (their ``ci_method``) in words; None for none."""
    bases: dict[str, None] = {}
    graded, clusters, few = False, set(), False
    for method in (str(m) for m in methods if not is_missing(m)):
        base, _, cluster = method.partition("_clustered_")
        few |= cluster.endswith(FEW_CLUSTERS)
        cluster = cluster.removesuffix(FEW_CLUSTERS)
        graded |= base.endswith("_bounded_mean") and base != BETTING_MEAN
        bases[base.removesuffix("_bounded_mean")] = None
        if cluster:
            clusters.add(cluster)
    if not bases:
        return None
    words = "; ".join(CI_METHOD_WORDS.get(base, base.replace("_", " ")) for base in bases)
    if graded:
        words += ", for a graded outcome (KnowCov; CogShift where clustered) on its mean rescaled to 0–1"
    if clusters:
        words += f", widened by the design effect of questions clustered by {', '.join(sorted(clusters))}"
    if few:
        words += (f"; some rows had fewer than {MIN_CLUSTERS} clusters, where the clustered interval's "
                  "coverage was not measured")
    return words


def interval_note(methods: Iterable[object], confidence: float = 0.95) -> str:
    """The table note naming the interval methods of the rows shown (see docs/statistics.md)."""
    words = interval_words(methods)
    if words is None:
        return CI_NOTE
    return (f"Values are percentages with {100 * confidence:g}% confidence intervals in brackets unless noted: "
            f"{words} (see the glossary's 95% interval; the project's docs/statistics.md has the details).")


def fixed(value: float, decimals: int) -> str:
    """``value`` with fixed decimals; one that rounds to zero has no sign ("0.00", not "-0.00")."""
    text = f"{float(value):.{decimals}f}"
    return text[1:] if text.startswith("-") and not text.strip("-0.") else text


def format_number(value: object, decimals: int = 2) -> str:
    """A number with fixed decimals, or the missing-value dash."""
    if is_missing(value):
        return MISSING
    return fixed(float(value), decimals)  # type: ignore[arg-type]


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
    text = fixed(float(value), decimals)  # type: ignore[arg-type]
    if not is_missing(ci_low) and not is_missing(ci_high):
        text += f" [{fixed(float(ci_low), ci_decimals)}, {fixed(float(ci_high), ci_decimals)}]"  # type: ignore[arg-type]
    return text


def format_difference(value: object, ci_low: object = None, ci_high: object = None, *, decimals: int = 2,
                      ci_decimals: int = 1) -> str:
    """A paired difference as :func:`format_value` writes it, except that no difference at all
    (value and both bounds round to zero: "-0.00 [-0.0, -0.0]") is written ``0.00``."""
    text = format_value(value, ci_low, ci_high, decimals=decimals, ci_decimals=ci_decimals)
    bounds = [ci_low, ci_high]
    if (text != MISSING and not fixed(float(value), decimals).strip("0.")  # type: ignore[arg-type]
            and all(is_missing(b) or not fixed(float(b), ci_decimals).strip("0.") for b in bounds)):  # type: ignore[arg-type]
        return fixed(0.0, decimals)
    return text


def format_paired_difference(value: object, ci_low: object, ci_high: object, n_pairs: object) -> str:
    """A paired difference as the paired table and the report's Answer write it: two decimals and
    its interval to one. A percentile bootstrap of one pair is the pair itself: that has no
    interval, which is said rather than shown as ``[d, d]``; a score interval of one pair is real
    (and wide) and is shown."""
    degenerate = is_missing(ci_low) or is_missing(ci_high) or float(ci_low) == float(ci_high)  # type: ignore[arg-type]
    if not is_missing(n_pairs) and int(n_pairs) == 1 and not is_missing(value) and degenerate:  # type: ignore[call-overload]
        return f"{format_difference(value)} (one pair: no interval)"
    return format_difference(value, ci_low, ci_high, decimals=2, ci_decimals=1)


def format_p(value: object) -> str:
    """A p value: three decimals, or ``< 0.001`` (:func:`~bloomqg.metrics.paired.p_text`); – where missing."""
    return MISSING if is_missing(value) else p_text(float(value))  # type: ignore[arg-type]


#: What the "n=… of …" beside a rate means, and why items leave its denominator.
N_NOTE = (
    "n = the questions a rate is over; \"of N\": the cell's N prompts, N − n excluded: for Unique, "
    "Readable and Answerable, generations without a parsable question and items without a majority vote "
    "(tie or too few valid votes); Usability counts every generated question whose usefulness is decided: "
    "one 'no' majority on any of the three makes it not useful even where another criterion has no majority, "
    "so Usability's n can exceed Readable's; for CatCons and KnowCov also the questions not useful "
    "(CatCons: or without a judged level; KnowCov: or without judged units); for the shift shares, the useful questions whose level did not change."
)


def with_n(text: str, n: object, of: object = None) -> str:
    """``"90.40 [88.1, 92.3] (n=72 of 80)"``: a rate with its denominator (and the rows it was
    drawn from, when some were excluded)."""
    if text == MISSING or is_missing(n):
        return text
    if of is not None and not is_missing(of) and int(of) != int(n):
        return f"{text} (n={int(n)} of {int(of)})"
    return f"{text} (n={int(n)})"


def metric_cell(row: pd.Series | None, metric: str, *, with_ci: bool = True, of: object = None) -> Cell:
    """The display cell of one METRICS row (None: no such row), with the metric's own decimals
    and, for a rate, its n (``of``: the cell's prompts, to show how many were excluded)."""
    if row is None:
        return Cell(MISSING)
    spec = metric_spec(metric)
    source = (str(row["model"]), str(row["dataset"]), str(row["strategy"]), metric)
    if spec.is_count:  # no interval; a count of part of the cell says of how many (Useful of the decided replies)
        text = format_number(row["value"], spec.decimals)
        n = row.get("n")
        if not is_missing(n) and not is_missing(row["value"]) and int(n) != float(row["value"]):
            text += f" (of {int(n)})"
        return Cell(text, bool(row["alpha_gated"]), source)
    low, high = (row["ci_low"], row["ci_high"]) if with_ci else (None, None)
    text = format_value(row["value"], low, high, decimals=spec.decimals, ci_decimals=spec.ci_decimals)
    text = with_n(text, row.get("n"), of)
    return Cell(text, bool(row["alpha_gated"]) and text != MISSING, source if text != MISSING else None)
