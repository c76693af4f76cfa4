"""Token and cost ledger per judge (or generator) and cell, from the judgments and generations.

One call judges all criteria of a question, and every criterion row of that call repeats its
usage, so usage is taken once per (judge, question), never summed over criteria.

Cost is what the spend ledger (``<cache_dir>/spend.jsonl``) records as paid: a fresh call's
cost, and for an answer from the call cache the cost the ledger holds for its key (an earlier
attempt paid it before stopping at the budget cap or being killed), counted under
``paid_earlier``. A call the study uses twice (two cells whose judge prompts are the same) was
paid once: its cost is counted at its first use only, so the rows add up to the ledger.
"""

from __future__ import annotations

import pandas as pd

LEDGER_COLUMNS = [
    "judge", "model", "dataset", "strategy", "questions", "requests", "cached", "paid_earlier",
    "prompt_tokens", "completion_tokens", "cost_usd",
]
_KEYS = ["judge", "model", "dataset", "strategy"]


def _once_per_call(per_call: pd.DataFrame) -> pd.DataFrame:
    """Zero the cost of every use of a cache key after its first: paid once, counted once."""
    keyed = per_call["cache_key"].notna()
    repeated = keyed & per_call["cache_key"].duplicated(keep="first")
    per_call.loc[repeated, "cost_usd"] = 0.0
    return per_call


def _summarise(per_call: pd.DataFrame) -> pd.DataFrame:
    per_call["requests"] = per_call["called"] & ~per_call["cached"]
    per_call["paid_earlier"] = per_call["cached"] & per_call["cost_usd"].fillna(0.0).gt(0)
    ledger = (
        per_call.groupby(_KEYS, dropna=False)
        .agg(
            questions=("prompt_id", "size"),
            requests=("requests", "sum"),
            cached=("cached", "sum"),
            paid_earlier=("paid_earlier", "sum"),
            prompt_tokens=("prompt_tokens", lambda s: s.fillna(0).sum()),
            completion_tokens=("completion_tokens", lambda s: s.fillna(0).sum()),
            cost_usd=("cost_usd", lambda s: s.fillna(0.0).sum()),
        )
        .reset_index()
    )
    return ledger[LEDGER_COLUMNS]


def ledger_from_judgments(judgments: pd.DataFrame) -> pd.DataFrame:
    """Per judge × model × dataset × strategy: questions judged, calls made, answers from the
    cache (of them paid in an earlier attempt), tokens and cost. Rule-based and embedding
    judges show zero calls."""
    if judgments.empty:
        return pd.DataFrame(columns=LEDGER_COLUMNS)
    frame = judgments if "cache_key" in judgments.columns else judgments.assign(cache_key=None)
    per_call = (
        frame.groupby(_KEYS + ["prompt_id"], dropna=False, sort=True)
        .agg(
            called=("raw_text", lambda s: bool(s.notna().any())),
            cached=("cached", lambda s: bool(s.fillna(False).any())),
            prompt_tokens=("n_prompt_tokens", "max"),
            completion_tokens=("n_completion_tokens", "max"),
            cost_usd=("cost_usd", "max"),
            cache_key=("cache_key", "first"),
        )
        .reset_index()
    )
    return _summarise(_once_per_call(per_call))


def ledger_from_generations(generations: pd.DataFrame) -> pd.DataFrame:
    """The same per generating model × dataset × strategy (``judge`` empty), for generators
    whose calls cost something (API generators); generators without any cost are left out."""
    if generations.empty or "cost_usd" not in generations.columns or generations["cost_usd"].isna().all():
        return pd.DataFrame(columns=LEDGER_COLUMNS)
    priced = generations[generations.groupby(["model", "dataset", "strategy"])["cost_usd"]
                         .transform(lambda s: s.notna().any())]
    per_call = pd.DataFrame({
        "judge": None, "model": priced["model"], "dataset": priced["dataset"], "strategy": priced["strategy"],
        "prompt_id": priced["prompt_id"], "called": priced["raw_text"].notna(),
        "cached": priced["cached"].fillna(False).astype(bool),
        "prompt_tokens": priced["n_prompt_tokens"], "completion_tokens": priced["n_completion_tokens"],
        "cost_usd": priced["cost_usd"], "cache_key": priced["cache_key"],
    }).sort_values(["model", "dataset", "strategy", "prompt_id"], kind="stable").reset_index(drop=True)
    return _summarise(_once_per_call(per_call))
