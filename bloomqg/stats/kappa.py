"""Cohen's κ (Cohen 1960) of two raters, one definition for the judges' diagnostics and the
human-agreement tables.

κ = (p_o − p_e) / (1 − p_e), with p_o the observed share of agreement and p_e = Σ_k p_A(k)·p_B(k)
the agreement expected from each rater's own marginals, over the items both rated (a missing
rating, None or NaN, leaves its item out). When p_e = 1 (both raters gave one and the same label
to every item) κ is undefined (NaN), never 1 or 0: there is no variation to agree on. Written out
rather than imported: it is four lines, and a dependency only for it is not worth it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence


def is_missing(rating: object) -> bool:
    """None, or a float NaN (what pandas puts in place of None in some columns)."""
    return rating is None or (isinstance(rating, float) and math.isnan(rating))


def cohen_kappa(a: Sequence[Hashable | None], b: Sequence[Hashable | None]) -> float:
    """Cohen's unweighted κ of two raters over the items both rated; NaN when undefined."""
    if len(a) != len(b):
        raise ValueError(f"rating lists differ in length: {len(a)} vs {len(b)}")
    pairs = [(x, y) for x, y in zip(a, b) if not is_missing(x) and not is_missing(y)]
    n = len(pairs)
    if n == 0:
        return math.nan
    observed = sum(x == y for x, y in pairs) / n
    count_a, count_b = Counter(x for x, _ in pairs), Counter(y for _, y in pairs)
    expected = sum(count_a[label] * count_b[label] for label in count_a) / (n * n)
    if math.isclose(expected, 1.0):
        return math.nan
    return (observed - expected) / (1.0 - expected)
