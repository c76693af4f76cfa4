"""Rule score_metrics: the paper's metrics with bootstrap CIs for one cell."""
from bloomqg.logs import configure_job_logging
from bloomqg.metrics import score_cell
from bloomqg.parquet_io import read_frame, write_frame
from bloomqg.schemas import METRICS, RELIABILITY, VOTES

snakemake = globals()["snakemake"]
configure_job_logging(snakemake.log[0])
params = snakemake.params
metrics = score_cell(
    read_frame(snakemake.input.votes, VOTES),
    read_frame(snakemake.input.reliability, RELIABILITY),
    n_resamples=params.bootstrap["n_resamples"],
    confidence=params.bootstrap["confidence"],
    seed=params.seed,
)
write_frame(metrics, snakemake.output[0], METRICS, {"bootstrap": dict(params.bootstrap)})
