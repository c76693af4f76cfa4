"""Rule prepare_model: convert a GGUF-shipped model into a safetensors folder, once."""
from pathlib import Path

from bloomqg.logs import configure_job_logging
from bloomqg.models import materialize_model

snakemake = globals()["snakemake"]
configure_job_logging(snakemake.log[0])
materialize_model(snakemake.params.spec, Path(snakemake.output[0]))
