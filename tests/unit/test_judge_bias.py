"""The judge_bias probes' design, plumbing and statistics, with offline judges and a recording LLM."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from bloomqg.inputs.bloom import BLOOM_LEVELS
from bloomqg.inputs.datasets import load_dataset
from bloomqg.inputs.chat import Completion
from bloomqg.inputs.specs import study_spec
from bloomqg.judges.bias.design import REPEAT_SEED_OFFSET, bias_sample, judge_bias_settings, probe_plan
from bloomqg.judges.bias.probe import probe_judge, probe_requests
from bloomqg.judges.bias.stats import bias_estimates, fisher_z_ci
from bloomqg.judges.rubric import load_rubric
from bloomqg.store.parquet_io import to_table
from bloomqg.store.frames import BIAS_ESTIMATES, CRITERIA, JUDGE_PROBES
from tests.conftest import REPO
from tests.support.specs import judge_spec


@pytest.fixture(scope="module")
def cs() -> tuple[pd.DataFrame, pd.DataFrame]:
    dataset = load_dataset("cs", {"loader": "embedded", "path": str(REPO / "data" / "cs" / "questions.csv")},
                           base_dir=REPO)
    generations = pd.DataFrame([{
        "prompt_id": f"{row.item_id}:fgp", "item_id": row.item_id, "dataset": "cs", "strategy": "fgp", "model": "m",
        "original_question": row.question, "original_bloom_level": row.bloom_level,
        "original_knowledge_units": list(row.knowledge_units), "raw_text": None,
        "new_question": None if n == 3 else f"Explain, with an example, why this matters: {row.question}",
        "identified_bloom_level": None, "identified_knowledge_units": None, "parse_status": "ok", "parse_error": None,
        "finish_reason": "stop", "n_prompt_tokens": None, "n_completion_tokens": None, "latency_s": None,
        "batch_index": None, "seed": 0, "prompt_hash": None,
    } for n, row in enumerate(dataset.itertuples(index=False))])
    return dataset, generations


def test_plan_is_a_latin_square_of_the_levels_and_deterministic():
    ids = [f"q{i:02d}" for i in range(30)]
    plan = probe_plan(ids, ["A", "B", "C"], seed=5, cell="cs/fgp/m")
    assert plan == probe_plan(list(reversed(ids)), ["A", "B", "C"], seed=5, cell="cs/fgp/m")
    base, repeat, *order = plan
    assert (base.probe, repeat.probe) == ("base", "repeat") and base.level_order == BLOOM_LEVELS
    assert repeat.seed == base.seed + REPEAT_SEED_OFFSET and {g.seed for g in order} == {5}
    assert len(order) == 6 and sorted(q for g in order for q in g.prompt_ids) == sorted(ids)
    for position in range(6):  # every level once at every position
        assert sorted(g.level_order[position] for g in order) == sorted(BLOOM_LEVELS)
    assert probe_plan(ids, ["A", "B", "C"], seed=6, cell="cs/fgp/m") != plan
    assert len({g.unit_order for g in order}) == 1 and order[0].unit_order != ("A", "B", "C")


def test_settings_name_unknown_judges():
    from bloomqg.inputs.specs import study_spec

    config = {"seed": 3, "judges": {"rules": {"backend": "rules"}}, "models": {}}
    assert judge_bias_settings(study_spec(config)) is None
    settings = judge_bias_settings(study_spec({**config, "judge_bias": {"judges": ["rules"]}}))
    assert settings.items_per_cell == 30 and settings.seed == 3
    with pytest.raises(ValueError, match=r"judge_bias.judges: \['gpt'\]"):
        judge_bias_settings(study_spec({**config, "judge_bias": {"judges": ["gpt"]}}))


def test_a_judge_family_is_its_own_else_that_of_the_model_it_borrows():
    from bloomqg.judges.bias.design import families
    from bloomqg.inputs.specs import study_spec

    study = study_spec({"seed": 1, "models": {"qwen": {"backend": "hf", "model": "q", "family": "qwen"},
                                              "other": {"backend": "hf", "model": "o"}},
                        "judges": {"own": {"backend": "openai", "model": "g", "family": "gpt"},
                                   "borrowed": {"backend": "hf", "model_ref": "qwen"},
                                   "none": {"backend": "rules"}}})
    assert families(study) == {"judges": {"own": "gpt", "borrowed": "qwen", "none": None},
                               "generators": {"qwen": "qwen", "other": None}}


@pytest.mark.parametrize("name, spec", [("rules", {"backend": "rules"}), ("minilm", {"backend": "embedding"})])
def test_offline_judges_run_through_the_probes_and_do_not_move(cs, name, spec):
    dataset, generations = cs
    probes = probe_judge(generations, judge_spec(name, spec), dataset=dataset, domain="computer science",
                         items_per_cell=20, seed=7)
    to_table(probes, JUDGE_PROBES)
    assert len(probes) == 20 * 3 * len(CRITERIA) and "cs-0004:fgp" not in set(probes["prompt_id"])
    estimates, positions = bias_estimates(probes, {"judges": {name: None}, "generators": {"m": None}},
                                          n_resamples=200)
    to_table(estimates, BIAS_ESTIMATES)
    moved = estimates[estimates["probe"].isin(["order", "consistency"])]
    changed = moved[moved["statistic"] == "share_changed"]
    assert (changed["value"].dropna() == 0).all()
    assert not moved["detected"].any()


class RecordingGenerator:
    """Answers every request with one verdict; records the requests and decoding of each call."""

    provenance = {"model": "recording"}

    def __init__(self) -> None:
        self.calls: list[tuple[list, object]] = []

    def complete(self, requests, params, on_batch=None):
        self.calls.append((list(requests), params))
        answer = json.dumps({"unique": True, "readable": True, "answerable": True, "bloom_level": "Apply",
                             "knowledge_units": ["Binary Search Tree"]})
        return [Completion(r.request_id, answer, "stop", cached=False) for r in requests]


def test_llm_probes_render_the_permuted_lists_and_the_repeat_seed(cs):
    dataset, generations = cs
    generator = RecordingGenerator()
    spec = {"backend": "hf", "model_ref": "x", "generation": {"temperature": 0.0}}
    probes = probe_judge(generations, judge_spec("llm", spec, seed=7), dataset=dataset, domain="computer science",
                         items_per_cell=12, seed=7, text_generator=generator)
    assert len(generator.calls) == 2 + 6 and sum(len(r) for r, _ in generator.calls) == 36
    seeds = Counter(params.seed for _, params in generator.calls)
    assert seeds == {7: 7, 7 + REPEAT_SEED_OFFSET: 1}
    for requests, params in generator.calls[2:]:
        system = requests[0].messages[0]["content"]
        listed = system.split("one of: ", 1)[1].split(".", 1)[0].split(", ")
        assert sorted(listed) == sorted(BLOOM_LEVELS)
        assert requests[0].response_schema["properties"]["bloom_level"]["enum"] == listed
        units = requests[0].messages[-1]["content"].split("Knowledge units: ", 1)[1].split("\n", 1)[0].split("; ")
        order = probes[(probes["probe"] == "order") & (probes["prompt_id"] == requests[0].request_id)]
        assert list(order["level_order"].iloc[0]) == listed and list(order["unit_order"].iloc[0]) == units
    base_system = generator.calls[0][0][0].messages[0]["content"]
    assert "one of: Remember, Understand, Apply, Analyze, Evaluate, Create." in base_system
    # estimate_cost counts exactly these requests, with their seeds
    sample = bias_sample(generations, 12, 7)
    decoding = study_spec({"seed": 7, "models": {"x": {"backend": "hf", "model": "m"}},
                           "judges": {"llm": spec}}).judges["llm"].decoding  # resolved where the config is read
    planned = probe_requests(sample, decoding, knowledge_units=sorted({u for us in dataset["knowledge_units"] for u in us}),
                             domain="computer science", rubric=load_rubric(), seed=7)
    sent = [(r.request_id, r.messages, p.seed) for requests, p in generator.calls for r in requests]
    assert sorted(sent, key=str) == sorted([(r.request_id, r.messages, p.seed) for r, p in planned], key=str)


def _planted(judge: str, n: int, biased: bool, rng: np.random.Generator) -> pd.DataFrame:
    """Probe rows of a judge on n questions: under the order probe the levels are a rotation; a
    biased judge picks the first-listed level on every third question."""
    rows = []
    for i in range(n):
        order = BLOOM_LEVELS[i % 6:] + BLOOM_LEVELS[:i % 6]
        level = BLOOM_LEVELS[int(rng.integers(6))]
        for probe, listed in (("base", BLOOM_LEVELS), ("repeat", BLOOM_LEVELS), ("order", order)):
            chosen = listed[0] if biased and i % 3 == 0 else level
            for criterion in CRITERIA:
                rows.append({
                    "prompt_id": f"q{i}", "item_id": f"i{i}", "dataset": "cs", "strategy": "fgp", "model": "m",
                    "judge": judge, "probe": probe, "criterion": criterion,
                    "value_bool": (i % 2 == 0) if criterion in ("unique", "readable", "answerable") else None,
                    "value_level": chosen if criterion == "bloom_level" else None,
                    "value_units": ["A"] if criterion == "knowledge_units" else None, "status": "ok",
                    "level_order": list(listed), "unit_order": ["A", "B"], "question_words": 5 + i % 7,
                    "cached": False, "cost_usd": None,
                })
    return pd.DataFrame(rows)


def test_position_bias_is_found_and_an_unbiased_judge_is_not_flagged():
    rng = np.random.default_rng(0)
    probes = pd.concat([_planted("biased", 90, True, rng), _planted("fair", 90, False, rng)], ignore_index=True)
    estimates, positions = bias_estimates(probes, {"judges": {}, "generators": {}}, n_resamples=300)
    get = estimates.set_index(["judge", "probe", "statistic", "criterion"])
    excess = get.loc[("biased", "position", "first_position_excess", "bloom_level")]
    assert excess["detected"] and excess["ci_low"] > 0
    assert get.loc[("biased", "order", "excess_over_repeat", "bloom_level")]["detected"]
    assert not estimates[estimates["judge"] == "fair"]["detected"].any()
    biased = positions[positions["judge"] == "biased"].set_index("position")
    assert biased.loc[1, "chosen"] > biased.loc[1, "expected"]
    assert positions[positions["judge"] == "fair"].eval("chosen == expected").all()


def test_fisher_z_interval_by_hand():
    # r = 0.5, n = 28: z = atanh(0.5) = 0.549306, se = 1/5, 95%: tanh(0.549306 -/+ 0.391993)
    low, high = fisher_z_ci(0.5, 28, 0.95, spearman=False)
    assert low == pytest.approx(np.tanh(0.549306 - 1.959964 * 0.2), abs=1e-5)
    assert high == pytest.approx(np.tanh(0.549306 + 1.959964 * 0.2), abs=1e-5)
    # Bonett-Wright for Spearman: se = sqrt((1 + r^2/2) / (n - 3)) = sqrt(1.125)/5
    low_s, _ = fisher_z_ci(0.5, 28, 0.95, spearman=True)
    assert low_s == pytest.approx(np.tanh(0.549306 - 1.959964 * np.sqrt(1.125) / 5), abs=1e-5)


def test_report_has_a_judge_bias_section_only_when_given(tmp_path):
    from bloomqg.reporting.judge_bias import plot_positions, write_judge_bias_table
    from bloomqg.reporting.report import build_report
    from tests.support.synthetic import synthetic_study

    rng = np.random.default_rng(1)
    probes = pd.concat([_planted("biased", 60, True, rng), _planted("fair", 60, False, rng)], ignore_index=True)
    estimates, positions = bias_estimates(probes, {"judges": {}, "generators": {}}, n_resamples=200)
    paths = [tmp_path / "judge_bias.md", tmp_path / "judge_bias.json", tmp_path / "judge_bias_positions.png"]
    write_judge_bias_table(estimates, paths[0], paths[1])
    plot_positions(positions, paths[2])
    markdown = paths[0].read_text()
    assert "| biased | position: first-listed excess |" in markdown and " *" in markdown
    study = synthetic_study(n_models=2, n_items=8)
    pages = {}
    for name, given in (("with", paths[1:]), ("without", [])):
        out = tmp_path / f"{name}.html"
        build_report(
            out, config=study.config, all_metrics=study.metrics, votes=study.votes, reliability=study.reliability,
            generations=study.generations, generation_provenance=study.generation_provenance,
            judgment_provenance=study.judgment_provenance, ledger=study.ledger, table_paths=[], figure_paths=[],
            correlations=study.correlations, paired=study.paired, git_commit=None, package_versions={},
            judge_bias=given,
        )
        pages[name] = out.read_text(encoding="utf-8")
    assert '<section id="judge-bias">' in pages["with"] and "Judge bias probes" in pages["with"]
    assert 'id="figure-judge_bias_positions"' in pages["with"] and "data:image/png;base64," in pages["with"]
    assert 'id="judge-bias"' not in pages["without"]
