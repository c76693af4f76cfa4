"""One set of GPUs per job on a pretend four-GPU workstation (``BLOOMQG_GPU_COUNT=4``, on a CPU).

Real processes take devices from the lock-file pool at once: their sets never overlap, a process
killed with ``kill -9`` frees its devices, and four real Snakemake jobs run with
``--resources gpu=4`` get four different ``CUDA_VISIBLE_DEVICES``.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bloomqg.runtime.devices import COUNT_ENV, INDICES_ENV, DeviceError, claim_gpus, machine_gpu_indices

from tests.conftest import REPO

pytestmark = pytest.mark.integration

#: A job holding its GPUs: prints what it got, then holds them until ``release`` exists.
_HOLDER = r"""
import os, sys, time
from pathlib import Path
from bloomqg.runtime.devices import claim_gpus
run_dir, count = Path(sys.argv[1]), int(sys.argv[2])
environ = dict(os.environ)
claim_gpus(count, run_dir=run_dir, environ=environ)
print(environ["CUDA_VISIBLE_DEVICES"], flush=True)
while not (run_dir / "release").exists():
    time.sleep(0.05)
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("CUDA_VISIBLE_DEVICES", "SLURM_JOB_ID", "SLURM_JOB_GPUS", INDICES_ENV)}
    return {**env, "PYTHONPATH": str(REPO), COUNT_ENV: "4", **extra}


