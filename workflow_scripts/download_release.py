"""Rule download_release: the paper's release at its pinned commit, hashes checked."""
from bloomqg.logs import configure_job_logging
from bloomqg.release.download import download_release

snakemake = globals()["snakemake"]
configure_job_logging(snakemake.log[0])
download_release(snakemake.input.pins, snakemake.params.release_dir)
