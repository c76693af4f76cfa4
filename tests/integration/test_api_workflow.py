"""The workflow with API models only, against loopback servers, through a fault-injecting proxy.

A generator endpoint answers every prompt with a fixed question; three judges sit behind a proxy
that fails about a third of requests (429 with Retry-After, 500, 503, dropped connections) and
demands an API key. The study must complete with exactly one verdict row per question and
criterion, a forced rerun of judging must send no request, and a wrong key must fail fast
without the key appearing anywhere in the working directory.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest
import yaml

from bloomqg.parquet_io import read_frame
from bloomqg.frames import CRITERIA, JUDGMENTS, VOTES
from tests.conftest import REPO
from tests.integration.test_workflow import planned_jobs
from tests.support.fault_proxy import FaultProxy, FaultSchedule

pytestmark = pytest.mark.integration

KEY = "sk-test-0123456789abcdefSECRET"
WRONG_KEY = "sk-wrong-9876543210fedcbaLEAKED"
N_ITEMS = 6
JUDGES = ("judge-a", "judge-b", "judge-c")
#: What the tests check ends at the votes: metrics, tables, figures and the report are not run.
VOTES_TARGET = "results/votes/cs/fgp/api-gen.parquet"


def start_server(content: str | None, *options: str) -> tuple[subprocess.Popen, int]:
    """A fixed_latency_server answering ``content`` (or its verdict), with its further ``options``."""
    command = [sys.executable, str(REPO / "tests" / "support" / "fixed_latency_server.py"),
               "--port", "0", "--latency", "0.02", *options]
    if content is not None:
        command += ["--content", content]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    line = process.stdout.readline()
    assert line.startswith("READY"), line
    return process, int(line.split()[1])


@contextmanager
def generator_and_judge(question: str):
    """(generator port, judge port): a server answering every prompt with ``question`` and one
    answering the fixed verdict, both stopped after."""
    generator, generator_port = start_server(question)
    judge, judge_port = start_server(None)
    try:
        yield generator_port, judge_port
    finally:
        for process in (generator, judge):
            process.terminate()
            process.wait(timeout=10)


def server_stats(port: int) -> dict:
    """A fixed_latency_server's counters (completions, idempotency keys)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=5) as response:
        return json.loads(response.read())


@pytest.fixture(scope="module")
def servers():
    question = json.dumps({"question": "How would you design a stack that also returns its minimum in O(1)?"})
    generator, generator_port = start_server(question)
    judge, judge_port = start_server(None)
    schedule = FaultSchedule(seed=3, fault_rate=0.34, max_faults_per_body=2,
                             weights={"rate_limit": 1.0, "server_error": 1.0, "unavailable": 1.0, "drop": 1.0})
    proxy = FaultProxy(judge_port, schedule, required_api_key=KEY).start()
    try:
        yield generator_port, proxy
    finally:
        proxy.stop()
        for process in (generator, judge):
            process.terminate()
            process.wait(timeout=10)


def api_config(workdir: Path, generator_port: int, proxy: FaultProxy) -> Path:
    api = {"api_key_env": "BLOOMQG_TEST_KEY", "max_retries": 6, "backoff_base_s": 0.05,
           "backoff_max_s": 1.5, "timeout_s": 5, "concurrency": 4}
    config = {
        "seed": 7, "limit_items": N_ITEMS, "exemplars": 1, "strategies": ["fgp"],
        "cache_dir": str(workdir / "cache"),
        "datasets": {"cs": {"loader": "embedded", "path": str(REPO / "data" / "cs" / "questions.csv"),
                            "domain": "computer science"}},
        "models": {"api-gen": {"backend": "openai", "model": "fixed-generator",
                               "base_url": f"http://127.0.0.1:{generator_port}/v1", **api}},
        "judges": {name: {"backend": "openai", "model": f"fixed-{name}", "base_url": proxy.base_url, **api}
                   for name in JUDGES},
        "bootstrap": {"n_resamples": 100, "confidence": 0.95},
    }
    path = workdir / "api.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def snakemake(workdir: Path, config: Path, key: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "BLOOMQG_TEST_KEY": key}
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
         "--configfile", str(config), "--cores", "2", *args],
        capture_output=True, text=True, timeout=900, env=env,
    )


