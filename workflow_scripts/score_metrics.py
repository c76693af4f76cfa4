"""Rule score_metrics: the paper's metrics with their intervals for one cell."""
from bloomqg.runtime.job import start_job
from bloomqg.metrics.cell import score_cell
from bloomqg.metrics.intervals import IntervalSpec
from bloomqg.store.parquet_io import read_frame, write_frame
from bloomqg.store.frames import METRICS, PUBLISHED_VOTE_LINES, RELIABILITY, VOTES

snakemake = globals()["snakemake"]
start_job(snakemake)
params = snakemake.params
# An imported release run also has its votes file line by line: Table 4 is computed over it.
lines = snakemake.input.get("lines")
intervals = IntervalSpec.from_config({"intervals": params.intervals, "bootstrap": params.bootstrap})
metrics = score_cell(
    read_frame(snakemake.input.votes, VOTES),
    read_frame(snakemake.input.reliability, RELIABILITY),
    intervals=intervals,
    seed=params.seed,
    published_lines=read_frame(lines, PUBLISHED_VOTE_LINES) if lines else None,
)
write_frame(metrics, snakemake.output[0], METRICS, {"intervals": intervals.describe()})
