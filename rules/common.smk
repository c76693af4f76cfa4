# Validated config, the job matrix, wildcard constraints and input helpers shared by all rules.
# Small jobs (datasets, prompts, merges, votes, metrics, tables, figures, report) are localrules:
# on a cluster they run on the submit host; only model conversion, generation and judging are sent.
from pathlib import Path

from snakemake.exceptions import WorkflowError

from bloomqg.config import ConfigError, prepare_study
from bloomqg.models import weight_spec
from bloomqg.provenance import code_fingerprint
from bloomqg.resources import ResourceError, judge_resources, model_resources

if workflow.is_main_process:  # not in job subprocesses: their parent holds the lock
    from bloomqg.run_lock import clear_locks_of_dead_runs

    # A run killed with -9 leaves Snakemake's lock: gone when no run that could own it is alive.
    clear_locks_of_dead_runs(Path.cwd())

try:
    STUDY = prepare_study(config, workdir=Path.cwd(), sources=workflow.configfiles)
except ConfigError as error:
    raise WorkflowError(str(error)) from None

CFG = STUDY.config
CELLS = STUDY.cells
JUDGES = list(CFG["judges"])

# What each model's and judge's jobs ask the scheduler for (gpu, mem_mb, runtime, api), worked out
# here so that an entry whose needs cannot be told stops the run before any job.
try:
    MODEL_RESOURCES = {name: model_resources(name, spec) for name, spec in CFG["models"].items()}
    JUDGE_RESOURCES = {name: judge_resources(name, spec, CFG["models"]) for name, spec in CFG["judges"].items()}
except ResourceError as error:
    raise WorkflowError(str(error)) from None


wildcard_constraints:
    dataset="[A-Za-z0-9][A-Za-z0-9_-]*",
    strategy="cot|fgp",
    model="[A-Za-z0-9][A-Za-z0-9_-]*",
    judge="[A-Za-z0-9][A-Za-z0-9_.-]*",
    shard=r"\d+",
    root="results|results/release",


# Library code each stage runs: a change reruns that stage (and what follows), nothing else.
# Every stage also depends on the file contracts and how files are written.
CONTRACTS = ("bloomqg.schemas", "bloomqg.parquet_io", "bloomqg.atomic")
STAGE_MODULES = {
    "datasets": ("bloomqg.datasets", "bloomqg.verbs", "bloomqg.bloom"),
    "models": ("bloomqg.models",),
    "prompts": ("bloomqg.prompts",),
    "generation": ("bloomqg.generation", "bloomqg.prompts", "bloomqg.parsing", "bloomqg.api", "bloomqg.sharding"),
    "judging": ("bloomqg.judges", "bloomqg.verbs", "bloomqg.generation", "bloomqg.api"),
    "voting": ("bloomqg.voting",),
    "metrics": ("bloomqg.metrics",),
    "release": ("bloomqg.release.runs", "bloomqg.release.records", "bloomqg.release.download", "bloomqg.release.reliability", "bloomqg.voting"),
    "report": ("bloomqg.reporting", "bloomqg.metrics", "bloomqg.release.tables", "bloomqg.release.paper", "bloomqg.api.ledger"),
}
CODE = {stage: code_fingerprint(*modules, *CONTRACTS) for stage, modules in STAGE_MODULES.items()}


def model_dir(model):
    """The converted weights folder of a model shipped as a GGUF (else none)."""
    return [f"resources/models/{model}"] if STUDY.model_needs_materializing(model) else []


def cell_paths(pattern, cells=None):
    return [pattern.format(dataset=c.dataset, strategy=c.strategy, model=c.model) for c in (CELLS if cells is None else cells)]


def root_cells(root):
    """{root} is results (this study) or results/release (imported published runs)."""
    return RELEASE_CELLS if root == "results/release" else CELLS


def root_cell_paths(root, pattern):
    return [f"{root}/{path}" for path in cell_paths(pattern, root_cells(root))]


def figure_caption(name):
    stem = name.rsplit(".", 1)[0]
    return f"../report/captions/{stem}.rst"
