"""A budget stop and a rerun against loopback OpenAI-compatible servers: the report's cost is what
the spend ledger says was paid, to the cent, with the calls paid by the stopped attempt counted
once (answered from the cache on the rerun, marked "paid earlier"); `estimate_cost` says the
estimate does not fit the cap before the stop; the budget error reads without an unrelated
chained error; the server receives each call's Idempotency-Key header.

Prices make every call cost the same: the loopback server reports 20 completion tokens for every
answer, input is free and max_tokens is 20, so each call costs, and reserves, exactly
CALL_USD. A cap of what generation spent plus 3.5 calls lets exactly three judge calls through
(a fourth would reserve the cap's last half call and more).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from bloomqg.api.budget import SpendLedger
from bloomqg.api.ledger import ledger_from_generations, ledger_from_judgments
from bloomqg.store.parquet_io import read_frame
from bloomqg.store.frames import GENERATIONS, JUDGMENTS
from tests.integration.test_api_workflow import generator_and_judge, one_cell_study, server_stats, snakemake

pytestmark = pytest.mark.integration

N_ITEMS = 4
PRICE_OUT = 300.0  # USD per million completion tokens
CALL_USD = 20 * PRICE_OUT / 1e6  # 0.006 per call
JUDGMENTS_FILE = "results/judgments/cs/fgp/api-gen/judge-a.parquet"
GENERATIONS_FILE = "results/generations/cs/fgp/api-gen.parquet"


@pytest.fixture
def servers():
    question = json.dumps({"question": "How would you design a stack that also returns its minimum in O(1)?"})
    with generator_and_judge(question) as ports:
        yield ports



def write_config(workdir: Path, generator_port: int, judge_port: int, budget_usd: float | None) -> Path:
    api = {"api_key_env": None, "max_retries": 2, "backoff_base_s": 0.05, "timeout_s": 10, "concurrency": 1,
           "price_per_million_input": 0.0, "price_per_million_output": PRICE_OUT}
    greedy = {"temperature": 0.0, "max_new_tokens": 20, "do_sample": False}
    config = one_cell_study(
        workdir, n_items=N_ITEMS, budget_usd=budget_usd,
        generator={"backend": "openai", "model": "fixed-generator", "generation": greedy,
                   "base_url": f"http://127.0.0.1:{generator_port}/v1", **api},
        judges={"judge-a": {"backend": "openai", "model": "fixed-judge", "generation": greedy,
                            "base_url": f"http://127.0.0.1:{judge_port}/v1", **api},
                "rules": {"backend": "rules"}},
    )
    path = workdir / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_budget_stop_and_rerun_cost_what_the_ledger_says(tmp_path, servers):
    generator_port, judge_port = servers
    ledger = SpendLedger(tmp_path / "cache" / "spend.jsonl")

    # Generation without a cap: N_ITEMS paid calls.
    config = write_config(tmp_path, generator_port, judge_port, None)
    generated = snakemake(tmp_path, config, "", "--cores", "1", GENERATIONS_FILE)
    assert generated.returncode == 0, generated.stderr[-4000:]
    spent_on_generation = ledger.total()
    assert spent_on_generation == pytest.approx(N_ITEMS * CALL_USD)

    # The cap leaves room for three judge calls; the estimate says beforehand that it does not fit.
    cap = spent_on_generation + 3.5 * CALL_USD
    config = write_config(tmp_path, generator_port, judge_port, cap)
    estimate = snakemake(tmp_path, config, "", "--cores", "1", "estimate_cost")
    assert estimate.returncode == 0, estimate.stderr[-4000:]
    said = (tmp_path / "logs" / "estimate_cost.log").read_text(encoding="utf-8")
    assert f"already spent: ${spent_on_generation:.4f}" in said
    assert re.search(rf"budget_usd \${cap:.4f}: spent \${spent_on_generation:.4f} \(spend.jsonl\), "
                     rf"remaining \$0\.0210, this estimate \$0\.0240: DOES NOT FIT", said), said

    stopped = snakemake(tmp_path, config, "", "--cores", "1")
    assert stopped.returncode != 0
    output = stopped.stdout + stopped.stderr
    assert "budget_usd cap reached for fixed-judge" in output, output[-4000:]
    assert "no running event loop" not in output
    assert "During handling of the above exception" not in output
    judge_lines = [e for e in ledger.entries() if e["model"] == "fixed-judge"]
    assert len(judge_lines) == 3

    # Rerun with room: only the calls the stop left out are paid.
    config = write_config(tmp_path, generator_port, judge_port, 1.0)
    finished = snakemake(tmp_path, config, "", "--cores", "1")
    assert finished.returncode == 0, finished.stderr[-4000:]
    entries = ledger.entries()
    assert len(entries) == 2 * N_ITEMS and len({e["key"] for e in entries}) == 2 * N_ITEMS

    judgments = read_frame(tmp_path / JUDGMENTS_FILE, JUDGMENTS)
    generations = read_frame(tmp_path / GENERATIONS_FILE, GENERATIONS)
    judged = ledger_from_judgments(judgments)
    judged = judged[judged["judge"] == "judge-a"].iloc[0]
    generated_row = ledger_from_generations(generations).iloc[0]
    paid = {model: sum(e["cost_usd"] for e in entries if e["model"] == model)
            for model in ("fixed-judge", "fixed-generator")}
    assert judged["cost_usd"] == pytest.approx(paid["fixed-judge"], abs=1e-12)
    assert judged["cached"] == 3 and judged["paid_earlier"] == 3 and judged["requests"] == N_ITEMS - 3
    assert generated_row["cost_usd"] == pytest.approx(paid["fixed-generator"], abs=1e-12)
    assert generated_row["requests"] == N_ITEMS and generated_row["cached"] == 0  # generated once, kept

    # The report: per judge and generator, and the total, to the cent of the ledger.
    report = (tmp_path / "results" / "report.html").read_text(encoding="utf-8")
    total = sum(paid.values())
    assert f"${total:.4f}" in report
    cost_section = report[report.index('id="cost"'):]
    for name, usd in (("judge-a", paid["fixed-judge"]), ("generator api-gen", paid["fixed-generator"])):
        row = re.search(rf"<tr><td>{re.escape(name)}</td>(.*?)</tr>", cost_section).group(1)
        assert f">{usd:.4f}<" in row, (name, row)

    # Every call carried its own Idempotency-Key header.
    for port, calls in ((judge_port, N_ITEMS), (generator_port, N_ITEMS)):
        seen = server_stats(port)
        assert seen["completions"] == calls and seen["with_idempotency_key"] == calls, seen
        assert seen["distinct_idempotency_keys"] == calls
