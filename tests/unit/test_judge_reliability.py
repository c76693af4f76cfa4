"""Agreement that survives prevalence (AC1, percent agreement, prevalence against published worked
examples), Dawid–Skene on a planted panel, per-judge diagnostics, the gate's coefficient and the
Dawid–Skene aggregation of a cell."""

from __future__ import annotations

import numpy as np
import pytest

from bloomqg.voting.agreement import agreement_with_ci
from bloomqg.voting.alpha import alpha_from_votes
from bloomqg.voting.cell import measure_criterion, vote_cell
from bloomqg.voting.dawid_skene import binary_rates, fit_dawid_skene
from bloomqg.voting.diagnostics import cohen_kappa, suspicious_judges
from tests.unit.test_voting import KRIPPENDORFF_C, generations_frame, judgments_frame

# -- published worked examples ------------------------------------------------------------------

# irrCAC documentation (Gwet; R package vignette "overview"): cont3x3abstractors, 2 raters x 100
# subjects: Gwet's AC1 0.8493305, Krippendorff's alpha 0.7972585, percent agreement 0.89.
ABSTRACTORS = {("Ectopic", "Ectopic"): 13, ("AIU", "AIU"): 20, ("AIU", "NIU"): 7,
               ("NIU", "AIU"): 4, ("NIU", "NIU"): 56}


def test_ac1_alpha_and_percent_agreement_match_irrcac_two_raters():
    votes = [[a, b] for (a, b), count in ABSTRACTORS.items() for _ in range(count)]
    result = agreement_with_ci(votes, "bloom_level", "nominal", n_resamples=0)
    assert result.ac1 == pytest.approx(0.8493305, abs=1e-6)
    assert result.percent_agreement == pytest.approx(0.89, abs=1e-9)
    assert alpha_from_votes(votes, "nominal") == pytest.approx(0.7972585, abs=1e-6)
    assert result.n_items == 100 and result.prevalence == pytest.approx(123 / 200)


def test_ac1_matches_gwet_handbook_four_raters_with_missing_ratings():
    # Gwet (2014), Handbook of Inter-Rater Reliability, p. 120 (irrCAC's cac.raw4raters, the same
    # data as Krippendorff's section C): AC1 0.77544, pa 0.81818 (irrCAC's own tests).
    votes = [[None if v is None else str(v) for v in unit] for unit in KRIPPENDORFF_C]
    result = agreement_with_ci(votes, "bloom_level", "nominal", n_resamples=200, seed=1)
    assert result.ac1 == pytest.approx(0.77544, abs=5e-6)
    assert result.percent_agreement == pytest.approx(0.81818, abs=5e-6)
    assert result.n_items == 11
    assert result.ac1_ci_low < result.ac1 < result.ac1_ci_high


def test_prevalence_paradox_alpha_collapses_while_ac1_and_agreement_stay_high():
    # 200 items, three judges, nearly always "yes": 6 items with one dissenting "no", four where
    # two judges say "no" together (agreement on the rarer answer beyond chance, which the AC1
    # route needs: α's interval above 0).
    votes = [["1", "1", "1"] for _ in range(190)] + [["1", "1", "0"], ["1", "0", "1"], ["0", "1", "1"]] * 2 + [
        ["0", "0", "1"], ["0", "1", "0"], ["1", "0", "0"], ["0", "0", "1"]]
    result = agreement_with_ci(votes, "unique", "nominal", n_resamples=100)
    alpha = alpha_from_votes(votes, "nominal")
    assert alpha < 0.5 and result.ac1 > 0.95 and result.percent_agreement > 0.95
    assert result.prevalence > 0.97 and result.majority_category == "1"
    # beyond the prevalence limit the gate reads AC1, whichever coefficient the config names
    names = ["a", "b", "c"]
    by_alpha = measure_criterion("unique", votes, names, gate_coefficient="alpha", gate_threshold=0.7, n_resamples=20)
    by_ac1 = measure_criterion("unique", votes, names, gate_coefficient="ac1", gate_threshold=0.7, n_resamples=20)
    assert by_alpha.passed and by_ac1.passed and by_alpha.decision.coefficient == "ac1"
    # without the shared "no"s, every agreement is on "yes": not measured, however high AC1 reads
    alone = measure_criterion("unique", votes[:-4], names, gate_threshold=0.7, n_resamples=0)
    assert alone.agreement.ac1 > 0.95 and alone.decision.status == "not_measured"
    # below it, the configured coefficient decides: α fails where AC1 would pass
    balanced = [["1", "1", "0"], ["0", "0", "1"], ["1", "0", "1"], ["0", "1", "0"]] * 10 + [["1", "1", "1"], ["0", "0", "0"]] * 40
    low = measure_criterion("unique", balanced, names, gate_coefficient="alpha", gate_threshold=0.55, n_resamples=20)
    assert low.decision.coefficient == "alpha" and low.agreement.prevalence < 0.9
    assert low.passed == (low.alpha.alpha >= 0.55)


