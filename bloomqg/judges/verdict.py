"""A judge's verdict on one generated question, and the pure parser for LLM judges' answers.

Every judge backend (rules, embedding, LLM) returns one :class:`Verdict` per generated question:
one :class:`CriterionVerdict` per criterion of the paper's rubric (Table 3). The LLM judge's
answer is parsed by :func:`parse_verdict`, which reads values *only* from the fields of
:data:`VERDICT_SCHEMA` inside a JSON object, never by pattern-matching free text (the free text
may quote the judged question, which must never be read as a vote). A field that is missing or
invalid fails that criterion alone (status ``parse_failed``, with a reason); the others keep
their values.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from bloomqg.store import reply_json
from bloomqg.inputs.bloom import BLOOM_LEVELS, UnknownBloomLevel, normalize_level
from bloomqg.store.frames import BINARY_CRITERIA, CRITERIA
# the status values are the judgments frame's contract; judges' code names them from here too
from bloomqg.store.frames import STATUS_ERROR, STATUS_NO_QUESTION, STATUS_OK, STATUS_PARSE_FAILED  # noqa: F401
from bloomqg.store.reply_json import HostileReply, fenced_blocks, json_objects, reply_problem, shown


#: How the reason of a failed call begins (an LLM judge's, the Inspect panel grader's): the one
#: ``error`` that is a failure. Every other ``error`` is a judge giving no vote by design.
CALL_FAILED = "judge call failed"
GRADER_CALL_FAILED = "grader call failed"
#: Reasons of a backend that never rates a criterion: the embedding judge on readable and
#: answerable, the learned judge on what its training votes cannot teach it.
NOT_JUDGED = "not judged by this backend"
NOT_LEARNED = "not learned by this backend (no signal in its training votes)"
#: Why a judge cast no vote on a criterion, as a reader is told: only ``parse failed`` and
#: ``call failed`` are failures (the report's parse-failure rate counts the first); a judge that
#: ``does not rate this`` criterion or ``abstains`` on the item (no rule applies, not confident
#: enough) answered as designed.
MissingVote = Literal["no question", "parse failed", "call failed", "does not rate this", "abstains"]
#: The missing votes that are failures of the judge, not its design.
FAILED_VOTES: frozenset[MissingVote] = frozenset({"parse failed", "call failed"})

#: The JSON schema an LLM judge's answer must follow. ``knowledge_units`` is restricted to the
#: dataset's units by :func:`verdict_schema`; this constant is the dataset-independent shape.
VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "unique": {
            "type": "boolean",
            "description": "true if the question differs substantially from the original "
            "(more than rewording or reordering)",
        },
        "readable": {"type": "boolean", "description": "true if clearly stated and grammatical"},
        "answerable": {
            "type": "boolean",
            "description": "true if a student can reasonably answer it with the information given",
        },
        "bloom_level": {"type": "string", "enum": list(BLOOM_LEVELS)},
        "knowledge_units": {"type": "array", "items": {"type": "string"}, "minItems": 1},
    },
    "required": list(CRITERIA),
    "additionalProperties": False,
}

_TRUE_WORDS = frozenset({"true", "yes", "y", "1"})
_FALSE_WORDS = frozenset({"false", "no", "n", "0"})


@dataclass(frozen=True)
class CriterionVerdict:
    """One judge's answer on one criterion.

    ``value`` is a bool (unique/readable/answerable), a canonical level name (bloom_level) or a
    tuple of unit names (knowledge_units); it is None unless ``status`` is ``"ok"``.
    ``reason`` says why a value is missing, or (for heuristic judges) how it was reached.
    """

    value: bool | str | tuple[str, ...] | None
    status: str
    reason: str | None = None
    #: a choices-mode judge's probability of each option (``"true"``/``"false"``, level names,
    #: unit names), summing to 1; None for judges that write their answer
    distribution: Mapping[str, float] | None = None

    def __post_init__(self) -> None:
        if self.status not in {STATUS_OK, STATUS_PARSE_FAILED, STATUS_ERROR, STATUS_NO_QUESTION}:
            raise ValueError(f"unknown criterion status {self.status!r}")
        if (self.status == STATUS_OK) != (self.value is not None):
            raise ValueError(
                f"status {self.status!r} with value {self.value!r}: "
                "a value is present exactly when the status is 'ok'"
            )

    @classmethod
    def ok(cls, value: bool | str | Sequence[str], reason: str | None = None,
           distribution: Mapping[str, float] | None = None) -> CriterionVerdict:
        """A real answer (lists of units are frozen into tuples)."""
        if isinstance(value, (list, tuple)):
            value = tuple(value)
        return cls(value, STATUS_OK, reason, None if distribution is None else dict(distribution))

    @classmethod
    def failed(cls, reason: str) -> CriterionVerdict:
        """An answer that could not be read (LLM output did not give a valid value)."""
        return cls(None, STATUS_PARSE_FAILED, reason)

    @classmethod
    def error(cls, reason: str) -> CriterionVerdict:
        """No answer: the call failed, or the backend does not judge this criterion."""
        return cls(None, STATUS_ERROR, reason)


def missing_vote(status: str, reason: str | None) -> MissingVote | None:
    """Why a criterion verdict of ``status`` and ``reason`` (the judgments file's columns) holds
    no vote; None for a vote. ``error`` covers both a failed call and a judge declining to vote,
    told apart by the reason: a failed call's begins with :data:`CALL_FAILED` (or
    :data:`GRADER_CALL_FAILED`)."""
    if status == STATUS_OK:
        return None
    if status == STATUS_NO_QUESTION:
        return "no question"
    if status == STATUS_PARSE_FAILED:
        return "parse failed"
    if status != STATUS_ERROR:
        raise ValueError(f"unknown criterion status {status!r}")
    if reason is not None and reason.startswith((CALL_FAILED, GRADER_CALL_FAILED)):
        return "call failed"
    return "does not rate this" if reason in (NOT_JUDGED, NOT_LEARNED) else "abstains"


@dataclass(frozen=True)
class Verdict:
    """A judge's answers on all five criteria for one generated question."""

    criteria: Mapping[str, CriterionVerdict]
    raw_text: str | None = None

    def __post_init__(self) -> None:
        if set(self.criteria) != set(CRITERIA):
            raise ValueError(
                f"a verdict needs exactly the criteria {list(CRITERIA)}, got {sorted(self.criteria)}"
            )

    def __getitem__(self, criterion: str) -> CriterionVerdict:
        return self.criteria[criterion]

    @classmethod
    def uniform(cls, criterion_verdict: CriterionVerdict, raw_text: str | None = None) -> Verdict:
        """The same answer (typically a failure) for every criterion."""
        return cls({name: criterion_verdict for name in CRITERIA}, raw_text)


