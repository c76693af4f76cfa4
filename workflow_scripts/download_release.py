"""Rule download_release: the paper's release at its pinned commit, hashes checked."""
from bloomqg.runtime.job import start_job
from bloomqg.release.download import download_release

snakemake = globals()["snakemake"]
start_job(snakemake)
download_release(snakemake.input.pins, snakemake.params.release_dir)
