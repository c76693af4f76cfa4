"""Majority votes, agreement, Krippendorff's α (against published values) and the α gate."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from bloomqg.store.parquet_io import to_table
from bloomqg.store.frames import CRITERIA, JUDGMENTS, RELIABILITY, VOTES
from bloomqg.voting.alpha import alpha_from_votes, alpha_with_ci, encode_votes
from bloomqg.voting.cell import vote_cell
from bloomqg.voting.majority import majority, useful_from

nan = None


# -- published α values -------------------------------------------------------------------------

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: 4 observers ×
# 12 units with missing values; nominal α = 0.743, ordinal α = 0.815. Rows are units here.
KRIPPENDORFF_C = [
    [1, 1, nan, 1], [2, 2, 3, 2], [3, 3, 3, 3], [3, 3, 3, 3], [2, 2, 2, 2], [1, 2, 3, 4],
    [4, 4, 4, 4], [1, 1, 2, 1], [2, 2, 2, 2], [nan, 5, 5, 5], [nan, nan, 1, 1], [nan, 3, nan, nan],
]


def test_alpha_nominal_matches_krippendorff_2011():
    votes = [[None if v is None else str(v) for v in unit] for unit in KRIPPENDORFF_C]
    assert alpha_from_votes(votes, "nominal") == pytest.approx(0.743, abs=5e-4)


def test_alpha_ordinal_on_bloom_levels_matches_krippendorff_2011():
    # Values 1..5 as Bloom levels Remember..Evaluate; the unobserved sixth level changes nothing.
    names = ["Remember", "Understand", "Apply", "Analyze", "Evaluate"]
    votes = [[None if v is None else names[v - 1] for v in unit] for unit in KRIPPENDORFF_C]
    assert alpha_from_votes(votes, "ordinal") == pytest.approx(0.815, abs=5e-4)


def test_alpha_binary_matches_krippendorff_2011_section_a():
    # Section A: two observers, ten units, binary data: α = 0.095.
    observer_a = [0, 1, 0, 0, 0, 0, 0, 0, 1, 0]
    observer_b = [1, 1, 1, 0, 0, 1, 0, 0, 0, 0]
    votes = [[str(a), str(b)] for a, b in zip(observer_a, observer_b)]
    assert alpha_from_votes(votes, "nominal") == pytest.approx(0.095, abs=5e-4)


def test_alpha_accepts_release_style_integer_votes_and_is_nan_without_variation():
    assert alpha_from_votes([[1, 0, 1], [0, 0, 0], [1, 1, 1]], "nominal") == pytest.approx(
        alpha_from_votes([["1", "1", "0"], ["0", "0", "0"], ["1", "1", "1"]], "nominal")
    )
    assert math.isnan(alpha_from_votes([["1", "1", "1"], ["1", "1", None]], "nominal"))
    assert math.isnan(alpha_from_votes([["1", None], [None, "0"]], "nominal"))  # nothing pairable


def test_jaccard_alpha_counts_overlapping_unit_sets_as_partial_disagreement():
    exact = [['["Stacks"]', '["Stacks"]'], ['["Queues"]', '["Queues"]'], ['["Graph"]', '["Graph"]']]
    overlap = [['["Stacks"]', '["Recursion", "Stacks"]'], ['["Queues"]', '["Queues"]'], ['["Graph"]', '["Graph"]']]
    disjoint = [['["Stacks"]', '["Recursion"]'], ['["Queues"]', '["Queues"]'], ['["Graph"]', '["Graph"]']]
    a_exact, a_overlap, a_disjoint = (alpha_from_votes(v, "jaccard") for v in (exact, overlap, disjoint))
    assert a_exact == pytest.approx(1.0)
    assert a_disjoint < a_overlap < a_exact
    # With single-unit sets Jaccard distance is the nominal distance.
    singles = [['["A"]', '["B"]'], ['["A"]', '["A"]'], ['["B"]', '["B"]'], ['["C"]', '["A"]']]
    plain = [[json.loads(v)[0] for v in unit] for unit in singles]
    assert alpha_from_votes(singles, "jaccard") == pytest.approx(alpha_from_votes(plain, "nominal"))
    # Plain unit names (the release's topic_votes) are one-unit sets.
    assert alpha_from_votes(plain, "jaccard") == pytest.approx(alpha_from_votes(plain, "nominal"))


def test_bootstrap_interval_brackets_alpha_and_is_reproducible():
    votes = [[None if v is None else str(v) for v in unit] for unit in KRIPPENDORFF_C]
    coded = encode_votes(votes, "nominal")
    first = alpha_with_ci(coded, n_resamples=300, seed=3)
    again = alpha_with_ci(coded, n_resamples=300, seed=3)
    assert first == again
    assert first.ci_low <= first.alpha <= first.ci_high
    assert first.n_items == 11  # the last unit has one value only


# -- majority rules -----------------------------------------------------------------------------


def test_majority_binary_with_parse_failure_tie_and_too_few_votes():
    assert majority("unique", ["1", "1", "0"]).value is True
    two_of_two = majority("unique", ["1", None, "1"])
    assert (two_of_two.value, two_of_two.agreement) == (True, 1.0)
    tie = majority("readable", ["1", None, "0"])
    assert (tie.value, tie.null_reason) == (None, "tie")
    lone = majority("answerable", [None, "1", None])
    assert lone.value is None and lone.null_reason == "fewer than 2 valid votes"
    assert majority("unique", ["0", "1", "0"]).agreement == pytest.approx(2 / 3)


def test_majority_bloom_level_is_plural_vote_not_average():
    assert majority("bloom_level", ["Remember", "Create", "Remember"]).value == "Remember"
    spread = majority("bloom_level", ["Remember", "Apply", "Create"])
    assert spread.value is None and spread.null_reason == "tie"
    plurality = majority("bloom_level", ["Apply", "Apply", "Create", "Remember", "Analyze"])
    assert plurality.value is None and plurality.null_reason == "no value has a majority"


def test_majority_knowledge_units_per_unit():
    result = majority("knowledge_units", ['["Stacks"]', '["Recursion", "Stacks"]', '["Queues", "Stacks"]'])
    assert result.value == ["Stacks"]
    assert result.agreement == pytest.approx(1 / 3)  # one vote is exactly {Stacks}
    none = majority("knowledge_units", ['["Stacks"]', '["Queues"]', '["Graph"]'])
    assert none.value is None and none.null_reason == "no unit has a majority"


def test_useful_three_valued():
    assert useful_from(True, True, True) is True
    assert useful_from(True, None, False) is False
    assert useful_from(True, None, True) is None


# -- the cell -----------------------------------------------------------------------------------


def generations_frame(n: int, *, missing: tuple[int, ...] = ()) -> pd.DataFrame:
    rows = []
    for i in range(n):
        rows.append({
            "prompt_id": f"cs-{i:04d}:fgp", "item_id": f"cs-{i:04d}", "dataset": "cs", "strategy": "fgp",
            "model": "m", "original_question": f"What is thing {i}?", "original_bloom_level": "Remember",
            "original_knowledge_units": ["Stacks"], "raw_text": "x",
            "new_question": None if i in missing else f"Explain thing {i} in depth?",
            "identified_bloom_level": None, "identified_knowledge_units": None,
            "parse_status": "failed" if i in missing else "ok", "parse_error": None,
            "finish_reason": "stop", "n_prompt_tokens": 1, "n_completion_tokens": 1, "latency_s": 0.1,
            "batch_index": 0, "seed": 0, "prompt_hash": "h",
        })
    return pd.DataFrame(rows)


def judgments_frame(judge: str, generations: pd.DataFrame, answers: dict[str, list]) -> pd.DataFrame:
    """answers[criterion][i] = value, or "FAIL" (parse_failed); items without a question get no_question."""
    rows = []
    for i, gen in generations.reset_index(drop=True).iterrows():
        for criterion in CRITERIA:
            value = answers[criterion][i]
            if pd.isna(gen["new_question"]):
                status, value = "no_question", None
            elif value == "FAIL":
                status, value = "parse_failed", None
            else:
                status = "ok"
            rows.append({
                "prompt_id": gen["prompt_id"], "item_id": gen["item_id"], "dataset": "cs",
                "strategy": "fgp", "model": "m", "judge": judge, "criterion": criterion,
                "value_bool": value if criterion in ("unique", "readable", "answerable") else None,
                "value_level": value if criterion == "bloom_level" else None,
                "value_units": value if criterion == "knowledge_units" else None,
                "status": status, "reason": None if status == "ok" else status, "raw_text": None,
                "cached": None, "n_prompt_tokens": None, "n_completion_tokens": None, "cost_usd": None, "cache_key": None, "choice_probs": None,
            })
    return pd.DataFrame(rows)


def panel(n=6):
    gens = generations_frame(n, missing=(5,))
    same = {
        "unique": [True, True, False, True, False, None],
        "readable": [True, True, True, False, True, None],
        "answerable": [True, False, True, True, True, None],
        "bloom_level": ["Remember", "Apply", "Create", "Apply", "Analyze", None],
        "knowledge_units": [["Stacks"], ["Queues"], ["Stacks"], ["Graph"], ["Stacks"], None],
    }
    second = {**same, "readable": [True, True, "FAIL", False, True, None]}
    third = {**same, "unique": [True, False, False, True, True, None],
             "bloom_level": ["Remember", "Apply", "Create", "Apply", "Create", None]}
    return gens, [judgments_frame("a", gens, same), judgments_frame("b", gens, second), judgments_frame("c", gens, third)]


def test_vote_cell_columns_values_and_reasons():
    gens, judgments = panel()
    votes, reliability = vote_cell(gens, judgments, n_resamples=50)
    assert list(votes.columns) == VOTES.names and list(reliability.columns) == RELIABILITY.names
    to_table(votes, VOTES)  # fits the file schema
    to_table(reliability, RELIABILITY)
    assert votes["unique"].tolist() == [True, True, False, True, False, None]
    assert votes["unique_votes"].iloc[1] == ["1", "1", "0"]
    assert votes["readable_votes"].iloc[2] == ["1", None, "1"]
    assert votes["readable"].iloc[2] is True and votes["readable_agreement"].iloc[2] == 1.0
    assert votes["bloom_level"].iloc[4] == "Analyze"  # a, b say Analyze; c says Create
    assert votes["knowledge_units"].iloc[0] == ["Stacks"]
    assert votes["knowledge_units_votes"].iloc[0] == ['["Stacks"]'] * 3
    assert votes["useful"].tolist() == [True, False, False, False, False, None]
    assert votes["unique_null_reason"].iloc[5] == "no question"
    assert votes["n_judges"].eq(3).all()
    panel_rows = reliability[reliability["judge"].isna()]
    assert panel_rows["criterion"].tolist() == list(CRITERIA)
    assert panel_rows.set_index("criterion").loc["bloom_level", "level_of_measurement"] == "ordinal"
    judge_b = reliability[(reliability["judge"] == "b") & (reliability["criterion"] == "readable")].iloc[0]
    assert judge_b["parse_failure_rate"] == pytest.approx(1 / 5)
    assert judge_b["n_items"] == 5
    judge_c = reliability[(reliability["judge"] == "c") & (reliability["criterion"] == "unique")].iloc[0]
    assert judge_c["agreement_with_majority"] == pytest.approx(3 / 5)


def test_votes_say_which_rows_the_model_answered_with_text():
    # Usability counts an answered row whose parse failed as generated and not useful; an empty
    # answer or a failed call is no answer (bloomqg.metrics.quality).
    gens = generations_frame(6, missing=(4, 5))
    gens.loc[4, "raw_text"] = " "
    answers = {"unique": [True] * 6, "readable": [True] * 6, "answerable": [True] * 6,
               "bloom_level": ["Apply"] * 6, "knowledge_units": [["Stacks"]] * 6}
    votes, _ = vote_cell(gens, [judgments_frame(name, gens, answers) for name in "abc"], n_resamples=20)
    assert votes["answered"].tolist() == [True, True, True, True, False, True]
    assert votes["parse_status"].tolist()[4:] == ["failed", "failed"]


def test_gate_flag_keeps_votes_and_drop_nulls_the_failing_criterion():
    gens, judgments = panel()
    flagged, rel_flag = vote_cell(gens, judgments, gate_alpha=0.7, gate_action="flag", n_resamples=50)
    dropped, _rel_drop = vote_cell(gens, judgments, gate_alpha=0.7, gate_action="drop", n_resamples=50)
    alphas = rel_flag[rel_flag["judge"].isna()].set_index("criterion")
    # unique disagrees on two of five items (α < 0.7); answerable is unanimous but varies (α = 1).
    assert alphas.loc["unique", "alpha"] < 0.7 and not alphas.loc["unique", "gate_passed"]
    assert alphas.loc["answerable", "alpha"] == pytest.approx(1.0) and alphas.loc["answerable", "gate_passed"]
    assert flagged["alpha_gated"].all() and dropped["alpha_gated"].all()
    assert flagged["unique"].tolist()[:5] == [True, True, False, True, False]
    assert dropped["unique"].tolist() == [None] * 6
    assert set(dropped["unique_null_reason"]) == {"alpha gate"}
    assert dropped["unique_votes"].iloc[1] == ["1", "1", "0"]  # individual votes are kept
    # useful recomputed: a definite "no" on answerable still makes item 1 not useful.
    assert dropped["useful"].tolist() == [None, False, None, False, None, None]
    passing, _ = vote_cell(gens, judgments, gate_alpha=0.0, n_resamples=50)
    assert not passing["alpha_gated"].any()


def test_an_undefined_alpha_fails_the_gate_whether_votes_never_vary_or_never_pair():
    gens = generations_frame(3)
    unanimous = {c: [True] * 3 for c in ("unique", "readable", "answerable")}
    unanimous |= {"bloom_level": ["Apply"] * 3, "knowledge_units": [["Stacks"]] * 3}
    # Only judge a answers "readable": no item has two readable votes.
    lonely = {**unanimous, "readable": ["FAIL"] * 3}
    judgments = [judgments_frame("a", gens, unanimous)] + [judgments_frame(n, gens, lonely) for n in "bc"]
    votes, reliability = vote_cell(gens, judgments, n_resamples=20)
    rows = reliability[reliability["judge"].isna()].set_index("criterion")
    assert math.isnan(rows.loc["unique", "alpha"]) and rows.loc["unique", "n_items"] == 3
    assert not rows.loc["unique", "gate_passed"]  # no variation: agreement not measured, not a pass
    assert math.isnan(rows.loc["readable", "alpha"]) and rows.loc["readable", "n_items"] == 0
    assert not rows.loc["readable", "gate_passed"]
    assert votes["alpha_gated"].all()
    assert votes["readable_null_reason"].eq("fewer than 2 valid votes").all()


def test_vote_cell_rejects_a_judge_that_misses_questions():
    gens, judgments = panel()
    judgments[1] = judgments[1][judgments[1]["prompt_id"] != "cs-0000:fgp"]
    with pytest.raises(ValueError, match="judge 'b' does not cover"):
        vote_cell(gens, judgments, n_resamples=10)
    with pytest.raises(ValueError, match="gate_action"):
        vote_cell(gens, panel()[1], gate_action="discard")


def test_judgments_frame_fits_schema():
    _gens, judgments = panel()
    for frame in judgments:
        to_table(frame, JUDGMENTS)


def test_votes_from_judgments_read_back_from_parquet(tmp_path):
    from bloomqg.store.parquet_io import read_frame, write_frame

    gens, judgments = panel()
    paths = []
    for frame in judgments:
        path = tmp_path / f"{frame['judge'].iloc[0]}.parquet"
        write_frame(frame, path, JUDGMENTS)
        paths.append(path)
    direct, direct_rel = vote_cell(gens, judgments, n_resamples=50)
    votes, reliability = vote_cell(gens, [read_frame(p, JUDGMENTS) for p in paths], n_resamples=50)
    write_frame(votes, tmp_path / "votes.parquet", VOTES)
    write_frame(reliability, tmp_path / "votes.reliability.parquet", RELIABILITY)
    back = read_frame(tmp_path / "votes.parquet", VOTES)
    assert back["knowledge_units_votes"].iloc[0] == ['["Stacks"]'] * 3
    assert back["useful"].tolist() == direct["useful"].tolist()
    pd.testing.assert_series_equal(reliability["alpha"], direct_rel["alpha"])


# -- the paper's release ------------------------------------------------------------------------

RELEASE_VOTES = ("glm_gen_voted.jsonl", "glm_fine_voted.jsonl", "glm_math_math_voted.jsonl")
RELEASE_KEYS = {"unique": "non_repeatable", "readable": "readable", "answerable": "answerable"}


@pytest.mark.parametrize("name", RELEASE_VOTES)
def test_release_binary_majorities_and_alpha(release_dir, name):
    """Our strict majority reproduces every published binary vote of the GLM-4-9B runs, and
    alpha_from_votes on their three-judge votes equals krippendorff.alpha on the raw matrix."""
    import krippendorff
    import numpy as np

    path = release_dir / "generated" / "glm" / name
    if not path.exists():
        pytest.skip(f"{path} is not in the release copy")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    for criterion, key in RELEASE_KEYS.items():
        votes = [[None if v is None else str(v) for v in row[f"{key}_votes"]] for row in rows]
        ours = [majority(criterion, item).value for item in votes]
        assert ours == [bool(row[key]) for row in rows], f"{name}: {criterion} majority differs"
        matrix = np.array([[np.nan if v is None else float(v) for v in row[f"{key}_votes"]] for row in rows]).T
        expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal")
        assert alpha_from_votes(votes, "nominal") == pytest.approx(expected, abs=1e-12)
