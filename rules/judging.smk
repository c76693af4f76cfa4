# Judging: one job per judge and cell; API calls cached by content; then majority votes + α.


def judge_model_dir(wc):
    ref = STUDY.judge_model(wc.judge)
    return model_dir(ref) if ref else []


def judge_prompt(wc):
    return [CFG["prompts"]["judge"]] if CFG["judges"][wc.judge]["backend"] in ("hf", "openai") else []


def judge_model_spec(wc):
    """An hf judge runs a models entry's weights with the judge's own decoding settings."""
    ref = STUDY.judge_model(wc.judge)
    return CFG["models"][ref] if ref else None


rule judge_questions:
    input:
        generations="results/generations/{dataset}/{strategy}/{model}.parquet",
        dataset="results/datasets/{dataset}.parquet",
        prompt=judge_prompt,
        model=judge_model_dir,
    output:
        "results/judgments/{dataset}/{strategy}/{model}/{judge}.parquet",
    params:
        spec=lambda wc: CFG["judges"][wc.judge],
        model_spec=judge_model_spec,
        domain=lambda wc: CFG["datasets"][wc.dataset]["domain"],
        seed=CFG["seed"],
        cache_dir=CFG["cache_dir"],
        code=CODE["judging"],
    log:
        "logs/judge_questions/{dataset}/{strategy}/{model}/{judge}.log",
    benchmark:
        "logs/benchmarks/judge_questions/{dataset}/{strategy}/{model}/{judge}.tsv"
    threads: lambda wc: 8 if CFG["judges"][wc.judge]["backend"] in ("hf", "embedding") else 1
    resources:
        gpu=lambda wc: JUDGE_RESOURCES[wc.judge].gpu,
        mem_mb=lambda wc: JUDGE_RESOURCES[wc.judge].mem_mb,
        runtime=lambda wc: JUDGE_RESOURCES[wc.judge].runtime,
        api=lambda wc: JUDGE_RESOURCES[wc.judge].api,
    conda:
        "../envs/generation.yaml"
    script:
        "../workflow_scripts/judge_questions.py"


rule vote_judgments:
    input:
        generations="results/generations/{dataset}/{strategy}/{model}.parquet",
        judgments=expand("results/judgments/{{dataset}}/{{strategy}}/{{model}}/{judge}.parquet", judge=JUDGES),
    output:
        votes="results/votes/{dataset}/{strategy}/{model}.parquet",
        reliability="results/votes/{dataset}/{strategy}/{model}.reliability.parquet",
    params:
        gate=CFG["gate"],
        bootstrap=CFG["bootstrap"],
        seed=CFG["seed"],
        code=CODE["voting"],
    log:
        "logs/vote_judgments/{dataset}/{strategy}/{model}.log",
    localrule: True
    conda:
        "../envs/analysis.yaml"
    script:
        "../workflow_scripts/vote_judgments.py"
