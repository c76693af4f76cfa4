"""KV caches for the transformers decode loop: preallocated rows and a shared prompt prefix.

Imported only by the decode loops (:mod:`bloomqg.generation.hf.decode`; it needs torch and transformers).

Preallocation.  transformers' ``DynamicLayer`` appends each step's keys and values with
``torch.cat``, which copies the layer's whole cache every step: on a CPU with a batch of 32
that copying took 28% of a generation run (torch profiler, SmolLM2-135M, 2 threads).
:class:`PreallocatedLayer` writes each step into a buffer sized once for the prompt plus the
new tokens and hands the attention a view of the filled part.

Shared prefix.  The prompts of one batch start with the same tokens (chat template, system
message, the strategy's instructions).  :func:`prefill_shared_prefix` computes the keys and
values of that prefix once, for a single row, and seeds every row of the batch's cache with
them, so the batch's prefill covers only what differs.  The rows are laid out
``[shared prefix][left padding][own suffix]``: positions continue from the prefix, padding is
masked, and since every row sees the prefix no query row is fully masked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from bloomqg.generation.hf.model_support import cache_keyword as forward_cache_keyword
from bloomqg.generation.hf.model_support import cache_not_filled_error

#: Below this many shared tokens a separate prefix pass is not worth its overhead.
MIN_SHARED_PREFIX_TOKENS = 8


class PreallocatedLayer(DynamicLayer):
    """A full-attention cache layer that grows into a preallocated buffer instead of by ``cat``.

    ``keys`` and ``values`` are views of the filled part of the buffers, so transformers code
    that reads them (sequence length, masks) sees an ordinary ``DynamicLayer``.  Writing past
    ``capacity`` reallocates (doubling), so a wrong capacity costs time, never tokens.
    """

    def __init__(self, capacity: int) -> None:
        super().__init__()
        if capacity < 1:
            raise ValueError(f"cache capacity must be >= 1, got {capacity}")
        self.capacity = int(capacity)
        self.length = 0
        self._key_buffer: torch.Tensor | None = None
        self._value_buffer: torch.Tensor | None = None

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.device = key_states.device
        rows, heads, _, key_dim = key_states.shape
        value_dim = value_states.shape[-1]
        self._key_buffer = key_states.new_empty((rows, heads, self.capacity, key_dim))
        self._value_buffer = value_states.new_empty((rows, heads, self.capacity, value_dim))
        self.length = 0
        self.is_initialized = True

    def _publish(self) -> None:
        assert self._key_buffer is not None and self._value_buffer is not None
        self.keys = self._key_buffer[:, :, : self.length]
        self.values = self._value_buffer[:, :, : self.length]

    def _grow(self, needed: int) -> None:
        assert self._key_buffer is not None and self._value_buffer is not None
        capacity = max(needed, 2 * self.capacity)
        for name in ("_key_buffer", "_value_buffer"):
            old = getattr(self, name)
            new = old.new_empty((*old.shape[:2], capacity, old.shape[-1]))
            new[:, :, : self.length] = old[:, :, : self.length]
            setattr(self, name, new)
        self.capacity = capacity

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        end = self.length + key_states.shape[-2]
        if end > self.capacity:
            self._grow(end)
        assert self._key_buffer is not None and self._value_buffer is not None
        self._key_buffer[:, :, self.length : end] = key_states
        self._value_buffer[:, :, self.length : end] = value_states
        self.length = end
        self._publish()
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length if self.is_initialized else 0

    def seed(self, keys: torch.Tensor, values: torch.Tensor, rows: int) -> None:
        """Start the layer as ``rows`` copies of a one-row cache (a shared prefix)."""
        if keys.shape[0] != 1:
            raise ValueError(f"a shared prefix is one row, got {keys.shape[0]}")
        self.lazy_initialization(keys.expand(rows, -1, -1, -1), values.expand(rows, -1, -1, -1))
        self.update(keys.expand(rows, -1, -1, -1), values.expand(rows, -1, -1, -1))

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if not self.is_initialized:
            return
        assert self._key_buffer is not None and self._value_buffer is not None
        indices = indices.to(self._key_buffer.device)  # a split model's layers live on several GPUs
        self._key_buffer = self._key_buffer[indices]
        self._value_buffer = self._value_buffer[indices]
        self._publish()

    def batch_repeat_interleave(self, repeats: int) -> None:
        if not self.is_initialized:
            return
        assert self._key_buffer is not None and self._value_buffer is not None
        self._key_buffer = self._key_buffer.repeat_interleave(repeats, dim=0)
        self._value_buffer = self._value_buffer.repeat_interleave(repeats, dim=0)
        self._publish()

    def crop(self, tokens_to_remove: int) -> None:
        if tokens_to_remove > 0:
            raise ValueError("crop takes a negative number of tokens to remove")
        if tokens_to_remove and self.is_initialized:
            self.length = max(0, self.length + tokens_to_remove)
            self._publish()


def decode_cache(model_config: Any, capacity: int) -> DynamicCache:
    """A ``DynamicCache`` for ``model_config`` whose full-attention layers are preallocated.

    Layers of other kinds (sliding window, linear attention) keep transformers' own classes.
    """
    cache = DynamicCache(config=model_config)
    cache.layers = [
        PreallocatedLayer(capacity) if type(layer) is DynamicLayer else layer for layer in cache.layers
    ]
    return cache


def all_layers_preallocated(cache: DynamicCache) -> bool:
    """Whether every layer can be seeded with a shared prefix (all are full attention)."""
    return bool(cache.layers) and all(isinstance(layer, PreallocatedLayer) for layer in cache.layers)


def shared_prefix_length(encoded: Sequence[Sequence[int]]) -> int:
    """Tokens every sequence starts with, leaving each at least one token of its own.

    The last prompt token must go through the batch's own prefill: its logits give the first
    new token.
    """
    if len(encoded) < 2:
        return 0
    shortest = min(len(tokens) for tokens in encoded)
    first = encoded[0]
    length = 0
    while length < shortest - 1 and all(tokens[length] == first[length] for tokens in encoded):
        length += 1
    return length


def select_rows(cache: DynamicCache, indices: torch.Tensor) -> None:
    """Keep only the cache rows ``indices`` in every layer, each on its own device.

    transformers' own layer classes (sliding window) index with the tensor as given, so the
    indices are moved to each layer's device here.
    """
    for layer in cache.layers:
        if isinstance(layer, PreallocatedLayer):
            layer.batch_select_indices(indices)
        elif getattr(layer, "is_initialized", False):
            layer.batch_select_indices(indices.to(layer.keys.device))


def prefill_shared_prefix(
    model: Any, prefix: Sequence[int], capacity: int, *, cache_keyword: str | None = None,
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Keys and values, per layer, of ``prefix`` run through ``model`` as a single row.

    ``cache_keyword`` is the name ``forward`` takes the cache under (read from its signature
    when not given); a model that leaves the cache unfilled is an error, not a silent
    recomputation.
    """
    keyword = cache_keyword or forward_cache_keyword(type(model))
    cache = decode_cache(model.config, capacity)
    input_ids = torch.tensor([list(prefix)], dtype=torch.long,
                             device=model.get_input_embeddings().weight.device)
    model(input_ids=input_ids, **{keyword: cache}, use_cache=True, logits_to_keep=1)
    if cache.get_seq_length() != len(prefix):
        raise cache_not_filled_error(model, keyword, cache.get_seq_length(), len(prefix))
    return [(layer.keys, layer.values) for layer in cache.layers]


