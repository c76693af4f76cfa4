"""How many items? The study plan: for each planned strategy comparison and headline metric, the
items per cell needed to detect a difference, and the smallest difference the study as run can
detect (its minimum detectable difference, MDD).

A comparison tests b − a on the items both strategies answered (:mod:`bloomqg.metrics.paired`),
at the family-wise level ``alpha`` after Holm over the metric's planned comparisons; the plan
uses Holm's first step, α / m, which every comparison must pass to be declared first, so its
power is a floor.

- **0/1 outcomes** (usability, CatCons: McNemar's exact test). Only discordant pairs carry
  information. With discordance ψ (the share of pairs whose outcomes differ) and difference δ,
  a pair is (b 1, a 0) with probability (ψ + δ)/2 and (b 0, a 1) with (ψ − δ)/2; the power is the
  exact sum over the number of discordant pairs D ~ Binomial(n, ψ) of the exact binomial test's
  power on them. ψ comes from the study's own votes (a pilot run) when a comparison has at least
  :data:`MIN_PILOT_PAIRS` pairs, else from config (``plan.discordance``, default 0.3); a
  difference δ needs ψ ≥ δ, so ψ is taken as max(ψ, δ).
- **graded outcomes** (KnowCov: Wilcoxon's signed-rank test): the paired t test's power, with the
  standard deviation of the differences from the votes (or √ψ assumed), noncentral t exact; the
  Wilcoxon test's efficiency relative to it is at least 0.864 and near 0.955 for such data, so
  this is a close, slightly optimistic figure, which ``benchmarks/intervals.py`` checks by
  simulating the Wilcoxon test itself.

A comparison's pairs are a share of its items (a CatCons pair needs a useful question with a
judged level in both arms): items needed = pairs needed ÷ that share (``pair_yield``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from bloomqg.metrics.paired import DEFAULT_PAIRED_METRICS, common_item_terms, defined_pairs, planned_pairs
from bloomqg.metrics.registry import metric_spec
from bloomqg.metrics.rows import require_columns
from bloomqg.store.cells import cell_of
from bloomqg.inputs.strategies import ComparisonSpec

#: Fewest pairs of a comparison's own votes for its discordance to replace the assumed one.
MIN_PILOT_PAIRS = 10
#: The discordance assumed when neither the votes nor the config give one.
DEFAULT_DISCORDANCE = 0.3
#: The largest number of pairs the plan searches (beyond: "not reachable").
MAX_PAIRS = 100_000
#: Pairs past the one found that must reach the power too: the exact test's power saws up and
#: down in n, so a lucky n followed by weaker ones is not a plan.
RECHECK_PAIRS = 5

STUDY_PLAN_COLUMNS: tuple[str, ...] = (
    "model", "dataset", "metric", "strategy_a", "strategy_b", "test", "n_items", "n_pairs", "pair_yield",
    "discordance", "discordance_source", "difference", "power", "alpha", "family_size", "pairs_needed",
    "n_needed", "reachable", "mdd", "power_at_difference", "note",
)


@dataclass(frozen=True)
class PlanSpec:
    """Config ``plan:``: the difference to detect (points), the power and the family-wise α."""

    difference: float = 10.0
    power: float = 0.8
    alpha: float = 0.05
    discordance: float | None = None

    @classmethod
    def from_config(cls, plan: dict | None) -> PlanSpec:
        plan = plan or {}
        return cls(difference=float(plan.get("difference", cls.difference)), power=float(plan.get("power", cls.power)),
                   alpha=float(plan.get("alpha", cls.alpha)), discordance=plan.get("discordance"))


def mcnemar_power(n: int, discordance: float, difference: float, alpha: float) -> float:
    """Exact power of the two-sided exact McNemar test with ``n`` pairs (see the module)."""
    # here, not at the top: the modules that read a plan (the answer, the report) start without
    # scipy.stats, half a second a job (bloomqg.stats.quantiles)
    from scipy import stats

    psi = max(discordance, abs(difference))
    if n < 1 or psi <= 0:
        return 0.0
    psi = min(psi, 1.0)
    share_b = (psi + difference) / (2 * psi)  # P(b 1, a 0 | discordant)
    d = np.arange(n + 1)
    weight = stats.binom.pmf(d, n, psi)
    # the exact test on D discordant pairs rejects B ≥ c_D or B ≤ D − c_D, c_D the smallest b
    # with P(B ≥ b | ½) ≤ α/2 (the null is symmetric: doubling is scipy's two-sided p)
    critical = stats.binom.isf(alpha / 2, d, 0.5) + 1
    critical = np.where(stats.binom.sf(critical - 2, d, 0.5) <= alpha / 2, critical - 1, critical)
    upper = stats.binom.sf(critical - 1, d, share_b)
    lower = np.where(d - critical >= 0, stats.binom.cdf(d - critical, d, share_b), 0.0)
    reject = np.where(critical <= d, upper + lower, 0.0)
    return float(np.sum(weight * reject))


def t_power(n: int, sd: float, difference: float, alpha: float) -> float:
    """Power of the two-sided paired t test with ``n`` pairs (noncentral t, statsmodels' ``TTestPower``)."""
    from scipy import stats  # deferred, as in mcnemar_power
    from statsmodels.stats.power import TTestPower

    if n < 2 or sd <= 0:
        return 0.0 if n < 2 else 1.0
    effect = abs(difference) / sd
    power = float(TTestPower().power(effect_size=effect, nobs=n, alpha=alpha, alternative="two-sided"))
    if not math.isfinite(power):  # the noncentral t fails far in its tail: the normal limit
        critical, shift = stats.t.ppf(1 - alpha / 2, n - 1), effect * math.sqrt(n)
        power = float(stats.norm.sf(critical - shift) + stats.norm.cdf(-critical - shift))
    return power


def _power(test: str, n: int, spread: float, difference: float, alpha: float) -> float:
    return mcnemar_power(n, spread, difference, alpha) if test == "mcnemar" else t_power(n, spread, difference, alpha)


def pairs_needed(test: str, spread: float, difference: float, power: float, alpha: float) -> int | None:
    """The fewest pairs reaching ``power`` (a doubling search, then bisection), moved past any of
    the next :data:`RECHECK_PAIRS` that fall short (the exact test's power is not monotone in n
    by a hair); None beyond :data:`MAX_PAIRS`."""
    high = 2
    while _power(test, high, spread, difference, alpha) < power:
        high *= 2
        if high > MAX_PAIRS:
            return None
    low = max(high // 2, 1)
    while low + 1 < high:
        middle = (low + high) // 2
        if _power(test, middle, spread, difference, alpha) >= power:
            high = middle
        else:
            low = middle
    while short := [k for k in range(high + 1, high + RECHECK_PAIRS + 1)
                    if _power(test, k, spread, difference, alpha) < power]:
        high = short[-1] + 1
        if high > MAX_PAIRS:
            return None
    return high


def minimum_detectable(test: str, n: int, spread: float, power: float, alpha: float, largest: float) -> float:
    """The smallest difference (in the outcome's units, up to ``largest``) whose power with
    ``n`` pairs reaches ``power``; NaN when even ``largest`` does not."""
    if _power(test, n, spread, largest, alpha) < power:
        return math.nan
    low, high = 0.0, largest
    for _ in range(40):
        middle = (low + high) / 2
        if _power(test, n, spread, middle, alpha) >= power:
            high = middle
        else:
            low = middle
    return high


def items_needed(plan_row: Mapping[str, Any], difference: float) -> int | None:
    """Items per cell a comparison of the plan (a :data:`STUDY_PLAN_COLUMNS` row) needs to detect
    ``difference`` points, by the plan's own rules (its test, spread, power, Holm's first step and
    the items a pair costs); at the plan's ``difference`` it is the row's ``n_needed``. None where
    the pairs needed are beyond :data:`MAX_PAIRS` or the items a pair costs are unknown."""
    test = str(plan_row["test"])
    scale = metric_spec(str(plan_row["metric"])).scale
    alpha = float(plan_row["alpha"]) / int(plan_row["family_size"])
    needed = pairs_needed(test, float(plan_row["discordance"]), difference / scale, float(plan_row["power"]), alpha)
    return _items_for_pairs(needed, plan_row.get("pair_yield"))


def _items_for_pairs(pairs: int | None, pair_yield: float | None) -> int | None:
    """Items per cell that yield ``pairs`` pairs; None beyond the search (``pairs`` None), or where
    the items a pair costs are unknown: no pair yet (a yield of 0) or no item in common (NaN)."""
    if pairs is None or pair_yield is None or pd.isna(pair_yield) or float(pair_yield) <= 0:
        return None
    return int(math.ceil(pairs / float(pair_yield)))


def study_plan(
    votes: pd.DataFrame,
    plan: PlanSpec = PlanSpec(),
    *,
    comparison: ComparisonSpec = ComparisonSpec(),
    strategy_order: Sequence[str] = (),
    metrics: Sequence[str] = DEFAULT_PAIRED_METRICS,
) -> pd.DataFrame:
    """The plan (columns :data:`STUDY_PLAN_COLUMNS`) for every planned comparison of ``votes``
    (every cell's votes in one frame) and metric; see the module for the rules."""
    require_columns(votes, ("model", "dataset", "strategy", "item_id"), "votes")
    rows = []
    for arm_a, arm_b in planned_pairs(votes, comparison, strategy_order):
        dataset, strategy_a, model = cell_of(arm_a, "arm a")
        strategy_b = cell_of(arm_b, "arm b").strategy
        terms_a, terms_b, n_items = common_item_terms(arm_a, arm_b, strategy_a, strategy_b)
        for metric in metrics:
            spec = metric_spec(metric)
            a, b = defined_pairs(terms_a, terms_b, metric)
            rows.append({"model": model, "dataset": dataset, "metric": metric, "strategy_a": strategy_a,
                         "strategy_b": strategy_b, "n_items": n_items, "a": a, "b": b, "scale": spec.scale,
                         "test": "mcnemar" if spec.paired_outcome == "binary" else "paired_t"})
    if not rows:
        return pd.DataFrame(columns=list(STUDY_PLAN_COLUMNS))
    family = pd.Series([row["metric"] for row in rows]).value_counts().to_dict()
    records = []
    for row in rows:
        a, b, scale, test = row.pop("a"), row.pop("b"), row.pop("scale"), row["test"]
        n_pairs = len(a)
        if n_pairs >= MIN_PILOT_PAIRS:
            spread = float(np.mean(a != b)) if test == "mcnemar" else float(np.std(b - a, ddof=1))
            source = f"measured on {n_pairs} pairs"
        else:
            assumed = DEFAULT_DISCORDANCE if plan.discordance is None else float(plan.discordance)
            spread = assumed if test == "mcnemar" else math.sqrt(assumed)
            source = "assumed (config plan.discordance)" if plan.discordance is not None else \
                f"assumed ({DEFAULT_DISCORDANCE}: fewer than {MIN_PILOT_PAIRS} pairs to measure)"
        if spread <= 0:  # no pair differs: plan with the assumption rather than infinite power
            spread = DEFAULT_DISCORDANCE if test == "mcnemar" else math.sqrt(DEFAULT_DISCORDANCE)
            source += f"; none differed, so {DEFAULT_DISCORDANCE} assumed"
        m = int(family[row["metric"]])
        alpha = plan.alpha / m
        difference = plan.difference / scale
        needed = pairs_needed(test, spread, difference, plan.power, alpha)
        pair_yield = n_pairs / row["n_items"] if row["n_items"] else math.nan
        items = _items_for_pairs(needed, pair_yield)
        if not row["n_items"]:
            note = (f"no item in common: {row['strategy_a']} and {row['strategy_b']} answered different items, "
                    "so nothing is paired and the items needed are unknown")
        elif not n_pairs:
            note = f"no pair defined for {row['metric']} in both arms: the items a pair costs are unknown"
        else:
            note = None
        # both tests' outcomes are shares in 0..1 (KnowCov's too): no difference is larger than 1
        mdd = minimum_detectable(test, n_pairs, spread, plan.power, alpha, 1.0) * scale if n_pairs else math.nan
        records.append({
            **row, "n_pairs": n_pairs, "pair_yield": pair_yield, "discordance": spread,
            "discordance_source": source, "difference": plan.difference, "power": plan.power,
            "alpha": plan.alpha, "family_size": m, "pairs_needed": needed, "n_needed": items,
            "reachable": needed is not None, "mdd": mdd,
            "power_at_difference": _power(test, n_pairs, spread, difference, alpha) if n_pairs else 0.0,
            "note": note,
        })
    frame = pd.DataFrame.from_records(records)
    for column in ("pairs_needed", "n_needed"):
        frame[column] = frame[column].astype("Int64")
    return frame[list(STUDY_PLAN_COLUMNS)]
