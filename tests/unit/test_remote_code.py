"""Remote-code models as their authors meant them: tables built in ``__init__`` rebuilt after
loading, left-padded batches only where padding provably changes nothing, stopped rows leaving
the model's own cache, and no text from non-finite logits.

The stand-ins are loaded from disk with ``trust_remote_code=True`` through
:class:`HFTextGenerator`: ``tests/support/baichuan2_remote_model`` is written like
Baichuan2-7B-Chat (rotary tables as plain attributes or non-persistent buffers, no
``position_ids``, additive mask), ``tests/support/legacy_remote_model`` has learned absolute
positions, with and without ``position_ids``.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from bloomqg.inputs.chat import ChatRequest, DecodingParams
from bloomqg.generation.hf import decode
from bloomqg.generation.hf.generator import HFTextGenerator
from bloomqg.generation.hf.model_support import ModelSupportError
from bloomqg.generation.hf.remote_code import meta_tensors
from tests.support.tiny_models import (
    LEGACY_MODEL_CODE,
    chat_tokenizer,
    load_remote_code_reference,
    save_baichuan2_remote_model,
    save_legacy_remote_model,
    tiny_model,
)

TEMPLATE = str(LEGACY_MODEL_CODE / "chat_template.jinja")
GREEDY = DecodingParams(do_sample=False, max_new_tokens=10)
TABLES = ("inv_freq", "cos_cached", "sin_cached")


def reqs() -> list[ChatRequest]:
    contents = ["w1 w2 w3 w4", "w5", "w6 w7", "w8 w9 w10 w11 w12 w13", "w20 w21 w22", "w30"]
    return [ChatRequest(f"r{i}", ({"role": "user", "content": content},)) for i, content in enumerate(contents)]


@pytest.fixture(scope="module")
def baichuan2_dirs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("baichuan2")
    # transformers copies remote code under the folder's name: one per process (pytest-xdist workers)
    return {tables: save_baichuan2_remote_model(root / f"baichuan2-{tables}-{os.getpid()}", rotary_tables=tables)
            for tables in ("attributes", "buffers")}


@pytest.fixture(scope="module")
def legacy_dirs(tmp_path_factory) -> dict[bool, Path]:
    root = tmp_path_factory.mktemp("legacy")
    return {positions: save_legacy_remote_model(root / f"legacy-{positions}-{os.getpid()}",
                                                takes_position_ids=positions)
            for positions in (False, True)}


def load(folder: Path, **kwargs) -> HFTextGenerator:
    return HFTextGenerator(folder, model_id=folder.name, trust_remote_code=True, chat_template=TEMPLATE,
                           dtype="float32", **{"batch_size": 4, **kwargs})


def full_recompute_greedy(model, generator: HFTextGenerator, request: ChatRequest, steps: int) -> str:
    """Greedy decoding of one prompt with no cache and no padding: the whole sequence every step."""
    ids = generator.encode(request)
    kept: list[int] = []
    with torch.inference_mode():
        for _ in range(steps):
            token = int(model(input_ids=torch.tensor([ids + kept])).logits[0, -1].argmax())
            if token in generator.stop_ids:
                break
            kept.append(token)
    return generator.tokenizer.decode(kept, skip_special_tokens=True).strip()


def test_the_baichuan2_standin_fails_on_plain_loading_as_the_real_code_does(baichuan2_dirs):
    """Guard of the stand-in itself: transformers' own loading leaves its tables on the meta
    device (attributes) or uninitialised (buffers), as it does Baichuan2-7B's."""
    plain = transformers.AutoModelForCausalLM.from_pretrained(baichuan2_dirs["attributes"], trust_remote_code=True,
                                                              dtype=torch.float32)
    rotary = plain.model.layers[0].self_attn.rotary_emb
    assert all(getattr(rotary, name).is_meta for name in TABLES)
    with pytest.raises(NotImplementedError, match="meta tensor"):
        plain(input_ids=torch.tensor([[5, 6, 7]]))
    buffered = transformers.AutoModelForCausalLM.from_pretrained(baichuan2_dirs["buffers"], trust_remote_code=True,
                                                                 dtype=torch.float32)
    # the checkpoint holds no table, so plain loading cannot set them: whatever they hold is the
    # memory they were given (which can, by chance, equal construction's values: only the
    # checkpoint's keys are certain)
    from safetensors import safe_open

    with safe_open(str(baichuan2_dirs["buffers"] / "model.safetensors"), framework="pt") as checkpoint:
        assert not [key for key in checkpoint.keys() if key.rsplit(".", 1)[-1] in TABLES]
    assert all(name in dict(buffered.model.layers[0].self_attn.rotary_emb.named_buffers()) for name in TABLES)


