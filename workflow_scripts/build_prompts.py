"""Rule build_prompts: chat messages per item for one dataset × strategy."""
from bloomqg.runtime.job import start_job
from bloomqg.store.parquet_io import read_frame, write_frame
from bloomqg.inputs.prompts import strategy_from_params, study_prompts, template_hash
from bloomqg.store.frames import DATASET, PROMPTS

snakemake = globals()["snakemake"]
start_job(snakemake)
definition = snakemake.params.strategy  # the strategy's passes and resolved exemplar count
spec = strategy_from_params(snakemake.wildcards.strategy, definition)
prompts = study_prompts(
    read_frame(snakemake.input.dataset, DATASET),
    snakemake.wildcards.strategy,
    definition,
    seed=snakemake.params.seed,
    domain=snakemake.params.domain,
    system_path=snakemake.input.system or None,
    limit_items=snakemake.params.limit_items,
    limit_items_by=snakemake.params.limit_items_by,
)
write_frame(
    prompts,
    snakemake.output[0],
    PROMPTS,
    {"template": spec.template, "templates": [p.template for p in spec.passes],
     "template_hash": template_hash(spec.template), "passes": [p.name for p in spec.passes]},
)
