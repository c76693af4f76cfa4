"""Rule import_annotations: filled sheets checked, compared with the panel, Table 9 and its figure."""
from bloomqg.annotation.panel_agreement import human_panel_agreement
from bloomqg.annotation.reporting import plot_human_agreement, table9, write_table
from bloomqg.annotation.sheets import read_sheets
from bloomqg.logs import configure_job_logging
from bloomqg.parquet_io import read_frame, write_frame
from bloomqg.provenance import sha256_file
from bloomqg.schemas import ANNOTATION_ITEMS, RATER_AGREEMENT

snakemake = globals()["snakemake"]
configure_job_logging(snakemake.log[0])
params, output = snakemake.params, snakemake.output
items = read_frame(snakemake.input.key, ANNOTATION_ITEMS)
sheets = list(snakemake.input.sheets)
ratings = read_sheets(sheets, items)
agreement = human_panel_agreement(
    items, ratings, n_resamples=params.bootstrap["n_resamples"],
    confidence=params.bootstrap["confidence"], seed=params.seed,
)
write_frame(agreement, output.agreement, RATER_AGREEMENT, {"sheets": {p: sha256_file(p) for p in sheets}})
write_table(table9(agreement, annotations_dir=params.annotations_dir, n_sheets=len(sheets),
                   n_annotators=ratings["annotator"].nunique()), output.tables)
plot_human_agreement(agreement, output.figure, annotations_dir=params.annotations_dir)
