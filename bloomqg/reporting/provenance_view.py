"""Provenance, spend and usage as the report shows them: merged entries, ledger totals, tokens."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from bloomqg.reporting.display import StrategyLabels, is_missing, strategy_label
from bloomqg.reporting.tables.model import require_columns


def plain(value: Any) -> Any:
    """JSON-safe plain data (Snakemake's Config and other mappings become dicts)."""
    return json.loads(json.dumps(value, default=str))


def flatten(mapping: Mapping[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    """Nested mappings as sorted (dotted key, text) pairs; lists are shown as JSON, and so is a
    mapping keyed by data rather than names (a reply prefix's count under its text: a dotted key
    ending in '{"knowledge_unit": "' would read as a path and break across lines)."""
    items: list[tuple[str, str]] = []
    for key, value in mapping.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and all(re.fullmatch(r"[\w-]+", str(k)) for k in value):
            items += flatten(value, name + ".")
        else:
            items.append((name, value if isinstance(value, str) else json.dumps(value, default=str)))
    return items


def provenance_entries(entries: Sequence[Mapping[str, Any]], *, skip: Sequence[str] = ("package_versions",)) -> list[dict]:
    """Distinct provenance dictionaries as (title, [(key, value)]) for display; duplicates merged."""
    seen: dict[str, dict] = {}
    for entry in entries:
        entry = plain(dict(entry))
        shown = {k: v for k, v in entry.items() if k not in skip}
        key = json.dumps(shown, sort_keys=True)
        if key in seen:
            seen[key]["count"] += 1
            continue
        seen[key] = {"title": provenance_title(entry), "items": flatten(shown), "count": 1}
    return list(seen.values())


#: Provenance fields that name what an entry describes, in the order they are shown.
_TITLE_KEYS: tuple[str, ...] = (
    "judge", "model_name", "cell", "model", "generator.model", "dataset", "strategy", "stage", "prompt_hashes", "prompt_hash",
)


def code_versions(entries: Sequence[Mapping[str, Any]]) -> list[str]:
    """The distinct code versions (``git_commit``, shortened to 7 characters, "-dirty" kept) that
    made the files of ``entries``, in the order first met: more than one means a rerun remade only
    what a change touched, so arms compared side by side may come from different code."""
    versions: list[str] = []
    for entry in entries:
        commit = entry.get("git_commit")
        if not isinstance(commit, str) or not commit:
            continue
        short = commit[:7] + ("-dirty" if commit.endswith("-dirty") else "")
        if short not in versions:
            versions.append(short)
    return versions


def provenance_title(entry: Mapping[str, Any]) -> str:
    """A short label for a provenance entry from whichever naming fields it has."""
    values = dict(flatten(entry))
    parts = []
    for key in _TITLE_KEYS:
        value = values.get(key)
        if value in (None, "null", "[]") or value in parts:
            continue
        if key.startswith("prompt_hash"):
            value = "prompt " + value.strip('[]"').split('"')[0][:12]
        parts.append(value)
    return " · ".join(parts) or "entry"


def ledger_view(ledger: pd.DataFrame, strategy_labels: StrategyLabels | None = None) -> dict[str, Any]:
    """Per judge (and API generator: rows without a judge) totals and the full ledger rows
    (strategies by their labels), with a grand total of tokens and cost."""
    require_columns(ledger, ["judge", "model", "dataset", "strategy", "requests", "cached",
                             "prompt_tokens", "completion_tokens", "cost_usd"], "ledger")
    numeric = [c for c in ("questions", "requests", "cached", "paid_earlier", "prompt_tokens", "completion_tokens",
                           "cost_usd") if c in ledger.columns]
    frame = ledger.copy()
    frame["judge"] = frame["judge"].where(frame["judge"].notna(), "generator " + frame["model"].astype(str))
    probing = frame["stage"].eq("judge_bias") if "stage" in frame.columns else pd.Series(False, index=frame.index)
    if probing.any():  # a judge's bias probes are their own line: their calls are the probes'
        frame.loc[probing, "judge"] = frame.loc[probing, "judge"].astype(str) + " (bias probes)"
    for column in numeric:
        frame[column] = pd.to_numeric(frame[column], errors="coerce").fillna(0)
    frame["strategy"] = frame["strategy"].map(lambda s: s if is_missing(s) else strategy_label(str(s), strategy_labels))
    per_judge = frame.groupby("judge", sort=False)[numeric].sum().reset_index()
    total = {c: float(frame[c].sum()) for c in numeric}
    labels = [c for c in ("stage", "judge", "model", "dataset", "strategy") if c in frame.columns]
    return {"columns": [*labels, *numeric], "numeric": numeric,
            "rows": frame.to_dict("records"), "per_judge": per_judge.to_dict("records"), "total": total,
            "probes": bool(probing.any())}


def generation_usage(generations: pd.DataFrame, strategy_labels: StrategyLabels | None = None) -> list[dict[str, Any]]:
    """Tokens and latency of generation per model × dataset × strategy."""
    if generations is None or generations.empty:
        return []
    require_columns(generations, ["model", "dataset", "strategy", "n_prompt_tokens", "n_completion_tokens",
                                  "latency_s", "parse_status"], "generations")
    grouped = generations.groupby(["model", "dataset", "strategy"], sort=False)
    usage = grouped.agg(
        prompts=("parse_status", "size"),
        parsed=("parse_status", lambda s: int((s == "ok").sum())),
        prompt_tokens=("n_prompt_tokens", lambda s: int(pd.to_numeric(s, errors="coerce").fillna(0).sum())),
        completion_tokens=("n_completion_tokens", lambda s: int(pd.to_numeric(s, errors="coerce").fillna(0).sum())),
        latency_s=("latency_s", lambda s: float(pd.to_numeric(s, errors="coerce").fillna(0).sum())),
    ).reset_index()
    usage["strategy"] = usage["strategy"].map(lambda s: strategy_label(s, strategy_labels))
    return usage.to_dict("records")


def call_failures(judgments: pd.DataFrame | None, generations: pd.DataFrame | None) -> list[dict[str, Any]]:
    """Every judge and generator with failed calls (no answer: a judge's question with status
    ``error`` on every criterion, a generation with ``parse_status`` ``error``): who, how many of
    how many, and the commonest cause, for the report's overview."""
    failures: list[dict[str, Any]] = []
    if judgments is not None and len(judgments):
        require_columns(judgments, ["judge", "model", "dataset", "strategy", "prompt_id", "status", "reason"], "judgments")
        per_call = judgments.groupby(["judge", "model", "dataset", "strategy", "prompt_id"], sort=False).agg(
            failed=("status", lambda s: bool((s == "error").all())), reason=("reason", "first"))
        for judge, calls in per_call.groupby(level="judge", sort=False):
            failed = calls[calls["failed"]]
            if len(failed):
                cause = failed["reason"].fillna("no reason recorded").value_counts().index[0]
                failures.append({"who": f"judge {judge}", "failed": len(failed), "total": len(calls), "cause": str(cause)})
    if generations is not None and len(generations):
        for model, rows in generations.groupby("model", sort=False):
            failed = rows[rows["parse_status"] == "error"]
            if len(failed):
                cause = failed["parse_error"].fillna("no reason recorded").value_counts().index[0]
                failures.append({"who": f"generator {model}", "failed": len(failed), "total": len(rows), "cause": str(cause)})
    return failures
