"""Bloom-level annotation with an action-verb list (the paper's Table 1).

A verb list is a CSV with one column per Bloom level (Remember .. Create) and the level's verbs,
with their inflections, down the rows; columns may have different lengths, so cells below the
end of a column are empty. Entries may be phrases ("act out", "break down").

The rule, pinned down against the paper's release: a question gets the *highest* level any of
whose verbs occurs in it as a whole word or whole phrase, ignoring case; a question with no verb
from the list is Uncategorized (None). "Whole word" means the match is neither preceded nor
followed by a word character (letter, digit, underscore), so "list" matches in "list the items"
and in "function's", but not in "listing" (unless "listing" is itself on the list) nor in
"find_max". Hyphens and apostrophes are not word characters: "back" matches in "back-end".
Words of a phrase may be separated by any run of whitespace. On the release's 1,416
computer-science questions this rule reproduces the ``Category`` column of the GLM run row for
row; splitting questions on whitespace and punctuation-with-apostrophes instead loses four rows
("function's", "make up").
"""

from __future__ import annotations

import csv
import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from bloomqg.inputs.bloom import BLOOM_LEVELS, UnknownBloomLevel, normalize_level

logger = logging.getLogger(__name__)

# Typographic apostrophes occur in pasted questions; the verb lists spell "what's" with ASCII.
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})


class VerbListError(ValueError):
    """A verb-list file that cannot be read as one column per Bloom level."""


def load_verb_list(path: str | Path) -> dict[str, list[str]]:
    """Read a verb-list CSV into ``{level: [verb, ...]}`` in Bloom order.

    Header cells must name Bloom levels (canonical names or the aliases
    :func:`bloomqg.inputs.bloom.normalize_level` accepts, such as "Analyse"); all six levels must be
    present, each once. Cells are stripped; empty cells (the ragged ends of shorter columns) are
    skipped; duplicates within a level are dropped ignoring case. A UTF-8 byte-order mark is
    accepted.

    Raises:
        VerbListError: the file is missing or empty, a header cell names no Bloom level, a level
            is missing or repeated, or a level has no verbs. The message names the file and
            the column.
    """
    path = Path(path)
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            rows = list(csv.reader(handle))
    except FileNotFoundError as error:
        raise VerbListError(f"verb list {path}: file not found") from error
    except UnicodeDecodeError as error:
        raise VerbListError(f"verb list {path}: not UTF-8 text ({error})") from error
    if not rows:
        raise VerbListError(f"verb list {path}: file is empty (expected a header row)")

    header = rows[0]
    column_levels: list[str | None] = []
    for number, cell in enumerate(header, start=1):
        if not cell.strip():
            column_levels.append(None)  # an unnamed column is fine only if it holds nothing
            continue
        try:
            level = normalize_level(cell, allow_uncategorized=False)
        except UnknownBloomLevel as error:
            raise VerbListError(
                f"verb list {path}: column {number} {cell.strip()!r} is not a Bloom level; "
                f"expected one column per level: {', '.join(BLOOM_LEVELS)}"
            ) from error
        if level in column_levels:
            raise VerbListError(
                f"verb list {path}: column {number} {cell.strip()!r} repeats {level}"
            )
        column_levels.append(level)
    missing = [level for level in BLOOM_LEVELS if level not in column_levels]
    if missing:
        raise VerbListError(f"verb list {path}: missing column(s) for {', '.join(missing)}")

    verbs: dict[str, list[str]] = {level: [] for level in BLOOM_LEVELS}
    seen: dict[str, set[str]] = {level: set() for level in BLOOM_LEVELS}
    for row_number, row in enumerate(rows[1:], start=1):
        for column, cell in enumerate(row):
            verb = " ".join(cell.split())
            if not verb:
                continue
            level = column_levels[column] if column < len(column_levels) else None
            if level is None:
                raise VerbListError(
                    f"verb list {path}: row {row_number} column {column + 1} holds {verb!r} "
                    "under no level header"
                )
            if verb.lower() not in seen[level]:
                seen[level].add(verb.lower())
                verbs[level].append(verb)
    empty = [level for level in BLOOM_LEVELS if not verbs[level]]
    if empty:
        raise VerbListError(f"verb list {path}: column(s) {', '.join(empty)} hold no verbs")
    logger.debug("verb list %s: %s", path, ", ".join(f"{lvl} {len(v)}" for lvl, v in verbs.items()))
    return verbs


def _verb_pattern(verbs: Sequence[str]) -> re.Pattern[str]:
    """One case-insensitive regex matching any of ``verbs`` as a whole word or phrase."""
    alternatives = []
    # Longest first, so a phrase wins over a verb it starts with in the same alternation.
    for verb in sorted(
        {" ".join(v.split()).lower() for v in verbs if v.strip()}, key=len, reverse=True
    ):
        words = verb.translate(_APOSTROPHES).split(" ")
        alternatives.append(r"\s+".join(re.escape(word) for word in words))
    return re.compile(r"(?<!\w)(?:" + "|".join(alternatives) + r")(?!\w)", re.IGNORECASE)


class VerbAnnotator:
    """Assigns Bloom levels to questions with a verb list; regexes are compiled once.

    Args:
        verbs: ``{level: verbs}``; keys must be Bloom level names (aliases accepted). Levels
            without verbs are allowed and simply never match.
    """

    def __init__(self, verbs: Mapping[str, Sequence[str]]) -> None:
        patterns: dict[str, re.Pattern[str]] = {}
        for key, level_verbs in verbs.items():
            level = normalize_level(key, allow_uncategorized=False)
            if level is None:
                raise UnknownBloomLevel(f"{key!r} is not a Bloom level")
            if isinstance(level_verbs, str):
                raise TypeError(f"verbs for {level} must be a sequence of strings, not a string")
            if any(v.strip() for v in level_verbs):
                patterns[level] = _verb_pattern(level_verbs)
        # Highest level first: the first level that matches is the answer.
        self._patterns: list[tuple[str, re.Pattern[str]]] = [
            (level, patterns[level]) for level in reversed(BLOOM_LEVELS) if level in patterns
        ]

    def annotate(self, question: str) -> str | None:
        """The highest Bloom level with a verb in ``question``; None when no verb occurs."""
        if not isinstance(question, str):
            raise TypeError(f"question must be a string, got {type(question).__name__}")
        text = question.translate(_APOSTROPHES)
        for level, pattern in self._patterns:
            if pattern.search(text):
                return level
        return None

    def matches(self, question: str) -> dict[str, list[str]]:
        """Every verb found in ``question``, by level (for audits of a label)."""
        text = question.translate(_APOSTROPHES)
        found = {
            level: [m.group(0) for m in pattern.finditer(text)] for level, pattern in self._patterns
        }
        return {level: hits for level, hits in found.items() if hits}


def annotate_level(question: str, verbs: Mapping[str, Sequence[str]]) -> str | None:
    """The highest Bloom level whose verbs occur in ``question`` as words; None if none does.

    Compiles the verb regexes on each call: for many questions build one
    :class:`VerbAnnotator` and call :meth:`VerbAnnotator.annotate`.
    """
    return VerbAnnotator(verbs).annotate(question)
