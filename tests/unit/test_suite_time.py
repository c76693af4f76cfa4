"""benchmarks/suite_time.py --cpu-by-process: the logger each Python process runs at exit, and the
processes summed by kind (a job by its rule, Snakemake, the tests' own code, a program)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.scripts import load_script


@pytest.fixture(scope="module")
def suite_time():
    return load_script("benchmarks/suite_time.py")


def test_each_process_logs_its_own_cpu_at_exit_and_the_kinds_are_summed(tmp_path: Path, suite_time) -> None:
    log = tmp_path / "cpu.jsonl"
    # a name of its own: under suite_time.py --cpu-by-process every process has already imported
    # the run's own bloomqg_suite_cpu_log, and a second import of that name would do nothing
    (tmp_path / "cpu_log_under_test.py").write_text(suite_time.CPU_LOGGER.format(log=str(log)), encoding="utf-8")
    # what the .pth line does in each process, then some CPU to spend
    load = f"import sys; sys.path.append({str(tmp_path)!r}); import cpu_log_under_test\n"
    burn = "sum(i * i for i in range(3_000_000))\n"
    script = tmp_path / "study" / ".snakemake" / "scripts" / "tmpk3_x9.vote_judgments.py"
    script.parent.mkdir(parents=True)
    script.write_text(load + burn, encoding="utf-8")
    for _ in range(2):
        subprocess.run([sys.executable, str(script)], check=True)
    subprocess.run([sys.executable, "-c", load + burn], check=True)
    # a process killed by a signal writes nothing
    subprocess.run([sys.executable, "-c", load + "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])

    summary = suite_time.cpu_by_kind(log, total_cpu_s=10.0)
    assert summary["logged_processes"] == 3 and summary["total_cpu_s"] == 10.0
    kinds = {row["kind"]: row for row in summary["kinds"]}
    assert set(kinds) == {"job vote_judgments", "python -c"}
    assert kinds["job vote_judgments"]["processes"] == 2 and kinds["python -c"]["processes"] == 1
    assert all(row["cpu_s"] > 0.05 for row in summary["kinds"])
    assert summary["kinds"][0]["kind"] == "job vote_judgments"  # most CPU first
    assert summary["logged_cpu_s"] == pytest.approx(sum(row["cpu_s"] for row in summary["kinds"]), abs=0.11)


@pytest.mark.parametrize(("argv", "modules", "executable", "kind"), [
    (["/w/.venv/lib/python3.11/site-packages/snakemake/__main__.py"], [], "/w/.venv/bin/python", "snakemake"),
    (["/w/.venv/bin/snakemake"], [], "/w/.venv/bin/python", "snakemake"),
    (["-c"], ["_pytest"], "/w/.venv/bin/python", "pytest"),
    (["-c"], [], "/w/.venv-vllm/bin/python", "vllm"),
    (["/w/.venv/bin/inspect"], [], "/w/.venv/bin/python", "inspect"),
])
def test_a_process_is_named_by_what_it_ran(suite_time, argv, modules, executable, kind) -> None:
    assert suite_time.process_kind({"argv": argv, "modules": modules, "executable": executable}) == kind
