"""Parsing a generator's answer into a new question (and the identifications its strategy's
answer fields ask for: CoT's Bloom level and knowledge unit of the original).

Pure functions, no I/O.  Accepted answer shapes, tried in this order:

1. a JSON object, bare, inside a ```json fence, or embedded in prose (the first object holding
   a usable question wins);
2. JSON-like ``"key": "value"`` pairs whose object is broken (truncated or unbalanced), as
   small models often write;
3. labelled lines: ``Question: ...``, ``New question: ...``, ``Bloom level: ...``,
   ``Knowledge unit: ...`` / ``Topic: ...`` (any case, optional markdown bullets/bold, the value
   may sit on the next line).

Keys and labels match case-insensitively, with spaces, hyphens and underscores treated alike.

Outcome rules:

- no question found, or the question is empty, a template placeholder (a slot: up to five
  words in angle brackets and no sentence, ``<your new question>``, the paper's
  ``<new_question>``) or the question of the prompt's own JSON answer example ->
  ``parse_status="failed"`` and the reason in ``parse_error`` (:func:`placeholder_reason`); the
  caller keeps the raw text. A model that echoes the template has written no question, and
  counting it as one made it a usable generation; imported runs are held to the same rule
  (:mod:`bloomqg.release.runs`);
- a question longer than ``max_question_chars`` -> ``"failed"``, the reason saying its length;
- every text the result carries is stored text (:mod:`bloomqg.store.stored_text`): JSON decoding may
  reveal an API key a raw reply spelled in escapes (masked here), or lone surrogates and control
  characters (replaced and removed, counted in ``parse_error``);
- a question found -> ``"ok"``; a question written in the slot's brackets (``<How can ...?>``)
  is kept without them (:func:`unbracketed`). With answer fields (CoT) the model also names the
  original's Bloom level and knowledge unit; when either is missing or not recognisable (a level
  :func:`bloomqg.inputs.bloom.normalize_level` rejects, a unit not in the dataset's list) that
  identification is null and ``parse_error`` carries a note saying why, while the status stays
  "ok": the question itself is still judged, only the auxiliary identification task counts it
  as missing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bloomqg.inputs.bloom import UnknownBloomLevel, normalize_level
from bloomqg.store.reply_json import HostileReply, json_objects, reply_problem, shown
from bloomqg.store.stored_text import redact, storable_text
from bloomqg.inputs.strategies import ANSWER_FIELDS

#: Longest generated question kept, in characters (``input_limits.max_question_chars``'s
#: default); a longer one is a parse failure saying so.
MAX_QUESTION_CHARS = 4000

_QUESTION_KEYS = {"question", "new_question", "generated_question", "newquestion"}
_LEVEL_KEYS = {"bloom_level", "bloom", "level", "blooms_level", "bloom_s_level",
               "cognitive_level", "bloom_taxonomy_level"}
_UNIT_KEYS = {"knowledge_unit", "knowledge_units", "unit", "units", "topic", "topics",
              "knowledge_point", "knowledge"}

# "key": "value" with a properly closed string value; used when the object as a whole is broken
_KEY_VALUE = re.compile(r'"([A-Za-z][A-Za-z _\'-]*)"\s*:\s*"((?:[^"\\]|\\.)*)"')
# One class for each run of spaces and stars: "\s*\**\s*" could split a run of spaces two ways at
# every position, and a long line of spaces took quadratic time to fail.
_LABEL = re.compile(
    r"^[\s>*#\-\d.)]*"
    r"(new question|generated question|question|bloom'?s? (?:taxonomy )?level|bloom|level|"
    r"cognitive level|knowledge units?|topic|unit)"
    r"[\s*]*[:：][\s*]*(.*)$",
    re.IGNORECASE,
)
# A template's slot: up to five words of letters in angle brackets, at most 40 characters
# (<new_question>, <your new question>, the release's <新问题>; a run of ideographs, written
# without spaces, is one word of at most 8). A sentence in brackets (punctuation, digits, more
# words) is a question the model wrapped in the slot's brackets: :func:`unbracketed`.
_IDEOGRAPHS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_SLOT_WORD = rf"(?:[^\W\d_{_IDEOGRAPHS}]+|[{_IDEOGRAPHS}]{{1,8}})"
_PLACEHOLDER = re.compile(rf"^\s*<(?=[^<>]{{0,40}}>)\s*(?:{_SLOT_WORD}(?:[\s_'’-]+{_SLOT_WORD}){{0,4}})?\s*>\s*$")
_BRACKETED = re.compile(r"^\s*<([^<>]*)>\s*$")
_ENUMERATION = re.compile(r"^(?:\d{1,2}[.)]|[-*•])\s+")


@dataclass(frozen=True)
class ParsedGeneration:
    """A parsed answer. ``parse_error`` is the failure reason, or a note on an "ok" CoT answer
    whose identification of the original's level/unit is missing."""

    new_question: str | None
    identified_bloom_level: str | None
    identified_knowledge_units: list[str] | None
    parse_status: str  # "ok" | "failed"
    parse_error: str | None


