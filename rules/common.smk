# Validated config, the job matrix, wildcard constraints and input helpers shared by all rules.
# Every function the rules call lives here (Snakemake's lint: no functions among the rules).
# Small jobs (datasets, prompts, merges, votes, metrics, tables, figures, report) are localrules:
# on a cluster they run on the submit host; only model conversion, generation and judging are sent.
import re
from pathlib import Path

from snakemake.exceptions import WorkflowError

from bloomqg.annotation.calibration_tables import PANEL_NAME, PANEL_PAIRED_NAME
from bloomqg.annotation.panel_sample import PANEL_SAMPLE_DIR
from bloomqg.study.config import prepare_study
from bloomqg.store.config_schema import ConfigError
from bloomqg.judges.registry import judge_resources
from bloomqg.inputs.models import weight_spec
from bloomqg.store.provenance import code_fingerprint
from bloomqg.inputs.resources import ResourceError, model_resources

if workflow.is_main_process:  # not in job subprocesses: their parent holds the lock
    from bloomqg.runtime.run_lock import clear_locks_of_dead_runs

    # A run killed with -9 leaves Snakemake's lock: gone when no run that could own it is alive.
    clear_locks_of_dead_runs(Path.cwd())

try:
    STUDY = prepare_study(config, workdir=Path.cwd(), sources=workflow.configfiles)
except ConfigError as error:
    raise WorkflowError(str(error)) from None

CFG = STUDY.config
CELLS = STUDY.cells
# The judges whose verdicts make the votes: every judge, or the local ones when the others judge
# a sample only (panel_sample; rules/panel_sample.smk).
JUDGES = STUDY.voting_judges
PANEL_SAMPLE = STUDY.panel_sample

# What each model's and judge's jobs ask the scheduler for (gpu, mem_mb, runtime, api), worked out
# here so that an entry whose needs cannot be told stops the run before any job.
try:
    MODEL_RESOURCES = {name: model_resources(name, spec) for name, spec in CFG["models"].items()}
    JUDGE_RESOURCES = {
        name: judge_resources(name, spec, CFG["models"]) for name, spec in CFG["judges"].items()
    }
except ResourceError as error:
    raise WorkflowError(str(error)) from None


wildcard_constraints:
    dataset="[A-Za-z0-9][A-Za-z0-9_-]*",
    # The defined strategies (built-ins and the config's strategies: mapping), nothing else.
    strategy="|".join(re.escape(name) for name in STUDY.strategies),
    model="[A-Za-z0-9][A-Za-z0-9_-]*",
    judge="[A-Za-z0-9][A-Za-z0-9_.-]*",
    shard=r"\d+",
    root="results|results/release",


# Library code each stage runs: a change reruns that stage (and what follows), nothing else.
# Every stage also depends on the file contracts and how files are written.
CONTRACTS = ("bloomqg.store.frames", "bloomqg.store.parquet_io", "bloomqg.store.atomic")
STAGE_MODULES = {
    "datasets": ("bloomqg.inputs.datasets", "bloomqg.inputs.verbs", "bloomqg.inputs.bloom"),
    "models": ("bloomqg.inputs.models", "bloomqg.inputs.model_cache"),
    "prompts": ("bloomqg.inputs.prompts",),
    "generation": (
        "bloomqg.generation",
        "bloomqg.inputs.prompts",
        "bloomqg.inputs.parsing",
        "bloomqg.api",
        "bloomqg.runtime.serving",
        "bloomqg.runtime.sharding",
    ),
    "judging": ("bloomqg.judges", "bloomqg.inputs.verbs", "bloomqg.generation", "bloomqg.api"),
    "voting": ("bloomqg.voting", "bloomqg.inputs.parsing"),  # parsing: what counts as an answer
    "metrics": ("bloomqg.metrics",),
    "release": (
        "bloomqg.release.runs",
        "bloomqg.release.records",
        "bloomqg.release.download",
        "bloomqg.release.reliability",
        "bloomqg.inputs.parsing",  # the placeholder rule and the questions' join keys
        "bloomqg.voting",
    ),
    "report": (
        "bloomqg.reporting",
        "bloomqg.report_templates",  # the page's templates: editing one rebuilds the report
        "bloomqg.metrics",
        "bloomqg.voting.diagnostics",  # the trust section names suspicious judges with it
        "bloomqg.release.tables",
        "bloomqg.release.paper",
        "bloomqg.api.ledger",
    ),
}
CODE = {stage: code_fingerprint(*modules, *CONTRACTS) for stage, modules in STAGE_MODULES.items()}
# The bias probes live among the judges but only judge_bias runs them: editing them must not
# rerun judge_questions.
CODE["judging"] = code_fingerprint(*STAGE_MODULES["judging"], *CONTRACTS, exclude=("bloomqg.judges.bias",))
CODE["judge_bias"] = code_fingerprint(*STAGE_MODULES["judging"], *CONTRACTS)
# The Inspect export (rules/inspect.smk) lives among the reporting modules; editing it must not
# rebuild the report, nor the report's code the logs.
CODE["report"] = code_fingerprint(
    *STAGE_MODULES["report"], *CONTRACTS, exclude=("bloomqg.reporting.inspect_logs",)
)
CODE["inspect"] = code_fingerprint(
    "bloomqg.reporting.inspect_logs", "bloomqg.inputs.prompts", "bloomqg.metrics.registry", *CONTRACTS
)


