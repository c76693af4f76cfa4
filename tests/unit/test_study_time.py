"""benchmarks/study_time.py reads a study's cost: job-seconds per rule from logs/benchmarks and
the wall time of its latest run from Snakemake's log."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.scripts import load_script

HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


@pytest.fixture(scope="module")
def study_time():
    return load_script("benchmarks/study_time.py")


def bench(study: Path, rel: str, seconds: float, cpu: float) -> None:
    path = study / "logs" / "benchmarks" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + f"{seconds}\t0:00:00\t1\t1\t1\t1\t0\t0\t90\t{cpu}\n")


def test_a_finished_study_is_summed_per_rule(tmp_path: Path, study_time) -> None:
    bench(tmp_path, "judge_questions/cs/cot/m/smollm2.tsv", 10.5, 10.0)
    bench(tmp_path, "judge_questions/cs/cot/m/rules.tsv", 1.5, 1.0)
    bench(tmp_path, "build_report/results.tsv", 4.0, 3.0)
    bench(tmp_path, "make_tables.tsv", 2.0, 1.5)
    log = tmp_path / ".snakemake" / "log"
    log.mkdir(parents=True)
    (log / "2026-12-06T120000.000000.snakemake.log").write_text(
        "Building DAG of jobs...\n[Sun Dec  6 12:00:05 2026]\nFinished jobid: 1 (Rule: a)\n"
        "1 of 2 steps (50%) done\n[Sun Dec  6 12:07:30 2026]\nFinished jobid: 0 (Rule: all)\n"
        "2 of 2 steps (100%) done\n")
    (log / "2026-12-06T130000.000000.snakemake.log").write_text("Nothing to be done.\n")  # a no-op run
    result = study_time.summary(tmp_path, None)
    assert result["rules"] == {
        "judge_questions": {"jobs": 2, "seconds": 12.0, "cpu_seconds": 11.0},
        "build_report": {"jobs": 1, "seconds": 4.0, "cpu_seconds": 3.0},
        "make_tables": {"jobs": 1, "seconds": 2.0, "cpu_seconds": 1.5},
    }
    assert result["job_seconds"] == 18.0 and result["jobs"] == 4
    assert result["wall_s"] == 450.0 and result["last_run"]["steps"] == "2 of 2"


def test_a_folder_without_benchmarks_is_refused(tmp_path: Path, study_time) -> None:
    with pytest.raises(SystemExit, match="no benchmark files"):
        study_time.summary(tmp_path, None)


def test_since_keeps_one_runs_jobs(tmp_path: Path, study_time) -> None:
    """benchmarks/summary_time.py reads the jobs of the run it timed: the files written since."""
    import os

    bench(tmp_path, "judge_questions/cs/cot/m/rules.tsv", 1.5, 1.0)
    bench(tmp_path, "make_tables.tsv", 2.0, 1.5)
    old = tmp_path / "logs" / "benchmarks" / "judge_questions" / "cs" / "cot" / "m" / "rules.tsv"
    os.utime(old, (1_000, 1_000))
    assert study_time.read_benchmarks(tmp_path, since=2_000) == {"make_tables": {"jobs": 1, "seconds": 2.0, "cpu_seconds": 1.5}}
    assert set(study_time.read_benchmarks(tmp_path)) == {"judge_questions", "make_tables"}
