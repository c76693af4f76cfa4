"""The alternative annotator test against a worked example computed by hand.

Six items rated yes/no by annotators A, B, C and by judge J:

    item  A  B  C  J
    1     y  y  y  y
    2     y  y  n  y
    3     n  n  n  n
    4     y  n  n  n
    5     n  y  y  y
    6     y  y  n  n

Leaving A out (the others are B and C), the alignment (share of the others agreeing) of A and of J
per item is 1/1, .5/.5, 1/1, 0/1, 0/1, .5/.5, so d = W_h − W_f = 0, 0, 0, −1, −1, 0 (a tie counts
for both) and ρ_J,A = 1. Leaving B out: A and C; every item ties (d = 0). Leaving C out: A and B;
d = 0, −1, 0, 0, 0, 0.

t = (mean d − ε) / (s / √6): for A, mean −1/3 and s² = (4·(1/3)² + 2·(2/3)²)/5 = 4/15; for C,
mean −1/6 and s² = (5·(1/6)² + (5/6)²)/5 = 1/6. For B every d is 0 < ε: p = 0. The p-values of
Student's t with 5 degrees of freedom come from its closed form (odd ν):
P(T ≤ −|t|) = 1/2 − (θ + sin θ (cos θ + ⅔ cos³ θ)) / π, θ = atan(|t| / √5).

Benjamini–Yekutieli over m = 3 at q = 0.05: H₃ = 11/6, thresholds k · 0.05 / 3 / H₃ =
0.00909, 0.01818, 0.02727. At ε = 0.2: p_A ≈ 0.0263 and p_C ≈ 0.0395 pass none of theirs, so
only B is beaten: ω = 1/3, J cannot replace an annotator. At ε = 0.3: p_A ≈ 0.0150 ≤ 0.01818
and p_C ≈ 0.0190 ≤ 0.02727, all three are beaten: ω = 1, J can.
"""

from __future__ import annotations

import math

import pytest

from bloomqg.annotation.alt_test import alt_test, benjamini_yekutieli, verdict_text

A = dict(zip("123456", [True, True, False, True, False, True]))
B = dict(zip("123456", [True, True, False, False, True, True]))
C = dict(zip("123456", [True, False, False, False, True, False]))
J = dict(zip("123456", [True, True, False, False, True, False]))


def t_cdf_5(t: float) -> float:
    """P(T ≤ t) for Student's t with 5 degrees of freedom, t ≤ 0 (closed form)."""
    theta = math.atan(abs(t) / math.sqrt(5))
    return 0.5 - (theta + math.sin(theta) * (math.cos(theta) + 2 / 3 * math.cos(theta) ** 3)) / math.pi


def by_hand(epsilon: float) -> dict[str, float]:
    t_a = (-1 / 3 - epsilon) / (math.sqrt(4 / 15) / math.sqrt(6))
    t_c = (-1 / 6 - epsilon) / (math.sqrt(1 / 6) / math.sqrt(6))
    return {"A": t_cdf_5(t_a), "B": 0.0, "C": t_cdf_5(t_c)}


def test_worked_example_at_the_experts_epsilon():
    result = alt_test(J, {"A": A, "B": B, "C": C}, epsilon=0.2, min_items_per_annotator=6)
    by_annotator = {c.annotator: c for c in result.comparisons}
    expected = by_hand(0.2)
    assert by_annotator["A"].p_value == pytest.approx(expected["A"], abs=1e-9)
    assert by_annotator["C"].p_value == pytest.approx(expected["C"], abs=1e-9)
    assert by_annotator["B"].p_value == 0.0
    assert round(expected["A"], 4) == 0.0263 and round(expected["C"], 4) == 0.0395
    assert by_annotator["A"].judge_advantage == 1.0 and by_annotator["A"].annotator_advantage == pytest.approx(4 / 6)
    assert [c.won for c in result.comparisons] == [False, True, False]
    assert result.winning_rate == pytest.approx(1 / 3)
    assert result.advantage_probability == 1.0
    assert result.passed is False
    assert verdict_text("J", "readable", result).startswith("judge J cannot replace an annotator on readable at ε = 0.2")


def test_worked_example_with_a_wider_margin_passes():
    result = alt_test(J, {"A": A, "B": B, "C": C}, epsilon=0.3, min_items_per_annotator=6)
    expected = by_hand(0.3)
    assert [c.p_value for c in result.comparisons] == pytest.approx([expected["A"], 0.0, expected["C"]], abs=1e-9)
    assert round(expected["A"], 4) == 0.0150 and round(expected["C"], 4) == 0.0190
    assert result.winning_rate == 1.0 and result.passed is True
    assert "can replace" in verdict_text("J", "readable", result)


def test_too_few_items_leaves_annotators_untested():
    result = alt_test(J, {"A": A, "B": B, "C": C})  # the paper's minimum: 30 items per annotator
    assert result.comparisons == () and result.skipped == ("A", "B", "C")
    assert result.passed is None and math.isnan(result.winning_rate)
    assert "was not tested" in verdict_text("J", "readable", result)


