"""The report's "Judge bias" section: one compact table and one figure from the judge_bias target.

Self-contained: it reads only ``results/judge_bias/estimates.parquet`` and ``positions.parquet``
(:data:`bloomqg.store.frames.BIAS_ESTIMATES`, :data:`bloomqg.store.frames.BIAS_POSITIONS`).

Table: per judge, one row per probe, one column per criterion, each cell the probe's deciding
statistic with its CI, starred where the CI excludes the no-bias value:

- order: share of verdicts the permuted lists changed, beyond what a repeat changes;
- position: share of Bloom levels chosen at the first listed position, beyond an order-blind judge;
- consistency: self-agreement between two asks with different seeds;
- self-preference: own-family minus other-family difference to the other judges;
- length: point-biserial (yes/no) or Spearman (Bloom level) correlation with the question's words.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from bloomqg.store.atomic import write_text_atomic
from bloomqg.reporting.display import CRITERION_LABEL
from bloomqg.reporting.tables.markdown import render_markdown
from bloomqg.reporting.tables.model import Cell, Table, format_value
from bloomqg.reporting.tables.view import render_view
from bloomqg.store.frames import CRITERIA

#: (probe, its deciding statistic, row label), in table order.
DECIDING: tuple[tuple[str, str, str], ...] = (
    ("order", "excess_over_repeat", "order: changed beyond repeat"),
    ("position", "first_position_excess", "position: first-listed excess"),
    ("consistency", "self_agreement", "consistency: self-agreement"),
    ("self_preference", "self_preference", "self-preference (diff. in diff.)"),
    ("length", None, "length: r with words"),
)
DETECTED_MARK = " *"


def judge_bias_table(estimates: pd.DataFrame) -> Table:
    """The compact table (see the module docstring)."""
    rows: list[list[Cell]] = []
    for judge in dict.fromkeys(estimates["judge"]):
        mine = estimates[estimates["judge"] == judge]
        for probe, statistic, label in DECIDING:
            part = mine[(mine["probe"] == probe) & ((mine["statistic"] == statistic) if statistic else True)]
            if part.empty:
                continue
            cells = [Cell(judge), Cell(label)]
            for criterion in CRITERIA:
                found = part[part["criterion"] == criterion]
                if found.empty:
                    cells.append(Cell("–"))
                    continue
                r = found.iloc[0]
                text = format_value(r["value"], r["ci_low"], r["ci_high"], decimals=2, ci_decimals=2)
                cells.append(Cell(text + (DETECTED_MARK if r["detected"] else "")))
            rows.append(cells)
    return Table(
        "judge_bias", "Judge bias probes: each judge's deciding statistic per probe and criterion [95% CI, simultaneous over a probe's criteria].",
        ["Judge", "Probe"], [CRITERION_LABEL.get(c, c) for c in CRITERIA], rows, estimates,
        notes=[f"{DETECTED_MARK.strip()} the CI excludes the no-bias value (0; 1 for self-agreement). "
               "Every statistic, with n and notes: results/judge_bias/estimates.parquet; the method: docs/judge-bias.md."],
    )


def plot_positions(positions: pd.DataFrame, path: str | Path) -> None:
    """Share of each judge's order-probe Bloom levels by listed position (bars), and where an
    order-blind judge's levels stood (markers)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    judges = list(dict.fromkeys(positions["judge"]))
    totals = positions.groupby("judge")["chosen"].sum()
    usable = [j for j in judges if totals.get(j, 0) > 0]
    if not usable:
        ax.axis("off")
        ax.text(0.5, 0.5, "No Bloom-level verdicts on the order probe", ha="center", va="center")
    width = 0.8 / max(len(usable), 1)
    for k, judge in enumerate(usable):
        part = positions[positions["judge"] == judge].sort_values("position")
        x = part["position"] + (k - (len(usable) - 1) / 2) * width
        ax.bar(x, part["chosen"] / totals[judge], width, label=judge)
        ax.plot(x, part["expected"] / totals[judge], "k_", markersize=8)
    if usable:
        ax.set_xticks(range(1, 7))
        ax.set_xlabel("Listed position of the chosen Bloom level (order probe)")
        ax.set_ylabel("Share of verdicts")
        ax.legend(fontsize=7, ncol=3)
        ax.set_title("bars: judge; dashes: an order-blind judge (its base verdict, same list)", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None}, facecolor="white")
    plt.close(fig)


def write_judge_bias_table(estimates: pd.DataFrame, markdown: str | Path, view: str | Path) -> None:
    """The table as Markdown and as the view file (``.json``) the HTML report reads."""
    table = judge_bias_table(estimates)
    write_text_atomic(Path(markdown), render_markdown(table))
    write_text_atomic(Path(view), render_view(table))
