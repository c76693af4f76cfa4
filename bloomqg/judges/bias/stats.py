"""The bias estimates of the probed judges, each with a confidence interval (pure).

From the probe verdicts (:data:`bloomqg.store.frames.JUDGE_PROBES`, every judge and cell), per judge:

- **order** — ``share_changed``: the share of questions whose verdict on a criterion differs
  between the base and the order probe; ``excess_over_repeat``: that share minus the share that
  differs between the base and the repeat probe on the same questions (a sampled judge changes
  some verdicts without any reordering); detected when its CI excludes 0.
- **position** (Bloom level) — where the chosen level stood in the permuted list (1 = first).
  ``first_position_excess``: the share of order-probe verdicts listed first, minus the share of
  the base verdicts that the same permuted list put first (what an order-blind judge would show);
  detected when its CI excludes 0. The distribution by position is returned as well.
- **consistency** — ``self_agreement``: the share of questions on which the repeat probe gives the
  base probe's verdict; detected (inconsistency) when its CI excludes 1.
- **self_preference** — for a judge whose ``family`` is some generator's: for each other judge
  *k* of another family, the judge's value (yes = 1, no = 0; Bloom level 1..6) minus *k*'s,
  averaged over the questions of the judge's family's generators, minus the same average over
  the other generators' questions — leaving out the questions of *k*'s own family, so that *k*'s
  own self-preference does not leak in, and each *k* compares the same questions in both
  groups. ``self_preference`` is the mean of these differences in differences over the *k*;
  detected when its CI excludes 0.
- **length** — the correlation of the question's length (words) with the base verdict:
  point-biserial for yes/no, Spearman for the Bloom level, with Fisher-z intervals (standard error
  1/√(n−3), and Bonett & Wright's √((1+r²/2)/(n−3)) for Spearman); detected when the CI excludes 0.

Intervals of shares and differences are percentile bootstraps over questions (stratified by
family group for self-preference), seeded. The intervals of one probe are simultaneous over its
criteria (Bonferroni: each at 1 − (1 − confidence)/k for k criteria), so an unbiased judge is
flagged on a probe with probability at most 1 − confidence. Order and position count as bias only
above zero, consistency only below one; self-preference and length on either side. A criterion value is used only where its status is
``ok`` on every probe the statistic compares.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from bloomqg.inputs.bloom import BLOOM_LEVELS
from bloomqg.stats.normal import fisher_z_ci
from bloomqg.store.frames import BIAS_ESTIMATES, BIAS_POSITIONS, BINARY_CRITERIA, CRITERIA

Question = tuple[str, str, str, str]  # (dataset, strategy, model, prompt_id)
SCORED_CRITERIA: tuple[str, ...] = (*BINARY_CRITERIA, "bloom_level")


def _rating(row: Any) -> Hashable | None:
    if row.status != "ok":
        return None
    if row.criterion == "bloom_level":
        return str(row.value_level)
    if row.criterion == "knowledge_units":
        return frozenset(row.value_units)
    return bool(row.value_bool)


def _score(criterion: str, rating: Hashable) -> float:
    """A rating as a number: yes = 1, no = 0; a Bloom level as its rank 1..6."""
    return float(BLOOM_LEVELS.index(rating) + 1) if criterion == "bloom_level" else float(bool(rating))


def bootstrap_ci(
    statistic: Callable[[Sequence[np.ndarray]], float],
    sizes: Sequence[int],
    *,
    n_resamples: int,
    confidence: float,
    seed: int,
) -> tuple[float, float]:
    """Percentile interval of ``statistic`` over index arrays resampled with replacement within
    each stratum of ``sizes``; NaN resamples are dropped, (NaN, NaN) when nothing is left."""
    if not sizes or min(sizes) == 0:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    values = np.array([statistic([rng.integers(0, n, n) for n in sizes]) for _ in range(n_resamples)])
    values = values[~np.isnan(values)]
    if not values.size:
        return math.nan, math.nan
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def _row(judge: str, probe: str, criterion: str, statistic: str, value: float, ci: tuple[float, float], n: int,
         *, null: float | None = None, side: str = "both", note: str | None = None) -> dict[str, Any]:
    """One BIAS_ESTIMATES row; ``null``: the no-bias value the CI must exclude to be detected
    (None: a descriptive figure, never 'detected'); ``side``: "above" or "below" when only that
    side is a bias (more changes with the lists reordered; fewer agreements with itself)."""
    low, high = ci
    known = null is not None and not math.isnan(low) and not math.isnan(high)
    detected = known and ((side != "below" and low > null) or (side != "above" and high < null))
    return {"judge": judge, "probe": probe, "criterion": criterion, "statistic": statistic, "value": value,
            "ci_low": low, "ci_high": high, "n": int(n), "detected": bool(detected), "note": note}


def _mean_ci(values: np.ndarray, options: Mapping[str, Any]) -> tuple[float, tuple[float, float]]:
    if not len(values):
        return math.nan, (math.nan, math.nan)
    return float(values.mean()), bootstrap_ci(lambda idx: float(values[idx[0]].mean()), [len(values)], **options)


def _tables(probes: pd.DataFrame) -> tuple[dict[Any, Any], dict[Any, Any], dict[Question, int]]:
    """(ratings[(judge, probe, criterion)][question], level orders[(judge, probe)][question],
    words[question])."""
    ratings: dict[tuple[str, str, str], dict[Question, Hashable]] = {}
    orders: dict[tuple[str, str], dict[Question, tuple[str, ...]]] = {}
    words: dict[Question, int] = {}
    for row in probes.itertuples(index=False):
        question = (row.dataset, row.strategy, row.model, row.prompt_id)
        words[question] = int(row.question_words)
        orders.setdefault((row.judge, row.probe), {})[question] = tuple(row.level_order)
        rating = _rating(row)
        if rating is not None:
            ratings.setdefault((row.judge, row.probe, row.criterion), {})[question] = rating
    return ratings, orders, words


def bias_estimates(
    probes: pd.DataFrame,
    families: Mapping[str, Mapping[str, str | None]],
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(:data:`~bloomqg.store.frames.BIAS_ESTIMATES`, :data:`~bloomqg.store.frames.BIAS_POSITIONS`) of every
    judge in ``probes``. ``families``: ``{"judges": {judge: family}, "generators": {model: family}}``
    as :func:`bloomqg.judges.bias.design.families` builds it."""
    def simultaneous(k: int) -> dict[str, Any]:
        # Bonferroni: the k criteria of one probe share the error rate, so an unbiased judge is
        # flagged on a probe with probability at most 1 - confidence, not k times that
        return {"n_resamples": n_resamples, "confidence": 1 - (1 - confidence) / k, "seed": seed}

    options = simultaneous(len(CRITERIA))
    scored = simultaneous(len(SCORED_CRITERIA))
    ratings, orders, words = _tables(probes)
    judges = list(dict.fromkeys(probes["judge"]))
    rows: list[dict[str, Any]] = []
    positions: list[dict[str, Any]] = []
    for judge in judges:
        for criterion in CRITERIA:
            base = ratings.get((judge, "base", criterion), {})
            order = ratings.get((judge, "order", criterion), {})
            repeat = ratings.get((judge, "repeat", criterion), {})
            both = sorted(set(base) & set(order))
            changed = np.array([base[q] != order[q] for q in both], dtype=float)
            value, ci = _mean_ci(changed, options)
            rows.append(_row(judge, "order", criterion, "share_changed", value, ci, len(both),
                             note="includes what a repeat alone changes"))
            three = sorted(set(base) & set(order) & set(repeat))
            excess = np.array([(base[q] != order[q]) - (base[q] != repeat[q]) for q in three], dtype=float)
            value, ci = _mean_ci(excess, options)
            rows.append(_row(judge, "order", criterion, "excess_over_repeat", value, ci, len(three),
                             null=0.0, side="above"))
            paired = sorted(set(base) & set(repeat))
            agree = np.array([base[q] == repeat[q] for q in paired], dtype=float)
            value, ci = _mean_ci(agree, options)
            rows.append(_row(judge, "consistency", criterion, "self_agreement", value, ci, len(paired),
                             null=1.0, side="below"))
        rows += _position_rows(judge, ratings, orders, positions, simultaneous(1))
        rows += _length_rows(judge, ratings, words, scored["confidence"])
        rows += _self_preference_rows(judge, judges, ratings, families, scored)
    return (pd.DataFrame.from_records(rows, columns=BIAS_ESTIMATES.names),
            pd.DataFrame.from_records(positions, columns=BIAS_POSITIONS.names))


