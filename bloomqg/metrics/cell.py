"""All metrics of one (model, dataset, strategy) cell, with confidence intervals and the α gate.

Metrics that do not apply — the auxiliary accuracies outside CoT or when the identification
column is null throughout, or any ratio whose denominator is empty — are kept as a row with
``value`` NaN, NaN CI and ``n`` = 0, so every cell has the same metric rows.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd

from bloomqg.metrics.auxiliary import auxiliary_rows
from bloomqg.metrics.cognitive import cognitive_rows
from bloomqg.metrics.counts import count_results
from bloomqg.metrics.intervals import (
    PERCENTILE,
    IntervalSpec,
    betting_mean_interval,
    bounded_mean_interval,
    cluster_count,
    effective_size,
    interval_method,
    percentile_interval,
    resample_counts,
)
from bloomqg.metrics.knowcov import knowcov_rows
from bloomqg.metrics.quality import line_rates, quality_rows
from bloomqg.metrics.registry import METRIC_SPECS
from bloomqg.metrics.rows import REQUIRED_VOTE_COLUMNS, RowTerms, require_columns, unit_set
from bloomqg.store.cells import Cell, cell_of
from bloomqg.metrics.spec import MetricSpec
from bloomqg.store.frames import BINARY_CRITERIA, METRICS

logger = logging.getLogger(__name__)


def row_terms(votes: pd.DataFrame, strategy: str) -> RowTerms:
    """For each ratio metric: (numerator, denominator) per row; value = Σnum / Σden."""
    return {**quality_rows(votes), **cognitive_rows(votes), **knowcov_rows(votes), **auxiliary_rows(votes, strategy)}


def gated_criteria(reliability: pd.DataFrame | None, cell: Cell) -> set[str]:
    """Criteria whose panel-level row for ``cell`` failed the α gate (``gate_passed`` False).

    A null ``gate_passed`` (α not computable) is not a failure.
    """
    if reliability is None or reliability.empty:
        return set()
    require_columns(
        reliability, ("model", "dataset", "strategy", "criterion", "judge", "gate_passed"), "reliability"
    )
    dataset, strategy, model = cell
    panel = reliability[
        (reliability["model"] == model)
        & (reliability["dataset"] == dataset)
        & (reliability["strategy"] == strategy)
        & reliability["judge"].isna()
    ]
    failed = panel[panel["gate_passed"].map(lambda value: value is False or value is np.False_)]
    return set(failed["criterion"].tolist())


def cluster_labels(votes: pd.DataFrame, cluster: str) -> np.ndarray | None:
    """Each row's cluster for ``intervals.cluster``: its source item, its knowledge unit(s), or
    none (every question independent)."""
    if cluster == "none":
        return None
    if cluster == "item":
        return votes["item_id"].astype(str).to_numpy() if "item_id" in votes.columns else None
    return np.array(["|".join(sorted(unit_set(units) or ())) for units in votes["original_knowledge_units"]],
                    dtype=object)


def score_intervals(
    numerators: np.ndarray, members: np.ndarray, specs: list[MetricSpec], intervals: IntervalSpec,
    clusters: np.ndarray | None, base_members: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, list[str | None]]:
    """Closed-form intervals (in the metrics' ratio units, before scaling) of every ratio metric, and
    the method each got (``ci_method``). Sums (the shift totals) take the interval of the mean of
    their per-question terms over ``base_members`` (questions with both levels known), times
    their number. Metrics with ``betting_interval`` take the betting interval of their outcomes
    where the design is not clustered (it assumes independent observations)."""
    low = np.full(len(specs), np.nan)
    high = np.full(len(specs), np.nan)
    methods: list[str | None] = []
    for i, spec in enumerate(specs):
        member = base_members if spec.kind == "sum" else members[:, i] > 0
        n = float(member.sum())
        lower, upper = spec.outcome_range or (0.0, 1.0)
        if n == 0:
            methods.append(None)
            continue
        outcome = numerators[member, i]
        mean = float(outcome.sum()) / n
        n_eff, df = effective_size(np.where(member, numerators[:, i], 0.0), member.astype(np.float64),
                                   clusters, lower, upper, intervals.confidence)
        betting = spec.betting_interval and not math.isfinite(df)
        if betting:
            a, b = betting_mean_interval(outcome, lower, upper, intervals.confidence)
        else:
            a, b = bounded_mean_interval(mean, n_eff, lower, upper, intervals.method, intervals.confidence, df)
        factor = n if spec.kind == "sum" else 1.0
        low[i], high[i] = a * factor, b * factor
        methods.append(interval_method(intervals.method, graded=spec.graded,
                                       cluster=intervals.cluster if math.isfinite(df) else None,
                                       clusters=cluster_count(member, clusters), betting=betting))
    return low, high, methods


def score_cell(
    votes: pd.DataFrame,
    reliability: pd.DataFrame | None,
    *,
    intervals: IntervalSpec | None = None,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    published_lines: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Every metric of :data:`~bloomqg.metrics.registry.METRIC_SPECS` for the one cell in ``votes``.

    Returns the columns of :data:`bloomqg.store.frames.METRICS`, one row per metric in
    :data:`~bloomqg.metrics.registry.METRIC_NAMES` order. Intervals follow ``intervals`` (default:
    Clopper–Pearson, clustered on the item, at ``confidence``; :mod:`bloomqg.metrics.intervals`):
    a rate's interval, a bounded mean's on its rescaled mean, a total's the mean's times its
    questions; ``percentile_bootstrap`` resamples the cell's rows ``n_resamples``
    times, seeded by ``seed``. ``ci_method`` names what each row got; counts get none.
    ``alpha_gated`` is True when a criterion of the metric's spec failed the α gate in
    ``reliability``; without a reliability frame, the votes' own cell-level ``alpha_gated``
    flag marks every metric that depends on a judged criterion.

    ``published_lines`` (columns of :data:`bloomqg.store.frames.PUBLISHED_VOTE_LINES`, the same cell):
    an imported run's votes file line by line; unique, readable and answerable are then the
    share of its lines (non-null) voted yes, with ``n`` = lines.
    That is the paper's Table 4 rule and it reproduces all six models' printed figures; the
    one-row-per-original join (duplicate texts take the first judged line) gives the same for
    GLM-4-9B only, and stays the basis of every other metric.
    """
    if intervals is None:
        intervals = IntervalSpec(confidence=confidence, n_resamples=n_resamples)
    require_columns(votes, REQUIRED_VOTE_COLUMNS, "votes")
    if votes.empty:
        raise ValueError("votes: no rows; a cell needs at least one generated question")
    cell = cell_of(votes, "votes")
    dataset, strategy, model = cell
    votes = votes.reset_index(drop=True)
    per_row = row_terms(votes, strategy)

    ratio_specs = [spec for spec in METRIC_SPECS if spec.name in per_row]
    ratio_names = [spec.name for spec in ratio_specs]
    numerators = np.column_stack([per_row[name][0].astype(np.float64) for name in ratio_names])
    members = np.column_stack([per_row[name][1].astype(np.float64) for name in ratio_names])
    is_total = np.array([spec.kind == "sum" for spec in ratio_specs])
    scale = np.array([spec.scale for spec in ratio_specs])

    def estimate(num: np.ndarray, den: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
        return np.where(is_total, num, ratio) * scale

    sizes = members.sum(axis=0)
    values = estimate(numerators.sum(axis=0), sizes)
    if intervals.bootstrap:
        rng = np.random.default_rng(seed)
        estimates = np.concatenate(
            [
                estimate(counts @ numerators, counts @ members)
                for counts in resample_counts(rng, len(votes), intervals.n_resamples)
            ]
        )
        low, high = percentile_interval(estimates, intervals.confidence)
        methods: list[str | None] = [PERCENTILE] * len(ratio_specs)
    else:
        both = members[:, ratio_names.index("cogshift")] > 0
        low, high, methods = score_intervals(
            numerators, members, ratio_specs, intervals, cluster_labels(votes, intervals.cluster), both
        )
        low, high = low * scale, high * scale
    if sizes[ratio_names.index("cogshift")] == 0:
        # No question with both levels known: shift totals are undefined, not zero.
        values[is_total] = np.nan
    undefined = np.isnan(values)
    low[undefined] = np.nan
    high[undefined] = np.nan

    results = {
        name: (values[i], low[i], high[i], int(sizes[i]), None if undefined[i] else methods[i])
        for i, name in enumerate(ratio_names)
    }
    if published_lines is not None:
        results.update(line_rates(published_lines, cell, intervals, seed))
    results.update({name: (*row, None) for name, row in count_results(len(votes), per_row).items()})

    if reliability is not None:
        gated = gated_criteria(reliability, cell)
    elif bool(votes["alpha_gated"].any()):
        gated = set(BINARY_CRITERIA) | {"bloom_level", "knowledge_units"}
    else:
        gated = set()
    if gated:
        logger.info("%s/%s/%s: criteria failing the α gate: %s", model, dataset, strategy, sorted(gated))

    records = []
    for spec in METRIC_SPECS:
        value, ci_low, ci_high, size, method = results[spec.name]
        records.append(
            {
                "model": model,
                "dataset": dataset,
                "strategy": strategy,
                "metric": spec.name,
                "value": float(value),
                "ci_low": float(ci_low),
                "ci_high": float(ci_high),
                "n": int(size),
                "ci_method": method,
                "alpha_gated": bool(spec.criteria & gated),
            }
        )
    return pd.DataFrame.from_records(records, columns=METRICS.names)
