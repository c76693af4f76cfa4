"""Calibrated estimates from human labels: the estimators against ppi-python (1e-9), the joined
per-item data row by row against a sheet filled from a known rule, the refusal of items the
export did not draw, Bloom at three levels, and the sampling plan's n in simulation."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from bloomqg.annotation.calibration import (
    METRICS_BY_NAME,
    CalibrationError,
    calibrated_estimates,
    estimate_one,
    check_random_draw,
    joined_items,
    level_agreement,
    paired_estimates,
)
from bloomqg.annotation.form import blank_sheet
from bloomqg.annotation.ppi import calibrated_mean, classical_mean, paired_difference, ppi_mean
from bloomqg.annotation.sample import annotation_items, knowledge_units_by_dataset
from bloomqg.annotation.sheets import read_sheets
from bloomqg.inputs.bloom import BLOOM_LEVELS, ORDER_OF_LEVEL, bloom_order
from bloomqg.store.frames import CALIBRATION_ESTIMATES, CALIBRATION_ITEMS
from bloomqg.inputs.strategies import ComparisonSpec
from tests.support.judged_study import judged_study
from tests.support.ppi_reference import (
    PSEUDO_HUMAN_DIFFERENCES,
    PSEUDO_JUDGE_DIFFERENCES,
    difference_reference,
    ppi_python_estimates,
)

#: how the labels plan names the share it sizes (over all judged questions, unlike CatCons)
SHARE = "the share at the original's level (all judged questions)"



@pytest.fixture(scope="module")
def ppi_py():
    """ppi-python (a dev dependency): the reference the estimators are pinned to."""
    return pytest.importorskip("ppi_py")

ITEMS_PER_CELL = 14
SEED = 11


# --- the estimators ----------------------------------------------------------------------------


def _simulated(rng: np.random.Generator, n: int, big_n: int, agreement: float, rate: float):
    truth = (rng.random(n + big_n) < rate).astype(float)
    judge = np.where(rng.random(n + big_n) < agreement, truth, 1 - truth)
    return truth[:n], judge[:n], judge[n:]


@pytest.mark.parametrize("n, big_n, agreement, rate", [(50, 800, 0.9, 0.7), (200, 3000, 0.47, 0.3), (30, 60, 0.98, 0.5)])
def test_ppi_and_classical_equal_ppi_python(n, big_n, agreement, rate, ppi_py):
    rng = np.random.default_rng(n)
    for _ in range(5):
        y, yhat, unlabelled = _simulated(rng, n, big_n, agreement, rate)
        for lam in (None, 1.0, 0.0, 0.4):
            mine = ppi_mean(y, yhat, unlabelled, confidence=0.9, lam=lam)
            low, high = ppi_py.ppi_mean_ci(y, yhat, unlabelled, alpha=0.1, lam=lam)
            point = ppi_py.ppi_mean_pointestimate(y, yhat, unlabelled, lam=lam)
            assert float(mine.value) == pytest.approx(float(np.ravel(point)[0]), abs=1e-9)
            assert float(mine.ci_low) == pytest.approx(float(np.ravel(low)[0]), abs=1e-9)
            assert float(mine.ci_high) == pytest.approx(float(np.ravel(high)[0]), abs=1e-9)
        classical = classical_mean(y, confidence=0.9)
        low, high = ppi_py.classical_mean_ci(y, alpha=0.1)
        assert (float(classical.ci_low), float(classical.ci_high)) == pytest.approx((low, high), abs=1e-9)


def test_a_stack_of_replications_equals_one_call_each(ppi_py):
    rng = np.random.default_rng(3)
    draws = [_simulated(rng, 40, 400, 0.8, 0.6) for _ in range(6)]
    stacked = ppi_mean(*(np.stack(part) for part in zip(*draws)))
    for r, (y, yhat, unlabelled) in enumerate(draws):
        low, high = ppi_py.ppi_mean_ci(y, yhat, unlabelled, alpha=0.05)
        assert stacked.ci_low[r] == pytest.approx(float(np.ravel(low)[0]), abs=1e-9)
        assert stacked.ci_high[r] == pytest.approx(float(np.ravel(high)[0]), abs=1e-9)


def test_the_calibrated_mean_is_ppi_python_on_the_labels_plus_pseudo_disagreements(ppi_py):
    rng = np.random.default_rng(9)
    y, yhat, unlabelled = _simulated(rng, 60, 900, 0.97, 0.96)
    mine = calibrated_mean(y, yhat, unlabelled, pseudo_disagreements=2)
    low, high = ppi_py.ppi_mean_ci(np.r_[y, 1, 0, 1, 0], np.r_[yhat, 0, 1, 0, 1], unlabelled, alpha=0.05)
    # clipped to what a share can be: here the normal interval reaches past 1
    assert float(high[0]) > 1.0
    assert (float(mine.ci_low), float(mine.ci_high)) == pytest.approx((float(low[0]), 1.0), abs=1e-9)
    plain = calibrated_mean(y, yhat, unlabelled, pseudo_disagreements=0)
    assert float(plain.ci_low) == pytest.approx(float(ppi_mean(y, yhat, unlabelled).ci_low), abs=1e-12)
    # with no error among the labels, plain PPI++ collapses onto the judges; the guard does not
    agree = yhat.copy()
    assert float(calibrated_mean(agree, agree, unlabelled).ci_high - calibrated_mean(agree, agree, unlabelled).ci_low) > 0.05


def test_constant_judges_give_the_humans_estimate_not_nan(ppi_py):
    y = np.array([1.0, 0.0, 1.0, 1.0])
    tuned = ppi_mean(y, np.ones(4), np.ones(10))
    assert float(tuned.lam) == 0.0
    low, high = ppi_py.ppi_mean_ci(y, np.ones(4), np.ones(10), alpha=0.05, lam=0.0)
    assert float(tuned.ci_low) == pytest.approx(float(np.ravel(low)[0]), abs=1e-12)
    with pytest.raises(ValueError, match="NaN"):
        ppi_mean(np.array([1.0, math.nan]), np.ones(2), np.ones(3))


# --- a judged study, a sheet filled from a known rule -----------------------------------------


def _rule(position: int, annotator: str, original_units: str, choices: list[str]) -> dict[str, str]:
    """What annotator ``annotator`` answers on the ``position``-th sheet row (1-based)."""
    level = BLOOM_LEVELS[(position + (1 if annotator == "b" and position % 3 == 0 else 0)) % 6]
    return {
        "unique": "no" if position % 4 == 0 else "yes",
        "readable": "yes",
        "answerable": "no" if (position % 5 == 0) != (annotator == "b" and position % 7 == 0) else "yes",
        "bloom_level": level,
        "knowledge_units": original_units if position % 3 else choices[-1],
    }


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = tmp_path_factory.mktemp("calibration")
    judged = judged_study(root, n_models=2, n_items=40, cells={"cs": ("cot", "fgp")}, n_resamples=10)
    votes = [pd.read_parquet(path) for path in judged.vote_files]
    items = annotation_items(votes, items_per_cell=ITEMS_PER_CELL, seed=SEED,
                             knowledge_units=knowledge_units_by_dataset(votes))
    sheet = blank_sheet(items)
    paths = []
    for annotator in ("a", "b"):
        filled = sheet.copy()
        for index, row in filled.iterrows():
            position = index + 1
            if annotator == "b" and position % 6 == 0:
                continue  # b skips every sixth item: labelled by a alone
            choices = list(items.iloc[index]["unit_choices"])
            filled.loc[index, "annotator"] = annotator
            for column, value in _rule(position, annotator, row["original_knowledge_units"], choices).items():
                filled.loc[index, column] = value
        path = root / f"{annotator}.csv"
        filled.to_csv(path, index=False)
        paths.append(path)
    ratings = read_sheets(paths, items)
    joined = joined_items(items, ratings, votes)
    return {"votes": votes, "items": items, "ratings": ratings, "joined": joined, "sheets": paths}


def _expected_outcome(metric: str, answers: dict[str, str], original_level: str | None, original_units: set[str]):
    level = answers["bloom_level"]
    order = {"Remember": 1, "Understand": 1, "Apply": 2, "Analyze": 2, "Evaluate": 3, "Create": 3}
    units = {u.strip() for u in answers["knowledge_units"].split(";")}
    expected = {
        "unique": answers["unique"] == "yes",
        "answerable": answers["answerable"] == "yes",
        "usable": answers["unique"] == "yes" and answers["readable"] == "yes" and answers["answerable"] == "yes",
        "catcons_unit": units == original_units,
        "share_apply": level == "Apply",
        "share_higher_order": order[level] == 3,
    }
    if isinstance(original_level, str):
        delta = BLOOM_LEVELS.index(level) - BLOOM_LEVELS.index(original_level)
        expected.update({
            "catcons_level": delta == 0,
            "catcons_both": delta == 0 and units == original_units,
            "cogreg": delta <= -2, "cogdrift": abs(delta) == 1, "cogleap": delta >= 2,
            "catcons_order": order[level] == order[original_level],
            "cogleap_order": order[level] > order[original_level],
        })
    return expected.get(metric)


def test_joined_data_matches_the_sheets_row_by_row(study):
    joined, items = study["joined"], study["items"]
    assert list(joined.columns) == CALIBRATION_ITEMS.names
    # every generated question of every annotated cell, for every metric whose population holds it
    n_generated = sum(int(v["new_question"].notna().sum()) for v in study["votes"])
    assert (joined["metric"] == "unique").sum() == n_generated
    sheets = {path.stem: pd.read_csv(path, dtype=str, keep_default_na=False) for path in study["sheets"]}
    key = items.set_index("annotation_id")
    checked = 0
    for row in joined[joined["annotation_id"].notna()].itertuples(index=False):
        item = key.loc[row.annotation_id]
        original_units = set(item["original_knowledge_units"])
        values = []
        for sheet in sheets.values():
            line = sheet[sheet["annotation_id"] == row.annotation_id].iloc[0]
            if not line["bloom_level"]:
                continue  # skipped
            answers = {c: line[c] for c in ("unique", "readable", "answerable", "bloom_level", "knowledge_units")}
            expected = _expected_outcome(row.metric, answers, item["original_bloom_level"], original_units)
            if expected is None:
                break
            values.append(float(expected))
        else:
            assert row.n_annotators == len(values)
            assert row.human == pytest.approx(sum(values) / len(values))
            checked += 1
    assert checked > 100
    # the unlabelled rows carry no human value, and only drawn items carry an annotation id
    assert joined.loc[joined["annotation_id"].isna(), "human"].isna().all()
    assert set(joined["annotation_id"].dropna()) == set(items["annotation_id"])


def test_the_judge_value_is_the_panels_majority(study):
    joined = study["joined"]
    keys = ["model", "prompt_id"]
    votes = pd.concat(study["votes"], ignore_index=True).set_index(keys)
    unique = joined[joined["metric"] == "unique"].set_index(keys)
    panel = votes.loc[unique.index, "unique"]
    assert (unique["judge"].isna().to_numpy() == panel.isna().to_numpy()).all()
    assert (unique["judge"].dropna().to_numpy() == panel.dropna().astype(float).to_numpy()).all()
    level = joined[joined["metric"] == "share_create"].set_index(keys)["judge"].dropna()
    assert (level.to_numpy() == (votes.loc[level.index, "bloom_level"] == "Create").to_numpy()).all()


def test_every_calibrated_interval_equals_ppi_python_on_the_joined_data(study, ppi_py):
    joined = study["joined"]
    estimates = calibrated_estimates(joined, study["items"], confidence=0.95)
    assert list(estimates.columns) == CALIBRATION_ESTIMATES.names
    assert set(estimates["metric"]) == set(METRICS_BY_NAME)
    compared = 0
    for row in estimates.itertuples(index=False):
        part = joined[(joined["dataset"] == row.dataset) & (joined["strategy"] == row.strategy)
                      & (joined["model"] == row.model) & (joined["metric"] == row.metric)]
        assert row.big_n == len(part) and row.n == part["human"].notna().sum()
        assert row.n_sampled == part["annotation_id"].notna().sum() <= ITEMS_PER_CELL
        if row.n < 2:
            assert math.isnan(row.ppi)
            continue
        ppi, humans = ppi_python_estimates(part)
        assert [row.ppi, row.ppi_low, row.ppi_high] == pytest.approx(ppi, abs=1e-9)
        assert [row.humans, row.humans_low, row.humans_high] == pytest.approx(humans, abs=1e-9)
        judged = part["judge"].dropna().to_numpy(float)
        assert row.judges == pytest.approx(100 * judged.mean(), abs=1e-9)
        compared += 1
    assert compared >= len(estimates) * 0.8


def test_paired_differences_are_ppi_on_the_per_item_difference(study, ppi_py):
    joined = study["joined"]
    pairs = ComparisonSpec().pairs(["cot", "fgp"])
    paired = paired_estimates(joined, pairs, confidence=0.95)
    assert set(paired[["strategy_a", "strategy_b"]].itertuples(index=False, name=None)) == {("cot", "fgp")}
    row = paired[(paired["metric"] == "unique")].iloc[0]
    cells = {s: joined[(joined["model"] == row.model) & (joined["metric"] == "unique") & (joined["strategy"] == s)]
             .set_index("item_id") for s in ("cot", "fgp")}
    both = cells["cot"].join(cells["fgp"], how="inner", lsuffix="_a", rsuffix="_b")
    difference = pd.DataFrame({"human": both["human_b"] - both["human_a"], "judge": both["judge_b"] - both["judge_a"]})
    assert row.big_n == len(both) and row.n == difference["human"].notna().sum()
    if row.n >= 2:
        ppi, _ = ppi_python_estimates(difference, differences=True)
        assert [row.ppi, row.ppi_low, row.ppi_high] == pytest.approx(ppi, abs=1e-9)
        labelled = difference["human"].notna()
        arm_a, arm_b = both.loc[labelled, "human_a"].to_numpy(float), both.loc[labelled, "human_b"].to_numpy(float)
        own = paired_difference(arm_a, arm_b)
        assert [row.humans, row.humans_low, row.humans_high] == pytest.approx(
            [100 * (arm_b - arm_a).mean(), 100 * float(own.ci_low), 100 * float(own.ci_high)], abs=1e-9)


def test_a_paired_difference_of_0_is_estimated_without_bias_and_antisymmetrically():
    # the pseudo-disagreements for shares pulled a difference toward +50 points: 14.29 [-4.04, 32.62]
    zeros, unlabelled = np.zeros(100), np.r_[np.zeros(10), np.full(90, np.nan)]
    result = estimate_one(unlabelled, zeros, 0.95, arms=((unlabelled, unlabelled), (zeros, zeros)))
    assert result["ppi"] == 0.0 and result["ppi_low"] == pytest.approx(-result["ppi_high"])
    assert result["humans"] == 0.0 and result["humans_low"] < 0 < result["humans_high"]
    rng = np.random.default_rng(2)
    judge_a, judge_b = rng.integers(0, 2, 100).astype(float), rng.integers(0, 2, 100).astype(float)
    keep = np.arange(100) < 30
    human_a = np.where(keep, np.where(rng.random(100) < 0.8, judge_a, 1 - judge_a), np.nan)
    human_b = np.where(keep, np.where(rng.random(100) < 0.8, judge_b, 1 - judge_b), np.nan)
    forward = estimate_one(human_b - human_a, judge_b - judge_a, 0.95, arms=((human_a, human_b), (judge_a, judge_b)))
    backward = estimate_one(human_a - human_b, judge_a - judge_b, 0.95, arms=((human_b, human_a), (judge_b, judge_a)))
    assert forward["ppi"] == pytest.approx(-backward["ppi"], abs=1e-12)
    assert (forward["ppi_low"], forward["ppi_high"]) == pytest.approx((-backward["ppi_high"], -backward["ppi_low"]))
    assert (forward["humans_low"], forward["humans_high"]) == pytest.approx((-backward["humans_high"], -backward["humans_low"]))


def test_items_not_drawn_by_the_export_are_refused(study):
    items, votes = study["items"], study["votes"]
    check_random_draw(items, votes, items_per_cell=ITEMS_PER_CELL, seed=SEED)  # the export's own draw
    cell = items.iloc[0]
    chosen = items["prompt_id"].tolist()
    frame = next(v for v in votes if v["model"].iloc[0] == cell["model"] and v["strategy"].iloc[0] == cell["strategy"])
    spare = next(p for p, q in zip(frame["prompt_id"], frame["new_question"]) if p not in chosen and isinstance(q, str))
    hand_picked = items.copy()
    hand_picked.loc[0, "prompt_id"] = spare
    with pytest.raises(CalibrationError, match="not the export's random within-cell draw"):
        check_random_draw(hand_picked, votes, items_per_cell=ITEMS_PER_CELL, seed=SEED)
    with pytest.raises(CalibrationError, match="random within-cell draw"):
        check_random_draw(items, votes, items_per_cell=ITEMS_PER_CELL, seed=SEED + 1)


# --- Bloom at three levels ---------------------------------------------------------------------


def test_three_levels_group_the_six_as_lower_middle_higher():
    assert ORDER_OF_LEVEL == {
        "Remember": "Lower order", "Understand": "Lower order", "Apply": "Middle order",
        "Analyze": "Middle order", "Evaluate": "Higher order", "Create": "Higher order",
    }
    assert bloom_order(None) is None
    with pytest.raises(ValueError, match="canonical"):
        bloom_order("remember")


def test_level_agreement_at_three_levels_counts_adjacent_levels_of_one_order(study):
    agreement = level_agreement(study["items"], study["ratings"]).set_index(["model", "granularity"])
    pooled_six = agreement.loc[("all", "six levels")]
    pooled_three = agreement.loc[("all", "three levels")]
    assert pooled_six["n"] == pooled_three["n"] > 0
    assert pooled_three["percent_agreement"] >= pooled_six["percent_agreement"]
    items, ratings = study["items"].set_index("annotation_id"), study["ratings"]
    levels = ratings[ratings["criterion"] == "bloom_level"]
    panel = items.loc[levels["annotation_id"], "panel_bloom_level"].to_numpy()
    known = pd.notna(panel)
    human = levels["value"].to_numpy()[known]
    same_order = [ORDER_OF_LEVEL[h] == ORDER_OF_LEVEL[p] for h, p in zip(human, panel[known])]
    assert pooled_three["percent_agreement"] == pytest.approx(100 * np.mean(same_order))


# --- the sampling plan -------------------------------------------------------------------------


def test_the_simulation_uses_the_calibration_outcome_definitions():
    from bloomqg.annotation.calibration import Rating, outcomes
    from bloomqg.annotation.simulation import SIMULATED_METRICS, item_outcomes

    rng = np.random.default_rng(4)
    original, level = rng.integers(0, 6, 60), rng.integers(0, 6, 60)
    flags = [rng.random(60) < 0.7 for _ in range(3)]
    simulated = item_outcomes(original, level, *flags)
    for i in range(60):
        rating = Rating(bool(flags[0][i]), bool(flags[1][i]), bool(flags[2][i]), BLOOM_LEVELS[level[i]], frozenset({"u"}),
                        BLOOM_LEVELS[original[i]], frozenset({"u"}))
        expected = outcomes(rating)
        assert {m: simulated[m][i] for m in SIMULATED_METRICS} == {m: expected[m] for m in SIMULATED_METRICS}


@pytest.mark.parametrize("metric", ["catcons_level", "usable", "cogleap"])
def test_the_plans_n_reaches_the_target_half_width_in_simulation(metric):
    from bloomqg.annotation.plan import DEFAULT_ASSUMED_AGREEMENT, assumed_disagreement, labels_needed
    from bloomqg.annotation.simulation import simulate

    truth, panel = simulate(np.random.default_rng(8), 300, 3200)
    plan = labels_needed(panel[metric][0], assumed_disagreement(metric, DEFAULT_ASSUMED_AGREEMENT), half_width=5.0)
    assert plan.reachable and 2 <= plan.n_needed < 3200
    n = plan.n_needed
    estimate = calibrated_mean(truth[metric][:, :n], panel[metric][:, :n], panel[metric][:, n:])
    half_width = 50 * (estimate.ci_high - estimate.ci_low)
    assert half_width.mean() <= 5.0
    target = truth[metric].mean(axis=1)
    assert ((estimate.ci_low <= target) & (target <= estimate.ci_high)).mean() >= 0.93


def test_the_plan_of_a_study_per_cell_and_headline_metric(study):
    from bloomqg.annotation.plan import HEADLINE_METRICS, annotation_plan
    from bloomqg.store.frames import ANNOTATION_PLAN

    plan = annotation_plan(study["votes"], half_width=10.0)
    assert list(plan.columns) == ANNOTATION_PLAN.names
    assert len(plan) == len(study["votes"]) * len(HEADLINE_METRICS)
    assert (plan["agreement_source"] == "assumed").all()
    reachable = plan[plan["reachable"]]
    assert (reachable["half_width_at_n"] <= 10.0).all() and (reachable["n_needed"] <= reachable["big_n"]).all()
    piloted = annotation_plan(study["votes"], pilot=pd.concat([study["joined"]] * 3), half_width=10.0)
    assert piloted["agreement_source"].str.startswith("pilot").any()


def test_the_plan_assumes_no_agreement_where_this_panel_failed_the_gate(study):
    """The assumed agreement is the paper's panel's: it stands in only where this panel rates the
    criterion reliably; elsewhere the plan is the labels' own at a share of one half."""
    from bloomqg.annotation.plan import LABELS_ALONE, METRIC_CRITERIA, annotation_plan, labels_needed
    from bloomqg.store.cells import CELL_COLUMNS

    cells = [{c: str(frame[c].iloc[0]) for c in CELL_COLUMNS} for frame in study["votes"]]
    first = cells[0]
    rows = [{**cell, "criterion": criterion, "judge": None, "alpha": 0.9, "gate_coefficient": "alpha",
             "gate_status": "reliable", "gate_threshold": 0.7, "n_items": 30} for cell in cells
            for criterion in ("unique", "readable", "answerable", "bloom_level", "knowledge_units")]
    for row in rows:  # the first cell's Bloom levels fail the gate
        if row["criterion"] == "bloom_level" and all(row[c] == first[c] for c in CELL_COLUMNS):
            row.update(alpha=0.1, gate_status="unreliable")
    plan = annotation_plan(study["votes"], half_width=10.0, reliability=pd.DataFrame(rows))
    here = (plan[list(CELL_COLUMNS)].astype(str) == pd.Series(first)).all(axis=1)
    on_levels = plan["metric"].map(lambda m: bool({"bloom_level", "bloom_order"} & set(METRIC_CRITERIA[m])))
    alone = plan[here & on_levels]
    assert set(alone["metric"]) == {"catcons_level", "cogreg", "cogleap", "catcons_order"}
    assert (alone["agreement_source"] == f"{LABELS_ALONE} (bloom level unreliable)").all()
    assert alone["disagreement"].isna().all()
    for row in alone.itertuples():  # the labels' own bound: n = z² · 0.25 / w², capped at the cell
        expected = labels_needed(np.full(int(row.big_n), 0.3), 1.0, half_width=10.0)
        assert (row.n_needed, row.reachable) == (expected.n_needed, expected.reachable)
    assert (plan.loc[~here, "agreement_source"] == "assumed").all()
    assert (plan.loc[here & ~on_levels, "agreement_source"] == "assumed").all()


