"""Rule merge_generations: join a cell's shards, checking each prompt appears exactly once."""
from bloomqg.runtime.job import start_job
from bloomqg.store.parquet_io import read_frame, read_provenance, write_frame
from bloomqg.store.frames import GENERATIONS, PROMPTS
from bloomqg.runtime.sharding import merge_shards

snakemake = globals()["snakemake"]
start_job(snakemake)
expected = read_frame(snakemake.input.prompts, PROMPTS)["prompt_id"].tolist()
frames = [read_frame(path, GENERATIONS) for path in snakemake.input.shards]
merged = merge_shards(frames, expected, key="prompt_id")
shard_provenance = [read_provenance(path) for path in snakemake.input.shards]
write_frame(merged, snakemake.output[0], GENERATIONS, {**shard_provenance[0], "shards": shard_provenance})
