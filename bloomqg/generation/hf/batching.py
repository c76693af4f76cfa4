"""Pure helpers for batched generation: batch planning, batch-size policy, stop handling, seeds.

Kept free of torch so they are unit-tested on plain lists; :mod:`bloomqg.generation.hf` uses
them around its decode loop.

Batch plan.  Requests are sorted by prompt length (ties by their position in the request list)
and cut into consecutive chunks, so the prompts of one batch have nearly equal length and left
padding wastes little prefill.  The plan depends only on the lengths and their order, which the
generation stage relies on for resumption: when the requests of the first ``n`` finished batches
are dropped from the list, planning the rest reproduces the remaining batches exactly.

Decode waste.  The decode loop drops a sequence from the batch as soon as it stops, so
``computed decode steps`` exceed useful tokens only by the one stop token per sequence
(see :func:`padding_efficiency`).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: Batch size for "auto" on a CPU.  Measured with SmolLM2-135M fp32, 2 threads, 64 real CoT
#: prompts with response prefill, 128 new tokens: batch 64 generated 124-139 tok/s against
#: 114-119 at batch 32 (same run, alternating; the decode step reads the weights once per step
#: whatever the batch, so more rows amortise them further).  Above 64 the KV cache the step
#: reads grows as fast as the rows and the gain flattens (random-token decode: 225-256 tok/s
#: at 128 against 220-233 at 64); a larger batch also delays the first checkpoint.
CPU_AUTO_BATCH_SIZE = 64
#: Prompt tokens per prefill forward pass (rows x columns).  On a CPU a pass over a whole
#: batch of 32 x 220 tokens ran at ~570 tok/s and passes of 1-2k tokens at ~670-700 tok/s
#: (SmolLM2-135M fp32, 2 threads: their activations stay in the caches).
CPU_PREFILL_CHUNK_TOKENS = 2048
#: On a GPU the chunk bounds the prefill's transient activations, so the batch size is set by
#: the KV cache; 16k tokens keep the matrix multiplications large.
GPU_PREFILL_CHUNK_TOKENS = 16384
#: Upper bound for "auto" on a GPU: beyond this the decode step is compute bound for 7-9B
#: models and a bigger batch only delays checkpoints.
GPU_MAX_BATCH_SIZE = 256
#: Share of the free GPU memory (after loading the weights) the batch may plan to use.
GPU_MEMORY_FRACTION = 0.85


@dataclass(frozen=True)
class PlannedBatch:
    """One batch of a plan: its index in the plan and the request positions it holds."""

    batch_index: int
    positions: tuple[int, ...]


def plan_batches(lengths: Sequence[int], batch_size: int) -> list[PlannedBatch]:
    """Group request positions into batches of at most ``batch_size``, bucketed by length.

    Positions are sorted by ``(length, position)`` and chunked in that order, shortest batch
    first.  Every position appears in exactly one batch.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    order = sorted(range(len(lengths)), key=lambda position: (lengths[position], position))
    return [
        PlannedBatch(batch_index=index, positions=tuple(order[start : start + batch_size]))
        for index, start in enumerate(range(0, len(order), batch_size))
    ]


def prefill_padding_efficiency(lengths: Sequence[int], plan: Iterable[PlannedBatch]) -> float:
    """Real prompt tokens ÷ prompt tokens computed (each batch padded to its longest prompt)."""
    real = computed = 0
    for batch in plan:
        batch_lengths = [lengths[position] for position in batch.positions]
        real += sum(batch_lengths)
        computed += max(batch_lengths) * len(batch_lengths)
    return real / computed if computed else 1.0


def kv_cache_bytes_per_token(
    *, num_layers: int, num_kv_heads: int, head_dim: int, dtype_bytes: int
) -> int:
    """Bytes of key + value cache one token of one sequence occupies across all layers."""
    return 2 * num_layers * num_kv_heads * head_dim * dtype_bytes


def auto_batch_size_gpu(
    *,
    free_bytes: int,
    kv_bytes_per_token: int,
    max_prompt_tokens: int,
    max_new_tokens: int,
    activation_bytes_per_prompt_token: int = 0,
    logits_bytes_per_sequence: int = 0,
    prefill_chunk_tokens: int | None = None,
    memory_fraction: float = GPU_MEMORY_FRACTION,
    max_batch_size: int = GPU_MAX_BATCH_SIZE,
) -> int:
    """Largest batch whose KV cache and prefill activations fit in the free GPU memory.

    Per sequence: ``kv_bytes_per_token × (prompt + max_new_tokens)`` for the cache and the
    last-position logits.  The prefill's transient activations
    (``activation_bytes_per_prompt_token`` per token in flight) are a fixed reserve of
    ``prefill_chunk_tokens`` tokens when the prefill is chunked, else per sequence.  It is an
    estimate; an out-of-memory batch is halved and retried.
    """
    per_sequence = kv_bytes_per_token * (max_prompt_tokens + max_new_tokens) + logits_bytes_per_sequence
    budget = free_bytes * memory_fraction
    if prefill_chunk_tokens is None:
        per_sequence += activation_bytes_per_prompt_token * max_prompt_tokens
    else:
        budget -= activation_bytes_per_prompt_token * prefill_chunk_tokens
    if budget <= 0:
        return 1
    if per_sequence <= 0:
        return max_batch_size
    return max(1, min(max_batch_size, math.floor(budget / per_sequence)))


