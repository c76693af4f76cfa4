"""A cell as an Inspect log (bloomqg.reporting.inspect_logs.export), on hand-made frames: a
two-pass strategy's both answers, missing verdicts and votes, metrics with intervals. The .test
study's logs read back against its Parquet are tests/integration/test_inspect.py's."""

from __future__ import annotations

import dataclasses
import json
import math

import pandas as pd
import pytest

pytest.importorskip("inspect_ai", reason="inspect-ai is not installed (pip install -e '.[inspect]')")

from bloomqg.store.frames import CRITERIA, GENERATIONS, JUDGMENTS, METRICS, PROMPTS, VOTES  # noqa: E402
from bloomqg.reporting.inspect_logs.export import CellFrames, build_eval_log, write_cell_log  # noqa: E402

PID = "cs-0001:refine"


def frame(schema, rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows).reindex(columns=schema.names)


def cell() -> CellFrames:
    passes = [{"name": "draft", "answer_fields": []},
              {"name": "refine", "answer_fields": [],
               "messages": [{"role": "user", "content": "Improve: {previous_question}"}]}]
    item = {"prompt_id": PID, "item_id": "cs-0001", "dataset": "cs", "strategy": "refine",
            "original_question": "What is a heap?", "original_bloom_level": None,
            "original_knowledge_units": ["Heaps"]}
    prompts = frame(PROMPTS, [{**item, "exemplar_ids": [], "prompt_hash": "abc",
                               "messages_json": json.dumps([{"role": "user", "content": "Write one."}]),
                               "passes_json": json.dumps(passes)}])
    records = [{"pass": "draft", "raw_text": '{"question": "Draft?"}', "new_question": "Draft?",
                "parse_status": "ok", "parse_error": None, "finish_reason": "stop"},
               {"pass": "refine", "raw_text": '{"question": "Why are heaps trees?"}',
                "new_question": "Why are heaps trees?", "parse_status": "ok", "parse_error": None,
                "finish_reason": "stop"}]
    generations = frame(GENERATIONS, [{**item, "model": "m", "raw_text": records[1]["raw_text"],
                                       "new_question": "Why are heaps trees?", "parse_status": "ok",
                                       "finish_reason": "stop", "n_prompt_tokens": 10, "n_completion_tokens": 5,
                                       "passes_json": json.dumps(records)}])
    judgments = frame(JUDGMENTS, [
        {**item, "model": "m", "judge": "j1", "criterion": "unique", "value_bool": True, "status": "ok",
         "reason": "cosine 0.1"},
        {**item, "model": "m", "judge": "j1", "criterion": "bloom_level", "value_level": None,
         "status": "parse_failed", "reason": "no level", "raw_text": "???"},
    ])
    vote = {**item, "model": "m", "parse_status": "ok", "n_judges": 1, "alpha_gated": False, "useful": None}
    for criterion in CRITERIA:
        vote[criterion] = None
        vote[f"{criterion}_null_reason"] = "tie"
    vote.update(unique=True, unique_null_reason=None, unique_votes=["1"], unique_agreement=1.0)
    votes = frame(VOTES, [vote])
    metrics = frame(METRICS, [
        {"model": "m", "dataset": "cs", "strategy": "refine", "metric": "catcons", "value": None, "n": 0,
         "alpha_gated": False},
        {"model": "m", "dataset": "cs", "strategy": "refine", "metric": "usability", "value": 50.0,
         "ci_low": 10.0, "ci_high": 90.0, "n": 2, "alpha_gated": True},
    ])
    return CellFrames("m", "cs", "refine", generations, prompts, judgments, votes, metrics,
                      {"decoding": {"temperature": 0.5}}, "f" * 64, "2026-01-01T00:00:00+00:00")


SPEC = {"model_spec": {"backend": "hf", "model": "org/tiny"}, "decoding": {"temperature": 0.5, "max_new_tokens": 9},
        "bloomqg_version": {"version": "0.1.0", "git_commit": "0" * 40}}


