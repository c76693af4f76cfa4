"""Text on its way to disk: secrets masked in any spelling, and made storable.

:func:`redact` is the one place a secret (an API key) is masked. The client masks an answer
before it is cached, the parser masks what JSON decoding revealed, the job log's formatter
masks every line, and the Parquet writer masks every string cell: each calls this function.

A key is not searched in the text as written but in one canonical form of it
(:func:`canonical_form`), so that every spelling of a key meets the same search:

1. made storable, as :func:`storable_text` stores it (a NUL between a key's letters is removed
   there too, so it cannot join the key up after masking);
2. escapes decoded to a fixed point: JSON / Python (``\\u0067``, ``\\\\u0067``, ``\\x67``,
   ``\\/``), URL (``%67``, UTF-8 ``%EF%BD%87``), HTML (``&#103;``, ``&#103`` without ``;``,
   ``&#x67;``, ``&amp;#103;``);
3. each character NFKC-normalised (full-width ``ｇ`` is ``g``) and case-folded, and separators,
   zero-width and format characters (ZWSP, soft hyphen, word joiner), control characters,
   combining marks, dashes and underscores removed (``gsk_Wd3R Yu9p``, ``GSK-WD3R-...``).

A second, *bare* reading of the canonical form drops markup tags (``<b>``, ``</i>``) and every
character that is neither a letter nor a digit, so that a key spelled out with anything between
its characters (``g.s.k.W.d.3``, ``g*s*k*``, ``<b>g</b><b>s</b>``) meets the search too: by
construction, whatever separates a key's characters, not by a list of separators.

The key is canonicalised the same way, and any run of :data:`MIN_SECRET_LENGTH` or more of its
characters, of its reversal, its base64 (standard and URL-safe, at each byte alignment) or its
hex is searched there; the span of the original text each match came from is masked (each
canonical character remembers where it came from). The shapes providers use to show a key partly
(a prefix, a run of ``*``, ``•``, ``…`` or ``...``, and a suffix, ``gsk_Wd3R****x8Cv``) are masked
when 4 or more key characters stand on either side.

:func:`storable_text` makes generated text safe to store: lone surrogates (which JSON escapes
can carry and UTF-8 cannot encode) become U+FFFD, NUL and other control characters (tab and
newline kept) are removed, and how many of each is reported.
"""

from __future__ import annotations

import base64
import functools
import html
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
#: Fewest canonical characters a piece of a key may fold to and still be searched (a run of 8
#: that held a dash or an underscore folds to 7).
_MIN_PIECE = 6
#: Rounds of escape decoding: enough for a key escaped, JSON-encoded and HTML-encoded in turn;
#: bounded so that a hostile text costs linear time.
_DECODE_ROUNDS = 6

#: Secrets of this process (every key a client used): :func:`redact` masks them everywhere.
_registered: set[str] = set()

#: A word shaped like a provider's API key (OpenAI and Anthropic ``sk-…``, Groq ``gsk_…``, xAI
#: ``xai-…``, ``pk_``/``rk_`` keys; ``*`` where a key is shown partly): masked in error texts,
#: which never carry content, and refused as a ``base_url`` path segment
#: (:func:`bloomqg.inputs.api_settings.base_url_problem`). The one definition of the shape: prefixes
#: such as ``api-`` or ``key-`` are left out, being ordinary words of URLs.
PROVIDER_KEY = re.compile(r"\b(?:sk|gsk|pk|rk|xai)[-_][A-Za-z0-9_\-*]{6,}", re.IGNORECASE)

