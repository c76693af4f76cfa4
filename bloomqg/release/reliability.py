"""Krippendorff's α and the gate for imported runs, from the votes a release publishes.

A release carries each judge's vote per criterion (``*_votes`` columns after import) but not the
judgments themselves, so α is computed from those lists with the same coding, bootstrap and gate
rule as :func:`bloomqg.voting.cell.vote_cell`. A criterion the release gives no per-judge votes for
(the paper's release: Bloom level) cannot be assessed: α is NaN with ``gate_passed`` null, which
is reported as "not assessable", never as a failed gate.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from bloomqg.schemas import CRITERIA, RELIABILITY
from bloomqg.voting.alpha import CRITERION_LEVEL, alpha_with_ci, encode_votes
from bloomqg.voting.cell import GATE_ACTIONS


def release_reliability(
    votes: pd.DataFrame,
    *,
    gate_alpha: float = 0.7,
    gate_action: str = "flag",
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(votes with ``alpha_gated`` set and, under ``drop``, gated criteria nulled; reliability
    panel rows with ``schemas.RELIABILITY`` columns) for one imported cell."""
    if gate_action not in GATE_ACTIONS:
        raise ValueError(f"gate_action {gate_action!r} is not one of {list(GATE_ACTIONS)}")
    votes = votes.copy()
    cell = {key: (votes[key].iloc[0] if len(votes) else None) for key in ("dataset", "strategy", "model")}
    rows: list[dict[str, Any]] = []
    failed: list[str] = []
    for criterion in CRITERIA:
        level = CRITERION_LEVEL[criterion]
        lists = [v for v in votes[f"{criterion}_votes"] if isinstance(v, list) and v]
        n_judges = max((len(v) for v in lists), default=0)
        assessable = bool(lists)
        if assessable:
            result = alpha_with_ci(
                encode_votes(lists, level), n_resamples=n_resamples, confidence=confidence, seed=seed
            )
            passed: bool | None = result.no_variation or (
                not math.isnan(result.alpha) and result.alpha >= gate_alpha
            )
            alpha, low, high, n_items = result.alpha, result.ci_low, result.ci_high, result.n_items
        else:
            passed, alpha, low, high, n_items = None, math.nan, math.nan, math.nan, 0
        if passed is False:
            failed.append(criterion)
        rows.append({
            **cell, "criterion": criterion, "judge": None, "alpha": alpha, "alpha_ci_low": low,
            "alpha_ci_high": high, "level_of_measurement": level, "n_items": n_items,
            "n_judges": n_judges, "gate_threshold": float(gate_alpha), "gate_action": gate_action,
            "gate_passed": passed, "agreement_with_majority": None, "parse_failure_rate": None,
        })
    if gate_action == "drop":
        for criterion in failed:
            votes[criterion] = None
            votes[f"{criterion}_agreement"] = None
            votes[f"{criterion}_null_reason"] = "alpha gate"
        if set(failed) & {"unique", "readable", "answerable"}:
            from bloomqg.voting.majority import useful_from

            votes["useful"] = [
                useful_from(u, r, a)
                for u, r, a in zip(votes["unique"], votes["readable"], votes["answerable"])
            ]
    votes["alpha_gated"] = bool(failed)
    return votes, pd.DataFrame.from_records(rows, columns=RELIABILITY.names)


def gate_published_lines(lines: pd.DataFrame, reliability: pd.DataFrame) -> pd.DataFrame:
    """The published lines with each criterion the gate dropped (``gate_action`` drop, panel
    row failed) set to null, as :func:`release_reliability` does to the votes."""
    lines = lines.copy()
    panel = reliability[reliability["judge"].isna()]
    dropped = panel[(panel["gate_action"] == "drop") & (panel["gate_passed"] == False)]  # noqa: E712 (null is not a failure)
    for criterion in dropped["criterion"]:
        if criterion in lines.columns:
            lines[criterion] = None
    return lines