def test_settings_refuse_calibration_without_annotation():
    from bloomqg.annotation.settings import calibration_settings, plan_settings
    from bloomqg.store.config_schema import Cell, ConfigError

    with pytest.raises(ConfigError, match="calibration: needs the annotation section"):
        calibration_settings({"calibration": {}}, None)
    plan = plan_settings({"annotation_plan": {"half_width": 3, "assumed_agreement": {"unique": 0.5}}}, None,
                         [Cell("cs", "cot", "m")], [])
    assert plan.half_width == 3 and plan.assumed_agreement["unique"] == 0.5 and plan.root == "results"


# --- the report's tables -----------------------------------------------------------------------


def test_the_plan_sentence_follows_reachable_and_a_one_question_cell_is_planned():
    from bloomqg.annotation.calibration_tables import catcons_plan_sentence
    from bloomqg.annotation.plan import labels_needed

    frame = pd.DataFrame({"reachable": [False, False], "n_needed": [3, 5], "half_width_at_n": [56.6, 69.3]})
    sentence = catcons_plan_sentence(frame, 5.0)
    assert "would bound" not in sentence and "± 69.3 points, not ± 5" in sentence and "2 of 2 cells" in sentence
    reachable = frame.assign(reachable=True, half_width_at_n=4.0)
    assert catcons_plan_sentence(reachable, 5.0).startswith("No annotation was imported: 5 labels per cell would bound")
    # the report's reading of the plan says the same of CatCons, from the plan's own rows
    from bloomqg.reporting.readings import labels_plan_reading

    plan = pd.concat([frame.assign(metric="catcons_level"), frame.assign(metric="unique")]).assign(half_width=5.0)
    assert labels_plan_reading(plan).startswith(
        "In 2 of 2 cells, labelling every question would still leave the share at the original's level (all judged "
        "questions) "
                                                "at up to ± 69.3 points")
    assert labels_plan_reading(plan[plan["metric"] == "unique"]) is None
    # no row reachable: one clause says so; some reachable: how many, and that the rest are not
    assert labels_plan_reading(plan).endswith(
        "None of the table's 4 rows can be bounded so, even by labelling every question.")
    some = plan.assign(reachable=[False, False, True, False])
    assert labels_plan_reading(some).endswith(
        "Of the table's 4 rows, 1 can be bounded so by labelling part of the cell; the others not even by labelling "
        "every question.")
    one = labels_needed(np.array([1.0]), 0.5)
    assert one.n_needed == 1 and not one.reachable and one.half_width_at_n > 50


