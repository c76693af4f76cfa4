"""What a set of API calls will cost, before any call (target ``estimate_cost``).

For one endpoint's requests: how many the call cache already answers, and for the rest the
estimated prompt and completion tokens and their cost at the entry's configured prices (batch
prices in ``mode: batch``). :func:`bloomqg.study.study_cost.estimate_study` builds the requests of every
API generator and API judge of a study, per cell, and sums them up with :func:`format_estimate`.

How tokens are estimated (no tokenizer is downloaded at run time):

* **prompt** — :func:`bloomqg.api.budget.estimate_prompt_tokens` (characters ÷ 4 plus chat
  framing) of the exact request the job will send, times the model's calibration ratio;
* **completion** — the mean completion of the model's paid calls, or, before any, the length of
  the answer the prompt itself shows (the rubric's worked example), at most ``max_tokens``;
  with neither, ``max_tokens`` (an upper bound);
* **calibration** — the spend ledger of finished runs under ``cache_dir``
  (``spend.jsonl``) records, per paid call, the real prompt tokens next to the estimate it had,
  and the completion tokens: their ratio and mean calibrate the next estimate for that model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from bloomqg.api.budget import SpendLedger, estimate_prompt_tokens
from bloomqg.api.cache import CallCache, call_cache_key
from bloomqg.inputs.chat import ChatRequest, DecodingParams
from bloomqg.inputs.specs import StudySpec

ESTIMATE_COLUMNS = [
    "role", "name", "model", "mode", "dataset", "strategy", "requests", "cached", "to_call",
    "prompt_tokens", "completion_tokens", "cost_usd", "basis",
]


@dataclass(frozen=True)
class Calibration:
    """Measured on a model's paid calls: real ÷ estimated prompt tokens, mean completion."""

    prompt_ratio: float
    completion_mean: float
    calls: int


def calibrations(ledger: SpendLedger) -> dict[str, Calibration]:
    """Per model, from the spend ledger lines that carry both the estimate and the usage."""
    sums: dict[str, list[float]] = {}
    for entry in ledger.entries():
        estimate, prompt, completion = (entry.get(k) for k in ("prompt_estimate", "prompt_tokens", "completion_tokens"))
        if not all(isinstance(v, int) and v >= 0 for v in (estimate, prompt, completion)) or not estimate:
            continue
        total = sums.setdefault(str(entry.get("model")), [0.0, 0.0, 0.0, 0.0])
        total[0] += prompt
        total[1] += estimate
        total[2] += completion
        total[3] += 1
    return {
        model: Calibration(prompt / estimate, completion / calls, int(calls))
        for model, (prompt, estimate, completion, calls) in sums.items()
    }


def shown_answer_tokens(messages: Sequence[Mapping[str, Any]]) -> int | None:
    """Tokens of the longest assistant message in the prompt (a worked example of the answer)."""
    lengths = [estimate_prompt_tokens([m]) for m in messages if m.get("role") == "assistant"]
    # estimate_prompt_tokens adds framing for one message and the reply: not part of an answer
    return max(lengths) - 6 if lengths else None


def estimate_calls(
    settings: Any,
    requests: Sequence[ChatRequest],
    params: DecodingParams,
    cache: CallCache | None,
    calibration: Calibration | None,
    counted: set[str] | None = None,
) -> dict[str, Any]:
    """Requests, cache hits, and for the calls still to make: tokens, cost, and the basis.

    ``counted``: the keys of calls an earlier row of the same estimate already pays for (a bias
    probe's base request is its judge's own call; two cells may share a judge prompt). They count
    as ``cached`` here, since the call cache answers them once the first is paid, and the keys
    this row pays for are added to it."""
    from bloomqg.api.client import OpenAICompatibleClient

    decoding = OpenAICompatibleClient._decoding(params)
    unique: dict[str, ChatRequest] = {}
    for request in requests:
        key = call_cache_key(settings.model, request.messages, response_schema=request.response_schema, **decoding)
        unique.setdefault(key, request)
    paid_elsewhere = {k for k in unique if counted is not None and k in counted}
    missing_keys = [k for k in unique if k not in paid_elsewhere and (cache is None or cache.get(k) is None)]
    missing = [unique[k] for k in missing_keys]
    if counted is not None:
        counted.update(missing_keys)
    prompt = sum(estimate_prompt_tokens(r.messages) for r in missing)
    max_tokens = decoding["max_tokens"]
    if calibration is not None:
        prompt = prompt * calibration.prompt_ratio
        completion = len(missing) * min(calibration.completion_mean, max_tokens)
        basis = f"calibrated on {calibration.calls} paid calls"
    else:
        shown = [shown_answer_tokens(r.messages) for r in missing]
        completion = sum(min(s, max_tokens) if s is not None else max_tokens for s in shown)
        basis = "characters/4; completion " + (
            "as the prompt's example answer" if shown and all(s is not None for s in shown)
            else "at max_tokens (upper bound)"
        )
    if paid_elsewhere:
        basis += f"; {len(paid_elsewhere)} paid by another row's call"
    prompt_tokens, completion_tokens = math.ceil(prompt), math.ceil(completion)
    cost = settings.cost(prompt_tokens, completion_tokens, batch=settings.mode == "batch")
    return {
        "model": settings.model, "mode": settings.mode, "requests": len(requests),
        "cached": len(unique) - len(missing), "to_call": len(missing),
        "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "cost_usd": cost, "basis": basis,
    }


