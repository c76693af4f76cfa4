"""A failed job's log explains the failure and survives the rerun (real Snakemake jobs).

A small workflow in a temporary folder has one rule per failure a user meets: the budget stop
(a real API client with a $0 cap), a bad annotation sheet (the real sheet reader), a missing API
key (the real client, its key variable unset) and running out of memory (torch's allocator asked
for 4 EiB, beyond any address space, so it fails whatever the overcommit policy). Each script
starts as every rule script does, with ``start_job``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bloomqg.annotation.sheets import AnnotationError
from bloomqg.api.budget import BudgetExceededError
from bloomqg.api.retry import FatalAPIError
from bloomqg.store.logs import FINISHED, GENERIC_ADVICE, OUT_OF_MEMORY_ADVICE, advice_for

from tests.conftest import REPO

pytestmark = pytest.mark.integration

_START = """
from bloomqg.runtime.job import start_job
snakemake = globals()["snakemake"]
start_job(snakemake)
"""
_API = """
from bloomqg.inputs.chat import ChatRequest, DecodingParams
from bloomqg.generation.openai_api import OpenAITextGenerator
from bloomqg.inputs.api_settings import client_settings_from_entry
spec = {{"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1", {extra}
        "price_per_million_input": 1.0, "price_per_million_output": 1.0}}
generator = OpenAITextGenerator(client_settings_from_entry(spec), cache_dir="cache")
request = ChatRequest("r1", ({{"role": "user", "content": "hi"}},))
generator.complete([request], DecodingParams(temperature=0.0, do_sample=False, max_new_tokens=5, seed=1))
"""
#: rule name -> (script body, the advice its log must start the failure with, exception class)
CASES = {
    "budget_stop": (
        _API.format(extra='"api_key_env": None, "budget_usd": 0.0,'),
        BudgetExceededError.what_to_do, "BudgetExceededError",
    ),
    "missing_key": (
        _API.format(extra='"api_key_env": "BLOOMQG_TEST_UNSET_KEY",'),
        FatalAPIError.what_to_do, "FatalAPIError",
    ),
    "bad_sheet": (
        """
import pandas as pd
from bloomqg.annotation.sheets import read_sheets
with open("sheet.csv", "w") as handle:
    handle.write("annotation_id,notes\\nx,1\\n")
read_sheets(["sheet.csv"], pd.DataFrame({"annotation_id": ["x"], "unit_choices": [["a"]]}))
""",
        AnnotationError.what_to_do, "AnnotationError",
    ),
    "out_of_memory": (
        "import torch\ntorch.empty(2**62, dtype=torch.uint8)\n", OUT_OF_MEMORY_ADVICE, "RuntimeError",
    ),
    "plain_bug": ("{}['no_such_key']\n", GENERIC_ADVICE, "KeyError"),
}


def _workflow(workdir: Path) -> None:
    (workdir / "scripts").mkdir(parents=True)
    rules = [f"rule all:\n    input: {[f'out/{name}.txt' for name in (*CASES, 'works')]!r}\n"]
    for name, (body, _, _) in {**CASES, "works": ("", "", "")}.items():
        # like estimate_cost, "works" writes its own report into its log besides logging
        tail = ('open(snakemake.log[0], "a").write("REPORT\\n" * 50)\n'
                'open(snakemake.output[0], "w").write("ok")\n') if name == "works" else ""
        (workdir / "scripts" / f"{name}.py").write_text(_START + textwrap.dedent(body) + tail)
        rules.append(f'rule {name}:\n    output: "out/{name}.txt"\n    log: "logs/{name}.log"\n'
                     f'    script: "scripts/{name}.py"\n')
    (workdir / "Snakefile").write_text("\n".join(rules))


def _snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("BLOOMQG_TEST_UNSET_KEY", None)
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "2", "--keep-going", "--directory", str(workdir),
         "-s", str(workdir / "Snakefile"), *args],
        capture_output=True, text=True, timeout=600, env=env,
    )


def _failure_record(log_text: str) -> list[str]:
    """The failure's lines: from its "What to do:" line to the end of the log."""
    lines = log_text.splitlines()
    starts = [i for i, line in enumerate(lines) if "CRITICAL bloomqg.runtime.job: What to do: " in line]
    assert len(starts) == 1, log_text
    return lines[starts[0]:]


