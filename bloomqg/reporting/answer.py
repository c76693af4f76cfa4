"""The report's "Answer" section, rendered from ``metrics/answer.parquet``
(:mod:`bloomqg.metrics.answer`): a sentence per strategy pair that counts the verdicts and says
what stopped the others, then one compact row per metric × dataset (verdict, difference and
interval, pairs, the smallest difference the study could detect, why, and the reliability figure
the verdict rests on). Nothing here decides: the verdicts are the frame's.

A model × dataset that ran only one strategy of a pair is a difference of design, not of
strategy: it is never pooled into the comparison, and the section says which were left out.
A last line says how far the judges can be trusted, by the gate's rule.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from bloomqg.metrics.answer import CANNOT_TELL, HIGHER, LOWER, NO_DIFFERENCE, PANEL_REASONS
from bloomqg.metrics.paired import SIGNIFICANCE, ordered_strategies, p_phrase, paired_test
from bloomqg.metrics.registry import metric_spec
from bloomqg.metrics.robustness import (
    DAWID_SKENE, HOLDS, HOLDS_WHERE_MEASURED, NOT_ASSESSABLE, NOT_COMPARED, STRATEGY_COMPARISON, variant_entry, variants_of,
)
from bloomqg.reporting.display import COEFFICIENT_SYMBOL, CRITERION_LABEL, CRITERION_PHRASE, MISSING, StrategyLabels, is_missing, ordered_unique, strategy_label
from bloomqg.reporting.tables.builders import TEST_NAMES
from bloomqg.reporting.tables.model import fixed, format_paired_difference, gated_cells
from bloomqg.inputs.strategies import ComparisonSpec
from bloomqg.reporting.construction import LEVEL_KEPT_METRICS
from bloomqg.voting.agreement import NOT_MEASURED, PREVALENCE_LIMIT, RELIABLE, UNRELIABLE, brief_reason
from bloomqg.voting.construction import ConstructionFlag

#: Generation parse-failure rates (points) this far apart make the Answer say how much of a
#: Usability gap is the parser's.
PARSE_GAP_POINTS = 5.0
#: How a verdict reads in the Answer's table.
VERDICT_TEXT = {HIGHER: "{b} higher", LOWER: "{b} lower", NO_DIFFERENCE: "no difference", CANNOT_TELL: "cannot tell"}


def _points(metric: str) -> str:
    return "points" if metric_spec(metric).percent else metric_spec(metric).unit or "units"


def _failing_criterion(row: Any) -> str:
    return str(row.reliability_cell).partition("|")[2]


def _criteria_in(row: Any, column: str = "reliability_unmeasured", strategy_labels: StrategyLabels | None = None,
                 cells: bool = True, besides: str = "") -> list[str]:
    """The criteria behind the verdict whose agreement was not measured in one of its cells or
    both (answer.parquet's ``reliability_unmeasured``; ``column`` ``reliability_unreliable``: found
    unreliable), by label; with ``cells``, one that holds in one strategy's cell only is named
    with it ("Answerable in CoT"), so a criterion unreliable in one cell and not measured in the
    other reads as both. ``besides``: a criterion left out (the one the Why already names)."""
    strategies: dict[str, list[str]] = {}
    for strategy, criterion in _cell_entries(row, column):
        if criterion != besides:
            strategies.setdefault(criterion, []).append(strategy)
    pair = {str(row.strategy_a), str(row.strategy_b)}
    return [CRITERION_LABEL.get(c, c) + ("" if not cells or set(found) >= pair
                                         else f" in {_joined([strategy_label(s, strategy_labels) for s in found], 'and')}")
            for c, found in strategies.items()]


def _cell_entries(row: Any, column: str) -> list[tuple[str, str]]:
    """(strategy, criterion) of each ``strategy|criterion`` cell answer.parquet lists in ``column``."""
    named = getattr(row, column, "")
    return [(strategy, criterion) for strategy, _, criterion in (e.partition("|") for e in str(named).split(",") if e)
            ] if not is_missing(named) else []


def _where(row: Any, strategy_labels: StrategyLabels | None = None) -> str:
    """"Readable in CoT": the criterion and cell the verdict's reliability figure is of."""
    strategy, _, criterion = str(row.reliability_cell).partition("|")
    return f"{CRITERION_LABEL.get(criterion, criterion)} in {strategy_label(strategy, strategy_labels)}"


def rests_on(row: Any, strategy_labels: StrategyLabels | None = None) -> str:
    """The reliability figure a verdict rests on, in words: "α 0.09 for Bloom level in CoT (gate: ≥ 0.70)"."""
    where = _where(row, strategy_labels)
    if row.reliability_status == NOT_MEASURED:
        return f"agreement not measured for {where} ({row.reliability_why})"
    symbol = COEFFICIENT_SYMBOL.get(str(row.reliability_coefficient), str(row.reliability_coefficient))
    prevalence = (f", as one answer holds ≥ {PREVALENCE_LIMIT:.0%} of the votes"
                  if row.reliability_coefficient == "ac1" else "")
    return (f"{symbol} {fixed(float(row.reliability_value), 2)} for {where} "
            f"(gate: ≥ {fixed(float(row.reliability_threshold), 2)}{prevalence})")


def _needed(row: Any) -> str:
    """The items a verdict would take: the bound it needs (not the study plan's own target, a
    second size that read as a rival one)."""
    bound = f"{float(row.max_detectable):g} {_points(row.metric)}"
    if is_missing(row.n_needed_verdict):
        return f"detecting {bound} would take more originals than the plan searches"
    had = "" if is_missing(getattr(row, "n_items", None)) else f" (this run had {int(row.n_items):,})"
    return f"about {int(row.n_needed_verdict):,} originals would detect {bound}{had}"