def verdict_schema(knowledge_units: Sequence[str], bloom_levels: Sequence[str] | None = None) -> dict[str, Any]:
    """:data:`VERDICT_SCHEMA` with ``knowledge_units`` restricted to the dataset's units.

    ``bloom_levels`` (a permutation of the six levels) orders the level enum as the prompt
    lists them; by default, and whenever it is the canonical order, the schema is unchanged,
    so the requests of judge_questions (and their cache keys) stay as they were."""
    if not knowledge_units:
        raise ValueError("verdict_schema: the dataset has no knowledge units")
    schema = copy.deepcopy(VERDICT_SCHEMA)
    schema["properties"]["knowledge_units"]["items"] = {
        "type": "string",
        "enum": sorted(set(knowledge_units)),
    }
    if bloom_levels is not None:
        schema["properties"]["bloom_level"]["enum"] = list(bloom_levels)
    return schema


def _json_candidates(text: str) -> list[Any]:
    """JSON values found in ``text``: the whole text, fenced blocks, then objects in prose (and
    the objects nested in them), bounded (:mod:`bloomqg.store.reply_json`)."""
    found: list[Any] = []
    for chunk in [text.strip(), *(block.strip() for block in fenced_blocks(text))]:
        try:
            found.append(reply_json.loads(chunk))
        except json.JSONDecodeError:
            continue
    found.extend(json_objects(text))
    return found


def _canonical_key(key: str) -> str:
    return re.sub(r"[\s\-]+", "_", key.strip().lower())


