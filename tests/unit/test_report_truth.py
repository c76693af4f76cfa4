"""What a reader sees is true (issue 32): an undefined α marked as a failed gate is, votes by
judge name, results by construction said to be so, every rate with its n."""

from __future__ import annotations

import math
import re

import pandas as pd

from bloomqg.store.frames import RELIABILITY
from bloomqg.voting.agreement import gate_decision
from bloomqg.reporting.examples import named_votes, panel_judges, question_examples
from bloomqg.reporting.trust import coefficient_rows
from tests.support.synthetic import synthetic_study


def panel_row(**values) -> dict:
    """A panel row whose gate columns are what vote_judgments records (gate_decision's)."""
    row = dict.fromkeys(RELIABILITY.names)
    row.update(model="m", dataset="cs", strategy="fgp", criterion="readable", judge=None, n_items=30,
               gate_threshold=0.7, alpha=0.9, ac1=0.9, prevalence=0.5)
    row.update(values)
    decision = gate_decision("alpha", row["alpha"], row["ac1"], row["prevalence"], 0.7, n_items=row["n_items"])
    row.update(gate_coefficient=decision.coefficient, gate_status=decision.status, gate_reason=decision.why or None,
               gate_passed=decision.passed)
    return row


def test_an_undefined_alpha_is_marked_like_a_failed_gate_with_the_reason():
    reliability = pd.DataFrame([panel_row(), panel_row(criterion="unique", alpha=math.nan, ac1=math.nan)])
    measured, undefined = coefficient_rows(reliability)
    assert not measured["failed"] and measured["gate"] == "reliable (α ≥ 0.70)"
    assert undefined["failed"], "an α that was never measured must not pass silently"
    assert undefined["gate"] == "not measured (alpha undefined)"
    assert undefined["alpha"] == "undefined (no variance)"
    every_vote_the_same = coefficient_rows(pd.DataFrame([panel_row(alpha=math.nan, ac1=1.0, prevalence=1.0)]))[0]
    assert every_vote_the_same["failed"] and every_vote_the_same["gate"] == "not measured (every vote the same)"


def test_judges_that_disagree_below_chance_are_labelled_with_that_reason():
    """Judges unreliable because α's interval lies below 0: the table says why, not "α below 0.70"
    (reading 36)."""
    from bloomqg.voting.agreement import BELOW_CHANCE

    row = panel_row(alpha=-0.22, ac1=0.43, prevalence=0.80)
    decision = gate_decision("alpha", -0.22, 0.43, 0.80, 0.7, n_items=28, n_varying_judges=2,
                             alpha_ci_low=-0.38, alpha_ci_high=-0.10)
    assert decision.why == BELOW_CHANCE
    row.update(gate_coefficient=decision.coefficient, gate_status=decision.status, gate_reason=decision.why,
               gate_passed=False)
    [shown] = coefficient_rows(pd.DataFrame([row]))
    assert shown["failed"] and shown["gate"] == "unreliable (below chance)"
    assert coefficient_rows(pd.DataFrame([panel_row(alpha=0.3)]))[0]["gate"] == "unreliable (α below 0.70)"


def test_example_votes_name_their_judges():
    assert named_votes(["1", None, "1"], ["rules", "minilm", "smollm2"], "readable") == \
        "rules: yes, minilm: no vote, smollm2: yes"
    assert named_votes(["Apply", "Create"], ["a", "b"], "bloom_level") == "a: Apply, b: Create"
    study = synthetic_study(n_models=1, n_items=6)
    judges = panel_judges(study.reliability)
    examples = question_examples(study.votes, study.generations, judges=judges)
    shown = examples[0]["levels"][0]["examples"][0]["votes"]["readable"]
    names = next(iter(judges.values()))
    assert shown.startswith(f"{names[0]}: ") and "None" not in shown and ", 1" not in shown


