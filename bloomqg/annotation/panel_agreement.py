"""How far raters are from the judge panel: experts' annotations (the paper's Table 9) and any
judge run on the release (see :mod:`bloomqg.annotation.judge_validation`).

For annotations, per criterion and per model × dataset × strategy cell, plus pooled over all cells
(``dataset``/``strategy``/``model`` = ``"all"``), with the Clopper–Pearson interval for percent agreement and
a percentile bootstrap CI over items for the other statistics:

- ``percent_agreement`` of the *human majority* (a strict majority of the annotators who rated
  the item; one annotator is their own majority; a tie leaves the item out) with the panel's
  majority — the paper's Table 9. Items where the panel has no majority are left out; ``n`` says
  how many remain.
- ``cohen_kappa`` of each annotator with the panel.
- ``krippendorff_alpha`` among the annotators (``rater`` "annotators", needs two of them) and
  among the annotators plus the panel as one more rater (``reference`` "panel + annotators").
  Nominal for the yes/no criteria, ordinal for Bloom level, Jaccard for knowledge-unit sets.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from bloomqg.annotation.agreement import (
    Estimate,
    cohen_kappa_with_ci,
    krippendorff_alpha_with_ci,
    percent_agreement_with_ci,
    strict_majority,
)
from bloomqg.store.frames import CRITERIA, RATER_AGREEMENT
from bloomqg.voting.alpha import CRITERION_LEVEL

ALL = "all"
HUMAN_MAJORITY = "human majority"
ANNOTATORS = "annotators"
PANEL = "panel"
PANEL_AND_ANNOTATORS = "panel + annotators"


def panel_rating(criterion: str, value: object) -> Hashable | None:
    """A panel majority as a rating: bool, level name, or frozenset of units; None = none."""
    if criterion == "knowledge_units":
        if value is None or isinstance(value, float):  # None or NaN: no majority
            return None
        units = frozenset(str(unit) for unit in value)  # type: ignore[union-attr]
        return units or None
    if value is None or pd.isna(value):  # type: ignore[arg-type]
        return None
    if criterion == "bloom_level":
        return str(value)
    return bool(value)


def estimate_row(
    cell: Mapping[str, str], criterion: str, rater: str, reference: str, statistic: str, estimate: Estimate
) -> dict[str, Any]:
    """One :data:`bloomqg.store.frames.RATER_AGREEMENT` row."""
    return {
        **cell, "criterion": criterion, "rater": rater, "reference": reference, "statistic": statistic,
        "value": estimate.value, "ci_low": estimate.ci_low, "ci_high": estimate.ci_high, "n": estimate.n,
    }


def cell_groups(frame: pd.DataFrame, keys: Sequence[str] = ("dataset", "strategy", "model")) -> Iterable[tuple[dict[str, str], pd.DataFrame]]:
    """Each cell's rows, then all rows pooled under ``"all"``."""
    for values, group in frame.groupby(list(keys), sort=True):
        yield dict(zip(keys, values)), group
    yield {key: ALL for key in keys}, frame


def human_panel_agreement(
    items: pd.DataFrame,
    ratings: pd.DataFrame,
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """Agreement of the annotators (``ratings`` from :func:`bloomqg.annotation.sheets.read_sheets`)
    with the panel majorities of the annotation key ``items``: a RATER_AGREEMENT frame. Only
    items at least one annotator rated take part; no ratings give an empty frame."""
    options = {"n_resamples": n_resamples, "confidence": confidence, "seed": seed}
    if ratings.empty:
        return pd.DataFrame(columns=RATER_AGREEMENT.names)
    annotators = sorted(ratings["annotator"].unique())
    table = {(r.annotation_id, r.annotator, r.criterion): r.value for r in ratings.itertuples(index=False)}
    rated = items[items["annotation_id"].isin(set(ratings["annotation_id"]))]
    rows: list[dict[str, Any]] = []
    for cell, group in cell_groups(rated):
        ids = list(group["annotation_id"])
        for criterion in CRITERIA:
            panel = [panel_rating(criterion, v) for v in group[f"panel_{criterion}"]]
            human = [[table.get((item, who, criterion)) for who in annotators] for item in ids]
            majority = [strict_majority(votes) for votes in human]
            rows.append(estimate_row(cell, criterion, HUMAN_MAJORITY, PANEL, "percent_agreement",
                                     percent_agreement_with_ci(majority, panel, **options)))
            for position, who in enumerate(annotators):
                mine = [votes[position] for votes in human]
                if any(rating is not None for rating in mine):
                    rows.append(estimate_row(cell, criterion, who, PANEL, "cohen_kappa",
                                             cohen_kappa_with_ci(mine, panel, **options)))
            level = CRITERION_LEVEL[criterion]
            if len(annotators) >= 2:
                rows.append(estimate_row(cell, criterion, ANNOTATORS, ANNOTATORS, "krippendorff_alpha",
                                         krippendorff_alpha_with_ci(human, level, **options)))
            with_panel = [votes + [p] for votes, p in zip(human, panel)]
            rows.append(estimate_row(cell, criterion, ANNOTATORS, PANEL_AND_ANNOTATORS, "krippendorff_alpha",
                                     krippendorff_alpha_with_ci(with_panel, level, **options)))
    return pd.DataFrame.from_records(rows, columns=RATER_AGREEMENT.names)


def table9_rows(agreement: pd.DataFrame) -> pd.DataFrame:
    """The per-cell human-majority percent agreement in the shape
    :func:`bloomqg.reporting.tables.human.human_agreement_table` draws Table 9 from."""
    chosen = agreement[
        (agreement["statistic"] == "percent_agreement") & (agreement["rater"] == HUMAN_MAJORITY)
        & (agreement["model"] != ALL) & (agreement["n"] > 0)
    ]
    return pd.DataFrame({
        "model": chosen["model"], "dataset": chosen["dataset"], "strategy": chosen["strategy"],
        "criterion": chosen["criterion"], "agreement": chosen["value"], "n": chosen["n"],
    }).reset_index(drop=True)
