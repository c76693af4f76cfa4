"""Every figure of a run, saved as PNG (200 dpi) and SVG, with its links to the item explorer.

:func:`write_figures` always writes every file of :data:`FIGURE_FILES` (the workflow declares
them as outputs); a view without data is drawn as an honest "no data for this view" panel saying
why, never skipped. ``<stem>.links.json`` holds the boxes of the PNG's marks that open the item
explorer (:mod:`bloomqg.reporting.figures.links`; empty for a figure without such marks).
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from bloomqg.store.atomic import write_text_atomic
from bloomqg.reporting.display import StrategyLabels
from bloomqg.reporting.figures.bars import plot_knowledge_id, plot_shift_scores
from bloomqg.reporting.figures.confusion import plot_confusion
from bloomqg.reporting.figures.correlations import plot_correlations
from bloomqg.reporting.figures.diagnostics import plot_parse_failures, plot_reliability
from bloomqg.reporting.figures.links import links_document
from bloomqg.reporting.figures.style import DPI, STYLE
from bloomqg.reporting.figures.transitions import plot_transitions
from bloomqg.reporting.tables.model import check_metrics

if TYPE_CHECKING:
    from matplotlib.figure import Figure


log = logging.getLogger(__name__)

#: Figure names; each is written as ``<stem>.png``, ``<stem>.svg`` and ``<stem>.links.json``.
FIGURE_STEMS: tuple[str, ...] = (
    "fig2_transitions",
    "fig3_shift_scores",
    "fig4_knowledge_id",
    "fig5_correlations",
    "fig6_confusion",
    "reliability",
    "parse_failures",
)
FIGURE_EXTENSIONS: tuple[str, ...] = ("png", "svg", "links.json")
FIGURE_FILES: tuple[str, ...] = tuple(f"{stem}.{ext}" for stem in FIGURE_STEMS for ext in FIGURE_EXTENSIONS)


def save_figure(fig: Figure, out_dir: Path, stem: str) -> list[Path]:
    """Save ``fig`` as ``<stem>.png`` (200 dpi), ``<stem>.svg`` and ``<stem>.links.json``; return the paths.

    The links' boxes are read right after the PNG is drawn, at the PNG's dpi and over the whole
    figure (never ``bbox_inches="tight"``, which would crop it and shift every box).
    """
    import matplotlib
    from PIL import Image

    out_dir.mkdir(parents=True, exist_ok=True)
    fig.set_dpi(DPI)  # draw at the PNG's dpi: the boxes read after it are the PNG's pixels
    png, svg, links = (out_dir / f"{stem}.{ext}" for ext in FIGURE_EXTENSIONS)
    with matplotlib.rc_context({"savefig.bbox": "standard"}):  # bbox_inches=None reads this setting
        fig.savefig(png, dpi=DPI, metadata={"Software": None}, facecolor="white", bbox_inches=None)
        with Image.open(png) as image:
            size = image.size
        document = links_document(fig, stem, size, hashlib.sha256(png.read_bytes()).hexdigest())
        fig.savefig(svg, dpi=DPI, metadata={"Date": None, "Creator": None}, facecolor="white", bbox_inches=None)
    write_text_atomic(links, json.dumps(document, ensure_ascii=False, separators=(",", ":")) + "\n")
    return [png, svg, links]


def write_figures(
    all_metrics: pd.DataFrame,
    votes: pd.DataFrame,
    reliability: pd.DataFrame,
    correlations: pd.DataFrame | None,
    out_dir: Path,
    *,
    strategy_labels: StrategyLabels | None = None,
) -> list[Path]:
    """Write every file of :data:`FIGURE_FILES` into ``out_dir``; return the paths in that order.
    ``strategy_labels`` ({name: label}, defined order) name and order the strategies."""
    import matplotlib

    check_metrics(all_metrics)
    out_dir = Path(out_dir)
    paths: list[Path] = []
    with matplotlib.rc_context(STYLE):
        for stem in FIGURE_STEMS:
            figure = _BUILDERS[stem](all_metrics, votes, reliability, correlations, strategy_labels)
            paths += save_figure(figure, out_dir, stem)
    log.info("wrote %d figure files to %s", len(paths), out_dir)
    return paths


_BUILDERS = {
    "fig2_transitions": lambda m, v, r, c, s=None: plot_transitions(v, s),
    "fig3_shift_scores": lambda m, v, r, c, s=None: plot_shift_scores(m, s),
    "fig4_knowledge_id": lambda m, v, r, c, s=None: plot_knowledge_id(m, s),
    "fig5_correlations": lambda m, v, r, c, s=None: plot_correlations(m, c, s),
    "fig6_confusion": lambda m, v, r, c, s=None: plot_confusion(v, s),
    "reliability": lambda m, v, r, c, s=None: plot_reliability(r, s),
    "parse_failures": lambda m, v, r, c, s=None: plot_parse_failures(m, r, s),
}
