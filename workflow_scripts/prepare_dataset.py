"""Rule prepare_dataset: load, label and validate one dataset into the DATASET schema."""
from pathlib import Path

from bloomqg.inputs.datasets import load_dataset
from bloomqg.release.download import verify_release_files
from bloomqg.runtime.job import start_job
from bloomqg.store.parquet_io import write_frame
from bloomqg.store.provenance import sha256_file
from bloomqg.store.frames import DATASET
from bloomqg.study.config import job_study_spec

snakemake = globals()["snakemake"]
start_job(snakemake)
spec = dict(snakemake.params.spec)
if snakemake.params.release_dir:  # the files may have changed since planning
    verify_release_files(snakemake.input, snakemake.params.release_dir)
# The limits are checks, not a params: value: changing one must not rerun the study's jobs.
frame = load_dataset(
    snakemake.wildcards.dataset, spec, base_dir=Path.cwd(), limits=job_study_spec(snakemake.config).input_limits
)
write_frame(
    frame,
    snakemake.output[0],
    DATASET,
    {"dataset_spec": spec, "source_sha256": {p: sha256_file(p) for p in snakemake.input}},
)