#: One escape a reply may carry; :func:`_unescape` decodes each alternative.
_ESCAPE = re.compile(
    r"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"  # a JSON surrogate pair
    r"|\\u[0-9a-fA-F]{4}|\\U[0-9a-fA-F]{8}|\\x[0-9a-fA-F]{2}|\\[/\\\"'bfnrt]"
    r"|%[c-fC-F][0-9a-fA-F](?:%[89abAB][0-9a-fA-F]){1,3}|%[0-9a-fA-F]{2}"  # URL: UTF-8, one byte
    r"|&#[xX]0*[0-9a-fA-F]{1,6};?|&#0*[0-9]{1,7};?|&[A-Za-z][A-Za-z0-9]{1,31};?"
)
_SIMPLE = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
#: Unicode categories left out of the canonical form: separators, controls, format characters
#: (zero-width space, soft hyphen, word joiner), surrogates, combining marks, dashes, underscores.
_DROPPED = frozenset({"Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn", "Mn", "Me", "Pd", "Pc"})
#: Where a provider shows a key only partly: the stars between its prefix and suffix.
_STARS = re.compile(r"[*•·]{3,}|\.{3,}")


def register_secret(secret: str | None) -> None:
    """Mask ``secret`` in every text :func:`redact` sees in this process from now on."""
    if secret and len(secret) >= MIN_SECRET_LENGTH:
        _registered.add(secret)


def registered_secrets() -> frozenset[str]:
    return frozenset(_registered)


def _unescape(match: re.Match[str]) -> str:
    """The text one escape stands for (itself when it stands for nothing)."""
    unit = match.group()
    if unit[0] == "\\":
        kind = unit[1]
        if kind == "u" and len(unit) == 12:
            high, low = int(unit[2:6], 16), int(unit[8:12], 16)
            return chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
        if kind in "uUx":
            number = int(unit[2:], 16)
            return chr(number) if number <= 0x10FFFF else unit
        return _SIMPLE.get(kind, kind)
    if unit[0] == "%":
        decoded = bytes.fromhex(unit.replace("%", "")).decode("utf-8", "replace") if len(unit) > 3 else chr(int(unit[1:], 16))
        return decoded
    if unit[1] == "#":
        digits = unit[2:].rstrip(";")
        number = int(digits[1:], 16) if digits[0] in "xX" else int(digits)
        return chr(number) if 0 < number <= 0x10FFFF and not 0xD800 <= number <= 0xDFFF else unit
    return html.unescape(unit)


class _Fold(dict[int, str]):
    """Code point -> its canonical text (NFKC, case-folded, dropped categories removed), filled
    on first use: ``str.translate`` reads it, so the canonical form costs one C loop."""

    def __missing__(self, code: int) -> str:
        if len(self) > 100_000:  # a text of every code point would otherwise grow it for good
            self.clear()
        char = chr(code)
        if unicodedata.category(char) in _DROPPED:
            folded = ""
        else:
            folded = "".join(c for c in unicodedata.normalize("NFKC", char).casefold()
                             if unicodedata.category(c) not in _DROPPED)
        self[code] = folded
        return folded


_FOLD = _Fold()


def _fold(text: str) -> str:
    return text.translate(_FOLD)


def _decoded_text(text: str) -> str:
    """``text`` with its escapes decoded to a fixed point (at most :data:`_DECODE_ROUNDS` rounds)."""
    for _ in range(_DECODE_ROUNDS):
        if "\\" not in text and "%" not in text and "&" not in text:
            break
        decoded = _ESCAPE.sub(_unescape, text)
        if decoded == text:
            break
        text = decoded
    return text


def canonical_text(text: str, *, keep_controls: bool = False) -> str:
    """The canonical form of ``text`` (see the module docstring), without where it came from.
    ``keep_controls``: control characters stay through the decoding (as a reader that decodes
    before it drops them sees ``&#50<BS>0`` as ``2``, not ``&#500``) and are dropped after."""
    made = text if keep_controls else storable_text(text).text
    return _fold(_decoded_text(made))