def test_the_calibrated_tables_read_back_as_report_views(study, tmp_path):
    from bloomqg.annotation.calibration_tables import calibrated_table, paired_table, plan_table
    from bloomqg.annotation.plan import annotation_plan
    from bloomqg.annotation.reporting import write_table
    from bloomqg.reporting.tables.view import read_view

    estimates = calibrated_estimates(study["joined"], study["items"])
    agreement = level_agreement(study["items"], study["ratings"])
    table = calibrated_table(estimates, agreement, n_annotators=2, rounds=["annotations"], pseudo_disagreements=2)
    paths = [tmp_path / f"calibrated.{ext}" for ext in ("md", "json")]
    write_table(table, paths)
    view = read_view(paths[1])
    assert len(view.rows) == len(estimates) and "PPI++ (calibrated)" in view.header
    assert any("three (lower" in note for note in view.notes)
    first = estimates.iloc[0]
    assert f"{first['ppi']:.1f} [{first['ppi_low']:.1f}, {first['ppi_high']:.1f}]" in paths[0].read_text(encoding="utf-8")
    paired = paired_estimates(study["joined"], [("cot", "fgp")])
    write_table(paired_table(paired), [tmp_path / "paired.json"])
    plan = annotation_plan(study["votes"])
    write_table(plan_table(plan, annotated=False), [tmp_path / "plan.json"])
    notes = read_view(tmp_path / "plan.json").notes
    catcons = plan[plan["metric"] == "catcons_level"]
    if catcons["reachable"].all():
        n = int(catcons["n_needed"].max())
        assert any(f"{n} labels per cell would bound {SHARE} to ± 5 points" in note for note in notes)
    else:  # the sentence follows the plan's own reachable column, never a bound it cannot keep
        assert not any(f"would bound {SHARE}" in note for note in notes)
        widest = catcons.loc[~catcons["reachable"], "half_width_at_n"].max()
        assert any(f"would still leave {SHARE} at up to ± {widest:.1f} points, not ± 5" in note for note in notes)
    # the strategies are named by their labels from the config, not by their keys
    labels = {"cot": "Chain of thought", "fgp": "Fine-grained"}
    labelled = [calibrated_table(estimates, agreement, n_annotators=2, rounds=["annotations"], pseudo_disagreements=2,
                                 strategy_labels=labels),
                paired_table(paired, labels), plan_table(plan, annotated=False, strategy_labels=labels)]
    for k, made in enumerate(labelled):
        write_table(made, [tmp_path / f"labelled{k}.md"])
        text = (tmp_path / f"labelled{k}.md").read_text(encoding="utf-8")
        assert "Fine-grained" in text and "FGP" not in text, made.name


