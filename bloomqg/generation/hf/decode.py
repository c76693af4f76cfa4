"""The two decode loops of :class:`~bloomqg.generation.hf.generator.HFTextGenerator`.

``cached`` (native models): the batch's shared prompt prefix computed once and copied into
every row's preallocated cache (:mod:`~bloomqg.generation.hf.kv_cache`), the rest prefilled in
column chunks, then one token per step, rows that stopped dropped from the cache (at once on a
CPU, once ``compact_fraction`` of the batch is dead on a GPU). It checks after its first forward
pass that the model filled the cache it was given. ``legacy`` (remote-code models): the model's
own cache fed back as it returned it; rows that stopped leave it too when it is a tuple of
per-layer tensors or a transformers ``Cache`` (else they decode on until the last row stops).

Both loops refuse to return text computed from non-finite logits: the first step's logits are
checked at once (one host sync), later steps accumulate a flag on the device that is read once
at the end of the batch; either raises :class:`ModelSupportError` naming the model.
"""

from __future__ import annotations

# torch and the KV cache module load inside the loops: importing the backend stays cheap.

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from bloomqg.inputs.chat import ChatRequest, DecodingParams
from bloomqg.generation.hf.model_support import LoadPlan, ModelSupportError, cache_not_filled_error
from bloomqg.generation.hf.sampling import draw_uniforms, sample_tokens


class Decoder(Protocol):
    """What a decode loop reads from its generator (and ``stats``, which it counts into)."""

    model: Any
    model_id: str
    plan: LoadPlan
    input_device: Any
    pad_id: int
    stop_ids: set[int]
    share_prompt_prefix: bool
    prefill_chunk_tokens: int
    compact_fraction: float
    stats: dict[str, int]

    def forward(self, cache: Any, **inputs: Any) -> Any:
        """Last-position float logits of one forward pass."""


@dataclass(frozen=True)
class DecodeResult:
    """A batch's generated ids per row and what computing them cost."""

    generated: list[list[int]]
    prefill_tokens: int
    computed_decode_steps: int
    shared_prefix_tokens: int
    #: legacy loop: whether stopped rows left the model's own cache (None for the cached loop)
    rows_dropped: bool | None = None


def forward(model: Any, plan: LoadPlan, cache: Any, **inputs: Any) -> Any:
    """Last-position float logits of one forward pass, the cache passed as the model takes it."""
    return model(**inputs, **{plan.cache_keyword: cache}, use_cache=True,
                 logits_to_keep=1).logits[:, -1, :].float()


def legacy_forward(model: Any, input_ids: Any, attention_mask: Any, state: Any,
                   position_ids: Any = None) -> tuple[Any, Any]:
    """One forward pass of a remote-code model on its own cache: last-position float logits and
    the cache it returned (``position_ids`` passed only when given)."""
    import transformers

    extra = {} if position_ids is None else {"position_ids": position_ids}
    if state is not None:
        extra["past_key_values"] = state
    output = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=True, **extra)
    returned = getattr(output, "past_key_values", None)
    if returned is None:
        raise ModelSupportError(
            f"{type(model).__name__} returned no past_key_values with use_cache=True "
            f"(transformers {transformers.__version__}); the legacy decode loop needs the "
            "model's own cache")
    return output.logits[:, -1, :].float(), returned


def nonfinite_logits_error(model_id: str, where: str) -> ModelSupportError:
    """The error for logits that are NaN or infinite (no text may be computed from them)."""
    return ModelSupportError(
        f"model {model_id!r} produced non-finite logits (NaN or inf) {where}; no text is returned from "
        "them. Typical causes: tensors its code computes in __init__ left uninitialised by loading, "
        "float16 overflow (use bfloat16 or float32), or corrupt weights")


class FiniteWatch:
    """Checks logits for NaN/inf: the first call syncs and raises at once, later calls only
    accumulate a device flag, read by :meth:`verify` (one sync per batch)."""

    def __init__(self, model_id: str) -> None:
        self.model_id = model_id
        self.first = True
        self.bad: Any = None

    def __call__(self, logits: Any) -> None:
        import torch

        finite = torch.isfinite(logits).all()
        if self.first:
            self.first = False
            if not bool(finite):
                raise nonfinite_logits_error(self.model_id, "at the first step (the prompt's last position)")
            return
        self.bad = ~finite if self.bad is None else self.bad | ~finite

    def verify(self) -> None:
        if self.bad is not None and bool(self.bad):
            raise nonfinite_logits_error(self.model_id, "during decoding")


def _check_cache_filled(decoder: Decoder, cache: Any, expected_tokens: int) -> None:
    filled = cache.get_seq_length()
    if filled != expected_tokens:
        raise cache_not_filled_error(decoder.model, decoder.plan.cache_keyword, filled, expected_tokens)


