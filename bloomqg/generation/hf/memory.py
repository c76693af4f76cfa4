"""How much accelerator memory a batch of the transformers backend needs, from the model's
shapes: KV cache per token and layer, prefill activations, logits per row (the arithmetic, free
of torch, is in :mod:`~bloomqg.generation.hf.batching`)."""

from __future__ import annotations

from typing import Any

from bloomqg.inputs.chat import DecodingParams
from bloomqg.generation.hf.batching import (
    SAMPLING_BYTES_PER_LOGIT,
    TOP_P_SAMPLING_BYTES_PER_LOGIT,
    DeviceMemory,
    auto_batch_size_devices,
    kv_cache_bytes_per_token,
)


def memory_terms(model: Any, dtype: Any, params: DecodingParams | None) -> dict[str, int]:
    """Per-token KV bytes per layer, prefill activation bytes and logits bytes per row."""
    import torch

    config = model.config.get_text_config()
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    dtype_bytes = torch.tensor([], dtype=dtype).element_size()
    top_p = params.top_p if params is not None else 1.0
    per_logit = TOP_P_SAMPLING_BYTES_PER_LOGIT if top_p < 1.0 else SAMPLING_BYTES_PER_LOGIT
    return {
        "kv_bytes_per_token_per_layer": kv_cache_bytes_per_token(
            num_layers=1, num_kv_heads=getattr(config, "num_key_value_heads", None) or heads,
            head_dim=head_dim, dtype_bytes=dtype_bytes),
        # prefill transients of one layer at a time: MLP up/gate + attention projections
        "activation_bytes_per_prompt_token": (2 * config.intermediate_size + 4 * config.hidden_size)
        * dtype_bytes,
        "logits_bytes_per_sequence": config.vocab_size * per_logit,
    }


def estimated_batch_bytes(model: Any, dtype: Any, prefill_chunk_tokens: int, rows: int, max_prompt_tokens: int,
                          params: DecodingParams) -> int:
    """Bytes a batch of ``rows`` is estimated to take beyond the weights (one device)."""
    terms = memory_terms(model, dtype, params)
    layers = model.config.get_text_config().num_hidden_layers
    per_row = (terms["kv_bytes_per_token_per_layer"] * layers * (max_prompt_tokens + params.max_new_tokens)
               + terms["logits_bytes_per_sequence"])
    return rows * per_row + terms["activation_bytes_per_prompt_token"] * prefill_chunk_tokens


def gpu_batch_estimate(model: Any, input_device: Any, dtype: Any, prefill_chunk_tokens: int, *,
                       max_prompt_tokens: int, params: DecodingParams | None, max_new_tokens: int) -> int:
    """The largest batch the free memory of the model's GPUs holds (a split model's layers
    counted on their own devices)."""
    import torch

    output_device = model.get_output_embeddings().weight.device
    layers = layer_devices(model, input_device)
    devices = []
    for device in sorted(set(layers) | {output_device}, key=str):
        if device.type != "cuda":
            continue
        free, _total = torch.cuda.mem_get_info(device)
        devices.append(DeviceMemory(free_bytes=free, num_layers=layers.get(device, 0),
                                    holds_logits=device == output_device))
    terms = memory_terms(model, dtype, params)
    return auto_batch_size_devices(
        devices, max_prompt_tokens=max_prompt_tokens, max_new_tokens=max_new_tokens,
        prefill_chunk_tokens=prefill_chunk_tokens, **terms)


def layer_devices(model: Any, default: Any) -> dict[Any, int]:
    """Decoder layers per device: from ``hf_device_map`` when the model is split, else all on one."""
    import re

    import torch

    config = model.config.get_text_config()
    layers = int(config.num_hidden_layers)
    device_map = getattr(model, "hf_device_map", None) or {}
    counts: dict[Any, int] = {}
    for name, device in device_map.items():
        if re.search(r"(?:^|\.)(?:layers|h|blocks|encoder\.layers)\.\d+$", name):
            key = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
            counts[key] = counts.get(key, 0) + 1
    if not counts or sum(counts.values()) != layers:
        return {default: layers}
    return counts
