"""How the reports name and order things: strategy and criterion labels, cell order, missing values.

Shared by the tables, the figures and the HTML report, so a label is written one way everywhere;
metric labels are the metrics' own (:mod:`bloomqg.metrics.registry`).

Strategies are named by their ``label`` (:class:`bloomqg.inputs.strategies.StrategySpec`): the
workflow hands the reporting functions ``strategy_labels`` = {name: label} in the defined order
(:func:`bloomqg.inputs.strategies.strategy_labels`), which is also the order strategies are shown in.
Without it the built-ins' labels apply, and a strategy no mapping names is shown by its name as
written (never upper-cased: the name is the user's).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import pandas as pd

from bloomqg.inputs.strategies import BUILTIN_STRATEGIES


#: How the built-in strategies are written when no ``strategy_labels`` are given.
STRATEGY_LABEL: dict[str, str] = {name: spec.label for name, spec in BUILTIN_STRATEGIES.items()}
#: {strategy name: label}, in the order the strategies are defined (and shown).
StrategyLabels = Mapping[str, str]

CRITERION_LABEL: dict[str, str] = {
    "unique": "Unique",
    "readable": "Readable",
    "answerable": "Answerable",
    "bloom_level": "Bloom level",
    "knowledge_units": "Knowledge units",
}

#: A criterion as the object of "agree on …" in a sentence.
CRITERION_PHRASE: dict[str, str] = {
    "unique": "whether a question is unique",
    "readable": "whether a question is readable",
    "answerable": "whether a question is answerable",
    "bloom_level": "Bloom levels",
    "knowledge_units": "knowledge units",
}

#: How the agreement coefficients are written.
COEFFICIENT_SYMBOL: dict[str, str] = {"alpha": "α", "ac1": "AC1"}

MISSING = "–"  # en dash: no value (no data, or every item of the cell was excluded)
#: An empty panel's or row's mark, always followed by why it is empty.
EMPTY = "—"


def is_missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def strategy_label(strategy: str, strategy_labels: StrategyLabels | None = None) -> str:
    """The strategy's label: from ``strategy_labels``, else a built-in's, else its name."""
    if strategy_labels and strategy in strategy_labels:
        return str(strategy_labels[strategy])
    return STRATEGY_LABEL.get(strategy, strategy)


def strategy_order(strategies: Iterable[str], strategy_labels: StrategyLabels | None = None) -> list[str]:
    """The distinct ``strategies`` in defined order (``strategy_labels``' order, else the
    built-ins'), then any other as first seen."""
    present = ordered_unique(strategies)
    defined = list(strategy_labels) if strategy_labels else list(STRATEGY_LABEL)
    return [s for s in defined if s in present] + [s for s in present if s not in defined]


def cell_label(dataset: str, strategy: str, strategy_labels: StrategyLabels | None = None) -> str:
    """The column-group label of a (dataset, strategy) cell, e.g. ``cs, CoT``."""
    return f"{dataset}, {strategy_label(strategy, strategy_labels)}"


def ordered_unique(values: Iterable) -> list:
    """Distinct values in order of first appearance (the config's order survives the pipeline)."""
    return list(dict.fromkeys(v for v in values if not is_missing(v)))


def ordered_cells(
    all_metrics: pd.DataFrame, dataset_order: Sequence[str] = (), strategy_labels: StrategyLabels | None = None
) -> list[tuple[str, str]]:
    """(dataset, strategy) cells: datasets in ``dataset_order`` then first appearance; strategies
    in defined order (:func:`strategy_order`)."""
    datasets = list(dataset_order) + [d for d in ordered_unique(all_metrics["dataset"]) if d not in dataset_order]
    cells = []
    for dataset in datasets:
        strategies = all_metrics.loc[all_metrics["dataset"] == dataset, "strategy"]
        cells.extend((dataset, strategy) for strategy in strategy_order(strategies, strategy_labels))
    return cells


def metric_index(all_metrics: pd.DataFrame) -> dict[tuple[str, str, str, str], pd.Series]:
    return {
        (r["model"], r["dataset"], r["strategy"], r["metric"]): r
        for _, r in all_metrics.iterrows()
    }


def annotated_config_yaml(config: Mapping, meanings: Mapping[str, str]) -> str:
    """``config`` as YAML with each key's meaning (the first sentence of ``meanings``' entry for its
    dotted pattern, ``*`` for an entry's name: :func:`bloomqg.tools.config_docs.config_meanings`)
    as a comment line above it, so a reader need not look a key up (``plan.alpha`` is a significance
    level, not Krippendorff's α)."""
    import fnmatch
    import re

    import yaml

    line_key = re.compile(r"^(?P<indent> *)(?P<key>[^\s#:-][^:]*):(?: |$)")
    path: list[str] = []
    out = []
    for line in yaml.safe_dump(config, sort_keys=False, allow_unicode=True).splitlines():
        match = line_key.match(line)
        if match:
            depth = len(match["indent"]) // 2
            path = [*path[:depth], match["key"]]
            dotted = ".".join(path)
            meaning = next((text for pattern, text in meanings.items()
                            if "*" not in pattern and pattern == dotted), None) or next(
                (text for pattern, text in meanings.items() if "*" in pattern and fnmatch.fnmatchcase(dotted, pattern)
                 and pattern.count(".") == dotted.count(".")), None)
            if meaning:
                first = re.split(r"(?<=\.)\s(?=[A-Z])", meaning.strip(), maxsplit=1)[0]
                out.append(f"{match['indent']}# {first}")
        out.append(line)
    return "\n".join(out) + "\n"
