"""Rule vote_panel_sample: the panel's majority (and α) on one cell's sampled questions."""
import pandas as pd

from bloomqg.annotation.panel_sample import draw_panel_sample
from bloomqg.store.frames import GENERATIONS, JUDGMENTS, RELIABILITY, VOTES
from bloomqg.runtime.job import start_job
from bloomqg.store.parquet_io import read_frame, write_frame
from bloomqg.voting.cell import vote_cell, vote_options

snakemake = globals()["snakemake"]
start_job(snakemake)
params = snakemake.params
sample = draw_panel_sample(read_frame(snakemake.input.generations, GENERATIONS), params.draw)
if sample.empty:  # the cell wrote no question: the panel had nothing to judge
    votes, reliability = (pd.DataFrame(columns=schema.names) for schema in (VOTES, RELIABILITY))
else:
    votes, reliability = vote_cell(
        sample,
        [read_frame(path, JUDGMENTS) for path in snakemake.input.judgments],
        **vote_options(params.gate, params.vote, params.bootstrap, params.seed),
        min_valid_votes=params.min_valid_votes,  # a one-judge panel's verdict is its gold
    )
provenance = {"panel_sample": dict(params.draw), "gate": dict(params.gate), "vote": dict(params.vote),
              "judgments": list(snakemake.input.judgments)}
write_frame(votes, snakemake.output.votes, VOTES, provenance)
write_frame(reliability, snakemake.output.reliability, RELIABILITY, provenance)
