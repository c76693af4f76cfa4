"""The verdict procedure (bloomqg.metrics.answer): the instrument before the power before the
test, and the gate's one rule (bloomqg.voting.agreement.gate_decision) behind it."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from bloomqg.metrics.answer import CANNOT_TELL, HIGHER, LOWER, NO_DIFFERENCE, AnswerSpec, answer_table, measured_criteria
from bloomqg.metrics.plan import items_needed
from bloomqg.voting.agreement import (
    NO_JUDGE_VOTES, NO_RARE_AGREEMENT, NOT_MEASURED, PREVALENCE_LIMIT, RELIABLE, UNRELIABLE, gate_decision, recorded_decision,
)


def paired(dataset: str, metric: str, diff: float, low: float, high: float, p_adj: float, n: int) -> dict:
    return {"model": "m", "dataset": dataset, "metric": metric, "strategy_a": "cot", "strategy_b": "fgp",
            "n_pairs": n, "diff": diff, "ci_low": low, "ci_high": high, "p_adjusted": p_adj, "family_size": 2}


def plan(dataset: str, metric: str, mdd: float) -> dict:
    """A study-plan row: 10 points to detect at 30% discordance, 80% power, Holm over 2 (the plan's
    own n_needed, as bloomqg.metrics.plan.study_plan computes it)."""
    from bloomqg.metrics.plan import pairs_needed

    return {"model": "m", "dataset": dataset, "metric": metric, "strategy_a": "cot", "strategy_b": "fgp",
            "mdd": mdd, "test": "mcnemar", "discordance": 0.3, "power": 0.8, "alpha": 0.05, "family_size": 2,
            "pair_yield": 1.0, "difference": 10.0, "n_needed": pairs_needed("mcnemar", 0.3, 0.1, 0.8, 0.025)}


def panel(dataset: str, criterion: str, alpha: float, *, ac1: float = math.nan, prevalence: float = 0.5,
          n_items: int = 40, passed: bool | None = None, strategies=("cot", "fgp")) -> list[dict]:
    decision = gate_decision("alpha", alpha, ac1, prevalence, 0.7, n_items=n_items)
    return [{"model": "m", "dataset": dataset, "strategy": s, "criterion": criterion, "judge": None,
             "alpha": alpha, "ac1": ac1, "prevalence": prevalence, "n_items": n_items, "gate_threshold": 0.7,
             "gate_coefficient": decision.coefficient, "gate_status": decision.status,
             "gate_reason": decision.why or None, "gate_passed": decision.passed if passed is None else passed} for s in strategies]


def reliable_panel(dataset: str) -> list[dict]:
    return [row for c in ("unique", "readable", "answerable", "bloom_level", "knowledge_units")
            for row in panel(dataset, c, 0.9)]


def test_the_gate_rule_reads_alpha_then_ac1_beyond_the_prevalence_limit_and_says_what_it_did_not_measure():
    assert gate_decision("alpha", 0.8, 0.1, 0.5, 0.7, n_items=30).status == RELIABLE
    assert gate_decision("alpha", 0.2, 0.95, 0.5, 0.7, n_items=30).status == UNRELIABLE
    # the prevalence paradox: α collapses at 97% "yes" although the judges agree; AC1 decides
    high = gate_decision("alpha", 0.05, 0.93, 0.97, 0.7, n_items=30)
    assert (high.status, high.coefficient) == (RELIABLE, "ac1")
    assert gate_decision("alpha", 0.05, 0.5, PREVALENCE_LIMIT, 0.7, n_items=30).status == UNRELIABLE
    # no variation at all, or no item with two votes: agreement was not measured, either way
    assert gate_decision("alpha", math.nan, 1.0, 1.0, 0.7, n_items=30).status == NOT_MEASURED
    assert gate_decision("alpha", math.nan, math.nan, math.nan, 0.7, n_items=0).status == NOT_MEASURED


def test_a_common_answer_alone_is_not_agreement_however_high_ac1_reads():
    """Two judges that never give the rarer answer to the same question agree only on the common
    one, which judges voting without reading reach as well: AC1 0.80 at 91% "yes", α and κ below
    0 (the default study's computer-science CoT answerability). One shared rare answer is enough
    for AC1 to decide, as on the paper's release."""
    from bloomqg.voting.cell import measure_criterion
    # rules says "no" to 4 of 28 questions, smollm2 to 1 other; minilm abstains
    never_shared = [["0" if i < 4 else "1", None, "0" if i == 4 else "1"] for i in range(28)]
    alone = measure_criterion("answerable", never_shared, ["rules", "minilm", "smollm2"], n_resamples=0)
    assert alone.agreement.ac1 >= 0.7 and alone.alpha.alpha < 0 and alone.agreement.n_items_rare_agreed == 0
    assert (alone.decision.status, alone.decision.why) == (NOT_MEASURED, NO_RARE_AGREEMENT)
    shared = [["0" if i < 4 else "1", None, "0" if i in (3, 4) else "1"] for i in range(40)]
    together = measure_criterion("answerable", shared, ["rules", "minilm", "smollm2"], n_resamples=0)
    assert together.agreement.n_items_rare_agreed == 1
    assert (together.decision.status, together.decision.coefficient) == (RELIABLE, "ac1")
    # what the reliability row records reads back as the same decision
    row = {**together.panel_columns("majority"), "alpha": together.alpha.alpha, "ac1": together.agreement.ac1,
           "n_items": together.alpha.n_items, "gate_threshold": 0.7}
    assert recorded_decision({**row, **alone.panel_columns("majority"), "ac1": alone.agreement.ac1}).why == \
        NO_RARE_AGREEMENT


def test_each_metric_rests_on_the_criteria_it_measures():
    assert measured_criteria("catcons") == ("bloom_level",)
    assert measured_criteria("knowcov") == ("knowledge_units",)
    assert measured_criteria("usability") == ("answerable", "readable", "unique")


def test_judges_that_disagree_make_it_cannot_tell_whatever_the_test_says():
    rows = [*panel("cs", "bloom_level", 0.09), *reliable_panel("cs")[:6]]
    frame = answer_table(pd.DataFrame([paired("cs", "catcons", 30.0, 10.0, 50.0, 0.001, 200)]),
                         pd.DataFrame([plan("cs", "catcons", 8.0)]), pd.DataFrame(rows))
    [row] = frame.to_dict("records")
    assert (row["verdict"], row["reason"]) == (CANNOT_TELL, "judges_disagree")
    assert row["reliability_status"] == UNRELIABLE and row["reliability_value"] == pytest.approx(0.09)


def test_too_few_pairs_is_cannot_tell_with_the_items_that_would_detect_ten_points():
    frame = answer_table(pd.DataFrame([paired("cs", "catcons", 0.0, -30.0, 30.0, 1.0, 6)]),
                         pd.DataFrame([plan("cs", "catcons", 48.0)]), pd.DataFrame(reliable_panel("cs")))
    [row] = frame.to_dict("records")
    assert (row["verdict"], row["reason"]) == (CANNOT_TELL, "too_few_pairs")
    # the study plan's figures: 10 points at 30% discordance, a few hundred pairs
    assert (row["target_difference"], row["n_needed_target"]) == (10.0, plan("cs", "catcons", 48.0)["n_needed"])
    assert row["n_needed_target"] > 100
    # the items a verdict's bound (20 points) would take, by the plan's own rules: fewer than its 10
    assert 0 < row["n_needed_verdict"] < row["n_needed_target"]
    assert items_needed(plan("cs", "catcons", 48.0), 10.0) == plan("cs", "catcons", 48.0)["n_needed"]
    hopeless = answer_table(pd.DataFrame([paired("cs", "catcons", 0.0, -30.0, 30.0, 1.0, 3)]),
                            pd.DataFrame([plan("cs", "catcons", math.nan)]), pd.DataFrame(reliable_panel("cs")))
    assert hopeless["reason"].tolist() == ["too_few_pairs"]


def test_a_measurable_powered_comparison_gets_higher_lower_or_no_difference_from_the_test():
    rows = pd.DataFrame([paired("cs", "catcons", 12.0, 5.0, 19.0, 0.004, 300),
                         paired("social", "catcons", -12.0, -19.0, -5.0, 0.004, 300),
                         paired("math", "catcons", 1.0, -4.0, 6.5, 0.7, 300),
                         paired("geo", "catcons", 6.0, 0.5, 11.5, 0.08, 300)])
    plans = pd.DataFrame([plan(d, "catcons", 9.0) for d in ("cs", "social", "math", "geo")])
    reliability = pd.DataFrame([r for d in ("cs", "social", "math", "geo") for r in reliable_panel(d)])
    frame = answer_table(rows, plans, reliability).set_index("dataset")
    assert frame.loc["cs", "verdict"] == HIGHER and frame.loc["social", "verdict"] == LOWER
    assert frame.loc["math", "verdict"] == NO_DIFFERENCE
    assert frame.loc["math", "no_difference_bound"] == pytest.approx(6.5)
    # the interval excludes 0 but Holm's p does not reach 0.05: the two disagree, so it cannot tell
    assert (frame.loc["geo", "verdict"], frame.loc["geo", "reason"]) == (CANNOT_TELL, "borderline")


def test_unmeasured_agreement_does_not_stop_the_test_and_is_named():
    """The paper's release publishes no per-judge Bloom votes: its α does not exist, which is
    not 'judges disagree' (the reason as bloomqg.release.reliability records it)."""
    rows = [{**row, "gate_reason": NO_JUDGE_VOTES} for row in panel("cs", "bloom_level", math.nan, n_items=0, passed=None)]
    frame = answer_table(pd.DataFrame([paired("cs", "catcons", 12.0, 5.0, 19.0, 0.004, 300)]),
                         pd.DataFrame([plan("cs", "catcons", 9.0)]), pd.DataFrame(rows))
    [row] = frame.to_dict("records")
    assert row["verdict"] == HIGHER and row["reliability_status"] == NOT_MEASURED
    assert row["reliability_why"] == NO_JUDGE_VOTES


def test_the_bound_on_detectable_differences_comes_from_the_config():
    rows = pd.DataFrame([paired("cs", "catcons", 1.0, -10.0, 12.0, 0.9, 80)])
    plans = pd.DataFrame([plan("cs", "catcons", 25.0)])
    reliability = pd.DataFrame(reliable_panel("cs"))
    assert answer_table(rows, plans, reliability)["verdict"].tolist() == [CANNOT_TELL]
    lenient = AnswerSpec.from_config({"max_detectable_difference": 30})
    assert answer_table(rows, plans, reliability, lenient)["verdict"].tolist() == [NO_DIFFERENCE]


def test_agreement_the_study_could_not_measure_stops_the_verdict_before_the_power():
    """A criterion every judge answers alike, or only one judge varies on, cannot show that the
    panel tells questions apart: the verdict stops there, with its own reason, ahead of the power
    (five fresh readers of the default report took "too few pairs" beside "agreement not measured"
    as the wrong reason). Votes published without the judges' own (NO_JUDGE_VOTES) do not stop it."""
    from bloomqg.reporting.answer import power_clause, why

    rows = [*panel("cs", "unique", 0.9), *panel("cs", "answerable", 0.9),
            *panel("cs", "readable", math.nan, ac1=1.0, prevalence=1.0)]
    strong = answer_table(pd.DataFrame([paired("cs", "usability", 12.0, 5.0, 19.0, 0.004, 300)]),
                          pd.DataFrame([plan("cs", "usability", 9.0)]), pd.DataFrame(rows))
    [row] = strong.itertuples(index=False)
    assert (row.verdict, row.reason, row.reliability_cell) == (CANNOT_TELL, "agreement_not_measured", "cot|readable")
    text = why(row)
    assert text.startswith("Readable agreement not measured (†; e.g. Readable in CoT: every vote the same); interval")
    assert "interval excludes 0, but on those votes: no evidence" in text
    assert power_clause(row) == ""  # 300 pairs detect 9 points
    from bloomqg.reporting.answer import _summary
    _, detail = _summary(strong, "CoT", "FGP", "CoT", "FGP")
    assert detail.startswith("The judges' agreement on whether a question is readable is not measured: these votes "
                             "cannot show it. "
                             "What would settle it: judges that agree")
    weak = answer_table(pd.DataFrame([paired("cs", "usability", 12.0, -5.0, 29.0, 0.4, 19)]),
                        pd.DataFrame([plan("cs", "usability", 43.8)]), pd.DataFrame(rows))
    assert power_clause(next(weak.itertuples(index=False))) == "; too few pairs as well"
    # unreliable comes first: the judges that disagree are the verdict's reason
    unreliable = answer_table(pd.DataFrame([paired("cs", "usability", 12.0, 5.0, 19.0, 0.004, 300)]),
                              pd.DataFrame([plan("cs", "usability", 9.0)]),
                              pd.DataFrame([r for r in rows if r["criterion"] != "unique"] + panel("cs", "unique", 0.2)))
    assert unreliable["reason"].tolist() == ["judges_disagree"]
    # the release's Bloom votes are published without the judges' own, beside a study's own not-measured Readable:
    # the study's reason is the one that stops it
    published = [{**r, "gate_reason": NO_JUDGE_VOTES} for r in panel("cs", "bloom_level", math.nan, n_items=0)]
    mixed = answer_table(pd.DataFrame([paired("cs", "catcons", 12.0, 5.0, 19.0, 0.004, 300)]),
                         pd.DataFrame([plan("cs", "catcons", 9.0)]), pd.DataFrame(published))
    assert mixed["verdict"].tolist() == [HIGHER]


def test_a_chance_panel_does_not_pass_the_gate_through_ac1():
    """Judges that say "yes" at their own rates whatever the question agree on the common answer
    and now and then share the rarer one: AC1 read alone at ≥ 90% prevalence passed such panels
    (benchmarks/gate_false_pass.py: a quarter to a half). Asking for α's interval above 0 passes
    none of them here, and still passes panels that read the question."""
    import numpy as np

    from bloomqg.voting.agreement import AT_CHANCE
    from bloomqg.voting.cell import measure_criterion

    rng = np.random.default_rng(7)
    names = ["a", "b", "c"]
    ac1_alone = passed = 0
    for seed in range(30):
        votes = [["1" if rng.random() < rate else "0" for rate in (0.92, 0.95, 0.97)] for _ in range(100)]
        measured = measure_criterion("unique", votes, names, n_resamples=200, seed=seed)
        a = measured.agreement
        ac1_alone += a.prevalence >= PREVALENCE_LIMIT and a.ac1 >= 0.7 and a.n_items_rare_agreed > 0
        passed += measured.passed
        if a.prevalence >= PREVALENCE_LIMIT and a.n_items_rare_agreed > 0:
            assert measured.passed or measured.decision.why == AT_CHANCE
    # α's lower end is a one-sided 2.5% test: a chance panel may pass now and then, not one in four
    assert ac1_alone >= 8 and passed <= 2
    reading = 0
    for seed in range(30):
        truth = rng.random(100) < 0.9
        votes = [["1" if (t if rng.random() < 0.98 else not t) else "0" for _ in names] for t in truth]
        reading += measure_criterion("unique", votes, names, n_resamples=200, seed=seed).passed
    assert reading >= 24


def test_a_verdict_names_every_criterion_whose_agreement_was_not_measured():
    """Computer-science Usability as the default study had it: Readable not measured in either
    cell, Answerable in one, Unique reliable. The row records both, and its Why names both, not
    only the worst (reading 28 of the default report found 'Readable's agreement not measured'
    where Answerable's was not measured either)."""
    from bloomqg.reporting.answer import other_criteria_clause, why

    rows = [*panel("cs", "unique", 0.9), *panel("cs", "readable", math.nan, ac1=1.0, prevalence=1.0),
            *panel("cs", "answerable", 0.9, strategies=("fgp",)),
            *panel("cs", "answerable", math.nan, ac1=1.0, prevalence=1.0, strategies=("cot",))]
    assert {r["gate_status"] for r in rows if r["criterion"] != "unique" and r["alpha"] != 0.9} == {NOT_MEASURED}
    frame = answer_table(pd.DataFrame([paired("cs", "usability", 26.3, 0.9, 51.4, 0.125, 19)]),
                         pd.DataFrame([plan("cs", "usability", 43.8)]), pd.DataFrame(rows))
    [row] = frame.itertuples(index=False)
    assert (row.verdict, row.reason, row.reliability_status) == (CANNOT_TELL, "agreement_not_measured", NOT_MEASURED)
    # the cells, in measured_criteria's order
    assert row.reliability_unmeasured == "cot|answerable,cot|readable,fgp|readable"
    text = why(row)
    # a criterion not measured in one cell only is named with it
    assert text.startswith("Answerable in CoT and Readable agreement not measured (†; ")
    assert other_criteria_clause(row) == ""  # the Why named them all
    # behind an unreliable criterion, the unmeasured ones are added to the Why that names it
    rows = [r for r in rows if r["criterion"] != "unique"] + panel("cs", "unique", 0.1)
    [row] = answer_table(pd.DataFrame([paired("cs", "usability", 26.3, 0.9, 51.4, 0.125, 19)]),
                         pd.DataFrame([plan("cs", "usability", 43.8)]), pd.DataFrame(rows)).itertuples(index=False)
    assert (row.reason, row.reliability_cell, row.reliability_unreliable) == ("judges_disagree", "cot|unique",
                                                                              "cot|unique,fgp|unique")
    assert other_criteria_clause(row) == "; Answerable in CoT and Readable agreement not measured"
    # a second unreliable criterion is named beside the worst one
    rows = [r for r in rows if r["criterion"] != "answerable"] + panel("cs", "answerable", 0.3)
    [row] = answer_table(pd.DataFrame([paired("cs", "usability", 26.3, 0.9, 51.4, 0.125, 19)]),
                         pd.DataFrame([plan("cs", "usability", 43.8)]), pd.DataFrame(rows)).itertuples(index=False)
    assert (row.reliability_cell, row.reliability_unreliable) == ("cot|unique", "cot|answerable,fgp|answerable,"
                                                                                 "cot|unique,fgp|unique")
    assert other_criteria_clause(row) == "; Answerable unreliable too; Readable agreement not measured"
    # unreliable in one cell, not measured in the other: each said with its cell
    rows = [r for r in rows if r["criterion"] != "answerable"] + panel("cs", "answerable", 0.3, strategies=("cot",)) \
        + panel("cs", "answerable", math.nan, ac1=1.0, prevalence=1.0, strategies=("fgp",))
    [row] = answer_table(pd.DataFrame([paired("cs", "usability", 26.3, 0.9, 51.4, 0.125, 19)]),
                         pd.DataFrame([plan("cs", "usability", 43.8)]), pd.DataFrame(rows)).itertuples(index=False)
    assert other_criteria_clause(row) == ("; Answerable in CoT unreliable too; Answerable in FGP and Readable agreement "
                                      "not measured")


def test_judges_that_disagree_beyond_chance_are_unreliable_where_two_vary_but_not_beside_a_constant_judge():
    """The default study's computer-science readability: smollm2 says "readable" to every question,
    minilm abstains, rules calls 39% unreadable. α there is at most 0 whatever the questions, its value
    fixed by how often rules dissents (reading 37 reproduced every printed α from that count), so an
    interval below 0 is the panel's make-up too: not measured. Where two judges vary and α's interval
    lies below 0, they disagree more than chance would: unreliable."""
    from bloomqg.voting.agreement import BELOW_CHANCE, ONE_VARYING
    from bloomqg.voting.cell import measure_criterion

    names = ["rules", "minilm", "smollm2"]
    one_varying = [["0" if i % 5 < 2 else "1", None, "1"] for i in range(36)]
    measured = measure_criterion("readable", one_varying, names, n_resamples=200)
    assert measured.n_varying_judges == 1 and measured.alpha.ci_high < 0
    assert (measured.decision.status, measured.decision.why) == (NOT_MEASURED, ONE_VARYING)
    # two judges varying against each other: one says "no" exactly where the other says "yes"
    opposed = [["0", None, "1"] if i % 3 == 0 else ["1", None, "0"] if i % 3 == 1 else ["1", None, "1"]
               for i in range(36)]
    contrary = measure_criterion("readable", opposed, names, n_resamples=200)
    assert contrary.n_varying_judges == 2 and contrary.alpha.ci_high < 0
    assert (contrary.decision.status, contrary.decision.why, contrary.decision.coefficient) == (
        UNRELIABLE, BELOW_CHANCE, "alpha")
    # an interval that prints as touching 0 ([-0.00, -0.00]) is no evidence of disagreement
    assert gate_decision("alpha", -0.001, 0.99, 0.998, 0.7, n_items=1400, n_varying_judges=3, n_items_rare_agreed=0,
                         alpha_ci_low=-0.0024, alpha_ci_high=-0.0002).status == NOT_MEASURED
