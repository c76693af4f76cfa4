"""Every cell of a judge that loads a model, in one job (rule ``judge_all_cells``).

A judge whose backend loads a model (``hf``, ``embedding``, ``learned``:
:attr:`~bloomqg.judges.registry.JudgeBackend.loads_model`) pays for it once per process: python,
torch and the weights take seconds on a CPU, a 7B model or an engine's server (40–90 s for vLLM
on CPU) far longer. A job per cell paid that once per cell; here one job loads the model (or, for
an ``hf`` judge whose ``model_ref`` names an entry with ``engine:``, starts that engine's server)
once, judges every cell with it, and lets it go (:meth:`close` in ``finally``, and for a server
the lifecycle guarantees of :mod:`bloomqg.runtime.serving`).

Each cell's verdicts are written as soon as they are made. An LLM judge's answers and choice
scores go to the call cache first, so a rerun (a killed job, or one cell's new questions)
computes nothing it had computed for the other cells; an embedding judge re-encodes them, which
costs less than loading its model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from bloomqg.store.frames import JUDGMENTS
from bloomqg.generation.factory import ServingJob
from bloomqg.inputs.specs import JudgeSpec, ModelSpec
from bloomqg.judges.registry import make_judge_text_generator
from bloomqg.judges.stage import DEFAULT_MIN_ANSWER_RATE, judge_questions
from bloomqg.store.parquet_io import write_frame


@dataclass(frozen=True)
class JudgeCell:
    """One cell's questions to judge and where its verdicts go."""

    generations: pd.DataFrame
    dataset: pd.DataFrame
    domain: str
    output: str | Path
    #: what the cell's judgments file records besides the judge's own provenance
    provenance: Mapping[str, Any] = field(default_factory=dict)


def judgments_provenance(judgments: pd.DataFrame, text_generator: Any | None, **extra: Any) -> dict[str, Any]:
    """A judgments file's provenance: ``extra``, what the judge recorded (its name and entry,
    rubric hash, code fingerprint, model folder: :func:`bloomqg.judges.stage.judge_provenance`)
    and its text generator's."""
    provenance = {**extra, **judgments.attrs.get("provenance", {})}
    if text_generator is not None:
        provenance["text_generator"] = text_generator.provenance
    return provenance


def judge_all_cells(
    judge: JudgeSpec,
    cells: Sequence[JudgeCell],
    *,
    model: ModelSpec | None,
    serving: ServingJob | None,
    model_dir: str | Path | None,
    prompt_path: str | Path | None,
    cache_dir: str | Path,
    num_threads: int | None = None,
    min_answer_rate: float = DEFAULT_MIN_ANSWER_RATE,
) -> None:
    """Judge every cell of ``cells`` with ``judge`` (``model``: the models entry its ``model_ref``
    borrows) through one text generator (one server of the judge's engine
    when ``serving`` is given and its entry names one; in-process otherwise) and, for a judge
    without one, one loaded model (the backends keep it per process), writing each cell's
    JUDGMENTS file (with provenance) before the next cell starts."""
    text_generator = make_judge_text_generator(
        judge, model=model, model_dir=model_dir, cache_dir=cache_dir,
        num_threads=serving.threads if serving is not None else num_threads, serving=serving,
    )
    try:
        for cell in cells:
            judgments = judge_questions(
                cell.generations, judge, dataset=cell.dataset, domain=cell.domain,
                prompt_path=prompt_path, text_generator=text_generator, min_answer_rate=min_answer_rate,
            )
            write_frame(judgments, cell.output, JUDGMENTS,
                        judgments_provenance(judgments, text_generator, **cell.provenance))
    finally:
        if text_generator is not None:
            text_generator.close()