def why(row: Any, strategy_labels: StrategyLabels | None = None,
        construction: Mapping[tuple[str, str, str, str], ConstructionFlag] | None = None) -> str:
    """Why the verdict is what it is, and what would change it, in one clause. ``construction``:
    the cells' flags by (model, dataset, strategy, criterion), so a disagreement one constant
    judge makes is said to be that judge's."""
    reason = row.reason
    if int(row.n_pairs) == 0:  # whatever else holds, there is nothing to compare
        return f"no original has a {metric_spec(row.metric).label} value under both strategies: nothing to compare"
    if reason == "judges_disagree":
        strategy, _, criterion = str(row.reliability_cell).partition("|")
        flag = (construction or {}).get((str(row.model), str(row.dataset), strategy, criterion))
        always = flag.always if flag else ()
        # below 0 the judges disagree more than chance would: "weak" would understate it
        weak = is_missing(row.reliability_value) or float(row.reliability_value) > 0
        # "there": the criterion and cell rests_on names (a judge may be constant in that cell only)
        text = f"{'weak agreement' if weak else 'no agreement'}: {rests_on(row, strategy_labels)}" + (f" (there, {'; '.join(always)})" if always else "")
        return text + _gated_interval(row)
    if reason == "agreement_not_measured":
        unmeasured = _criteria_in(row, strategy_labels=strategy_labels)
        # the first reason, named at one cell: the gate's reasons differ by cell (Judge reliability
        # lists each); "e.g." where other cells go unmeasured too, so one cell does not read as the only one
        example = "e.g. " if len(_cell_entries(row, "reliability_unmeasured")) > 1 else ""
        return (f"{_joined(unmeasured, 'and')} agreement not measured (†; {example}{_where(row, strategy_labels)}: "
                f"{brief_reason(str(row.reliability_why))})" + _gated_interval(row))
    if reason == "too_few_pairs":
        if not row.planned and not is_missing(row.ci_low):  # no study plan: the interval says it
            text = (f"the interval runs from {float(row.ci_low):.1f} to {float(row.ci_high):.1f} {_points(row.metric)} "
                    f"with {int(row.n_pairs)} pairs: too wide to rule out a difference of a useful size")
        elif is_missing(row.mdd):
            text = f"with {int(row.n_pairs)} pairs no difference of any size is detectable; {_needed(row)}"
        else:
            # the Detectable and pairs columns beside it give the figures
            text = f"too few pairs; {_needed(row)}"
        if unmeasured := _criteria_in(row, strategy_labels=strategy_labels):
            # not measured lets the verdict go on to the power check, but is no evidence of agreement
            text += f"; {_joined(unmeasured, 'and')} agreement not measured (†)"
        if _excludes_zero(row):
            text += (f"; interval excludes 0 and Holm's p {_p_text(row.p_adjusted)}, but with this few pairs a "
                     "difference that shows is often larger than the true one" if _significant(row) else
                     f"; interval excludes 0, but {_not_significant(row)}")
        return text
    if reason == "borderline":
        return (f"the interval excludes 0, but Holm's p {_p_text(row.p_adjusted)} over the "
                f"{int(row.family_size)} {metric_spec(row.metric).label} comparisons is not below {float(row.significance):g}")
    if reason == "significant":
        return f"Holm's p {_p_text(row.p_adjusted)}; rests on {rests_on(row, strategy_labels)}"
    return (f"no difference larger than {float(row.no_difference_bound):.1f} {_points(row.metric)} "
            f"(the interval's far end; Holm's p {_p_text(row.p_adjusted)}); rests on {rests_on(row, strategy_labels)}")


def _gated_interval(row: Any) -> str:
    """"; interval excludes 0, but on those votes: no evidence; McNemar's p = 0.062 (Holm's
    0.125) is not below 0.05": an interval that excludes 0 on votes the gate stopped must not read
    as a finding, and where the test does not reach the level either, the Why says so."""
    if not _excludes_zero(row):
        return ""
    return ("; interval excludes 0, but on those votes: no evidence" +
            ("" if _significant(row) else f"; {_not_significant(row)}"))


def _excludes_zero(row: Any) -> bool:
    """Whether the row's paired interval lies on one side of 0."""
    return not is_missing(row.ci_low) and (float(row.ci_low) > 0 or float(row.ci_high) < 0)


def _significant(row: Any) -> bool:
    """Whether the row's Holm-adjusted p is below its significance level."""
    return not is_missing(row.p_adjusted) and float(row.p_adjusted) < float(row.significance)


def _not_significant(row: Any) -> str:
    """"McNemar's p = 0.062 (Holm's 0.125) is not below 0.05", or where the test alone reaches the
    level, "McNemar's p = 0.030 is below 0.05, Holm's 0.060 not": which of the two stops the finding."""
    test, level = TEST_NAMES[paired_test(row.metric)], f"{float(row.significance):g}"
    holm = _p_text(row.p_adjusted).removeprefix("= ")
    if not is_missing(row.p_value) and float(row.p_value) < float(row.significance):
        return f"{test}'s p {_p_text(row.p_value)} is below {level}, Holm's {holm} not"
    return f"{test}'s p {_p_text(row.p_value)} (Holm's {holm}) is not below {level}"


def _p_text(p: Any) -> str:
    """"= 0.078" or "< 0.001" (:func:`~bloomqg.metrics.paired.p_phrase`); "= –" where missing."""
    return f"= {MISSING}" if is_missing(p) else p_phrase(float(p))


