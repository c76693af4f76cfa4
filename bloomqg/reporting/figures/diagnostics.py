"""The run's diagnostics: judge reliability (the coefficient the gate read, with CI and the gate) and
parse-failure rates."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from bloomqg.reporting.display import (
    CRITERION_LABEL,
    MISSING,
    StrategyLabels,
    is_missing,
    metric_index,
    ordered_cells,
    ordered_unique,
    strategy_label,
)
from bloomqg.reporting.figures.links import ItemLink, link_mark, metric_item_link
from bloomqg.reporting.figures.style import (
    OKABE_ITO,
    PAGE_WIDTH_IN,
    frameless,
    heatmap_cells,
    new_figure,
    no_data,
    no_data_figure,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def plot_reliability(reliability: pd.DataFrame, strategy_labels: StrategyLabels | None = None) -> Figure:
    """The coefficient the gate read (Krippendorff's α, or Gwet's AC1 where one answer holds
    ≥ 90% of the votes; :func:`bloomqg.voting.agreement.gate_decision`), dot with 95% CI, per
    criterion (panels) and cell (rows); dashed line = the gate's threshold. Plotting the one value
    the gate compared keeps every "passed" dot right of the line."""
    from bloomqg.voting.agreement import NOT_MEASURED, PREVALENCE_LIMIT, RELIABLE, recorded_decision

    panel = reliability[reliability["judge"].isna()] if "judge" in reliability else reliability.iloc[0:0]
    if panel.empty:
        return no_data_figure(1.6, "no panel-level reliability rows")
    criteria = [c for c in CRITERION_LABEL if c in set(panel["criterion"])]
    criteria += [c for c in ordered_unique(panel["criterion"]) if c not in criteria]
    cells = panel[["model", "dataset", "strategy"]].drop_duplicates()
    labels = [f"{m} · {d} · {strategy_label(s, strategy_labels)}" for m, d, s in cells.itertuples(index=False)]
    keys = list(cells.itertuples(index=False, name=None))
    # rows tall enough for a two-line "not measured" clear of its neighbours and the axis
    fig = new_figure(PAGE_WIDTH_IN, 1.1 + 0.24 * len(keys))
    axes = fig.subplots(1, len(criteria), sharey=True, squeeze=False)[0]
    lookup = {(r["model"], r["dataset"], r["strategy"], r["criterion"]): r for _, r in panel.iterrows()}
    y = np.arange(len(keys))
    lows = [float(v) for name in ("alpha_ci_low", "ac1_ci_low", "alpha", "ac1") if name in panel
            for v in panel[name] if not is_missing(v)]
    lowest = min([0.0, *lows])
    drawn: set[tuple[str, bool]] = set()  # (coefficient, passed) of the marks drawn: the legend names only those
    unmeasured_shown = False
    for ax, criterion in zip(axes, criteria):
        for k, key in enumerate(keys):
            row = lookup.get((*key, criterion))
            if row is None:
                continue
            decision = recorded_decision(row.to_dict())
            if decision.status == NOT_MEASURED or is_missing(decision.value):
                # on two lines: one ran into the gate's dashed line in a narrow panel
                # on a white ground: it sat on the grid lines and, in the last row, on the axis
                ax.text(lowest + 0.02, k, "not\nmeasured", va="center", fontsize=7, linespacing=0.9, color="#555555",
                        bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.6}, zorder=3)
                unmeasured_shown = True
                continue
            coefficient = decision.coefficient
            value = float(decision.value)
            low = row.get(f"{coefficient}_ci_low")
            high = row.get(f"{coefficient}_ci_high")
            low = value if is_missing(low) else float(low)
            high = value if is_missing(high) else float(high)
            passed = decision.status == RELIABLE
            drawn.add((coefficient, passed))
            color = OKABE_ITO["blue"] if passed else OKABE_ITO["vermillion"]
            marker = ("o" if passed else "x") if coefficient == "alpha" else ("s" if passed else "D")
            # a percentile CI need not hold the estimate (few resamples): no negative whisker
            whiskers = [[max(value - low, 0)], [max(high - value, 0)]]
            ax.errorbar(value, k, xerr=whiskers, fmt=marker, color=color, markersize=3.5, elinewidth=0.7, capsize=1.2,
                        markerfacecolor=color if coefficient == "alpha" else "none")
        thresholds = ordered_unique(panel.loc[panel["criterion"] == criterion, "gate_threshold"])
        for threshold in thresholds:
            ax.axvline(float(threshold), color="#555555", linestyle="--", linewidth=0.8)
        ax.set_title(CRITERION_LABEL.get(criterion, criterion))
        ax.set_xlim(lowest - 0.05, 1.05)
        ax.set_xlabel("α or AC1 (the gate's)")
        ax.grid(axis="x", linewidth=0.3, alpha=0.5)
    axes[0].set_yticks(y, labels)
    # top row first, with room above and below for a two-line "not measured" (inverted y)
    axes[0].set_ylim(len(keys) - 0.3, -0.7)
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    marks = {
        ("alpha", True): Line2D([], [], marker="o", linestyle="none", color=OKABE_ITO["blue"], label="α, passed"),
        ("alpha", False): Line2D([], [], marker="x", linestyle="none", color=OKABE_ITO["vermillion"], label="α, failed"),
        ("ac1", True): Line2D([], [], marker="s", linestyle="none", color=OKABE_ITO["blue"], markerfacecolor="none",
                              label=f"AC1 (one answer ≥ {PREVALENCE_LIMIT:.0%} of votes), passed"),
        ("ac1", False): Line2D([], [], marker="D", linestyle="none", color=OKABE_ITO["vermillion"],
                               markerfacecolor="none", label=f"AC1 (one answer ≥ {PREVALENCE_LIMIT:.0%} of votes), failed"),
    }
    handles = [mark for key, mark in marks.items() if key in drawn]
    if unmeasured_shown:
        handles.append(Patch(facecolor="none", edgecolor="none", label="not measured: written in place"))
    handles.append(Line2D([], [], linestyle="--", color="#555555", label="gate threshold"))
    fig.legend(handles=handles, loc="outside lower center", ncol=3, frameon=False, fontsize=7)
    return fig


def plot_parse_failures(all_metrics: pd.DataFrame, reliability: pd.DataFrame, strategy_labels: StrategyLabels | None = None) -> Figure:
    """(a) generation parse-failure rate per model × cell; (b) each judge's parse-failure rate per cell."""
    generation = all_metrics[(all_metrics["metric"] == "parse_failure_rate")]
    judges = (
        reliability[reliability["judge"].notna() & reliability["parse_failure_rate"].notna()]
        if {"judge", "parse_failure_rate"} <= set(reliability.columns) else reliability.iloc[0:0]
    )
    n_rows = max(len(ordered_unique(generation["model"])), len(ordered_unique(judges["judge"])), 2)
    fig = new_figure(PAGE_WIDTH_IN, 1.2 + 0.3 * n_rows)
    axes = fig.subplots(1, 2)
    if generation.empty or generation["value"].isna().all():
        axes[0].set_title("(a) Generation answers not parsed (%)")
        no_data(axes[0], "no parse_failure_rate metric")
    else:
        matrix = generation.pivot_table(index="model", columns=["dataset", "strategy"], values="value", aggfunc="first")
        matrix = matrix.reindex(index=ordered_unique(generation["model"]), columns=ordered_cells(generation, strategy_labels=strategy_labels))
        rows = metric_index(generation)  # a cell opens its questions: the rate's n
        counts = generation.pivot_table(index="model", columns=["dataset", "strategy"], values="n", aggfunc="first") \
            if "n" in generation else None
        _rate_heatmap(axes[0], matrix, "(a) Generation answers not parsed (%)", lambda *cell: metric_item_link(
            rows.get((*cell, "parse_failure_rate")), "generation parse failures", strategy_labels),
            strategy_labels, counts=None if counts is None else counts.reindex_like(matrix))
    if judges.empty:
        axes[1].set_title(JUDGE_PANEL_TITLE)
        no_data(axes[1], "no per-judge diagnostics in the reliability frames")
    else:
        rates = judges.assign(rate=judges["parse_failure_rate"].astype(float) * 100)
        matrix = rates.pivot_table(index="judge", columns=["dataset", "strategy"], values="rate", aggfunc="mean")
        matrix = matrix.reindex(index=ordered_unique(judges["judge"]), columns=ordered_cells(judges, strategy_labels=strategy_labels))
        counts = judge_questions(judges).reindex_like(matrix) if "n_items" in judges else None
        _rate_heatmap(axes[1], matrix, JUDGE_PANEL_TITLE, strategy_labels=strategy_labels, counts=counts, percent=True)
    return fig


