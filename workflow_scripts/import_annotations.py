"""Rule import_annotations: filled sheets checked, compared with the panel, Table 9 and its figure,
and the alternative annotator test of every judge (and the panel's majority) beside it."""
from bloomqg.annotation.alt_test import alt_test_frames
from bloomqg.annotation.judge_validation import annotated_judge_ratings
from bloomqg.annotation.panel_agreement import human_panel_agreement
from bloomqg.annotation.reporting import alt_test_table, plot_human_agreement, table9, write_table
from bloomqg.annotation.sheets import read_sheets
from bloomqg.runtime.job import start_job
from bloomqg.store.parquet_io import read_frame, write_frame
from bloomqg.store.provenance import sha256_file
from bloomqg.store.frames import ALT_TEST, ALT_TEST_COMPARISONS, ANNOTATION_ITEMS, JUDGMENTS, RATER_AGREEMENT

snakemake = globals()["snakemake"]
start_job(snakemake)
params, output = snakemake.params, snakemake.output
items = read_frame(snakemake.input.key, ANNOTATION_ITEMS)
sheets = list(snakemake.input.sheets)
ratings = read_sheets(sheets, items)
agreement = human_panel_agreement(
    items, ratings, n_resamples=params.bootstrap["n_resamples"],
    confidence=params.bootstrap["confidence"], seed=params.seed,
)
provenance = {"sheets": {p: sha256_file(p) for p in sheets}}
write_frame(agreement, output.agreement, RATER_AGREEMENT, provenance)
n_annotators = ratings["annotator"].nunique() if len(ratings) else 0
write_table(table9(agreement, annotations_dir=params.annotations_dir, n_sheets=len(sheets),
                   n_annotators=n_annotators, calibrated=params.calibrated), output.tables)
plot_human_agreement(agreement, output.figure, annotations_dir=params.annotations_dir,
                     strategy_labels=params.strategy_labels)

judges = annotated_judge_ratings(items, [read_frame(p, JUDGMENTS) for p in snakemake.input.judgments])
summary, comparisons = alt_test_frames(items, ratings, judges, **params.alt_test)
write_frame(summary, output.alt_test, ALT_TEST, {**provenance, "alt_test": dict(params.alt_test)})
write_frame(comparisons, output.alt_test_annotators, ALT_TEST_COMPARISONS, provenance)
write_table(alt_test_table(summary, n_annotators=n_annotators, epsilon=params.alt_test["epsilon"],
                           q=params.alt_test["q"], min_items=params.alt_test["min_items_per_annotator"]),
            output.alt_test_tables)
