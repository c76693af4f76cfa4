"""Agreement statistics between raters: percent agreement with the exact (Clopper–Pearson)
interval of a share (agreeing items are a binomial count, and a percentile bootstrap of a share
near 100% covers badly at small n: docs/statistics.md), Cohen's κ and Krippendorff's α with a
percentile bootstrap interval over items, and a confusion matrix.

A *rating* here is a hashable label (``True``/``False``, a Bloom level name, a frozenset of
knowledge units); ``None`` is a missing rating and such an item is left out of any pairwise
figure. Knowledge-unit sets count as agreeing only when equal in percent agreement and κ (a set is
one nominal label there); α on them uses the Jaccard distance of :func:`bloomqg.voting.alpha.encode_votes`.

Cohen's κ is :func:`bloomqg.stats.kappa.cohen_kappa` (undefined, NaN, where neither rater varies).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from bloomqg.metrics.intervals import clopper_pearson
from bloomqg.stats.kappa import cohen_kappa, is_missing  # noqa: F401  (this module's κ and missing rating)
from bloomqg.voting.alpha import alpha_with_ci, encode_votes

Rating = Hashable | None


@dataclass(frozen=True)
class Estimate:
    """A statistic with its bootstrap interval and the number of items it was computed over."""

    value: float
    ci_low: float
    ci_high: float
    n: int


def _paired(a: Sequence[Rating], b: Sequence[Rating]) -> tuple[list[Hashable], list[Hashable]]:
    if len(a) != len(b):
        raise ValueError(f"rating lists differ in length: {len(a)} vs {len(b)}")
    pairs = [(x, y) for x, y in zip(a, b) if not is_missing(x) and not is_missing(y)]
    return [x for x, _ in pairs], [y for _, y in pairs]


def percent_agreement(a: Sequence[Rating], b: Sequence[Rating]) -> float:
    """Share (%) of items rated by both on which the two ratings are equal; NaN with none."""
    x, y = _paired(a, b)
    if not x:
        return math.nan
    return 100.0 * sum(p == q for p, q in zip(x, y)) / len(x)


def bootstrap(
    statistic: Callable[[np.ndarray], float],
    n_items: int,
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile interval of ``statistic(indices)`` over item indices resampled with replacement.

    Resamples where the statistic is undefined (NaN) are dropped; (NaN, NaN) when all are, or
    when there are no items.
    """
    if n_items == 0 or n_resamples <= 0:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    samples = np.array([statistic(rng.integers(0, n_items, n_items)) for _ in range(n_resamples)])
    samples = samples[~np.isnan(samples)]
    if samples.size == 0:
        return math.nan, math.nan
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(samples, [tail, 100 - tail])
    return float(low), float(high)


def _pairwise_estimate(
    function: Callable[[Sequence[Rating], Sequence[Rating]], float],
    a: Sequence[Rating],
    b: Sequence[Rating],
    **bootstrap_options: float | int,
) -> Estimate:
    x, y = _paired(a, b)
    point = function(x, y)

    def resampled(indices: np.ndarray) -> float:
        return function([x[i] for i in indices], [y[i] for i in indices])

    low, high = bootstrap(resampled, len(x), **bootstrap_options) if not math.isnan(point) else (math.nan, math.nan)
    return Estimate(point, low, high, len(x))


def percent_agreement_with_ci(a: Sequence[Rating], b: Sequence[Rating], *, confidence: float = 0.95,
                              **bootstrap_options: float | int) -> Estimate:
    """:func:`percent_agreement` with the Clopper–Pearson interval (percent); ``n`` = items rated by
    both. ``bootstrap_options`` (n_resamples, seed) are accepted for the callers that pass one
    set to every statistic, and unused: the interval is closed-form."""
    x, y = _paired(a, b)
    if not x:
        return Estimate(math.nan, math.nan, math.nan, 0)
    agreeing = sum(p == q for p, q in zip(x, y))
    low, high = clopper_pearson(agreeing, len(x), confidence)
    return Estimate(100.0 * agreeing / len(x), 100.0 * float(low), 100.0 * float(high), len(x))


