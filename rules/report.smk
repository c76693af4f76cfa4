# Tables, figures and the self-contained HTML report (plus Snakemake's own --report).
from bloomqg.reporting.figures.write import FIGURE_FILES
from bloomqg.reporting.tables.write import TABLE_FILES
from bloomqg.release.tables import RELEASE_TABLE_FILES
from bloomqg.reporting.explorer.links import EXPLORER_HREF  # relative to {root}/report.html
from bloomqg.tools.config_docs import config_meanings
from bloomqg.reporting.explorer.write import STATIC_DIR, STATIC_FILES
from bloomqg.inputs.strategies import (
    default_selection,
    strategy_descriptions,
    strategy_labels,
    strategy_specs,
)

# {strategy name: label} in defined order: how tables, figures, the report and the explorer name them
STRATEGY_LABELS = strategy_labels(strategy_specs(CFG))


TABLE_OUTPUTS = [f"results/tables/{name}" for name in TABLE_FILES]
FIGURE_OUTPUTS = [f"results/figures/{name}" for name in FIGURE_FILES]
RELEASE_TABLE_OUTPUTS = [f"results/release/{name}" for name in RELEASE_TABLE_FILES]
RELEASE_FIGURE_OUTPUTS = [f"results/release/figures/{name}" for name in FIGURE_FILES]


rule make_tables:
    input:
        metrics="results/metrics/all.parquet",
        paired="results/metrics/paired.parquet",
        datasets=expand("results/datasets/{dataset}.parquet", dataset=list(CFG["datasets"])),
        reliability=cell_paths("results/votes/{dataset}/{strategy}/{model}.reliability.parquet"),
    output:
        [report(path, caption="../report/captions/tables.rst", category="Tables") for path in TABLE_OUTPUTS],
    log:
        "logs/make_tables.log",
    benchmark:
        "logs/benchmarks/make_tables.tsv"
    localrule: True
    conda:
        "../envs/analysis.yaml"
    params:
        strategy_labels=STRATEGY_LABELS,
        code=CODE["report"],
    script:
        "../workflow_scripts/make_tables.py"


rule plot_figures:
    input:
        metrics="{root}/metrics/all.parquet",
        correlations="{root}/metrics/correlations.parquet",
        votes=lambda wc: root_cell_paths(wc.root, "votes/{dataset}/{strategy}/{model}.parquet"),
        reliability=lambda wc: root_cell_paths(
            wc.root, "votes/{dataset}/{strategy}/{model}.reliability.parquet"
        ),
    output:
        # <stem>.links.json: the PNG's marks that open the item explorer (read by build_report)
        [
            (
                f"{{root}}/figures/{name}"
                if name.endswith(".links.json")
                else report(f"{{root}}/figures/{name}", caption=figure_caption(name), category="Figures")
            )
            for name in FIGURE_FILES
        ],
    log:
        "logs/plot_figures/{root}.log",
    benchmark:
        "logs/benchmarks/plot_figures/{root}.tsv"
    localrule: True
    conda:
        "../envs/analysis.yaml"
    params:
        strategy_labels=STRATEGY_LABELS,
        code=CODE["report"],
    script:
        "../workflow_scripts/plot_figures.py"


