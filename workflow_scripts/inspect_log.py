"""Rule inspect_log: one cell's Parquet files as an Inspect .eval log."""
from bloomqg.runtime.job import start_job
from bloomqg.reporting.inspect_logs.export import read_cell, write_cell_log, writer_version

snakemake = globals()["snakemake"]
start_job(snakemake)
inputs, wc = snakemake.input, snakemake.wildcards
cell = read_cell(
    wc.model, wc.dataset, wc.strategy,
    generations=inputs.generations, prompts=inputs.prompts, judgments=list(inputs.judgments),
    votes=inputs.votes, metrics=inputs.metrics,
)
write_cell_log(
    cell, snakemake.output[0], model_spec=snakemake.params.model_spec,
    decoding=cell.generation_provenance.get("decoding") or {}, bloomqg_version=writer_version(),
)