def _summary(rows: pd.DataFrame, name_a: str, name_b: str, full_a: str, full_b: str) -> tuple[str, str]:
    """("FGP against CoT, 6 comparisons: cannot tell in all 6. This run does not show …", "In 4 the
    judges do not agree … What would settle it: …"): the verdicts counted, then why and what would
    change them."""
    n = len(rows)
    counts = rows["verdict"].value_counts()
    parts = []
    for verdict in (HIGHER, LOWER, NO_DIFFERENCE):
        if counts.get(verdict):
            parts.append(f"{VERDICT_TEXT[verdict].format(b=name_b)} in {counts[verdict]}")
    unknown = rows[rows["verdict"] == CANNOT_TELL]
    head = f"{full_b} against {full_a}, {n} comparison{'s' if n != 1 else ''}: "
    if len(unknown) == n:
        head += "cannot tell" if n == 1 else "cannot tell in both" if n == 2 else f"cannot tell in all {n}"
    else:
        head += "; ".join(parts) + (f"; cannot tell in {len(unknown)}" if len(unknown) else "")
    reasons = []
    paired_rows = unknown["n_pairs"].astype(int) > 0
    empty = unknown[~paired_rows]
    unknown = unknown[paired_rows]  # a comparison without pairs has one reason, said apart
    if len(empty):
        reasons.append(f"{_count(len(empty), n)}no original has a value under both strategies")
    disagree = unknown[unknown["reason"] == "judges_disagree"]
    if len(disagree):
        criteria = ordered_unique(_failing_criterion(r) for r in disagree.itertuples())
        # the reliability table's class names, so "unreliable" and "not measured" read as two things
        reasons.append(f"{_count(len(disagree), n)}the judges are unreliable on {_phrased(criteria)}: they do not "
                       "agree enough")
    unmeasured_rows = unknown[unknown["reason"] == "agreement_not_measured"]
    if len(unmeasured_rows):
        criteria = ordered_unique(c for r in unmeasured_rows.itertuples() for _, c in _cell_entries(r, "reliability_unmeasured"))
        reasons.append(f"{_count(len(unmeasured_rows), n)}the judges' agreement on {_phrased(criteria, 'and')} is not "
                       "measured: these votes cannot show it")
    few = unknown[unknown["reason"] == "too_few_pairs"]
    if len(few):
        unmeasured = ordered_unique(label for r in few.itertuples() for label in _criteria_in(r, cells=False))
        reasons.append(f"{_count(len(few), n)}the study has too few pairs"
                       + (f" ({_joined(unmeasured, 'and')} agreement not measured either)" if unmeasured else ""))
    borderline = unknown[unknown["reason"] == "borderline"]
    if len(borderline):
        reasons.append(f"{_count(len(borderline), n)}the difference does not survive the correction for "
                       "several comparisons")
    lead = head + "."
    if counts.get(CANNOT_TELL, 0) == n:
        lead += (f" This run does not show whether {name_b} or {name_a} is better: do not read a higher column "
                 "below as a ranking.")
    text = ""
    if reasons:
        joined = "; ".join(reasons)
        text += " " + joined[0].upper() + joined[1:] + "."
    underpowered = unknown["mdd"].isna() | (unknown["mdd"] > unknown["max_detectable"])
    if underpowered.any():
        # the power, said per metric for every undecided comparison (agreeing judges alone would
        # not settle them): the best a metric's comparisons could do, with its own pairs
        # where other reasons came first, say that power alone would have stopped every one
        every = underpowered.all() and len(unknown) > 1 and len(few) < len(unknown)
        text += f" {_power(unknown, every=every)}"
    # judges first: where they do not agree, more originals alone settle nothing
    fixes, sizes = [], ""
    if len(disagree) or len(unmeasured_rows):
        fixes.append("judges that agree (a stronger panel, or people's labels)")
    if len(few) or underpowered.any():
        fixes.append("more originals")
        sizes = _items_needed(unknown)
    if fixes:
        # the sizes after a colon, so "more originals" is their unit
        text += f" What would settle it: {' and '.join(fixes)}" + (f": {sizes}." if sizes else ".")
    return lead, text.strip()


def _phrased(criteria: Sequence[str], conjunction: str = "or") -> str:
    """"whether a question is unique, readable or answerable, Bloom levels": the criteria's phrases
    joined, the yes/no ones under one "whether a question is" in the panel's order."""
    yes_no = [c for c in ("unique", "readable", "answerable") if c in criteria]
    parts = [CRITERION_PHRASE.get(c, c) for c in criteria if c not in yes_no]
    if yes_no:
        parts.insert(0, "whether a question is " + _joined(yes_no, conjunction))
    return _joined(parts, conjunction)


def _verdict_bound(unknown: pd.DataFrame) -> float | None:
    """The bound a verdict needs (``max_detectable``, the config's answer.max_detectable_difference)
    where the rows share one; None where they have none or several."""
    bounds = pd.to_numeric(unknown.get("max_detectable", pd.Series(dtype=float)), errors="coerce").dropna().unique()
    return float(bounds[0]) if len(bounds) == 1 else None


def _items_needed(unknown: pd.DataFrame) -> str:
    """"to detect 20 points, in all 116 for Usability in cs (19 of its 36 gave pairs) to 1,752 for
    CatCons in social (1 of 24)", said after "more originals:": the originals per cell that
    would detect the bound a verdict needs (the rows' ``n_needed_verdict``; the bound is the one
    :func:`_power` names), in all, each beside the originals the run had (``n_items``) and the
    pairs they gave, so a reader sees new originals are needed, not a rerun, and why so many where
    few gave a pair; "" where no row has one."""
    bound = _verdict_bound(unknown)
    if "n_needed_verdict" not in unknown or bound is None:
        return ""
    needed = pd.to_numeric(unknown["n_needed_verdict"], errors="coerce").dropna()
    if needed.empty:
        return ""
    low, high = unknown.loc[needed.idxmin()], unknown.loc[needed.idxmax()]

    def which(row: Any, first: bool) -> str:
        label = metric_spec(str(row["metric"])).label
        text = f"{int(row['n_needed_verdict']):,} for {label} in {row['dataset']}"
        items = row.get("n_items")
        if is_missing(items):
            return text
        pairs, items = f"{int(row['n_pairs']):,}", f"{int(items):,}"
        return f"{text} ({pairs} of its {items} gave pairs)" if first else f"{text} ({pairs} of {items})"
    same = int(low["n_needed_verdict"]) == int(high["n_needed_verdict"])
    span = which(low, True) if same else f"{which(low, True)} to {which(high, False)}"
    # "in all" before the span, so it reads as both ends' (a total, not originals to add)
    return f"to detect {bound:g} points, in all {span}"


