"""The probe stage: one judge's verdicts on the bias probes of one cell's sample.

:func:`probe_judge` runs the judge through its backend as :func:`bloomqg.judges.stage.judge_questions`
does (the same :class:`~bloomqg.judges.registry.JudgeContext`, text generator, call cache and
budget), once per :class:`~bloomqg.judges.bias.design.ProbeGroup`: the base and repeat probes
as one batch each, the order probe as one batch per permutation. The lists go to the judge as
data (``JudgeContext.knowledge_units`` and ``bloom_levels``), so an offline judge takes the
probes as well: its verdicts simply do not move.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from bloomqg.inputs.datasets import dataset_knowledge_units
from bloomqg.inputs.chat import ChatRequest, DecodingParams, TextGenerator
from bloomqg.judges.base import JudgeItem
from bloomqg.judges.bias.design import bias_sample, probe_plan
from bloomqg.judges.registry import JudgeContext
from bloomqg.judges.stage import _provenance, _rubric, backend_of
from bloomqg.store.cells import cell_of
from bloomqg.store.frames import CRITERIA, JUDGE_PROBES

if TYPE_CHECKING:
    from bloomqg.inputs.specs import JudgeSpec

logger = logging.getLogger(__name__)


def probe_judge(
    generations: pd.DataFrame,
    judge: "JudgeSpec",
    *,
    dataset: pd.DataFrame,
    domain: str,
    items_per_cell: int,
    seed: int,
    prompt_path: str | Path | None = None,
    text_generator: TextGenerator | None = None,
) -> pd.DataFrame:
    """A :data:`bloomqg.store.frames.JUDGE_PROBES` frame: per sampled question, probe and criterion
    one row. An LLM judge whose rubric does not list the Bloom levels from data
    (``${bloom_levels}``) is refused: its order probe could permute only the units."""
    judge_name, judge_spec = judge.name, judge.entry
    backend = backend_of(judge)
    if backend.text_generator is not None and text_generator is None:
        raise ValueError(f"judge {judge_name!r}: backend {backend.name!r} needs a text_generator")
    rubric = _rubric(backend, prompt_path)
    if rubric is not None and not rubric.lists_bloom_levels:
        raise ValueError(f"judge_bias: the rubric {rubric.path} does not list the Bloom levels as "
                         "${bloom_levels}, so the order probe cannot permute them")
    sample = bias_sample(generations, items_per_cell, seed)
    by_id = sample.set_index("prompt_id", drop=False)
    units = dataset_knowledge_units(dataset)
    records: list[dict[str, Any]] = []
    if len(sample):
        spec = backend.with_defaults(judge_spec)
        built: dict[tuple[Any, ...], Any] = {}
        for group in probe_plan(sample["prompt_id"], units, seed=seed, cell=cell_of(sample, "probe_judge: generations").name()):
            # The level order reaches only a judge that renders the rubric, the seed only one that
            # samples from a text generator: an offline judge (rules, embedding, which loads a
            # model) is built once per unit order, not once per group.
            key = (group.unit_order, group.level_order if backend.needs_rubric else None,
                   group.seed if backend.text_generator is not None else None)
            if key not in built:
                built[key] = backend.build(JudgeContext(
                    judge_name, spec, dataset, list(group.unit_order), domain, rubric, text_generator,
                    judge.with_seed(group.seed).decoding, bloom_levels=group.level_order,
                ))
            group_judge = built[key]
            rows = by_id.loc[list(group.prompt_ids)]
            items = [JudgeItem(r.prompt_id, r.item_id, r.new_question, r.original_question)
                     for r in rows.itertuples(index=False)]
            judged = group_judge.judge_batch(items)
            if len(judged) != len(items):
                raise RuntimeError(f"judge {judge_name!r} returned {len(judged)} verdicts for {len(items)} questions")
            for row, call in zip(rows.itertuples(index=False), judged):
                for position, criterion in enumerate(CRITERIA):
                    answer = call.verdict[criterion]
                    value = answer.value
                    records.append({
                        "prompt_id": row.prompt_id, "item_id": row.item_id, "dataset": row.dataset,
                        "strategy": row.strategy, "model": row.model, "judge": judge_name,
                        "probe": group.probe, "criterion": criterion,
                        "value_bool": value if criterion in ("unique", "readable", "answerable") else None,
                        "value_level": value if criterion == "bloom_level" else None,
                        "value_units": list(value) if criterion == "knowledge_units" and value is not None else None,
                        "status": answer.status, "level_order": list(group.level_order),
                        "unit_order": list(group.unit_order), "question_words": len(row.new_question.split()),
                        "cached": call.cached, "cost_usd": call.cost_usd if position == 0 else None,
                        "n_prompt_tokens": call.n_prompt_tokens if position == 0 else None,
                        "n_completion_tokens": call.n_completion_tokens if position == 0 else None,
                        "cache_key": call.cache_key,
                    })
    frame = pd.DataFrame.from_records(records, columns=JUDGE_PROBES.names)
    for column in ("n_prompt_tokens", "n_completion_tokens"):
        frame[column] = frame[column].astype("Int64")  # nullable integers, not floats with NaN
    frame.attrs["provenance"] = {
        **_provenance(judge_name, judge_spec, backend, rubric, text_generator),
        "items_per_cell": items_per_cell, "seed": seed, "sample_size": len(sample),
    }
    logger.info("judge %s: %d probe calls on %d questions", judge_name, len(records) // len(CRITERIA), len(sample))
    return frame


def probe_requests(
    sample: pd.DataFrame,
    decoding: DecodingParams,
    *,
    knowledge_units: list[str],
    domain: str,
    rubric: Any,
    seed: int,
) -> list[tuple[ChatRequest, DecodingParams]]:
    """The chat requests an LLM judge's probes send on ``sample`` (generations rows with a
    question, as :func:`~bloomqg.judges.bias.design.bias_sample` draws them), each with its
    decoding: the judge's (``decoding``, resolved with its entry) with the probe group's seed
    (the repeat probe's differs). What ``estimate_cost`` counts and prices, never sent from here."""
    from bloomqg.judges.llm import LLMJudge

    requests: list[tuple[ChatRequest, DecodingParams]] = []
    if not len(sample):
        return requests
    by_id = sample.set_index("prompt_id", drop=False)
    for group in probe_plan(sample["prompt_id"], knowledge_units, seed=seed, cell=cell_of(sample, "probe_judge: generations").name()):
        judge = LLMJudge(
            None, list(group.unit_order), domain, template=rubric,  # type: ignore[arg-type]
            decoding=dataclasses.replace(decoding, seed=group.seed),
            bloom_levels=group.level_order,
        )
        rows = by_id.loc[list(group.prompt_ids)]
        group_requests = judge.requests([JudgeItem(r.prompt_id, r.item_id, r.new_question, r.original_question)
                                         for r in rows.itertuples(index=False)])
        requests.extend((request, judge.decoding) for request in group_requests)
    return requests
