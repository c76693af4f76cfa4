"""The report's section "Can these judges be trusted?": α and AC1 side by side with percent
agreement and prevalence, each judge's diagnostics (with a figure of its Dawid–Skene sensitivity
and specificity), the panel's effective number of judges, and whether each headline comparison
survives the judges (:mod:`bloomqg.metrics.robustness`).

Self-contained: it reads the RELIABILITY rows and the robustness table and returns the template's
context (``trust``); the figure is drawn here and inlined, so the section needs no figure file.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from bloomqg.metrics.registry import metric_spec
from bloomqg.metrics.paired import DEFAULT_PAIRED_METRICS, FEW_PAIRS, SIGNIFICANCE
from bloomqg.metrics.robustness import (DAWID_SKENE, HOLDS, HOLDS_WHERE_MEASURED, MODEL_COMPARISON, NOT_COMPARED, STRATEGY_COMPARISON,
                                       variant_entry, variants_of, verdict_reason)
from bloomqg.reporting.display import (
    COEFFICIENT_SYMBOL, CRITERION_LABEL, EMPTY, StrategyLabels, is_missing, ordered_unique, strategy_label,
)
from bloomqg.reporting.tables.model import fixed, format_p
from bloomqg.store.frames import BINARY_CRITERIA, RELIABILITY
from bloomqg.voting.agreement import (NOT_MEASURED, PREVALENCE_LIMIT, RELIABLE, UNRELIABLE, gate_statuses,
                                     recorded_decision)
from bloomqg.reporting.construction import construction_caveat, hollow_agreements
from bloomqg.voting.construction import ConstructionFlag
from bloomqg.voting.diagnostics import SUSPICIOUS_REASONS, modal_answer, suspicious_judge_reasons
from bloomqg.store.json_columns import json_mapping


#: A coefficient where the votes carry one published label per question (an imported release): no
#: pairs of judges to compare. Not "not assessable", which the robustness table uses for panels.
NO_PER_JUDGE_VOTES = "no per-judge votes"


def _num(value: Any, decimals: int = 2) -> str:
    return "–" if is_missing(value) else fixed(float(value), decimals)


def _with_ci(value: Any, low: Any, high: Any, decimals: int = 2) -> str:
    if is_missing(value):
        return "–"
    if is_missing(low) or is_missing(high):
        return _num(value, decimals)
    return f"{fixed(float(value), decimals)} [{fixed(float(low), decimals)}, {fixed(float(high), decimals)}]"


def _cell(row: Any, strategy_labels: StrategyLabels | None = None) -> str:
    return f"{row.model} · {row.dataset} · {strategy_label(row.strategy, strategy_labels)}"


def prevalence_text(prevalence: Any) -> str:
    """The prevalence in percent with one decimal: rounded to a whole percent, 89.7% would read
    90% and seem to meet the gate's "≥ 90%" rule."""
    return "–" if is_missing(prevalence) else f"{100 * float(prevalence):.1f}%"


