"""The report's facts: every quantity the report prints, in one frame.

One row per quantity of one cell (:data:`FACT_COLUMNS`): what it is (``quantity`` and its
``definition``), where it holds (model, dataset, strategy and a ``subject`` such as a judge, a
criterion or a strategy pair), its ``value``, ``n``, interval and ``method``, and the frame it
comes from (``source``). :func:`study_facts` collects them from the frames the report is built
from, and from the few aggregates the report's sentences and tables compute themselves; those
aggregates are computed here, once (:func:`cell_mean`, :func:`judge_means`,
:func:`value_differences`), and the readings and tables call the same functions.

``build_report`` writes the frame beside the report (``report_facts.parquet``); a printed
number that matches no fact is a number the report made up on the way (the facts check,
``tests/support/report_facts.py``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from bloomqg.inputs.bloom import BLOOM_LEVELS
from bloomqg.metrics.registry import metric_spec
from bloomqg.metrics.robustness import variant_entry, variants_of
from bloomqg.reporting.display import ordered_unique
from bloomqg.store.frames import BINARY_CRITERIA
from bloomqg.store.json_columns import json_mapping

FACT_COLUMNS = ("quantity", "model", "dataset", "strategy", "subject", "definition", "value", "n",
                "ci_low", "ci_high", "method", "source")

# what a column of the frames below measures; a column without an entry is not a reported quantity
COLUMN_DEFINITIONS: dict[str, str] = {
    # answer.parquet (bloomqg.metrics.answer)
    "diff": "difference of the two arms over the paired items (second minus first), in points",
    "n_pairs": "items both arms answered with a usable question (the pairs a paired difference is over)",
    "p_adjusted": "p value of the paired test after Holm's step-down over the comparison's family",
    "family_size": "number of tests Holm's correction is taken over",
    "significance": "the level a p value must be below to count as significant",
    "mdd": "minimum detectable difference at the pairs there are (80% power, 5% two-sided)",
    "max_detectable": "largest minimum detectable difference a verdict may rest on (config answer.max_detectable_difference)",
    "target_difference": "the difference the study plan sizes for (config plan.difference)",
    "n_needed_target": "items per cell needed to detect the target difference",
    "n_needed_verdict": "items per cell needed to detect the bound a verdict needs (max_detectable), by the plan's rules",
    "n_items": "originals this run asked both arms about (the items a pair can come from)",
    "no_difference_bound": "largest difference a no-difference verdict rules out",
    "reliability_value": "the reliability coefficient the verdict's gate rests on",
    "reliability_threshold": "the gate's threshold for that coefficient",
    # paired.parquet (bloomqg.metrics.paired)
    "value_a": "the first arm's value over the pairs",
    "value_b": "the second arm's value over the pairs",
    "p_value": "p value of the paired test, before correction",
    "p_holm": "p value after Holm's step-down over the comparison's family",
    "n": "items the value is over",
    "effect_size": "effect size of the paired difference (Cohen's h for yes/no outcomes, the rank-biserial r for graded ones)",
    # robustness.parquet (bloomqg.metrics.robustness)
    "value_a_dawid_skene": "the first arm's value with Dawid–Skene labels instead of the majority",
    "value_b_dawid_skene": "the second arm's value with Dawid–Skene labels instead of the majority",
    # correlations.parquet
    "r": "correlation across models (its method column says which)",
    # per judge, averaged over cells (judge_means)
    "agreement_with_majority": "share of a judge's valid votes equal to the majority vote",
    "agreement_with_others": "share of a judge's votes equal to the majority of the other judges",
    "parse_failure_rate": "share of a judge's answers that could not be parsed",
    # Table 1 (results/tables/table1_datasets.csv): each dataset's items
    "total": "items of the dataset (Table 1)",
    **{level: f"items of the dataset at Bloom level {level} (Table 1)" for level in BLOOM_LEVELS},
    "uncategorized": "items of the dataset without a Bloom level (Table 1)",
    "knowledge_units": "distinct knowledge units of the dataset (Table 1)",
    # the annotation plan (bloomqg.annotation.calibration): labels per cell
    "big_n": "questions in the cell",
    "judges": "the judges' value of the metric in the cell",
    "judges_n": "questions of the cell with a verdict on the metric (the judges' value's n)",
    "disagreement": "share of questions where people and the judges' vote disagree (measured or assumed)",
    "half_width": "the interval half-width the plan aims for, in points",
    "n_needed": "human labels that bound the metric to the aimed half-width",
    "half_width_at_n": "the half-width reached by labelling every question, in points",
    # the cost ledger (bloomqg.api.ledger) and generation usage
    "questions": "questions asked of a judge or generator",
    "requests": "API requests made",
    "cached": "answers read back from the cache instead of paid for",
    "paid_earlier": "answers paid for by an earlier run",
    "prompt_tokens": "prompt tokens",
    "completion_tokens": "completion tokens",
    "cost_usd": "cost in US dollars",
    "prompts": "prompts sent to the generator",
    "parsed": "replies the generator's parser read a question from",
    "latency_s": "generation time summed over replies, in seconds",
}


def facts_schema():
    """The facts frame's Parquet schema (pyarrow imported here: the readings need none of it)."""
    import pyarrow as pa

    return pa.schema([(c, pa.float64() if c in ("value", "n", "ci_low", "ci_high") else pa.string())
                      for c in FACT_COLUMNS])


