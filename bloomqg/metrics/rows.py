"""Per-row building blocks shared by the metric modules: checks, level weights, truth masks."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pandas as pd

from bloomqg.inputs.bloom import BLOOM_LEVELS, LEVEL_WEIGHT
from bloomqg.store.frames import BINARY_CRITERIA

#: ``bloom_level_null_reason`` meaning the judges' majority placed the question at no level.
JUDGED_UNCATEGORIZED = "uncategorized"

#: The three usefulness criteria; metrics over useful questions depend on them (they select
#: the questions), metrics over Bloom levels on those and the level.
USEFUL_CRITERIA = frozenset(BINARY_CRITERIA)
BLOOM_FED = USEFUL_CRITERIA | {"bloom_level"}

#: Per metric: (numerator, denominator) per row; value = Σnum / Σden.
RowTerms = dict[str, tuple[np.ndarray, np.ndarray]]

REQUIRED_VOTE_COLUMNS = (
    "model",
    "dataset",
    "strategy",
    "original_bloom_level",
    "original_knowledge_units",
    "identified_bloom_level",
    "identified_knowledge_units",
    "parse_status",
    "answered",
    "unique",
    "readable",
    "answerable",
    "bloom_level",
    "bloom_level_null_reason",
    "knowledge_units",
    "useful",
    "alpha_gated",
)


def require_columns(frame: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    missing = [name for name in columns if name not in frame.columns]
    if missing:
        raise ValueError(f"{what}: missing columns {missing}")


def weights(values: pd.Series, column: str) -> np.ndarray:
    """Ordinal weights 1..6 of canonical level names; NaN for null. Unknown names raise."""
    out = np.full(len(values), np.nan)
    for position, value in enumerate(values.tolist()):
        if value is None or (isinstance(value, float) and math.isnan(value)):
            continue
        try:
            out[position] = LEVEL_WEIGHT[value]
        except KeyError:
            raise ValueError(
                f"column {column!r}, row {values.index[position]!r}: {value!r} is not a canonical "
                f"Bloom level ({', '.join(BLOOM_LEVELS)}) or null"
            ) from None
    return out


def true(values: pd.Series) -> np.ndarray:
    """Boolean array: the value is True (null and False are both False)."""
    return np.array([value is True or value is np.True_ for value in values.tolist()], dtype=bool)


def not_null(values: pd.Series) -> np.ndarray:
    return values.notna().to_numpy(dtype=bool)


def unit_set(value: object) -> set[str] | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return {str(unit).strip() for unit in value}  # type: ignore[union-attr]
