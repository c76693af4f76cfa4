"""Rule generate_questions: one shard of one model × dataset × strategy."""
from bloomqg.inputs.datasets import dataset_knowledge_units
from bloomqg.generation.factory import make_text_generator
from bloomqg.generation.stage import generate_questions
from bloomqg.runtime.job import start_job
from bloomqg.store.parquet_io import read_frame
from bloomqg.store.frames import DATASET, PROMPTS
from bloomqg.runtime.sharding import shard_rows
from bloomqg.study.config import job_study_spec

snakemake = globals()["snakemake"]
start_job(snakemake)
params = snakemake.params
prompts = shard_rows(read_frame(snakemake.input.prompts, PROMPTS), int(snakemake.wildcards.shard), params.n_shards)
# The config read once: the model's client settings and decoding, and the settings that are not
# params (changing one reruns no finished job)
study = job_study_spec(snakemake.config)
model = study.models[snakemake.wildcards.model]
generator = make_text_generator(
    model,
    model_dir=snakemake.input.model[0] if snakemake.input.model else None,
    cache_dir=params.cache_dir,
    num_threads=snakemake.threads,
)
try:
    generate_questions(
        prompts,
        snakemake.wildcards.model,
        generator,
        model.decoding,
        knowledge_units=dataset_knowledge_units(read_frame(snakemake.input.dataset, DATASET)),
        out_path=snakemake.output[0],
        checkpoint_path=params.checkpoint,
        response_prefill=model.entry.get("response_prefill"),
        # an API generator's failed calls (a closed port) fail the job, as a judge's do
        min_answer_rate=study.min_answer_rate if model.is_api else None,
        max_question_chars=study.max_question_chars,
    )
finally:
    generator.close()
