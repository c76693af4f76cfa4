"""The report's Answer: one sentence per planned strategy pair and headline metric, built from the
paired rows, the robustness rows and the study plan; designs a pair cannot compare left out."""

from __future__ import annotations

import math

import pandas as pd

from bloomqg.metrics.robustness import NOT_COMPARED, STRATEGY_COMPARISON
from bloomqg.reporting.answer import NO_PLAN, answer_context


def paired_row(dataset: str, metric: str, diff: float, low: float, high: float, p_adj: float, n: int) -> dict:
    return {"model": "m", "dataset": dataset, "metric": metric, "strategy_a": "cot", "strategy_b": "fgp",
            "n_pairs": n, "value_a": 50.0, "value_b": 50.0 + diff, "diff": diff, "ci_low": low, "ci_high": high,
            "test": "mcnemar", "p_value": p_adj / 2, "p_adjusted": p_adj, "family_size": 2, "effect_size": 0.1,
            "effect_size_name": "cohens_h"}


def metrics_frame() -> pd.DataFrame:
    cells = [("cs", "cot"), ("cs", "fgp"), ("math", "fgp"), ("social", "cot"), ("social", "fgp")]
    return pd.DataFrame([{"model": "m", "dataset": d, "strategy": s, "metric": "catcons", "value": 10.0, "n": 9}
                         for d, s in cells])


def robustness_row(dataset: str, metric: str, verdict: str, n: int) -> dict:
    return {"comparison": STRATEGY_COMPARISON, "dataset": dataset, "strategy": "cot", "strategy_b": "fgp",
            "model": "m", "model_b": None, "metric": metric, "n_pairs": n, "verdict": verdict}


PAIRED = pd.DataFrame([
    paired_row("cs", "catcons", -12.5, -40.0, 15.0, 0.73, 8),
    paired_row("social", "catcons", 30.0, 10.0, 50.0, 0.012, 20),
    paired_row("social", "knowcov", 100.0, 100.0, 100.0, 0.9, 1),
    {**paired_row("cs", "knowcov", math.nan, math.nan, math.nan, math.nan, 0), "p_value": math.nan},
])
ROBUSTNESS = pd.DataFrame([
    robustness_row("cs", "catcons", "within judge noise", 8), robustness_row("social", "catcons", "holds", 20),
    robustness_row("cs", "knowcov", NOT_COMPARED, 0),
])


def test_each_pair_and_metric_reads_its_difference_interval_holm_p_pairs_and_survival():
    answer = answer_context(PAIRED, metrics_frame(), robustness=ROBUSTNESS, metrics=("catcons", "knowcov"))
    [block] = answer["blocks"]
    assert block["pair"] == "FGP − CoT"
    assert block["headline"].startswith("FGP against CoT: 1 of 3 paired comparisons significant after Holm")
    catcons, knowcov = block["sentences"]
    assert catcons["metric"] == "CatCons"
    # the paired table's own formatting: two decimals, the interval to one, p to three
    assert "cs: -12.50 points [-40.0, 15.0], Holm p = 0.730, n = 8 pairs, changes without a judge (within judge " \
           "noise); no detectable difference" in catcons["text"]
    assert "social: 30.00 points [10.0, 50.0], Holm p = 0.012, n = 20 pairs, the same with any one judge left " \
           "out; significant, FGP higher" in catcons["text"]
    # one pair: no interval, said; no pairs: not compared, never a verdict
    assert "social: 100.00 (one pair: no interval) points" not in knowcov["text"]
    assert "social: 100.00 points (one pair: no interval)" in knowcov["text"]
    assert "cs: not compared (n = 0 pairs with a value)" in knowcov["text"]
    # math ran under FGP only: a difference of design, left out by name, never pooled
    assert block["left_out"] == ["math (m: ran FGP only)"]


def test_without_a_study_plan_the_detectable_difference_is_said_to_be_not_computed():
    answer = answer_context(PAIRED, metrics_frame(), robustness=ROBUSTNESS, metrics=("catcons",))
    assert not answer["has_plan"]
    assert NO_PLAN[1:] in answer["blocks"][0]["headline"] and "could detect" not in str(answer)


def test_with_a_study_plan_a_non_significant_comparison_says_what_it_could_have_detected():
    plan = pd.DataFrame([{"model": "m", "dataset": "cs", "metric": "catcons", "strategy_a": "cot", "strategy_b": "fgp",
                          "n_pairs": 8, "mdd": 42.345, "power": 0.8, "alpha": 0.05, "family_size": 2,
                          "n_needed": 120, "difference": 10.0, "discordance": 0.3, "discordance_source": "pilot"}])
    answer = answer_context(PAIRED, metrics_frame(), robustness=ROBUSTNESS, study_plan=plan, metrics=("catcons",))
    text = answer["blocks"][0]["sentences"][0]["text"]
    assert "no detectable difference; this study could detect ≥ 42.3 points (power 80%); 10 points would need 120 items per cell" in text
    assert NO_PLAN not in answer["blocks"][0]["headline"]
    # too few pairs for any difference: said so, with what it would take, never "≥ nan"
    hopeless = answer_context(PAIRED, metrics_frame(), robustness=ROBUSTNESS, metrics=("catcons",),
                              study_plan=plan.assign(n_pairs=2, mdd=float("nan")))
    text = hopeless["blocks"][0]["sentences"][0]["text"]
    assert "with 2 pairs this study could not detect a difference of any size (power 80%); 10 points would need 120" in text
    assert "nan" not in text


def test_the_trust_line_gives_the_gate_and_the_coefficient_ranges_without_from_x_to_x():
    from bloomqg.reporting.answer import trust_line

    reliability = pd.DataFrame({"judge": [None, None, None], "alpha": [0.2, 0.8, math.nan], "ac1": [0.5, 0.5, 0.9]})
    gate = {"failures": [{}, {}], "n_panel": 3, "coefficient": "Krippendorff's α", "thresholds": [0.667]}
    line = trust_line(gate, reliability)
    assert line.startswith("Trust: 2 of 3 criterion × cell agreements failed the gate (which asks Krippendorff's α ≥ 0.667")
    assert "α 0.20 to 0.80 (1 undefined)" in line and "AC1 0.50 to 0.90" in line
    same = trust_line(gate, reliability.assign(ac1=0.5))
    assert "AC1 0.50 over" in same and "0.50 to 0.50" not in same


def test_an_interval_that_excludes_0_beside_a_holm_p_that_does_not_says_which_decides():
    # the paired interval is per comparison; Holm's p is over the family: a teacher must not read
    # [5.3, 53.3] as a finding when the adjusted test is not significant
    paired = pd.DataFrame([paired_row("cs", "catcons", 31.8, 5.3, 53.3, 0.078, 22)])
    text = answer_context(paired, metrics_frame(), robustness=ROBUSTNESS, metrics=("catcons",))["blocks"][0]["sentences"][0]["text"]
    assert "31.80 points [5.3, 53.3], Holm p = 0.078" in text
    assert "its interval excludes 0 but is not adjusted for the 2 CatCons comparisons" in text
    assert "after Holm's adjustment it is not significant; no detectable difference" in text
    significant = paired.assign(p_adjusted=0.01)
    text = answer_context(significant, metrics_frame(), robustness=ROBUSTNESS, metrics=("catcons",))["blocks"][0]["sentences"][0]["text"]
    assert "not adjusted" not in text and "significant, FGP higher" in text
