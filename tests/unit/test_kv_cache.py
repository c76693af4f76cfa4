"""The decode loop's KV caches on a tiny Llama built from a config with random weights.

What is checked is equivalence: a preallocated cache, a shared prefix computed once and a
prefill split into column chunks must give the logits the plain transformers path gives.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM
from transformers.cache_utils import DynamicLayer

from bloomqg.generation.hf import kv_cache
from bloomqg.generation.hf.model_support import cache_keyword

PAD = 0


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    return LlamaForCausalLM(config).eval()


def left_padded(rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), PAD)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, width - len(r):] = torch.tensor(r)
        mask[i, width - len(r):] = 1
    return ids, mask


def plain_logits(model, rows: list[list[int]], steps: int = 3) -> list[torch.Tensor]:
    """Logits of the prefill and ``steps`` greedy decode steps with transformers' DynamicCache."""
    ids, mask = left_padded(rows)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    cache = DynamicCache(config=model.config)
    with torch.inference_mode():
        logits = model(input_ids=ids, attention_mask=mask, position_ids=positions,
                       **{cache_keyword(type(model)): cache}, use_cache=True).logits[:, -1]
        return [logits, *greedy_steps(model, cache, logits, mask, positions[:, -1] + 1, steps)]


def greedy_steps(model, cache, logits, mask, next_positions, steps: int) -> list[torch.Tensor]:
    """Logits of ``steps`` greedy decode steps after ``logits``."""
    out = []
    for _ in range(steps):
        token = logits.argmax(-1)
        mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], -1)
        logits = model(input_ids=token[:, None], attention_mask=mask,
                       position_ids=next_positions[:, None], **{cache_keyword(type(model)): cache},
                       use_cache=True).logits[:, -1]
        out.append(logits)
        next_positions = next_positions + 1
    return out


def shared_logits(model, rows: list[list[int]], columns: int, steps: int = 3) -> list[torch.Tensor]:
    """The same through a preallocated cache seeded with the shared prefix, chunked prefill."""
    shared = kv_cache.shared_prefix_length(rows)
    ids, suffix_mask = left_padded([r[shared:] for r in rows])
    width = ids.shape[1]
    positions = shared + (suffix_mask.cumsum(-1) - 1).clamp(min=0)
    mask = torch.cat([suffix_mask.new_ones((len(rows), shared)), suffix_mask], -1)
    with torch.inference_mode():
        if shared:
            states = kv_cache.prefill_shared_prefix(model, rows[0][:shared], shared)
            cache = kv_cache.seeded_cache(model.config, states, len(rows), capacity=shared + width + 1)
        else:
            cache = kv_cache.decode_cache(model.config, capacity=width + 1)
        for start in range(0, width, columns):
            end = min(width, start + columns)
            logits = model(input_ids=ids[:, start:end], attention_mask=mask[:, : shared + end],
                           position_ids=positions[:, start:end], **{cache_keyword(type(model)): cache},
                           use_cache=True).logits[:, -1]
        # decoding past the capacity on purpose: the buffers must grow
        return [logits, *greedy_steps(model, cache, logits, mask, positions[:, -1] + 1, steps)]


PROMPTS = [
    [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 20, 21],
    [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 30, 31, 32, 33, 34],
    [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 40],
]


def test_shared_prefix_length_leaves_every_row_a_token():
    assert kv_cache.shared_prefix_length(PROMPTS) == 10
    assert kv_cache.shared_prefix_length([[1, 2, 3], [1, 2, 3]]) == 2  # identical prompts
    assert kv_cache.shared_prefix_length([[1, 2], [3, 4]]) == 0
    assert kv_cache.shared_prefix_length([[1, 2, 3]]) == 0  # one row: nothing to share


@pytest.mark.parametrize("columns", [1, 2, 100])
def test_shared_prefix_and_chunked_prefill_give_the_plain_logits(model, columns):
    expected = plain_logits(model, PROMPTS)
    got = shared_logits(model, PROMPTS, columns)
    for step, (want, have) in enumerate(zip(expected, got)):
        torch.testing.assert_close(have, want, rtol=1e-4, atol=1e-4, msg=f"step {step}")


def test_preallocated_layer_matches_dynamic_layer_through_growth_and_selection():
    torch.manual_seed(1)
    dynamic, preallocated = DynamicLayer(), kv_cache.PreallocatedLayer(capacity=3)
    for length in (2, 1, 4):  # 7 tokens into a capacity of 3: grows twice
        k, v = torch.randn(3, 2, length, 4), torch.randn(3, 2, length, 4)
        want, have = dynamic.update(k, v), preallocated.update(k, v)
        torch.testing.assert_close(have, want, rtol=0, atol=0)
    assert preallocated.get_seq_length() == dynamic.get_seq_length() == 7
    keep = torch.tensor([2, 0])
    dynamic.batch_select_indices(keep)
    preallocated.batch_select_indices(keep)
    torch.testing.assert_close(preallocated.keys, dynamic.keys, rtol=0, atol=0)
    k, v = torch.randn(2, 2, 1, 4), torch.randn(2, 2, 1, 4)
    torch.testing.assert_close(preallocated.update(k, v), dynamic.update(k, v), rtol=0, atol=0)


def test_seed_copies_one_row_into_every_row():
    keys, values = torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4)
    layer = kv_cache.PreallocatedLayer(capacity=8)
    layer.seed(keys, values, rows=3)
    assert layer.keys.shape == (3, 2, 5, 4) and layer.get_seq_length() == 5
    assert torch.equal(layer.values[2], values[0])
    with pytest.raises(ValueError, match="one row"):
        kv_cache.PreallocatedLayer(capacity=8).seed(torch.randn(2, 2, 5, 4), torch.randn(2, 2, 5, 4), rows=3)


def test_only_full_attention_layers_are_preallocated(model):
    from transformers import Qwen2Config

    cache = kv_cache.decode_cache(model.config, capacity=16)
    assert kv_cache.all_layers_preallocated(cache) and len(cache.layers) == 2
    # Qwen2 with a sliding window above layer 1: that layer keeps transformers' own class,
    # so the model cannot take a shared prefix
    sliding = Qwen2Config(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, use_sliding_window=True,
                          sliding_window=4, max_window_layers=1)
    mixed = kv_cache.decode_cache(sliding, capacity=16)
    assert isinstance(mixed.layers[0], kv_cache.PreallocatedLayer)
    assert type(mixed.layers[1]).__name__ == "DynamicSlidingWindowLayer"
    assert not kv_cache.all_layers_preallocated(mixed)
    with pytest.raises(ValueError, match="full-attention"):
        kv_cache.seeded_cache(sliding, [(torch.zeros(1, 2, 3, 16),) * 2] * 2, rows=2, capacity=8)
