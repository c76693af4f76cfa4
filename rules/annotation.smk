# Validating the raters: expert annotation of a stratified sample (export_annotation ->
# annotators -> import_annotations, Table 9 in the report) and judges measured against the
# release's panel (judge_validation). Both are off unless their config section is present.
from bloomqg.annotation.form import FORM_TEMPLATE, TEMPLATE_DIR
from bloomqg.annotation.settings import (
    annotation_settings,
    calibration_settings,
    judge_validation_settings,
    plan_settings,
)
from bloomqg.store.config_schema import ConfigError
from bloomqg.store.provenance import sha256_file

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
            # items_per_cell "plan": the sampling plan's labels per cell
            plan=["results/calibration/plan.parquet"] if ANNOTATION.items_from_plan else [],
        output:
            key=f"{ANNOTATION_DIR}/items.parquet",
            sheet=f"{ANNOTATION_DIR}/sheet.csv",
            form=f"{ANNOTATION_DIR}/form.html",
        log:
            "logs/export_annotation.log",
        benchmark:
            "logs/benchmarks/export_annotation.tsv"
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
        benchmark:
            "logs/benchmarks/import_annotations.tsv"
        localrule: True
        conda:
            "../envs/analysis.yaml"
        params:
            strategy_labels=STRATEGY_LABELS,  # how the tables and figures name the strategies
            annotations_dir=ANNOTATION.annotations_dir,
            bootstrap=CFG["bootstrap"],
            seed=ANNOTATION.seed,
            alt_test=ANNOTATION.alt_test,
            # Table 9 points to the Calibrated table when calibration is configured
            calibrated=CFG.get("calibration") is not None,
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
            learned=learned_model,
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
                MODEL_RESOURCES[STUDY.judge_model(wc.judge)].gpu if STUDY.judge_model(wc.judge) else 0
            ),
            mem_mb=4000,
        params:
            spec=lambda wc: STUDY.judge_params(wc.judge),
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
        benchmark:
            "logs/benchmarks/judge_validation_summary.tsv"
        localrule: True
        conda:
            "../envs/analysis.yaml"
        params:
            strategy_labels=STRATEGY_LABELS,  # how the tables and figures name the strategies
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


# Numbers corrected by people (issue 30): the annotation rounds' labels turn the judged metrics
# into prediction-powered estimates (calibrate), and the sampling plan says how many labels a
# target width needs (annotation_plan). See docs/judge-reliability.md.
try:
    CALIBRATION = calibration_settings(CFG, ANNOTATION)
    PLAN = plan_settings(CFG, ANNOTATION, CELLS, RELEASE_CELLS)
except ConfigError as error:
    raise WorkflowError(str(error)) from None

CALIBRATION_DIR = "results/calibration"
CALIBRATED_TABLES = [f"{CALIBRATION_DIR}/calibrated_estimates.{ext}" for ext in ("md", "csv", "tex", "json")]
CALIBRATED_PAIRED_TABLES = [
    f"{CALIBRATION_DIR}/calibrated_paired.{ext}" for ext in ("md", "csv", "tex", "json")
]
PLAN_TABLES = [f"{CALIBRATION_DIR}/annotation_plan.{ext}" for ext in ("md", "csv", "tex", "json")]


if CALIBRATION:

    rule calibrate:
        """Target: judges', humans' and PPI++ estimates per annotated cell and metric (results/calibration)."""
        input:
            key=f"{ANNOTATION_DIR}/items.parquet",
            sheets=calibration_sheets(CALIBRATION.rounds),
            votes=cell_paths(
                f"{ANNOTATION.root}/votes/{{dataset}}/{{strategy}}/{{model}}.parquet", ANNOTATION.cells
            ),
        output:
            joined=f"{CALIBRATION_DIR}/items.parquet",
            estimates=f"{CALIBRATION_DIR}/estimates.parquet",
            paired=f"{CALIBRATION_DIR}/paired.parquet",
            agreement=f"{CALIBRATION_DIR}/agreement.parquet",
            tables=CALIBRATED_TABLES,
            paired_tables=CALIBRATED_PAIRED_TABLES,
        log:
            "logs/calibrate.log",
        benchmark:
            "logs/benchmarks/calibrate.tsv"
        localrule: True
        conda:
            "../envs/analysis.yaml"
        params:
            strategy_labels=STRATEGY_LABELS,  # how the tables and figures name the strategies
            rounds=CALIBRATION.rounds,
            confidence=CALIBRATION.confidence,
            pseudo_disagreements=CALIBRATION.pseudo_disagreements,
            config={"comparisons": CFG.get("comparisons")},
            code=CODE_ANNOTATION,
        script:
            "../workflow_scripts/calibrate.py"


rule annotation_plan:
    """Target: human labels per cell and headline metric for PPI++ to reach the target half-width."""
    input:
        votes=cell_paths(f"{PLAN.root}/votes/{{dataset}}/{{strategy}}/{{model}}.parquet", PLAN.cells),
        # the gate's decisions: an assumed agreement stands in only where this panel passed it
        reliability=cell_paths(
            f"{PLAN.root}/votes/{{dataset}}/{{strategy}}/{{model}}.reliability.parquet", PLAN.cells
        ),
        # a pilot round's measured agreement, once calibrated
        # (not when the export draws what the plan asks for: the pilot would be of its own draw)
        pilot=[f"{CALIBRATION_DIR}/items.parquet"] if CALIBRATION and not ANNOTATION.items_from_plan else [],
    output:
        plan=f"{CALIBRATION_DIR}/plan.parquet",
        tables=PLAN_TABLES,
    log:
        "logs/annotation_plan.log",
    benchmark:
        "logs/benchmarks/annotation_plan.tsv"
    localrule: True
    conda:
        "../envs/analysis.yaml"
    params:
        strategy_labels=STRATEGY_LABELS,  # how the tables and figures name the strategies
        half_width=PLAN.half_width,
        confidence=PLAN.confidence,
        assumed_agreement=PLAN.assumed_agreement,
        code=CODE_ANNOTATION,
    script:
        "../workflow_scripts/annotation_plan.py"
