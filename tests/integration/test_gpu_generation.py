"""Our decode loops on a GPU: what ``benchmarks/gpu_check.sh`` runs first on a machine lent one.

Opt-in (``pytest -m gpu``).  On a machine without CUDA they skip, unless
``BLOOMQG_GPU_TESTS_ON_CPU=1`` (the device script's ``--dry-run``) runs them on the CPU to check
the tests themselves; the two that need CUDA (memory limits, several GPUs) still skip there.

- our loop against ``model.generate`` for every preset architecture: token-identical greedy
  texts in fp32; in bf16, where the two computations round differently, identical until a
  near-tie (the first differing token may only differ where ``generate``'s two candidates are
  within rounding of each other);
- the Baichuan2-shaped remote code loaded with ``trust_remote_code``: its ``__init__`` tables
  rebuilt on the GPU, batched texts equal to batch 1's;
- a model split over two GPUs (when two are visible): cache rows selected on each layer's
  device, texts equal to ``generate``'s;
- the out-of-memory halving under a real CUDA memory cap: it splits, loses nothing, and gives
  the texts of an uncapped run of the same batches.
"""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from bloomqg.inputs.chat import ChatRequest, DecodingParams
from bloomqg.generation.hf.batching import trim_completion
from bloomqg.generation.hf.generator import HFTextGenerator
from bloomqg.generation.hf.memory import layer_devices
from tests.support.tiny_models import (
    LEGACY_MODEL_CODE,
    available_architectures,
    chat_tokenizer,
    generate_reference,
    save_baichuan2_remote_model,
    save_standin,
    tiny_model,
)
from tests.unit.test_decode_equivalence import MAX_NEW, early_stop_token, reference_texts, requests

pytestmark = [pytest.mark.gpu, pytest.mark.integration]

#: In bf16 a differing greedy token must be a near-tie of ``generate``'s logits: its logit within
#: this share of the logits' spread of the token ``generate`` chose.
BF16_TIE = 0.05


@pytest.fixture(scope="module")
def device():
    if torch.cuda.is_available():
        return torch.device("cuda", 0)
    if os.environ.get("BLOOMQG_GPU_TESTS_ON_CPU") == "1":
        return torch.device("cpu")
    pytest.skip("needs an NVIDIA GPU (BLOOMQG_GPU_TESTS_ON_CPU=1 runs these on the CPU)")


def needs_cuda(count: int = 1) -> None:
    if torch.cuda.device_count() < count:
        pytest.skip(f"needs {count} CUDA device(s), {torch.cuda.device_count()} visible")


def with_generated_ids(generator: HFTextGenerator) -> dict[str, list[int]]:
    """Record every row's raw generated ids (stop tokens included) by request id."""
    recorded: dict[str, list[int]] = {}
    original = generator._completions

    def recording(requests, encoded, result, batch_index, started):
        recorded.update({r.request_id: ids for r, ids in zip(requests, result.generated)})
        return original(requests, encoded, result, batch_index, started)
    generator._completions = recording
    return recorded


@pytest.mark.parametrize("architecture", available_architectures())
def test_fp32_greedy_texts_equal_generate_on_the_device(device, architecture):
    generator = HFTextGenerator.from_model(tiny_model(architecture).to(device), chat_tokenizer(),
                                           model_id=architecture, batch_size=4)
    assert generator.input_device.type == device.type
    reqs = requests(prefill=True)
    generator.stop_ids = generator.stop_ids | {early_stop_token(generator, reqs)}
    want = generate_reference(generator, reqs, MAX_NEW)
    got = generator.complete(reqs, DecodingParams(do_sample=False, max_new_tokens=MAX_NEW))
    assert [c.text for c in got] == reference_texts(generator, reqs, want)
    assert [c.n_completion_tokens for c in got] == [len(w) for w in want]
    assert {c.finish_reason for c in got} == {"stop", "length"}  # rows left the batch early


@pytest.mark.parametrize("architecture", available_architectures())
def test_bf16_greedy_tokens_equal_generate_up_to_near_ties(device, architecture):
    model = tiny_model(architecture, dtype=torch.bfloat16).to(device)
    generator = HFTextGenerator.from_model(model, chat_tokenizer(), model_id=architecture, batch_size=6)
    recorded = with_generated_ids(generator)
    reqs = requests()
    generator.complete(reqs, DecodingParams(do_sample=False, max_new_tokens=MAX_NEW))
    ours = [recorded[r.request_id] for r in reqs]
    encoded = [generator.encode(r) for r in reqs]
    width = max(map(len, encoded))
    ids = torch.full((len(reqs), width), generator.pad_id)
    mask = torch.zeros((len(reqs), width), dtype=torch.long)
    for row, tokens in enumerate(encoded):
        ids[row, width - len(tokens):] = torch.tensor(tokens)
        mask[row, width - len(tokens):] = 1
    out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), do_sample=False,
                         max_new_tokens=MAX_NEW, eos_token_id=sorted(generator.stop_ids),
                         pad_token_id=generator.pad_id, output_scores=True, return_dict_in_generate=True)
    theirs = out.sequences[:, width:].tolist()
    identical = 0
    for row in range(len(reqs)):
        mine, _ = trim_completion(ours[row], generator.stop_ids)
        reference, _ = trim_completion(theirs[row], generator.stop_ids)
        if mine == reference:
            identical += 1
            continue
        step = next(i for i, (a, b) in enumerate(zip(ours[row], theirs[row])) if a != b)
        scores = out.scores[step][row].float()
        margin = float(scores[theirs[row][step]] - scores[ours[row][step]])
        spread = float(scores.max() - scores.min())
        assert margin <= BF16_TIE * spread, (
            f"row {row} differs at step {step}: generate chose {theirs[row][step]}, we chose {ours[row][step]}, "
            f"{margin:.3f} apart on a spread of {spread:.3f}: not a near-tie")
    # a broken path differs at its first token by far more than rounding (caught above); near-ties
    # are rare with these decisive random weights, so most rows agree to the end
    assert identical >= 1, "no row identical to generate's"


