"""Questions from Inspect logs as generation rows (bloomqg.generation.inspect_source).

The logs are written with inspect_ai's own types and ``write_eval_log``, as an Inspect run
writes them; the end-to-end run of the bloomqg/questions task on a served model is
tests/integration/test_inspect.py's, under mockllm tests/integration/test_inspect_native.py's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("inspect_ai", reason="inspect-ai is not installed (pip install -e '.[inspect]')")

from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalPlan, EvalSample, EvalSpec, EvalStats, write_eval_log  # noqa: E402
from inspect_ai.model import ChatMessageAssistant, ChatMessageUser, GenerateConfig, ModelOutput, ModelUsage  # noqa: E402

from bloomqg.store.frames import GENERATIONS  # noqa: E402
from bloomqg.generation.inspect_source import InspectImportError, import_generations  # noqa: E402

UNITS = ["Sorting", "Graphs"]


def prompts(strategy: str = "fgp", n: int = 2, passes: list[dict] | None = None) -> pd.DataFrame:
    passes = passes or [{"name": "generate", "answer_fields": []}]
    return pd.DataFrame([{
        "prompt_id": f"cs-{i:04d}:{strategy}", "item_id": f"cs-{i:04d}", "dataset": "cs", "strategy": strategy,
        "original_question": f"Original {i}?", "original_bloom_level": "Remember",
        "original_knowledge_units": ["Sorting"], "target_bloom_level": "Remember",
        "target_knowledge_units": ["Sorting"], "exemplar_ids": [],
        "messages_json": json.dumps([{"role": "user", "content": f"Write a question like item {i}."}]),
        "prompt_hash": "0123456789abcdef", "passes_json": json.dumps(passes),
    } for i in range(1, n + 1)])


def sample(sample_id: str, answers: list[str], metadata: dict | None = None) -> EvalSample:
    messages = [ChatMessageUser(content="prompt")]
    for answer in answers:
        messages += [ChatMessageAssistant(content=answer), ChatMessageUser(content="again")]
    output = ModelOutput.from_content("openai/tiny", answers[-1])
    output.usage = ModelUsage(input_tokens=11, output_tokens=7, total_tokens=18)
    return EvalSample(id=sample_id, epoch=1, input="prompt", target="Remember", messages=messages[:-1],
                      output=output, metadata=metadata if metadata is not None else {"prompt_id": sample_id})


def write_log(path: Path, samples: list[EvalSample], status: str = "success", task_args: dict | None = None,
              sample_ids: bool = False) -> Path:
    """A log as ``write_eval_log`` writes it; ``sample_ids``: its header lists them, as an Inspect
    run's does (the import streams such a log's samples)."""
    spec = EvalSpec(created="2026-01-01T00:00:00+00:00", task="bloomqg_questions", task_version=0,
                    task_args=task_args or {},
                    dataset=EvalDataset(name="cs/fgp", sample_ids=[s.id for s in samples] if sample_ids else None),
                    model="openai/tiny",
                    model_generate_config=GenerateConfig(), config=EvalConfig(),
                    task_file="my_task.py")
    write_eval_log(EvalLog(status=status, eval=spec, plan=EvalPlan(), stats=EvalStats(), samples=samples),
                   str(path), format="eval")
    return path


def test_each_sample_becomes_its_prompts_row_parsed_as_the_stage_parses(tmp_path):
    log = write_log(tmp_path / "run.eval", [
        sample("cs-0002:fgp", ['{"question": "How would you sort a million records?"}']),
        sample("cs-0001:fgp", ["no JSON here at all"]),
    ])
    frame, sources = import_generations(log, prompts(), "tiny-inspect", knowledge_units=UNITS, seed=7)
    assert list(frame.columns) == GENERATIONS.names
    assert list(frame["prompt_id"]) == ["cs-0001:fgp", "cs-0002:fgp"]  # the prompts' order
    ok = frame.set_index("prompt_id").loc["cs-0002:fgp"]
    assert ok["new_question"] == "How would you sort a million records?" and ok["parse_status"] == "ok"
    assert ok["model"] == "tiny-inspect" and ok["n_prompt_tokens"] == 11 and ok["n_completion_tokens"] == 7
    assert ok["finish_reason"] == "stop" and ok["seed"] == 7 and not ok["cached"]
    assert frame.set_index("prompt_id").loc["cs-0001:fgp", "parse_status"] == "failed"
    assert [(s.path, s.task, s.task_file, s.n_samples) for s in sources] == [
        (str(log), "bloomqg_questions", "my_task.py", 2)]


def test_a_two_pass_strategy_takes_the_conversations_answers_in_order(tmp_path):
    passes = [{"name": "draft", "answer_fields": []},
              {"name": "refine", "answer_fields": [],
               "messages": [{"role": "user", "content": "Improve {previous_question}"}]}]
    log = write_log(tmp_path / "run.eval", [
        sample(f"cs-000{i}:refine", ['{"question": "Draft?"}', f'{{"question": "Refined {i}?"}}']) for i in (1, 2)])
    frame, _ = import_generations(log, prompts("refine", passes=passes), "m", knowledge_units=UNITS, seed=0)
    assert list(frame["new_question"]) == ["Refined 1?", "Refined 2?"]
    records = json.loads(frame["passes_json"].iloc[0])
    assert [(r["pass"], r["new_question"]) for r in records] == [("draft", "Draft?"), ("refine", "Refined 1?")]


def test_samples_of_other_cells_are_left_alone(tmp_path):
    other = sample("cs-0001:cot", ['{"question": "Other?"}'], {"prompt_id": "cs-0001:cot", "strategy": "cot"})
    log = write_log(tmp_path / "run.eval", [other] + [sample(f"cs-000{i}:fgp", ['{"question": "Q?"}']) for i in (1, 2)])
    frame, sources = import_generations(log, prompts(), "m", knowledge_units=UNITS, seed=0)
    assert len(frame) == 2 and sources[0].n_samples == 2


@pytest.mark.parametrize(("samples", "message"), [
    ([sample("item-7", ['{"question": "Q?"}'], {}), sample("cs-0002:fgp", ['{"question": "Q?"}'])],
     r"answers 1 prompt\(s\) of cs/fgp, e.g. \['cs-0001:fgp'\]; 1 sample\(s\) matched no prompt .*run.eval:item-7"),
    ([sample("cs-0009:fgp", ['{"question": "Q?"}'])], r"sample 'cs-0009:fgp'.*not a prompt of cs/fgp"),
    ([sample("cs-0001:fgp", ["{}"]), sample("x", ["{}"], {"prompt_id": "cs-0001:fgp"})],
     r"sample 'x'.*cs-0001:fgp is answered twice"),
    ([sample("cs-0001:fgp", ['{"question": "Q?"}'])], r"no sample of .*run.eval answers 1 prompt\(s\) of cs/fgp.*cs-0002:fgp"),
])
def test_what_cannot_be_mapped_is_an_error_naming_the_log_and_sample(tmp_path, samples, message):
    log = write_log(tmp_path / "run.eval", samples)
    with pytest.raises(InspectImportError, match=message) as error:
        import_generations(log, prompts(), "m", knowledge_units=UNITS, seed=0)
    assert "run.eval" in str(error.value)


def test_a_log_of_one_cell_fills_that_cell_and_the_other_fails_naming_what_it_lacks(tmp_path):
    """A run of FGP only (ids are FGP prompt ids, no metadata): the FGP cell imports, the CoT cell
    is told no sample answers its prompts, and a header naming FGP is not read for CoT."""
    fgp_only = [sample(f"cs-000{i}:fgp", [f'{{"question": "Q{i}?"}}'], {}) for i in (1, 2)]
    log = write_log(tmp_path / "fgp.eval", fgp_only, sample_ids=True)
    frame, sources = import_generations(log, prompts("fgp"), "m", knowledge_units=UNITS, seed=0)
    assert list(frame["new_question"]) == ["Q1?", "Q2?"] and dict(sources[0].matched_by) == {"id": 2}
    with pytest.raises(InspectImportError, match=r"answers 2 prompt\(s\) of cs/cot.*2 sample\(s\) matched no prompt"):
        import_generations(log, prompts("cot"), "m", knowledge_units=UNITS, seed=0)
    named = write_log(tmp_path / "named.eval", fgp_only, task_args={"dataset": "cs", "strategy": "fgp"})
    with pytest.raises(InspectImportError, match=r"answers 2 prompt\(s\) of cs/cot, e.g. \['cs-0001:cot', 'cs-0002:cot'\]$"):
        import_generations(named, prompts("cot"), "m", knowledge_units=UNITS, seed=0)


def test_a_sample_is_matched_by_its_input_and_an_input_that_is_not_bloomqgs_prompt_is_recorded(tmp_path):
    by_input = sample("anything", ['{"question": "Q1?"}'], {})
    by_input.input = [ChatMessageUser(content="Write a question   like item 1.")]  # whitespace aside, the prompt
    other_prompt = sample("cs-0002:fgp", ['{"question": "Q2?"}'])  # input "prompt": not what bloomqg sends
    log = write_log(tmp_path / "run.eval", [by_input, other_prompt], sample_ids=True)
    frame, (source,) = import_generations(log, prompts(), "m", knowledge_units=UNITS, seed=0)
    assert list(frame["new_question"]) == ["Q1?", "Q2?"]
    assert dict(source.matched_by) == {"input": 1, "metadata.prompt_id": 1}
    assert [dict(m) for m in source.input_mismatches] == [
        {"sample": "cs-0002:fgp", "prompt_id": "cs-0002:fgp", "difference": "its input text is not bloomqg's user message"}]
    assert source.as_dict()["input_mismatches"][0]["prompt_id"] == "cs-0002:fgp"


def test_a_plain_text_answer_is_read_by_the_parser_and_its_reason_recorded_per_sample(tmp_path):
    log = write_log(tmp_path / "run.eval", [
        sample("cs-0001:fgp", ["What ordering rule does a binary search tree keep?"]),
        sample("cs-0002:fgp", ['{"question": "Q2?"}'])])
    frame, (source,) = import_generations(log, prompts(), "m", knowledge_units=UNITS, seed=0)
    failed = frame.set_index("prompt_id").loc["cs-0001:fgp"]
    assert failed["parse_status"] == "failed" and failed["raw_text"].startswith("What ordering rule")
    assert [dict(f) for f in source.parse_failures] == [
        {"sample": "cs-0001:fgp", "prompt_id": "cs-0001:fgp", "reason": failed["parse_error"]}]
    assert "no JSON object with a question" in failed["parse_error"]


def test_an_unfinished_run_or_a_missing_path_is_refused(tmp_path):
    log = write_log(tmp_path / "run.eval", [sample("cs-0001:fgp", ["{}"])], status="error")
    with pytest.raises(InspectImportError, match=r"run.eval: its eval ended with status 'error'"):
        import_generations(log, prompts(), "m", knowledge_units=UNITS, seed=0)
    with pytest.raises(InspectImportError, match=r"nowhere: no such file or folder"):
        import_generations(tmp_path / "nowhere", prompts(), "m", knowledge_units=UNITS, seed=0)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InspectImportError, match=r"empty: no .eval log there"):
        import_generations(tmp_path / "empty", prompts(), "m", knowledge_units=UNITS, seed=0)


# -- the models entry (schema and plan-time checks) ------------------------------------------


def _config_with(entry: dict) -> dict:
    import yaml

    from tests.conftest import REPO

    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["models"]["from-inspect"] = entry
    return config


def test_an_inspect_entry_plans_cells_and_runs_no_model(tmp_path):
    from bloomqg.study.config import prepare_study
    from bloomqg.inputs.resources import model_resources

    study = prepare_study(_config_with({"backend": "inspect", "model": "openai/x", "logs": "runs"}),
                          workdir=tmp_path, load_datasets=False)
    assert any(cell.model == "from-inspect" for cell in study.cells)
    assert not study.model_needs_materializing("from-inspect")
    assert model_resources("from-inspect", study.config["models"]["from-inspect"]).gpu == 0


@pytest.mark.parametrize(("entry", "expected"), [
    ({"backend": "inspect", "model": "openai/x"}, "logs"),
    ({"backend": "inspect", "model": "x", "logs": "runs", "engine": "vllm"}, "engine"),
    ({"backend": "hf", "model": "x", "logs": "runs"}, "logs"),
])
def test_an_inspect_entry_without_logs_or_with_a_models_keys_is_refused(tmp_path, entry, expected):
    from bloomqg.study.config import prepare_study
    from bloomqg.store.config_schema import ConfigError

    with pytest.raises(ConfigError, match=expected):
        prepare_study(_config_with(entry), workdir=tmp_path, load_datasets=False)


def test_a_judge_cannot_borrow_an_inspect_entry(tmp_path):
    from bloomqg.study.config import prepare_study
    from bloomqg.store.config_schema import ConfigError

    config = _config_with({"backend": "inspect", "model": "openai/x", "logs": "runs"})
    config["judges"]["smollm2"]["model_ref"] = "from-inspect"
    with pytest.raises(ConfigError, match=r"judges.smollm2.model_ref: 'from-inspect' imports questions from Inspect"):
        prepare_study(config, workdir=tmp_path, load_datasets=False)


def test_a_log_whose_header_inflates_past_the_limit_is_refused_from_its_zip_directory(tmp_path):
    import zipfile

    bomb = tmp_path / "bomb.eval"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("header.json", "w") as member:
            member.write(b'{"status": "success", "eval": {"task": "' + b"a" * 3_000_000 + b'"}}')
    assert bomb.stat().st_size < 20_000
    with pytest.raises(InspectImportError, match=r"header\.json holds 3,000,0\d\d bytes uncompressed, above "
                                                 r"input_limits\.max_log_member_mb = 2"):
        import_generations(bomb, prompts(), "m", knowledge_units=UNITS, seed=0, max_member_mb=2)
    not_a_zip = tmp_path / "broken.eval"
    not_a_zip.write_bytes(b"PK\x05\x06" + b"\0" * 18)  # an end-of-directory record and nothing else
    with pytest.raises(InspectImportError, match="broken.eval"):
        import_generations(not_a_zip, prompts(), "m", knowledge_units=UNITS, seed=0)