@dataclass(frozen=True)
class CellMean:
    """A metric averaged over the cells that have it: the mean, how many cells, and the
    questions the cells' values are over (None where the rows carry no n)."""

    value: float
    n_cells: int
    n_items: int | None


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def metric_values(all_metrics: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The rows of ``metric`` that have a value, the value as float."""
    frame = all_metrics[(all_metrics["metric"] == metric) & all_metrics["value"].notna()]
    return frame.assign(value=frame["value"].astype(float))


def cell_mean(all_metrics: pd.DataFrame, metric: str) -> CellMean | None:
    """``metric`` averaged over the cells that have a value (the figures' "averaged over cells")."""
    frame = metric_values(all_metrics, metric)
    if frame.empty:
        return None
    n = pd.to_numeric(frame["n"], errors="coerce") if "n" in frame else pd.Series(dtype=float)
    return CellMean(float(frame["value"].mean()), len(frame), int(n.sum()) if n.notna().any() else None)


def judge_means(reliability: pd.DataFrame, column: str, by: Sequence[str] = ("judge",)) -> pd.Series:
    """A per-judge column of the reliability frames averaged over cells (and criteria, unless
    ``by`` names ``criterion``), in percent; judges in first-seen order."""
    judges = reliability[reliability["judge"].notna() & reliability[column].notna()] \
        if column in reliability else reliability.iloc[0:0]
    if judges.empty:
        return pd.Series(dtype=float)
    return judges.groupby(list(by), sort=False)[column].mean() * 100


def judge_row_means(reliability: pd.DataFrame, column: str = "agreement_with_others") -> tuple[pd.Series, bool]:
    """(each judge's mean of its per-criterion means over cells, whether only the criteria with many
    answers were averaged): Bloom level and knowledge units where the study has them, since on a
    yes/no criterion agreeing with the others mostly follows how often one answer is given (a judge
    beside one that always says yes and one that abstains agrees whenever it says yes)."""
    per_criterion = judge_means(reliability, column, ("judge", "criterion"))
    if per_criterion.empty:
        return per_criterion, False
    many = per_criterion[~per_criterion.index.get_level_values("criterion").isin(BINARY_CRITERIA)]
    chosen = many if not many.empty else per_criterion
    return chosen.groupby(level=0, sort=False).mean(), not many.empty


def value_differences(all_metrics: pd.DataFrame, metric: str, dataset: str, a: str, b: str) -> pd.Series:
    """Per model on ``dataset``: ``metric``'s value under ``b`` minus under ``a`` (the cells'
    values over all their questions, not paired), rounded to 6 places; models with both only."""
    frame = metric_values(all_metrics, metric)
    wide = frame[frame["dataset"] == dataset].pivot_table(index="model", columns="strategy", values="value")
    if a not in wide or b not in wide:
        return pd.Series(dtype=float)
    return (wide[b] - wide[a]).dropna().round(6)


class FactBook:
    """Rows of the facts frame, added as the frames are read."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def add(self, quantity: str, value: Any, *, source: str, definition: str, model: Any = None,
            dataset: Any = None, strategy: Any = None, subject: Any = None, n: Any = None,
            ci_low: Any = None, ci_high: Any = None, method: Any = None) -> None:
        number = _number(value)
        if number is None and _number(n) is None:
            return
        self.rows.append({
            "quantity": quantity, "model": _text(model), "dataset": _text(dataset), "strategy": _text(strategy),
            "subject": _text(subject), "definition": definition, "value": number, "n": _number(n),
            "ci_low": _number(ci_low), "ci_high": _number(ci_high), "method": _text(method), "source": source,
        })

    def add_columns(self, frame: pd.DataFrame | None, *, source: str, subject_columns: Sequence[str] = (),
                    prefix: str = "", estimate: str | None = None, n_column: str | None = None) -> None:
        """One fact per defined numeric column of each row of ``frame``; ``estimate`` names the
        column whose interval the row's ``ci_low``/``ci_high`` are (and whose method ``ci_method``
        or ``method`` says), and whose n is ``n_column`` (default ``n_pairs``, else ``n``)."""
        if frame is None or frame.empty:
            return
        columns = [c for c in frame.columns if c in COLUMN_DEFINITIONS]
        for row in frame.to_dict("records"):
            subject = " · ".join(str(row[c]) for c in subject_columns if c in row and _text(row[c]) is not None)
            for column in columns:
                interval = ({"ci_low": row.get("ci_low"), "ci_high": row.get("ci_high"),
                             "method": row.get("ci_method", row.get("method")),
                             "n": row.get(n_column) if n_column else row.get("n_pairs", row.get("n"))}
                            if column == estimate else {})
                self.add(f"{prefix}{column}", row[column], source=source, definition=COLUMN_DEFINITIONS[column],
                         model=row.get("model"), dataset=row.get("dataset"), strategy=row.get("strategy"),
                         subject=subject or None, **interval)

    def frame(self) -> pd.DataFrame:
        frame = pd.DataFrame(self.rows, columns=list(FACT_COLUMNS))
        for column in ("value", "n", "ci_low", "ci_high"):
            frame[column] = frame[column].astype("float64")
        return frame


def _text(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return str(value)


def _metric_facts(book: FactBook, all_metrics: pd.DataFrame) -> None:
    for row in all_metrics.to_dict("records"):
        book.add(row["metric"], row["value"], n=row.get("n"), ci_low=row.get("ci_low"), ci_high=row.get("ci_high"),
                 method=row.get("ci_method"), model=row["model"], dataset=row["dataset"], strategy=row["strategy"],
                 source="metrics/all.parquet", definition=metric_spec(row["metric"]).definition or row["metric"])


def _answer_facts(book: FactBook, answer: pd.DataFrame | None) -> None:
    if answer is None or answer.empty:
        return
    for row in answer.to_dict("records"):
        pair = f"{row['strategy_b']} − {row['strategy_a']}"
        where = {"model": row["model"], "dataset": row["dataset"], "subject": f"{row['metric']} · {pair}"}
        book.add("answer.diff", row["diff"], n=row["n_pairs"], ci_low=row["ci_low"], ci_high=row["ci_high"],
                 source="metrics/answer.parquet", definition=COLUMN_DEFINITIONS["diff"], **where)
        for column in ("value_a", "value_b", "n_pairs", "p_adjusted", "family_size", "significance", "mdd", "max_detectable", "target_difference",
                       "n_needed_target", "n_needed_verdict", "n_items", "no_difference_bound", "reliability_value",
                       "reliability_threshold"):
            if column in row:
                book.add(f"answer.{column}", row[column], source="metrics/answer.parquet",
                         definition=COLUMN_DEFINITIONS[column], **where)


# the reliability frames' coefficients with an interval (<name>_ci_low, <name>_ci_high) and
# their other quantities (bloomqg.voting.agreement)
RELIABILITY_INTERVALS: dict[str, str] = {
    "alpha": "Krippendorff's α of the panel on one criterion in one cell",
    "percent_agreement": "share of judge pairs that agree on an item, averaged over items",
    "ac1": "Gwet's AC1 of the panel on one criterion in one cell",
    "ds_sensitivity": "a judge's Dawid–Skene sensitivity (yes when the label is yes)",
    "ds_specificity": "a judge's Dawid–Skene specificity (no when the label is no)",
}
RELIABILITY_SCALARS: dict[str, str] = {
    "n_items": "items the panel rated in the cell",
    "n_judges": "judges on the panel",
    "gate_threshold": "the gate's threshold (config)",
    "unanimous_share": "share of items every judge rated alike",
    "prevalence": "share of votes on the commonest answer",
    "n_effective_judges": "judges whose votes vary (a constant judge adds no information)",
    "vote_rate": "share of a judge's votes that are yes / its commonest answer",
    "agreement_with_others": "share of a judge's votes equal to the majority of the other judges",
    "kappa_with_others": "Cohen's κ of a judge against the majority of the other judges",
    "ds_accuracy": "a judge's Dawid–Skene accuracy",
    "agreement_with_majority": "share of a judge's valid votes equal to the majority vote",
    "parse_failure_rate": "share of a judge's answers that could not be parsed",
}


def _reliability_facts(book: FactBook, reliability: pd.DataFrame) -> None:
    source = "votes/*.reliability.parquet"
    for row in reliability.to_dict("records"):
        judge = _text(row.get("judge"))
        where = {"model": row.get("model"), "dataset": row.get("dataset"), "strategy": row.get("strategy"),
                 "subject": " · ".join(x for x in (judge, row.get("criterion")) if x)}
        for name, definition in RELIABILITY_INTERVALS.items():
            if name in row:
                book.add(f"reliability.{name}", row[name], ci_low=row.get(f"{name}_ci_low"),
                         ci_high=row.get(f"{name}_ci_high"), n=row.get("n_items"), source=source,
                         definition=definition, **where)
        for name, definition in RELIABILITY_SCALARS.items():
            if name in row:
                book.add(f"reliability.{name}", row[name], source=source, definition=definition, **where)
        for column, definition in (("kappa_pairwise", "Cohen's κ of a judge against one other judge"),
                                   ("vote_distribution", "share of a judge's votes on one answer")):
            mapping = json_mapping(row.get(column))
            for key, value in mapping.items():
                book.add(f"reliability.{column}", value, source=source, definition=f"{definition} ({key})",
                         **{**where, "subject": f"{where['subject']} · {key}"})


def _others_rate_facts(book: FactBook, reliability: pd.DataFrame) -> None:
    """Per judge of a cell's criterion: how often the other judges say yes (the suspicious-judge
    diagnostics compare a judge's rate with it)."""
    from bloomqg.voting.diagnostics import others_rate

    judges = reliability[reliability["judge"].notna()] if "vote_rate" in reliability else reliability.iloc[0:0]
    for (model, dataset, strategy, criterion), rows in judges.groupby(
            ["model", "dataset", "strategy", "criterion"], sort=False):
        rates = rows["vote_rate"].tolist()
        for position, judge in enumerate(rows["judge"]):
            yes = others_rate(rates, position)
            for answer, share in (("yes", yes), ("no", None if yes is None else 1 - yes)):
                book.add(f"reliability.others_{answer}", share, model=model, dataset=dataset, strategy=strategy,
                         subject=f"{judge} · {criterion}", source="votes/*.reliability.parquet",
                         definition=f"how often the other judges say {answer} (from their mean vote rate)")


def _robustness_facts(book: FactBook, robustness: pd.DataFrame | None) -> None:
    if robustness is None or robustness.empty:
        return
    book.add_columns(robustness, source="metrics/robustness.parquet", subject_columns=("metric", "strategy_b", "model_b"),
                     prefix="robustness.")
    for row in robustness.to_dict("records"):
        variants = variants_of(row.get("variants"))
        for variant, pair in variants.items():
            diff, p_value, n_pairs = variant_entry(pair)
            where = {"model": row["model"], "dataset": row["dataset"], "strategy": row["strategy"],
                     "subject": f"{row['metric']} · {variant}"}
            book.add("robustness.variant_diff", diff, source="metrics/robustness.parquet",
                     definition=f"the difference with the panel changed ({variant})", **where)
            book.add("robustness.variant_p", p_value, source="metrics/robustness.parquet",
                     definition=f"p value of the difference with the panel changed ({variant})", **where)
            book.add("robustness.variant_pairs", n_pairs, source="metrics/robustness.parquet",
                     definition=f"the pairs the difference with the panel changed is over ({variant})", **where)


def _aggregate_facts(book: FactBook, all_metrics: pd.DataFrame, reliability: pd.DataFrame,
                     pairs: Iterable[tuple[str, str, str]]) -> None:
    """The aggregates the report's readings and tables compute: cell means, judge means and the
    cells' unpaired differences."""
    for metric in ordered_unique(all_metrics["metric"]):
        mean = cell_mean(all_metrics, metric)
        if mean is not None:
            book.add(f"{metric}.cell_mean", mean.value, n=mean.n_cells, source="metrics/all.parquet",
                     definition=f"{metric} averaged over the {mean.n_cells} cells that have it")
            if mean.n_items is not None:
                book.add(f"{metric}.cell_mean_items", None, n=mean.n_items, source="metrics/all.parquet",
                         definition=f"questions the cells' {metric} values are over, summed")
    for column in ("agreement_with_majority", "agreement_with_others", "parse_failure_rate"):
        for by in (("judge",), ("judge", "criterion")):
            for key, value in judge_means(reliability, column, by).items():
                book.add(f"{column}.judge_mean", value, subject=" · ".join(key) if isinstance(key, tuple) else key,
                         source="votes/*.reliability.parquet",
                         definition=f"{COLUMN_DEFINITIONS[column]}, averaged over cells (percent)")
    # the judges' table's reading: each judge's mean over its rows (those of the many-answer criteria)
    row_means, many_only = judge_row_means(reliability)
    for judge, value in row_means.items():
        book.add("agreement_with_others.judge_row_mean", value, subject=str(judge), source="votes/*.reliability.parquet",
                 definition=f"{COLUMN_DEFINITIONS['agreement_with_others']}, the mean of the judge's per-criterion "
                 f"means over cells{' (Bloom level and knowledge units)' if many_only else ''} (percent)")
    for dataset, a, b in pairs:
        for metric in ordered_unique(all_metrics["metric"]):
            for model, diff in value_differences(all_metrics, metric, dataset, a, b).items():
                book.add(f"{metric}.value_difference", diff, model=model, dataset=dataset, subject=f"{b} − {a}",
                         source="metrics/all.parquet",
                         definition=f"{metric} under {b} minus under {a}: the cells' values, not paired")


#: Per extra frame, the column printed with its n beside it, and that n's column ("18.8 (n=16)").
_EXTRA_ESTIMATES: dict[str, tuple[str, str]] = {"annotation_plan": ("judges", "judges_n")}


def study_facts(*, all_metrics: pd.DataFrame, reliability: pd.DataFrame, answer: pd.DataFrame | None = None,
                paired: pd.DataFrame | None = None, robustness: pd.DataFrame | None = None,
                correlations: pd.DataFrame | None = None, ledger: pd.DataFrame | None = None,
                usage: Sequence[Mapping[str, Any]] = (), counts: Mapping[str, tuple[Any, str]] | None = None,
                extra_frames: Mapping[str, pd.DataFrame | None] | None = None,
                pairs: Iterable[tuple[str, str, str]] = (), derived: Sequence[Mapping[str, Any]] = ()) -> pd.DataFrame:
    """The facts frame of a study (:data:`FACT_COLUMNS`).

    ``counts``: the report's headline counts, ``{quantity: (value, definition)}``; ``usage``:
    generation usage rows (:func:`~bloomqg.reporting.provenance_view.generation_usage`);
    ``extra_frames``: further frames whose defined columns are facts (the study plan, the
    calibration plan), by source name; ``pairs``: (dataset, first, second) strategy pairs whose
    unpaired differences the readings state; ``derived``: facts the readings compute from the
    votes, as :meth:`FactBook.add`'s keywords.
    """
    book = FactBook()
    _metric_facts(book, all_metrics)
    _answer_facts(book, answer)
    book.add_columns(paired, source="metrics/paired.parquet", subject_columns=("metric", "strategy_a", "strategy_b"),
                     prefix="paired.", estimate="diff")
    _robustness_facts(book, robustness)
    book.add_columns(correlations, source="metrics/correlations.parquet",
                     subject_columns=("strategy", "x_metric", "y_metric", "method"), prefix="correlation.", estimate="r")
    _reliability_facts(book, reliability)
    _others_rate_facts(book, reliability)
    if ledger is not None and not ledger.empty:
        book.add_columns(ledger, source="cost ledger", subject_columns=("stage", "judge"), prefix="ledger.")
        numeric = [c for c in ("questions", "requests", "cached", "paid_earlier", "prompt_tokens",
                               "completion_tokens", "cost_usd") if c in ledger.columns]
        values = ledger[numeric].apply(pd.to_numeric, errors="coerce").fillna(0)
        judges = ledger["judge"].where(ledger["judge"].notna(), "generator " + ledger["model"].astype(str))
        for judge, sums in values.groupby(judges.to_numpy(), sort=False).sum().iterrows():
            for column in numeric:
                book.add(f"ledger.{column}.judge_total", sums[column], subject=judge, source="cost ledger",
                         definition=f"{COLUMN_DEFINITIONS[column]}, summed per judge")
        for column in numeric:
            book.add(f"ledger.{column}.total", values[column].sum(), source="cost ledger",
                     definition=f"{COLUMN_DEFINITIONS[column]}, summed over the study")
    for row in usage:
        for column in ("prompts", "parsed", "prompt_tokens", "completion_tokens", "latency_s"):
            book.add(f"usage.{column}", row.get(column), model=row.get("model"), dataset=row.get("dataset"),
                     strategy=row.get("strategy"), source="generations", definition=COLUMN_DEFINITIONS[column])
    for quantity, (value, definition) in (counts or {}).items():
        book.add(quantity, value, source="report", definition=definition)
    for source, frame in (extra_frames or {}).items():
        estimate, n_column = _EXTRA_ESTIMATES.get(source, (None, None))
        book.add_columns(frame, source=source, subject_columns=("metric", "criterion"), prefix=f"{source}.",
                         estimate=estimate, n_column=n_column)
    _aggregate_facts(book, all_metrics, reliability, pairs)
    for row in derived:
        book.add(**row)
    return book.frame()
