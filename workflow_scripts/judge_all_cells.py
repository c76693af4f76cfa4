"""Rule judge_all_cells: every cell's verdicts of one judge that loads a model, loaded once (an
engine-served hf judge: through one server of its engine)."""
from pathlib import Path

from bloomqg.annotation.panel_sample import draw_panel_sample
from bloomqg.store.frames import DATASET, GENERATIONS
from bloomqg.generation.factory import ServingJob
from bloomqg.runtime.job import start_job
from bloomqg.judges.all_cells import JudgeCell, judge_all_cells
from bloomqg.store.parquet_io import read_frame
from bloomqg.runtime.serving.server import server_log_path
from bloomqg.study.config import job_study_spec

snakemake = globals()["snakemake"]
start_job(snakemake)
params = snakemake.params
# The config read once: the judge's entry and decoding, the model it borrows, and the settings
# that are not params (changing one reruns no finished job)
study = job_study_spec(snakemake.config)
judge, borrowed = study.judges[snakemake.wildcards.judge], study.borrowed_model(snakemake.wildcards.judge)
# A judge of panel_sample judges each cell's random sample only (docs/judge-reliability.md).
panel_draw = params.spec.get("panel_sample")
datasets = {Path(path).stem: read_frame(path, DATASET) for path in snakemake.input.datasets}
cells = []
for (dataset, strategy, model), generations_file, output in zip(
        params.cells, snakemake.input.generations, snakemake.output):
    generations = read_frame(generations_file, GENERATIONS)
    if panel_draw is not None:
        generations = draw_panel_sample(generations, panel_draw)
    cells.append(JudgeCell(generations, datasets[dataset], params.domains[dataset], output,
                           {"panel_sample": panel_draw}))
serving = None
if borrowed is not None and borrowed.engine:
    serving = ServingJob(name=borrowed.name, threads=snakemake.threads,
                         gpus=int(snakemake.resources.gpu or 0), log_path=server_log_path(snakemake.log.job),
                         workflow_dir=Path(snakemake.scriptdir).resolve().parent)
judge_all_cells(
    judge, cells, model=borrowed, serving=serving,
    model_dir=snakemake.input.model[0] if snakemake.input.model else None,
    prompt_path=snakemake.input.prompt[0] if snakemake.input.prompt else None,
    cache_dir=params.cache_dir, num_threads=snakemake.threads, min_answer_rate=study.min_answer_rate,
)
