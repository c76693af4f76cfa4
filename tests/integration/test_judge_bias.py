"""The judge_bias target against fake judges with planted biases on a loopback server.

Two API generators of different families write the questions; five API judges answer from
:mod:`tests.support.planted_judge_server`: a fair one, one that picks the first-listed Bloom
level on a third of the questions, one that prefers its own family's questions, one whose
verdicts track length, and one that answers differently under another seed; the offline
``rules`` judge runs through the probes too. Each probe must find its planted bias (CI
excluding zero) and nothing for the fair judge; a forced rerun must send zero requests, and
estimate_cost must count the probes' calls (none left to make after the run).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from bloomqg.parquet_io import read_frame
from bloomqg.schemas import BIAS_ESTIMATES, JUDGE_PROBES
from tests.conftest import REPO
from tests.support.planted_judge_server import PlantedJudgeServer

pytestmark = pytest.mark.integration

ITEMS_PER_CELL = 36  # every item of the embedded cs sample
API_JUDGES = {"fair": "beta", "position": "gamma", "selfpref-alpha": "alpha", "length": "delta", "noisy": "epsilon"}


@pytest.fixture(scope="module")
def server():
    planted = PlantedJudgeServer().start()
    try:
        yield planted
    finally:
        planted.stop()


def write_config(workdir: Path, server: PlantedJudgeServer) -> Path:
    api = {"backend": "openai", "base_url": server.base_url, "api_key_env": "BLOOMQG_PLANTED_KEY",
           "max_retries": 2, "timeout_s": 10, "concurrency": 8}
    judges = {name: {**api, "model": name, "family": family, "generation": {"temperature": 0.0, "max_new_tokens": 128}}
              for name, family in API_JUDGES.items()}
    judges["rules"] = {"backend": "rules"}
    config = {
        "seed": 11, "exemplars": 1, "strategies": ["fgp"], "cache_dir": str(workdir / "cache"),
        "datasets": {"cs": {"loader": "embedded", "path": str(REPO / "data" / "cs" / "questions.csv"),
                            "domain": "computer science"}},
        "models": {f"gen-{family}": {**api, "model": f"gen-{family}", "family": family} for family in ("alpha", "beta")},
        "judges": judges,
        "judge_bias": {"judges": list(judges), "items_per_cell": ITEMS_PER_CELL},
        "bootstrap": {"n_resamples": 400, "confidence": 0.95},
    }
    path = workdir / "bias.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def snakemake(workdir: Path, config: Path, *args: str) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
         "--configfile", str(config), "--cores", "2", *args],
        capture_output=True, text=True, timeout=900, env={**os.environ, "BLOOMQG_PLANTED_KEY": "sk-planted"},
    )


def detected(estimates: pd.DataFrame, judge: str, probe: str, statistic: str, criterion: str) -> pd.Series:
    row = estimates[(estimates["judge"] == judge) & (estimates["probe"] == probe)
                    & (estimates["statistic"] == statistic) & (estimates["criterion"] == criterion)]
    assert len(row) == 1, (judge, probe, statistic, criterion)
    return row.iloc[0]


def test_planted_biases_are_found_and_a_rerun_sends_nothing(tmp_path, server):
    config = write_config(tmp_path, server)
    first = snakemake(tmp_path, config, "judge_bias")
    assert first.returncode == 0, first.stderr[-5000:]
    n_questions = 2 * ITEMS_PER_CELL  # two generators, one strategy
    for judge in API_JUDGES:  # base, repeat and order probe: one call each per question
        assert server.by_model[judge] == 3 * n_questions, judge

    estimates = read_frame(tmp_path / "results" / "judge_bias" / "estimates.parquet", BIAS_ESTIMATES)
    probes = read_frame(tmp_path / "results" / "judge_bias" / "probes" / "cs" / "fgp" / "gen-alpha" / "position.parquet",
                        JUDGE_PROBES)
    assert set(probes["probe"]) == {"base", "repeat", "order"} and (probes["status"] == "ok").all()

    # position: the first-listed level on a third of the questions
    for statistic, probe in (("excess_over_repeat", "order"), ("first_position_excess", "position")):
        row = detected(estimates, "position", probe, statistic, "bloom_level")
        assert row["detected"] and row["ci_low"] > 0, row.to_dict()
    # self-preference: yes and Create on its own family's questions
    for criterion in ("readable", "answerable", "bloom_level"):
        row = detected(estimates, "selfpref-alpha", "self_preference", "self_preference", criterion)
        assert row["detected"] and row["ci_low"] > 0, row.to_dict()
    # length: readable only when short, the level rising with length
    assert detected(estimates, "length", "length", "point_biserial", "readable")["ci_high"] < 0
    assert detected(estimates, "length", "length", "spearman", "bloom_level")["ci_low"] > 0
    # consistency: another seed, another answer on about a quarter of the questions
    row = detected(estimates, "noisy", "consistency", "self_agreement", "readable")
    assert row["detected"] and row["ci_high"] < 1
    # its order probe shares the base probe's seed: fewer changes than a repeat, no order bias
    assert not detected(estimates, "noisy", "order", "excess_over_repeat", "readable")["detected"]
    # the fair judge: nothing, on any probe or criterion
    fair = estimates[estimates["judge"] == "fair"]
    assert set(fair["probe"]) == {"order", "position", "consistency", "self_preference", "length"}
    assert not fair["detected"].any(), fair[fair["detected"]].to_dict("records")
    # the offline rules judge runs through the probes; it is deterministic and reads no list order
    rules = estimates[(estimates["judge"] == "rules") & estimates["probe"].isin(["order", "position", "consistency"])]
    assert len(rules) and not rules["detected"].any()
    assert (tmp_path / "results" / "judge_bias" / "judge_bias_positions.png").stat().st_size > 0
    table = (tmp_path / "results" / "judge_bias" / "judge_bias.md").read_text()
    assert "position: first-listed excess" in table and "*" in table

    before = server.requests
    rerun = snakemake(tmp_path, config, "judge_bias", "--forcerun", "probe_judge")
    assert rerun.returncode == 0, rerun.stderr[-5000:]
    assert server.requests == before, "a rerun of judge_bias must be answered from the call cache"

    estimate = snakemake(tmp_path, config, "estimate_cost")
    assert estimate.returncode == 0, estimate.stderr[-5000:]
    table = pd.read_csv(tmp_path / "logs" / "estimate_cost.tsv", sep="\t")
    probed = table[table["role"] == "judge_bias"]
    assert set(probed["name"]) == set(API_JUDGES)
    assert (probed.groupby("name")["requests"].sum() == 3 * n_questions).all()
    assert probed["to_call"].sum() == 0 and server.requests == before
