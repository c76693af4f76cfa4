"""Figure 5: classification accuracy vs CatCons and knowledge-ID accuracy vs KnowCov across models."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from bloomqg.metrics.correlations import FIGURE5_PAIRS
from bloomqg.metrics.registry import metric_spec, table_label
from bloomqg.reporting.display import StrategyLabels, is_missing, strategy_label, strategy_order
from bloomqg.reporting.figures.style import PAGE_WIDTH_IN, SERIES_COLORS, new_figure, no_data

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


MIN_POINTS_FOR_CORRELATION = 3


def identifying_strategies(all_metrics: pd.DataFrame, metric: str, strategy_labels: StrategyLabels | None = None) -> list[str]:
    """The strategies with a value of ``metric`` (an auxiliary accuracy exists only where the
    answers identify level or units, as CoT's do), in defined order."""
    found = all_metrics.loc[(all_metrics["metric"] == metric) & all_metrics["value"].notna(), "strategy"]
    return strategy_order(found, strategy_labels)


def plot_correlations(
    all_metrics: pd.DataFrame, correlations: pd.DataFrame | None, strategy_labels: StrategyLabels | None = None
) -> Figure:
    """Figure 5: (a) classification accuracy vs CatCons, (b) knowledge-ID accuracy vs KnowCov,
    under each strategy whose answers identify level and units (CoT's ``answer_fields``).

    One point per model and dataset (and strategy, when several identify); a least-squares line
    and Pearson's r per series. r comes from ``correlations`` (the metrics stage's Pearson row)
    when it has the pair; otherwise it is computed here from the points, and the legend says so.
    """
    from matplotlib.lines import Line2D

    fig = new_figure(PAGE_WIDTH_IN, 3.7)  # the legends sit below the axes
    axes = fig.subplots(1, 2)
    labels: dict = {ax: [] for ax in axes}
    for ax, (x_metric, y_metric), letter in zip(axes, FIGURE5_PAIRS, "ab"):
        strategies = identifying_strategies(all_metrics, x_metric, strategy_labels)
        names = ", ".join(strategy_label(s, strategy_labels) for s in strategies)
        # the strategies on a line of their own: a long list must not cut the panel's title
        title = f"({letter}) {table_label(x_metric)} vs {table_label(y_metric)}" + (f"\n({names})" if names else "")
        subset_metrics = all_metrics[all_metrics["strategy"].isin(strategies)]
        wide = subset_metrics.pivot_table(index=["dataset", "strategy", "model"], columns="metric", values="value",
                                          aggfunc="first")
        if not strategies or x_metric not in wide or y_metric not in wide:
            ax.set_title(title)
            no_data(ax, f"no {x_metric} / {y_metric} metrics: no strategy run asks the model\n"
                        "to identify the original's level and units")
            continue
        points = wide[[x_metric, y_metric]].dropna()
        n_models = points.index.get_level_values("model").nunique()
        if n_models < MIN_POINTS_FOR_CORRELATION:
            ax.set_title(title)
            no_data(ax, f"a correlation across models needs ≥ {MIN_POINTS_FOR_CORRELATION} models\n"
                        f"(this run has {n_models})")
            continue
        handles = []
        series = list(dict.fromkeys((d, s) for d, s, _ in points.index))
        for k, (dataset, strategy) in enumerate(series):
            color = SERIES_COLORS[k % len(SERIES_COLORS)]
            subset = points.loc[(dataset, strategy)]
            name = dataset if len(strategies) == 1 else f"{dataset}, {strategy_label(strategy, strategy_labels)}"
            label = f"{name} (n = {len(subset)} models)"
            if len(subset) >= MIN_POINTS_FOR_CORRELATION:
                r, p, source = _correlation(correlations, dataset, x_metric, y_metric, subset, strategy)
                label = (f"{name}: r = {r:+.2f}, p = {p:.2g}, n = {len(subset)} models"
                         + ("" if source else " (computed here)"))
                if subset[x_metric].nunique() > 1:
                    slope, intercept = np.polyfit(subset[x_metric], subset[y_metric], 1)
                    xs = np.linspace(subset[x_metric].min(), subset[x_metric].max(), 20)
                    ax.plot(xs, slope * xs + intercept, color=color, linewidth=0.9, linestyle="--")
            ax.scatter(subset[x_metric], subset[y_metric], s=18, color=color, zorder=3,
                       edgecolor="white", linewidth=0.4)
            # The key is the series' colour on its fitted line's dash, not a dot a reader could
            # take for one more model.
            handles.append(Line2D([], [], color=color, linestyle="--", linewidth=1.4, label=label))
            labels[ax].extend((row[x_metric], row[y_metric], str(model)) for model, row in subset.iterrows())
        ax.set_title(title)
        ax.set_xlabel(f"{table_label(x_metric)} ({metric_spec(x_metric).unit})")
        ax.set_ylabel(f"{table_label(y_metric)} ({metric_spec(y_metric).unit})")
        ax.margins(x=0.25, y=0.2)
        # below the axes, outside the data area, where it can cover no point
        ax.legend(handles=handles, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.2), fontsize=7,
                  handlelength=2.2)
    for ax, points in labels.items():
        place_point_labels(fig, ax, points)
    return fig


