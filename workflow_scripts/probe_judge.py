"""Rule probe_judge: one judge's verdicts on the bias probes of one cell's sample."""
from bloomqg.judges.bias.probe import probe_judge
from bloomqg.judges.registry import make_judge_text_generator
from bloomqg.runtime.job import start_job
from bloomqg.store.parquet_io import read_frame, write_frame
from bloomqg.store.frames import DATASET, GENERATIONS, JUDGE_PROBES
from bloomqg.study.config import job_study_spec

snakemake = globals()["snakemake"]
start_job(snakemake)
params = snakemake.params
# The config read once: the judge's entry, client settings and decoding, the model it borrows
study = job_study_spec(snakemake.config)
judge = study.judges[snakemake.wildcards.judge]
text_generator = make_judge_text_generator(
    judge, model=study.borrowed_model(judge.name),
    model_dir=snakemake.input.model[0] if snakemake.input.model else None,
    cache_dir=params.cache_dir, num_threads=snakemake.threads,
)
try:
    probes = probe_judge(
        read_frame(snakemake.input.generations, GENERATIONS), judge,
        dataset=read_frame(snakemake.input.dataset, DATASET), domain=params.domain,
        items_per_cell=params.items_per_cell, seed=params.seed,
        prompt_path=snakemake.input.prompt[0] if snakemake.input.prompt else None,
        text_generator=text_generator,
    )
finally:
    if text_generator is not None:
        text_generator.close()
write_frame(probes, snakemake.output[0], JUDGE_PROBES, probes.attrs.get("provenance", {}))
