"""Rule build_prompts: chat messages per item for one dataset × strategy."""
from bloomqg.runtime.job import start_job
from bloomqg.store.parquet_io import read_frame, write_frame
from bloomqg.inputs.prompts import build_prompts, limited_items, template_hash
from bloomqg.store.frames import DATASET, PROMPTS
from bloomqg.inputs.strategies import PassSpec, StrategySpec

snakemake = globals()["snakemake"]
start_job(snakemake)
dataset = read_frame(snakemake.input.dataset, DATASET)
definition = snakemake.params.strategy  # the strategy's passes and resolved exemplar count
spec = StrategySpec(
    snakemake.wildcards.strategy,
    snakemake.wildcards.strategy,  # the label is the report's, not the prompts'
    tuple(PassSpec(p["name"], p["template"], tuple(p["answer_fields"])) for p in definition["passes"]),
    exemplars=definition["exemplars"],
)
prompts = build_prompts(
    dataset,
    spec,
    k_exemplars=definition["exemplars"],
    seed=snakemake.params.seed,
    domain=snakemake.params.domain,
    system_path=snakemake.input.system or None,
)
# limit_items keeps N items (stratified or the first); exemplars were drawn from the whole dataset.
if snakemake.params.limit_items:
    kept = limited_items(dataset, snakemake.params.limit_items, by=snakemake.params.limit_items_by,
                         seed=snakemake.params.seed)
    prompts = prompts[prompts["item_id"].isin(kept)].reset_index(drop=True)
write_frame(
    prompts,
    snakemake.output[0],
    PROMPTS,
    {"template": spec.template, "templates": [p.template for p in spec.passes],
     "template_hash": template_hash(spec.template), "passes": [p.name for p in spec.passes]},
)