Ratings = Mapping[tuple[str, str, str], Mapping[Question, Hashable]]


def _position_rows(
    judge: str,
    ratings: Ratings,
    orders: Mapping[tuple[str, str], Mapping[Question, tuple[str, ...]]],
    positions: list[dict[str, Any]],
    options: Mapping[str, Any],
) -> list[dict[str, Any]]:
    """The position rows of one judge; appends its counts by position to ``positions``."""
    base = ratings.get((judge, "base", "bloom_level"), {})
    order = ratings.get((judge, "order", "bloom_level"), {})
    listed = orders.get((judge, "order"), {})
    both = sorted(set(base) & set(order))
    chosen = np.array([listed[q].index(order[q]) + 1 for q in both], dtype=int)
    expected = np.array([listed[q].index(base[q]) + 1 for q in both], dtype=int)
    for position in range(1, len(BLOOM_LEVELS) + 1):
        positions.append({"judge": judge, "position": position, "chosen": int((chosen == position).sum()),
                          "expected": int((expected == position).sum())})
    first = (chosen == 1).astype(float)
    value, ci = _mean_ci(first, options)
    rows = [_row(judge, "position", "bloom_level", "first_position_share", value, ci, len(both),
                 note=f"an order-blind judge: {float((expected == 1).mean()) if len(both) else math.nan:.3f}")]
    excess = first - (expected == 1).astype(float)
    value, ci = _mean_ci(excess, options)
    rows.append(_row(judge, "position", "bloom_level", "first_position_excess", value, ci, len(both),
                     null=0.0, side="above"))
    return rows


