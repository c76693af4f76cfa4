"""Who judged: one line per judge (what it is, how it rates, how often it agrees with the others
in this study) and the artefact warning for a judge that gives nearly one answer to everything.

A judge that answers "Apply" to every question decides the Bloom-level majority wherever one
other judge happens to agree, so CatCons then measures the judge, not the questions: the page
says so in the open, not in a collapsed note.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from bloomqg.store.frames import BINARY_CRITERIA
from bloomqg.reporting.display import CRITERION_LABEL, CRITERION_PHRASE, is_missing, strategy_label
from bloomqg.reporting.facts import judge_means
# a judge giving one answer to at least these shares of the questions it rates is an artefact
# risk: one threshold with the per-judge flags of "Can these judges be trusted?"
from bloomqg.voting.diagnostics import CONSTANT_SHARE, CONSTANT_SHARE_BINARY, modal_of

#: A judge giving one Bloom level to at least this share of the questions (short of constant)
#: leans on it: the artefact warning says which originals that favours.
LEANING_SHARE = 0.75
#: How :func:`modal_share` names a judge's answer when each cell has its own most frequent one.
PER_CELL = "one answer per cell"

#: How each judge backend rates, in one clause.
BACKEND_DESCRIPTION: dict[str, str] = {
    "rules": "no model: the Bloom level from the paper's list of verbs per level (the highest level whose verb the "
             "question uses), and simple checks of the text for the rest (length, a question mark, no copy of the "
             "original by shared words or characters)",
    "embedding": "a small text-similarity model ({model}) that turns sentences into numbers: the level of the most "
                 "similar dataset questions, and the nearest knowledge unit; it does not rate readable or answerable",
    "hf": "a language model ({model}) run on this machine, given the judging rubric a person would get",
    "openai": "a language model ({model}) reached over an API (a paid model service), given the judging rubric",
    "learned": "a classifier trained on the paper's published panel votes",
}


def _model_of(name: str, entry: Mapping[str, Any], config: Mapping[str, Any]) -> str:
    if "model_ref" in entry:
        return str(entry["model_ref"])
    model = entry.get("model")
    if isinstance(model, Mapping):
        return str(model.get("package") or model.get("path") or name)
    return str(model or name)


def self_judges(config: Mapping[str, Any], writers: Sequence[str]) -> list[tuple[str, str]]:
    """(judge, writer) for each judge that is one of the models that wrote the questions (its
    ``model_ref``, or the same model id): it rates its own questions."""
    models = dict(config.get("models") or {})
    ids = {name: str((models.get(name) or {}).get("model")) for name in writers}
    found = []
    for judge, entry in (config.get("judges") or {}).items():
        entry = entry or {}
        for writer in writers:
            if entry.get("model_ref") == writer or (entry.get("model") and str(entry.get("model")) == ids[writer]):
                found.append((str(judge), str(writer)))
    return found


def modal_share(rows: pd.DataFrame) -> tuple[str, float] | None:
    """(its answer, the share of questions it gave its cell's one most frequent answer to), over
    every cell a judge rated a criterion in, weighted by items: a judge that names one unit per
    dataset (each dataset has its own units) is as constant as one that names one level everywhere."""
    modal: dict[str, float] = {}
    kept = total = 0.0
    for r in rows.itertuples(index=False):
        found = modal_of(r.vote_distribution)
        if found is None or is_missing(r.n_items):
            continue
        top, share = found
        kept += share * int(r.n_items)
        total += int(r.n_items)
        modal[top] = modal.get(top, 0.0) + share * int(r.n_items)
    if not total:
        return None
    answer = (max(modal, key=lambda k: modal[k]) if len(modal) == 1
              else f"{PER_CELL} (e.g. {max(modal, key=lambda k: modal[k])})")
    return answer, kept / total


def _constant_cells(rows: pd.DataFrame, criterion: str, share: float) -> list[str]:
    """"Analyze in social · CoT" ("yes in math · FGP" for a yes/no criterion): the cells where a
    judge gives one answer to at least ``share`` of its votes on ``criterion`` (``rows``: one row
    per cell)."""
    return [f"{_category(criterion, found[0])} in {r.dataset} · {strategy_label(str(r.strategy))}"
            for r in rows.itertuples(index=False)
            if (found := modal_of(getattr(r, "vote_distribution", None))) and found[1] >= share]


def copies_voted_unique(votes: pd.DataFrame, reliability: pd.DataFrame,
                        judges: Mapping[str, Any] | None = None) -> tuple[int, int]:
    """(questions the panel voted unique that the rules judge's copy measures call a copy of their
    original, questions voted unique), over the cells where the panel's agreement on Unique passed
    the gate: there the judges concur, which does not make the questions new. The measures and
    thresholds are the rules judge's (token Jaccard, character ratio), with the study's rules
    entry's thresholds where it has one."""
    from bloomqg.judges.registry import judge_backend
    from bloomqg.judges.rules import char_ratio, is_copy, token_jaccard
    from bloomqg.voting.agreement import RELIABLE

    if not len(votes) or not len(reliability) or "gate_status" not in reliability:
        return 0, 0
    panel = reliability[reliability["judge"].isna() & (reliability["criterion"] == "unique")
                        & (reliability["gate_status"] == RELIABLE)]
    passed = set(zip(panel["model"], panel["dataset"], panel["strategy"]))
    entry = next((dict(e) for e in (judges or {}).values() if (e or {}).get("backend") == "rules"), {})
    rules = judge_backend("rules").with_defaults(entry)
    kept = votes[[cell in passed for cell in zip(votes["model"], votes["dataset"], votes["strategy"])]]
    unique = kept[kept["unique"].eq(True) & kept["new_question"].notna() & kept["original_question"].notna()]
    copies = sum(is_copy(token_jaccard(q, o), char_ratio(q, o), max_token_jaccard=float(rules["max_token_jaccard"]),
                         max_char_ratio=float(rules["max_char_ratio"]))
                 for q, o in zip(unique["new_question"], unique["original_question"]))
    return int(copies), len(unique)


def level_leanings(reliability: pd.DataFrame) -> list[tuple[str, str, float]]:
    """(judge, level, share) for each judge that gives one Bloom level to at least
    :data:`LEANING_SHARE` of the questions, pooled over cells: that level wins wherever one other
    judge agrees, so CatCons favours originals at it."""
    judges = reliability[reliability["judge"].notna()] if len(reliability) else reliability
    if not len(judges) or "vote_distribution" not in judges:
        return []
    out = []
    for name in dict.fromkeys(judges["judge"].astype(str)):
        rows = judges[(judges["judge"] == name) & (judges["criterion"] == "bloom_level")]
        pooled = modal_share(rows) if len(rows) else None
        if pooled and pooled[1] >= LEANING_SHARE and not pooled[0].startswith(PER_CELL):
            out.append((name, pooled[0], pooled[1]))
    return out


def _category(criterion: str, category: str) -> str:
    """A vote as the page says it: "yes" / "no" for a yes/no criterion, else the category itself."""
    return ("yes" if category == "1" else "no") if criterion in BINARY_CRITERIA else category


def _answer(criterion: str, category: str) -> str:
    return f"{CRITERION_LABEL[criterion].lower()}: {_category(criterion, category)}"


def _agreement(mine: pd.DataFrame) -> str:
    """"37% of Bloom levels and 50% of knowledge units": how often a judge agrees with the strict
    majority of the *other* judges (its own vote left out, where they have one), on the criteria
    with many answers (yes/no agreement is mostly prevalence)."""
    means = judge_means(mine, "agreement_with_others", ("criterion",)) if len(mine) else pd.Series(dtype=float)
    return " and ".join(f"{means[criterion]:.0f}% of {CRITERION_PHRASE[criterion]}"
                        for criterion in ("bloom_level", "knowledge_units") if criterion in means)


#: A dtype as the page says it (the setup section says "full precision (float32)").
PRECISION = {"float32": "full precision (float32)", "bfloat16": "half precision (bfloat16)",
             "float16": "half precision (float16)"}


def judge_dtypes(judgment_provenance: Sequence[Mapping[str, Any]],
                 generation_provenance: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, str]]:
    """judge → (the dtype its model ran in, the dtype that model wrote in), for a judge that ran its
    borrowed weights in another dtype than they wrote in (an hf judge's own ``dtype``), by the files'
    provenance: the page says which numbers the judge's verdicts came from."""
    wrote = {str(record.get("model_name")): (record.get("generator") or {}).get("dtype")
             for record in generation_provenance}
    found: dict[str, tuple[str, str]] = {}
    for record in judgment_provenance:
        ran = (record.get("text_generator") or {}).get("dtype")
        model = (record.get("judge_spec") or {}).get("model_ref")
        if ran and wrote.get(str(model)) and ran != wrote[str(model)]:
            found[str(record.get("judge"))] = (str(ran), str(wrote[str(model)]))
    return found


