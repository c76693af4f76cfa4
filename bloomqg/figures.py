"""The paper's figures (PNG at 200 dpi and SVG), drawn with matplotlib's object API (Agg).

:func:`write_figures` always writes every file of :data:`FIGURE_FILES` (the workflow declares
them as outputs); a view without data is drawn as an honest "no data for this view" panel saying
why, never skipped. Colours follow the Okabe–Ito colour-blind-safe palette; text is at least
7 pt so single-panel figures stay legible at a column width of about 3.5 in.

=====================  ==========================================================================
``fig2_transitions``   alluvial bands original → judged Bloom level, one panel per model × cell
``fig3_shift_scores``  mean shift score of CogReg / CogDrift / CogLeap per model, CoT vs FGP
``fig4_knowledge_id``  knowledge-identification accuracy (CoT) per model, with 95% CIs
``fig5_correlations``  classification acc. vs CatCons and knowledge-ID acc. vs KnowCov
``fig6_confusion``     original vs classified (CoT) and original vs judged level, per model
``reliability``        Krippendorff's α per criterion and cell, with CI and the gate line
``parse_failures``     generation and judge parse-failure rates
=====================  ==========================================================================

pyplot is never imported: figures are :class:`matplotlib.figure.Figure` objects saved directly,
so no global backend or state is touched.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from bloomqg.bloom import BLOOM_LEVELS, LEVEL_ABBREVIATION, UNCATEGORIZED
from bloomqg.tables import CRITERION_LABEL, METRIC_LABEL, ordered_unique, strategy_label

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

log = logging.getLogger(__name__)

#: Figure names; each is written as ``<stem>.png`` and ``<stem>.svg``.
FIGURE_STEMS: tuple[str, ...] = (
    "fig2_transitions",
    "fig3_shift_scores",
    "fig4_knowledge_id",
    "fig5_correlations",
    "fig6_confusion",
    "reliability",
    "parse_failures",
)
FIGURE_FILES: tuple[str, ...] = tuple(f"{stem}.{ext}" for stem in FIGURE_STEMS for ext in ("png", "svg"))

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

# Vertical order of alluvial nodes, bottom to top: an upward band is a move to a higher level.
_NODE_ORDER: tuple[str, ...] = (UNCATEGORIZED, *BLOOM_LEVELS)
_SHIFT_MEAN_METRICS: tuple[str, ...] = ("cogreg_mean", "cogdrift_mean", "cogleap_mean")


def level_abbreviation(level: str) -> str:
    """R, U, Ap, An, E, C; ``Unc`` for Uncategorized."""
    return LEVEL_ABBREVIATION.get(level, "Unc" if level == UNCATEGORIZED else level)


def _new_figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def no_data(ax: Axes, message: str) -> None:
    """Turn ``ax`` into an explicit "no data for this view" panel with the reason."""
    ax.set_axis_off()
    ax.text(0.5, 0.5, f"No data for this view:\n{message}", ha="center", va="center",
            fontsize=7.5, color="#444444", wrap=True, transform=ax.transAxes)


def _cells(frame: pd.DataFrame) -> list[tuple[str, str]]:
    """(dataset, strategy) pairs: datasets in order of appearance, CoT before FGP."""
    rank = {"cot": 0, "fgp": 1}
    cells = []
    for dataset in ordered_unique(frame["dataset"]):
        strategies = ordered_unique(frame.loc[frame["dataset"] == dataset, "strategy"])
        cells += [(dataset, s) for s in sorted(strategies, key=lambda s: (rank.get(s, 2), s))]
    return cells


def _metric_lookup(all_metrics: pd.DataFrame) -> dict[tuple[str, str, str, str], pd.Series]:
    return {(r["model"], r["dataset"], r["strategy"], r["metric"]): r for _, r in all_metrics.iterrows()}


def _finite(value: object) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value)) and value is not pd.NA


# --------------------------------------------------------------------------- Figure 2


def draw_alluvial(ax: Axes, counts: pd.DataFrame) -> None:
    """Bands from original (left) to judged (right) level; band height = count, colour = original.

    ``counts`` has columns original_level, other_level, count (as
    :func:`bloomqg.metrics.transition_counts` returns). Levels run bottom (Remember) to top
    (Create), so a rising band is a leap or upward drift and a falling band a regression.
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
        ax.add_patch(PathPatch(MplPath(vertices, codes), facecolor=LEVEL_COLOR.get(row.original_level, GREY),
                               edgecolor="none", alpha=0.55))
    for bottoms, totals, x, label_x, align in (
        (left_bottom, left_totals, 0.0, -0.03, "right"),
        (right_bottom, right_totals, x1, 1.03, "left"),
    ):
        centres = []
        for level, bottom in bottoms.items():
            height = totals[level] * scale
            ax.add_patch(Rectangle((x, bottom), node_width, height, facecolor=LEVEL_COLOR.get(level, GREY),
                                   edgecolor="white", linewidth=0.4))
            centres.append(bottom + height / 2)
        for level, y in zip(bottoms, spread_labels(centres, min_gap=LABEL_GAP)):
            ax.text(label_x, y, level_abbreviation(level), ha=align, va="center", fontsize=7)
    ax.set_xlim(-0.28, 1.28)
    ax.set_ylim(-0.02, 1.02)
    ax.set_axis_off()


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


