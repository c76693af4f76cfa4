"""Scoring continuations of chat prompts: the forward passes behind the ``choices`` judge mode.

lm-evaluation-harness's ``loglikelihood`` request, batched the way this backend batches
generation: for a batch of prompts and a list of continuations (each a ``context`` read but not
scored and a ``scored`` text), the log-probability of every continuation's scored tokens after
every prompt, computed in three levels of shared work:

1. the tokens every prompt of the batch starts with (chat template, the rubric, its worked
   examples: most of a judge prompt) run once, as one row (:func:`kv_cache.prefill_shared_prefix`);
2. each prompt's own tokens, all but its last, run once per prompt, left-padded as in
   :func:`bloomqg.generation.hf.decode.decode_cached` (``[shared prefix][left padding][own part]``);
3. each (prompt, continuation) pair as one row of ``[last prompt token][context][scored]``
   on a copy of its prompt's cache rows; right padding at the end of a row is masked and never
   read. The last prompt token travels with the continuations because its logits predict their
   first token.

The rows of level 3 are chunked so a chunk's cache copies stay near
:data:`ROW_TOKENS_PER_PREFILL_CHUNK` times the backend's prefill chunk.

Tokenisation follows lm-evaluation-harness: the scored tokens are those of ``context + scored``
after the tokens of ``context`` alone, so a merge across the seam (``"`` + ``Apply``) is
tokenised as the model would have written it; when the joint encoding does not start with the
context's, the two are encoded apart.
"""

from __future__ import annotations

# torch and the KV cache module load inside the functions: importing the backend stays cheap.

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bloomqg.chat import Continuation, ContinuationScore
from bloomqg.generation.hf.decode import Decoder, left_padded, nonfinite_logits_error, prefill_prompts

#: Cache rows × tokens of one chunk of continuation rows, in units of the prefill chunk: on a
#: CPU (2,048-token chunks) about 8k token-rows, 380 MB of cache copies for SmolLM2-135M.
ROW_TOKENS_PER_PREFILL_CHUNK = 4


@dataclass(frozen=True)
class TokenizedContinuation:
    """A continuation's token ids: ``context`` (read, not scored), then ``scored``."""

    context: tuple[int, ...]
    scored: tuple[int, ...]


def tokenize_continuation(tokenizer: Any, continuation: Continuation) -> TokenizedContinuation:
    """Token ids of a continuation, the scored ones as the joint text tokenises them."""

    def ids(text: str) -> list[int]:
        return list(tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []

    context = ids(continuation.context)
    joint = ids(continuation.context + continuation.scored)
    scored = joint[len(context):] if joint[: len(context)] == context else ids(continuation.scored)
    if not scored:
        raise ValueError(f"continuation {continuation.scored!r} encodes to no token")
    return TokenizedContinuation(tuple(context), tuple(scored))


def score_batch(
    decoder: Decoder,
    encoded: Sequence[Sequence[int]],
    continuations: Sequence[TokenizedContinuation],
) -> list[list[ContinuationScore]]:
    """For each encoded prompt, the score of each continuation (the three levels above)."""
    import torch

    from bloomqg.generation.hf import kv_cache

    if any(len(tokens) < 1 for tokens in encoded):
        raise ValueError("every prompt needs at least one token")
    rows = len(encoded)
    shared = kv_cache.shared_prefix_length(encoded)
    if shared < kv_cache.MIN_SHARED_PREFIX_TOKENS:
        shared = 0
    own = [list(tokens[shared:-1]) for tokens in encoded]
    width = max(len(tokens) for tokens in own)
    with torch.inference_mode():
        if width:
            input_ids, own_mask = left_padded(decoder, own)
        else:  # every prompt is the shared prefix plus its last token
            input_ids = own_mask = torch.zeros((rows, 0), dtype=torch.long, device=decoder.input_device)
        positions = shared + (own_mask.cumsum(dim=-1) - 1).clamp(min=0)
        attention = torch.cat([own_mask.new_ones((rows, shared)), own_mask], dim=-1)
        # the position of each prompt's last token, which opens its continuation rows
        next_position = shared + own_mask.sum(dim=-1)
        capacity = max(1, shared + width)
        cache, _ = prefill_prompts(decoder, encoded[0][:shared], input_ids, attention, positions, capacity)
        states = ([(layer.keys, layer.values) for layer in cache.layers] if shared + width
                  else None)
        pairs = [(row, index) for row in range(rows) for index in range(len(continuations))]
        scores: list[list[ContinuationScore]] = [[] for _ in range(rows)]
        longest = 1 + max(len(c.context) + len(c.scored) for c in continuations)
        budget = ROW_TOKENS_PER_PREFILL_CHUNK * decoder.prefill_chunk_tokens
        per_chunk = max(1, budget // (shared + width + longest))
        for start in range(0, len(pairs), per_chunk):
            chunk = pairs[start : start + per_chunk]
            _score_chunk(decoder, encoded, continuations, chunk, states, attention, next_position,
                         scores, capacity + longest)
    decoder.stats["prefill_tokens"] += rows * width + shared
    decoder.stats["shared_prefix_tokens_saved"] += max(rows - 1, 0) * shared
    return scores


def _score_chunk(
    decoder: Decoder,
    encoded: Sequence[Sequence[int]],
    continuations: Sequence[TokenizedContinuation],
    chunk: Sequence[tuple[int, int]],
    states: Any,
    attention: Any,
    next_position: Any,
    scores: list[list[ContinuationScore]],
    capacity: int,
) -> None:
    """Score one chunk of (prompt row, continuation) pairs into ``scores``."""
    import torch

    from bloomqg.generation.hf import kv_cache

    sequences = [[encoded[row][-1], *continuations[index].context, *continuations[index].scored]
                 for row, index in chunk]
    width = max(len(tokens) for tokens in sequences)
    input_ids = torch.full((len(chunk), width), decoder.pad_id, dtype=torch.long)
    mask = torch.zeros((len(chunk), width), dtype=torch.long)
    for position, tokens in enumerate(sequences):
        input_ids[position, : len(tokens)] = torch.tensor(tokens, dtype=torch.long)
        mask[position, : len(tokens)] = 1
    input_ids, mask = input_ids.to(decoder.input_device), mask.to(decoder.input_device)
    rows = torch.tensor([row for row, _ in chunk], device=decoder.input_device)
    cache = (kv_cache.cache_of_rows(decoder.model.config, states, rows, capacity) if states is not None
             else kv_cache.decode_cache(decoder.model.config, capacity))
    positions = next_position[rows][:, None] + torch.arange(width, device=decoder.input_device)[None, :]
    logits = decoder.model(input_ids=input_ids, attention_mask=torch.cat([attention[rows], mask], dim=-1),
                           position_ids=positions, use_cache=True,
                           **{decoder.plan.cache_keyword: cache}).logits.float()
    # token t is predicted by position t - 1
    logprobs = torch.log_softmax(logits[:, :-1], dim=-1).gather(-1, input_ids[:, 1:, None]).squeeze(-1)
    for position, (row, index) in enumerate(chunk):
        continuation = continuations[index]
        first = len(continuation.context)  # the scored tokens start at 1 + len(context)
        picked = logprobs[position, first : first + len(continuation.scored)]
        if not bool(torch.isfinite(picked).all()):
            raise nonfinite_logits_error(decoder.model_id, "while scoring continuations")
        scores[row].append(ContinuationScore(float(picked.sum()), len(continuation.scored)))
