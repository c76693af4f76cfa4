"""How far each headline comparison can be trusted: does its sign and significance hold under
Dawid–Skene instead of the majority, and when any one judge is left out of the panel?

Comparisons: strategy vs strategy for every pair of the config's ``comparisons:``
(:class:`~bloomqg.inputs.strategies.ComparisonSpec`: each strategy against the baseline, or every pair)
in every model × dataset (``b − a``), and model vs model for every dataset × strategy and pair of
models (``b − a``), both paired on the original item (every model rewrites the same originals)
and tested with the paired test of the paired table
(:func:`bloomqg.metrics.paired.compare_outcomes`: McNemar for yes/no outcomes, Wilcoxon for
graded ones).  The verdicts read the raw p: each row asks whether one comparison survives a
change of panel, not which of many comparisons are significant (the paired table's Holm-adjusted
p answers that).

Each *panel variant* relabels the questions from the per-judge votes (``*_votes``):
``majority`` (the votes as stored), ``dawid_skene`` (each cell's Dawid–Skene labels for unique,
readable, answerable and Bloom level; knowledge units stay a majority of sets), and
``without <judge>`` (the strict majority of the remaining judges: with two left, a split is no
label). A metric fed by a criterion without per-judge votes (the paper's release: Bloom level,
so CatCons) is "not assessable from these votes" rather than guessed.

The verdict, one per comparison: **holds** when every variant has the majority's sign and
significance (p < 0.05); **holds where measured** when every variant with a value does but some
have none (not significant under the majority, so a missing value changes nothing it could lose)
and a panel with a judge left out is among those with a value (Dawid–Skene alone reweights the same
judges, so it held under it alone is **not assessable from these votes**); **depends on judge X** when of the leave-one-out panels only the one
without X changes them (whether or not Dawid–Skene, which discounts an uninformative judge,
changes them too); **depends on the aggregation** when only Dawid–Skene does; **significance
depends on X and Y** when the sign holds everywhere but leaving out any of several judges loses
the significance; **within judge noise** when the majority's difference is not significant and
some variant turns its sign, or (significant or not) when leaving out any one of several judges
turns its sign (:func:`verdict_reason` says which of the two, and which panels had no value where a comparison
holds only where measured).  A variant with no value (its
panel labels too few questions for the metric) turns no sign: it only loses the significance.
A comparison with **0 pairs**, or whose majority difference is undefined, is **not compared**:
there is nothing that could hold.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from bloomqg.metrics.cell import row_terms
from bloomqg.metrics.paired import SIGNIFICANCE, compare_outcomes, ordered_strategies, p_phrase
from bloomqg.metrics.registry import metric_spec
from bloomqg.store.frames import CRITERIA, POSTERIOR_CRITERIA
from bloomqg.voting.agreement import nominal_rows
from bloomqg.voting.alpha import CRITERION_LEVEL
from bloomqg.voting.dawid_skene import fit_dawid_skene
from bloomqg.inputs.strategies import ComparisonSpec
from bloomqg.voting.majority import majority, useful_from, vote_value
from bloomqg.store.json_columns import json_mapping

NOT_ASSESSABLE = "not assessable from these votes"
#: The verdict of a comparison with no value to test: no item answered under both arms
#: (0 pairs), or a metric undefined on the pairs there are. Nothing held or failed.
NOT_COMPARED = "not compared"
#: The verdict of a comparison every panel variant leaves as the majority's: same sign, and
#: significant or not alike.
HOLDS = "holds"
#: The verdict of a comparison that every panel variant with a value leaves as the majority's,
#: while some variants have none: it held where it could be seen, not under every panel.
HOLDS_WHERE_MEASURED = "holds where measured"
#: ``comparison`` of a strategy-vs-strategy row and of a model-vs-model row.
STRATEGY_COMPARISON = "strategy vs strategy"
MODEL_COMPARISON = "model vs model"
#: The headline comparisons: strategy vs strategy on these metrics, model vs model on those.
STRATEGY_METRICS: tuple[str, ...] = ("usability", "unique", "readable", "answerable", "catcons", "knowcov")
MODEL_METRICS: tuple[str, ...] = ("catcons", "usability")
ROBUSTNESS_COLUMNS: tuple[str, ...] = (
    "comparison", "dataset", "strategy", "strategy_b", "model", "model_b", "metric", "n_pairs", "value_a",
    "value_b", "value_a_dawid_skene", "value_b_dawid_skene", "diff", "p_value", "verdict", "variants",
)

#: The variants' key of the Dawid–Skene panel (the others are "without <judge>").
DAWID_SKENE = "dawid_skene"


def _lists(votes: pd.DataFrame, criterion: str) -> list[list[Any] | None]:
    """Each row's votes, None where there is no list or no vote in it (all judges failed)."""
    return [
        list(v) if isinstance(v, (list, np.ndarray)) and any(x is not None for x in v) else None
        for v in votes[f"{criterion}_votes"]
    ]


