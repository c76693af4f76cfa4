"""Pure batching helpers: planning, bucketing, resumable plans, batch-size policy, stops, seeds."""

from __future__ import annotations

import pytest

from bloomqg.generation.hf.batching import (
    CPU_AUTO_BATCH_SIZE,
    auto_batch_size_gpu,
    kv_cache_bytes_per_token,
    padding_efficiency,
    plan_batches,
    prefill_padding_efficiency,
    request_seed,
    resolve_batch_size,
    split_in_half,
    trim_completion,
)


def test_plan_covers_every_position_once_and_respects_batch_size():
    lengths = [50, 10, 30, 10, 70, 20, 40]
    plan = plan_batches(lengths, 3)
    positions = [p for batch in plan for p in batch.positions]
    assert sorted(positions) == list(range(len(lengths)))
    assert [len(batch.positions) for batch in plan] == [3, 3, 1]
    assert [batch.batch_index for batch in plan] == [0, 1, 2]


def test_plan_buckets_by_length_with_position_tiebreak():
    lengths = [50, 10, 30, 10, 70, 20, 40]
    plan = plan_batches(lengths, 3)
    assert plan[0].positions == (1, 3, 5)  # 10, 10, 20: ties keep request order
    assert plan[1].positions == (2, 6, 0)  # 30, 40, 50
    assert plan[2].positions == (4,)


def test_bucketing_reduces_prefill_padding_waste():
    lengths = [100, 10, 95, 12, 90, 11, 105, 9]
    bucketed = prefill_padding_efficiency(lengths, plan_batches(lengths, 2))
    naive = sum(lengths) / sum(max(lengths[i : i + 2]) * 2 for i in range(0, len(lengths), 2))
    assert bucketed > 0.9 > naive


def test_plan_of_the_remaining_requests_reproduces_the_remaining_batches():
    """Resumption drops whole leading batches; replanning the rest must give the same batches."""
    lengths = [33, 5, 17, 5, 29, 41, 8, 17, 12, 40, 3]
    full = plan_batches(lengths, 4)
    done = set(full[0].positions) | set(full[1].positions)
    remaining = [p for p in range(len(lengths)) if p not in done]  # request order kept
    replanned = plan_batches([lengths[p] for p in remaining], 4)
    as_original = [tuple(remaining[p] for p in batch.positions) for batch in replanned]
    assert as_original == [batch.positions for batch in full[2:]]


def test_plan_rejects_nonpositive_batch_size():
    with pytest.raises(ValueError, match="batch_size"):
        plan_batches([1, 2], 0)


def test_kv_cache_bytes_for_qwen25_7b_shapes():
    # 28 layers, 4 KV heads, head_dim 128, bf16: 2*28*4*128*2 = 57,344 bytes per token
    assert kv_cache_bytes_per_token(num_layers=28, num_kv_heads=4, head_dim=128, dtype_bytes=2) == 57344


def test_auto_batch_size_gpu_from_free_memory():
    per_token = 57344
    # 100 GiB free, 300-token prompts + 500 new tokens: 0.85*100GiB / (57344*800) ~= 1989 -> cap
    assert auto_batch_size_gpu(free_bytes=100 * 2**30, kv_bytes_per_token=per_token,
                               max_prompt_tokens=300, max_new_tokens=500) == 256
    # 4 GiB free: floor(0.85 * 4 GiB / 45,875,200) = 79
    assert auto_batch_size_gpu(free_bytes=4 * 2**30, kv_bytes_per_token=per_token,
                               max_prompt_tokens=300, max_new_tokens=500) == 79
    # activations and logits count too
    smaller = auto_batch_size_gpu(free_bytes=4 * 2**30, kv_bytes_per_token=per_token,
                                  max_prompt_tokens=300, max_new_tokens=500,
                                  activation_bytes_per_prompt_token=50_000,
                                  logits_bytes_per_sequence=600_000)
    assert smaller < 79
    # a chunked prefill reserves its activations once, not per sequence
    chunked = auto_batch_size_gpu(free_bytes=4 * 2**30, kv_bytes_per_token=per_token,
                                  max_prompt_tokens=300, max_new_tokens=500,
                                  activation_bytes_per_prompt_token=50_000,
                                  logits_bytes_per_sequence=600_000, prefill_chunk_tokens=16384)
    # floor((0.85 * 4 GiB - 50,000 * 16,384) / (57,344 * 800 + 600,000)) = 60
    assert smaller < chunked == 60
    assert auto_batch_size_gpu(free_bytes=2**20, kv_bytes_per_token=per_token, max_prompt_tokens=300,
                               max_new_tokens=500, activation_bytes_per_prompt_token=50_000,
                               prefill_chunk_tokens=16384) == 1
    assert auto_batch_size_gpu(free_bytes=10, kv_bytes_per_token=per_token,
                               max_prompt_tokens=300, max_new_tokens=500) == 1


def test_resolve_batch_size_policy():
    assert resolve_batch_size("auto", n_requests=1000, on_gpu=False) == CPU_AUTO_BATCH_SIZE
    assert resolve_batch_size(None, n_requests=5, on_gpu=False) == 5  # never above the requests
    assert resolve_batch_size(8, n_requests=100, on_gpu=True) == 8
    assert resolve_batch_size("auto", n_requests=100, on_gpu=True, gpu_estimate=64) == 64
    with pytest.raises(ValueError, match="memory-based estimate"):
        resolve_batch_size("auto", n_requests=100, on_gpu=True)
    for bad in (0, -3, "big", 2.5, True):
        with pytest.raises(ValueError, match="batch_size"):
            resolve_batch_size(bad, n_requests=10, on_gpu=False)


