"""Figure 6: original vs classified level (each strategy whose answers classify the original, as
CoT's do) and original vs judged level (every strategy) as heat maps, per model."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pandas as pd

from bloomqg.inputs.bloom import BLOOM_LEVELS
from bloomqg.metrics.transitions import placed_count, transition_counts
from bloomqg.reporting.display import StrategyLabels, ordered_unique, strategy_label
from bloomqg.reporting.explorer.links import cell_filters, explorer_level, items_fragment
from bloomqg.reporting.figures.links import ItemLink, link_mark
from bloomqg.reporting.figures.style import (
    COLUMN_WIDTH_IN,
    PAGE_WIDTH_IN,
    frameless,
    heatmap_cells,
    level_abbreviation,
    new_figure,
    no_data,
    no_data_figure,
    strategies_in_order,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


#: Per view: the explorer column of the other level, and the metric whose denominator is the
#: view's rows (CatCons: useful questions with a verdict; classification accuracy: originals
#: with a level, under CoT).
_VIEW_LINK: dict[str, tuple[str, str]] = {
    "judged": ("judged_level", "catcons"),
    "classified": ("identified_level", "classification_acc"),
}


def count_matrix(counts: pd.DataFrame) -> pd.DataFrame:
    """Counts over the six levels (original rows × other columns) from transition counts (unplaced pairs dropped)."""
    return (
        counts[counts["original_level"].isin(BLOOM_LEVELS) & counts["other_level"].isin(BLOOM_LEVELS)]
        .pivot_table(index="original_level", columns="other_level", values="count", aggfunc="sum", fill_value=0)
        .reindex(index=list(BLOOM_LEVELS), columns=list(BLOOM_LEVELS), fill_value=0)
    )


def confusion_matrix(counts: pd.DataFrame) -> pd.DataFrame:
    """Row-normalised percentages over the six levels from transition counts (unplaced pairs dropped)."""
    matrix = count_matrix(counts)
    totals = matrix.sum(axis=1)
    return matrix.div(totals.where(totals > 0), axis=0) * 100


def classifying_strategies(votes: pd.DataFrame, strategy_labels: StrategyLabels | None = None) -> list[str]:
    """The strategies whose answers classify the original's level (``identified_bloom_level``
    non-empty somewhere: CoT's ``answer_fields``), in defined order."""
    found = votes.loc[votes["identified_bloom_level"].notna(), "strategy"]
    return strategies_in_order(found, strategy_labels)


def plot_confusion(votes: pd.DataFrame, strategy_labels: StrategyLabels | None = None) -> Figure:
    """Figure 6: per model, heat maps of original vs classified level (each classifying
    strategy; one empty panel saying why when none classifies) and original vs judged level.

    Pooled over datasets; each row is normalised to 100% of that original level's items.
    """
    if votes.empty:
        return no_data_figure(1.6, "no votes were given")
    models = ordered_unique(votes["model"])
    strategies = strategies_in_order(votes["strategy"], strategy_labels)
    classifying = classifying_strategies(votes, strategy_labels)
    views: list[tuple[str, str | None]] = [("classified", s) for s in classifying] or [("classified", None)]
    views += [("judged", s) for s in strategies]
    width = min(PAGE_WIDTH_IN, 0.5 + 2.1 * len(views))
    fig = new_figure(max(width, COLUMN_WIDTH_IN), 1.1 + 1.95 * len(models))
    axes = fig.subplots(len(models), len(views), squeeze=False)
    image = None
    for i, model in enumerate(models):
        for j, (kind, strategy) in enumerate(views):
            ax = axes[i][j]
            subset = votes[(votes["model"] == model) & (votes["strategy"] == strategy)]
            name = "none" if strategy is None else strategy_label(strategy, strategy_labels)
            label = f"Classified ({name})" if kind == "classified" else f"Judged ({name})"
            counts = transition_counts(subset, kind=kind) if len(subset) else pd.DataFrame(
                columns=["original_level", "other_level", "count"])
            matrix = confusion_matrix(counts) if not counts.empty else None
            if matrix is None or matrix.isna().all().all():
                ax.set_title(label, fontsize=7.5)
                no_data(ax, ("no strategy run asks the model to classify the original" if strategy is None
                             else f"{model} classified no original under {name}") if kind == "classified"
                        else f"no judged levels for {model} under {name}")
            else:
                image = _heatmap(ax, matrix, count_matrix(counts), (model, kind, strategy, label), strategy_labels)
                # a classified panel counts the originals it could place of all the model was given
                of_all = (f" of {int(subset['original_bloom_level'].isin(BLOOM_LEVELS).sum())} originals"
                          if kind == "classified" else "")
                ax.set_title(f"{label}, n = {placed_count(counts)}{of_all}", fontsize=7.5)
                ax.set_xlabel("Classified level" if kind == "classified" else "Judged level")
                ax.set_ylabel("Original level" if j == 0 else "")
            if j == 0:
                ax.annotate(model, xy=(0, 0.5), xycoords="axes fraction", xytext=(-30, 0),
                            textcoords="offset points", rotation=90, ha="right", va="center",
                            fontsize=7.5, fontweight="bold")
    if image is not None:
        colorbar = fig.colorbar(image, ax=axes, shrink=0.6, location="bottom", aspect=40)
        colorbar.set_label("% of the original level's items (each row sums to 100)")
    return fig


def _heatmap(ax: Axes, matrix: pd.DataFrame, counts: pd.DataFrame, view: tuple[str, str, str, str],
             strategy_labels: StrategyLabels | None = None):
    """Draw the percentages; each cell with questions opens them in the explorer."""
    from matplotlib import colormaps
    from matplotlib.colors import Normalize

    cmap = colormaps["cividis"]
    values = matrix.to_numpy(dtype=float)
    cells, image = heatmap_cells(ax, values, cmap, Normalize(0, 100))
    ax.set_aspect("equal")
    labels = [level_abbreviation(level) for level in matrix.columns]
    ax.set_xticks(range(len(labels)), labels)
    ax.set_yticks(range(len(matrix.index)), [level_abbreviation(level) for level in matrix.index])
    frameless(ax)
    for r in range(values.shape[0]):
        for c in range(values.shape[1]):
            value = values[r, c]
            if math.isnan(value):
                ax.text(c, r, "·", ha="center", va="center", fontsize=7, color="#777777")
                continue
            red, green, blue, _ = cmap(value / 100)
            luminance = 0.299 * red + 0.587 * green + 0.114 * blue
            text = ax.text(c, r, f"{value:.0f}", ha="center", va="center", fontsize=7,
                           color="black" if luminance > 0.5 else "white")
            n = int(counts.iat[r, c])
            if n:
                original, other = str(matrix.index[r]), str(matrix.columns[c])
                link_mark(cells[r][c], _cell_link(view, original, other, n, strategy_labels), also=[text])
    return image


def _cell_link(view: tuple[str, str, str, str], original: str, other: str, n: int,
               strategy_labels: StrategyLabels | None = None) -> ItemLink:
    """The questions of one cell of a model × view: pooled over datasets, as the panel is."""
    model, kind, strategy, label = view
    column, metric = _VIEW_LINK[kind]
    filters = [*cell_filters(model, None, strategy, strategy_labels), ("target_level", explorer_level(original, "target_level")),
               (column, explorer_level(other, column))]
    words = f"{model}, {label}, all datasets: original {original} → {kind} {other}"
    return ItemLink(items_fragment(filters, metric), words, n)