def plot_transitions(votes: pd.DataFrame) -> Figure:
    """Figure 2: one alluvial panel per model (rows) × dataset/strategy cell (columns)."""
    from bloomqg.metrics import transition_counts

    if votes.empty:
        fig = _new_figure(COLUMN_WIDTH_IN, 1.6)
        no_data(fig.subplots(), "no votes were given")
        return fig
    models = ordered_unique(votes["model"])
    cells = _cells(votes)
    width = min(PAGE_WIDTH_IN, 0.4 + 1.45 * len(cells))
    fig = _new_figure(max(width, COLUMN_WIDTH_IN), 0.7 + 1.55 * len(models))
    axes = fig.subplots(len(models), len(cells), squeeze=False)
    for i, model in enumerate(models):
        for j, (dataset, strategy) in enumerate(cells):
            ax = axes[i][j]
            subset = votes[(votes["model"] == model) & (votes["dataset"] == dataset) & (votes["strategy"] == strategy)]
            if i == 0:
                ax.set_title(f"{dataset}, {strategy_label(strategy)}", fontsize=8)
            counts = transition_counts(subset, kind="judged") if len(subset) else pd.DataFrame(
                columns=["original_level", "other_level", "count"])
            if counts.empty or counts["count"].sum() == 0:
                no_data(ax, "no useful question\nwith a judged level" if len(subset) else "cell not run")
            else:
                draw_alluvial(ax, counts)
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
                     "a rising band is a move to a higher level (leap or upward drift)")


# --------------------------------------------------------------------------- Figure 3


def _strategies_in_order(values: pd.Series) -> list[str]:
    """CoT before FGP (the paper's order), then any other strategy as first seen."""
    present = ordered_unique(values)
    return [s for s in ("cot", "fgp") if s in present] + [s for s in present if s not in ("cot", "fgp")]


