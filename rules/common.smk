# Validated config, the job matrix, wildcard constraints and input helpers shared by all rules.
from pathlib import Path

from snakemake.exceptions import WorkflowError

from bloomqg.config import ConfigError, prepare_study
from bloomqg.provenance import code_fingerprint

try:
    STUDY = prepare_study(config, workdir=Path.cwd(), sources=workflow.configfiles)
except ConfigError as error:
    raise WorkflowError(str(error)) from None

CFG = STUDY.config
CELLS = STUDY.cells
JUDGES = list(CFG["judges"])


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
    "release": ("bloomqg.release", "bloomqg.release_reliability", "bloomqg.voting"),
    "report": ("bloomqg.tables", "bloomqg.figures", "bloomqg.report", "bloomqg.release_tables", "bloomqg.api.ledger"),
}
CODE = {stage: code_fingerprint(*modules, *CONTRACTS) for stage, modules in STAGE_MODULES.items()}


def model_dir(model):
    """The converted weights folder of a model shipped as a GGUF (else none)."""
    return [f"resources/models/{model}"] if STUDY.model_needs_materializing(model) else []


def cell_paths(pattern, cells=None):
    return [pattern.format(dataset=c.dataset, strategy=c.strategy, model=c.model) for c in (CELLS if cells is None else cells)]
