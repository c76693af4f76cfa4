"""Rule export_annotation: the stratified sample, a blank sheet and the HTML form."""
from bloomqg.annotation.form import write_blank_sheet, write_form
from bloomqg.annotation.sample import annotation_items, cell_counts, judges_unit_lists, knowledge_units_by_dataset
from bloomqg.runtime.job import start_job
from bloomqg.store.parquet_io import read_frame, write_frame
from bloomqg.store.frames import ANNOTATION_ITEMS, ANNOTATION_PLAN, DATASET, VOTES

snakemake = globals()["snakemake"]
start_job(snakemake)
params, output = snakemake.params, snakemake.output
votes = [read_frame(path, VOTES) for path in snakemake.input.votes]
# A study's datasets: the unit lists its judges chose from. A release's runs: every original of
# the run (its votes hold all of them), the list the release's panel had.
datasets = [read_frame(path, DATASET) for path in snakemake.input.datasets]
# items_per_cell "plan": each cell gets the labels the sampling plan (annotation_plan) asks for
counts = cell_counts(read_frame(snakemake.input.plan[0], ANNOTATION_PLAN)) if snakemake.input.plan else params.items_per_cell
items = annotation_items(
    votes, items_per_cell=counts, seed=params.seed,
    knowledge_units=judges_unit_lists(datasets) if datasets else knowledge_units_by_dataset(votes),
)
write_frame(items, output.key, ANNOTATION_ITEMS, {"sampled_from": list(snakemake.input.votes),
                                                    "items_per_cell": counts, "seed": params.seed})
write_blank_sheet(items, output.sheet)
write_form(items, output.form, title=params.title)