def _key(name: str) -> str:
    return re.sub(r"[\s\-']+", "_", name.strip().lower()).strip("_")


def _unquoted(text: str) -> str:
    """``text`` without stray double quotes at its ends and without single quotes that enclose
    it whole: a question may begin with an apostrophe ('Twas, 'Hamlet' is ...)."""
    text = text.strip('"').strip()
    while len(text) >= 2 and text[0] == text[-1] == "'":
        text = text[1:-1].strip()
    return text


def _clean(value: Any) -> str | None:
    """A scalar answer value as tidy text; None when empty or a template placeholder."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        parts = [part for part in (_clean(item) for item in value) if part]
        return ", ".join(parts) if parts else None
    text = _unquoted(" ".join(str(value).split()).strip())
    text = text.strip("*").strip()
    text = _ENUMERATION.sub("", text)  # "1. What is ...?" -> "What is ...?"
    if not text or _PLACEHOLDER.match(text) or text in ("...", "…"):
        return None
    return text


def _fields_from_mapping(mapping: dict[str, Any]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for raw_key, value in mapping.items():
        key = _key(str(raw_key))
        if key in _QUESTION_KEYS and "question" not in fields:
            fields["question"] = value
        elif key in _LEVEL_KEYS and "level" not in fields:
            fields["level"] = value
        elif key in _UNIT_KEYS and "units" not in fields:
            fields["units"] = value
    return fields


def _fields_from_json(text: str) -> dict[str, Any] | None:
    for mapping in json_objects(text):
        fields = _fields_from_mapping(mapping)
        if _clean(fields.get("question")):
            return fields
    return None


def _fields_from_key_values(text: str) -> dict[str, Any] | None:
    pairs: dict[str, Any] = {}
    for key, value in _KEY_VALUE.findall(text):
        try:
            decoded = json.loads(f'"{value}"')
        except json.JSONDecodeError:
            decoded = value
        pairs.setdefault(key, decoded)
    fields = _fields_from_mapping(pairs)
    return fields if _clean(fields.get("question")) else None


def _label_kind(label: str) -> str:
    label = label.lower()
    if "question" in label:
        return "question"
    if "bloom" in label or "level" in label:
        return "level"
    return "units"


def _fields_from_labels(text: str) -> dict[str, Any] | None:
    lines = text.splitlines()
    # the next non-empty line after each line, found in one backward pass (searching forward
    # from every "Question:" line alone took quadratic time on a reply of such lines)
    following: list[str] = [""] * len(lines)
    for index in range(len(lines) - 2, -1, -1):
        later = lines[index + 1].strip()
        following[index] = later or following[index + 1]
    fields: dict[str, Any] = {}
    for index, line in enumerate(lines):
        match = _LABEL.match(line)
        if not match:
            continue
        kind = _label_kind(match.group(1))
        value = match.group(2).strip()
        if not value:  # "Question:" alone on its line: the value is the next non-empty line
            value = following[index]
            if _LABEL.match(value):
                value = ""
        if kind not in fields and _clean(value):
            fields[kind] = value
    return fields if _clean(fields.get("question")) else None


def _match_units(value: Any, knowledge_units: Sequence[str]) -> tuple[list[str], list[str]]:
    """(matched canonical units, unmatched names) for a unit answer against the dataset list."""
    canonical = {" ".join(unit.lower().split()): unit for unit in knowledge_units}
    names = value if isinstance(value, (list, tuple)) else [value]
    matched: list[str] = []
    unmatched: list[str] = []
    for name in names:
        text = _clean(name)
        if text is None:
            continue
        whole = " ".join(text.lower().split()).rstrip(".")
        candidates = [whole] if whole in canonical else [
            " ".join(part.lower().split()).rstrip(".") for part in re.split(r"[,;/]", text)
        ]
        for candidate in candidates:
            if candidate in canonical:
                if canonical[candidate] not in matched:
                    matched.append(canonical[candidate])
            elif candidate:
                unmatched.append(candidate)
    return matched, unmatched


def _level(value: Any) -> tuple[str | None, str | None]:
    """(canonical level, note) for a level answer; the note says why the level is missing."""
    text = _clean(value)
    if text is None:
        return None, "no Bloom level given for the original"
    try:
        level = normalize_level(text, allow_uncategorized=False)
    except UnknownBloomLevel:
        # "Level 3: Apply", "Apply (level 3)": take the single level word a sentence names
        words = {w for w in re.findall(r"[A-Za-z]+", text)}
        found = set()
        for word in words:
            try:
                if len(word) > 2:
                    found.add(normalize_level(word, allow_uncategorized=False))
            except UnknownBloomLevel:
                continue
        if len(found) == 1:
            return found.pop(), None
        return None, f"Bloom level {shown(text)} is not recognised"
    if level is None:
        return None, "no Bloom level given for the original"
    return level, None


PLACEHOLDER_ANSWER = "the answer is the template's placeholder {text!r}, not a question"
EXAMPLE_ANSWER = "the answer is the prompt's own example question {text!r}, not a new question"


def _normalized(text: str) -> str:
    return " ".join(text.split()).strip().strip('"').strip("'").strip().casefold()


def placeholder_reason(question: str | None, example_questions: Sequence[str] = ()) -> str | None:
    """Why ``question`` is no question (a parse failure's reason), or None when it may be one.

    A text that is a template placeholder alone (``<new_question>``, ``<your new question>``)
    or equals one of ``example_questions`` (the prompt's own example answer:
    :func:`prompt_example_questions`), compared with whitespace, quotes and case ignored."""
    if question is None:
        return None
    text = " ".join(question.split())
    if _PLACEHOLDER.match(text.strip('"').strip("'")):
        return PLACEHOLDER_ANSWER.format(text=text)
    if _normalized(text) in {_normalized(example) for example in example_questions if example.strip()}:
        return EXAMPLE_ANSWER.format(text=text)
    return None


def unbracketed(question: str) -> str:
    """``question`` without the angle brackets a model wrapped it in whole, as its template
    showed the answer's slot (``<How can a stack undo an edit?>`` -> ``How can a stack undo an
    edit?``); any other text, a slot itself (:func:`placeholder_reason`) included, as it is."""
    match = _BRACKETED.match(question)
    if match is None or _PLACEHOLDER.match(question) or not match.group(1).strip():
        return question
    return match.group(1).strip()


def answered(raw_text: object) -> bool:
    """The model's answer has text, a question or not (VOTES ``answered``): ``raw_text`` is a
    string that is not blank. An empty answer, a failed call (null) or a release row without an
    output is no answer."""
    return isinstance(raw_text, str) and bool(raw_text.strip())


def has_question(new_question: object) -> bool:
    """A generation has a question to judge, sample or rate: its ``new_question`` is a string
    that is not blank (a failed parse stores null)."""
    return isinstance(new_question, str) and bool(new_question.strip())


def prompt_example_questions(prompt_text: str) -> list[str]:
    """The question values of the JSON answer examples ``prompt_text`` shows (lines that start
    with ``{"key":`` and parse as JSON objects); the shipped templates' is a placeholder."""
    found = []
    for line in prompt_text.splitlines():
        if not line.lstrip().startswith("{"):
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            question = _fields_from_mapping(value).get("question")
            if isinstance(question, str) and question.strip():
                found.append(question)
    return found


def _failure_reason(text: str) -> str:
    """Why no question was found: name the nearest miss, for the parse-failure report."""
    has_question_key = any(
        _key(str(key)) in _QUESTION_KEYS for mapping in json_objects(text) for key in mapping
    ) or any(_key(key) in _QUESTION_KEYS for key, _value in _KEY_VALUE.findall(text)) or any(
        match and _label_kind(match.group(1)) == "question" for match in map(_LABEL.match, text.splitlines())
    )
    if has_question_key:
        return "the question field is empty or still the template's placeholder"
    if any(True for _ in json_objects(text)):
        return "JSON object(s) found, but none has a question field"
    return "no JSON object with a question, no \"question\": \"...\" pair and no 'Question:' line"


def parse_generation(
    text: str | None, answer_fields: Sequence[str], *, knowledge_units: Sequence[str],
    example_questions: Sequence[str] = (), max_question_chars: int = MAX_QUESTION_CHARS,
    secrets: Sequence[str] = (),
) -> ParsedGeneration:
    """:func:`parse_answer`'s result in stored form: every text redacted (the process's
    registered secrets and ``secrets``) and storable (the changes counted in ``parse_error``),
    a question over ``max_question_chars`` a failure."""
    parsed = parse_answer(text, answer_fields, knowledge_units=knowledge_units,
                          example_questions=example_questions)
    notes: list[str] = []

    def stored(value: str | None) -> str | None:
        if value is None:
            return None
        result = storable_text(value)  # storable first: what is stored is what is searched
        if result.note():
            notes.append(result.note())
        return redact(result.text, secrets)

    question = stored(parsed.new_question)
    units = [stored(unit) or "" for unit in parsed.identified_knowledge_units or []] or None
    error = stored(parsed.parse_error)
    status = parsed.parse_status
    if question is not None and len(question) > max_question_chars:
        return ParsedGeneration(None, None, None, "failed",
                                f"the question is {len(question):,} characters long, above "
                                f"input_limits.max_question_chars = {max_question_chars:,}")
    if question is not None and not question.strip():
        return ParsedGeneration(None, None, None, "failed", "the question is empty once control characters are removed")
    error = "; ".join(part for part in (error, *dict.fromkeys(notes)) if part) or None
    return ParsedGeneration(question, parsed.identified_bloom_level, units, status, error)


def parse_answer(
    text: str | None, answer_fields: Sequence[str], *, knowledge_units: Sequence[str],
    example_questions: Sequence[str] = (),
) -> ParsedGeneration:
    """Parse a model's answer carrying ``question`` and ``answer_fields`` (a pass's
    :attr:`~bloomqg.inputs.strategies.PassSpec.answer_fields`: ``bloom_level`` and/or
    ``knowledge_unit``, CoT's identifications of the original; none for FGP); never raises on
    bad text.  ``example_questions``: the prompt's own example answers' questions, which are no
    new question when the model echoes them."""
    if isinstance(answer_fields, str):
        raise TypeError(f"answer_fields is a list of field names, not {answer_fields!r} "
                        "(a strategy's are StrategySpec.answer_fields)")
    unknown = [name for name in answer_fields if name not in ANSWER_FIELDS]
    if unknown:
        raise ValueError(f"unknown answer field(s) {unknown}; known: {', '.join(ANSWER_FIELDS)}")
    if text is None or not text.strip():
        return ParsedGeneration(None, None, None, "failed", "empty answer")
    hostile = reply_problem(text)
    if hostile:
        return ParsedGeneration(None, None, None, "failed", hostile)
    try:
        return _parse_answer(text, answer_fields, knowledge_units, example_questions)
    except HostileReply as error:  # a number too long for int(), met while decoding
        return ParsedGeneration(None, None, None, "failed", str(error))
    except RecursionError:  # not expected past reply_problem: still the row's failure, not the job's
        return ParsedGeneration(None, None, None, "failed", "the reply is nested too deeply to read")


def _parse_answer(
    text: str, answer_fields: Sequence[str], knowledge_units: Sequence[str], example_questions: Sequence[str],
) -> ParsedGeneration:
    """:func:`parse_answer` past its checks: ``text`` is not empty and nests no deeper than bounded."""
    echoed = placeholder_reason(text, example_questions)
    if echoed:
        return ParsedGeneration(None, None, None, "failed", echoed)
    fields = (
        _fields_from_json(text)
        or _fields_from_key_values(text)
        or _fields_from_labels(text)
    )
    if fields is None:
        return ParsedGeneration(None, None, None, "failed", _failure_reason(text))
    question = _clean(fields["question"])
    echoed = placeholder_reason(question, example_questions)
    if echoed:
        return ParsedGeneration(None, None, None, "failed", echoed)
    question = unbracketed(question)

    notes: list[str] = []
    level: str | None = None
    if "bloom_level" in answer_fields:
        level, level_note = _level(fields.get("level"))
        if level_note:
            notes.append(level_note)
    units: list[str] | None = None
    if "knowledge_unit" in answer_fields:
        if _clean(fields.get("units")) is None:
            notes.append("no knowledge unit given for the original")
        else:
            matched, unmatched = _match_units(fields["units"], knowledge_units)
            units = matched or None
            if unmatched:
                notes.append(f"knowledge unit(s) {shown(unmatched)} not in the dataset's list")
    return ParsedGeneration(question, level, units, "ok", "; ".join(notes) or None)
