"""Token and cost ledger per judge and cell, from the judgments files.

One call judges all criteria of a question, and every criterion row of that call repeats its
usage, so usage is taken once per (judge, question), never summed over criteria.
"""

from __future__ import annotations

import pandas as pd

LEDGER_COLUMNS = [
    "judge", "model", "dataset", "strategy", "questions", "requests", "cached",
    "prompt_tokens", "completion_tokens", "cost_usd",
]


def ledger_from_judgments(judgments: pd.DataFrame) -> pd.DataFrame:
    """Per judge × model × dataset × strategy: questions judged, calls made and answered from the
    cache, tokens and cost. Rule-based and embedding judges show zero calls."""
    if judgments.empty:
        return pd.DataFrame(columns=LEDGER_COLUMNS)
    keys = ["judge", "model", "dataset", "strategy"]
    per_call = (
        judgments.groupby(keys + ["prompt_id"], dropna=False)
        .agg(
            called=("raw_text", lambda s: bool(s.notna().any())),
            cached=("cached", lambda s: bool(s.fillna(False).any())),
            prompt_tokens=("n_prompt_tokens", "max"),
            completion_tokens=("n_completion_tokens", "max"),
            cost_usd=("cost_usd", "max"),
        )
        .reset_index()
    )
    per_call["requests"] = per_call["called"] & ~per_call["cached"]
    ledger = (
        per_call.groupby(keys, dropna=False)
        .agg(
            questions=("prompt_id", "size"),
            requests=("requests", "sum"),
            cached=("cached", "sum"),
            prompt_tokens=("prompt_tokens", lambda s: s.fillna(0).sum()),
            completion_tokens=("completion_tokens", lambda s: s.fillna(0).sum()),
            cost_usd=("cost_usd", lambda s: s.fillna(0.0).sum()),
        )
        .reset_index()
    )
    return ledger[LEDGER_COLUMNS]
