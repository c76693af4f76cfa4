"""Batch mode and the budget against loopback servers: the Batch API test server
(tests/support/batch_server.py) with partial errors, expired, cancelled and failed batches and a
job killed while polling; the spend cap in sync and batch mode."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bloomqg.api.batch import batch_state_files
from bloomqg.api.budget import BudgetExceededError, SpendLedger
from bloomqg.api.cache import CallCache
from bloomqg.api.client import OpenAICompatibleClient
from bloomqg.inputs.api_settings import ClientSettings
from bloomqg.api.retry import FatalAPIError
from bloomqg.inputs.chat import ChatRequest, Completion, DecodingParams
from tests.conftest import REPO
from tests.support.batch_server import BatchServer

PARAMS = DecodingParams(temperature=0.0, top_p=1.0, max_new_tokens=64, do_sample=False, seed=5)
PRICES = dict(price_per_million_input=2.0, price_per_million_output=8.0)


def _requests(n: int, tag: str = "q") -> list[ChatRequest]:
    return [
        ChatRequest(
            f"{tag}-{i}",
            (
                {"role": "system", "content": "You judge educational questions. Answer in JSON."},
                {"role": "user", "content": f"Judge question {tag}-{i}: how does a heap keep its order?"},
            ),
        )
        for i in range(n)
    ]


def _settings(server: BatchServer, **overrides) -> ClientSettings:
    values = dict(
        model="judge-model", base_url=server.base_url, api_key_env=None, mode="batch",
        batch_poll_s=0.05, batch_poll_max_s=0.2, batch_sync_below=0, batch_max_rounds=3, **PRICES,
    )
    values.update(overrides)
    return ClientSettings(**values)


def _paid_once(server: BatchServer, client: OpenAICompatibleClient, requests: list[ChatRequest]) -> None:
    keys = {client.cache_key(r, PARAMS) for r in requests}
    batch_answers = {k: v for k, v in server.answered.items() if not k.startswith("sync:")}
    assert set(batch_answers) <= keys
    assert all(count == 1 for count in server.answered.values()), server.answered


def test_partial_errors_and_an_expired_batch_end_in_one_answer_each(tmp_path: Path) -> None:
    requests = _requests(24)
    with BatchServer(step_s=0.1, item_error_rate=0.3, expire_batches=1) as server:
        client = OpenAICompatibleClient(_settings(server), cache=tmp_path)
        groups: list[list[Completion]] = []
        completions = client.complete(requests, PARAMS, on_batch=groups.append)
        assert [c.request_id for c in completions] == [r.request_id for r in requests]
        assert all(c.finish_reason == "stop" and c.text for c in completions), [c.error for c in completions]
        assert sorted(c.request_id for g in groups for c in g) == sorted(r.request_id for r in requests)
        assert {"validating", "in_progress", "finalizing", "completed", "expired"} <= set(server.statuses_seen)
        ledger = client.ledger()
        assert ledger["retries"].get("batch_expired", 0) >= 1 and ledger["retries"].get("http_500", 0) >= 1
        assert len(server.answered) == len(requests)
        _paid_once(server, client, requests)
        # The ledger charges batch prices (the sync ones here: no batch price configured).
        expected = sum(c.n_prompt_tokens * 2.0 + c.n_completion_tokens * 8.0 for c in completions) / 1e6
        assert ledger["cost_usd"] == pytest.approx(expected)
        assert SpendLedger(tmp_path / "spend.jsonl").total() == pytest.approx(expected)

        # Everything is cached like a sync answer: a rerun creates no batch.
        created = server.batches_created
        again = OpenAICompatibleClient(_settings(server), cache=tmp_path).complete(requests, PARAMS)
        assert [c.text for c in again] == [c.text for c in completions] and all(c.cached for c in again)
        assert server.batches_created == created


def test_cancelled_and_failed_batches_are_retried_and_batch_prices_apply(tmp_path: Path) -> None:
    requests = _requests(10, "cf")
    with BatchServer(step_s=0.1, cancel_batches=1, fail_batches=1) as server:
        settings = _settings(server, batch_price_per_million_input=1.0, batch_price_per_million_output=4.0)
        client = OpenAICompatibleClient(settings, cache=tmp_path)
        completions = client.complete(requests, PARAMS)
        assert all(c.finish_reason == "stop" for c in completions), [c.error for c in completions]
        assert {"cancelled", "failed", "completed"} <= set(server.statuses_seen)
        assert server.batches_created == 3
        _paid_once(server, client, requests)
        for completion in completions:
            assert completion.cost_usd == pytest.approx(
                (completion.n_prompt_tokens * 1.0 + completion.n_completion_tokens * 4.0) / 1e6
            )


def test_failures_past_the_last_round_are_recorded_and_few_go_sync(tmp_path: Path) -> None:
    with BatchServer(step_s=0.05, fail_batches=10) as server:
        client = OpenAICompatibleClient(_settings(server, batch_max_rounds=1), cache=tmp_path)
        completions = client.complete(_requests(4, "doomed"), PARAMS)
        assert all(c.finish_reason == "error" and "gave up after 2 batch tries" in c.error for c in completions)
        assert "injected validation failure" in completions[0].error
        assert len(CallCache(tmp_path)) == 0, "failures are never cached"
    with BatchServer(step_s=0.05, item_error_rate=0.5, seed=1) as server:
        client = OpenAICompatibleClient(_settings(server, batch_sync_below=50), cache=tmp_path / "sync")
        requests = _requests(12, "few")
        completions = client.complete(requests, PARAMS)
        assert all(c.finish_reason == "stop" for c in completions)
        failed_first = len(server.failed_once)
        assert failed_first >= 1 and server.sync_calls == failed_first and server.batches_created == 1


KILLED_JOB = """
import sys
sys.path.insert(0, {repo!r})
import logging
logging.basicConfig(level=logging.INFO)
from bloomqg.api.client import OpenAICompatibleClient
from bloomqg.inputs.api_settings import ClientSettings
from tests.integration.test_batch_api import PARAMS, _requests
settings = ClientSettings(**{settings!r})
OpenAICompatibleClient(settings, cache={cache!r}).complete(_requests(8, "killed"), PARAMS)
"""


def _start_killable_job(server: BatchServer, cache: Path, poll_s: float) -> tuple[subprocess.Popen, dict]:
    """KILLED_JOB against ``server`` in a process group of its own, returned with its settings
    once it has created its batch."""
    settings = dict(model="judge-model", base_url=server.base_url, api_key_env=None, mode="batch",
                    batch_poll_s=poll_s, batch_poll_max_s=0.2, **PRICES)
    script = KILLED_JOB.format(repo=str(REPO), settings=settings, cache=str(cache))
    job = subprocess.Popen([sys.executable, "-c", script], start_new_session=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while not any("batch_id" in json.loads(p.read_text()) for p in batch_state_files(cache)):
        if job.poll() is not None or time.monotonic() > deadline:
            job.kill()
            raise AssertionError(f"the job never created its batch: {job.stdout.read() if job.stdout else ''}")
        time.sleep(0.05)
    return job, settings


def _killed_job(server: BatchServer, cache: Path, poll_s: float) -> dict:
    """KILLED_JOB killed with -9 once it has created its batch; its settings."""
    job, settings = _start_killable_job(server, cache, poll_s)
    try:
        os.killpg(job.pid, signal.SIGKILL)
    finally:
        job.wait(timeout=10)
    return settings


def test_a_job_killed_while_polling_resumes_the_same_batch(tmp_path: Path) -> None:
    with BatchServer(step_s=1.5) as server:
        settings = _killed_job(server, tmp_path, poll_s=0.1)  # while it polls: the batch is still validating
        assert server.batches_created == 1 and not server.answered

        # The rerun splits differently (3 requests a batch): it still takes up the killed
        # job's batch, which holds all of its calls, instead of submitting new ones.
        client = OpenAICompatibleClient(ClientSettings(**settings, batch_max_requests=3), cache=tmp_path)
        requests = _requests(8, "killed")
        completions = client.complete(requests, PARAMS)
        assert all(c.finish_reason == "stop" for c in completions)
        assert server.batches_created == 1, "the rerun polled the killed job's batch"
        assert client.ledger()["batches_resumed"] == 1 and client.ledger()["batches_created"] == 0
        _paid_once(server, client, requests)
        assert len(server.answered) == len(requests)


def test_killed_between_upload_and_batch_creation_finds_the_batch_by_metadata(tmp_path: Path) -> None:
    with BatchServer(step_s=0.05) as server:
        settings = _settings(server)
        requests = _requests(5, "meta")
        OpenAICompatibleClient(settings, cache=tmp_path).complete(requests, PARAMS)
        # Forget the batch id as if the job died right after creating the batch, before saving it;
        # and forget the answers, as if nothing had been downloaded.
        (done_path,) = batch_state_files(tmp_path)
        assert done_path.name.endswith(".done.json")
        state = json.loads(done_path.read_text())
        del state["batch_id"], state["done"]
        done_path.unlink()
        (tmp_path / "batches" / done_path.name.replace(".done.json", ".json")).write_text(json.dumps(state))
        for path in tmp_path.glob("??/*.json"):
            path.unlink()
        client = OpenAICompatibleClient(settings, cache=tmp_path)
        completions = client.complete(requests, PARAMS)
        assert all(c.finish_reason == "stop" for c in completions)
        assert server.batches_created == 1 and client.ledger()["batches_resumed"] == 1
        _paid_once(server, client, requests)


def test_killed_while_taking_results_finishes_from_the_same_batch(tmp_path: Path) -> None:
    """Killed after caching part of a finished batch's answers: the rest come from that batch's
    output, not from a new batch of the calls still missing."""
    with BatchServer(step_s=0.05) as server:
        settings = _settings(server)
        requests = _requests(6, "half")
        first = OpenAICompatibleClient(settings, cache=tmp_path).complete(requests, PARAMS)
        (done_path,) = batch_state_files(tmp_path)
        state = json.loads(done_path.read_text())
        del state["done"]
        done_path.unlink()
        (tmp_path / "batches" / done_path.name.replace(".done.json", ".json")).write_text(json.dumps(state))
        client = OpenAICompatibleClient(settings, cache=tmp_path)
        for request in requests[:3]:
            CallCache(tmp_path).path_for(client.cache_key(request, PARAMS)).unlink()
        again = client.complete(requests, PARAMS)
        assert [c.text for c in again] == [c.text for c in first]
        assert [c.cached for c in again] == [False] * 3 + [True] * 3
        assert server.batches_created == 1 and client.ledger()["batches_resumed"] == 1
        _paid_once(server, client, requests)
        spent = SpendLedger(tmp_path / "spend.jsonl").entries()
        assert len(spent) == len(requests), "answers taken again are recorded once"


SHARED_JOB = """
import sys
sys.path.insert(0, {repo!r})
from bloomqg.api.client import OpenAICompatibleClient
from bloomqg.inputs.api_settings import ClientSettings
from tests.integration.test_batch_api import PARAMS, _requests
done = OpenAICompatibleClient(ClientSettings(**{settings!r}), cache={cache!r}).complete(_requests(6, "shared"), PARAMS)
assert all(c.finish_reason == "stop" for c in done)
"""


def test_calls_two_batch_jobs_need_at_once_are_paid_once(tmp_path: Path) -> None:
    """Another process submits six calls while its upload is still on the wire; this process
    then needs those six and two more (a judge's job and its bias probes, two studies sharing a
    cache). It waits for the first job's batch instead of submitting the six again, reads their
    answers from the cache, and pays for its two alone; every call is answered once."""
    with BatchServer(step_s=0.3, upload_delay_s=1.5) as server:
        settings = dict(model="judge-model", base_url=server.base_url, api_key_env=None, mode="batch",
                        batch_poll_s=0.05, batch_poll_max_s=0.2, **PRICES)
        script = SHARED_JOB.format(repo=str(REPO), settings=settings, cache=str(tmp_path))
        first = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 60
            while server.uploads_started < 1:  # the first job's file is on the wire, no state saved yet
                assert first.poll() is None, first.stdout.read() if first.stdout else ""
                assert time.monotonic() < deadline, "the first job never uploaded"
                time.sleep(0.01)
            assert not batch_state_files(tmp_path)
            client = OpenAICompatibleClient(ClientSettings(**settings), cache=tmp_path)
            requests = _requests(8, "shared")
            completions = client.complete(requests, PARAMS)
            assert first.wait(timeout=60) == 0, first.stdout.read() if first.stdout else ""
        finally:
            first.kill()
        assert all(c.finish_reason == "stop" for c in completions)
        assert [c.cached for c in completions] == [True] * 6 + [False] * 2
        assert all(count == 1 for count in server.answered.values()), server.answered
        assert len(server.answered) == 8 and server.batches_created == 2
        ledger = client.ledger()
        assert ledger["cache_hits"] == 6 and ledger["batch_items_sent"] == 2
        spent = SpendLedger(tmp_path / "spend.jsonl").entries()
        assert len(spent) == 8, "each answer is recorded once, by the job that paid for it"


def test_a_batch_whose_job_died_is_taken_up_by_the_job_waiting_for_it(tmp_path: Path) -> None:
    """A job waiting on another's batch (its lock held) takes the batch up when that job is
    killed: it polls the same batch instead of paying again."""
    with BatchServer(step_s=1.0) as server:
        job, settings = _start_killable_job(server, tmp_path, poll_s=0.05)
        try:
            client = OpenAICompatibleClient(ClientSettings(**settings), cache=tmp_path)
            requests = _requests(8, "killed")
            killer = threading.Timer(0.5, os.killpg, (job.pid, signal.SIGKILL))  # while this one waits
            killer.start()
            completions = client.complete(requests, PARAMS)
            killer.join()
        finally:
            job.kill()
            job.wait(timeout=10)
        assert job.returncode == -signal.SIGKILL, "the first job was still waiting when it was killed"
        assert all(c.finish_reason == "stop" and not c.cached for c in completions)
        assert server.batches_created == 1 and client.ledger()["batches_resumed"] == 1
        _paid_once(server, client, requests)


def test_a_sync_job_takes_up_a_killed_batch_jobs_batch_instead_of_paying_again(tmp_path: Path) -> None:
    """A batch job is killed while its batch runs; the study is rerun in sync mode (or another
    sync study shares the cache). The eight calls in that batch come from it, not from new chat
    calls: the batch is paid for whether or not it is read. The two calls no batch holds are
    called at once, while the batch is still running."""
    with BatchServer(step_s=1.0) as server:
        settings = _killed_job(server, tmp_path, poll_s=0.05)
        assert server.batches_created == 1 and not server.answered
        sync = ClientSettings(**{**settings, "mode": "sync", "batch_poll_s": 0.05})
        client = OpenAICompatibleClient(sync, cache=tmp_path)
        requests = _requests(8, "killed") + _requests(2, "new")
        completions = client.complete(requests, PARAMS)
        assert all(c.finish_reason == "stop" and not c.cached for c in completions)
        assert server.batches_created == 1 and server.sync_calls == 2
        assert client.ledger()["batches_resumed"] == 1
        _paid_once(server, client, requests)
        assert len(server.answered) == len(requests)
        assert {c.extra.get("batch_id") is not None for c in completions[:8]} == {True}
        assert {c.extra.get("batch_id") for c in completions[8:]} == {None}
        assert [e["mode"] for e in SpendLedger(tmp_path / "spend.jsonl").entries()].count("batch") == 8


def test_a_fatal_answer_while_taking_up_a_batch_fails_the_sync_job_as_itself(tmp_path: Path) -> None:
    """The provider no longer knows the killed job's batch (404): the sync job fails at once with
    the FatalAPIError naming it, not a group of errors, and pays for nothing meanwhile."""
    with BatchServer(step_s=1.0) as server:
        settings = _killed_job(server, tmp_path, poll_s=0.05)
        (state_path,) = batch_state_files(tmp_path)
        state = json.loads(state_path.read_text())
        state_path.write_text(json.dumps({**state, "batch_id": "batch_unknown"}))
        client = OpenAICompatibleClient(ClientSettings(**{**settings, "mode": "sync"}), cache=tmp_path)
        with pytest.raises(FatalAPIError, match="batch_unknown|404"):
            client.complete(_requests(8, "killed"), PARAMS)
        assert server.sync_calls == 0


@pytest.mark.parametrize("first_mode", ["sync", "batch"])
def test_a_call_a_job_of_the_other_mode_is_paying_for_is_waited_for(tmp_path: Path, first_mode: str) -> None:
    """A sync job and a batch job need the same six calls (a judge in one mode, its probes or
    another study in the other). Whichever pays first, the other waits for it and reads the six
    from the cache: a sync call waits on a live batch holding it, a batch leaves out calls whose
    sync claim is held. Each call is paid once, in one mode."""
    second_mode = "batch" if first_mode == "sync" else "sync"
    with BatchServer(step_s=0.3, chat_delay_s=2.0) as server:
        common = dict(model="judge-model", base_url=server.base_url, api_key_env=None, batch_poll_s=0.05,
                      batch_poll_max_s=0.2, batch_sync_below=0, concurrency=8, **PRICES)
        script = SHARED_JOB.format(repo=str(REPO), settings={**common, "mode": first_mode}, cache=str(tmp_path))
        first = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 60
            # the first job is paying: six sync calls on the wire, or its batch created
            while (server.sync_calls if first_mode == "sync" else server.batches_created) < (
                    6 if first_mode == "sync" else 1):
                assert first.poll() is None, first.stdout.read() if first.stdout else ""
                assert time.monotonic() < deadline, "the first job never paid"
                time.sleep(0.01)
            client = OpenAICompatibleClient(ClientSettings(**common, mode=second_mode), cache=tmp_path)
            completions = client.complete(_requests(8, "shared"), PARAMS)
            assert first.wait(timeout=60) == 0, first.stdout.read() if first.stdout else ""
        finally:
            first.kill()
        assert all(c.finish_reason == "stop" for c in completions)
        assert [c.cached for c in completions] == [True] * 6 + [False] * 2
        batch_answered = {k: n for k, n in server.answered.items() if not k.startswith("sync:")}
        assert all(n == 1 for n in server.answered.values()), server.answered
        paid_in_batches = 6 if first_mode == "batch" else 2
        assert (len(batch_answered), server.sync_calls) == (paid_in_batches, 8 - paid_in_batches)


def test_batches_split_at_the_request_and_byte_limits(tmp_path: Path) -> None:
    with BatchServer(step_s=0.05) as server:
        client = OpenAICompatibleClient(_settings(server, batch_max_requests=4, batch_max_bytes=1400), cache=tmp_path)
        completions = client.complete(_requests(10, "split"), PARAMS)
        assert all(c.finish_reason == "stop" for c in completions)
        sizes = [len(batch["lines"]) for batch in server.batches.values()]
        assert sum(sizes) == 10 and max(sizes) <= 4 and len(sizes) >= 3
        for file_id, data in server.file_bytes.items():
            if server.files[file_id]["purpose"] == "batch":
                assert len(data) <= 1400


def test_a_rejected_key_fails_the_batch_job_fast(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BLOOMQG_TEST_API_KEY", "sk-wrong-0123456789")
    with BatchServer(required_api_key="sk-right") as server:
        client = OpenAICompatibleClient(_settings(server, api_key_env="BLOOMQG_TEST_API_KEY"), cache=tmp_path)
        with pytest.raises(FatalAPIError, match="BLOOMQG_TEST_API_KEY") as raised:
            client.complete(_requests(3, "key"), PARAMS)
        assert "sk-wrong-0123456789" not in str(raised.value)
        assert server.batches_created == 0


# ------------------------------------------------------------------------------- budget


@pytest.mark.parametrize("mode", ["sync", "batch"])
def test_budget_stops_at_the_cap_and_a_higher_cap_pays_only_the_rest(tmp_path: Path, mode: str) -> None:
    requests = _requests(20, f"budget-{mode}")
    with BatchServer(step_s=0.05) as server:
        probe = OpenAICompatibleClient(_settings(server, mode=mode), cache=tmp_path / "probe")
        one = probe.complete(requests[:1], PARAMS)[0]
        server.answered.clear()
        server.sync_calls = 0
        # A cap for about half the calls, counting each at its prompt and its whole max_tokens.
        worst = ClientSettings(model="m", **PRICES).cost(one.n_prompt_tokens, PARAMS.max_new_tokens, batch=False)
        cap = 10.5 * worst
        settings = _settings(server, mode=mode, budget_usd=cap, concurrency=4)
        delivered: list[Completion] = []
        with pytest.raises(BudgetExceededError, match=r"spent \$[0-9.]+ of the \$[0-9.e-]+ cap") as raised:
            OpenAICompatibleClient(settings, cache=tmp_path / "calls").complete(requests, PARAMS, delivered.extend)
        spent = SpendLedger(tmp_path / "calls" / "spend.jsonl").total()
        assert 0 < spent <= cap
        paid_first = len(server.answered)
        assert 5 <= paid_first < len(requests), paid_first
        assert "calls were not made (reason budget" in str(raised.value)
        assert all(c.finish_reason != "error" for c in delivered) and len(delivered) == paid_first

        bigger = _settings(server, mode=mode, budget_usd=100 * cap, concurrency=4)
        client = OpenAICompatibleClient(bigger, cache=tmp_path / "calls")
        completions = client.complete(requests, PARAMS)
        assert all(c.finish_reason == "stop" for c in completions)
        assert sum(c.cached for c in completions) == paid_first
        assert len(server.answered) == len(requests) and all(n == 1 for n in server.answered.values())


ECHOED_KEY = "sk-Bt5wQ9zL2xN7mK4vR8pJ3cH6fD1s"


def test_a_key_echoed_in_batch_answers_and_error_lines_is_kept_nowhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Batch output lines echo the key in their answers, error lines put it where error text was
    cut (300 characters): no completion, log record, cache entry or batch file keeps any of it."""
    monkeypatch.setenv("BLOOMQG_BATCH_KEY", ECHOED_KEY)
    message = "x" * 292 + ECHOED_KEY + " (request context)"
    server = BatchServer(step_s=0.05, item_error_rate=0.5, seed=1, required_api_key=ECHOED_KEY,
                         content=f"The key {ECHOED_KEY} came with the request.", error_message=message)
    caplog.set_level("INFO", logger="bloomqg")
    with server:
        settings = _settings(server, api_key_env="BLOOMQG_BATCH_KEY", batch_max_rounds=0)
        completions = OpenAICompatibleClient(settings, cache=tmp_path).complete(_requests(8, "echo"), PARAMS)
    answered = [c for c in completions if c.finish_reason == "stop"]
    failed = [c for c in completions if c.finish_reason == "error"]
    assert answered and failed, "the seed should fail some items and answer others"
    assert all(c.text == "The key *** came with the request." for c in answered)
    assert all("HTTP 500" in c.error for c in failed)
    stored = [path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()]
    for piece in [ECHOED_KEY[i:i + 8] for i in range(len(ECHOED_KEY) - 7)]:
        assert not any(piece in c.error for c in failed), piece
        assert piece not in caplog.text, piece
        assert not any(piece.encode() in data for data in stored), piece
