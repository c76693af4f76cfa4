"""Rule train_learned_judge: fit (or take from the cache) a learned judge's model."""
import pandas as pd

from bloomqg.frames import VOTES
from bloomqg.job import start_job
from bloomqg.judges.learned import train_cached
from bloomqg.parquet_io import read_frame

snakemake = globals()["snakemake"]
start_job(snakemake)
votes = pd.concat([read_frame(path, VOTES) for path in snakemake.input.votes], ignore_index=True)
train_cached(votes, snakemake.wildcards.judge, dict(snakemake.params.spec), snakemake.output.model,
             cache_dir=snakemake.params.cache_dir)
