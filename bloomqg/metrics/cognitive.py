"""Bloom-level consistency (CatCons, Eq. 1) and cognitive shift (CogShift, Eq. 4; Tables 5, 6).

Denominators — "useful" means ``useful`` is True:

- ``catcons``: useful questions with a judged level. A judged level is either one of the six
  levels or *judged Uncategorized* (``bloom_level`` null with ``bloom_level_null_reason ==``
  :data:`~bloomqg.metrics.rows.JUDGED_UNCATEGORIZED`). An Uncategorized original is a mismatch,
  except against a judged-Uncategorized question: Eq. (1) compares category labels, and this is
  what reproduces the paper's FGP CatCons for GLM-4-9B (51.42; treating it as a mismatch gives
  51.35). A useful question whose judged level is null for any other reason (tie, parse failure,
  gated out) has no verdict and is left out of the denominator, as a null vote is everywhere else.
- ``cogreg`` / ``cogdrift`` / ``cogleap`` (percent of shifts): useful, mismatched, both levels
  known; Δ = W_new − W_ori, regression Δ ≤ −2, drift |Δ| = 1, leap Δ ≥ 2.
- ``cogshift``: mean of (1 − δ)·|Δ| over useful questions with both levels known (Eq. 4).
- ``cog*_total``: sum of |Δ| over the shifts of that type (0 when there are none, NaN when no
  useful question has both levels known; ``n`` counts the shifts); ``cog*_mean``: its mean per
  shift (the paper's Figure 3 "mean shift score").
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bloomqg.metrics.rows import BLOOM_FED, JUDGED_UNCATEGORIZED, RowTerms, true, weights
from bloomqg.metrics.spec import MetricSpec

SHIFT_TYPES: tuple[str, ...] = ("cogreg", "cogdrift", "cogleap")
_SHIFT_LABEL = {"cogreg": "CogReg", "cogdrift": "CogDrift", "cogleap": "CogLeap"}
_SHIFT_DEFINITION = {
    "cogreg": "of the useful questions judged at another level than the original's, the share two or more levels below it (regression)",
    "cogdrift": "of the useful questions judged at another level than the original's, the share one level away from it (drift)",
    "cogleap": "of the useful questions judged at another level than the original's, the share two or more levels above it (leap)",
}
#: The largest |Δ| between two of the six levels, and the |Δ| each shift type can take.
_MAX_SHIFT = 5.0
_SHIFT_RANGE = {"cogreg": (2.0, _MAX_SHIFT), "cogdrift": (1.0, 1.0), "cogleap": (2.0, _MAX_SHIFT)}

COGNITIVE_SPECS: tuple[MetricSpec, ...] = (
    MetricSpec("catcons", "CatCons", "percent", True, "%", criteria=BLOOM_FED, paper_table="table5",
               paired_outcome="binary",
               definition="category (Bloom-level) consistency: of the useful questions whose level the judges' majority "
               "decides, the share placed at the original question's Bloom level, the level the new question was "
               "meant to hit (where a strategy has the model name that level itself, as CoT does, a wrong "
               "naming counts as a miss: it is part of the strategy)"),
    MetricSpec("cogshift", "CogShift", "score", False, "levels", criteria=BLOOM_FED, ci_decimals=2,
               paper_table="auxiliary", paired_outcome="graded", outcome_range=(0.0, _MAX_SHIFT), betting_interval=True,
               definition="cognitive shift: how many Bloom levels, on average, a useful question lands away from "
               "its target (0 = always on target)"),
    *(
        MetricSpec(shift, _SHIFT_LABEL[shift], "percent", None, "%", criteria=BLOOM_FED, paper_table="table6",
                   definition=_SHIFT_DEFINITION[shift])
        for shift in SHIFT_TYPES
    ),
    *(
        # a total's interval is the questions with both levels known times that of the mean of
        # |Δ|·[shift of this type] over them: the per-question range is 0 to the type's largest |Δ|
        MetricSpec(f"{shift}_total", f"{_SHIFT_LABEL[shift]} total |Δ|", "sum", None, "levels",
                   criteria=BLOOM_FED, short_label=f"{_SHIFT_LABEL[shift]} total",
                   outcome_range=(0.0, _SHIFT_RANGE[shift][1]), betting_interval=True)
        for shift in SHIFT_TYPES
    ),
    *(
        MetricSpec(f"{shift}_mean", f"{_SHIFT_LABEL[shift]} mean |Δ|", "score", None, "levels",
                   criteria=BLOOM_FED, short_label=f"{_SHIFT_LABEL[shift]} mean", ci_decimals=2,
                   outcome_range=_SHIFT_RANGE[shift], betting_interval=True)
        for shift in SHIFT_TYPES
    ),
)


def cognitive_rows(votes: pd.DataFrame) -> RowTerms:
    """Per-row terms of CatCons, CogShift and the shift shares, totals and means.

    The totals' "denominator" marks the shifts of the type (used as ``n``; the value is Σnum).
    """
    useful = true(votes["useful"])
    w_ori = weights(votes["original_bloom_level"], "original_bloom_level")
    w_new = weights(votes["bloom_level"], "bloom_level")
    ori_known, new_known = ~np.isnan(w_ori), ~np.isnan(w_new)
    judged_uncategorized = ~new_known & (
        votes["bloom_level_null_reason"].to_numpy(dtype=object) == JUDGED_UNCATEGORIZED
    )

    rows: RowTerms = {}
    in_catcons = useful & (new_known | judged_uncategorized)
    same_level = ori_known & new_known & (w_ori == w_new)
    both_uncategorized = ~ori_known & judged_uncategorized
    rows["catcons"] = (in_catcons & (same_level | both_uncategorized), in_catcons)

    both = useful & ori_known & new_known
    delta = np.where(both, w_new - w_ori, 0.0)
    magnitude = np.abs(delta)
    shifted = both & (delta != 0)
    rows["cogshift"] = (magnitude, both)
    shift_kind = {
        "cogreg": shifted & (delta <= -2),
        "cogdrift": shifted & (magnitude == 1),
        "cogleap": shifted & (delta >= 2),
    }
    for name, member in shift_kind.items():
        rows[name] = (member, shifted)
        rows[f"{name}_total"] = (np.where(member, magnitude, 0.0), member)
        rows[f"{name}_mean"] = (np.where(member, magnitude, 0.0), member)
    return rows
