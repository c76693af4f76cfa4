"""Rule generate_on_engine: every shard of every cell of one model, through one engine server."""
from pathlib import Path

from bloomqg.generation.engine_job import generate_on_engine
from bloomqg.runtime.job import start_job
from bloomqg.runtime.serving.server import server_log_path
from bloomqg.study.config import job_study_spec

snakemake = globals()["snakemake"]
start_job(snakemake)
params = snakemake.params
# The config read once: the model's decoding, and the settings that are not params
study = job_study_spec(snakemake.config)
generate_on_engine(
    study.models[snakemake.wildcards.model],
    params.shards,
    model_dir=snakemake.input.model[0] if snakemake.input.model else None,
    out_dir=snakemake.output[0],
    checkpoint_dir=params.checkpoints,
    cache_dir=params.cache_dir,
    threads=snakemake.threads,
    gpus=int(snakemake.resources.gpu or 0),
    server_log=server_log_path(snakemake.log.job),
    # the workflow's folder, where `make engine-vllm` puts .venv-vllm
    workflow_dir=Path(snakemake.scriptdir).resolve().parent,
    max_question_chars=study.max_question_chars,
)
