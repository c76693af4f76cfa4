"""Bloom's taxonomy levels: names, ordinal weights and normalisation.

The paper weights the six levels 1..6 (Remember .. Create); an original question that the verb
list cannot place is ``Uncategorized`` and is stored as a null level.
"""

from __future__ import annotations

BLOOM_LEVELS: tuple[str, ...] = ("Remember", "Understand", "Apply", "Analyze", "Evaluate", "Create")
UNCATEGORIZED = "Uncategorized"

#: Remember 1 .. Create 6, as in the paper's Eq. (3).
LEVEL_WEIGHT: dict[str, int] = {name: rank for rank, name in enumerate(BLOOM_LEVELS, start=1)}

#: Short forms used in the paper's figures (R, U, Ap, An, E, C).
LEVEL_ABBREVIATION: dict[str, str] = {
    "Remember": "R",
    "Understand": "U",
    "Apply": "Ap",
    "Analyze": "An",
    "Evaluate": "E",
    "Create": "C",
}

# Spellings met in model outputs and in other datasets, mapped to the canonical name.
_ALIASES: dict[str, str] = {
    "remember": "Remember",
    "remembering": "Remember",
    "knowledge": "Remember",
    "recall": "Remember",
    "understand": "Understand",
    "understanding": "Understand",
    "comprehension": "Understand",
    "apply": "Apply",
    "applying": "Apply",
    "application": "Apply",
    "analyze": "Analyze",
    "analyse": "Analyze",
    "analyzing": "Analyze",
    "analysing": "Analyze",
    "analysis": "Analyze",
    "evaluate": "Evaluate",
    "evaluating": "Evaluate",
    "evaluation": "Evaluate",
    "create": "Create",
    "creating": "Create",
    "creation": "Create",
    "synthesis": "Create",
    "r": "Remember",
    "u": "Understand",
    "ap": "Apply",
    "an": "Analyze",
    "e": "Evaluate",
    "c": "Create",
}


class UnknownBloomLevel(ValueError):
    """A value that names no Bloom level."""


def normalize_level(value: object, *, allow_uncategorized: bool = True) -> str | None:
    """Return the canonical level name for ``value``, or None for a missing/uncategorized level.

    Raises :class:`UnknownBloomLevel` for anything else, so a typo in a dataset is never read as
    a level. Numbers 1..6 are accepted as ordinal weights.
    """
    if value is None:
        return None
    if isinstance(value, float) and value != value:  # NaN from pandas
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if float(value).is_integer() and 1 <= int(value) <= 6:
            return BLOOM_LEVELS[int(value) - 1]
        raise UnknownBloomLevel(f"{value!r} is not a Bloom level (expected 1..6)")
    text = str(value).strip()
    if not text:
        return None
    if allow_uncategorized and text.lower() in {"uncategorized", "uncategorised", "none", "n/a"}:
        return None
    key = text.lower().rstrip(".").strip()
    if key in _ALIASES:
        return _ALIASES[key]
    if key.isascii() and key.isdigit() and 1 <= int(key) <= 6:  # "²".isdigit(), but int("²") raises
        return BLOOM_LEVELS[int(key) - 1]
    raise UnknownBloomLevel(
        f"{text!r} is not a Bloom level; expected one of {', '.join(BLOOM_LEVELS)}"
    )


def level_weight(level: str | None) -> int | None:
    """Ordinal weight 1..6 of a canonical level name, None for a missing level."""
    return None if level is None else LEVEL_WEIGHT[level]


#: Bloom's six levels merged into three orders, as rater-agreement studies do (raters of Bloom
#: levels agree far more often at three levels than at six): lower (Remember, Understand),
#: middle (Apply, Analyze), higher (Evaluate, Create). The one definition of the grouping.
BLOOM_ORDERS: tuple[str, ...] = ("Lower order", "Middle order", "Higher order")
ORDER_OF_LEVEL: dict[str, str] = {
    level: BLOOM_ORDERS[(rank - 1) // 2] for level, rank in LEVEL_WEIGHT.items()
}
#: Lower 1 .. higher 3, the ordinal weight of an order (the three-level Δ of CogShift).
ORDER_WEIGHT: dict[str, int] = {name: rank for rank, name in enumerate(BLOOM_ORDERS, start=1)}


def bloom_order(level: str | None) -> str | None:
    """The order (lower / middle / higher) of a canonical level name, None for a missing level;
    a name that is not a canonical level raises :class:`UnknownBloomLevel`."""
    if level is None:
        return None
    try:
        return ORDER_OF_LEVEL[level]
    except KeyError:
        raise UnknownBloomLevel(f"{level!r} is not a canonical Bloom level ({', '.join(BLOOM_LEVELS)})") from None