def plot_shift_scores(all_metrics: pd.DataFrame) -> Figure:
    """Figure 3: mean shift score per model; rows CoT / FGP, columns datasets, bars = shift type."""
    frame = all_metrics[all_metrics["metric"].isin(_SHIFT_MEAN_METRICS)]
    if frame.empty:
        fig = _new_figure(COLUMN_WIDTH_IN, 2.0)
        no_data(fig.subplots(), "no mean shift scores (cogreg_mean, cogdrift_mean, cogleap_mean)")
        return fig
    datasets = ordered_unique(frame["dataset"])
    strategies = _strategies_in_order(frame["strategy"])
    models = ordered_unique(frame["model"])
    lookup = _metric_lookup(frame)
    width = COLUMN_WIDTH_IN if len(datasets) == 1 else PAGE_WIDTH_IN
    fig = _new_figure(width, 0.9 + 1.7 * len(strategies))
    axes = fig.subplots(len(strategies), len(datasets), squeeze=False, sharey=True)
    bar = 0.8 / len(_SHIFT_MEAN_METRICS)
    x = np.arange(len(models))
    for i, strategy in enumerate(strategies):
        for j, dataset in enumerate(datasets):
            ax = axes[i][j]
            title = f"{dataset}, {strategy_label(strategy)}"
            rows = [lookup.get((m, dataset, strategy, k)) for m in models for k in _SHIFT_MEAN_METRICS]
            if all(row is None for row in rows):
                no_data(ax, f"{title} was not run")
                continue
            if not any(row is not None and _finite(row["value"]) for row in rows):
                ax.set_title(title)
                no_data(ax, "no shift score: no useful question\nwith both levels known and a mismatch")
                continue
            for k, metric in enumerate(_SHIFT_MEAN_METRICS):
                values, lower, upper = [], [], []
                for model in models:
                    row = lookup.get((model, dataset, strategy, metric))
                    value = row["value"] if row is not None and _finite(row["value"]) else np.nan
                    values.append(value)
                    low = row["ci_low"] if row is not None and _finite(row["ci_low"]) else value
                    high = row["ci_high"] if row is not None and _finite(row["ci_high"]) else value
                    lower.append(max(value - low, 0) if _finite(value) else 0)
                    upper.append(max(high - value, 0) if _finite(value) else 0)
                ax.bar(x + (k - 1) * bar, values, bar, color=SHIFT_COLOR[metric.removesuffix("_mean")],
                       label=METRIC_LABEL[metric.removesuffix("_mean")], yerr=[lower, upper],
                       error_kw={"elinewidth": 0.6, "capsize": 1.2, "ecolor": "#333333"})
            ax.set_title(title)
            pad = max(0.0, (3 - len(models)) / 2)  # keep bars slim when there are few models
            ax.set_xlim(-0.5 - pad, len(models) - 0.5 + pad)
            ax.set_xticks(x, models, rotation=35, ha="right", rotation_mode="anchor")
            if j == 0:
                ax.set_ylabel("Mean shift score (|Δ| levels)")
            ax.grid(axis="y", linewidth=0.3, alpha=0.5)
            ax.set_axisbelow(True)
    handles = [_bar_handle(SHIFT_COLOR[m.removesuffix("_mean")], METRIC_LABEL[m.removesuffix("_mean")])
               for m in _SHIFT_MEAN_METRICS]
    fig.legend(handles=handles, loc="outside upper center", ncol=3, frameon=False)
    return fig


def _bar_handle(color: str, label: str):
    from matplotlib.patches import Patch

    return Patch(facecolor=color, label=label)


# --------------------------------------------------------------------------- Figure 4


def plot_knowledge_id(all_metrics: pd.DataFrame) -> Figure:
    """Figure 4: knowledge-identification accuracy per model (horizontal bars, 95% CI), per dataset."""
    frame = all_metrics[(all_metrics["metric"] == "knowledge_id_acc") & all_metrics["value"].notna()]
    if frame.empty:
        fig = _new_figure(COLUMN_WIDTH_IN, 1.8)
        no_data(fig.subplots(), "no knowledge-identification accuracy\n(the task runs under CoT only)")
        return fig
    models = ordered_unique(frame["model"])
    series = [(d, s) for d, s in _cells(frame)]
    fig = _new_figure(COLUMN_WIDTH_IN, 1.3 + 0.22 * len(models) * len(series) + 0.15 * len(models))
    ax = fig.subplots()
    lookup = _metric_lookup(frame)
    height = 0.8 / len(series)
    y = np.arange(len(models))
    for k, (dataset, strategy) in enumerate(series):
        values, lower, upper = [], [], []
        for model in models:
            row = lookup.get((model, dataset, strategy, "knowledge_id_acc"))
            value = float(row["value"]) if row is not None else np.nan
            values.append(value)
            lower.append(value - row["ci_low"] if row is not None and _finite(row["ci_low"]) else 0)
            upper.append(row["ci_high"] - value if row is not None and _finite(row["ci_high"]) else 0)
        offset = (k - (len(series) - 1) / 2) * height
        label = dataset if strategy == "cot" else f"{dataset}, {strategy_label(strategy)}"
        ax.barh(y + offset, values, height, xerr=[lower, upper], color=SERIES_COLORS[k % len(SERIES_COLORS)],
                label=label, error_kw={"elinewidth": 0.6, "capsize": 1.2, "ecolor": "#333333"})
    ax.set_yticks(y, models)
    pad = max(0.0, (3 - len(models)) / 4)  # keep bars slim when there are few models
    ax.set_ylim(len(models) - 0.5 + pad, -0.5 - pad)
    ax.set_xlim(0, 100)
    ax.set_xlabel("Knowledge-identification accuracy (%)")
    ax.grid(axis="x", linewidth=0.3, alpha=0.5)
    ax.set_axisbelow(True)
    fig.legend(*ax.get_legend_handles_labels(), title="Dataset", loc="outside lower center",
               ncol=min(len(series), 3), frameon=False)
    return fig


