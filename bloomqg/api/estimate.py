"""What a study's API calls will cost, before any call (target ``estimate_cost``).

For every API generator and API judge, per cell: the calls it needs, how many the call cache
already answers, and for the rest the estimated prompt and completion tokens and their cost at
the entry's configured prices (batch prices in ``mode: batch``).

How tokens are estimated (no tokenizer is downloaded at run time):

* **prompt** — :func:`bloomqg.api.budget.estimate_prompt_tokens` (characters ÷ 4 plus chat
  framing) of the exact request the job will send, times the model's calibration ratio;
* **completion** — the mean completion of the model's paid calls, or, before any, the length of
  the answer the prompt itself shows (the rubric's worked example), at most ``max_tokens``;
  with neither, ``max_tokens`` (an upper bound);
* **calibration** — the spend ledger of finished runs under ``cache_dir``
  (``spend.jsonl``) records, per paid call, the real prompt tokens next to the estimate it had,
  and the completion tokens: their ratio and mean calibrate the next estimate for that model.

Judge requests are exact where the generations file exists; before generation, each prompt's
original question stands in for the question still to be generated (counted as not cached).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from bloomqg.api.budget import SpendLedger, estimate_prompt_tokens
from bloomqg.api.cache import CallCache, call_cache_key
from bloomqg.generation.base import ChatRequest, DecodingParams

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
) -> dict[str, Any]:
    """Requests, cache hits, and for the calls still to make: tokens, cost, and the basis."""
    from bloomqg.api.client import OpenAICompatibleClient

    decoding = OpenAICompatibleClient._decoding(params)
    unique: dict[str, ChatRequest] = {}
    for request in requests:
        key = call_cache_key(settings.model, request.messages, response_schema=request.response_schema, **decoding)
        unique.setdefault(key, request)
    missing = [r for k, r in unique.items() if cache is None or cache.get(k) is None]
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
    prompt_tokens, completion_tokens = math.ceil(prompt), math.ceil(completion)
    cost = settings.cost(prompt_tokens, completion_tokens, batch=settings.mode == "batch")
    return {
        "model": settings.model, "mode": settings.mode, "requests": len(requests),
        "cached": len(unique) - len(missing), "to_call": len(missing),
        "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "cost_usd": cost, "basis": basis,
    }


def estimate_study(
    config: Mapping[str, Any],
    cells: Sequence[Any],
    *,
    prompts: Mapping[tuple[str, str], pd.DataFrame],
    datasets: Mapping[str, pd.DataFrame],
    generations: Mapping[tuple[str, str, str], pd.DataFrame],
    cache_dir: str | Path,
    rubric_path: str | Path | None,
) -> pd.DataFrame:
    """One row per API generator or judge and cell (see the module docstring)."""
    from bloomqg.api.budget import with_study_budget
    from bloomqg.datasets import dataset_knowledge_units
    from bloomqg.generation.factory import decoding_params
    from bloomqg.generation.openai_api import client_settings_from_entry
    from bloomqg.judges.base import JudgeItem
    from bloomqg.judges.llm import LLMJudge, load_rubric
    from bloomqg.judges.registry import judge_backend
    from bloomqg.prompts import messages_from_json

    cache = CallCache(cache_dir) if Path(cache_dir).is_dir() else None
    measured = calibrations(SpendLedger(Path(cache_dir) / "spend.jsonl"))
    seed = config["seed"]
    rows: list[dict[str, Any]] = []
    api_judges = {n: s for n, s in config["judges"].items() if judge_backend(s["backend"]).api_entry}
    rubric = load_rubric(rubric_path) if api_judges else None
    generated_models = set()
    for cell in cells:
        model_spec = config["models"][cell.model]
        frame = prompts[(cell.dataset, cell.strategy)]
        if model_spec.get("backend") == "openai":
            generated_models.add(cell.model)
            settings = client_settings_from_entry(with_study_budget(model_spec, config.get("budget_usd")))
            requests = [
                ChatRequest(pid, messages_from_json(text, prompt_id=pid))
                for pid, text in zip(frame["prompt_id"], frame["messages_json"])
            ]
            params = decoding_params(model_spec.get("generation", {}), seed)
            rows.append({"role": "generator", "name": cell.model, "dataset": cell.dataset, "strategy": cell.strategy,
                         **estimate_calls(settings, requests, params, cache, measured.get(settings.model))})
        if not api_judges:
            continue
        generated = generations.get((cell.dataset, cell.strategy, cell.model))
        if generated is not None:
            has_question = generated["new_question"].map(lambda q: isinstance(q, str) and bool(q.strip()))
            items = generated[has_question]
            ids, questions, originals = items["prompt_id"], items["new_question"], items["original_question"]
        else:  # not generated yet: the original question stands in for the one to come
            ids, questions, originals = frame["prompt_id"], frame["original_question"], frame["original_question"]
        units = dataset_knowledge_units(datasets[cell.dataset])
        for name, spec in api_judges.items():
            settings = client_settings_from_entry(with_study_budget(spec, config.get("budget_usd")))
            judge = LLMJudge(None, units, config["datasets"][cell.dataset]["domain"], template=rubric,  # type: ignore[arg-type]
                             decoding=decoding_params(spec.get("generation"), seed, where=f"judges.{name}.generation"))
            requests = judge.requests([JudgeItem(i, None, q, o) for i, q, o in zip(ids, questions, originals)])
            row = estimate_calls(settings, requests, judge.decoding, cache, measured.get(settings.model))
            if generated is None:
                row["basis"] += "; questions not generated yet"
            rows.append({"role": "judge", "name": name, "dataset": cell.dataset, "strategy": cell.strategy, **row})
    return pd.DataFrame(rows, columns=ESTIMATE_COLUMNS)


def entry_caps(config: Mapping[str, Any]) -> dict[str, float]:
    """Each spending cap and where it is set: the study's ``budget_usd`` and any API entry's own."""
    caps: dict[str, float] = {}
    if config.get("budget_usd") is not None:
        caps["budget_usd"] = float(config["budget_usd"])
    for section in ("models", "judges"):
        for name, entry in (config.get(section) or {}).items():
            if entry.get("backend") == "openai" and entry.get("budget_usd") is not None:
                caps[f"{section}.{name}.budget_usd"] = float(entry["budget_usd"])
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
