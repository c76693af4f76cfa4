"""One engine server for every cell an engine-served judge judges (rule ``judge_on_engine``).

An ``hf`` judge whose ``model_ref`` names a models entry with ``engine:`` asks that engine's
server. Started once per cell, a server's start-up (40–90 s for vLLM on CPU, longer for a 7B
model on a GPU) was paid once per cell; here one job starts it once, judges every cell through
it, and stops it (:meth:`close` in ``finally``, and the lifecycle guarantees of
:mod:`bloomqg.runtime.serving`). Each cell's verdicts are written as soon as they are made, and every
answer goes to the call cache first, so a killed job's rerun asks the server nothing it had
answered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from bloomqg.store.frames import JUDGMENTS
from bloomqg.generation.factory import ServingJob
from bloomqg.judges.registry import make_judge_text_generator
from bloomqg.judges.stage import DEFAULT_MIN_ANSWER_RATE, judge_questions
from bloomqg.store.parquet_io import write_frame


@dataclass(frozen=True)
class EngineJudgeCell:
    """One cell's questions to judge and where its verdicts go."""

    generations: pd.DataFrame
    dataset: pd.DataFrame
    domain: str
    output: str | Path
    #: what the cell's judgments file records besides the judge's own provenance
    provenance: Mapping[str, Any] = field(default_factory=dict)


def judgments_provenance(judge_name: str, spec: Mapping[str, Any], judgments: pd.DataFrame,
                         text_generator: Any | None, **extra: Any) -> dict[str, Any]:
    """A judgments file's provenance: the judge, its entry, ``extra``, what the judge recorded
    (rubric hash, code fingerprint, model folder) and its text generator's."""
    provenance = {"judge": judge_name, "judge_spec": dict(spec), **extra, **judgments.attrs.get("provenance", {})}
    if text_generator is not None:
        provenance["text_generator"] = text_generator.provenance
    return provenance


def judge_on_engine(
    judge_name: str,
    spec: Mapping[str, Any],
    cells: Sequence[EngineJudgeCell],
    *,
    model_spec: Mapping[str, Any],
    serving: ServingJob,
    model_dir: str | Path | None,
    prompt_path: str | Path | None,
    cache_dir: str | Path,
    seed: int,
    min_answer_rate: float = DEFAULT_MIN_ANSWER_RATE,
    budget_usd: float | None = None,
) -> None:
    """Judge every cell of ``cells`` through one server of the judge's engine, writing each
    cell's JUDGMENTS file (with provenance) before the next cell starts."""
    text_generator = make_judge_text_generator(
        judge_name, spec, model_spec=model_spec, model_dir=model_dir, cache_dir=cache_dir,
        num_threads=serving.threads, budget_usd=budget_usd, serving=serving,
    )
    try:
        for cell in cells:
            judgments = judge_questions(
                cell.generations, judge_name, spec, dataset=cell.dataset, domain=cell.domain,
                prompt_path=prompt_path, text_generator=text_generator, seed=seed, min_answer_rate=min_answer_rate,
            )
            write_frame(judgments, cell.output, JUDGMENTS,
                        judgments_provenance(judge_name, spec, judgments, text_generator, **cell.provenance))
    finally:
        if text_generator is not None:
            text_generator.close()
