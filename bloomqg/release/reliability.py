"""Agreement, the gate, Dawid–Skene and per-judge diagnostics for imported runs, from the votes a
release publishes.

A release carries each judge's vote per criterion (``*_votes`` columns after import) but not the
judgments themselves, so everything is computed from those lists with the same functions as
:func:`bloomqg.voting.cell.vote_cell` (:func:`bloomqg.voting.cell.measure_criterion`). The
release does not name its judges: they are ``judge 1`` .. ``judge n`` in the order of its vote
lists. A criterion the release gives no per-judge votes for (the paper's release: Bloom level)
cannot be assessed: α and AC1 are NaN with ``gate_passed`` null, which is reported as "not
assessable", never as a failed gate; its published label stays, whatever the aggregation.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from bloomqg.store.frames import CRITERIA, POSTERIOR_CRITERIA, RELIABILITY
from bloomqg.voting.agreement import NO_JUDGE_VOTES, NOT_MEASURED
from bloomqg.voting.alpha import CRITERION_LEVEL
from bloomqg.voting.cell import AGGREGATIONS, GATE_ACTIONS, measure_criterion
from bloomqg.voting.diagnostics import JUDGE_DIAGNOSTIC_COLUMNS
from bloomqg.voting.majority import useful_from, vote_value


def release_judge_names(n_judges: int) -> list[str]:
    """The release's judges, named by their position in its vote lists."""
    return [f"judge {k}" for k in range(1, n_judges + 1)]


def release_reliability(
    votes: pd.DataFrame,
    *,
    gate_alpha: float = 0.7,
    gate_action: str = "flag",
    gate_coefficient: str = "alpha",
    aggregation: str = "majority",
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(votes with ``alpha_gated`` set, relabelled under ``dawid_skene`` and, under ``drop``,
    gated criteria nulled; reliability rows with ``schemas.RELIABILITY`` columns) for one
    imported cell. ``gate_alpha`` is the threshold on ``gate_coefficient``."""
    if gate_action not in GATE_ACTIONS:
        raise ValueError(f"gate_action {gate_action!r} is not one of {list(GATE_ACTIONS)}")
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"aggregation {aggregation!r} is not one of {list(AGGREGATIONS)}")
    votes = votes.copy().reset_index(drop=True)
    cell = {key: (votes[key].iloc[0] if len(votes) else None) for key in ("dataset", "strategy", "model")}
    rows: list[dict[str, Any]] = []
    failed: list[str] = []
    votes["aggregation"] = aggregation
    for criterion in POSTERIOR_CRITERIA:
        votes[f"{criterion}_posterior"] = None
    for criterion in CRITERIA:
        level = CRITERION_LEVEL[criterion]
        has_votes = [isinstance(v, list) and len(v) > 0 for v in votes[f"{criterion}_votes"]]
        lists = [list(v) for v, keep in zip(votes[f"{criterion}_votes"], has_votes) if keep]
        n_judges = max((len(v) for v in lists), default=0)
        names = release_judge_names(n_judges)
        common = {**cell, "criterion": criterion, "level_of_measurement": level, "n_judges": n_judges,
                  "gate_threshold": float(gate_alpha), "gate_action": gate_action,
                  "gate_coefficient": gate_coefficient,
                  "aggregation": aggregation if criterion in POSTERIOR_CRITERIA and lists else "majority"}
        if not lists:
            rows.append({**common, "judge": None, "alpha": math.nan, "alpha_ci_low": math.nan,
                         "alpha_ci_high": math.nan, "n_items": 0, "gate_passed": None,
                         "gate_status": NOT_MEASURED, "gate_reason": NO_JUDGE_VOTES})
            continue
        measured = measure_criterion(
            criterion, lists, names, gate_coefficient=gate_coefficient, gate_threshold=gate_alpha,
            n_resamples=n_resamples, confidence=confidence, seed=seed,
        )
        if not measured.passed:
            failed.append(criterion)
        if aggregation == "dawid_skene" and criterion in POSTERIOR_CRITERIA and measured.fit is not None:
            positions = [i for i, keep in enumerate(has_votes) if keep]
            values, agreements, posteriors = (list(votes[criterion]), list(votes[f"{criterion}_agreement"]),
                                              list(votes[f"{criterion}_posterior"]))
            for judged, row in enumerate(positions):
                label, probability = measured.fit.label_of(judged)
                valid = [str(v) for v in lists[judged] if v is not None]
                if label is None or len(valid) < 2:
                    continue
                values[row] = vote_value(criterion, label)
                agreements[row] = sum(v == label for v in valid) / len(valid)
                posteriors[row] = probability
            votes[criterion] = pd.Series(values, dtype=object)
            votes[f"{criterion}_agreement"] = pd.Series(agreements, dtype=object)
            votes[f"{criterion}_posterior"] = pd.Series(posteriors, dtype=object)
        result = measured.alpha
        rows.append({
            **common, **measured.panel_columns(common["aggregation"]),
            **dict.fromkeys(JUDGE_DIAGNOSTIC_COLUMNS), "judge": None, "alpha": result.alpha,
            "alpha_ci_low": result.ci_low, "alpha_ci_high": result.ci_high, "n_items": result.n_items,
            "gate_passed": measured.passed,
        })
        for position, name in enumerate(names):
            rows.append({**common, **measured.judges[position], "judge": name,
                         "n_items": sum(len(v) > position and v[position] is not None for v in lists)})
    if aggregation == "dawid_skene":
        votes["useful"] = [useful_from(u, r, a) for u, r, a in zip(votes["unique"], votes["readable"], votes["answerable"])]
    if gate_action == "drop":
        for criterion in failed:
            votes[criterion] = None
            votes[f"{criterion}_agreement"] = None
            votes[f"{criterion}_null_reason"] = "alpha gate"
            if criterion in POSTERIOR_CRITERIA:
                votes[f"{criterion}_posterior"] = None
        if set(failed) & {"unique", "readable", "answerable"}:
            votes["useful"] = [
                useful_from(u, r, a)
                for u, r, a in zip(votes["unique"], votes["readable"], votes["answerable"])
            ]
    votes["alpha_gated"] = bool(failed)
    return votes, pd.DataFrame.from_records(rows, columns=RELIABILITY.names)


def gate_published_lines(lines: pd.DataFrame, reliability: pd.DataFrame) -> pd.DataFrame:
    """The published lines with each criterion the gate dropped (``gate_action`` drop, panel
    row failed) and its agreement set to null, as :func:`release_reliability` does to the votes;
    the judges' votes stay."""
    lines = lines.copy()
    panel = reliability[reliability["judge"].isna()]
    dropped = panel[(panel["gate_action"] == "drop") & (panel["gate_passed"] == False)]  # noqa: E712 (null is not a failure)
    for criterion in dropped["criterion"]:
        for column in (criterion, f"{criterion}_agreement"):
            if column in lines.columns:
                lines[column] = None
    return lines
