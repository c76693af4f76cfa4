"""Rule import_inspect_generations: one cell's questions from the Inspect logs of a models entry."""
from bloomqg.inputs.datasets import dataset_knowledge_units
from bloomqg.store.frames import DATASET, GENERATIONS, PROMPTS
from bloomqg.generation.inspect_source import import_generations
from bloomqg.runtime.job import start_job
from bloomqg.store.parquet_io import read_frame, write_frame
from bloomqg.study.config import job_study_spec

snakemake = globals()["snakemake"]
start_job(snakemake)
model = snakemake.wildcards.model
frame, sources = import_generations(
    list(snakemake.input.logs),
    read_frame(snakemake.input.prompts, PROMPTS),
    model,
    knowledge_units=dataset_knowledge_units(read_frame(snakemake.input.dataset, DATASET)),
    seed=snakemake.params.seed,
    max_member_mb=snakemake.params.max_log_member_mb,
)
provenance = {
    "stage": "import_inspect_generations",
    "model_name": model,
    "generator": {"backend": "inspect", "model": job_study_spec(snakemake.config).models[model].entry["model"]},
    "inspect_logs": [source.as_dict() for source in sources],  # each log and its task
    "prompt_hashes": sorted(set(frame["prompt_hash"].dropna())),
    "parse_status_counts": frame["parse_status"].value_counts().to_dict(),
}
write_frame(frame, snakemake.output[0], GENERATIONS, provenance)
