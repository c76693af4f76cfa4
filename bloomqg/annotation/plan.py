"""How many labels? The number of human labels per cell that bounds a calibrated metric's PPI++
interval to a target half-width.

For a 0/1 outcome with judge value f and human value Y, PPI's variance is
Var(Y − f)/n + Var(f)/(N − n), and Var(Y − f) ≤ E[(Y − f)²] = d, the share of items on which
judge and human disagree about the outcome; the humans' own variance is at most p(1 − p) for
the worst true rate p within d of the judges' rate. PPI++ is (asymptotically) no worse than
either, so the plan takes, for each n, the smaller of the two bounds and returns the fewest
labels whose predicted half-width z·sqrt(bound) reaches the target. ``d`` is either measured on
a pilot round (the mean of (Y − f)² over the labelled items of the metric, pooled over cells)
or assumed from a criterion's agreement: an outcome built on one criterion disagrees at most as
often as the criterion does, one built on several at most as often as any of them (the sum).

The assumed agreement is another panel's (the paper's, with people). It stands in only where this
panel rates every criterion of the outcome reliably in the cell (the gate's rule,
:func:`bloomqg.voting.agreement.recorded_decision`): where a criterion failed the gate or its
agreement could not be measured, nothing is assumed of the judges and the plan is for the labels
alone, at the worst-case share of one half (``agreement_source`` "labels alone", ``disagreement``
null): a plan that holds whatever the judges do.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bloomqg.annotation.calibration import METRICS_BY_NAME, OUTCOMES, panel_outcomes
from bloomqg.store.cells import CELL_COLUMNS
from bloomqg.store.frames import ANNOTATION_PLAN
from bloomqg.stats.normal import z_of
from bloomqg.voting.agreement import RELIABLE, gate_statuses

#: Agreement assumed when no pilot round was imported: Table 9's averages (Bloom level 46.58%,
#: unique 90.75%, readable 98.08%, answerable 95.83%); knowledge units 80% (no published figure);
#: Bloom order (three levels) 82%, what human raters reach at three levels.
DEFAULT_ASSUMED_AGREEMENT: dict[str, float] = {
    "bloom_level": 0.4658, "unique": 0.9075, "readable": 0.9808, "answerable": 0.9583,
    "knowledge_units": 0.80, "bloom_order": 0.82,
}
DEFAULT_HALF_WIDTH = 5.0  # percentage points
DEFAULT_CONFIDENCE = 0.95

#: The criteria each calibrated metric's outcome is built on.
METRIC_CRITERIA: dict[str, tuple[str, ...]] = {
    **{m.name: ("bloom_level",) for m in OUTCOMES if m.granularity == "six levels"},
    **{m.name: ("bloom_order",) for m in OUTCOMES if m.granularity == "three levels"},
    "unique": ("unique",), "readable": ("readable",), "answerable": ("answerable",),
    "usable": ("unique", "readable", "answerable"), "catcons_unit": ("knowledge_units",),
    "catcons_both": ("bloom_level", "knowledge_units"),
}

#: The voted criterion whose gate decides whether an outcome's criterion may borrow an assumed
#: agreement (three Bloom levels are read from the six the panel votes).
GATED_CRITERION: dict[str, str] = {"bloom_order": "bloom_level"}

#: ``agreement_source`` of a plan for the labels alone (the panel failed the gate or was not measured).
LABELS_ALONE = "labels alone"
HEADLINE_METRICS: tuple[str, ...] = tuple(m.name for m in OUTCOMES if m.headline)


@dataclass(frozen=True)
class LabelPlan:
    n_needed: int
    reachable: bool
    half_width_at_n: float  # percentage points


def assumed_disagreement(metric: str, agreement: Mapping[str, float]) -> float:
    """The share of items judge and human disagree on ``metric``'s outcome, at most."""
    try:
        criteria = METRIC_CRITERIA[metric]
    except KeyError:
        raise ValueError(f"annotation_plan: unknown metric {metric!r} (known: {', '.join(METRIC_CRITERIA)})") from None
    missing = [c for c in criteria if c not in agreement]
    if missing:
        raise ValueError(f"annotation_plan.assumed_agreement: no value for {missing} (metric {metric!r})")
    return min(1.0, sum(1.0 - float(agreement[c]) for c in criteria))


def predicted_half_width(n: np.ndarray | int, big_n: int, judge_rate: float, judge_variance: float,
                         disagreement: float, confidence: float) -> np.ndarray:
    """The half-width (percentage points) PPI++ is predicted to reach with ``n`` labels."""
    n = np.asarray(n, dtype=np.float64)
    unlabelled = np.maximum(big_n - n, 1.0)
    low, high = max(0.0, judge_rate - disagreement), min(1.0, judge_rate + disagreement)
    worst = 0.25 if low <= 0.5 <= high else max(low * (1 - low), high * (1 - high))
    variance = np.minimum(disagreement / n + judge_variance / unlabelled, worst / n)
    variance = np.where(n >= big_n, worst / big_n, variance)
    return 100.0 * z_of(confidence) * np.sqrt(variance)


