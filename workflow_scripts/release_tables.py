"""Rule release_tables: the paper's Tables 4–6, the auxiliary tasks and the comparison with the
paper's published figures, for imported runs; the import report of their unjoined vote lines."""
from pathlib import Path

import pandas as pd

from bloomqg.runtime.job import start_job
from bloomqg.store.parquet_io import read_frame, write_frame
from bloomqg.release.paper import load_paper_figures
from bloomqg.release.runs import unjoined_lines
from bloomqg.release.tables import release_tables
from bloomqg.store.frames import GENERATIONS, METRICS, PUBLISHED_VOTE_LINES, UNJOINED_LINES

snakemake = globals()["snakemake"]
start_job(snakemake)
inputs = snakemake.input
unjoined = pd.concat(
    [unjoined_lines(read_frame(generations, GENERATIONS), read_frame(lines, PUBLISHED_VOTE_LINES))
     for generations, lines in zip(inputs.generations, inputs.lines, strict=True)],
    ignore_index=True,
)
write_frame(unjoined, snakemake.output.import_report, UNJOINED_LINES,
            {"generations": list(inputs.generations), "lines": list(inputs.lines)})
release_tables(
    read_frame(inputs.metrics, METRICS),
    Path(snakemake.output[0]).parent,
    load_paper_figures(inputs.paper_figures),
    unjoined,
)
