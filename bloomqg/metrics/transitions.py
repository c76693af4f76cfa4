"""Bloom-level transitions (Figure 2) and per-level accuracies (Figure 6) of a votes frame."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from bloomqg.inputs.bloom import BLOOM_LEVELS, UNCATEGORIZED
from bloomqg.metrics.rows import JUDGED_UNCATEGORIZED, require_columns, true

_TRANSITION_ORDER = {name: rank for rank, name in enumerate(BLOOM_LEVELS + (UNCATEGORIZED,))}


def _level_label(value: object) -> str:
    return UNCATEGORIZED if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def _level_pairs(votes: pd.DataFrame, kind: str) -> pd.DataFrame:
    """(original_level, other_level) labels of the rows ``kind`` looks at."""
    if kind == "judged":
        require_columns(
            votes, ("useful", "original_bloom_level", "bloom_level", "bloom_level_null_reason"), "votes"
        )
        has_verdict = votes["bloom_level"].notna() | (
            votes["bloom_level_null_reason"] == JUDGED_UNCATEGORIZED
        )
        chosen = votes[true(votes["useful"]) & has_verdict.to_numpy(dtype=bool)]
        other = chosen["bloom_level"]
    elif kind == "classified":
        require_columns(votes, ("original_bloom_level", "identified_bloom_level"), "votes")
        if votes["identified_bloom_level"].isna().all():
            chosen = votes.iloc[0:0]
        else:
            chosen = votes
        other = chosen["identified_bloom_level"]
    else:
        raise ValueError(f"kind must be 'judged' or 'classified', got {kind!r}")
    return pd.DataFrame(
        {
            "original_level": [_level_label(value) for value in chosen["original_bloom_level"].tolist()],
            "other_level": [_level_label(value) for value in other.tolist()],
        }
    )


def transition_counts(votes: pd.DataFrame, kind: str = "judged") -> pd.DataFrame:
    """Counts of (original level → other level), in Bloom order, non-zero pairs only.

    ``kind="judged"``: original vs the judged level of the new question over useful questions
    with a verdict (the paper's Figure 2). ``kind="classified"``: original vs the generating
    model's own classification of the original, over all rows (Figure 6); empty when the model
    made none. A null level is labelled ``"Uncategorized"``.
    """
    pairs = _level_pairs(votes, kind)
    counts = pairs.groupby(["original_level", "other_level"]).size().rename("count").reset_index()
    counts["count"] = counts["count"].astype("int64")
    order = counts["original_level"].map(_TRANSITION_ORDER) * 10 + counts["other_level"].map(
        _TRANSITION_ORDER
    )
    return counts.iloc[np.argsort(order.to_numpy(), kind="stable")].reset_index(drop=True)


def placed_count(counts: pd.DataFrame) -> int:
    """How many of :func:`transition_counts`' pairs have a Bloom level on both sides: what a
    Figure 6 panel draws (an original the model did not classify, or an Uncategorized one, is
    not placed)."""
    if counts.empty:
        return 0
    placed = counts["original_level"].isin(BLOOM_LEVELS) & counts["other_level"].isin(BLOOM_LEVELS)
    return int(counts.loc[placed, "count"].sum())


def per_level_accuracy(votes: pd.DataFrame, kind: str = "classified") -> pd.DataFrame:
    """Per original level: n, correct, accuracy (percent).

    ``kind="classified"``: the model's classification of originals that have a level
    (Figure 6). ``kind="judged"``: CatCons per original level, Uncategorized originals
    included as their own row (a match only against a judged-Uncategorized question).
    """
    pairs = _level_pairs(votes, kind)
    if kind == "classified":
        pairs = pairs[pairs["original_level"] != UNCATEGORIZED]
    pairs = pairs.assign(correct=pairs["original_level"] == pairs["other_level"])
    table = (
        pairs.groupby("original_level")["correct"].agg(n="size", correct="sum").reset_index()
    )
    table["n"] = table["n"].astype("int64")
    table["correct"] = table["correct"].astype("int64")
    table["accuracy"] = table["correct"] / table["n"] * 100.0
    order = table["original_level"].map(_TRANSITION_ORDER).to_numpy()
    return table.iloc[np.argsort(order, kind="stable")].reset_index(drop=True)
