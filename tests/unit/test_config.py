"""Config validation and resolution, without Snakemake."""

from __future__ import annotations


import pytest
import yaml

from bloomqg.config import prepare_study, resolve_path, validate_schema
from bloomqg.config_schema import ConfigError
from tests.conftest import REPO


def default_config() -> dict:
    return yaml.safe_load((REPO / "config.yaml").read_text())


def test_default_config_is_valid_and_plans_every_cell(tmp_path):
    study = prepare_study(default_config(), workdir=tmp_path)
    cells = {(c.dataset, c.strategy) for c in study.cells}
    assert cells == {("cs", "cot"), ("cs", "fgp"), ("math", "fgp"), ("social", "cot"), ("social", "fgp")}
    assert study.knowledge_units["cs"] and study.prompt_files["fgp"].exists()


def test_paper_preset_is_schema_valid():
    validate_schema(yaml.safe_load((REPO / "configs" / "paper.yaml").read_text()))


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda c: c.update(colour="blue"), "'colour'"),
        (lambda c: c["datasets"]["cs"].update(loader="excel"), "datasets.cs.loader"),
        (lambda c: c["models"]["smollm2-135m"].update(dtype="int3"), "models.smollm2-135m.dtype"),
        (lambda c: c["gate"].update(action="ignore"), "gate.action"),
        (lambda c: c.pop("judges"), "'judges' is a required property"),
    ],
)
def test_schema_errors_name_the_key(mutate, expected):
    config = default_config()
    mutate(config)
    with pytest.raises(ConfigError, match="my.yaml") as error:
        validate_schema(config, sources=["my.yaml"])
    assert expected in str(error.value)


def test_hf_judge_must_reference_a_model(tmp_path):
    config = default_config()
    config["judges"]["smollm2"]["model_ref"] = "gpt-9"
    with pytest.raises(ConfigError, match="judges.smollm2.model_ref"):
        prepare_study(config, workdir=tmp_path, load_datasets=False)


def test_release_dir_placeholder_needs_release_dir(tmp_path):
    config = default_config()
    config["datasets"]["cs"]["path"] = "{release_dir}/dataset/computer/Data_Structure.csv"
    with pytest.raises(ConfigError, match="release_dir"):
        prepare_study(config, workdir=tmp_path, load_datasets=False)


def test_paths_resolve_in_workdir_before_repo(tmp_path):
    (tmp_path / "config.yaml").write_text("x")
    assert resolve_path("config.yaml", workdir=tmp_path, where="k") == (tmp_path / "config.yaml").resolve()
    assert resolve_path("Snakefile", workdir=tmp_path, where="k") == (REPO / "Snakefile").resolve()
    with pytest.raises(ConfigError, match="k: file not found"):
        resolve_path("missing.csv", workdir=tmp_path, where="k")


def test_unknown_judge_key_is_named(tmp_path):
    config = default_config()
    config["judges"]["rules"]["temperature"] = 0.2
    with pytest.raises(ConfigError, match=r"judges\.rules.*temperature"):
        prepare_study(config, workdir=tmp_path, load_datasets=False, sources=["c.yaml"])


def test_keys_with_a_default_may_be_left_out(tmp_path):
    config = default_config()
    for key in ("seed", "exemplars", "strategies", "limit_items", "cache_dir", "gate", "bootstrap", "vote"):
        config.pop(key)
    del config["models"]["smollm2-135m"]["gguf"]["sha256"]
    study = prepare_study(config, workdir=tmp_path, load_datasets=False)
    assert (study.config["seed"], study.config["exemplars"], study.config["strategies"]) == (20240611, 2, ["cot", "fgp"])
    assert study.config["gate"] == {"coefficient": "alpha", "threshold": 0.7, "action": "flag"}
    assert study.config["vote"] == {"aggregation": "majority"}
    # The schema states each of those defaults, and they are the ones applied.
    schema = yaml.safe_load((REPO / "schemas" / "config.schema.yaml").read_text())
    for key in ("seed", "exemplars", "strategies", "limit_items", "cache_dir"):
        assert schema["properties"][key]["default"] == study.config[key], key
    for block in ("gate", "bootstrap", "vote"):
        for key, spec in schema["properties"][block]["properties"].items():
            if key == "alpha" and block == "gate":  # the older spelling: no default of its own
                continue
            assert spec["default"] == study.config[block][key], f"{block}.{key}"