def model_dir(model):
    """The converted weights folder of a model shipped as a GGUF (else none)."""
    return [f"resources/models/{model}"] if STUDY.model_needs_materializing(model) else []


# Models served by an engine (engine: vllm | transformers-serve): one generate_on_engine job per
# model runs all its cells against one server; the others run one generate_questions job per shard.
ENGINE_MODELS = [name for name, spec in STUDY.spec.models.items() if spec.engine]
# Models whose questions come from Inspect logs (backend: inspect, rules/inspect.smk): no model runs.
INSPECT_MODELS = [name for name, spec in CFG["models"].items() if spec["backend"] == "inspect"]
LOOP_MODELS = [name for name in CFG["models"] if name not in ENGINE_MODELS + INSPECT_MODELS]
# Judges that load a model (hf, embedding, learned): one judge_all_cells job judges all their
# cells, loading the model (or starting its engine's server) once; every other judge (rules, API
# clients) has a judge_questions job per cell.
ALL_CELLS_JUDGES = [name for name in CFG["judges"] if STUDY.judge_backend(name).loads_model]
CELL_JUDGES = [name for name in CFG["judges"] if name not in ALL_CELLS_JUDGES]


def names_pattern(names):
    """A wildcard constraint matching exactly ``names`` (none: a pattern nothing matches)."""
    return "|".join(re.escape(name) for name in names) or "(?!)"


def engine_shards(model):
    """Every shard of every cell of ``model``: what its generate_on_engine job writes."""
    return [
        {
            "dataset": c.dataset,
            "strategy": c.strategy,
            "shard": shard,
            "n_shards": STUDY.shards(c.dataset),
            "prompts": f"results/prompts/{c.dataset}/{c.strategy}.parquet",
            "dataset_file": f"results/datasets/{c.dataset}.parquet",
        }
        for c in CELLS
        if c.model == model
        for shard in range(STUDY.shards(c.dataset))
    ]


def engine_inputs(wc):
    cells = {(c.dataset, c.strategy) for c in CELLS if c.model == wc.model}
    return {
        "prompts": sorted(f"results/prompts/{d}/{s}.parquet" for d, s in cells),
        "datasets": sorted({f"results/datasets/{d}.parquet" for d, _ in cells}),
        "model": model_dir(wc.model),
    }


def cell_paths(pattern, cells=None):
    return [
        pattern.format(dataset=c.dataset, strategy=c.strategy, model=c.model)
        for c in (CELLS if cells is None else cells)
    ]


def root_cells(root):
    """{root} is results (this study) or results/release (imported published runs)."""
    return RELEASE_CELLS if root == "results/release" else CELLS


def root_cell_paths(root, pattern):
    return [f"{root}/{path}" for path in cell_paths(pattern, root_cells(root))]


def figure_caption(name):
    stem = name.rsplit(".", 1)[0]
    return f"../report/captions/{stem}.rst"


# Judging (rules/judging.smk, rules/annotation.smk's validate_judge).


def judge_model_dir(wc):
    ref = STUDY.judge_model(wc.judge)
    return model_dir(ref) if ref else []


