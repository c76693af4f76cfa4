"""JSON read out of a model's reply: bounded, so that no reply can crash or stall its reader.

A reply is untrusted every time it is read, fresh from an endpoint or replayed from the call
cache. Python's :mod:`json` raises ``ValueError`` on an integer of more than 4,300 digits (the
int-string limit of CVE-2020-10735) and ``RecursionError`` on nesting a few thousand deep, and
decoding from every ``{`` of a long text is quadratic. Here:

- :func:`reply_problem` says why a reply is not read at all (brackets nested deeper than
  :data:`MAX_DEPTH`), counted in one pass over its brackets;
- integers of more than :data:`MAX_INT_DIGITS` digits raise :class:`HostileReply` from inside
  the decoder, before ``int()`` sees them;
- :func:`json_objects` decodes from a ``{`` only outside the objects already decoded and walks
  each decoded value for the objects nested in it, so a reply costs time linear in its length
  (times :data:`MAX_DEPTH` for the starts that fail).

The parsers (:func:`bloomqg.inputs.parsing.parse_generation`, :func:`bloomqg.judges.verdict.parse_verdict`)
turn :class:`HostileReply` into a failed row with its reason.
"""

from __future__ import annotations

import json
import re
import reprlib
from collections.abc import Iterator
from typing import Any

#: Deepest nesting of brackets a reply may hold; an answer object needs 3 or 4.
MAX_DEPTH = 64
#: Most digits of an integer a reply may hold (Python refuses 4,300 and more).
MAX_INT_DIGITS = 1000

_BRACKETS = re.compile(r"[\[\]{}]")
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


class HostileReply(ValueError):
    """A reply that is not read: its message is the reason, for the row's parse_error."""


def _bounded_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise HostileReply(f"the reply holds a JSON number of {len(digits.lstrip('-')):,} digits, "
                           f"more than {MAX_INT_DIGITS:,}; not read")
    return int(digits)


_DECODER = json.JSONDecoder(parse_int=_bounded_int)


def reply_problem(text: str) -> str | None:
    """Why ``text`` is not read as JSON (brackets nested deeper than :data:`MAX_DEPTH`), or None."""
    depth = deepest = 0
    for bracket in _BRACKETS.findall(text):
        depth = depth + 1 if bracket in "[{" else max(depth - 1, 0)
        deepest = max(deepest, depth)
        if deepest > MAX_DEPTH:
            return f"the reply nests brackets more than {MAX_DEPTH} deep; not read"
    return None


def loads(text: str) -> Any:
    """``json.loads`` with integers bounded: ``json.JSONDecodeError`` when ``text`` is not JSON,
    :class:`HostileReply` when it holds a number too long (check depth with :func:`reply_problem`)."""
    return _DECODER.decode(text)


def _dicts(value: Any) -> Iterator[dict[str, Any]]:
    """``value`` and every object nested in it that is a dict, outer first, in document order."""
    stack = [value]
    while stack:  # iterative: depth is bounded by reply_problem, but no recursion is needed
        current = stack.pop()
        if isinstance(current, dict):
            yield current
            stack.extend(reversed(list(current.values())))
        elif isinstance(current, list):
            stack.extend(reversed(current))


def json_objects(text: str) -> Iterator[dict[str, Any]]:
    """Every JSON object in ``text``: those of fenced blocks first, then any ``{`` that starts one
    (and the objects nested in each), in linear time. Raises :class:`HostileReply` for a number
    too long; call :func:`reply_problem` first."""
    for source in [*fenced_blocks(text), text]:
        start = source.find("{")
        while start >= 0:
            try:
                value, end = _DECODER.raw_decode(source, start)
            except json.JSONDecodeError:
                start = source.find("{", start + 1)
                continue
            yield from _dicts(value)
            start = source.find("{", end)  # the objects inside were walked: never decoded twice


def fenced_blocks(text: str) -> list[str]:
    """The contents of the text's ```` ``` ```` fences (a language tag ``json`` dropped)."""
    return [match.group(1) for match in _FENCE.finditer(text)]


_SHOWN_CHARS = 300
_SHOWN = reprlib.Repr()  # Python 3.11's Repr takes no keyword arguments
_SHOWN.maxlevel, _SHOWN.maxstring, _SHOWN.maxother = 3, 120, 120
_SHOWN.maxlist = _SHOWN.maxtuple = _SHOWN.maxdict = 8


def shown(value: Any) -> str:
    """``repr(value)`` cut to a few hundred characters, for a reason that quotes a reply's value
    (a 1 MB string, or a list of lists, is not copied whole into every row's reason)."""
    text = _SHOWN.repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "…"