def test_a_two_pass_sample_shows_both_passes_and_the_final_question():
    (sample,) = build_eval_log(cell(), **SPEC).samples
    assert [(m.role, m.text) for m in sample.messages] == [
        ("user", "Write one."), ("assistant", '{"question": "Draft?"}'),
        ("user", "Improve: Draft?"), ("assistant", '{"question": "Why are heaps trees?"}')]
    assert sample.output.completion == "Why are heaps trees?"
    assert [p["new_question"] for p in sample.metadata["passes"]] == ["Draft?", "Why are heaps trees?"]
    assert sample.input == "What is a heap?" and sample.target == "Uncategorized"


def test_a_verdict_or_vote_not_given_is_a_missing_score_with_its_status_and_every_score_has_an_answer():
    (sample,) = build_eval_log(cell(), **SPEC).samples
    assert sample.scores["j1/unique"].value is True and sample.scores["j1/unique"].explanation == "cosine 0.1"
    assert sample.scores["j1/unique"].answer == "yes"
    failed = sample.scores["j1/bloom_level"]
    # NaN: Inspect's unscored, a missing value in samples_df and the viewer, not a red "error" string
    assert math.isnan(failed.value) and failed.metadata["missing"] and failed.metadata["status"] == "parse_failed"
    assert failed.answer == "not rated (parse_failed)" and failed.explanation == "???"
    assert sample.scores["vote/unique"].value is True and sample.scores["vote/unique"].metadata["votes"] == ["1"]
    tie = sample.scores["vote/bloom_level"]
    assert math.isnan(tie.value) and tie.metadata["missing"] and tie.answer == "not rated (tie)"
    useful = sample.scores["vote/useful"]
    assert math.isnan(useful.value) and useful.answer == "no level · useful: not rated"
    # the first score is the one the viewer's sample list shows
    assert next(iter(sample.scores)) == "vote/useful"


def test_each_cell_has_its_own_task_name_and_a_valid_inspect_model_name():
    log = build_eval_log(cell(), **SPEC)
    assert log.eval.task == "bloomqg/cs/refine/m" and log.eval.model == "hf/org/tiny"
    served = {**SPEC, "model_spec": {"backend": "openai", "model": "tiny", "base_url": "http://127.0.0.1:8000/v1"}}
    assert build_eval_log(cell(), **served).eval.model == "openai-api/m/tiny"
    imported = dataclasses.replace(cell(), generation_provenance={"inspect_logs": [
        {"model": "openai-api/loopback/smollm2"}, {"model": "openai-api/loopback/smollm2"}]})
    assert build_eval_log(imported, **{**SPEC, "model_spec": {"backend": "inspect", "model": "x"}}).eval.model \
        == "openai-api/loopback/smollm2"


def test_results_carry_every_metric_with_its_interval_headline_first():
    log = build_eval_log(cell(), **SPEC)
    usability, catcons = log.results.scores
    assert usability.name == "usability" and usability.scored_samples == 2
    assert {k: m.value for k, m in usability.metrics.items()} == {"value": 50.0, "ci_low": 10.0, "ci_high": 90.0}
    assert usability.metadata["alpha_gated"] is True
    # declared, so evals_df's headline is usability's value
    assert (log.results.headline.score, log.results.headline.metric) == ("usability", "value")
    assert math.isnan(catcons.metrics["value"].value) and set(catcons.metrics) == {"value"}
    assert log.eval.model == "hf/org/tiny" and log.eval.model_generate_config.max_tokens == 9
    assert log.eval.metadata["strategy_prompt_hashes"] == ["abc"] and log.eval.packages == {"bloomqg": "0.1.0"}


def test_the_same_cell_gives_the_same_log(tmp_path):
    from inspect_ai.log import read_eval_log

    logs = [read_eval_log(str(write_cell_log(cell(), tmp_path / name, **SPEC))) for name in ("a.eval", "b.eval")]
    first, second = (log.model_dump(exclude={"location"}) for log in logs)
    assert first == second
