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


#: Metrics that read whether a question kept its original's Bloom level: where the level is
#: forced to every original's (:attr:`ConstructionFlag.forced_to_original`), their value is fixed
#: (CatCons 100%, CogShift 0) whichever questions the other criteria count.
LEVEL_KEPT_METRICS = frozenset({"catcons", "cogshift"})


def _where(flag: ConstructionFlag, strategy_labels: StrategyLabels | None) -> str:
    forced = (f"; every original here is {flag.forced_to_original}, so every question with a judged level keeps its "
              "original's: CatCons (100%) and CogShift (0) come out so whatever the other criteria count"
              if flag.forced_to_original else "")
    return (f"{CRITERION_LABEL.get(flag.criterion, flag.criterion)} in {flag.model} · {flag.dataset} · "
            f"{strategy_label(flag.strategy, strategy_labels)}: {flag.text}{forced}")


def _flags_by_cell(flags: Sequence[ConstructionFlag]) -> dict[tuple[str, str, str], dict[str, ConstructionFlag]]:
    """(model, dataset, strategy) -> criterion -> its flag."""
    by_cell: dict[tuple[str, str, str], dict[str, ConstructionFlag]] = {}
    for flag in flags:
        by_cell.setdefault((flag.model, flag.dataset, flag.strategy), {})[flag.criterion] = flag
    return by_cell


def _decided(metric: str, criteria: frozenset[str], here: dict[str, ConstructionFlag]) -> tuple[str, ...]:
    """The criteria whose flags make ``metric``'s value in its cell one that could not have come out
    otherwise (empty: not decided): all it reads, or the Bloom level alone where it is forced to
    the originals' and the metric reads only whether a level was kept."""
    level = here.get("bloom_level")
    if metric in LEVEL_KEPT_METRICS and level is not None and level.forced_to_original:
        return ("bloom_level",)
    if criteria and all(crit in here and here[crit].decided for crit in criteria):
        return tuple(criteria)
    return ()


def mark_by_construction(
    tables: list[dict[str, Any]], flags: Sequence[ConstructionFlag], strategy_labels: StrategyLabels | None = None
) -> dict[str, Any]:
    """Append the mark to each table cell (by its ``sources``) whose every criterion is decided
    in its cell (in place), and return the Tables section's notes: ``rule``, ``marked`` (the
    decided criteria the marks stand for) and ``uninformative`` (flags that decide nothing, and decided ones that mark no number)."""
    by_cell = _flags_by_cell(flags)
    used: dict[tuple[str, str, str, str], ConstructionFlag] = {}
    for table in tables:
        for r, row in enumerate(table.get("sources") or []):
            for c, source in enumerate(row):
                if not source:
                    continue
                model, dataset, strategy, metric = source
                here = by_cell.get((model, dataset, strategy), {})
                decided = _decided(metric, _criteria(metric), here)
                if decided:
                    table["rows"][r][c] = f"{table['rows'][r][c]} {MARK}"
                    for crit in decided:
                        flag = here[crit]
                        used[(flag.model, flag.dataset, flag.strategy, flag.criterion)] = flag
    return {
        "rule": DECIDED_RULE,
        "marked": [_where(f, strategy_labels) for f in used.values()],
        # a decided criterion whose numbers all read an undecided one too marks nothing: it is
        # listed with the notes, saying so, not dropped from both lists
        "uninformative": [_where(f, strategy_labels) for f in flags if not f.decided]
        + [f"{_where(f, strategy_labels)}; no number carries ‡ for it: each number that reads it also reads a "
           "criterion the other judges could have changed"
           for f in flags if f.decided and (f.model, f.dataset, f.strategy, f.criterion) not in used],
        "flags": list(flags),
    }


def forced_level_warnings(flags: Sequence[ConstructionFlag], strategy_labels: StrategyLabels | None = None) -> list[str]:
    """The artefact warning's lines for cells whose Bloom level is forced to every original's
    (:attr:`ConstructionFlag.forced_to_original`): their CatCons is the panel's make-up."""
    return [f"in {flag.model} · {flag.dataset} · {strategy_label(flag.strategy, strategy_labels)} every original is "
            f"{flag.forced_to_original} and {' and '.join(flag.always) or flag.text}, so every question there with a "
            "judged level keeps its original's: its CatCons is made by the judges (‡ in the tables: fixed by how the panel is built)"
            for flag in flags if flag.forced_to_original]


def hollow_agreements(flags: Sequence[ConstructionFlag]) -> dict[tuple[str, str, str, str], ConstructionFlag]:
    """(model, dataset, strategy, criterion) → its flag, where at most one judge's votes vary: an
    agreement the gate measures there is the panel's make-up, no evidence (the gate's table and the
    agreement table say so beside "reliable")."""
    return {(f.model, f.dataset, f.strategy, f.criterion): f for f in flags if f.agreement_by_construction}


def construction_caveat(flag: ConstructionFlag) -> str:
    """"only rules varies (minilm abstains on 15 of 15; smollm2 always says yes)": why an agreement
    is by construction, in the words of the ‡ lists."""
    who = f"only {flag.varying[0]} varies" if flag.varying else "no judge's votes vary"
    return f"{who} ({'; '.join(flag.reasons)})"


def construction_facts(flags: Sequence[ConstructionFlag]) -> list[dict[str, Any]]:
    """The counts the flags' lines print ("on 1 of 15 questions rules casts most of the valid
    votes"), as facts (:meth:`bloomqg.reporting.facts.FactBook.add`'s keywords)."""
    return [{"quantity": "construction.outvotable_items", "value": flag.n_outvotable, "n": flag.n_asked,
             "model": flag.model, "dataset": flag.dataset, "strategy": flag.strategy, "subject": flag.criterion,
             "source": "votes", "definition": "questions on which the judges that are not constant cast more than "
                                              "half of the valid votes (could have decided the majority)"}
            for flag in flags if flag.n_outvotable is not None]


def constructed_values(
    keys: Sequence[tuple[str, str, str, str]], flags: Sequence[ConstructionFlag]
) -> set[tuple[str, str, str, str]]:
    """Of ``keys`` ((model, dataset, strategy, metric)), those whose value could not have come out
    otherwise: what :func:`mark_by_construction` marks ‡ in the tables, for the item explorer."""
    by_cell = _flags_by_cell(flags)
    return {key for key in keys if _decided(key[3], _criteria(key[3]), by_cell.get(key[:3], {}))}