def test_catcons_n_is_one_number_in_the_figure_2_text_the_figure_and_table_5():
    import re

    from bloomqg.metrics.cell import score_cell
    from bloomqg.metrics.transitions import transition_counts
    from bloomqg.reporting.readings import transition_summary

    study = synthetic_study(n_models=2, n_items=16)  # cs holds Uncategorized originals
    votes = study.votes
    metrics = pd.concat([score_cell(cell, None, n_resamples=20) for _, cell in
                         votes.groupby(["model", "dataset", "strategy"], sort=False)], ignore_index=True)
    sentence = transition_summary(votes)
    # strategies are compared on the datasets they all ran: math (FGP only) is said apart
    both = [d for d, s in votes.groupby("dataset")["strategy"].agg(set).items() if s == set(votes["strategy"])]
    assert "Drawn but not compared (only some strategies ran there, a difference of design): math (FGP only)" in sentence
    votes, metrics = votes[votes["dataset"].isin(both)], metrics[metrics["dataset"].isin(both)]
    for strategy in dict.fromkeys(votes["strategy"]):
        table_n = int(metrics.loc[(metrics["metric"] == "catcons") & (metrics["strategy"] == strategy), "n"].sum())
        figure_n = sum(int(transition_counts(cell, kind="judged")["count"].sum())
                       for _, cell in votes[votes["strategy"] == strategy].groupby(["model", "dataset"]))
        label = {"cot": "CoT", "fgp": "FGP"}[strategy]
        said = int(re.search(rf"under {label}, of n = (\d+) useful", sentence, re.IGNORECASE).group(1))
        assert said == figure_n == table_n, (strategy, said, figure_n, table_n)


def test_every_rate_in_a_table_carries_its_n_and_what_was_excluded():
    from bloomqg.reporting.tables.builders import metric_table

    study = synthetic_study(n_models=1, n_items=6)
    table = metric_table(study.metrics, ("usability", "catcons", "n_generated"), name="t", caption="c")
    rates = [cell.text for row in table.rows for cell in row[1:] if cell.source and cell.source[3] != "n_generated"]
    assert rates and all(re.search(r"\(n=\d+( of \d+)?\)$", text) for text in rates), rates
    assert any("excluded" in note for note in table.notes)


def test_readings_state_the_n_of_the_rates_they_quote():
    from bloomqg.reporting.readings import metric_range, strategy_effect

    study = synthetic_study(n_models=2, n_items=6)
    assert re.search(r"\(\S+, .+, n = \d+\) to .+, n = \d+\)", metric_range(study.metrics, "catcons"))
    assert "over n = " in strategy_effect(study.metrics, "catcons")


def test_a_criterion_with_a_constant_or_abstaining_judge_is_said_to_hold_by_construction():
    from bloomqg.reporting.construction import mark_by_construction
    from bloomqg.voting.construction import construction_flags

    n = 6
    votes = pd.DataFrame({
        "model": "m", "dataset": "cs", "strategy": "fgp", "new_question": ["q"] * n,
        "readable_votes": [["1", None, "1" if i % 3 else "0"] for i in range(n)],  # rules yes; minilm abstains
        "unique_votes": [["1" if i % 2 else "0", "0" if i % 3 else "1", "1"] for i in range(n)],
    })
    flags = construction_flags(votes, {("m", "cs", "fgp"): ["rules", "minilm", "smollm2"]})
    assert [(f.criterion, f.reasons) for f in flags] == [
        ("unique", ("smollm2 always says yes",)),
        ("readable", ("rules always says yes", "minilm abstains on 6 of 6")),
    ]
    tables = [{"rows": [["m", "100.00 (n=6)", "50.00 (n=6)", "40.00 (n=6)"]], "notes": [],
               "sources": [[None, ["m", "cs", "fgp", "readable"], ["m", "cs", "fgp", "answerable"],
                            ["m", "cs", "fgp", "usability"]]]}]
    notes = mark_by_construction(tables, flags)
    # readable: rules always says yes and the only other vote (smollm2's) is at most half: no item
    # can have a "no" majority, so 100 could not have been otherwise. unique: two free judges of
    # three can outvote smollm2, so usability (which reads unique) is not marked.
    assert [f.decided for f in flags] == [False, True]
    assert tables[0]["rows"][0] == ["m", "100.00 (n=6) ‡", "50.00 (n=6)", "40.00 (n=6)"]
    assert tables[0]["notes"] == []  # the notes are the section's, once
    assert notes["marked"] == ["Readable in m · cs · FGP: rules always says yes; minilm abstains on 6 of 6, "
                               "and smollm2 can at most tie rules on every question"]
    assert notes["uninformative"] == ["Unique in m · cs · FGP: smollm2 always says yes, but on 6 of 6 questions "
                                      "rules and minilm cast most of the valid votes, so could have decided them"]
    assert "no question could have changed it" in notes["rule"]


