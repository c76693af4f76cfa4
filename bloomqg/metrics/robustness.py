"""How far a CoT-vs-FGP comparison can be trusted: does its sign and significance hold under
Dawid–Skene instead of the majority, and when any one judge is left out of the panel?

Each *panel variant* relabels the yes/no criteria (unique, readable, answerable, hence useful)
from the per-judge votes (``*_votes``) and reruns the existing paired test
(:func:`bloomqg.metrics.paired.paired_comparisons`): ``majority`` (the votes as stored),
``dawid_skene`` (each question's most probable label), and ``without <judge>`` (the strict
majority of the remaining judges: with two left, a split is no label). A metric fed by a
criterion without per-judge votes (the paper's release: Bloom level, so CatCons and KnowCov's
level) is "not assessable from these votes".

The verdict, one per comparison: **holds** when every variant has the same sign and the same
significance (p < 0.05) as the majority; **depends on judge X** when only leaving out X changes
them (whether or not Dawid–Skene, which discounts an uninformative judge, changes them too);
**depends on the aggregation** when only Dawid–Skene does; **within judge noise** when the
majority's difference is not significant and some variant turns its sign, or when several
variants change it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from bloomqg.metrics.paired import paired_comparisons
from bloomqg.schemas import BINARY_CRITERIA
from bloomqg.voting.dawid_skene import fit_dawid_skene
from bloomqg.voting.majority import majority, useful_from

#: Significance level of the verdicts.
SIGNIFICANCE = 0.05
#: Metrics whose per-question outcome comes from the yes/no criteria only.
VOTE_METRICS: tuple[str, ...] = ("unique", "readable", "answerable", "usability")
NOT_ASSESSABLE = "not assessable from these votes"


def _binary_lists(votes: pd.DataFrame, criterion: str) -> list[list[str | None] | None]:
    return [list(v) if isinstance(v, (list, np.ndarray)) and len(v) else None for v in votes[f"{criterion}_votes"]]


def relabel(votes: pd.DataFrame, variant: str, *, leave_out: int | None = None) -> pd.DataFrame:
    """``votes`` with unique / readable / answerable / useful relabelled under a panel variant:
    ``"majority"`` (unchanged), ``"dawid_skene"`` or ``"without"`` (``leave_out`` = the judge's
    position in the vote lists)."""
    votes = votes.copy()
    if variant == "majority":
        return votes
    for criterion in BINARY_CRITERIA:
        lists = _binary_lists(votes, criterion)
        values: list[bool | None] = []
        if variant == "dawid_skene":
            values = [None] * len(lists)
            # one fit per cell, as the vote does
            for _, group in votes.groupby(["model", "dataset", "strategy"], sort=False):
                rows = [votes.index.get_loc(i) for i in group.index]
                judged = [r for r in rows if lists[r] is not None]
                if not judged:
                    continue
                fit = fit_dawid_skene([lists[r] for r in judged], labels=["0", "1"])
                for position, r in enumerate(judged):
                    label, _ = fit.label_of(position)
                    valid = [v for v in lists[r] if v is not None]
                    values[r] = None if label is None or len(valid) < 2 else label == "1"
        elif variant == "without":
            for row in lists:
                if row is None:
                    values.append(None)
                    continue
                kept = [v for k, v in enumerate(row) if k != leave_out]
                values.append(majority(criterion, kept).value)
        else:
            raise ValueError(f"unknown panel variant {variant!r}")
        votes[criterion] = pd.Series(values, index=votes.index, dtype=object)
    votes["useful"] = [useful_from(u, r, a) for u, r, a in zip(votes["unique"], votes["readable"], votes["answerable"])]
    return votes


def _outcome(row: pd.Series) -> tuple[float, bool]:
    diff, p = row["diff"], row["p_value"]
    return (math.nan if pd.isna(diff) else float(np.sign(diff))), (not pd.isna(p) and p < SIGNIFICANCE)


def verdict(base: pd.Series, variants: dict[str, pd.Series]) -> str:
    """The plain sentence of one comparison (see the module's rules)."""
    sign, significant = _outcome(base)
    changed = [name for name, row in variants.items() if _outcome(row) != (sign, significant)]
    if not changed:
        return "holds"
    flipped = [name for name in changed if _outcome(variants[name])[0] != sign]
    if not significant and flipped:
        return "within judge noise"
    judges = [name.removeprefix("without ") for name in changed if name != "dawid_skene"]
    if len(judges) == 1:
        return f"depends on {judges[0]}" + (" (Dawid–Skene discounts it too)" if "dawid_skene" in changed else "")
    if not judges:
        return "depends on the aggregation (Dawid–Skene)"
    return "within judge noise"


def robustness_table(
    votes: pd.DataFrame,
    judge_names: Sequence[str],
    *,
    metrics: Sequence[str] = ("usability", "unique", "catcons"),
    n_resamples: int = 200,
    seed: int = 0,
) -> pd.DataFrame:
    """One row per CoT-vs-FGP comparison (model × dataset × metric): the majority's difference
    and p, each variant's, and the verdict. ``judge_names`` name the positions of the vote lists."""
    variants = {"majority": relabel(votes, "majority"), "dawid_skene": relabel(votes, "dawid_skene")}
    for position, name in enumerate(judge_names):
        variants[f"without {name}"] = relabel(votes, "without", leave_out=position)
    assessable = [m for m in metrics if m in VOTE_METRICS]
    tests = {
        name: paired_comparisons(frame, metrics=assessable, n_resamples=n_resamples, seed=seed).set_index(
            ["model", "dataset", "metric"]
        ) if assessable else None
        for name, frame in variants.items()
    }
    records = []
    base = paired_comparisons(votes, metrics=list(metrics), n_resamples=n_resamples, seed=seed)
    for row in base.itertuples(index=False):
        record = {"model": row.model, "dataset": row.dataset, "metric": row.metric,
                  "comparison": "fgp - cot", "diff": row.diff, "p_value": row.p_value}
        if row.metric not in VOTE_METRICS:
            record["verdict"] = NOT_ASSESSABLE
        else:
            key = (row.model, row.dataset, row.metric)
            others = {name: tests[name].loc[key] for name in variants if name != "majority"}
            for name, other in others.items():
                record[f"diff [{name}]"] = other["diff"]
                record[f"p [{name}]"] = other["p_value"]
            record["verdict"] = verdict(tests["majority"].loc[key], others)
        records.append(record)
    return pd.DataFrame.from_records(records)
