"""Krippendorff's α of a judge panel (or of human raters) with a percentile bootstrap interval.

Votes are coded for the ``krippendorff`` package by level of measurement: nominal, ordinal over
the six Bloom levels, or sets of knowledge units compared with the Jaccard distance (the rules
and the two kinds of NaN are in :mod:`bloomqg.voting`).
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bloomqg.inputs.bloom import BLOOM_LEVELS, LEVEL_WEIGHT, normalize_level

#: Level of measurement of each criterion in the reliability table.
CRITERION_LEVEL: dict[str, str] = {
    "unique": "nominal",
    "readable": "nominal",
    "answerable": "nominal",
    "bloom_level": "ordinal",
    "knowledge_units": "jaccard",
}


@dataclass(frozen=True)
class CodedVotes:
    """Votes as a judges × items matrix of codes (NaN = no vote) with their value domain."""

    codes: np.ndarray
    domain: np.ndarray
    level: str
    metric: str | Callable[..., np.ndarray]


def _pad(votes_lists: Sequence[Sequence[Any]]) -> list[list[Any]]:
    width = max((len(row) for row in votes_lists), default=0)
    return [list(row) + [None] * (width - len(row)) for row in votes_lists]


def _is_missing(vote: Any) -> bool:
    return vote is None or (isinstance(vote, float) and math.isnan(vote))


def encode_votes(votes_lists: Sequence[Sequence[Any]], level: str) -> CodedVotes:
    """Code items × judges votes for :mod:`krippendorff`.

    ``level``: ``"nominal"`` (any labels, compared as strings), ``"ordinal"`` (Bloom level names
    or 1..6, domain Remember..Create) or ``"jaccard"`` (JSON lists of units, Python sequences, or
    a plain unit name such as the release's ``topic_votes``, read as a one-unit set).
    """
    rows = _pad(votes_lists)
    present = [vote for row in rows for vote in row if not _is_missing(vote)]
    if level == "ordinal":
        domain = np.arange(1, len(BLOOM_LEVELS) + 1, dtype=float)
        return CodedVotes(_code_matrix(rows, _level_weight), domain, level, "ordinal")
    if level == "nominal":
        labels = sorted({str(vote) for vote in present})
        index = {label: k for k, label in enumerate(labels)}
        codes = _code_matrix(rows, lambda vote: index[str(vote)])
        return CodedVotes(codes, np.arange(len(labels), dtype=float), level, "nominal")
    if level == "jaccard":
        sets = sorted({unit_set(vote) for vote in present}, key=sorted)
        index = {units: k for k, units in enumerate(sets)}
        codes = _code_matrix(rows, lambda vote: index[unit_set(vote)])
        return CodedVotes(codes, np.arange(len(sets), dtype=float), level, _jaccard_metric(sets))
    raise ValueError(f"unknown level of measurement {level!r}; expected nominal, ordinal or jaccard")


def _code_matrix(rows: Sequence[Sequence[Any]], code: Callable[[Any], float]) -> np.ndarray:
    """judges × items codes of items × judges votes (NaN where there is no vote)."""
    n_items, n_judges = len(rows), (len(rows[0]) if rows else 0)
    codes = np.full((n_judges, n_items), np.nan)
    for i, row in enumerate(rows):
        for j, vote in enumerate(row):
            if not _is_missing(vote):
                codes[j, i] = code(vote)
    return codes


def _level_weight(vote: Any) -> float:
    """A Bloom level name (or 1..6) as its ordinal weight."""
    return LEVEL_WEIGHT[normalize_level(vote, allow_uncategorized=False)]


def unit_set(vote: Any) -> frozenset[str]:
    """A JSON list (our *_votes format), a sequence, or a plain unit name (one unit)."""
    units: Any = vote
    if isinstance(vote, str):
        try:
            units = json.loads(vote)
        except json.JSONDecodeError:
            units = [vote]
    if not isinstance(units, (list, tuple, set, frozenset)):
        units = [vote]
    return frozenset(str(unit) for unit in units)


def _jaccard_metric(sets: Sequence[frozenset[str]]) -> Callable[..., np.ndarray]:
    """krippendorff's DistanceMetric over value codes: 1 − |A∩B|/|A∪B| of the coded sets."""
    distance = np.array(
        [[1.0 - len(a & b) / len(a | b) if (a | b) else 0.0 for b in sets] for a in sets]
    )

    def jaccard_metric(v1, v2, i1, i2, n_v, dtype=np.float64):  # krippendorff's signature
        return distance[i1, i2].astype(dtype)

    return jaccard_metric


def _value_counts(coded: CodedVotes) -> np.ndarray:
    """items × values: how many judges gave each value to each item."""
    return (coded.codes.T[..., None] == coded.domain[None, None, :]).sum(axis=1)


def _alpha_from_counts(counts: np.ndarray, coded: CodedVotes) -> float:
    """α from value counts; NaN when no item is pairable or when pairable votes never vary."""
    import krippendorff

    pairable = counts[counts.sum(axis=1) >= 2]
    if len(pairable) == 0 or len(coded.domain) < 2 or np.count_nonzero(pairable.sum(axis=0)) < 2:
        return float("nan")
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        value = krippendorff.alpha(
            value_counts=pairable, value_domain=coded.domain, level_of_measurement=coded.metric
        )
    return float(value)


@dataclass(frozen=True)
class AlphaResult:
    """α with its bootstrap interval; ``n_items`` counts the items with two or more votes."""

    alpha: float
    ci_low: float
    ci_high: float
    n_items: int

    @property
    def no_variation(self) -> bool:
        """α undefined although items are pairable: every pairable vote has the same value."""
        return math.isnan(self.alpha) and self.n_items > 0


def alpha_with_ci(
    coded: CodedVotes, *, n_resamples: int = 1000, confidence: float = 0.95, seed: int = 0
) -> AlphaResult:
    """Krippendorff's α and a percentile bootstrap CI from resampling items with replacement."""
    counts = _value_counts(coded)
    n_pairable = int((counts.sum(axis=1) >= 2).sum())
    point = _alpha_from_counts(counts, coded)
    if math.isnan(point) or n_resamples <= 0:
        return AlphaResult(point, float("nan"), float("nan"), n_pairable)
    rng = np.random.default_rng(seed)
    n_items = counts.shape[0]
    samples = np.array(
        [_alpha_from_counts(counts[rng.integers(0, n_items, n_items)], coded) for _ in range(n_resamples)]
    )
    samples = samples[~np.isnan(samples)]
    if samples.size == 0:
        return AlphaResult(point, float("nan"), float("nan"), n_pairable)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(samples, [tail, 100 - tail])
    return AlphaResult(point, float(low), float(high), n_pairable)


def alpha_from_votes(votes_lists: Sequence[Sequence[str | None]], level: str) -> float:
    """Krippendorff's α of items × judges votes (e.g. the release's ``*_votes`` lists).

    ``level`` is ``"nominal"``, ``"ordinal"`` (Bloom levels) or ``"jaccard"`` (unit lists); None
    (or NaN) is a missing vote. Returns NaN when α is undefined (no item with two votes, or no
    variation at all).
    """
    coded = encode_votes(votes_lists, level)
    return _alpha_from_counts(_value_counts(coded), coded)