def coefficient_rows(reliability: pd.DataFrame, strategy_labels: StrategyLabels | None = None,
                     construction: Sequence[ConstructionFlag] = ()) -> list[dict[str, str]]:
    """One row per cell × criterion: n, percent agreement, prevalence, α and AC1 with CIs, the
    effective number of judges and the gate's verdict; a "reliable" where at most one judge's
    votes vary (``construction``) says that it is by construction, no evidence of agreement."""
    panel = reliability[reliability["judge"].isna()]
    hollow = hollow_agreements(construction)
    rows = []
    for r in panel.itertuples(index=False):
        assessable = not (is_missing(r.alpha) and (is_missing(r.n_items) or int(r.n_items) == 0))
        decision = recorded_decision(r._asdict())
        symbol = COEFFICIENT_SYMBOL.get(decision.coefficient, decision.coefficient)
        gate_text = {RELIABLE: f"reliable ({symbol} ≥ {_num(r.gate_threshold)})",
                     # the gate's reason where it has one (α's interval below 0), else the threshold
                     UNRELIABLE: f"unreliable ({decision.brief_why or f'{symbol} below {_num(r.gate_threshold)}'})",
                     NOT_MEASURED: f"not measured ({decision.brief_why})"}[decision.status]
        flag = hollow.get((r.model, r.dataset, r.strategy, r.criterion))
        if decision.status == RELIABLE and flag is not None:
            gate_text = (f"reliable by {symbol} ≥ {_num(r.gate_threshold)}, but by construction (no evidence): "
                         f"{construction_caveat(flag)}")
        flagged = (decision.status != RELIABLE and not is_missing(r.gate_passed)) or flag is not None
        rows.append({
            "cell": _cell(r, strategy_labels), "criterion": CRITERION_LABEL.get(r.criterion, r.criterion),
            "n": "0" if is_missing(r.n_items) else str(int(r.n_items)),
            "agreement": _with_ci(r.percent_agreement, r.percent_agreement_ci_low, r.percent_agreement_ci_high),
            "prevalence": "–" if is_missing(r.prevalence) else
            prevalence_text(r.prevalence) + ("" if not isinstance(r.majority_category, str) else
                                             f" ({_category(r.criterion, r.majority_category)})"),
            "alpha": ("undefined (no variance)" if assessable and is_missing(r.alpha) else
                      _with_ci(r.alpha, r.alpha_ci_low, r.alpha_ci_high) if assessable else NO_PER_JUDGE_VOTES),
            "ac1": _with_ci(r.ac1, r.ac1_ci_low, r.ac1_ci_high) if assessable else NO_PER_JUDGE_VOTES,
            "n_eff": _num(r.n_effective_judges, 1), "gate": gate_text,
            "failed": flagged,
        })
    return rows


def _category(criterion: str, label: str) -> str:
    if criterion in BINARY_CRITERIA:
        return {"1": "yes", "0": "no"}.get(label, label)
    return label.replace("|", " + ")  # a unit set in full: a cut name hid which units were meant


def _answers(criterion: str, row: Mapping[str, Any]) -> str:
    """"yes 79%" (a yes/no criterion: how often the judge says yes) or "Apply 93%" (its commonest
    answer and that answer's share of its votes)."""
    if criterion in BINARY_CRITERIA:
        return "–" if is_missing(row.get("vote_rate")) else f"yes {100 * float(row['vote_rate']):.0f}%"
    modal = modal_answer(dict(row))
    return "–" if modal is None else f"{_category(criterion, modal[0])} {100 * modal[1]:.0f}%"


def judge_rows(reliability: pd.DataFrame, strategy_labels: StrategyLabels | None = None) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """(one row per cell × criterion × judge with its diagnostics; the judges flagged, with why)."""
    judges = reliability[reliability["judge"].notna()]
    rows, flagged = [], []
    for (model, dataset, strategy, criterion), group in judges.groupby(
        ["model", "dataset", "strategy", "criterion"], sort=False
    ):
        binary = criterion in BINARY_CRITERIA
        records = group.to_dict("records")
        flags = suspicious_judge_reasons([r["judge"] for r in records], records, binary=binary)
        cell = f"{model} · {dataset} · {strategy_label(strategy, strategy_labels)}"
        for r in records:
            if is_missing(r.get("vote_rate")):
                continue
            pairwise = json_mapping(r.get("kappa_pairwise"))
            agreement = _num(r.get("agreement_with_others"))
            kappa = r.get("kappa_with_others")
            rows.append({
                "cell": cell, "criterion": CRITERION_LABEL.get(criterion, criterion), "judge": r["judge"],
                "n": "–" if is_missing(r.get("n_items")) else str(int(r["n_items"])),
                "answers": _answers(criterion, r),
                "agreement": agreement if is_missing(kappa) else f"{agreement} (κ {_num(kappa)})",
                "pairwise": [(k, _num(v)) for k, v in pairwise.items()],
                "sensitivity": _with_ci(r.get("ds_sensitivity"), r.get("ds_sensitivity_ci_low"), r.get("ds_sensitivity_ci_high"))
                if binary else f"accuracy {_num(r.get('ds_accuracy'))}",
                "specificity": _with_ci(r.get("ds_specificity"), r.get("ds_specificity_ci_low"), r.get("ds_specificity_ci_high"))
                if binary else "–",
                "flag": ", ".join(dict.fromkeys(short for short, _ in flags.get(r["judge"], []))),
            })
            if r["judge"] in flags:
                flagged.append({"judge": r["judge"], "cell": cell, "criterion": CRITERION_LABEL.get(criterion, criterion),
                                "why": "; ".join(text for _, text in flags[r["judge"]])})
    return rows, flagged