def _power(unknown: pd.DataFrame, every: bool = False) -> str:
    """"None of the 5 with pairs has enough: a verdict needs the study to detect (8 times in 10) 20 points
    or less; it could detect only differences of at least: Usability 43.8 points at best (cs, 19 pairs);
    CatCons, with at most 5 pairs, no difference of any size.": the bound a verdict needs first (the
    config's answer.max_detectable_difference), then per metric the smallest detectable difference over
    its comparisons and where it holds, so no metric's power, nor one dataset's, reads as another's."""
    sized, none = [], []
    for metric, rows in unknown.groupby("metric", sort=False):
        pairs = int(rows["n_pairs"].max())
        label, mdds = metric_spec(str(metric)).label, rows["mdd"].dropna()
        pairs_text = f"at most {pairs:,} pair{'s' if pairs != 1 else ''}"
        if len(mdds):
            # the best of the metric's comparisons, named: not read as every dataset's
            best = rows.loc[mdds.idxmin()]
            where = f"{best['dataset']}, " if rows["dataset"].nunique() > 1 else ""
            sized.append(f"{label} {mdds.min():.1f} {_points(str(metric))} at best ({where}{int(best['n_pairs']):,} "
                         f"pair{'s' if int(best['n_pairs']) != 1 else ''})")
        else:
            none.append(f"{label}, with {pairs_text}")
    # ``every``: no comparison with pairs has enough for a verdict, said first; then the bound a
    # verdict needs, before what the study could detect (said after, it read as a second target)
    bound = _verdict_bound(unknown)
    if bound is None:
        text = (f"None of the {len(unknown)} with pairs has enough: " if every else "With the pairs it has, ") + \
            "this study could detect (8 times in 10) only"
    else:
        needs = f"a verdict needs the study to detect (8 times in 10) {bound:g} points or less"
        text = (f"None of the {len(unknown)} with pairs has enough: {needs}; it could detect only" if every
                else f"A{needs[1:]}; with the pairs it has, it could detect only")
    if sized:
        text += f" differences of at least: {'; '.join(sized)}"
    if none:
        text += ("; " if sized else " ") + f"{_joined(none, 'and')}, no difference of any size"
    return text + "."


def _count(k: int, n: int) -> str:
    """"in 2 the …", "in all of them the …", and for a single comparison just "the …"."""
    return "" if n == 1 else "in all of them " if k == n else f"in {k} "


def _joined(words: Sequence[str], conjunction: str = "or") -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + f" {conjunction} " + words[-1]


def _full(strategy: str, label: str, titles: Mapping[str, str]) -> str:
    """"FGP (Fine-Grained Prompting)": the label and, where it abbreviates, the title's name part."""
    title = str(titles.get(strategy, "")).split(":")[0].strip()
    return f"{label} ({title})" if title and title != label else label


def _cell_value(values: pd.DataFrame | None, model: str, dataset: str, strategy: str, metric: str) -> str:
    """A strategy's own value of the metric over all its questions, as the tables give it: "28.57 (n=14)"."""
    if values is None or (model, dataset, strategy, metric) not in values.index:
        return "–"
    row = values.loc[(model, dataset, strategy, metric)]
    if is_missing(row["value"]):
        return "–"
    n = "" if is_missing(row.get("n")) else f" (n={int(row['n'])})"
    return f"{fixed(float(row['value']), metric_spec(metric).decimals)}{_percent_sign(metric)}{n}"


def other_criteria_clause(r: Any, strategy_labels: StrategyLabels | None = None) -> str:
    """"; Unique unreliable too; Answerable agreement not measured": the criteria behind a verdict
    found unreliable, or whose agreement its cells could not measure, beyond the one its Why
    already names (a ``too_few_pairs`` Why names the unmeasured ones), so a verdict does not read
    as resting on one criterion when it rests on more."""
    if int(r.n_pairs) == 0 or r.reason in ("too_few_pairs", "agreement_not_measured"):  # the Why names them all
        return ""
    named = _failing_criterion(r)
    # the named criterion's other cell, where it failed too, goes unsaid: the Why names the worst
    unreliable = _criteria_in(r, "reliability_unreliable", strategy_labels, besides=named)
    # not measured: a status of its own, said even for the named criterion's other cell
    others = _criteria_in(r, strategy_labels=strategy_labels,
                         besides=named if r.reliability_status == NOT_MEASURED else "")
    return ((f"; {_joined(unreliable, 'and')} unreliable too" if unreliable else "")
            + (f"; {_joined(others, 'and')} agreement not measured" if others else ""))


def leaning_clause(r: Any, leanings: Sequence[tuple[str, str, float]]) -> str:
    """"; smollm2 says Apply to 88% of questions, so hits gather at Apply originals": beside a
    verdict on whether questions kept their original's level, the judges that give one level to
    most questions (:func:`bloomqg.reporting.panel.level_leanings`), so a higher column there
    reads as the judges' habit, not the strategy's."""
    if r.metric not in LEVEL_KEPT_METRICS or not leanings:
        return ""
    return "".join(f"; {judge} says {level} to {100 * share:.0f}% of questions (all cells), so hits gather at {level} originals"
                   for judge, level, share in leanings)


