"""Any configured judge measured against the paper's panel on the release's judged questions.

The release holds, per generated question, the panel's majorities for unique / readable /
answerable / knowledge unit and (computer science only) the judged Bloom level. A judge is run
on a stratified sample of a cell's questions (:func:`bloomqg.annotation.sample.sample_cell`, the
same items for every judge) exactly as in a study (:func:`bloomqg.judges.stage.judge_questions`);
this module then compares its verdicts with the panel's:

- per criterion and cell, and pooled over the cells (``"all"``): percent agreement (Clopper–
  Pearson) and Cohen's κ (bootstrap interval), ``n`` = items where both the judge and the panel gave a value (a judge's
  abstention, a parse failure or a panel tie leave the item out; the math release has no judged
  Bloom level, so its ``n`` is 0 there);
- the Bloom-level confusion matrix (panel level × judge level);
- time and cost per 1,000 questions, from the job's own wall time (model loading included)
  and the judgments' ``cost_usd``.

The offline judges need a dataset frame (their uniqueness and unit checks read the originals);
:func:`release_dataset` rebuilds it from the imported generations, which carry every original.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from bloomqg.annotation.agreement import cohen_kappa_with_ci, confusion_counts, percent_agreement_with_ci
from bloomqg.annotation.panel_agreement import PANEL, cell_groups, estimate_row, panel_rating
from bloomqg.annotation.sample import sample_cell
from bloomqg.inputs.bloom import BLOOM_LEVELS
from bloomqg.store.frames import (CRITERIA, DATASET, JUDGE_THROUGHPUT, LEVEL_CONFUSION, RATER_AGREEMENT,
                                  STATUS_NO_QUESTION)

#: Subject named in an LLM judge's rubric prompt for each release dataset.
RELEASE_DOMAINS: dict[str, str] = {"cs": "computer science (data structures)", "math": "K-12 mathematics"}
_VALUE_COLUMN = {"bloom_level": "value_level", "knowledge_units": "value_units"}


def release_dataset(generations: pd.DataFrame) -> pd.DataFrame:
    """A :data:`bloomqg.store.frames.DATASET` frame of the originals an imported run holds."""
    originals = generations.drop_duplicates("item_id")
    return pd.DataFrame({
        "item_id": originals["item_id"],
        "dataset": originals["dataset"],
        "source_row": [int(item.rsplit("-", 1)[1]) for item in originals["item_id"]],
        "question": originals["original_question"],
        "bloom_level": originals["original_bloom_level"],
        "bloom_source": "label",
        "knowledge_units": originals["original_knowledge_units"],
    }, columns=DATASET.names).reset_index(drop=True)


def validation_sample(
    generations: pd.DataFrame, votes: pd.DataFrame, items_per_cell: int | None, seed: int
) -> pd.DataFrame:
    """The generations rows of the judged questions a judge is validated on (one cell)."""
    judged = votes[votes["unique"].notna()]  # questions the panel judged
    chosen = set(sample_cell(judged, items_per_cell, seed)["prompt_id"])
    return generations[generations["prompt_id"].isin(chosen)].reset_index(drop=True)


def judge_ratings(judgments: pd.DataFrame) -> dict[tuple[str, str, str], Any]:
    """(model, prompt_id, criterion) -> the judge's rating, for rows with status ``ok``. The
    model is part of the key: every model of a release has a prompt ``cs-0001:cot``."""
    ratings: dict[tuple[str, str, str], Any] = {}
    for row in judgments[judgments["status"] == "ok"].itertuples(index=False):
        value = getattr(row, _VALUE_COLUMN.get(row.criterion, "value_bool"))
        ratings[(row.model, row.prompt_id, row.criterion)] = panel_rating(row.criterion, value)
    return ratings


def _pair_frame(votes: pd.DataFrame, judgments: pd.DataFrame) -> pd.DataFrame:
    """One row per judged item: cell keys, and per criterion the panel's and the judge's rating."""
    ratings = judge_ratings(judgments)
    asked = set(zip(judgments["model"], judgments["prompt_id"]))
    judged = votes[[key in asked for key in zip(votes["model"], votes["prompt_id"])]]
    frame = judged[["prompt_id", "dataset", "strategy", "model"]].copy()
    for criterion in CRITERIA:
        # object columns: pandas would turn None among strings into NaN
        frame[f"panel_{criterion}"] = pd.Series([panel_rating(criterion, v) for v in judged[criterion]],
                                                index=frame.index, dtype=object)
        frame[f"judge_{criterion}"] = pd.Series(
            [ratings.get((m, p, criterion)) for m, p in zip(judged["model"], judged["prompt_id"])],
            index=frame.index, dtype=object)
    return frame.reset_index(drop=True)


def judge_agreement(
    votes: pd.DataFrame,
    judgments: pd.DataFrame,
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(RATER_AGREEMENT rows, LEVEL_CONFUSION rows) of one judge against the panel.

    ``votes``: the release's votes (``schemas.VOTES``) of the sampled cells; ``judgments``: one
    judge's JUDGMENTS rows on the sample. Cells come from ``votes``; the pooled rows read ``all``.
    """
    names = judgments["judge"].unique().tolist()
    if len(names) != 1:
        raise ValueError(f"judge_agreement: expected one judge's judgments, got {names}")
    judge = str(names[0])
    options = {"n_resamples": n_resamples, "confidence": confidence, "seed": seed}
    pairs = _pair_frame(votes, judgments)
    rows: list[dict[str, Any]] = []
    confusion: list[dict[str, Any]] = []
    for cell, group in cell_groups(pairs):
        for criterion in CRITERIA:
            panel, mine = list(group[f"panel_{criterion}"]), list(group[f"judge_{criterion}"])
            rows.append(estimate_row(cell, criterion, judge, PANEL, "percent_agreement",
                                     percent_agreement_with_ci(mine, panel, **options)))
            rows.append(estimate_row(cell, criterion, judge, PANEL, "cohen_kappa",
                                     cohen_kappa_with_ci(mine, panel, **options)))
        counts = confusion_counts(list(group["panel_bloom_level"]), list(group["judge_bloom_level"]), BLOOM_LEVELS)
        for i, panel_level in enumerate(BLOOM_LEVELS):
            for j, judge_level in enumerate(BLOOM_LEVELS):
                confusion.append({"judge": judge, **cell, "panel_level": panel_level,
                                  "judge_level": judge_level, "count": int(counts[i, j])})
    return (pd.DataFrame.from_records(rows, columns=RATER_AGREEMENT.names),
            pd.DataFrame.from_records(confusion, columns=LEVEL_CONFUSION.names))