def _uninformative(flagged: list[dict[str, str]], criterion: str, cells: pd.Series) -> str:
    """"smollm2 in 4 of 5 cells": the flagged judges of one criterion, beside its effective number
    (``cells``: one entry per cell the criterion was rated in, with an effective number or not)."""
    counts: dict[str, int] = {}
    for f in flagged:
        if f["criterion"] == criterion:
            counts[f["judge"]] = counts.get(f["judge"], 0) + 1
    return ", ".join(f"{judge} in {n} of {len(cells)} cells" for judge, n in counts.items())


def _not_flagged(flagged: list[dict[str, str]], criterion: str) -> str:
    """" (but smollm2 adds nothing where flagged)" beside an
    effective number, where judges of the criterion are flagged in some cell (the median pools
    cells, the flags are per cell, judge by judge: the last column names them); "" where none is."""
    named = [judge for judge in dict.fromkeys(f["judge"] for f in flagged if f["criterion"] == criterion)]
    if not named:
        return ""
    who = named[0] if len(named) == 1 else f"{', '.join(named[:-1])} or {named[-1]}"
    return f" (but {who} adds nothing where flagged)"


def flagged_summary(flagged: list[dict[str, str]]) -> str:
    """"smollm2 in 8 criterion × cell pairs (Readable, Unique), rules in 1 (Answerable)": one
    clause per judge, in order of first appearance."""
    by_judge: dict[str, list[dict[str, str]]] = {}
    for f in flagged:
        by_judge.setdefault(f["judge"], []).append(f)
    return "; ".join(
        f"{judge} in {len(rows)} criterion × cell pair{'s' if len(rows) != 1 else ''} "
        f"({', '.join(dict.fromkeys(r['criterion'] for r in rows))})"
        for judge, rows in by_judge.items()
    )


