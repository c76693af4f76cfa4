"""Rule import_release_run: a published run as this workflow's generations, votes and α."""
from pathlib import Path

from bloomqg.runtime.job import start_job
from bloomqg.store.parquet_io import write_frame
from bloomqg.release.reliability import gate_published_lines, release_reliability
from bloomqg.release.runs import ReleaseRun, import_run, published_vote_lines, verify_run_files
from bloomqg.store.frames import GENERATIONS, PUBLISHED_VOTE_LINES, RELIABILITY, VOTES
from bloomqg.voting.cell import vote_options

snakemake = globals()["snakemake"]
start_job(snakemake)
wc, params, inputs = snakemake.wildcards, snakemake.params, snakemake.input
run = ReleaseRun(wc.model, wc.dataset, wc.strategy, Path(inputs.generations), Path(inputs.votes),
                 pinned=params.pinned)
hashes = verify_run_files(run)
generations, votes = import_run(run)
votes, reliability = release_reliability(votes, **vote_options(params.gate, params.vote, params.bootstrap, params.seed))
lines = gate_published_lines(published_vote_lines(run, votes), reliability)
provenance = {
    "model": wc.model, "dataset": wc.dataset, "strategy": wc.strategy,
    # The release's repository and commit when the manifest pins its files (hashes checked above).
    "release": {key: params.pinned[key] for key in ("repository", "commit")} if params.pinned else None,
    "imported_from": {str(run.files()[key]): sha for key, sha in hashes.items()},
    "manifest": inputs.manifest,
}
write_frame(generations, snakemake.output.generations, GENERATIONS, provenance)
write_frame(votes, snakemake.output.votes, VOTES, provenance)
write_frame(reliability, snakemake.output.reliability, RELIABILITY, provenance)
write_frame(lines, snakemake.output.lines, PUBLISHED_VOTE_LINES, provenance)