def test_a_panel_that_only_says_yes_has_ac1_one_not_undefined():
    result = agreement_with_ci([["1", "1"]] * 5, "readable", "nominal", n_resamples=0)
    assert result.ac1 == 1.0 and result.percent_agreement == 1.0 and result.prevalence == 1.0


# -- Dawid–Skene ---------------------------------------------------------------------------------


def planted_panel(n_items: int, sensitivity, specificity, *, prevalence=0.5, seed=7):
    rng = np.random.default_rng(seed)
    truth = rng.random(n_items) < prevalence
    said = np.empty((n_items, len(sensitivity)), dtype=bool)
    for j, (se, sp) in enumerate(zip(sensitivity, specificity)):
        draw = rng.random(n_items)
        said[:, j] = np.where(truth, draw < se, draw >= sp)
    votes = [["1" if v else "0" for v in row] for row in said]
    return truth, said, votes


def test_dawid_skene_recovers_planted_judge_accuracies_on_2000_items():
    sensitivity = [0.95, 0.85, 0.75, 0.90, 0.65]
    specificity = [0.90, 0.70, 0.95, 0.65, 0.85]
    truth, said, votes = planted_panel(2000, sensitivity, specificity)
    fit = fit_dawid_skene(votes, labels=["0", "1"])
    for j in range(5):
        rates = binary_rates(fit, j)
        # against the planted rates and against the rates this draw realised
        assert rates.sensitivity == pytest.approx(sensitivity[j], abs=0.03), j
        assert rates.specificity == pytest.approx(specificity[j], abs=0.03), j
        assert rates.sensitivity == pytest.approx(said[truth, j].mean(), abs=0.03), j
        assert rates.specificity == pytest.approx((~said[~truth, j]).mean(), abs=0.03), j
        assert rates.sensitivity_ci[0] < rates.sensitivity < rates.sensitivity_ci[1]
    labels = np.array([fit.label_of(i)[0] == "1" for i in range(2000)])
    assert (labels == truth).mean() > 0.95


def test_our_em_is_crowd_kits_dawid_skene_on_yes_no_and_on_bloom_levels():
    pytest.importorskip("crowdkit", reason="crowd-kit (the dev extra) is the reference implementation")
    from bloomqg.voting.dawid_skene import crowdkit_fit

    _, _, yes_no = planted_panel(500, [0.9, 0.7, 0.8], [0.8, 0.9, 0.6], seed=2)
    yes_no[3][1] = None  # a missing vote
    rng = np.random.default_rng(9)
    levels = ["Remember", "Apply", "Create"]
    truth = rng.integers(0, 3, 300)
    bloom = [[levels[t] if rng.random() < acc else levels[rng.integers(0, 3)] for acc in (0.8, 0.6, 0.5)] for t in truth]
    for votes, domain in ((yes_no, ["0", "1"]), (bloom, sorted(levels))):
        ours = fit_dawid_skene(votes, labels=domain)
        probas, errors = crowdkit_fit(votes)
        theirs = probas.reindex(columns=ours.labels).to_numpy()
        assert np.abs(ours.posteriors - theirs).max() < 1e-6
        for judge in range(3):
            for t, true_label in enumerate(ours.labels):
                for s, said in enumerate(ours.labels):
                    assert ours.confusion[judge][t, s] == pytest.approx(errors.loc[(judge, said), true_label], abs=1e-6)


