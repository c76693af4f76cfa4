"""Judge backends, found by looking: every module of :mod:`bloomqg.judges.backends` declares one.

A backend module defines ``BACKEND = JudgeBackend(...)``: its name (the ``backend:`` of a judges
entry), its config keys as a JSON-schema fragment, whether it needs the rubric prompt or a text
generator (and how to build one), its threads and job resources, its provenance, and a factory
for its :class:`~bloomqg.judges.base.Judge`. The stage, the rules, the scripts and config
validation look a backend up here instead of branching on its name, so adding a backend is
adding one file to ``bloomqg/judges/backends/``.

Why a folder and not an entry-point group: a new module in the folder is picked up as it is,
while an entry point needs a pyproject.toml edit and a reinstall (two places and a step that is
easy to forget); the workflow ships as a repository, not as a library others extend from outside.
"""

from __future__ import annotations

import copy
import functools
import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bloomqg.inputs.bloom import BLOOM_LEVELS
from bloomqg.store.config_schema import ConfigSchema, file_schema
from bloomqg.inputs.resources import JobResources, ResourceError

if TYPE_CHECKING:  # heavy at import time; only the annotations need them
    import pandas as pd

    from bloomqg.inputs.chat import DecodingParams, TextGenerator
    from bloomqg.inputs.specs import JudgeSpec, ModelSpec
    from bloomqg.generation.factory import ServingJob
    from bloomqg.judges.base import Judge
    from bloomqg.judges.rubric import RubricTemplate

#: Keys every judges entry may carry, whatever its backend.
COMMON_PROPERTIES: dict[str, Any] = {
    "note": {"type": "string", "description": "Free text for humans."},
    "family": {"type": "string", "description": "The model family the judge belongs to (e.g. qwen, llama, gpt), compared with the generators' family by the self-preference probe of judge_bias; default: the family of its model_ref models entry."},
}


@dataclass(frozen=True)
class JudgeContext:
    """What a backend's factory gets to build a judge for one cell."""

    judge_name: str
    #: the judges entry, with the defaults of the backend's own keys filled in
    spec: Mapping[str, Any]
    #: the dataset (columns of :data:`bloomqg.store.frames.DATASET`) the questions were written from
    dataset: "pd.DataFrame"
    knowledge_units: list[str]
    domain: str
    #: the rubric prompt, for backends with ``needs_rubric``
    rubric: "RubricTemplate | None"
    #: the loaded text generator, for backends with a ``text_generator`` factory
    text_generator: "TextGenerator | None"
    #: the decoding an LLM judge's calls use: the entry's, resolved when the study was read
    #: (:attr:`bloomqg.inputs.specs.EntrySpec.decoding`), with the seed of the call group
    decoding: "DecodingParams"
    #: the Bloom levels in the order a rubric-rendering judge lists them (the order probe
    #: permutes them, as it permutes ``knowledge_units``)
    bloom_levels: tuple[str, ...] = BLOOM_LEVELS


@dataclass(frozen=True)
class GeneratorSource:
    """What a backend's ``text_generator`` factory gets to build the generator a job uses."""

    #: the judges entry, read (an API judge's client settings carry the study's budget)
    judge: "JudgeSpec"
    #: the models entry named by ``model_ref`` (backends with ``borrows_model``), else None
    model: "ModelSpec | None"
    #: the converted weights folder of that models entry, when it needs one
    model_dir: str | Path | None
    cache_dir: str | Path
    num_threads: int | None
    #: what the job knows to start the borrowed entry's server, when that entry names an
    #: ``engine`` (:class:`bloomqg.generation.factory.ServingJob`); None: in-process
    serving: "ServingJob | None" = None