# Label offsets (points) around a marker, tried in order: right, left, above, below, diagonals;
# then the same directions further out, for crowded plots.
_LABEL_DIRECTIONS: tuple[tuple[float, float, str, str], ...] = (
    (1, 0, "left", "center"), (-1, 0, "right", "center"), (0, 1, "center", "bottom"),
    (0, -1, "center", "top"), (1, 1, "left", "bottom"), (-1, 1, "right", "bottom"),
    (1, -1, "left", "top"), (-1, -1, "right", "top"),
)
_LABEL_OFFSETS: tuple[tuple[float, float, str, str], ...] = tuple(
    (dx * radius, dy * radius, ha, va) for radius in (4, 12, 22) for dx, dy, ha, va in _LABEL_DIRECTIONS
)


def place_point_labels(fig: Figure, ax: Axes, points: Sequence[tuple[float, float, str]]) -> None:
    """Label scatter points without overlaps: greedy choice among offsets around each marker.

    Each label takes the first candidate offset whose box overlaps neither a marker nor an
    earlier label and stays inside the axes; when none is free, the candidate with the least
    overlap is used. Labels away from their marker get a thin leader line.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if not points:
        return
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    fig.draw_without_rendering()  # settle the constrained layout before measuring
    renderer = canvas.get_renderer()
    axes_box = ax.get_window_extent(renderer)
    taken = []
    for x, y, _ in points:
        cx, cy = ax.transData.transform((x, y))
        taken.append(_box(cx - 3, cy - 3, cx + 3, cy + 3))
    for x, y, text in points:
        best = None  # (overlap area, candidate)
        for dx, dy, ha, va in _LABEL_OFFSETS:
            probe = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va,
                                fontsize=7, annotation_clip=False)
            box = probe.get_window_extent(renderer)
            probe.remove()
            outside = not (axes_box.x0 <= box.x0 and box.x1 <= axes_box.x1
                           and axes_box.y0 <= box.y0 and box.y1 <= axes_box.y1)
            overlap = sum(_overlap_area(box, other) for other in taken) + (1e6 if outside else 0.0)
            if best is None or overlap < best[0]:
                best = (overlap, (dx, dy, ha, va), box)
            if overlap == 0:
                break
        _, (dx, dy, ha, va), box = best
        far = abs(dx) > 4 or abs(dy) > 4
        label = ax.annotate(
            text, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, fontsize=7,
            color="#333333", annotation_clip=False,
            arrowprops={"arrowstyle": "-", "linewidth": 0.4, "color": "#888888", "shrinkA": 0, "shrinkB": 3}
            if far else None,
        )
        label.set_in_layout(False)
        taken.append(box)


def _overlap_area(a, b) -> float:
    width = min(a.x1, b.x1) - max(a.x0, b.x0)
    height = min(a.y1, b.y1) - max(a.y0, b.y0)
    return width * height if width > 0 and height > 0 else 0.0


def _box(x0: float, y0: float, x1: float, y1: float):
    from matplotlib.transforms import Bbox

    return Bbox([[x0, y0], [x1, y1]])


def _correlation(correlations, dataset, x_metric, y_metric, subset, strategy="cot") -> tuple[float, float, bool]:
    """(r, p, from_frame): the metrics stage's estimate when present, else Pearson's here."""
    if correlations is not None and not correlations.empty:
        match = correlations[
            (correlations["dataset"] == dataset) & (correlations["strategy"] == strategy)
            & (correlations["x_metric"] == x_metric) & (correlations["y_metric"] == y_metric)
        ]
        if "method" in match:  # the fitted line is least squares, so Pearson's r goes with it
            match = match[match["method"] == "pearson"]
        if not match.empty and not is_missing(match.iloc[0]["r"]):
            return float(match.iloc[0]["r"]), float(match.iloc[0]["p_value"]), True
    if subset[x_metric].nunique() < 2 or subset[y_metric].nunique() < 2:
        return float("nan"), float("nan"), False
    # here, not at the top: a figure of the metrics stage's r (the usual case) starts no scipy.stats
    from scipy import stats

    result = stats.pearsonr(subset[x_metric], subset[y_metric])
    return float(result.statistic), float(result.pvalue), False
