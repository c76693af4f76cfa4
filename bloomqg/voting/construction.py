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
    "‡ marks a number fixed by how the panel is built: no question could have changed it. "
    "In its cell, judges that always give the same answer cast at least half of the readable votes on every "
    "question, so the other judges could never have changed a majority. For CatCons and CogShift (did a question "
    "keep its original's level?) it also marks a cell where every original has one level and the panel's level is "
    "decided so at that same level: every question then 'keeps' its level, whatever it asks."
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
    #: the fact that decides ``decided``, in words: who could have outvoted the constant judges,
    #: on how many questions (two flags with the same ``reasons`` differ here, so a reader sees
    #: why one is a mark and the other a note)
    because: str = ""
    #: questions with a question in the cell, and those on which the judges that are not constant
    #: cast more than half of the valid votes (could have decided the majority); facts of the page
    n_asked: int = 0
    n_outvotable: int | None = None
    #: the judges that neither give one answer throughout nor abstain on most questions
    varying: tuple[str, ...] = ()
    #: of ``reasons``, those of the judges that vote on most questions and always give one answer
    always: tuple[str, ...] = ()
    #: Bloom level only: decided, and the value it is decided to is every original's level in the
    #: cell, so every question with a judged level keeps its original's level whatever was written
    #: (the value; "" otherwise): a share of kept levels is 100% by construction
    forced_to_original: str = ""

    @property
    def agreement_by_construction(self) -> bool:
        """At most one judge's votes vary: whatever agreement the panel shows here is the panel's
        make-up (a constant judge agreeing with itself, an absent one), no evidence that judges
        who rate the questions agree."""
        return len(self.varying) <= 1

    @property
    def text(self) -> str:
        return "; ".join(self.reasons) + (f", {self.because}" if self.because else "")


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
            named = [names[position] if len(names) == width else f"judge {position + 1}" for position in range(width)]
            reasons, constant, varying, always = [], [], [], []
            for position in range(width):
                given = [v[position] for v in lists if position < len(v) and v[position] is not None]
                abstains = len(given) <= abstain_share * len(asked)
                # a judge that abstains on most items but gives one answer where it votes is
                # constant too: its votes can only ever add to that answer
                if given and len(set(given)) == 1:
                    said = _shown(criterion, str(given[0]))
                    if abstains:
                        reasons.append(f"{named[position]} abstains on {len(asked) - len(given)} of {len(asked)} "
                                       f"and says {said} on the rest")
                    else:
                        reasons.append(f"{named[position]} always says {said}")
                        always.append(reasons[-1])
                    constant.append(position)
                elif abstains:
                    reasons.append(f"{named[position]} abstains on {len(asked) - len(given)} of {len(asked)}")
                else:
                    varying.append(named[position])
            if reasons:
                outvotable = outvotable_items(lists, constant)
                forced = ""
                if criterion == "bloom_level" and outvotable == 0 and "original_bloom_level" in asked.columns:
                    value = {str(v[k]) for v in lists for k in constant if k < len(v) and v[k] is not None}
                    originals = set(asked["original_bloom_level"].astype(str))
                    forced = value.pop() if len(value) == 1 and originals == value else ""
                flags.append(ConstructionFlag(
                    str(model), str(dataset), str(strategy), criterion, tuple(reasons), decided=outvotable == 0,
                    because=_because(lists, constant, named, outvotable, len(asked)),
                    n_asked=len(asked), n_outvotable=outvotable, varying=tuple(varying), always=tuple(always),
                    forced_to_original=forced))
    return flags


def outvotable_items(lists: Sequence[Sequence[object]], constant: Sequence[int]) -> int | None:
    """On how many items the judges that are not constant cast more than half of the valid votes,
    so could have given another majority (0: the criterion is decided by construction: each
    item's majority is the constant judges' value or none). None when there is no constant judge
    or the constant judges disagree with each other (nothing is decided by construction)."""
    values = {votes[k] for votes in lists for k in constant if k < len(votes) and votes[k] is not None}
    if len(values) != 1:
        return None
    outvotable = 0
    for votes in lists:
        valid = sum(v is not None for v in votes)
        others = sum(v is not None for k, v in enumerate(votes) if k not in constant)
        outvotable += 2 * others > valid
    return outvotable


def _because(lists: Sequence[Sequence[object]], constant: Sequence[int], named: Sequence[str],
             outvotable: int | None, n_asked: int) -> str:
    """The clause that makes a flag a mark or a note: which judges could have outvoted the
    constant ones, and on how many questions (the judges that abstain throughout are left out:
    they cast no vote to outvote with)."""
    if not constant:
        return "no judge gives one answer throughout, so the others' votes decide"
    if outvotable is None:
        return "the judges that always give one answer give different ones"
    voters = [named[k] for k in range(len(named)) if k not in constant
              and any(k < len(votes) and votes[k] is not None for votes in lists)]
    fixed = " and ".join(named[k] for k in constant)
    if outvotable == 0:
        if not voters:
            return f"and no other judge votes, so {fixed} decide{'s' if len(constant) == 1 else ''} every question"
        return f"and {' and '.join(voters)} can at most tie {fixed} on every question"
    who = " and ".join(voters)
    return (f"but on {outvotable} of {n_asked} questions {who} cast{'s' if len(voters) == 1 else ''} most of the "
            f"valid votes, so could have decided them")
