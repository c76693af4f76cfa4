# Judging: a job per judge and cell, or one per judge that loads a model; calls cached by
# content; then majority votes + α.


rule judge_questions:
    input:
        generations="results/generations/{dataset}/{strategy}/{model}.parquet",
        dataset="results/datasets/{dataset}.parquet",
        prompt=judge_prompt,
        model=judge_model_dir,
    output:
        "results/judgments/{dataset}/{strategy}/{model}/{judge}.parquet",
    log:
        job="logs/judge_questions/{dataset}/{strategy}/{model}/{judge}.log",
    benchmark:
        "logs/benchmarks/judge_questions/{dataset}/{strategy}/{model}/{judge}.tsv"
    wildcard_constraints:
        judge=names_pattern(CELL_JUDGES),
    conda:
        "../envs/generation.yaml"
    threads: lambda wc: STUDY.judge_backend(wc.judge).threads
    resources:
        gpu=lambda wc: JUDGE_RESOURCES[wc.judge].gpu,
        mem_mb=lambda wc: JUDGE_RESOURCES[wc.judge].mem_mb,
        runtime=lambda wc: JUDGE_RESOURCES[wc.judge].runtime,
        api=lambda wc: JUDGE_RESOURCES[wc.judge].api,
    params:
        spec=judge_job_spec,
        model_spec=judge_model_spec,
        domain=lambda wc: CFG["datasets"][wc.dataset]["domain"],
        seed=CFG["seed"],
        cache_dir=CFG["cache_dir"],
        code=CODE["judging"],
    script:
        "../workflow_scripts/judge_questions.py"


# A judge that loads a model judges every cell in one job, loading it (or starting the borrowed
# entry's engine server) once (bloomqg.judges.all_cells).
rule judge_all_cells:
    input:
        generations=cell_paths("results/generations/{dataset}/{strategy}/{model}.parquet"),
        datasets=sorted({f"results/datasets/{c.dataset}.parquet" for c in CELLS}),
        prompt=judge_prompt,
        model=judge_model_dir,
        learned=learned_model,
    output:
        [f"results/judgments/{c.dataset}/{c.strategy}/{c.model}/{{judge}}.parquet" for c in CELLS],
    log:
        # an engine-served judge's server logs to logs/serve/judge_all_cells/{judge}.log
        job="logs/judge_all_cells/{judge}.log",
    benchmark:
        "logs/benchmarks/judge_all_cells/{judge}.tsv"
    wildcard_constraints:
        judge=names_pattern(ALL_CELLS_JUDGES),
    conda:
        "../envs/generation.yaml"
    # The model's (or the server's) torch threads: capped by --cores / --max-threads.
    threads: lambda wc: STUDY.judge_backend(wc.judge).threads
    resources:
        gpu=lambda wc: JUDGE_RESOURCES[wc.judge].gpu,
        mem_mb=lambda wc: JUDGE_RESOURCES[wc.judge].mem_mb,
        runtime=lambda wc: JUDGE_RESOURCES[wc.judge].runtime,
    params:
        spec=judge_job_spec,
        model_spec=judge_model_spec,
        cells=[(c.dataset, c.strategy, c.model) for c in CELLS],
        domains={name: dataset["domain"] for name, dataset in CFG["datasets"].items()},
        seed=CFG["seed"],
        cache_dir=CFG["cache_dir"],
        code=CODE["judging"],
    script:
        "../workflow_scripts/judge_all_cells.py"


rule vote_judgments:
    input:
        generations="results/generations/{dataset}/{strategy}/{model}.parquet",
        judgments=expand("results/judgments/{{dataset}}/{{strategy}}/{{model}}/{judge}.parquet", judge=JUDGES),
    output:
        votes="results/votes/{dataset}/{strategy}/{model}.parquet",
        reliability="results/votes/{dataset}/{strategy}/{model}.reliability.parquet",
    log:
        "logs/vote_judgments/{dataset}/{strategy}/{model}.log",
    benchmark:
        "logs/benchmarks/vote_judgments/{dataset}/{strategy}/{model}.tsv"
    localrule: True
    conda:
        "../envs/analysis.yaml"
    params:
        gate=CFG["gate"],
        vote=CFG["vote"],
        bootstrap=CFG["bootstrap"],
        seed=CFG["seed"],
        code=CODE["voting"],
    script:
        "../workflow_scripts/vote_judgments.py"


rule estimate_cost:
    """Print per API judge and generator the calls not yet cached, their estimated tokens and
    cost, before any call: `snakemake estimate_cost` runs only the local data and prompt steps."""
    input:
        prompts=sorted({f"results/prompts/{c.dataset}/{c.strategy}.parquet" for c in CELLS}),
        datasets=sorted({f"results/datasets/{c.dataset}.parquet" for c in CELLS}),
        rubric=([CFG["prompts"]["judge"]] if any(s.is_api for s in STUDY.spec.judges.values()) else []),
    log:
        text="logs/estimate_cost.log",
        table="logs/estimate_cost.tsv",
    localrule: True
    conda:
        "../envs/generation.yaml"
    params:
        config=CFG,
        cells=[(c.dataset, c.strategy, c.model) for c in CELLS],
        # Read when they exist (exact judge requests), never required: estimating sends nothing.
        generations=cell_paths("results/generations/{dataset}/{strategy}/{model}.parquet"),
        cache_dir=CFG["cache_dir"],
        panel_sample=(
            {"judges": PANEL_SAMPLE.judges, "draw": PANEL_SAMPLE.draw_spec} if PANEL_SAMPLE else None
        ),
    script:
        "../workflow_scripts/estimate_cost.py"
