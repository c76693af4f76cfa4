"""Config validation and resolution, without Snakemake."""

from __future__ import annotations


import pytest
import yaml

from bloomqg.study.config import prepare_study, resolve_path, validate_schema
from bloomqg.store.config_schema import ConfigError
from tests.conftest import REPO


def default_config() -> dict:
    return yaml.safe_load((REPO / "config.yaml").read_text())


def test_default_config_is_valid_and_plans_every_cell(tmp_path):
    study = prepare_study(default_config(), workdir=tmp_path)
    cells = {(c.dataset, c.strategy) for c in study.cells}
    assert cells == {("cs", "cot"), ("cs", "fgp"), ("math", "fgp"), ("social", "cot"), ("social", "fgp")}
    assert study.knowledge_units["cs"] and study.prompt_files["fgp"].exists()


def test_the_schema_is_read_as_the_pure_python_loader_reads_it():
    """file_schema reads with libyaml where PyYAML has it (for speed): the same document, types
    included (JSON distinguishes 1 from 1.0 and keeps the keys' order)."""
    import json

    from bloomqg.store.config_schema import SCHEMA_PATH, file_schema

    reference = yaml.safe_load(SCHEMA_PATH.read_text())
    assert json.dumps(file_schema().schema) == json.dumps(reference)


def test_paper_preset_is_schema_valid():
    validate_schema(yaml.safe_load((REPO / "configs" / "paper.yaml").read_text()))


def test_the_learned_panel_preset_is_the_default_study_plus_learned():
    preset = yaml.safe_load((REPO / "configs" / "learned-panel.yaml").read_text())
    validate_schema(preset)
    default = default_config()
    assert preset["judges"] == {**default["judges"], "learned": {"backend": "learned", "train": {"source": "release"}}}
    assert {k: v for k, v in preset.items() if k not in ("judges", "release_dir", "release_manifest")} == {
        k: v for k, v in default.items() if k != "judges"}


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda c: c.update(colour="blue"), "'colour'"),
        (lambda c: c["datasets"]["cs"].update(loader="excel"), "datasets.cs.loader"),
        (lambda c: c["models"]["smollm2-135m"].update(dtype="int3"), "models.smollm2-135m.dtype"),
        (lambda c: c["gate"].update(action="ignore"), "gate.action"),
        (lambda c: c.pop("judges"), "'judges' is a required property"),
        (lambda c: c.update(strategies={"mine": {"templte": "x.md"}}), "strategies"),
        (lambda c: c.update(strategies={"mine": {"template": "x.md", "answer_fields": ["topic"]}}), "strategies"),
        (lambda c: c["datasets"]["cs"].update(strategies=["no spaces allowed"]), "datasets.cs.strategies"),
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
    from bloomqg.inputs import models
    from bloomqg.inputs.models import ModelFileError, resolve_gguf
    from bloomqg.store.provenance import sha256_file

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


def with_api_judge(config: dict) -> dict:
    """``config`` with an OpenAI-compatible judge ``gpt4o`` (loopback, never called here)."""
    config["judges"]["gpt4o"] = {"backend": "openai", "model": "gpt-4o", "base_url": "http://127.0.0.1:9/v1",
                                 "api_key_env": None}
    return config


@pytest.mark.parametrize("spelling", [".nan", ".inf", "-.inf"])
@pytest.mark.parametrize(
    ("key_path", "yaml_text"),
    [
        ("judges.gpt4o.generation.temperature", "judges: {gpt4o: {generation: {temperature: X}}}"),
        ("judges.gpt4o.timeout_s", "judges: {gpt4o: {timeout_s: X}}"),
        ("models.smollm2-135m.generation.top_p", "models: {smollm2-135m: {generation: {top_p: X}}}"),
        ("bootstrap.confidence", "bootstrap: {confidence: X}"),
        ("gate.threshold", "gate: {threshold: X}"),
        ("budget_usd", "budget_usd: X"),
    ],
)
def test_a_non_finite_number_anywhere_is_refused_naming_its_key(tmp_path, key_path, yaml_text, spelling):
    """YAML's .nan/.inf load as floats that every schema bound lets through (NaN compares false)."""
    from snakemake.utils import update_config

    config = with_api_judge(default_config())
    update_config(config, yaml.safe_load(yaml_text.replace("X", spelling)))
    with pytest.raises(ConfigError, match="c.yaml") as error:
        prepare_study(config, workdir=tmp_path, load_datasets=False, sources=["c.yaml"])
    assert f"{key_path}: {float(spelling.replace('.', ''))!r} is not a finite number" in str(error.value)