def labels_needed(judge: np.ndarray, disagreement: float, *, half_width: float = DEFAULT_HALF_WIDTH,
                  confidence: float = DEFAULT_CONFIDENCE) -> LabelPlan:
    """The fewest labels (≥ 2) for ``half_width`` points, from the judge values of the metric's
    population (NaN: no verdict) and the disagreement share; every item when not reachable."""
    values = np.asarray(judge, dtype=np.float64)
    big_n = len(values)
    if big_n < 1:
        raise ValueError("labels_needed: the metric's population is empty (no generated question)")
    known = values[~np.isnan(values)]
    rate = float(known.mean()) if len(known) else 0.5
    variance = float(known.var()) if len(known) else 0.25
    if big_n < 2:  # one question: labelling it is all there is, and the plan says how wide that is
        width = float(predicted_half_width(1, 1, rate, variance, disagreement, confidence))
        return LabelPlan(1, width <= half_width, width)
    candidates = np.arange(2, big_n + 1)
    widths = predicted_half_width(candidates, big_n, rate, variance, disagreement, confidence)
    ok = np.flatnonzero(widths <= half_width)
    if not len(ok):
        return LabelPlan(big_n, False, float(widths[-1]))
    return LabelPlan(int(candidates[ok[0]]), True, float(widths[ok[0]]))


def pilot_disagreement(joined: pd.DataFrame) -> dict[str, tuple[float, int]]:
    """Per metric, (mean of (human − judge)² over the labelled items with a verdict, items),
    pooled over cells, from :func:`bloomqg.annotation.calibration.joined_items`'s frame."""
    labelled = joined[joined["human"].notna() & joined["judge"].notna()]
    out = {}
    for metric, part in labelled.groupby("metric"):
        squared = (part["human"].astype(float) - part["judge"].astype(float)) ** 2
        out[str(metric)] = (float(squared.mean()), len(part))
    return out


def untrusted_criteria(statuses: Mapping[tuple[str, ...], str] | None, cell: Mapping[str, str],
                       metric: str) -> list[str]:
    """The criteria of ``metric``'s outcome this panel does not rate reliably in ``cell`` (failed
    the gate, or not measured; a criterion without a panel row counts as not measured), each as
    "criterion status" ("bloom level unreliable"); [] when ``statuses`` is None (no panel to check:
    the assumption stands)."""
    if statuses is None:
        return []
    out = []
    for criterion in METRIC_CRITERIA[metric]:
        gated = GATED_CRITERION.get(criterion, criterion)
        status = statuses.get((*(cell[c] for c in CELL_COLUMNS), gated), "not measured")
        if status != RELIABLE:
            out.append(f"{gated.replace('_', ' ')} {status.replace('_', ' ')}")
    return out


def annotation_plan(votes: Sequence[pd.DataFrame], *, half_width: float = DEFAULT_HALF_WIDTH,
                    confidence: float = DEFAULT_CONFIDENCE,
                    assumed_agreement: Mapping[str, float] | None = None,
                    pilot: pd.DataFrame | None = None,
                    reliability: pd.DataFrame | None = None,
                    metrics: Sequence[str] = HEADLINE_METRICS) -> pd.DataFrame:
    """:data:`~bloomqg.store.frames.ANNOTATION_PLAN` for every cell of ``votes`` (one frame per cell)
    and metric: labels needed for ``half_width`` points at ``confidence``. ``pilot``: a joined
    frame of an imported round; its disagreement replaces the assumed one where it has at least
    :data:`MIN_PILOT_ITEMS` labelled items of the metric. ``reliability``: the cells' RELIABILITY
    panel rows; where a criterion of the metric is not reliably rated there, the plan is for the
    labels alone (module docstring)."""
    agreement = {**DEFAULT_ASSUMED_AGREEMENT, **(assumed_agreement or {})}
    measured = pilot_disagreement(pilot) if pilot is not None else {}
    statuses = gate_statuses(reliability) if reliability is not None else None
    records = []
    for frame in votes:
        if not len(frame):
            continue
        cell = {c: str(frame[c].iloc[0]) for c in CELL_COLUMNS}
        judged = panel_outcomes(frame)
        for metric in metrics:
            if metric not in METRICS_BY_NAME:
                raise ValueError(f"annotation_plan: unknown metric {metric!r}")
            values = pd.to_numeric(judged.loc[judged["metric"] == metric, "judge"], errors="coerce").to_numpy(float)
            if not len(values):  # no question of the cell is in the metric's population
                continue
            if metric in measured and measured[metric][1] >= MIN_PILOT_ITEMS:
                disagreement, source = measured[metric][0], f"pilot ({measured[metric][1]} labelled items)"
            elif untrusted := untrusted_criteria(statuses, cell, metric):
                # disagreement 1 makes the bound the labels' own at a share of one half
                disagreement, source = 1.0, f"{LABELS_ALONE} ({', '.join(untrusted)})"
            else:
                disagreement, source = assumed_disagreement(metric, agreement), "assumed"
            plan = labels_needed(values, disagreement, half_width=half_width, confidence=confidence)
            known = values[~np.isnan(values)]
            records.append({
                **cell, "metric": metric, "big_n": len(values),
                "judges": 100.0 * float(known.mean()) if len(known) else None, "judges_n": len(known),
                # labels alone: no disagreement is assumed (the 1 above is the bound's device)
                "disagreement": None if source.startswith(LABELS_ALONE) else disagreement, "agreement_source": source, "half_width": half_width,
                "n_needed": plan.n_needed, "reachable": plan.reachable, "half_width_at_n": plan.half_width_at_n,
            })
    return pd.DataFrame.from_records(records, columns=ANNOTATION_PLAN.names)


#: Fewest labelled items of a metric for a pilot's disagreement to replace the assumed one.
MIN_PILOT_ITEMS = 30