def test_an_always_yes_judge_and_a_contrarian_judge_are_named():
    truth, said, votes = planted_panel(600, [0.9, 0.85, 0.9], [0.85, 0.9, 0.8], prevalence=0.6, seed=3)
    rng = np.random.default_rng(4)
    contrarian = np.where(rng.random(600) < 0.8, ~truth, truth)  # says the opposite 80% of the time
    votes = [row + ["1", "1" if c else "0"] for row, c in zip(votes, contrarian)]
    names = ["good-1", "good-2", "good-3", "yes-man", "contrarian"]
    measured = measure_criterion("unique", votes, names, n_resamples=20)
    by_name = dict(zip(names, measured.judges))
    assert by_name["yes-man"]["vote_rate"] == 1.0 and by_name["yes-man"]["ds_specificity"] < 0.05
    assert by_name["contrarian"]["kappa_with_others"] < 0
    assert by_name["contrarian"]["ds_sensitivity"] + by_name["contrarian"]["ds_specificity"] < 1
    flagged = suspicious_judges(names, measured.judges, binary=True)
    assert set(flagged) == {"yes-man", "contrarian"}
    assert "yes" in flagged["yes-man"] and "chance" in flagged["contrarian"]


def correlated_panel(n_items: int, shared_flip: float, seed: int):
    """Five judges erring 10% of the time independently; judges 0 and 1 also share a flip on
    ``shared_flip`` of the items (the same mistakes)."""
    rng = np.random.default_rng(seed)
    truth = rng.random(n_items) < 0.5
    shared = rng.random(n_items) < shared_flip
    votes = []
    for i in range(n_items):
        row = []
        for j in range(5):
            value = truth[i] != (rng.random() < 0.1)
            if j < 2 and shared[i]:
                value = not truth[i]
            row.append("1" if value else "0")
        votes.append(row)
    return votes


def test_effective_judges_drops_below_the_panel_size_when_two_judges_share_their_mistakes():
    names = list("abcde")
    independent = measure_criterion("unique", correlated_panel(1500, 0.0, 5), names, n_resamples=0)
    shared = measure_criterion("unique", correlated_panel(1500, 0.25, 5), names, n_resamples=0)
    assert independent.n_effective_judges > 4.6
    assert shared.n_effective_judges < 4.2


def test_cohen_kappa_worked_example():
    # the abstractors' table again: Cohen's kappa 0.7964094 (irrCAC vignette)
    pairs = [(a, b) for (a, b), count in ABSTRACTORS.items() for _ in range(count)]
    assert cohen_kappa([a for a, _ in pairs], [b for _, b in pairs]) == pytest.approx(0.7964094, abs=1e-6)


# -- the cell under Dawid–Skene ------------------------------------------------------------------


def test_vote_cell_under_dawid_skene_breaks_ties_by_judge_reliability_and_carries_posteriors():
    n = 60
    gens = generations_frame(n)
    rng = np.random.default_rng(0)
    truth = rng.random(n) < 0.5
    reliable = [bool(t) for t in truth]
    noisy = [bool(t) if rng.random() < 0.6 else not t for t in truth]
    base = {"readable": [True] * n, "answerable": [True] * n, "bloom_level": ["Apply"] * n,
            "knowledge_units": [["Stacks"]] * n}
    # judge b fails to answer on the even items: a (reliable) and c (noisy) then tie 1-1 when they differ
    judgments = [
        judgments_frame("a", gens, {**base, "unique": reliable}),
        judgments_frame("b", gens, {**base, "unique": [("FAIL" if i % 2 == 0 else reliable[i]) for i in range(n)]}),
        judgments_frame("c", gens, {**base, "unique": noisy}),
    ]
    majority, _ = vote_cell(gens, judgments, n_resamples=20)
    ds, reliability = vote_cell(gens, judgments, n_resamples=20, aggregation="dawid_skene")
    ties = majority["unique_null_reason"].eq("tie")
    assert ties.any()
    assert ds.loc[ties, "unique"].tolist() == [reliable[i] for i in ties[ties].index]
    assert ds["unique_posterior"].notna().all() and majority["unique_posterior"].isna().all()
    assert set(ds["aggregation"]) == {"dawid_skene"}
    panel = reliability[reliability["judge"].isna()].set_index("criterion")
    assert panel.loc["unique", "aggregation"] == "dawid_skene"
    assert panel.loc["knowledge_units", "aggregation"] == "majority"


