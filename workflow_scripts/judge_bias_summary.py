"""Rule judge_bias_summary: the probes' bias estimates with CIs, their table and figure."""
import pandas as pd

from bloomqg.judges.bias.stats import bias_estimates
from bloomqg.runtime.job import start_job
from bloomqg.store.parquet_io import read_frame, write_frame
from bloomqg.reporting.judge_bias import plot_positions, write_judge_bias_table
from bloomqg.store.frames import BIAS_ESTIMATES, BIAS_POSITIONS, JUDGE_PROBES

snakemake = globals()["snakemake"]
start_job(snakemake)
params, output = snakemake.params, snakemake.output
probes = pd.concat([read_frame(path, JUDGE_PROBES) for path in snakemake.input.probes], ignore_index=True)
estimates, positions = bias_estimates(
    probes, params.families, n_resamples=params.bootstrap["n_resamples"],
    confidence=params.bootstrap["confidence"], seed=params.seed,
)
provenance = {"families": params.families, "probe_files": list(snakemake.input.probes)}
write_frame(estimates, output.estimates, BIAS_ESTIMATES, provenance)
write_frame(positions, output.positions, BIAS_POSITIONS, provenance)
write_judge_bias_table(estimates, output.table, output.view)
plot_positions(positions, output.figure)
