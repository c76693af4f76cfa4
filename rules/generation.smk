# Generation: one job per model × dataset × strategy × shard; the model loads once per job.
# A model served by an engine: one job for all its cells, one server (docs/architecture.md).


rule generate_questions:
    input:
        prompts="results/prompts/{dataset}/{strategy}.parquet",
        dataset="results/datasets/{dataset}.parquet",
        model=lambda wc: model_dir(wc.model),
    output:
        "results/generations/{dataset}/{strategy}/{model}/shard-{shard}.parquet",
    log:
        "logs/generate_questions/{dataset}/{strategy}/{model}/shard-{shard}.log",
    benchmark:
        "logs/benchmarks/generate_questions/{dataset}/{strategy}/{model}/shard-{shard}.tsv"
    wildcard_constraints:
        model=names_pattern(LOOP_MODELS),
    conda:
        "../envs/generation.yaml"
    # Capped by --cores / --max-threads; an API generator mostly waits on the network.
    threads: lambda wc: 1 if STUDY.spec.models[wc.model].is_api else 8
    # gpu: the local --resources cap and the SLURM plugin's --gpus; api: capped by the profiles.
    resources:
        gpu=lambda wc: MODEL_RESOURCES[wc.model].gpu,
        mem_mb=lambda wc: MODEL_RESOURCES[wc.model].mem_mb,
        runtime=lambda wc: MODEL_RESOURCES[wc.model].runtime,
        api=lambda wc: MODEL_RESOURCES[wc.model].api,
    params:
        spec=lambda wc: STUDY.model_params(wc.model),
        seed=CFG["seed"],
        n_shards=lambda wc: STUDY.shards(wc.dataset),
        # Outside the outputs, so a killed or failed job keeps its finished batches.
        checkpoint=lambda wc: f"{CFG['cache_dir']}/checkpoints/generate_questions/{wc.dataset}/{wc.strategy}/{wc.model}/shard-{wc.shard}",
        cache_dir=CFG["cache_dir"],
        code=CODE["generation"],
    script:
        "../workflow_scripts/generate_questions.py"


# One server of the model's engine for all its cells, started and stopped by the job: a
# service() group with one job per cell does not fit here (docs/architecture.md).
rule generate_on_engine:
    input:
        unpack(engine_inputs),
    output:
        directory("results/engine/{model}"),
    log:
        # the server's own log: logs/serve/generate_on_engine/{model}.log, kept across reruns
        # (bloomqg.runtime.serving.server.server_log_path)
        job="logs/generate_on_engine/{model}.log",
    benchmark:
        "logs/benchmarks/generate_on_engine/{model}.tsv"
    wildcard_constraints:
        model=names_pattern(ENGINE_MODELS),
    conda:
        "../envs/generation.yaml"
    # The server's torch threads: capped by --cores / --max-threads.
    threads: 8
    resources:
        gpu=lambda wc: MODEL_RESOURCES[wc.model].gpu,
        mem_mb=lambda wc: MODEL_RESOURCES[wc.model].mem_mb,
        runtime=lambda wc: MODEL_RESOURCES[wc.model].runtime,
    params:
        # canonical, as generate_questions': a default written out reruns nothing
        spec=lambda wc: STUDY.model_params(wc.model),
        seed=CFG["seed"],
        shards=lambda wc: engine_shards(wc.model),
        # Outside the outputs (a directory Snakemake empties before the job): a killed job's
        # finished batches and answers survive in them.
        checkpoints=lambda wc: f"{CFG['cache_dir']}/checkpoints/generate_on_engine/{wc.model}",
        cache_dir=CFG["cache_dir"],
        code=CODE["generation"],
    script:
        "../workflow_scripts/generate_on_engine.py"


rule take_engine_shard:
    input:
        "results/engine/{model}",
    output:
        "results/generations/{dataset}/{strategy}/{model}/shard-{shard}.parquet",
    log:
        "logs/take_engine_shard/{dataset}/{strategy}/{model}/shard-{shard}.log",
    benchmark:
        "logs/benchmarks/take_engine_shard/{dataset}/{strategy}/{model}/shard-{shard}.tsv"
    wildcard_constraints:
        model=names_pattern(ENGINE_MODELS),
    localrule: True
    conda:
        "../envs/analysis.yaml"
    params:
        code=CODE["generation"],
    script:
        "../workflow_scripts/take_engine_shard.py"


rule merge_generations:
    input:
        prompts="results/prompts/{dataset}/{strategy}.parquet",
        shards=lambda wc: expand(
            "results/generations/{dataset}/{strategy}/{model}/shard-{shard}.parquet",
            dataset=wc.dataset,
            strategy=wc.strategy,
            model=wc.model,
            shard=range(STUDY.shards(wc.dataset)),
        ),
    output:
        "results/generations/{dataset}/{strategy}/{model}.parquet",
    log:
        "logs/merge_generations/{dataset}/{strategy}/{model}.log",
    benchmark:
        "logs/benchmarks/merge_generations/{dataset}/{strategy}/{model}.tsv"
    wildcard_constraints:
        model=names_pattern(LOOP_MODELS + ENGINE_MODELS),  # an Inspect entry's: import_inspect_generations
    localrule: True
    conda:
        "../envs/analysis.yaml"
    params:
        code=CODE["generation"],
    script:
        "../workflow_scripts/merge_generations.py"