def entry_caps(study: StudySpec) -> dict[str, float]:
    """Each spending cap and where it is set: the study's ``budget_usd`` and any API entry's own."""
    caps: dict[str, float] = {}
    if study.budget_usd is not None:
        caps["budget_usd"] = study.budget_usd
    for spec in study.api_entries():
        if spec.own_budget_usd is not None:
            caps[f"{spec.key}.budget_usd"] = spec.own_budget_usd
    return caps


def budget_lines(estimate_usd: float, spent_usd: float, caps: Mapping[str, float]) -> list[str]:
    """Per cap: what is spent against it (the spend ledger's total: every call through the cache
    directory counts against every cap), what is left, the estimate, and plainly whether the
    estimate fits. A cap set on one entry is checked against the whole estimate: an upper bound."""
    lines = []
    for where, cap in caps.items():
        remaining = max(cap - spent_usd, 0.0)
        head = (f"{where} ${cap:.4f}: spent ${spent_usd:.4f} (spend.jsonl), remaining ${remaining:.4f}, "
                f"this estimate ${estimate_usd:.4f}")
        if spent_usd + estimate_usd <= cap:
            lines.append(f"{head}: fits (${remaining - estimate_usd:.4f} to spare).")
        else:
            share = 100.0 * remaining / estimate_usd if estimate_usd else 0.0
            lines.append(
                f"{head}: DOES NOT FIT. The run will stop at the cap after about {share:.0f}% of the "
                f"estimated spend; raise {where} to at least ${spent_usd + estimate_usd:.4f} to finish "
                "(what is answered before the stop is cached and not paid again)."
            )
    return lines


def format_estimate(estimate: pd.DataFrame, caps: Mapping[str, float] | None = None, spent_usd: float = 0.0) -> str:
    """The estimate as a text table: per judge and generator, then the total, what the spend
    ledger holds and, per cap, whether the estimate fits in what is left of it."""
    caps = caps or {}
    if estimate.empty:
        return "estimate_cost: the study makes no API calls."
    per_name = (
        estimate.groupby(["role", "name", "model", "mode"], sort=False)
        .agg(requests=("requests", "sum"), cached=("cached", "sum"), to_call=("to_call", "sum"),
             prompt_tokens=("prompt_tokens", "sum"), completion_tokens=("completion_tokens", "sum"),
             cost_usd=("cost_usd", lambda s: None if s.isna().any() else float(s.sum())),
             basis=("basis", lambda s: "; ".join(dict.fromkeys(s))))
        .reset_index()
    )
    lines = [f"{'role':9} {'name':18} {'mode':5} {'requests':>9} {'cached':>8} {'to call':>8} "
             f"{'prompt tok':>11} {'compl. tok':>11} {'cost USD':>12}  basis"]
    for row in per_name.itertuples():
        cost = "unpriced" if row.cost_usd is None or pd.isna(row.cost_usd) else f"{row.cost_usd:.6f}"
        lines.append(f"{row.role:9} {row.name:18} {row.mode:5} {row.requests:9d} {row.cached:8d} {row.to_call:8d} "
                     f"{row.prompt_tokens:11d} {row.completion_tokens:11d} {cost:>12}  {row.basis}")
    priced = per_name["cost_usd"].dropna()
    total = float(priced.sum()) if len(priced) else 0.0
    lines.append(f"total: {int(per_name['to_call'].sum())} calls to make, about ${total:.6f}"
                 + ("" if len(priced) == len(per_name) else " (some entries have no prices)"))
    lines.append(f"already spent: ${spent_usd:.4f} in the spend ledger (paid calls through this cache directory)")
    lines += budget_lines(total, spent_usd, caps) if caps else ["no budget_usd cap is set"]
    return "\n".join(lines)