def voted_criteria(votes: pd.DataFrame) -> set[str]:
    """Criteria with per-judge votes somewhere in ``votes``."""
    return {c for c in CRITERIA if any(row is not None for row in _lists(votes, c))}


def _dawid_skene_values(votes: pd.DataFrame, criterion: str) -> list[Any]:
    """Each cell's Dawid–Skene label per row (the stored value where there are no votes)."""
    values = list(votes[criterion])
    raw = _lists(votes, criterion)
    binary = criterion not in ("bloom_level", "knowledge_units")
    for _, group in votes.groupby(["model", "dataset", "strategy"], sort=False):
        rows = [votes.index.get_loc(i) for i in group.index if raw[votes.index.get_loc(i)] is not None]
        if not rows:
            continue
        lists = nominal_rows([raw[r] for r in rows], criterion, CRITERION_LEVEL[criterion])
        fit = fit_dawid_skene(lists, labels=["0", "1"] if binary else None)
        for position, r in enumerate(rows):
            label, _ = fit.label_of(position)
            valid = [v for v in lists[position] if v is not None]
            values[r] = None if label is None or len(valid) < 2 else vote_value(criterion, label)
    return values


def relabel(votes: pd.DataFrame, variant: str, *, leave_out: int | None = None) -> pd.DataFrame:
    """``votes`` relabelled under a panel variant: ``"majority"`` (unchanged), ``"dawid_skene"``
    or ``"without"`` (``leave_out`` = the judge's position in the vote lists); ``useful`` follows."""
    votes = votes.copy()
    if variant == "majority":
        return votes
    if variant not in (DAWID_SKENE, "without"):
        raise ValueError(f"unknown panel variant {variant!r}")
    for criterion in voted_criteria(votes):
        if variant == DAWID_SKENE:
            if criterion not in POSTERIOR_CRITERIA:
                continue
            values = _dawid_skene_values(votes, criterion)
        else:
            values = []
            for row in _lists(votes, criterion):
                if row is None:
                    values.append(None)
                    continue
                kept = [None if v is None else str(v) for k, v in enumerate(row) if k != leave_out]
                voted = majority(criterion, kept).value
                values.append(voted)
        votes[criterion] = pd.Series(values, index=votes.index, dtype=object)
    votes["useful"] = [useful_from(u, r, a) for u, r, a in zip(votes["unique"], votes["readable"], votes["answerable"])]
    return votes


def _outcome(diff: float, p_value: float) -> tuple[float, bool]:
    return (math.nan if pd.isna(diff) else float(np.sign(diff))), (not pd.isna(p_value) and p_value < SIGNIFICANCE)


def _turns_sign(diff: float, sign: float) -> bool:
    """A variant's difference has the other sign (a variant with no value turns nothing)."""
    return not pd.isna(diff) and float(np.sign(diff)) != sign


def verdict(base: pd.Series, variants: dict[str, pd.Series]) -> str:
    """The plain sentence of one comparison (rules in the module's docstring)."""
    if int(base.get("n_pairs", 1) or 0) == 0 or pd.isna(base["diff"]):
        return NOT_COMPARED
    sign, significant = _outcome(base["diff"], base["p_value"])
    if variants and all(pd.isna(row["diff"]) for row in variants.values()):
        # no panel variant has a value: nothing was seen to hold (a "holds" here read as evidence)
        return NOT_ASSESSABLE
    # a variant with no value changes only what was significant (it cannot keep it)
    changed = [name for name, row in variants.items()
               if (significant if pd.isna(row["diff"]) else _outcome(row["diff"], row["p_value"]) != (sign, significant))]
    if not changed:
        if all(not pd.isna(row["diff"]) for row in variants.values()):
            return HOLDS
        # Dawid–Skene alone reweights the same three judges' votes: it cannot show the result
        # survives a change of judges, so with no judge-left-out value nothing was seen to hold
        left_out = [row for name, row in variants.items() if name != DAWID_SKENE]
        return HOLDS_WHERE_MEASURED if any(not pd.isna(row["diff"]) for row in left_out) or not left_out \
            else NOT_ASSESSABLE
    flipped = [name for name in changed if _turns_sign(variants[name]["diff"], sign)]
    if not significant and flipped:
        return "within judge noise"
    judges = [name.removeprefix("without ") for name in changed if name != DAWID_SKENE]
    too = " (Dawid–Skene discounts it too)" if DAWID_SKENE in changed else ""
    if len(judges) == 1:
        return f"depends on {judges[0]}{too}"
    if not judges:
        return "depends on the aggregation (Dawid–Skene)"
    if not flipped:  # the sign holds everywhere, the significance needs several judges
        return f"significance depends on {', '.join(judges[:-1])} and {judges[-1]}"
    return "within judge noise"