@dataclass(frozen=True)
class DeviceMemory:
    """One GPU of a (possibly sharded) model, for :func:`auto_batch_size_devices`."""

    free_bytes: int
    #: decoder layers whose KV cache lives on this device
    num_layers: int
    #: whether the output head (logits and the sampling path) runs on this device
    holds_logits: bool


#: Bytes per vocabulary entry and row the sampling path holds at its peak: the model's logits
#: (2, bf16), their float32 copy (4), the temperature-scaled copy (4), softmax (4) and its
#: cumulative sum (4).  Top-p adds a full sort when the nucleus is wider than the top-k
#: candidates: sorted probabilities (4), their int64 ids (8), the nucleus mask (1), the masked
#: product (4) and its cumulative sum (4).
SAMPLING_BYTES_PER_LOGIT = 18
TOP_P_SAMPLING_BYTES_PER_LOGIT = SAMPLING_BYTES_PER_LOGIT + 21


def auto_batch_size_devices(
    devices: Sequence[DeviceMemory],
    *,
    kv_bytes_per_token_per_layer: int,
    max_prompt_tokens: int,
    max_new_tokens: int,
    activation_bytes_per_prompt_token: int,
    logits_bytes_per_sequence: int,
    prefill_chunk_tokens: int | None,
    memory_fraction: float = GPU_MEMORY_FRACTION,
    max_batch_size: int = GPU_MAX_BATCH_SIZE,
) -> int:
    """The largest batch that fits on every device of a model split across GPUs.

    Each device holds the KV cache of its own layers, a prefill reserve when it holds layers,
    and the logits and sampling path when it holds the output head; the batch is the smallest
    of the per-device answers of :func:`auto_batch_size_gpu`.
    """
    if not devices:
        raise ValueError("no GPU device to plan a batch for")
    sizes = [
        auto_batch_size_gpu(
            free_bytes=device.free_bytes,
            kv_bytes_per_token=kv_bytes_per_token_per_layer * device.num_layers,
            max_prompt_tokens=max_prompt_tokens,
            max_new_tokens=max_new_tokens,
            activation_bytes_per_prompt_token=activation_bytes_per_prompt_token if device.num_layers else 0,
            logits_bytes_per_sequence=logits_bytes_per_sequence if device.holds_logits else 0,
            prefill_chunk_tokens=prefill_chunk_tokens,
            memory_fraction=memory_fraction,
            max_batch_size=max_batch_size,
        )
        for device in devices
    ]
    return min(sizes)


def split_to_cap(positions: Sequence[int], cap: int | None) -> list[tuple[int, ...]]:
    """A planned batch cut into consecutive pieces of at most ``cap`` (None: left whole).

    After an out-of-memory halving the generator learns a cap, so later (longer) batches run
    at the size that fitted instead of failing once each at the planned size.
    """
    if cap is None or len(positions) <= cap:
        return [tuple(positions)]
    return [tuple(positions[start : start + cap]) for start in range(0, len(positions), cap)]


def resolve_batch_size(
    batch_size: int | str | None, *, n_requests: int, on_gpu: bool, gpu_estimate: int | None = None
) -> int:
    """The batch size to plan with: an explicit integer, or the "auto" policy.

    "auto" (or None) means :data:`CPU_AUTO_BATCH_SIZE` on a CPU and ``gpu_estimate`` (from
    :func:`auto_batch_size_gpu`) on a GPU, never more than the number of requests.
    """
    if batch_size is None or batch_size == "auto":
        if on_gpu:
            if gpu_estimate is None:
                raise ValueError("batch_size 'auto' on a GPU needs a memory-based estimate")
            chosen = gpu_estimate
        else:
            chosen = CPU_AUTO_BATCH_SIZE
    elif isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer or 'auto', got {batch_size!r}")
    else:
        chosen = batch_size
    return max(1, min(chosen, max(n_requests, 1)))


def split_in_half(positions: Sequence[int]) -> list[tuple[int, ...]]:
    """Two halves of a batch that ran out of memory (the first gets the extra item)."""
    if len(positions) < 2:
        raise ValueError("a batch of one cannot be split further")
    middle = (len(positions) + 1) // 2
    return [tuple(positions[:middle]), tuple(positions[middle:])]


def trim_completion(token_ids: Sequence[int], stop_ids: Iterable[int]) -> tuple[list[int], str]:
    """Cut generated ids at the first stop token (excluded); return them and the finish reason.

    "stop" when a stop token was produced, "length" when the sequence ran to its limit.
    """
    stops = set(stop_ids)
    for index, token in enumerate(token_ids):
        if token in stops:
            return list(token_ids[:index]), "stop"
    return list(token_ids), "length"


def request_seed(seed: int, request_id: str) -> int:
    """A 63-bit sampling seed for one request, from the study seed and the request id.

    Each sequence samples from its own generator seeded this way, so its text does not depend
    on which other requests share its batch or on the batch's position in the run.
    """
    digest = hashlib.sha256(f"{seed}\x00{request_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") & ((1 << 63) - 1)


def padding_efficiency(useful_tokens: int, computed_tokens: int) -> float:
    """Useful completion tokens ÷ sequence-steps the decode loop computed (1.0 when idle)."""
    return useful_tokens / computed_tokens if computed_tokens else 1.0
