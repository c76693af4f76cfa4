"""Edits to a finished study rerun exactly what they invalidate, read off Snakemake's own plan.

A small API-only study (two generator models on a loopback server; two judges, the fewest a
judge can be removed from: an API one on another loopback server and the rules judge) runs
once; each test then edits a copy of its config and dry-runs it: adding a model plans only that
model's jobs and the aggregates, adding a strategy plans only that strategy's jobs and the
aggregates, removing a judge plans votes and below but no generation or judging, changing one
model's decoding plans only that model's chain, and an unchanged config, or one with every
default written out, plans nothing. (A template edit: test_workflow.py.)
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from tests.integration.test_api_workflow import generator_and_judge
from tests.integration.test_workflow import planned_jobs

pytestmark = pytest.mark.integration

MODELS = ("api-a", "api-b")
JUDGES = ("rules", "judge-a")
#: One strategy: the plans are per model and per judge, and one cell per model shows them.
STRATEGIES = ("fgp",)
#: Rules that summarise all cells: any change to the set of cells or votes reruns them (the
#: robustness of the headline comparisons reads every cell's votes, the item explorer every
#: cell's generations, votes and metrics, the labels plan every cell's votes).
AGGREGATES = {"aggregate_metrics": 1, "judge_robustness": 1, "study_plan": 1, "answer": 1, "make_tables": 1, "plot_figures": 1,
              "build_explorer": 1, "annotation_plan": 1, "build_report": 1, "bundle_report": 1, "all": 1}


@pytest.fixture(scope="module")
def servers():
    question = json.dumps({"question": "How would you design a queue from two stacks?",
                           "bloom_level": "Create", "knowledge_units": ["Stack"]})
    with generator_and_judge(question) as ports:
        yield ports


def api_entry(name: str, port: int) -> dict:
    return {"backend": "openai", "model": name, "base_url": f"http://127.0.0.1:{port}/v1",
            "api_key_env": "BLOOMQG_TEST_KEY", "concurrency": 4, "max_retries": 2,
            "generation": {"temperature": 0.9, "max_new_tokens": 64}}


def snakemake(workdir: Path, config: dict, *args: str) -> subprocess.CompletedProcess:
    path = workdir / "edited.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
         "--configfile", str(path), "--cores", "2", *args],
        capture_output=True, text=True, timeout=900, env={**os.environ, "BLOOMQG_TEST_KEY": "sk-test"},
    )
    assert result.returncode == 0, result.stderr[-5000:]
    return result


@pytest.fixture(scope="module")
def study(servers, tmp_path_factory) -> tuple[Path, dict]:
    generator_port, judge_port = servers
    workdir = tmp_path_factory.mktemp("rerun")
    judges = {"rules": {"backend": "rules"}}
    judges.update({name: api_entry(name, judge_port) for name in JUDGES[1:]})
    config = {
        "seed": 5, "limit_items": 4, "exemplars": 1, "strategies": list(STRATEGIES),
        "cache_dir": str(workdir / "cache"),
        "datasets": {"cs": {"loader": "embedded", "path": str(REPO / "data" / "cs" / "questions.csv"),
                            "domain": "computer science"}},
        "models": {name: api_entry(name, generator_port) for name in MODELS},
        "judges": judges,
        "bootstrap": {"n_resamples": 100, "confidence": 0.95},
    }
    snakemake(workdir, config)
    return workdir, config


def planned_wildcards(plan: str, rule: str) -> list[dict[str, str]]:
    """The wildcards of each job of ``rule`` in a dry run's output."""
    jobs, current = [], None
    for line in plan.splitlines():
        header = re.match(r"^(?:local)?rule (\w+):$", line.strip())
        if header:
            current = header.group(1)
        elif current == rule and line.strip().startswith("wildcards:"):
            jobs.append(dict(pair.split("=", 1) for pair in line.split(":", 1)[1].strip().split(", ")))
    return jobs


def dry_run(study, mutate) -> str:
    workdir, config = study
    edited = copy.deepcopy(config)
    mutate(edited)
    return snakemake(workdir, edited, "-n").stdout


def test_nothing_changed_plans_nothing(study):
    plan = dry_run(study, lambda c: None)
    assert planned_jobs(plan) == {}, plan[-3000:]
    assert "Nothing to be done" in plan