def test_a_gguf_without_sha256_is_hashed_and_one_with_it_is_checked(tmp_path, monkeypatch):
    from bloomqg import models
    from bloomqg.models import ModelFileError, resolve_gguf
    from bloomqg.provenance import sha256_file

    (tmp_path / "weights.gguf").write_bytes(b"GGUF weights")
    monkeypatch.setattr(models, "package_dir", lambda package: tmp_path)
    assert resolve_gguf({"package": "p", "file": "weights.gguf"}) == tmp_path / "weights.gguf"
    actual = sha256_file(tmp_path / "weights.gguf")
    assert resolve_gguf({"package": "p", "file": "weights.gguf", "sha256": actual}) == tmp_path / "weights.gguf"
    with pytest.raises(ModelFileError, match=f"has sha256 {actual}, expected 0{{64}}"):
        resolve_gguf({"package": "p", "file": "weights.gguf", "sha256": "0" * 64})


def test_the_older_gate_spelling_still_runs_and_cannot_be_mixed_with_the_new(tmp_path):
    config = default_config()
    config["gate"] = {"alpha": 0.5, "action": "drop"}
    study = prepare_study(config, workdir=tmp_path, load_datasets=False)
    assert study.config["gate"] == {"coefficient": "alpha", "threshold": 0.5, "action": "drop"}
    config["gate"] = {"alpha": 0.5, "coefficient": "ac1"}
    with pytest.raises(ConfigError, match="older spelling"):
        prepare_study(config, workdir=tmp_path, load_datasets=False)
    config["gate"] = {"coefficient": "ac1", "threshold": 0.6}
    assert prepare_study(config, workdir=tmp_path, load_datasets=False).config["gate"]["coefficient"] == "ac1"


SECRET = "pw-Xq71VbN93kLm"
CREDENTIAL_URLS = [
    (f"https://api.example.com/v1?token={SECRET}", "a query string"),
    (f"https://alice:{SECRET}@api.example.com/v1", "user info (user:password@)"),
    (f"https://api.example.com/v1#{SECRET}", "a fragment"),
]


@pytest.mark.parametrize(("url", "found"), CREDENTIAL_URLS)
def test_a_base_url_carrying_credentials_is_refused_naming_the_entry(tmp_path, url, found):
    config = default_config()
    config["judges"]["gpt4o"] = {"backend": "openai", "model": "gpt-4o", "base_url": url}
    config["models"]["api-gen"] = {"backend": "openai", "model": "gpt-4o-mini", "base_url": url,
                                   "colour": "blue"}  # a schema error too: the base_url is named first
    with pytest.raises(ConfigError, match="my.yaml") as error:
        prepare_study(config, workdir=tmp_path, sources=["my.yaml"], load_datasets=False)
    message = str(error.value)
    for entry in ("judges.gpt4o.base_url", "models.api-gen.base_url"):
        assert f"{entry}: https://api.example.com/v1 carries {found}" in message
    assert "api_key_env" in message and "colour" not in message
    assert SECRET not in message, "the refusal must not print the credential it refuses"


@pytest.mark.parametrize(("url", "found"), CREDENTIAL_URLS)
def test_client_settings_refuse_a_base_url_carrying_credentials(url, found):
    from bloomqg.api.settings import ClientSettings

    with pytest.raises(ValueError, match="base_url: https://api.example.com/v1 carries") as error:
        ClientSettings(model="m", base_url=url)
    assert found in str(error.value) and SECRET not in str(error.value)


def test_a_plain_base_url_with_host_port_and_path_is_accepted(tmp_path):
    config = default_config()
    config["judges"]["local"] = {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:8000/v1",
                                 "api_key_env": None}
    prepare_study(config, workdir=tmp_path, load_datasets=False)
