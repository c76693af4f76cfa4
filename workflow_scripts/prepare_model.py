"""Rule prepare_model: convert a GGUF-shipped model into a safetensors folder, once."""
from pathlib import Path

from bloomqg.runtime.job import start_job
from bloomqg.inputs.models import materialize_model

snakemake = globals()["snakemake"]
start_job(snakemake)
materialize_model(snakemake.params.spec, Path(snakemake.output[0]))
