"""One sentence per figure and table of the report, read from the data it shows.

Pure functions of the frames (:func:`figure_readings`, :func:`table_readings`), so they can be
tested and reused, e.g. in a paper's text.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from bloomqg.inputs.bloom import BLOOM_LEVELS, LEVEL_WEIGHT
from bloomqg.metrics.cognitive import SHIFT_TYPES
from bloomqg.metrics.paired import DEFAULT_PAIRED_METRICS, SIGNIFICANCE, ordered_strategies
from bloomqg.metrics.correlations import FIGURE5_PAIRS
from bloomqg.metrics.registry import metric_spec, table_label
from bloomqg.metrics.rows import unit_set
from bloomqg.metrics.transitions import per_level_accuracy, placed_count, transition_counts
from bloomqg.reporting.display import (
    COEFFICIENT_SYMBOL,
    CRITERION_LABEL,
    EMPTY,
    StrategyLabels,
    cell_label,
    is_missing,
    ordered_unique,
    strategy_label,
)
from bloomqg.reporting.display import strategy_order as display_order
from bloomqg.reporting.facts import cell_mean, judge_means, judge_row_means, metric_values, value_differences
from bloomqg.reporting.figures.confusion import classifying_strategies
from bloomqg.reporting.figures.correlations import MIN_POINTS_FOR_CORRELATION, identifying_strategies
from bloomqg.reporting.tables.model import gated_cells, require_columns
from bloomqg.inputs.strategies import ComparisonSpec
from bloomqg.reporting.construction import construction_caveat, hollow_agreements
from bloomqg.voting.agreement import GATE_RULE, NOT_MEASURED, RELIABLE, UNRELIABLE, recorded_decision
from bloomqg.voting.construction import ConstructionFlag
from bloomqg.store.json_columns import json_mapping

#: What the Answer's paired tests compare on: a pair is an original with the metric's value under both
#: strategies (fewer than the originals both answered where a reply held no question or no judged value).
PAIRED_ORIGINALS = "the originals with a value under both strategies"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def signed(value: float, decimals: int) -> str:
    """``+1.25`` / ``-0.50``; a value that rounds to zero is ``0.00``, with no sign."""
    text = f"{float(value):+.{decimals}f}"
    return text[1:] if not text.strip("+-0.") else text


def strategy_effect(
    all_metrics: pd.DataFrame, metric: str, strategy_labels: StrategyLabels | None = None,
    comparison: ComparisonSpec = ComparisonSpec(),
    strategy_order: Sequence[str] = (),
) -> str | None:
    """"On cs, FGP raised CatCons against CoT for 3 of 4 models and lowered it for 1; the largest change was X (+Y pp)."

    One sentence per dataset and strategy pair of ``comparison`` (each strategy against the
    baseline, by default the first of ``strategy_order`` run, as in the paired table; or every
    pair) run on the same models; None when there is none.
    """
    frame = metric_values(all_metrics, metric)
    label = table_label(metric)
    unit = " pp" if metric_spec(metric).percent else ""  # a difference of percentages
    sentences = []
    for dataset in ordered_unique(frame["dataset"]):
        here = frame[frame["dataset"] == dataset]
        for a, b in comparison.pairs(ordered_strategies(ordered_unique(here["strategy"]), strategy_order)):
            diff = value_differences(all_metrics, metric, dataset, a, b)
            if diff.empty:
                continue
            name_a, name_b = strategy_label(a, strategy_labels), strategy_label(b, strategy_labels)
            n = _plural(len(diff), "model")
            raised, lowered = int((diff > 0).sum()), int((diff < 0).sum())
            if raised == lowered == 0:  # the cells' values, equal: said as values, not as a finding of no difference
                if len(diff) == 1:
                    value = float(here.set_index("strategy")["value"][a])
                    percent = "%" if metric_spec(metric).percent else ""
                    sentences.append(f"On {dataset}, {label} is {value:.2f}{percent} under both {name_a} and {name_b}.")
                else:
                    sentences.append(f"On {dataset}, {label} has equal values under {name_a} and {name_b} for each "
                                     f"of the {n}.")
                continue
            largest = diff.abs().idxmax()
            ns = here[here["model"] == largest].set_index("strategy")["n"]
            over = ("" if ns.reindex([a, b]).isna().any() else
                    f", over n = {int(ns[a])} ({name_a}) and {int(ns[b])} ({name_b}) questions")
            if len(diff) == 1:  # one model: the two cells' values, not a signed difference that reads as a finding
                values = here[here["model"] == largest].set_index("strategy")["value"]
                percent = "%" if metric_spec(metric).percent else ""
                counts = ns.reindex([a, b])
                sentences.append(
                    f"On {dataset}, {label} is " + " and ".join(
                        f"{float(values[s]):.2f}{percent} under {name}"
                        + ("" if counts.isna().any() else f" (n = {int(counts[s])})")
                        for s, name in ((a, name_a), (b, name_b))) + ".")
                continue
            sentences.append(
                f"On {dataset}, {name_b} raised {label} against {name_a} for {raised} of {n} and lowered it "
                f"for {lowered}; the largest change was {largest} ({signed(diff[largest], 2)}{unit}{over})."
            )
    if not sentences:
        return None
    # the cells' values differ as written; whether a difference is real is the paired test's call
    tested = (f"the Answer tests it on {PAIRED_ORIGINALS}" if metric in DEFAULT_PAIRED_METRICS
              else "the Answer does not test it")
    return " ".join(sentences) + f" (Each cell's own value, not a comparison: {tested}.)"


def named_unit_counts(votes: pd.DataFrame) -> dict[tuple[str, str, str], tuple[int, int]]:
    """Per (model, dataset, strategy) whose answers name the original's units: (originals the model
    named a unit for, originals): Knowledge-ID acc. counts one not named as wrong, so a 0% can be
    mostly silence."""
    if "identified_knowledge_units" not in votes:
        return {}
    out = {}
    for (model, dataset, strategy), cell in votes.groupby(["model", "dataset", "strategy"], sort=False):
        found = [unit_set(units) for units in cell["identified_knowledge_units"]]
        if any(units is not None for units in found):  # asked: an empty set is none named
            out[(str(model), str(dataset), str(strategy))] = (sum(bool(units) for units in found), len(found))
    return out


def _named_units_clause(votes: pd.DataFrame, strategy_labels: StrategyLabels | None) -> str:
    silent = [f"{named} of {n} originals in {model}, {cell_label(dataset, strategy, strategy_labels)}"
              for (model, dataset, strategy), (named, n) in named_unit_counts(votes).items() if named < n]
    return (f" The model named a unit for {'; '.join(silent)}; one not named counts as wrong."
            if silent else "")


def metric_range(all_metrics: pd.DataFrame, metric: str, strategy_labels: StrategyLabels | None = None) -> str | None:
    """"Knowledge-ID acc. ranged from 58.0% (m, cs) to 87.6% (m2, social)." or None."""
    frame = metric_values(all_metrics, metric)
    if frame.empty:
        return None
    label = table_label(metric)
    spec = metric_spec(metric)
    unit = "%" if spec.percent else f" {spec.unit}"
    low = frame.loc[frame["value"].idxmin()]
    high = frame.loc[frame["value"].idxmax()]

    def where(row: pd.Series) -> str:
        n = "" if is_missing(row.get("n")) else f", n = {int(row['n'])}"
        return f"{row['model']}, {cell_label(row['dataset'], row['strategy'], strategy_labels)}{n}"

    # cells of a strategy that has the metric somewhere but no value here (nothing to score)
    rows = all_metrics[(all_metrics["metric"] == metric) & all_metrics["strategy"].isin(set(frame["strategy"]))]
    empty = rows[rows["value"].isna()]
    none = ("" if empty.empty else " No value in " + "; ".join(
        f"{r['model']}, {cell_label(r['dataset'], r['strategy'], strategy_labels)}" for _, r in empty.iterrows())
        + " (nothing to score there).")
    if len(frame) == 1:
        return f"{label} was {low['value']:.1f}{unit} ({where(low)}).{none}"
    if f"{low['value']:.1f}" == f"{high['value']:.1f}":  # one value: no "from X to X"
        return (f"{label} was {low['value']:.1f}{unit} in {'both' if len(frame) == 2 else f'all {len(frame)}'} cells "
                f"({'; '.join(where(r) for _, r in frame.iterrows())}).{none}")
    return (
        f"{label} ranged from {low['value']:.1f}{unit} ({where(low)}) "
        f"to {high['value']:.1f}{unit} ({where(high)}).{none}"
    )


def common_design(votes: pd.DataFrame, strategy_labels: StrategyLabels | None = None) -> tuple[pd.DataFrame, list[str]]:
    """(the votes of the model × dataset groups run under every strategy of ``votes``; what was
    left out, e.g. "math (FGP only)"): a dataset only some strategies ran is a difference of
    design, never pooled into a comparison of strategies."""
    strategies = set(votes["strategy"].dropna())
    ran = votes.groupby(["model", "dataset"], sort=False)["strategy"].agg(lambda s: set(s.dropna()))
    full = [key for key, present in ran.items() if present == strategies]
    if len(strategies) < 2 or len(full) == len(ran) or not full:
        return votes, []
    keys = pd.MultiIndex.from_frame(votes[["model", "dataset"]])
    left = [f"{dataset} ({', '.join(strategy_label(s, strategy_labels) for s in display_order(present, strategy_labels))} only)"
            for (model, dataset), present in ran.items() if present != strategies]
    return votes[keys.isin(full)], list(dict.fromkeys(left))


def level_moves(votes: pd.DataFrame, strategy_labels: StrategyLabels | None = None) -> dict[str, tuple[int, int, int, int]]:
    """Per strategy, on the datasets every strategy ran (:func:`common_design`): (useful
    questions with a judged level, how many kept the original's level, moved up, moved down)."""
    compared, _ = common_design(votes, strategy_labels)
    moves = {}
    for strategy in display_order(compared["strategy"], strategy_labels):
        if (found := _moves(compared[compared["strategy"] == strategy])) is not None:
            moves[strategy] = found
    return moves


def _moves(votes: pd.DataFrame) -> tuple[int, int, int, int] | None:
    """(useful questions with a judged level, how many kept the original's level, moved up, moved
    down) of ``votes``; None where none has a judged level."""
    counts = transition_counts(votes, kind="judged")
    if counts.empty:
        return None
    known = counts[counts["original_level"].isin(BLOOM_LEVELS) & counts["other_level"].isin(BLOOM_LEVELS)]
    delta = known["other_level"].map(LEVEL_WEIGHT) - known["original_level"].map(LEVEL_WEIGHT)
    return (int(counts["count"].sum()),
            int(counts.loc[counts["original_level"] == counts["other_level"], "count"].sum()),
            int(known.loc[delta > 0, "count"].sum()), int(known.loc[delta < 0, "count"].sum()))


def classification_accuracy(votes: pd.DataFrame, strategy_labels: StrategyLabels | None = None) -> dict[str, pd.DataFrame]:
    """Per strategy whose answers classify the original: accuracy (%) and n per original level,
    pooled over models (levels with no original left out)."""
    out = {}
    for strategy in classifying_strategies(votes, strategy_labels):
        accuracy = per_level_accuracy(votes[votes["strategy"] == strategy], kind="classified")
        accuracy = accuracy[accuracy["n"] > 0] if len(accuracy) else accuracy
        if not accuracy.empty:
            out[strategy] = accuracy
    return out


def transition_summary(votes: pd.DataFrame, strategy_labels: StrategyLabels | None = None) -> str:
    """Per strategy, of the useful questions with a judged level (CatCons' n, and the sum of the
    figure's panel n's: one definition), the share that kept the original's level (CatCons'
    match) and, of those with both levels known, how many moved up and down; the questions with
    an Uncategorized level on one side have no direction and are counted as such. Strategies are
    compared on the datasets they all ran (:func:`common_design`); the rest is said apart."""
    compared, left_out = common_design(votes, strategy_labels)
    datasets = ordered_unique(compared["dataset"])
    parts = []
    for strategy, (n, same, up, down) in level_moves(votes, strategy_labels).items():
        undirected = n - same - up - down
        # the first strategy's clause says whose questions these are; the others follow it
        counted = " (the questions CatCons counts)" if not parts else ""
        # pooled over datasets, the share is neither dataset's CatCons: say the parts it adds up
        per_dataset = (" (" + "; ".join(f"{d}: {found[1]} of {found[0]}" for d in datasets
                                          if (found := _moves(compared[(compared["strategy"] == strategy)
                                                                       & (compared["dataset"] == d)]))) + ")"
                       if len(datasets) > 1 else "")
        text = (f"under {strategy_label(strategy, strategy_labels)}, of n = {n} useful questions with a judged "
                f"level{counted}, {100 * same / n:.0f}% kept the original's level{per_dataset}, "
                f"{100 * up / n:.0f}% moved up and {100 * down / n:.0f}% moved down")
        if undirected:
            text += f" ({undirected} with an Uncategorized level on one side only have no direction)"
        parts.append(text)
    if not parts:
        return "No useful question with a judged level was judged, so there is no transition to show."
    sentence = "; ".join(parts)
    sentence = sentence[0].upper() + sentence[1:] + "."
    if len(parts) > 1:  # shares of each strategy's own questions read like a ranking; the test is the Answer's
        sentence += f" Each strategy's own questions, not a comparison: the Answer tests CatCons on {PAIRED_ORIGINALS}."
    if left_out:
        sentence = (f"On the datasets every strategy ran: {sentence[0].lower()}{sentence[1:]} Drawn but not compared "
                    f"(only some strategies ran there, a difference of design): {'; '.join(left_out)}.")
    return sentence


def classification_counts(votes: pd.DataFrame, strategy_labels: StrategyLabels | None = None) -> dict[str, tuple[int, int]]:
    """Per strategy whose answers classify the original: (originals the models classified, the
    figure's n; originals with a level, the per-level counts' sum)."""
    return {strategy: (placed_count(transition_counts(votes[votes["strategy"] == strategy], kind="classified")),
                       int(accuracy["n"].sum()))
            for strategy, accuracy in classification_accuracy(votes, strategy_labels).items()}


def classification_summary(votes: pd.DataFrame, strategy_labels: StrategyLabels | None = None) -> str:
    """Per-level accuracy of the models' own classification, pooled over models, under each
    strategy whose answers classify the original (CoT's ``answer_fields``)."""
    parts = []
    counts = classification_counts(votes, strategy_labels)
    for strategy, accuracy in classification_accuracy(votes, strategy_labels).items():
        best = accuracy.loc[accuracy["accuracy"].idxmax()]
        worst = accuracy.loc[accuracy["accuracy"].idxmin()]
        name = strategy_label(strategy, strategy_labels)
        classified, total = counts[strategy]
        # the figure's panel n counts only the classified originals; say how it relates to these
        several = votes.loc[votes["strategy"] == strategy, "model"].nunique() > 1
        pooled = ", pooled over models" if several else ""
        correct = int(round(float((accuracy["accuracy"] * accuracy["n"]).sum()) / 100))
        mostly = (", so these shares mostly count the originals left unclassified" if 2 * classified < total else "")
        # the per-level counts pool the datasets; the auxiliary table gives each dataset's n
        datasets = sorted(votes.loc[votes["strategy"] == strategy, "dataset"].unique())
        pooled_over = f", pooled over {' and '.join(datasets)}" if len(datasets) > 1 else ""
        coverage = (f"Of these {total} originals{pooled_over}, the model{'s' if several else ''} classified "
                    f"{classified} (the figure's n{', summed over its models' if several else ''}) and got {correct} "
                    f"of them right; one not classified counts as wrong here{mostly}.")
        if f"{best['accuracy']:.0f}" == f"{worst['accuracy']:.0f}":  # one value: no "most and least"
            sizes = set(accuracy["n"].astype(int))
            levels = (f"{', '.join(accuracy['original_level'])} ({sizes.pop()} originals each)"
                      if len(sizes) == 1 else
                      ", ".join(f"{r['original_level']} ({int(r['n'])} originals)" for _, r in accuracy.iterrows()))
            parts.append(f"Under {name}{pooled}, classification of the originals was "
                         f"{best['accuracy']:.0f}% accurate at every level: {levels}. {coverage}")
            continue
        parts.append(
            f"Under {name}{pooled}, classification of the originals was most accurate for "
            f"{best['original_level']} ({best['accuracy']:.0f}% of {int(best['n'])}) and least for "
            f"{worst['original_level']} ({worst['accuracy']:.0f}% of {int(worst['n'])}). {coverage}"
        )
    return " ".join(parts) if parts else (
        f"{EMPTY} No model classified the original questions: no strategy run asks for the original's level.")


def correlation_summary(all_metrics: pd.DataFrame, correlations: pd.DataFrame | None, strategy_labels: StrategyLabels | None = None) -> str:
    """The Figure 5 correlations in words, from the correlations frame, under each strategy whose
    answers identify level and units."""
    identifying = ordered_unique(s for x, _ in FIGURE5_PAIRS for s in identifying_strategies(all_metrics, x, strategy_labels))
    names = ", ".join(strategy_label(s, strategy_labels) for s in identifying)
    if not identifying:
        return f"{EMPTY} Not estimated: no strategy run asks the model to identify the original's level and units."
    n_models = all_metrics.loc[all_metrics["strategy"].isin(identifying), "model"].nunique()
    if n_models < MIN_POINTS_FOR_CORRELATION:
        return (f"{EMPTY} Not estimated: the run has {_plural(n_models, 'model')} under {names} and a correlation "
                f"across models needs at least {MIN_POINTS_FOR_CORRELATION}.")
    if correlations is None or correlations.empty:
        return "No correlations were computed for this run."
    parts = []
    for x_metric, y_metric in FIGURE5_PAIRS:
        rows = correlations[(correlations["x_metric"] == x_metric) & (correlations["y_metric"] == y_metric)
                            & correlations["strategy"].isin(identifying)]
        methods = rows["method"] if "method" in rows else pd.Series("pearson", index=rows.index)
        for dataset, strategy in dict.fromkeys(zip(rows["dataset"], rows["strategy"])):
            mine = (rows["dataset"] == dataset) & (rows["strategy"] == strategy)
            estimates = {m: r for m, r in zip(methods[mine], rows[mine].itertuples(index=False))}
            where = dataset if len(identifying) == 1 else f"{dataset} under {strategy_label(strategy, strategy_labels)}"
            pearson, spearman = estimates.get("pearson"), estimates.get("spearman")
            if pearson is None or is_missing(pearson.r):
                continue
            text = (f"r({table_label(x_metric)}, {table_label(y_metric)}) = {signed(pearson.r, 2)} on {where} "
                    f"(p = {pearson.p_value:.2g}, n = {pearson.n}")
            if spearman is not None and not is_missing(spearman.r):
                text += f"; Spearman ρ = {signed(spearman.r, 2)}"
            parts.append(text + ")")
    return (f"Across models under {names}: " + "; ".join(parts) + ".") if parts else \
        f"The correlations frame has no rows under {names} for these metric pairs."


def closest_pair(reliability: pd.DataFrame, model: str, dataset: str, strategy: str,
                 criterion: str) -> tuple[str, str, float] | None:
    """The two judges of one criterion × cell with the highest Cohen's κ between them (the judge
    rows' ``kappa_pairwise``), as (judge, judge, κ); None without pairwise κ. Beside a low α it
    says whether any two judges agree beyond chance where the third does not."""
    best: tuple[str, str, float] | None = None
    for judge, kappas in _pairwise_kappas(reliability, model, dataset, strategy, criterion).items():
        for other, kappa in kappas.items():
            if best is None or kappa > best[2]:
                best = (judge, other, kappa)
    return best


def outside_pair(reliability: pd.DataFrame, model: str, dataset: str, strategy: str, criterion: str,
                 pair: tuple[str, str, float] | None) -> list[tuple[str, list[float]]]:
    """The judges of one criterion × cell other than ``pair``'s two (:func:`closest_pair`), each with
    its Cohen's κ with each of the two: beside a pair that carries an AC1 pass, whether the panel's
    other judges agree with it or not."""
    if pair is None:
        return []
    out = []
    for judge, kappas in _pairwise_kappas(reliability, model, dataset, strategy, criterion).items():
        values = [kappas[j] for j in pair[:2] if j in kappas]
        if judge not in pair[:2] and values:
            out.append((judge, values))
    return out


def _pairwise_kappas(reliability: pd.DataFrame, model: str, dataset: str, strategy: str,
                     criterion: str) -> dict[str, dict[str, float]]:
    """judge → {other judge: Cohen's κ} of one criterion × cell (the judge rows' ``kappa_pairwise``,
    undefined κ left out); {} for files written before pairwise κ existed."""
    if "kappa_pairwise" not in reliability:
        return {}
    rows = reliability[(reliability["model"] == model) & (reliability["dataset"] == dataset)
                       & (reliability["strategy"] == strategy) & (reliability["criterion"] == criterion)
                       & reliability["judge"].notna()]
    return {str(judge): {str(other): float(kappa) for other, kappa in json_mapping(raw).items()
                         if kappa is not None and not math.isnan(float(kappa))}
            for judge, raw in zip(rows["judge"], rows["kappa_pairwise"])}


def gate_summary(reliability: pd.DataFrame, strategy_labels: StrategyLabels | None = None,
                 construction: Sequence[ConstructionFlag] = ()) -> dict[str, Any]:
    """The gate's settings and its rule (:data:`~bloomqg.voting.agreement.GATE_RULE`), its decision
    per criterion × cell by that one rule (:func:`bloomqg.voting.agreement.gate_decision`, as
    recorded), the agreements it flagged and its effect in words. ``construction``: the cells'
    construction flags; an agreement the gate calls reliable where at most one judge's votes vary
    is counted apart (``by_construction``): it is the panel's make-up, no evidence of agreement."""
    require_columns(reliability, ["judge", "criterion", "alpha", "gate_threshold", "gate_action", "gate_passed",
                                  "model", "dataset", "strategy"], "reliability")
    panel = reliability[reliability["judge"].isna()]
    decisions = [recorded_decision(row) for row in panel.to_dict("records")]
    configured = [c for c in ordered_unique(panel.get("gate_coefficient", pd.Series(dtype=object))) if isinstance(c, str)]
    coefficient = "Gwet's AC1" if configured == ["ac1"] else "Krippendorff's α"
    thresholds = [float(t) for t in ordered_unique(panel["gate_threshold"])]
    actions = [str(a) for a in ordered_unique(panel["gate_action"])]
    status_counts = {status: sum(d.status == status for d in decisions) for status in (RELIABLE, UNRELIABLE, NOT_MEASURED)}
    hollow = hollow_agreements(construction)
    by_construction = [
        {"model": r.model, "dataset": r.dataset, "strategy": strategy_label(r.strategy, strategy_labels),
         "criterion": CRITERION_LABEL.get(r.criterion, r.criterion),
         "coefficient": COEFFICIENT_SYMBOL.get(d.coefficient, d.coefficient), "alpha": d.value,
         "why": construction_caveat(hollow[key])}
        for r, d in zip(panel.itertuples(index=False), decisions)
        if d.status == RELIABLE and (key := (r.model, r.dataset, r.strategy, r.criterion)) in hollow
    ]
    # reliable by AC1 alone (one answer dominating): its α, which can sit below 0 beside it
    by_prevalence = [{"alpha": float(r.alpha), "criterion": CRITERION_LABEL.get(r.criterion, r.criterion),
                      "cell": (f"{r.model} · " if panel["model"].nunique() > 1 else "")
                      + f"{r.dataset} {strategy_label(r.strategy, strategy_labels)}",
                      "pair": (pair := closest_pair(reliability, r.model, r.dataset, r.strategy, r.criterion)),
                      "outside": outside_pair(reliability, r.model, r.dataset, r.strategy, r.criterion, pair)}
                     for r, d in zip(panel.itertuples(index=False), decisions)
                     if d.status == RELIABLE and d.coefficient == "ac1" and not is_missing(r.alpha)]
    # flagged (†): every agreement not shown reliable, except a release's criterion without
    # per-judge votes (gate_passed null), which no vote could have shown either way
    failures = [
        {"model": r.model, "dataset": r.dataset, "strategy": strategy_label(r.strategy, strategy_labels),
         "criterion": CRITERION_LABEL.get(r.criterion, r.criterion),
         "coefficient": COEFFICIENT_SYMBOL.get(d.coefficient, d.coefficient), "alpha": d.value,
         "undefined": d.status == NOT_MEASURED, "why": d.brief_why, "threshold": r.gate_threshold, "action": r.gate_action}
        for r, d in zip(panel.itertuples(index=False), decisions)
        if d.status != RELIABLE and not is_missing(r.gate_passed)
    ]
    threshold_text = ", ".join(f"{t:g}" for t in thresholds) or "n/a"
    if not len(panel):
        effect = "No reliability was computed (no panel-level rows)."
    else:
        hollow_text = (f" ({len(by_construction)} of them only by construction: at most one judge's votes vary "
                       "there, so no evidence of agreement)" if by_construction else "")
        effect = (f"Of {len(panel)} criterion × cell agreements, {status_counts[RELIABLE]} reliable{hollow_text}, "
                  f"{status_counts[UNRELIABLE]} unreliable and {status_counts[NOT_MEASURED]} not measured "
                  f"(threshold {threshold_text}; the rule is the glossary's \"The gate\").")
        if failures:
            cells = {(f["model"], f["dataset"], f["strategy"]) for f in failures}
            if set(actions) == {"drop"}:
                consequence = ("the flagged criteria's majority votes were removed in those cells, so their "
                               "metrics leave those votes out")
            else:
                consequence = "the metrics those criteria feed are marked † in the tables; no vote was removed"
            effect += (f" {len(failures)} in {_plural(len(cells), 'cell')} are flagged (unreliable, or agreement not "
                       f"measured, which is no evidence of agreement); action '{'/'.join(actions)}': {consequence}.")
        else:
            effect += " Nothing was flagged or dropped."
    # criteria whose agreement no cell could measure: their numbers say nothing about the questions
    statuses = pd.DataFrame({"criterion": panel["criterion"].to_numpy(), "status": [d.status for d in decisions]}) \
        if len(panel) else pd.DataFrame(columns=["criterion", "status"])
    never_measured = [CRITERION_LABEL.get(c, c) for c, g in statuses.groupby("criterion", sort=False)
                      if (g["status"] == NOT_MEASURED).all()]
    return {"thresholds": thresholds, "actions": actions, "failures": failures, "effect": effect,
            "n_panel": len(panel), "coefficient": coefficient, "status_counts": status_counts, "rule": GATE_RULE,
            "by_construction": by_construction, "never_measured": never_measured, "by_prevalence": by_prevalence}


def _reliability_reading(gate: dict[str, Any]) -> str:
    """The reliability figure's one line: the gate's outcomes counted (the section says the rest)."""
    counts = gate["status_counts"]
    if not gate["n_panel"]:
        return gate["effect"]
    hollow = len(gate.get("by_construction") or [])
    hollow_text = f" ({hollow} only by construction)" if hollow else ""
    return (f"Of {gate['n_panel']} criterion × cell agreements, {counts[RELIABLE]} reliable{hollow_text}, {counts[UNRELIABLE]} "
            f"unreliable and {counts[NOT_MEASURED]} not measured; what the gate flagged, and why: Judge reliability.")


def parse_failure_summary(all_metrics: pd.DataFrame, reliability: pd.DataFrame, strategy_labels: StrategyLabels | None = None) -> str:
    """Mean and worst generation parse-failure rate, and the judges' mean."""
    frame = metric_values(all_metrics, "parse_failure_rate")
    parts = []
    if (mean := cell_mean(all_metrics, "parse_failure_rate")) is not None:
        worst = frame.loc[frame["value"].idxmax()]
        parts.append(
            f"Generation parse failures averaged {mean.value:.1f}% over {_plural(mean.n_cells, 'cell')}; "
            f"the highest was {worst['model']} ({cell_label(worst['dataset'], worst['strategy'], strategy_labels)}: {worst['value']:.1f}%)."
        )
    per_judge = judge_means(reliability, "parse_failure_rate")
    if len(per_judge) and float(per_judge.max()) == 0.0:  # naming a "worst" of all-zero rates misleads
        parts.append("Every judge's reply could be parsed every time (0.0% failures in every cell; an abstention is "
                     "a parsed reply).")
    elif len(per_judge):
        worst_judge = per_judge.idxmax()
        parts.append(f"Among judges, {worst_judge} failed to give a parsable answer most often ({per_judge.max():.1f}%, "
                     "the mean of its rates per cell and criterion).")
    return " ".join(parts) if parts else "No parse-failure rates were recorded."


#: Below this many questions a single cell's value is read as a pointer, not ranked above the others.
FEW_QUESTIONS = 10

#: The shifts in words where their size is read, so CogReg &c. name only the shares of Table 6.
_SHIFT_WORDS = {"cogreg": "regressions", "cogdrift": "drifts", "cogleap": "leaps"}


def shift_score_summary(all_metrics: pd.DataFrame, strategy_labels: StrategyLabels | None = None) -> str:
    """Mean shift scores per type and the largest single value."""
    frames = {m: metric_values(all_metrics, f"{m}_mean") for m in SHIFT_TYPES}
    present = {m: f for m, f in frames.items() if not f.empty}
    if not present:
        return "No mean shift scores were computed."

    def averaged(m: str) -> str:  # over the questions the means are over, where the rows say
        mean = cell_mean(all_metrics, f"{m}_mean")
        assert mean is not None  # present
        # a mean of the cells' means, not of the questions pooled: said so beside the questions' count
        over = ("one cell's mean" if mean.n_cells == 1 else f"mean of {mean.n_cells} cells' means") + (
            "" if mean.n_items is None else f", n = {mean.n_items}")
        return f"{_SHIFT_WORDS.get(m, table_label(m))} {mean.value:.2f} levels ({over})"

    means = ", ".join(averaged(m) for m in present)
    stacked = pd.concat([f.assign(kind=m) for m, f in present.items()])
    top = stacked.loc[stacked["value"].idxmax()]
    n_top = "" if is_missing(top.get("n")) else f", n = {int(top['n'])}"
    few = not is_missing(top.get("n")) and int(top["n"]) < FEW_QUESTIONS
    # the labels name the shares of Table 6 too: say these are the mean sizes of those shifts
    lead = (f"Averaged over cells, questions that moved by 2+ levels down, 1 level, or 2+ levels up (Table 6 "
            f"counts them as shares: CogReg, CogDrift, CogLeap) moved by: {means}")
    if few:  # a mean of a few questions is not singled out as the largest
        return f"{lead}; no cell is singled out (the highest mean rests on {int(top['n'])} question{'' if int(top['n']) == 1 else 's'}, too few)."
    return (f"{lead}; the largest was {_SHIFT_WORDS.get(str(top['kind']), table_label(top['kind']))} "
            f"for {top['model']} ({cell_label(top['dataset'], top['strategy'], strategy_labels)}: "
            f"{top['value']:.2f} levels{n_top}).")


#: The metrics each figure's or table's reading reports, for the gate's caveat after it.
READING_METRICS: dict[str, tuple[str, ...]] = {
    "fig2_transitions": ("catcons",),
    "fig3_shift_scores": ("cogreg_mean", "cogdrift_mean", "cogleap_mean"),
    "table4_quality": ("unique", "readable", "answerable"),
    "table5_usability": ("usability", "catcons", "knowcov"),
    "table6_cognitive_shift": ("cogreg", "cogdrift", "cogleap"),
}


def flagged_criteria(reliability: pd.DataFrame) -> dict[tuple[str, str, str], set[str]]:
    """Per (model, dataset, strategy): the criteria the gate did not find reliable there (by its
    one rule, as recorded), leaving out a release's criterion without per-judge votes."""
    panel = reliability[reliability["judge"].isna()]
    out: dict[tuple[str, str, str], set[str]] = {}
    for row in panel.to_dict("records"):
        if recorded_decision(row).status != RELIABLE and not is_missing(row.get("gate_passed")):
            out.setdefault((row["model"], row["dataset"], row["strategy"]), set()).add(str(row["criterion"]))
    return out


def gate_caveat(all_metrics: pd.DataFrame, reliability: pd.DataFrame, metrics: Sequence[str]) -> str:
    """" † All rest on votes the gate flagged (Bloom level): …": said after a reading whose
    values (``metrics``, wherever they have one) read a criterion the gate did not find reliable
    in their cell, naming those criteria; "" where none does. A reading is read alone, so it
    carries the caveat its table's † marks carry."""
    rows = all_metrics[all_metrics["metric"].isin(metrics) & all_metrics["value"].notna()]
    flagged = flagged_criteria(reliability)
    hit: set[str] = set()
    gated = 0
    for row in rows.itertuples(index=False):
        criteria = metric_spec(str(row.metric)).criteria & flagged.get((row.model, row.dataset, row.strategy), set())
        gated += bool(criteria)
        hit |= criteria
    if not gated:
        return ""
    names = ", ".join(CRITERION_LABEL.get(c, c) for c in CRITERION_LABEL if c in hit)
    share = "All rest" if gated == len(rows) else "Those marked † in the table rest"
    # each value reads one or more of the named criteria flagged in its own cell, not every one everywhere
    which = names if len(hit) == 1 else f"each on one or more of {names}, in its own cell"
    return f" † {share} on votes the gate flagged ({which}): no evidence about the questions."


def forced_level_caveat(flags: Sequence[ConstructionFlag], strategy_labels: StrategyLabels | None = None) -> str:
    """" ‡ In smollm2 · math · FGP every question with a judged level keeps its original's …":
    the cells whose Bloom level is forced to every original's, said under the figures that draw
    their judged levels (the transitions, and the confusion figure's judged panels)."""
    cells = [f"{f.model} · {f.dataset} · {strategy_label(f.strategy, strategy_labels)}"
             for f in flags if f.forced_to_original]
    if not cells:
        return ""
    return (f" ‡ In {'; '.join(cells)} every question with a judged level keeps its original's by how the panel "
            "is built (the artefact warning says why), so what is drawn for it says nothing about the questions.")


def figure_readings(
    all_metrics: pd.DataFrame,
    votes: pd.DataFrame,
    reliability: pd.DataFrame,
    correlations: pd.DataFrame | None,
    strategy_labels: StrategyLabels | None = None,
    construction: Sequence[ConstructionFlag] = (),
) -> dict[str, str]:
    """One sentence per figure stem, computed from the data the figure shows, with the gate's
    caveat (:func:`gate_caveat`) after those that report judged values, and the forced-level
    caveat (``construction``: the cells' flags) after the transitions."""
    labels = strategy_labels
    readings = {
        "fig2_transitions": transition_summary(votes, labels),
        "fig3_shift_scores": shift_score_summary(all_metrics, labels),
        "fig4_knowledge_id": ((metric_range(all_metrics, "knowledge_id_acc", labels) or "")
                              + _named_units_clause(votes, labels)).strip()
        or f"{EMPTY} No knowledge-identification accuracy was computed: no strategy run asks the model to identify the units.",
        "fig5_correlations": correlation_summary(all_metrics, correlations, labels),
        "fig6_confusion": classification_summary(votes, labels),
        "reliability": _reliability_reading(gate_summary(reliability, labels)),
        "parse_failures": parse_failure_summary(all_metrics, reliability, labels),
    }
    for stem in ("fig2_transitions", "fig6_confusion"):  # both draw the judged levels of every cell
        readings[stem] += forced_level_caveat(construction, labels)
    return _with_gate_caveats(readings, all_metrics, reliability)


def _with_gate_caveats(readings: dict[str, str], all_metrics: pd.DataFrame, reliability: pd.DataFrame) -> dict[str, str]:
    return {stem: text + gate_caveat(all_metrics, reliability, READING_METRICS[stem]) if stem in READING_METRICS else text
            for stem, text in readings.items()}


def table_readings(
    all_metrics: pd.DataFrame,
    reliability: pd.DataFrame,
    paired: pd.DataFrame | None,
    table1: pd.DataFrame | None = None,
    *,
    strategy_labels: StrategyLabels | None = None,
    comparison: ComparisonSpec = ComparisonSpec(),
    strategy_order: Sequence[str] = (),
) -> dict[str, str]:
    """One sentence per table stem (only where the data says something); strategy effects over
    the pairs of ``comparison`` (baseline by default the first of ``strategy_order``)."""
    labels = strategy_labels

    def effect(metric: str) -> str | None:
        return strategy_effect(all_metrics, metric, labels, comparison, strategy_order)

    readings: dict[str, str | None] = {
        "table4_quality": effect("unique") or metric_range(all_metrics, "unique", labels),
        "table5_usability": effect("catcons") or metric_range(all_metrics, "catcons", labels),
        "table6_cognitive_shift": effect("cogreg") or metric_range(all_metrics, "cogleap", labels),
        # Tables 7 and 8 give Tables 4 and 6's values per dataset with their intervals: no reading of their own
        "table_auxiliary": metric_range(all_metrics, "classification_acc", labels),
        # no reading for the reliability and parse-failure tables: their figures' readings say it, and the
        # gate's effect is said in full under Judge reliability
        "table_judges": _judge_reading(reliability),
        "table_paired": _paired_reading(paired, labels, all_metrics),
    }
    if table1 is not None and len(table1):
        readings["table1_datasets"] = " ".join(
            f"{row['dataset']}: {int(row['total'])} items over "
            f"{_plural(sum(1 for level in BLOOM_LEVELS if row.get(level, 0)), 'Bloom level')} and "
            f"{_plural(int(row['knowledge_units']), 'knowledge unit')}."
            for _, row in table1.iterrows()
        )
    return _with_gate_caveats({stem: text for stem, text in readings.items() if text}, all_metrics, reliability)


def _judge_reading(reliability: pd.DataFrame) -> str | None:
    """Which judge agrees with the others most and least often: the mean of its rows in the
    judges' table (one per criterion, each averaged over cells), those of Bloom level and knowledge
    units where the study has them (:func:`~bloomqg.reporting.facts.judge_row_means`), so the
    reading can be rebuilt from the table it stands over."""
    agreement, many_only = judge_row_means(reliability)
    if agreement.empty:
        return None
    rows = "those rows below" if many_only else "its rows below"
    # yes/no agreement mostly follows how often one answer is given (its prevalence): not ranked on it
    scope = "On Bloom levels and units, " if many_only else ""
    if f"{agreement.max():.1f}" == f"{agreement.min():.1f}":
        return (f"{scope}{'every' if scope else 'Every'} judge agreed with the others equally often "
                f"({agreement.max():.1f}%, the mean of {rows}).")
    # a judge's name is written as configured, lower case included
    return (f"{scope}{agreement.idxmax()} agreed with the others most often ({agreement.max():.1f}%, the mean of "
            f"{rows}), {agreement.idxmin()} least often ({agreement.min():.1f}%).")


def _paired_reading(paired: pd.DataFrame | None, strategy_labels: StrategyLabels | None = None,
                    all_metrics: pd.DataFrame | None = None) -> str | None:
    """Per strategy pair: how many of its tests have p < 0.05 raw and after Holm, which way the
    Holm-significant ones point, and how many of the p < 0.05 ones rest on votes the gate flagged
    in either arm (``all_metrics``' ``alpha_gated``, the table's †): those are no evidence."""
    if paired is None or paired.empty:
        return None
    tested = paired[paired["p_value"].notna()]
    if tested.empty:
        return f"{EMPTY} No paired test could be computed: no item was answered under both strategies of a pair."
    gated = set() if all_metrics is None else gated_cells(all_metrics)
    parts = []
    for (a, b), rows in tested.groupby(["strategy_a", "strategy_b"], sort=False):
        name_a, name_b = strategy_label(a, strategy_labels), strategy_label(b, strategy_labels)
        raw_rows = rows[rows["p_value"] < SIGNIFICANCE]
        raw = len(raw_rows)
        flagged = sum(any((str(r.model), str(r.dataset), str(s), str(r.metric)) in gated for s in (a, b))
                      for r in raw_rows.itertuples(index=False))
        caveat = ("" if not flagged else
                  f" ({'all' if flagged == raw else flagged} on votes the gate flagged, †: no evidence)")
        holm = rows[rows["p_adjusted"] < SIGNIFICANCE]
        up, down = int((holm["diff"] > 0).sum()), int((holm["diff"] < 0).sum())
        untested = int(((paired["strategy_a"] == a) & (paired["strategy_b"] == b)).sum()) - len(rows)
        without = f" (the other {_plural(untested, 'row')} of the table had no pairs to test)" if untested else ""
        parts.append(f"{name_b} against {name_a}: {raw} of {_plural(len(rows), 'test')} with p < {SIGNIFICANCE:g} unadjusted"
                     f"{caveat}, {len(holm)} after Holm ({up} higher under {name_b}, {down} lower){without}")
    return ("; ".join(parts) + ". Holm adjusts within each metric's family: every pair × model × dataset "
            "tested on that metric. The Answer gives the verdicts.")


def panel_sample_reading(estimates: pd.DataFrame) -> str | None:
    """The "Paid for a sample" table in one sentence: how much of the study the panel judged,
    how far its sample moved the local judges' numbers, and where PPI++ beat the sample alone."""
    rows = estimates[estimates["n"] > 0]
    if rows.empty:
        return None
    cells = estimates.drop_duplicates(["dataset", "strategy", "model"])
    sampled = cells["n_sampled"].sum()
    judged = cells["big_n"].sum()
    moved = (rows["ppi"] - rows["judges"]).abs().dropna()
    narrower = ((rows["ppi_high"] - rows["ppi_low"]) < (rows["humans_high"] - rows["humans_low"])).sum()
    text = (f"The panel judged {int(sampled)} of {int(judged)} questions in {_plural(len(cells), 'cell')}. ")
    if len(moved):
        text += (f"Its sample moved the local judges' numbers by a median of {moved.median():.1f} points "
                 f"(at most {moved.max():.1f}); ")
    return text + (f"PPI++'s interval was narrower than the panel sample's alone in {int(narrower)} of "
                   f"{len(rows)} metric × cell rows.")


def catcons_plan_clause(catcons: pd.DataFrame, width: float) -> str:
    """What the labels plan says of the share of questions at the original's level (its
    ``catcons_level`` rows: ``reachable``, ``n_needed``, ``half_width_at_n``), as a clause without
    capital or full stop: the labels per cell that bound it to ± ``width`` points, or the
    half-width labelling every question would reach where no number of labels bounds it. The
    share is over every judged question, so it is named apart from CatCons (useful ones only)."""
    reachable = catcons[catcons["reachable"].astype(bool)]
    name = "the share at the original's level (all judged questions)"
    if len(reachable) == len(catcons):
        return f"{int(catcons['n_needed'].max())} labels per cell would bound {name} to ± {width:g} points"
    short = catcons[~catcons["reachable"].astype(bool)]
    return (f"in {len(short)} of {len(catcons)} cells, labelling every question would still leave {name} at up to "
            f"± {float(short['half_width_at_n'].max()):.1f} points, not ± {width:g}: those cells have too few "
            "questions to bound it"
            + (f"; the other cells need up to {int(reachable['n_needed'].max())} labels" if len(reachable) else ""))


def labels_plan_reading(plan: pd.DataFrame) -> str | None:
    """The "How many labels?" table in one sentence: its CatCons rows (the plan's data)."""
    catcons = plan[plan["metric"] == "catcons_level"]
    if catcons.empty:
        return None
    clause = catcons_plan_clause(catcons, float(plan["half_width"].iloc[0]))
    reachable = plan["reachable"].astype(bool)
    rows = ("" if reachable.all() else
            f" None of the table's {len(plan)} rows can be bounded so, even by labelling every question." if not reachable.any()
            else f" Of the table's {len(plan)} rows, {int(reachable.sum())} can be bounded so by labelling part of the "
            "cell; the others not even by labelling every question.")
    # the plan's shares count every judged question, useful or not: its column header says so, and
    # its note how that differs from Table 5's bases
    return f"{clause[0].upper()}{clause[1:]}.{rows}"
