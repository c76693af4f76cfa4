"""The auxiliary tasks under CoT (Figures 4–6) and the generation parse-failure rate.

- ``classification_acc``: identified level == original level over all rows with an original
  level (a null or unrecognised identification counts as wrong).
- ``knowledge_id_acc``: identified unit set == original unit set over all rows.
- ``parse_failure_rate``: ``parse_status != "ok"`` over all rows.

The two accuracies apply to a strategy whose answers carry the identification (CoT's
``answer_fields``); where the identification column is null throughout (FGP, or any strategy
that does not ask for it) their terms are empty (value NaN, ``n`` 0). A strategy that asks for
the units records an empty set where none was recognised (generation's ``final_row``), so a
cell whose model never names one scores 0%, not "not asked".
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bloomqg.metrics.rows import RowTerms, unit_set, weights
from bloomqg.metrics.spec import MetricSpec

AUXILIARY_SPECS: tuple[MetricSpec, ...] = (
    MetricSpec("classification_acc", "Classification acc.", "percent", True, "%", paper_table="auxiliary",
               paired_outcome="binary"),
    MetricSpec("knowledge_id_acc", "Knowledge-ID acc.", "percent", True, "%", paper_table="auxiliary",
               paired_outcome="binary"),
    MetricSpec("parse_failure_rate", "Parse failures", "percent", False, "%", paired_outcome="binary"),
)


def auxiliary_rows(votes: pd.DataFrame, strategy: str) -> RowTerms:
    """Row terms of the auxiliary metrics; ``strategy`` is not consulted: the identification
    columns themselves say whether the strategy identified anything."""
    n = len(votes)
    none = (np.zeros(n), np.zeros(n, dtype=bool))
    rows: RowTerms = {}
    identified_levels = votes["identified_bloom_level"]
    # Whether the strategy identifies levels (its answer fields, CoT's) shows in the cell's
    # own rows, whatever its name: a strategy without that field leaves them all null.
    if identified_levels.notna().any():
        w_ori = weights(votes["original_bloom_level"], "original_bloom_level")
        ori_known = ~np.isnan(w_ori)
        w_id = weights(identified_levels, "identified_bloom_level")
        rows["classification_acc"] = (ori_known & (w_id == w_ori), ori_known)
    else:
        rows["classification_acc"] = none
    identified_units = votes["identified_knowledge_units"]
    originals = votes["original_knowledge_units"].tolist()
    if identified_units.notna().any():
        correct = np.array(
            [
                unit_set(found) is not None and unit_set(found) == unit_set(original)
                for found, original in zip(identified_units.tolist(), originals)
            ],
            dtype=bool,
        )
        rows["knowledge_id_acc"] = (correct, np.ones(n, dtype=bool))
    else:
        rows["knowledge_id_acc"] = none

    rows["parse_failure_rate"] = (
        (votes["parse_status"] != "ok").to_numpy(dtype=bool),
        np.ones(n, dtype=bool),
    )
    return rows
