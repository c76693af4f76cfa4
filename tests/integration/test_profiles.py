"""The profiles plan the paper's study as a cluster needs it (dry runs; no scheduler needed):
every generation job asks for its model's GPU, memory and wall time, every API job for an
``api`` slot, and the SLURM profile's settings are ones the executor plugin accepts."""

from __future__ import annotations

import re
import subprocess
import sys

import yaml

from tests.conftest import REPO


def planned_resources(plan: str) -> list[tuple[str, dict[str, str], dict[str, str]]]:
    """(rule, wildcards, resources) of every job in a dry run's output."""
    jobs, rule, wildcards = [], None, {}
    for line in plan.splitlines():
        text = line.strip()
        if header := re.match(r"^(?:local)?rule (\w+):$", text):
            rule, wildcards = header.group(1), {}
        elif text.startswith("wildcards:"):
            wildcards = dict(pair.split("=", 1) for pair in text.split(":", 1)[1].strip().split(", "))
        elif text.startswith("resources:") and rule:
            resources = dict(pair.split("=", 1) for pair in text.split(":", 1)[1].strip().split(", "))
            jobs.append((rule, wildcards, resources))
    return jobs


def test_slurm_profile_plans_the_paper_study_with_gpus_and_api_slots(tmp_path, release_dir):
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path),
         "-n", "--profile", str(REPO / "profiles" / "slurm"),
         "--configfile", str(REPO / "configs" / "paper.yaml"), "--config", f"release_dir={release_dir}"],
        capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    paper = yaml.safe_load((REPO / "configs" / "paper.yaml").read_text())
    jobs = planned_resources(result.stdout)
    generation = [(wc, res) for rule, wc, res in jobs if rule == "generate_questions"]
    judging = [(wc, res) for rule, wc, res in jobs if rule == "judge_questions"]
    assert generation and judging
    for wildcards, resources in generation:
        entry = paper["models"][wildcards["model"]]
        if entry["backend"] == "hf":
            assert resources["gpu"] == "1" and resources["api"] == "0", (wildcards, resources)
            assert resources["mem_mb"] == str(entry["mem_mb"]) and resources["runtime"] == str(entry["runtime_min"])
        else:
            assert resources["gpu"] == "0" and resources["api"] == "1", (wildcards, resources)
    for wildcards, resources in judging:  # the paper's judges are all OpenAI models
        assert resources["api"] == "1" and resources["gpu"] == "0", (wildcards, resources)


def test_profiles_cap_gpus_and_api_jobs():
    default = yaml.safe_load((REPO / "profiles" / "default" / "config.yaml").read_text())
    slurm = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    assert {"gpu=1", "api=4"} <= set(default["resources"])
    assert "api=4" in slurm["resources"] and slurm["executor"] == "slurm" and slurm["retries"] >= 1
    partitions = yaml.safe_load((REPO / "profiles" / "slurm" / slurm["slurm-partition-config"]).read_text())
    assert any(p.get("max_gpu", 0) > 0 for p in partitions["partitions"].values())
    assert any(p.get("max_gpu", 0) == 0 for p in partitions["partitions"].values())