def judge_lines(config: Mapping[str, Any], reliability: pd.DataFrame,
                scoring_judges: frozenset[str] = frozenset(),
                dtypes: Mapping[str, tuple[str, str]] | None = None) -> tuple[list[dict[str, str]], list[str]]:
    """([{name, description, agreement}] per judge of the config; the artefact warnings).
    ``scoring_judges``: the LLM judges that read each verdict from the model's scores of the answer
    choices (their judgments carry ``choice_probs``), said so: they write no text, so no tokens.
    ``dtypes``: :func:`judge_dtypes`."""
    judges = reliability[reliability["judge"].notna()] if len(reliability) else reliability
    configured = dict(config.get("judges") or {})
    # the judges whose votes the study holds: a release's are unnamed (judge 1 .. n), not the config's
    names = list(dict.fromkeys(judges["judge"].astype(str))) if len(judges) else list(configured)
    lines, artefacts = [], []
    leanings = {judge: (level, share) for judge, level, share in level_leanings(reliability)}
    for name in names:
        if name not in configured:
            lines.append({"name": name, "description": "One of the published panel's judges; the release gives each "
                          "question's votes in a fixed order but does not name the judge behind each.",
                          "agreement": _agreement(judges[judges["judge"] == name])})
            continue
        entry = configured[name] or {}
        backend = str(entry.get("backend", name))
        template = BACKEND_DESCRIPTION.get(backend, f"a {backend} judge")
        description = template.format(model=_model_of(name, entry, config))
        if name in scoring_judges:
            description += (", which picks each answer by the scores the model gives the answer choices (it writes no "
                            "text, so its generation settings go unused)")
        if name in (dtypes or {}):
            ran, wrote = (dtypes or {})[name]
            description += (f", its weights run in {PRECISION.get(ran, ran)}, the model's questions written in "
                            f"{PRECISION.get(wrote, wrote)}")
        description += "."
        mine = judges[judges["judge"] == name] if len(judges) else judges
        constant = []
        for criterion in ("bloom_level", "knowledge_units", *sorted(BINARY_CRITERIA)):
            rows = mine[mine["criterion"] == criterion] if len(mine) else mine
            pooled = modal_share(rows) if len(rows) and "vote_distribution" in rows else None
            share = CONSTANT_SHARE_BINARY if criterion in BINARY_CRITERIA else CONSTANT_SHARE
            if pooled and pooled[1] >= share:
                constant.append(f"{_answer(criterion, pooled[0])} for {100 * pooled[1]:.0f}%")
            elif cells := _constant_cells(rows, criterion, share):
                # not constant pooled, but in some cells: there CatCons (KnowCov, Usability) reads the
                # judge wherever one other judge agrees (the per-judge table marks those cells too)
                constant.append(f"{CRITERION_LABEL[criterion].lower()}: one answer for ≥ {share:.0%} in "
                                f"{len(cells)} of {len(rows)} cells ({'; '.join(cells)})")
        lines.append({"name": name, "description": description[0].upper() + description[1:],
                      "agreement": _agreement(mine)})
        level, share = leanings.get(name, ("", 0.0))
        if level and share < CONSTANT_SHARE:  # not constant (said above), but one level for most questions
            constant.append(f"Bloom level: {level} for {100 * share:.0f}%, so CatCons favours originals at {level}")
        if constant:
            artefacts.append(f"{name} ({', '.join(constant)})")
    return lines, artefacts


