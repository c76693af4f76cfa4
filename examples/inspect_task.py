"""An Inspect task that asks any Inspect model for bloomqg's questions (docs/inspect.md).

Its samples are the rows of a bloomqg prompts file (``results/prompts/<dataset>/<strategy>.parquet``,
written by the study's build_prompts rule): each sample's input is the rendered prompt of one
(item, strategy), CoT, FGP or a strategy of the config, system message included, and its
metadata carries the ``prompt_id`` bloomqg's import maps the answer back by. A strategy with
several passes runs them in turn, each later pass filled with the previous pass's question and
answer exactly as bloomqg's generation stage fills it. The task scores nothing: bloomqg's judges do.

    inspect eval examples/inspect_task.py -T prompts=results/prompts/cs/fgp.parquet \\
        --model openai/gpt-4o-mini --log-dir inspect-logs

Then point a models entry at the logs (``backend: inspect``, ``logs: inspect-logs``) and run the
study: the answers are parsed, judged, voted, scored and reported as if bloomqg had asked.
"""

from __future__ import annotations

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser
from inspect_ai.solver import Generate, TaskState, solver

from bloomqg.store.frames import PROMPTS
from bloomqg.store.parquet_io import read_frame
from bloomqg.inputs.parsing import parse_generation
from bloomqg.inputs.prompts import fill_later_pass, messages_from_json, prompt_passes

_ROLES = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}


def prompt_samples(prompts: str, limit: int | None = None) -> MemoryDataset:
    """One sample per row of a bloomqg prompts file, in its order."""
    frame = read_frame(prompts, PROMPTS)
    rows = frame.to_dict("records")[:limit]
    samples = [
        Sample(
            id=row["prompt_id"],
            input=[_ROLES[m["role"]](content=m["content"])
                   for m in messages_from_json(row["messages_json"], prompt_id=row["prompt_id"])],
            target=row["original_bloom_level"] or "Uncategorized",
            metadata={"prompt_id": row["prompt_id"], "item_id": row["item_id"], "dataset": row["dataset"],
                      "strategy": row["strategy"], "passes_json": row["passes_json"],
                      "prompt_hash": row["prompt_hash"]},
        )
        for row in rows
    ]
    return MemoryDataset(samples, name=f"{frame['dataset'].iloc[0]}/{frame['strategy'].iloc[0]}", location=prompts)


def _question(answer: str, answer_fields: list[str]) -> str:
    """The question bloomqg's parser reads off a pass's answer (what the next pass is given)."""
    parsed = parse_generation(answer, answer_fields, knowledge_units=[])
    return parsed.new_question or ""


@solver
def bloomqg_passes():
    """Every pass of the sample's strategy: generate, then each later pass's messages filled with
    the previous answer, and generate again."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        passes = prompt_passes({"prompt_id": state.sample_id, "passes_json": state.metadata["passes_json"]})
        state = await generate(state)
        for previous, definition in zip(passes, passes[1:]):
            answer = state.output.completion
            question = _question(answer, previous.get("answer_fields", []))
            if not question:
                break  # as bloomqg's stage: a pass that wrote no question ends the passes
            for message in fill_later_pass(definition["messages"], previous_question=question,
                                           previous_answer=answer):
                state.messages.append(_ROLES[message["role"]](content=message["content"]))
            state = await generate(state)
        return state

    return solve


@task
def bloomqg_questions(prompts: str, limit: int | None = None) -> Task:
    """bloomqg's prompts of one dataset and strategy, answered by the model under evaluation."""
    return Task(dataset=prompt_samples(prompts, limit), solver=bloomqg_passes(), scorer=None)
