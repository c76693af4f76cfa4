"""Rule take_engine_shard: one shard of an engine-served model, out of its generate_on_engine folder."""
from bloomqg.generation.engine_job import take_engine_shard
from bloomqg.runtime.job import start_job

snakemake = globals()["snakemake"]
start_job(snakemake)
wildcards = snakemake.wildcards
take_engine_shard(snakemake.input[0], wildcards.dataset, wildcards.strategy, int(wildcards.shard),
                  snakemake.output[0])
