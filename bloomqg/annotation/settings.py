"""The ``annotation`` and ``judge_validation`` config sections, checked against the study.

The schema (``schemas/config.schema.yaml``) checks their shape; this module checks what the
schema cannot: that the cells exist in their source and that the judges are configured. Errors
name the key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bloomqg.config_schema import Cell, ConfigError

SOURCES: dict[str, str] = {"study": "results", "release": "results/release"}
DEFAULT_ITEMS_PER_CELL = 20
DEFAULT_ANNOTATIONS_DIR = "annotations"
DEFAULT_TITLE = "Rate generated questions (bloomqg)"


@dataclass(frozen=True)
class AnnotationSettings:
    source: str
    root: str  # results folder of the votes sampled: results or results/release
    cells: list[Cell]
    items_per_cell: int
    seed: int
    annotations_dir: str
    title: str
    #: the alternative annotator test: epsilon, q, min_items_per_annotator
    alt_test: dict[str, float | int]


@dataclass(frozen=True)
class JudgeValidationSettings:
    judges: list[str]
    cells: list[Cell]
    items_per_cell: int | None
    seed: int


def _cells(names: Sequence[str] | None, available: Sequence[Cell], where: str) -> list[Cell]:
    if names is None:
        if not available:
            raise ConfigError(f"{where}: the source has no cells")
        return list(available)
    chosen = []
    for position, name in enumerate(names):
        dataset, strategy, model = name.split("/")
        cell = Cell(dataset, strategy, model)
        if cell not in available:
            known = ", ".join(f"{c.dataset}/{c.strategy}/{c.model}" for c in available) or "none"
            raise ConfigError(f"{where}[{position}]: cell {name!r} is not in the source (known: {known})")
        chosen.append(cell)
    return chosen


def annotation_settings(
    config: Mapping[str, Any], study_cells: Sequence[Cell], release_cells: Sequence[Cell]
) -> AnnotationSettings | None:
    """The validated ``annotation`` section, or None when the config has none."""
    section = config.get("annotation")
    if section is None:
        return None
    source = section.get("source", "study")
    available = study_cells if source == "study" else release_cells
    if source == "release" and not release_cells:
        raise ConfigError("annotation.source: 'release' needs release_manifest (the runs to sample)")
    return AnnotationSettings(
        source=source,
        root=SOURCES[source],
        cells=_cells(section.get("cells"), available, "annotation.cells"),
        items_per_cell=int(section.get("items_per_cell", DEFAULT_ITEMS_PER_CELL)),
        seed=int(section.get("seed", config["seed"])),
        annotations_dir=str(section.get("annotations_dir", DEFAULT_ANNOTATIONS_DIR)),
        title=str(section.get("title", DEFAULT_TITLE)),
        alt_test=_alt_test_settings(section.get("alt_test") or {}),
    )


def _alt_test_settings(section: Mapping[str, Any]) -> dict[str, float | int]:
    from bloomqg.annotation.alt_test import DEFAULT_EPSILON, DEFAULT_MIN_ITEMS_PER_ANNOTATOR, DEFAULT_Q

    return {
        "epsilon": float(section.get("epsilon", DEFAULT_EPSILON)),
        "q": float(section.get("q", DEFAULT_Q)),
        "min_items_per_annotator": int(section.get("min_items_per_annotator", DEFAULT_MIN_ITEMS_PER_ANNOTATOR)),
    }


def judge_validation_settings(
    config: Mapping[str, Any], release_cells: Sequence[Cell]
) -> JudgeValidationSettings | None:
    """The validated ``judge_validation`` section, or None when the config has none."""
    section = config.get("judge_validation")
    if section is None:
        return None
    if not release_cells:
        raise ConfigError("judge_validation: needs release_manifest (the release runs to validate on)")
    judges = list(section["judges"])
    for position, judge in enumerate(judges):
        if judge not in config["judges"]:
            raise ConfigError(
                f"judge_validation.judges[{position}]: {judge!r} is not a judges entry "
                f"(known: {', '.join(config['judges'])})"
            )
    return JudgeValidationSettings(
        judges=judges,
        cells=_cells(section.get("cells"), release_cells, "judge_validation.cells"),
        items_per_cell=section.get("items_per_cell", 200),
        seed=int(section.get("seed", config["seed"])),
    )
