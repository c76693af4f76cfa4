"""Rule import_release_run: a published run as this workflow's generations, votes and α."""
from pathlib import Path

from bloomqg.logs import configure_job_logging
from bloomqg.parquet_io import write_frame
from bloomqg.provenance import sha256_file
from bloomqg.release.runs import ReleaseRun, import_run, published_vote_lines
from bloomqg.release.reliability import gate_published_lines, release_reliability
from bloomqg.schemas import GENERATIONS, PUBLISHED_VOTE_LINES, RELIABILITY, VOTES

snakemake = globals()["snakemake"]
configure_job_logging(snakemake.log[0])
wc, params = snakemake.wildcards, snakemake.params
run = ReleaseRun(wc.model, wc.dataset, wc.strategy, Path(snakemake.input.generations), Path(snakemake.input.votes))
generations, votes = import_run(run)
votes, reliability = release_reliability(
    votes,
    gate_alpha=params.gate["alpha"],
    gate_action=params.gate["action"],
    n_resamples=params.bootstrap["n_resamples"],
    confidence=params.bootstrap["confidence"],
    seed=params.seed,
)
provenance = {
    "imported_from": {p: sha256_file(p) for p in (snakemake.input.generations, snakemake.input.votes)},
    "manifest": snakemake.input.manifest,
}
write_frame(generations, snakemake.output.generations, GENERATIONS, provenance)
write_frame(votes, snakemake.output.votes, VOTES, provenance)
write_frame(reliability, snakemake.output.reliability, RELIABILITY, provenance)
lines = gate_published_lines(published_vote_lines(run), reliability)
write_frame(lines, snakemake.output.lines, PUBLISHED_VOTE_LINES, provenance)