def test_the_export_draws_what_the_plan_asks_for_per_cell(study):
    from bloomqg.annotation.plan import annotation_plan
    from bloomqg.annotation.sample import cell_counts

    plan = annotation_plan(study["votes"], half_width=25.0)
    counts = cell_counts(plan)
    assert len(counts) == len(study["votes"])
    items = annotation_items(study["votes"], items_per_cell=counts, seed=SEED,
                             knowledge_units=knowledge_units_by_dataset(study["votes"]))
    drawn = items.groupby(["dataset", "strategy", "model"]).size()
    for name, n in counts.items():
        dataset, strategy, model = name.split("/")
        frame = next(v for v in study["votes"] if v["model"].iloc[0] == model and v["strategy"].iloc[0] == strategy)
        assert drawn[(dataset, strategy, model)] == min(n, int(frame["new_question"].notna().sum()))
    check_random_draw(items, study["votes"], items_per_cell=counts, seed=SEED)
    with pytest.raises(CalibrationError, match="random within-cell draw"):
        check_random_draw(items, study["votes"], items_per_cell={k: v + 1 for k, v in counts.items()}, seed=SEED)


def test_without_filled_sheets_the_estimates_are_the_judges_alone(study):
    from bloomqg.annotation.calibration import read_rounds
    from bloomqg.annotation.calibration_tables import calibrated_table

    ratings = read_rounds([study["sheets"][0].parent / "no-such-round"], study["items"])
    joined = joined_items(study["items"], ratings, study["votes"])
    assert joined["human"].isna().all() and (joined["n_annotators"] == 0).all()
    estimates = calibrated_estimates(joined, study["items"])
    assert (estimates["n"] == 0).all() and estimates["ppi"].isna().all() and estimates["judges"].notna().any()
    table = calibrated_table(estimates, level_agreement(study["items"], ratings), n_annotators=0,
                             rounds=["annotations"], pseudo_disagreements=2)
    assert len(table.rows) == len(estimates)


