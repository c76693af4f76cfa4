"""A study's cells as Inspect evaluation logs, readable in ``inspect view`` and ``samples_df``.

One ``.eval`` log per cell (model × dataset × strategy), built from the cell's Parquet files with
``inspect_ai.log``'s own types and written by its ``write_eval_log``; nothing here restates
Inspect's schema. What maps to what (docs/inspect.md):

- a sample per generated question: its ``id`` the prompt id, its ``input`` the source item's
  question, its ``target`` the item's Bloom level (``Uncategorized`` when it has none), its
  ``messages`` the rendered prompt and every pass's answer, its ``output`` the generated question
  (the raw answer when none was parsed), its ``metadata`` the item's level and units, the
  targets, the parse outcome and every pass;
- a score per judge and criterion (``<judge>/<criterion>``) with the judge's answer or reason as
  the explanation, and the strict majority per criterion (``vote/<criterion>``, ``vote/useful``);
  a missing value is scored with its status (``parse_failed``, ``tie`` ...), which a reader tells
  from a real one by ``metadata.missing``;
- the results: every metric of the cell with its interval and denominator; the eval spec: the
  model, its decoding settings, the strategy's prompt hash and bloomqg's version and commit.

The log's ids, its messages' ids and its timestamps derive from the cell's files, so the same
inputs give the same log (the same content: the zip's entries carry the time they were written).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from bloomqg.store.frames import CRITERIA
from bloomqg.metrics.registry import SPEC_BY_NAME
from bloomqg.inputs.prompts import fill_later_pass, messages_from_json, prompt_passes

#: The score of each criterion's strict majority is named ``vote/<criterion>``; a judge's
#: ``<judge>/<criterion>``.
VOTE_SCORER = "vote"
#: The results' headline: the share of usable questions (the paper's Table 5).
HEADLINE_METRIC = "usability"
#: What a sample's target is when the source item has no Bloom level.
NO_LEVEL = "Uncategorized"
#: The namespace of every exported log's task name, ``bloomqg/<dataset>/<strategy>/<model>``:
#: one name per cell, so the viewer's log list and ``evals_df`` tell the cells apart.
TASK_PREFIX = "bloomqg"


def cell_task_name(model: str, dataset: str, strategy: str) -> str:
    """The exported log's ``eval.task``: ``bloomqg/<dataset>/<strategy>/<model>``."""
    return f"{TASK_PREFIX}/{dataset}/{strategy}/{model}"


def inspect_model_name(model_spec: Mapping[str, Any], generation_provenance: Mapping[str, Any], model: str) -> str:
    """The cell's model as Inspect names models (``<provider>/<model>``): ``hf/<id>`` for an
    in-process model, ``openai/<id>`` for OpenAI's API and ``openai-api/<entry>/<id>`` for
    another OpenAI-compatible server (its ``base_url``), and for an imported run the model its
    logs name (one, or the first and how many more)."""
    backend, model_id = model_spec.get("backend", "hf"), model_spec.get("model", model)
    if backend == "inspect":
        names = list(dict.fromkeys(log["model"] for log in generation_provenance.get("inspect_logs") or []))
        if not names:
            raise ValueError(f"cell {model}: an imported cell's generations name no Inspect log (inspect_logs)")
        return names[0]
    if backend == "openai":
        return f"openai-api/{model}/{model_id}" if model_spec.get("base_url") else f"openai/{model_id}"
    return f"hf/{model_id}"


@dataclass(frozen=True)
class CellFrames:
    """One cell's files, read: what its log is built from."""

    model: str
    dataset: str
    strategy: str
    generations: pd.DataFrame
    prompts: pd.DataFrame
    judgments: pd.DataFrame  # every judge's rows, long format
    votes: pd.DataFrame
    metrics: pd.DataFrame
    generation_provenance: Mapping[str, Any]
    #: a hash of the cell's input files: the log's ids and timestamp derive from it
    content_hash: str
    #: when the cell's questions were written (its generations file's time, ISO 8601)
    created: str


def log_file_name(model: str, dataset: str, strategy: str) -> str:
    """``<model>/<dataset>/<strategy>.eval`` under the study's ``results/inspect``."""
    return f"{model}/{dataset}/{strategy}.eval"


def _plain(value: Any) -> Any:
    """A Parquet cell as JSON-able Python: lists for arrays, None for nulls and NaN."""
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