def left_padded(decoder: Decoder, sequences: Sequence[Sequence[int]]) -> tuple[Any, Any]:
    """Left-padded ids and their mask (1 = real token) on the input device."""
    import torch

    width = max(len(tokens) for tokens in sequences)
    input_ids = torch.full((len(sequences), width), decoder.pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, tokens in enumerate(sequences):
        input_ids[row, width - len(tokens):] = torch.tensor(tokens, dtype=torch.long)
        mask[row, width - len(tokens):] = 1
    return input_ids.to(decoder.input_device), mask.to(decoder.input_device)


def _record_step(tokens: Any, batch_rows: list[int], generated: list[list[int]], stop_ids: set[int],
                 last_step: bool) -> int:
    """Append each live row's token (the step's one host sync); mark rows that stopped dead
    (-1 in ``batch_rows``); return how many died."""
    died = 0
    for index, token in enumerate(tokens.tolist()):
        row = batch_rows[index]
        if row < 0:
            continue
        generated[row].append(token)
        if token in stop_ids or last_step:
            batch_rows[index] = -1
            died += 1
    return died


def _keep_rows(keep_index: Any, *tensors: Any) -> list[Any]:
    """Rows ``keep_index`` of each tensor, indexed on its own device (None stays None)."""
    return [None if tensor is None else tensor[keep_index.to(tensor.device)] for tensor in tensors]


def prefill_prompts(decoder: Decoder, shared_prefix: Sequence[int], input_ids: Any, attention: Any,
                    positions: Any, capacity: int) -> tuple[Any, Any]:
    """A batch's preallocated cache after its prompts, and the last column's logits (None when
    the rows have no tokens beyond ``shared_prefix``): the shared prefix run once and seeded
    into every row, then each row's own left-padded tokens (``input_ids``, their ``positions``;
    ``attention`` covers prefix and own tokens) in column chunks."""
    from bloomqg.generation.hf import kv_cache

    rows, width = input_ids.shape
    shared = len(shared_prefix)
    if shared:
        prefix_states = kv_cache.prefill_shared_prefix(
            decoder.model, shared_prefix, shared, cache_keyword=decoder.plan.cache_keyword)
        cache = kv_cache.seeded_cache(decoder.model.config, prefix_states, rows, capacity)
    else:
        cache = kv_cache.decode_cache(decoder.model.config, capacity)
    # Prefill in column chunks of about prefill_chunk_tokens: one huge forward pass is
    # slower on a CPU (its activations spill out of the caches) and on a GPU its
    # transients, not the KV cache, would cap the batch size.
    columns = max(1, decoder.prefill_chunk_tokens // rows)
    logits = None
    for start in range(0, width, columns):
        end = min(width, start + columns)
        logits = decoder.forward(cache, input_ids=input_ids[:, start:end],
                                 attention_mask=attention[:, : shared + end],
                                 position_ids=positions[:, start:end])
        if start == 0:
            _check_cache_filled(decoder, cache, shared + end)
    return cache, logits


def decode_cached(decoder: Decoder, requests: Sequence[ChatRequest], encoded: Sequence[list[int]],
                  params: DecodingParams) -> DecodeResult:
    """Prefill one left-padded batch into a preallocated cache, then decode, dropping dead rows."""
    import torch

    from bloomqg.generation.hf import kv_cache

    rows = len(encoded)
    shared = kv_cache.shared_prefix_length(encoded) if decoder.share_prompt_prefix else 0
    if shared < kv_cache.MIN_SHARED_PREFIX_TOKENS:
        shared = 0
    input_ids, suffix_mask = left_padded(decoder, [tokens[shared:] for tokens in encoded])
    width = input_ids.shape[1]
    # [shared prefix][left padding][own suffix]: positions continue from the prefix
    positions = shared + (suffix_mask.cumsum(dim=-1) - 1).clamp(min=0)
    attention = torch.cat([suffix_mask.new_ones((rows, shared)), suffix_mask], dim=-1)
    capacity = shared + width + params.max_new_tokens
    generated: list[list[int]] = [[] for _ in range(rows)]
    batch_rows = list(range(rows))  # original row of each cache row; -1 once it is dead
    dead = 0
    computed = 0
    watch = FiniteWatch(decoder.model_id)
    with torch.inference_mode():
        cache, logits = prefill_prompts(decoder, encoded[0][:shared], input_ids, attention, positions, capacity)
        uniforms = draw_uniforms(requests, params, logits.device)
        next_position = positions[:, -1] + 1
        for step in range(params.max_new_tokens):
            watch(logits)
            tokens = sample_tokens(logits, None if uniforms is None else uniforms[:, step], params)
            computed += len(batch_rows)
            dead += _record_step(tokens, batch_rows, generated, decoder.stop_ids, step + 1 >= params.max_new_tokens)
            if dead == len(batch_rows):
                break
            if dead and dead >= decoder.compact_fraction * len(batch_rows):
                keep = [index for index, row in enumerate(batch_rows) if row >= 0]
                keep_index = torch.tensor(keep)
                kv_cache.select_rows(cache, keep_index)
                attention, next_position, tokens, uniforms = _keep_rows(
                    keep_index, attention, next_position, tokens, uniforms)
                batch_rows = [batch_rows[index] for index in keep]
                dead = 0
                decoder.stats["cache_compactions"] += 1
            attention = torch.cat([attention, attention.new_ones((len(batch_rows), 1))], dim=-1)
            logits = decoder.forward(cache, input_ids=tokens[:, None].to(decoder.input_device),
                                   attention_mask=attention, position_ids=next_position[:, None])
            next_position = next_position + 1
    watch.verify()
    return DecodeResult(generated, rows * width + shared, computed, shared)


def select_legacy_rows(state: Any, keep: Any, rows: int, cached: int) -> Any:
    """The model's own cache with only rows ``keep`` (a LongTensor), or None when its format is
    not one whose rows can be selected.

    Selectable: a transformers ``Cache``, or (nested) tuples of tensors that are all batch-major
    (``rows`` first, the ``cached`` length among the other dimensions, as ``(rows, heads,
    cached, dim)`` keys and values are).  Anything else (sequence-major layouts, other types)
    is left whole: a wrong guess would mix rows silently.
    """
    import torch

    if hasattr(state, "batch_select_indices"):  # a transformers Cache
        from bloomqg.generation.hf import kv_cache

        if getattr(state, "layers", None) is not None:
            kv_cache.select_rows(state, keep)  # each layer's rows on its own device
        else:
            state.batch_select_indices(keep)
        return state
    tensors: list[Any] = []

    def collect(item: Any) -> bool:
        if isinstance(item, torch.Tensor):
            tensors.append(item)
            return True
        return isinstance(item, (tuple, list)) and all(collect(part) for part in item)

    if not collect(state) or not tensors or not all(
            t.dim() >= 2 and t.shape[0] == rows and cached in t.shape[1:] for t in tensors):
        return None

    def select(item: Any) -> Any:
        if isinstance(item, torch.Tensor):
            return item.index_select(0, keep.to(item.device))
        return type(item)(select(part) for part in item)

    return select(state)


def decode_legacy(decoder: Decoder, requests: Sequence[ChatRequest], encoded: Sequence[list[int]],
                  params: DecodingParams) -> DecodeResult:
    """Decode with the model's own cache, fed back as returned (remote code, see module doc).

    Rows that stopped leave the batch (at once on a CPU, once ``compact_fraction`` of it is dead
    on a GPU) when the cache is a tuple of per-layer tensors or a ``Cache``; in any other format
    they decode on until the last row stops, and ``computed_decode_steps`` counts them.
    """
    import torch

    rows = len(encoded)
    input_ids, attention = left_padded(decoder, encoded)
    positions = (attention.cumsum(dim=-1) - 1).clamp(min=0) if decoder.plan.takes_position_ids else None
    generated: list[list[int]] = [[] for _ in range(rows)]
    batch_rows = list(range(rows))  # original row of each cache row; -1 once it is dead
    dead = 0
    computed = 0
    droppable: bool | None = None  # unknown until the first row stops
    watch = FiniteWatch(decoder.model_id)
    with torch.inference_mode():
        logits, state = legacy_forward(decoder.model, input_ids, attention, None, positions)
        uniforms = draw_uniforms(requests, params, logits.device)
        next_position = positions[:, -1:] + 1 if positions is not None else None
        for step in range(params.max_new_tokens):
            watch(logits)
            tokens = sample_tokens(logits, None if uniforms is None else uniforms[:, step], params)
            computed += len(batch_rows)
            dead += _record_step(tokens, batch_rows, generated, decoder.stop_ids, step + 1 >= params.max_new_tokens)
            if dead == len(batch_rows):
                break
            if droppable is not False and dead and dead >= decoder.compact_fraction * len(batch_rows):
                keep = [index for index, row in enumerate(batch_rows) if row >= 0]
                keep_index = torch.tensor(keep, device=attention.device)
                selected = select_legacy_rows(state, keep_index, len(batch_rows), attention.shape[1])
                droppable = selected is not None
                if selected is not None:  # else an opaque cache: its rows stay until the batch ends
                    state = selected
                    attention, next_position, tokens, uniforms = _keep_rows(
                        keep_index, attention, next_position, tokens, uniforms)
                    batch_rows = [batch_rows[index] for index in keep]
                    dead = 0
                    decoder.stats["cache_compactions"] += 1
            attention = torch.cat([attention, attention.new_ones((len(batch_rows), 1))], dim=-1)
            logits, state = legacy_forward(decoder.model, tokens[:, None].to(decoder.input_device), attention,
                                           state, next_position)
            if next_position is not None:
                next_position = next_position + 1
    watch.verify()
    return DecodeResult(generated, rows * input_ids.shape[1], computed, 0, rows_dropped=droppable)
