"""Rule release_tables: the paper's Tables 4–6, the auxiliary tasks and the comparison with the
paper's published figures, for imported runs."""
from pathlib import Path

from bloomqg.job import start_job
from bloomqg.parquet_io import read_frame
from bloomqg.release.paper import load_paper_figures
from bloomqg.release.tables import release_tables
from bloomqg.frames import METRICS

snakemake = globals()["snakemake"]
start_job(snakemake)
release_tables(
    read_frame(snakemake.input.metrics, METRICS),
    Path(snakemake.output[0]).parent,
    load_paper_figures(snakemake.input.paper_figures),
)
