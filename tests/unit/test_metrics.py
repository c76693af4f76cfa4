"""Metrics on hand-made votes frames: every definition, its edge cases, CIs and the tests."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from bloomqg.metrics.cell import score_cell
from bloomqg.metrics.intervals import (
    IntervalSpec,
    bounded_mean_interval,
    cr2_mean,
    effective_size,
    mover_paired,
    paired_binary,
    rate_interval,
    tango_paired,
)
from bloomqg.metrics.correlations import correlations
from bloomqg.metrics.paired import PAIRED_COLUMNS, holm_adjust, paired_comparison, paired_comparisons
from bloomqg.inputs.strategies import ComparisonSpec
from bloomqg.metrics.registry import METRIC_NAMES, METRIC_SPECS, PERCENT_METRICS, paper_table_metrics
from bloomqg.metrics.rows import JUDGED_UNCATEGORIZED
from bloomqg.metrics.transitions import per_level_accuracy, transition_counts
from bloomqg.store.parquet_io import read_frame, to_table, write_frame
from bloomqg.store.frames import METRICS, VOTES


def vote(
    ori: str | None = "Apply",
    new: str | None = "Apply",
    *,
    useful: bool | None = True,
    unique: bool | None = None,
    readable: bool | None = None,
    answerable: bool | None = None,
    k_ori: list[str] | None = None,
    k_new: list[str] | tuple[str, ...] | None = ("A",),
    id_level: str | None = None,
    id_units: list[str] | None = None,
    level_reason: str | None = None,
    parse_status: str = "ok",
    item: str | None = None,
) -> dict:
    """One VOTES row; unique/readable/answerable default to ``useful``."""
    binary = {name: (useful if value is None else value) for name, value in
              (("unique", unique), ("readable", readable), ("answerable", answerable))}
    row = {name: None for name in VOTES.names}
    row.update(
        prompt_id="p", item_id=item or "i", dataset="cs", strategy="cot", model="m",
        original_question="q", original_bloom_level=ori,
        original_knowledge_units=["A"] if k_ori is None else k_ori, new_question="new",
        identified_bloom_level=id_level, identified_knowledge_units=id_units,
        parse_status=parse_status, answered=True, n_judges=3, bloom_level=new,
        bloom_level_null_reason=level_reason if new is None else None,
        knowledge_units=None if k_new is None else list(k_new), useful=useful, alpha_gated=False, **binary,
    )
    return row


def frame(rows: list[dict], **overrides: object) -> pd.DataFrame:
    out = pd.DataFrame(rows, columns=list(VOTES.names))
    out["item_id"] = [row["item_id"] if row["item_id"] != "i" else f"cs-{i:04d}" for i, row in enumerate(rows)]
    out["prompt_id"] = out["item_id"] + ":" + out["strategy"]
    for column, value in overrides.items():
        out[column] = value
    return out


def metric(result: pd.DataFrame, name: str) -> pd.Series:
    return result.set_index("metric").loc[name]


def score(rows: list[dict], reliability: pd.DataFrame | None = None, **kwargs: object) -> pd.DataFrame:
    return score_cell(frame(rows), reliability, n_resamples=kwargs.pop("n_resamples", 200), **kwargs)


# --- names -------------------------------------------------------------------------------


def test_every_metric_has_one_spec_with_a_label_and_percent_metrics_are_known():
    assert len(METRIC_NAMES) == len(METRIC_SPECS)  # no name declared by two modules
    assert all(spec.label and spec.table_label.isascii() for spec in METRIC_SPECS)
    assert PERCENT_METRICS < set(METRIC_NAMES)
    assert {"cogshift", "cogreg_total", "cogleap_mean", "n_useful"}.isdisjoint(PERCENT_METRICS)


def test_metric_specs_line_up_as_the_papers_tables():
    assert paper_table_metrics("table4") == ("unique", "readable", "answerable")
    assert paper_table_metrics("table5") == ("usability", "catcons", "knowcov")
    assert paper_table_metrics("table6") == ("cogreg", "cogdrift", "cogleap")
    counts = [spec for spec in METRIC_SPECS if spec.is_count]
    assert [spec.name for spec in counts] == ["n_generated", "n_useful"]
    assert all(spec.decimals == 0 and spec.unit == "questions" for spec in counts)
    with pytest.raises(KeyError, match="no metric belongs to paper table 'table9'"):
        paper_table_metrics("table9")


def test_score_cell_gives_the_same_after_a_parquet_round_trip(tmp_path):
    votes = frame(_random_rows(120, seed=5))
    write_frame(votes, tmp_path / "votes.parquet", VOTES)
    again = read_frame(tmp_path / "votes.parquet", VOTES)
    pd.testing.assert_frame_equal(score_cell(votes, None, n_resamples=100), score_cell(again, None, n_resamples=100))


def test_score_cell_fits_the_metrics_schema_one_row_per_metric_in_order():
    result = score([vote(), vote(new="Create")])
    to_table(result, METRICS)  # raises on any column or null mismatch
    assert result["metric"].tolist() == list(METRIC_NAMES)
    assert (result[["model", "dataset", "strategy"]].drop_duplicates().values.tolist() == [["m", "cs", "cot"]])


# --- usability ---------------------------------------------------------------------------


def test_binary_criteria_and_usability_use_non_null_votes_as_denominator():
    rows = [
        vote(useful=True),
        vote(useful=False, unique=False, readable=True, answerable=True),
        vote(useful=False, unique=True, readable=True, answerable=False),
        vote(useful=None, unique=None, readable=True, answerable=True),  # tie on unique
    ]
    result = score(rows)
    assert metric(result, "unique")[["value", "n"]].tolist() == [pytest.approx(200 / 3), 3]
    assert metric(result, "readable")[["value", "n"]].tolist() == [100.0, 4]
    assert metric(result, "answerable")[["value", "n"]].tolist() == [75.0, 4]
    assert metric(result, "usability")[["value", "n"]].tolist() == [pytest.approx(100 / 3), 3]
    assert metric(result, "n_useful")["value"] == 1
    assert metric(result, "n_generated")["value"] == 4
    assert math.isnan(metric(result, "n_useful")["ci_low"])


def test_usability_counts_an_answer_without_a_question_as_generated_and_not_useful():
    # useful / generated: a parse failure of an answer with text (a placeholder, prose) is a
    # generated output that is not useful; an empty answer, a failed call and an undecided
    # verdict stay out of the denominator.
    no_question = dict(useful=None, unique=None, readable=None, answerable=None, new=None, parse_status="failed")
    rows = [
        vote(useful=True), vote(useful=True),
        vote(useful=False, unique=False, readable=True, answerable=True),
        {**vote(**no_question), "new_question": None},  # "<new_question>": answered, no question
        {**vote(**no_question), "new_question": None, "answered": False},  # empty answer
        {**vote(**{**no_question, "parse_status": "error"}), "new_question": None, "answered": False},  # call failed
        vote(useful=None, unique=None, readable=True, answerable=True),  # a tie: undecided
    ]
    result = score(rows)
    assert metric(result, "usability")[["value", "n"]].tolist() == [50.0, 4]
    assert metric(result, "n_useful")["value"] == 2 and metric(result, "n_generated")["value"] == 7
    # CatCons and the other metrics over useful questions do not see the failure.
    assert metric(result, "catcons")[["value", "n"]].tolist() == [100.0, 2]


# --- CatCons -----------------------------------------------------------------------------


def test_catcons_counts_uncategorized_originals_as_mismatches():
    rows = [vote("Apply", "Apply"), vote(None, "Apply"), vote("Remember", "Create"), vote("Create", "Create")]
    result = score(rows)
    assert metric(result, "catcons")[["value", "n"]].tolist() == [50.0, 4]


def test_catcons_uncategorized_original_matches_a_judged_uncategorized_question():
    rows = [
        vote(None, None, level_reason=JUDGED_UNCATEGORIZED),  # Uncategorized == Uncategorized
        vote("Apply", None, level_reason=JUDGED_UNCATEGORIZED),  # a level vs none: mismatch
        vote("Apply", None, level_reason="tie"),  # no verdict: left out
        vote("Apply", "Apply"),
    ]
    result = score(rows)
    assert metric(result, "catcons")[["value", "n"]].tolist() == [pytest.approx(200 / 3), 3]
    # Shift metrics need both levels known: only the Apply/Apply row.
    assert metric(result, "cogshift")[["value", "n"]].tolist() == [0.0, 1]


def test_catcons_ignores_questions_that_are_not_useful():
    rows = [vote("Apply", "Apply"), vote("Apply", "Create", useful=False, unique=False)]
    assert metric(score(rows), "catcons")[["value", "n"]].tolist() == [100.0, 1]


def test_no_useful_questions_gives_nan_with_zero_denominator():
    result = score([vote(useful=False, unique=False), vote(useful=False, answerable=False, unique=True, readable=True)])
    for name in ("catcons", "cogshift", "cogreg", "cogleap_mean", "knowcov", "cogreg_total"):
        row = metric(result, name)
        assert math.isnan(row["value"]) and math.isnan(row["ci_low"]) and math.isnan(row["ci_high"]), name
        assert row["n"] == 0, name
    assert metric(result, "usability")["value"] == 0.0


# --- shifts ------------------------------------------------------------------------------


def test_shift_boundaries_and_totals():
    rows = [
        vote("Apply", "Analyze"),  # +1 drift
        vote("Apply", "Understand"),  # -1 drift
        vote("Apply", "Evaluate"),  # +2 leap
        vote("Apply", "Remember"),  # -2 regression
        vote("Remember", "Create"),  # +5 leap
        vote("Apply", "Apply"),  # match: counts in CogShift's N with 0
        vote(None, "Create"),  # Uncategorized original: no Δ
    ]
    result = score(rows)
    assert metric(result, "cogdrift")[["value", "n"]].tolist() == [40.0, 5]
    assert metric(result, "cogleap")[["value", "n"]].tolist() == [40.0, 5]
    assert metric(result, "cogreg")[["value", "n"]].tolist() == [20.0, 5]
    assert metric(result, "cogdrift_total")[["value", "n"]].tolist() == [2.0, 2]
    assert metric(result, "cogleap_total")[["value", "n"]].tolist() == [7.0, 2]
    assert metric(result, "cogreg_total")[["value", "n"]].tolist() == [2.0, 1]
    assert metric(result, "cogleap_mean")["value"] == 3.5
    assert metric(result, "cogdrift_mean")["value"] == 1.0
    assert metric(result, "cogreg_mean")["value"] == 2.0
    # Eq. (4): (1+1+2+2+5+0) / 6 questions with both levels known
    assert metric(result, "cogshift")[["value", "n"]].tolist() == [pytest.approx(11 / 6), 6]


def test_shift_totals_are_zero_without_shifts_of_that_type():
    result = score([vote("Apply", "Apply"), vote("Apply", "Analyze")])
    assert metric(result, "cogreg_total")[["value", "n"]].tolist() == [0.0, 0]
    assert math.isnan(metric(result, "cogreg_mean")["value"])


# --- KnowCov -----------------------------------------------------------------------------


def test_knowcov_with_several_units_and_missing_votes():
    rows = [
        vote(k_ori=["A", "B"], k_new=["A"]),  # 1/2
        vote(k_ori=["A", "B"], k_new=["B", "A", "C"]),  # 2/2
        vote(k_ori=["A"], k_new=[]),  # judges agreed on no unit: 0
        vote(k_ori=["A"], k_new=None),  # no majority: left out
        vote(k_ori=["A"], k_new=["A"], useful=False, unique=False),  # not useful: left out
    ]
    assert metric(score(rows), "knowcov")[["value", "n"]].tolist() == [50.0, 3]


def test_knowcov_rejects_an_original_without_units():
    with pytest.raises(ValueError, match="original_knowledge_units"):
        score([vote(k_ori=[])])


# --- auxiliary tasks ---------------------------------------------------------------------


def test_classification_accuracy_over_originals_with_a_level():
    rows = [
        vote("Apply", id_level="Apply"),
        vote("Create", id_level="Understand"),
        vote("Analyze", id_level=None),  # unrecognised answer: wrong
        vote(None, id_level="Apply"),  # original without a level: left out
    ]
    assert metric(score(rows), "classification_acc")[["value", "n"]].tolist() == [pytest.approx(100 / 3), 3]


def test_knowledge_identification_compares_unit_sets_over_all_rows():
    rows = [
        vote(k_ori=["A"], id_units=["A"]),
        vote(k_ori=["A", "B"], id_units=["B", "A"]),
        vote(k_ori=["A"], id_units=["A", "C"]),
        vote(k_ori=["A"], id_units=None, parse_status="failed"),
    ]
    result = score(rows)
    assert metric(result, "knowledge_id_acc")[["value", "n"]].tolist() == [50.0, 4]
    assert metric(result, "parse_failure_rate")[["value", "n"]].tolist() == [25.0, 4]


def test_auxiliary_accuracies_apply_where_the_strategy_identifies_whatever_its_name():
    # A strategy identifies the original's level and units when its answer fields ask for them
    # (CoT's); its rows then carry them. One whose rows carry none gets no accuracy, whatever it
    # is called, and a strategy of another name that identifies is scored like CoT.
    rows = [vote(id_level="Apply", id_units=["A"]), vote(id_level="Apply", id_units=["A"])]
    fgp = score_cell(frame([vote(), vote()], strategy="fgp"), None, n_resamples=50)
    plain = score([vote(), vote()])
    for result in (fgp, plain):
        for name in ("classification_acc", "knowledge_id_acc"):
            assert math.isnan(metric(result, name)["value"]) and metric(result, name)["n"] == 0
    # asked but never named (an empty set each): 0%, not "not asked"
    silent = score([vote(id_units=[]), vote(id_units=[])])
    assert metric(silent, "knowledge_id_acc")[["value", "n"]].tolist() == [0.0, 2]
    own = score_cell(frame(rows, strategy="identify-first"), None, n_resamples=50)
    cot = score_cell(frame(rows, strategy="cot"), None, n_resamples=50)
    for name in ("classification_acc", "knowledge_id_acc"):
        assert metric(own, name)["value"] == metric(cot, name)["value"] and metric(own, name)["n"] == 2


# --- bootstrap ---------------------------------------------------------------------------


def _random_rows(n: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    levels = ["Remember", "Understand", "Apply", "Analyze", "Evaluate", "Create", None]
    rows = []
    for _ in range(n):
        useful = bool(rng.random() < 0.8)
        rows.append(
            vote(
                levels[rng.integers(0, 7)], levels[rng.integers(0, 6)], useful=useful,
                unique=useful or bool(rng.random() < 0.5), readable=True,
                answerable=useful or bool(rng.random() < 0.5),
                k_ori=["A", "B"][: int(rng.integers(1, 3))], k_new=[["A"], ["B"], ["C"]][rng.integers(0, 3)],
                id_level=levels[rng.integers(0, 6)], id_units=[["A"], ["B"]][rng.integers(0, 2)],
            )
        )
    return rows


def _bootstrap(n_resamples: int, confidence: float = 0.95) -> IntervalSpec:
    return IntervalSpec(method="percentile_bootstrap", n_resamples=n_resamples, confidence=confidence)


def test_bootstrap_interval_contains_the_value_and_is_deterministic():
    rows = _random_rows(300, seed=1)
    first = score_cell(frame(rows), None, intervals=_bootstrap(300), seed=7)
    again = score_cell(frame(rows), None, intervals=_bootstrap(300), seed=7)
    other = score_cell(frame(rows), None, intervals=_bootstrap(300), seed=8)
    assert set(first["ci_method"].dropna()) == {"percentile_bootstrap"}
    pd.testing.assert_frame_equal(first, again)
    assert not np.allclose(first["ci_low"].fillna(0), other["ci_low"].fillna(0))
    with_ci = first.dropna(subset=["ci_low"])
    assert len(with_ci) >= 15
    assert (with_ci["ci_low"] <= with_ci["value"] + 1e-9).all()
    assert (with_ci["value"] <= with_ci["ci_high"] + 1e-9).all()
    percent = with_ci[with_ci["metric"].isin(PERCENT_METRICS)]
    assert ((percent["ci_low"] >= 0) & (percent["ci_high"] <= 100)).all()


def test_bootstrap_interval_matches_the_normal_approximation_for_a_proportion():
    n, p = 2000, 0.8
    rows = [vote(useful=i < n * p) for i in range(n)]
    row = metric(score_cell(frame(rows), None, intervals=_bootstrap(2000), seed=3), "usability")
    half = 1.96 * math.sqrt(p * (1 - p) / n) * 100
    assert row["ci_low"] == pytest.approx(80 - half, abs=0.3)
    assert row["ci_high"] == pytest.approx(80 + half, abs=0.3)


def test_score_intervals_contain_the_value_and_name_their_method():
    result = score_cell(frame(_random_rows(300, seed=1)), None)
    with_ci = result.dropna(subset=["ci_low"])
    assert len(with_ci) >= 15
    assert (with_ci["ci_low"] <= with_ci["value"] + 1e-9).all()
    assert (with_ci["value"] <= with_ci["ci_high"] + 1e-9).all()
    methods = result.set_index("metric")["ci_method"]
    assert methods["usability"] == "clopper_pearson" and methods["catcons"] == "clopper_pearson"
    assert methods["cogshift"] == "betting_bounded_mean"
    assert pd.isna(methods["n_generated"])


def test_ci_method_follows_the_metric_not_the_values_a_cell_holds():
    # every original carries one unit, so each KnowCov outcome is 0 or 1: still a graded metric
    rows = [vote(k_ori=["A"], k_new=["A"] if i % 2 else ["B"]) for i in range(20)]
    methods = score_cell(frame(rows), None).set_index("metric")["ci_method"]
    described = IntervalSpec().describe()
    assert methods["knowcov"] == described["bounded_means"] == "clopper_pearson_bounded_mean"
    assert methods["cogshift"] == described["bounded_means_of_levels"] == "betting_bounded_mean"
    assert methods["usability"] == described["shares"] == "clopper_pearson"


def test_a_rate_of_0_or_100_percent_has_an_interval_of_non_zero_width():
    # the percentile bootstrap printed 100.00 [100.0, 100.0] (n=17): every resample is 100%
    for useful in (True, False):
        row = metric(score_cell(frame([vote(useful=useful) for _ in range(17)]), None), "usability")
        assert row["n"] == 17 and row["ci_high"] - row["ci_low"] > 15.0
        low, high = (float(x) * 100 for x in rate_interval(17 if useful else 0, 17, "clopper_pearson"))
        assert (row["ci_low"], row["ci_high"]) == (pytest.approx(low), pytest.approx(high))
    one = metric(score_cell(frame([vote(useful=True)]), None), "usability")
    assert one["n"] == 1 and one["ci_low"] < 50.0 and one["ci_high"] == 100.0


def test_wilson_agrees_with_statsmodels():
    from statsmodels.stats.proportion import proportion_confint

    for k, n in ((0, 10), (3, 10), (10, 10), (57, 80)):
        for method, name in (("wilson", "wilson"), ("clopper_pearson", "beta"), ("jeffreys", "jeffreys")):
            if method == "jeffreys" and k in (0, n):
                continue  # statsmodels leaves out Brown et al.'s boundary rule, which we apply
            ours = [float(x) for x in rate_interval(k, n, method)]
            assert ours == pytest.approx(list(proportion_confint(k, n, method=name)), abs=1e-9), (k, n, method)


def test_clustering_on_the_unit_widens_a_rate_whose_units_differ():
    # two units, one all yes and one all no: the questions are not 40 independent draws
    rows = [vote(useful=i < 20, k_ori=["A"] if i < 20 else ["B"]) for i in range(40)]
    plain = metric(score_cell(frame(rows), None, intervals=IntervalSpec(cluster="none")), "usability")
    by_item = metric(score_cell(frame(rows), None, intervals=IntervalSpec(cluster="item")), "usability")
    by_unit = metric(score_cell(frame(rows), None, intervals=IntervalSpec(cluster="unit")), "usability")
    assert (plain["ci_low"], plain["ci_high"]) == (by_item["ci_low"], by_item["ci_high"])
    assert by_unit["ci_high"] - by_unit["ci_low"] > 2 * (plain["ci_high"] - plain["ci_low"])
    # two units are fewer than the benchmark measured the clustered interval at: the row says so
    assert by_unit["ci_method"] == "clopper_pearson_clustered_unit_few_clusters"


def test_six_units_or_more_are_labelled_plainly_as_clustered():
    rows = [vote(useful=i % 3 == 0, k_ori=[f"U{i % 6}"]) for i in range(60)]
    by_unit = metric(score_cell(frame(rows), None, intervals=IntervalSpec(cluster="unit")), "usability")
    assert by_unit["ci_method"] == "clopper_pearson_clustered_unit"


def _unequal_units(n: int, units: int) -> np.ndarray:
    """Cluster labels of ``n`` rows over ``units`` whose sizes grow 1 : 5."""
    weights = np.linspace(1.0, 5.0, units)
    sizes = np.maximum(1, np.floor(n * weights / weights.sum())).astype(int)
    sizes[-1] += n - sizes.sum()
    return np.repeat(np.arange(units), sizes)


def test_cr2_matches_the_hat_matrix_construction_of_bell_and_mccaffrey():
    from scipy.linalg import inv, sqrtm

    rng = np.random.default_rng(5)
    labels = _unequal_units(40, 5)
    y = rng.random(40)
    n = len(y)
    hat = np.full((n, n), 1.0 / n)  # intercept-only: X (XᵀX)⁻¹ Xᵀ
    residual = y - y.mean()
    meat, columns = 0.0, []
    for g in range(5):
        rows = labels == g
        adjust = np.real(sqrtm(inv(np.eye(rows.sum()) - hat[np.ix_(rows, rows)])))
        meat += float(np.sum(adjust @ residual[rows])) ** 2
        column = np.zeros(n)
        column[rows] = adjust.sum(axis=0) / n  # A_g X_g (XᵀX)⁻¹
        columns.append((np.eye(n) - hat) @ column)
    eigen = np.linalg.eigvalsh(np.array(columns) @ np.array(columns).T)
    totals = np.bincount(labels, weights=y)
    variance, df = cr2_mean(totals, np.bincount(labels).astype(float))
    assert variance == pytest.approx(meat / n**2, rel=1e-10)
    assert df == pytest.approx(eigen.sum() ** 2 / np.sum(eigen**2), rel=1e-10)


def test_the_clustered_interval_covers_with_twelve_unequal_units():
    # ICC 0.3 around a rate of 0.05, 400 questions on 12 units: CR1 on 11 df covered 0.84 here (this seed)
    rng = np.random.default_rng(11)
    labels = _unequal_units(400, 12)
    p, icc, covered, replications = 0.05, 0.3, 0, 400
    for _ in range(replications):
        rates = rng.beta(p * (1 - icc) / icc, (1 - p) * (1 - icc) / icc, size=12)
        values = (rng.random(400) < rates[labels]).astype(float)
        n_eff, df = effective_size(values, np.ones(400), labels, 0.0, 1.0)
        low, high = bounded_mean_interval(values.mean(), n_eff, 0.0, 1.0, "clopper_pearson", 0.95, df)
        covered += low <= p <= high
    assert covered / replications >= 0.91


def test_no_yes_in_twelve_units_is_read_as_twelve_draws_not_400():
    labels = _unequal_units(400, 12)
    n_eff, df = effective_size(np.zeros(400), np.ones(400), labels, 0.0, 1.0)
    low, high = bounded_mean_interval(0.0, n_eff, 0.0, 1.0, "clopper_pearson", 0.95, df)
    per_unit = 400**2 / np.sum(np.bincount(labels) ** 2)
    assert low == 0.0 and high == pytest.approx(float(rate_interval(0, per_unit, "clopper_pearson")[1]))


def test_wider_confidence_gives_a_wider_interval():
    rows = _random_rows(200, seed=2)
    narrow = metric(score_cell(frame(rows), None, confidence=0.8), "catcons")
    wide = metric(score_cell(frame(rows), None, confidence=0.99), "catcons")
    assert wide["ci_high"] - wide["ci_low"] > narrow["ci_high"] - narrow["ci_low"]


# --- alpha gate --------------------------------------------------------------------------


def _reliability(criterion: str, passed: bool | None, *, model: str = "m", judge: str | None = None) -> dict:
    return {"dataset": "cs", "strategy": "cot", "model": model, "criterion": criterion, "judge": judge,
            "gate_passed": passed}


def test_alpha_gate_marks_the_metrics_a_failed_criterion_feeds():
    reliability = pd.DataFrame([
        _reliability("bloom_level", False),
        _reliability("unique", True),
        _reliability("knowledge_units", None),  # α not computable: not a failure
        _reliability("readable", False, model="other"),  # another cell
        _reliability("answerable", False, judge="gpt"),  # a judge's own row, not the panel
    ])
    result = score([vote(), vote(new="Create")], reliability).set_index("metric")["alpha_gated"]
    gated = set(result[result].index)
    assert gated == {name for name in METRIC_NAMES if name == "catcons" or name.startswith("cog")}


def test_alpha_gate_from_usefulness_criteria_reaches_metrics_over_useful_questions():
    reliability = pd.DataFrame([_reliability("unique", False)])
    result = score([vote()], reliability).set_index("metric")["alpha_gated"]
    assert result["unique"] and result["usability"] and result["catcons"] and result["knowcov"]
    assert not result["readable"] and not result["parse_failure_rate"] and not result["classification_acc"]


def test_without_reliability_the_votes_cell_flag_marks_judged_metrics():
    result = score_cell(frame([vote()], alpha_gated=True), None, n_resamples=20).set_index("metric")["alpha_gated"]
    assert result["readable"] and result["knowcov"] and result["cogleap"]
    assert not result["n_generated"] and not result["knowledge_id_acc"]


# --- bad input ---------------------------------------------------------------------------


def test_score_cell_refuses_several_cells_missing_columns_and_unknown_levels():
    two = frame([vote(), vote()])
    two.loc[1, "model"] = "other"
    with pytest.raises(ValueError, match="exactly one"):
        score_cell(two, None)
    with pytest.raises(ValueError, match="missing columns.*useful"):
        score_cell(frame([vote()]).drop(columns="useful"), None)
    with pytest.raises(ValueError, match="'bloom_level', row 0.*'apply'"):
        score_cell(frame([vote(new="apply")]), None)
    with pytest.raises(ValueError, match="no rows"):
        score_cell(frame([vote()]).iloc[0:0], None)


# --- transitions and per-level accuracy --------------------------------------------------


def test_transition_counts_judged_over_useful_questions_with_a_verdict():
    rows = [
        vote("Apply", "Create"), vote("Apply", "Create"), vote(None, "Apply"),
        vote("Remember", None, level_reason=JUDGED_UNCATEGORIZED), vote("Remember", None, level_reason="tie"),
        vote("Apply", "Remember", useful=False, unique=False),
    ]
    counts = transition_counts(frame(rows), "judged")
    assert counts.to_dict("records") == [
        {"original_level": "Remember", "other_level": "Uncategorized", "count": 1},
        {"original_level": "Apply", "other_level": "Create", "count": 2},
        {"original_level": "Uncategorized", "other_level": "Apply", "count": 1},
    ]


def test_transition_counts_classified_and_per_level_accuracy():
    rows = [
        vote("Apply", id_level="Apply"), vote("Apply", id_level="Understand"),
        vote("Create", id_level="Apply"), vote(None, id_level="Apply"), vote("Create", id_level=None),
    ]
    counts = transition_counts(frame(rows), "classified")
    assert counts.set_index(["original_level", "other_level"])["count"].to_dict() == {
        ("Apply", "Understand"): 1, ("Apply", "Apply"): 1, ("Create", "Apply"): 1,
        ("Create", "Uncategorized"): 1, ("Uncategorized", "Apply"): 1,
    }
    accuracy = per_level_accuracy(frame(rows), "classified")
    assert accuracy.to_dict("records") == [
        {"original_level": "Apply", "n": 2, "correct": 1, "accuracy": 50.0},
        {"original_level": "Create", "n": 2, "correct": 0, "accuracy": 0.0},
    ]
    assert transition_counts(frame([vote()]), "classified").empty
    with pytest.raises(ValueError, match="kind"):
        transition_counts(frame(rows), "other")


def test_per_level_catcons_adds_up_to_catcons():
    rows = _random_rows(200, seed=4)
    table = per_level_accuracy(frame(rows), "judged")
    overall = metric(score_cell(frame(rows), None, n_resamples=10), "catcons")
    assert table["n"].sum() == overall["n"]
    assert table["correct"].sum() / table["n"].sum() * 100 == pytest.approx(overall["value"])
    assert "Uncategorized" in set(table["original_level"])


# --- correlations ------------------------------------------------------------------------


def _all_metrics(values: dict[str, tuple[float, float]], dataset: str = "cs") -> pd.DataFrame:
    rows = []
    for model, (x, y) in values.items():
        rows.append({"model": model, "dataset": dataset, "strategy": "cot", "metric": "classification_acc", "value": x})
        rows.append({"model": model, "dataset": dataset, "strategy": "cot", "metric": "catcons", "value": y})
    return pd.DataFrame(rows)


def test_correlations_pearson_and_spearman_with_fisher_intervals():
    x = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0]
    y = [40.0, 35.0, 37.0, 30.0, 31.0, 29.0]
    table = correlations(_all_metrics({f"m{i}": (a, b) for i, (a, b) in enumerate(zip(x, y))}),
                         pairs=(("classification_acc", "catcons"),))
    pearson = table[table["method"] == "pearson"].iloc[0]
    expected = stats.pearsonr(x, y)
    assert pearson["r"] == pytest.approx(expected.statistic)
    assert pearson["p_value"] == pytest.approx(expected.pvalue)
    ci = expected.confidence_interval(0.95)
    assert (pearson["ci_low"], pearson["ci_high"]) == (pytest.approx(ci.low), pytest.approx(ci.high))
    spearman = table[table["method"] == "spearman"].iloc[0]
    rho = stats.spearmanr(x, y).statistic
    se = math.sqrt((1 + rho**2 / 2) / 3)
    assert spearman["r"] == pytest.approx(rho)
    assert spearman["ci_low"] == pytest.approx(math.tanh(math.atanh(rho) - 1.959964 * se), abs=1e-5)
    assert spearman["n"] == 6 and spearman["ci_low"] < rho < spearman["ci_high"]


def test_correlations_with_too_few_models_or_missing_values_are_nan():
    metrics = _all_metrics({"a": (1.0, 2.0), "b": (2.0, 3.0), "c": (float("nan"), 1.0)})
    table = correlations(metrics)
    row = table[(table["x_metric"] == "classification_acc") & (table["method"] == "pearson")].iloc[0]
    assert row["n"] == 2 and math.isnan(row["r"]) and math.isnan(row["ci_low"])
    knowledge = table[table["x_metric"] == "knowledge_id_acc"]
    assert (knowledge["n"] == 0).all() and knowledge["r"].isna().all()
    three = correlations(_all_metrics({"a": (1.0, 2.0), "b": (2.0, 3.0), "c": (3.0, 5.0)}), pairs=(("classification_acc", "catcons"),))
    assert not math.isnan(three.iloc[0]["r"]) and math.isnan(three.iloc[0]["ci_low"])


# --- paired comparison -------------------------------------------------------------------


def test_paired_comparison_mcnemar_and_wilcoxon():
    # 12 items: usability flips 0->1 on 6 items, 1->0 on 1 item, stays 1 on 5.
    cot_rows, fgp_rows = [], []
    for i in range(12):
        item = f"cs-{i:04d}"
        cot_useful = i >= 6
        fgp_useful = i != 11
        cot_rows.append(vote(useful=cot_useful, unique=cot_useful, item=item, k_ori=["A", "B"], k_new=["A"]))
        fgp_rows.append(vote(useful=fgp_useful, unique=fgp_useful, item=item, k_ori=["A", "B"],
                             k_new=["A", "B"] if i % 2 else ["A"]))
    cot = frame(cot_rows)
    fgp = frame(fgp_rows, strategy="fgp")
    table = paired_comparison(cot, fgp, n_resamples=500, seed=1)
    assert table.columns.tolist() == list(PAIRED_COLUMNS)
    result = table.set_index("metric")
    usability = result.loc["usability"]
    assert usability["n_pairs"] == 12
    assert usability[["strategy_a", "strategy_b"]].tolist() == ["cot", "fgp"]
    assert usability[["value_a", "value_b", "diff"]].tolist() == [50.0, pytest.approx(1100 / 12), pytest.approx(500 / 12)]
    assert usability["test"] == "mcnemar"
    assert usability["p_value"] == pytest.approx(stats.binomtest(6, 7, 0.5).pvalue)
    assert usability["n_differing"] == 7  # the discordant pairs McNemar's test counts
    assert usability["effect_size_name"] == "cohens_h"
    assert usability["effect_size"] == pytest.approx(2 * math.asin(math.sqrt(11 / 12)) - 2 * math.asin(math.sqrt(0.5)))
    assert usability["ci_low"] < usability["diff"] < usability["ci_high"]
    # KnowCov is defined where the question is useful in both arms: items 6..10.
    knowcov = result.loc["knowcov"]
    assert knowcov["n_pairs"] == 5 and knowcov["test"] == "wilcoxon"
    # items 7 and 9 cover both units under FGP, items 6, 8, 10 one of two in both arms
    assert knowcov[["value_a", "value_b"]].tolist() == [50.0, pytest.approx(100 * (2 * 1.0 + 3 * 0.5) / 5)]
    assert knowcov["effect_size"] == 1.0  # every non-zero difference favours FGP
    assert knowcov["p_value"] == pytest.approx(stats.wilcoxon([50.0, 50.0]).pvalue)
    assert knowcov["n_differing"] == 2  # the non-zero differences Wilcoxon's test ranks


def test_paired_comparison_without_discordance_and_without_pairs():
    cot = frame([vote(item="a"), vote(item="b")])
    fgp = frame([vote(item="a"), vote(item="c")], strategy="fgp")
    result = paired_comparison(cot, fgp, metrics=("usability", "knowcov"), n_resamples=50).set_index("metric")
    assert result.loc["usability", "n_pairs"] == 1 and result.loc["usability", "p_value"] == 1.0
    assert result.loc["knowcov", "p_value"] == 1.0 and result.loc["knowcov", "effect_size"] == 0.0
    none = paired_comparison(frame([vote(item="a")]), frame([vote(item="b")], strategy="fgp"), n_resamples=10)
    assert (none["n_pairs"] == 0).all() and none["p_value"].isna().all()


def test_paired_comparison_rejects_mixed_models_and_repeated_items():
    cot = frame([vote(item="a")])
    with pytest.raises(ValueError, match="one model"):
        paired_comparison(cot, frame([vote(item="a")], strategy="fgp", model="other"))
    with pytest.raises(ValueError, match="item_id must be unique"):
        paired_comparison(frame([vote(item="a"), vote(item="a")]), frame([vote(item="a")], strategy="fgp"))
    with pytest.raises(ValueError, match="both arms are strategy 'fgp'"):
        paired_comparison(frame([vote(item="a")], strategy="fgp"), frame([vote(item="a")], strategy="fgp"))
    with pytest.raises(ValueError, match="no per-question outcome"):
        paired_comparison(cot, frame([vote(item="a")], strategy="fgp"), metrics=("n_useful",))


def test_paired_comparisons_covers_models_run_under_both_strategies():
    cot = frame([vote(item="a"), vote(item="b")])
    fgp = frame([vote(item="a"), vote(item="b", useful=False, unique=False)], strategy="fgp")
    lonely = frame([vote(item="a")], model="solo")
    result = paired_comparisons(pd.concat([cot, fgp, lonely], ignore_index=True), n_resamples=20)
    assert set(result["model"]) == {"m"} and len(result) == 3
    assert paired_comparisons(lonely).columns.tolist() == list(PAIRED_COLUMNS)


def _three_strategies() -> pd.DataFrame:
    """One model × dataset under cot, fgp and zeroshot: 10 items, usability 3 / 8 / 6 of 10."""
    arms = []
    for strategy, useful in (("cot", 3), ("fgp", 8), ("zeroshot", 6)):
        arms.append(frame([vote(item=f"cs-{i:04d}", useful=i < useful, unique=i < useful) for i in range(10)],
                          strategy=strategy))
    return pd.concat(arms, ignore_index=True)


def test_paired_comparisons_pair_each_strategy_with_the_baseline_or_every_pair():
    votes = _three_strategies()
    first = paired_comparisons(votes, metrics=("usability",), n_resamples=20)
    assert first[["strategy_a", "strategy_b"]].values.tolist() == [["cot", "fgp"], ["cot", "zeroshot"]]
    assert first["diff"].tolist() == [50.0, 30.0]
    # the config's order decides the default baseline, not the order in the votes
    ordered = paired_comparisons(votes, metrics=("usability",), n_resamples=20, strategy_order=["zeroshot", "cot"])
    assert ordered[["strategy_a", "strategy_b"]].values.tolist() == [["zeroshot", "cot"], ["zeroshot", "fgp"]]
    chosen = paired_comparisons(votes, comparison=ComparisonSpec(baseline="fgp"), metrics=("usability",),
                                n_resamples=20)
    assert chosen[["strategy_a", "strategy_b"]].values.tolist() == [["fgp", "cot"], ["fgp", "zeroshot"]]
    assert chosen["diff"].tolist() == [-50.0, -20.0]
    every = paired_comparisons(votes, comparison=ComparisonSpec(all_pairs=True), metrics=("usability", "unique"),
                               n_resamples=20)
    assert every[every["metric"] == "usability"][["strategy_a", "strategy_b"]].values.tolist() == [
        ["cot", "fgp"], ["cot", "zeroshot"], ["fgp", "zeroshot"]]
    # a baseline the cell group does not run: nothing to compare there
    assert paired_comparisons(votes, comparison=ComparisonSpec(baseline="refine"), n_resamples=20).empty


def test_holm_adjusts_within_each_metrics_family_as_by_hand():
    every = paired_comparisons(_three_strategies(), comparison=ComparisonSpec(all_pairs=True),
                               metrics=("usability", "unique"), n_resamples=20)
    usability = every[every["metric"] == "usability"]
    # McNemar on the discordant pairs: cot→fgp 5 of 5, cot→zeroshot 3 of 3, fgp→zeroshot 0 of 2
    raw = [stats.binomtest(5, 5).pvalue, stats.binomtest(3, 3).pvalue, stats.binomtest(0, 2).pvalue]
    assert usability["p_value"].tolist() == pytest.approx(raw)  # 0.0625, 0.25, 0.5
    # by hand: sorted 0.0625, 0.25, 0.5 -> 3·0.0625, max(0.1875, 2·0.25), max(0.5, 1·0.5)
    assert usability["p_adjusted"].tolist() == pytest.approx([0.1875, 0.5, 0.5])
    assert (usability["family_size"] == 3).all()
    # the unique metric is its own family of three, not pooled with usability
    assert (every.loc[every["metric"] == "unique", "family_size"] == 3).all()


def test_holm_adjust_keeps_order_and_nan_and_is_monotone():
    adjusted = holm_adjust([0.04, float("nan"), 0.01, 0.03, 0.5])
    # defined m = 4; sorted 0.01, 0.03, 0.04, 0.5 -> 0.04, 0.09, max(0.09, 0.08)=0.09, max(0.09, 0.5)=0.5
    assert adjusted[[2, 3, 0, 4]].tolist() == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert math.isnan(adjusted[1])
    assert holm_adjust([0.6, 0.7]).tolist() == [1.0, 1.0]
    assert holm_adjust([]).size == 0
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm_adjust([1.5])


# --- paired intervals ----------------------------------------------------------------------


def test_mover_on_0_1_pairs_reduces_to_newcombes_unpaired_interval_when_the_pairs_are_uncorrelated():
    from statsmodels.stats.proportion import confint_proportions_2indep

    # 4 of each cell: φ = 0, so MOVER is Newcombe's unpaired hybrid score interval
    a = np.array([1] * 4 + [1] * 4 + [0] * 4 + [0] * 4, dtype=float)
    b = np.array([1] * 4 + [0] * 4 + [1] * 4 + [0] * 4, dtype=float)
    expected = confint_proportions_2indep(8, 16, 8, 16, method="newcomb", compare="diff")
    assert mover_paired(a, b) == pytest.approx(tuple(expected), abs=1e-9)


def _exact_paired_coverage(n: int, p_a: float, discordance: float, difference: float, correction: float) -> float:
    """Coverage of Tango's interval summed over every 2 × 2 table of ``n`` pairs (multinomial)."""
    only_b_p, only_a_p = (discordance + difference) / 2, (discordance - difference) / 2
    probabilities = [p_a - only_a_p, only_a_p, only_b_p, 1 - p_a - only_b_p]  # a1b1, a1b0, a0b1, a0b0
    tables = np.array([(i, j, k, n - i - j - k) for i in range(n + 1) for j in range(n + 1 - i)
                       for k in range(n + 1 - i - j)])
    weight = stats.multinomial.pmf(tables, n, probabilities)
    low, high = tango_paired(tables[:, 2], tables[:, 1], n, correction=correction)
    return float(np.sum(weight * ((low <= difference + 1e-12) & (difference - 1e-12 <= high))))


