"""The .test study (.test/config/config.yaml, run by the integration tests) is the default study
cut down, plus a third strategy defined by its config entry and a template file alone, and
nothing else, so a key added to or changed in config.yaml reaches it too."""

from __future__ import annotations

import yaml

from tests.conftest import REPO

#: What the .test study changes, by key path: fewer items, shorter completions, generation in bf16
#: where the CPU has it, fewer resamples.
CUT_DOWN = {
    ("limit_items",): 3,
    ("limit_items_by",): "first",
    ("models", "smollm2-135m", "generation", "max_new_tokens"): 48,
    # bf16 where the CPU computes it in hardware, float32 elsewhere: 48 tokens for three prompts took
    # 4.5 s against 8.0 s in float32 (one thread, AVX512-BF16); the studies built on it test the
    # workflow, not the model's text
    ("models", "smollm2-135m", "dtype"): "auto",
    ("judges", "smollm2", "generation", "max_new_tokens"): 48,
    ("bootstrap", "n_resamples"): 200,
    # zeroshot: no code names it; .test/prompts/zeroshot.md is its template
    ("strategies",): {"cot": None, "fgp": None, "zeroshot": {
        "template": ".test/prompts/zeroshot.md", "answer_fields": [], "exemplars": 0, "label": "Zero-shot"}},
    ("datasets", "cs", "strategies"): ["cot", "fgp", "zeroshot"],
}


def test_the_test_study_is_the_default_study_cut_down():
    default = yaml.safe_load((REPO / "config.yaml").read_text())
    test_study = yaml.safe_load((REPO / ".test" / "config" / "config.yaml").read_text())
    for (*parents, key), value in CUT_DOWN.items():
        section = default
        for name in parents:
            section = section[name]
        assert key in section, f"config.yaml has no {'.'.join((*parents, key))} to cut down"
        section[key] = value
    assert test_study == default


def test_the_test_studys_own_strategy_is_planned_from_its_entry(tmp_path):
    from bloomqg.study.config import prepare_study

    study = prepare_study(yaml.safe_load((REPO / ".test" / "config" / "config.yaml").read_text()),
                          workdir=tmp_path, load_datasets=False)
    assert ("cs", "zeroshot") in {(c.dataset, c.strategy) for c in study.cells}
    spec = study.strategies["zeroshot"]
    assert (spec.label, spec.exemplars, spec.answer_fields, spec.gives_targets()) == ("Zero-shot", 0, (), True)
    assert spec.template == str(REPO / ".test" / "prompts" / "zeroshot.md")