def test_a_mark_and_a_note_with_the_same_judges_say_what_tells_them_apart():
    """The same constant and abstaining judges decide a criterion in one cell and not in another,
    where the constant judge missed a vote and the third judge's was the only one: the lines must
    differ by that fact, never read alike in the ‡ list and the note list."""
    from bloomqg.reporting.construction import mark_by_construction
    from bloomqg.voting.construction import construction_flags

    judges = ["rules", "minilm", "smollm2"]
    votes = pd.DataFrame({
        "model": "m", "dataset": ["cs"] * 4 + ["social"] * 4, "strategy": "cot", "new_question": ["q"] * 8,
        "readable_votes": [["1" if i % 2 else "0", None, "1"] for i in range(4)]
        + [["1" if i % 2 else "0", None, None if i == 0 else "1"] for i in range(4)],
    })
    flags = construction_flags(votes, {("m", d, "cot"): judges for d in ("cs", "social")})
    assert [f.reasons for f in flags] == [("minilm abstains on 4 of 4", "smollm2 always says yes")] * 2
    assert [(f.decided, f.n_outvotable) for f in flags] == [(True, 0), (False, 1)]
    tables = [{"rows": [["m", "50.00", "75.00"]], "notes": [],
               "sources": [[None, ["m", "cs", "cot", "readable"], ["m", "social", "cot", "readable"]]]}]
    notes = mark_by_construction(tables, flags)
    assert notes["marked"] == ["Readable in m · cs · CoT: minilm abstains on 4 of 4; smollm2 always says yes, and "
                               "rules can at most tie smollm2 on every question"]
    assert notes["uninformative"] == ["Readable in m · social · CoT: minilm abstains on 4 of 4; smollm2 always says "
                                      "yes, but on 1 of 4 questions rules casts most of the valid votes, so could "
                                      "have decided them"]
    # only rules varies in either cell: whatever agreement the gate reads there is the panel's make-up
    assert all(f.agreement_by_construction and f.varying == ("rules",) for f in flags)


def test_an_api_generator_below_min_answer_rate_fails_naming_the_cause_and_drops_its_checkpoint(tmp_path):
    import pytest

    from bloomqg.inputs.chat import DecodingParams
    from bloomqg.generation.stage import TooFewGenerationsError, generate_questions
    from tests.unit.test_hf_batches import prompts_frame
    from tests.unit.test_judges_stage import CannedGenerator as Canned

    class CannedGenerator(Canned):  # one batch, checkpointed as a real generator does
        def complete(self, requests, params, on_batch=None):
            out = super().complete(requests, params)
            if on_batch is not None:
                on_batch(out)
            return out

    answer = '{"new_question": "Which stack operation removes the top element?"}'
    closed_port = CannedGenerator([None, None, None, answer])  # three of four calls fail
    checkpoint, out = tmp_path / "ckpt.jsonl", tmp_path / "out.parquet"
    with pytest.raises(TooFewGenerationsError, match=r"'api-gen': 1 of 4 prompts answered, below min_answer_rate "
                                                     r"0.5 \(3 × HTTP 500\)\. Check the model's endpoint"):
        generate_questions(prompts_frame(4), "api-gen", closed_port, DecodingParams(max_new_tokens=32),
                           knowledge_units=["Stack"], out_path=out, checkpoint_path=checkpoint, min_answer_rate=0.5)
    assert not out.exists() and not checkpoint.exists(), "a resume must send the failed calls again"
    kept = generate_questions(prompts_frame(4), "api-gen", CannedGenerator([None, answer]), DecodingParams(max_new_tokens=32),
                              knowledge_units=["Stack"], out_path=out, checkpoint_path=checkpoint, min_answer_rate=0.5)
    assert (kept["parse_status"] == "error").sum() == 2  # at the floor: the errors are kept


