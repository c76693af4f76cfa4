"""Results that hold by construction: a criterion one of whose judges votes the same value on
every item it votes on (constant), or votes on at most half the items with a question
(abstains), so the majority is decided by the panel's make-up rather than by the questions:
one judge that always says yes and one that abstains give "Readable 100 [100, 100]" whatever
was written. Read from a cell's ``*_votes`` lists (one entry per judge, in panel order).

A flag says a judge is uninformative; it ``decides`` the criterion only when no vote of the other
judges could have changed the result: the constant judges share one value and on every item the
other judges' valid votes are at most half of the valid votes, so no other value can win a
strict majority (each item's majority is that value or none: the value could not have been
otherwise). The
report's mark ‡ stands on a number only when every criterion it reads is decided in its cell
(:data:`DECIDED_RULE`, stated once on the page); a flag that decides nothing is a note.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

#: Criteria whose votes are single values (knowledge-unit sets are compared by overlap).
FLAGGED_CRITERIA: tuple[str, ...] = ("unique", "readable", "answerable", "bloom_level")
#: A judge voting on at most this share of the items with a question abstains on most of them.
ABSTAIN_SHARE = 0.5
MARK = "‡"
#: The mark's rule, as the report states it once.
DECIDED_RULE = (
    "‡ marks a number that could not have come out otherwise: in its cell, for every criterion it reads, the "
    "judges that always give the same answer cast at least half of every item's valid votes, so no vote of the "
    "other judges could have given another majority."
)


@dataclass(frozen=True)
class ConstructionFlag:
    """One cell × criterion whose result holds by construction, and why (judge by judge)."""

    model: str
    dataset: str
    strategy: str
    criterion: str
    reasons: tuple[str, ...]
    #: the constant judges alone are a strict majority on every item: the criterion's majority
    #: could not have been otherwise
    decided: bool = False

    @property
    def text(self) -> str:
        return "; ".join(self.reasons)


def _shown(criterion: str, value: str) -> str:
    if criterion in ("unique", "readable", "answerable"):
        return {"1": "yes", "0": "no"}.get(value, value)
    return value


def construction_flags(
    votes: pd.DataFrame,
    judges: Mapping[tuple[str, str, str], Sequence[str]] | None = None,
    *,
    abstain_share: float = ABSTAIN_SHARE,
) -> list[ConstructionFlag]:
    """Per (model, dataset, strategy) cell and criterion, the judges that are constant or
    abstain on most items (``judges``: the panel's names per cell; else "judge 1", …)."""
    flags: list[ConstructionFlag] = []
    if votes.empty:
        return flags
    for (model, dataset, strategy), cell in votes.groupby(["model", "dataset", "strategy"], sort=False):
        asked = cell[cell["new_question"].notna()]
        if asked.empty:
            continue
        names = list((judges or {}).get((str(model), str(dataset), str(strategy)), []))
        for criterion in FLAGGED_CRITERIA:
            column = f"{criterion}_votes"
            if column not in asked.columns:
                continue
            lists = [list(v) if v is not None and not isinstance(v, float) else [] for v in asked[column]]
            width = max((len(v) for v in lists), default=0)
            reasons, constant = [], []
            for position in range(width):
                name = names[position] if len(names) == width else f"judge {position + 1}"
                given = [v[position] for v in lists if position < len(v) and v[position] is not None]
                if len(given) <= abstain_share * len(asked):
                    reasons.append(f"{name} abstains on {len(asked) - len(given)} of {len(asked)}")
                elif len(set(given)) == 1:
                    reasons.append(f"{name} always says {_shown(criterion, str(given[0]))}")
                    constant.append(position)
            if reasons:
                flags.append(ConstructionFlag(str(model), str(dataset), str(strategy), criterion, tuple(reasons),
                                              decided=_decided(lists, constant)))
    return flags


def _decided(lists: Sequence[Sequence[object]], constant: Sequence[int]) -> bool:
    """The constant judges share one value and, on every item, the other judges' valid votes are
    at most half of its valid votes: no other value could win a strict majority, so each item's
    majority is that value or none, and the criterion's rate could not have been otherwise."""
    values = {votes[k] for votes in lists for k in constant if k < len(votes) and votes[k] is not None}
    if len(values) != 1:
        return False
    for votes in lists:
        valid = sum(v is not None for v in votes)
        others = sum(v is not None for k, v in enumerate(votes) if k not in constant)
        if 2 * others > valid:
            return False
    return True
