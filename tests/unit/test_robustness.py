"""Leave-one-judge-out and Dawid–Skene robustness of strategy-vs-strategy and model-vs-model comparisons."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from bloomqg.metrics.robustness import (
    NOT_ASSESSABLE,
    STRATEGY_COMPARISON,
    robustness_table,
    verdict,
    verdict_reason,
)
from bloomqg.inputs.strategies import ComparisonSpec
from bloomqg.voting.cell import vote_cell
from tests.unit.test_voting import generations_frame, judgments_frame


def arm(strategy: str, truth, rng, decider_says: bool) -> pd.DataFrame:
    n = len(truth)
    gens = generations_frame(n)
    gens["strategy"] = strategy
    gens["prompt_id"] = [f"cs-{i:04d}:{strategy}" for i in range(n)]
    base = {"readable": [True] * n, "answerable": [True] * n, "bloom_level": ["Apply"] * n,
            "knowledge_units": [["Stacks"]] * n}
    honest = lambda: [bool(t) if rng.random() < 0.9 else not t for t in truth]  # noqa: E731
    judgments = [
        judgments_frame("a", gens, {**base, "unique": honest()}),
        judgments_frame("b", gens, {**base, "unique": honest()}),
        judgments_frame("c", gens, {**base, "unique": [decider_says] * n}),
    ]
    votes, _ = vote_cell(gens, judgments, n_resamples=0)
    return votes


def test_a_comparison_decided_by_one_judge_is_said_to_depend_on_it():
    # No real difference between the arms (same truth, same honest judges a and b), but judge c
    # says "unique" to every FGP question and "not unique" to every CoT one: its vote breaks each
    # a-b split in FGP's favour, so the majority finds FGP better; without c the gain is gone.
    rng = np.random.default_rng(11)
    truth = rng.random(400) < 0.5
    votes = pd.concat([arm("cot", truth, rng, False), arm("fgp", truth, rng, True)], ignore_index=True)
    table = robustness_table(votes, ["a", "b", "c"], strategy_metrics=("unique", "readable", "catcons"), n_resamples=50)
    unique = table[table["metric"] == "unique"].iloc[0]
    assert unique["comparison"] == STRATEGY_COMPARISON
    assert unique[["strategy", "strategy_b", "model_b"]].tolist() == ["cot", "fgp", None]
    assert unique["diff"] > 5 and unique["p_value"] < 0.05
    assert json.loads(unique["variants"])["without c"][1] >= 0.05
    assert unique["verdict"].startswith("depends on c")
    # the headline metric under both aggregations side by side: the Dawid–Skene arms' values are
    # the ones its difference in ``variants`` is made of
    ds_diff = json.loads(unique["variants"])["dawid_skene"][0]
    assert unique["value_b_dawid_skene"] - unique["value_a_dawid_skene"] == pytest.approx(ds_diff)
    assert unique["value_b"] - unique["value_a"] == pytest.approx(unique["diff"])
    assert table.loc[table["metric"] == "readable", "verdict"].iloc[0] == "holds"
    # the panel votes on Bloom level here, so CatCons is assessable; dropping the level votes makes it not
    assert table.loc[table["metric"] == "catcons", "verdict"].iloc[0] != NOT_ASSESSABLE
    votes["bloom_level_votes"] = None
    table = robustness_table(votes, ["a", "b", "c"], strategy_metrics=("catcons",), n_resamples=50)
    assert table["verdict"].tolist() == [NOT_ASSESSABLE]
    assert table[["value_a_dawid_skene", "value_b_dawid_skene"]].isna().all(axis=None)


def test_verdict_rules():
    row = lambda diff, p: pd.Series({"diff": diff, "p_value": p})  # noqa: E731
    assert verdict(row(10, 0.01), {"dawid_skene": row(8, 0.02), "without a": row(12, 0.001)}) == "holds"
    assert verdict(row(10, 0.01), {"dawid_skene": row(8, 0.02), "without a": row(1, 0.5)}) == "depends on a"
    assert verdict(row(10, 0.01), {"dawid_skene": row(-2, 0.5), "without a": row(12, 0.01)}).startswith("depends on the aggregation")
    assert verdict(row(2, 0.4), {"dawid_skene": row(-1, 0.6), "without a": row(3, 0.3)}) == "within judge noise"
    assert verdict(row(10, 0.01), {"without a": row(1, 0.5), "without b": row(2, 0.4)}) == "significance depends on a and b"
    assert verdict(row(10, 0.01), {"without a": row(-1, 0.5), "without b": row(-2, 0.4)}) == "within judge noise"


def test_model_vs_model_comparisons_are_paired_on_the_original_item():
    from tests.support.synthetic import synthetic_study

    study = synthetic_study(n_models=2, n_items=18)
    table = robustness_table(study.votes, ["a", "b", "c"], n_resamples=20)
    models = table[table["comparison"] == "model vs model"]
    cells = study.votes[["dataset", "strategy"]].drop_duplicates()
    assert len(models) == 2 * len(cells)  # CatCons and usability per dataset × strategy
    assert set(models["metric"]) == {"catcons", "usability"}
    assert models["n_pairs"].le(18).all() and models["verdict"].str.len().gt(0).all()
    assert models["model"].ne(models["model_b"]).all()


def test_rows_whose_judges_all_failed_are_no_votes_not_an_error():
    # A small study's judges can fail on every item of a criterion: vote lists of None only.
    rng = np.random.default_rng(3)
    truth = rng.random(30) < 0.5
    votes = pd.concat([arm("cot", truth, rng, False), arm("fgp", truth, rng, True)], ignore_index=True)
    votes["answerable_votes"] = [[None, None, None]] * len(votes)
    votes["answerable"] = None
    votes.loc[votes["strategy"] == "cot", "bloom_level_votes"] = pd.Series([[None, None, None]] * 30, dtype=object).values
    table = robustness_table(votes, ["a", "b", "c"], n_resamples=20)
    assert len(table) and table["verdict"].str.len().gt(0).all()


def test_every_strategy_pair_gets_its_leave_one_judge_out_rows():
    rng = np.random.default_rng(11)
    truth = rng.random(300) < 0.5
    votes = pd.concat([arm("cot", truth, rng, False), arm("fgp", truth, rng, True),
                       arm("zeroshot", truth, rng, True)], ignore_index=True)
    metrics = ("unique", "readable")
    baseline = robustness_table(votes, ["a", "b", "c"], strategy_metrics=metrics, n_resamples=20)
    strategies = baseline[baseline["comparison"] == STRATEGY_COMPARISON]
    assert strategies[["strategy", "strategy_b", "metric"]].values.tolist() == [
        ["cot", "fgp", "unique"], ["cot", "fgp", "readable"], ["cot", "zeroshot", "unique"], ["cot", "zeroshot", "readable"]]
    for _, row in strategies.iterrows():
        assert set(json.loads(row["variants"])) == {"dawid_skene", "without a", "without b", "without c"}
    # judge c says unique to every fgp and zeroshot question: both pairs against cot depend on it
    assert all(v.startswith("depends on c") for v in strategies.loc[strategies["metric"] == "unique", "verdict"])
    every = robustness_table(votes, ["a", "b", "c"], strategy_metrics=("unique",), n_resamples=20,
                             comparison=ComparisonSpec(all_pairs=True))
    pairs = every[every["comparison"] == STRATEGY_COMPARISON][["strategy", "strategy_b"]].values.tolist()
    assert pairs == [["cot", "fgp"], ["cot", "zeroshot"], ["fgp", "zeroshot"]]
    chosen = robustness_table(votes, ["a", "b", "c"], strategy_metrics=("unique",), n_resamples=20,
                              comparison=ComparisonSpec(baseline="zeroshot"), strategy_order=["cot", "fgp", "zeroshot"])
    assert chosen[chosen["comparison"] == STRATEGY_COMPARISON][["strategy", "strategy_b"]].values.tolist() == [
        ["zeroshot", "cot"], ["zeroshot", "fgp"]]


def test_the_reason_of_within_judge_noise_names_its_clause():
    noise = verdict_reason(2, 0.4, "within judge noise", {"dawid_skene": [-1, 0.6], "without a": [3, 0.3]})
    assert noise.startswith("not significant under the majority (raw p = 0.4") and "Dawid–Skene turns its sign or cancels it" in noise
    several = verdict_reason(10, 4.9e-06, "within judge noise", {"without a": [-1, 0.5], "without b": [-2, 0.4]})
    assert several.startswith("significant under the majority before Holm's adjustment (raw p < 0.001)") and "without a, without b" in several
    assert verdict_reason(10, 0.01, "holds", {}) == ""


def test_a_comparison_without_pairs_or_value_is_not_compared_and_a_variant_without_value_turns_no_sign():
    from bloomqg.metrics.robustness import NOT_COMPARED

    row = lambda diff, p, n=10: pd.Series({"diff": diff, "p_value": p, "n_pairs": n})  # noqa: E731
    assert verdict(row(float("nan"), float("nan"), 0), {"without a": row(float("nan"), float("nan"), 0)}) == NOT_COMPARED
    assert verdict(row(float("nan"), float("nan")), {}) == NOT_COMPARED
    # no variant has a value: nothing was seen to hold, whatever the base's p
    from bloomqg.metrics.robustness import NOT_ASSESSABLE

    assert verdict(row(2, 0.4), {"without a": row(float("nan"), float("nan"))}) == NOT_ASSESSABLE
    assert verdict(row(9, 0.01), {"without a": row(float("nan"), float("nan"))}) == NOT_ASSESSABLE
    # leaving out a has no value at all: it cannot have turned the sign, and cannot keep a significance
    other = {"without b": row(3, 0.5)}
    # it held only where it could be seen: said so, not a plain "holds", and the reason names the panel
    from bloomqg.metrics.robustness import HOLDS_WHERE_MEASURED

    assert verdict(row(2, 0.4), {"without a": row(float("nan"), float("nan")), **other}) == HOLDS_WHERE_MEASURED
    assert verdict(row(2, 0.4), other) == "holds"
    # held under Dawid–Skene alone, every judge-left-out panel without a value: Dawid–Skene
    # reweights the same judges, so no change of judges was seen (the default study's cs KnowCov:
    # +25.00 under the majority, +3.12 under Dawid–Skene)
    only_ds = {"dawid_skene": row(3.12, 0.9), "without a": row(float("nan"), float("nan")),
               "without b": row(float("nan"), float("nan"))}
    assert verdict(row(25.0, 0.4), only_ds) == NOT_ASSESSABLE
    assert verdict_reason(2, 0.4, HOLDS_WHERE_MEASURED, {"without a": [None, None], "without b": [3, 0.5]}).startswith(
        "without a gives no value")
    assert verdict(row(9, 0.01), {"without a": row(float("nan"), float("nan")), "without b": row(8, 0.01)}) == "depends on a"
    assert "without a" not in verdict_reason(2, 0.4, "within judge noise",
                                             {"without a": [None, None], "without b": [-1, 0.5]})


def test_a_pair_of_arms_with_no_item_in_common_gets_no_verdict():
    from bloomqg.metrics.robustness import NOT_COMPARED

    rng = np.random.default_rng(5)
    truth = rng.random(20) < 0.5
    cot, fgp = arm("cot", truth, rng, False), arm("fgp", truth, rng, True)
    fgp["item_id"] = [f"other-{i}" for i in range(len(fgp))]  # no original answered under both
    table = robustness_table(pd.concat([cot, fgp], ignore_index=True), ["a", "b", "c"],
                             strategy_metrics=("unique", "knowcov"), model_metrics=(), n_resamples=20)
    assert (table["n_pairs"] == 0).all() and table["verdict"].eq(NOT_COMPARED).all(), table[["n_pairs", "verdict"]]
