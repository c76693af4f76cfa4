"""The tiny study (its computer-science cells) through ``--profile profiles/slurm`` on a real
single-node SLURM started here.

The cluster (tests/support/slurm_cluster.py) has one stand-in GPU, so the GPU request of
``generate_questions`` is really scheduled. The test asserts that the study's outputs are those
of a local run (row counts per stage; afterwards a local dry run finds nothing to do), that the
remote jobs went through sbatch (slurmctld's job table and the job-completion log), that every
generation job asked for its GPU, and that a generation job cancelled midway (``scancel``, as a
preemption would) is resubmitted by the profile's retries and finishes with at most one batch
redone and no item lost or duplicated. Needs root (apt-get, daemons); skips otherwise.

Site overrides on the command line, as a user adapting the profile would pass them: the status
command (this cluster keeps no accounting database, so ``squeue`` instead of ``sacct``), a short
first status check and 2-s rounds between checks (this cluster's jobs last seconds, and a job
that needs another's output waits for the round that sees it finish; Snakemake's default is
10 s), and ``--max-threads 1`` so two jobs share the 2-CPU node.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from bloomqg.store.parquet_io import read_frame, read_provenance
from bloomqg.store.frames import GENERATIONS, PROMPTS
from tests.conftest import REPO
from tests.integration.test_hf_generation import _complete_batch_lines
from tests.integration.test_workflow import check_study_outputs, planned_jobs, tiny_config

pytestmark = [pytest.mark.slurm, pytest.mark.integration]

SITE_OVERRIDES = (
    "--slurm-status-command", "squeue",
    "--slurm-init-seconds-before-status-checks", "2",
    "--seconds-between-status-checks", "2",
    "--slurm-keep-successful-logs",
    "--max-threads", "1",
)
#: Hard limits (timeout -s KILL) so a wedged scheduler cannot hang CI.
STUDY_LIMIT_S = 1500
PREEMPT_LIMIT_S = 600
#: Items of the cancelled generation run (one batch each).
N_PREEMPT_ITEMS = 4


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("the SLURM test installs packages and starts daemons: it needs root")
    from tests.support.slurm_cluster import SlurmCluster, install_packages

    install_packages()
    cluster = SlurmCluster(Path("/tmp") / f"bloomqg-slurm-{os.getpid()}")
    try:
        yield cluster.start()
    finally:
        cluster.stop()
        # A clean teardown: every daemon stopped by its PID, no PID file left behind.
        assert not cluster.processes, f"daemons still held: {list(cluster.processes)}"
        assert not [p for p in cluster.pid_files() if p.exists()], "PID files left behind"
        assert not cluster.linked and not Path("/etc/slurm/slurm.conf").is_symlink()


def slurm_snakemake(cluster, workdir: Path, config: Path, *args: str, limit_s: int, wait: bool = True):
    command = [
        "timeout", "-s", "KILL", str(limit_s),
        sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
        "--configfile", str(config), "--profile", str(REPO / "profiles" / "slurm"), *SITE_OVERRIDES, *args,
    ]
    env = {**cluster.env, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    if not wait:
        return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    return subprocess.run(command, capture_output=True, text=True, env=env)


def gpu_config(workdir: Path) -> Path:
    """The tiny study cut to one cell, computer science under FGP, with all three judges (every
    kind of remote job: generation, an LLM judge on the GPU, two judges without one, at a fifth of
    its cost), its model entry asking for one GPU as a cluster user's would."""
    path = tiny_config(workdir)
    config = yaml.safe_load(path.read_text())
    config["datasets"] = {"cs": {**config["datasets"]["cs"], "strategies": ["fgp"]}}
    config["models"]["smollm2-135m"]["gpus"] = 1
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def rule_of(job: dict[str, str]) -> str:
    """The plugin writes ``rule_<name>_wildcards_...`` into each job's comment."""
    comment = job.get("Comment", "")
    return comment.split("_wildcards", 1)[0].removeprefix("rule_")


@pytest.fixture(scope="module")
def slurm_study(cluster, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("slurm-study")
    config = gpu_config(workdir)
    started = time.monotonic()
    result = slurm_snakemake(cluster, workdir, config, limit_s=STUDY_LIMIT_S)
    elapsed = time.monotonic() - started
    assert result.returncode == 0, f"{result.stdout[-6000:]}\n{result.stderr[-6000:]}\n{cluster.logs()}"
    print(f"tiny study through profiles/slurm: {elapsed:.0f} s")
    return workdir, config, result


def test_study_through_the_profile_matches_a_local_run(slurm_study):
    workdir, config, _ = slurm_study
    check_study_outputs(workdir, config)
    # The local workflow (default profile, no scheduler) finds every output present and current.
    local = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
         "--configfile", str(config), "--cores", "2", "-n"],
        capture_output=True, text=True, timeout=300,
    )
    assert local.returncode == 0, local.stderr[-3000:]
    assert "Nothing to be done" in local.stdout + local.stderr, planned_jobs(local.stdout)


