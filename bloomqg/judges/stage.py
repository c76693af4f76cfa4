"""The judging stage: one judge's verdicts on one cell's generated questions, in long format.

:func:`judge_questions` returns exactly the columns of :data:`bloomqg.store.frames.JUDGMENTS`, five
rows per generated question (one per criterion of :data:`bloomqg.store.frames.CRITERIA`), never more,
never fewer. A question whose generation failed to parse (``new_question`` null or blank) gets
status ``no_question`` on every criterion and is never shown to the judge.

Call-level numbers of an LLM judge (token counts, cost) sit on the question's first criterion
row only, so summing a column over the file counts each call once; ``raw_text`` and ``cached``
are repeated on each of the five rows for audit.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from bloomqg.inputs.datasets import dataset_knowledge_units
from bloomqg.inputs.chat import AnswerRateError, TextGenerator, refuse_low_answer_rate
from bloomqg.inputs.parsing import has_question
from bloomqg.judges.base import JudgedItem, JudgeItem
from bloomqg.judges.registry import JudgeBackend, JudgeContext, judge_backend
from bloomqg.judges.verdict import STATUS_ERROR, STATUS_NO_QUESTION, CriterionVerdict, Verdict
from bloomqg.store.provenance import code_fingerprint
from bloomqg.store.frames import CRITERIA, DATASET, GENERATION_COST_COLUMNS, GENERATIONS, JUDGMENTS
from bloomqg.store.stored_text import stored_or_none

if TYPE_CHECKING:  # loaded only by the backends that render the rubric
    from bloomqg.inputs.specs import JudgeSpec
    from bloomqg.judges.rubric import RubricTemplate

logger = logging.getLogger(__name__)

#: The schema's default for ``min_answer_rate``.
DEFAULT_MIN_ANSWER_RATE = 0.5


class TooFewAnswersError(AnswerRateError):
    """A judge's calls failed on more of its questions than ``min_answer_rate`` allows."""


def check_answer_rate(judge_name: str, judged: Sequence[JudgedItem], min_answer_rate: float) -> None:
    """Refuse a judge that gave no answer (status ``error`` on every criterion: a failed call, not
    an answer that did not parse) on more than ``1 - min_answer_rate`` of its questions: a panel
    silently short of a judge would vote on as if nothing happened (:func:`bloomqg.inputs.chat.refuse_low_answer_rate`)."""
    failed = [item for item in judged if all(item.verdict[c].status == STATUS_ERROR for c in CRITERIA)]
    refuse_low_answer_rate("judge", judge_name, asked=len(judged),
                           failure_reasons=[item.verdict["unique"].reason for item in failed],
                           min_answer_rate=min_answer_rate, items="questions", error=TooFewAnswersError)


def backend_of(judge: "JudgeSpec") -> JudgeBackend:
    """The backend of a judges entry (its keys were checked against that backend's branch of the
    config schema when the study was read); an unknown one is a ValueError naming the entry."""
    try:
        return judge_backend(judge.backend)
    except ValueError as error:
        raise ValueError(f"{judge.key}: {error}") from None


def _check_columns(frame: pd.DataFrame, names: Sequence[str], what: str) -> None:
    missing = [name for name in names if name not in frame.columns]
    if missing:
        raise ValueError(f"judge_questions: {what} frame lacks columns {missing}")


def judge_provenance(
    judge: "JudgeSpec",
    *,
    prompt_path: str | Path | None = None,
    text_generator: TextGenerator | None = None,
) -> dict[str, Any]:
    """What a judgments file should record about its judge: entry, rubric hash, model, code."""
    backend = backend_of(judge)
    return _provenance(judge.name, judge.entry, backend, _rubric(backend, prompt_path), text_generator)


def _rubric(backend: JudgeBackend, prompt_path: str | Path | None) -> "RubricTemplate | None":
    """The rubric prompt, for a backend that renders it."""
    if not backend.needs_rubric:
        return None
    from bloomqg.judges.rubric import load_rubric

    return load_rubric(prompt_path)


def _provenance(
    judge_name: str,
    judge_spec: Mapping[str, Any],
    backend: JudgeBackend,
    rubric: "RubricTemplate | None",
    text_generator: TextGenerator | None,
) -> dict[str, Any]:
    provenance: dict[str, Any] = {
        "judge": judge_name,
        "judge_backend": backend.name,
        "judge_spec": dict(judge_spec),
        "judge_code": code_fingerprint("bloomqg.judges"),
    }
    if rubric is not None:
        provenance["judge_prompt_path"] = str(rubric.path)
        provenance["judge_prompt_sha256"] = rubric.sha256
        provenance["judge_prompt_hash"] = rubric.prompt_hash
    if text_generator is not None:
        provenance["text_generator"] = dict(getattr(text_generator, "provenance", {}) or {})
    if backend.provenance is not None:
        provenance.update(backend.provenance(judge_name, judge_spec))
    return provenance


