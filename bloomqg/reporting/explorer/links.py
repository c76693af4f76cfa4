"""Links into the explorer: the URL fragment that filters it to the items behind a number.

The fragment is ``application/x-www-form-urlencoded``, read by the page with
``URLSearchParams``: ``f.<column>=<value>`` (repeatable) keeps rows whose column holds one of
the values, ``m=<metric>`` keeps the rows in the metric's denominator (its ``n``), ``mv=counted``
or ``mv=rest`` narrows them to the rows that add to its numerator or do not, ``q`` is the
full-text search, ``s`` the sort (``-`` prefix: descending) and ``i`` the selected prompt.
"""

from __future__ import annotations

from urllib.parse import urlencode

from bloomqg.reporting.display import strategy_label

#: Where the explorer lies relative to the report (``{root}/report.html`` and
#: ``{root}/explorer/index.html``).
EXPLORER_HREF = "explorer/index.html"


def metric_fragment(model: str, dataset: str, strategy: str, metric: str, *, show: str | None = None) -> str:
    """The fragment (without ``#``) that opens the items of one metric value of one cell."""
    pairs = [("f.model", model), ("f.dataset", dataset), ("f.strategy", strategy_label(strategy)), ("m", metric)]
    if show is not None:
        if show not in ("counted", "rest"):
            raise ValueError(f"show must be 'counted' or 'rest', got {show!r}")
        pairs.append(("mv", show))
    return urlencode(pairs)


def metric_link(source: tuple[str, str, str, str], explorer_href: str = EXPLORER_HREF) -> str:
    """``explorer_href#fragment`` for a table cell's (model, dataset, strategy, metric)."""
    model, dataset, strategy, metric = source
    return f"{explorer_href}#{metric_fragment(model, dataset, strategy, metric)}"