# --------------------------------------------------------------------------- Figure 5

FIG5_PAIRS: tuple[tuple[str, str], ...] = (("classification_acc", "catcons"), ("knowledge_id_acc", "knowcov"))
MIN_POINTS_FOR_CORRELATION = 3


def plot_correlations(all_metrics: pd.DataFrame, correlations: pd.DataFrame | None) -> Figure:
    """Figure 5: (a) classification accuracy vs CatCons, (b) knowledge-ID accuracy vs KnowCov (CoT).

    One point per model and dataset; a least-squares line and Pearson's r per dataset. r comes
    from ``correlations`` (the metrics stage's Pearson row) when it has the pair; otherwise it is
    computed here from the points, and the legend says so.
    """
    from scipy import stats

    fig = _new_figure(PAGE_WIDTH_IN, 3.1)
    axes = fig.subplots(1, 2)
    labels: dict = {ax: [] for ax in axes}
    cot = all_metrics[all_metrics["strategy"] == "cot"]
    wide = cot.pivot_table(index=["dataset", "model"], columns="metric", values="value", aggfunc="first")
    for ax, (x_metric, y_metric), letter in zip(axes, FIG5_PAIRS, "ab"):
        title = f"({letter}) {METRIC_LABEL[x_metric]} vs {METRIC_LABEL[y_metric]} (CoT)"
        if x_metric not in wide or y_metric not in wide:
            ax.set_title(title)
            no_data(ax, f"no {x_metric} / {y_metric} metrics under CoT")
            continue
        points = wide[[x_metric, y_metric]].dropna()
        n_models = points.index.get_level_values("model").nunique()
        if n_models < MIN_POINTS_FOR_CORRELATION:
            ax.set_title(title)
            no_data(ax, f"a correlation across models needs ≥ {MIN_POINTS_FOR_CORRELATION} models\n"
                        f"(this run has {n_models})")
            continue
        for k, dataset in enumerate(ordered_unique(points.index.get_level_values("dataset"))):
            color = SERIES_COLORS[k % len(SERIES_COLORS)]
            subset = points.loc[dataset]
            label = dataset
            if len(subset) >= MIN_POINTS_FOR_CORRELATION:
                r, p, source = _correlation(correlations, dataset, x_metric, y_metric, subset, stats)
                label = f"{dataset}: r = {r:+.2f}, p = {p:.2g}" + ("" if source else " (computed here)")
                if subset[x_metric].nunique() > 1:
                    slope, intercept = np.polyfit(subset[x_metric], subset[y_metric], 1)
                    xs = np.linspace(subset[x_metric].min(), subset[x_metric].max(), 20)
                    ax.plot(xs, slope * xs + intercept, color=color, linewidth=0.9, linestyle="--")
            ax.scatter(subset[x_metric], subset[y_metric], s=18, color=color, label=label, zorder=3,
                       edgecolor="white", linewidth=0.4)
            labels[ax].extend((row[x_metric], row[y_metric], str(model)) for model, row in subset.iterrows())
        ax.set_title(title)
        ax.set_xlabel(f"{METRIC_LABEL[x_metric]} (%)")
        ax.set_ylabel(f"{METRIC_LABEL[y_metric]} (%)")
        ax.margins(x=0.25, y=0.2)
        ax.legend(frameon=True, framealpha=0.85, edgecolor="none", loc="best")
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