def test_the_overview_names_every_judge_and_generator_with_failed_calls():
    from bloomqg.store.frames import CRITERIA
    from bloomqg.reporting.provenance_view import call_failures

    rows = []
    for judge, failing in (("gpt", 2), ("rules", 0), ("local", 1)):
        for i in range(4):
            for criterion in CRITERIA:
                error = i < failing
                rows.append({"judge": judge, "model": "m", "dataset": "cs", "strategy": "fgp", "prompt_id": f"p{i}",
                             "criterion": criterion, "status": "error" if error else "ok",
                             "reason": "connection refused" if error else None})
    generations = pd.DataFrame({"model": ["m"] * 3, "parse_status": ["ok", "error", "failed"],
                                "parse_error": [None, "HTTP 500", "no JSON"]})
    assert call_failures(pd.DataFrame(rows), generations) == [
        {"who": "judge gpt", "failed": 2, "total": 4, "cause": "connection refused"},
        {"who": "judge local", "failed": 1, "total": 4, "cause": "connection refused"},
        {"who": "generator m", "failed": 1, "total": 3, "cause": "HTTP 500"},
    ]


def test_the_gate_summary_does_not_call_an_undefined_alpha_a_pass():
    from bloomqg.reporting.readings import gate_summary

    reliability = pd.DataFrame([panel_row(gate_action="flag"),
                                panel_row(criterion="unique", alpha=math.nan, ac1=math.nan, gate_action="flag")])
    effect = gate_summary(reliability)["effect"]
    assert effect.startswith("Of 2 criterion × cell agreements, 1 reliable, 0 unreliable and 1 not measured")
    assert "1 in 1 cell are flagged (unreliable, or agreement not measured" in effect
    failures = gate_summary(reliability)["failures"]
    assert [(f["criterion"], f["undefined"]) for f in failures] == [("Unique", True)]


def test_a_judge_that_abstains_on_most_items_and_says_one_thing_elsewhere_is_constant():
    """minilm says Apply to every question, smollm2 abstains on most and says Apply on the rest:
    both can only add to Apply, so rules alone cannot outvote them and the level is decided."""
    from bloomqg.voting.construction import construction_flags

    votes = pd.DataFrame({
        "model": "m", "dataset": "math", "strategy": "fgp", "new_question": ["q"] * 6,
        "bloom_level_votes": [[level, "Apply", "Apply" if i < 2 else None]
                              for i, level in enumerate(["Remember", "Analyze", "Create", "Apply", "Evaluate", "Apply"])],
    })
    [flag] = construction_flags(votes, {("m", "math", "fgp"): ["rules", "minilm", "smollm2"]})
    assert flag.reasons == ("minilm always says Apply", "smollm2 abstains on 4 of 6 and says Apply on the rest")
    assert flag.decided and flag.n_outvotable == 0 and flag.varying == ("rules",)
    assert flag.always == ("minilm always says Apply",)  # the abstaining smollm2 votes on too few to count


def test_a_panel_variant_over_other_pairs_says_how_many_and_one_model_has_no_model_pairs():
    import json

    from bloomqg.metrics.robustness import ROBUSTNESS_COLUMNS, STRATEGY_COMPARISON
    from bloomqg.reporting.trust import robustness_rows, robustness_summary

    row = dict.fromkeys(ROBUSTNESS_COLUMNS)
    row.update(comparison=STRATEGY_COMPARISON, dataset="cs", strategy="cot", strategy_b="fgp", model="m",
               metric="usability", n_pairs=22, value_a=54.55, value_b=86.36, value_a_dawid_skene=61.11,
               value_b_dawid_skene=63.89, diff=31.82, p_value=0.039, verdict="within judge noise",
               variants=json.dumps({"dawid_skene": [2.78, 1.0, 36], "without rules": [0.0, 1.0, 22]}))
    frame = pd.DataFrame([row], columns=list(ROBUSTNESS_COLUMNS))
    [shown] = robustness_rows(frame)
    assert shown["dawid_skene"] == "61.11 → 63.89 (36 pairs)"
    assert shown["dawid_skene_diff"] == "2.78 (p 1; 36 pairs)"
    assert shown["variants"] == ["0.00 (p 1)"]  # the majority's 22 pairs: nothing to say
    summary = robustness_summary(frame)
    assert "each strategy pair of each model on each dataset" in summary and "model pair" not in summary
    # the kind is defined where it is first met, not only in the table's closed key
    assert "1 within judge noise (not significant under the majority and some panel turns its sign" in summary
    assert "fewer than 6 pairs" not in summary  # 22 and 36 pairs
    thin = frame.assign(variants=json.dumps({"dawid_skene": [2.78, 1.0, 36], "without rules": [0.0, 1.0, 1],
                                             "without minilm": [0.0, 1.0, 2]}))
    assert ("2 of the panels compare fewer than 6 pairs (down to 1), where no difference can be significant"
            in robustness_summary(thin))


