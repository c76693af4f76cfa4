"""Planning only (snakemake -n): the paper preset, and bad input failing before any job."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import yaml

from tests.conftest import REPO

SNAKEMAKE = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile")]


def dry_run(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*SNAKEMAKE, "--directory", str(workdir), "-n", "--cores", "2", *args],
        capture_output=True, text=True, timeout=600,
    )


def test_paper_preset_plans_the_whole_study(tmp_path, release_dir):
    started = time.monotonic()
    result = dry_run(
        tmp_path, "--configfile", str(REPO / "configs" / "paper.yaml"),
        "--config", f"release_dir={release_dir}",
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr[-4000:]
    plan = result.stdout
    paper = yaml.safe_load((REPO / "configs" / "paper.yaml").read_text())
    for dataset, spec in paper["datasets"].items():
        for strategy in spec["strategies"]:
            for model in paper["models"]:
                assert f"generations/{dataset}/{strategy}/{model}/shard-0.parquet" in plan
                for judge in paper["judges"]:
                    assert f"judgments/{dataset}/{strategy}/{model}/{judge}.parquet" in plan
    assert "rule generate_questions:" in plan and "rule judge_questions:" in plan
    print(f"paper dry run planned in {elapsed:.1f} s")


def write_config(tmp_path: Path, mutate) -> Path:
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    mutate(config)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def fails_naming(tmp_path: Path, mutate, *culprits: str) -> str:
    config = write_config(tmp_path, mutate)
    result = dry_run(tmp_path, "--configfile", str(config))
    assert result.returncode != 0, "a bad config must stop the run"
    message = result.stdout + result.stderr
    for culprit in culprits:
        assert culprit in message, f"{culprit!r} not named in:\n{message[-3000:]}"
    assert "rule generate_questions" not in result.stdout  # nothing was planned
    return message


def test_unknown_key_is_named(tmp_path):
    fails_naming(tmp_path, lambda c: c["models"]["smollm2-135m"].update(temprature=0.5), "temprature", "models.smollm2-135m")


def test_wrong_type_is_named(tmp_path):
    fails_naming(tmp_path, lambda c: c.update(exemplars="two"), "exemplars", "bad.yaml")


def test_missing_dataset_file_is_named(tmp_path):
    fails_naming(tmp_path, lambda c: c["datasets"]["cs"].update(path="data/cs/nope.csv"), "datasets.cs.path", "nope.csv")


def test_dataset_missing_column_is_named(tmp_path):
    bad = tmp_path / "no_units.csv"
    bad.write_text("question,bloom_level\nWhat is a stack?,Remember\n")
    fails_naming(tmp_path, lambda c: c["datasets"]["cs"].update(path=str(bad)), "knowledge_units", "no_units.csv")


def test_unknown_bloom_level_is_named(tmp_path):
    bad = tmp_path / "bad_level.csv"
    bad.write_text("question,knowledge_units,bloom_level\nWhat is a stack?,Stacks,Remember\nWhy?,Stacks,Memorize\n")
    fails_naming(tmp_path, lambda c: c["datasets"]["cs"].update(path=str(bad)), "Memorize", "bad_level.csv", "bloom_level")


def test_a_judge_base_url_carrying_a_token_stops_planning_and_is_written_nowhere(tmp_path):
    token = "tok-Hq83ZpW61mRv"
    judge = {"backend": "openai", "model": "gpt-4o", "base_url": f"https://api.example.com/v1?token={token}"}
    message = fails_naming(tmp_path, lambda c: c["judges"].update(gpt4o=judge),
                           "judges.gpt4o.base_url", "a query string", "api_key_env", "bad.yaml")
    assert token not in message
    for path in tmp_path.rglob("*"):  # .snakemake/ included; the config file itself is the user's
        if path.is_file() and path.name != "bad.yaml":
            assert token.encode() not in path.read_bytes(), f"the token reached {path}"


def test_paper_preset_without_release_plans_its_download(tmp_path):
    result = dry_run(tmp_path, "--configfile", str(REPO / "configs" / "paper.yaml"))
    assert result.returncode == 0, result.stderr[-4000:]
    assert "rule download_release:" in result.stdout
    assert "resources/llm-eval-release/dataset/computer/Data_Structure.csv" in result.stdout