def cohen_kappa_with_ci(a: Sequence[Rating], b: Sequence[Rating], **bootstrap_options: float | int) -> Estimate:
    """:func:`cohen_kappa` with a bootstrap CI; ``n`` = items rated by both."""
    return _pairwise_estimate(cohen_kappa, a, b, **bootstrap_options)


def _alpha_code(rating: Rating, level: str) -> object:
    """A rating as :func:`bloomqg.voting.alpha.encode_votes` reads it."""
    if is_missing(rating):
        return None
    if level == "jaccard":
        return sorted(rating)  # type: ignore[arg-type]
    if isinstance(rating, bool):
        return "1" if rating else "0"
    return rating


def krippendorff_alpha_with_ci(
    ratings: Sequence[Sequence[Rating]],
    level: str,
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Estimate:
    """Krippendorff's α of items × raters ``ratings`` (None = missing) with a bootstrap CI.

    ``level``: ``"nominal"``, ``"ordinal"`` (Bloom level names) or ``"jaccard"`` (unit sets), as
    in :mod:`bloomqg.voting`, whose coding and bootstrap this reuses. ``n`` counts the items with
    at least two ratings.
    """
    coded = encode_votes([[_alpha_code(r, level) for r in row] for row in ratings], level)
    result = alpha_with_ci(coded, n_resamples=n_resamples, confidence=confidence, seed=seed)
    return Estimate(result.alpha, result.ci_low, result.ci_high, result.n_items)


def confusion_counts(
    reference: Sequence[Rating], predicted: Sequence[Rating], labels: Sequence[Hashable]
) -> np.ndarray:
    """``labels × labels`` counts: row = the reference's label, column = the prediction's, over
    items where both are known. A label outside ``labels`` is an error, not a silent drop."""
    index = {label: position for position, label in enumerate(labels)}
    matrix = np.zeros((len(labels), len(labels)), dtype=np.int64)
    for ref, pred in zip(*_paired(reference, predicted)):
        for value in (ref, pred):
            if value not in index:
                raise ValueError(f"label {value!r} is not one of {list(labels)}")
        matrix[index[ref], index[pred]] += 1
    return matrix


def strict_majority(ratings: Sequence[Rating]) -> Rating:
    """The label more than half of the given (non-missing) ratings share; None on a tie, with
    no ratings, or when no label has a majority. One rating is its own majority."""
    given = [r for r in ratings if not is_missing(r)]
    if not given:
        return None
    label, count = Counter(given).most_common(1)[0]
    return label if count * 2 > len(given) else None


def human_majority_votes(items: "pd.DataFrame", ratings: "pd.DataFrame") -> "pd.DataFrame":
    """The annotators' strict majorities as votes a learned judge can learn from (people as its
    teacher): one row per annotation item with a majority on the Bloom level or the knowledge
    units, the columns of :data:`bloomqg.judges.learned.TRAINING_COLUMNS` (``bloom_level`` and
    ``knowledge_units`` the humans' majority, None without one). ``items`` is the export's key
    (:data:`bloomqg.store.frames.ANNOTATION_ITEMS`), ``ratings`` :func:`bloomqg.annotation.sheets.read_sheets`'s."""
    import pandas as pd

    from bloomqg.judges.learned import TRAINING_COLUMNS

    given = ratings[ratings["criterion"].isin(["bloom_level", "knowledge_units"])]
    majority = {key: strict_majority(list(part["value"])) for key, part in given.groupby(["annotation_id", "criterion"])}
    rows = []
    for item in items.itertuples(index=False):
        level = majority.get((item.annotation_id, "bloom_level"))
        units = majority.get((item.annotation_id, "knowledge_units"))
        if level is None and units is None:
            continue
        rows.append({
            "model": item.model, "dataset": item.dataset, "strategy": item.strategy, "item_id": item.item_id,
            "new_question": item.new_question, "original_question": item.original_question,
            "original_bloom_level": item.original_bloom_level,
            "original_knowledge_units": list(item.original_knowledge_units),
            "bloom_level": level, "knowledge_units": sorted(units) if units is not None else None,
        })
    return pd.DataFrame(rows, columns=list(TRAINING_COLUMNS))
