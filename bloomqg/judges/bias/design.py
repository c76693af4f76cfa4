"""The probes' design: which questions, in which list order, asked with which seed (pure).

Everything is a function of the seed and the cell, so a rerun asks exactly the same calls (and
an API judge's calls are answered by the call cache), and ``estimate_cost`` can count them
before any is made.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from bloomqg.inputs.bloom import BLOOM_LEVELS
from bloomqg.inputs.parsing import has_question
from bloomqg.inputs.specs import StudySpec

#: The probes, in the order they are asked.
PROBES: tuple[str, ...] = ("base", "repeat", "order")
#: Added to the study's seed for the repeat probe (far from any seed a user would pick next).
REPEAT_SEED_OFFSET = 1_000_003
#: Default questions drawn per judge and cell.
DEFAULT_ITEMS_PER_CELL = 30


@dataclass(frozen=True)
class BiasSettings:
    """The ``judge_bias:`` config section, resolved."""

    judges: tuple[str, ...]
    items_per_cell: int
    #: the study's seed: the base probe then asks exactly judge_questions' calls (cache hits)
    seed: int


def judge_bias_settings(study: StudySpec) -> BiasSettings | None:
    """The section's settings; None when the config has no ``judge_bias:`` (the target is off).
    A name that is no judges entry is a ValueError naming the key."""
    section = study.judge_bias
    if not section:
        return None
    unknown = [name for name in section["judges"] if name not in study.judges]
    if unknown:
        raise ValueError(f"judge_bias.judges: {unknown} are not judges entries (known: {list(study.judges)})")
    return BiasSettings(
        judges=tuple(section["judges"]),
        items_per_cell=int(section.get("items_per_cell", DEFAULT_ITEMS_PER_CELL)),
        seed=study.seed,
    )


def families(study: StudySpec) -> dict[str, dict[str, str | None]]:
    """``{"judges": {judge: family}, "generators": {model: family}}`` (None: not declared); a
    judge's family is its own, else that of the models entry it borrows (``model_ref``)."""
    return {
        "judges": {name: study.judge_family(name) for name in study.judges},
        "generators": {name: spec.own_family for name, spec in study.models.items()},
    }


def bias_sample(generations: pd.DataFrame, items_per_cell: int, seed: int) -> pd.DataFrame:
    """Up to ``items_per_cell`` generations rows that have a question, drawn with ``seed``
    (the same rows for every judge), in prompt_id order."""
    with_question = generations[generations["new_question"].map(has_question)]
    ordered = with_question.sort_values("prompt_id", kind="stable")
    if len(ordered) > items_per_cell:
        ordered = ordered.sample(n=items_per_cell, random_state=seed).sort_values("prompt_id", kind="stable")
    return ordered.reset_index(drop=True)


@dataclass(frozen=True)
class ProbeGroup:
    """Questions asked under one probe with one list order and one seed."""

    probe: str
    prompt_ids: tuple[str, ...]
    level_order: tuple[str, ...]
    unit_order: tuple[str, ...]
    seed: int


def probe_plan(
    prompt_ids: Sequence[str], knowledge_units: Sequence[str], *, seed: int, cell: str
) -> list[ProbeGroup]:
    """The calls of one judge on one cell's sample: base and repeat (canonical lists) and the
    order probe in six groups, each with one row of a cyclic Latin square of the levels (a
    seeded permutation, rotated by the group's number), all with one seeded permutation of the
    units (never the canonical order when there are two or more). Questions are dealt to the
    groups in a seeded shuffled order."""
    ids = tuple(sorted(prompt_ids))
    units = tuple(knowledge_units)
    plan = [
        ProbeGroup("base", ids, BLOOM_LEVELS, units, seed),
        ProbeGroup("repeat", ids, BLOOM_LEVELS, units, seed + REPEAT_SEED_OFFSET),
    ]
    rng = random.Random(f"judge_bias:{seed}:{cell}")
    base_order = rng.sample(BLOOM_LEVELS, len(BLOOM_LEVELS))
    unit_order = tuple(rng.sample(units, len(units)))
    if unit_order == units and len(units) > 1:
        unit_order = unit_order[1:] + unit_order[:1]
    dealt = rng.sample(ids, len(ids))
    n_groups = len(BLOOM_LEVELS)
    for group in range(n_groups):
        members = tuple(sorted(dealt[group::n_groups]))
        level_order = tuple(base_order[group:] + base_order[:group])
        if members:
            plan.append(ProbeGroup("order", members, level_order, unit_order, seed))
    return plan