def _schema_fields(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object's schema fields by canonical name (case, spaces and hyphens ignored)."""
    fields: dict[str, Any] = {}
    for key, value in obj.items():
        if isinstance(key, str) and _canonical_key(key) in CRITERIA:
            fields.setdefault(_canonical_key(key), value)
    return fields


def _find_verdict_object(text: str) -> dict[str, Any] | None:
    """The JSON object with the most schema fields (first one on ties), or None."""
    best: dict[str, Any] | None = None
    for candidate in _json_candidates(text):
        if not isinstance(candidate, dict):
            continue
        fields = _schema_fields(candidate)
        if fields and (best is None or len(fields) > len(best)):
            best = fields
    return best


def coerce_bool(value: Any) -> bool | None:
    """True/False from a JSON boolean, 1/0, or yes/no/true/false (any case); else None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().strip(".").lower()
        if word in _TRUE_WORDS:
            return True
        if word in _FALSE_WORDS:
            return False
    return None


def _unit_key(name: str) -> str:
    return " ".join(name.split()).casefold()


def match_units(
    values: Sequence[Any], knowledge_units: Sequence[str]
) -> tuple[tuple[str, ...], list[str]]:
    """Map ``values`` onto the dataset's unit names case-insensitively.

    Returns (matched units in the order given, without duplicates; the values that matched
    nothing, as strings).
    """
    by_key = {_unit_key(unit): unit for unit in knowledge_units}
    matched: list[str] = []
    unknown: list[str] = []
    for value in values:
        unit = by_key.get(_unit_key(value)) if isinstance(value, str) else None
        if unit is None:
            unknown.append(str(value))
        elif unit not in matched:
            matched.append(unit)
    return tuple(matched), unknown


def _parse_binary(name: str, fields: Mapping[str, Any]) -> CriterionVerdict:
    if name not in fields:
        return CriterionVerdict.failed(f"field {name!r} missing from the JSON answer")
    value = coerce_bool(fields[name])
    if value is None:
        return CriterionVerdict.failed(f"field {name!r} is not a yes/no value: {shown(fields[name])}")
    return CriterionVerdict.ok(value)


def _parse_level(fields: Mapping[str, Any]) -> CriterionVerdict:
    if "bloom_level" not in fields:
        return CriterionVerdict.failed("field 'bloom_level' missing from the JSON answer")
    raw = fields["bloom_level"]
    if not isinstance(raw, (str, int)) or isinstance(raw, bool):
        return CriterionVerdict.failed(f"field 'bloom_level' is not a level name: {shown(raw)}")
    try:
        level = normalize_level(raw)
    except UnknownBloomLevel as exc:
        return CriterionVerdict.failed(f"field 'bloom_level': {exc}")
    if level is None:
        return CriterionVerdict.failed(f"field 'bloom_level' names no level: {shown(raw)}")
    return CriterionVerdict.ok(level)


def _parse_units(fields: Mapping[str, Any], knowledge_units: Sequence[str]) -> CriterionVerdict:
    if "knowledge_units" not in fields:
        return CriterionVerdict.failed("field 'knowledge_units' missing from the JSON answer")
    raw = fields["knowledge_units"]
    # A bare string is one unit given without the list brackets: still the schema's field.
    values = [raw] if isinstance(raw, str) else raw
    if not isinstance(values, list):
        return CriterionVerdict.failed(f"field 'knowledge_units' is not a list: {shown(raw)}")
    units, unknown = match_units(values, knowledge_units)
    dropped = f"dropped units not in the dataset's list: {shown(unknown)}" if unknown else None
    if not units:
        return CriterionVerdict.failed(
            "field 'knowledge_units' names no unit of the dataset"
            + (f" ({dropped})" if dropped else " (empty list)")
        )
    return CriterionVerdict.ok(units, dropped)


def parse_verdict(text: str | None, knowledge_units: Sequence[str]) -> Verdict:
    """Read an LLM judge's answer into a :class:`Verdict` (pure; never raises on bad text).

    Accepts plain JSON, fenced JSON (```json … ```) and a JSON object embedded in prose; when
    several objects appear, the one with the most schema fields wins. Values are read only from
    the schema's fields. Booleans accept true/false, yes/no and 1/0; levels go through
    :func:`bloomqg.inputs.bloom.normalize_level`; units are matched case-insensitively to
    ``knowledge_units`` (unknown ones are dropped and named in the reason; none left fails the
    criterion). Each missing or invalid field fails its own criterion only.
    """
    if text is None or not text.strip():
        return Verdict.uniform(CriterionVerdict.failed("empty answer"), text)
    try:
        hostile = reply_problem(text)
        fields = None if hostile else _find_verdict_object(text)
    except HostileReply as error:  # a number too long for int(), met while decoding
        hostile = str(error)
    except RecursionError:  # not expected past reply_problem: still the row's failure, not the job's
        hostile = "the reply is nested too deeply to read"
    if hostile:
        return Verdict.uniform(CriterionVerdict.failed(hostile), text)
    if fields is None:
        return Verdict.uniform(
            CriterionVerdict.failed("no JSON object with a rubric field in the answer"), text
        )
    criteria: dict[str, CriterionVerdict] = {
        name: _parse_binary(name, fields) for name in BINARY_CRITERIA
    }
    criteria["bloom_level"] = _parse_level(fields)
    criteria["knowledge_units"] = _parse_units(fields, knowledge_units)
    return Verdict(criteria, text)
