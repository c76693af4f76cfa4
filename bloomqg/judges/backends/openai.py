"""Backend ``openai``: an LLM behind an OpenAI-compatible API, asked with the rubric.

The entry is the endpoint's settings (``#/$defs/api_settings``); its calls are cached, paced,
retried and priced by :mod:`bloomqg.api.client`.
"""

from __future__ import annotations

from typing import Any

from bloomqg.judges.llm import build_llm_judge
from bloomqg.judges.registry import GeneratorSource, JudgeBackend
from bloomqg.inputs.resources import API_MEM_MB, API_RUNTIME_MIN, JobResources


def _text_generator(source: GeneratorSource) -> Any:
    from bloomqg.generation.factory import make_text_generator

    return make_text_generator(source.judge, model_dir=None, cache_dir=source.cache_dir, num_threads=source.num_threads)


BACKEND = JudgeBackend(
    name="openai",
    description="an OpenAI-compatible API",
    build=build_llm_judge,
    resources=lambda name, spec, models: JobResources(gpu=0, mem_mb=API_MEM_MB, runtime=API_RUNTIME_MIN, api=1),
    needs_rubric=True,
    text_generator=_text_generator,
    required=("model",),
    includes=("#/$defs/api_settings",),
    properties={
        "model": {"type": "string", "description": "The API model name."},
        "generation": {"$ref": "#/$defs/generation"},
    },
)
