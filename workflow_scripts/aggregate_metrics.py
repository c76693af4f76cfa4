"""Rule aggregate_metrics: all cells in one tidy table, RQ4/RQ5 correlations, CoT-vs-FGP pairs."""
import pandas as pd

from bloomqg.logs import configure_job_logging
from bloomqg.metrics import correlations, paired_comparisons
from bloomqg.parquet_io import read_frame, write_frame
from bloomqg.schemas import METRICS, VOTES

snakemake = globals()["snakemake"]
configure_job_logging(snakemake.log[0])
params = snakemake.params
all_metrics = pd.concat([read_frame(p, METRICS) for p in snakemake.input.metrics], ignore_index=True)
votes = pd.concat([read_frame(p, VOTES) for p in snakemake.input.votes], ignore_index=True)
write_frame(all_metrics, snakemake.output.all, METRICS)
correlations(all_metrics, confidence=params.bootstrap["confidence"]).to_parquet(snakemake.output.correlations)
paired_comparisons(
    votes, n_resamples=params.bootstrap["n_resamples"], seed=params.seed
).to_parquet(snakemake.output.paired)