def test_an_annotator_labelling_an_item_in_two_rounds_is_refused(study, tmp_path):
    from bloomqg.annotation.calibration import read_rounds
    from bloomqg.annotation.sheets import AnnotationError

    for folder in ("round1", "round2"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "a.csv").write_bytes(study["sheets"][0].read_bytes())
    with pytest.raises(AnnotationError, match="already labelled by annotator 'a'"):
        read_rounds([tmp_path / "round1", tmp_path / "round2"], study["items"])
    assert len(read_rounds([tmp_path / "round1"], study["items"])) == len(read_sheets([study["sheets"][0]], study["items"]))


def test_the_report_shows_the_calibrated_tables(study, tmp_path):
    from bloomqg.annotation.calibration_tables import calibrated_table
    from bloomqg.annotation.reporting import write_table
    from bloomqg.reporting.report import build_report
    from tests.support.synthetic import synthetic_study

    estimates = calibrated_estimates(study["joined"], study["items"])
    path = tmp_path / "calibrated_estimates.json"
    write_table(calibrated_table(estimates, level_agreement(study["items"], study["ratings"]), n_annotators=2,
                                 rounds=["annotations"], pseudo_disagreements=2), [path])
    synthetic = synthetic_study(n_models=1, n_items=6)
    build_report(
        tmp_path / "report.html", config=synthetic.config, all_metrics=synthetic.metrics, votes=synthetic.votes,
        reliability=synthetic.reliability, generations=synthetic.generations, generation_provenance=[],
        judgment_provenance=[], ledger=synthetic.ledger, table_paths=[path], figure_paths=[],
        git_commit=None, package_versions={},
    )
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert 'id="table-calibrated_estimates"' in html and "PPI++ (calibrated)" in html
    row = estimates.dropna(subset=["ppi"]).iloc[0]
    assert f"{row['ppi']:.1f} [{row['ppi_low']:.1f}, {row['ppi_high']:.1f}]" in html


