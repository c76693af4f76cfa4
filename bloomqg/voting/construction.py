"""Results that hold by construction: a criterion one of whose judges votes the same value on
every item it votes on (constant), or votes on at most half the items with a question
(abstains), so the majority is decided by the panel's make-up rather than by the questions:
one judge that always says yes and one that abstains give "Readable 100 [100, 100]" whatever
was written. Read from a cell's ``*_votes`` lists (one entry per judge, in panel order).
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


@dataclass(frozen=True)
class ConstructionFlag:
    """One cell × criterion whose result holds by construction, and why (judge by judge)."""

    model: str
    dataset: str
    strategy: str
    criterion: str
    reasons: tuple[str, ...]

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
            reasons = []
            for position in range(width):
                name = names[position] if len(names) == width else f"judge {position + 1}"
                given = [v[position] for v in lists if position < len(v) and v[position] is not None]
                if len(given) <= abstain_share * len(asked):
                    reasons.append(f"{name} abstains on {len(asked) - len(given)} of {len(asked)}")
                elif len(set(given)) == 1:
                    reasons.append(f"{name} always says {_shown(criterion, str(given[0]))}")
            if reasons:
                flags.append(ConstructionFlag(str(model), str(dataset), str(strategy), criterion, tuple(reasons)))
    return flags
