"""Backend ``hf``: an LLM on a models entry's weights, asked with the rubric.

In-process, its answers go through :class:`bloomqg.generation.cached.CachedTextGenerator`, so a
rerun of a judge_questions job (``--forcerun``) reads them back from the call cache instead of
generating. When the entry names an ``engine`` (vllm, transformers-serve) and the job passes its
server settings (judge_questions does), the job starts that engine's server for itself
(:class:`bloomqg.generation.engine.EngineTextGenerator`) and asks it through the OpenAI client,
whose call cache is keyed by the engine and its versions; validate_judge and probe_judge still
run the weights in-process.

With ``mode: choices`` (the default in-process, where the model can score continuations) it scores the rubric's options instead of
writing an answer (:mod:`bloomqg.judges.choices`), its scores cached the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bloomqg.judges.llm import build_llm_judge
from bloomqg.judges.registry import GeneratorSource, JudgeBackend
from bloomqg.inputs.resources import JobResources, model_resources

#: Provenance keys of an in-process generator that say how it was scheduled, not what it
#: answers: left out of the cache key, so another thread or batch count still reuses answers.
SCHEDULING_KEYS = frozenset({"num_threads", "batch_size", "batch_size_policy", "learned_batch_cap"})


def _text_generator(source: GeneratorSource) -> Any:
    from bloomqg.generation.cached import CachedTextGenerator
    from bloomqg.generation.factory import make_text_generator

    model = source.model
    if model is None:
        raise ValueError(f"{source.judge.key}: an hf judge needs the models entry named by model_ref")
    if model.engine and source.serving is not None:
        # the engine generator caches its calls itself (keyed by the engine's identity)
        return make_text_generator(model, model_dir=source.model_dir, cache_dir=source.cache_dir,
                                   serving=source.serving)
    # no server settings (validate_judge, probe_judge): in-process, which make_text_generator logs;
    # in the judge's own dtype, where it sets one, over the borrowed entry's
    if "dtype" in source.judge.entry:
        model = model.with_entry({**model.entry, "dtype": source.judge.entry["dtype"]})
    inner = make_text_generator(
        model, model_dir=source.model_dir, cache_dir=source.cache_dir, num_threads=source.num_threads,
    )
    identity = {key: value for key, value in inner.provenance.items() if key not in SCHEDULING_KEYS}
    return CachedTextGenerator(inner, cache_dir=source.cache_dir, identity=identity)


def _resources(name: str, spec: Mapping[str, Any], models: Mapping[str, Mapping[str, Any]]) -> JobResources:
    return model_resources(spec["model_ref"], models[spec["model_ref"]])


BACKEND = JudgeBackend(
    name="hf",
    description="an LLM in-process",
    build=build_llm_judge,
    resources=_resources,
    threads=8,
    loads_model=True,
    needs_rubric=True,
    text_generator=_text_generator,
    borrows_model=True,
    required=("model_ref",),
    properties={
        "model_ref": {"type": "string", "description": "The models entry whose weights to use (an hf model)."},
        "mode": {
            "enum": ["choices", "generate"],
            "description": "choices: score each criterion's options (true/false, the Bloom levels, the dataset's "
                           "knowledge units) by their log-probability after the rubric prompt and answer the "
                           "likeliest, keeping each option's probability (the judgments' choice_probs column); "
                           "generate: write the JSON verdict and parse it. Default: choices where the model scores "
                           "continuations in-process, generate otherwise (an engine, sliding-window layers, remote code). "
                           "SmolLM2 scoring the choices agrees with the paper's panel on 30.2% of GLM-4-9B's Bloom "
                           "levels against 17.3% writing its verdict (configs/judge-modes-glm.yaml) and takes 54% of "
                           "generate's job-seconds on the default study (benchmarks/judge_modes.py). "
                           "The scores and their normalisation: bloomqg/judges/choices.py.",
        },
        "generation": {"$ref": "#/$defs/generation"},
        "dtype": {
            "enum": ["auto", "float32", "bfloat16", "float16"],
            "description": "The dtype the judge runs the borrowed weights in, in-process (default: the models entry's "
                           "dtype, so a model that generates in float32 can judge in bf16; an engine-served entry's "
                           "server keeps the entry's). auto: as a models entry's. "
                           "SmolLM2 scoring the choices of 300 of GLM-4-9B's questions in bf16 took 71 s against 128 s "
                           "in float32 on 2 cores with AVX512-BF16, and agreed with the paper's panel on 30.3% of their "
                           "Bloom levels against 30.2% (configs/judge-modes-glm.yaml).",
        },
    },
)