def variants_of(raw: Any) -> dict[str, Any]:
    """A robustness row's ``variants`` (JSON text in the file, a mapping once read) as a mapping;
    {} where the row has none."""
    if isinstance(raw, dict):
        return raw
    return json_mapping(raw)


def variant_entry(pair: Any) -> tuple[Any, Any, Any]:
    """(diff, p, n_pairs) of one ``variants`` entry; files written before a field existed give None for it."""
    return tuple((list(pair) + [None, None, None])[:3]) if isinstance(pair, list) else (None, None, None)


def verdict_reason(diff: float, p_value: float, verdict_text: str, variants: dict[str, Sequence[float]]) -> str:
    """Why a row reads "within judge noise": which of its two clauses holds, with the panels that
    turn the sign; why it holds only where measured, or is not assessable though Dawid–Skene has a
    value; an empty string for any other verdict."""
    if verdict_text == HOLDS_WHERE_MEASURED:
        names = {name: name.replace(DAWID_SKENE, "Dawid–Skene") for name in variants}
        missing = [names[name] for name, pair in variants.items() if pd.isna(variant_entry(pair)[0])]
        present = [names[name] for name, pair in variants.items() if not pd.isna(variant_entry(pair)[0])]
        # name the panels it held under: held under Dawid–Skene only is a thinner claim than under four
        return (f"{', '.join(missing)} give{'s' if len(missing) == 1 else ''} no value (too few questions labelled "
                f"without that judge), so it held only under {' and '.join(present) or 'no other panel'}")
    if verdict_text == NOT_ASSESSABLE and variants:
        by_posterior = variant_entry(variants.get(DAWID_SKENE))[0]
        if by_posterior is None or pd.isna(by_posterior):
            return ""
        return (f"no panel with a judge left out labels enough questions; Dawid–Skene, which reweights the same "
                f"judges, gives {by_posterior:+.2f} against the majority's {diff:+.2f}")
    if verdict_text != "within judge noise":
        return ""
    sign, significant = _outcome(diff, p_value)
    flipped = [name.replace(DAWID_SKENE, "Dawid–Skene") for name, pair in variants.items()
               if _turns_sign(variant_entry(pair)[0], sign)]
    if not significant:
        shown = "no p" if pd.isna(p_value) else f"raw p {p_phrase(p_value)}, not < {SIGNIFICANCE:g}"
        if sign == 0:  # nothing to turn: the other panels find a difference where the majority finds none
            return (f"the majority's difference is 0 ({shown}) and {', '.join(flipped)} "
                    f"give{'s' if len(flipped) == 1 else ''} a nonzero one, significant or not")
        return (f"not significant under the majority ({shown}) and "
                f"{', '.join(flipped)} turn{'s' if len(flipped) == 1 else ''} its sign or cancel{'s' if len(flipped) == 1 else ''} it")
    return (f"significant under the majority before Holm's adjustment (raw p {p_phrase(p_value)}), but leaving out any of "
            f"several judges turns its sign or cancels it ({', '.join(flipped)})")


def _pairs(
    votes: pd.DataFrame, comparison: ComparisonSpec, strategy_order: Sequence[str]
) -> list[tuple[str, dict[str, Any], pd.Index, pd.Index]]:
    """(kind, keys, rows of arm a, rows of arm b) of every headline comparison, paired on item_id.

    A strategy row's arms differ in ``strategy`` → ``strategy_b`` (``model_b`` None); a model
    row's in ``model`` → ``model_b`` (``strategy_b`` None)."""
    out = []
    for (model, dataset), group in votes.groupby(["model", "dataset"], sort=True):
        strategies = ordered_strategies(list(group["strategy"]), strategy_order)
        for strategy_a, strategy_b in comparison.pairs(strategies):
            arm_a, arm_b = group[group["strategy"] == strategy_a], group[group["strategy"] == strategy_b]
            common = sorted(set(arm_a["item_id"]) & set(arm_b["item_id"]))
            out.append((STRATEGY_COMPARISON, {"dataset": dataset, "strategy": strategy_a, "strategy_b": strategy_b,
                                              "model": model, "model_b": None},
                        arm_a.set_index("item_id").loc[common, "_row"], arm_b.set_index("item_id").loc[common, "_row"]))
    for (dataset, strategy), group in votes.groupby(["dataset", "strategy"], sort=True):
        models = sorted(group["model"].unique())
        for a, b in itertools.combinations(models, 2):
            arm_a, arm_b = group[group["model"] == a], group[group["model"] == b]
            common = sorted(set(arm_a["item_id"]) & set(arm_b["item_id"]))
            out.append((MODEL_COMPARISON, {"dataset": dataset, "strategy": strategy, "strategy_b": None,
                                           "model": a, "model_b": b},
                        arm_a.set_index("item_id").loc[common, "_row"], arm_b.set_index("item_id").loc[common, "_row"]))
    return out


