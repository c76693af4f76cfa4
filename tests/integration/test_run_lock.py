"""`make study`'s run lock: a second run refuses, and after `kill -9` the same command completes.

The SIGKILL test runs a cut-down tiny study (one dataset, one strategy, an API generator and two
judges: rules and an API one) as `make study` does, through ``python -m bloomqg.runtime.run_lock`` and
the default profile, kills its whole process group while generation runs, and reruns the same
command to the report. The generator answers from a loopback server that holds its requests
until the kill (:mod:`tests.support.planted_judge_server`): the first run is surely generating
when it dies, and no model is loaded to keep it busy.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from bloomqg.store.parquet_io import read_frame
from bloomqg.runtime.run_lock import (
    EXIT_BUSY,
    RUN_LOCK,
    SNAKEMAKE_LOCKS,
    RunBusy,
    clear_locks_of_dead_runs,
    clear_stale_lock,
    run_directory,
    stale_locks,
)
from bloomqg.store.frames import GENERATIONS, METRICS, PROMPTS, VOTES
from tests.conftest import REPO
from tests.integration.test_workflow import LIMIT, tiny_config
from tests.support.planted_judge_server import PlantedJudgeServer

pytestmark = pytest.mark.integration

RUN_LOCKED = [sys.executable, "-m", "bloomqg.runtime.run_lock"]


def study_command(workdir: Path, config: Path) -> list[str]:
    """What `make study` runs, pointed at a temporary directory and config."""
    return [
        *RUN_LOCKED, sys.executable, "-m", "snakemake", "--profile", str(REPO / "profiles" / "default"),
        "-s", str(REPO / "Snakefile"), "--directory", str(workdir), "--configfile", str(config),
    ]


def test_run_directory_reads_the_directory_option(tmp_path):
    assert run_directory(["-s", "Snakefile", "--directory", "w"], cwd=tmp_path) == tmp_path / "w"
    assert run_directory(["-d", str(tmp_path / "x")], cwd=Path("/")) == tmp_path / "x"
    assert run_directory(["--directory=y", "--cores", "2"], cwd=tmp_path) == tmp_path / "y"
    assert run_directory(["--cores", "2"], cwd=tmp_path) == tmp_path


def test_a_second_run_refuses_while_the_lock_is_held(tmp_path):
    (tmp_path / RUN_LOCK).parent.mkdir()
    with open(tmp_path / RUN_LOCK, "w") as holder:
        fcntl.flock(holder, fcntl.LOCK_EX)
        holder.write("pid 1, started now: snakemake --cores 2\n")
        holder.flush()
        marker = tmp_path / "ran"
        result = subprocess.run([*RUN_LOCKED, "touch", str(marker)], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == EXIT_BUSY
    assert f"another run is working in {tmp_path} (pid 1, started now: snakemake --cores 2)" in result.stderr
    assert not marker.exists()
    # Once the holder is gone the same command runs.
    assert subprocess.run([*RUN_LOCKED, "touch", str(marker)], cwd=tmp_path).returncode == 0
    assert marker.exists()


def test_a_lock_of_a_live_snakemake_without_the_run_lock_is_kept(tmp_path):
    (tmp_path / SNAKEMAKE_LOCKS).mkdir(parents=True)
    (tmp_path / SNAKEMAKE_LOCKS / "0.output.lock").write_text("results/x\n")
    # A process that looks like a Snakemake run started by hand in that directory.
    other = subprocess.Popen(["bash", "-c", "exec -a snakemake sleep 30"], cwd=tmp_path)
    try:
        time.sleep(0.2)
        with pytest.raises(RunBusy, match=rf"pid {other.pid}: snakemake 30"):
            clear_stale_lock(["snakemake", "--cores", "1"], tmp_path)
    finally:
        other.kill()
        other.wait()
    assert stale_locks(tmp_path)


def test_the_workflow_clears_a_lock_only_when_no_run_can_own_it(tmp_path):
    """What rules/common.smk does for a plain `snakemake` command."""
    (tmp_path / SNAKEMAKE_LOCKS).mkdir(parents=True)
    lock = tmp_path / SNAKEMAKE_LOCKS / "0.input.lock"
    lock.write_text("results/x\n")
    other = subprocess.Popen(["bash", "-c", "exec -a snakemake sleep 30"], cwd=tmp_path)
    try:
        time.sleep(0.2)
        assert not clear_locks_of_dead_runs(tmp_path) and lock.exists()  # a Snakemake is alive there
    finally:
        other.kill()
        other.wait()
    with open(tmp_path / RUN_LOCK, "w") as holder:  # a run started through bloomqg.runtime.run_lock
        fcntl.flock(holder, fcntl.LOCK_EX)
        assert not clear_locks_of_dead_runs(tmp_path) and lock.exists()
    # A job's script that outlived its Snakemake (killed alone) still writes outputs.
    (tmp_path / ".snakemake" / "scripts").mkdir()
    script = tmp_path / ".snakemake" / "scripts" / "tmpab12.generate_questions.py"
    script.write_text("import time\ntime.sleep(30)\n")
    orphan = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path)
    try:
        time.sleep(0.2)
        assert not clear_locks_of_dead_runs(tmp_path) and lock.exists()
    finally:
        orphan.kill()
        orphan.wait()
    assert clear_locks_of_dead_runs(tmp_path) and not lock.exists()  # nobody: stale
    assert not clear_locks_of_dead_runs(tmp_path)


def small_study(workdir: Path, server: PlantedJudgeServer) -> Path:
    """The tiny study cut to one dataset and one strategy, its generator and one of its two
    judges (beside rules) answered by ``server``."""
    path = tiny_config(workdir)
    config = yaml.safe_load(path.read_text())
    config["datasets"] = {"cs": {**config["datasets"]["cs"], "strategies": ["fgp"]}}
    api = {"backend": "openai", "base_url": server.base_url, "api_key_env": None, "max_retries": 2}
    config["models"] = {"gen-alpha": {**api, "model": "gen-alpha", "timeout_s": 600}}
    config["judges"] = {"rules": {"backend": "rules"}, "fair": {**api, "model": "fair"}}
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@pytest.fixture
def server():
    with PlantedJudgeServer() as planted:
        yield planted


def test_kill_9_then_the_same_command_completes(tmp_path, server):
    config = small_study(tmp_path, server)
    server.hold_generators()  # the first run generates until it is killed
    command = study_command(tmp_path, config)
    with open(tmp_path / "first.log", "w") as log:
        first = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 600
    while not server.by_model["gen-alpha"]:  # its generation job has asked for a question
        assert first.poll() is None, (tmp_path / "first.log").read_text()[-4000:]
        assert time.monotonic() < deadline, "generation never started"
        time.sleep(0.2)

    # While it runs, the same command refuses and leaves it alone.
    second = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert second.returncode == EXIT_BUSY, second.stderr[-3000:]
    assert "another run is working in" in second.stderr and f"pid {first.pid}" in second.stderr

    os.killpg(first.pid, signal.SIGKILL)  # the power cut: snakemake and every job it runs
    first.wait()
    assert stale_locks(tmp_path), "the killed run should have left Snakemake's lock behind"
    assert not list((tmp_path / "results").rglob("generations/**/*.parquet")), "it died generating"

    server.release_generators()
    rerun = subprocess.run(command, capture_output=True, text=True, timeout=1200)
    assert rerun.returncode == 0, rerun.stderr[-6000:]
    assert "removing Snakemake's lock" in rerun.stderr
    assert not stale_locks(tmp_path)

    results = tmp_path / "results"
    prompts = read_frame(results / "prompts" / "cs" / "fgp.parquet", PROMPTS)
    generations = read_frame(results / "generations" / "cs" / "fgp" / "gen-alpha.parquet", GENERATIONS)
    votes = read_frame(results / "votes" / "cs" / "fgp" / "gen-alpha.parquet", VOTES)
    # The row counts of an uninterrupted run: every prompt exactly once.
    assert len(prompts) == LIMIT
    assert sorted(generations["prompt_id"]) == sorted(prompts["prompt_id"])
    assert sorted(votes["prompt_id"]) == sorted(prompts["prompt_id"])
    metrics = read_frame(results / "metrics" / "all.parquet", METRICS)
    assert set(metrics["dataset"]) == {"cs"} and (results / "report.html").is_file()
