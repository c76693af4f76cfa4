"""Browsable examples for the report: generated questions per model and original level, with
their verdicts, and the generations that could not be parsed.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from bloomqg.inputs.bloom import BLOOM_LEVELS, UNCATEGORIZED
from bloomqg.reporting.display import StrategyLabels, is_missing, ordered_unique, strategy_label
from bloomqg.reporting.tables.model import require_columns


#: How many examples of each outcome (hit, miss) are shown per model × original level × dataset × strategy.
EXAMPLES_PER_GROUP = 1
#: How many unparsed generations are shown per model.
FAILURES_PER_MODEL = 3


def _as_list(value: object) -> list:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return []
    return list(value)


def _verdict(value: object) -> str:
    if is_missing(value):
        return "no majority"
    return "yes" if bool(value) else "no"


def panel_judges(reliability: pd.DataFrame | None) -> dict[tuple[str, str, str], list[str]]:
    """Per (model, dataset, strategy), the panel's judge names in the order of the votes in the
    ``*_votes`` columns (the reliability table's judge rows keep the panel's order)."""
    if reliability is None or reliability.empty or "judge" not in reliability.columns:
        return {}
    rows = reliability[reliability["judge"].notna()]
    return {
        (str(model), str(dataset), str(strategy)): list(dict.fromkeys(group["judge"].astype(str)))
        for (model, dataset, strategy), group in rows.groupby(["model", "dataset", "strategy"], sort=False)
    }


def named_votes(votes: list, judges: list[str] | None, criterion: str) -> str:
    """``"rules: yes, minilm: no vote, smollm2: yes"``: each judge's vote by name (in words: the
    tables' dashes mean "not run" and "no value").
    Without the names (a panel of unknown size), the votes are numbered by position."""
    def shown(vote: object) -> str:
        if is_missing(vote):
            return "no vote"
        if criterion in ("unique", "readable", "answerable"):
            return {"1": "yes", "0": "no", "True": "yes", "False": "no"}.get(str(vote), str(vote))
        return str(vote)

    names = judges if judges is not None and len(judges) == len(votes) else [f"judge {i + 1}" for i in range(len(votes))]
    return ", ".join(f"{name}: {shown(vote)}" for name, vote in zip(names, votes))


def question_examples(
    votes: pd.DataFrame,
    generations: pd.DataFrame | None,
    *,
    per_group: int = EXAMPLES_PER_GROUP,
    failures_per_model: int = FAILURES_PER_MODEL,
    strategy_labels: StrategyLabels | None = None,
    judges: dict[tuple[str, str, str], list[str]] | None = None,
    forced_cells: frozenset[tuple[str, str, str]] = frozenset(),
) -> list[dict[str, Any]]:
    """Examples per model → original Bloom level, with verdicts and the original; plus parse failures.

    Per (model, level, dataset, strategy) up to ``per_group`` questions that **hit** the target
    (useful, judged at the original's level) and as many that **missed** it, chosen by the votes:
    those the judges agree on most (the ``bloom_level_agreement``), so an example shows what the
    panel says clearly rather than whatever came first. Texts are returned raw; the template
    escapes them. ``judges`` (:func:`panel_judges`) names each vote. ``forced_cells`` are the
    (model, dataset, strategy) cells whose judged level is the original's by how the panel is built:
    their hits are counted apart (``n_forced_hits``), since they say nothing about the questions.
    """
    require_columns(votes, ["prompt_id", "model", "dataset", "strategy", "original_question",
                            "original_bloom_level", "new_question", "bloom_level", "unique", "readable",
                            "answerable", "useful"], "votes")
    raw = {}
    if generations is not None and len(generations):
        require_columns(generations, ["prompt_id", "model", "raw_text", "parse_status", "parse_error"], "generations")
        raw = {(r.prompt_id, r.model): r for r in generations.itertuples(index=False)}
    models = []
    for model in ordered_unique(votes["model"]):
        frame = votes[votes["model"] == model].sort_values(["dataset", "strategy", "prompt_id"], kind="stable")
        levels = []
        for level in (*BLOOM_LEVELS, None):
            at_level = frame[frame["original_bloom_level"].isna()] if level is None else \
                frame[frame["original_bloom_level"] == level]
            with_question = at_level[at_level["new_question"].notna()]
            chosen = _hits_and_misses(with_question, per_group)
            if chosen.empty:
                continue
            hits = _hit(with_question).fillna(False).astype(bool)
            forced = with_question.apply(
                lambda r: (str(model), str(r["dataset"]), str(r["strategy"])) in forced_cells, axis=1).astype(bool)
            levels.append({
                "level": level or UNCATEGORIZED,
                "n_total": len(with_question),
                "n_hits": int(hits.sum()),
                "n_forced_hits": int((hits & forced).sum()),
                "examples": [_example(row, (judges or {}).get((str(model), str(row["dataset"]), str(row["strategy"]))),
                                      strategy_labels) for _, row in chosen.iterrows()],
            })
        failed = frame[frame["new_question"].isna()].head(failures_per_model)
        failures = []
        for _, row in failed.iterrows():
            generation = raw.get((row["prompt_id"], model))
            failures.append({
                "prompt_id": row["prompt_id"], "dataset": row["dataset"], "strategy": strategy_label(row["strategy"], strategy_labels),
                "model": str(model), "strategy_name": str(row["strategy"]),
                "original_question": row["original_question"],
                "raw_text": None if generation is None else generation.raw_text,
                "reason": None if generation is None else generation.parse_error,
            })
        models.append({"model": model, "levels": levels, "failures": failures,
                       "n_failed": int(frame["new_question"].isna().sum())})
    return models


def _hit(frame: pd.DataFrame) -> pd.Series:
    """A question hit its target: useful, and judged at the original's Bloom level."""
    useful = frame["useful"].map(lambda v: not is_missing(v) and bool(v))
    return useful & (frame["bloom_level"].astype(object) == frame["original_bloom_level"].astype(object))


def _hits_and_misses(frame: pd.DataFrame, per_group: int) -> pd.DataFrame:
    """Per dataset × strategy, the ``per_group`` hits and misses the judges agree on most (a question
    judged at another level before one with no judged level)."""
    if frame.empty:
        return frame
    agreement = frame["bloom_level_agreement"] if "bloom_level_agreement" in frame else pd.Series(0.0, index=frame.index)
    # among the questions that did not hit, a true miss (a judged level, another than the original's)
    # comes before one whose level no majority decided
    judged = frame["bloom_level"].map(lambda v: not is_missing(v))
    missed = judged & (frame["bloom_level"].astype(object) != frame["original_bloom_level"].astype(object))
    ranked = frame.assign(_hit=_hit(frame), _miss=missed,
                          _agreement=pd.to_numeric(agreement, errors="coerce").fillna(0.0))
    ranked = ranked.sort_values(["dataset", "strategy", "_hit", "_miss", "_agreement", "prompt_id"],
                                ascending=[True, True, False, False, False, True], kind="stable")
    return ranked.groupby(["dataset", "strategy", "_hit"], sort=False).head(per_group)


def _example(row: pd.Series, judges: list[str] | None = None,
             strategy_labels: StrategyLabels | None = None) -> dict[str, Any]:
    def level(value: object) -> str:
        return str(value) if not is_missing(value) else UNCATEGORIZED

    return {
        "prompt_id": row["prompt_id"],
        "dataset": row["dataset"],
        "strategy": strategy_label(row["strategy"], strategy_labels),
        "original_question": row["original_question"],
        "original_level": level(row["original_bloom_level"]),
        "original_units": ", ".join(map(str, _as_list(row.get("original_knowledge_units")))),
        "new_question": row["new_question"],
        "judged_level": str(row["bloom_level"]) if not is_missing(row["bloom_level"]) else "no majority",
        "judged_units": ", ".join(map(str, _as_list(row.get("knowledge_units")))) or "no majority",
        "identified_level": str(row["identified_bloom_level"]) if not is_missing(row.get("identified_bloom_level")) else None,
        "unique": _verdict(row["unique"]),
        "readable": _verdict(row["readable"]),
        "answerable": _verdict(row["answerable"]),
        "useful": _verdict(row["useful"]),
        "votes": {
            c: named_votes(_as_list(row.get(f"{c}_votes")), judges, c) for c in ("unique", "readable", "answerable", "bloom_level")
        },
        "gated": bool(row.get("alpha_gated", False)),
        "hit": bool(row["_hit"]) if "_hit" in row else None,
        "tag": _tag(row),
        "model": str(row["model"]),
        "strategy_name": str(row["strategy"]),
    }


def _tag(row: pd.Series) -> str | None:
    """What the example's tag says: a miss is told apart by what the votes decided (no judged
    level, or a level that matches on a question whose usefulness is undecided, is no miss)."""
    if "_hit" not in row:
        return None
    if bool(row["_hit"]):
        # on votes the gate flagged a "hit" is only how the votes fell: the question may be no question at all
        return ("counted a hit by unreliable votes: read the question" if bool(row.get("alpha_gated", False))
                else "hit the target level (as the judges voted)")
    if is_missing(row["bloom_level"]):
        return "no judged level (the judges did not agree)"
    if row["bloom_level"] == row["original_bloom_level"]:
        return ("at the level, usefulness undecided" if is_missing(row["useful"])
                else "at the level, but not useful")
    # CatCons counts useful questions only: a question that is not useful missed for that first
    if not is_missing(row["useful"]) and not bool(row["useful"]):
        return "not useful (and judged at another level)"
    if is_missing(row["useful"]):  # as for a question at the level: its usefulness is not decided either
        return "judged at another level, usefulness undecided"
    # the same hedge as a hit's: on votes the gate flagged, a miss is also only how the votes fell
    return ("counted a miss by unreliable votes: read the question" if bool(row.get("alpha_gated", False))
            else "missed the target level")