def canonical_form(text: str, *, keep_controls: bool = False) -> tuple[str, list[tuple[int, int]]]:
    """The canonical form of ``text`` and, for each of its characters, the span of ``text`` it
    came from: the same text as :func:`canonical_text` (the same steps, one character at a time)."""
    chars: list[str] = []
    spans: list[tuple[int, int]] = []
    for index, char in enumerate(text):  # storable: surrogates replaced, controls removed
        if "\ud800" <= char <= "\udfff":
            char = "\ufffd"
        elif not keep_controls and char not in _KEPT_CONTROLS and unicodedata.category(char) == "Cc":
            continue
        chars.append(char)
        spans.append((index, index + 1))
    current = "".join(chars)
    for _ in range(_DECODE_ROUNDS):
        if "\\" not in current and "%" not in current and "&" not in current:
            break
        new_chars: list[str] = []
        new_spans: list[tuple[int, int]] = []
        position = 0
        for match in _ESCAPE.finditer(current):
            start, end = match.span()
            decoded = _unescape(match)
            if decoded == match.group():
                continue
            new_chars += chars[position:start]
            new_spans += spans[position:start]
            span = (spans[start][0], spans[end - 1][1])
            new_chars += list(decoded)
            new_spans += [span] * len(decoded)
            position = end
        if not position:
            break
        new_chars += chars[position:]
        new_spans += spans[position:]
        chars, spans, current = new_chars, new_spans, "".join(new_chars)
    canonical: list[str] = []
    origin: list[tuple[int, int]] = []
    for char, span in zip(chars, spans):
        folded = _FOLD[ord(char)]
        canonical.append(folded)
        origin += [span] * len(folded)
    return "".join(canonical), origin


#: A markup tag, as the bare reading drops it (bounded, so a stray ``<`` costs nothing).
_TAG = re.compile(r"<[^<>]{0,64}>")
#: What the bare reading drops besides tags: CPython's ``\W`` is exactly "not ``str.isalnum()``
#: and not ``_``", and the canonical form holds no ``_``.
_NOT_ALNUM = re.compile(r"\W+")


def bare_form(canonical: str, origin: list[tuple[int, int]] | None = None) -> tuple[str, list[tuple[int, int]]]:
    """The bare reading of a canonical form: markup tags and every character that is not a letter
    or digit removed, with each kept character's span of the original text (from ``origin``,
    :func:`canonical_form`'s; empty spans when it is not given)."""
    if origin is None:  # the text alone (the fast check): the same characters, by two regular expressions
        return _NOT_ALNUM.sub("", _TAG.sub("", canonical)), []
    dropped = bytearray(len(canonical))
    for tag in _TAG.finditer(canonical):
        dropped[tag.start():tag.end()] = b"\x01" * (tag.end() - tag.start())
    kept = [i for i, char in enumerate(canonical) if not dropped[i] and char.isalnum()]
    return "".join(canonical[i] for i in kept), [origin[i] for i in kept]


