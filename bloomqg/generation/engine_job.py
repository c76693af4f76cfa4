"""The job of a model served by an engine: one server, every shard of every cell of the model.

Rule ``generate_on_engine`` (one job per model) starts the engine's server once
(:class:`~bloomqg.generation.engine.EngineTextGenerator`) and runs the generation stage
(:func:`~bloomqg.generation.stage.generate_questions`) for each shard in turn, writing
``<out_dir>/<dataset>/<strategy>/shard-<n>.parquet``; rule ``take_engine_shard`` then hands each
shard to the per-cell files the rest of the workflow reads. The server is stopped when the job
ends, however it ends (:mod:`bloomqg.runtime.serving.server`). Each shard keeps its own checkpoint under
``checkpoint_dir`` and every answer sits in the call cache, so a killed job's rerun asks the
server only for what was not answered.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bloomqg.store.atomic import atomic_target
from bloomqg.inputs.datasets import dataset_knowledge_units
from bloomqg.inputs.specs import ModelSpec
from bloomqg.store.frames import DATASET, PROMPTS
from bloomqg.generation.factory import ServingJob, make_text_generator
from bloomqg.generation.stage import generate_questions
from bloomqg.store.parquet_io import read_frame
from bloomqg.runtime.sharding import shard_rows

logger = logging.getLogger(__name__)


def shard_file(out_dir: str | Path, dataset: str, strategy: str, shard: int) -> Path:
    """Where generate_on_engine writes one shard."""
    return Path(out_dir) / dataset / strategy / f"shard-{shard}.parquet"


def generate_on_engine(
    model: ModelSpec,
    shards: Sequence[Mapping[str, Any]],
    *,
    model_dir: str | Path | None,
    out_dir: str | Path,
    checkpoint_dir: str | Path,
    cache_dir: str | Path,
    threads: int,
    gpus: int,
    server_log: str | Path,
    workflow_dir: str | Path,
    max_question_chars: int,
) -> list[Path]:
    """Generate every shard in ``shards`` with one server of ``model``'s engine, in its decoding;
    the shard files written, in order. Each entry names its ``dataset``, ``strategy``, ``shard`` and ``n_shards``
    and the files it reads (the rule's inputs): ``prompts`` (PROMPTS) and ``dataset_file`` (DATASET);
    ``max_question_chars`` is the study's ``input_limits.max_question_chars``.
    """
    serving = ServingJob(name=model.name, threads=int(threads), gpus=int(gpus), log_path=Path(server_log),
                         workflow_dir=Path(workflow_dir))
    generator = make_text_generator(model, model_dir=model_dir, cache_dir=cache_dir, serving=serving)
    written: list[Path] = []
    try:
        for entry in shards:
            dataset, strategy, shard = str(entry["dataset"]), str(entry["strategy"]), int(entry["shard"])
            prompts = shard_rows(read_frame(entry["prompts"], PROMPTS), shard, int(entry["n_shards"]))
            units = dataset_knowledge_units(read_frame(entry["dataset_file"], DATASET))
            out = shard_file(out_dir, dataset, strategy, shard)
            logger.info("%s: %s/%s shard %d (%d prompts) -> %s", model.name, dataset, strategy, shard, len(prompts), out)
            generate_questions(
                prompts, model.name, generator, model.decoding, knowledge_units=units, out_path=out,
                checkpoint_path=Path(checkpoint_dir) / dataset / strategy / f"shard-{shard}.jsonl",
                response_prefill=model.entry.get("response_prefill", False), max_question_chars=max_question_chars,
            )
            written.append(out)
        logger.info("%s ledger: %s", model.name, generator.ledger())  # type: ignore[attr-defined]
    finally:
        generator.close()
    return written


def take_engine_shard(engine_dir: str | Path, dataset: str, strategy: str, shard: int, out_path: str | Path) -> None:
    """Copy one shard out of a generate_on_engine folder to ``out_path`` (atomically)."""
    source = shard_file(engine_dir, dataset, strategy, shard)
    if not source.is_file():
        raise FileNotFoundError(f"{engine_dir} holds no {dataset}/{strategy} shard {shard} ({source}); "
                                "the generate_on_engine job that wrote it ran another study's cells")
    with atomic_target(out_path) as tmp:
        shutil.copyfile(source, tmp)
