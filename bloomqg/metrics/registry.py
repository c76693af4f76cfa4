"""Every metric's :class:`~bloomqg.metrics.spec.MetricSpec`, in the order a metrics frame lists them.

The specs are declared beside the code computing them; this module only lines them up.
"""

from __future__ import annotations

from bloomqg.metrics.auxiliary import AUXILIARY_SPECS
from bloomqg.metrics.cognitive import COGNITIVE_SPECS
from bloomqg.metrics.counts import COUNT_SPECS
from bloomqg.metrics.knowcov import KNOWCOV_SPECS
from bloomqg.metrics.quality import QUALITY_SPECS
from bloomqg.metrics.spec import MetricSpec

METRIC_SPECS: tuple[MetricSpec, ...] = (
    *QUALITY_SPECS, *COGNITIVE_SPECS, *KNOWCOV_SPECS, *AUXILIARY_SPECS, *COUNT_SPECS
)
SPEC_BY_NAME: dict[str, MetricSpec] = {spec.name: spec for spec in METRIC_SPECS}
METRIC_NAMES: tuple[str, ...] = tuple(SPEC_BY_NAME)
#: Metrics written as percentages (0..100).
PERCENT_METRICS: frozenset[str] = frozenset(spec.name for spec in METRIC_SPECS if spec.percent)


def metric_spec(name: str) -> MetricSpec:
    """The spec of ``name``; an unknown name raises, naming the known ones."""
    try:
        return SPEC_BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown metric {name!r}; known: {', '.join(METRIC_NAMES)}") from None


def table_label(name: str) -> str:
    """The tables' display name of a metric, or the name itself for one that is not a metric."""
    spec = SPEC_BY_NAME.get(name)
    return name if spec is None else spec.table_label


def paper_table_metrics(table: str) -> tuple[str, ...]:
    """The metrics of one paper table (``table4``, ``table5``, ``table6``, ``auxiliary``), in order."""
    names = tuple(spec.name for spec in METRIC_SPECS if spec.paper_table == table)
    if not names:
        raise KeyError(f"no metric belongs to paper table {table!r}")
    return names