def opposite_clause(r: Any, values: pd.DataFrame | None, strategy_a: str, strategy_b: str) -> str:
    """"; the columns point the other way: …" where the two strategies' own values order them
    against the paired difference's sign: the columns count each strategy's questions, the
    difference only the originals both answered."""
    if values is None or int(r.n_pairs) == 0 or is_missing(r.diff) or float(r.diff) == 0:
        return ""
    keys = [(r.model, r.dataset, strategy, r.metric) for strategy in (strategy_a, strategy_b)]
    if not all(key in values.index and not is_missing(values.loc[key, "value"]) for key in keys):
        return ""
    columns = float(values.loc[keys[1], "value"]) - float(values.loc[keys[0], "value"])
    if columns * float(r.diff) >= 0:
        return ""
    return (f"; the columns point the other way: they count each strategy's own questions, the difference only "
            f"the {int(r.n_pairs)} originals both answered")


def power_clause(r: Any) -> str:
    """"; too few pairs as well": a verdict the judges stop that the study's power would have
    stopped next (the verdict's order names the first check that fails; a reader should not take
    the others to pass)."""
    if r.reason not in PANEL_REASONS or int(r.n_pairs) == 0 or not r.planned:
        return ""
    return "; too few pairs as well" if is_missing(r.mdd) or float(r.mdd) > float(r.max_detectable) else ""


def reversal_clause(r: Any, robustness: pd.DataFrame | None) -> str:
    """"; Dawid–Skene (judges weighted by accuracy) points the other way (-2.78 on
    the 36 pairs it labels, the majority's 19)": where the robustness table's Dawid–Skene labels of the same votes turn the paired
    difference to the other strategy, on the pairs they label. Said in the row: the direction the
    Answer shows is the one a reader takes (the box under the table lists every other panel)."""
    if robustness is None or not len(robustness) or int(r.n_pairs) == 0 or is_missing(r.diff) or float(r.diff) == 0:
        return ""
    comparisons, key = _strategy_comparisons(robustness), _comparison_key(r)
    if key not in comparisons.index:
        return ""
    ds_diff, _, ds_pairs = variant_entry(variants_of(comparisons.loc[key].get("variants")).get(DAWID_SKENE))
    if is_missing(ds_diff) or float(ds_diff) * float(r.diff) >= 0:
        return ""
    # its own pairs: Dawid–Skene labels questions the majority left undecided, so it is not the same comparison
    on = "" if is_missing(ds_pairs) else f" on the {int(ds_pairs)} pairs it labels, the majority's {int(r.n_pairs)}"
    return f"; Dawid–Skene (judges weighted by accuracy) points the other way ({float(ds_diff):.2f}{on})"


def _percent_sign(metric: str) -> str:
    return "%" if metric_spec(metric).percent else ""


def _on_the_pairs(r: Any, name_a: str, name_b: str) -> tuple[str, ...]:
    """("CoT 85.71% → FGP 71.43%",): what the paired difference is the difference of, on one line
    under it (the column's header says these are the pairs)."""
    if int(r.n_pairs) == 0 or is_missing(r.value_a) or is_missing(r.value_b):
        return ()
    decimals, sign = metric_spec(r.metric).decimals, _percent_sign(r.metric)
    return (f"{name_a} {fixed(float(r.value_a), decimals)}{sign} → {name_b} {fixed(float(r.value_b), decimals)}{sign}",)


def usability_of_read(votes: pd.DataFrame) -> dict[tuple[str, str, str], tuple[float, int]]:
    """Per (model, dataset, strategy): the share (%) of usable questions among the replies that
    held a question and whose usefulness the judges decided, and their number: Usability without
    the replies the workflow could not read (the labels plan's "Usable, of questions with all
    three verdicts")."""
    if votes is None or not len(votes) or "useful" not in votes:
        return {}
    read = votes[votes["new_question"].notna() & votes["useful"].notna()]
    return {(str(m), str(d), str(s)): (100.0 * float(group["useful"].astype(bool).mean()), len(group))
            for (m, d, s), group in read.groupby(["model", "dataset", "strategy"], sort=False)}


def unparsed_note(rows: pd.DataFrame, values: pd.DataFrame | None, pair: tuple[str, str],
                  names: tuple[str, str], read: Mapping[tuple[str, str, str], tuple[float, int]] | None = None) -> str:
    """Where the Answer compares Usability and the two strategies' replies held no question at
    different rates: Usability counts such a reply as not usable, so part of its gap is the
    parser's. Says the rates per dataset and, given ``read`` (:func:`usability_of_read`),
    Usability among the replies that held a question, so a reader sees how much of the gap is left."""
    if values is None or not len(rows):
        return ""
    usability = rows[(rows["metric"] == "usability") & (rows["n_pairs"].astype(int) > 0)]
    rates = []
    for r in usability.itertuples(index=False):
        keys = [(r.model, r.dataset, strategy, "parse_failure_rate") for strategy in pair]
        if all(key in values.index and not is_missing(values.loc[key, "value"]) for key in keys):
            rates.append((r, str(r.dataset), *(float(values.loc[key, "value"]) for key in keys)))
    if not any(abs(rate_a - rate_b) >= PARSE_GAP_POINTS for *_, rate_a, rate_b in rates):
        return ""
    each = "; ".join(f"{dataset}: {names[0]} {rate_a:.1f}%, {names[1]} {rate_b:.1f}%" for _, dataset, rate_a, rate_b in rates)
    text = (f"Usability counts a reply with no question the workflow could read as not usable, and such replies "
            f"came at different rates ({each}).")
    among = []
    for r, dataset, *_ in rates:
        shares = [(read or {}).get((str(r.model), dataset, strategy)) for strategy in pair]
        if all(shares):
            among.append((r, dataset, shares[0], shares[1]))
    if among:
        listed = "; ".join(f"{dataset}: {names[0]} {a[0]:.1f}% (n = {a[1]}), {names[1]} {b[0]:.1f}% (n = {b[1]})"
                           for _, dataset, a, b in among)
        # the order of the two strategies among read replies against the paired difference's sign
        reversed_in = [dataset for r, dataset, a, b in among if (b[0] - a[0]) * float(r.diff) < 0]
        # not called Usability: that name is the table's share over every reply
        # "most" where the read replies' gap is under half the columns' in every dataset: the page's own
        # numbers then say the parser, not the questions, made most of it
        def column_gap(r: Any, dataset: str) -> float:
            keys = [(r.model, dataset, strategy, "usability") for strategy in pair]
            if not all(key in values.index and not is_missing(values.loc[key, "value"]) for key in keys):
                return math.nan
            return float(values.loc[keys[1], "value"]) - float(values.loc[keys[0], "value"])
        mostly = all(abs(b[0] - a[0]) < abs(column_gap(r, dataset)) / 2 for r, dataset, a, b in among)
        text += (f" Among decided replies that held a question, the share useful was {listed}: "
                 + ("most of the gap is" if mostly else "part of the gap may be")
                 + " how often a reply could be read, not how good its question was"
                 + (f", and on {_joined(reversed_in, 'and')} the order reverses" if reversed_in else "")
                 # each strategy's own questions, and (where gated) the same votes the gate rejected: no
                 # firmer than the Usability they qualify
                 + " (own questions, not pairs"
                 + ("; †: on votes the gate flagged, not evidence)."
                    if usability["reason"].isin(PANEL_REASONS).any() else ")."))
    else:
        text += " Part of a Usability gap is how often the reply could be read, not how good its question was."
    return text


