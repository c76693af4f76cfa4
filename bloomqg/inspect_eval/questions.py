"""bloomqg's question writing as an Inspect task: ``bloomqg/questions``.

    inspect eval bloomqg/questions -T dataset=cs -T strategy=fgp --model MODEL

renders the prompts a study run from the config's folder would send (:func:`bloomqg.inputs.prompts.study_prompts`:
the same items, exemplars, templates, system message, seed and ``limit_items``), one sample per
prompt, and asks the model. A strategy with several passes runs them in turn, each later pass
filled with the previous pass's question and answer exactly as bloomqg's generation stage fills
it. The panel (:mod:`bloomqg.inspect_eval.panel`) scores the questions unless ``-T score=false``.

Each sample's ``id`` and ``metadata.prompt_id`` are the prompt's id, its metadata the cell
(``dataset``, ``strategy``) and the item's labels: a models entry ``backend: inspect`` whose
``logs`` name the run imports its questions into that study (:mod:`bloomqg.generation.inspect_source`).
``inspect eval-set`` over strategies and models works as for any task: one log per task and model.
"""

from __future__ import annotations

from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser
from inspect_ai.solver import Generate, TaskState, solver

import pandas as pd

from bloomqg.inputs.parsing import parse_generation
from bloomqg.inputs.prompts import fill_later_pass, messages_from_json, prompt_passes, study_prompts
from bloomqg.inspect_eval.panel import bloomqg_panel
from bloomqg.inspect_eval.study_inputs import StudyInputError, dataset_frame, load_study, require_dataset

_ROLES = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}
#: A sample's target when its item has no Bloom level (as the export writes it).
NO_LEVEL = "Uncategorized"


def task_prompts(config: str, dataset: str, strategy: str) -> pd.DataFrame:
    """The study's prompts of ``dataset`` under ``strategy`` (rule build_prompts' rows)."""
    study = load_study(config)
    require_dataset(study, dataset, config)
    if strategy not in study.datasets[dataset]["strategies"]:
        raise StudyInputError(f"bloomqg config {config}: dataset {dataset!r} runs strategies "
                              f"{study.datasets[dataset]['strategies']}, not {strategy!r}")
    return study_prompts(
        dataset_frame(config, dataset), strategy, study.strategy_params(strategy),
        seed=int(study.config["seed"]), domain=study.datasets[dataset]["domain"],
        system_path=study.config["prompts"].get("system"), limit_items=study.config.get("limit_items"),
        limit_items_by=study.config["limit_items_by"],
    )


def _plain(value: Any) -> Any:
    return value.tolist() if hasattr(value, "tolist") else value


def prompt_samples(prompts: pd.DataFrame, *, name: str, location: str) -> MemoryDataset:
    """One sample per prompts row, in its order: the rendered messages as input, the item's
    level as target, the prompt's id and the cell in the metadata."""
    samples = [
        Sample(
            id=row["prompt_id"],
            input=[_ROLES[m["role"]](content=m["content"])
                   for m in messages_from_json(row["messages_json"], prompt_id=row["prompt_id"])],
            target=row["original_bloom_level"] or NO_LEVEL,
            metadata={"prompt_id": row["prompt_id"], "item_id": row["item_id"], "dataset": row["dataset"],
                      "strategy": row["strategy"], "original_question": row["original_question"],
                      "original_bloom_level": row["original_bloom_level"],
                      "original_knowledge_units": list(_plain(row["original_knowledge_units"])),
                      "passes_json": row["passes_json"], "prompt_hash": row["prompt_hash"]},
        )
        for row in prompts.to_dict("records")
    ]
    return MemoryDataset(samples, name=name, location=location)


@solver
def bloomqg_passes():
    """Every pass of the sample's strategy: generate, then each later pass's messages filled with
    the previous answer's question, and generate again."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        passes = prompt_passes({"prompt_id": state.sample_id, "passes_json": state.metadata["passes_json"]})
        state = await generate(state)
        for previous, definition in zip(passes, passes[1:]):
            answer = state.output.completion
            question = parse_generation(answer, previous.get("answer_fields", []), knowledge_units=[]).new_question
            if not question:
                break  # as bloomqg's stage: a pass that wrote no question ends the passes
            for message in fill_later_pass(definition["messages"], previous_question=question, previous_answer=answer):
                state.messages.append(_ROLES[message["role"]](content=message["content"]))
            state = await generate(state)
        return state

    return solve


@task(name="questions")
def questions(dataset: str, strategy: str, config: str = "config.yaml", score: bool = True) -> Task:
    """bloomqg's prompts of one dataset and strategy, answered by the model under evaluation and
    (``score``) judged by bloomqg's panel.

    Args:
        dataset: a datasets entry of the config.
        strategy: one of the dataset's strategies.
        config: the bloomqg config (paths in it are read from its folder).
        score: score with ``bloomqg/bloomqg_panel`` (its offline judges; the ``grader`` role adds an LLM judge).
    """
    prompts = task_prompts(config, dataset, strategy)
    return Task(
        dataset=prompt_samples(prompts, name=f"{dataset}/{strategy}", location=str(config)),
        solver=bloomqg_passes(),
        scorer=bloomqg_panel(config=config, dataset=dataset) if score else None,
        metadata={"dataset": dataset, "strategy": strategy,
                  "strategy_prompt_hashes": sorted(set(prompts["prompt_hash"]))},
    )
