"""What a study's API calls will cost, before any call (target ``estimate_cost``).

For every API generator and API judge, per cell: the exact requests its job will send (the
prompts of the cell; the judge's rubric over the generated questions, or the original questions
before generation), priced by :func:`bloomqg.api.estimate.estimate_calls` (how tokens are
estimated and calibrated is told there). It sits above the generators and judges whose requests
it rebuilds, beside :mod:`bloomqg.study.config`.

Judge requests are exact where the generations file exists; before generation, each prompt's
original question stands in for the question still to be generated (counted as not cached).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from bloomqg.annotation.panel_sample import draw_panel_sample, sample_size
from bloomqg.api.budget import SpendLedger
from bloomqg.api.cache import CallCache
from bloomqg.api.estimate import ESTIMATE_COLUMNS, Calibration, calibrations, estimate_calls
from bloomqg.inputs.chat import ChatRequest
from bloomqg.inputs.datasets import dataset_knowledge_units
from bloomqg.inputs.parsing import has_question
from bloomqg.judges.base import JudgeItem
from bloomqg.judges.bias.design import bias_sample, judge_bias_settings
from bloomqg.judges.bias.probe import probe_requests
from bloomqg.judges.llm import LLMJudge
from bloomqg.judges.rubric import load_rubric
from bloomqg.inputs.prompts import fill_later_pass, messages_from_json, prompt_passes
from bloomqg.inputs.specs import StudySpec


def estimate_study(
    study: StudySpec,
    cells: Sequence[Any],
    *,
    prompts: Mapping[tuple[str, str], pd.DataFrame],
    datasets: Mapping[str, pd.DataFrame],
    generations: Mapping[tuple[str, str, str], pd.DataFrame],
    cache_dir: str | Path,
    rubric_path: str | Path | None,
    panel_sample: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """One row per API generator or judge and cell (see the module docstring). ``panel_sample``
    (``{"judges": [...], "draw": PanelSampleSettings.draw_spec}``): those judges are priced on
    each cell's sample only, the draw their jobs make."""
    cache = CallCache(cache_dir) if Path(cache_dir).is_dir() else None
    measured = calibrations(SpendLedger(Path(cache_dir) / "spend.jsonl"))
    rows: list[dict[str, Any]] = []
    api_judges = {n: s for n, s in study.judges.items() if s.is_api}
    rubric = load_rubric(rubric_path) if api_judges else None
    generated_models = set()
    counted: set[str] = set()  # calls an earlier row pays for: each is estimated once
    for cell in cells:
        model_spec = study.models[cell.model]
        frame = prompts[(cell.dataset, cell.strategy)]
        if model_spec.is_api:
            generated_models.add(cell.model)
            settings = model_spec.api_client
            generated = generations.get((cell.dataset, cell.strategy, cell.model))
            parts = [estimate_calls(settings, requests, model_spec.decoding, cache, measured.get(settings.model),
                                    counted)
                     for requests in generation_requests(frame, generated)]
            row = dict(parts[0]) if len(parts) == 1 else _summed(parts, (
                f"{parts[0]['basis']}; {len(parts)} passes (later ones: the draft question stands in when not "
                "generated yet)"))
            rows.append({"role": "generator", "name": cell.model, "dataset": cell.dataset, "strategy": cell.strategy,
                         **row})
        if not api_judges:
            continue
        generated = generations.get((cell.dataset, cell.strategy, cell.model))
        if generated is not None:
            items = generated[generated["new_question"].map(has_question)]
            ids, questions, originals = items["prompt_id"], items["new_question"], items["original_question"]
        else:  # not generated yet: the original question stands in for the one to come
            ids, questions, originals = frame["prompt_id"], frame["original_question"], frame["original_question"]
        units = dataset_knowledge_units(datasets[cell.dataset])
        sampled = _panel_sample_items(panel_sample, generated, ids, questions, originals)
        for name, spec in api_judges.items():
            settings = spec.api_client
            judge = LLMJudge(None, units, study.domains[cell.dataset], template=rubric,  # type: ignore[arg-type]
                             decoding=spec.decoding)
            in_sample = panel_sample is not None and name in panel_sample["judges"]
            judged = sampled if in_sample else (ids, questions, originals)
            requests = judge.requests([JudgeItem(i, None, q, o) for i, q, o in zip(*judged)])
            row = estimate_calls(settings, requests, judge.decoding, cache, measured.get(settings.model), counted)
            if generated is None:
                row["basis"] += "; questions not generated yet"
            if in_sample:
                row["basis"] += (f"; panel_sample: {len(requests)} of {len(ids)} questions"
                                 + ("" if generated is not None else ", the first standing in for the draw"))
            rows.append({"role": "judge", "name": name, "dataset": cell.dataset, "strategy": cell.strategy, **row})
    rows += _probe_rows(study, cells, prompts=prompts, datasets=datasets, generations=generations,
                        cache=cache, measured=measured, rubric=rubric, counted=counted)
    return pd.DataFrame(rows, columns=ESTIMATE_COLUMNS)