def study_setup(config: Mapping[str, Any], all_metrics: pd.DataFrame,
                strategy_labels: Mapping[str, str] | None = None,
                generation_provenance: Sequence[Mapping[str, Any]] = ()) -> dict[str, list[dict[str, Any]]]:
    """What wrote the questions and on what: each model of the metrics with the model id its config
    entry names, how its replies were drawn and whether they were begun for it (``response_prefill``:
    both as its generation files record them, what ran rather than what a config says), and each dataset with its domain and the strategies run on it (a dataset run
    under one strategy is said to be, so a missing comparison is not a surprise)."""
    from bloomqg.reporting.display import ordered_unique

    models_config = dict(config.get("models") or {})
    datasets_config = dict(config.get("datasets") or {})
    ran: dict[str, list[Mapping[str, Any]]] = {}
    for record in generation_provenance:
        ran.setdefault(str(record.get("model_name")), []).append(record)
    models = []
    for name in ordered_unique(all_metrics["model"]):
        entry = models_config.get(name) or {}
        model_id = entry.get("model") if isinstance(entry, Mapping) else None
        records = ran.get(str(name), [])
        draws = {_draw(record.get("decoding")) for record in records}
        gguf = entry.get("gguf") if isinstance(entry, Mapping) else None
        converted = any((record.get("generator") or {}).get("weights_kind") == "converted_gguf" for record in records)
        bits = re.search(r"\.Q(\d+)_", str((gguf or {}).get("file", "")) if isinstance(gguf, Mapping) else "")
        models.append({"name": str(name), "model": str(model_id) if model_id and model_id != name else "",
                       # the weights that wrote, when not the model id's own: a compressed copy writes otherwise
                       "weights": (f"from a {bits.group(1)}-bit compressed copy (GGUF), expanded to full "
                                   f"precision ({(records[0].get('generator') or {}).get('dtype', 'float32')}) to run"
                                   if bits else "from a GGUF copy")
                       if converted else "",
                       "draw": draws.pop() if len(draws) == 1 else "",  # files that differ: no one phrase
                       "prefill": bool(records) and all(
                           (record.get("response_prefill") or {}).get("enabled") for record in records)})
    datasets = []
    for name in ordered_unique(all_metrics["dataset"]):
        entry = datasets_config.get(name) or {}
        ran = ordered_unique(all_metrics.loc[all_metrics["dataset"] == name, "strategy"])
        datasets.append({"name": str(name), "domain": str(entry.get("domain", "")) if isinstance(entry, Mapping) else "",
                         "strategies": ", ".join(strategy_label(s, strategy_labels) for s in ran),
                         "one": "only" if len(ran) == 1 else ""})
    return {"models": models, "datasets": datasets}


