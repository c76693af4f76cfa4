# The study's cells as Inspect logs (docs/inspect.md): one .eval log per cell, written with
# inspect_ai's own API, for `inspect view` and inspect_ai.analysis.samples_df. Target inspect_logs;
# in `all` when inspect.export is true.
INSPECT_DIR = "results/inspect"
INSPECT_OUTPUTS = cell_paths(f"{INSPECT_DIR}/{{model}}/{{dataset}}/{{strategy}}.eval")
INSPECT_ALL = INSPECT_OUTPUTS if STUDY.spec.inspect_export else []


rule inspect_log:
    input:
        generations="results/generations/{dataset}/{strategy}/{model}.parquet",
        prompts="results/prompts/{dataset}/{strategy}.parquet",
        judgments=expand("results/judgments/{{dataset}}/{{strategy}}/{{model}}/{judge}.parquet", judge=JUDGES),
        votes="results/votes/{dataset}/{strategy}/{model}.parquet",
        metrics="results/metrics/{dataset}/{strategy}/{model}.parquet",
    output:
        f"{INSPECT_DIR}/{{model}}/{{dataset}}/{{strategy}}.eval",
    log:
        "logs/inspect_log/{dataset}/{strategy}/{model}.log",
    benchmark:
        "logs/benchmarks/inspect_log/{dataset}/{strategy}/{model}.tsv"
    localrule: True
    conda:
        "../envs/analysis.yaml"
    params:
        model_spec=lambda wc: STUDY.model_params(wc.model),
        code=CODE["inspect"],
    script:
        "../workflow_scripts/inspect_log.py"


rule inspect_logs:
    """Every cell's Inspect log."""
    input:
        INSPECT_OUTPUTS,


# A models entry with backend: inspect takes its questions from Inspect logs: one job per cell
# maps the logs' samples to its prompts (bloomqg.generation.inspect_source).
rule import_inspect_generations:
    input:
        logs=inspect_log_files,
        prompts="results/prompts/{dataset}/{strategy}.parquet",
        dataset="results/datasets/{dataset}.parquet",
    output:
        "results/generations/{dataset}/{strategy}/{model}.parquet",
    log:
        "logs/import_inspect_generations/{dataset}/{strategy}/{model}.log",
    benchmark:
        "logs/benchmarks/import_inspect_generations/{dataset}/{strategy}/{model}.tsv"
    wildcard_constraints:
        model=names_pattern(INSPECT_MODELS),
    localrule: True
    conda:
        "../envs/analysis.yaml"
    params:
        seed=CFG["seed"],
        max_log_member_mb=STUDY.spec.max_log_member_mb,
        code=CODE["generation"],
    script:
        "../workflow_scripts/import_inspect_generations.py"
