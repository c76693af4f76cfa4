"""The report's mark beside a number that could not have come out otherwise
(:mod:`bloomqg.voting.construction`): "‡" on every table cell all of whose criteria are decided
by construction in its cell, and the notes that say so once for the Tables section, with the
rule (:data:`~bloomqg.voting.construction.DECIDED_RULE`) and, apart, the uninformative judges
that decide nothing (a note, not a mark)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bloomqg.metrics.registry import metric_spec
from bloomqg.reporting.display import CRITERION_LABEL, StrategyLabels, strategy_label
from bloomqg.voting.construction import DECIDED_RULE, MARK, ConstructionFlag


def _criteria(metric: str) -> frozenset[str]:
    try:
        return metric_spec(metric).criteria
    except (KeyError, ValueError):
        return frozenset()


def _where(flag: ConstructionFlag, strategy_labels: StrategyLabels | None) -> str:
    return (f"{CRITERION_LABEL.get(flag.criterion, flag.criterion)} in {flag.model} · {flag.dataset} · "
            f"{strategy_label(flag.strategy, strategy_labels)}: {flag.text}")


def mark_by_construction(
    tables: list[dict[str, Any]], flags: Sequence[ConstructionFlag], strategy_labels: StrategyLabels | None = None
) -> dict[str, Any]:
    """Append the mark to each table cell (by its ``sources``) whose every criterion is decided
    in its cell (in place), and return the Tables section's notes: ``rule``, ``marked`` (the
    decided criteria the marks stand for) and ``uninformative`` (flags that decide nothing)."""
    by_cell: dict[tuple[str, str, str], dict[str, ConstructionFlag]] = {}
    for flag in flags:
        by_cell.setdefault((flag.model, flag.dataset, flag.strategy), {})[flag.criterion] = flag
    used: dict[tuple[str, str, str, str], ConstructionFlag] = {}
    for table in tables:
        for r, row in enumerate(table.get("sources") or []):
            for c, source in enumerate(row):
                if not source:
                    continue
                model, dataset, strategy, metric = source
                criteria = _criteria(metric)
                here = by_cell.get((model, dataset, strategy), {})
                if criteria and all(crit in here and here[crit].decided for crit in criteria):
                    table["rows"][r][c] = f"{table['rows'][r][c]} {MARK}"
                    for crit in criteria:
                        flag = here[crit]
                        used[(flag.model, flag.dataset, flag.strategy, flag.criterion)] = flag
    return {
        "rule": DECIDED_RULE,
        "marked": [_where(f, strategy_labels) for f in used.values()],
        "uninformative": [_where(f, strategy_labels) for f in flags if not f.decided],
    }