def _panel_sample_items(panel_sample: Mapping[str, Any] | None, generated: pd.DataFrame | None,
                        ids: pd.Series, questions: pd.Series, originals: pd.Series) -> tuple[pd.Series, ...]:
    """The (ids, questions, originals) a panel_sample judge judges in a cell: the sample its job
    draws from the generations, or before generation as many prompts as it will draw."""
    if panel_sample is None:
        return ids, questions, originals
    if generated is not None:
        drawn = draw_panel_sample(generated, panel_sample["draw"])
        return drawn["prompt_id"], drawn["new_question"], drawn["original_question"]
    size = sample_size(len(ids), panel_sample["draw"])
    return ids.iloc[:size], questions.iloc[:size], originals.iloc[:size]


def generation_requests(prompts: pd.DataFrame, generated: pd.DataFrame | None) -> list[list[ChatRequest]]:
    """The requests of each pass of a cell's generation: the first pass's from the prompts;
    a later pass's with the question the previous pass wrote where the generations file holds
    it, else the original question standing in for the draft still to be written."""
    per_pass = [[ChatRequest(pid, messages_from_json(text, prompt_id=pid))
                 for pid, text in zip(prompts["prompt_id"], prompts["messages_json"])]]
    written: dict[str, list[dict[str, Any]]] = {}
    if generated is not None and "passes_json" in generated:
        written = {pid: json.loads(text) for pid, text in zip(generated["prompt_id"], generated["passes_json"])
                   if isinstance(text, str)}
    for row in prompts.to_dict("records"):
        for index, definition in enumerate(prompt_passes(row)[1:], start=1):
            previous = written.get(row["prompt_id"], [])
            if len(previous) >= index:
                if previous[index - 1].get("new_question") is None:
                    continue  # that pass wrote no question: the next one was never asked
                question, answer = previous[index - 1]["new_question"], previous[index - 1].get("raw_text") or ""
            else:
                question = answer = " ".join(str(row["original_question"]).split())
            while len(per_pass) <= index:
                per_pass.append([])
            per_pass[index].append(ChatRequest(row["prompt_id"], fill_later_pass(
                definition["messages"], previous_question=question, previous_answer=answer)))
    return per_pass


def _summed(parts: Sequence[Mapping[str, Any]], basis: str) -> dict[str, Any]:
    """One estimate row from several (a cell's passes, a probe's decodings): the counts and costs
    summed (the cost unknown if any part's is), the first part's model and mode."""
    costs = [p["cost_usd"] for p in parts]
    return {**{key: sum(p[key] for p in parts) for key in ("requests", "cached", "to_call", "prompt_tokens",
                                                           "completion_tokens")},
            "model": parts[0]["model"], "mode": parts[0]["mode"], "basis": basis,
            "cost_usd": None if any(c is None for c in costs) else float(sum(costs))}


def _probe_rows(
    study: StudySpec,
    cells: Sequence[Any],
    *,
    prompts: Mapping[tuple[str, str], pd.DataFrame],
    datasets: Mapping[str, pd.DataFrame],
    generations: Mapping[tuple[str, str, str], pd.DataFrame],
    cache: CallCache | None,
    measured: Mapping[str, Calibration],
    rubric: Any,
    counted: set[str],
) -> list[dict[str, Any]]:
    """Rows (role ``judge_bias``) for the probes' calls of the API judges ``judge_bias`` names:
    the base probe's calls are judge_questions' own, counted in the judges' rows (``counted``)
    and cached once a judged study ran, so they are estimated once."""
    bias = judge_bias_settings(study)
    if bias is None:
        return []
    # API judges only: then estimate_study has loaded the rubric
    probed = {n: study.judges[n] for n in bias.judges if study.judges[n].is_api}
    rows: list[dict[str, Any]] = []
    for cell in cells:
        generated = generations.get((cell.dataset, cell.strategy, cell.model))
        stand_in = generated is None
        if stand_in:  # not generated yet: the original question stands in
            frame = prompts[(cell.dataset, cell.strategy)]
            generated = frame.assign(new_question=frame["original_question"], dataset=cell.dataset,
                                     strategy=cell.strategy, model=cell.model)
        sample = bias_sample(generated, bias.items_per_cell, bias.seed)
        units = dataset_knowledge_units(datasets[cell.dataset])
        for name, spec in probed.items():
            settings = spec.api_client
            pairs = probe_requests(sample, spec.decoding, knowledge_units=units,
                                   domain=study.domains[cell.dataset], rubric=rubric, seed=bias.seed)
            parts = []
            for decoding in dict.fromkeys(d for _, d in pairs):
                same = [r for r, d in pairs if d == decoding]
                parts.append(estimate_calls(settings, same, decoding, cache, measured.get(settings.model), counted))
            if not parts:
                continue
            row = _summed(parts, parts[0]["basis"])
            if stand_in:
                row["basis"] += "; questions not generated yet"
            rows.append({"role": "judge_bias", "name": name, "dataset": cell.dataset, "strategy": cell.strategy, **row})
    return rows
