"""The config reference's table (docs/config.md) is the schema's: every key, judge backends' keys included."""

from __future__ import annotations

from bloomqg.study.config import load_schema
from bloomqg.tools.config_docs import CONFIG_PAGE, END, FIX_COMMAND, START, config_rows, config_table, page_with_table
from bloomqg.judges.registry import judge_backends
from tests.conftest import REPO


def test_config_page_table_equals_the_schema():
    assert CONFIG_PAGE == REPO / "docs" / "config.md"
    page = CONFIG_PAGE.read_text(encoding="utf-8")
    assert page == page_with_table(page), (
        f"docs/config.md's config table differs from schemas/config.schema.yaml; run: {FIX_COMMAND}"
    )


def test_the_table_names_every_key_the_issue_found_missing_and_each_backends_keys():
    keys = {key.split("`")[1] for key, *_ in config_rows()}
    for key in ("<api_settings>.backoff_base_s", "<api_settings>.backoff_max_s", "models.<name>.mem_mb",
                "models.<name>.runtime_min", "datasets.<name>.exclude_rows", "judges.<name>.model_ref",
                "judges.<name>.unique_threshold", "judges.<name>.max_token_jaccard", "gate.alpha"):
        assert key in keys, key
    schema = load_schema()
    for name, backend in judge_backends().items():
        for key in backend.properties:
            assert any(f"`judges.<name>.{key}` ({name})" == row[0] for row in config_rows()), (name, key)
    for key in schema["$defs"]["api_settings"]["properties"]:
        assert f"<api_settings>.{key}" in keys


def test_a_drifted_page_is_rewritten_between_the_markers():
    drifted = f"intro\n{START}\n| `seed` | old |\n{END}\nrest\n"
    fixed = page_with_table(drifted)
    assert fixed.startswith("intro\n") and fixed.endswith("\nrest\n")
    assert config_table() in fixed and "| `seed` | old |" not in fixed


def test_client_settings_defaults_are_the_schemas():
    """ClientSettings keeps dataclass defaults for callers in code; they must be the schema's."""
    import dataclasses

    from bloomqg.inputs.api_settings import ClientSettings

    properties = load_schema()["$defs"]["api_settings"]["properties"]
    for field in dataclasses.fields(ClientSettings):
        if field.name == "model":
            continue
        assert field.name in properties, f"ClientSettings.{field.name} is not in $defs/api_settings"
        assert field.default == properties[field.name]["default"], field.name


def test_the_table_gives_each_keys_bounds():
    rows = {key: kind for key, kind, *_ in config_rows()}
    assert rows["`<api_settings>.concurrency` (backend openai)"] == "integer (≥ 1, ≤ 256)"
    assert rows["`models.<name>.batch_size`"] == "`auto` or integer (≥ 1, ≤ 4096)"
    assert rows["`bootstrap.confidence`"] == "number (> 0.5, < 1)"
