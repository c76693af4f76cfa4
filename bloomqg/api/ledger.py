"""Token and cost ledger per stage, judge (or generator) and cell, from the judgments, the
generations and the judge-bias probes.

One call judges all criteria of a question, and every criterion row of that call repeats its
usage, so usage is taken once per (judge, question), never summed over criteria.

Cost is what the spend ledger (``<cache_dir>/spend.jsonl``) records as paid: a fresh call's
cost, and for an answer from the call cache the cost the ledger holds for its key. A call the
study uses more than once (two cells whose judge prompts are the same; a bias probe's base
request, which is its judge's own call) was paid once and is counted once: at its first use in
the stages' order (:data:`STAGES`: generation, judging, then the probes), whichever of the jobs
running at the same time happened to send it, so the ledger's stages match the estimate's
(``estimate_cost`` counts a base probe call under its judge). A call is ``paid_earlier`` only
when no job of this run sent it: an earlier attempt paid it before stopping at the budget cap or
being killed. The rows then add up to the spend ledger.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from bloomqg.store.frames import STATUS_NO_QUESTION

#: The stages whose calls cost money, in the order a shared call is counted (see the docstring).
STAGES = ("generation", "judging", "judge_bias")
LEDGER_COLUMNS = [
    "stage", "judge", "model", "dataset", "strategy", "questions", "requests", "cached", "paid_earlier",
    "prompt_tokens", "completion_tokens", "cost_usd",
]
_KEYS = ["stage", "judge", "model", "dataset", "strategy"]
_PER_CALL = [*_KEYS, "prompt_id", "asked", "called", "cached", "prompt_tokens", "completion_tokens", "cost_usd", "cache_key"]


def _once_per_call(per_call: pd.DataFrame) -> pd.DataFrame:
    """Count every cache key at its first use in stage order (see the module docstring): its
    cost and tokens there, and there the call that this run sent; every later use is an answer
    from the cache that costs nothing more."""
    rank = per_call["stage"].map({stage: i for i, stage in enumerate(STAGES)})
    per_call = per_call.assign(_rank=rank).sort_values("_rank", kind="stable").drop(columns="_rank")
    keyed = per_call["cache_key"].notna()
    first = keyed & ~per_call["cache_key"].duplicated(keep="first")
    repeated = keyed & ~first
    sent_now = set(per_call.loc[keyed & per_call["called"] & ~per_call["cached"], "cache_key"])
    by_this_run = per_call["cache_key"].isin(sent_now)
    per_call.loc[first & by_this_run, ["called", "cached"]] = [True, False]
    per_call.loc[repeated & per_call["called"], "cached"] = True
    per_call.loc[repeated, ["cost_usd", "prompt_tokens", "completion_tokens"]] = 0
    return per_call.sort_index()


def _summarise(per_call: pd.DataFrame) -> pd.DataFrame:
    per_call["asked"] = per_call["asked"].astype(bool)
    per_call["called"] = per_call["called"].astype(bool)
    per_call["cached"] = per_call["cached"].astype(bool)
    per_call["requests"] = per_call["called"] & ~per_call["cached"]
    per_call["paid_earlier"] = per_call["cached"] & pd.to_numeric(per_call["cost_usd"]).fillna(0.0).gt(0)
    ledger = (
        per_call.groupby(_KEYS, dropna=False, sort=False)
        .agg(
            questions=("asked", "sum"),
            requests=("requests", "sum"),
            cached=("cached", "sum"),
            paid_earlier=("paid_earlier", "sum"),
            prompt_tokens=("prompt_tokens", lambda s: pd.to_numeric(s).fillna(0).sum()),
            completion_tokens=("completion_tokens", lambda s: pd.to_numeric(s).fillna(0).sum()),
            cost_usd=("cost_usd", lambda s: pd.to_numeric(s).fillna(0.0).sum()),
        )
        .reset_index()
    )
    return ledger[LEDGER_COLUMNS]


def _judge_calls(frame: pd.DataFrame, stage: str, called_column: str) -> pd.DataFrame:
    """One row per call of a judgments-like frame (several criterion rows, one call)."""
    frame = frame if "cache_key" in frame.columns else frame.assign(cache_key=None)
    frame = frame if "status" in frame.columns else frame.assign(status=None)
    keys = ["judge", "model", "dataset", "strategy", "prompt_id"] + (["probe", "unit_order_key", "level_order_key"]
                                                                      if stage == "judge_bias" else [])
    if stage == "judge_bias":  # one call per probe group: the order probe permutes the lists
        frame = frame.assign(unit_order_key=frame["unit_order"].map(lambda v: "\x1f".join(map(str, v))),
                             level_order_key=frame["level_order"].map(lambda v: "\x1f".join(map(str, v))))
    per_call = (
        frame.groupby(keys, dropna=False, sort=True)
        .agg(
            # a prompt whose generation held no question was not put to the judge
            asked=("status", lambda s: bool((s != STATUS_NO_QUESTION).any())),
            called=(called_column, lambda s: bool(s.notna().any())),
            cached=("cached", lambda s: bool(s.fillna(False).any())),
            prompt_tokens=("n_prompt_tokens", "max"),
            completion_tokens=("n_completion_tokens", "max"),
            cost_usd=("cost_usd", "max"),
            cache_key=("cache_key", "first"),
        )
        .reset_index()
    )
    return per_call.assign(stage=stage)[_PER_CALL]


def _generation_calls(generations: pd.DataFrame) -> pd.DataFrame:
    """One row per call of the generators whose calls cost something (API generators)."""
    if generations.empty or "cost_usd" not in generations.columns or generations["cost_usd"].isna().all():
        return pd.DataFrame(columns=_PER_CALL)
    priced = generations[generations.groupby(["model", "dataset", "strategy"])["cost_usd"]
                         .transform(lambda s: s.notna().any())]
    return pd.DataFrame({
        "stage": "generation", "judge": None, "model": priced["model"], "dataset": priced["dataset"],
        "strategy": priced["strategy"], "prompt_id": priced["prompt_id"], "asked": True,
        "called": priced["raw_text"].notna(),
        "cached": priced["cached"].fillna(False).astype(bool),
        "prompt_tokens": priced["n_prompt_tokens"], "completion_tokens": priced["n_completion_tokens"],
        "cost_usd": priced["cost_usd"], "cache_key": priced["cache_key"],
    }).sort_values(["model", "dataset", "strategy", "prompt_id"], kind="stable")[_PER_CALL]


def study_ledger(
    *,
    generations: pd.DataFrame | None = None,
    judgments: pd.DataFrame | None = None,
    probes: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The study's ledger over every stage at once (a call two stages share counted once; see
    the module docstring): per stage × judge × model × dataset × strategy, questions, calls
    sent, answers from the cache (of them paid in an earlier attempt), tokens and cost.
    Rule-based and embedding judges show zero calls."""
    parts: list[pd.DataFrame] = []
    if generations is not None and len(generations):
        parts.append(_generation_calls(generations))
    if judgments is not None and len(judgments):
        parts.append(_judge_calls(judgments, "judging", "raw_text"))
    if probes is not None and len(probes):
        parts.append(_judge_calls(probes, "judge_bias", "cache_key"))  # offline judges: no call
    parts = [part for part in parts if len(part)]
    if not parts:
        return pd.DataFrame(columns=LEDGER_COLUMNS)
    per_call = pd.concat(parts, ignore_index=True)
    return _summarise(_once_per_call(per_call))


def ledger_from_judgments(judgments: pd.DataFrame) -> pd.DataFrame:
    """:func:`study_ledger` of the judging stage alone."""
    return study_ledger(judgments=judgments)


def ledger_from_generations(generations: pd.DataFrame) -> pd.DataFrame:
    """:func:`study_ledger` of the generation stage alone: generators without any cost are left out."""
    return study_ledger(generations=generations)


def stage_totals(ledger: pd.DataFrame, columns: Sequence[str] = ("requests", "cost_usd")) -> pd.DataFrame:
    """Per stage, the ledger's sums (what the estimate's roles are compared with)."""
    return ledger.groupby("stage")[list(columns)].sum()