def judgment_files(judges) -> list[str]:
    """Each judge's verdicts on the one cell: what a forced rerun of judging must rewrite."""
    return [f"results/judgments/cs/fgp/api-gen/{judge}.parquet" for judge in judges]


def test_faulty_endpoint_loses_nothing_and_a_rerun_pays_nothing(tmp_path, servers):
    generator_port, proxy = servers
    config = api_config(tmp_path, generator_port, proxy)
    proxy.reset_counters()
    first = snakemake(tmp_path, config, KEY, VOTES_TARGET)  # the claim ends at the votes
    assert first.returncode == 0, first.stderr[-5000:]
    assert sum(proxy.faults.values()) >= 1, "the proxy should have injected faults"
    assert proxy.forwarded == N_ITEMS * len(JUDGES)  # each question reached each judge once
    for judge in JUDGES:
        verdicts = read_frame(tmp_path / "results" / "judgments" / "cs" / "fgp" / "api-gen" / f"{judge}.parquet", JUDGMENTS)
        assert len(verdicts) == N_ITEMS * len(CRITERIA)
        assert not verdicts.duplicated(["prompt_id", "criterion"]).any()
        assert (verdicts["status"] == "ok").all()
    votes = read_frame(tmp_path / "results" / "votes" / "cs" / "fgp" / "api-gen.parquet", VOTES)
    assert len(votes) == N_ITEMS and votes["readable"].all()

    proxy.reset_counters()
    # The targets come first: --forcerun takes every word after it as a rule to force, and the
    # run would fall back to the default target (the whole study to the report).
    rerun = snakemake(tmp_path, config, KEY, *judgment_files(JUDGES), "--forcerun", "judge_questions")
    assert rerun.returncode == 0, rerun.stderr[-5000:]
    assert planned_jobs(rerun.stderr) == {"judge_questions": len(JUDGES)}
    assert proxy.received == 0, "a rerun must be answered from the call cache"


def test_wrong_key_fails_fast_and_never_leaks(tmp_path, servers):
    generator_port, proxy = servers
    config = api_config(tmp_path, generator_port, proxy)
    proxy.reset_counters()
    result = snakemake(tmp_path, config, WRONG_KEY)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "BLOOMQG_TEST_KEY" in output
    assert proxy.received <= len(JUDGES) * 4, "authentication errors must not be retried"
    assert WRONG_KEY not in output
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert WRONG_KEY.encode() not in path.read_bytes(), f"the key leaked into {path}"
    # The failed judge's log says what happened and what to do, and is kept for the rerun.
    from bloomqg.api.retry import FatalAPIError

    explained = [log for log in (tmp_path / "logs" / "judge_questions").rglob("*.log")
                 if ".attempt-" not in log.name and "What to do: " in log.read_text()]
    assert explained, "no judge log explains the failure"
    for log in explained:
        text = log.read_text()
        assert f"What to do: {FatalAPIError.what_to_do}" in text and "Traceback" in text, text
        assert log.with_name(f"{log.stem}.attempt-1.log").read_text() == text


# ------------------------------------------------------------------ batch mode and the estimate

BATCH_JUDGES = ("batch-a", "batch-b")


