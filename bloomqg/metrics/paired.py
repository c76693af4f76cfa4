"""Strategy against strategy on the same items: paired differences with their intervals
(Tango's score interval for 0/1 outcomes; for graded ones the betting interval of the
differences on a scale of levels, MOVER on the arms' bounded means for fractions;
:mod:`bloomqg.metrics.intervals`), McNemar or Wilcoxon tests, Holm-adjusted within each
metric's family.

Which metrics can be paired, and with which test, is each metric spec's ``paired_outcome``.
Which strategy pairs are compared is a :class:`~bloomqg.inputs.strategies.ComparisonSpec` (config
``comparisons:``): each strategy against a baseline, or every pair.

The *family* a p value is adjusted in is one metric's rows of :func:`paired_comparisons`: every
pair × model × dataset tested on that metric (rows without a p value, no pairs, are not tests and
do not count).  Holm's step-down keeps the family-wise error rate at the level without assuming
the tests independent; the raw p stays beside the adjusted one.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numpy as np
import pandas as pd

from bloomqg.metrics.cell import row_terms
from bloomqg.metrics.intervals import (
    BETTING_PAIRED,
    MOVER,
    PERCENTILE,
    TANGO,
    betting_paired,
    discordant_counts,
    mover_paired,
    paired_binary,
    percentile_interval,
    resample_counts,
)
from bloomqg.metrics.registry import METRIC_SPECS, metric_spec
from bloomqg.metrics.rows import REQUIRED_VOTE_COLUMNS, require_columns
from bloomqg.store.cells import cell_of
from bloomqg.inputs.strategies import ComparisonSpec

#: The level a p value must be below to count as significant: the paired table's reading, the
#: robustness verdicts and the Answer's default (config ``answer.significance``).
SIGNIFICANCE = 0.05
#: Below this many pairs that differ (discordant yes/no pairs, non-zero graded differences: the
#: paired table's ``n_differing``) no paired test's two-sided p can fall under 0.05 (McNemar's exact
#: test on 5 discordant pairs all one way gives p = 0.0625, Wilcoxon's on 5 differences likewise):
#: a sign or an effect size there is a few questions', and proves nothing.
FEW_PAIRS = 6


def p_text(p_value: float) -> str:
    """A p value as every page prints it: three decimals, or "< 0.001"."""
    return "< 0.001" if p_value < 0.001 else f"{p_value:.3f}"


def p_phrase(p_value: float) -> str:
    """"= 0.062" or "< 0.001": a p value after its name in a sentence ("raw p = 0.062")."""
    text = p_text(p_value)
    return text if text.startswith("<") else f"= {text}"


def paired_test(metric: str) -> str:
    """The paired test of ``metric``'s comparisons: McNemar's exact test for a yes/no outcome,
    Wilcoxon's signed-rank test for a graded one (the paired table's ``test`` column)."""
    return "mcnemar" if metric_spec(metric).paired_outcome == "binary" else "wilcoxon"


#: Metrics with a per-question outcome in both arms, so a pair can be compared.
PAIRABLE: frozenset[str] = frozenset(spec.name for spec in METRIC_SPECS if spec.paired_outcome)
DEFAULT_PAIRED_METRICS: tuple[str, ...] = ("usability", "catcons", "knowcov")


def paired_comparison(
    votes_a: pd.DataFrame,
    votes_b: pd.DataFrame,
    *,
    metrics: Sequence[str] = DEFAULT_PAIRED_METRICS,
    n_resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    bootstrap: bool = False,
) -> pd.DataFrame:
    """Strategy b against strategy a for one model × dataset, paired on ``item_id``.

    A pair enters a metric when the per-question outcome is defined in both arms (the metric's
    denominator in :func:`bloomqg.metrics.cell.score_cell`). ``value_a``/``value_b`` are the
    metric over those pairs, ``diff`` = b − a (percentage points for percent metrics) with
    Tango's paired score interval (binary outcomes), the betting interval of the differences
    (graded outcomes with ``betting_interval``: CogShift) or MOVER on the arms' means (KnowCov),
    or with ``bootstrap`` a paired percentile bootstrap; ``ci_method`` names it. Binary outcomes: exact McNemar (binomial test on the
    discordant pairs; p = 1 when there are none) with Cohen's h. Graded outcomes (knowcov,
    cogshift): Wilcoxon signed-rank on the non-zero differences (p = 1 when all are zero) with
    the matched-pairs rank-biserial correlation. No pairs: NaN throughout with ``n_pairs`` 0.
    ``p_adjusted`` is the raw p here (a family of one); :func:`paired_comparisons` adjusts it.
    """
    unknown = [name for name in metrics if name not in PAIRABLE]
    if unknown:
        raise ValueError(f"metrics {unknown} have no per-question outcome; pairable: {sorted(PAIRABLE)}")
    for frame, what in ((votes_a, "votes_a"), (votes_b, "votes_b")):
        require_columns(frame, REQUIRED_VOTE_COLUMNS + ("item_id",), what)
        if frame["item_id"].duplicated().any():
            duplicated = frame.loc[frame["item_id"].duplicated(), "item_id"].tolist()[:5]
            raise ValueError(f"{what}: item_id must be unique, repeated: {duplicated}")
    dataset_a, strategy_a, model_a = cell_of(votes_a, "votes_a")
    dataset_b, strategy_b, model_b = cell_of(votes_b, "votes_b")
    if strategy_a == strategy_b:
        raise ValueError(f"paired_comparison: both arms are strategy {strategy_a!r}; a pair needs two strategies")
    if (model_a, dataset_a) != (model_b, dataset_b):
        raise ValueError(
            f"paired_comparison needs one model × dataset, got {strategy_a} {(model_a, dataset_a)} "
            f"and {strategy_b} {(model_b, dataset_b)}"
        )
    rows_a, rows_b, _ = common_item_terms(votes_a, votes_b, strategy_a, strategy_b)
    rng = np.random.default_rng(seed)

    records = []
    for name in metrics:
        outcome = compare_outcomes(rows_a, rows_b, name, rng, n_resamples=n_resamples, confidence=confidence,
                                   bootstrap=bootstrap)
        records.append({
            "model": model_a, "dataset": dataset_a, "metric": name,
            "strategy_a": strategy_a, "strategy_b": strategy_b, "n_pairs": outcome["n_pairs"],
            "n_differing": outcome["n_differing"],
            "value_a": outcome["a"], "value_b": outcome["b"],
            **{key: outcome[key] for key in ("diff", "ci_low", "ci_high", "ci_method", "test", "p_value")},
            "p_adjusted": outcome["p_value"], "family_size": 0 if pd.isna(outcome["p_value"]) else 1,
            **{key: outcome[key] for key in ("effect_size", "effect_size_name")},
        })
    return pd.DataFrame.from_records(records, columns=list(PAIRED_COLUMNS))


def common_item_terms(votes_a: pd.DataFrame, votes_b: pd.DataFrame, strategy_a: str,
                      strategy_b: str) -> tuple[dict, dict, int]:
    """Both arms' row terms over the items both answered, in one order, and how many items."""
    common = sorted(set(votes_a["item_id"]) & set(votes_b["item_id"]))
    arm_a = votes_a.set_index("item_id").loc[common].reset_index()
    arm_b = votes_b.set_index("item_id").loc[common].reset_index()
    return row_terms(arm_a, strategy_a), row_terms(arm_b, strategy_b), len(common)


