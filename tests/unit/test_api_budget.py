"""The spend ledger, the budget and the cost estimate (pure parts, no server)."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from bloomqg.api.budget import (
    Budget,
    SpendLedger,
    estimate_prompt_tokens,
)
from bloomqg.api.cache import CachedResponse, CallCache, call_cache_key
from bloomqg.inputs.api_settings import ClientSettings
from bloomqg.api.estimate import Calibration, calibrations, estimate_calls, format_estimate, shown_answer_tokens
from bloomqg.inputs.chat import ChatRequest, DecodingParams, decoding_params
from bloomqg.inputs.specs import study_spec, unpriced_caps, with_study_budget
from bloomqg.store.config_schema import ConfigError

PARAMS = DecodingParams(temperature=0.0, do_sample=False, max_new_tokens=100, seed=1)


def _record(ledger: SpendLedger, cost: float, *, model: str = "m", estimate: int = 100, prompt: int = 80,
            completion: int = 20) -> None:
    ledger.record(key="k" * 64, model=model, mode="sync", prompt_tokens=prompt, completion_tokens=completion,
                  cost_usd=cost, prompt_estimate=estimate)


def test_prompt_estimate_is_characters_over_four_plus_chat_framing() -> None:
    messages = [{"role": "system", "content": "x" * 40}, {"role": "user", "content": "y" * 41}]
    assert estimate_prompt_tokens(messages) == 21 + 2 * 3 + 3


def _append_from_process(path: str) -> None:
    ledger = SpendLedger(path)
    for _ in range(200):
        _record(ledger, 0.001)


def test_spend_ledger_is_shared_by_processes_and_read_incrementally(tmp_path: Path) -> None:
    path = tmp_path / "spend.jsonl"
    reader = SpendLedger(path)
    assert reader.total() == 0.0
    processes = [multiprocessing.Process(target=_append_from_process, args=(str(path),)) for _ in range(3)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=60)
    assert reader.total() == pytest.approx(0.6)
    lines = path.read_bytes().splitlines()
    assert len(lines) == 600 and all(json.loads(line)["cost_usd"] == 0.001 for line in lines)
    _record(SpendLedger(path), 0.5)
    assert reader.total() == pytest.approx(1.1), "only the new line is read"


def test_a_torn_line_is_skipped_not_counted(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "spend.jsonl"
    _record(SpendLedger(path), 0.25)
    with open(path, "ab") as handle:
        handle.write(b'{"cost_usd": oops}\n')
    assert SpendLedger(path).total() == pytest.approx(0.25)
    assert len(SpendLedger(path).entries()) == 1 and "not a spend record" in caplog.text


def test_budget_refuses_past_the_cap_and_stays_stopped(tmp_path: Path) -> None:
    ledger = SpendLedger(tmp_path / "spend.jsonl")
    _record(ledger, 0.6)
    budget = Budget(1.0, ledger)
    assert budget.try_reserve(0.3) and budget.reserved == pytest.approx(0.3)
    assert not budget.try_reserve(0.2), "0.6 spent + 0.3 held + 0.2 > 1.0"
    budget.release(0.3)
    assert not budget.try_reserve(0.01), "once stopped, no call squeezes in"
    assert budget.spent() == pytest.approx(0.6)


def test_study_budget_applies_to_api_entries_that_set_none() -> None:
    assert with_study_budget({"backend": "openai", "model": "m"}, 5.0)["budget_usd"] == 5.0
    assert with_study_budget({"backend": "openai", "model": "m", "budget_usd": 1.0}, 5.0)["budget_usd"] == 1.0
    assert "budget_usd" not in with_study_budget({"backend": "hf", "model": "m"}, 5.0)
    config = {
        "budget_usd": 3.0,
        "models": {"gen": {"backend": "openai", "model": "g"}, "local": {"backend": "hf", "model": "x"}},
        "judges": {"j": {"backend": "openai", "model": "j", "price_per_million_input": 1, "price_per_million_output": 2}},
    }
    assert unpriced_caps(config) == ["models.gen"]
    with pytest.raises(ConfigError, match=r"budget_usd is set but models\.gen give no price_per_million_input/output"):
        study_spec({"seed": 1, **config})  # its client settings could not count the spend
    config["models"]["gen"].update(price_per_million_input=1, price_per_million_output=2)
    from bloomqg.api.estimate import entry_caps

    config["judges"]["j"]["budget_usd"] = 1.5
    assert entry_caps(study_spec({"seed": 1, **config})) == {"budget_usd": 3.0, "judges.j.budget_usd": 1.5}
    with pytest.raises(ValueError, match="budget_usd.*needs price_per_million_input"):
        ClientSettings(model="m", budget_usd=1.0)



def test_an_entrys_settings_are_resolved_once_where_the_config_is_read() -> None:
    """issue 51: the estimate, the probes and the clients take these; none re-reads the entry."""
    prices = {"price_per_million_input": 1, "price_per_million_output": 2}
    config = {"seed": 4, "budget_usd": 2.0,
              "models": {"gen": {"backend": "openai", "model": "g", "generation": {"temperature": 0.0}, **prices},
                         "local": {"backend": "hf", "model": "x"}},
              "judges": {"j": {"backend": "openai", "model": "j", "budget_usd": 0.5, **prices},
                         "rules": {"backend": "rules"}}}
    study = study_spec(config)
    gen, judge, local = study.models["gen"], study.judges["j"], study.models["local"]
    assert gen.client == ClientSettings(model="g", budget_usd=2.0, **prices)  # the study's cap
    assert judge.api_client == ClientSettings(model="j", budget_usd=0.5, **prices)  # its own
    assert local.client is None and study.judges["rules"].client is None
    with pytest.raises(ValueError, match="models.local: backend 'hf' is not a paid API"):
        local.api_client
    assert gen.decoding == decoding_params({"temperature": 0.0}, 4) and gen.decoding.seed == 4
    assert judge.decoding == decoding_params(None, 4)  # the schema's defaults
    config["models"]["gen"]["generation"] = {"temprature": 0.5}
    with pytest.raises(ValueError, match=r"models\.gen\.generation: unknown key\(s\) 'temprature'"):
        study_spec(config)

def test_batch_prices_default_to_the_sync_prices() -> None:
    sync_only = ClientSettings(model="m", price_per_million_input=2.0, price_per_million_output=8.0)
    assert sync_only.cost(1000, 100, batch=True) == sync_only.cost(1000, 100, batch=False) == pytest.approx(0.0028)
    halved = ClientSettings(model="m", price_per_million_input=2.0, price_per_million_output=8.0,
                            batch_price_per_million_input=1.0, batch_price_per_million_output=4.0)
    assert halved.cost(1000, 100, batch=True) == pytest.approx(0.0014)
    assert ClientSettings(model="m").cost(1000, 100, batch=False) is None


def _requests(n: int, with_example: bool) -> list[ChatRequest]:
    example = ({"role": "user", "content": "Example?"}, {"role": "assistant", "content": "z" * 80}) if with_example else ()
    return [ChatRequest(f"r{i}", (*example, {"role": "user", "content": f"question {i:03d} " + "w" * 87})) for i in range(n)]


def test_estimate_counts_cache_hits_and_uses_the_example_answer(tmp_path: Path) -> None:
    settings = ClientSettings(model="judge", price_per_million_input=1.0, price_per_million_output=10.0)
    requests = _requests(5, with_example=True)
    cache = CallCache(tmp_path)
    first = requests[0]
    cache.put(call_cache_key("judge", first.messages, temperature=0.0, top_p=1.0, max_tokens=100, seed=1),
              CachedResponse("ok", "stop", 50, 10))
    row = estimate_calls(settings, requests, PARAMS, cache, None)
    assert (row["requests"], row["cached"], row["to_call"]) == (5, 1, 4)
    assert shown_answer_tokens(first.messages) == 20
    assert row["completion_tokens"] == 4 * 20
    assert row["prompt_tokens"] == 4 * estimate_prompt_tokens(first.messages)
    assert row["cost_usd"] == pytest.approx((row["prompt_tokens"] * 1.0 + row["completion_tokens"] * 10.0) / 1e6)
    assert "example answer" in row["basis"]

    without = estimate_calls(settings, _requests(3, with_example=False), PARAMS, None, None)
    assert without["completion_tokens"] == 3 * 100 and "upper bound" in without["basis"]


def test_the_spend_ledger_calibrates_the_estimate(tmp_path: Path) -> None:
    ledger = SpendLedger(tmp_path / "spend.jsonl")
    for _ in range(4):
        _record(ledger, 0.001, model="judge", estimate=100, prompt=80, completion=30)
    _record(ledger, 0.001, model="other", estimate=100, prompt=120, completion=5)
    measured = calibrations(ledger)
    assert measured["judge"] == Calibration(prompt_ratio=0.8, completion_mean=30.0, calls=4)
    settings = ClientSettings(model="judge", price_per_million_input=1.0, price_per_million_output=10.0, mode="batch")
    requests = _requests(2, with_example=False)
    row = estimate_calls(settings, requests, PARAMS, None, measured["judge"])
    assert row["prompt_tokens"] == round(2 * estimate_prompt_tokens(requests[0].messages) * 0.8)
    assert row["completion_tokens"] == 60 and row["mode"] == "batch" and "calibrated on 4" in row["basis"]


def test_format_estimate_totals_per_judge() -> None:
    import pandas as pd

    rows = [
        {"role": "judge", "name": "j", "model": "m", "mode": "batch", "dataset": d, "strategy": "fgp",
         "requests": 10, "cached": 2, "to_call": 8, "prompt_tokens": 800, "completion_tokens": 80,
         "cost_usd": 0.001, "basis": "characters/4"}
        for d in ("cs", "math")
    ]
    text = format_estimate(pd.DataFrame(rows), {"budget_usd": 5.0}, spent_usd=1.25)
    assert "16 calls to make, about $0.002000" in text
    assert "already spent: $1.2500 in the spend ledger" in text
    assert ("budget_usd $5.0000: spent $1.2500 (spend.jsonl), remaining $3.7500, this estimate $0.0020: "
            "fits ($3.7480 to spare).") in text
    assert text.count("\njudge") == 1


def test_format_estimate_says_plainly_when_the_estimate_does_not_fit() -> None:
    import pandas as pd

    rows = [{"role": "judge", "name": "j", "model": "m", "mode": "sync", "dataset": "cs", "strategy": "fgp",
             "requests": 10, "cached": 0, "to_call": 10, "prompt_tokens": 800, "completion_tokens": 80,
             "cost_usd": 0.04, "basis": "characters/4"}]
    text = format_estimate(pd.DataFrame(rows), {"budget_usd": 0.05, "judges.j.budget_usd": 1.0}, spent_usd=0.03)
    assert ("budget_usd $0.0500: spent $0.0300 (spend.jsonl), remaining $0.0200, this estimate $0.0400: "
            "DOES NOT FIT. The run will stop at the cap after about 50% of the estimated spend; raise "
            "budget_usd to at least $0.0700 to finish") in text
    assert "judges.j.budget_usd $1.0000: spent $0.0300" in text and "fits ($0.9300 to spare)" in text
    assert "no budget_usd cap is set" in format_estimate(pd.DataFrame(rows))
