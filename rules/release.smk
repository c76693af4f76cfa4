# Import of published runs (the paper's release format) into this workflow's own files, so the
# metrics, tables, figures and report rules run on them unchanged. Target: reproduce_release.
from bloomqg.store.config_schema import Cell

RELEASE_RUNS = {}
RELEASE_MISSING = []  # runs whose files are neither here nor to be downloaded
if CFG.get("release_manifest"):
    from bloomqg.release.runs import ReleaseError, load_manifest, missing_runs

    try:
        # Files are checked when a target needs them: a study with this manifest in its config
        # must still plan when only part of the release is at hand.
        for run in load_manifest(
            CFG["release_manifest"], release_dir=CFG.get("release_dir"), check_files=False
        ):
            RELEASE_RUNS[(run.dataset, run.strategy, run.model)] = run
    except ReleaseError as error:
        raise WorkflowError(str(error)) from None
    if STUDY.release_to_download is None:
        RELEASE_MISSING = missing_runs(list(RELEASE_RUNS.values()))
RELEASE_CELLS = [Cell(d, s, m) for (d, s, m) in RELEASE_RUNS]
RELEASE_IMPORT_REPORT = "results/release/import_report.parquet"


if STUDY.release_to_download is not None:
    from bloomqg.release.download import load_pins

    RELEASE_PINS = f"{workflow.basedir}/configs/llm-eval-release.yaml"
    RELEASE_FILES = list(load_pins(RELEASE_PINS)["files"])
    # A dataset read from the release folder must be a file the download writes: otherwise the
    # plan would wait for a file nothing makes.
    for dataset_name, files in STUDY.dataset_files.items():
        for file in filter(STUDY.is_downloaded, files):
            inside = Path(file).resolve().relative_to(STUDY.release_to_download.resolve())
            if inside.as_posix() not in RELEASE_FILES:
                raise WorkflowError(
                    f"datasets.{dataset_name}: {file} is not among the files download_release "
                    f"writes into {STUDY.release_to_download} ({RELEASE_PINS})"
                )

    rule download_release:
        """Fetch the paper's release at its pinned commit; every file's sha256 is checked."""
        input:
            pins=RELEASE_PINS,
        output:
            [f"{STUDY.release_to_download}/{name}" for name in RELEASE_FILES],
        log:
            "logs/download_release.log",
        benchmark:
            "logs/benchmarks/download_release.tsv"
        localrule: True
        conda:
            "../envs/analysis.yaml"
        params:
            release_dir=downloaded_release_dir,
        script:
            "../workflow_scripts/download_release.py"


rule import_release_run:
    input:
        manifest=CFG.get("release_manifest") or [],
        generations=lambda wc: str(release_run(wc).generations),
        votes=lambda wc: str(release_run(wc).votes),
    output:
        generations="results/release/generations/{dataset}/{strategy}/{model}.parquet",
        votes="results/release/votes/{dataset}/{strategy}/{model}.parquet",
        reliability="results/release/votes/{dataset}/{strategy}/{model}.reliability.parquet",
        lines="results/release/votes/{dataset}/{strategy}/{model}.lines.parquet",
    log:
        "logs/import_release_run/{dataset}/{strategy}/{model}.log",
    benchmark:
        "logs/benchmarks/import_release_run/{dataset}/{strategy}/{model}.tsv"
    localrule: True
    conda:
        "../envs/analysis.yaml"
    params:
        pinned=lambda wc: dict(release_run(wc).pinned or {}) or None,
        gate=CFG["gate"],
        vote=CFG["vote"],
        bootstrap=CFG["bootstrap"],
        seed=CFG["seed"],
        code=CODE["release"],
    script:
        "../workflow_scripts/import_release_run.py"


rule release_tables:
    """The paper's tables from the imported runs, beside the paper's figures, and the import
    report: every vote line that gives its votes to no generated question, with why."""
    input:
        metrics="results/release/metrics/all.parquet",
        paper_figures=f"{workflow.basedir}/configs/paper-figures.yaml",
        generations=cell_paths(
            "results/release/generations/{dataset}/{strategy}/{model}.parquet", RELEASE_CELLS
        ),
        lines=cell_paths("results/release/votes/{dataset}/{strategy}/{model}.lines.parquet", RELEASE_CELLS),
    output:
        RELEASE_TABLE_OUTPUTS,
        import_report=RELEASE_IMPORT_REPORT,
    log:
        "logs/release_tables.log",
    benchmark:
        "logs/benchmarks/release_tables.tsv"
    localrule: True
    conda:
        "../envs/analysis.yaml"
    params:
        code=[CODE["report"], CODE["release"]],
    script:
        "../workflow_scripts/release_tables.py"


rule reproduce_release:
    """Target: the paper's tables, figures and a report recomputed from a published release."""
    input:
        lambda wc: release_ready(
            [
                *RELEASE_TABLE_OUTPUTS,
                RELEASE_IMPORT_REPORT,
                *RELEASE_FIGURE_OUTPUTS,
                "results/release/report.html",
                "results/release/metrics/study_plan.parquet",
                *explorer_outputs("results/release"),
            ]
        ),
    localrule: True


rule train_learned_judge:
    """A learned judge's classifier, trained on its source's votes; content-addressed in the
    cache, so the same votes and settings retrain nothing (docs/judge-reliability.md)."""
    input:
        unpack(learned_training_inputs),
    output:
        model="results/learned/{judge}/model.skops",
        provenance="results/learned/{judge}/model.skops.json",
    log:
        "logs/train_learned_judge/{judge}.log",
    benchmark:
        "logs/benchmarks/train_learned_judge/{judge}.tsv"
    conda:
        "../envs/generation.yaml"
    threads: 2
    params:
        spec=lambda wc: STUDY.judge_params(wc.judge),
        cache_dir=CFG["cache_dir"],
        code=CODE["judging"],
    script:
        "../workflow_scripts/train_learned_judge.py"
