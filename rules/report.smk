# Tables, figures and the self-contained HTML report (plus Snakemake's own --report).
from bloomqg.figures import FIGURE_FILES
from bloomqg.tables import TABLE_FILES
from bloomqg.release_tables import RELEASE_TABLE_FILES

TABLE_OUTPUTS = [f"results/tables/{name}" for name in TABLE_FILES]
FIGURE_OUTPUTS = [f"results/figures/{name}" for name in FIGURE_FILES]
RELEASE_TABLE_OUTPUTS = [f"results/release/{name}" for name in RELEASE_TABLE_FILES]
RELEASE_FIGURE_OUTPUTS = [f"results/release/figures/{name}" for name in FIGURE_FILES]


def figure_caption(name):
    stem = name.rsplit(".", 1)[0]
    return f"../report/captions/{stem}.rst"


rule make_tables:
    input:
        metrics="results/metrics/all.parquet",
        paired="results/metrics/paired.parquet",
        datasets=expand("results/datasets/{dataset}.parquet", dataset=list(CFG["datasets"])),
        reliability=cell_paths("results/votes/{dataset}/{strategy}/{model}.reliability.parquet"),
    output:
        [report(path, caption="../report/captions/tables.rst", category="Tables") for path in TABLE_OUTPUTS],
    params:
        code=CODE["report"],
    log:
        "logs/make_tables.log",
    conda:
        "../envs/analysis.yaml"
    script:
        "../workflow_scripts/make_tables.py"


rule plot_figures:
    input:
        metrics="{root}/metrics/all.parquet",
        correlations="{root}/metrics/correlations.parquet",
        votes=lambda wc: cell_paths(wc.root + "/votes/{dataset}/{strategy}/{model}.parquet", root_cells(wc.root)),
        reliability=lambda wc: cell_paths(wc.root + "/votes/{dataset}/{strategy}/{model}.reliability.parquet", root_cells(wc.root)),
    output:
        [report("{root}/figures/" + name, caption=figure_caption(name), category="Figures") for name in FIGURE_FILES],
    params:
        code=CODE["report"],
    log:
        "logs/plot_figures/{root}.log",
    conda:
        "../envs/analysis.yaml"
    script:
        "../workflow_scripts/plot_figures.py"


rule build_report:
    input:
        metrics="results/metrics/all.parquet",
        correlations="results/metrics/correlations.parquet",
        paired="results/metrics/paired.parquet",
        votes=cell_paths("results/votes/{dataset}/{strategy}/{model}.parquet"),
        reliability=cell_paths("results/votes/{dataset}/{strategy}/{model}.reliability.parquet"),
        generations=cell_paths("results/generations/{dataset}/{strategy}/{model}.parquet"),
        judgments=[
            f"results/judgments/{c.dataset}/{c.strategy}/{c.model}/{judge}.parquet"
            for c in CELLS for judge in JUDGES
        ],
        tables=TABLE_OUTPUTS,
        figures=FIGURE_OUTPUTS,
        annotation=lambda wc: annotation_report_inputs(),  # Table 9 + figure (rules/annotation.smk)
    output:
        report("results/report.html", caption="../report/captions/report.rst", category="Report"),
    params:
        config=CFG,
        code=CODE["report"],
    log:
        "logs/build_report.log",
    conda:
        "../envs/analysis.yaml"
    script:
        "../workflow_scripts/build_report.py"
