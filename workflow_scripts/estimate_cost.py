"""Rule estimate_cost: what the study's API calls will cost, printed before any call."""
from pathlib import Path

from bloomqg.api.budget import SpendLedger
from bloomqg.api.estimate import entry_caps, format_estimate
from bloomqg.store.config_schema import Cell
from bloomqg.runtime.job import start_job
from bloomqg.store.parquet_io import read_frame
from bloomqg.store.frames import DATASET, GENERATIONS, PROMPTS
from bloomqg.inputs.specs import study_spec
from bloomqg.study.study_cost import estimate_study

snakemake = globals()["snakemake"]
start_job(snakemake, snakemake.log.text)
params = snakemake.params
study = study_spec(params.config)  # the config read once into typed specs
cells = [Cell(*cell) for cell in params.cells]
prompts = {(p.parent.name, p.stem): read_frame(p, PROMPTS) for p in map(Path, snakemake.input.prompts)}
datasets = {p.stem: read_frame(p, DATASET) for p in map(Path, snakemake.input.datasets)}
generations = {
    (cell.dataset, cell.strategy, cell.model): read_frame(path, GENERATIONS)
    for cell, path in zip(cells, map(Path, params.generations))
    if path.exists()
}
estimate = estimate_study(
    study, cells, prompts=prompts, datasets=datasets, generations=generations,
    cache_dir=params.cache_dir, rubric_path=snakemake.input.rubric[0] if snakemake.input.rubric else None,
    panel_sample=params.panel_sample,  # those judges pay for each cell's sample only
)
estimate.to_csv(snakemake.log.table, sep="\t", index=False)
spent = SpendLedger(Path(params.cache_dir) / "spend.jsonl").total()
report = format_estimate(estimate, entry_caps(study), spent)
with open(snakemake.log.text, "a", encoding="utf-8") as log_file:
    log_file.write(report + "\n")
print(report, flush=True)
