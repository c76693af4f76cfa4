"""Knowledge coverage (KnowCov, Table 5): how much of the original's knowledge a question keeps.

The mean of |K_ori ∩ K_new| / |K_ori| over useful questions with a non-null voted unit set; a
null set (no majority) has no verdict and is left out; an empty voted set counts 0.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bloomqg.metrics.rows import USEFUL_CRITERIA, RowTerms, true, unit_set
from bloomqg.metrics.spec import MetricSpec

KNOWCOV_SPECS: tuple[MetricSpec, ...] = (
    MetricSpec("knowcov", "KnowCov", "percent", True, "%", criteria=USEFUL_CRITERIA | {"knowledge_units"},
               paper_table="table5", paired_outcome="graded",
               definition="knowledge coverage: per useful question with judged units (a majority on them), the "
               "share of the original's knowledge units the judges find in the new one, averaged"),
)


def knowcov_rows(votes: pd.DataFrame) -> RowTerms:
    useful = true(votes["useful"])
    coverage = np.zeros(len(votes))
    in_knowcov = np.zeros(len(votes), dtype=bool)
    originals = votes["original_knowledge_units"].tolist()
    voted = votes["knowledge_units"].tolist()
    for position in np.flatnonzero(useful):
        k_new = unit_set(voted[position])
        if k_new is None:
            continue
        k_ori = unit_set(originals[position])
        if not k_ori:
            raise ValueError(
                f"column 'original_knowledge_units', row {votes.index[position]!r}: "
                "an original needs at least one knowledge unit"
            )
        in_knowcov[position] = True
        coverage[position] = len(k_ori & k_new) / len(k_ori)
    return {"knowcov": (coverage, in_knowcov)}
