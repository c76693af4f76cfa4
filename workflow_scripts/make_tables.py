"""Rule make_tables: the paper's tables (CSV, Markdown, LaTeX) from all metrics."""
from pathlib import Path

import pandas as pd

from bloomqg.runtime.job import start_job
from bloomqg.store.parquet_io import read_frame, read_frames
from bloomqg.reporting.tables.write import write_tables
from bloomqg.store.frames import DATASET, METRICS, RELIABILITY

snakemake = globals()["snakemake"]
start_job(snakemake)
datasets = {Path(p).stem: read_frame(p, DATASET) for p in snakemake.input.datasets}
reliability = read_frames(snakemake.input.reliability, RELIABILITY)
write_tables(
    read_frame(snakemake.input.metrics, METRICS),
    datasets,
    reliability,
    Path(snakemake.output[0]).parent,
    paired=pd.read_parquet(snakemake.input.paired),
    strategy_labels=snakemake.params.strategy_labels,  # {name: label}, defined order
)
