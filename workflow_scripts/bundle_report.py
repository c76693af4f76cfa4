"""Rule bundle_report: the report and its explorer in one folder, for `snakemake --report`."""
from bloomqg.runtime.job import start_job
from bloomqg.reporting.bundle import bundle_report

snakemake = globals()["snakemake"]
start_job(snakemake)
bundle_report(snakemake.input.report, snakemake.input.explorer, snakemake.output[0])
