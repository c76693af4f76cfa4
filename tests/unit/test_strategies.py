"""bloomqg.inputs.strategies: definitions from config, template checks and comparison pairs."""

from __future__ import annotations

from pathlib import Path

import pytest

from bloomqg.inputs.strategies import (
    BUILTIN_STRATEGIES,
    ComparisonSpec,
    StrategyError,
    check_selection,
    default_selection,
    strategy_labels,
    strategy_specs,
    template_problems,
)

ROOT = Path(__file__).resolve().parents[2]


def test_builtins_are_defined_without_config_and_the_paper_pair_is_the_default_selection():
    specs = strategy_specs({})
    assert set(specs) >= {"cot", "fgp", "refine"}
    assert default_selection({}) == ["cot", "fgp"]
    assert specs["cot"].answer_fields == ("knowledge_unit", "bloom_level")
    assert specs["fgp"].answer_fields == ()
    assert [p.name for p in specs["refine"].passes] == ["generate", "revise"]


def test_targets_are_read_off_the_template_not_the_name(tmp_path):
    assert BUILTIN_STRATEGIES["fgp"].gives_targets() is True
    assert BUILTIN_STRATEGIES["cot"].gives_targets() is False
    own = tmp_path / "own.md"
    own.write_text("<!-- {target_bloom_level} only in the comment -->\nWrite about {original_question}.\n")
    spec = strategy_specs({"strategies": {"own": {"template": str(own)}}})["own"]
    assert spec.gives_targets() is False


def test_a_mapping_defines_new_strategies_overrides_builtin_keys_and_selects_its_names(tmp_path):
    config = {"strategies": {"zeroshot": {"template": "t.md", "exemplars": 0, "label": "Zero-shot"},
                             "cot": {"label": "Chain"}}}
    specs = strategy_specs(config)
    assert specs["zeroshot"].exemplar_count(2) == 0
    assert specs["cot"].label == "Chain"
    assert specs["cot"].template == BUILTIN_STRATEGIES["cot"].template  # only the label changed
    assert default_selection(config) == ["zeroshot", "cot"]
    assert strategy_labels(specs)["zeroshot"] == "Zero-shot"
    assert specs["fgp"].exemplar_count(2) == 2


def test_a_new_strategy_without_template_or_with_an_unknown_field_is_refused_naming_it():
    with pytest.raises(StrategyError, match=r"strategies\.mine: a new strategy needs a template"):
        strategy_specs({"strategies": {"mine": {"label": "Mine"}}})
    with pytest.raises(StrategyError, match=r"strategies\.mine\.answer_fields: unknown answer field"):
        strategy_specs({"strategies": {"mine": {"template": "t.md", "answer_fields": ["difficulty"]}}})


def test_an_undefined_selection_is_refused_with_the_defined_names():
    with pytest.raises(StrategyError, match=r"datasets\.bio\.strategies: strategy 'socratic' is not defined "
                                            r"\(defined: cot, fgp, refine"):
        check_selection(["fgp", "socratic"], strategy_specs({}), "datasets.bio.strategies")


def test_template_problems_name_file_line_and_variable(tmp_path):
    template = tmp_path / "t.md"
    template.write_text("<!-- {anything} in the comment is fine -->\nLine one {domain}\nLine two {difficulty}\n")
    problems = template_problems(template, where="strategies.mine.template")
    assert len(problems) == 1
    assert f"{template}:3: unknown variable {{difficulty}}" in problems[0]
    assert problems[0].startswith("strategies.mine.template: ")
    later = tmp_path / "later.md"
    later.write_text("Rewrite {previous_question}.\n")
    assert template_problems(later, later_pass=True) == []
    assert "unknown variable {previous_question}" in template_problems(later)[0]
    assert "does not exist" in template_problems(tmp_path / "missing.md")[0]


def test_shipped_templates_use_only_documented_variables():
    for spec in BUILTIN_STRATEGIES.values():
        for index, step in enumerate(spec.passes):
            path = ROOT / step.template
            if path.exists():
                assert template_problems(path, later_pass=index > 0) == [], step.template


def test_comparison_pairs_against_a_baseline_or_all_pairs():
    strategies = ["cot", "fgp", "zeroshot"]
    assert ComparisonSpec().pairs(strategies) == [("cot", "fgp"), ("cot", "zeroshot")]
    assert ComparisonSpec(baseline="fgp").pairs(strategies) == [("fgp", "cot"), ("fgp", "zeroshot")]
    assert ComparisonSpec(all_pairs=True).pairs(strategies) == [
        ("cot", "fgp"), ("cot", "zeroshot"), ("fgp", "zeroshot")]
    assert ComparisonSpec(baseline="cot").pairs(["fgp"]) == []
    assert ComparisonSpec.from_config({"comparisons": {"all_pairs": True}}).all_pairs is True
