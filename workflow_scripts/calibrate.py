"""Rule calibrate: the annotation rounds' labels joined to the panel's verdicts per item, and the
judges' / humans' / PPI++ estimates per cell and metric, paired differences, agreement at six and
three Bloom levels, and the report's "Calibrated" tables."""
from bloomqg.annotation.calibration import (calibrated_estimates, check_random_draw, joined_items,
                                            level_agreement, paired_estimates, read_rounds,
                                            study_pairs)
from bloomqg.annotation.calibration_tables import calibrated_table, paired_table
from bloomqg.annotation.reporting import write_table
from bloomqg.store.frames import (ANNOTATION_ITEMS, CALIBRATION_AGREEMENT, CALIBRATION_ESTIMATES, CALIBRATION_ITEMS,
                            CALIBRATION_PAIRED, VOTES)
from bloomqg.runtime.job import start_job
from bloomqg.store.parquet_io import read_frame, read_provenance, write_frame
from bloomqg.store.provenance import sha256_file

snakemake = globals()["snakemake"]
start_job(snakemake)
params, output = snakemake.params, snakemake.output
items = read_frame(snakemake.input.key, ANNOTATION_ITEMS)
drawn = read_provenance(snakemake.input.key)  # how the export drew the sample it wrote
votes = [read_frame(path, VOTES) for path in snakemake.input.votes]
check_random_draw(items, votes, items_per_cell=drawn["items_per_cell"], seed=int(drawn["seed"]),
                  where=snakemake.input.key)
ratings = read_rounds(params.rounds, items)
joined = joined_items(items, ratings, votes)
estimates = calibrated_estimates(joined, items, confidence=params.confidence,
                                 pseudo_disagreements=params.pseudo_disagreements)
paired = paired_estimates(joined, study_pairs(votes, params.config),
                          confidence=params.confidence, pseudo_disagreements=params.pseudo_disagreements)
agreement = level_agreement(items, ratings)
provenance = {"sheets": {p: sha256_file(p) for p in snakemake.input.sheets}, "rounds": list(params.rounds),
              "pseudo_disagreements": params.pseudo_disagreements}
write_frame(joined, output.joined, CALIBRATION_ITEMS, provenance)
write_frame(estimates, output.estimates, CALIBRATION_ESTIMATES, provenance)
write_frame(paired, output.paired, CALIBRATION_PAIRED, provenance)
write_frame(agreement, output.agreement, CALIBRATION_AGREEMENT, provenance)
n_annotators = ratings["annotator"].nunique() if len(ratings) else 0
write_table(calibrated_table(estimates, agreement, n_annotators=n_annotators, rounds=list(params.rounds),
                             pseudo_disagreements=params.pseudo_disagreements,
                             strategy_labels=params.strategy_labels), output.tables)
write_table(paired_table(paired, params.strategy_labels), output.paired_tables)
