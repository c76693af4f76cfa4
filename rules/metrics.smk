# Metrics per cell, then one tidy table of all cells with correlations and paired comparisons.
# {root} is results (this study) or results/release (imported published runs): same rules.
from bloomqg.inputs.strategies import default_selection


rule score_metrics:
    input:
        unpack(published_lines),
        votes="{root}/votes/{dataset}/{strategy}/{model}.parquet",
        reliability="{root}/votes/{dataset}/{strategy}/{model}.reliability.parquet",
    output:
        "{root}/metrics/{dataset}/{strategy}/{model}.parquet",
    log:
        "logs/score_metrics/{root}/{dataset}/{strategy}/{model}.log",
    benchmark:
        "logs/benchmarks/score_metrics/{root}/{dataset}/{strategy}/{model}.tsv"
    localrule: True
    conda:
        "../envs/analysis.yaml"
    params:
        bootstrap=CFG["bootstrap"],
        intervals=CFG["intervals"],
        seed=CFG["seed"],
        code=CODE["metrics"],
    script:
        "../workflow_scripts/score_metrics.py"


rule aggregate_metrics:
    input:
        metrics=lambda wc: root_cell_paths(wc.root, "metrics/{dataset}/{strategy}/{model}.parquet"),
        votes=lambda wc: root_cell_paths(wc.root, "votes/{dataset}/{strategy}/{model}.parquet"),
    output:
        all="{root}/metrics/all.parquet",
        correlations="{root}/metrics/correlations.parquet",
        paired="{root}/metrics/paired.parquet",
    log:
        "logs/aggregate_metrics/{root}.log",
    benchmark:
        "logs/benchmarks/aggregate_metrics/{root}.tsv"
    localrule: True
    conda:
        "../envs/analysis.yaml"
    params:
        bootstrap=CFG["bootstrap"],
        intervals=CFG["intervals"],
        seed=CFG["seed"],
        # which strategy pairs are tested (docs/config.md comparisons), the baseline by default the first listed
        comparisons=CFG["comparisons"],
        strategy_order=default_selection(CFG),
        code=CODE["metrics"],
    script:
        "../workflow_scripts/aggregate_metrics.py"


rule study_plan:
    """Items per cell each planned comparison needs to detect plan.difference, and the minimum
    detectable difference of the study as run (docs/statistics.md)."""
    input:
        votes=lambda wc: root_cell_paths(wc.root, "votes/{dataset}/{strategy}/{model}.parquet"),
    output:
        "{root}/metrics/study_plan.parquet",
    log:
        "logs/study_plan/{root}.log",
    benchmark:
        "logs/benchmarks/study_plan/{root}.tsv"
    localrule: True
    conda:
        "../envs/analysis.yaml"
    params:
        plan=CFG["plan"],
        comparisons=CFG["comparisons"],
        strategy_order=default_selection(CFG),
        code=CODE["metrics"],
    script:
        "../workflow_scripts/study_plan.py"


rule answer:
    """The study's verdict per planned comparison × headline metric × model × dataset: the
    panel's reliability first, then the study's power, then the test (docs/statistics.md)."""
    input:
        paired="{root}/metrics/paired.parquet",
        study_plan="{root}/metrics/study_plan.parquet",
        reliability=lambda wc: root_cell_paths(
            wc.root, "votes/{dataset}/{strategy}/{model}.reliability.parquet"
        ),
    output:
        "{root}/metrics/answer.parquet",
    log:
        "logs/answer/{root}.log",
    benchmark:
        "logs/benchmarks/answer/{root}.tsv"
    localrule: True
    conda:
        "../envs/analysis.yaml"
    params:
        answer=CFG["answer"],
        code=CODE["metrics"],
    script:
        "../workflow_scripts/answer.py"


rule judge_robustness:
    """Whether each headline comparison holds under Dawid–Skene and every leave-one-judge-out
    panel (docs/judge-reliability.md)."""
    input:
        votes=lambda wc: root_cell_paths(wc.root, "votes/{dataset}/{strategy}/{model}.parquet"),
        reliability=lambda wc: root_cell_paths(
            wc.root, "votes/{dataset}/{strategy}/{model}.reliability.parquet"
        ),
    output:
        "{root}/metrics/robustness.parquet",
    log:
        "logs/judge_robustness/{root}.log",
    benchmark:
        "logs/benchmarks/judge_robustness/{root}.tsv"
    localrule: True
    conda:
        "../envs/analysis.yaml"
    params:
        seed=CFG["seed"],
        comparisons=CFG["comparisons"],
        strategy_order=default_selection(CFG),
        code=[CODE["metrics"], CODE["voting"]],
    script:
        "../workflow_scripts/judge_robustness.py"