def sensitivity_figure(reliability: pd.DataFrame, strategy_labels: StrategyLabels | None = None) -> str | None:
    """Base64 PNG: each judge's Dawid–Skene sensitivity and specificity (95% intervals) per
    yes/no criterion (panels) and cell (rows); None when no judge row has them."""
    judges = reliability[reliability["judge"].notna() & reliability["criterion"].isin(BINARY_CRITERIA)]
    if "ds_sensitivity" not in judges or judges["ds_sensitivity"].isna().all():
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bloomqg.reporting.figures.style import OKABE_ITO, STYLE

    criteria = [c for c in BINARY_CRITERIA if c in set(judges["criterion"])]
    labels = list(dict.fromkeys(
        f"{r.model} · {r.dataset} · {strategy_label(r.strategy, strategy_labels)} · {r.judge}" for r in judges.itertuples(index=False)
    ))
    with matplotlib.rc_context(STYLE):
        fig, axes = plt.subplots(1, len(criteria), figsize=(2.6 * len(criteria) + 2.2, 0.22 * len(labels) + 1.2),
                                 sharey=True, squeeze=False)
        for ax, criterion in zip(axes[0], criteria):
            part = judges[judges["criterion"] == criterion]
            for r in part.itertuples(index=False):
                y = labels.index(f"{r.model} · {r.dataset} · {strategy_label(r.strategy, strategy_labels)} · {r.judge}")
                for value, low, high, offset, colour, marker in (
                    (r.ds_sensitivity, r.ds_sensitivity_ci_low, r.ds_sensitivity_ci_high, -0.15, OKABE_ITO["blue"], "o"),
                    (r.ds_specificity, r.ds_specificity_ci_low, r.ds_specificity_ci_high, 0.15, OKABE_ITO["vermillion"], "s"),
                ):
                    if is_missing(value):
                        continue
                    err = None if is_missing(low) else [[max(0.0, value - low)], [max(0.0, high - value)]]
                    ax.errorbar(value, y + offset, xerr=err, fmt=marker, color=colour, markersize=3, capsize=1.5, linewidth=0.8)
            ax.set_title(CRITERION_LABEL[criterion])
            ax.set_xlim(-0.02, 1.02)
            ax.axvline(0.5, color="#999999", linestyle=":", linewidth=0.7)
            ax.set_xlabel("Dawid–Skene estimate")
        axes[0][0].set_yticks(range(len(labels)), labels)
        axes[0][0].invert_yaxis()
        handles = [plt.Line2D([], [], marker="o", linestyle="none", color=OKABE_ITO["blue"], label="sensitivity: says yes where the label is yes"),
                   plt.Line2D([], [], marker="s", linestyle="none", color=OKABE_ITO["vermillion"],
                              label="specificity: says no where the label is no")]
        fig.legend(handles=handles, loc="upper center", ncol=2, frameon=False, bbox_to_anchor=(0.5, 1.0))
        fig.tight_layout(rect=(0, 0, 1, 0.93))
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=150, facecolor="white", metadata={"Software": None})
        plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _comparison_text(r: Any, strategy_labels: StrategyLabels | None) -> str:
    """``m · cs: FGP − CoT`` (strategy vs strategy, labels from the config) or
    ``cs · CoT: m2 − m1`` (model vs model)."""
    if r.comparison == "cot vs fgp":  # written before strategy pairs were the config's
        return f"{r.model} · {r.dataset}: {strategy_label('fgp', strategy_labels)} − {strategy_label('cot', strategy_labels)}"
    strategy_b = getattr(r, "strategy_b", None)
    if r.comparison == "strategy vs strategy" and not is_missing(strategy_b):
        return (f"{r.model} · {r.dataset}: {strategy_label(strategy_b, strategy_labels)} − "
                f"{strategy_label(r.strategy, strategy_labels)}")
    return f"{r.dataset} · {strategy_label(r.strategy, strategy_labels)}: {r.model_b} − {r.model}"


def _variant_name(name: str) -> str:
    """A leave-one-judge-out column's header: "Without rules"."""
    return name[:1].upper() + name[1:]


def _variant_pairs(pair: Any, n_majority: int) -> str:
    """"; 36 pairs" where a panel variant's difference is over other pairs than the majority's
    (it makes other questions useful), else nothing."""
    n = variant_entry(pair)[2]
    return "" if is_missing(n) or int(n) == n_majority else f"; {int(n)} pair{'' if int(n) == 1 else 's'}"


def _variant_text(pair: Any, n_majority: int) -> str:
    """"2.78 (p 1)": a panel variant's difference and raw p ("–" where it has no value), with its
    pairs where they are not the majority's."""
    diff, p, _ = variant_entry(pair)
    if is_missing(diff):
        return "–"
    p_text = "–" if p is None or (isinstance(p, float) and math.isnan(p)) else _short_p(p)
    return f"{_num(diff, 2)} (p {p_text}{_variant_pairs(pair, n_majority)})"


def _short_p(p: object) -> str:
    """A p value rounded as the tables round it (:func:`format_p`), without trailing zeros: the
    narrow cells of the robustness table print "1" and "0.062", the tables "1.000" and "0.062"."""
    text = format_p(p)
    return text if text.startswith("<") else text.rstrip("0").rstrip(".")