def defined_pairs(a_rows: dict, b_rows: dict, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Metric ``name``'s per-item outcomes of the pairs defined in both arms: (a, b)."""
    defined = a_rows[name][1].astype(bool) & b_rows[name][1].astype(bool)
    return a_rows[name][0][defined].astype(float), b_rows[name][0][defined].astype(float)


def planned_pairs(votes: pd.DataFrame, comparison: ComparisonSpec, strategy_order: Sequence[str]
                  ) -> Iterator[tuple[pd.DataFrame, pd.DataFrame]]:
    """The two arms' votes of every strategy pair ``comparison`` plans in every model × dataset:
    strategies in ``strategy_order``, then as first seen (the first is the default baseline)."""
    for _, group in votes.groupby(["model", "dataset"], sort=True):
        strategies = ordered_strategies(list(group["strategy"]), strategy_order)
        for strategy_a, strategy_b in comparison.pairs(strategies):
            yield group[group["strategy"] == strategy_a], group[group["strategy"] == strategy_b]


def holm_adjust(p_values: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p values (Holm 1979, by statsmodels' ``multipletests``), in the
    input's order; a NaN stays NaN and is not a test: reject where the adjusted value is below the
    level, and the family-wise error rate stays at that level.
    """
    p = np.asarray(p_values, dtype=float)
    adjusted = np.full(p.shape, np.nan)
    defined = np.flatnonzero(~np.isnan(p))
    if not defined.size:
        return adjusted
    if ((p[defined] < 0) | (p[defined] > 1)).any():
        raise ValueError(f"holm_adjust: p values must lie in [0, 1], got {p[defined].tolist()}")
    from statsmodels.stats.multitest import multipletests

    adjusted[defined] = multipletests(p[defined], method="holm")[1]
    return adjusted


def compare_outcomes(
    a_rows: dict, b_rows: dict, name: str, rng: np.random.Generator, *, n_resamples: int, confidence: float,
    bootstrap: bool = False,
) -> dict:
    """Metric ``name`` over pairs defined in both arms (row terms of the same items, in the same
    order): ``a``, ``b``, ``diff`` = b − a with its paired interval (see
    :func:`paired_comparison`; ``rng`` and ``n_resamples`` serve the bootstrap only), and the
    spec's test (McNemar with Cohen's h, or Wilcoxon with the rank-biserial correlation)."""
    from scipy import stats

    spec = metric_spec(name)
    binary = spec.paired_outcome == "binary"
    scale = spec.scale
    a, b = defined_pairs(a_rows, b_rows, name)
    n_pairs = len(a)
    record = {
        "n_pairs": n_pairs, "n_differing": 0, "a": math.nan, "b": math.nan, "diff": math.nan, "ci_low": math.nan,
        "ci_high": math.nan, "ci_method": None, "test": paired_test(name), "p_value": math.nan,
        "effect_size": math.nan, "effect_size_name": "cohens_h" if binary else "rank_biserial",
    }
    if not n_pairs:
        return record
    differences = (b - a) * scale
    if bootstrap:
        boot = np.concatenate(
            [counts @ differences / n_pairs for counts in resample_counts(rng, n_pairs, n_resamples)]
        )
        low, high = (float(x[0]) for x in percentile_interval(boot[:, None], confidence))
        method = PERCENTILE
    elif binary:
        low, high = (scale * x for x in paired_binary(a, b, confidence))
        method = TANGO
    else:
        lower, upper = spec.outcome_range or (0.0, 1.0)
        paired_interval = betting_paired if spec.betting_interval else mover_paired
        low, high = (scale * x for x in paired_interval(a, b, lower, upper, confidence))
        method = BETTING_PAIRED if spec.betting_interval else MOVER
    record.update(a=float(a.mean() * scale), b=float(b.mean() * scale), diff=float(differences.mean()),
                  ci_low=low, ci_high=high, ci_method=method)
    if binary:
        only_b, only_a = discordant_counts(a, b)
        discordant = only_b + only_a
        record["n_differing"] = int(discordant)
        record["p_value"] = float(stats.binomtest(only_b, discordant, 0.5).pvalue) if discordant else 1.0
        record["effect_size"] = float(2 * math.asin(math.sqrt(b.mean())) - 2 * math.asin(math.sqrt(a.mean())))
    else:
        nonzero = differences[differences != 0]
        record["n_differing"] = int(nonzero.size)
        if nonzero.size:
            record["p_value"] = float(stats.wilcoxon(nonzero).pvalue)
            ranks = stats.rankdata(np.abs(nonzero))
            record["effect_size"] = float((ranks[nonzero > 0].sum() - ranks[nonzero < 0].sum()) / ranks.sum())
        else:
            record["p_value"] = 1.0
            record["effect_size"] = 0.0
    return record


PAIRED_COLUMNS: tuple[str, ...] = (
    "model", "dataset", "metric", "strategy_a", "strategy_b", "n_pairs", "n_differing", "value_a", "value_b",
    "diff", "ci_low", "ci_high", "ci_method", "test", "p_value", "p_adjusted", "family_size", "effect_size",
    "effect_size_name",
)


def ordered_strategies(present: Sequence[str], order: Sequence[str] = ()) -> list[str]:
    """``present`` (distinct) in ``order`` first, then the rest as first seen."""
    present = list(dict.fromkeys(present))
    return [s for s in dict.fromkeys(order) if s in present] + [s for s in present if s not in order]


def paired_comparisons(
    votes: pd.DataFrame,
    *,
    comparison: ComparisonSpec = ComparisonSpec(),
    strategy_order: Sequence[str] = (),
    metrics: Sequence[str] = DEFAULT_PAIRED_METRICS,
    n_resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    bootstrap: bool = False,
) -> pd.DataFrame:
    """:func:`paired_comparison` for every strategy pair of ``comparison`` in every model ×
    dataset of ``votes`` (the columns of :data:`PAIRED_COLUMNS`), p Holm-adjusted per metric.

    The strategies of a model × dataset are taken in ``strategy_order`` (the config's), then as
    first seen; with no baseline set the first of them is the baseline. A model × dataset that
    does not run the baseline, or runs one strategy only, has no pair and no row.
    ``p_adjusted``: Holm within the metric's family (every row of that metric, see the module);
    ``family_size``: the tests in that family.
    """
    require_columns(votes, ("model", "dataset", "strategy"), "votes")
    frames = [
        paired_comparison(arm_a, arm_b, metrics=metrics, n_resamples=n_resamples, seed=seed, confidence=confidence,
                          bootstrap=bootstrap)
        for arm_a, arm_b in planned_pairs(votes, comparison, strategy_order)
    ]
    if not frames:
        return pd.DataFrame(columns=list(PAIRED_COLUMNS))
    table = pd.concat(frames, ignore_index=True)
    for _, rows in table.groupby("metric", sort=False):
        adjusted = holm_adjust(rows["p_value"].to_numpy(dtype=float))
        table.loc[rows.index, "p_adjusted"] = adjusted
        table.loc[rows.index, "family_size"] = int(np.count_nonzero(~np.isnan(adjusted)))
    table["family_size"] = table["family_size"].astype(int)
    return table
