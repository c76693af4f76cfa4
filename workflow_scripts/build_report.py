"""Rule build_report: one self-contained HTML page explaining the run."""
from pathlib import Path

import pandas as pd

from bloomqg.api.ledger import ledger_from_judgments
from bloomqg.logs import configure_job_logging
from bloomqg.parquet_io import read_frame, read_frames, read_provenance
from bloomqg.provenance import git_commit, package_versions
from bloomqg.report import build_report
from bloomqg.schemas import GENERATIONS, JUDGMENTS, METRICS, RELIABILITY, VOTES

snakemake = globals()["snakemake"]
configure_job_logging(snakemake.log[0])
inputs = snakemake.input


build_report(
    Path(snakemake.output[0]),
    config=snakemake.params.config,
    all_metrics=read_frame(inputs.metrics, METRICS),
    votes=read_frames(inputs.votes, VOTES),
    reliability=read_frames(inputs.reliability, RELIABILITY),
    generations=read_frames(inputs.generations, GENERATIONS),
    generation_provenance=[read_provenance(p) for p in inputs.generations],
    judgment_provenance=[read_provenance(p) for p in inputs.judgments],
    ledger=ledger_from_judgments(read_frames(inputs.judgments, JUDGMENTS)),
    table_paths=[Path(p) for p in inputs.tables],
    figure_paths=[Path(p) for p in inputs.figures],
    correlations=pd.read_parquet(inputs.correlations),
    paired=pd.read_parquet(inputs.paired),
    git_commit=git_commit(),
    package_versions=package_versions(),
)