def test_baichuan2_remote_code_rebuilds_its_tables_on_the_device_and_batches(device, tmp_path):
    folder = save_baichuan2_remote_model(tmp_path / f"baichuan2-{os.getpid()}")
    generator = HFTextGenerator(folder, model_id="baichuan2-standin", trust_remote_code=True, dtype="float32",
                                chat_template=str(LEGACY_MODEL_CODE / "chat_template.jinja"), batch_size=4)
    rotary = generator.model.model.layers[0].self_attn.rotary_emb
    assert rotary.cos_cached.device.type == device.type and rotary.inv_freq.device.type == device.type
    assert generator.provenance["rebuilt_init_tensors"]["left_on_meta"] == 6
    assert generator.provenance["left_padding"]["batching"] == "exact: batched"
    reqs = [ChatRequest(f"b{i}", ({"role": "user", "content": " ".join(f"w{5 + i + j}" for j in range(i + 1))},))
            for i in range(8)]
    params = DecodingParams(do_sample=False, max_new_tokens=16)
    batched = generator.complete(reqs, params)
    assert generator.provenance["batch_size"] == 4 and all(c.text for c in batched)
    assert [c.text for c in batched] == [c.text for c in generator.complete(reqs, params, batch_size=1)]


def test_a_model_split_over_two_gpus_selects_rows_on_each_device(tmp_path):
    needs_cuda(2)
    folder = save_standin("llama", tmp_path / "llama")
    device_map = {"model.embed_tokens": 0, "model.rotary_emb": 0, "model.layers.0": 0, "model.layers.1": 1,
                  "model.norm": 1, "lm_head": 1}
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, device_map=device_map)
    generator = HFTextGenerator.from_model(model, chat_tokenizer(), model_id="split-llama", batch_size=6)
    assert generator.input_device == torch.device("cuda", 0)
    assert model.get_output_embeddings().weight.device == torch.device("cuda", 1)
    assert layer_devices(model, generator.input_device) == {torch.device("cuda", 0): 1, torch.device("cuda", 1): 1}
    reqs = requests()
    generator.stop_ids = generator.stop_ids | {early_stop_token(generator, reqs)}
    want = generate_reference(generator, reqs, MAX_NEW)
    got = generator.complete(reqs, DecodingParams(do_sample=False, max_new_tokens=MAX_NEW))
    assert [c.text for c in got] == reference_texts(generator, reqs, want)
    assert generator.stats["cache_compactions"] > 0  # rows left a cache spread over both GPUs
    assert generator.resolve_batch_size(reqs, DecodingParams(max_new_tokens=MAX_NEW)) >= 1


def test_out_of_memory_halving_under_a_real_cuda_memory_cap():
    needs_cuda(1)
    from transformers import AutoModelForCausalLM, Qwen2Config

    vocab = 32000
    config = Qwen2Config(vocab_size=vocab, hidden_size=512, intermediate_size=1024, num_hidden_layers=4,
                         num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=4096,
                         tie_word_embeddings=False, bos_token_id=None, eos_token_id=3, pad_token_id=0)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32, attn_implementation="sdpa").eval()
    tokenizer = chat_tokenizer(vocab_size=vocab)
    reqs = [ChatRequest(f"m{i:03d}", ({"role": "user", "content": " ".join(f"w{(i * 7 + j) % 30000}"
                                                                           for j in range(20 + i % 5))},))
            for i in range(128)]
    params = DecodingParams(do_sample=False, max_new_tokens=256)

    def generator() -> HFTextGenerator:
        made = HFTextGenerator.from_model(model, tokenizer, model_id="oom-qwen2", batch_size=128)
        made.stop_ids = {vocab + 1}  # every row decodes max_new_tokens: the planned memory is used
        return made

    capped = generator()
    prompt = max(len(capped.encode(r)) for r in reqs)
    room = capped.estimated_batch_bytes(64, prompt, params) * 1.1
    assert capped.estimated_batch_bytes(128, prompt, params) > room
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.empty_cache()
    torch.cuda.set_per_process_memory_fraction((torch.cuda.memory_allocated() + room) / total)
    try:
        got = capped.complete(reqs, params)
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
    assert capped.stats["oom_splits"] >= 1 and capped.batch_cap is not None and capped.batch_cap <= 64
    assert [c.request_id for c in got] == [r.request_id for r in reqs]
    assert all(c.error is None and c.n_completion_tokens == 256 for c in got)
    # halving runs consecutive chunks of the plan of the learned cap: the same texts as planning them
    uncapped = generator().complete(reqs, params, batch_size=capped.batch_cap)
    assert [c.text for c in got] == [c.text for c in uncapped]
