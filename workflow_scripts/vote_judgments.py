"""Rule vote_judgments: a cell's votes (majority or Dawid–Skene), agreement, α/AC1 and the gate."""
from bloomqg.runtime.job import start_job
from bloomqg.store.parquet_io import read_frame, write_frame
from bloomqg.store.frames import GENERATIONS, JUDGMENTS, RELIABILITY, VOTES
from bloomqg.voting.cell import vote_cell, vote_options

snakemake = globals()["snakemake"]
start_job(snakemake)
params = snakemake.params
votes, reliability = vote_cell(
    read_frame(snakemake.input.generations, GENERATIONS),
    [read_frame(path, JUDGMENTS) for path in snakemake.input.judgments],
    **vote_options(params.gate, params.vote, params.bootstrap, params.seed),
)
provenance = {"gate": dict(params.gate), "vote": dict(params.vote), "judgments": list(snakemake.input.judgments)}
write_frame(votes, snakemake.output.votes, VOTES, provenance)
write_frame(reliability, snakemake.output.reliability, RELIABILITY, provenance)
