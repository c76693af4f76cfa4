"""The ``annotation`` and ``judge_validation`` config sections, checked against the study.

The schema (``schemas/config.schema.yaml``) checks their shape; this module checks what the
schema cannot: that the cells exist in their source and that the judges are configured. Errors
name the key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bloomqg.store.config_schema import Cell, ConfigError

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
    #: items_per_cell "plan": each cell draws what the sampling plan asks for (items_per_cell unused)
    items_from_plan: bool = False


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
        items_per_cell=(DEFAULT_ITEMS_PER_CELL if section.get("items_per_cell") == "plan"
                        else int(section.get("items_per_cell", DEFAULT_ITEMS_PER_CELL))),
        seed=int(section.get("seed", config["seed"])),
        annotations_dir=str(section.get("annotations_dir", DEFAULT_ANNOTATIONS_DIR)),
        title=str(section.get("title", DEFAULT_TITLE)),
        alt_test=_alt_test_settings(section.get("alt_test") or {}),
        items_from_plan=section.get("items_per_cell") == "plan",
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


@dataclass(frozen=True)
class CalibrationSettings:
    #: folders of filled sheets (annotation rounds) read against the annotation key, in order
    rounds: list[str]
    confidence: float
    pseudo_disagreements: int


@dataclass(frozen=True)
class PlanSettings:
    source: str
    root: str
    cells: list[Cell]
    half_width: float  # percentage points
    confidence: float
    assumed_agreement: dict[str, float]


def calibration_settings(config: Mapping[str, Any], annotation: AnnotationSettings | None) -> CalibrationSettings | None:
    """The validated ``calibration`` section, or None when the config has none."""
    from bloomqg.annotation.ppi import DEFAULT_PSEUDO_DISAGREEMENTS

    section = config.get("calibration")
    if section is None:
        return None
    if annotation is None:
        raise ConfigError("calibration: needs the annotation section (the random sample the human labels are of)")
    rounds = [str(folder) for folder in section.get("rounds") or [annotation.annotations_dir]]
    return CalibrationSettings(
        rounds=rounds,
        confidence=float(section.get("confidence", 0.95)),
        pseudo_disagreements=int(section.get("pseudo_disagreements", DEFAULT_PSEUDO_DISAGREEMENTS)),
    )


def plan_settings(config: Mapping[str, Any], annotation: AnnotationSettings | None,
                  study_cells: Sequence[Cell], release_cells: Sequence[Cell]) -> PlanSettings:
    """The ``annotation_plan`` section with its defaults (the target runs without one): the
    annotation's cells when annotation is configured, else every cell of ``source``."""
    from bloomqg.annotation.plan import DEFAULT_ASSUMED_AGREEMENT, DEFAULT_CONFIDENCE, DEFAULT_HALF_WIDTH

    section = config.get("annotation_plan") or {}
    if annotation is not None:
        source, cells = annotation.source, annotation.cells
    else:
        source = section.get("source", "study")
        if source == "release" and not release_cells:
            raise ConfigError("annotation_plan.source: 'release' needs release_manifest (the runs to plan for)")
        cells = list(study_cells if source == "study" else release_cells)
    assumed = {**DEFAULT_ASSUMED_AGREEMENT, **{k: float(v) for k, v in (section.get("assumed_agreement") or {}).items()}}
    return PlanSettings(
        source=source, root=SOURCES[source], cells=list(cells),
        half_width=float(section.get("half_width", DEFAULT_HALF_WIDTH)),
        confidence=float(section.get("confidence", DEFAULT_CONFIDENCE)),
        assumed_agreement=assumed,
    )
