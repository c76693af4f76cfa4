"""Rule train_learned_judge: fit (or take from the cache) a learned judge's model, from panel
votes (the release's, an earlier study's) or from annotators' majorities (people as teacher)."""
import pandas as pd

from bloomqg.store.frames import ANNOTATION_ITEMS, VOTES
from bloomqg.runtime.job import start_job
from bloomqg.judges.learned import train_cached
from bloomqg.store.parquet_io import read_frame

snakemake = globals()["snakemake"]
start_job(snakemake)
inputs = snakemake.input
if "annotation_items" in inputs.keys():  # train.source annotations: the annotators' majorities are the votes
    from bloomqg.annotation.agreement import human_majority_votes
    from bloomqg.annotation.sheets import read_sheets

    items = read_frame(inputs.annotation_items[0], ANNOTATION_ITEMS)
    votes = human_majority_votes(items, read_sheets(list(inputs.sheets), items))
else:
    votes = pd.concat([read_frame(path, VOTES) for path in inputs.votes], ignore_index=True)
train_cached(votes, snakemake.wildcards.judge, dict(snakemake.params.spec), snakemake.output.model,
             cache_dir=snakemake.params.cache_dir)