rule build_report:
    input:
        unpack(report_inputs),
        metrics="{root}/metrics/all.parquet",
        correlations="{root}/metrics/correlations.parquet",
        paired="{root}/metrics/paired.parquet",
        robustness="{root}/metrics/robustness.parquet",
        # the Answer's verdicts (rule answer)
        answer="{root}/metrics/answer.parquet",
        # Table 9 + figure (rules/annotation.smk), in the report of the root it sampled
        annotation=lambda wc: (
            annotation_report_inputs()
            if ANNOTATION
            and wc.root == {"study": "results", "release": "results/release"}[ANNOTATION.source]
            else []
        ),
        # "Paid for a sample" (rules/panel_sample.smk): the panel's sample corrects the local judges
        panel_sample=lambda wc: (
            [p for p in panel_sample_outputs() if p.endswith(".json")] if wc.root == "results" else []
        ),
        # "How many labels?" (rules/annotation.smk) in the report of the root it plans for, when
        # no annotation is calibrated: the report says how many labels would bound CatCons
        # (calibrated, the plan comes with the annotation inputs above)
        plan=lambda wc: [PLAN_TABLES[-1]] if wc.root == PLAN.root and not CALIBRATION else [],
        # the "Judge bias" section (rules/judge_bias.smk), when judge_bias is configured
        judge_bias=lambda wc: (
            [JUDGE_BIAS_OUTPUTS["view"], JUDGE_BIAS_OUTPUTS["figure"]]
            if JUDGE_BIAS and wc.root == "results"
            else []
        ),
        # the probes' calls, which the cost ledger counts with the judges' (a base call once)
        probes=lambda wc: (
            [
                path
                for judge in JUDGE_BIAS.judges
                for path in cell_paths(
                    f"{JUDGE_BIAS_DIR}/probes/{{dataset}}/{{strategy}}/{{model}}/{judge}.parquet"
                )
            ]
            if JUDGE_BIAS and wc.root == "results"
            else []
        ),
    output:
        # in `snakemake --report` through bundle_report, beside its explorer
        report="{root}/report.html",
        # every number the report prints, one row each (bloomqg.reporting.facts)
        facts="{root}/report_facts.parquet",
    log:
        "logs/build_report/{root}.log",
    benchmark:
        "logs/benchmarks/build_report/{root}.tsv"
    localrule: True
    conda:
        "../envs/analysis.yaml"
    params:
        # entries in canonical form: a default written out does not rebuild the report
        config=STUDY.canonical_config(),
        config_meanings=config_meanings(),  # each key's meaning, from the schema, above it on the page
        title=lambda wc: (
            "bloomqg: the paper's release reproduced" if wc.root == "results/release" else "bloomqg report"
        ),
        code=CODE["report"],
        explorer_href=EXPLORER_HREF,
        strategy_labels=STRATEGY_LABELS,
        strategies=strategy_descriptions(strategy_specs(CFG), default_selection(CFG)),
        comparisons=CFG["comparisons"],
        strategy_order=default_selection(CFG),
    script:
        "../workflow_scripts/build_report.py"


rule bundle_report:
    """The report and its item explorer in one folder, so the report's links to the explorer
    resolve inside `snakemake --report report.zip` as they do on disk."""
    input:
        report="{root}/report.html",
        explorer=explorer_outputs("{root}"),
    output:
        report(
            directory("{root}/report_bundle"),
            htmlindex="report.html",
            caption="../report/captions/report.rst",
            category="Report",
        ),
    log:
        "logs/bundle_report/{root}.log",
    benchmark:
        "logs/benchmarks/bundle_report/{root}.tsv"
    localrule: True
    conda:
        "../envs/analysis.yaml"
    params:
        code=CODE["report"],
    script:
        "../workflow_scripts/bundle_report.py"


rule build_explorer:
    """The item explorer beside the report: one row per generated question, opened as a file."""
    input:
        unpack(explorer_inputs),
        metrics="{root}/metrics/all.parquet",
        # the page, script and style are not Python: the code fingerprint does not see them
        static=[str(STATIC_DIR / name) for name in STATIC_FILES],
    output:
        explorer_outputs("{root}"),
    log:
        "logs/build_explorer/{root}.log",
    benchmark:
        "logs/benchmarks/build_explorer/{root}.tsv"
    localrule: True
    conda:
        "../envs/analysis.yaml"
    params:
        title=lambda wc: "the paper's release" if wc.root == "results/release" else "this study",
        strategy_labels=STRATEGY_LABELS,
        code=CODE["report"],
    script:
        "../workflow_scripts/build_explorer.py"