def _length_rows(judge: str, ratings: Ratings, words: Mapping[Question, int], confidence: float) -> list[dict[str, Any]]:
    rows = []
    for criterion in SCORED_CRITERIA:
        base = ratings.get((judge, "base", criterion), {})
        questions = sorted(base)
        x = np.array([words[q] for q in questions], dtype=float)
        y = np.array([_score(criterion, base[q]) for q in questions], dtype=float)
        spearman = criterion == "bloom_level"
        statistic = "spearman" if spearman else "point_biserial"
        if len(questions) < 4 or np.ptp(x) == 0 or np.ptp(y) == 0:
            rows.append(_row(judge, "length", criterion, statistic, math.nan, (math.nan, math.nan), len(questions),
                             null=0.0, note="undefined: fewer than 4 questions, or no variation"))
            continue
        r = float(scipy_stats.spearmanr(x, y).statistic if spearman else scipy_stats.pointbiserialr(y, x).statistic)
        rows.append(_row(judge, "length", criterion, statistic, r,
                         fisher_z_ci(r, len(questions), confidence, spearman=spearman), len(questions), null=0.0))
    return rows


def _self_preference_rows(
    judge: str,
    judges: Sequence[str],
    ratings: Ratings,
    families: Mapping[str, Mapping[str, str | None]],
    options: Mapping[str, Any],
) -> list[dict[str, Any]]:
    own = families["judges"].get(judge)
    generators = families["generators"]
    if not own or own not in set(generators.values()):
        return []  # no generator of the judge's family: nothing to prefer
    references = [k for k in judges if k != judge and families["judges"].get(k) != own]
    rows = []
    for criterion in SCORED_CRITERIA:
        mine = ratings.get((judge, "base", criterion), {})
        questions = sorted(mine)
        same = np.array([generators.get(q[2]) == own for q in questions])
        # d[q, k]: the judge's value minus reference judge k's; NaN where k gave none, and on
        # k's own family's questions (k's own self-preference must not leak in)
        d = np.full((len(questions), len(references)), np.nan)
        for column, k in enumerate(references):
            theirs = ratings.get((k, "base", criterion), {})
            k_family = families["judges"].get(k)
            for row, q in enumerate(questions):
                if q in theirs and not (k_family and generators.get(q[2]) == k_family):
                    d[row, column] = _score(criterion, mine[q]) - _score(criterion, theirs[q])
        a, b = d[same], d[~same]

        def did(rows_a: np.ndarray, rows_b: np.ndarray) -> float:
            usable = ~np.isnan(rows_a).all(axis=0) & ~np.isnan(rows_b).all(axis=0)
            if not usable.any():
                return math.nan
            with np.errstate(invalid="ignore"):
                return float(np.mean(np.nanmean(rows_a[:, usable], axis=0) - np.nanmean(rows_b[:, usable], axis=0)))

        value = did(a, b) if len(a) and len(b) else math.nan
        n = int((~np.isnan(d)).any(axis=1).sum())
        if math.isnan(value):
            rows.append(_row(judge, "self_preference", criterion, "self_preference", math.nan, (math.nan, math.nan), n,
                             null=0.0, note="needs questions of its own family's and of other generators, "
                                            "both judged by a judge of another family"))
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a resample may miss a reference judge
            ci = bootstrap_ci(lambda idx: did(a[idx[0]], b[idx[1]]), [len(a), len(b)], **options)
        used = [k for c, k in enumerate(references) if not np.isnan(a[:, c]).all() and not np.isnan(b[:, c]).all()]
        rows.append(_row(judge, "self_preference", criterion, "self_preference", value, ci, n, null=0.0,
                         note=f"family {own}: {len(a)} own-family, {len(b)} other questions; "
                              f"against {', '.join(used)}"))
    return rows