def test_split_in_half_keeps_every_item():
    assert split_in_half((4, 7, 1, 9, 2)) == [(4, 7, 1), (9, 2)]
    assert split_in_half((4, 7)) == [(4,), (7,)]
    with pytest.raises(ValueError):
        split_in_half((4,))


def test_trim_completion_stops_at_first_stop_token_and_excludes_it():
    assert trim_completion([5, 6, 2, 7, 2], {2, 0}) == ([5, 6], "stop")
    assert trim_completion([5, 6, 7], {2}) == ([5, 6, 7], "length")
    assert trim_completion([0], {2, 0}) == ([], "stop")


def test_request_seed_is_stable_and_distinct():
    assert request_seed(7, "cs-0001:cot") == request_seed(7, "cs-0001:cot")
    assert request_seed(7, "cs-0001:cot") != request_seed(8, "cs-0001:cot")
    assert request_seed(7, "cs-0001:cot") != request_seed(7, "cs-0002:cot")
    assert 0 <= request_seed(7, "x") < 2**63
    # pinned: the derivation is part of the reproducibility contract
    assert request_seed(0, "a") == 6852966567523245171


def test_padding_efficiency():
    assert padding_efficiency(90, 100) == 0.9
    assert padding_efficiency(0, 0) == 1.0


def test_checkpoint_keeps_whole_batches_and_drops_a_torn_last_line(tmp_path):
    """The stage's checkpoint: one JSON line per batch; a kill mid-write tears only the last."""
    import json

    from bloomqg.generation.stage import load_checkpoint

    key = {"model": "m", "params": {"seed": 1}, "prompts_sha256": "abc"}
    path = tmp_path / "ckpt.jsonl"
    batch0 = {"batch": 0, "rows": [{"prompt_id": "a"}, {"prompt_id": "b"}]}
    batch1 = {"batch": 1, "rows": [{"prompt_id": "c"}]}
    lines = [json.dumps({"run": key}), json.dumps(batch0), json.dumps(batch1)]
    path.write_text("\n".join(lines) + "\n" + '{"batch": 2, "rows": [{"prompt_')
    rows, batches = load_checkpoint(path, key)
    assert [row["prompt_id"] for row in rows] == ["a", "b", "c"] and batches == 2

    # a torn line that is not the last means corruption, not a kill: refuse to guess
    path.write_text("\n".join([lines[0], '{"batch": 0, "ro', lines[2]]) + "\n")
    with pytest.raises(ValueError, match="line 2"):
        load_checkpoint(path, key)

    # another run's checkpoint is discarded, not mixed in
    path.write_text("\n".join(lines) + "\n")
    assert load_checkpoint(path, dict(key, model="other")) == ([], 0)
    assert not path.exists()


def test_batch_for_a_model_split_over_gpus_is_the_tightest_device():
    from bloomqg.generation.hf.batching import DeviceMemory, auto_batch_size_devices

    common = {"kv_bytes_per_token_per_layer": 2 * 4 * 128 * 2, "max_prompt_tokens": 200,
              "max_new_tokens": 300, "activation_bytes_per_prompt_token": 0,
              "logits_bytes_per_sequence": 152064 * 18, "prefill_chunk_tokens": None,
              "memory_fraction": 1.0, "max_batch_size": 10_000}
    gib = 2**30
    even = [DeviceMemory(8 * gib, 14, False), DeviceMemory(8 * gib, 14, True)]
    # the device with the output head also holds every row's logits and sampling buffers
    per_row_first = 2 * 4 * 128 * 2 * 14 * 500
    per_row_second = per_row_first + 152064 * 18
    assert auto_batch_size_devices(even, **common) == (8 * gib) // per_row_second
    # one device with more layers and less memory sets the batch for all
    skewed = [DeviceMemory(2 * gib, 20, False), DeviceMemory(30 * gib, 8, True)]
    assert auto_batch_size_devices(skewed, **common) == (2 * gib) // (2 * 4 * 128 * 2 * 20 * 500)
    with pytest.raises(ValueError, match="no GPU"):
        auto_batch_size_devices([], **common)


def test_split_to_cap_keeps_order_and_every_position():
    from bloomqg.generation.hf.batching import split_to_cap

    assert split_to_cap((5, 1, 7, 2, 9), 2) == [(5, 1), (7, 2), (9,)]
    assert split_to_cap((5, 1), None) == [(5, 1)] and split_to_cap((5, 1), 4) == [(5, 1)]


def test_layer_devices_read_from_the_device_map():
    torch = pytest.importorskip("torch")
    from types import SimpleNamespace

    from bloomqg.generation.hf.memory import layer_devices

    config = SimpleNamespace(num_hidden_layers=4)
    config.get_text_config = lambda: config
    split = SimpleNamespace(config=config, hf_device_map={
        "model.embed_tokens": 0, "model.layers.0": 0, "model.layers.1": 0, "model.layers.2": 1,
        "model.layers.3": 1, "model.norm": 1, "lm_head": 1})
    assert layer_devices(split, torch.device("cpu")) == {torch.device("cuda", 0): 2, torch.device("cuda", 1): 2}
    whole = SimpleNamespace(config=config)
    assert layer_devices(whole, torch.device("cuda", 0)) == {torch.device("cuda", 0): 4}


def test_row_selection_moves_indices_to_each_layers_device():
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from types import SimpleNamespace

    from bloomqg.generation.hf import kv_cache

    seen = []

    class OtherLayer:  # transformers' own layer classes index with the tensor they are given
        is_initialized = True
        keys = torch.empty(3, 1, 2, 2, device="meta")

        def batch_select_indices(self, indices):
            seen.append(indices.device)

    cache = SimpleNamespace(layers=[OtherLayer(), OtherLayer()])
    kv_cache.select_rows(cache, torch.tensor([0, 2]))
    assert seen == [torch.device("meta")] * 2