def test_adding_a_model_plans_only_its_jobs_and_the_aggregates(study, servers):
    new = "api-c"
    plan = dry_run(study, lambda c: c["models"].update({new: api_entry(new, servers[0])}))
    cells = len(STRATEGIES)
    assert planned_jobs(plan) == {
        "generate_questions": cells, "merge_generations": cells, "judge_questions": cells * len(JUDGES),
        "vote_judgments": cells, "score_metrics": cells, **AGGREGATES,
    }, plan[-3000:]
    for rule in ("generate_questions", "judge_questions", "vote_judgments", "score_metrics"):
        assert {wc["model"] for wc in planned_wildcards(plan, rule)} == {new}, rule


def test_removing_a_judge_reruns_votes_and_below_but_no_generation(study):
    plan = dry_run(study, lambda c: c["judges"].pop("judge-a"))
    cells = len(STRATEGIES) * len(MODELS)
    assert planned_jobs(plan) == {"vote_judgments": cells, "score_metrics": cells, **AGGREGATES}, plan[-3000:]


def test_changing_one_models_decoding_reruns_only_that_model(study):
    plan = dry_run(study, lambda c: c["models"]["api-a"]["generation"].update(temperature=0.5))
    cells = len(STRATEGIES)
    assert planned_jobs(plan) == {
        "generate_questions": cells, "merge_generations": cells, "judge_questions": cells * len(JUDGES),
        "vote_judgments": cells, "score_metrics": cells, **AGGREGATES,
    }, plan[-3000:]
    for rule in ("generate_questions", "merge_generations", "judge_questions", "vote_judgments", "score_metrics"):
        assert {wc["model"] for wc in planned_wildcards(plan, rule)} == {"api-a"}, rule


def test_adding_a_strategy_plans_only_its_jobs_and_the_aggregates(study):
    plan = dry_run(study, lambda c: c.update(strategies=[*STRATEGIES, "cot"]))
    cells = len(MODELS)
    assert planned_jobs(plan) == {
        "build_prompts": 1, "generate_questions": cells, "merge_generations": cells,
        "judge_questions": cells * len(JUDGES), "vote_judgments": cells, "score_metrics": cells, **AGGREGATES,
    }, plan[-3000:]
    for rule in ("build_prompts", "generate_questions", "judge_questions", "vote_judgments", "score_metrics"):
        assert {wc["strategy"] for wc in planned_wildcards(plan, rule)} == {"cot"}, rule


def with_every_default(config: dict) -> dict:
    """``config`` with every key the schema gives a default written out: the top level and its
    objects, each dataset, model (less the in-process settings an API model refuses) and judge,
    their decoding blocks included."""
    from bloomqg.study.config import _properties, _resolve_ref, apply_defaults
    from bloomqg.judges.registry import config_schema

    schema = config_schema().schema
    defs = schema["$defs"]

    def fill(entry: dict, ref: str, skip: set[str] = frozenset()) -> dict:
        filled = dict(entry)
        for key, prop in _properties({"$ref": ref}, defs).items():
            prop = _resolve_ref(prop, defs) if isinstance(prop, dict) else {}
            if key in skip:
                continue
            if "default" in prop:
                filled.setdefault(key, prop["default"])
            elif key == "generation":
                filled[key] = fill(filled.get(key) or {}, "#/$defs/generation")
        return filled

    hf_only = set(defs["model"]["then"]["properties"])
    written = apply_defaults(config)
    written["datasets"] = {name: {**fill(spec, "#/$defs/dataset"), "domain": spec.get("domain", name),
                                  "strategies": spec.get("strategies", list(STRATEGIES))}
                           for name, spec in config["datasets"].items()}
    written["models"] = {name: fill(spec, "#/$defs/model", hf_only if spec["backend"] == "openai" else set())
                         for name, spec in config["models"].items()}
    written["judges"] = {name: fill(spec, f"#/$defs/judge_{spec['backend']}") for name, spec in config["judges"].items()}
    return written


def test_writing_every_default_out_plans_nothing(study):
    def write_defaults(config: dict) -> None:
        written = with_every_default(config)
        assert written["judges"]["rules"]["min_words"] == 4 and written["datasets"]["cs"]["shards"] == 1
        assert written["models"]["api-a"]["generation"]["top_p"] == 1.0
        config.clear()
        config.update(written)

    plan = dry_run(study, write_defaults)
    assert planned_jobs(plan) == {}, plan[-3000:]
