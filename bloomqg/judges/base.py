"""The one call every judge answers: a batch of typed items in, one verdict per item out.

A judge backend (see :mod:`bloomqg.judges.registry`) builds an object with a
:meth:`Judge.judge_batch` method; the stage hands it the generated questions that have text and
gets back one :class:`JudgedItem` per item, in order: the :class:`~bloomqg.judges.verdict.Verdict`
(every criterion with a status) and, for judges that make calls, the call's numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from bloomqg.judges.verdict import Verdict


@dataclass(frozen=True)
class JudgeItem:
    """One generated question to judge, with the dataset item it was written from."""

    #: the generation's prompt_id: unique within a cell, the request id of an LLM judge's call
    prompt_id: str
    #: the original dataset item (its own labels are left out of neighbour votes)
    item_id: str | None
    #: the generated question (never blank: the stage marks blank ones ``no_question``)
    question: str
    original_question: str


@dataclass(frozen=True)
class JudgedItem:
    """A verdict and, for a judge that makes calls, what the call cost (None: not applicable)."""

    verdict: Verdict
    cached: bool | None = None
    n_prompt_tokens: int | None = None
    n_completion_tokens: int | None = None
    cost_usd: float | None = None
    #: the call's cache key, which the spend ledger records it under
    cache_key: str | None = None


class Judge(Protocol):
    """A judge built for one dataset (its items and knowledge units) by a backend's factory."""

    def judge_batch(self, items: Sequence[JudgeItem]) -> list[JudgedItem]:
        """One :class:`JudgedItem` per item, in the items' order."""
        ...