def test_paired_interval_covers_when_every_discordant_pair_favours_one_arm():
    # Newcombe's interval covered 0.909 here: 11/22 in both arms gave [-8.2, 8.2] around a true 10
    assert _exact_paired_coverage(22, 0.5, 0.10, 0.10, correction=0.5) >= 0.94
    assert _exact_paired_coverage(50, 0.5, 0.05, 0.05, correction=0.5) >= 0.94
    # the sum can fail: without the continuity correction the score interval misses in this design
    assert _exact_paired_coverage(30, 0.5, 0.30, 0.30, correction=0.0) < 0.94
    # no discordant pair still leaves a difference of 10 points inside at 22 pairs
    low, high = paired_binary(np.ones(22), np.ones(22))
    assert low < -0.10 and high > 0.10


def test_paired_intervals_are_antisymmetric_and_never_degenerate():
    rng = np.random.default_rng(4)
    for n in (1, 5, 30):
        a, b = rng.integers(0, 2, n), rng.integers(0, 2, n)
        low, high = paired_binary(a, b)
        back = paired_binary(b, a)
        assert (low, high) == (-back[1], -back[0])  # to the bit
        assert low <= b.mean() - a.mean() <= high
        x, y = rng.integers(0, 6, n).astype(float), rng.integers(0, 6, n).astype(float)
        low, high = mover_paired(x, y, 0.0, 5.0)
        assert (low, high) == pytest.approx(tuple(-v for v in reversed(mover_paired(y, x, 0.0, 5.0))))
        assert low <= y.mean() - x.mean() <= high
    # every pair agrees: the difference is 0 with an interval around it, not [0, 0]
    same = np.ones(12)
    assert paired_binary(same, same)[0] < 0 < paired_binary(same, same)[1]
    assert mover_paired(np.zeros(12), np.zeros(12), 0.0, 5.0)[0] < 0 < mover_paired(np.zeros(12), np.zeros(12), 0.0, 5.0)[1]


