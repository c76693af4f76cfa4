"""From a figure's marks to the item explorer: a bar, a heat-map cell or an alluvial band opens
the explorer filtered to the questions behind it.

A builder calls :func:`link_mark` on the artist it drew. Matplotlib carries the address into the
SVG (``artist.set_url``: the file holds real ``<a xlink:href>`` links, relative to the figures
folder, :data:`FIGURE_EXPLORER_HREF`); for the PNG, which the report embeds, :func:`link_boxes`
reads each linked artist's box on the figure as it was last drawn and gives it as fractions of
the figure, written beside the PNG as ``<stem>.links.json`` (:func:`links_document`). The report
lays a focusable ``<a>`` over each box, in percentages of the image, so the boxes follow the
image as it scales.

Each link carries the fragment (the report prefixes its own explorer address), what it opens
and its ``n``: the number of questions the explorer shows for that fragment, equal to the count
or the metric ``n`` the mark stands for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

import numpy as np

from bloomqg.reporting.display import StrategyLabels, is_missing, strategy_label
from bloomqg.reporting.explorer.links import EXPLORER_HREF, metric_fragment

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.artist import Artist
    from matplotlib.figure import Figure
    from matplotlib.path import Path


#: The explorer relative to the figures folder (``{root}/figures/<stem>.svg`` and
#: ``{root}/explorer/index.html``, for a study and for ``reproduce_release`` alike).
FIGURE_EXPLORER_HREF = f"../{EXPLORER_HREF}"
#: The smallest side of a link's box in figure pixels (200 dpi: about 5 CSS px in the report),
#: so a bar of height zero or a hairline band can still be reached with the mouse.
MIN_BOX_PX = 8.0
#: Decimals of a box's fractions: 1e-5 of a 1,500-px figure is well below a pixel.
DECIMALS = 5
#: Decimals of a shape's points, fractions of their box: 1e-3 of a box is below a pixel.
SHAPE_DECIMALS = 3


@dataclass(frozen=True)
class ItemLink:
    """Where a mark leads: the explorer ``fragment``, what the mark is, and its ``n`` questions."""

    fragment: str
    label: str
    n: int

    def __post_init__(self) -> None:
        if self.n < 0:
            raise ValueError(f"{self.label}: n must be ≥ 0, got {self.n}")


def metric_item_link(row: pd.Series | None, what: str, strategy_labels: StrategyLabels | None = None) -> ItemLink | None:
    """The link of a mark drawn from a metrics row: the explorer on that value's ``n`` questions
    (None for a value that was not computed or has no question)."""
    if row is None or is_missing(row["value"]) or is_missing(row["n"]) or int(row["n"]) == 0:
        return None
    model, dataset, strategy, metric = (str(row[k]) for k in ("model", "dataset", "strategy", "metric"))
    label = f"{what} of {model}, {dataset}, {strategy_label(strategy, strategy_labels)}"
    return ItemLink(metric_fragment(model, dataset, strategy, metric, strategy_labels=strategy_labels), label,
                    int(row["n"]))


_LINKS: WeakKeyDictionary[Figure, list[tuple[Artist, ItemLink]]] = WeakKeyDictionary()


def link_mark(artist: Artist, link: ItemLink, *, also: Sequence[Artist] = ()) -> None:
    """Make ``artist`` (already on a figure) open ``link`` in the SVG and in the report's PNG.

    ``also``: artists drawn over the mark (its value's text) that carry the same address in the
    SVG, so a click on them is a click on the mark; they get no box of their own.
    """
    figure = artist.figure  # the figures here have no subfigures: this is the root
    if figure is None:
        raise ValueError("link_mark: the artist is on no figure yet")
    href = f"{FIGURE_EXPLORER_HREF}#{link.fragment}"
    for each in (artist, *also):
        each.set_url(href)
    _LINKS.setdefault(figure, []).append((artist, link))  # type: ignore[arg-type]


def linked_marks(fig: Figure) -> list[tuple[Artist, ItemLink]]:
    """The marks of ``fig`` given links, in the order they were linked."""
    return list(_LINKS.get(fig, []))


def link_boxes(fig: Figure) -> list[dict[str, Any]]:
    """Each linked mark's box as fractions of the figure, from its top-left corner, as last drawn.

    Call it right after saving the PNG (with the figure's own dpi, no ``bbox_inches="tight"``):
    the layout engine placed the axes during that draw, so the boxes are the PNG's. A box is
    clipped to its axes and widened to :data:`MIN_BOX_PX`; a mark that is not a rectangle (an
    alluvial band) adds ``shape``, its outline as fractions of its box, for a CSS clip path.
    """
    from matplotlib.patches import Rectangle
    from matplotlib.transforms import Bbox

    width, height = fig.bbox.width, fig.bbox.height
    out: list[dict[str, Any]] = []
    for artist, link in linked_marks(fig):
        path = artist.get_transform().transform_path(artist.get_path())  # type: ignore[attr-defined]
        box = path.get_extents()
        clip = artist.get_clip_box()
        if clip is not None and artist.get_clip_on():
            box = Bbox.intersection(box, clip)
            if box is None:  # drawn outside its axes: nothing to click
                continue
        x0, y0, x1, y1 = _widened(box.x0, box.y0, box.x1, box.y1)
        entry: dict[str, Any] = {
            "fragment": link.fragment, "label": link.label, "n": link.n,
            "box": [_fraction(x0 / width), _fraction(1 - y1 / height),
                    _fraction((x1 - x0) / width), _fraction((y1 - y0) / height)],
        }
        if not isinstance(artist, Rectangle):
            points = outline(path)
            shape = np.column_stack([(points[:, 0] - x0) / (x1 - x0), (y1 - points[:, 1]) / (y1 - y0)])
            if not _fills_its_box(shape):  # a flat band is its box: no outline needed
                entry["shape"] = (np.round(shape, SHAPE_DECIMALS) + 0.0).tolist()
        out.append(entry)
    return out


def outline(path: Path, steps: int = 8) -> np.ndarray:
    """The points of a path's outline, each Bézier curve cut into ``steps`` straight pieces.

    (``Path.to_polygons`` cuts curves far finer than a click target needs: 61 points for an
    alluvial band against 19 here, at most a fraction of a pixel apart for a band of the figure.)
    """
    points = []
    for segment, _code in path.iter_bezier():
        if segment.degree == 0:
            points.append(segment.control_points[:1])
        else:
            points.append(segment(np.linspace(0, 1, steps + 1)[1:] if segment.degree > 1 else np.ones(1)))
    return np.concatenate(points) if points else np.empty((0, 2))


def _fills_its_box(shape: np.ndarray) -> bool:
    """Whether a closed outline (fractions of its box) covers the whole box (shoelace area 1)."""
    x, y = shape[:, 0], shape[:, 1]
    return bool(abs(abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))) / 2 - 1.0) < 1e-3)


def _widened(x0: float, y0: float, x1: float, y1: float) -> tuple[float, float, float, float]:
    if x1 - x0 < MIN_BOX_PX:
        middle = (x0 + x1) / 2
        x0, x1 = middle - MIN_BOX_PX / 2, middle + MIN_BOX_PX / 2
    if y1 - y0 < MIN_BOX_PX:
        middle = (y0 + y1) / 2
        y0, y1 = middle - MIN_BOX_PX / 2, middle + MIN_BOX_PX / 2
    return x0, y0, x1, y1


def _fraction(value: float) -> float:
    return round(float(value), DECIMALS)


def links_document(fig: Figure, stem: str, png_size: tuple[int, int], png_sha256: str) -> dict[str, Any]:
    """``<stem>.links.json``: the PNG it belongs to (size and SHA-256) and its links' boxes."""
    return {
        "figure": stem,
        "png": {"width": png_size[0], "height": png_size[1], "sha256": png_sha256},
        "explorer": FIGURE_EXPLORER_HREF,
        "links": link_boxes(fig),
    }
