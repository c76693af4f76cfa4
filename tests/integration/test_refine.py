"""The built-in two-pass strategy ``refine`` end to end on the default model (SmolLM2-135M, CPU):
the workflow builds its prompts (an FGP draft, then a rewrite against the targets), generates
both passes, and the generations file keeps both passes' raw texts, tokens and timings, with
the last pass's question as the row's.  Two items, short completions: about a minute."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from bloomqg.store.frames import GENERATIONS, PROMPTS
from bloomqg.store.parquet_io import read_frame, read_provenance
from tests.conftest import seed_converted_smollm2
from tests.integration.test_workflow import TEST_CONFIG, snakemake

pytestmark = pytest.mark.integration

CELL = "cs/refine/smollm2-135m"


def test_refine_runs_both_passes_on_the_default_model(tmp_path, smollm2_dir):
    config = yaml.safe_load(TEST_CONFIG.read_text())
    config.update(limit_items=2, cache_dir=str(tmp_path / "cache"))
    config["datasets"] = {"cs": {**config["datasets"]["cs"], "strategies": ["refine"]}}
    config["models"]["smollm2-135m"]["generation"]["max_new_tokens"] = 32
    path = tmp_path / "refine.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    seed_converted_smollm2(tmp_path, smollm2_dir)
    snakemake(tmp_path, path, f"results/generations/{CELL}.parquet")

    prompts = read_frame(tmp_path / "results" / "prompts" / "cs" / "refine.parquet", PROMPTS)
    assert [p["name"] for p in json.loads(prompts["passes_json"].iloc[0])] == ["generate", "revise"]
    generations = read_frame(tmp_path / "results" / "generations" / f"{CELL}.parquet", GENERATIONS)
    assert len(generations) == 2 and set(generations["strategy"]) == {"refine"}
    rows = generations.to_dict("records")
    both = [row for row in rows if len(json.loads(row["passes_json"])) == 2]
    assert both, f"no row reached the second pass: {[json.loads(r['passes_json']) for r in rows]}"
    for row in rows:
        passes = json.loads(row["passes_json"])
        assert passes[0]["pass"] == "generate" and passes[0]["raw_text"]
        if len(passes) == 1:  # the draft wrote no question: the row ends there, naming the pass
            assert row["parse_status"] != "ok" and row["parse_error"].startswith("pass generate:")
            continue
        draft, revised = passes
        assert revised["pass"] == "revise"
        for record in passes:
            assert record["n_prompt_tokens"] > 0 and record["n_completion_tokens"] > 0
            assert record["latency_s"] is not None and record["latency_s"] >= 0
        # the row is the last pass's; its tokens and time are both passes'
        # (a revision that wrote no question: null in the pass's JSON, NaN in the frame's column)
        assert (row["raw_text"], row["parse_status"]) == (revised["raw_text"], revised["parse_status"])
        assert (None if pd.isna(row["new_question"]) else row["new_question"]) == revised["new_question"]
        assert row["n_completion_tokens"] == draft["n_completion_tokens"] + revised["n_completion_tokens"]
        assert row["n_prompt_tokens"] == draft["n_prompt_tokens"] + revised["n_prompt_tokens"]
        assert revised["raw_text"].startswith('{"question": "')  # the second pass is prefilled too
    # one row per prompt, whatever the number of calls
    assert read_provenance(tmp_path / "results" / "generations" / f"{CELL}.parquet")["n_prompts"] == 2