@dataclass(frozen=True)
class JudgeBackend:
    """One judge backend, as its module declares it."""

    name: str
    #: one line for the schema's ``backend`` description and the config reference
    description: str
    #: builds the judge for one cell
    build: Callable[[JudgeContext], "Judge"]
    #: resources of one judging job (judge_questions, judge_all_cells): ``(judge name, entry, models section) -> JobResources``
    resources: Callable[[str, Mapping[str, Any], Mapping[str, Mapping[str, Any]]], "JobResources"]
    #: JSON-schema ``properties`` of the entry's own keys (``backend`` and ``note`` are added)
    properties: Mapping[str, Any] = field(default_factory=dict)
    #: keys the entry must give besides ``backend``
    required: tuple[str, ...] = ()
    #: schemas (``$ref`` to ``#/$defs/...``) whose properties the entry also accepts
    includes: tuple[str, ...] = ()
    #: threads a judging job asks for
    threads: int = 1
    #: whether the judge renders the rubric prompt (``prompts.judge``)
    needs_rubric: bool = False
    #: builds the text generator a job hands the judge (None: the judge needs none)
    text_generator: Callable[[GeneratorSource], "TextGenerator"] | None = None
    #: whether ``model_ref`` names a models entry whose weights the judge runs
    borrows_model: bool = False
    #: whether the judge loads a model (seconds on a CPU, minutes for a large one or an engine's
    #: server): then one judge_all_cells job judges every cell, loading it once; else a
    #: judge_questions job per cell (rules, API clients)
    loads_model: bool = False
    #: extra provenance of a judgments file: ``(judge name, entry) -> dict``
    provenance: Callable[[str, Mapping[str, Any]], dict[str, Any]] | None = None

    def entry_schema(self) -> dict[str, Any]:
        """This backend's branch of the judges-entry schema: its keys and nothing else."""
        schema: dict[str, Any] = {
            "type": "object",
            "required": ["backend", *self.required],
            "properties": {"backend": {"const": self.name}, **COMMON_PROPERTIES, **copy.deepcopy(dict(self.properties))},
        }
        if self.includes:
            # Properties declared in $ref'd schemas count as known only with unevaluatedProperties.
            schema["allOf"] = [{"$ref": ref} for ref in self.includes]
            schema["unevaluatedProperties"] = False
        else:
            schema["additionalProperties"] = False
        return schema

    def with_defaults(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        """``spec`` with the ``default:`` of each of this backend's own keys it leaves out."""
        filled = dict(spec)
        for key, prop in self.properties.items():
            if "default" in prop and key not in filled:
                filled[key] = copy.deepcopy(prop["default"])
        return filled


BACKENDS_PACKAGE = "bloomqg.judges.backends"


@functools.cache
def judge_backends() -> dict[str, JudgeBackend]:
    """Every backend of :mod:`bloomqg.judges.backends`, by name (modules named ``_*`` skipped)."""
    package = importlib.import_module(BACKENDS_PACKAGE)
    found: dict[str, JudgeBackend] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{BACKENDS_PACKAGE}.{info.name}")
        backend = getattr(module, "BACKEND", None)
        if not isinstance(backend, JudgeBackend):
            raise TypeError(f"{module.__file__}: a judge backend module must define BACKEND = JudgeBackend(...)")
        if backend.name in found:
            raise ValueError(f"{module.__file__}: judge backend {backend.name!r} is declared twice")
        found[backend.name] = backend
    return found


def judge_backend(name: str) -> JudgeBackend:
    """The backend called ``name``; an unknown name is a ValueError listing the known ones."""
    backends = judge_backends()
    if name not in backends:
        raise ValueError(f"backend {name!r} is not one of {sorted(backends)}")
    return backends[name]


def judge_schema_defs() -> dict[str, Any]:
    """``$defs`` for the config schema: ``judge`` (any entry) and ``judge_<name>`` per backend."""
    backends = judge_backends()
    defs: dict[str, Any] = {
        "judge": {
            "type": "object",
            "required": ["backend"],
            "description": "One judge of the panel; its backend decides which keys it takes.",
            "properties": {
                "backend": {
                    "enum": list(backends),
                    "description": "; ".join(f"{b.name}: {b.description}" for b in backends.values()) + ".",
                },
                **COMMON_PROPERTIES,
            },
            "allOf": [
                {"if": {"properties": {"backend": {"const": name}}, "required": ["backend"]},
                 "then": {"$ref": f"#/$defs/judge_{name}"}}
                for name in backends
            ],
        }
    }
    for name, backend in backends.items():
        defs[f"judge_{name}"] = backend.entry_schema()
    return defs


@functools.cache
def config_schema() -> ConfigSchema:
    """The whole config schema: ``schemas/config.schema.yaml`` plus each judge backend's branch
    of a judges entry (what a study config and a judges entry are checked against)."""
    schema = copy.deepcopy(file_schema().schema)
    schema["$defs"].update(judge_schema_defs())
    return ConfigSchema(schema)


def judge_resources(name: str, spec: Mapping[str, Any], models: Mapping[str, Mapping[str, Any]]) -> JobResources:
    """Resources of a judging job, as the judge's backend declares them (an hf judge
    takes its model entry's, an openai judge one ``api`` slot, rules and embedding a small CPU job)."""
    try:
        backend = judge_backend(spec["backend"])
    except ValueError as error:
        raise ResourceError(f"judges.{name}.backend: {error}") from None
    return backend.resources(name, spec, models)


def make_judge_text_generator(
    judge: "JudgeSpec",
    *,
    model: "ModelSpec | None",
    model_dir: str | Path | None,
    cache_dir: str | Path,
    num_threads: int | None,
    serving: "ServingJob | None" = None,
) -> "TextGenerator | None":
    """The text generator a judge job (judge_questions, judge_all_cells) hands ``judge``; None
    when it needs none. ``model``: the models entry its ``model_ref`` borrows;
    ``serving``: the job's server settings, for a judge whose borrowed entry names an engine."""
    backend = judge_backend(judge.backend)
    if backend.text_generator is None:
        return None
    return backend.text_generator(GeneratorSource(judge, model, model_dir, cache_dir, num_threads, serving))
