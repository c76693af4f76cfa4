"""Text on its way to disk: secrets masked in any spelling, and made storable.

:func:`redact` is the one place a secret (an API key) is masked. The client masks an answer
before it is cached, the parser masks what JSON decoding revealed, the job log's formatter
masks every line, and the Parquet writer masks every string cell: each calls this function.
A provider or a model may spell a key in many ways, and each is masked:

- the key itself, and any run of :data:`MIN_SECRET_LENGTH` or more of its characters (a key cut
  by a message's length limit, or echoed as a 12-character prefix and suffix);
- the same characters written as escapes a reply can carry: JSON's ``\\u0067`` and ``\\/``,
  URL ``%67``, HTML ``&#103;`` / ``&#x67;``, mixed with plain characters;
- the shapes providers use to show a key partly: a prefix, a run of ``*``, ``•``, ``…`` or
  ``...``, and a suffix (``gsk_Wd3R****x8Cv``): with 4 or more key characters on either side.

:func:`storable_text` makes generated text safe to store: lone surrogates (which JSON escapes
can carry and UTF-8 cannot encode) become U+FFFD, NUL and other control characters (tab and
newline kept) are removed, and how many of each is reported.
"""

from __future__ import annotations

import bisect
import functools
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

#: Shorter secrets are never masked: the "EMPTY" or "test" local servers are given would mangle
#: ordinary words, and a key that short guards nothing.
MIN_SECRET_LENGTH = 8
#: Key characters a partly shown key must keep on one side of its stars to be masked.
_MIN_SHOWN = 4
MASK = "***"

#: Secrets of this process (every key a client used): :func:`redact` masks them everywhere.
_registered: set[str] = set()

#: One character as a reply may spell it in an escape.
_ESCAPE = re.compile(r"\\u[0-9a-fA-F]{4}|\\[/\\\"]|%[0-9a-fA-F]{2}|&#[xX][0-9a-fA-F]{1,6};|&#[0-9]{1,7};")
#: Where a provider shows a key only partly: the stars between its prefix and suffix.
_STARS = re.compile(r"[*•·]{3,}|…+|\.{3,}")
#: Keys of the usual providers' shapes, masked in error texts (which never carry content).
_KEY_TOKEN = re.compile(r"\b(?:sk|gsk|pk|rk|xai|key|api)[-_][A-Za-z0-9_\-*]{6,}", re.IGNORECASE)


def register_secret(secret: str | None) -> None:
    """Mask ``secret`` in every text :func:`redact` sees in this process from now on."""
    if secret and len(secret) >= MIN_SECRET_LENGTH:
        _registered.add(secret)


def registered_secrets() -> frozenset[str]:
    return frozenset(_registered)


def _decoded(text: str) -> tuple[str, list[tuple[int, int, int]]]:
    """``text`` with its escapes decoded, and each escape as (its position in the decoded text,
    its start and end in ``text``): what :func:`_raw_span` maps decoded positions back with."""
    if "\\" not in text and "%" not in text and "&" not in text:
        return text, []
    parts: list[str] = []
    escapes: list[tuple[int, int, int]] = []
    position = length = 0
    for match in _ESCAPE.finditer(text):
        start, end = match.span()
        unit = match.group()
        if unit.startswith("\\u"):
            char = chr(int(unit[2:], 16))
        elif unit.startswith("\\"):
            char = unit[1]
        elif unit.startswith("%"):
            char = chr(int(unit[1:], 16))
        else:
            number = int(unit[3:-1], 16) if unit[2] in "xX" else int(unit[2:-1])
            if number > 0x10FFFF:
                continue
            char = chr(number)
        parts += [text[position:start], char]
        length += start - position
        escapes.append((length, start, end))
        length += 1
        position = end
    parts.append(text[position:])
    return "".join(parts), escapes


def _raw_span(index: int, escapes: list[tuple[int, int, int]], starts: list[int]) -> tuple[int, int]:
    """Where decoded position ``index`` came from in the raw text (``starts``: the escapes'
    decoded positions, for bisecting)."""
    at = bisect.bisect_right(starts, index) - 1
    if at < 0:
        return index, index + 1
    decoded_at, raw_start, raw_end = escapes[at]
    if decoded_at == index:
        return raw_start, raw_end
    raw = raw_end + index - decoded_at - 1
    return raw, raw + 1