def batch_config(workdir: Path, generator_port: int, server) -> Path:
    prices = {"price_per_million_input": 0.15, "price_per_million_output": 0.60,
              "batch_price_per_million_input": 0.075, "batch_price_per_million_output": 0.30}
    config = yaml.safe_load(api_config(workdir, generator_port, server).read_text())
    config["models"]["api-gen"].update(prices)
    config["judges"] = {
        name: {"backend": "openai", "model": f"fixed-{name}", "base_url": server.base_url,
               "api_key_env": "BLOOMQG_TEST_KEY", "mode": "batch", "batch_poll_s": 0.2,
               "batch_poll_max_s": 0.5, **prices}
        for name in BATCH_JUDGES
    }
    path = workdir / "batch.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_batch_study_killed_while_polling_pays_each_request_once(tmp_path):
    """Estimate, run in batch mode, kill Snakemake while its judge jobs poll, rerun: every
    request is answered once, the ledger matches the estimate within 10%, a forced rerun sends
    nothing."""
    from bloomqg.api.batch import batch_state_files
    from bloomqg.api.budget import SpendLedger
    from tests.support.batch_server import BatchServer

    question = json.dumps({"question": "How would you design a stack that also returns its minimum in O(1)?"})
    generator, generator_port = start_server(question)
    server = BatchServer(step_s=3.0, required_api_key=KEY).start()
    try:
        config = batch_config(tmp_path, generator_port, server)
        # Generate first (sync), so the estimate is exact about the questions to judge, and
        # estimating has questions it could send to the judges: it must send nothing.
        generated = snakemake(tmp_path, config, KEY, "results/generations/cs/fgp/api-gen.parquet")
        assert generated.returncode == 0, generated.stderr[-5000:]
        estimate = snakemake(tmp_path, config, KEY, "estimate_cost")
        assert estimate.returncode == 0, estimate.stderr[-5000:]
        assert server.batches_created == 0 and not server.answered, "estimating sends nothing"
        report = (tmp_path / "logs" / "estimate_cost.log").read_text()
        assert "api-gen" in report and all(name in report for name in BATCH_JUDGES)
        table = pd.read_csv(tmp_path / "logs" / "estimate_cost.tsv", sep="\t")
        judged = table[table["role"] == "judge"]
        assert set(judged["name"]) == set(BATCH_JUDGES) and (judged["to_call"] == N_ITEMS).all()
        assert (table.loc[table["role"] == "generator", "to_call"] == 0).all(), "generations are cached"
        estimated_usd = float(judged["cost_usd"].sum())

        env = {**os.environ, "BLOOMQG_TEST_KEY": KEY}
        run = subprocess.Popen(
            [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path),
             "--configfile", str(config), "--cores", "2", VOTES_TARGET],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 300
            while sum("batch_id" in json.loads(p.read_text()) for p in batch_state_files(tmp_path / "cache")) < 2:
                assert run.poll() is None, "Snakemake ended before both judge jobs created their batch"
                assert time.monotonic() < deadline, "no batches created"
                time.sleep(0.1)
            os.killpg(run.pid, signal.SIGKILL)  # both judge jobs are polling
        finally:
            run.wait(timeout=30)
        assert server.batches_created == len(BATCH_JUDGES) and not server.answered

        # The same command again: the workflow removes the lock the killed run left (no --unlock).
        rerun = snakemake(tmp_path, config, KEY, "--rerun-incomplete", VOTES_TARGET)
        assert rerun.returncode == 0, rerun.stderr[-5000:]
        assert "removing Snakemake's lock" in rerun.stderr
        assert server.batches_created == len(BATCH_JUDGES), "the rerun resumed the killed jobs' batches"
        assert len(server.answered) == N_ITEMS * len(BATCH_JUDGES)
        assert all(count == 1 for count in server.answered.values()), "each request paid once"
        for judge in BATCH_JUDGES:
            verdicts = read_frame(tmp_path / "results" / "judgments" / "cs" / "fgp" / "api-gen" / f"{judge}.parquet", JUDGMENTS)
            assert len(verdicts) == N_ITEMS * len(CRITERIA) and (verdicts["status"] == "ok").all()

        spent = [e for e in SpendLedger(tmp_path / "cache" / "spend.jsonl").entries() if e["mode"] == "batch"]
        paid_usd = sum(e["cost_usd"] for e in spent)
        assert len(spent) == N_ITEMS * len(BATCH_JUDGES)
        assert abs(estimated_usd - paid_usd) <= 0.10 * paid_usd, (estimated_usd, paid_usd)

        answered = sum(server.answered.values())
        forced = snakemake(tmp_path, config, KEY, *judgment_files(BATCH_JUDGES), "--forcerun", "judge_questions")
        assert forced.returncode == 0, forced.stderr[-5000:]
        assert planned_jobs(forced.stderr) == {"judge_questions": len(BATCH_JUDGES)}
        assert server.batches_created == len(BATCH_JUDGES) and sum(server.answered.values()) == answered
    finally:
        server.stop()
        generator.terminate()
        generator.wait(timeout=10)
