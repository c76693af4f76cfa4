# Datasets: normalise, label Bloom levels (verb list), validate; then chat prompts per strategy.


rule prepare_model:
    """Convert a model shipped as a GGUF into a safetensors folder once (loads in ~1 s, not ~35 s)."""
    output:
        directory("resources/models/{model}"),
    log:
        "logs/prepare_model/{model}.log",
    benchmark:
        "logs/benchmarks/prepare_model/{model}.tsv"
    conda:
        "../envs/generation.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        spec=lambda wc: weight_spec(STUDY.model_params(wc.model)),
        code=CODE["models"],
    script:
        "../workflow_scripts/prepare_model.py"


rule prepare_dataset:
    input:
        lambda wc: STUDY.dataset_files[wc.dataset],
    output:
        "results/datasets/{dataset}.parquet",
    log:
        "logs/prepare_dataset/{dataset}.log",
    benchmark:
        "logs/benchmarks/prepare_dataset/{dataset}.tsv"
    localrule: True
    conda:
        "../envs/analysis.yaml"
    params:
        # only the keys loading reads: a dataset's strategies, domain or shards rerun no load
        spec=lambda wc: STUDY.dataset_params(wc.dataset),
        release_dir=CFG.get("release_dir") or "",
        code=CODE["datasets"],
    script:
        "../workflow_scripts/prepare_dataset.py"


rule build_prompts:
    input:
        dataset="results/datasets/{dataset}.parquet",
        templates=strategy_templates,
        system=CFG["prompts"].get("system", []),
    output:
        "results/prompts/{dataset}/{strategy}.parquet",
    log:
        "logs/build_prompts/{dataset}/{strategy}.log",
    benchmark:
        "logs/benchmarks/build_prompts/{dataset}/{strategy}.tsv"
    localrule: True
    conda:
        "../envs/analysis.yaml"
    params:
        # the strategy's passes and resolved exemplar count, not its label (shown only)
        strategy=lambda wc: STUDY.strategy_params(wc.strategy),
        seed=CFG["seed"],
        limit_items=CFG["limit_items"],
        limit_items_by=CFG["limit_items_by"],
        domain=lambda wc: CFG["datasets"][wc.dataset]["domain"],
        code=CODE["prompts"],
    script:
        "../workflow_scripts/build_prompts.py"