@functools.lru_cache(maxsize=64)
def _pieces(secret: str) -> tuple[re.Pattern[str], frozenset[str]]:
    """A pattern matching runs of 8+ characters the secret is made of, and its 8-character pieces."""
    alphabet = "".join(sorted(set(secret)))
    runs = re.compile(f"[{re.escape(alphabet)}]{{{MIN_SECRET_LENGTH},}}")
    return runs, frozenset(secret[i:i + MIN_SECRET_LENGTH] for i in range(len(secret) - MIN_SECRET_LENGTH + 1))


def _covered(decoded: str, secret: str) -> set[int]:
    """Positions of ``decoded`` that belong to a run of the secret's characters or to a partly
    shown key (see the module docstring)."""
    covered: set[int] = set()
    size = MIN_SECRET_LENGTH
    runs, grams = _pieces(secret)
    for run in runs.finditer(decoded):  # only runs of the key's characters can hold a piece of it
        text, offset = run.group(), run.start()
        for start in range(len(text) - size + 1):
            if text[start:start + size] in grams:
                covered.update(range(offset + start, offset + start + size))
    for stars in _STARS.finditer(decoded):
        begin, end = stars.span()
        # a shown prefix ends in, and a shown suffix starts with, 4 characters of the key
        before = next((k for k in range(min(len(secret), begin), _MIN_SHOWN - 1, -1)
                       if decoded[begin - k:begin] == secret[:k]), 0) if decoded[begin - _MIN_SHOWN:begin] in secret else 0
        after = next((k for k in range(min(len(secret), len(decoded) - end), _MIN_SHOWN - 1, -1)
                      if decoded[end:end + k] == secret[-k:]), 0) if decoded[end:end + _MIN_SHOWN] in secret else 0
        if before or after:
            covered.update(range(begin - before, end + after))
    return covered


def _runs(indices: list[int]) -> Iterable[tuple[int, int]]:
    """(first, last) of each run of consecutive numbers in sorted ``indices``."""
    first = previous = indices[0]
    for index in indices[1:]:
        if index != previous + 1:
            yield first, previous
            first = index
        previous = index
    yield first, previous


def redact(text: str, secrets: Iterable[str | None] = (), *, key_tokens: bool = False) -> str:
    """``text`` with every registered secret and every one of ``secrets`` masked as ``***`` in
    any spelling the module docstring lists. ``key_tokens``: also mask any word shaped like a
    provider's key (``sk-…``, ``gsk_…``): for error texts, where such a word is never content."""
    wanted = {s for s in (*_registered, *secrets) if s and len(s) >= MIN_SECRET_LENGTH}
    if wanted and text:
        decoded, escapes = _decoded(text)
        covered: set[int] = set()
        for secret in wanted:
            covered |= _covered(decoded, secret)
        if covered:
            parts: list[str] = []
            position = 0
            starts = [escape[0] for escape in escapes]
            for first, last in _runs(sorted(covered)):
                parts += [text[position:_raw_span(first, escapes, starts)[0]], MASK]
                position = _raw_span(last, escapes, starts)[1]
            parts.append(text[position:])
            text = "".join(parts)
    if key_tokens:
        text = _KEY_TOKEN.sub(lambda match: match.group().split("-")[0].split("_")[0] + "-***", text)
    return text


@dataclass(frozen=True)
class StorableText:
    """Text fit to store, and what was changed to make it so."""

    text: str
    surrogates_replaced: int
    controls_removed: int

    def note(self) -> str | None:
        """What changed, for a row's parse_error; None when nothing did."""
        notes = []
        if self.surrogates_replaced:
            notes.append(f"{self.surrogates_replaced} invalid surrogate(s) replaced by U+FFFD")
        if self.controls_removed:
            notes.append(f"{self.controls_removed} NUL/control character(s) removed")
        return "; ".join(notes) or None


_KEPT_CONTROLS = {"\n", "\t", "\r"}


def storable_text(text: str) -> StorableText:
    """``text`` with lone surrogates replaced by U+FFFD and NUL and other control characters
    (Unicode category Cc, but tab and line breaks) removed: what UTF-8 files, Parquet and the
    pages built from them can hold."""
    surrogates = controls = 0
    if text.isascii() and text.isprintable():
        return StorableText(text, 0, 0)
    out: list[str] = []
    for char in text:
        if "\ud800" <= char <= "\udfff":
            surrogates += 1
            out.append("\ufffd")
        elif char not in _KEPT_CONTROLS and unicodedata.category(char) == "Cc":
            controls += 1
        else:
            out.append(char)
    return StorableText("".join(out), surrogates, controls)


def stored_or_none(text: str | None) -> str | None:
    """``text`` redacted and storable, for a column that takes generated text as it is (a judge's
    reason); None stays None."""
    return None if text is None else storable_text(redact(text)).text
