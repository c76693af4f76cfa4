"""Votes as strings, strict majorities of one item, and *useful* (rules: :mod:`bloomqg.voting`)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bloomqg.store.frames import BINARY_CRITERIA

# -- encoding votes as strings (the *_votes columns) -------------------------------------------


def vote_string(criterion: str, value: Any) -> str:
    """A vote as stored in the ``*_votes`` columns: "1"/"0", a level name, or a JSON unit list."""
    if criterion in BINARY_CRITERIA:
        return "1" if bool(value) else "0"
    if criterion == "bloom_level":
        return str(value)
    return json.dumps(sorted(str(unit) for unit in value), ensure_ascii=False)


def vote_value(criterion: str, vote: str) -> Any:
    """The inverse of :func:`vote_string` (units as a frozenset)."""
    if criterion in BINARY_CRITERIA:
        return vote == "1"
    if criterion == "bloom_level":
        return vote
    return frozenset(json.loads(vote))


# -- majorities ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Majority:
    """The voted value of one item on one criterion (``value`` None with a ``null_reason``)."""

    value: Any
    agreement: float | None
    null_reason: str | None


def majority(criterion: str, votes: Sequence[str | None], *, min_valid_votes: int = 2) -> Majority:
    """Strict majority of the valid (non-None) vote strings of one item on one criterion."""
    valid = [vote for vote in votes if vote is not None]
    if len(valid) < min_valid_votes:
        return Majority(None, None, f"fewer than {min_valid_votes} valid votes")
    if criterion == "knowledge_units":
        sets = [vote_value(criterion, vote) for vote in valid]
        counts = Counter(unit for units in sets for unit in units)
        chosen = frozenset(unit for unit, count in counts.items() if count * 2 > len(valid))
        if not chosen:
            return Majority(None, None, "no unit has a majority")
        agreement = sum(units == chosen for units in sets) / len(valid)
        return Majority(sorted(chosen), agreement, None)
    counts = Counter(valid).most_common()
    top_vote, top_count = counts[0]
    if top_count * 2 > len(valid):
        return Majority(vote_value(criterion, top_vote), top_count / len(valid), None)
    if len(counts) > 1 and counts[1][1] == top_count:
        return Majority(None, None, "tie")
    return Majority(None, None, "no value has a majority")


def useful_from(unique: bool | None, readable: bool | None, answerable: bool | None) -> bool | None:
    """Three-valued AND: False if any is False, True if all are True, else None."""
    values = (unique, readable, answerable)
    if any(value is False for value in values):
        return False
    if all(value is True for value in values):
        return True
    return None