def robustness_variants(robustness: pd.DataFrame | None) -> list[str]:
    """The leave-one-judge-out panels of the robustness table, in order (its columns; Dawid–Skene
    has its own)."""
    if robustness is None or robustness.empty:
        return []
    names: dict[str, None] = {}
    for raw in robustness["variants"]:
        names.update(dict.fromkeys(variants_of(raw)))
    return [name for name in names if name != DAWID_SKENE]


def robustness_rows(
    robustness: pd.DataFrame | None, strategy_labels: StrategyLabels | None = None,
    reliability: pd.DataFrame | None = None,
) -> list[dict[str, Any]]:
    """The robustness table's rows, formatted (comparison, metric, the two arms' values under the
    majority and under Dawid–Skene, majority diff and p, each variant's difference in the order of
    :func:`robustness_variants`, the verdict and, where the verdict needs one, its reason: printed
    as a numbered note below the table, so the verdict column stays one short word).
    Files written before the Dawid–Skene values existed show them as "–". A row that holds on a
    criterion the gate did not find reliable in a cell of its (``reliability``) is ``untrusted``:
    the table says so beside the verdict, since stable votes that do not measure are no evidence."""
    if robustness is None or robustness.empty:
        return []
    order = robustness_variants(robustness)
    unreliable = _unreliable_criteria(reliability)
    rows = []
    for r in robustness.itertuples(index=False):
        what = _comparison_text(r, strategy_labels)
        variants = variants_of(r.variants)
        ds_a, ds_b = getattr(r, "value_a_dawid_skene", None), getattr(r, "value_b_dawid_skene", None)
        n_pairs = int(r.n_pairs)
        ds_pairs = _variant_pairs(variants.get(DAWID_SKENE), n_pairs).removeprefix("; ")
        rows.append({
            "comparison": what, "metric": metric_label(r.metric), "n": str(n_pairs),
            "majority": f"{_num(r.value_a, 2)} → {_num(r.value_b, 2)}",
            "dawid_skene": f"{_num(ds_a, 2)} → {_num(ds_b, 2)}" + (f" ({ds_pairs})" if ds_pairs else ""),
            "diff": _num(r.diff, 2), "p": "–" if is_missing(r.p_value) else _short_p(r.p_value),
            "dawid_skene_diff": _variant_text(variants[DAWID_SKENE], n_pairs) if DAWID_SKENE in variants else "–",
            "variants": [_variant_text(variants[name], n_pairs) if name in variants else "–" for name in order],
            "verdict": r.verdict,
            "reason": verdict_reason(r.diff, r.p_value, r.verdict, variants) if variants else "",
            "holds": r.verdict in (HOLDS, HOLDS_WHERE_MEASURED),
            "untrusted": r.verdict in (HOLDS, HOLDS_WHERE_MEASURED) and bool(_flagged_criteria(r, unreliable)),
        })
    return rows


def metric_label(metric: str) -> str:
    """A metric's label as the tables print it ("Usability"), its name where the registry has none."""
    try:
        return metric_spec(metric).label
    except (KeyError, ValueError):
        return metric


def _unreliable_criteria(reliability: pd.DataFrame | None) -> set[tuple[str, str, str, str]]:
    """(dataset, strategy, model, criterion) of every panel agreement the gate did not find reliable
    (unreliable, or not measured: with one varying judge or none, no panel could have moved it)."""
    if reliability is None or not len(reliability):
        return set()
    return {key for key, status in gate_statuses(reliability).items() if status != RELIABLE}


