"""parse_verdict on real SmolLM2-135M judge outputs and on hand-made messy answers."""

from __future__ import annotations

import json

import jsonschema
import pytest

from bloomqg.judges.verdict import (
    VERDICT_SCHEMA,
    CriterionVerdict,
    Verdict,
    coerce_bool,
    parse_verdict,
    verdict_schema,
)
from bloomqg.store.frames import CRITERIA

UNITS = ["Binary Search Tree", "Stacks", "Queues", "Hashing", "Recursion", "Graph", "Python Review"]

# Real answers of SmolLM2-135M-Instruct (greedy, prompts/judge/rubric.md) collected once for
# these tests: first with a rubric that had no worked example (prose, an echo of the format
# line cut at the token limit), then with the worked examples (JSON, sometimes a unit name
# where the level belongs, or every unit of the list).
SMOL_PROSE = (
    'The question is: "What is a binary search tree?"\n\nThe answer is:\n\nBinary Search Tree\n\n'
    "The answer is:\n\nBinary Search Tree\n\nThe answer is:"
)
SMOL_ECHOED_FORMAT = (
    'The question is: "How does a stack work?"\n\nThe answer is:\n"The stack is a linear data '
    'structure that allows for efficient manipulation of collections of elements."\n\nThe answer '
    'is:\n{"unique": true or false, "readable": true or false, "answerable": true or false, '
    '"bloom_level": "Stack", "knowledge_units":'
)
SMOL_ANSWERED_THE_QUESTION = (
    "The time complexity of the algorithm is O(log n), where n is the number of nodes in the "
    "binary search tree."
)
SMOL_JSON = (
    '{"unique": true, "readable": true, "answerable": true, "bloom_level": "Apply", '
    '"knowledge_units": ["Binary Search Tree"]}'
)
SMOL_UNIT_AS_LEVEL = (
    '{"unique": false, "readable": true, "answerable": true, "bloom_level": "Recursion", '
    '"knowledge_units": ["Binary Search Tree"]}'
)
SMOL_ALL_UNITS = (
    '{"unique": true, "readable": true, "answerable": true, "bloom_level": "Apply", '
    '"knowledge_units": ["Binary Search Tree", "Stacks", "Queues", "Hashing", "Recursion", '
    '"Graph", "Python Review"]}'
)


def statuses(verdict: Verdict) -> dict[str, str]:
    return {name: verdict[name].status for name in CRITERIA}


@pytest.mark.parametrize("text", [SMOL_PROSE, SMOL_ECHOED_FORMAT, SMOL_ANSWERED_THE_QUESTION, "", None])
def test_answers_without_a_json_verdict_fail_every_criterion(text):
    verdict = parse_verdict(text, UNITS)
    assert set(statuses(verdict).values()) == {"parse_failed"}
    assert all(verdict[name].value is None and verdict[name].reason for name in CRITERIA)
    assert verdict.raw_text == text


def test_real_json_answer():
    verdict = parse_verdict(SMOL_JSON, UNITS)
    assert verdict["unique"].value is True and verdict["readable"].value is True
    assert verdict["bloom_level"].value == "Apply"
    assert verdict["knowledge_units"].value == ("Binary Search Tree",)
    assert set(statuses(verdict).values()) == {"ok"}


def test_a_unit_name_as_level_fails_only_the_level():
    verdict = parse_verdict(SMOL_UNIT_AS_LEVEL, UNITS)
    assert verdict["bloom_level"].status == "parse_failed"
    assert "Recursion" in verdict["bloom_level"].reason
    assert verdict["unique"].value is False
    assert verdict["knowledge_units"].value == ("Binary Search Tree",)


def test_every_listed_unit_is_kept_as_the_judge_said():
    assert len(parse_verdict(SMOL_ALL_UNITS, UNITS)["knowledge_units"].value) == len(UNITS)


