"""The report's cost ledger over every stage: the judges' bias probes counted, a call two jobs
of one run share counted once under its first stage and never as "paid earlier"."""

from __future__ import annotations

import pandas as pd
import pytest

from bloomqg.api.ledger import study_ledger
from bloomqg.store.frames import CRITERIA
from bloomqg.reporting.provenance_view import ledger_view


def judgments(rows: list[tuple[str, str, bool, float | None]]) -> pd.DataFrame:
    """(prompt_id, cache_key, cached, cost) per call, five criterion rows each."""
    records = []
    for pid, key, cached, cost in rows:
        for position, criterion in enumerate(CRITERIA):
            records.append({"prompt_id": pid, "judge": "gpt", "model": "m", "dataset": "cs", "strategy": "fgp",
                            "criterion": criterion, "raw_text": "{}", "cached": cached,
                            "n_prompt_tokens": 100 if position == 0 else None,
                            "n_completion_tokens": 10 if position == 0 else None,
                            "cost_usd": cost if position == 0 else None, "cache_key": key})
    return pd.DataFrame(records)


def probes(rows: list[tuple[str, str, str, bool, float | None]]) -> pd.DataFrame:
    """(prompt_id, probe, cache_key, cached, cost) per call, five criterion rows each."""
    records = []
    for pid, probe, key, cached, cost in rows:
        for position, criterion in enumerate(CRITERIA):
            records.append({"prompt_id": pid, "judge": "gpt", "model": "m", "dataset": "cs", "strategy": "fgp",
                            "probe": probe, "criterion": criterion, "status": "ok",
                            "level_order": ["a", "b"], "unit_order": ["u"] if probe != "order" else ["u", "v"],
                            "cached": cached, "cost_usd": cost if position == 0 else None,
                            "n_prompt_tokens": 100 if position == 0 else None,
                            "n_completion_tokens": 10 if position == 0 else None, "cache_key": key})
    return pd.DataFrame(records)


def test_probe_spend_is_in_the_ledger_and_a_shared_base_call_is_paid_once_under_its_judge():
    # The probe job sent the base call of q1 first; judge_questions waited and read it (cached,
    # with the spend ledger's cost). q2's base call the judge sent itself.
    judged = judgments([("q1", "k1", True, 0.01), ("q2", "k2", False, 0.01)])
    probed = probes([("q1", "base", "k1", False, 0.01), ("q2", "base", "k2", True, 0.01),
                     ("q1", "repeat", "k3", False, 0.02), ("q2", "repeat", "k4", False, 0.02),
                     ("q1", "order", "k5", False, 0.03), ("q2", "order", "k6", False, 0.03)])
    ledger = study_ledger(judgments=judged, probes=probed).set_index("stage")
    judging, bias = ledger.loc["judging"], ledger.loc["judge_bias"]
    assert judging["requests"] == 2 and judging["paid_earlier"] == 0 and judging["cost_usd"] == pytest.approx(0.02)
    assert bias["requests"] == 4 and bias["cached"] == 2 and bias["paid_earlier"] == 0
    assert bias["cost_usd"] == pytest.approx(0.10)  # the repeat and order probes' calls
    assert ledger["cost_usd"].sum() == pytest.approx(0.12)  # every distinct key once: the spend ledger's sum
    assert ledger["prompt_tokens"].sum() == 600
    view = ledger_view(ledger.reset_index())
    assert [row["judge"] for row in view["per_judge"]] == ["gpt", "gpt (bias probes)"]
    assert view["total"]["cost_usd"] == pytest.approx(0.12)
    assert view["probes"]  # the page says the probes have lines of their own only where they ran
    assert not ledger_view(ledger.reset_index().query("stage != 'judge_bias'"))["probes"]


def test_after_a_budget_stop_a_cached_answer_paid_by_the_stopped_attempt_is_paid_earlier():
    # The first attempt paid k1 and stopped; the rerun read k1 from the cache and sent k2.
    judged = judgments([("q1", "k1", True, 0.01), ("q2", "k2", False, 0.01)])
    probed = probes([("q1", "base", "k1", True, 0.01), ("q2", "base", "k2", True, 0.01)])
    ledger = study_ledger(judgments=judged, probes=probed).set_index("stage")
    assert ledger.loc["judging", "paid_earlier"] == 1 and ledger.loc["judging", "requests"] == 1
    assert ledger.loc["judging", "cost_usd"] == pytest.approx(0.02)
    assert ledger.loc["judge_bias", "paid_earlier"] == 0 and ledger.loc["judge_bias", "cost_usd"] == 0


def test_offline_probes_make_no_calls():
    probed = probes([("q1", "base", None, None, None)])
    ledger = study_ledger(probes=probed)
    assert ledger["requests"].sum() == 0 and ledger["cost_usd"].sum() == 0


def test_a_prompt_whose_reply_held_no_question_is_not_counted_as_asked():
    judged = judgments([("q1", "k1", False, 0.01), ("q2", "k2", False, 0.01), ("q3", None, None, None)])
    judged["status"] = "ok"
    judged.loc[judged["prompt_id"] == "q3", ["status", "raw_text"]] = ["no_question", None]
    ledger = study_ledger(judgments=judged)
    assert (int(ledger["questions"].sum()), int(ledger["requests"].sum())) == (2, 2)
