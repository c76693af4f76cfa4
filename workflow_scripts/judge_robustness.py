"""Rule judge_robustness: each headline comparison under Dawid–Skene and every leave-one-judge-out panel."""
from bloomqg.job import start_job
from bloomqg.metrics.robustness import panel_judges, robustness_table
from bloomqg.parquet_io import read_frames
from bloomqg.frames import RELIABILITY, VOTES

snakemake = globals()["snakemake"]
start_job(snakemake)
votes = read_frames(snakemake.input.votes, VOTES)
judges = panel_judges(read_frames(snakemake.input.reliability, RELIABILITY))
robustness_table(votes, judges, seed=snakemake.params.seed).to_parquet(snakemake.output[0])