def test_fenced_json_with_string_booleans_and_level_alias():
    text = (
        "Sure! Here is my evaluation:\n```json\n"
        '{"Unique": "yes", "readable": "No", "answerable": 1, "bloom_level": "analysis", '
        '"knowledge_units": ["stacks", "  hashing "]}\n```\nHope this helps.'
    )
    verdict = parse_verdict(text, UNITS)
    assert (verdict["unique"].value, verdict["readable"].value, verdict["answerable"].value) == (True, False, True)
    assert verdict["bloom_level"].value == "Analyze"
    assert verdict["knowledge_units"].value == ("Stacks", "Hashing")


def test_json_embedded_in_prose_and_unknown_units_dropped_with_reason():
    text = (
        'My verdict is {"unique": false, "readable": true, "answerable": false, '
        '"bloom_level": "Remember", "knowledge_units": ["Heaps", "Queues"]} as requested.'
    )
    units = parse_verdict(text, UNITS)["knowledge_units"]
    assert units.status == "ok" and units.value == ("Queues",)
    assert "Heaps" in units.reason
    only_unknown = parse_verdict(text.replace('"Queues"', '"Tries"'), UNITS)["knowledge_units"]
    assert only_unknown.status == "parse_failed" and "Tries" in only_unknown.reason


def test_missing_and_invalid_fields_fail_their_own_criterion_only():
    text = '{"unique": "maybe", "readable": true, "bloom_level": "Create", "knowledge_units": []}'
    verdict = parse_verdict(text, UNITS)
    assert statuses(verdict) == {
        "unique": "parse_failed", "readable": "ok", "answerable": "parse_failed",
        "bloom_level": "ok", "knowledge_units": "parse_failed",
    }
    assert "missing" in verdict["answerable"].reason and "maybe" in verdict["unique"].reason


def test_values_are_read_from_schema_fields_never_from_quoted_text():
    # The judged question itself contains JSON-like text and the words "unique: yes"; only the
    # verdict object's fields count, and the object with the most rubric fields wins.
    text = (
        'The question says {"unique": true} and "answerable: yes". My answer:\n'
        '{"unique": false, "readable": false, "answerable": false, "bloom_level": "Understand", '
        '"knowledge_units": ["Graph"]}'
    )
    verdict = parse_verdict(text, UNITS)
    assert verdict["unique"].value is False and verdict["answerable"].value is False
    prose_only = parse_verdict("unique: yes, readable: yes, answerable: yes, Bloom level: Apply", UNITS)
    assert set(statuses(prose_only).values()) == {"parse_failed"}


def test_a_bare_string_unit_is_one_unit():
    text = '{"unique": 0, "readable": 1, "answerable": "true", "bloom_level": 3, "knowledge_units": "graph"}'
    verdict = parse_verdict(text, UNITS)
    assert verdict["unique"].value is False and verdict["bloom_level"].value == "Apply"
    assert verdict["knowledge_units"].value == ("Graph",)


def test_coerce_bool():
    assert [coerce_bool(v) for v in (True, "YES", " no. ", 1, 0, "1")] == [True, True, False, True, False, True]
    assert [coerce_bool(v) for v in ("maybe", 2, None, [])] == [None] * 4


def test_schema_restricts_units_and_accepts_a_valid_answer():
    schema = verdict_schema(UNITS)
    jsonschema.validate(json.loads(SMOL_JSON), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(json.loads(SMOL_UNIT_AS_LEVEL), schema)
    assert "enum" not in VERDICT_SCHEMA["properties"]["knowledge_units"]["items"]  # not mutated
    with pytest.raises(ValueError):
        verdict_schema([])


def test_criterion_verdict_invariants():
    with pytest.raises(ValueError):
        CriterionVerdict(None, "ok")
    with pytest.raises(ValueError):
        CriterionVerdict(True, "parse_failed")
    with pytest.raises(ValueError):
        Verdict({"unique": CriterionVerdict.ok(True)})
