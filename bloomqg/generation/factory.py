"""Building a text generator from a read ``models`` (or LLM judge) entry
(:class:`bloomqg.inputs.specs.EntrySpec`: its client settings and decoding resolved once, when
the study was read)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from bloomqg.inputs.chat import TextGenerator
from bloomqg.inputs.specs import EntrySpec

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServingJob:
    """What a job that starts a model's server knows (rule generate_on_engine): the model's
    name, the threads and GPUs Snakemake granted it, the server's log, the workflow's folder."""

    name: str
    threads: int
    gpus: int
    log_path: Path
    workflow_dir: Path


def make_text_generator(
    entry: EntrySpec,
    *,
    model_dir: str | Path | None,
    cache_dir: str | Path,
    num_threads: int | None = None,
    serving: ServingJob | None = None,
) -> TextGenerator:
    """A loaded generator for a ``models.<name>`` (or LLM judge) entry.

    ``backend: hf`` -> :class:`bloomqg.generation.hf.generator.HFTextGenerator` (``model_dir`` is the
    directory ``materialize_model`` prepared; it holds the converted weights of a GGUF entry);
    ``backend: openai`` -> ``bloomqg.generation.openai_api.OpenAITextGenerator`` with the entry's
    client settings (:attr:`~bloomqg.inputs.specs.EntrySpec.client`) and the call cache under
    ``cache_dir``. ``num_threads`` (the job's thread count) sets torch's CPU threads
    for in-process models unless the entry pins its own.

    An ``hf`` entry with ``engine:`` (vllm, transformers-serve) and a ``serving`` job ->
    :class:`bloomqg.generation.engine.EngineTextGenerator`, which starts the engine's server for
    the job (close() stops it): generate_on_engine's job, or the judge_all_cells job of an hf judge
    borrowing the entry. Without ``serving`` the weights run in-process as for any hf entry, and
    the log says so.
    """
    spec, backend = entry.entry, entry.backend
    if backend == "hf" and spec.get("engine") and serving is not None:
        from bloomqg.generation.engine import EngineTextGenerator

        return EngineTextGenerator(
            spec, name=serving.name, model_dir=model_dir, cache_dir=cache_dir, threads=serving.threads,
            gpus=serving.gpus, log_path=serving.log_path, workflow_dir=serving.workflow_dir,
        )
    if backend == "hf" and spec.get("engine"):
        logger.info("model %r: engine %r serves its generation jobs; this job runs its weights in-process",
                    spec.get("model"), spec["engine"])
    if backend == "hf":
        from bloomqg.generation.hf.generator import HFTextGenerator

        if num_threads is not None and "num_threads" not in spec:
            spec = {**spec, "num_threads": num_threads}
        return HFTextGenerator.from_spec(spec, model_dir)
    if backend == "openai":
        from bloomqg.generation.openai_api import OpenAITextGenerator

        return OpenAITextGenerator(entry.api_client, cache_dir=cache_dir)
    raise ValueError(f"{entry.key}: backend {backend!r} writes no text (expected 'hf' or 'openai')")
