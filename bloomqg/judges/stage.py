"""The judging stage: one judge's verdicts on one cell's generated questions, in long format.

:func:`judge_questions` returns exactly the columns of :data:`bloomqg.schemas.JUDGMENTS`, five
rows per generated question (one per criterion of :data:`bloomqg.schemas.CRITERIA`), never more,
never fewer. A question whose generation failed to parse (``new_question`` null or blank) gets
status ``no_question`` on every criterion and is never shown to the judge.

Call-level numbers of an LLM judge (token counts, cost) sit on the question's first criterion
row only, so summing a column over the file counts each call once; ``raw_text`` and ``cached``
are repeated on each of the five rows for audit.
"""

from __future__ import annotations

import dataclasses

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from bloomqg.datasets import dataset_knowledge_units
from bloomqg.generation.base import TextGenerator
from bloomqg.judges.verdict import STATUS_NO_QUESTION, CriterionVerdict, Verdict
from bloomqg.api.client import ClientSettings
from bloomqg.provenance import code_fingerprint
from bloomqg.schemas import CRITERIA, DATASET, GENERATIONS, JUDGMENTS

logger = logging.getLogger(__name__)

BACKENDS: tuple[str, ...] = ("rules", "embedding", "hf", "openai")

#: Keys any judge entry may carry.
_COMMON_KEYS = frozenset({"backend", "note"})
#: Keys an openai judge entry may carry for its endpoint (consumed by the text generator).
_API_KEYS = frozenset(field.name for field in dataclasses.fields(ClientSettings))


def allowed_spec_keys(backend: str) -> frozenset[str]:
    """The keys a judge entry with this backend may carry."""
    from bloomqg.judges.embedding import EMBEDDING_SPEC_KEYS
    from bloomqg.judges.rules import RULES_SPEC_KEYS

    by_backend = {
        "rules": RULES_SPEC_KEYS,
        "embedding": EMBEDDING_SPEC_KEYS,
        "hf": frozenset({"model_ref", "model", "generation"}),
        "openai": _API_KEYS | {"generation"},
    }
    return _COMMON_KEYS | by_backend[backend]


def validate_judge_spec(judge_name: str, judge_spec: Mapping[str, Any]) -> str:
    """Check a judge entry; return its backend. Errors name the judge and the offending key."""
    if not isinstance(judge_spec, Mapping):
        raise TypeError(f"judge {judge_name!r}: the entry must be a mapping, got {type(judge_spec).__name__}")
    backend = judge_spec.get("backend")
    if backend not in BACKENDS:
        raise ValueError(f"judge {judge_name!r}: backend {backend!r} is not one of {list(BACKENDS)}")
    unknown = sorted(set(judge_spec) - allowed_spec_keys(backend))
    if unknown:
        raise ValueError(
            f"judge {judge_name!r}: unknown key(s) {unknown} for backend {backend!r} "
            f"(allowed: {sorted(allowed_spec_keys(backend))})"
        )
    return backend


def _check_columns(frame: pd.DataFrame, names: Sequence[str], what: str) -> None:
    missing = [name for name in names if name not in frame.columns]
    if missing:
        raise ValueError(f"judge_questions: {what} frame lacks columns {missing}")


