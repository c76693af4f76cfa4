"""The report's mark beside a number that holds by construction
(:mod:`bloomqg.voting.construction`): "‡" on every table cell fed by a flagged criterion of its
cell, and a note saying which judge is constant or abstains."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bloomqg.metrics.registry import metric_spec
from bloomqg.reporting.display import CRITERION_LABEL, strategy_label
from bloomqg.voting.construction import MARK, ConstructionFlag


def _criteria(metric: str) -> frozenset[str]:
    try:
        return metric_spec(metric).criteria
    except (KeyError, ValueError):
        return frozenset()


def mark_by_construction(tables: list[dict[str, Any]], flags: Sequence[ConstructionFlag]) -> None:
    """Append the mark to each flagged cell of the report's table entries (their ``sources``)
    and a note per table naming the cell, criterion and judges (in place)."""
    by_cell = {}
    for flag in flags:
        by_cell.setdefault((flag.model, flag.dataset, flag.strategy), {})[flag.criterion] = flag
    for table in tables:
        sources = table.get("sources") or []
        used: dict[tuple[str, str, str, str], ConstructionFlag] = {}
        for r, row in enumerate(sources):
            for c, source in enumerate(row):
                if not source:
                    continue
                model, dataset, strategy, metric = source
                hit = [f for crit, f in by_cell.get((model, dataset, strategy), {}).items() if crit in _criteria(metric)]
                if hit:
                    table["rows"][r][c] = f"{table['rows'][r][c]} {MARK}"
                    for flag in hit:
                        used[(flag.model, flag.dataset, flag.strategy, flag.criterion)] = flag
        if used:
            table["notes"] = [*table["notes"], f"{MARK} holds by construction, not a finding: " + "; ".join(
                f"{CRITERION_LABEL.get(f.criterion, f.criterion)} in {f.model} · {f.dataset} · "
                f"{strategy_label(f.strategy)}: {f.text}" for f in used.values()) + "."]
