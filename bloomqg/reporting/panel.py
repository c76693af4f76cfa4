"""Who judged: one line per judge (what it is, how it rates, how often it agrees with the others
in this study) and the artefact warning for a judge that gives nearly one answer to everything.

A judge that answers "Apply" to every question decides the Bloom-level majority wherever one
other judge happens to agree, so CatCons then measures the judge, not the questions: the page
says so in the open, not in a collapsed note.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pandas as pd

from bloomqg.frames import BINARY_CRITERIA
from bloomqg.reporting.display import CRITERION_LABEL, CRITERION_PHRASE, is_missing

#: How each judge backend rates, in one clause.
BACKEND_DESCRIPTION: dict[str, str] = {
    "rules": "rules without a model: the paper's verb list for the Bloom level (the highest level whose verb the "
             "question uses) and text heuristics for the other criteria",
    "embedding": "sentence embeddings ({model}): the Bloom level of the most similar dataset questions and the "
                 "nearest knowledge unit; it does not rate readable or answerable",
    "hf": "a language model ({model}) run on this machine, asked the judging rubric and answering in JSON",
    "openai": "a language model ({model}) behind an API, asked the judging rubric and answering in JSON",
    "learned": "a classifier trained on the paper's published panel votes",
}
#: A judge giving one answer to at least this share of the questions it rates is an artefact risk:
#: of six levels or a dataset's units, 90% one answer is no rating; of yes/no, where most questions
#: may truly be readable, only a (nearly) constant answer is.
CONSTANT_SHARE = 0.9
CONSTANT_SHARE_BINARY = 0.98


def _model_of(name: str, entry: Mapping[str, Any], config: Mapping[str, Any]) -> str:
    if "model_ref" in entry:
        return str(entry["model_ref"])
    model = entry.get("model")
    if isinstance(model, Mapping):
        return str(model.get("package") or model.get("path") or name)
    return str(model or name)


def _pooled(rows: pd.DataFrame) -> tuple[str, float] | None:
    """(modal answer, its share) over every cell a judge rated a criterion in, weighted by items."""
    totals: dict[str, float] = {}
    for r in rows.itertuples(index=False):
        if not isinstance(r.vote_distribution, str) or is_missing(r.n_items):
            continue
        for category, share in json.loads(r.vote_distribution).items():
            totals[category] = totals.get(category, 0.0) + float(share) * int(r.n_items)
    if not totals:
        return None
    top = max(totals, key=lambda k: totals[k])
    return top, totals[top] / sum(totals.values())


def _answer(criterion: str, category: str) -> str:
    if criterion in BINARY_CRITERIA:
        return f"{CRITERION_LABEL[criterion].lower()}: {'yes' if category == '1' else 'no'}"
    return f"{CRITERION_LABEL[criterion].lower()}: {category}"


def _agreement(mine: pd.DataFrame) -> str:
    """"37% of Bloom levels and 50% of knowledge units": how often a judge agrees with the others'
    majority, on the criteria that have many answers (yes/no agreement is mostly prevalence)."""
    parts = []
    for criterion in ("bloom_level", "knowledge_units"):
        rows = mine[mine["criterion"] == criterion] if len(mine) else mine
        shares = (rows["agreement_with_others"].dropna() if len(rows) and "agreement_with_others" in rows
                  else pd.Series(dtype=float))
        if len(shares):
            parts.append(f"{100 * shares.mean():.0f}% of {CRITERION_PHRASE[criterion]}")
    return " and ".join(parts)


def judge_lines(config: Mapping[str, Any], reliability: pd.DataFrame) -> tuple[list[dict[str, str]], list[str]]:
    """([{name, description, agreement}] per judge of the config; the artefact warnings)."""
    judges = reliability[reliability["judge"].notna()] if len(reliability) else reliability
    configured = dict(config.get("judges") or {})
    # the judges whose votes the study holds: a release's are unnamed (judge 1 .. n), not the config's
    names = list(dict.fromkeys(judges["judge"].astype(str))) if len(judges) else list(configured)
    lines, artefacts = [], []
    for name in names:
        if name not in configured:
            lines.append({"name": name, "description": "One of the published panel's judges; the release gives each "
                          "question's votes in a fixed order but does not name the judge behind each.",
                          "agreement": _agreement(judges[judges["judge"] == name])})
            continue
        entry = configured[name] or {}
        backend = str(entry.get("backend", name))
        template = BACKEND_DESCRIPTION.get(backend, f"a {backend} judge")
        description = template.format(model=_model_of(name, entry, config)) + "."
        mine = judges[judges["judge"] == name] if len(judges) else judges
        constant = []
        for criterion in ("bloom_level", "knowledge_units", *sorted(BINARY_CRITERIA)):
            rows = mine[mine["criterion"] == criterion] if len(mine) else mine
            pooled = _pooled(rows) if len(rows) and "vote_distribution" in rows else None
            if pooled and pooled[1] >= (CONSTANT_SHARE_BINARY if criterion in BINARY_CRITERIA else CONSTANT_SHARE):
                constant.append(f"{_answer(criterion, pooled[0])} for {100 * pooled[1]:.0f}%")
        lines.append({"name": name, "description": description[0].upper() + description[1:],
                      "agreement": _agreement(mine)})
        if constant:
            artefacts.append(f"{name} ({', '.join(constant)})")
    return lines, artefacts
