"""The .test study (.test/config/config.yaml, run by the integration tests) is the default study
cut down and nothing else, so a key added to or changed in config.yaml reaches it too."""

from __future__ import annotations

import yaml

from tests.conftest import REPO

#: What the .test study changes, by key path: fewer items, shorter completions, fewer resamples.
CUT_DOWN = {
    ("limit_items",): 3,
    ("models", "smollm2-135m", "generation", "max_new_tokens"): 48,
    ("judges", "smollm2", "generation", "max_new_tokens"): 48,
    ("bootstrap", "n_resamples"): 200,
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