def _base64_variants(data: bytes) -> list[str]:
    """The parts of ``data``'s base64 that do not depend on what surrounds it, at each of the
    three byte alignments it may have inside a longer encoded text, standard and URL-safe."""
    variants = []
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + data).decode()
        first, last = -(-8 * offset // 6), 8 * (offset + len(data)) // 6
        variants += [encoded[first:last], encoded[first:last].replace("+", "-").replace("/", "_")]
    return variants


@functools.lru_cache(maxsize=64)
def _grams(secret: str) -> tuple[frozenset[str], frozenset[str], str]:
    """The canonical 8-character pieces of ``secret`` and its simple transforms (reversed,
    base64, hex), their first 6 characters, and the canonical secret itself (for partly shown
    keys)."""
    plain = _fold(secret)
    raw = secret.encode("utf-8")
    spellings = [plain, plain[::-1], raw.hex(), *(_fold(v) for v in _base64_variants(raw))]
    size = MIN_SECRET_LENGTH
    grams = {s[i:i + size] for s in spellings for i in range(len(s) - size + 1)}
    # 8 characters of the key as written may fold to fewer (gsk_Wd3R is gskwd3r): those too
    for i in range(len(secret) - size + 1):
        piece = _fold(secret[i:i + size])
        if len(piece) >= _MIN_PIECE:
            grams |= {piece, piece[::-1]}
    return frozenset(grams), frozenset(gram[:_MIN_PIECE] for gram in grams), plain


def _matched(canonical: str, secret: str) -> list[tuple[int, int]]:
    """Canonical spans ``[start, end)`` holding a piece of ``secret`` or a partly shown key."""
    found: list[tuple[int, int]] = []
    grams, heads, plain = _grams(secret)
    # every piece starts with one of ``heads``: one pass of set look-ups rules most texts out
    windows = (canonical[i:i + _MIN_PIECE] for i in range(len(canonical) - _MIN_PIECE + 1))
    if not heads.isdisjoint(windows):
        for gram in grams:
            at = canonical.find(gram)
            while at >= 0:
                found.append((at, at + len(gram)))
                at = canonical.find(gram, at + 1)
    for stars in _STARS.finditer(canonical):
        begin, end = stars.span()
        # a shown prefix ends in, and a shown suffix starts with, 4 characters of the key
        before = next((k for k in range(min(len(plain), begin), _MIN_SHOWN - 1, -1)
                       if canonical[begin - k:begin] == plain[:k]), 0) if canonical[begin - _MIN_SHOWN:begin] in plain else 0
        after = next((k for k in range(min(len(plain), len(canonical) - end), _MIN_SHOWN - 1, -1)
                      if canonical[end:end + k] == plain[-k:]), 0) if canonical[end:end + _MIN_SHOWN] in plain else 0
        if before or after:
            found.append((begin - before, end + after))
    return found


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` sorted, overlapping or touching ones joined."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _masked_once(text: str, secrets: set[str]) -> str:
    # two readings of a text holding control characters: removed before the escapes are decoded
    # (as storing it does: a NUL between a key's letters joins them) or after (as a reader that
    # decodes first does: a control ends an entity's digits); a piece found in either is masked
    readings = (False, True) if not (text.isascii() and text.isprintable()) else (False,)
    raw_spans: list[tuple[int, int]] = []
    for keep_controls in readings:
        canonical = canonical_text(text, keep_controls=keep_controls)
        bare = bare_form(canonical)[0]
        if not any(_matched(form, secret) for secret in secrets for form in (canonical, bare)):
            continue  # the usual case: no piece found in the fast forms, no offsets needed
        canonical, origin = canonical_form(text, keep_controls=keep_controls)
        # the canonical reading, then the bare one (a key with anything between its characters)
        for form, spans in ((canonical, origin), bare_form(canonical, origin)):
            found = [span for secret in secrets for span in _matched(form, secret)]
            raw_spans += [(spans[start][0], spans[end - 1][1]) for start, end in found]
    if not raw_spans:
        return text
    raw = _merged(raw_spans)
    parts: list[str] = []
    position = 0
    for start, end in raw:
        parts += [text[position:start], MASK]
        position = end
    parts.append(text[position:])
    return "".join(parts)


def redact(text: str, secrets: Iterable[str | None] = (), *, key_tokens: bool = False) -> str:
    """``text`` with every registered secret and every one of ``secrets`` masked as ``***`` in
    any spelling the module docstring lists (searched in the canonical form, masked in ``text``).
    ``key_tokens``: also mask any word shaped like a provider's key (:data:`PROVIDER_KEY`): for
    error texts, where such a word is never content."""
    wanted = {s for s in (*_registered, *secrets) if s and len(_fold(s)) >= MIN_SECRET_LENGTH}
    if wanted and text:
        for _ in range(3):  # masking joins what stood around a key: search again, a few times
            masked = _masked_once(text, wanted)
            if masked == text:
                break
            text = masked
    if key_tokens:
        text = PROVIDER_KEY.sub(lambda match: match.group().split("-")[0].split("_")[0] + "-***", text)
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
    return None if text is None else redact(storable_text(text).text)