def _flagged_criteria(r: Any, unreliable: set[tuple[str, str, str, str]]) -> list[str]:
    """The labels of the criteria the comparison ``r`` (a robustness row) reads that the gate did
    not find reliable in either arm's cell, in the criteria's order."""
    cells = [(r.dataset, r.strategy, r.model)]
    cells.append((r.dataset, r.strategy_b, r.model) if r.comparison == STRATEGY_COMPARISON
                 else (r.dataset, r.strategy, r.model_b))
    found = {c for cell in cells for c in metric_spec(str(r.metric)).criteria
             if tuple(map(str, (*cell, c))) in unreliable}
    return [label for c, label in CRITERION_LABEL.items() if c in found]


def _untrusted_holds(held: pd.DataFrame, reliability: pd.DataFrame | None) -> list[str]:
    """Per comparison that holds and reads, in either arm's cell, a criterion the gate did not find
    reliable there (holding says nothing of votes that do not measure): "Answerable", or "KnowCov,
    which reads Readable and Answerable" where the metric reads the criterion through the
    questions it counts."""
    unreliable = _unreliable_criteria(reliability)
    readings = []
    for r in held.itertuples(index=False):
        criteria = _flagged_criteria(r, unreliable)
        if not criteria:
            continue
        label = metric_label(str(r.metric))
        readings.append(label if criteria == [label] else f"{label}, which reads {' and '.join(criteria)}")
    return readings


def _rating_judges(reliability: pd.DataFrame, criterion: str, panel_rows: pd.DataFrame) -> int:
    """The judges that rate ``criterion`` in some cell (a vote rate recorded): a judge that never
    rates it (minilm on readable) is no judge of it, though the panel counts it. Files written
    before vote rates existed give the panel's size."""
    rows = reliability[reliability["judge"].notna() & (reliability["criterion"] == criterion)]
    rating = rows.dropna(subset=["vote_rate"])["judge"].nunique() if "vote_rate" in rows else 0
    return int(rating) if rating else int(panel_rows["n_judges"].max())


def robustness_summary(robustness: pd.DataFrame | None, reliability: pd.DataFrame | None = None) -> str:
    """One sentence: how many headline comparisons hold, depend on a judge, or are noise; of those
    that hold, how many read a criterion not measured in their cells (``reliability``)."""
    if robustness is None or robustness.empty:
        return (f"{EMPTY} No headline comparison could be formed: a strategy pair needs a model × dataset run "
                "under two strategies (and the comparisons' baseline among them), a model pair two models.")
    counts = robustness["verdict"].map(
        lambda v: "holds" if v == HOLDS else HOLDS_WHERE_MEASURED if v == HOLDS_WHERE_MEASURED
        else "not assessable" if v.startswith("not assessable")
        else NOT_COMPARED if v == NOT_COMPARED
        else "within judge noise" if v == "within judge noise" else "depends on the panel"
    ).value_counts()
    # each kind says what it means where it is first met (the table's key sits in a closed block)
    notes: dict[str, list[str]] = {
        HOLDS: [], HOLDS_WHERE_MEASURED: ["every panel with a value agrees, some have none"],
        "depends on the panel": ["leaving out one particular judge, or only Dawid–Skene, changes it"],
        "within judge noise": ["not significant under the majority and some panel turns its sign, or any one "
                               "of several judges left out turns it"],
        "not assessable": [], NOT_COMPARED: []}  # 0 pairs or no value: the table's key says so
    held = robustness[robustness["verdict"].isin([HOLDS, HOLDS_WHERE_MEASURED])]
    if len(held):
        # "holds" is about stability, not about a difference: say how many found one, and how many
        # read a criterion the gate did not find reliable (stable votes that do not measure)
        found = int((held["p_value"] < SIGNIFICANCE).sum())
        kinds = [k for k in (HOLDS, HOLDS_WHERE_MEASURED) if k in counts]
        these = "of them" if len(kinds) == 1 else "of these"
        note = (f"{these} {found} a significant difference, the other {len(held) - found} that none was found"
                if found else "none found a significant difference")
        if len(kinds) > 1:  # the note sits in the last kind's brackets but speaks of both kinds' rows
            note = f"of the {len(held)} that hold either way: {note.removeprefix('of these ')}"
        unmeasured = untrusted_holds(robustness, reliability)
        if unmeasured:
            # of the held ones, not a new count: "all 3" or "2 of these 3"
            which = (f"all {len(held)}" if len(unmeasured) == len(held) > 1 else "it" if len(held) == 1
                     else f"{len(unmeasured)} of these {len(held)}")
            note += (f"; {which} ({'; '.join(unmeasured)}) rest{'s' if which == 'it' or len(unmeasured) == 1 else ''} on "
                     "votes the gate flagged: no evidence")
        notes[kinds[-1]].append(note)
    parts = [f"{counts[k]} {k}" + (f" ({'; '.join(notes[k])})" if notes[k] else "") for k in notes if k in counts]
    metrics = ordered_unique(robustness["metric"])
    kinds = set(robustness["comparison"])
    # name only the kinds of pair the run has (one model: no model pairs)
    over = " and ".join(text for kind, text in ((STRATEGY_COMPARISON, "each strategy pair of each model"),
                                                (MODEL_COMPARISON, "each model pair under each strategy"))
                        if kind in kinds)
    return (f"Of {len(robustness)} comparisons ({len(metrics)} metric{'s' if len(metrics) != 1 else ''}, {over} on "
            f"each dataset), under Dawid–Skene or with "
            f"one judge left out (a panel agrees when its difference has the majority's sign "
            f"and its raw p is on the same side of {SIGNIFICANCE:g}): " + "; ".join(parts) + "."
            + _few_pairs_note(robustness) + _parts_note(metrics) + " Holding is not reliability: the Answer decides.")


