"""A cell: one dataset × strategy × model, the unit a study writes its frames per.

One definition of how a cell is keyed (:class:`Cell`, in the order the workflow's paths name
it: ``<dataset>/<strategy>/<model>``), read from a frame (:func:`cell_of`, which checks the frame
holds one cell) and written (:meth:`Cell.name`, as configs, messages and the explorer write it).
"""

from __future__ import annotations

from typing import NamedTuple

import pandas as pd

#: The columns that key a cell, in the order of :class:`Cell`.
CELL_COLUMNS: tuple[str, str, str] = ("dataset", "strategy", "model")


class Cell(NamedTuple):
    dataset: str
    strategy: str
    model: str

    def name(self) -> str:
        """``dataset/strategy/model``: how configs, messages and the explorer write a cell."""
        return cell_name(self.dataset, self.strategy, self.model)


def cell_name(dataset: str, strategy: str, model: str) -> str:
    """``dataset/strategy/model``."""
    return f"{dataset}/{strategy}/{model}"


def cell_of(frame: pd.DataFrame, what: str = "frame") -> Cell:
    """The one cell of ``frame``'s rows; a ValueError naming ``what`` when it holds none or several."""
    missing = [c for c in CELL_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"{what}: no column {', '.join(missing)}, so its cell is unknown")
    cells = frame[list(CELL_COLUMNS)].drop_duplicates()
    if len(cells) != 1:
        found = [cell_name(*map(str, row)) for row in cells.itertuples(index=False)]
        raise ValueError(f"{what} must hold exactly one dataset/strategy/model cell, got {found or 'none'}")
    return Cell(*(str(value) for value in cells.iloc[0]))