def _draw(decoding: object) -> str:
    """How each original's one reply was drawn, from a generation file's recorded ``decoding``: a
    sampled reply is one random draw, which a reader should know before reading one question."""
    if not isinstance(decoding, Mapping):
        return ""
    temperature = decoding.get("temperature")
    if decoding.get("do_sample") is False or temperature in (0, 0.0):
        return "one reply per original, the most likely (greedy)"
    if temperature is None:
        return ""
    return f"one random draw per original, at temperature {temperature:g}"  # the template links the term


#: A size in a model's name or id: "135m", "135M", "7b", "1.5B" (millions or billions of parameters).
_SIZE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)([mb])(?![a-z])", re.IGNORECASE)
#: Below this many parameters a writer is a stand-in for trying the workflow, not a model to judge.
SMALL_MODEL_PARAMETERS = 1e9


def parameters_in_name(*names: str) -> float | None:
    """The parameter count a model's name or id states ("smollm2-135m": 1.35e8), else None."""
    for name in names:
        for part in re.split(r"[-_/ ]", str(name)):
            if match := _SIZE.fullmatch(part):
                return float(match.group(1)) * (1e6 if match.group(2).lower() == "m" else 1e9)
    return None


def small_writers(config: Mapping[str, Any], writers: Sequence[str]) -> list[str]:
    """The writers whose name or model id states fewer than :data:`SMALL_MODEL_PARAMETERS`
    parameters: the Answer says their run tries the workflow out."""
    models = dict(config.get("models") or {})
    small = []
    for name in writers:
        entry = models.get(name) or {}
        model_id = entry.get("model") if isinstance(entry, Mapping) and isinstance(entry.get("model"), str) else ""
        size = parameters_in_name(name, model_id)
        if size is not None and size < SMALL_MODEL_PARAMETERS:
            small.append(str(name))
    return small
