"""Rule plot_figures: the paper's figures (PNG + SVG) for this study or an imported release."""
from pathlib import Path

import pandas as pd

from bloomqg.runtime.job import start_job
from bloomqg.store.parquet_io import read_frame, read_frames
from bloomqg.reporting.figures.write import write_figures
from bloomqg.store.frames import METRICS, RELIABILITY, VOTES

snakemake = globals()["snakemake"]
start_job(snakemake)
write_figures(
    read_frame(snakemake.input.metrics, METRICS),
    read_frames(snakemake.input.votes, VOTES),
    read_frames(snakemake.input.reliability, RELIABILITY),
    pd.read_parquet(snakemake.input.correlations),
    Path(snakemake.output[0]).parent,
    strategy_labels=snakemake.params.strategy_labels,  # {name: label}, defined order
)