def seeded_cache(
    model_config: Any, prefix_states: Sequence[tuple[torch.Tensor, torch.Tensor]], rows: int, capacity: int
) -> DynamicCache:
    """A decode cache whose ``rows`` rows all start with the shared prefix's keys and values."""
    cache = decode_cache(model_config, capacity)
    if not all_layers_preallocated(cache) or len(cache.layers) != len(prefix_states):
        raise ValueError("a shared prefix needs a cache of full-attention layers, one per prefix layer")
    for layer, (keys, values) in zip(cache.layers, prefix_states):
        layer.seed(keys, values, rows)
    return cache


def cache_of_rows(
    model_config: Any, states: Sequence[tuple[torch.Tensor, torch.Tensor]], indices: torch.Tensor, capacity: int
) -> DynamicCache:
    """A decode cache whose rows are rows ``indices`` of ``states`` (per layer keys and values),
    copied: the continuations of the choices mode each extend their own prompt's cache."""
    cache = decode_cache(model_config, capacity)
    if not all_layers_preallocated(cache) or len(cache.layers) != len(states):
        raise ValueError("scoring continuations needs a cache of full-attention layers, one per state layer")
    for layer, (keys, values) in zip(cache.layers, states):
        picked = indices.to(keys.device)
        layer.update(keys[picked], values[picked])  # lazily sized from the first update
    return cache