def _record(row: pd.Series) -> dict[str, Any]:
    return {key: _plain(value) for key, value in row.items()}


#: A score's value when the judge or the vote gave none: Inspect's own "unscored" (NaN), a
#: missing value in ``samples_df``'s columns and the viewer, not a red error; the reason is in
#: ``metadata.status`` / the explanation, and ``metadata.missing`` marks it.
NOT_RATED = math.nan


def score_answer(criterion: str, value: Any) -> str:
    """What the viewer's answer column shows of a criterion's value: the level, the units,
    yes / no, or "not rated"."""
    if value is None:
        return "not rated"
    if criterion == "knowledge_units":
        return "; ".join(value) or "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _judgment_score(row: Mapping[str, Any]) -> Any:
    from inspect_ai.scorer import Score

    criterion = row["criterion"]
    value = {"bloom_level": row["value_level"], "knowledge_units": row["value_units"]}.get(
        criterion, row["value_bool"])
    missing = value is None or row["status"] != "ok"
    return Score(
        value=NOT_RATED if missing else value,
        answer=f"not rated ({row['status']})" if missing else score_answer(criterion, value),
        explanation=row["raw_text"] or row["reason"],
        metadata={"judge": row["judge"], "criterion": criterion, "status": row["status"],
                  "reason": row["reason"], "missing": missing},
    )


def _vote_scores(vote: Mapping[str, Any]) -> dict[str, Any]:
    """The strict majority per criterion, ``vote/useful`` first: the first score of a sample is
    the one the viewer's sample list shows, and its answer the voted level and usefulness."""
    from inspect_ai.scorer import Score

    useful = vote["useful"]
    scores = {f"{VOTE_SCORER}/useful": Score(
        value=NOT_RATED if useful is None else useful,
        answer=f"{vote['bloom_level'] or 'no level'} · useful: {score_answer('useful', useful)}",
        explanation="unique, readable and answerable by majority" if useful else None,
        metadata={"missing": useful is None, "alpha_gated": vote["alpha_gated"]},
    )}
    for criterion in CRITERIA:
        value = vote[criterion]
        missing = value is None
        reason = vote[f"{criterion}_null_reason"]
        scores[f"{VOTE_SCORER}/{criterion}"] = Score(
            value=NOT_RATED if missing else value,
            answer=f"not rated ({reason or 'no majority'})" if missing else score_answer(criterion, value),
            explanation=reason,
            metadata={"votes": vote[f"{criterion}_votes"], "agreement": vote[f"{criterion}_agreement"],
                      "missing": missing, "null_reason": reason, "alpha_gated": vote["alpha_gated"]},
        )
    return scores


def _chat(messages: Sequence[Mapping[str, str]], prompt_id: str) -> list[Any]:
    """Inspect's chat messages, their ids derived from the prompt (Inspect's own are random: the
    same cell would give a different log each time)."""
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser

    kinds = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}
    return [kinds[m["role"]](id=f"{prompt_id}/{index}", content=m["content"]) for index, m in enumerate(messages)]


