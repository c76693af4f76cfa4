"""Rule generate_questions: one shard of one model × dataset × strategy."""
from bloomqg.inputs.specs import with_study_budget
from bloomqg.inputs.datasets import dataset_knowledge_units
from bloomqg.generation.factory import make_text_generator
from bloomqg.inputs.chat import decoding_params
from bloomqg.generation.stage import generate_questions
from bloomqg.runtime.job import start_job
from bloomqg.inputs.parsing import MAX_QUESTION_CHARS
from bloomqg.judges.stage import DEFAULT_MIN_ANSWER_RATE
from bloomqg.store.parquet_io import read_frame
from bloomqg.store.frames import DATASET, PROMPTS
from bloomqg.runtime.sharding import shard_rows

snakemake = globals()["snakemake"]
start_job(snakemake)
params = snakemake.params
prompts = shard_rows(read_frame(snakemake.input.prompts, PROMPTS), int(snakemake.wildcards.shard), params.n_shards)
spec = dict(params.spec)
generator = make_text_generator(
    # The cap comes from the config, not params: raising it must not rerun finished jobs.
    with_study_budget(spec, snakemake.config.get("budget_usd")),
    model_dir=snakemake.input.model[0] if snakemake.input.model else None,
    cache_dir=params.cache_dir,
    num_threads=snakemake.threads,
)
try:
    generate_questions(
        prompts,
        snakemake.wildcards.model,
        generator,
        decoding_params(spec.get("generation", {}), params.seed),
        knowledge_units=dataset_knowledge_units(read_frame(snakemake.input.dataset, DATASET)),
        out_path=snakemake.output[0],
        checkpoint_path=params.checkpoint,
        response_prefill=spec.get("response_prefill"),
        # an API generator's failed calls (a closed port) fail the job, as a judge's do
        min_answer_rate=(snakemake.config.get("min_answer_rate", DEFAULT_MIN_ANSWER_RATE)
                         if spec.get("backend") == "openai" else None),
        # from the config, not params, as min_answer_rate: setting it reruns no finished job
        max_question_chars=(snakemake.config.get("input_limits") or {}).get("max_question_chars", MAX_QUESTION_CHARS),
    )
finally:
    generator.close()