def _holder(run_dir: Path, count: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", _HOLDER, str(run_dir), str(count)], env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _devices(process: subprocess.Popen) -> set[int]:
    line = process.stdout.readline().strip()
    assert line, process.stderr.read() if process.poll() is not None else "no devices printed"
    return {int(index) for index in line.split(",")}


def test_concurrent_jobs_get_disjoint_devices_and_a_killed_job_frees_its_own(tmp_path: Path) -> None:
    holders = [_holder(tmp_path, 1) for _ in range(2)] + [_holder(tmp_path, 2)]
    try:
        sets = [_devices(process) for process in holders]
        assert sorted(index for devices in sets for index in devices) == [0, 1, 2, 3], sets
        waiting = _holder(tmp_path, 1)  # the pool is empty: this one waits
        time.sleep(1.5)
        assert waiting.poll() is None and not (tmp_path / "release").exists()
        holders.append(waiting)
        victim = holders[2]  # holds two devices
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(timeout=30)
        assert _devices(waiting) < sets[2], "the waiting job should get one of the killed job's devices"
    finally:
        (tmp_path / "release").touch()
        for process in holders:
            process.wait(timeout=60)


def test_a_job_waits_no_longer_than_asked_when_the_pool_is_held(tmp_path: Path) -> None:
    machine = {COUNT_ENV: "1"}
    first = claim_gpus(1, run_dir=tmp_path, environ=dict(machine))
    try:
        with pytest.raises(DeviceError, match="waited 1 s for 1 free GPUs"):
            claim_gpus(1, run_dir=tmp_path, environ=dict(machine), timeout_s=1)
    finally:
        first.release()
    assert claim_gpus(1, run_dir=tmp_path, environ=dict(machine)).indices == (0,)  # released: free again


def test_a_scheduler_assignment_is_kept(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    slurm = {COUNT_ENV: "4", "SLURM_JOB_ID": "17", "CUDA_VISIBLE_DEVICES": "3"}
    claim = claim_gpus(1, run_dir=tmp_path, environ=slurm)
    assert (claim.visible, claim.source) == ("3", "SLURM") and slurm["CUDA_VISIBLE_DEVICES"] == "3"
    assert not (tmp_path / ".snakemake").exists(), "nothing is locked under a scheduler"
    preset = {COUNT_ENV: "4", "CUDA_VISIBLE_DEVICES": "3"}
    assert claim_gpus(2, run_dir=tmp_path, environ=preset).visible == "3"  # set before the job: kept
    with caplog.at_level("WARNING", logger="bloomqg.runtime.devices"):
        assert claim_gpus(1, run_dir=tmp_path, environ={"CUDA_VISIBLE_DEVICES": "0,1"}).visible == "0,1"
    assert "every job started with it sees them all" in caplog.text and "BLOOMQG_GPUS=0,1" in caplog.text


def test_counts_limits_and_a_job_that_asks_for_none(tmp_path: Path) -> None:
    assert machine_gpu_indices({COUNT_ENV: "2"}) == (0, 1)
    with pytest.raises(DeviceError, match="asks for 3 GPUs but the machine shares 2"):
        claim_gpus(3, run_dir=tmp_path, environ={COUNT_ENV: "2"})
    environ = {COUNT_ENV: "2"}
    assert claim_gpus(0, run_dir=tmp_path, environ=environ).visible == "" and environ["CUDA_VISIBLE_DEVICES"] == ""
    environ = {INDICES_ENV: "2,5"}
    claim = claim_gpus(1, run_dir=tmp_path, environ=environ)
    assert claim.indices == (2,) and environ == {INDICES_ENV: "2,5", "CUDA_VISIBLE_DEVICES": "2",
                                                 "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    claim.release()
    with pytest.raises(DeviceError, match="BLOOMQG_GPUS='two'"):
        machine_gpu_indices({INDICES_ENV: "two"})
    environ = {COUNT_ENV: "0"}
    assert claim_gpus(1, run_dir=tmp_path, environ=environ).visible is None and environ == {COUNT_ENV: "0"}


_JOB = """
import os, time
from pathlib import Path
from bloomqg.runtime.job import start_job
snakemake = globals()["snakemake"]
start_job(snakemake)
Path("started").mkdir(exist_ok=True)
Path("started", snakemake.wildcards.job).touch()
deadline = time.monotonic() + 120
while len(list(Path("started").iterdir())) < int(snakemake.params.together):  # all at once, or fail
    assert time.monotonic() < deadline, "the other jobs never ran beside this one"
    time.sleep(0.05)
Path(snakemake.output[0]).write_text(os.environ["CUDA_VISIBLE_DEVICES"])
"""


@pytest.mark.parametrize("gpus_per_job", [1, 2])
def test_snakemake_jobs_at_once_get_disjoint_devices(tmp_path: Path, gpus_per_job: int) -> None:
    together = 4 // gpus_per_job
    (tmp_path / "job.py").write_text(_JOB)
    (tmp_path / "Snakefile").write_text(
        f"rule all:\n    input: expand('out/{{job}}.txt', job=range({together}))\n\n"
        "rule hold:\n    output: 'out/{job}.txt'\n    log: 'logs/{job}.log'\n"
        f"    resources: gpu={gpus_per_job}\n    params: together={together}\n    script: 'job.py'\n"
    )
    run = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "8", "--resources", "gpu=4", "--directory",
         str(tmp_path), "-s", str(tmp_path / "Snakefile")],
        capture_output=True, text=True, timeout=600, env=_env(),
    )
    assert run.returncode == 0, run.stderr[-4000:]
    sets = [set((tmp_path / "out" / f"{job}.txt").read_text().split(",")) for job in range(together)]
    assert all(len(devices) == gpus_per_job for devices in sets), sets
    assert set().union(*sets) == {"0", "1", "2", "3"}, sets
    log = (tmp_path / "logs" / "0.log").read_text()
    assert "GPUs for this job: CUDA_VISIBLE_DEVICES=" in log and f"({gpus_per_job} of the 4" in log


def _claim_and_end(log: Path) -> tuple[float, float, set[str]]:
    """When a job's log says it took its GPUs and when it finished, and which GPUs."""
    import datetime as dt
    import re

    def when(line: str) -> float:
        return dt.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()

    lines = log.read_text().splitlines()
    claim = next(line for line in lines if "GPUs for this job: CUDA_VISIBLE_DEVICES=" in line)
    end = next(line for line in lines if line.endswith("bloomqg: job finished"))
    visible = re.search(r"CUDA_VISIBLE_DEVICES=([0-9,]+)", claim).group(1)
    return when(claim), when(end), set(visible.split(","))


def test_four_generation_jobs_of_the_workflow_get_four_gpus(tmp_path: Path) -> None:
    """The real workflow: four hf generators (one tiny random model, gpus: 1 each) at once. It runs
    under umask 002, so its outputs must be group-writable (docs/operations.md, file modes)."""
    import yaml

    from tests.support.tiny_models import save_standin

    model = save_standin("llama", tmp_path / "tiny-llama")
    config = yaml.safe_load((REPO / ".test" / "config" / "config.yaml").read_text())
    config.update(limit_items=1, strategies=["fgp"], cache_dir=str(tmp_path / "cache"))
    config["datasets"] = {"cs": {**config["datasets"]["cs"], "strategies": ["fgp"]}}
    entry = {"backend": "hf", "model": str(model), "dtype": "float32", "gpus": 1, "params_b": 0.001,
             "generation": {"temperature": 0.0, "max_new_tokens": 4, "do_sample": False}}
    config["models"] = {f"tiny{i}": dict(entry) for i in range(4)}
    config["judges"] = {"rules": {"backend": "rules"}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    targets = [f"results/generations/cs/fgp/tiny{i}/shard-0.parquet" for i in range(4)]
    run = subprocess.run(
        [sys.executable, "-m", "snakemake", *targets, "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path),
         "--configfile", str(tmp_path / "config.yaml"), "--cores", "32", "--resources", "gpu=4"],
        capture_output=True, text=True, timeout=900, env=_env(), preexec_fn=lambda: os.umask(0o002),
    )
    assert run.returncode == 0, run.stderr[-6000:]
    outputs = [p for p in (tmp_path / "results").rglob("*")]
    assert len([p for p in outputs if p.suffix == ".parquet"]) >= 6  # dataset, prompts, 4 shards
    modes = {str(p.relative_to(tmp_path)): oct(stat.S_IMODE(p.stat().st_mode)) for p in outputs}
    assert all(mode == ("0o775" if (tmp_path / path).is_dir() else "0o664") for path, mode in modes.items()), modes
    jobs = [_claim_and_end(tmp_path / f"logs/generate_questions/cs/fgp/tiny{i}/shard-0.log") for i in range(4)]
    for a, (start_a, end_a, gpus_a) in enumerate(jobs):
        for start_b, end_b, gpus_b in jobs[a + 1:]:
            if start_a < end_b and start_b < end_a:  # held at the same time
                assert not gpus_a & gpus_b, jobs
    latest_start = max(start for start, _, _ in jobs)
    assert all(end > latest_start for _, end, _ in jobs), f"the four jobs did not run at once: {jobs}"
    assert set().union(*(gpus for _, _, gpus in jobs)) == {"0", "1", "2", "3"}, jobs


def test_the_gpu_count_comes_from_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without an override the count is what ``nvidia-smi --query-gpu=index`` lists (here a
    stand-in printing what the real one prints on a three-GPU machine); none without it."""
    monkeypatch.setenv("PATH", str(tmp_path))
    assert machine_gpu_indices({}) == ()
    fake = tmp_path / "nvidia-smi"
    fake.write_text('#!/bin/sh\n[ "$1 $2" = "--query-gpu=index --format=csv,noheader" ] || exit 9\n'
                    'printf "0\\n1\\n2\\n"\n')
    fake.chmod(0o755)
    assert machine_gpu_indices({}) == (0, 1, 2)
    assert machine_gpu_indices({COUNT_ENV: "1"}) == (0,)
