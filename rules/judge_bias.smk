# Judges under test: bias probes (order, consistency, self-preference, length) of the judges the
# judge_bias: section names, run through their own backends, call cache and budget. Off unless
# the section is present.
from bloomqg.judges.bias.design import families, judge_bias_settings

try:
    JUDGE_BIAS = judge_bias_settings(STUDY.spec)
except ValueError as error:
    raise WorkflowError(str(error)) from None

JUDGE_BIAS_DIR = "results/judge_bias"
JUDGE_BIAS_OUTPUTS = {
    "estimates": f"{JUDGE_BIAS_DIR}/estimates.parquet",
    "positions": f"{JUDGE_BIAS_DIR}/positions.parquet",
    "table": f"{JUDGE_BIAS_DIR}/judge_bias.md",
    "view": f"{JUDGE_BIAS_DIR}/judge_bias.json",
    "figure": f"{JUDGE_BIAS_DIR}/judge_bias_positions.png",
}


if JUDGE_BIAS:

    rule probe_judge:
        """One judge's verdicts on the bias probes of a seeded sample of one cell."""
        input:
            generations="results/generations/{dataset}/{strategy}/{model}.parquet",
            dataset="results/datasets/{dataset}.parquet",
            prompt=judge_prompt,
            model=judge_model_dir,
        output:
            f"{JUDGE_BIAS_DIR}/probes/{{dataset}}/{{strategy}}/{{model}}/{{judge}}.parquet",
        log:
            "logs/probe_judge/{dataset}/{strategy}/{model}/{judge}.log",
        benchmark:
            "logs/benchmarks/probe_judge/{dataset}/{strategy}/{model}/{judge}.tsv"
        conda:
            "../envs/generation.yaml"
        threads: lambda wc: STUDY.judge_backend(wc.judge).threads
        resources:
            gpu=lambda wc: JUDGE_RESOURCES[wc.judge].gpu,
            mem_mb=lambda wc: JUDGE_RESOURCES[wc.judge].mem_mb,
            runtime=lambda wc: JUDGE_RESOURCES[wc.judge].runtime,
            api=lambda wc: JUDGE_RESOURCES[wc.judge].api,
        params:
            spec=lambda wc: STUDY.judge_params(wc.judge),
            model_spec=judge_model_spec,
            domain=lambda wc: CFG["datasets"][wc.dataset]["domain"],
            items_per_cell=JUDGE_BIAS.items_per_cell,
            seed=JUDGE_BIAS.seed,
            cache_dir=CFG["cache_dir"],
            code=CODE["judge_bias"],
        script:
            "../workflow_scripts/probe_judge.py"

    rule judge_bias_summary:
        """The bias estimates with CIs, a compact table and the position figure."""
        input:
            probes=[
                path
                for judge in JUDGE_BIAS.judges
                for path in cell_paths(
                    f"{JUDGE_BIAS_DIR}/probes/{{dataset}}/{{strategy}}/{{model}}/{judge}.parquet"
                )
            ],
        output:
            **JUDGE_BIAS_OUTPUTS,
        log:
            "logs/judge_bias_summary.log",
        benchmark:
            "logs/benchmarks/judge_bias_summary.tsv"
        localrule: True
        conda:
            "../envs/analysis.yaml"
        params:
            families=families(STUDY.spec),
            bootstrap=CFG["bootstrap"],
            seed=JUDGE_BIAS.seed,
            code=CODE["judge_bias"] + CODE["report"],
        script:
            "../workflow_scripts/judge_bias_summary.py"

    rule judge_bias:
        """Target: every judge_bias judge probed for order, consistency, self-preference and
        length bias (results/judge_bias/)."""
        input:
            rules.judge_bias_summary.output,
        localrule: True