def _by_prevalence(entries: Sequence[Mapping[str, Any]]) -> str:
    """"Unique in cs FGP (α 0.06) but rules and minilm agree beyond chance (Cohen's κ 0.37, 0 =
    chance)": AC1 passes of one criterion carried by the same pair of judges, with that pair's
    agreement and the judge apart from it, said once for all of them."""
    entry = entries[0]
    cells = [f"{e['cell']} (α {fixed(e['alpha'], 2)})" for e in entries]
    text = f"{entry['criterion']} in {_joined(cells, 'and')}"
    pair = entry.get("pair")
    if pair and pair[2] > 0:
        kappas = _joined([fixed(e["pair"][2], 2) for e in entries], "and")
        text += f" but {pair[0]} and {pair[1]} agree beyond chance (Cohen's κ {kappas}, 0 = chance)"
        # the third judge's side: a pass carried by two of three, the third at odds, is said as such
        apart = _apart(entry)  # the same for every pass of the group (_prevalence_groups)
        if apart:
            values = "; ".join(", ".join(fixed(k, 2) for k in kappas) for e in entries
                               for judge, kappas in e.get("outside") or [] if judge in apart)
            text += f", while {_joined(list(apart), 'and')} {'agrees' if len(apart) == 1 else 'agree'} with neither (κ {values})"
    return text


def _apart(entry: Mapping[str, Any]) -> tuple[str, ...]:
    """The judges of an AC1 pass that agree with neither judge of its carrying pair (κ ≤ 0 with both), sorted."""
    return tuple(sorted(judge for judge, kappas in entry.get("outside") or [] if max(kappas) <= 0))