def test_paired_comparison_names_its_interval_methods():
    rows = _random_rows(60, seed=5)
    cot, fgp = frame(rows), frame(_random_rows(60, seed=6), strategy="fgp")
    table = paired_comparison(cot, fgp).set_index("metric")
    assert table.loc["usability", "ci_method"] == "tango_paired_score"
    assert table.loc["knowcov", "ci_method"] == "mover_paired_score"
    boot = paired_comparison(cot, fgp, bootstrap=True, n_resamples=200).set_index("metric")
    assert set(boot["ci_method"]) == {"percentile_bootstrap"}


# --- the study plan ------------------------------------------------------------------------


def test_mcnemar_power_matches_a_simulation_of_the_exact_test():
    from bloomqg.metrics.plan import mcnemar_power

    rng = np.random.default_rng(0)
    n, psi, d, alpha = 60, 0.3, 0.15, 0.05
    cells = rng.choice(3, size=(3000, n), p=[(psi + d) / 2, (psi - d) / 2, 1 - psi])
    only_b, only_a = (cells == 0).sum(1), (cells == 1).sum(1)
    rejected = [stats.binomtest(int(x), int(x + y), 0.5).pvalue < alpha for x, y in zip(only_b, only_a) if x + y]
    assert mcnemar_power(n, psi, d, alpha) == pytest.approx(sum(rejected) / 3000, abs=0.03)