def _parts_note(metrics: Sequence[str]) -> str:
    """Which rows are the Answer's comparisons, where the table also compares metrics the Answer
    does not test (Usability's parts): a reader counting both would find two numbers of comparisons."""
    tested = [m for m in metrics if m in DEFAULT_PAIRED_METRICS]
    others = [m for m in metrics if m not in DEFAULT_PAIRED_METRICS]
    if not tested or not others:
        return ""
    labels = [metric_spec(m).label for m in tested]
    return (f" The Answer's are the {', '.join(labels[:-1]) + ' and ' if len(labels) > 1 else ''}{labels[-1]} rows; "
            "the others show which part of Usability a panel moves.")


def few_pair_panels(robustness: pd.DataFrame | None) -> list[int]:
    """The pairs of each panel (Dawid–Skene or one judge left out) that compares fewer than
    :data:`~bloomqg.metrics.paired.FEW_PAIRS`: leaving a judge out leaves a question labelled
    only where the other two agree."""
    if robustness is None or robustness.empty:
        return []
    return [int(n) for raw in robustness["variants"] for pair in variants_of(raw).values()
            for n in [variant_entry(pair)[2]] if n is not None and not pd.isna(n) and 0 < int(n) < FEW_PAIRS]


def untrusted_holds(robustness: pd.DataFrame | None, reliability: pd.DataFrame | None) -> list[str]:
    """The held comparisons that rest on a criterion the gate did not find reliable in a cell of theirs."""
    if robustness is None or robustness.empty:
        return []
    return _untrusted_holds(robustness[robustness["verdict"].isin([HOLDS, HOLDS_WHERE_MEASURED])], reliability)


def _few_pairs_note(robustness: pd.DataFrame) -> str:
    """How many of the panels compare so few pairs that the sign they show can be chance."""
    few = few_pair_panels(robustness)
    if not few:
        return ""
    return (f" {len(few)} of the panels compare fewer than {FEW_PAIRS} pairs (down to {min(few)}), where no "
            "difference can be significant and a sign can turn by chance.")