def test_a_non_finite_config_override_is_refused_at_plan_time(tmp_path):
    """``--config budget_usd=nan`` reaches the Snakefile as a float NaN (Snakemake tries float())."""
    from snakemake.cli import parse_config

    override = parse_config(["budget_usd=nan", "seed=inf"])
    with pytest.raises(ConfigError) as error:
        prepare_study({**default_config(), **override}, workdir=tmp_path, load_datasets=False)
    assert "budget_usd: nan is not a finite number" in str(error.value)
    assert "seed: inf is not a finite number" in str(error.value)


def test_the_layers_own_checks_refuse_non_finite_numbers_too():
    from bloomqg.store.config_schema import file_schema

    problems = file_schema().problems({"temperature": float("nan")}, "#/$defs/generation", prefix=["models", "m"])
    assert problems == ["models.m.temperature: nan is not a finite number"]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda c: c["models"]["smollm2-135m"]["generation"].update(max_new_tokens=10**9),
         "models.smollm2-135m.generation.max_new_tokens"),
        (lambda c: c["models"]["smollm2-135m"].update(batch_size=10**6), "models.smollm2-135m.batch_size"),
        (lambda c: c["judges"]["gpt4o"].update(concurrency=10**6), "judges.gpt4o.concurrency"),
        (lambda c: c["bootstrap"].update(n_resamples=10**9), "bootstrap.n_resamples"),
        (lambda c: c["datasets"]["cs"].update(shards=10**6), "datasets.cs.shards"),
    ],
)
def test_counts_have_a_maximum(mutate, expected):
    config = with_api_judge(default_config())
    mutate(config)
    with pytest.raises(ConfigError) as error:
        validate_schema(config)
    assert f"{expected}: " in str(error.value) and "is greater than the maximum of" in str(error.value)


@pytest.mark.parametrize("section", ["judges", "models", "datasets"])
def test_a_name_too_long_for_a_file_name_is_refused_at_plan_time(tmp_path, section):
    """A 300-character judge name used to pass planning and fail with "File name too long"
    once paid generation had run."""
    config = default_config()
    entries = config[section]
    first = next(iter(entries))
    long_name = "j" * 300
    entries[long_name] = entries.pop(first)
    if section == "models":
        config["judges"]["smollm2"]["model_ref"] = long_name
    with pytest.raises(ConfigError, match=f"{section}: '{long_name}' is too long"):
        prepare_study(config, workdir=tmp_path, load_datasets=False)
    entries["j" * 64] = entries.pop(long_name)
    if section == "models":
        config["judges"]["smollm2"]["model_ref"] = "j" * 64
    prepare_study(config, workdir=tmp_path, load_datasets=False)
def _with_api_judge(config: dict, **entry) -> dict:
    config["judges"]["api-judge"] = {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1",
                                     "api_key_env": "BLOOMQG_TEST_KEY", **entry}
    return config



def test_a_budget_over_an_unpriced_api_entry_is_refused_where_the_config_is_read(tmp_path):
    # the entry's client settings are built there, and could not count its spend
    config = _with_api_judge(default_config())
    config["budget_usd"] = 1.0
    with pytest.raises(ConfigError, match=r"^budget_usd is set but judges\.api-judge give no "
                       r"price_per_million_input/output: their spend could not be counted against the cap$"):
        prepare_study(config, workdir=tmp_path, load_datasets=False)

def test_paid_calls_above_the_threshold_are_refused_without_a_budget(tmp_path):
    # issue 33 point 7: a large dataset planned as many paid calls as it had rows, without a word
    config = _with_api_judge(default_config())
    study = prepare_study(config, workdir=tmp_path)  # under the default threshold: plans
    from bloomqg.api.budget import paid_calls

    calls = paid_calls(study.spec, [(c.dataset, c.model) for c in study.cells], {"cs": 100, "math": 7, "social": 3})
    cells_of = {d: sum(1 for c in study.cells if c.dataset == d) for d in ("cs", "math", "social")}
    assert calls == {"judges.api-judge": 100 * cells_of["cs"] + 7 * cells_of["math"] + 3 * cells_of["social"]}
    config = _with_api_judge(default_config())
    config["input_limits"] = {"paid_calls_threshold": 10}
    with pytest.raises(ConfigError, match=r"plans up to [\d,]+ paid API calls \(judges\.api-judge [\d,]+\), above "
                                          r"input_limits\.paid_calls_threshold = 10, and judges\.api-judge have no budget_usd"):
        prepare_study(config, workdir=tmp_path)