def test_paired_t_power_rises_with_the_difference_even_where_the_noncentral_t_fails():
    from bloomqg.metrics.plan import minimum_detectable, t_power

    powers = [t_power(1269, 0.5, d, 0.05) for d in (0.01, 0.03, 0.05, 0.1, 0.5, 1.0)]
    assert all(math.isfinite(p) for p in powers) and powers == sorted(powers) and powers[-1] == 1.0
    # (t_95% + t_80%) · sd / √n
    assert minimum_detectable("paired_t", 1269, 0.5, 0.8, 0.05, 1.0) == pytest.approx(2.8 * 0.5 / 1269**0.5, rel=0.02)


def test_study_plan_says_so_when_a_planned_pair_has_no_item_in_common():
    from bloomqg.metrics.plan import study_plan

    cot = frame(_random_rows(20, seed=8))
    fgp = frame(_random_rows(20, seed=9), strategy="fgp")
    fgp["item_id"] = "other-" + fgp["item_id"]  # the two strategies answered different items
    plan = study_plan(pd.concat([cot, fgp], ignore_index=True)).set_index("metric")
    assert (plan["n_items"] == 0).all() and (plan["n_pairs"] == 0).all()
    assert plan["n_needed"].isna().all() and plan["mdd"].isna().all()
    assert plan["note"].str.contains("no item in common").all()
    from bloomqg.metrics.plan import items_needed

    assert all(items_needed(record, 20.0) is None for record in plan.reset_index().to_dict("records"))
    # the pairs a difference needs do not depend on which items: still planned from the assumption
    assert plan["pairs_needed"].notna().all()


