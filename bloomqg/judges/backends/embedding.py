"""Backend ``embedding``: sentence-embedding similarities (:mod:`bloomqg.judges.embedding`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from bloomqg.judges.embedding import SENTENCE_MODEL_SCHEMA
from bloomqg.judges.registry import JudgeBackend, JudgeContext
from bloomqg.inputs.resources import JobResources

if TYPE_CHECKING:
    from bloomqg.judges.embedding import EmbeddingJudge

_OPTIONS = ("unique_threshold", "k_neighbors", "batch_size")


def _build(context: JudgeContext) -> "EmbeddingJudge":
    from bloomqg.judges.embedding import EmbeddingJudge, resolve_model_dir

    dataset, spec = context.dataset, context.spec
    items = list(zip(dataset["item_id"], dataset["question"], dataset["bloom_level"], dataset["knowledge_units"]))
    return EmbeddingJudge(
        resolve_model_dir(context.judge_name, spec["model"]), items, context.knowledge_units,
        **{key: spec[key] for key in _OPTIONS},
    )


def _provenance(judge_name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    from bloomqg.judges.embedding import resolve_model_dir

    return {"embedding_model_dir": str(resolve_model_dir(judge_name, BACKEND.with_defaults(spec)["model"]))}


BACKEND = JudgeBackend(
    name="embedding",
    description="MiniLM similarities",
    build=_build,
    resources=lambda name, spec, models: JobResources(gpu=0, mem_mb=4000, runtime=60, api=0),
    threads=8,
    loads_model=True,
    provenance=_provenance,
    properties={
        "model": SENTENCE_MODEL_SCHEMA,
        "unique_threshold": {"type": "number", "minimum": 0, "maximum": 1, "default": 0.95,
                             "description": "Cosine to the original below which a question is unique."},
        "k_neighbors": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 5,
                        "description": "Labelled dataset items in the similarity-weighted level vote."},
        "batch_size": {"type": "integer", "minimum": 1, "maximum": 4096, "default": 32, "description": "Sentences encoded at a time."},
    },
)
