"""What every figure shares: sizes, the Okabe–Ito palette, the matplotlib style, empty panels.

Colours follow the Okabe–Ito colour-blind-safe palette; text is at least 7 pt so single-panel
figures stay legible at a column width of about 3.5 in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from bloomqg.inputs.bloom import LEVEL_ABBREVIATION, UNCATEGORIZED
from bloomqg.reporting.display import EMPTY, STRATEGY_LABEL, StrategyLabels, strategy_order

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Colormap, Normalize
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle


DPI = 200
COLUMN_WIDTH_IN = 3.5
PAGE_WIDTH_IN = 7.2

#: Okabe & Ito (2008), the colour-blind-safe qualitative palette.
OKABE_ITO: dict[str, str] = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "purple": "#CC79A7",
}
GREY = "#999999"

LEVEL_COLOR: dict[str, str] = {
    "Remember": OKABE_ITO["blue"],
    "Understand": OKABE_ITO["sky_blue"],
    "Apply": OKABE_ITO["green"],
    "Analyze": OKABE_ITO["orange"],
    "Evaluate": OKABE_ITO["vermillion"],
    "Create": OKABE_ITO["purple"],
    UNCATEGORIZED: GREY,
}
SHIFT_COLOR: dict[str, str] = {
    "cogreg": OKABE_ITO["vermillion"],
    "cogdrift": OKABE_ITO["sky_blue"],
    "cogleap": OKABE_ITO["green"],
}
#: The paper's two strategies keep their colours; :func:`strategy_colors` gives every other one its own.
STRATEGY_COLOR: dict[str, str] = {"cot": OKABE_ITO["blue"], "fgp": OKABE_ITO["orange"]}
#: Colours for datasets (and other series) in order of appearance.
SERIES_COLORS: tuple[str, ...] = (
    OKABE_ITO["blue"], OKABE_ITO["orange"], OKABE_ITO["green"], OKABE_ITO["purple"],
    OKABE_ITO["sky_blue"], OKABE_ITO["vermillion"], OKABE_ITO["black"], OKABE_ITO["yellow"],
)

#: matplotlib settings for every figure (fonts ≥ 7 pt).
STYLE: dict[str, object] = {
    "font.family": "DejaVu Sans",
    "font.size": 7.5,
    "axes.titlesize": 8,
    "axes.labelsize": 7.5,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7,
    "legend.title_fontsize": 7.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.linewidth": 0.6,
    "xtick.major.width": 0.6,
    "ytick.major.width": 0.6,
    "lines.linewidth": 1.0,
    "svg.hashsalt": "bloomqg",  # stable SVG ids: same data, same file
    "svg.fonttype": "path",  # text as outlines: the SVG needs no fonts
}


def level_abbreviation(level: str) -> str:
    """R, U, Ap, An, E, C; ``Unc`` for Uncategorized."""
    return LEVEL_ABBREVIATION.get(level, "Unc" if level == UNCATEGORIZED else level)


def new_figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def frameless(ax: Axes) -> None:
    """No ticks and no spines: a heat map's cells are their own frame."""
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)


def heatmap_cells(ax: Axes, values: np.ndarray, cmap: Colormap, norm: Normalize) -> tuple[list[list[Rectangle]], ScalarMappable]:
    """A heat map drawn as one rectangle per cell (row 0 at the top, a NaN in the colour of 0).

    One artist per cell, unlike ``imshow``, so that each cell can carry its own link
    (:func:`bloomqg.reporting.figures.links.link_mark`) and the SVG holds vector cells. Returns
    the rectangles by row and column, and the mappable a colour bar is drawn from.
    """
    from matplotlib.cm import ScalarMappable
    from matplotlib.patches import Rectangle

    rows, columns = values.shape
    filled = np.nan_to_num(values, nan=0.0)
    cells = [
        [ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, facecolor=cmap(norm(filled[r, c])), edgecolor="none",
                                linewidth=0, antialiased=False))
         for c in range(columns)]
        for r in range(rows)
    ]
    ax.set_xlim(-0.5, columns - 0.5)
    ax.set_ylim(rows - 0.5, -0.5)
    return cells, ScalarMappable(norm=norm, cmap=cmap)


def no_data(ax: Axes, message: str) -> None:
    """Turn ``ax`` into an explicit "no data for this view" panel with the reason."""
    ax.set_axis_off()
    ax.text(0.5, 0.5, f"{EMPTY} No data for this view:\n{message}", ha="center", va="center",
            fontsize=7.5, color="#444444", wrap=True, transform=ax.transAxes)


def no_data_figure(height: float, message: str) -> Figure:
    """A one-column figure that is only a :func:`no_data` panel: a figure with nothing to plot."""
    fig = new_figure(COLUMN_WIDTH_IN, height)
    no_data(fig.subplots(), message)
    return fig


def strategies_in_order(values: pd.Series, strategy_labels: StrategyLabels | None = None) -> list[str]:
    """The strategies of ``values`` in defined order (CoT, FGP, … by default), then others as first seen."""
    return strategy_order(values, strategy_labels)


def strategy_colors(strategy_labels: StrategyLabels | None = None, present: Sequence[str] = ()) -> dict[str, str]:
    """A stable colour per strategy, whichever strategies a figure shows: CoT and FGP keep
    :data:`STRATEGY_COLOR`; every other strategy takes the next colour of :data:`SERIES_COLORS`
    not already taken, by its position in the defined order (``strategy_labels``' order, else the
    built-ins'), then ``present`` strategies no mapping names, as given (cycling past eight)."""
    defined = list(strategy_labels) if strategy_labels else list(STRATEGY_LABEL)
    order = defined + [s for s in dict.fromkeys(present) if s not in defined]
    free = [c for c in SERIES_COLORS if c not in STRATEGY_COLOR.values()]
    colors = dict(STRATEGY_COLOR)
    others = [s for s in order if s not in STRATEGY_COLOR]
    colors.update({s: free[k % len(free)] for k, s in enumerate(others)})
    return colors