def test_paid_calls_above_the_threshold_with_a_budget_are_a_warning(tmp_path, caplog):
    config = _with_api_judge(default_config(), budget_usd=1.0, price_per_million_input=0.1, price_per_million_output=0.2)
    config["input_limits"] = {"paid_calls_threshold": 10}
    with caplog.at_level("WARNING", logger="bloomqg.study.config"):
        prepare_study(config, workdir=tmp_path)
    assert "paid API calls (judges.api-judge" in caplog.text and "paid_calls_threshold = 10;" in caplog.text


def test_planning_refuses_a_dataset_file_over_the_size_cap(tmp_path):
    config = default_config()
    config["input_limits"] = {"max_file_mb": 0.001}
    with pytest.raises(ConfigError, match=r"datasets\.cs: .*questions\.csv: [\d,]+ bytes uncompressed .*max_file_mb = 0\.001"):
        prepare_study(config, workdir=tmp_path)


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
    from bloomqg.inputs.api_settings import ClientSettings

    with pytest.raises(ValueError, match="base_url: https://api.example.com/v1 carries") as error:
        ClientSettings(model="m", base_url=url)
    assert found in str(error.value) and SECRET not in str(error.value)


def test_a_plain_base_url_with_host_port_and_path_is_accepted(tmp_path):
    config = default_config()
    config["judges"]["local"] = {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:8000/v1",
                                 "api_key_env": None}
    prepare_study(config, workdir=tmp_path, load_datasets=False)


def test_a_strategy_defined_by_a_mapping_entry_runs_where_selected(tmp_path):
    template = tmp_path / "zeroshot.md"
    template.write_text("Write one {domain} question like: {original_question}\n")
    config = default_config()
    config["strategies"] = {"cot": None, "fgp": {"label": "Fine-grained"},
                            "zeroshot": {"template": str(template), "exemplars": 0, "label": "Zero-shot"}}
    config["datasets"]["math"]["strategies"] = ["fgp", "refine"]
    for name in ("cs", "social"):  # these run the mapping's names
        config["datasets"][name].pop("strategies", None)
    study = prepare_study(config, workdir=tmp_path, load_datasets=False)
    cells = {(c.dataset, c.strategy) for c in study.cells}
    assert ("cs", "zeroshot") in cells and ("social", "cot") in cells and ("math", "refine") in cells
    assert ("math", "zeroshot") not in cells
    assert study.strategies["zeroshot"].label == "Zero-shot" and study.strategies["fgp"].label == "Fine-grained"
    assert study.strategy_params("zeroshot") == {
        "passes": [{"name": "generate", "template": str(template.resolve()), "answer_fields": []}], "exemplars": 0}
    assert [p["name"] for p in study.strategy_params("refine")["passes"]] == ["generate", "revise"]
    assert "label" not in study.strategy_params("fgp")  # a label change rebuilds no prompts


def test_a_strategy_no_one_defined_is_refused_with_the_defined_ones(tmp_path):
    config = default_config()
    config["datasets"]["cs"]["strategies"] = ["cot", "socratic"]
    with pytest.raises(ConfigError, match="datasets.cs.strategies") as error:
        prepare_study(config, workdir=tmp_path, load_datasets=False)
    assert "'socratic' is not defined" in str(error.value) and "cot, fgp, refine" in str(error.value)


def test_a_template_with_an_unknown_variable_is_refused_naming_file_line_and_variable(tmp_path):
    template = tmp_path / "mine.md"
    template.write_text("<!-- doc: {anything} goes here -->\nAsk about {domain}.\nUse {topic_hint}.\n")
    config = default_config()
    config["strategies"] = {"mine": {"template": str(template)}}
    with pytest.raises(ConfigError, match="strategies.mine.template") as error:
        prepare_study(config, workdir=tmp_path, load_datasets=False)
    assert f"{template.resolve()}:3: unknown variable {{topic_hint}}" in str(error.value)
    # a first pass may not use what only a later pass has
    template.write_text("Improve {previous_question}.\n")
    with pytest.raises(ConfigError, match="previous_question"):
        prepare_study(config, workdir=tmp_path, load_datasets=False)


def test_the_legacy_prompts_keys_still_set_the_builtin_templates(tmp_path):
    own = tmp_path / "my_fgp.md"
    own.write_text((REPO / "prompts" / "generation" / "fgp.md").read_text())
    config = default_config()
    config["prompts"] = {"fgp": str(own)}
    study = prepare_study(config, workdir=tmp_path, load_datasets=False)
    assert study.strategies["fgp"].template == str(own.resolve())
    assert study.strategies["refine"].template == str(own.resolve())  # refine drafts as FGP
    assert study.strategies["cot"].template == str((REPO / "prompts" / "generation" / "cot.md").resolve())


