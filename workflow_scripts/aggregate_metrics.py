"""Rule aggregate_metrics: all cells in one tidy table, RQ4/RQ5 correlations, strategy-vs-strategy pairs."""
from bloomqg.runtime.job import start_job
from bloomqg.metrics.correlations import correlations
from bloomqg.metrics.intervals import IntervalSpec
from bloomqg.metrics.paired import paired_comparisons
from bloomqg.store.parquet_io import read_frames, write_frame
from bloomqg.store.frames import METRICS, VOTES
from bloomqg.inputs.strategies import ComparisonSpec

snakemake = globals()["snakemake"]
start_job(snakemake)
params = snakemake.params
intervals = IntervalSpec.from_config({"intervals": params.intervals, "bootstrap": params.bootstrap})
all_metrics = read_frames(snakemake.input.metrics, METRICS)
votes = read_frames(snakemake.input.votes, VOTES)
write_frame(all_metrics, snakemake.output.all, METRICS, {"intervals": intervals.describe()})
correlations(all_metrics, confidence=params.bootstrap["confidence"]).to_parquet(snakemake.output.correlations)
paired_comparisons(
    votes,
    comparison=ComparisonSpec.from_config({"comparisons": params.comparisons}),
    strategy_order=params.strategy_order,
    n_resamples=intervals.n_resamples,
    seed=params.seed,
    confidence=intervals.confidence,
    bootstrap=intervals.bootstrap,
).to_parquet(snakemake.output.paired)