def test_remote_jobs_went_through_sbatch_with_their_gpu(cluster, slurm_study):
    workdir, config, _ = slurm_study
    cfg = yaml.safe_load(config.read_text())
    n_cells = sum(len(s["strategies"]) for s in cfg["datasets"].values()) * len(cfg["models"])
    jobs = [job for job in cluster.jobs() if job.get("WorkDir") == str(workdir)]
    by_rule: dict[str, list[dict]] = {}
    for job in jobs:
        by_rule.setdefault(rule_of(job), []).append(job)
    # Exactly the remote rules went to the scheduler; the small ones ran on the submit host.
    assert set(by_rule) == {"prepare_model", "generate_questions", "judge_questions", "judge_all_cells"}, \
        sorted(by_rule)
    assert len(by_rule["generate_questions"]) == n_cells
    # A judge that loads a model (hf, embedding) judges all cells in one job; rules one per cell.
    loading = {name for name, spec in cfg["judges"].items() if spec["backend"] in ("hf", "embedding")}
    assert len(by_rule["judge_all_cells"]) == len(loading)
    assert len(by_rule["judge_questions"]) == n_cells * (len(cfg["judges"]) - len(loading))
    assert all(job["JobState"] == "COMPLETED" for job in jobs), {j["JobId"]: j["JobState"] for j in jobs}
    for job in by_rule["generate_questions"]:
        assert job.get("TresPerJob") == "gres:gpu:1", job  # sbatch --gpus=1
        assert job["Partition"] == "gpu", job              # chosen for its GPU (partitions.yaml)
    # An hf judge runs the GPU model entry's weights, so its job asks for the GPU too; the rules
    # and embedding judges and the model conversion ask for none.
    hf_judges = {name for name, spec in cfg["judges"].items() if spec["backend"] == "hf"}
    assert hf_judges
    for job in by_rule["judge_questions"] + by_rule["judge_all_cells"]:
        asks_gpu = job.get("TresPerJob") == "gres:gpu:1"
        assert asks_gpu == (job["Comment"].rsplit("_", 1)[-1] in hf_judges), job
    assert not by_rule["prepare_model"][0].get("TresPerJob")
    # The job-completion log, kept after slurmctld forgets a job, has every one of them.
    finished = {job["JobId"] for job in cluster.finished_jobs()}
    assert {job["JobId"] for job in jobs} <= finished


def test_cancelled_generation_job_is_resubmitted_and_resumes(cluster, slurm_study):
    """Last in the module: it re-plans the study's cs/fgp cell with more items in small batches.

    4 items of one batch each: one more item than the study's, so generation is planned again;
    the cancel comes once the first batch is saved, leaving at least two to do, so the retry
    shows both a resume and at most one batch redone. (6 items: two batches more in the retry,
    6 s of it on one thread, for nothing the claim reads.)"""
    workdir, config, _ = slurm_study
    cfg = yaml.safe_load(config.read_text())
    cfg["limit_items"] = N_PREEMPT_ITEMS
    cfg["models"]["smollm2-135m"]["batch_size"] = 1  # one batch an item: a cancel lands mid-job
    path = workdir / "preempt.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    target = "results/generations/cs/fgp/smollm2-135m.parquet"
    checkpoint = Path(cfg["cache_dir"]) / "checkpoints/generate_questions/cs/fgp/smollm2-135m/shard-0"

    run = slurm_snakemake(cluster, workdir, path, target, limit_s=PREEMPT_LIMIT_S, wait=False)
    try:
        deadline = time.monotonic() + PREEMPT_LIMIT_S / 2
        while len(_complete_batch_lines(checkpoint)) < 1:
            assert run.poll() is None, f"the run ended before a batch was saved:\n{run.stdout.read()[-5000:]}"
            assert time.monotonic() < deadline, "no batch checkpointed in time"
            time.sleep(0.2)
        running = [job for job in cluster.jobs()
                   if rule_of(job) == "generate_questions" and job["JobState"] == "RUNNING"]
        assert len(running) == 1, running
        cancelled = running[0]["JobId"]
        assert cluster.run("scancel", cancelled).returncode == 0
        output, _ = run.communicate(timeout=PREEMPT_LIMIT_S)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, f"{output[-6000:]}\n{cluster.logs()}"

    generation_jobs = [job for job in cluster.jobs()
                       if rule_of(job) == "generate_questions" and int(job["JobId"]) >= int(cancelled)]
    states = {job["JobId"]: job["JobState"] for job in generation_jobs}
    assert states[cancelled] == "CANCELLED" and list(states.values()).count("COMPLETED") == 1, states

    prompts = read_frame(workdir / "results/prompts/cs/fgp.parquet", PROMPTS)
    generations = read_frame(workdir / target, GENERATIONS)
    assert len(prompts) == N_PREEMPT_ITEMS
    assert sorted(generations["prompt_id"]) == sorted(prompts["prompt_id"])  # none lost, none twice
    shard = workdir / "results/generations/cs/fgp/smollm2-135m/shard-0.parquet"
    resumed = read_provenance(shard)["resumed_from_batches"]
    assert resumed >= 1
    # Batches computed over both attempts (the cancelled job's log and the retry's): at most the
    # one in flight when the job was cancelled is computed twice.
    logs = sorted((workdir / ".snakemake" / "slurm_logs" / "rule_generate_questions").rglob("*.log"))
    computed = sum(log.read_text(errors="replace").count("bloomqg.generation.hf.generator: batch ") for log in logs
                   if int(log.stem) >= int(cancelled))
    assert len(prompts) <= computed <= len(prompts) + 1, (computed, [str(p) for p in logs])