def test_imported_release_votes_are_relabelled_under_dawid_skene_with_named_positions():
    from bloomqg.release.reliability import release_reliability
    from tests.support.synthetic import synthetic_study

    study = synthetic_study(n_models=1, n_items=18)
    cell = next(group for _, group in study.votes.groupby(["model", "dataset", "strategy"]))
    majority_votes, majority_rel = release_reliability(cell, n_resamples=20)
    ds_votes, ds_rel = release_reliability(cell, n_resamples=20, aggregation="dawid_skene")
    assert majority_votes["unique_posterior"].isna().all()
    judged = ds_votes["unique_votes"].map(lambda v: v is not None and len(v) >= 2)
    assert ds_votes.loc[judged, "unique_posterior"].notna().all()
    assert set(ds_votes["aggregation"]) == {"dawid_skene"}
    judges = ds_rel.loc[ds_rel["judge"].notna() & (ds_rel["criterion"] == "unique"), "judge"].tolist()
    assert judges == ["judge 1", "judge 2", "judge 3"]
    # the panel measures do not depend on the aggregation
    panel = ["alpha", "ac1", "percent_agreement", "prevalence"]
    pd_testing = pytest.importorskip("pandas.testing")
    pd_testing.assert_frame_equal(
        majority_rel.loc[majority_rel["judge"].isna(), panel].reset_index(drop=True),
        ds_rel.loc[ds_rel["judge"].isna(), panel].reset_index(drop=True),
    )


def test_a_judge_giving_one_answer_on_a_many_answer_criterion_is_flagged_with_that_reason():
    """smollm2 naming one unit for 96% of a cell's questions is no rating: flagged like a yes/no
    judge that always says yes, at the artefact warning's threshold (CONSTANT_SHARE)."""
    from bloomqg.reporting.panel import CONSTANT_SHARE as WARNING_SHARE
    from bloomqg.voting.diagnostics import CONSTANT_SHARE, suspicious_judge_reasons

    rows = [{"vote_rate": 0.4, "vote_distribution": '{"Apply": 0.4, "Create": 0.6}'},
            {"vote_rate": 0.964, "vote_distribution": '{"Apply": 0.036, "Trees|Graphs": 0.964}'}]
    flagged = suspicious_judge_reasons(["rules", "smollm2"], rows, binary=False)
    assert flagged == {"smollm2": [("one answer", "gives one answer (Trees + Graphs) to 96.4% of the questions it rates")]}
    assert WARNING_SHARE == CONSTANT_SHARE  # one threshold for the warning and the flag


def test_the_prevalence_prints_with_one_decimal_so_it_never_rounds_across_the_gate():
    from bloomqg.reporting.trust import prevalence_text

    assert prevalence_text(0.8966) == "89.7%"


def test_a_judge_giving_one_answer_throughout_does_not_count_as_an_effective_judge():
    """Its errors have no spread, so their correlation would count it as independent: with it
    and one varying judge the panel has no second judge to agree with (no effective number)."""
    panel = correlated_panel(400, 0.0, 5)
    constant = [["1", *row[:2]] for row in panel]  # judge a always says yes
    assert measure_criterion("unique", constant, list("abc"), n_resamples=0).n_effective_judges <= 2.0
    one_varies = [["1", "0", row[0]] for row in panel]
    assert measure_criterion("unique", one_varies, list("abc"), n_resamples=0).n_effective_judges is None