def _correlation(correlations, dataset, x_metric, y_metric, subset, stats) -> tuple[float, float, bool]:
    """(r, p, from_frame): the metrics stage's estimate when present, else Pearson's here."""
    if correlations is not None and not correlations.empty:
        match = correlations[
            (correlations["dataset"] == dataset) & (correlations["strategy"] == "cot")
            & (correlations["x_metric"] == x_metric) & (correlations["y_metric"] == y_metric)
        ]
        if "method" in match:  # the fitted line is least squares, so Pearson's r goes with it
            match = match[match["method"] == "pearson"]
        if not match.empty and _finite(match.iloc[0]["r"]):
            return float(match.iloc[0]["r"]), float(match.iloc[0]["p_value"]), True
    if subset[x_metric].nunique() < 2 or subset[y_metric].nunique() < 2:
        return float("nan"), float("nan"), False
    result = stats.pearsonr(subset[x_metric], subset[y_metric])
    return float(result.statistic), float(result.pvalue), False


# --------------------------------------------------------------------------- Figure 6


def confusion_matrix(counts: pd.DataFrame) -> pd.DataFrame:
    """Row-normalised percentages over the six levels from transition counts (unplaced pairs dropped)."""
    matrix = (
        counts[counts["original_level"].isin(BLOOM_LEVELS) & counts["other_level"].isin(BLOOM_LEVELS)]
        .pivot_table(index="original_level", columns="other_level", values="count", aggfunc="sum", fill_value=0)
        .reindex(index=list(BLOOM_LEVELS), columns=list(BLOOM_LEVELS), fill_value=0)
    )
    totals = matrix.sum(axis=1)
    return matrix.div(totals.where(totals > 0), axis=0) * 100


def plot_confusion(votes: pd.DataFrame) -> Figure:
    """Figure 6: per model, heat maps of original vs classified (CoT) and original vs judged level.

    Pooled over datasets; each row is normalised to 100% of that original level's items.
    """
    from bloomqg.metrics import transition_counts

    if votes.empty:
        fig = _new_figure(COLUMN_WIDTH_IN, 1.6)
        no_data(fig.subplots(), "no votes were given")
        return fig
    models = ordered_unique(votes["model"])
    strategies = _strategies_in_order(votes["strategy"])
    views = [("classified", "cot")] + [("judged", s) for s in strategies]
    width = min(PAGE_WIDTH_IN, 0.5 + 2.1 * len(views))
    fig = _new_figure(max(width, COLUMN_WIDTH_IN), 1.1 + 1.95 * len(models))
    axes = fig.subplots(len(models), len(views), squeeze=False)
    image = None
    for i, model in enumerate(models):
        for j, (kind, strategy) in enumerate(views):
            ax = axes[i][j]
            subset = votes[(votes["model"] == model) & (votes["strategy"] == strategy)]
            label = "Classified (CoT)" if kind == "classified" else f"Judged ({strategy_label(strategy)})"
            counts = transition_counts(subset, kind=kind) if len(subset) else pd.DataFrame(
                columns=["original_level", "other_level", "count"])
            matrix = confusion_matrix(counts) if not counts.empty else None
            if matrix is None or matrix.isna().all().all():
                ax.set_title(label, fontsize=7.5)
                no_data(ax, "no CoT classification" if kind == "classified" else "no judged levels")
            else:
                placed = counts["original_level"].isin(BLOOM_LEVELS) & counts["other_level"].isin(BLOOM_LEVELS)
                image = _heatmap(ax, matrix)
                ax.set_title(f"{label}, n = {int(counts.loc[placed, 'count'].sum())}", fontsize=7.5)
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


def _heatmap(ax: Axes, matrix: pd.DataFrame):
    from matplotlib import colormaps

    cmap = colormaps["cividis"]
    values = matrix.to_numpy(dtype=float)
    image = ax.imshow(np.nan_to_num(values, nan=0.0), cmap=cmap, vmin=0, vmax=100, aspect="equal")
    labels = [level_abbreviation(level) for level in matrix.columns]
    ax.set_xticks(range(len(labels)), labels)
    ax.set_yticks(range(len(matrix.index)), [level_abbreviation(level) for level in matrix.index])
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    for r in range(values.shape[0]):
        for c in range(values.shape[1]):
            value = values[r, c]
            if math.isnan(value):
                ax.text(c, r, "·", ha="center", va="center", fontsize=7, color="#777777")
                continue
            red, green, blue, _ = cmap(value / 100)
            luminance = 0.299 * red + 0.587 * green + 0.114 * blue
            ax.text(c, r, f"{value:.0f}", ha="center", va="center", fontsize=7,
                    color="black" if luminance > 0.5 else "white")
    return image


