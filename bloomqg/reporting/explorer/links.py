"""Links into the explorer: the URL fragment that filters it to the items behind a number.

The fragment is ``application/x-www-form-urlencoded``, read by the page with
``URLSearchParams``: ``f.<column>=<value>`` (repeatable) keeps rows whose column holds one of
the values, ``m=<metric>`` keeps the rows in the metric's denominator (its ``n``), ``mv=counted``
or ``mv=rest`` narrows them to the rows that add to its numerator or do not, ``q`` is the
full-text search, ``s`` the sort (``-`` prefix: descending) and ``i`` the selected prompt.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlencode

from bloomqg.inputs.bloom import UNCATEGORIZED
from bloomqg.reporting.display import StrategyLabels, strategy_label
from bloomqg.reporting.explorer.items import NONE

#: Where the explorer lies relative to the report (``{root}/report.html`` and
#: ``{root}/explorer/index.html``).
EXPLORER_HREF = "explorer/index.html"


def items_fragment(
    filters: Iterable[tuple[str, str]], metric: str | None = None, *, show: str | None = None
) -> str:
    """The fragment (without ``#``) that keeps the rows whose every ``(column, value)`` holds and,
    with ``metric``, that are in the metric's denominator (``show``: its counted rows or the rest).

    Columns are the explorer's keys (:func:`bloomqg.reporting.explorer.items.build_items`):
    ``strategy`` takes the shown label (CoT, FGP), levels as :func:`explorer_level` gives them.
    """
    pairs = [(f"f.{column}", value) for column, value in filters]
    if metric is not None:
        pairs.append(("m", metric))
    if show is not None:
        if metric is None or show not in ("counted", "rest"):
            raise ValueError(f"show must be 'counted' or 'rest' and needs a metric, got {show!r}")
        pairs.append(("mv", show))
    return urlencode(pairs)


def cell_filters(
    model: str, dataset: str | None, strategy: str, strategy_labels: StrategyLabels | None = None
) -> list[tuple[str, str]]:
    """The explorer filters of a (model, dataset, strategy) cell; ``dataset=None`` pools datasets.
    The explorer shows a strategy by its label: give the same ``strategy_labels`` as its build."""
    pairs = [("model", model)] + ([("dataset", dataset)] if dataset is not None else [])
    return pairs + [("strategy", strategy_label(strategy, strategy_labels))]


def item_fragment(model: str, dataset: str, strategy: str, prompt_id: str,
                  strategy_labels: StrategyLabels | None = None) -> str:
    """The fragment (without ``#``) that opens one reply in the explorer: its cell's rows, the reply
    selected (``i``, the explorer's row key: ``dataset/strategy/model/prompt_id``, strategy by name)."""
    pairs = [(f"f.{column}", value) for column, value in cell_filters(model, dataset, strategy, strategy_labels)]
    return urlencode([*pairs, ("i", f"{dataset}/{strategy}/{model}/{prompt_id}")])


def explorer_level(level: str, column: str) -> str:
    """A level as the explorer's ``column`` (target_level, judged_level, identified_level) holds it.

    :func:`bloomqg.metrics.transition_counts` labels every null level Uncategorized; the explorer
    keeps ``Uncategorized`` for a judge's verdict of that name and shows any other missing level
    (an original without one, no classification) as ``—``.
    """
    if column not in ("target_level", "judged_level", "identified_level"):
        raise ValueError(f"column must be a level column of the explorer, got {column!r}")
    return NONE if level == UNCATEGORIZED and column != "judged_level" else level


def metric_fragment(model: str, dataset: str, strategy: str, metric: str, *, show: str | None = None,
                    strategy_labels: StrategyLabels | None = None) -> str:
    """The fragment (without ``#``) that opens the items of one metric value of one cell."""
    return items_fragment(cell_filters(model, dataset, strategy, strategy_labels), metric, show=show)


def metric_link(source: tuple[str, str, str, str], explorer_href: str = EXPLORER_HREF,
                strategy_labels: StrategyLabels | None = None) -> str:
    """``explorer_href#fragment`` for a table cell's (model, dataset, strategy, metric)."""
    model, dataset, strategy, metric = source
    return f"{explorer_href}#{metric_fragment(model, dataset, strategy, metric, strategy_labels=strategy_labels)}"