def _passes(generation: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The generation row's records of its passes (one per pass run); a row without them (an
    imported one) is its own one pass."""
    raw = generation.get("passes_json")
    if raw:
        return json.loads(raw)
    return [{"pass": "generate", "raw_text": generation["raw_text"], "new_question": generation["new_question"],
             "parse_status": generation["parse_status"], "parse_error": generation["parse_error"],
             "finish_reason": generation["finish_reason"]}]


def _conversation(prompt: Mapping[str, Any], records: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """The rendered prompt, then each pass's answer and the next pass's messages filled as the
    generation stage filled them."""
    definitions = prompt_passes(prompt)
    conversation = list(messages_from_json(prompt["messages_json"], prompt_id=prompt["prompt_id"]))
    for index, record in enumerate(records):
        if index > 0:
            previous = records[index - 1]
            conversation += fill_later_pass(definitions[index]["messages"],
                                            previous_question=previous["new_question"] or "",
                                            previous_answer=previous["raw_text"] or "")
        conversation.append({"role": "assistant", "content": record["raw_text"] or ""})
    return conversation


_STOP_REASONS = {"stop": "stop", "length": "max_tokens"}


def _sample(generation: Mapping[str, Any], prompt: Mapping[str, Any], judgments: Sequence[Mapping[str, Any]],
            vote: Mapping[str, Any], model: str) -> Any:
    from inspect_ai.log import EvalSample
    from inspect_ai.model import ModelOutput, ModelUsage

    records = _passes(generation)
    question = generation["new_question"]
    output = ModelOutput.from_content(
        model, question if question is not None else (generation["raw_text"] or ""),
        stop_reason=_STOP_REASONS.get(generation["finish_reason"], "unknown"),
        error=None if generation["parse_status"] != "error" else generation["parse_error"],
    )
    output.choices[0].message.id = f"{generation['prompt_id']}/output"
    if generation["n_prompt_tokens"] is not None and generation["n_completion_tokens"] is not None:
        output.usage = ModelUsage(input_tokens=generation["n_prompt_tokens"],
                                  output_tokens=generation["n_completion_tokens"],
                                  total_tokens=generation["n_prompt_tokens"] + generation["n_completion_tokens"])
    output.time = generation["latency_s"]
    scores = _vote_scores(vote)  # the votes first: the viewer's sample list shows the first score
    scores.update({f"{row['judge']}/{row['criterion']}": _judgment_score(row) for row in judgments})
    level = generation["original_bloom_level"]
    return EvalSample(
        id=generation["prompt_id"],
        epoch=1,
        input=generation["original_question"],
        target=level or NO_LEVEL,
        messages=_chat(_conversation(prompt, records), generation["prompt_id"]),
        output=output,
        scores=scores,
        metadata={
            "item_id": generation["item_id"],
            "original_bloom_level": level,
            "original_knowledge_units": generation["original_knowledge_units"],
            "target_bloom_level": prompt["target_bloom_level"],
            "target_knowledge_units": prompt["target_knowledge_units"],
            "new_question": question,
            "identified_bloom_level": generation["identified_bloom_level"],
            "identified_knowledge_units": generation["identified_knowledge_units"],
            "parse_status": generation["parse_status"],
            "parse_error": generation["parse_error"],
            "passes": [{key: record.get(key) for key in ("pass", "raw_text", "new_question", "parse_status",
                                                         "parse_error", "finish_reason")}
                       for record in records],
        },
    )


def _results(cell: CellFrames) -> Any:
    from inspect_ai.log import EvalMetric, EvalResults, EvalScore, HeadlineMetric

    scores = []
    for row in (_record(r) for _, r in cell.metrics.iterrows()):
        spec = SPEC_BY_NAME.get(row["metric"])
        label = spec.label if spec else row["metric"]
        metrics = {"value": EvalMetric(name="value", value=row["value"] if row["value"] is not None else math.nan)}
        for bound in ("ci_low", "ci_high"):
            if row[bound] is not None:
                metrics[bound] = EvalMetric(name=bound, value=row[bound])
        scores.append(EvalScore(
            name=row["metric"], scorer=TASK_PREFIX, scored_samples=row["n"],
            metrics=metrics,
            metadata={"label": label, "unit": spec.unit if spec else None, "n": row["n"],
                      "ci_method": row.get("ci_method"), "alpha_gated": row["alpha_gated"]},
        ))
    # the headline first: the viewer shows the first score's metrics in the log's header
    scores.sort(key=lambda score: score.name != HEADLINE_METRIC)
    return EvalResults(total_samples=len(cell.generations), completed_samples=len(cell.generations),
                       scores=scores,
                       # declared, so evals_df's headline columns name usability (not only the scorer)
                       headline=HeadlineMetric(scorer=TASK_PREFIX, score=HEADLINE_METRIC, metric="value")
                       if scores and scores[0].name == HEADLINE_METRIC else None)


def build_eval_log(cell: CellFrames, *, model_spec: Mapping[str, Any], decoding: Mapping[str, Any],
                   bloomqg_version: Mapping[str, Any]) -> Any:
    """The cell's ``EvalLog``: samples in the generations' order, results from its metrics."""
    from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalPlan, EvalSpec, EvalStats
    from inspect_ai.model import GenerateConfig

    prompts = {row["prompt_id"]: row for row in (_record(r) for _, r in cell.prompts.iterrows())}
    votes = {row["prompt_id"]: row for row in (_record(r) for _, r in cell.votes.iterrows())}
    judgments: dict[str, list[dict[str, Any]]] = {}
    for _, row in cell.judgments.iterrows():
        judgments.setdefault(row["prompt_id"], []).append(_record(row))
    model = inspect_model_name(model_spec, cell.generation_provenance, cell.model)
    samples = []
    for _, row in cell.generations.iterrows():
        generation = _record(row)
        pid = generation["prompt_id"]
        missing = [name for name, table in (("prompts", prompts), ("votes", votes)) if pid not in table]
        if missing:
            raise ValueError(f"cell {cell.model}/{cell.dataset}/{cell.strategy}: generation {pid} has no row in "
                             f"its {' and '.join(missing)}")
        samples.append(_sample(generation, prompts[pid], judgments.get(pid, []), votes[pid], model))
    prompt_hashes = sorted({row["prompt_hash"] for row in prompts.values()})
    eval_id = cell.content_hash[:22]
    spec = EvalSpec(
        eval_id=eval_id, run_id=eval_id, created=cell.created,
        task=cell_task_name(cell.model, cell.dataset, cell.strategy), task_id=eval_id, task_version=0,
        task_display_name=f"{cell.model} · {cell.dataset} · {cell.strategy}",
        # the viewer's log list shows the task args: the study's model name tells cells apart
        task_attribs={}, task_args={"model": cell.model, "dataset": cell.dataset, "strategy": cell.strategy},
        dataset=EvalDataset(name=cell.dataset, samples=len(samples),
                            sample_ids=[sample.id for sample in samples]),
        model=model,
        model_generate_config=GenerateConfig(
            temperature=decoding.get("temperature"), top_p=decoding.get("top_p"),
            max_tokens=decoding.get("max_new_tokens"), seed=decoding.get("seed")),
        model_args={key: value for key, value in model_spec.items() if key != "generation"},
        config=EvalConfig(),
        packages={"bloomqg": str(bloomqg_version.get("version"))},
        metadata={"bloomqg": dict(bloomqg_version), "model_name": cell.model, "dataset": cell.dataset,
                  "strategy": cell.strategy, "strategy_prompt_hashes": prompt_hashes,
                  "decoding": dict(decoding), "generator": cell.generation_provenance.get("generator"),
                  "content_hash": cell.content_hash},
    )
    return EvalLog(
        status="success", eval=spec, plan=EvalPlan(name=cell.strategy), results=_results(cell),
        stats=EvalStats(started_at=cell.created, completed_at=cell.created), samples=samples,
    )


def read_cell(model: str, dataset: str, strategy: str, *, generations: str | Path, prompts: str | Path,
              judgments: Sequence[str | Path], votes: str | Path, metrics: str | Path) -> CellFrames:
    """One cell's files, read and hashed."""
    from bloomqg.store.frames import GENERATIONS, JUDGMENTS, METRICS, PROMPTS, VOTES
    from bloomqg.store.parquet_io import read_frame, read_frames, read_provenance

    paths = [Path(p) for p in (generations, prompts, *judgments, votes, metrics)]
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.read_bytes())
    provenance = read_provenance(generations)
    created = provenance.get("created") or pd.Timestamp(Path(generations).stat().st_mtime, unit="s", tz="UTC").isoformat()
    cell_metrics = read_frame(metrics, METRICS)
    cell_metrics = cell_metrics[(cell_metrics["model"] == model) & (cell_metrics["dataset"] == dataset)
                                & (cell_metrics["strategy"] == strategy)]
    return CellFrames(
        model=model, dataset=dataset, strategy=strategy,
        generations=read_frame(generations, GENERATIONS), prompts=read_frame(prompts, PROMPTS),
        judgments=read_frames(judgments, JUDGMENTS) if judgments else pd.DataFrame(columns=JUDGMENTS.names),
        votes=read_frame(votes, VOTES), metrics=cell_metrics, generation_provenance=provenance,
        content_hash=digest.hexdigest(), created=created,
    )


def write_cell_log(cell: CellFrames, path: str | Path, **spec: Any) -> Path:
    """Build the cell's log and write it with ``inspect_ai.log.write_eval_log`` (format from
    the ``.eval`` suffix), through a temporary name so a reader never sees half a log."""
    from inspect_ai.log import write_eval_log

    from bloomqg.store.atomic import atomic_target

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    log = build_eval_log(cell, **spec)
    with atomic_target(path) as tmp:
        write_eval_log(log, str(tmp), format="eval")
    return path



def writer_version() -> dict[str, Any]:
    """bloomqg's version and commit, and inspect_ai's, as the log records them."""
    from importlib.metadata import version

    from bloomqg.store.provenance import git_commit

    return {"version": version("bloomqg"), "git_commit": git_commit(), "inspect_ai": version("inspect_ai")}
