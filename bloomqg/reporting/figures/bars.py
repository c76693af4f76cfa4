"""Figure 3 (mean shift scores per strategy) and Figure 4 (knowledge-identification accuracy)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from bloomqg.metrics.cognitive import SHIFT_TYPES
from bloomqg.metrics.registry import table_label
from bloomqg.reporting.display import (
    StrategyLabels,
    is_missing,
    metric_index,
    ordered_cells,
    ordered_unique,
    strategy_label,
)
from bloomqg.reporting.figures.links import link_mark, metric_item_link
from bloomqg.reporting.figures.style import (
    COLUMN_WIDTH_IN,
    PAGE_WIDTH_IN,
    SERIES_COLORS,
    SHIFT_COLOR,
    new_figure,
    no_data,
    no_data_figure,
    strategies_in_order,
    strategy_colors,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure


_SHIFT_MEAN_METRICS: tuple[str, ...] = tuple(f"{shift}_mean" for shift in SHIFT_TYPES)
#: Hatches telling datasets apart where colour tells strategies apart (Figure 4).
_HATCHES: tuple[str | None, ...] = (None, "////", "....", "xxxx", "\\\\\\\\")


def plot_shift_scores(all_metrics: pd.DataFrame, strategy_labels: StrategyLabels | None = None) -> Figure:
    """Figure 3: mean shift score per model; rows strategies (defined order), columns datasets, bars = shift
    type, each with its n (the questions that shift type counts)."""
    frame = all_metrics[all_metrics["metric"].isin(_SHIFT_MEAN_METRICS)]
    if frame.empty:
        return no_data_figure(2.0, "no mean shift scores (cogreg_mean, cogdrift_mean, cogleap_mean)")
    datasets = ordered_unique(frame["dataset"])
    strategies = strategies_in_order(frame["strategy"], strategy_labels)
    models = ordered_unique(frame["model"])
    lookup = metric_index(frame)
    width = COLUMN_WIDTH_IN if len(datasets) == 1 else PAGE_WIDTH_IN
    fig = new_figure(width, 0.9 + 1.7 * len(strategies))
    axes = fig.subplots(len(strategies), len(datasets), squeeze=False, sharey=True)
    bar = 0.8 / len(_SHIFT_MEAN_METRICS)
    x = np.arange(len(models))
    for i, strategy in enumerate(strategies):
        for j, dataset in enumerate(datasets):
            ax = axes[i][j]
            title = f"{dataset}, {strategy_label(strategy, strategy_labels)}"
            rows = [lookup.get((m, dataset, strategy, k)) for m in models for k in _SHIFT_MEAN_METRICS]
            if all(row is None for row in rows):
                no_data(ax, f"{title} was not run")
                continue
            if not any(row is not None and not is_missing(row["value"]) for row in rows):
                ax.set_title(title)
                no_data(ax, "no shift score: no useful question\nwith both levels known and a mismatch")
                continue
            for k, metric in enumerate(_SHIFT_MEAN_METRICS):
                values, lower, upper = [], [], []
                for model in models:
                    row = lookup.get((model, dataset, strategy, metric))
                    value = row["value"] if row is not None and not is_missing(row["value"]) else np.nan
                    values.append(value)
                    low = row["ci_low"] if row is not None and not is_missing(row["ci_low"]) else value
                    high = row["ci_high"] if row is not None and not is_missing(row["ci_high"]) else value
                    lower.append(max(value - low, 0) if not is_missing(value) else 0)
                    upper.append(max(high - value, 0) if not is_missing(value) else 0)
                bars = ax.bar(x + (k - 1) * bar, values, bar, color=SHIFT_COLOR[metric.removesuffix("_mean")],
                              label=table_label(metric.removesuffix("_mean")), yerr=[lower, upper],
                              error_kw={"elinewidth": 0.6, "capsize": 1.2, "ecolor": "#333333"})
                _link_bars(bars.patches, [lookup.get((m, dataset, strategy, metric)) for m in models],
                           f"mean {table_label(metric.removesuffix('_mean'))} shift", strategy_labels)
                for model, value, up, at in zip(models, values, upper, x + (k - 1) * bar):  # each mean with its n
                    row = lookup.get((model, dataset, strategy, metric))
                    if row is not None and not is_missing(row["n"]) and not np.isnan(value):
                        # clear of the whisker's cap, on a white ground (a neighbour's whisker can run past it)
                        ax.annotate(f"n={int(row['n'])}", xy=(at, value + up), xytext=(0, 4), textcoords="offset points",
                                    ha="center", va="bottom", rotation=90, fontsize=7, color="#333333",
                                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.4}, zorder=3)
            ax.margins(y=0.35)  # room above the tallest bar for its n
            ax.set_yticks(range(6))  # a shift is at most 5 levels: no tick past what can be
            ax.set_title(title)
            pad = max(0.0, (3 - len(models)) / 2)  # keep bars slim when there are few models
            ax.set_xlim(-0.5 - pad, len(models) - 0.5 + pad)
            ax.set_xticks(x, models, rotation=35, ha="right", rotation_mode="anchor")
            if j == 0:
                ax.set_ylabel("Mean shift score (|Δ| levels)")
            ax.grid(axis="y", linewidth=0.3, alpha=0.5)
            ax.set_axisbelow(True)
    handles = [_bar_handle(SHIFT_COLOR[m.removesuffix("_mean")], table_label(m.removesuffix("_mean")))
               for m in _SHIFT_MEAN_METRICS]
    fig.legend(handles=handles, loc="outside upper center", ncol=3, frameon=False)
    return fig


def _link_bars(patches, rows: list[pd.Series | None], what: str, strategy_labels: StrategyLabels | None = None) -> None:
    """Each bar drawn from a metrics row opens that value's ``n`` questions in the explorer."""
    for patch, row in zip(patches, rows):
        link = metric_item_link(row, what, strategy_labels)
        if link is not None:
            link_mark(patch, link)