def judge_questions(
    generations: pd.DataFrame,
    judge: "JudgeSpec",
    *,
    dataset: pd.DataFrame,
    domain: str,
    prompt_path: str | Path | None = None,
    text_generator: TextGenerator | None = None,
    min_answer_rate: float = DEFAULT_MIN_ANSWER_RATE,
) -> pd.DataFrame:
    """One judge's verdicts: a JUDGMENTS frame with five rows per generated question.

    ``judge`` is the judges entry as the study read it (:func:`backend_of`); its backend
    (:mod:`bloomqg.judges.registry`) builds the judge. A backend with a text generator (``hf``,
    ``openai``) needs ``text_generator``, asked in the entry's decoding; one with ``needs_rubric``
    renders the rubric at ``prompt_path`` (default ``prompts/judge/rubric.md``). The frame's
    ``attrs["provenance"]`` holds :func:`judge_provenance`. Raises :class:`TooFewAnswersError` when
    fewer than ``min_answer_rate`` of the questions got an answer (:func:`check_answer_rate`).
    """
    judge_name, judge_spec = judge.name, judge.entry
    backend = backend_of(judge)
    _check_columns(generations, [c for c in GENERATIONS.names if c not in GENERATION_COST_COLUMNS], "generations")
    _check_columns(dataset, DATASET.names, "dataset")
    if generations["prompt_id"].duplicated().any():
        duplicated = generations.loc[generations["prompt_id"].duplicated(), "prompt_id"].tolist()[:5]
        raise ValueError(f"judge_questions: generations repeat prompt_id {duplicated}")
    if backend.text_generator is not None and text_generator is None:
        raise ValueError(f"judge {judge_name!r}: backend {backend.name!r} needs a text_generator")
    knowledge_units = dataset_knowledge_units(dataset)

    generations = generations.reset_index(drop=True)
    with_question = generations["new_question"].map(has_question).astype(bool)  # bool even when empty
    to_judge = generations[with_question]
    logger.info(
        "judge %s (%s): %d generated questions, %d without a question",
        judge_name, backend.name, len(generations), int((~with_question).sum()),
    )
    items = [
        JudgeItem(row.prompt_id, row.item_id, row.new_question, row.original_question)
        for row in to_judge.itertuples(index=False)
    ]
    rubric = _rubric(backend, prompt_path)
    judged: list[JudgedItem] = []
    if items:  # a cell with no question to judge loads no model
        built = backend.build(JudgeContext(
            judge_name, backend.with_defaults(judge_spec), dataset, knowledge_units, domain, rubric,
            text_generator, judge.decoding,
        ))
        judged = built.judge_batch(items)
    if len(judged) != len(items):
        raise RuntimeError(f"judge {judge_name!r} returned {len(judged)} verdicts for {len(items)} questions")
    check_answer_rate(judge_name, judged, min_answer_rate)

    by_row = dict(zip(to_judge.index, judged))
    no_question = JudgedItem(Verdict.uniform(
        CriterionVerdict(None, STATUS_NO_QUESTION, "generation produced no question")
    ))
    records: list[dict[str, Any]] = []
    for row in generations.itertuples(index=True):
        call = by_row.get(row.Index, no_question)
        verdict = call.verdict
        for position, criterion in enumerate(CRITERIA):
            answer = verdict[criterion]
            value = answer.value
            records.append(
                {
                    "prompt_id": row.prompt_id,
                    "item_id": row.item_id,
                    "dataset": row.dataset,
                    "strategy": row.strategy,
                    "model": row.model,
                    "judge": judge_name,
                    "criterion": criterion,
                    "value_bool": value if criterion in ("unique", "readable", "answerable") else None,
                    "value_level": value if criterion == "bloom_level" else None,
                    "value_units": list(value) if criterion == "knowledge_units" and value is not None else None,
                    "status": answer.status,
                    # a judge's answer is generated text: storable, its key masked (bloomqg.store.stored_text)
                    "reason": stored_or_none(answer.reason),
                    "raw_text": stored_or_none(verdict.raw_text),
                    "cached": call.cached,
                    # call-level numbers once per question, so column sums count each call once
                    "n_prompt_tokens": call.n_prompt_tokens if position == 0 else None,
                    "n_completion_tokens": call.n_completion_tokens if position == 0 else None,
                    "cost_usd": call.cost_usd if position == 0 else None,
                    "cache_key": call.cache_key,
                    "choice_probs": None if answer.distribution is None else json.dumps(dict(answer.distribution)),
                }
            )
    frame = pd.DataFrame.from_records(records, columns=JUDGMENTS.names)
    for column in ("n_prompt_tokens", "n_completion_tokens"):
        frame[column] = frame[column].astype("Int64")  # nullable integers, not floats with NaN
    frame.attrs["provenance"] = _provenance(judge_name, judge_spec, backend, rubric, text_generator)
    if len(frame) != len(CRITERIA) * len(generations):
        raise RuntimeError("judge_questions: row count is not five per generated question")
    return frame
