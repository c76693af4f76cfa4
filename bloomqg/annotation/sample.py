"""Stratified samples of judged questions: the items experts annotate, and the items a judge
is validated on.

A sample takes up to ``items_per_cell`` generated questions from each model × dataset × strategy
cell, drawn without replacement by a generator seeded with the seed *and* the cell's name, so a
cell's sample does not change when another cell is added or removed. Rows without a generated
question are never drawn (there is nothing to rate).

The annotation key (:data:`bloomqg.store.frames.ANNOTATION_ITEMS`) pools the cells' samples, shuffles
them with the seed and numbers them ``A0001``, ``A0002``, …: annotators see opaque ids in mixed
order, never the model, the strategy or any judge's verdict; the key holds the panel's verdicts
for the import.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from bloomqg.inputs.parsing import has_question
from bloomqg.store.cells import CELL_COLUMNS, cell_name, cell_of
from bloomqg.store.frames import ANNOTATION_ITEMS

logger = logging.getLogger(__name__)


def sample_cell(frame: pd.DataFrame, items_per_cell: int | None, seed: int) -> pd.DataFrame:
    """Up to ``items_per_cell`` rows of one cell's frame that have a ``new_question`` (all of
    them when None), in the frame's order. The draw depends on the seed and the cell only."""
    name = cell_of(frame, "sample_cell: the frame").name()
    candidates = frame[frame["new_question"].map(has_question)]
    if items_per_cell is None or len(candidates) <= items_per_cell:
        if items_per_cell is not None and len(candidates) < items_per_cell:
            logger.warning(
                "%s: only %d generated questions, fewer than the %d asked for; taking all",
                name, len(candidates), items_per_cell,
            )
        return candidates.reset_index(drop=True)
    stream = zlib.crc32(name.encode("utf-8"))
    rng = np.random.default_rng([seed, stream])
    chosen = np.sort(rng.choice(len(candidates), size=items_per_cell, replace=False))
    return candidates.iloc[chosen].reset_index(drop=True)


def cell_count(items_per_cell: int | Mapping[str, int], frame: pd.DataFrame) -> int:
    """The items to draw from the cell of ``frame``: the one number, or the cell's own."""
    if isinstance(items_per_cell, Mapping):
        name = cell_of(frame, "annotation_items").name()
        if name not in items_per_cell:
            raise ValueError(f"annotation_items: no number of items for cell {name} (the plan has {sorted(items_per_cell)})")
        return int(items_per_cell[name])
    return int(items_per_cell)


def cell_counts(plan: pd.DataFrame) -> dict[str, int]:
    """Items per cell from a sampling plan (:data:`bloomqg.store.frames.ANNOTATION_PLAN`): the most any
    of the cell's headline metrics needs (every item where a target is not reachable)."""
    needed = plan.groupby(list(CELL_COLUMNS))["n_needed"].max()
    return {cell_name(*key): int(n) for key, n in needed.items()}


def annotation_items(
    votes: Sequence[pd.DataFrame],
    *,
    items_per_cell: int | Mapping[str, int],
    seed: int,
    knowledge_units: Mapping[str, Sequence[str]],
) -> pd.DataFrame:
    """The annotation key: a stratified sample of the cells' votes frames (one frame per cell,
    ``schemas.VOTES`` columns) with the panel's majorities, in the annotators' (shuffled) order.

    ``knowledge_units`` maps each dataset to the unit list annotators choose from; an original
    unit missing from it is an error, since an annotator could not pick it. ``items_per_cell``
    is one number for every cell, or a number per cell name (``dataset/strategy/model``, what
    the sampling plan asks for; :func:`cell_counts`).
    """
    parts = []
    for frame in votes:
        if frame.empty:
            continue
        picked = sample_cell(frame, cell_count(items_per_cell, frame), seed)
        parts.append(picked)
    if not parts:
        raise ValueError("annotation_items: the cells hold no generated question to annotate")
    pooled = pd.concat(parts, ignore_index=True)
    order = np.random.default_rng(seed).permutation(len(pooled))
    pooled = pooled.iloc[order].reset_index(drop=True)
    records = []
    for position, row in enumerate(pooled.itertuples(index=False), start=1):
        choices = knowledge_units.get(row.dataset)
        if choices is None:
            raise ValueError(f"annotation_items: no knowledge-unit list for dataset {row.dataset!r}")
        outside = [unit for unit in row.original_knowledge_units if unit not in choices]
        if outside:
            raise ValueError(
                f"annotation_items: {row.prompt_id}: original units {outside} are not in dataset "
                f"{row.dataset!r}'s list"
            )
        records.append({
            "annotation_id": f"A{position:04d}",
            "prompt_id": row.prompt_id,
            "item_id": row.item_id,
            "dataset": row.dataset,
            "strategy": row.strategy,
            "model": row.model,
            "original_question": row.original_question,
            "original_bloom_level": row.original_bloom_level,
            "original_knowledge_units": list(row.original_knowledge_units),
            "new_question": row.new_question,
            "unit_choices": list(choices),
            "panel_unique": row.unique,
            "panel_readable": row.readable,
            "panel_answerable": row.answerable,
            "panel_bloom_level": row.bloom_level,
            "panel_knowledge_units": None if row.knowledge_units is None else list(row.knowledge_units),
        })
    logger.info("annotation sample: %d items from %d cells (seed %d)", len(records), len(parts), seed)
    return pd.DataFrame.from_records(records, columns=ANNOTATION_ITEMS.names)


def knowledge_units_by_dataset(votes: Sequence[pd.DataFrame]) -> dict[str, list[str]]:
    """Each dataset's unit list as the votes frames show it: every original's units, in order of
    first appearance (the votes hold one row per original, so this is the dataset's list)."""
    units: dict[str, list[str]] = {}
    for frame in votes:
        for dataset, row_units in zip(frame["dataset"], frame["original_knowledge_units"]):
            listed = units.setdefault(dataset, [])
            listed.extend(unit for unit in row_units if unit not in listed)
    return units


def judges_unit_lists(datasets: Sequence[pd.DataFrame]) -> dict[str, list[str]]:
    """Each dataset's unit list exactly as the judges get it: every unit of the whole prepared
    dataset (:func:`bloomqg.inputs.datasets.dataset_knowledge_units`), not only of the items that
    ``limit_items`` kept or the sample drew — an annotator must be able to choose what the
    panel could."""
    from bloomqg.inputs.datasets import dataset_knowledge_units

    units: dict[str, list[str]] = {}
    for frame in datasets:
        for name, part in frame.groupby("dataset", sort=False):
            units[str(name)] = dataset_knowledge_units(part)
    return units