# --------------------------------------------------------------------------- reliability


def plot_reliability(reliability: pd.DataFrame) -> Figure:
    """Krippendorff's α (dot, 95% CI) per criterion (panels) and cell (rows); dashed line = gate."""
    panel = reliability[reliability["judge"].isna()] if "judge" in reliability else reliability.iloc[0:0]
    if panel.empty:
        fig = _new_figure(COLUMN_WIDTH_IN, 1.6)
        no_data(fig.subplots(), "no panel-level reliability rows")
        return fig
    criteria = [c for c in CRITERION_LABEL if c in set(panel["criterion"])]
    criteria += [c for c in ordered_unique(panel["criterion"]) if c not in criteria]
    cells = panel[["model", "dataset", "strategy"]].drop_duplicates()
    labels = [f"{m} · {d} · {strategy_label(s)}" for m, d, s in cells.itertuples(index=False)]
    keys = list(cells.itertuples(index=False, name=None))
    fig = _new_figure(PAGE_WIDTH_IN, 0.9 + 0.16 * len(keys))
    axes = fig.subplots(1, len(criteria), sharey=True, squeeze=False)[0]
    lookup = {(r["model"], r["dataset"], r["strategy"], r["criterion"]): r for _, r in panel.iterrows()}
    y = np.arange(len(keys))
    lowest = min(0.0, float(panel["alpha_ci_low"].min()) if panel["alpha_ci_low"].notna().any() else 0.0)
    for ax, criterion in zip(axes, criteria):
        for k, key in enumerate(keys):
            row = lookup.get((*key, criterion))
            if row is None:
                continue
            if not _finite(row["alpha"]):
                ax.text(lowest + 0.02, k, "n/a", va="center", fontsize=7, color="#555555")
                continue
            passed = row["gate_passed"]
            failed = _finite(passed) and not bool(passed)
            color = OKABE_ITO["vermillion"] if failed else OKABE_ITO["blue"]
            low = row["alpha_ci_low"] if _finite(row["alpha_ci_low"]) else row["alpha"]
            high = row["alpha_ci_high"] if _finite(row["alpha_ci_high"]) else row["alpha"]
            ax.errorbar(row["alpha"], k, xerr=[[row["alpha"] - low], [high - row["alpha"]]], fmt="x" if failed else "o",
                        color=color, markersize=3.5, elinewidth=0.7, capsize=1.2)
        thresholds = ordered_unique(panel.loc[panel["criterion"] == criterion, "gate_threshold"])
        for threshold in thresholds:
            ax.axvline(float(threshold), color="#555555", linestyle="--", linewidth=0.8)
        ax.set_title(CRITERION_LABEL.get(criterion, criterion))
        ax.set_xlim(lowest - 0.05, 1.05)
        ax.set_xlabel("α")
        ax.grid(axis="x", linewidth=0.3, alpha=0.5)
    axes[0].set_yticks(y, labels)
    axes[0].invert_yaxis()
    from matplotlib.lines import Line2D

    handles = [
        Line2D([], [], marker="o", linestyle="none", color=OKABE_ITO["blue"], label="passed the gate"),
        Line2D([], [], marker="x", linestyle="none", color=OKABE_ITO["vermillion"], label="failed the gate"),
        Line2D([], [], linestyle="--", color="#555555", label="gate threshold"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncol=3, frameon=False)
    return fig


# --------------------------------------------------------------------------- parse failures


def plot_parse_failures(all_metrics: pd.DataFrame, reliability: pd.DataFrame) -> Figure:
    """(a) generation parse-failure rate per model × cell; (b) each judge's parse-failure rate per cell."""
    generation = all_metrics[(all_metrics["metric"] == "parse_failure_rate")]
    judges = (
        reliability[reliability["judge"].notna() & reliability["parse_failure_rate"].notna()]
        if {"judge", "parse_failure_rate"} <= set(reliability.columns) else reliability.iloc[0:0]
    )
    n_rows = max(len(ordered_unique(generation["model"])), len(ordered_unique(judges["judge"])), 2)
    fig = _new_figure(PAGE_WIDTH_IN, 1.2 + 0.3 * n_rows)
    axes = fig.subplots(1, 2)
    if generation.empty or generation["value"].isna().all():
        axes[0].set_title("(a) Generation answers not parsed (%)")
        no_data(axes[0], "no parse_failure_rate metric")
    else:
        matrix = generation.pivot_table(index="model", columns=["dataset", "strategy"], values="value", aggfunc="first")
        matrix = matrix.reindex(index=ordered_unique(generation["model"]), columns=_cells(generation))
        _rate_heatmap(axes[0], matrix, "(a) Generation answers not parsed (%)")
    if judges.empty:
        axes[1].set_title("(b) Judge answers not parsed (%)")
        no_data(axes[1], "no per-judge diagnostics in the reliability frames")
    else:
        rates = judges.assign(rate=judges["parse_failure_rate"].astype(float) * 100)
        matrix = rates.pivot_table(index="judge", columns=["dataset", "strategy"], values="rate", aggfunc="mean")
        matrix = matrix.reindex(index=ordered_unique(judges["judge"]), columns=_cells(judges))
        _rate_heatmap(axes[1], matrix, "(b) Judge answers not parsed (%)")
    return fig


def _rate_heatmap(ax: Axes, matrix: pd.DataFrame, title: str) -> None:
    from matplotlib import colormaps

    cmap = colormaps["Oranges"]
    values = matrix.to_numpy(dtype=float)
    top = max(10.0, float(np.nanmax(values)) if np.isfinite(values).any() else 10.0)
    ax.imshow(np.nan_to_num(values, nan=0.0), cmap=cmap, vmin=0, vmax=top, aspect="auto")
    ax.set_xticks(range(matrix.shape[1]), [f"{d}\n{strategy_label(s)}" for d, s in matrix.columns])
    ax.set_yticks(range(matrix.shape[0]), list(matrix.index))
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    for r in range(values.shape[0]):
        for c in range(values.shape[1]):
            value = values[r, c]
            text = "–" if math.isnan(value) else f"{value:.1f}"
            ax.text(c, r, text, ha="center", va="center", fontsize=7,
                    color="white" if not math.isnan(value) and value > 0.6 * top else "black")
    ax.set_title(title, fontsize=7.5)


# --------------------------------------------------------------------------- writing


def save_figure(fig: Figure, out_dir: Path, stem: str) -> list[Path]:
    """Save ``fig`` as ``<stem>.png`` (200 dpi) and ``<stem>.svg``; return both paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext, metadata in (("png", {"Software": None}), ("svg", {"Date": None, "Creator": None})):
        path = out_dir / f"{stem}.{ext}"
        fig.savefig(path, dpi=DPI, metadata=metadata, facecolor="white")
        paths.append(path)
    return paths


def write_figures(
    all_metrics: pd.DataFrame,
    votes: pd.DataFrame,
    reliability: pd.DataFrame,
    correlations: pd.DataFrame | None,
    out_dir: Path,
) -> list[Path]:
    """Write every file of :data:`FIGURE_FILES` into ``out_dir``; return the paths in that order."""
    import matplotlib

    from bloomqg.tables import check_metrics

    check_metrics(all_metrics)
    out_dir = Path(out_dir)
    paths: list[Path] = []
    with matplotlib.rc_context(STYLE):
        for stem in FIGURE_STEMS:
            figure = _BUILDERS[stem](all_metrics, votes, reliability, correlations)
            paths += save_figure(figure, out_dir, stem)
    log.info("wrote %d figure files to %s", len(paths), out_dir)
    return paths


_BUILDERS = {
    "fig2_transitions": lambda m, v, r, c: plot_transitions(v),
    "fig3_shift_scores": lambda m, v, r, c: plot_shift_scores(m),
    "fig4_knowledge_id": lambda m, v, r, c: plot_knowledge_id(m),
    "fig5_correlations": lambda m, v, r, c: plot_correlations(m, c),
    "fig6_confusion": lambda m, v, r, c: plot_confusion(v),
    "reliability": lambda m, v, r, c: plot_reliability(r),
    "parse_failures": lambda m, v, r, c: plot_parse_failures(m, r),
}
