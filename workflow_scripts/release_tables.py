"""Rule release_tables: the paper's Tables 4–6 and the auxiliary tasks for imported runs."""
from pathlib import Path

from bloomqg.logs import configure_job_logging
from bloomqg.parquet_io import read_frame
from bloomqg.release.tables import release_tables
from bloomqg.schemas import METRICS

snakemake = globals()["snakemake"]
configure_job_logging(snakemake.log[0])
release_tables(read_frame(snakemake.input[0], METRICS), Path(snakemake.output[0]).parent)