#: Panel (b)'s title: the rate is averaged over the criteria a judge rates (a judge's answer can
#: parse for one criterion and not for another).
JUDGE_PANEL_TITLE = "(b) Judge answers not parsed (%, mean)"


def judge_questions(judges: pd.DataFrame) -> pd.DataFrame:
    """judge × (dataset, strategy): the questions each judge was asked in a cell (the judge rows'
    ``n_items``, the most over its criteria), summed over models: the n of panel (b)."""
    per_model = judges.groupby(["judge", "dataset", "strategy", "model"], sort=False)["n_items"].max()
    return per_model.groupby(["judge", "dataset", "strategy"], sort=False).sum().unstack(["dataset", "strategy"])


def _rate_heatmap(
    ax: Axes, matrix: pd.DataFrame, title: str, link: Callable[[str, str, str], ItemLink | None] | None = None,
    strategy_labels: StrategyLabels | None = None, counts: pd.DataFrame | None = None, percent: bool = False,
) -> None:
    """Rates per row (model or judge) × (dataset, strategy); ``link`` gives a cell's explorer link;
    ``counts`` (same shape): the n each rate is over, printed under it; ``percent``: each rate is
    printed with its "%" (a small rate such as 0.7 is otherwise read as a share)."""
    from matplotlib import colormaps
    from matplotlib.colors import Normalize

    cmap = colormaps["Oranges"]
    values = matrix.to_numpy(dtype=float)
    top = max(10.0, float(np.nanmax(values)) if np.isfinite(values).any() else 10.0)
    cells, _ = heatmap_cells(ax, values, cmap, Normalize(0, top))
    ax.set_xticks(range(matrix.shape[1]), [f"{d}\n{strategy_label(s, strategy_labels)}" for d, s in matrix.columns])
    ax.set_yticks(range(matrix.shape[0]), list(matrix.index))
    frameless(ax)
    for r in range(values.shape[0]):
        for c in range(values.shape[1]):
            value = values[r, c]
            text = MISSING if math.isnan(value) else f"{value:.1f}{'%' if percent else ''}"
            n = np.nan if counts is None else float(counts.iloc[r, c])
            if not math.isnan(value) and not math.isnan(n):
                text += f"\nn={int(n)}"
            label = ax.text(c, r, text, ha="center", va="center", fontsize=7,
                            color="white" if not math.isnan(value) and value > 0.6 * top else "black")
            target = link(str(matrix.index[r]), *map(str, matrix.columns[c])) if link is not None else None
            if target is not None:
                link_mark(cells[r][c], target, also=[label])
    ax.set_title(title, fontsize=7.5)