def test_params_are_canonical_so_written_defaults_change_nothing(tmp_path):
    plain = prepare_study(default_config(), workdir=tmp_path, load_datasets=False)
    config = default_config()
    config["datasets"]["cs"].update(shards=1, domain=config["datasets"]["cs"]["domain"])
    config["models"]["smollm2-135m"].update(revision=None, trust_remote_code=False, batch_size="auto", gpus=0)
    config["models"]["smollm2-135m"]["generation"].update(do_sample=True)
    config["judges"]["rules"].update(min_words=4)
    written = prepare_study(config, workdir=tmp_path, load_datasets=False)
    for name in plain.datasets:
        assert written.dataset_params(name) == plain.dataset_params(name)
    assert written.model_params("smollm2-135m") == plain.model_params("smollm2-135m")
    assert written.judge_params("rules") == plain.judge_params("rules") == {"backend": "rules"}
    assert written.canonical_config() == plain.canonical_config()
    config["judges"]["rules"].update(min_words=5)  # a value that is not the default is kept
    assert prepare_study(config, workdir=tmp_path, load_datasets=False).judge_params("rules")["min_words"] == 5


def test_paid_calls_count_every_pass_of_a_strategy():
    from bloomqg.api.budget import paid_calls
    from bloomqg.inputs.specs import study_spec

    config = _with_api_judge(default_config())
    config["models"]["api-model"] = {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"}
    cells = [("cs", "api-model"), ("cs", "api-model")]  # fgp (one pass), refine (two)
    calls = paid_calls(study_spec(config), cells, {"cs": 10}, passes=[1, 2])
    assert calls == {"models.api-model": 30, "judges.api-judge": 20}  # the judges see one question per prompt


def test_a_comparison_baseline_must_be_a_defined_strategy(tmp_path):
    config = default_config()
    config["comparisons"] = {"baseline": "fgp", "all_pairs": False}
    assert prepare_study(config, workdir=tmp_path, load_datasets=False).config["comparisons"]["baseline"] == "fgp"
    config["comparisons"] = {"baseline": "zeroshot"}
    with pytest.raises(ConfigError, match=r"comparisons\.baseline: 'zeroshot' is not a defined strategy \(defined: cot, fgp, refine"):
        prepare_study(config, workdir=tmp_path, load_datasets=False)
    del config["comparisons"]
    defaults = prepare_study(config, workdir=tmp_path, load_datasets=False).config["comparisons"]
    assert defaults == {"baseline": None, "all_pairs": False}


def test_a_job_reads_the_configs_settings_from_the_typed_study_with_the_schemas_defaults():
    """What a rule script reads of the config that is not a rule parameter (the cap, the answer
    floor, the input limits) and its entry's decoding come from job_study_spec: the schema's
    defaults where the config is silent, the same decoding the plan resolved from the entry's
    canonical form; no script reads snakemake.config with a default of its own."""
    import re

    from bloomqg.inputs.chat import decoding_params
    from bloomqg.study.config import job_study_spec
    from bloomqg.store.config_schema import file_schema

    config = yaml.safe_load((REPO / ".test" / "config" / "config.yaml").read_text(encoding="utf-8"))
    config.pop("min_answer_rate", None)
    config["input_limits"] = {"max_question_chars": 123}
    study = job_study_spec(config)
    assert study.min_answer_rate == file_schema().default_of("min_answer_rate")
    assert study.max_question_chars == 123
    assert study.paid_calls_threshold == file_schema().default_of("input_limits", "paid_calls_threshold")
    assert set(study.input_limits) == set(file_schema().schema["properties"]["input_limits"]["properties"])
    assert job_study_spec({**config, "min_answer_rate": 0.9, "budget_usd": 2.5}).min_answer_rate == 0.9
    planned = prepare_study(config, workdir=REPO / ".test", load_datasets=False)
    for name in config["models"]:
        assert study.models[name].decoding == decoding_params(
            planned.model_params(name).get("generation", {}), planned.config["seed"])
    for script in sorted((REPO / "workflow_scripts").glob("*.py")):
        text = script.read_text(encoding="utf-8")
        assert not re.search(r"snakemake\.config(?!\))", text), f"{script.name} reads snakemake.config directly"
