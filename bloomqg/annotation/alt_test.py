"""The alternative annotator test (Calderon, Reichart & Dror 2025): can a judge replace an annotator?

"The Alternative Annotator Test for LLM-as-a-Judge: How to Statistically Justify Replacing Human
Annotators with LLMs" (ACL 2025; code: github.com/nitaytech/AltTest). Given items rated by
several annotators and by a judge, per criterion:

1. Items rated by fewer than ``min_annotators_per_item`` annotators (default 2), or that the
   judge left without a value, are dropped.
2. For each annotator *j* in turn (leave one annotator out), on each item *i* that *j* rated, the
   judge's and *j*'s *alignment* with the remaining annotators of *i* is scored: accuracy, the
   share of remaining annotators who gave the same rating (a set of knowledge units counts as
   the same only when equal).
3. Indicators: ``W_f = 1`` when the judge's score ≥ *j*'s, ``W_h = 1`` when *j*'s ≥ the judge's
   (a tie counts for both). The *advantage probability* ρ_j = mean ``W_f``.
4. A one-sided one-sample t-test of ``d_i = W_h − W_f`` against ε (H₀: mean d ≥ ε; H₁: mean d < ε,
   i.e. ρ_f ≥ ρ_h − ε): ε is the cost–benefit margin granted to the judge. An annotator with fewer
   than ``min_items_per_annotator`` items (default 30, for the t-test's normal approximation) is
   left out of the test. When every ``d_i`` is equal the t statistic is undefined; its limit is
   taken: p = 0 when that value is below ε, else 1.
5. The p-values over the annotators are corrected by Benjamini–Yekutieli (FDR ``q``, default
   0.05); the judge *wins* against annotator *j* when *j*'s hypothesis is rejected.
6. The winning rate ω = wins / annotators tested; the judge **can replace an annotator** on the
   criterion when ω ≥ 0.5. ρ = mean ρ_j compares judges with each other.

The paper's ε: 0.2 for expert annotators, 0.15 for skilled ones (students, trained workers), 0.1
for crowd workers; smaller when the annotators agree less with each other. It asks for at least
three annotators (two give no consensus signal to represent) and 50–100 items.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

Rating = Hashable

#: The paper's ε per kind of annotator (its FAQ and the notebook's suggestions).
PAPER_EPSILON: dict[str, float] = {"expert": 0.2, "skilled": 0.15, "crowd": 0.1}
DEFAULT_EPSILON = PAPER_EPSILON["expert"]
DEFAULT_Q = 0.05
DEFAULT_MIN_ANNOTATORS_PER_ITEM = 2
DEFAULT_MIN_ITEMS_PER_ANNOTATOR = 30
#: The rater name of the panel's majority (always tested: the annotation key holds it).
PANEL_RATER = "panel majority"
#: Annotators the test needs (the paper: two give no consensus signal to represent).
MIN_ANNOTATORS = 3
#: ω at which a judge passes (the judge wins against at least half of the annotators).
PASSING_WINNING_RATE = 0.5


@dataclass(frozen=True)
class AnnotatorComparison:
    """The judge against one left-out annotator."""

    annotator: str
    n: int
    judge_advantage: float  # ρ_f,j: share of items where the judge aligns at least as well
    annotator_advantage: float  # ρ_h,j
    t_statistic: float
    p_value: float
    won: bool = False  # rejected after the Benjamini-Yekutieli correction


@dataclass(frozen=True)
class AltTestResult:
    """One judge on one criterion."""

    epsilon: float
    q: float
    comparisons: tuple[AnnotatorComparison, ...]
    #: annotators left out of the test: too few items
    skipped: tuple[str, ...] = field(default_factory=tuple)

    @property
    def winning_rate(self) -> float:
        """ω: share of tested annotators the judge wins against (NaN: none tested)."""
        if not self.comparisons:
            return math.nan
        return sum(c.won for c in self.comparisons) / len(self.comparisons)

    @property
    def advantage_probability(self) -> float:
        """ρ: mean over annotators of the share of items where the judge aligns at least as well."""
        if not self.comparisons:
            return math.nan
        return float(np.mean([c.judge_advantage for c in self.comparisons]))

    @property
    def passed(self) -> bool | None:
        """Whether the judge can replace an annotator; None when no annotator could be tested."""
        return None if not self.comparisons else self.winning_rate >= PASSING_WINNING_RATE


def accuracy(prediction: Rating, others: Sequence[Rating]) -> float:
    """Share of ``others`` equal to ``prediction`` (the paper's scoring function for labels)."""
    return float(np.mean([prediction == other for other in others]))


def benjamini_yekutieli(p_values: Sequence[float], q: float) -> list[bool]:
    """Rejections under the Benjamini–Yekutieli procedure at FDR ``q`` (any dependence): reject
    the k smallest p-values, k the largest rank with p_(k) ≤ k/m · q / H_m, H_m = Σ 1/i."""
    m = len(p_values)
    if m == 0:
        return []
    harmonic = sum(1.0 / i for i in range(1, m + 1))
    order = sorted(range(m), key=lambda i: p_values[i])
    largest = 0
    for rank, index in enumerate(order, start=1):
        if p_values[index] <= rank / m * q / harmonic:
            largest = rank
    rejected = [False] * m
    for index in order[:largest]:
        rejected[index] = True
    return rejected


def one_sided_p(differences: Sequence[float], epsilon: float) -> tuple[float, float]:
    """(t, p) of the one-sample t-test H₀: mean ≥ ε against H₁: mean < ε. Equal differences:
    t = ∓inf and p = 0 when below ε, else p = 1 (the limit of the test)."""
    values = np.asarray(differences, dtype=float)
    if np.ptp(values) == 0:
        below = values[0] < epsilon
        return (-math.inf if below else math.inf), (0.0 if below else 1.0)
    # here, not at the top: the Snakefile reads this module's defaults (annotation.settings), and
    # every Snakemake start of an annotated study would import scipy.stats for them
    from scipy import stats

    result = stats.ttest_1samp(values, epsilon, alternative="less")
    return float(result.statistic), float(result.pvalue)


def alt_test(
    judge: Mapping[str, Rating | None],
    annotators: Mapping[str, Mapping[str, Rating | None]],
    *,
    epsilon: float = DEFAULT_EPSILON,
    q: float = DEFAULT_Q,
    min_annotators_per_item: int = DEFAULT_MIN_ANNOTATORS_PER_ITEM,
    min_items_per_annotator: int = DEFAULT_MIN_ITEMS_PER_ANNOTATOR,
) -> AltTestResult:
    """The alt-test of ``judge`` (item → rating) against ``annotators`` (annotator → item →
    rating); a None rating counts as not given. See the module docstring for the procedure."""
    given = {who: {item: r for item, r in ratings.items() if r is not None} for who, ratings in annotators.items()}
    raters_of: dict[str, list[str]] = {}
    for who, ratings in given.items():
        for item in ratings:
            raters_of.setdefault(item, []).append(who)
    kept = {item for item, raters in raters_of.items()
            if len(raters) >= min_annotators_per_item and judge.get(item) is not None}
    measured: list[tuple[str, int, float, float, float, float]] = []
    skipped: list[str] = []
    for excluded in sorted(given):
        items = sorted(item for item in given[excluded] if item in kept)
        if len(items) < max(min_items_per_annotator, 1):
            skipped.append(excluded)
            continue
        judge_wins, annotator_wins = [], []
        for item in items:
            others = [given[who][item] for who in raters_of[item] if who != excluded]
            human_score = accuracy(given[excluded][item], others)
            judge_score = accuracy(judge[item], others)
            judge_wins.append(1.0 if judge_score >= human_score else 0.0)
            annotator_wins.append(1.0 if human_score >= judge_score else 0.0)
        t, p = one_sided_p([h - f for h, f in zip(annotator_wins, judge_wins)], epsilon)
        measured.append((excluded, len(items), float(np.mean(judge_wins)), float(np.mean(annotator_wins)), t, p))
    won = benjamini_yekutieli([m[5] for m in measured], q)
    comparisons = tuple(AnnotatorComparison(*m, won=w) for m, w in zip(measured, won))
    return AltTestResult(epsilon, q, comparisons, tuple(skipped))


def verdict_text(judge: str, criterion: str, result: AltTestResult) -> str:
    """The plain verdict: "judge J can / cannot replace an annotator on criterion C at ε"."""
    who = "the panel majority" if judge == PANEL_RATER else f"judge {judge}"
    if result.passed is None:
        return (f"{who} was not tested on {criterion}: no annotator has "
                "enough items rated by the judge and by another annotator")
    verb = "can" if result.passed else "cannot"
    return (f"{who} {verb} replace an annotator on {criterion} at ε = {result.epsilon:g} "
            f"(ω = {result.winning_rate:.2f}, {sum(c.won for c in result.comparisons)} of "
            f"{len(result.comparisons)} annotators; ρ = {result.advantage_probability:.2f})")


def alt_test_frames(
    items: pd.DataFrame,
    ratings: pd.DataFrame,
    judge_ratings: Mapping[str, Mapping[tuple[str, str], Rating | None]],
    *,
    epsilon: float = DEFAULT_EPSILON,
    q: float = DEFAULT_Q,
    min_items_per_annotator: int = DEFAULT_MIN_ITEMS_PER_ANNOTATOR,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(:data:`~bloomqg.store.frames.ALT_TEST`, :data:`~bloomqg.store.frames.ALT_TEST_COMPARISONS`) of the
    panel's majority (from the annotation key ``items``) and of each judge in ``judge_ratings``
    (judge → (annotation_id, criterion) → rating) against the annotators of ``ratings``
    (:func:`bloomqg.annotation.sheets.read_sheets`). Empty frames with fewer than
    :data:`MIN_ANNOTATORS` annotators: the paper's procedure needs a consensus to represent."""
    from bloomqg.annotation.panel_agreement import panel_rating
    from bloomqg.store.frames import ALT_TEST, ALT_TEST_COMPARISONS, CRITERIA

    summary: list[dict[str, object]] = []
    comparisons: list[dict[str, object]] = []
    if ratings.empty or ratings["annotator"].nunique() < MIN_ANNOTATORS:
        return pd.DataFrame(columns=ALT_TEST.names), pd.DataFrame(columns=ALT_TEST_COMPARISONS.names)
    raters: dict[str, Mapping[tuple[str, str], Rating | None]] = {
        PANEL_RATER: {(row.annotation_id, criterion): panel_rating(criterion, getattr(row, f"panel_{criterion}"))
                      for row in items.itertuples(index=False) for criterion in CRITERIA},
        **judge_ratings,
    }
    for rater, given in raters.items():
        for criterion in CRITERIA:
            annotators: dict[str, dict[str, Rating]] = {}
            for row in ratings[ratings["criterion"] == criterion].itertuples(index=False):
                annotators.setdefault(row.annotator, {})[row.annotation_id] = row.value
            judge = {item: given.get((item, criterion)) for item in items["annotation_id"]}
            result = alt_test(judge, annotators, epsilon=epsilon, q=q, min_items_per_annotator=min_items_per_annotator)
            summary.append({
                "rater": rater, "criterion": criterion, "epsilon": epsilon, "q": q,
                "n_annotators": len(result.comparisons), "n_won": sum(c.won for c in result.comparisons),
                "winning_rate": result.winning_rate, "advantage_probability": result.advantage_probability,
                "passed": result.passed, "verdict": verdict_text(rater, criterion, result),
            })
            comparisons += [{"rater": rater, "criterion": criterion, "annotator": c.annotator, "n": c.n,
                             "rater_advantage": c.judge_advantage, "annotator_advantage": c.annotator_advantage,
                             "t_statistic": c.t_statistic, "p_value": c.p_value, "won": c.won}
                            for c in result.comparisons]
    return (pd.DataFrame.from_records(summary, columns=ALT_TEST.names),
            pd.DataFrame.from_records(comparisons, columns=ALT_TEST_COMPARISONS.names))
