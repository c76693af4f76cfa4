"""Rule judge_questions: one judge's verdicts on one cell's generated questions (a judge that
loads a model has judge_all_cells instead: one job, the model loaded once, for all its cells)."""
from bloomqg.annotation.panel_sample import draw_panel_sample
from bloomqg.store.frames import DATASET, GENERATIONS, JUDGMENTS
from bloomqg.runtime.job import start_job
from bloomqg.judges.all_cells import judgments_provenance
from bloomqg.judges.registry import make_judge_text_generator
from bloomqg.judges.stage import judge_questions
from bloomqg.store.parquet_io import read_frame, write_frame
from bloomqg.study.config import job_study_spec

snakemake = globals()["snakemake"]
start_job(snakemake)
params = snakemake.params
# The config read once: the judge's entry, client settings and decoding, the model it borrows,
# and the settings that are not params (changing one reruns no finished job)
study = job_study_spec(snakemake.config)
judge, model = study.judges[snakemake.wildcards.judge], study.borrowed_model(snakemake.wildcards.judge)
# A judge of panel_sample judges the cell's random sample only (docs/judge-reliability.md).
panel_draw = params.spec.get("panel_sample")
generations = read_frame(snakemake.input.generations, GENERATIONS)
if panel_draw is not None:
    generations = draw_panel_sample(generations, panel_draw)
# An openai judge's client (its own endpoint spec); none for a judge without one.
text_generator = make_judge_text_generator(
    judge, model=model, model_dir=snakemake.input.model[0] if snakemake.input.model else None,
    cache_dir=params.cache_dir, num_threads=snakemake.threads,
)
try:
    judgments = judge_questions(
        generations,
        judge,
        dataset=read_frame(snakemake.input.dataset, DATASET),
        domain=params.domain,
        prompt_path=snakemake.input.prompt[0] if snakemake.input.prompt else None,
        text_generator=text_generator,
        min_answer_rate=study.min_answer_rate,
    )
finally:
    if text_generator is not None:
        text_generator.close()
# The judge's own provenance: rubric hash, code fingerprint, model folder, text generator.
write_frame(judgments, snakemake.output[0], JUDGMENTS,
            judgments_provenance(judgments, text_generator, panel_sample=panel_draw))