def learned_model(wc):
    """A learned judge's trained model (rule train_learned_judge makes the default file)."""
    if STUDY.judge_backend(wc.judge).name != "learned":
        return []
    from bloomqg.judges.backends.learned import model_file

    return [model_file(wc.judge, CFG["judges"][wc.judge])]


def learned_training_inputs(wc):
    """What a learned judge trains on: its source's runs (train.source: release; rule
    train_learned_judge in rules/release.smk, RELEASE_CELLS from there), the votes files it names
    (votes), or an annotation export's key and filled sheets (annotations)."""
    from bloomqg.judges.backends.learned import training_annotation_files, training_vote_files
    from bloomqg.judges.registry import judge_backend

    entry = CFG["judges"][wc.judge]
    train = judge_backend("learned").with_defaults(entry)["train"]
    try:
        if train["source"] == "votes":
            return {"votes": training_vote_files(wc.judge, entry)}
        if train["source"] == "annotations":
            return training_annotation_files(wc.judge, entry)
    except ConfigError as error:
        raise WorkflowError(str(error))
    models = train.get("models")
    cells = [c for c in RELEASE_CELLS if models is None or c.model in models]
    if not cells:
        raise WorkflowError(
            f"judges.{wc.judge}.train: no release run to train on (release_manifest: "
            f"{CFG.get('release_manifest')!r}, models: {models})"
        )
    return {"votes": cell_paths("results/release/votes/{dataset}/{strategy}/{model}.parquet", cells)}


def judge_job_spec(wc):
    """A judge job's settings: its entry, and for a panel_sample judge the draw it judges."""
    spec = STUDY.judge_params(wc.judge)
    if PANEL_SAMPLE and wc.judge in PANEL_SAMPLE.judges:
        spec = {**spec, "panel_sample": PANEL_SAMPLE.draw_spec}
    return spec


def panel_sample_outputs():
    """The panel-corrected estimates and tables (rules/panel_sample.smk), when panel_sample is set."""
    if not PANEL_SAMPLE:
        return []
    return [
        f"{PANEL_SAMPLE_DIR}/estimates.parquet",
        *[f"{PANEL_SAMPLE_DIR}/{name}.json" for name in (PANEL_NAME, PANEL_PAIRED_NAME)],
    ]


def judge_prompt(wc):
    return [CFG["prompts"]["judge"]] if STUDY.judge_backend(wc.judge).needs_rubric else []


def judge_model_spec(wc):
    """An hf judge runs a models entry's weights with the judge's own decoding settings."""
    ref = STUDY.judge_model(wc.judge)
    return STUDY.model_params(ref) if ref else None


def strategy_templates(wc):
    """The template file of each pass of the strategy: editing one rebuilds its prompts."""
    return [p["template"] for p in STUDY.strategy_params(wc.strategy)["passes"]]


# Metrics (rules/metrics.smk).


def published_lines(wc):
    """An imported release run's votes file line by line: Table 4 is computed over it."""
    if wc.root != "results/release":
        return {}
    return {"lines": f"{wc.root}/votes/{wc.dataset}/{wc.strategy}/{wc.model}.lines.parquet"}


# Report (rules/report.smk).


def report_inputs(wc):
    """This study's files, or (root results/release) the imported release's: no judgments
    there, the release publishes votes, and its own tables."""
    release = wc.root == "results/release"
    cells = root_cells(wc.root)
    return {
        "votes": cell_paths(f"{wc.root}/votes/{{dataset}}/{{strategy}}/{{model}}.parquet", cells),
        "reliability": cell_paths(
            f"{wc.root}/votes/{{dataset}}/{{strategy}}/{{model}}.reliability.parquet", cells
        ),
        "generations": cell_paths(f"{wc.root}/generations/{{dataset}}/{{strategy}}/{{model}}.parquet", cells),
        "judgments": (
            []
            if release
            else [
                f"results/judgments/{c.dataset}/{c.strategy}/{c.model}/{judge}.parquet"
                for c in CELLS
                for judge in JUDGES
            ]
        ),
        "tables": RELEASE_TABLE_OUTPUTS if release else TABLE_OUTPUTS,
        "figures": RELEASE_FIGURE_OUTPUTS if release else FIGURE_OUTPUTS,
    }


def explorer_outputs(root):
    """The item explorer's files beside {root}/report.html."""
    from bloomqg.reporting.explorer.write import EXPLORER_FILES

    return [f"{root}/explorer/{name}" for name in EXPLORER_FILES]