def test_items_without_a_second_annotator_or_a_judge_rating_are_dropped():
    lone = {**A, "7": True}  # only A rated item 7
    judge = {**J, "6": None}  # the judge gave no value on item 6
    result = alt_test(judge, {"A": lone, "B": B, "C": C}, min_items_per_annotator=5)
    assert {c.n for c in result.comparisons} == {5}


def test_benjamini_yekutieli_step_up():
    # m = 4, H_4 = 25/12: thresholds k * 0.05 / 4 / H_4 = 0.006, 0.012, 0.018, 0.024
    assert benjamini_yekutieli([0.02, 0.005, 0.011, 0.3], 0.05) == [False, True, True, False]
    # step-up: 0.017 <= 0.018 rejects the two smaller ones too, above their own thresholds
    assert benjamini_yekutieli([0.013, 0.5, 0.007, 0.017], 0.05) == [True, False, True, True]
    assert benjamini_yekutieli([0.007, 0.5], 0.05) == [True, False]  # H_2 = 1.5: thresholds 0.0167, 0.0333
    assert benjamini_yekutieli([0.02, 0.5], 0.05) == [False, False]
    assert benjamini_yekutieli([], 0.05) == []


def test_exported_sheets_of_three_annotators_through_the_import(tmp_path):
    """The worked example filled in the exported form (the blank sheet) by three annotators, and
    a judge's judgments file: the import's alt-test frames carry the hand-computed figures."""
    import pandas as pd

    from bloomqg.annotation.alt_test import alt_test_frames
    from bloomqg.annotation.form import blank_sheet
    from bloomqg.annotation.judge_validation import annotated_judge_ratings
    from bloomqg.annotation.sheets import read_sheets
    from bloomqg.store.frames import ANNOTATION_ITEMS, CRITERIA, JUDGMENTS

    ids = [f"A000{i}" for i in range(1, 7)]
    items = pd.DataFrame({
        "annotation_id": ids, "prompt_id": [f"cs-{i}:fgp" for i in range(1, 7)], "item_id": [f"cs-{i}" for i in range(1, 7)],
        "dataset": "cs", "strategy": "fgp", "model": "m", "original_question": "What is a stack?",
        "original_bloom_level": "Remember", "original_knowledge_units": [["Stacks"]] * 6,
        "new_question": "Design a stack that returns its minimum.", "unit_choices": [["Queues", "Stacks"]] * 6,
        "panel_unique": True, "panel_readable": True, "panel_answerable": True, "panel_bloom_level": "Create",
        "panel_knowledge_units": [["Stacks"]] * 6,
    }, columns=ANNOTATION_ITEMS.names)
    paths = []
    for who, answers in (("A", A), ("B", B), ("C", C)):
        sheet = blank_sheet(items).assign(
            annotator=who, unique="yes", answerable="yes", bloom_level="Create", knowledge_units="Stacks",
            readable=["yes" if answers[str(i)] else "no" for i in range(1, 7)])
        path = tmp_path / f"{who}.csv"
        sheet.to_csv(path, index=False)
        paths.append(path)
    judgments = pd.DataFrame([{
        "prompt_id": f"cs-{i}:fgp", "item_id": f"cs-{i}", "dataset": "cs", "strategy": "fgp", "model": "m",
        "judge": "J", "criterion": criterion, "status": "ok",
        "value_bool": J[str(i)] if criterion == "readable" else (True if criterion in ("unique", "answerable") else None),
        "value_level": "Create" if criterion == "bloom_level" else None,
        "value_units": ["Stacks"] if criterion == "knowledge_units" else None,
    } for i in range(1, 7) for criterion in CRITERIA], columns=JUDGMENTS.names)

    ratings = read_sheets(paths, items)
    summary, comparisons = alt_test_frames(items, ratings, annotated_judge_ratings(items, [judgments]),
                                           epsilon=0.2, min_items_per_annotator=6)
    readable = summary[(summary["rater"] == "J") & (summary["criterion"] == "readable")].iloc[0]
    assert readable["winning_rate"] == pytest.approx(1 / 3) and readable["passed"] == False  # noqa: E712
    assert readable["verdict"].startswith("judge J cannot replace an annotator on readable at ε = 0.2")
    mine = comparisons[(comparisons["rater"] == "J") & (comparisons["criterion"] == "readable")].set_index("annotator")
    expected = by_hand(0.2)
    assert mine["p_value"].to_dict() == pytest.approx(expected, abs=1e-9)
    # the panel says readable everywhere, as the judge does on items 1, 2, 5 only: also tested
    assert set(summary["rater"]) == {"panel majority", "J"} and len(summary) == 2 * len(CRITERIA)
    # on the criteria where everyone agrees, every comparison ties: d = 0 < ε, the judge wins all
    unique = summary[(summary["rater"] == "J") & (summary["criterion"] == "unique")].iloc[0]
    assert unique["winning_rate"] == 1.0 and unique["passed"] == True  # noqa: E712

    two = ratings[ratings["annotator"] != "C"]
    assert alt_test_frames(items, two, {})[0].empty  # fewer than three annotators: not run
