"""What a metric is, for everyone who shows it: :class:`MetricSpec`.

Each metric module declares the specs of the metrics it computes beside the code that computes
them; :mod:`bloomqg.metrics.cell` lines them up in output order (:data:`METRIC_SPECS`). Tables,
figures, the report and the release tables read labels, units and decimals from here and from
nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: How a metric's value is formed, which decides its scale and interval:
#: ``percent``: a ratio in 0..100; ``score``: a raw mean; ``sum``: a raw total (Σ of the
#: numerator, the denominator only counts); ``count``: a number of rows, without an interval.
MetricKind = Literal["percent", "score", "sum", "count"]

#: The per-question outcome a paired strategy-vs-strategy test compares: 0/1 (McNemar) or graded (Wilcoxon).
PairedOutcome = Literal["binary", "graded"]


@dataclass(frozen=True)
class MetricSpec:
    """One metric: its column name and everything needed to compute, gate and show it."""

    #: The ``metric`` value of the METRICS frame.
    name: str
    #: Display name, e.g. ``"CogReg total |Δ|"``.
    label: str
    kind: MetricKind
    #: True when a larger value is better, False when smaller is, None when neither (counts,
    #: the shift shares and magnitudes describe rather than rank).
    higher_is_better: bool | None
    #: Unit a value is written with: ``"%"``, ``"levels"`` or ``"questions"``.
    unit: str
    #: Judging criteria the metric depends on, for the α gate (empty: none).
    criteria: frozenset[str] = frozenset()
    #: Display name in the tables (ASCII, so the LaTeX compiles with pdflatex); default ``label``.
    short_label: str | None = None
    #: Decimals of the value and of its confidence interval in the tables.
    decimals: int = 2
    ci_decimals: int = 1
    #: The paper table the metric belongs to: ``table4`` (quality), ``table5`` (usability),
    #: ``table6`` (cognitive shift), ``auxiliary`` (the auxiliary tasks and counts), or None.
    paper_table: str | None = None
    paired_outcome: PairedOutcome | None = None
    #: The range of one question's outcome (a rate's 0/1, KnowCov's coverage fraction, CogShift's
    #: |Δ|): what the score interval of a bounded mean rescales by; None for counts.
    outcome_range: tuple[float, float] | None = (0.0, 1.0)
    #: True where the mean (and a paired difference) takes the betting interval
    #: (:func:`bloomqg.metrics.intervals.betting_mean_interval`): outcomes on a scale of levels,
    #: which vary far less than a yes/no outcome of their mean; False: the rate's interval on the
    #: rescaled mean (KnowCov's fractions, mostly 0 or 1, where that one measured narrower).
    betting_interval: bool = False
    #: One sentence a reader who never met the metric understands (the report's glossary).
    definition: str = ""

    @property
    def percent(self) -> bool:
        return self.kind == "percent"

    @property
    def graded(self) -> bool:
        """True when one question's outcome can lie between its range's ends (KnowCov's
        fractions, |Δ| in levels), so its interval is a bounded mean's; False for 0/1 shares."""
        return self.paired_outcome == "graded" or self.kind in ("score", "sum")

    @property
    def is_count(self) -> bool:
        return self.kind == "count"

    @property
    def scale(self) -> float:
        """Factor from a ratio to the value written (100 for percentages)."""
        return 100.0 if self.percent else 1.0

    @property
    def table_label(self) -> str:
        return self.short_label or self.label