def test_a_paired_difference_uses_leave_one_out_lambda_and_the_guard_in_the_width_only():
    rng = np.random.default_rng(11)
    human_a, human_b = (rng.random(300) < 0.5).astype(float), (rng.random(300) < 0.5).astype(float)
    # arm a's judge only misses, arm b's only over-calls: the judges see a difference that is not there
    judge_a = np.where((human_a == 1) & (rng.random(300) < 0.6), 0.0, human_a)
    judge_b = np.where((human_b == 0) & (rng.random(300) < 0.6), 1.0, human_b)
    y, yhat = human_b - human_a, judge_b - judge_a
    mine = calibrated_mean(y[:12], yhat[:12], yhat[12:], differences=True)
    expected = difference_reference(y[:12], yhat[:12], yhat[12:], (PSEUDO_HUMAN_DIFFERENCES, PSEUDO_JUDGE_DIFFERENCES),
                                    0.05)
    assert [100 * float(v) for v in (mine.value, mine.ci_low, mine.ci_high)] == pytest.approx(expected, abs=1e-9)
    back = calibrated_mean(-y[:12], -yhat[:12], -yhat[12:], differences=True)
    assert (float(back.value), float(back.ci_low), float(back.ci_high)) == pytest.approx(
        (-float(mine.value), -float(mine.ci_high), -float(mine.ci_low)), abs=1e-12)
