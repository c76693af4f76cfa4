# Generation: one job per model × dataset × strategy × shard; the model loads once per job.


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
    conda:
        "../envs/generation.yaml"
    # Capped by --cores / --max-threads; an API generator mostly waits on the network.
    threads: lambda wc: 1 if CFG["models"][wc.model]["backend"] == "openai" else 8
    # gpu: the local --resources cap and the SLURM plugin's --gpus; api: capped by the profiles.
    resources:
        gpu=lambda wc: MODEL_RESOURCES[wc.model].gpu,
        mem_mb=lambda wc: MODEL_RESOURCES[wc.model].mem_mb,
        runtime=lambda wc: MODEL_RESOURCES[wc.model].runtime,
        api=lambda wc: MODEL_RESOURCES[wc.model].api,
    params:
        spec=lambda wc: CFG["models"][wc.model],
        seed=CFG["seed"],
        n_shards=lambda wc: STUDY.shards(wc.dataset),
        # Outside the outputs, so a killed or failed job keeps its finished batches.
        checkpoint=lambda wc: f"{CFG['cache_dir']}/checkpoints/generate_questions/{wc.dataset}/{wc.strategy}/{wc.model}/shard-{wc.shard}",
        cache_dir=CFG["cache_dir"],
        code=CODE["generation"],
    script:
        "../workflow_scripts/generate_questions.py"


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
    localrule: True
    conda:
        "../envs/analysis.yaml"
    params:
        code=CODE["generation"],
    script:
        "../workflow_scripts/merge_generations.py"
