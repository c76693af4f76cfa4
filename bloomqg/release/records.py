"""Typed rows of an imported run: one record type per output file, fields named as its columns.

:func:`bloomqg.release.runs.import_run` builds these instead of dict literals, so a misspelt or
forgotten column is an error where the row is made; :func:`frame_of` then checks the records'
columns against the file's schema in :mod:`bloomqg.store.frames` before it builds the frame.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pyarrow as pa

from bloomqg.store.frames import BINARY_CRITERIA, CRITERIA, POSTERIOR_CRITERIA
from bloomqg.inputs.parsing import answered


@dataclass(frozen=True)
class GenerationRecord:
    """One row of :data:`bloomqg.store.frames.GENERATIONS` (fields in the schema's order)."""

    prompt_id: str
    item_id: str
    dataset: str
    strategy: str
    model: str
    original_question: str
    original_bloom_level: str | None
    original_knowledge_units: list[str]
    raw_text: str | None
    new_question: str | None
    identified_bloom_level: str | None
    identified_knowledge_units: list[str] | None
    parse_status: str
    parse_error: str | None
    finish_reason: str | None
    n_prompt_tokens: int | None = None
    n_completion_tokens: int | None = None
    latency_s: float | None = None
    batch_index: int | None = None
    seed: int | None = None
    prompt_hash: str | None = None
    cached: bool | None = None
    cost_usd: float | None = None
    cache_key: str | None = None
    passes_json: str | None = None

    def as_row(self) -> dict[str, Any]:
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}


#: The GENERATIONS columns a votes row repeats, in the VOTES schema's order.
CARRIED_COLUMNS: tuple[str, ...] = (
    "prompt_id", "item_id", "dataset", "strategy", "model", "original_question",
    "original_bloom_level", "original_knowledge_units", "new_question", "identified_bloom_level",
    "identified_knowledge_units", "parse_status",
)

@dataclass(frozen=True)
class CriterionVote:
    """The voted value of one question on one criterion, its judges' votes and their agreement;
    ``value`` None with a ``null_reason`` saying why."""

    value: Any
    votes: list[str] | None
    agreement: float | None
    null_reason: str | None

    @classmethod
    def missing(cls, reason: str) -> CriterionVote:
        return cls(None, None, None, reason)

    def columns(self, criterion: str) -> dict[str, Any]:
        """The four VOTES columns of ``criterion``."""
        return {
            criterion: self.value,
            f"{criterion}_votes": self.votes,
            f"{criterion}_agreement": self.agreement,
            f"{criterion}_null_reason": self.null_reason,
        }


@dataclass(frozen=True)
class VoteRecord:
    """One row of :data:`bloomqg.store.frames.VOTES`: the generation it judges, one
    :class:`CriterionVote` per criterion, and *useful* from the three binary ones."""

    generation: GenerationRecord
    n_judges: int
    criteria: Mapping[str, CriterionVote]
    alpha_gated: bool = False

    def __post_init__(self) -> None:
        if tuple(self.criteria) != CRITERIA:
            raise ValueError(f"a votes row needs the criteria {list(CRITERIA)} in order, got {list(self.criteria)}")

    @property
    def useful(self) -> bool | None:
        """All three binary criteria True; null when any of them has no voted value."""
        binary = [self.criteria[criterion].value for criterion in BINARY_CRITERIA]
        return None if any(value is None for value in binary) else all(binary)

    def as_row(self) -> dict[str, Any]:
        row: dict[str, Any] = {name: getattr(self.generation, name) for name in CARRIED_COLUMNS}
        row["answered"] = answered(self.generation.raw_text)
        row["n_judges"] = self.n_judges
        by_kind: dict[str, Any] = {}
        for criterion, vote in self.criteria.items():
            by_kind.update(vote.columns(criterion))
        # VOTES groups the columns by kind (all values, then all votes, ...), not by criterion.
        for suffix in ("", "_votes", "_agreement", "_null_reason"):
            row.update({f"{criterion}{suffix}": by_kind[f"{criterion}{suffix}"] for criterion in CRITERIA})
        row["useful"] = self.useful
        row["alpha_gated"] = self.alpha_gated
        row["aggregation"] = "majority"  # the release's own majorities
        row.update({f"{criterion}_posterior": None for criterion in POSTERIOR_CRITERIA})
        return row


def frame_of(records: Sequence[GenerationRecord | VoteRecord], schema: pa.Schema) -> pd.DataFrame:
    """The records as a frame with ``schema``'s columns; a ValueError names the columns a record
    type lacks or adds (the record types and :mod:`bloomqg.store.frames` must not drift apart)."""
    rows = [record.as_row() for record in records]
    if rows and list(rows[0]) != schema.names:
        missing = [name for name in schema.names if name not in rows[0]]
        extra = [name for name in rows[0] if name not in schema.names]
        raise ValueError(
            f"{type(records[0]).__name__} rows do not match the schema: missing {missing}, extra {extra}"
            + ("" if missing or extra else ", columns out of order")
        )
    return pd.DataFrame.from_records(rows, columns=schema.names)