def judge_throughput(judgments: pd.DataFrame, elapsed_s: float) -> dict[str, Any]:
    """A :data:`bloomqg.store.frames.JUDGE_THROUGHPUT` row: time and cost per 1,000 questions of one
    judge job (one judge on one cell's sample)."""
    first = judgments.iloc[0]
    n_questions = int(judgments.loc[judgments["status"] != STATUS_NO_QUESTION, "prompt_id"].nunique())
    cost = float(pd.to_numeric(judgments["cost_usd"], errors="coerce").fillna(0.0).sum())
    per_thousand = 1000.0 / n_questions if n_questions else math.nan
    return {
        "judge": first["judge"], "dataset": first["dataset"], "strategy": first["strategy"], "model": first["model"],
        "n_questions": n_questions, "seconds": float(elapsed_s), "seconds_per_1000": elapsed_s * per_thousand,
        "cost_usd": cost, "cost_per_1000_usd": cost * per_thousand,
    }


def throughput_frame(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Per-job rows plus one pooled row per judge (dataset/strategy/model ``all``)."""
    frame = pd.DataFrame.from_records(list(rows), columns=JUDGE_THROUGHPUT.names)
    pooled = []
    for judge, group in frame.groupby("judge", sort=False):
        n, seconds, cost = int(group["n_questions"].sum()), float(group["seconds"].sum()), float(group["cost_usd"].sum())
        pooled.append({"judge": judge, "dataset": "all", "strategy": "all", "model": "all", "n_questions": n,
                       "seconds": seconds, "seconds_per_1000": 1000 * seconds / n if n else math.nan,
                       "cost_usd": cost, "cost_per_1000_usd": 1000 * cost / n if n else math.nan})
    return pd.concat([frame, pd.DataFrame.from_records(pooled, columns=JUDGE_THROUGHPUT.names)], ignore_index=True)


def annotated_judge_ratings(
    items: pd.DataFrame, judgments: Sequence[pd.DataFrame]
) -> dict[str, dict[tuple[str, str], Any]]:
    """judge → (annotation_id, criterion) → its rating, for the annotation key's ``items``, from
    JUDGMENTS frames of the sampled cells (what the alternative annotator test compares)."""
    by_question = {(r.dataset, r.strategy, r.model, r.prompt_id): r.annotation_id for r in items.itertuples(index=False)}
    found: dict[str, dict[tuple[str, str], Any]] = {}
    for frame in judgments:
        ok = frame[frame["status"] == "ok"]
        for row in ok.itertuples(index=False):
            annotation_id = by_question.get((row.dataset, row.strategy, row.model, row.prompt_id))
            if annotation_id is None:
                continue
            value = getattr(row, _VALUE_COLUMN.get(row.criterion, "value_bool"))
            found.setdefault(str(row.judge), {})[(annotation_id, row.criterion)] = panel_rating(row.criterion, value)
    return found
