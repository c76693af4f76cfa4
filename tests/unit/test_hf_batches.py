"""Out-of-memory halving, the learned batch cap, and the batch size a resumed job reuses.

Out-of-memory errors are injected into the real decode loop of a tiny random model (a GPU is
not needed to exercise the bookkeeping): both ``torch.OutOfMemoryError`` and the plain
``RuntimeError`` some CUDA kernels raise must be caught, halved and retried with no item lost.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from bloomqg.inputs.chat import ChatRequest, DecodingParams
from bloomqg.generation.hf.generator import HFTextGenerator, is_out_of_memory
from bloomqg.generation.stage import checkpoint_batch_size, generate_questions
from tests.support.tiny_models import chat_tokenizer, tiny_model

GREEDY = DecodingParams(do_sample=False, max_new_tokens=6)


def generator(batch_size=4) -> HFTextGenerator:
    return HFTextGenerator.from_model(tiny_model("llama"), chat_tokenizer(), batch_size=batch_size)


def reqs(n: int) -> list[ChatRequest]:
    return [ChatRequest(f"r{i}", ({"role": "user", "content": " ".join(f"w{j}" for j in range(i + 1))},))
            for i in range(n)]


def inject_oom(gen: HFTextGenerator, above: int, error: Exception) -> list[int]:
    """Make batches of more than ``above`` rows run out of memory; returns the sizes tried."""
    tried: list[int] = []
    original = gen._run_batch

    def run_batch(requests, encoded, params, batch_index):
        tried.append(len(requests))
        if len(requests) > above:
            raise error
        return original(requests, encoded, params, batch_index)
    gen._run_batch = run_batch
    return tried


@pytest.mark.parametrize("error", [torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB"),
                                   RuntimeError("CUDA error: out of memory")])
def test_oom_halves_learns_a_cap_and_loses_nothing(error):
    want = [c.text for c in generator().complete(reqs(8), GREEDY)]
    gen = generator()
    tried = inject_oom(gen, above=2, error=error)
    got = gen.complete(reqs(8), GREEDY)
    assert [c.text for c in got] == want and [c.request_id for c in got] == [f"r{i}" for i in range(8)]
    assert gen.batch_cap == 2 and gen.provenance["learned_batch_cap"] == 2
    # the first batch of 4 failed once; the second was cut to the cap before it ran
    assert tried == [4, 2, 2, 2, 2] and gen.stats["oom_splits"] == 1


def test_other_runtime_errors_are_not_taken_for_oom():
    gen = generator()
    inject_oom(gen, above=0, error=RuntimeError("mat1 and mat2 shapes cannot be multiplied"))
    with pytest.raises(RuntimeError, match="shapes"):
        gen.complete(reqs(2), GREEDY)
    assert not is_out_of_memory(ValueError("out of memory"))  # only torch's and runtime errors


def prompts_frame(n: int) -> pd.DataFrame:
    rows = []
    for i in range(n):
        messages = [{"role": "user", "content": " ".join(f"w{j}" for j in range(i + 2))}]
        rows.append({"prompt_id": f"it-{i}:fgp", "item_id": f"it-{i}", "dataset": "it", "strategy": "fgp",
                     "original_question": f"w{i}", "original_bloom_level": "Apply",
                     "original_knowledge_units": ["Stack"], "target_bloom_level": "Apply",
                     "target_knowledge_units": ["Stack"], "exemplar_ids": [],
                     "messages_json": json.dumps(messages), "prompt_hash": "0" * 16,
                     "passes_json": json.dumps([{"name": "generate", "answer_fields": []}])})
    return pd.DataFrame(rows)


class Crash(Exception):
    pass


def test_resumed_job_plans_with_the_first_runs_batch_size(tmp_path):
    gen = generator(batch_size=3)
    frame = prompts_frame(7)
    checkpoint, out = tmp_path / "ckpt.jsonl", tmp_path / "out.parquet"
    original = gen.complete

    def crash_after_first_batch(requests, params, on_batch=None, batch_size=None):
        def callback(completions):
            on_batch(completions)
            raise Crash
        return original(requests, params, callback, batch_size)
    gen.complete = crash_after_first_batch
    with pytest.raises(Crash):
        generate_questions(frame, "tiny", gen, GREEDY, knowledge_units=["Stack"], out_path=out,
                           checkpoint_path=checkpoint)
    assert checkpoint_batch_size(checkpoint) == 3
    # another node: its free memory would resolve another size; the checkpoint's wins
    gen.resolve_batch_size = lambda requests, params: 5
    seen = []

    def recording(requests, params, on_batch=None, batch_size=None):
        seen.append((len(requests), batch_size))
        return original(requests, params, on_batch, batch_size)
    gen.complete = recording
    result = generate_questions(frame, "tiny", gen, GREEDY, knowledge_units=["Stack"], out_path=out,
                                checkpoint_path=checkpoint)
    assert seen == [(4, 3)]
    assert sorted(result["prompt_id"]) == sorted(frame["prompt_id"]) and result["prompt_id"].is_unique
    assert sorted(result["batch_index"].unique()) == [0, 1, 2]  # the uninterrupted run's batches
    assert not checkpoint.exists()