def _bar_handle(color: str, label: str):
    from matplotlib.patches import Patch

    return Patch(facecolor=color, label=label)


def plot_knowledge_id(all_metrics: pd.DataFrame, strategy_labels: StrategyLabels | None = None) -> Figure:
    """Figure 4: knowledge-identification accuracy per model (horizontal bars, 95% CI), one series
    per dataset × strategy whose answers identify the units (CoT's ``answer_fields``).

    Under one strategy the series are coloured by dataset; under several, by strategy (its stable
    colour, :func:`~bloomqg.reporting.figures.style.strategy_colors`), datasets then hatched.
    """
    frame = all_metrics[(all_metrics["metric"] == "knowledge_id_acc") & all_metrics["value"].notna()]
    if frame.empty:
        return no_data_figure(1.8, "no knowledge-identification accuracy\n(no strategy run asks the model to identify the units)")
    models = ordered_unique(frame["model"])
    series = [(d, s) for d, s in ordered_cells(frame, strategy_labels=strategy_labels)]
    strategies = ordered_unique(s for _, s in series)
    datasets = ordered_unique(d for d, _ in series)
    colors = strategy_colors(strategy_labels, strategies)
    fig = new_figure(COLUMN_WIDTH_IN, 1.3 + 0.22 * len(models) * len(series) + 0.15 * len(models))
    ax = fig.subplots()
    lookup = metric_index(frame)
    height = 0.8 / len(series)
    y = np.arange(len(models))
    for k, (dataset, strategy) in enumerate(series):
        values, lower, upper = [], [], []
        for model in models:
            row = lookup.get((model, dataset, strategy, "knowledge_id_acc"))
            value = float(row["value"]) if row is not None else np.nan
            values.append(value)
            # a percentile CI need not hold the estimate (few resamples): no negative whisker
            lower.append(max(value - row["ci_low"], 0) if row is not None and not is_missing(row["ci_low"]) else 0)
            upper.append(max(row["ci_high"] - value, 0) if row is not None and not is_missing(row["ci_high"]) else 0)
        offset = (k - (len(series) - 1) / 2) * height
        if len(strategies) == 1:
            label = dataset
            color, hatch = SERIES_COLORS[datasets.index(dataset) % len(SERIES_COLORS)], None
        else:
            label = f"{dataset}, {strategy_label(strategy, strategy_labels)}"
            color, hatch = colors[strategy], _HATCHES[datasets.index(dataset) % len(_HATCHES)]
        hatched = {"hatch": hatch, "edgecolor": "white", "linewidth": 0.3} if hatch else {}
        bars = ax.barh(y + offset, values, height, xerr=[lower, upper], color=color, **hatched,
                       # whiskers in the series' colour: a 0% bar has no width, and its whisker is all that shows
                       label=label, error_kw={"elinewidth": 0.9, "capsize": 1.5, "ecolor": color})
        _link_bars(bars.patches, [lookup.get((m, dataset, strategy, "knowledge_id_acc")) for m in models],
                   "knowledge-identification accuracy", strategy_labels)
        for model, value, up, at in zip(models, values, upper, y + offset):  # each rate with its n
            row = lookup.get((model, dataset, strategy, "knowledge_id_acc"))
            if row is not None and not is_missing(row["n"]) and not np.isnan(value):
                # a 0% bar has no width: its value is written out, so it is not taken for no data
                shown = f"0% (n={int(row['n'])})" if value == 0 else f"n={int(row['n'])}"
                ax.text(value + up + 1.0, at, shown, va="center", ha="left", fontsize=7, color="#333333")
    ax.set_yticks(y, models)
    pad = max(0.0, (3 - len(models)) / 4)  # keep bars slim when there are few models
    ax.set_ylim(len(models) - 0.5 + pad, -0.5 - pad)
    ax.set_xlim(0, 115)  # room for the n beside a bar near 100
    ax.set_xticks(range(0, 101, 20))
    ax.set_xlabel("Knowledge-identification accuracy (%)")
    ax.grid(axis="x", linewidth=0.3, alpha=0.5)
    ax.set_axisbelow(True)
    fig.legend(*ax.get_legend_handles_labels(), title="Dataset" if len(strategies) == 1 else "Dataset, strategy",
               loc="outside lower center",
               ncol=min(len(series), 3), frameon=False)
    return fig
