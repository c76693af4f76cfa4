"""Columns that hold a JSON object as text (RELIABILITY's ``vote_distribution`` and
``kappa_pairwise``, ROBUSTNESS's ``variants``): read back as a mapping, in one place."""

from __future__ import annotations

import json
from typing import Any


def json_mapping(raw: Any) -> dict[str, Any]:
    """The mapping a JSON text cell holds; {} for a null or empty cell (a row with no such detail)."""
    return json.loads(raw) if isinstance(raw, str) and raw else {}