def test_figure_6_reading_says_how_many_originals_were_classified_beside_the_per_level_counts():
    from bloomqg.reporting.readings import classification_summary

    levels = ["Remember", "Understand", "Apply"]
    votes = pd.DataFrame({
        "model": "m", "dataset": "cs", "strategy": "cot",
        "original_bloom_level": levels * 2,
        "identified_bloom_level": ["Apply", None, None, "Remember", None, None],
    })
    text = classification_summary(votes)
    assert "most accurate for Remember (50% of 2) and least for Understand (0% of 2)" in text
    assert "Of these 6 originals, the model classified 2 (the figure's n) and got 1 of them right" in text
    # two datasets pooled: the reading says so, since the auxiliary table gives each dataset's n
    pooled = classification_summary(pd.concat([votes, votes.assign(dataset="social")]))
    assert "Of these 12 originals, pooled over cs and social, the model classified 4" in pooled


def test_the_overview_counts_replies_cut_off_at_the_token_limit_and_those_still_read():
    from bloomqg.reporting.report import overview

    study = synthetic_study()
    generations = pd.DataFrame({"finish_reason": ["length", "length", "stop", "imported"],
                                "new_question": ["q", None, "q", "q"], "strategy": ["fgp", "cot", "cot", "cot"]})
    counts = overview(study.metrics, study.votes, None, generations)
    assert (counts["n_replies"], counts["n_cut_off"], counts["n_cut_off_read"]) == (4, 2, 1)
    # per strategy, in the strategies' order: one cut off more often is judged on fewer finished questions
    assert [(c["label"], c["n_cut_off"], c["n_replies"]) for c in counts["cut_off_by_strategy"]] == [
        ("CoT", 1, 3), ("FGP", 1, 1)]


def test_the_cut_off_count_names_the_limit_the_generators_ran_with():
    from bloomqg.reporting.report import token_limits

    # each limit once, from the generation files' decoding; an imported file's provenance has none
    provenance = [{"decoding": {"max_new_tokens": 128}}, {"decoding": {"max_new_tokens": 500}},
                  {"decoding": {"max_new_tokens": 128}}, {"stage": "import"}]
    assert token_limits(provenance) == [128, 500]
    assert token_limits([]) == []


def test_a_decided_criterion_that_marks_no_number_is_listed_with_the_notes_saying_why():
    from bloomqg.reporting.construction import mark_by_construction
    from bloomqg.voting.construction import construction_flags

    votes = pd.DataFrame({
        "model": "m", "dataset": "math", "strategy": "fgp", "new_question": ["q"] * 4,
        "bloom_level_votes": [["Remember", "Apply", None], ["Apply", "Apply", "Apply"], [None, "Apply", None],
                              ["Create", "Apply", "Apply"]],
        "unique_votes": [["1", "0", "1"], ["0", "1", "1"], ["1", "1", "0"], ["0", "0", "1"]],
    })
    flags = construction_flags(votes, {("m", "math", "fgp"): ["rules", "minilm", "smollm2"]})
    assert [(f.criterion, f.decided) for f in flags] == [("bloom_level", True)]
    tables = [{"rows": [["m", "50.00"]], "notes": [], "sources": [[None, ["m", "math", "fgp", "catcons"]]]}]
    notes = mark_by_construction(tables, flags)
    assert tables[0]["rows"][0] == ["m", "50.00"] and notes["marked"] == []
    [line] = notes["uninformative"]
    assert line.startswith("Bloom level in m · math · FGP: minilm always says Apply") and "no number carries ‡" in line


