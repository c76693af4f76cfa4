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
CODE = {
    "datasets": code_fingerprint("bloomqg.datasets", "bloomqg.verbs", "bloomqg.bloom"),
    "models": code_fingerprint("bloomqg.models"),
    "prompts": code_fingerprint("bloomqg.prompts"),
    "generation": code_fingerprint("bloomqg.generation", "bloomqg.parsing", "bloomqg.llm_client", "bloomqg.call_cache", "bloomqg.sharding"),
    "judging": code_fingerprint("bloomqg.judges", "bloomqg.verbs", "bloomqg.llm_client", "bloomqg.call_cache"),
    "voting": code_fingerprint("bloomqg.voting"),
    "metrics": code_fingerprint("bloomqg.metrics"),
    "release": code_fingerprint("bloomqg.release", "bloomqg.voting"),
    "report": code_fingerprint("bloomqg.tables", "bloomqg.figures", "bloomqg.report", "bloomqg.release_tables"),
}


def model_dir(model):
    """The converted weights folder of a model shipped as a GGUF (else none)."""
    return [f"resources/models/{model}"] if STUDY.model_needs_materializing(model) else []


def cells_where(**fixed):
    return [c for c in CELLS if all(getattr(c, k) == v for k, v in fixed.items())]


def cell_paths(pattern, cells=None):
    return [pattern.format(dataset=c.dataset, strategy=c.strategy, model=c.model) for c in (cells or CELLS)]
