"""Figure 2: alluvial bands from the original to the judged Bloom level, one panel per model × cell."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pandas as pd

from bloomqg.inputs.bloom import BLOOM_LEVELS, UNCATEGORIZED
from bloomqg.metrics.transitions import transition_counts
from bloomqg.reporting.display import StrategyLabels, ordered_cells, ordered_unique, strategy_label
from bloomqg.reporting.explorer.links import cell_filters, explorer_level, items_fragment
from bloomqg.reporting.figures.links import ItemLink, link_mark
from bloomqg.reporting.figures.style import (
    COLUMN_WIDTH_IN,
    GREY,
    LEVEL_COLOR,
    PAGE_WIDTH_IN,
    level_abbreviation,
    new_figure,
    no_data,
    no_data_figure,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


# Vertical order of alluvial nodes, bottom to top: an upward band is a move to a higher level.
_NODE_ORDER: tuple[str, ...] = (UNCATEGORIZED, *BLOOM_LEVELS)


def draw_alluvial(
    ax: Axes, counts: pd.DataFrame, cell: tuple[str, str, str] | None = None, strategy_labels: StrategyLabels | None = None
) -> None:
    """Bands from original (left) to judged (right) level; band height = count, colour = original.

    ``counts`` has columns original_level, other_level, count (as
    :func:`bloomqg.metrics.transition_counts` returns). Levels run bottom (Remember) to top
    (Create), each side stacked by its own counts, so a band's slope says nothing: its two ends'
    levels do.
    With ``cell`` (model, dataset, strategy), each band and node opens its questions in the
    item explorer.
    """
    from matplotlib.patches import PathPatch, Rectangle
    from matplotlib.path import Path as MplPath

    counts = counts[counts["count"] > 0]
    total = int(counts["count"].sum())
    left_totals = counts.groupby("original_level")["count"].sum()
    right_totals = counts.groupby("other_level")["count"].sum()
    gap = 0.025
    node_width = 0.07
    rank = {level: i for i, level in enumerate(_NODE_ORDER)}

    # One scale for both sides, so a band has the same height at its two ends.
    n_nodes = max(len(left_totals), len(right_totals))
    scale = (1.0 - gap * max(n_nodes - 1, 0)) / total
    left_bottom = _stack(left_totals, scale, gap)
    right_bottom = _stack(right_totals, scale, gap)
    left_cursor = dict(left_bottom)
    right_cursor = dict(right_bottom)
    x0, x1 = node_width, 1.0 - node_width
    # Stack bands inside a node by the rank of the other end, so bands cross as little as possible.
    ordered = counts.assign(
        _o=counts["original_level"].map(rank), _n=counts["other_level"].map(rank)
    ).sort_values(["_o", "_n"])
    right_order = ordered.sort_values(["_n", "_o"])
    right_slot: dict[tuple[str, str], float] = {}
    for row in right_order.itertuples(index=False):
        right_slot[(row.original_level, row.other_level)] = right_cursor[row.other_level]
        right_cursor[row.other_level] += row.count * scale
    for row in ordered.itertuples(index=False):
        height = row.count * scale
        yl = left_cursor[row.original_level]
        left_cursor[row.original_level] += height
        yr = right_slot[(row.original_level, row.other_level)]
        xm = (x0 + x1) / 2
        vertices = [
            (x0, yl), (xm, yl), (xm, yr), (x1, yr),
            (x1, yr + height), (xm, yr + height), (xm, yl + height), (x0, yl + height),
            (x0, yl),
        ]
        codes = [MplPath.MOVETO, MplPath.CURVE4, MplPath.CURVE4, MplPath.CURVE4,
                 MplPath.LINETO, MplPath.CURVE4, MplPath.CURVE4, MplPath.CURVE4, MplPath.CLOSEPOLY]
        band = ax.add_patch(PathPatch(MplPath(vertices, codes), facecolor=LEVEL_COLOR.get(row.original_level, GREY),
                                      edgecolor="none", alpha=0.55))
        if cell is not None:
            link_mark(band, _transition_link(cell, int(row.count), row.original_level, row.other_level, strategy_labels))
    for bottoms, totals, x, label_x, align in (
        (left_bottom, left_totals, 0.0, -0.03, "right"),
        (right_bottom, right_totals, x1, 1.03, "left"),
    ):
        centres = []
        for level, bottom in bottoms.items():
            height = totals[level] * scale
            node = ax.add_patch(Rectangle((x, bottom), node_width, height, facecolor=LEVEL_COLOR.get(level, GREY),
                                          edgecolor="white", linewidth=0.4))
            if cell is not None:
                ends = (level, None) if bottoms is left_bottom else (None, level)
                link_mark(node, _transition_link(cell, int(totals[level]), *ends, strategy_labels))
            centres.append(bottom + height / 2)
        for level, y in zip(bottoms, spread_labels(centres, min_gap=LABEL_GAP)):
            ax.text(label_x, y, level_abbreviation(level), ha=align, va="center", fontsize=7)
    ax.set_xlim(-0.28, 1.28)
    ax.set_ylim(-0.02, 1.02)
    ax.set_axis_off()


def _transition_link(cell: tuple[str, str, str], n: int, original: str | None, judged: str | None,
                     strategy_labels: StrategyLabels | None = None) -> ItemLink:
    """A band (both levels) or a node (one level): its useful questions with a verdict, the
    questions the panel draws and CatCons counts."""
    model, dataset, strategy = cell
    filters = cell_filters(model, dataset, strategy, strategy_labels)
    if original is not None:
        filters.append(("target_level", explorer_level(original, "target_level")))
    if judged is not None:
        filters.append(("judged_level", explorer_level(judged, "judged_level")))
    what = " → ".join(part for part in (original and f"original {original}", judged and f"judged {judged}") if part)
    return ItemLink(items_fragment(filters, "catcons"), f"{model}, {dataset}, {strategy_label(strategy, strategy_labels)}: {what}", n)


#: Smallest vertical distance between two node labels, in axes units (7 pt text in a ~1.4 in panel).
LABEL_GAP = 0.085


def spread_labels(positions: Sequence[float], min_gap: float, low: float = 0.0, high: float = 1.0) -> list[float]:
    """Move sorted label positions apart to at least ``min_gap``, staying within [low, high] if possible.

    Labels of thin nodes would otherwise print on top of each other; each label moves as little
    as the gap requires (a forward sweep pushes up, a backward sweep pulls down from the top).
    """
    spread = list(positions)
    for i in range(1, len(spread)):
        spread[i] = max(spread[i], spread[i - 1] + min_gap)
    if spread and spread[-1] > high:
        spread[-1] = high
        for i in range(len(spread) - 2, -1, -1):
            spread[i] = min(spread[i], spread[i + 1] - min_gap)
    if spread and spread[0] < low:  # too many labels for the room: keep order and even spacing
        step = (high - low) / max(len(spread) - 1, 1)
        spread = [low + i * step for i in range(len(spread))]
    return spread


def _stack(totals: pd.Series, scale: float, gap: float) -> dict[str, float]:
    bottom, positions = 0.0, {}
    for level in _NODE_ORDER:
        if totals.get(level, 0) > 0:
            positions[level] = bottom
            bottom += totals[level] * scale + gap
    return positions


def plot_transitions(votes: pd.DataFrame, strategy_labels: StrategyLabels | None = None) -> Figure:
    """Figure 2: one alluvial panel per model (rows) × dataset/strategy cell (columns)."""
    if votes.empty:
        return no_data_figure(1.6, "no votes were given")
    models = ordered_unique(votes["model"])
    cells = ordered_cells(votes, strategy_labels=strategy_labels)
    width = min(PAGE_WIDTH_IN, 0.4 + 1.45 * len(cells))
    fig = new_figure(max(width, COLUMN_WIDTH_IN), 0.7 + 1.55 * len(models))
    axes = fig.subplots(len(models), len(cells), squeeze=False)
    for i, model in enumerate(models):
        for j, (dataset, strategy) in enumerate(cells):
            ax = axes[i][j]
            subset = votes[(votes["model"] == model) & (votes["dataset"] == dataset) & (votes["strategy"] == strategy)]
            if i == 0:
                ax.set_title(f"{dataset}, {strategy_label(strategy, strategy_labels)}", fontsize=8)
            counts = transition_counts(subset, kind="judged") if len(subset) else pd.DataFrame(
                columns=["original_level", "other_level", "count"])
            if counts.empty or counts["count"].sum() == 0:
                no_data(ax, "no useful question\nwith a judged level" if len(subset) else f"{model} was not run on {dataset}, {strategy_label(strategy, strategy_labels)}")
            else:
                draw_alluvial(ax, counts, (model, dataset, strategy), strategy_labels)
                ax.text(0.5, -0.04, f"n = {int(counts['count'].sum())}", ha="center", va="top",
                        fontsize=7, transform=ax.transAxes)
            if j == 0:
                ax.text(-0.12, 0.5, model, rotation=90, ha="center", va="center", fontsize=7.5,
                        fontweight="bold", transform=ax.transAxes)
    _level_legend(fig, votes)
    return fig


def _level_legend(fig: Figure, votes: pd.DataFrame) -> None:
    from matplotlib.patches import Patch

    levels = list(BLOOM_LEVELS)
    if votes["original_bloom_level"].isna().any():
        levels.append(UNCATEGORIZED)
    handles = [Patch(facecolor=LEVEL_COLOR[level], alpha=0.8, label=f"{level_abbreviation(level)} {level}")
               for level in levels]
    narrow = fig.get_figwidth() < 5
    fig.legend(handles=handles, loc="outside lower center", ncol=3 if narrow else 4, frameon=False,
               title="Band colour = original level; left: original, right: judged;\n"
                     "read a band by the levels at its two ends (its slope follows the stacking)")