def test_a_level_forced_to_every_originals_marks_catcons_whatever_the_other_criteria_count():
    """math's originals are all Apply and two judges can only say Apply: every question with a
    judged level keeps its original's, so CatCons is fixed (‡) although uniqueness, which picks
    the questions it counts, is not decided; one original at another level undoes it."""
    from bloomqg.reporting.construction import forced_level_warnings, mark_by_construction
    from bloomqg.voting.construction import construction_flags

    def flags_for(originals):
        votes = pd.DataFrame({
            "model": "m", "dataset": "math", "strategy": "fgp", "new_question": ["q"] * 4,
            "original_bloom_level": originals,
            "bloom_level_votes": [["Remember", "Apply", None], ["Apply", "Apply", "Apply"], [None, "Apply", None],
                                  ["Create", "Apply", "Apply"]],
            "unique_votes": [["1", "0", "1"], ["0", "1", "1"], ["1", "1", "0"], ["0", "0", "1"]],
        })
        return construction_flags(votes, {("m", "math", "fgp"): ["rules", "minilm", "smollm2"]})

    flags = flags_for(["Apply"] * 4)
    [level] = flags
    assert level.forced_to_original == "Apply"
    tables = [{"rows": [["m", "100.00", "33.33"]], "notes": [],
               "sources": [[None, ["m", "math", "fgp", "catcons"], ["m", "math", "fgp", "unique"]]]}]
    notes = mark_by_construction(tables, flags)
    assert tables[0]["rows"][0] == ["m", "100.00 ‡", "33.33"]
    [line] = notes["marked"]
    assert line.endswith("every original here is Apply, so every question with a judged level keeps its original's: "
                         "CatCons (100%) and CogShift (0) come out so whatever the other criteria count")
    [warning] = forced_level_warnings(flags)
    assert warning.startswith("in m · math · FGP every original is Apply and minilm always says Apply")

    [mixed] = flags_for(["Apply", "Apply", "Remember", "Apply"])
    assert mixed.decided and mixed.forced_to_original == ""
    assert forced_level_warnings([mixed]) == []


def test_a_judge_leaning_on_one_level_is_warned_of_for_what_it_favours():
    """smollm2 says Apply to 88% of questions: not constant (90%), but Apply wins wherever one
    other judge agrees, so CatCons favours originals at Apply; the warning says so."""
    import json

    from bloomqg.reporting.panel import judge_lines

    rows = [{"judge": "smollm2", "criterion": "bloom_level", "n_items": 50, "agreement_with_others": 0.3,
             "vote_distribution": json.dumps({"Apply": 0.88, "Remember": 0.12}), "dataset": d, "strategy": "fgp",
             "model": "m"} for d in ("cs", "social")]
    config = {"judges": {"smollm2": {"backend": "hf", "model_ref": "m"}}, "models": {"m": {"model": "x/m"}}}
    _, artefacts = judge_lines(config, pd.DataFrame(rows))
    assert artefacts == ["smollm2 (Bloom level: Apply for 88%, so CatCons favours originals at Apply)"]
    constant = [{**row, "vote_distribution": json.dumps({"Apply": 0.95, "Remember": 0.05})} for row in rows]
    assert judge_lines(config, pd.DataFrame(constant))[1] == ["smollm2 (bloom level: Apply for 95%)"]


def test_a_reading_of_values_on_flagged_votes_says_so_and_names_the_criteria():
    """A reading is read alone: where its values rest on criteria the gate did not find reliable,
    it says so after itself, naming them; where every criterion passed, it adds nothing."""
    from bloomqg.reporting.readings import gate_caveat

    metrics = pd.DataFrame([{"model": "m", "dataset": "cs", "strategy": s, "metric": "catcons", "value": 10.0, "n": 9}
                            for s in ("cot", "fgp")])

    def reliability(alpha_by_criterion: dict[str, float]) -> pd.DataFrame:
        return pd.DataFrame([{"model": "m", "dataset": "cs", "strategy": s, "criterion": c, "judge": None, "alpha": a,
                              "gate_threshold": 0.7, "gate_passed": a >= 0.7, "n_items": 30, "prevalence": 0.5}
                             for s in ("cot", "fgp") for c, a in alpha_by_criterion.items()])

    good = {"unique": 0.9, "readable": 0.9, "answerable": 0.9, "bloom_level": 0.9}
    assert gate_caveat(metrics, reliability(good), ["catcons"]) == ""
    caveat = gate_caveat(metrics, reliability({**good, "bloom_level": 0.1}), ["catcons"])
    assert caveat == " † All rest on votes the gate flagged (Bloom level): no evidence about the questions."
    # a metric whose criteria all passed is not caveated for another's failure
    assert gate_caveat(metrics.assign(metric="unique"), reliability({**good, "bloom_level": 0.1}), ["unique"]) == ""


