"""Rule build_prompts: chat messages per item for one dataset × strategy."""
from bloomqg.job import start_job
from bloomqg.parquet_io import read_frame, write_frame
from bloomqg.prompts import build_prompts, template_hash
from bloomqg.frames import DATASET, PROMPTS

snakemake = globals()["snakemake"]
start_job(snakemake)
dataset = read_frame(snakemake.input.dataset, DATASET)
prompts = build_prompts(
    dataset,
    snakemake.wildcards.strategy,
    template_path=snakemake.input.template,
    k_exemplars=snakemake.params.exemplars,
    seed=snakemake.params.seed,
    domain=snakemake.params.domain,
    system_path=snakemake.input.system or None,
)
# limit_items keeps the first N items; exemplars above were still drawn from the whole dataset.
if snakemake.params.limit_items:
    prompts = prompts.head(snakemake.params.limit_items)
write_frame(
    prompts,
    snakemake.output[0],
    PROMPTS,
    {"template": snakemake.input.template, "template_hash": template_hash(snakemake.input.template)},
)