def test_each_failure_is_explained_in_its_log_and_a_rerun_keeps_the_failed_log(tmp_path: Path) -> None:
    _workflow(tmp_path)
    first = _snakemake(tmp_path)
    assert first.returncode != 0
    logs = tmp_path / "logs"
    for name, (_, advice, error_class) in CASES.items():
        text = (logs / f"{name}.log").read_text()
        record = _failure_record(text)
        assert record[0].endswith("What to do: " + advice), record[0]
        assert record[1].startswith(error_class + ": "), record[1]
        assert "Traceback (most recent call last):" in record and f"{name}.py" in text  # the script's line
        assert record[-1].split(": ")[0].endswith(error_class), record[-1]  # the traceback ends the log
        assert FINISHED not in text
    works = (logs / "works.log").read_text()
    assert works.rstrip().endswith(FINISHED) and works.count("REPORT\n") == 50, works

    assert not list(logs.glob("works.attempt-*")), "a finished job's log is no failed attempt"
    for name in CASES:
        assert (logs / f"{name}.attempt-1.log").read_text() == (logs / f"{name}.log").read_text()

    second = _snakemake(tmp_path, "--forcerun", "works")  # Snakemake deletes each job's log first
    assert second.returncode != 0
    for name in CASES:
        kept = logs / f"{name}.attempt-1.log"
        assert _failure_record(kept.read_text()), f"{kept} lost the first attempt"
        fresh = (logs / f"{name}.log").read_text()
        assert f"earlier attempts that did not finish: {kept.relative_to(tmp_path)}" in fresh
        assert (logs / f"{name}.attempt-2.log").read_text() == fresh
    assert not list(logs.glob("works.attempt-*"))
    assert (logs / "works.log").read_text().rstrip().endswith(FINISHED)


def test_a_killed_job_keeps_its_log(tmp_path: Path) -> None:
    """kill -9 runs no hook: the attempt's second name, made when the log opened, keeps it."""
    script = tmp_path / "job.py"
    script.write_text(
        "import logging, os, signal\n"
        "from bloomqg.store.logs import configure_job_logging\n"
        f"configure_job_logging({str(tmp_path / 'job.log')!r})\n"
        "logging.getLogger('job').info('loading the model')\n"
        "for handler in logging.getLogger().handlers: handler.flush()\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    run = subprocess.run([sys.executable, str(script)], env={**os.environ, "PYTHONPATH": str(REPO)},
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == -9, run.stderr
    (tmp_path / "job.log").unlink()  # what Snakemake does before the rerun
    assert "loading the model" in (tmp_path / "job.attempt-1.log").read_text()


def test_an_earlier_log_left_in_place_is_set_aside_not_overwritten(tmp_path: Path) -> None:
    from bloomqg.store.logs import set_aside_earlier_log

    log = tmp_path / "job.log"
    log.write_text("2026-01-01 INFO x: loading\n")  # a script run by hand, killed
    assert set_aside_earlier_log(log) == tmp_path / "job.attempt-1.log" and not log.exists()
    log.write_text("again\n")
    assert set_aside_earlier_log(log) == tmp_path / "job.attempt-2.log"
    log.write_text(f"x\n{FINISHED}\n")
    assert set_aside_earlier_log(log) is None and not log.exists()
    log.write_text(f"x\n{FINISHED}\n")
    os.link(log, tmp_path / "job.attempt-3.log")  # already kept under its attempt name
    assert set_aside_earlier_log(log) is None and not log.exists()
    assert (tmp_path / "job.attempt-3.log").read_text().endswith(f"{FINISHED}\n")


def test_out_of_memory_is_recognised_without_importing_torch_in_the_log_module() -> None:
    import torch

    assert advice_for(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")) == OUT_OF_MEMORY_ADVICE
    assert advice_for(RuntimeError("CUDA error: out of memory")) == OUT_OF_MEMORY_ADVICE
    assert advice_for(MemoryError()) == OUT_OF_MEMORY_ADVICE
    try:
        try:
            raise BudgetExceededError("cap")
        except BudgetExceededError as error:
            raise RuntimeError("judge failed") from error
    except RuntimeError as wrapped:
        assert advice_for(wrapped) == BudgetExceededError.what_to_do
    assert advice_for(ValueError("x")) == GENERIC_ADVICE


def test_every_rule_script_starts_its_job_first() -> None:
    """The log hook only helps scripts that install it before their work starts, and a job's GPUs
    must be claimed before anything touches CUDA: ``start_job`` does both, first thing."""
    import ast

    for script in sorted((REPO / "workflow_scripts").glob("*.py")):
        body = [node for node in ast.parse(script.read_text()).body
                if not isinstance(node, (ast.Import, ast.ImportFrom))
                and not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))]
        calls = [ast.unparse(node) for node in body[:2]]
        assert any(call.startswith("start_job(snakemake") for call in calls), (script.name, calls)
