"""Rule study_plan: items needed per planned comparison, and the smallest difference this study can detect."""
from bloomqg.runtime.job import start_job
from bloomqg.metrics.plan import PlanSpec, study_plan
from bloomqg.store.parquet_io import read_frames
from bloomqg.store.frames import VOTES
from bloomqg.inputs.strategies import ComparisonSpec

snakemake = globals()["snakemake"]
start_job(snakemake)
params = snakemake.params
plan = study_plan(
    read_frames(snakemake.input.votes, VOTES),
    PlanSpec.from_config(params.plan),
    comparison=ComparisonSpec.from_config({"comparisons": params.comparisons}),
    strategy_order=params.strategy_order,
)
plan.to_parquet(snakemake.output[0])