def trust_context(
    reliability: pd.DataFrame, robustness: pd.DataFrame | None, strategy_labels: StrategyLabels | None = None,
    construction: Sequence[ConstructionFlag] = (),
) -> dict[str, Any]:
    """The ``trust`` context of the report template (``construction``: the cells' construction
    flags, whose agreements by construction the agreement table names). Reliability rows written
    before these measures existed lack their columns: they show as "–"."""
    reliability = reliability.reindex(columns=list(dict.fromkeys([*reliability.columns, *RELIABILITY.names])))
    judges, flagged = judge_rows(reliability, strategy_labels)
    panel = reliability[reliability["judge"].isna()]
    n_eff = panel.dropna(subset=["n_effective_judges"]) if "n_effective_judges" in panel else panel.iloc[0:0]
    effective = [
        {"criterion": CRITERION_LABEL.get(c, c),
         # independence is no accuracy: the judges not flagged under Each judge bound what it is worth
         "median": _num(g["n_effective_judges"].median(), 1) + _not_flagged(flagged, CRITERION_LABEL.get(c, c)),
         "median_value": float(g["n_effective_judges"].median()),  # the facts' number
         "low": _num(g["n_effective_judges"].min(), 1), "high": _num(g["n_effective_judges"].max(), 1),
         "n_judges": str(rating),
         "cells": f"{len(g)} of {int((panel['criterion'] == c).sum())}",
         "uninformative": _uninformative(flagged, CRITERION_LABEL.get(c, c), panel[panel["criterion"] == c]["model"])}
        for c, g in n_eff.groupby("criterion", sort=False)
        for rating in [_rating_judges(reliability, c, g)]
    ]
    coefficients = coefficient_rows(reliability, strategy_labels, construction)
    return {
        "coefficients": coefficients,
        # explained only where a row shows it (an imported release)
        "no_per_judge_votes": NO_PER_JUDGE_VOTES if any(r["ac1"] == NO_PER_JUDGE_VOTES for r in coefficients) else "",
        "flag_reasons": SUSPICIOUS_REASONS,
        "judges": judges,
        "flagged": flagged,
        "flagged_summary": flagged_summary(flagged),
        "figure": sensitivity_figure(reliability, strategy_labels),
        "effective": effective,
        "robustness": robustness_rows(robustness, strategy_labels, reliability),
        "robustness_variants": [_variant_name(v) for v in robustness_variants(robustness)],
        "robustness_summary": robustness_summary(robustness, reliability),
        "significance": f"{SIGNIFICANCE:g}",
        "prevalence_limit": f"{PREVALENCE_LIMIT:.0%}",  # where the gate reads AC1 (its rule)
    }


def trained_judges(judgment_provenance: Sequence[Mapping[str, Any]]) -> list[str]:
    """One sentence per learned judge of the study: what it was trained on (source, rows and
    their sha256) and how well it agreed with its teacher when cross-validated."""
    sentences: dict[str, str] = {}
    for entry in judgment_provenance:
        model = entry.get("learned_model")
        judge = entry.get("judge")
        if not isinstance(model, Mapping) or not judge or judge in sentences:
            continue
        people = model.get("source") == "annotations"
        source = {"release": "the paper's release panel votes", "votes": "an earlier study's votes",
                  "annotations": "annotators' majorities"}.get(str(model.get("source")), f"{model.get('source')} votes")
        text = (f"{judge} is a classifier trained on {source} ({int(model.get('rows', 0)):,} questions of "
                f"{', '.join(model.get('datasets') or []) or 'no dataset'}; rows sha256 "
                f"{str(model.get('rows_sha256', ''))[:12]}).")
        level = (model.get("cross_validated") or {}).get("bloom_level/*")
        if level:
            text += (f" Cross-validated by original item, it agreed with its teacher's Bloom level on "
                     f"{100 * level['agreement']:.1f}% of {int(level['n']):,} questions (Cohen's κ "
                     f"{level['cohen_kappa']:.2f})"
                     + ("." if people else "; its teacher is a panel, not experts."))
        sentences[judge] = text
    return list(sentences.values())
