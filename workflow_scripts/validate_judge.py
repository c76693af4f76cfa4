"""Rule validate_judge: one judge's verdicts on a sample of one release run, timed."""
import time

from bloomqg.annotation.judge_validation import RELEASE_DOMAINS, release_dataset, validation_sample
from bloomqg.judges.registry import make_judge_text_generator
from bloomqg.judges.stage import judge_questions
from bloomqg.runtime.job import start_job
from bloomqg.store.parquet_io import read_frame, write_frame
from bloomqg.store.frames import GENERATIONS, JUDGMENTS, VOTES
from bloomqg.study.config import job_study_spec

snakemake = globals()["snakemake"]
start_job(snakemake)
params, wc = snakemake.params, snakemake.wildcards
# The config read once: the judge's entry and decoding (with judge_validation's seed), the model it borrows
study = job_study_spec(snakemake.config)
judge = study.judges[wc.judge].with_seed(params.seed)
generations = read_frame(snakemake.input.generations, GENERATIONS)
sample = validation_sample(generations, read_frame(snakemake.input.votes, VOTES), params.items_per_cell, params.seed)
started = time.perf_counter()  # from here on: what a user of this judge pays per question
text_generator = make_judge_text_generator(
    judge, model=study.borrowed_model(wc.judge), model_dir=snakemake.input.model[0] if snakemake.input.model else None,
    cache_dir=params.cache_dir, num_threads=snakemake.threads,
)
try:
    judgments = judge_questions(
        sample, judge, dataset=release_dataset(generations), domain=RELEASE_DOMAINS[wc.dataset],
        prompt_path=snakemake.input.prompt[0] if snakemake.input.prompt else None,
        text_generator=text_generator,
    )
finally:
    if text_generator is not None:
        text_generator.close()
elapsed = time.perf_counter() - started
provenance = {**judgments.attrs.get("provenance", {}), "elapsed_s": elapsed, "sample_size": len(sample),
              "items_per_cell": params.items_per_cell, "seed": params.seed}
write_frame(judgments, snakemake.output[0], JUDGMENTS, provenance)
