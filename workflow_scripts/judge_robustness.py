"""Rule judge_robustness: each headline comparison under Dawid–Skene and every leave-one-judge-out panel."""
from bloomqg.runtime.job import start_job
from bloomqg.metrics.robustness import panel_judges, robustness_table
from bloomqg.store.parquet_io import read_frames
from bloomqg.store.frames import RELIABILITY, VOTES
from bloomqg.inputs.strategies import ComparisonSpec

snakemake = globals()["snakemake"]
start_job(snakemake)
votes = read_frames(snakemake.input.votes, VOTES)
judges = panel_judges(read_frames(snakemake.input.reliability, RELIABILITY))
params = snakemake.params
robustness_table(
    votes,
    judges,
    comparison=ComparisonSpec.from_config({"comparisons": params.comparisons}),
    strategy_order=params.strategy_order,
    seed=params.seed,
).to_parquet(snakemake.output[0])