def test_pairs_needed_is_a_plan_the_next_pairs_keep():
    from bloomqg.metrics.plan import RECHECK_PAIRS, mcnemar_power, pairs_needed

    n = pairs_needed("mcnemar", 0.3, 0.1, 0.8, 0.05)
    assert all(mcnemar_power(k, 0.3, 0.1, 0.05) >= 0.8 for k in range(n, n + RECHECK_PAIRS + 1))
    assert mcnemar_power(n - 1, 0.3, 0.1, 0.05) < 0.8


def test_study_plan_gives_items_needed_and_the_minimum_detectable_difference():
    from bloomqg.metrics.plan import PlanSpec, study_plan

    cot = frame(_random_rows(40, seed=8))
    fgp = frame(_random_rows(40, seed=9), strategy="fgp")
    plan = study_plan(pd.concat([cot, fgp], ignore_index=True), PlanSpec(difference=5.0))
    assert set(plan["metric"]) == {"usability", "catcons", "knowcov"}
    row = plan.set_index("metric").loc["usability"]
    assert row["n_pairs"] == 40 and row["family_size"] == 1 and row["discordance_source"] == "measured on 40 pairs"
    # 40 pairs cannot detect 5 points; the MDD is what they can detect, the items needed far more
    assert row["mdd"] > 5.0 and row["n_needed"] > 40 and bool(row["reachable"])
    assert row["power_at_difference"] < 0.8
    bigger = study_plan(pd.concat([cot, fgp], ignore_index=True), PlanSpec(difference=row["mdd"]))
    assert bigger.set_index("metric").loc["usability", "pairs_needed"] <= 41
    # items_needed (the Answer's "to detect 20 points") follows the plan's own rules: at the plan's
    # difference it is every row's n_needed (KnowCov's paired t test included); none where no pair
    from bloomqg.metrics.plan import items_needed

    for record in plan.to_dict("records"):
        assert items_needed(record, 5.0) == (None if pd.isna(record["n_needed"]) else int(record["n_needed"])), record
        assert items_needed(record, 20.0) <= items_needed(record, 5.0)