def _has_question(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def judge_provenance(
    judge_name: str,
    judge_spec: Mapping[str, Any],
    *,
    prompt_path: str | Path | None = None,
    text_generator: TextGenerator | None = None,
) -> dict[str, Any]:
    """What a judgments file should record about its judge: spec, rubric hash, model, code."""
    backend = validate_judge_spec(judge_name, judge_spec)
    provenance: dict[str, Any] = {
        "judge": judge_name,
        "judge_backend": backend,
        "judge_spec": dict(judge_spec),
        "judge_code": code_fingerprint("bloomqg.judges"),
    }
    if backend in ("hf", "openai"):
        from bloomqg.judges.llm import load_rubric

        rubric = load_rubric(prompt_path)
        provenance["judge_prompt_path"] = str(rubric.path)
        provenance["judge_prompt_sha256"] = rubric.sha256
        provenance["judge_prompt_hash"] = rubric.prompt_hash
        if text_generator is not None:
            provenance["text_generator"] = dict(getattr(text_generator, "provenance", {}) or {})
    elif backend == "embedding":
        from bloomqg.judges.embedding import DEFAULT_MODEL_SPEC, resolve_model_dir

        provenance["embedding_model_dir"] = str(
            resolve_model_dir(judge_name, judge_spec.get("model", DEFAULT_MODEL_SPEC))
        )
    return provenance


def _verdicts_rules(
    judge_name: str, judge_spec: Mapping[str, Any], questions: pd.DataFrame, dataset: pd.DataFrame,
    knowledge_units: list[str],
) -> list[Verdict]:
    from bloomqg.judges.rules import RulesJudge

    items = list(zip(dataset["item_id"], dataset["question"], dataset["knowledge_units"]))
    judge = RulesJudge.from_spec(judge_name, judge_spec, items, knowledge_units)
    return [
        judge.judge(question, original, item_id)
        for question, original, item_id in zip(
            questions["new_question"], questions["original_question"], questions["item_id"]
        )
    ]


def _verdicts_embedding(
    judge_name: str, judge_spec: Mapping[str, Any], questions: pd.DataFrame, dataset: pd.DataFrame,
    knowledge_units: list[str],
) -> list[Verdict]:
    from bloomqg.judges.embedding import (
        DEFAULT_MODEL_SPEC,
        EmbeddingJudge,
        resolve_model_dir,
    )

    model_dir = resolve_model_dir(
        judge_name, judge_spec.get("model", DEFAULT_MODEL_SPEC)
    )
    options = {k: judge_spec[k] for k in ("unique_threshold", "k_neighbors", "batch_size") if k in judge_spec}
    items = list(zip(dataset["item_id"], dataset["question"], dataset["bloom_level"], dataset["knowledge_units"]))
    judge = EmbeddingJudge(model_dir, items, knowledge_units, **options)
    return judge.judge_batch(
        list(questions["new_question"]), list(questions["original_question"]), list(questions["item_id"])
    )


def judge_questions(
    generations: pd.DataFrame,
    judge_name: str,
    judge_spec: Mapping[str, Any],
    *,
    dataset: pd.DataFrame,
    domain: str,
    prompt_path: str | Path | None = None,
    text_generator: TextGenerator | None = None,
    seed: int = 0,
) -> pd.DataFrame:
    """One judge's verdicts: a JUDGMENTS frame with five rows per generated question.

    ``judge_spec["backend"]`` picks the judge: ``rules`` and ``embedding`` run here; ``hf`` and
    ``openai`` ask ``text_generator`` (required for them) with the rubric at ``prompt_path``
    (default ``prompts/judge/rubric.md``) and the decoding settings of ``judge_spec["generation"]``
    plus ``seed``. The frame's ``attrs["provenance"]`` holds :func:`judge_provenance`.
    """
    backend = validate_judge_spec(judge_name, judge_spec)
    _check_columns(generations, GENERATIONS.names, "generations")
    _check_columns(dataset, DATASET.names, "dataset")
    if generations["prompt_id"].duplicated().any():
        duplicated = generations.loc[generations["prompt_id"].duplicated(), "prompt_id"].tolist()[:5]
        raise ValueError(f"judge_questions: generations repeat prompt_id {duplicated}")
    if backend in ("hf", "openai") and text_generator is None:
        raise ValueError(f"judge {judge_name!r}: backend {backend!r} needs a text_generator")
    knowledge_units = dataset_knowledge_units(dataset)

    generations = generations.reset_index(drop=True)
    has_question = generations["new_question"].map(_has_question)
    to_judge = generations[has_question]
    logger.info(
        "judge %s (%s): %d generated questions, %d without a question",
        judge_name, backend, len(generations), int((~has_question).sum()),
    )

    calls: list[dict[str, Any]] = [{} for _ in range(len(to_judge))]
    if to_judge.empty:
        verdicts: list[Verdict] = []
    elif backend == "rules":
        verdicts = _verdicts_rules(judge_name, judge_spec, to_judge, dataset, knowledge_units)
    elif backend == "embedding":
        verdicts = _verdicts_embedding(judge_name, judge_spec, to_judge, dataset, knowledge_units)
    else:
        from bloomqg.judges.llm import LLMJudge, decoding_from_spec, load_rubric

        assert text_generator is not None  # checked above
        judge = LLMJudge(
            text_generator, knowledge_units, domain,
            template=load_rubric(prompt_path),
            decoding=decoding_from_spec(judge_name, judge_spec.get("generation"), seed),
        )
        judged = judge.judge_batch(
            list(to_judge["prompt_id"]), list(to_judge["new_question"]), list(to_judge["original_question"])
        )
        verdicts = [call.verdict for call in judged]
        calls = [
            {"cached": c.cached, "n_prompt_tokens": c.n_prompt_tokens,
             "n_completion_tokens": c.n_completion_tokens, "cost_usd": c.cost_usd}
            for c in judged
        ]
    if len(verdicts) != len(to_judge):
        raise RuntimeError(f"judge {judge_name!r} returned {len(verdicts)} verdicts for {len(to_judge)} questions")

    by_row = dict(zip(to_judge.index, zip(verdicts, calls)))
    no_question = Verdict.uniform(
        CriterionVerdict(None, STATUS_NO_QUESTION, "generation produced no question")
    )
    records: list[dict[str, Any]] = []
    for row in generations.itertuples(index=True):
        verdict, call = by_row.get(row.Index, (no_question, {}))
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
                    "reason": answer.reason,
                    "raw_text": verdict.raw_text,
                    "cached": call.get("cached"),
                    # call-level numbers once per question, so column sums count each call once
                    "n_prompt_tokens": call.get("n_prompt_tokens") if position == 0 else None,
                    "n_completion_tokens": call.get("n_completion_tokens") if position == 0 else None,
                    "cost_usd": call.get("cost_usd") if position == 0 else None,
                }
            )
    frame = pd.DataFrame.from_records(records, columns=JUDGMENTS.names)
    for column in ("n_prompt_tokens", "n_completion_tokens"):
        frame[column] = frame[column].astype("Int64")  # nullable integers, not floats with NaN
    frame.attrs["provenance"] = judge_provenance(
        judge_name, judge_spec, prompt_path=prompt_path, text_generator=text_generator
    )
    if len(frame) != len(CRITERIA) * len(generations):
        raise RuntimeError("judge_questions: row count is not five per generated question")
    return frame