@pytest.mark.parametrize("tables", ["attributes", "buffers"])
def test_baichuan2_standin_loads_batches_and_matches_batch1_and_the_plain_model(baichuan2_dirs, tables, caplog):
    folder = baichuan2_dirs[tables]
    with caplog.at_level(logging.INFO, logger="bloomqg"):
        generator = load(folder)
    assert (generator.plan.code, generator.plan.decode_loop) == ("remote", "legacy")
    assert not generator.plan.takes_position_ids  # BaichuanForCausalLM.forward has no position_ids
    assert meta_tensors(generator.model) == []
    rebuilt = generator.provenance["rebuilt_init_tensors"]
    assert rebuilt["count"] == 3 * 2 and set(rebuilt["tensors"]) == {
        f"model.layers.*.self_attn.rotary_emb.{name}" for name in TABLES}
    if tables == "attributes":
        assert (rebuilt["left_on_meta"], rebuilt["differed_from_construction"]) == (6, 0)
    else:
        # An uninitialised buffer holds whatever its memory held: a block the allocator reused
        # can hold the very values construction gives, so only the bound is certain.
        assert rebuilt["left_on_meta"] == 0 and 0 <= rebuilt["differed_from_construction"] <= 6
    reference_rotary = load_remote_code_reference(folder).model.layers[0].self_attn.rotary_emb
    for name in TABLES:
        assert torch.equal(getattr(generator.model.model.layers[0].self_attn.rotary_emb, name),
                           getattr(reference_rotary, name)), name
    padding = generator.provenance["left_padding"]
    assert padding["batching"] == "exact: batched" and padding["position_ids_passed"] is False
    assert padding["max_relative_difference"] <= padding["tolerance"] == 1e-3
    assert "batched decoding is exact" in caplog.text

    requests = reqs()
    assert generator.resolve_batch_size(requests, GREEDY) == 4
    batched = generator.complete(requests, GREEDY)
    assert generator.provenance["batch_size"] == 4 and generator.stats["batches"] == 2
    assert all(c.text and c.n_completion_tokens for c in batched)
    alone = generator.complete(requests, GREEDY, batch_size=1)
    assert [c.text for c in batched] == [c.text for c in alone]
    # ... and what the model built the plain way (no meta device, no padding, no cache) writes
    reference = load_remote_code_reference(folder)
    assert [c.text for c in batched] == [full_recompute_greedy(reference, generator, r, 10) for r in requests]


