"""Rule panel_calibrate: the local majority over every question corrected by the panel's
majority on its sample (PPI++), per cell and metric and per strategy pair, and the tables."""
from bloomqg.annotation.calibration import calibrated_estimates, paired_estimates, study_pairs
from bloomqg.annotation.calibration_tables import PANEL, calibrated_table, paired_table
from bloomqg.annotation.panel_sample import drawn_items, panel_joined, sample_note
from bloomqg.annotation.reporting import write_table
from bloomqg.store.frames import CALIBRATION_ESTIMATES, CALIBRATION_ITEMS, CALIBRATION_PAIRED, VOTES
from bloomqg.runtime.job import start_job
from bloomqg.store.parquet_io import read_frame, write_frame

snakemake = globals()["snakemake"]
start_job(snakemake)
params, output = snakemake.params, snakemake.output
settings = params.settings
local = [read_frame(path, VOTES) for path in snakemake.input.local]
panel = [read_frame(path, VOTES) for path in snakemake.input.panel]
joined = panel_joined(local, panel, settings)
estimates = calibrated_estimates(joined, drawn_items(joined), confidence=settings.confidence,
                                 pseudo_disagreements=settings.pseudo_disagreements)
paired = paired_estimates(joined, study_pairs(local, params.config),
                          confidence=settings.confidence, pseudo_disagreements=settings.pseudo_disagreements)
provenance = {"panel_sample": {"judges": settings.judges, "local_judges": settings.local_judges,
                               **settings.draw_spec}, "pseudo_disagreements": settings.pseudo_disagreements}
write_frame(joined, output.joined, CALIBRATION_ITEMS, provenance)
write_frame(estimates, output.estimates, CALIBRATION_ESTIMATES, provenance)
write_frame(paired, output.paired, CALIBRATION_PAIRED, provenance)
write_table(calibrated_table(estimates, None, n_annotators=0, rounds=[], gold=PANEL,
                             pseudo_disagreements=settings.pseudo_disagreements,
                             strategy_labels=params.strategy_labels,
                             sample_note=sample_note(settings, joined)), output.tables)
write_table(paired_table(paired, params.strategy_labels, gold=PANEL), output.paired_tables)