def _prevalence_groups(entries: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """AC1 passes grouped by criterion and carrying pair (judge names), in the order first met."""
    groups: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for entry in entries:
        pair = entry.get("pair")
        carried = pair and pair[2] > 0
        key = (entry["criterion"], tuple(pair[:2]) if carried else id(entry), _apart(entry) if carried else ())
        groups.setdefault(key, []).append(entry)
    return list(groups.values())


def _strategy_comparisons(robustness: pd.DataFrame) -> pd.DataFrame:
    """The robustness table's strategy-against-strategy rows, indexed by :func:`_comparison_key`'s fields."""
    return robustness[robustness["comparison"] == STRATEGY_COMPARISON].set_index(
        ["model", "dataset", "strategy", "strategy_b", "metric"])


def _comparison_key(r: Any) -> tuple[str, ...]:
    """An Answer row's key in :func:`_strategy_comparisons`."""
    return str(r.model), str(r.dataset), str(r.strategy_a), str(r.strategy_b), str(r.metric)


def panel_note(rows: pd.DataFrame, robustness: pd.DataFrame | None, names: tuple[str, str] = ("A", "B")) -> str:
    """How many of the Answer's comparisons (``rows``, one strategy pair named ``names``) change
    sign or significance when one judge is left out or the votes are combined by Dawid–Skene (the
    robustness table's verdicts), so a reader of the Answer knows the panel moves them; then which
    way Dawid–Skene moves them: toward the other strategy than the majority's (or toward one where
    the majority ties), the majority's lead made significant before Holm, or shrunk below half."""
    if robustness is None or not len(robustness) or not len(rows):
        return ""
    mine = _strategy_comparisons(robustness)
    found = [(r, mine.loc[key]) for r in rows.itertuples(index=False)
             for key in [_comparison_key(r)] if key in mine.index]
    compared = [(r, m) for r, m in found if m["verdict"] != NOT_COMPARED]
    # not assessable: no other panel had a value to move it or not (counted apart, not as moved)
    assessed = [(r, m) for r, m in compared if not str(m["verdict"]).startswith(NOT_ASSESSABLE)]
    moved = [(r, m) for r, m in assessed if m["verdict"] not in (HOLDS, HOLDS_WHERE_MEASURED)]
    if not moved:
        return ""
    unassessed = [(r, m) for r, m in compared if str(m["verdict"]).startswith(NOT_ASSESSABLE)]
    # out of every comparison with pairs (the count the Answer gives), those no judge-left-out panel
    # could assess named apart: neither moved nor held (Dawid–Skene, which reweights the same
    # judges, is no second panel; what it does to them is said below)
    apart = (" (" + "; ".join(f"{metric_spec(str(r.metric)).label} ({r.dataset})" for r, _ in unassessed)
             + " could not be tested by leaving a judge out: too few would be labelled)" if unassessed else "")
    text = (f"Leaving out one judge, or combining the votes by Dawid–Skene (each judge weighted by its estimated "
            f"accuracy) instead of a majority, turns, cancels or changes the significance of {len(moved)} of the "
            f"{len(compared)} comparisons with pairs{apart}.")
    # both ways the doubt runs: Dawid–Skene for the other strategy, or the same one made significant
    favoured: dict[str, list[tuple[str, str]]] = {}
    leaned: dict[str, list[tuple[str, str]]] = {}  # the majority ties: no lead to take "instead"
    turned_p: dict[tuple[str, str], list[float]] = {}  # (kind, side) → Dawid–Skene's p where it turns or breaks a tie
    firmed: dict[str, list[tuple[str, str]]] = {}
    shrunk: dict[str, list[tuple[str, str]]] = {}
    for r, m in compared:  # a comparison that holds can still shrink under Dawid–Skene
        ds_diff, ds_p, _ = variant_entry(variants_of(m.get("variants")).get(DAWID_SKENE))
        majority = math.nan if is_missing(m.get("diff")) else float(m.get("diff"))
        if is_missing(ds_diff) or math.isnan(majority) or float(ds_diff) == 0:
            continue
        side = names[1] if float(ds_diff) > 0 else names[0]
        where = (metric_spec(str(r.metric)).label, str(r.dataset))
        if majority == 0:
            leaned.setdefault(side, []).append(where)
            turned_p.setdefault(("lean", side), []).append(math.nan if is_missing(ds_p) else float(ds_p))
        elif math.copysign(1, float(ds_diff)) != math.copysign(1, majority):
            favoured.setdefault(side, []).append(where)
            turned_p.setdefault(("favour", side), []).append(math.nan if is_missing(ds_p) else float(ds_p))
        elif (not is_missing(ds_p) and float(ds_p) < SIGNIFICANCE
              and (is_missing(m.get("p_value")) or float(m.get("p_value")) >= SIGNIFICANCE)):
            firmed.setdefault(side, []).append(where)
        elif abs(float(ds_diff)) < abs(majority) / 2:  # the same side, but under half the lead
            shrunk.setdefault(side, []).append(
                (where[0], f"{where[1]}: {abs(majority):.2f} to {abs(float(ds_diff)):.2f} points"))

    def listed(where: list[tuple[str, str]]) -> str:
        by_metric: dict[str, list[str]] = {}
        for label, dataset in where:
            by_metric.setdefault(label, []).append(dataset)
        return "; ".join(f"{label} ({', '.join(datasets)})" for label, datasets in by_metric.items())

    def noise(kind: str, side: str) -> str:
        """A turn none of whose tests is significant is a direction within noise: said so."""
        return "" if any(p < SIGNIFICANCE for p in turned_p.get((kind, side), [])) else " (not significant)"

    # "turn the lead", not "favour": at p 1 a turned sign is a direction, not a preference
    clauses = ([f"turn the lead to {side} on {listed(where)}{noise('favour', side)}" for side, where in favoured.items()]
               + [f"lean to {side} where the majority finds no difference, on {listed(where)}{noise('lean', side)}"
                  for side, where in leaned.items()]
               + [f"make {side}'s lead significant before Holm on {listed(where)}" for side, where in firmed.items()]
               + [f"shrink {side}'s lead on {listed(where)}" for side, where in shrunk.items()])
    if clauses:
        # over every comparison with pairs, held ones included (a shrink need not move it)
        named = sum(len(w) for group in (favoured, leaned, firmed, shrunk) for w in group.values())
        rest = len(compared) - named
        # the comparisons the list leaves out: said, so "over all" does not read as a list of all
        others = f"; none of this on the other {rest}" if rest > 0 else ""
        text += f" Over all {len(compared)}, moved or not, Dawid–Skene's labels (same votes, on the pairs they label) {_joined(clauses, 'and')}{others}."
    return text


def left_out(all_metrics: pd.DataFrame, pair: tuple[str, str], strategy_labels: StrategyLabels | None) -> list[str]:
    """Model × dataset groups that ran one strategy of ``pair`` only: never pooled into it."""
    out = []
    for (model, dataset), group in all_metrics.groupby(["model", "dataset"], sort=False):
        ran = set(group["strategy"])
        only = [s for s in pair if s in ran]
        if len(only) == 1:
            out.append(f"{dataset} ({model}: ran {strategy_label(only[0], strategy_labels)} only)")
    return out


def answer_context(
    answer: pd.DataFrame | None,
    all_metrics: pd.DataFrame,
    *,
    gate: dict[str, Any] | None = None,
    strategy_labels: StrategyLabels | None = None,
    comparison: ComparisonSpec = ComparisonSpec(),
    strategy_order: Sequence[str] = (),
    strategy_titles: Mapping[str, str] | None = None,
    construction: Sequence[ConstructionFlag] = (),
    read_usability: Mapping[tuple[str, str, str], tuple[float, int]] | None = None,
    robustness: pd.DataFrame | None = None,
    leanings: Sequence[tuple[str, str, float]] = (),
    copies: tuple[int, int] = (0, 0),
) -> dict[str, Any]:
    """The template's ``answer``: per strategy pair, its summary sentence and table rows; what was
    left out; the trust line. ``strategy_titles``: {name: title} spells each strategy out where
    the Answer first names it; ``read_usability``: :func:`usability_of_read`, for the note on
    Usability among the replies that could be read."""
    titles = dict(strategy_titles or {})
    gated = gated_cells(all_metrics)
    flags = {(f.model, f.dataset, f.strategy, f.criterion): f for f in construction}
    values = all_metrics.set_index(["model", "dataset", "strategy", "metric"]) if len(all_metrics) else None
    answer = answer if answer is not None else pd.DataFrame()
    strategies = ordered_strategies(ordered_unique(all_metrics["strategy"]), strategy_order)
    several_models = all_metrics["model"].nunique() > 1
    blocks = []
    for a, b in comparison.pairs(strategies):
        name_a, name_b = strategy_label(a, strategy_labels), strategy_label(b, strategy_labels)
        mine = answer[(answer["strategy_a"] == a) & (answer["strategy_b"] == b)] if len(answer) else answer
        rows = []
        for r in mine.itertuples(index=False):
            rows.append({
                "metric": metric_spec(r.metric).label, "metric_name": r.metric,
                "where": f"{r.model} · {r.dataset}" if several_models else str(r.dataset),
                "verdict": VERDICT_TEXT[r.verdict].format(b=name_b), "verdict_class": r.verdict,
                "difference": "–" if int(r.n_pairs) == 0 else
                # percentage points go unsaid (the header and how-to-read say so); other units are named
                format_paired_difference(r.diff, r.ci_low, r.ci_high, r.n_pairs)
                + ("" if metric_spec(r.metric).percent else f" {_points(r.metric)}"),
                "pairs": str(int(r.n_pairs)),
                "detectable": ("–" if not r.planned or int(r.n_pairs) == 0 else "no size" if is_missing(r.mdd)
                               else f"≥ {float(r.mdd):.1f}"),
                "on_pairs": _on_the_pairs(r, name_a, name_b),
                "value_a": _cell_value(values, r.model, r.dataset, a, r.metric),
                "value_b": _cell_value(values, r.model, r.dataset, b, r.metric),
                # a strategy's own value on votes the gate flagged: marked, so no column reads as a ranking
                "gated_a": (str(r.model), str(r.dataset), a, str(r.metric)) in gated,
                "gated_b": (str(r.model), str(r.dataset), b, str(r.metric)) in gated,
                # the cells behind each strategy's column, for the report's links to the item explorer
                "source_a": (str(r.model), str(r.dataset), a, str(r.metric)),
                "source_b": (str(r.model), str(r.dataset), b, str(r.metric)),
                "why": why(r, strategy_labels, flags) + other_criteria_clause(r, strategy_labels) + power_clause(r) + leaning_clause(r, leanings)
                + opposite_clause(r, values, a, b) + reversal_clause(r, robustness),
            })
        lead, detail = (_summary(mine, name_a, name_b, _full(a, name_a, titles), _full(b, name_b, titles)) if len(mine)
                        else (f"{name_b} against {name_a}: no comparison could be made (no original answered under "
                              "both).", ""))
        headline = f"{lead} {detail}".strip()
        blocks.append({"pair": f"{name_b} − {name_a}", "name_a": name_a, "name_b": name_b, "headline": headline,
                       "lead": lead, "detail": detail,
                       "rows": rows, "left_out": left_out(all_metrics, (a, b), strategy_labels),
                       "unparsed": unparsed_note(mine, values, (a, b), (name_a, name_b), read_usability),
                       "panel": panel_note(mine, robustness, (name_a, name_b))})
    return {"blocks": blocks, "trust": trust_line(gate, copies)}


def trust_line(gate: dict[str, Any] | None, copies: tuple[int, int] = (0, 0)) -> str:
    """"Judges: of 25 criterion × cell agreements, 0 reliable, 20 unreliable, 5 not measured …".
    ``copies``: :func:`bloomqg.reporting.panel.copies_voted_unique`, said beside "reliable" where
    the panel voted copies of their originals unique in a cell whose Unique passed."""
    if gate is None or not gate.get("n_panel"):
        return "Judges: no reliability was computed."
    counts = gate["status_counts"]
    hollow = len(gate.get("by_construction") or [])
    # an agreement only one varying judge makes is no evidence: say so beside "reliable"
    hollow_text = f" ({hollow} of them only by construction, no evidence of agreement)" if hollow else ""
    alphas = list(gate.get("by_prevalence") or [])
    if alphas:  # AC1 passes where one answer dominates; α beside it says how little else is agreed
        which = "both" if len(alphas) == 2 == counts.get(RELIABLE, 0) else f"{len(alphas)} of them"
        hollow_text += (f" ({which} by Gwet's AC1, read where one answer holds ≥ "
                        f"{PREVALENCE_LIMIT:.0%} of the votes, as α reads near 0 there even when the judges agree: "
                        f"{'; '.join(_by_prevalence(group) for group in _prevalence_groups(alphas))})")
    never = list(gate.get("never_measured") or [])
    named = _joined(never, "and") if never else ""
    their = "its values say" if len(never) == 1 else "their values say"
    never_text = (f" {named} could not be measured in any cell (at most one judge's votes vary there, or none do, or no two "
                  f"judges ever gave the rarer answer to the same question, so any agreement printed for them is the "
                  f"panel's make-up or the common answer's), so {their} nothing about the questions, "
                  "however high." if never else "")
    return (f"How far the judges can be trusted: of {gate['n_panel']} agreements (one per criterion in each cell), "
            f"{counts.get(RELIABLE, 0)} reliable{hollow_text}, {counts.get(UNRELIABLE, 0)} unreliable and "
            f"{counts.get(NOT_MEASURED, 0)} not measured (Judge reliability lists each). Reliable means agreeing, not being right"
            + (f": of the {copies[1]} questions voted unique where Unique passed the gate, {copies[0]} share most of "
               "their original's words or characters (by the rules judge's thresholds for a copy); only people's labels "
               "show which are right." if copies[0] else ": only people's labels show that.") + never_text)
