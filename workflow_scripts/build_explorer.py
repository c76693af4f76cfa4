"""Rule build_explorer: the item explorer of a study (or of the imported release) beside its report."""
from pathlib import Path

from bloomqg.runtime.job import start_job
from bloomqg.reporting.explorer.write import write_explorer_from_files

snakemake = globals()["snakemake"]
start_job(snakemake)
inputs = snakemake.input
write_explorer_from_files(
    Path(snakemake.output[0]).parent,
    votes=inputs.votes,
    generations=inputs.generations,
    judgments=inputs.judgments,  # empty for the release: it publishes votes, not the judges' calls
    reliability=inputs.reliability,
    metrics=inputs.metrics,
    lines=inputs.get("lines", []),  # the release's published vote lines: its Table 4 counts them
    title=snakemake.params.title,
    strategy_labels=snakemake.params.strategy_labels,  # as the report's links name them
)