def test_the_judges_table_gives_the_agreement_with_the_others_the_setup_gives():
    from bloomqg.reporting.facts import judge_means
    from bloomqg.reporting.tables.builders import judges_table
    from tests.support.synthetic import synthetic_reliability

    reliability = synthetic_reliability(["m"], {"cs": ["cot", "fgp"]})
    table = judges_table(reliability)
    assert table.columns[0] == "Agrees with the others %"
    means = judge_means(reliability[reliability["judge"].notna()], "agreement_with_others", ("judge", "criterion"))
    judge, criterion = means.index[0]
    row = next(r for r in table.rows if r[0].text == judge)
    assert row[1].text == f"{means[(judge, criterion)]:.1f}"


def test_provenance_names_the_code_versions_that_made_the_files():
    from bloomqg.reporting.provenance_view import code_versions

    entries = [{"git_commit": "d9e2a7d7d994361916f6968dec869e1dc03ee4f8-dirty"}, {"git_commit": "2481c439868a21ea"},
               {"git_commit": "d9e2a7d7d994361916f6968dec869e1dc03ee4f8-dirty"}, {"model": "no commit recorded"}]
    assert code_versions(entries) == ["d9e2a7d-dirty", "2481c43"]
    assert code_versions(entries[:1]) == ["d9e2a7d-dirty"]


def test_the_judges_reading_ranks_on_the_criteria_with_many_answers():
    from bloomqg.reporting.facts import judge_row_means
    from bloomqg.reporting.readings import _judge_reading

    def row(judge, criterion, agreement):
        return {"judge": judge, "criterion": criterion, "agreement_with_others": agreement}

    # rules "agrees" on yes/no beside a judge that always says yes: not a ranking of the judges
    reliability = pd.DataFrame([row("rules", "readable", 1.0), row("smollm2", "readable", 0.2),
                                row("rules", "bloom_level", 0.3), row("smollm2", "bloom_level", 0.5),
                                row("rules", "knowledge_units", 0.4), row("smollm2", "knowledge_units", 0.6)])
    means, many_only = judge_row_means(reliability)
    assert many_only and means.round(6).to_dict() == {"rules": 35.0, "smollm2": 55.0}
    assert _judge_reading(reliability) == ("On Bloom levels and units, smollm2 agreed with the others most often "
                                           "(55.0%, the mean of those rows below), rules least often (35.0%).")
    # a study of yes/no criteria only: every row, as the table has
    yes_no = reliability[reliability["criterion"] == "readable"]
    assert _judge_reading(yes_no) == ("rules agreed with the others most often (100.0%, the mean of its rows below), "
                                      "smollm2 least often (20.0%).")


def test_the_setup_says_how_each_writers_replies_were_drawn_as_its_files_record_it():
    """One sampled reply per original is a random draw a reader should know of; the phrase comes
    from what the generation files record, not from a config whose defaults the report drops."""
    from bloomqg.reporting.panel import study_setup

    metrics = pd.DataFrame({"model": ["m", "g"], "dataset": "cs", "strategy": "cot"})
    provenance = [
        {"model_name": "m", "decoding": {"do_sample": True, "temperature": 0.9},
         "response_prefill": {"enabled": True, "prefixes": {'{"question": "': 3}}},
        {"model_name": "g", "decoding": {"do_sample": False, "temperature": 0.0}},
    ]
    sampled, greedy = study_setup({}, metrics, None, provenance)["models"]
    assert sampled["draw"] == "one random draw per original, at temperature 0.9"
    assert sampled["prefill"] and not greedy["prefill"]
    assert greedy["draw"] == "one reply per original, the most likely (greedy)"
    assert study_setup({}, metrics)["models"][0]["draw"] == ""  # nothing recorded: nothing said
    # weights converted from a quantised GGUF file are said to be a compressed copy
    config = {"models": {"m": {"model": "HF/M", "gguf": {"file": "M.Q4_1.gguf"}}}}
    provenance[0]["generator"] = {"weights_kind": "converted_gguf"}
    assert study_setup(config, metrics, None, provenance)["models"][0]["weights"] == (
        "from a 4-bit compressed copy (GGUF), expanded to full precision (float32) to run")
    assert sampled["weights"] == ""