def test_absolute_positions_without_position_ids_fall_back_with_the_reason_in_the_log(legacy_dirs, caplog):
    with caplog.at_level(logging.INFO, logger="bloomqg"):
        generator = load(legacy_dirs[False])
        requests = reqs()
        got = generator.complete(requests, GREEDY)
    assert not generator.plan.takes_position_ids
    padding = generator.provenance["left_padding"]
    assert padding["batching"] == "inexact: one request at a time"
    assert padding["max_relative_difference"] > 100 * padding["tolerance"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("one request at a time" in m and "forward takes no position_ids" in m and "above the tolerance" in m
               for m in warnings), warnings
    assert generator.provenance["batch_size"] == 1 and generator.stats["batches"] == len(requests)
    assert [c.text for c in got] == [full_recompute_greedy(generator.model, generator, r, 10) for r in requests]


def test_absolute_positions_passed_as_position_ids_batch_exactly(legacy_dirs):
    generator = load(legacy_dirs[True])
    assert generator.plan.takes_position_ids
    assert generator.provenance["left_padding"]["batching"] == "exact: batched"
    requests = reqs()
    got = generator.complete(requests, GREEDY)
    assert generator.provenance["batch_size"] == 4
    assert [c.text for c in got] == [full_recompute_greedy(generator.model, generator, r, 10) for r in requests]


def _early_stop_token(generator: HFTextGenerator, requests, steps: int) -> int:
    """A token some rows emit early and others not at all, so rows stop at different steps."""
    free = [c for c in generator.complete(requests, DecodingParams(do_sample=False, max_new_tokens=steps))]
    rows_by_token: dict[int, set[int]] = {}
    for row, completion in enumerate(free):
        for token in generator.tokenizer(completion.text, add_special_tokens=False)["input_ids"][: steps - 2]:
            rows_by_token.setdefault(token, set()).add(row)
    candidates = [t for t, rows in rows_by_token.items() if 0 < len(rows) < len(requests)]
    assert candidates, "every row emits the same tokens; pick another seed"
    return min(candidates)


def test_legacy_loop_drops_stopped_rows_from_a_tuple_cache(baichuan2_dirs, monkeypatch):
    generator = load(baichuan2_dirs["attributes"], batch_size=6)
    requests = reqs()
    steps = 12
    generator.stop_ids = generator.stop_ids | {_early_stop_token(generator, requests, steps)}
    params = DecodingParams(do_sample=False, max_new_tokens=steps)
    before = dict(generator.stats)
    dropped = generator.complete(requests, params)
    dropped_steps = generator.stats["computed_decode_steps"] - before["computed_decode_steps"]
    useful = generator.stats["useful_tokens"] - before["useful_tokens"]
    assert generator.stats["cache_compactions"] > before["cache_compactions"]
    assert generator.provenance["legacy_stopped_rows"] == "dropped from the model's cache"
    assert {c.finish_reason for c in dropped} == {"stop", "length"}
    # every computed row-step is a kept token or the one stop token of a row
    assert dropped_steps == useful + sum(c.finish_reason == "stop" for c in dropped)

    # the same cache, declared opaque: rows stay to the end, more steps, the same texts
    monkeypatch.setattr(decode, "select_legacy_rows", lambda *args: None)
    before = dict(generator.stats)
    kept = generator.complete(requests, params)
    kept_steps = generator.stats["computed_decode_steps"] - before["computed_decode_steps"]
    assert [c.text for c in kept] == [c.text for c in dropped]
    assert kept_steps == len(requests) * max(c.n_completion_tokens + (c.finish_reason == "stop") for c in kept)
    assert kept_steps > dropped_steps
    assert generator.provenance["legacy_stopped_rows"].startswith("kept to the batch's end")


def test_row_selection_refuses_layouts_it_cannot_tell(baichuan2_dirs):
    keep = torch.tensor([0, 2])
    batch_major = tuple((torch.zeros(3, 2, 5, 4), torch.ones(3, 2, 5, 4)) for _ in range(2))
    selected = decode.select_legacy_rows(batch_major, keep, 3, 5)
    assert [tuple(t.shape) for layer in selected for t in layer] == [(2, 2, 5, 4)] * 4
    sequence_major = ((torch.zeros(5, 3, 2, 4), torch.zeros(5, 3, 2, 4)),)
    assert decode.select_legacy_rows(sequence_major, keep, 3, 5) is None
    assert decode.select_legacy_rows({"keys": torch.zeros(3, 5)}, keep, 3, 5) is None


def _nan_after(calls: int, forward):
    """Wrap a forward so that its logits turn NaN from call number ``calls`` on."""
    count = {"n": 0}

    def wrapped(*args, **kwargs):
        output = forward(*args, **kwargs)
        count["n"] += 1
        if count["n"] > calls:
            output.logits[:] = float("nan")
        return output
    return wrapped


@pytest.mark.parametrize("loop", ["cached", "legacy"])
@pytest.mark.parametrize("calls", [0, 3])
def test_non_finite_logits_fail_loudly_naming_the_model(baichuan2_dirs, loop, calls):
    if loop == "cached":
        generator = HFTextGenerator.from_model(tiny_model("llama"), chat_tokenizer(), model_id="tiny-llama",
                                               batch_size=4, share_prompt_prefix=False)
    else:
        generator = load(baichuan2_dirs["attributes"])
    generator.model.forward = _nan_after(calls, generator.model.forward)
    where = "at the first step" if calls == 0 else "during decoding"
    with pytest.raises(ModelSupportError, match=rf"model '{generator.model_id}' produced non-finite logits.*{where}"):
        generator.complete(reqs()[:4], GREEDY)


def test_row_selection_keeps_a_transformers_cache_in_place():
    from transformers import DynamicCache

    cache = DynamicCache()
    for layer in range(2):
        cache.update(torch.arange(3.0)[:, None, None, None].expand(3, 2, 5, 4).clone(), torch.zeros(3, 2, 5, 4), layer)
    selected = decode.select_legacy_rows(cache, torch.tensor([0, 2]), 3, 5)
    assert selected is cache and cache.layers[0].keys[:, 0, 0, 0].tolist() == [0.0, 2.0]
