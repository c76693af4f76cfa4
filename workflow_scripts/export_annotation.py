"""Rule export_annotation: the stratified sample, a blank sheet and the HTML form."""
from bloomqg.annotation.form import write_blank_sheet, write_form
from bloomqg.annotation.sample import annotation_items, knowledge_units_by_dataset
from bloomqg.logs import configure_job_logging
from bloomqg.parquet_io import read_frame, write_frame
from bloomqg.schemas import ANNOTATION_ITEMS, VOTES

snakemake = globals()["snakemake"]
configure_job_logging(snakemake.log[0])
params, output = snakemake.params, snakemake.output
votes = [read_frame(path, VOTES) for path in snakemake.input.votes]
items = annotation_items(
    votes, items_per_cell=params.items_per_cell, seed=params.seed,
    knowledge_units=knowledge_units_by_dataset(votes),
)
write_frame(items, output.key, ANNOTATION_ITEMS, {"sampled_from": list(snakemake.input.votes),
                                                    "items_per_cell": params.items_per_cell, "seed": params.seed})
write_blank_sheet(items, output.sheet)
write_form(items, output.form, title=params.title)