def explorer_inputs(wc):
    """The report's per-cell files: votes, reliability, generations and (a study's) judgments;
    the release's published vote lines (its Table 4 counts them)."""
    inputs = report_inputs(wc)
    chosen = {key: inputs[key] for key in ("votes", "reliability", "generations", "judgments")}
    if wc.root == "results/release":
        chosen["lines"] = cell_paths(
            f"{wc.root}/votes/{{dataset}}/{{strategy}}/{{model}}.lines.parquet", root_cells(wc.root)
        )
    return chosen


# Release import (rules/release.smk): RELEASE_RUNS and RELEASE_MISSING are defined there.


def release_ready(outputs):
    """``outputs`` once every run of the manifest is at hand; else a message naming what is not."""
    if not RELEASE_RUNS:
        raise WorkflowError(
            "reproduce_release needs release_manifest: configs/paper.yaml names the full release's "
            "(configs/llm-eval-release-manifest.yaml), or pass --config release_manifest=PATH"
        )
    if RELEASE_MISSING:
        listed = "\n  ".join(
            f"{run.model} {run.dataset}/{run.strategy}: {', '.join(str(f) for f in files)}"
            for run, files in RELEASE_MISSING
        )
        raise WorkflowError(
            f"{len(RELEASE_MISSING)} of the {len(RELEASE_RUNS)} runs of {CFG['release_manifest']} are not in "
            f"release_dir {CFG.get('release_dir')}:\n  {listed}\nPoint release_dir at a complete copy of "
            "the release, leave it at a folder that does not exist yet to download it, or import the runs "
            "at hand through a manifest that lists only them (release_manifest=PATH)."
        )
    return outputs


def downloaded_release_dir(wc, output):
    """The release folder, read off the first output so that it follows a storage prefix."""
    return str(Path(output[0]).parents[len(Path(RELEASE_FILES[0]).parts) - 1])


def release_run(wc):
    try:
        return RELEASE_RUNS[(wc.dataset, wc.strategy, wc.model)]
    except KeyError:
        raise WorkflowError(
            "no release run for "
            f"{wc.model}/{wc.dataset}/{wc.strategy}: set release_manifest to a manifest that lists it"
        ) from None


# Annotation (rules/annotation.smk): ANNOTATION is defined there.


def annotation_report_inputs(wc=None):
    """What the report adds when annotation is configured: Table 9, the alt-test verdicts beside
    it, and Table 9's figure."""
    if not ANNOTATION:
        return []
    return [
        f"{ANNOTATION_DIR}/table9_human_agreement.json",
        f"{ANNOTATION_DIR}/alt_test.json",
        ANNOTATION_FIGURE,
        # the "Calibrated" tables and the sampling plan (issue 30), when calibration is configured
        *([CALIBRATED_TABLES[-1], CALIBRATED_PAIRED_TABLES[-1], PLAN_TABLES[-1]] if CALIBRATION else []),
    ]


def calibration_sheets(rounds):
    """The filled sheets of every calibration round: a new or removed file reruns calibrate."""
    return sorted(str(p) for folder in rounds if Path(folder).is_dir() for p in Path(folder).glob("*.csv"))


def annotated_judgments():
    """Every judge's judgments of the annotated cells (a study's; a release has none)."""
    if ANNOTATION.source != "study":
        return []
    return [
        path
        for judge in JUDGES
        for path in cell_paths(
            f"results/judgments/{{dataset}}/{{strategy}}/{{model}}/{judge}.parquet", ANNOTATION.cells
        )
    ]


def filled_sheets():
    """The filled sheets now in annotations_dir: a new or removed file reruns the import."""
    folder = Path(ANNOTATION.annotations_dir)
    return sorted(str(p) for p in folder.glob("*.csv")) if folder.is_dir() else []


# Inspect (rules/inspect.smk).


def inspect_log_files(wc):
    """The .eval logs a backend: inspect entry names (a folder: every log under it)."""
    from bloomqg.generation.inspect_source import InspectImportError, log_files

    try:
        return [str(path) for path in log_files(CFG["models"][wc.model]["logs"])]
    except InspectImportError as error:
        raise WorkflowError(f"models.{wc.model}.logs: {error}") from None