def robustness_table(
    votes: pd.DataFrame,
    judge_names: Sequence[str],
    *,
    strategy_metrics: Sequence[str] = STRATEGY_METRICS,
    model_metrics: Sequence[str] = MODEL_METRICS,
    comparison: ComparisonSpec = ComparisonSpec(),
    strategy_order: Sequence[str] = (),
    n_resamples: int = 200,
    confidence: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """One row per headline comparison and metric (:data:`ROBUSTNESS_COLUMNS`): the majority's
    values, difference and p, the two arms' values under Dawid–Skene (the headline metric under
    both aggregations side by side; NaN where not assessable), the verdict, and ``variants`` = JSON {variant: [diff, p, n_pairs]} (a panel
    that changes which questions are useful pairs other originals: its n can differ from the majority's).
    ``judge_names`` name the positions of the vote lists; ``comparison`` and ``strategy_order``
    choose the strategy pairs as :func:`bloomqg.metrics.paired.paired_comparisons` does."""
    import json

    votes = votes.reset_index(drop=True).copy()
    votes["_row"] = np.arange(len(votes))
    if votes["item_id"].isna().any():
        raise ValueError("robustness_table: votes without item_id cannot be paired")
    variants = {"majority": relabel(votes, "majority"), DAWID_SKENE: relabel(votes, DAWID_SKENE)}
    for position, name in enumerate(judge_names):
        variants[f"without {name}"] = relabel(votes, "without", leave_out=position)
    have = voted_criteria(votes)
    records = []
    for kind, keys, rows_a, rows_b in _pairs(votes, comparison, strategy_order):
        metrics = strategy_metrics if kind == STRATEGY_COMPARISON else model_metrics
        strategy_a = keys["strategy"]
        strategy_b = keys["strategy_b"] or keys["strategy"]
        terms = {
            name: (row_terms(frame.iloc[rows_a.to_numpy()].reset_index(drop=True), strategy_a),
                   row_terms(frame.iloc[rows_b.to_numpy()].reset_index(drop=True), strategy_b))
            for name, frame in variants.items()
        }
        for metric in metrics:
            results = {
                name: compare_outcomes(a, b, metric, np.random.default_rng(seed), n_resamples=n_resamples,
                                       confidence=confidence)
                for name, (a, b) in terms.items()
            }
            base = results["majority"]
            assessable = metric_spec(metric).criteria <= have
            by_posterior = results[DAWID_SKENE] if assessable else {"a": math.nan, "b": math.nan}
            others = {name: pd.Series(r) for name, r in results.items() if name != "majority"}
            records.append({
                "comparison": kind, **keys, "metric": metric, "n_pairs": base["n_pairs"],
                "value_a": base["a"], "value_b": base["b"],
                "value_a_dawid_skene": by_posterior["a"], "value_b_dawid_skene": by_posterior["b"],
                "diff": base["diff"], "p_value": base["p_value"],
                "verdict": (NOT_COMPARED if not base["n_pairs"] else
                            verdict(pd.Series(base), others) if assessable else NOT_ASSESSABLE),
                "variants": json.dumps({name: [r["diff"], r["p_value"], r["n_pairs"]] for name, r in others.items()}
                                       if assessable else {}),
            })
    return pd.DataFrame.from_records(records, columns=list(ROBUSTNESS_COLUMNS))


def panel_judges(reliability: pd.DataFrame) -> list[str]:
    """The judges in vote-list order, from the RELIABILITY judge rows (the same panel in every
    cell, or a ValueError naming the cells that differ)."""
    rows = reliability[reliability["judge"].notna()]
    panels = {
        cell: list(group.loc[group["criterion"] == group["criterion"].iloc[0], "judge"])
        for cell, group in rows.groupby(["dataset", "strategy", "model"], sort=True)
    }
    distinct = {tuple(panel) for panel in panels.values()}
    if len(distinct) > 1:
        raise ValueError(f"cells were judged by different panels: {panels}")
    return list(distinct.pop()) if distinct else []
