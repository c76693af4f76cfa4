# Validating the raters: expert annotation of a stratified sample (export_annotation ->
# annotators -> import_annotations, Table 9 in the report) and judges measured against the
# release's panel (judge_validation). Both are off unless their config section is present.
from bloomqg.annotation.form import FORM_TEMPLATE, TEMPLATE_DIR
from bloomqg.annotation.settings import annotation_settings, judge_validation_settings
from bloomqg.config_schema import ConfigError
from bloomqg.provenance import sha256_file

try:
    ANNOTATION = annotation_settings(CFG, CELLS, RELEASE_CELLS)
    JUDGE_VALIDATION = judge_validation_settings(CFG, RELEASE_CELLS)
except ConfigError as error:
    raise WorkflowError(str(error)) from None

ANNOTATION_DIR = "results/annotation"
ANNOTATION_TABLES = [f"{ANNOTATION_DIR}/table9_human_agreement.{ext}" for ext in ("md", "csv", "tex", "json")]
ANNOTATION_FIGURE = f"{ANNOTATION_DIR}/human_agreement.png"
ALT_TEST_TABLES = [f"{ANNOTATION_DIR}/alt_test.{ext}" for ext in ("md", "csv", "tex", "json")]
CODE_ANNOTATION = code_fingerprint(
    "bloomqg.annotation",
    "bloomqg.reporting.tables",
    "bloomqg.reporting.display",
    "bloomqg.metrics",
    *CONTRACTS,
)


if ANNOTATION:

    rule export_annotation:
        """Target: the sample to annotate, as a blank CSV sheet and a self-contained HTML form."""
        input:
            votes=cell_paths(
                f"{ANNOTATION.root}/votes/{{dataset}}/{{strategy}}/{{model}}.parquet", ANNOTATION.cells
            ),
            # the unit lists the study's judges chose from (the whole datasets)
            datasets=(
                [f"results/datasets/{d}.parquet" for d in sorted({c.dataset for c in ANNOTATION.cells})]
                if ANNOTATION.source == "study"
                else []
            ),
        output:
            key=f"{ANNOTATION_DIR}/items.parquet",
            sheet=f"{ANNOTATION_DIR}/sheet.csv",
            form=f"{ANNOTATION_DIR}/form.html",
        log:
            "logs/export_annotation.log",
        localrule: True
        conda:
            "../envs/analysis.yaml"
        params:
            items_per_cell=ANNOTATION.items_per_cell,
            seed=ANNOTATION.seed,
            title=ANNOTATION.title,
            code=CODE_ANNOTATION + sha256_file(TEMPLATE_DIR / FORM_TEMPLATE),
        script:
            "../workflow_scripts/export_annotation.py"

    rule import_annotations:
        """Target: the filled sheets checked and compared with the panel (Table 9, κ, α)."""
        input:
            key=f"{ANNOTATION_DIR}/items.parquet",
            sheets=filled_sheets(),
            # each judge's own verdicts on the sampled cells, for the alternative annotator test
            judgments=annotated_judgments(),
        output:
            agreement=f"{ANNOTATION_DIR}/agreement.parquet",
            tables=ANNOTATION_TABLES,
            figure=ANNOTATION_FIGURE,
            alt_test=f"{ANNOTATION_DIR}/alt_test.parquet",
            alt_test_annotators=f"{ANNOTATION_DIR}/alt_test_annotators.parquet",
            alt_test_tables=ALT_TEST_TABLES,
        log:
            "logs/import_annotations.log",
        localrule: True
        conda:
            "../envs/analysis.yaml"
        params:
            annotations_dir=ANNOTATION.annotations_dir,
            bootstrap=CFG["bootstrap"],
            seed=ANNOTATION.seed,
            alt_test=ANNOTATION.alt_test,
            code=CODE_ANNOTATION,
        script:
            "../workflow_scripts/import_annotations.py"


if JUDGE_VALIDATION:
    VALIDATION_DIR = "results/judge_validation"
    VALIDATION_JUDGMENTS = [
        f"{VALIDATION_DIR}/{c.dataset}/{c.strategy}/{c.model}/{judge}.parquet"
        for c in JUDGE_VALIDATION.cells
        for judge in JUDGE_VALIDATION.judges
    ]

    rule validate_judge:
        """One judge on a stratified sample of one release run's judged questions."""
        input:
            generations="results/release/generations/{dataset}/{strategy}/{model}.parquet",
            votes="results/release/votes/{dataset}/{strategy}/{model}.parquet",
            prompt=judge_prompt,
            model=judge_model_dir,
        output:
            f"{VALIDATION_DIR}/{{dataset}}/{{strategy}}/{{model}}/{{judge}}.parquet",
        log:
            f"logs/validate_judge/{{dataset}}/{{strategy}}/{{model}}/{{judge}}.log",
        benchmark:
            f"logs/benchmarks/validate_judge/{{dataset}}/{{strategy}}/{{model}}/{{judge}}.tsv"
        conda:
            "../envs/generation.yaml"
        threads: lambda wc: STUDY.judge_backend(wc.judge).threads
        resources:
            gpu=lambda wc: (
                CFG["models"][STUDY.judge_model(wc.judge)].get("gpus", 0)
                if STUDY.judge_model(wc.judge)
                else 0
            ),
            mem_mb=4000,
        params:
            spec=lambda wc: CFG["judges"][wc.judge],
            model_spec=judge_model_spec,
            items_per_cell=JUDGE_VALIDATION.items_per_cell,
            seed=JUDGE_VALIDATION.seed,
            cache_dir=CFG["cache_dir"],
            code=CODE_ANNOTATION + CODE["judging"],
        script:
            "../workflow_scripts/validate_judge.py"

    rule judge_validation_summary:
        input:
            judgments=VALIDATION_JUDGMENTS,
            votes=cell_paths(
                "results/release/votes/{dataset}/{strategy}/{model}.parquet", JUDGE_VALIDATION.cells
            ),
        output:
            agreement=f"{VALIDATION_DIR}/agreement.parquet",
            confusion=f"{VALIDATION_DIR}/confusion.parquet",
            throughput=f"{VALIDATION_DIR}/throughput.parquet",
            summary=f"{VALIDATION_DIR}/summary.md",
        log:
            "logs/judge_validation_summary.log",
        localrule: True
        conda:
            "../envs/analysis.yaml"
        params:
            bootstrap=CFG["bootstrap"],
            seed=JUDGE_VALIDATION.seed,
            code=CODE_ANNOTATION,
        script:
            "../workflow_scripts/judge_validation_summary.py"

    rule judge_validation:
        """Target: each configured judge's agreement with the release's panel, time and cost."""
        input:
            rules.judge_validation_summary.output,
        localrule: True
